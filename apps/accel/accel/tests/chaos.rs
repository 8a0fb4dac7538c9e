//! A short run of the fault campaign (`accel chaos`, which scripts/chaos.sh runs for 30
//! minutes): every kind of fault once, on RabbitMQ and PostgreSQL, with no violation.

use std::process::Command;

#[test]
fn a_short_fault_campaign_runs_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("chaos.json");
    let out = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["chaos", "--duration", "50", "--fault-interval", "3"])
        .args(["--clients", "6", "--agents", "2", "--seed", "7"])
        .arg("--dir")
        .arg(dir.path().join("run"))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("accel chaos runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("summary")).expect("json");
    assert_eq!(summary["violations"], serde_json::json!([]), "{summary:#}");
    let faults = summary["faults"].as_object().expect("faults");
    let injected: u64 = faults.values().filter_map(|v| v.as_u64()).sum();
    assert!(injected >= 6, "faults injected: {summary:#}");
    let ops = summary["answers_by_operation"].as_object().expect("ops");
    let created = ops["create profile"]["201"].as_u64().unwrap_or(0);
    let bound = ops.get("bind").and_then(|b| b["202"].as_u64()).unwrap_or(0);
    let unbound = ops
        .get("unbind")
        .and_then(|b| b["202"].as_u64())
        .unwrap_or(0);
    assert!(
        created > 20 && bound > 5 && unbound > 0,
        "the workload ran: {summary:#}"
    );
}
