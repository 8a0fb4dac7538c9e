//! Shared by the driver-feature tests: fake cleanup commands, an agent configuration on
//! the NVMe fixture host, binding and releasing an SSD through the conductor API, and
//! polling a handle's row.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use accel_agent::service::{self, AgentConfig, AgentStartError, NvmeConfig, RunningAgent};
use accel_conductor::handles::HostHandle;
use accel_conductor::runtime::{self, RunningConductor};
use accel_conductor::{Db, DbVersionStore};
use accel_objects::rpc::{
    BindArq, ConductorApi, CreateArqs, CreateDeviceProfile, UnbindArq, CONDUCTOR_TOPIC,
};
use accel_objects::NAMESPACE;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verso::{ObjectList, RequestContext};
use verso_rpc::transport::Transport;
use verso_rpc::RpcClient;
use verso_upgrade::store::{PersistedState, VersionStore};

pub const HOST: &str = "nvme-host";

pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/sysfs/host2")
}

/// A scratch directory with the fake cleanup commands; each appends the device path it
/// was given to `erased.log` when (and only when) it succeeds.
pub struct Scripts {
    dir: tempfile::TempDir,
}

impl Scripts {
    pub fn new() -> Scripts {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("erased.log");
        let write = |name: &str, body: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("script");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        write("ok.sh", format!("echo \"$1\" >> {}", log.display()));
        // Says when it starts (`started.log`), so a test can break the agent's broker
        // connection once the agent has the claim's answer and is erasing, not while the
        // answer is on its way (the claim would then fail and wait for the scan).
        write(
            "slow-ok.sh",
            format!(
                "echo \"$1\" >> {}\nsleep 2\necho \"$1\" >> {}",
                dir.path().join("started.log").display(),
                log.display()
            ),
        );
        write(
            "fail.sh",
            "echo \"sanitize of $1 failed: media error\" >&2\nexit 3".into(),
        );
        write("hang.sh", "exec sleep 600".into());
        Scripts { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    pub fn erased(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("erased.log"))
            .map(|s| s.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Waits until `n` runs of `slow-ok.sh` have started.
    pub async fn wait_for_started(&self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let started = std::fs::read_to_string(self.dir.path().join("started.log"))
                .map(|s| s.lines().count())
                .unwrap_or(0);
            if started >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{n} erase(s) not started within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `n` erases have finished, polling: a loaded machine runs the
    /// scripts slower than a fixed sleep assumes.
    pub async fn wait_for_erased(&self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while self.erased().len() < n {
            assert!(
                Instant::now() < deadline,
                "{n} erase(s) not finished within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

pub fn agent_config(scripts: &Scripts, script: &str) -> AgentConfig {
    let mut c = AgentConfig::new(HOST, fixture(), scripts.state_dir());
    // Long intervals: only what a test triggers happens.
    c.report_interval = Duration::from_secs(3600);
    c.scan_interval = Duration::from_secs(3600);
    c.nvme = NvmeConfig {
        cleanup_command: Some(scripts.path(script)),
        cleanup_timeout: Duration::from_secs(30),
    };
    c
}

pub async fn agent(
    transport: &Arc<dyn Transport>,
    config: AgentConfig,
) -> Result<RunningAgent, AgentStartError> {
    service::start(config, transport.clone()).await
}

pub async fn conductor(
    db: &Db,
    transport: &Arc<dyn Transport>,
    agent_cap: &str,
) -> RunningConductor {
    runtime::start(
        db.clone(),
        transport.clone(),
        Some(agent_cap.parse().expect("cap")),
    )
    .await
    .expect("conductor starts")
}

/// Records the conductor as pre-finalized at release N (apparent 1).
pub async fn pre_finalize(db: &Db) {
    DbVersionStore::new(db.clone(), "accel")
        .save(&PersistedState {
            format: 1,
            component: "accel".into(),
            apparent: 1,
            finalizing: None,
        })
        .await
        .expect("seed the version record");
}

pub fn client(transport: &Arc<dyn Transport>) -> RpcClient {
    RpcClient::for_api::<ConductorApi>(transport.clone(), CONDUCTOR_TOPIC)
}

pub fn ctx() -> RequestContext {
    RequestContext::new("req-test")
}

/// Creates the `ssd` profile (once) and binds a new request on HOST; returns the request
/// and the handle it got.
pub async fn bind_ssd(client: &RpcClient, instance: &str) -> (String, String) {
    let groups = vec![[("resources:SSD".to_owned(), "1".to_owned())]
        .into_iter()
        .collect::<BTreeMap<_, _>>()];
    // A second call finds the profile there (Duplicate): fine.
    let _ = client
        .call_method(
            &ctx(),
            CreateDeviceProfile {
                name: "ssd".into(),
                groups,
                description: None,
            },
        )
        .await;
    let arqs = client
        .call_method(
            &ctx(),
            CreateArqs {
                device_profile_name: "ssd".into(),
                group_id: None,
                project_id: None,
            },
        )
        .await
        .expect("create arqs");
    let arq = arqs.iter().next().expect("one arq").clone();
    let uuid = arq.uuid.get().expect("uuid").to_string();
    let bound = client
        .call_method(
            &ctx(),
            BindArq {
                uuid: uuid.clone(),
                hostname: HOST.into(),
                instance_uuid: instance.into(),
                device_rp_uuid: None,
                project_id: None,
            },
        )
        .await
        .expect("bind");
    let handle = bound
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("bound to a handle");
    (uuid, handle)
}

pub async fn unbind(client: &RpcClient, arq: &str) {
    client
        .call_method(&ctx(), UnbindArq { uuid: arq.into() })
        .await
        .expect("unbind");
}

/// Polls the handle until `done` holds (or panics after `within`).
pub async fn wait_for(
    db: &Db,
    handle: &str,
    within: Duration,
    what: &str,
    done: impl Fn(&HostHandle) -> bool,
) -> HostHandle {
    let deadline = Instant::now() + within;
    loop {
        let h = db.host_handle(handle).await.expect("handle");
        if done(&h) {
            return h;
        }
        assert!(Instant::now() < deadline, "{what}: still {h:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn available(h: &HostHandle) -> bool {
    h.cleanup_state.is_none() && !h.in_use
}

pub fn started(h: &HostHandle) -> bool {
    h.cleanup_state.map(|s| s.as_str()) == Some("cleaning")
        && h.cleanup_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("cleanup started"))
}

/// A context that sends attach-handle methods to the conductor, as an agent's does.
pub fn indirect_ctx(transport: &Arc<dyn Transport>) -> RequestContext {
    let api = verso_rpc::conductor::ConductorApi::new(
        client(transport),
        accel_objects::rpc::INDIRECTION_VERSION,
    );
    RequestContext::generate().with_indirection(NAMESPACE, Arc::new(api))
}

/// Each named scenario (an `async fn(Db)` of the test file) as a test on SQLite and one
/// on PostgreSQL (`mod sqlite`, `mod postgres`), with the test file's `support`
/// (`accel_conductor::testing`).
#[allow(unused_macros)] // Not every test file including this module uses it.
macro_rules! on_both_databases {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let (db, _dir) = super::support::sqlite().await;
                    super::$scenario(db).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(super::support::postgres().await).await;
                }
            )*
        }
    };
}
