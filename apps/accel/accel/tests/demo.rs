//! `accel demo`, the README's main job, run as a newcomer runs it: the whole rolling
//! upgrade from release N (OpenStack Cyborg 17, in Rust) to N+1 (accel) on the embedded
//! defaults (one process, memory transport, SQLite), and across RabbitMQ and MariaDB
//! with accel's components as processes. Each run must pass every check of its JSON
//! report.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use serde_json::Value;
use std::process::Command;

/// The demos on RabbitMQ use accel's fixed topics (queues are per broker, not per test):
/// one at a time.
static BROKER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn rabbit_url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .expect("VERSO_TEST_RABBIT_URL names the test broker (scripts/test.sh starts one)")
}

fn demo(extra: &[&str]) -> (Value, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report.json");
    let output = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("demo")
        .arg("--json")
        .arg(&report)
        .args(extra)
        .output()
        .expect("accel demo runs");
    let timeline = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "accel demo failed ({:?}):\n{timeline}\n{stderr}",
        output.status
    );
    let text = std::fs::read_to_string(&report).expect("report written");
    (
        serde_json::from_str(&text).expect("report is JSON"),
        timeline,
    )
}

/// The report's step numbers, in order.
fn step_numbers(report: &Value) -> Vec<u64> {
    report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["number"].as_u64().expect("number"))
        .collect()
}

/// What every passing run's report shows.
fn assert_complete(report: &Value, agents: u64) {
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["error"], Value::Null);
    assert_eq!(report["agents"], agents);
    assert_eq!(step_numbers(report), (1..=9).collect::<Vec<_>>());
    let checks = report["checks"].as_array().expect("checks");
    assert!(checks.len() >= 40, "{} checks", checks.len());
    assert!(checks.iter().all(|c| c["passed"] == true));
    for step in 1..=9u64 {
        assert!(
            checks.iter().any(|c| c["step"] == step),
            "step {step} checked nothing"
        );
    }
    // Every component ends on release N+1, finalized.
    let components = report["components"].as_array().expect("components");
    assert_eq!(components.len() as u64, agents + 1, "{components:#?}");
    for c in components {
        assert_eq!(
            (c["software"].as_u64(), c["apparent"].as_u64()),
            (Some(2), Some(2)),
            "{c}"
        );
    }
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .unwrap_or_else(|| panic!("no check {name:?}"))
}

#[test]
fn the_rolling_upgrade_passes_on_the_embedded_defaults() {
    let (report, timeline) = demo(&[]);
    assert_complete(&report, 6);
    assert_eq!(report["release_n"], "cyborg-17-in-rust");
    assert_eq!(report["transport"], "memory://");
    assert!(report["database"]
        .as_str()
        .unwrap_or("")
        .starts_with("sqlite://"));
    // The figures that prove the steps, not only that they ran.
    assert_eq!(
        check(&report, "devices reported by the Cyborg 17 agents")["evidence"],
        "30"
    );
    assert_eq!(
        check(&report, "accel db sync took Cyborg 17's database in place")["evidence"],
        "Cyborg17 [101, 102], at release N"
    );
    // The rollback before finalization: Cyborg 17 frees the handle accel allocated.
    assert_eq!(
        check(&report, "Cyborg 17's API unbinds the request accel bound")["evidence"],
        "202, 7 in use"
    );
    assert_eq!(
        check(
            &report,
            "conductor software/apparent version after the rollback"
        )["evidence"],
        "2/1"
    );
    assert_eq!(
        check(&report, "host6 back on Cyborg 17's agent")["passed"],
        true
    );
    assert_eq!(
        check(
            &report,
            "host7's Cyborg 17 agent: its report refused (Fenced)"
        )["passed"],
        true
    );
    assert_eq!(
        check(&report, "finalization refused; the blocker")["evidence"],
        "host6"
    );
    assert_eq!(check(&report, "agents finalized")["evidence"], "6/6");
    // The timeline a person reads has the nine steps and the closing tables.
    for step in 1..=9 {
        assert!(timeline.contains(&format!("[{step}/9]")), "{timeline}");
    }
    assert!(
        timeline.contains("backported to Cyborg 17's version: AttachHandle 1.0"),
        "the backport is shown: {timeline}"
    );
    assert!(timeline.contains("every check passed"), "{timeline}");
}

