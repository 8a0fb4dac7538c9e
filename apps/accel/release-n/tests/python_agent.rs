//! The project's Python release N agent (`python/accel_agent_n.py`, oslo.versionedobjects
//! and oslo.messaging) in a release N+1 deployment over RabbitMQ: the N+1 conductor
//! (`accel_conductor::runtime::start`) on a fresh SQLite database, the Python agent as a
//! process beside it.
//!
//! Needs RabbitMQ (`VERSO_TEST_RABBIT_URL`, default `rabbit://guest:guest@127.0.0.1:5672/`)
//! and a Python with oslo.messaging and oslo.versionedobjects (`VERSO_TEST_PYTHON`,
//! default `.venv/bin/python` at the workspace root); a missing one fails the test with
//! what to do. The accel topics are fixed names, so the tests run one at a time and each
//! uses a control exchange of its own.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use accel_release_n::agent::driver_devices;
use accel_release_n::rpc::{AgentApi, ReportData, ReportNow, AGENT_TOPIC};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use verso::{ObjectList, RequestContext};
use verso_rpc::transport::Transport;
use verso_rpc::RpcClient;
use verso_upgrade::{ComponentVersion, UpgradeError, VersionManager};

/// The tests share the broker's fixed topic names: one at a time.
static ONE_AT_A_TIME: LazyLock<tokio::sync::Mutex<()>> =
    LazyLock::new(|| tokio::sync::Mutex::new(()));

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

fn python() -> PathBuf {
    let python = std::env::var_os("VERSO_TEST_PYTHON")
        .map_or_else(|| workspace().join(".venv/bin/python"), PathBuf::from);
    assert!(
        python.exists(),
        "no Python at {}: create the venv with requirements-test.txt (scripts/test.sh does) or set VERSO_TEST_PYTHON",
        python.display()
    );
    python
}

/// A checked-in fixture sysfs tree (`apps/accel/agent/tests/fixtures/sysfs/hostN`).
fn fixture_tree(index: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/sysfs")
        .join(format!("host{index}"))
}

/// The N+1 conductor on a fresh, migrated SQLite database, over RabbitMQ on `exchange`.
struct Deployment {
    db: accel_conductor::Db,
    conductor: accel_conductor::runtime::RunningConductor,
    transport: Arc<dyn Transport>,
    exchange: String,
    dir: tempfile::TempDir,
}

impl Deployment {
    /// A deployment release N installed and N+1 upgraded (pre-finalized).
    async fn start() -> Deployment {
        Deployment::start_from(true).await
    }

    /// `from_n`: release N installed the database first; otherwise it is a fresh N+1
    /// install (finalized at once).
    async fn start_from(from_n: bool) -> Deployment {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = sqlite_url(dir.path());
        if from_n {
            Deployment::install_n(&url).await;
        }
        let db = accel_conductor::Db::connect(&url)
            .await
            .expect("SQLite opens");
        db.migrate().await.expect("migrated to N+1");
        let exchange = exchange();
        let transport = rabbit(&exchange).await;
        let conductor = accel_conductor::runtime::start(db.clone(), transport.clone(), None)
            .await
            .expect("N+1 conductor starts");
        Deployment {
            db,
            conductor,
            transport,
            exchange,
            dir,
        }
    }

    async fn install_n(url: &str) {
        // Release N installed it (N's schema, its version record at 1) ...
        let old = accel_release_n::conductor::db::Db::connect(url, Duration::from_secs(10))
            .await
            .expect("release N opens SQLite");
        old.migrate().await.expect("release N's schema");
        VersionManager::<accel_release_n::objects::AccelVersion>::open(
            accel_release_n::conductor::versions::DbVersionStore::new(
                old.clone(),
                accel_release_n::objects::AccelVersion::COMPONENT,
            ),
        )
        .await
        .expect("release N's version record");
        old.close().await;
        // ... and N+1 migrates it: pre-finalized until every agent runs N+1.
    }

    async fn stop(self) {
        self.conductor.stop().await;
        self.db.close().await;
    }

    fn python_command(&self, host: &str, root: &Path) -> Command {
        let mut c = Command::new(python());
        c.arg(script("accel_agent_n.py"))
            .args(["--transport-url", &rabbit_url()])
            .args(["--control-exchange", &self.exchange])
            .args(["--host", host])
            .arg("--sysfs-root")
            .arg(root)
            .arg("--state-dir")
            .arg(self.dir.path().join("state-py"))
            .args(["--report-interval", "0.5"])
            .kill_on_drop(true);
        c
    }

