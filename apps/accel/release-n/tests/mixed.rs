//! Release N agents against release N+1's conductor (Grenade's middle phase): data made
//! under release N survives N+1's migration, old agents keep reporting, heartbeating
//! and binding through conductor API 1.0, what comes back decodes as release N's types,
//! N+1 calls the old agent at agent API 1.0, and once N+1 is finalized the old agent is
//! fenced with the reason.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use accel_objects::AccelVersion as NewVersion;
use accel_release_n::agent::{AgentConfig, AgentStopped, RunningAgent};
use accel_release_n::conductor;
use accel_release_n::objects as n;
use accel_release_n::rpc::{
    BindArq, CreateArqs, CreateDeviceProfile, ReportData, UnbindArq, AGENT_TOPIC, CONDUCTOR_TOPIC,
    UPGRADE_TOPIC,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::*;
use verso::{ObjectList, RequestContext, VersionedObject};
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcServer, ServerHandle, Target};
use verso_upgrade::{ComponentVersion, Coordinator, UpgradeError, UpgradeState, VersionManager};

/// Release N+1's conductor as `accel conductor` runs it (apps/accel/accel/src/run.rs):
/// the migrated database, its component record, the NVMe cleanup gate, conductor API 1.1
/// and the upgrade API.
struct NewConductor {
    db: accel_conductor::Db,
    coordinator: Arc<Coordinator<NewVersion>>,
    servers: Vec<ServerHandle>,
}

impl NewConductor {
    async fn start(url: &str, transport: Arc<dyn Transport>, liveness: Duration) -> NewConductor {
        use accel_conductor::db::Release;
        let db = accel_conductor::Db::connect(url).await.expect("N+1 opens");
        let versions = VersionManager::<NewVersion>::open(accel_conductor::DbVersionStore::new(
            db.clone(),
            NewVersion::COMPONENT,
        ))
        .await
        .expect("N+1 versions");
        let cleanup = versions.gate(NewVersion::DriverFeatures, "NVMe secure cleanup");
        let coordinator = Arc::new(Coordinator::new(versions, "agent", liveness));
        coordinator.resume().await.expect("resume");
        let release: accel_conductor::service::ReleasePolicy = Arc::new(move || {
            if cleanup.is_open() {
                Release::CleanSsd
            } else {
                Release::Immediate
            }
        });
        let conductor = RpcServer::new(transport.clone(), Target::new(CONDUCTOR_TOPIC))
            .endpoint(accel_conductor::service::endpoint(
                db.clone(),
                accel_objects::registry(),
                release,
                |ctx| ctx,
            ))
            .expect("endpoint")
            .start()
            .await
            .expect("serve");
        let upgrade = RpcServer::new(transport, Target::new(UPGRADE_TOPIC))
            .endpoint(verso_upgrade::admin::endpoint(coordinator.clone()))
            .expect("endpoint")
            .start()
            .await
            .expect("serve");
        NewConductor {
            db,
            coordinator,
            servers: vec![conductor, upgrade],
        }
    }

    async fn stop(self) {
        for s in self.servers {
            s.stop().await;
        }
        self.db.close().await;
    }