#[test]
fn the_rolling_upgrade_passes_with_two_agents_and_json_on_stdout() {
    let output = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["demo", "--agents", "2", "--json", "-"])
        .output()
        .expect("accel demo runs");
    assert!(output.status.success(), "{output:?}");
    let report: Value =
        serde_json::from_slice(&output.stdout).expect("stdout is the JSON report alone");
    assert_complete(&report, 2);
}

#[test]
fn a_single_agent_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["demo", "--agents", "1"])
        .output()
        .expect("accel demo runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 2"));
}

/// Cyborg 17 has no PostgreSQL: a demo asked to run on it is refused, naming what it
/// runs on.
#[test]
fn a_postgresql_database_is_refused_for_cyborg_17() {
    let output = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args([
            "demo",
            "--database-url",
            "postgres://v:secret@127.0.0.1:1/demo",
        ])
        .output()
        .expect("accel demo runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("MySQL/MariaDB or SQLite"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rolling_upgrade_passes_on_rabbitmq_and_mariadb_with_accel_as_processes() {
    let _broker = BROKER.lock().await;
    let rabbit = rabbit_url();
    let database = accel_conductor::testing::mysql_database().await;
    let (report, timeline) = tokio::task::spawn_blocking(move || {
        demo(&["--transport-url", &rabbit, "--database-url", &database])
    })
    .await
    .expect("demo thread");
    assert_complete(&report, 6);
    assert!(report["transport"]
        .as_str()
        .unwrap_or("")
        .starts_with("rabbit://"));
    assert!(report["database"]
        .as_str()
        .unwrap_or("")
        .starts_with("mysql://"));
    // accel's components ran as processes: the pinned agent exited 2.
    assert_eq!(check(&report, "accel agent exit code")["evidence"], "2");
    assert!(timeline.contains("every check passed"), "{timeline}");
}

/// `accel demo --from cyborg`: release N is OpenStack Cyborg 17 itself (the pinned
/// openstack-cyborg 17.0.0's conductor, API and agents on RabbitMQ and the real
/// Placement), taken to accel node by node, accel on Cyborg's own database, taken in
/// place. Uses `VERSO_TEST_PYTHON` and `VERSO_TEST_KEYSTONE_URL` (the demo's defaults for
/// its Cyborg options).
#[tokio::test(flavor = "multi_thread")]
async fn the_rolling_upgrade_from_cyborg_17_passes() {
    let (report, timeline) = demo_from_cyborg(&[]).await;
    assert_from_cyborg_passed(&report, &timeline);
    assert_eq!(
        check(&report, "accel db sync took Cyborg 17's database in place")["passed"],
        true
    );
    assert!(
        timeline.contains("Cyborg's database taken in place"),
        "{timeline}"
    );
    // The control plane a service at a time: Cyborg 17's own API on accel's conductor.
    for name in [
        "devices Cyborg's own API lists, unchanged",
        "a profile made through Cyborg's own API by accel's conductor (HTTP status)",
        "a request made through Cyborg's own API by accel's conductor (HTTP status)",
        "the request and the profile deleted through Cyborg's own API (HTTP statuses)",
        "requests Cyborg's own API lists, unchanged (the bound ones still Bound)",
    ] {
        assert_eq!(check(&report, name)["passed"], true, "{name}");
    }
}

/// The same upgrade with accel's database on MariaDB, as a Cyborg deployment's is:
/// Cyborg's rows imported into it, the conductor, the API, the fleet record and
/// finalization all on MySQL.
#[tokio::test(flavor = "multi_thread")]
async fn the_rolling_upgrade_from_cyborg_17_passes_with_accel_on_mariadb() {
    let database = accel_conductor::testing::mysql_database().await;
    let (report, timeline) = demo_from_cyborg(&["--database-url", &database]).await;
    assert!(report["database"]
        .as_str()
        .unwrap_or("")
        .starts_with("mysql://"));
    assert_from_cyborg_passed(&report, &timeline);
    assert!(timeline.contains("accel db import-cyborg: "), "{timeline}");
    // Imported, Cyborg's API would read the old database: it is not started again.
    assert!(!timeline.contains("Cyborg's own API"), "{timeline}");
}

/// `accel demo --from cyborg --agents 2` on the test broker, with `extra` arguments.
async fn demo_from_cyborg(extra: &[&str]) -> (Value, String) {
    let _broker = BROKER.lock().await;
    let mut args: Vec<String> = ["--from", "cyborg", "--agents", "2", "--transport-url"]
        .into_iter()
        .map(String::from)
        .collect();
    args.push(rabbit_url());
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        demo(&args)
    })
    .await
    .expect("demo thread")
}