    /// Starts the Python agent for `host` on `root`; waits for its `ready`.
    async fn python_agent(&self, host: &str, root: &Path) -> PyAgent {
        let mut child = self
            .python_command(host, root)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("read") {
                if line.trim() == "ready" {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(
            ready,
            Ok(true),
            "the Python agent for {host} never printed ready (its stderr is above)"
        );
        PyAgent { child }
    }

    /// The database's view of `host`: devices, deployables and attach handles without
    /// ids, uuids and timestamps.
    async fn census(&self, host: &str) -> Value {
        let filter = accel_conductor::db::ListFilter {
            host: Some(host.to_owned()),
            ..Default::default()
        };
        let strip = |rows: Value| -> Value {
            let mut rows: Vec<Value> = rows
                .as_array()
                .expect("rows")
                .iter()
                .map(|r| {
                    let mut r = r.as_object().expect("row").clone();
                    for k in [
                        "id",
                        "uuid",
                        "device_id",
                        "deployable_id",
                        "created_at",
                        "updated_at",
                    ] {
                        r.remove(k);
                    }
                    Value::Object(r)
                })
                .collect();
            rows.sort_by_key(|r| r.to_string());
            Value::Array(rows)
        };
        let devices =
            serde_json::to_value(self.db.devices(&filter).await.expect("devices")).expect("json");
        let deployables =
            serde_json::to_value(self.db.deployables(&filter).await.expect("deployables"))
                .expect("json");
        let handles =
            serde_json::to_value(self.db.attach_handles(Some(host)).await.expect("handles"))
                .expect("json");
        serde_json::json!({
            "devices": strip(devices),
            "deployables": strip(deployables),
            "attach_handles": strip(handles),
        })
    }
}

struct PyAgent {
    child: Child,
}

impl PyAgent {
    /// SIGTERM; returns its exit status.
    async fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().expect("still running");
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the Python agent exits within 30 s of SIGTERM")
            .expect("wait")
    }
}

/// The Python agent's report of each fixture host (checked-in trees and generated sample
/// hosts) reaches the N+1 database; the Rust
/// release N agent's report of the same tree then changes nothing there (the
/// conductor's diff finds every device unchanged) and the rows stay the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_n_agent_reports_what_the_rust_n_agent_reports() {
    let _one = ONE_AT_A_TIME.lock().await;
    python();
    let d = Deployment::start().await;
    // The checked-in fixture trees, and the generated sample hosts the demo runs (they
    // vary with the index: GPUs with VFs, an FPGA, NVMe SSDs, QAT, NICs).
    let trees = (1..=3)
        .map(|i| (format!("host{i}"), fixture_tree(i)))
        .chain((1..=6).map(|i| (format!("sample{i}"), sysfs(d.dir.path(), i))));
    for (host, root) in trees {
        let agent = d.python_agent(&host, &root).await;
        let status = agent.terminate().await;
        assert!(status.success(), "SIGTERM: clean exit 0, got {status}");
        let by_python = d.census(&host).await;
        let rust = driver_devices(&accel_agent::discovery::discover(&root).expect("discovery"));
        let expected = rust.len();
        assert!(expected > 0, "{host} has devices");
        assert_eq!(
            by_python["devices"].as_array().unwrap().len(),
            expected,
            "{host}: {by_python:#}"
        );
        let summary = n_client(d.transport.clone())
            .call_method(
                &RequestContext::new("req-rust-n"),
                ReportData {
                    hostname: host.clone(),
                    devices: rust,
                },
            )
            .await
            .expect("Rust release N report");
        assert!(
            summary.added.is_empty()
                && summary.updated.is_empty()
                && summary.removed.is_empty()
                && summary.lost.is_empty(),
            "{host}: the Rust N agent's report differs from the Python agent's: {summary:?}"
        );
        assert_eq!(summary.unchanged, expected as u64, "{host}: {summary:?}");
        assert_eq!(d.census(&host).await, by_python, "{host}");
    }
    // Its version record is FileStore's, for a Rust agent to take over.
    let record: Value = serde_json::from_slice(
        &std::fs::read(d.dir.path().join("state-py/agent-host1.version")).expect("record"),
    )
    .expect("json");
    assert_eq!(
        record,
        serde_json::json!({"format": 1, "component": "accel", "apparent": 1})
    );
    let store = verso_upgrade::FileStore::new(d.dir.path().join("state-py/agent-host1.version"));
    let loaded = verso_upgrade::store::VersionStore::load(&store)
        .await
        .expect("FileStore reads the Python record")
        .expect("present");
    assert_eq!((loaded.component.as_str(), loaded.apparent), ("accel", 1));
    d.stop().await;
}

