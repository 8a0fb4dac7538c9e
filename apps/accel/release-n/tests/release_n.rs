//! Release N on its own: a release N agent reports to and binds through a release N
//! conductor (SQLite with the memory transport; PostgreSQL with RabbitMQ), and the
//! release N conductor runs on a database release N+1 migrated but did not finalize (the
//! downgrade window) and refuses one N+1 finalized or created.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use accel_release_n::conductor::{self, StartError};
use accel_release_n::objects as n;
use accel_release_n::rpc::{
    AgentApi, BindArq, CreateArqs, CreateDeviceProfile, DeleteArqs, DeleteDeviceProfile, ReportNow,
    UnbindArq, AGENT_TOPIC, UPGRADE_TOPIC,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use support::*;
use verso::{ObjectList, RequestContext};
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcError};
use verso_upgrade::admin::{Status, UpgradeApi};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{ComponentVersion, VersionManager};

fn gpu_group() -> Vec<BTreeMap<String, String>> {
    vec![BTreeMap::from([(
        "resources:GPU".to_owned(),
        "1".to_owned(),
    )])]
}

async fn release_n_deployment(
    url: &str,
    conductor_transport: Arc<dyn Transport>,
    agent_transport: Arc<dyn Transport>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = conductor::start(url, conductor_transport.clone())
        .await
        .expect("release N conductor starts on a fresh database");
    assert_eq!(running.db_url(), url);
    assert_eq!(
        running
            .db()
            .applied_migrations()
            .await
            .expect("migrations")
            .into_iter()
            .collect::<Vec<_>>(),
        [1],
        "schema N only"
    );
    let agent = n_agent(dir.path(), 1, agent_transport.clone()).await;
    assert_eq!(agent.host(), "host1");
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    let db = running.db();
    let devices = db.devices(Some("host1")).await.expect("devices");
    assert_eq!(devices.len() as u64, HOST1_DEVICES);
    assert!(devices.iter().all(|d| d.status == "available"));
    let handles = db.attach_handles(Some("host1")).await.expect("handles");
    assert_eq!(handles.len(), HOST1_HANDLES);

    // The conductor side asks the agent (agent API 1.0, server = host name).
    let ctx = RequestContext::new("req-test");
    let agents = RpcClient::for_api::<AgentApi>(conductor_transport.clone(), AGENT_TOPIC);
    let n_reported = agents
        .prepare()
        .server("host1")
        .call_method(&ctx, ReportNow {})
        .await
        .expect("report_now over RPC");
    assert_eq!(n_reported, HOST1_DEVICES);

    // The heartbeat reached the conductor's upgrade API.
    let upgrade = RpcClient::for_api::<UpgradeApi>(agent_transport.clone(), UPGRADE_TOPIC);
    let status = upgrade.call_method(&ctx, Status {}).await.expect("status");
    let member = status
        .clients
        .iter()
        .find(|c| c.id == "host1")
        .expect("host1 heartbeated");
    assert_eq!((member.software, member.apparent), (1, 1));
    assert_eq!(status.server.software, 1);

    // Profiles and requests through release N's conductor API.
    let client = n_client(agent_transport.clone());
    let profile: n::DeviceProfile = client
        .call_method(
            &ctx,
            CreateDeviceProfile {
                name: "gpu".into(),
                groups: gpu_group(),
                description: Some("one GPU".into()),
            },
        )
        .await
        .expect("profile");
    assert_eq!(profile.name.get().map(String::as_str), Some("gpu"));
    let mut arqs = Vec::new();
    for _ in 0..2 {
        let list: n::AcceleratorRequestList = client
            .call_method(
                &ctx,
                CreateArqs {
                    device_profile_name: "gpu".into(),
                    group_id: None,
                    project_id: Some("p1".into()),
                },
            )
            .await
            .expect("arqs");
        assert_eq!(list.len(), 1);
        arqs.push(
            list.iter()
                .next()
                .expect("one")
                .uuid
                .get()
                .expect("uuid")
                .to_string(),
        );
    }
    let bound: n::AcceleratorRequest = client
        .call_method(
            &ctx,
            BindArq {
                uuid: arqs[0].clone(),
                hostname: "host1".into(),
                instance_uuid: "inst-1".into(),
                device_rp_uuid: None,
            },
        )
        .await
        .expect("bind");
    assert_eq!(bound.state.get().map(String::as_str), Some("Bound"));
    let handle_uuid = bound
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("bound to a handle");
    let in_use: Vec<_> = db
        .attach_handles(Some("host1"))
        .await
        .expect("handles")
        .into_iter()
        .filter(|h| h.in_use)
        .collect();
    assert_eq!(in_use.len(), 1);
    assert_eq!(in_use[0].uuid, handle_uuid);
    // The one GPU VF is taken: the second request fails with the typed error.
    let err = client
        .call_method(
            &ctx,
            BindArq {
                uuid: arqs[1].clone(),
                hostname: "host1".into(),
                instance_uuid: "inst-2".into(),
                device_rp_uuid: None,
            },
        )
        .await
        .expect_err("no second GPU");
    match err {
        RpcError::Remote(r) => assert_eq!(r.kind, "NoFreeHandle", "{r:?}"),
        other => panic!("{other}"),
    }
    assert_eq!(
        db.arq(&arqs[1]).await.expect("arq").state.as_str(),
        "BindFailed"
    );
    // Release N frees a device at once.
    let unbound: n::AcceleratorRequest = client
        .call_method(
            &ctx,
            UnbindArq {
                uuid: arqs[0].clone(),
            },
        )
        .await
        .expect("unbind");
    assert_eq!(unbound.state.get().map(String::as_str), Some("Unbound"));
    assert!(db
        .attach_handles(Some("host1"))
        .await
        .expect("handles")
        .iter()
        .all(|h| !h.in_use));
    let err = client
        .call_method(&ctx, DeleteDeviceProfile { name: "gpu".into() })
        .await
        .expect_err("in use");
    assert!(
        matches!(&err, RpcError::Remote(r) if r.kind == "ProfileInUse"),
        "{err}"
    );
    let deleted = client
        .call_method(
            &ctx,
            DeleteArqs {
                uuids: arqs.clone(),
                instance_uuid: None,
            },
        )
        .await
        .expect("delete");
    assert_eq!(deleted, 2);
    client
        .call_method(&ctx, DeleteDeviceProfile { name: "gpu".into() })
        .await
        .expect("profile deleted");
    assert!(db.arqs(None).await.expect("arqs").is_empty());
    assert!(db.profiles().await.expect("profiles").is_empty());

    agent.stop().await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_agent_and_n_conductor_on_sqlite_and_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = memory();
    release_n_deployment(&sqlite_url(dir.path()), t.clone(), t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_agent_and_n_conductor_on_postgres_and_rabbitmq() {
    let url = accel_conductor::testing::postgres_database().await;
    let exchange = exchange();
    release_n_deployment(&url, rabbit(&exchange).await, rabbit(&exchange).await).await;
}

/// Release N's client creates one request of the profile `kept` and binds it on
/// `host1` for `inst-1`: its UUID and the bound request.
async fn n_create_and_bind(
    client: &RpcClient,
    ctx: &RequestContext,
) -> (String, n::AcceleratorRequest) {
    let list: n::AcceleratorRequestList = client
        .call_method(
            ctx,
            CreateArqs {
                device_profile_name: "kept".into(),
                group_id: None,
                project_id: None,
            },
        )
        .await
        .expect("arq");
    let arq = list
        .iter()
        .next()
        .expect("one")
        .uuid
        .get()
        .expect("uuid")
        .to_string();
    let bound = client
        .call_method(
            ctx,
            BindArq {
                uuid: arq.clone(),
                hostname: "host1".into(),
                instance_uuid: "inst-1".into(),
                device_rp_uuid: None,
            },
        )
        .await
        .expect("bind");
    (arq, bound)
}

/// The downgrade window on `url`: release N runs, release N+1 migrates the database,
/// and release N's conductor (rolled back) starts on the expanded schema and works (an N
/// agent reports; bind, unbind); a finalization started or done by N+1 closes the window.
async fn downgrade_window(url: &str, t: Arc<dyn Transport>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = conductor::start(url, t.clone())
        .await
        .expect("release N starts");
    let profile = running
        .db()
        .create_profile("kept", gpu_group(), None)
        .await
        .expect("profile");
    running.stop().await;

    let new = accel_conductor::Db::connect(url).await.expect("N+1 opens");
    assert_eq!(
        new.migrate().await.expect("N+1 migrates"),
        vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );
    assert_eq!(
        new.profile("kept").await.expect("survived").uuid,
        profile.uuid
    );

    // Rolled back before finalization: release N starts on the expanded schema.
    let running = conductor::start(url, t.clone())
        .await
        .expect("release N starts on N+1's schema before finalization");
    assert_eq!(
        running
            .db()
            .applied_migrations()
            .await
            .expect("migrations")
            .into_iter()
            .collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
        "release N leaves N+1's migration in place"
    );
    assert_eq!(
        conductor::check_database(running.db(), url)
            .await
            .expect("allowed")
            .newer,
        [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );
    let agent = n_agent(dir.path(), 1, t.clone()).await;
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    // Release N inserted handles without N+1's columns: they got their defaults.
    let handles = new.host_handles("host1").await.expect("N+1 reads them");
    assert_eq!(handles.len(), HOST1_HANDLES);
    assert!(
        handles
            .iter()
            .all(|h| h.revision == 0 && h.cleanup_state.is_none() && !h.in_use),
        "{handles:?}"
    );
    // ... and N+1's triggers gave them Cyborg's control paths (migration 11).
    each_device_has_its_control_path(&new, "host1").await;
    let ctx = RequestContext::new("req-window");
    let client = n_client(t.clone());
    let (arq, bound) = n_create_and_bind(&client, &ctx).await;
    assert_eq!(bound.state.get().map(String::as_str), Some("Bound"));
    let taken: Vec<_> = new
        .host_handles("host1")
        .await
        .expect("handles")
        .into_iter()
        .filter(|h| h.in_use)
        .collect();
    assert_eq!(taken.len(), 1, "N+1 sees the handle release N took");
    assert_eq!(
        bound.attach_handle_uuid.get().cloned().flatten().as_deref(),
        Some(taken[0].uuid.as_str())
    );
    let unbound: n::AcceleratorRequest = client
        .call_method(&ctx, UnbindArq { uuid: arq.clone() })
        .await
        .expect("unbind");
    assert_eq!(unbound.state.get().map(String::as_str), Some("Unbound"));
    assert!(new
        .host_handles("host1")
        .await
        .expect("handles")
        .iter()
        .all(|h| !h.in_use && h.cleanup_state.is_none()));
    agent.stop().await;
    running.stop().await;

    // A finalization started by N+1 (its first checkpoint) closes the window.
    let store =
        accel_conductor::DbVersionStore::new(new.clone(), accel_objects::AccelVersion::COMPONENT);
    let before = store
        .load()
        .await
        .expect("load")
        .expect("release N's record");
    assert_eq!((before.apparent, before.finalizing.is_none()), (1, true));
    let mut started = before.clone();
    started.finalizing = Some(verso_upgrade::store::Finalizing {
        checkpoint: verso_upgrade::store::Checkpoint::Started,
        target: 2,
        steps_done: Vec::new(),
        failed: None,
    });
    store.save(&started).await.expect("save");
    let err = conductor::start(url, t.clone())
        .await
        .expect_err("a finalization under way is refused");
    assert!(
        matches!(
            err,
            StartError::FinalizedByNewer {
                apparent: 2,
                software: 1,
                ..
            }
        ),
        "{err:?}"
    );
    store.save(&before).await.expect("restore");

    let versions = VersionManager::<accel_objects::AccelVersion>::open(store)
        .await
        .expect("N+1 versions");
    assert_eq!(versions.apparent().number(), 1, "release N's record");
    versions.finalize().await.expect("N+1 finalizes");
    assert_eq!(versions.apparent().number(), 2);
    new.close().await;
    let err = conductor::start(url, t)
        .await
        .expect_err("finalized at 2 is refused");
    assert!(
        matches!(
            err,
            StartError::FinalizedByNewer {
                apparent: 2,
                software: 1,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("accel version 2")
            && text.contains("accel version 1")
            && text.contains("run release N+1"),
        "{text}"
    );
    assert!(!text.contains(":verso@"), "password masked: {text}");
}

/// N+1's migrations on a database release N filled: an N agent's inventory and a
/// request release N bound. Migration 10 rebuilds SQLite's `deployables` (a device may
/// have several): every deployable keeps its id and UUID, every handle, attribute and
/// binding its deployable, every reference resolves, and deleting a device still
/// deletes its deployables and handles (foreign keys are on again).
async fn migrating_keeps_release_ns_rows(url: &str, t: Arc<dyn Transport>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = conductor::start(url, t.clone())
        .await
        .expect("release N starts");
    running
        .db()
        .create_profile("kept", gpu_group(), None)
        .await
        .expect("profile");
    let agent = n_agent(dir.path(), 1, t.clone()).await;
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    let client = n_client(t.clone());
    let (arq, _) = n_create_and_bind(&client, &RequestContext::new("req-migrate")).await;
    agent.stop().await;
    running.stop().await;

    let new = accel_conductor::Db::connect(url).await.expect("N+1 opens");
    let all = accel_conductor::db::ListFilter::default();
    let deployables = |rows: Vec<accel_conductor::db::DeployableRow>| {
        rows.into_iter()
            .map(|d| (d.id, d.uuid, d.name, d.device_id))
            .collect::<Vec<_>>()
    };
    new.migrate().await.expect("N+1 migrates");
    let after = deployables(new.deployables(&all).await.expect("deployables"));
    assert_eq!(after.len() as u64, HOST1_DEVICES, "{after:?}");
    let handles = new.host_handles("host1").await.expect("handles");
    assert_eq!(handles.len(), HOST1_HANDLES);
    assert!(handles
        .iter()
        .all(|h| after.iter().any(|d| d.0 == h.deployable_id)));
    // Migration 11 gave release N's devices Cyborg's control paths, and their handles.
    each_device_has_its_control_path(&new, "host1").await;
    let bound = new.arq(&arq).await.expect("the request");
    assert_eq!(bound.state, accel_conductor::ArqState::Bound);
    let held = bound.attach_handle_uuid.clone().expect("its handle");
    assert!(handles.iter().any(|h| h.uuid == held && h.in_use));
    // Deleting a device deletes its deployables and handles: foreign keys hold.
    let device = new
        .devices(&all)
        .await
        .expect("devices")
        .into_iter()
        .find(|d| {
            !handles
                .iter()
                .any(|h| h.in_use && after.iter().any(|a| a.0 == h.deployable_id && a.3 == d.id))
        })
        .expect("a device without the bound handle");
    sqlx::query("DELETE FROM devices WHERE id = $1")
        .bind(device.id)
        .execute(new.pool())
        .await
        .expect("delete");
    let left = deployables(new.deployables(&all).await.expect("deployables"));
    assert!(left.iter().all(|d| d.3 != device.id), "{left:?}");
    assert_eq!(left.len() as u64, HOST1_DEVICES - 1);
    let orphans: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) AS n FROM attach_handles WHERE deployable_id NOT IN (SELECT id FROM deployables)",
    )
    .fetch_one(new.pool())
    .await
    .expect("count");
    assert_eq!(orphans, 0, "a deleted device's handles went with it");
    each_device_has_its_control_path(&new, "host1").await;
    new.close().await;
}

/// Every device of `host` has one `PCI` control path whose `cpid_info` is its address
/// in Cyborg's text, and each of its handles points at it; no other path exists.
async fn each_device_has_its_control_path(db: &accel_conductor::Db, host: &str) {
    let all = accel_conductor::db::ListFilter::default();
    let deployables = db.deployables(&all).await.expect("deployables");
    let paths = db.control_paths(Some(host)).await.expect("control paths");
    let devices = db.devices(&all).await.expect("devices");
    assert_eq!(paths.len(), devices.len(), "{paths:?}");
    for d in &devices {
        let address = deployables
            .iter()
            .find(|dep| dep.device_id == d.id)
            .map(|dep| dep.control_path_id.clone())
            .expect("a deployable");
        let (domain, rest) = address.split_once(':').expect("PCI");
        let (bus, rest) = rest.split_once(':').expect("PCI");
        let (slot, function) = rest.split_once('.').expect("PCI");
        let path = paths
            .iter()
            .find(|c| c.device_id == d.id)
            .expect("the device's control path");
        assert_eq!(path.cpid_type, "PCI");
        assert_eq!(
            path.cpid_info,
            format!(
                "{{\"bus\": \"{bus}\", \"device\": \"{slot}\", \"domain\": \"{domain}\", \"function\": \"{function}\"}}"
            )
        );
        let of_device: Vec<i64> = deployables
            .iter()
            .filter(|dep| dep.device_id == d.id)
            .map(|dep| dep.id)
            .collect();
        for h in db.attach_handles(Some(host)).await.expect("handles") {
            if of_device.contains(&h.deployable_id) {
                assert_eq!(h.cpid_id, Some(path.id), "handle {}", h.uuid);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_keeps_release_ns_rows_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    migrating_keeps_release_ns_rows(&sqlite_url(dir.path()), memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_keeps_release_ns_rows_on_postgres() {
    let url = accel_conductor::testing::postgres_database().await;
    migrating_keeps_release_ns_rows(&url, memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_conductor_in_the_downgrade_window_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    downgrade_window(&sqlite_url(dir.path()), memory()).await;
}

/// The memory transport: RabbitMQ queues are named by topic on every exchange, so this
/// would share the conductor queue with the RabbitMQ test running beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_conductor_in_the_downgrade_window_on_postgres() {
    let url = accel_conductor::testing::postgres_database().await;
    downgrade_window(&url, memory()).await;
}

/// A database N+1 migrated before any conductor ran has no `accel` record: release N
/// never ran on it and cannot tell it is inside a downgrade window.
async fn refuses_a_database_created_by_n_plus_1(url: &str) {
    let new = accel_conductor::Db::connect(url).await.expect("N+1 opens");
    assert_eq!(
        new.migrate().await.expect("N+1 migrates"),
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );
    new.close().await;
    let err = conductor::start(url, memory())
        .await
        .expect_err("no record, newer schema");
    assert!(
        matches!(&err, StartError::SchemaNewer { newer, known: 1, .. } if newer == &[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]")
            && text.contains("no accel version record"),
        "{text}"
    );
    assert!(!text.contains(":verso@"), "password masked: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_conductor_refuses_a_database_created_by_n_plus_1_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    refuses_a_database_created_by_n_plus_1(&sqlite_url(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn n_conductor_refuses_a_database_created_by_n_plus_1_on_postgres() {
    refuses_a_database_created_by_n_plus_1(&accel_conductor::testing::postgres_database().await)
        .await;
}

#[tokio::test]
async fn bad_input_is_a_typed_error() {
    let err = conductor::start("mysql://x", memory())
        .await
        .expect_err("unsupported");
    assert!(matches!(err, StartError::Db(_)), "{err:?}");
    assert!(err.to_string().contains("sqlite://"), "{err}");

    let dir = tempfile::tempdir().expect("tempdir");
    let config = accel_release_n::agent::AgentConfig {
        host: String::new(),
        sysfs_root: dir.path().into(),
        state_dir: dir.path().into(),
        report_interval: std::time::Duration::from_secs(1),
    };
    let err = accel_release_n::agent::start(config, memory())
        .await
        .expect_err("empty host");
    assert!(
        matches!(err, accel_release_n::agent::StartError::Config(_)),
        "{err:?}"
    );

    // A conductor with an agent whose sysfs tree is missing: the report fails typed.
    let t = memory();
    let running = conductor::start(&sqlite_url(dir.path()), t.clone())
        .await
        .expect("starts");
    let agent = accel_release_n::agent::start(
        accel_release_n::agent::AgentConfig {
            host: "nosysfs".into(),
            sysfs_root: dir.path().join("missing"),
            state_dir: dir.path().join("state"),
            report_interval: std::time::Duration::from_secs(60),
        },
        t,
    )
    .await
    .expect("starts without a sysfs tree");
    let err = agent.report_now().await.expect_err("no sysfs");
    assert!(
        matches!(err, accel_release_n::agent::ReportError::Discovery(_)),
        "{err:?}"
    );
    agent.stop().await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reports_of_one_host_on_postgres() {
    use accel_release_n::conductor::db::{Db, ReportedDevice};
    let url = accel_conductor::testing::postgres_database().await;
    let db = Db::connect(&url, std::time::Duration::from_secs(10))
        .await
        .expect("open");
    assert!(db.migrate().await.expect("migrate"), "applied now");
    assert!(!db.migrate().await.expect("again"), "already there");
    let devices: Vec<ReportedDevice> = (0..4)
        .map(|i| ReportedDevice {
            control_path_id: format!("0000:{:02x}:00.0", 0x3b + i),
            device_type: "GPU".into(),
            vendor: "10de".into(),
            model: "20b5".into(),
            std_board_info: None,
            driver_name: Some("nvidia".into()),
            handles: vec![("PCI".into(), format!("{{\"bus\": \"{i}\"}}"))],
        })
        .collect();
    let (a, b) = tokio::join!(db.report("h", &devices), db.report("h", &devices));
    let (a, b) = (a.expect("first"), b.expect("second"));
    assert_eq!(a.added.len() + b.added.len(), 4, "{a:?} {b:?}");
    assert_eq!(a.unchanged + b.unchanged, 4, "{a:?} {b:?}");
    assert_eq!(db.devices(Some("h")).await.expect("devices").len(), 4);
    let err = db
        .report("h", &[devices[0].clone(), devices[0].clone()])
        .await
        .expect_err("twice");
    assert!(err.to_string().contains("reported twice"), "{err}");
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_sqlite_database_is_one_database() {
    let t = memory();
    let dir = tempfile::tempdir().expect("tempdir");
    let running = conductor::start("sqlite::memory:", t.clone())
        .await
        .expect("starts in memory");
    let agent = n_agent(dir.path(), 1, t).await;
    assert_eq!(agent.report_now().await.expect("report"), HOST1_DEVICES);
    assert_eq!(
        running.db().devices(None).await.expect("devices").len() as u64,
        HOST1_DEVICES
    );
    agent.stop().await;
    running.stop().await;
}