/// Every step and check of `accel demo --from cyborg --agents 2` passed, with the
/// figures that prove them.
fn assert_from_cyborg_passed(report: &Value, timeline: &str) {
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["release_n"], "cyborg-17");
    assert_eq!(step_numbers(report), (1..=9).collect::<Vec<_>>());
    for step in 1..=9 {
        assert!(timeline.contains(&format!("[{step}/9]")), "{timeline}");
    }
    // The figures that prove the steps: Cyborg's own API made and bound the requests,
    // accel holds exactly them after the import, Cyborg's agents report to accel and
    // block finalization by name, and a late Cyborg agent is fenced.
    assert_eq!(
        check(report, "requests Bound, one per host (Cyborg's API)")["evidence"],
        "2"
    );
    for name in [
        "Cyborg 17's database taken as it is (no schema made)",
        "a request made through Cyborg's API by accel's conductor (HTTP status)",
        "requests Cyborg's API lists, unchanged (the bound ones still Bound)",
        "devices accel's Cyborg 17 API lists, unchanged",
        "a request made through accel's Cyborg 17 API by accel's conductor (HTTP status)",
        "the request and the profile deleted through accel's Cyborg 17 API (HTTP statuses)",
        "requests accel's Cyborg 17 API lists, unchanged (the bound ones still Bound)",
        "devices accel's API lists are Cyborg's (same UUIDs)",
        "requests accel's API lists are Cyborg's",
        "their reports found Cyborg's rows as taken over",
        "Cyborg's fake FPGAs kept while bound",
        "a host on Cyborg's wire answers Cyborg's agent API 1.1 (cleanup_device)",
    ] {
        assert_eq!(check(report, name)["passed"], true, "{name}");
    }
    assert_eq!(
        check(report, "Cyborg 17 agents reporting to accel's conductor")["evidence"],
        "2"
    );
    let blockers = check(report, "finalization refused; the blockers")["evidence"]
        .as_str()
        .expect("evidence")
        .to_owned();
    assert!(
        blockers.contains("-host1,") && blockers.ends_with("-host2"),
        "{blockers}"
    );
    assert_eq!(check(report, "conductor finalized first")["evidence"], "2");
    assert_eq!(check(report, "agents finalized")["evidence"], "2/2");
    let components = report["components"].as_array().expect("components");
    assert_eq!(components.len(), 3, "{components:#?}");
    assert!(components
        .iter()
        .all(|c| c["software"] == 2 && c["apparent"] == 2));
    assert!(
        timeline.contains(
            "rolling upgrade OpenStack Cyborg 17 -> accel N+1 with 2 agents: every check passed"
        ),
        "{timeline}"
    );
}
