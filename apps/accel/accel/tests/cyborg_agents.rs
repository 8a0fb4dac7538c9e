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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_reports_into_accel_conductor() {
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
