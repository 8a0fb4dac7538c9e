//! `accel conductor` with `[cyborg] serve_agents = true`, as an operator runs it while
//! migrating from Cyborg 17: a real Cyborg agent's report (Cyborg's own report path,
//! `apps/accel/cyborg17/python/cyborg_peer.py send`, on exchange `cyborg`, topic
//! `cyborg-conductor`) lands in the conductor's database, and the host, which sends no
//! heartbeat, counts as release N: `accel upgrade finalize` is refused naming it. Uses `VERSO_TEST_RABBIT_URL`
//! and `VERSO_TEST_PYTHON` (scripts/test.sh sets both).

use accel_conductor::db::ListFilter;
use accel_conductor::Db;
use accel_cyborg17::testing::{cyborg_agent_reports, rabbit_url};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the conductor if the test fails before stopping it.
struct Conductor(std::process::Child);

impl Drop for Conductor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_reports_into_accel_conductor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("conductor")
        .env("ACCEL_TRANSPORT_URL", rabbit_url())
        .env("ACCEL_DATABASE_URL", &db_url)
        .env("ACCEL_CYBORG_SERVE_AGENTS", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("accel conductor starts");
    let stdout = child.stdout.take().expect("piped");
    let mut conductor = Conductor(child);
    // Wait until it says it serves Cyborg's agents (it has bound the queue then).
    let ready = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("serving Cyborg 17 agents' report_data on cyborg-conductor"))
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the conductor did not start within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        ready.join().expect("reader"),
        "the conductor ended without serving Cyborg agents"
    );

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
    let finalize = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["upgrade", "finalize"])
        .env("ACCEL_TRANSPORT_URL", rabbit_url())
        .output()
        .expect("accel upgrade finalize runs");
    let said = String::from_utf8_lossy(&finalize.stdout);
    assert_eq!(finalize.status.code(), Some(1), "{said}");
    assert!(
        said.contains("cyborg-compute-7") && said.contains("software 1"),
        "{said}"
    );

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
