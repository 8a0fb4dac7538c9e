//! `accel conductor` with `[cyborg] serve_agents = true`, as an operator runs it while
//! migrating from Cyborg 17: a real Cyborg agent's report (Cyborg's own report path,
//! `apps/accel/cyborg17/python/cyborg_peer.py send`, on exchange `cyborg`, topic
//! `cyborg-conductor`) lands in the conductor's database, and the host, which sends no
//! heartbeat, counts as release N: `accel upgrade finalize` is refused naming it. Uses `VERSO_TEST_RABBIT_URL`
//! and `VERSO_TEST_PYTHON` (scripts/test.sh sets both).

mod support;

use accel_conductor::db::ListFilter;
use accel_conductor::Db;
use accel_cyborg17::testing::cyborg_agent_reports;
use std::process::Command;
use std::time::{Duration, Instant};

/// One conductor at a time on the test broker: conductors consume the same queues
/// (`accel-conductor`, `accel-upgrade`) whatever their exchange, so a second one would
/// take some of the other test's calls (this one's is at release N, serving Cyborg's
/// agents, and refuses a release N+1 agent).
static ONE_CONDUCTOR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_reports_into_accel_conductor() {
    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let mut conductor = support::cyborg_conductor(&db_url, true, &[]);

    cyborg_agent_reports("cyborg-conductor", "cyborg-compute-7").await;

    let db = Db::connect(&db_url)
        .await
        .expect("the conductor's database");
    let devices = db
        .devices(&ListFilter {
            host: Some("cyborg-compute-7".into()),
            ..ListFilter::default()
        })
        .await
        .expect("devices");
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert_eq!(devices[0].device_type, "FPGA");

    // The Cyborg host is release N in the fleet record: finalization is refused while
    // it lives, and names it.
    support::finalize_refused_naming("cyborg-compute-7");

    // SIGTERM stops it cleanly.
    let pid = conductor.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = conductor.0.try_wait().expect("wait") {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the conductor did not stop within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `accel agent` with `[cyborg] serve_conductor = true` answers a Cyborg 17 conductor's
/// calls on `cyborg-agent` (server = its host): Cyborg's own `AgentAPI` makes a mediated
/// device through the agent's sysfs tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accel_agent_serves_a_cyborg_conductor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _one = ONE_CONDUCTOR.lock().await;
    let _conductor = support::cyborg_conductor(&db_url, false, &[]);
    let sysfs = dir.path().join("sys");
    accel_agent::fixture::write_tree(&sysfs, &accel_agent::fixture::sample_host(1))
        .expect("fixture host");
    let create = sysfs
        .join("class/mdev_bus/0000:3b:00.0/mdev_supported_types/nvidia-35")
        .join("create");
    std::fs::create_dir_all(create.parent().expect("dir")).expect("mdev tree");
    std::fs::write(&create, "").expect("create attribute");
    let host = format!(
        "accel-mdev-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let log = dir.path().join("agent.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["agent", "--host", &host, "--sysfs-root"])
        .arg(&sysfs)
        .env("ACCEL_TRANSPORT_URL", accel_cyborg17::testing::rabbit_url())
        .env("ACCEL_CYBORG_SERVE_CONDUCTOR", "true")
        .env("ACCEL_AGENT_STATE_DIR", dir.path().join("state"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("accel agent starts");
    let stdout = child.stdout.take().expect("stdout");
    let _agent = support::Killed(child);
    let line = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .find(|l| l.starts_with(&format!("agent {host}: serving Cyborg 17's agent API")))
        .unwrap_or_else(|| {
            panic!(
                "the agent ended without serving Cyborg's agent API:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
    assert!(line.contains("cyborg-agent (exchange cyborg)"), "{line}");

    let mdev = uuid::Uuid::new_v4().to_string();
    let reply = accel_cyborg17::testing::cyborg_calls_agent(
        &host,
        "create_vgpu_mdev",
        "0000:3b:00.0",
        "nvidia-35",
        &mdev,
    )
    .await;
    assert_eq!(reply, Ok(serde_json::Value::Null));
    assert_eq!(std::fs::read_to_string(&create).expect("create"), mdev);
}