/// `report_now` over agent API 1.0 from a Rust client; the heartbeat in the N+1
/// coordinator's status (software 1, apparent 1); finalization refused naming its host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_n_agent_answers_report_now_and_blocks_finalization() {
    let _one = ONE_AT_A_TIME.lock().await;
    let d = Deployment::start().await;
    let root = sysfs(d.dir.path(), 1);
    let agent = d.python_agent("host1", &root).await;

    let client = RpcClient::for_api::<AgentApi>(d.transport.clone(), AGENT_TOPIC)
        .timeout(Duration::from_secs(30));
    let n = client
        .prepare()
        .server("host1")
        .call_method(&RequestContext::new("req-report-now"), ReportNow {})
        .await
        .expect("report_now answers");
    assert_eq!(n, HOST1_DEVICES);
    let census = d.census("host1").await;
    assert_eq!(
        census["attach_handles"].as_array().unwrap().len(),
        HOST1_HANDLES,
        "{census:#}"
    );

    let status = d.conductor.coordinator.status().await.expect("status");
    let member = status
        .clients
        .iter()
        .find(|c| c.id == "host1")
        .unwrap_or_else(|| panic!("host1 heartbeated: {status:?}"));
    assert_eq!(
        (
            member.host.as_str(),
            member.software,
            member.apparent,
            member.live
        ),
        ("host1", 1, 1, true)
    );
    match d.conductor.coordinator.finalize().await {
        Err(UpgradeError::Blocked(blockers)) => {
            assert!(
                blockers.iter().any(|b| b.id == "host1" && b.software == 1),
                "{blockers:?}"
            );
        }
        other => panic!("finalization must be refused while host1 runs release N: {other:?}"),
    }
    // It keeps heartbeating after the refusal.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(d
        .conductor
        .coordinator
        .status()
        .await
        .expect("status")
        .clients
        .iter()
        .any(|c| c.id == "host1" && c.live));
    let status = agent.terminate().await;
    assert!(status.success(), "SIGTERM: clean exit 0, got {status}");
    d.stop().await;
}

/// A Python OVO client one release behind (release N's manifest, conductor 1.1) gets
/// `AttachHandleList.get_by_host` backported: AttachHandleList 1.1 of AttachHandle 1.2
/// with Device 1.2, loaded by the Python release N classes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_ovo_client_one_release_behind_gets_backported_attach_handles() {
    let _one = ONE_AT_A_TIME.lock().await;
    let d = Deployment::start().await;
    let root = sysfs(d.dir.path(), 1);
    let agent = d.python_agent("host1", &root).await;
    let out = Command::new(python())
        .arg(script("indirection_probe.py"))
        .args(["--transport-url", &rabbit_url()])
        .args(["--control-exchange", &d.exchange])
        .args(["--host", "host1"])
        .output()
        .await
        .expect("python runs");
    assert!(
        out.status.success(),
        "the probe failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(got["class"], "AttachHandleList", "{got:#}");
    assert_eq!(got["version"], "1.1", "{got:#}");
    let members = got["members"].as_array().expect("members");
    assert_eq!(members.len(), HOST1_HANDLES, "{got:#}");
    let rows = d.db.attach_handles(Some("host1")).await.expect("rows");
    for m in members {
        assert_eq!(m["class"], "AttachHandle", "{got:#}");
        assert_eq!(m["version"], "1.2", "{got:#}");
        let fields: Vec<&str> = m["fields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for newer in ["revision", "cleanup_state", "instance_uuid"] {
            assert!(!fields.contains(&newer), "{newer} is N+1's: {got:#}");
        }
        assert_eq!(m["attach_type"], "PCI");
        // N's attach_info is the PCI address alone (N+1's managed mode is dropped).
        let info: Value = serde_json::from_str(m["attach_info"].as_str().unwrap()).unwrap();
        let keys: Vec<&String> = info.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["bus", "device", "domain", "function"], "{got:#}");
        assert!(
            rows.iter().any(|r| {
                let stored: Value = serde_json::from_str(&r.attach_info).unwrap();
                ["bus", "device", "domain", "function"]
                    .iter()
                    .all(|k| stored[k] == info[k])
            }),
            "{info} is one of host1's handles"
        );
        let device = &m["device"];
        assert_eq!(device["class"], "Device", "{got:#}");
        assert_eq!(device["version"], "1.2", "{got:#}");
        assert_eq!(device["hostname"], "host1", "{got:#}");
    }
    let status = agent.terminate().await;
    assert!(status.success(), "SIGTERM: clean exit 0, got {status}");
    d.stop().await;
}

/// A release N+1 deployment already finalized fences the Python release N agent: the
/// conductor's reason on stderr, exit 3, no version record written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_n_agent_is_fenced_by_a_finalized_n_plus_1() {
    let _one = ONE_AT_A_TIME.lock().await;
    let d = Deployment::start_from(false).await;
    let root = sysfs(d.dir.path(), 1);
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        d.python_command("host1", &root).output(),
    )
    .await
    .expect("the fenced agent exits")
    .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("refused by the conductor") && stderr.contains("software version 1"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ready"));
    assert!(!d.dir.path().join("state-py/agent-host1.version").exists());
    d.stop().await;
}

/// The Python classes' OVO fingerprints are release N's (`objects.lock`).
#[test]
fn python_classes_have_release_n_fingerprints() {
    let out = std::process::Command::new(python())
        .arg(script("accel_agent_n.py"))
        .arg("--fingerprints")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("json");
    let lock: toml::Value = toml::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("objects.lock"))
            .expect("objects.lock"),
    )
    .expect("toml");
    let objects = lock["objects"].as_table().expect("objects");
    assert_eq!(
        got.as_object().expect("map").len(),
        objects.len(),
        "the same classes: {got:#}"
    );
    for (name, entry) in objects {
        assert_eq!(
            got[name].as_str(),
            entry["fingerprint"].as_str(),
            "{name}: Python vs objects.lock"
        );
    }
}