    /// Waits until `host` has heartbeated to this conductor.
    async fn heard_from(&self, host: &str) -> verso_upgrade::MemberStatus {
        for _ in 0..200 {
            if let Some(m) = self
                .coordinator
                .status()
                .await
                .expect("status")
                .clients
                .into_iter()
                .find(|c| c.id == host)
            {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{host} never heartbeated to release N+1's conductor");
    }
}

fn group(rc: &str) -> Vec<BTreeMap<String, String>> {
    vec![BTreeMap::from([(
        format!("resources:{rc}"),
        "1".to_owned(),
    )])]
}

async fn fast_agent(dir: &std::path::Path, transport: Arc<dyn Transport>) -> RunningAgent {
    accel_release_n::agent::start(
        AgentConfig {
            host: "host1".into(),
            sysfs_root: sysfs(dir, 1),
            state_dir: dir.join("state"),
            report_interval: Duration::from_millis(300),
        },
        transport,
    )
    .await
    .expect("release N agent starts")
}

async fn create_arq(client: &RpcClient, profile: &str) -> String {
    let ctx = RequestContext::new("req-test");
    let list: n::AcceleratorRequestList = client
        .call_method(
            &ctx,
            CreateArqs {
                device_profile_name: profile.into(),
                group_id: None,
                project_id: None,
            },
        )
        .await
        .expect("arqs");
    list.iter()
        .next()
        .and_then(|a| a.uuid.get().map(ToString::to_string))
        .expect("one arq")
}

async fn bind(client: &RpcClient, uuid: &str, instance: &str) -> n::AcceleratorRequest {
    client
        .call_method(
            &RequestContext::new("req-test"),
            BindArq {
                uuid: uuid.into(),
                hostname: "host1".into(),
                instance_uuid: instance.into(),
                device_rp_uuid: None,
            },
        )
        .await
        .expect("bind")
}

async fn n_agent_against_n_plus_1(
    url: &str,
    conductor_transport: Arc<dyn Transport>,
    agent_transport: Arc<dyn Transport>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = RequestContext::new("req-test");

    // Release N everywhere: devices reported, profiles and requests, two bound.
    let old = conductor::start(url, conductor_transport.clone())
        .await
        .expect("release N conductor");
    let agent = fast_agent(dir.path(), agent_transport.clone()).await;
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    let client = n_client(agent_transport.clone());
    for (name, rc) in [("gpu", "GPU"), ("ssd", "SSD")] {
        let _: n::DeviceProfile = client
            .call_method(
                &ctx,
                CreateDeviceProfile {
                    name: name.into(),
                    groups: group(rc),
                    description: None,
                },
            )
            .await
            .expect("profile");
    }
    let gpu = create_arq(&client, "gpu").await;
    let ssd1 = create_arq(&client, "ssd").await;
    let ssd2 = create_arq(&client, "ssd").await;
    let gpu_handle = bind(&client, &gpu, "inst-1")
        .await
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("handle");
    let ssd1_handle = bind(&client, &ssd1, "inst-2")
        .await
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("handle");
    let devices_before = old.db().devices(None).await.expect("devices");
    old.stop().await;

    // The database and the conductor go to N+1; the agent keeps running release N.
    let probe = accel_conductor::Db::connect(url).await.expect("N+1 opens");
    assert_eq!(
        probe.migrate().await.expect("N+1 migrates"),
        vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );
    probe.close().await;
    let new = NewConductor::start(url, conductor_transport.clone(), Duration::from_secs(180)).await;
    assert_eq!(
        new.coordinator.status().await.expect("status").state,
        UpgradeState::PreFinalized
    );

    // Everything release N made survived, as N+1 reads it.
    let devices_after = new
        .db
        .devices(&accel_conductor::db::ListFilter::default())
        .await
        .expect("devices");
    let uuids_after: Vec<&str> = devices_after.iter().map(|d| d.uuid.as_str()).collect();
    let uuids_before: Vec<&str> = devices_before.iter().map(|d| d.uuid.as_str()).collect();
    assert_eq!(uuids_after, uuids_before);
    assert_eq!(new.db.profiles().await.expect("profiles").len(), 2);
    let arq = new.db.arq(&gpu).await.expect("gpu arq");
    assert_eq!(arq.state.as_str(), "Bound");
    assert_eq!(arq.attach_handle_uuid.as_deref(), Some(gpu_handle.as_str()));
    let handles = new.db.host_handles("host1").await.expect("handles");
    assert_eq!(handles.len(), HOST1_HANDLES);
    for h in &handles {
        assert_eq!(h.revision, 0, "N+1's new column defaults on N's rows");
        assert_eq!(h.cleanup_state, None);
        assert_eq!(h.in_use, h.uuid == gpu_handle || h.uuid == ssd1_handle);
    }

    // The old agent heartbeats to N+1: software 1, apparent 1, and blocks finalization.
    let member = new.heard_from("host1").await;
    assert_eq!((member.software, member.apparent), (1, 1));
    assert!(member.live);
    match new.coordinator.finalize().await {
        Err(UpgradeError::Blocked(blockers)) => {
            assert!(blockers.iter().any(|b| b.id == "host1"), "{blockers:?}")
        }
        other => panic!("finalize with a release N agent live: {other:?}"),
    }

    // It keeps reporting: nothing churns (same attach-info text as N+1's agent).
    let found = accel_agent::discovery::discover(&dir.path().join("sysfs-host1")).expect("sysfs");
    let summary = client
        .call_method(
            &ctx,
            ReportData {
                hostname: "host1".into(),
                devices: accel_release_n::agent::driver_devices(&found),
            },
        )
        .await
        .expect("N+1 takes N's report");
    assert_eq!(summary.unchanged, HOST1_DEVICES, "{summary:?}");
    assert!(summary.added.is_empty() && summary.removed.is_empty() && summary.lost.is_empty());
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);

    // The objects N+1 answers with are release N's versions on the wire: the raw reply
    // names only versions N's manifest has, and decodes as N's types.
    let raw = client
        .call(
            &ctx,
            "create_arqs",
            "1.0",
            json!({"device_profile_name": "gpu"}),
        )
        .await
        .expect("raw create_arqs");
    let manifest = n::manifest();
    assert_eq!(raw["versioned_object.name"], "AcceleratorRequestList");
    assert_eq!(
        raw["versioned_object.version"],
        manifest
            .get("AcceleratorRequestList")
            .expect("in N")
            .to_string()
    );
    let member = &raw["versioned_object.data"]["objects"][0];
    assert_eq!(
        member["versioned_object.version"],
        manifest
            .get("AcceleratorRequest")
            .expect("in N")
            .to_string()
    );
    let decoded = n::registry()
        .from_primitive(&raw)
        .expect("N's registry decodes");
    let list = decoded
        .downcast::<n::AcceleratorRequestList>()
        .map_err(|_| "class")
        .expect("N's AcceleratorRequestList");
    let extra = list
        .iter()
        .next()
        .expect("one")
        .uuid
        .get()
        .expect("uuid")
        .to_string();
    assert_eq!(
        new.db
            .arq(&extra)
            .await
            .expect("in N+1's db")
            .state
            .as_str(),
        "Initial"
    );

    // Binds work through N+1 (conductor API 1.0) and the handle is taken in N+1's db.
    let bound = bind(&client, &ssd2, "inst-3").await;
    assert_eq!(bound.version(), verso::Version::new(1, 0));
    assert_eq!(bound.state.get().map(String::as_str), Some("Bound"));
    let ssd2_handle = bound
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("handle");
    let h = new.db.host_handle(&ssd2_handle).await.expect("handle");
    assert!(h.in_use);
    assert_eq!(h.instance_uuid.as_deref(), Some("inst-3"));
    assert_eq!(h.device_type, "SSD");

    // Pre-finalized, N+1 releases an SSD at once, as release N expects.
    let unbound: n::AcceleratorRequest = client
        .call_method(&ctx, UnbindArq { uuid: ssd1.clone() })
        .await
        .expect("unbind");
    assert_eq!(unbound.state.get().map(String::as_str), Some("Unbound"));
    let h = new.db.host_handle(&ssd1_handle).await.expect("handle");
    assert!(!h.in_use);
    assert_eq!(h.cleanup_state, None, "no cleanup before finalization");

    // N+1 calls the old agent at agent API 1.0 (report_now, server = host name).
    let agents = RpcClient::new(
        conductor_transport.clone(),
        Target::new(AGENT_TOPIC).with_server("host1"),
    )
    .version_cap(verso::Version::new(1, 0));
    let reply = agents
        .call(&ctx, "report_now", "1.0", json!({}))
        .await
        .expect("report_now at 1.0");
    assert_eq!(reply, json!(HOST1_DEVICES));
    let err = agents
        .call(&ctx, "cleanup_device", "1.1", json!({}))
        .await
        .expect_err("release N has no agent 1.1");
    assert!(
        matches!(&err, verso_rpc::RpcError::VersionCap { .. }),
        "the cap refuses 1.1 before sending: {err}"
    );
    let uncapped = RpcClient::new(
        conductor_transport,
        Target::new(AGENT_TOPIC).with_server("host1"),
    );
    let err = uncapped
        .call(&ctx, "cleanup_device", "1.1", json!({}))
        .await
        .expect_err("release N has no agent 1.1");
    assert!(
        err.to_string().contains("1.1") || err.to_string().contains("cleanup_device"),
        "{err}"
    );

    agent.stop().await;
    new.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_agent_against_n_plus_1_conductor_on_sqlite_and_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = memory();
    n_agent_against_n_plus_1(&sqlite_url(dir.path()), t.clone(), t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_agent_against_n_plus_1_conductor_on_postgres_and_rabbitmq() {
    let url = accel_conductor::testing::postgres_database().await;
    let exchange = exchange();
    n_agent_against_n_plus_1(&url, rabbit(&exchange).await, rabbit(&exchange).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_agent_is_fenced_once_n_plus_1_finalizes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = sqlite_url(dir.path());
    let t = memory();
    conductor::start(&url, t.clone())
        .await
        .expect("release N")
        .stop()
        .await;
    accel_conductor::Db::connect(&url)
        .await
        .expect("open")
        .migrate()
        .await
        .expect("N+1 migrates");
    // A short liveness window, so finalization goes through between two heartbeats of
    // the old agent (a live release N agent blocks it).
    let new = NewConductor::start(&url, t.clone(), Duration::from_millis(400)).await;
    let mut agent = accel_release_n::agent::start(
        AgentConfig {
            host: "host1".into(),
            sysfs_root: sysfs(dir.path(), 1),
            state_dir: dir.path().join("state"),
            report_interval: Duration::from_secs(2),
        },
        t.clone(),
    )
    .await
    .expect("release N agent joins a pre-finalized N+1");
    assert_eq!(agent.apparent().number(), 1);
    let mut finalized = false;
    for _ in 0..100 {
        if new.coordinator.finalize().await.is_ok() {
            finalized = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        finalized,
        "finalization never found the old agent out of its window"
    );
    assert_eq!(
        new.coordinator.manager().apparent(),
        NewVersion::DriverFeatures
    );
    match agent.wait_stopped(Duration::from_secs(10)).await {
        Some(AgentStopped::Fenced(f)) => {
            assert_eq!(f.member, "host1");
            assert!(!f.reason.is_empty());
        }
        other => panic!("the old agent was not fenced: {other:?}"),
    }
    assert!(agent.stopped().is_some());
    // Its agent API is gone with it.
    let agents = RpcClient::new(t.clone(), Target::new(AGENT_TOPIC).with_server("host1"))
        .timeout(Duration::from_millis(500));
    assert!(agents
        .call(&RequestContext::new("req"), "report_now", "1.0", json!({}))
        .await
        .is_err());
    agent.stop().await;

    // A release N agent cannot join the finalized deployment.
    let err = accel_release_n::agent::start(
        AgentConfig {
            host: "host2".into(),
            sysfs_root: sysfs(dir.path(), 2),
            state_dir: dir.path().join("state"),
            report_interval: Duration::from_secs(60),
        },
        t.clone(),
    )
    .await
    .expect_err("fenced at start");
    assert!(
        matches!(&err, accel_release_n::agent::StartError::Fenced(f) if f.member == "host2"),
        "{err:?}"
    );
    new.stop().await;
    // Nor can release N's conductor run on it (the demo's step 8).
    let err = conductor::start(&url, t).await.expect_err("finalized");
    assert!(
        matches!(
            err,
            conductor::StartError::FinalizedByNewer {
                apparent: 2,
                software: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_downgrades_to_n_until_n_plus_1_finalizes_it() {
    use verso_upgrade::FileStore;
    let dir = tempfile::tempdir().expect("tempdir");
    let t = memory();
    let running = conductor::start(&sqlite_url(dir.path()), t.clone())
        .await
        .expect("release N conductor");
    // The record a release N+1 agent writes while the deployment is pre-finalized.
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).expect("state dir");
    let record = state.join("agent-host1.version");
    let new_agent = VersionManager::<NewVersion>::builder(FileStore::new(&record))
        .fresh_at(NewVersion::Initial)
        .open()
        .await
        .expect("N+1 agent record");
    assert_eq!(new_agent.apparent().number(), 1);
    // Downgraded to release N on the same state directory: it runs.
    let agent = n_agent(dir.path(), 1, t.clone()).await;
    assert_eq!(agent.apparent().number(), 1);
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    agent.stop().await;
    // Once N+1 finalized that agent's record, release N refuses to run on it.
    new_agent.finalize().await.expect("N+1 agent finalizes");
    let err = accel_release_n::agent::start(
        AgentConfig {
            host: "host1".into(),
            sysfs_root: sysfs(dir.path(), 1),
            state_dir: state,
            report_interval: Duration::from_secs(60),
        },
        t,
    )
    .await
    .expect_err("finalized record");
    assert!(
        matches!(
            &err,
            accel_release_n::agent::StartError::Versions {
                source: UpgradeError::DowngradeAfterFinalization {
                    apparent: 2,
                    software: 1,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("host1"), "{err}");
    running.stop().await;
}

/// A rollback inside the downgrade window: N+1's conductor runs pre-finalized on the
/// migrated database, is stopped, and release N's conductor takes over the same database
/// (its agent, release N all along, keeps reporting and binding); then N+1 comes back and
/// finalizes, after which release N is refused.
async fn conductor_rolls_back_before_finalization(url: &str, t: Arc<dyn Transport>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = RequestContext::new("req-rollback");
    let old = conductor::start(url, t.clone())
        .await
        .expect("release N conductor");
    let agent = fast_agent(dir.path(), t.clone()).await;
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    let client = n_client(t.clone());
    for (name, rc) in [("gpu", "GPU"), ("nic", "NIC")] {
        let _: n::DeviceProfile = client
            .call_method(
                &ctx,
                CreateDeviceProfile {
                    name: name.into(),
                    groups: group(rc),
                    description: None,
                },
            )
            .await
            .expect("profile");
    }
    old.stop().await;

    // Upgrade: N+1 migrates and its conductor runs, pre-finalized, and binds.
    let probe = accel_conductor::Db::connect(url).await.expect("N+1 opens");
    assert_eq!(
        probe.migrate().await.expect("N+1 migrates"),
        vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );
    probe.close().await;
    let new = NewConductor::start(url, t.clone(), Duration::from_millis(400)).await;
    assert_eq!(
        new.coordinator.status().await.expect("status").state,
        UpgradeState::PreFinalized
    );
    let gpu = create_arq(&client, "gpu").await;
    let gpu_handle = bind(&client, &gpu, "inst-1")
        .await
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("N+1 bound it");
    new.stop().await;

    // Rollback: release N's conductor on the same, expanded, database.
    let old = conductor::start(url, t.clone())
        .await
        .expect("release N's conductor starts again before finalization");
    let db = old.db();
    let arq = db.arq(&gpu).await.expect("release N reads N+1's bind");
    assert_eq!(arq.state.as_str(), "Bound");
    assert_eq!(arq.attach_handle_uuid.as_deref(), Some(gpu_handle.as_str()));
    // The agent, release N all along, keeps reporting: nothing changes.
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    assert_eq!(
        db.attach_handles(Some("host1"))
            .await
            .expect("handles")
            .len(),
        HOST1_HANDLES
    );
    let nic = create_arq(&client, "nic").await;
    let bound = bind(&client, &nic, "inst-2").await;
    assert_eq!(bound.state.get().map(String::as_str), Some("Bound"));
    let unbound: n::AcceleratorRequest = client
        .call_method(&ctx, UnbindArq { uuid: gpu.clone() })
        .await
        .expect("release N unbinds what N+1 bound");
    assert_eq!(unbound.state.get().map(String::as_str), Some("Unbound"));
    old.stop().await;

    // Forward again: N+1 sees release N's writes, with its columns at their defaults.
    let new = NewConductor::start(url, t.clone(), Duration::from_millis(400)).await;
    assert_eq!(
        new.coordinator.status().await.expect("status").state,
        UpgradeState::PreFinalized
    );
    let handles = new.db.host_handles("host1").await.expect("handles");
    assert_eq!(handles.len(), HOST1_HANDLES);
    let nic_handle = new
        .db
        .arq(&nic)
        .await
        .expect("nic arq")
        .attach_handle_uuid
        .expect("bound by release N");
    for h in &handles {
        assert_eq!(h.in_use, h.uuid == nic_handle, "{h:?}");
        assert_eq!(h.cleanup_state, None, "{h:?}");
    }
    assert_eq!(
        new.db.arq(&gpu).await.expect("gpu arq").state.as_str(),
        "Unbound"
    );
    // The agents are upgraded (here: the release N one goes away), then finalize.
    agent.stop().await;
    let mut finalized = false;
    for _ in 0..100 {
        if new.coordinator.finalize().await.is_ok() {
            finalized = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(finalized, "N+1 never finalized after the rollback");
    assert_eq!(
        new.coordinator.manager().apparent(),
        NewVersion::DriverFeatures
    );
    new.stop().await;
    let err = conductor::start(url, t)
        .await
        .expect_err("no rollback after finalization");
    assert!(
        matches!(
            err,
            conductor::StartError::FinalizedByNewer {
                apparent: 2,
                software: 1,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_rolls_back_before_finalization_on_sqlite_and_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    conductor_rolls_back_before_finalization(&sqlite_url(dir.path()), memory()).await;
}

/// On PostgreSQL with the memory transport: RabbitMQ queues are named by topic on every
/// exchange, so a second RabbitMQ test in this binary would share the conductor queue
/// with `n_agent_against_n_plus_1_conductor_on_postgres_and_rabbitmq` running beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conductor_rolls_back_before_finalization_on_postgres() {
    let url = accel_conductor::testing::postgres_database().await;
    conductor_rolls_back_before_finalization(&url, memory()).await;
}
