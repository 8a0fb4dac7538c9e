//! `accel bench fleet` at a tiny size (20 agents, 2 conductors, second-long intervals)
//! on the test broker and PostgreSQL cluster: a smoke test of the benchmark, not a timed
//! test. It checks the result file it writes to `$VERSO_BENCH_OUT` (and `--json`) has
//! the shared schema and sane, non-zero figures.

use serde_json::Value;
use std::process::Command;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn number(cell: &Value) -> f64 {
    cell.as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a number: {cell}"))
}

#[test]
fn a_tiny_fleet_writes_sane_figures() {
    let out = tempfile::tempdir().expect("tempdir");
    let json = out.path().join("copy.json");
    let output = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args([
            "bench",
            "fleet",
            "--agents",
            "20",
            "--conductors",
            "2",
            "--heartbeat-interval",
            "1",
            "--report-interval",
            "2",
            "--heartbeat-window",
            "3",
            "--duration",
            "4",
            "--idle-window",
            "1",
            "--devices",
            "20",
            "--json",
        ])
        .arg(&json)
        .env("VERSO_BENCH_OUT", out.path())
        .env(
            "VERSO_TEST_POSTGRES_URL",
            env_or(
                "VERSO_TEST_POSTGRES_URL",
                "postgres://verso:verso@127.0.0.1:55432/verso",
            ),
        )
        .env(
            "VERSO_TEST_RABBIT_URL",
            env_or(
                "VERSO_TEST_RABBIT_URL",
                "rabbit://guest:guest@127.0.0.1:5672/",
            ),
        )
        .output()
        .expect("run accel bench fleet");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "accel bench fleet failed:\n{text}");

    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("fleet.json")).expect("fleet.json written"),
    )
    .expect("fleet.json is JSON");
    let copy: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("--json written"))
            .expect("--json is JSON");
    assert_eq!(
        file, copy,
        "--json and $VERSO_BENCH_OUT get the same results"
    );

    assert_eq!(file["schema"], 1);
    assert_eq!(file["bench"], "fleet");
    for key in ["title", "command", "machine", "started", "summary"] {
        assert!(
            file[key].as_str().is_some_and(|s| !s.is_empty()),
            "{key} missing: {file}"
        );
    }
    assert!(file["command"]
        .as_str()
        .is_some_and(|c| c.contains("bench fleet --agents 20")));
    // The agents' default wire: Cyborg's.
    assert!(
        file["title"]
            .as_str()
            .is_some_and(|t| t.contains("on Cyborg's wire")),
        "{}",
        file["title"]
    );

    let table = &file["tables"][0];
    let columns: Vec<&str> = table["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let rows = table["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "one case: {table}");
    let cell = |name: &str| {
        let i = columns
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no column {name}"));
        rows[0][i].clone()
    };
    assert_eq!(number(&cell("agents")), 20.0);
    assert_eq!(number(&cell("conductors")), 2.0);
    // 20 agents heartbeating every second: about 20 a second.
    let heartbeats = number(&cell("heartbeats/s"));
    assert!(
        (5.0..=40.0).contains(&heartbeats),
        "heartbeats/s {heartbeats}"
    );
    assert!(number(&cell("reports/s")) > 0.0);
    let p50 = number(&cell("heartbeat p50 ms"));
    assert!(p50 > 0.0 && p50 <= number(&cell("heartbeat p99 ms")));
    // Idle CPU: both quiet windows, then each ("0.9 (1.0/0.8)"): the conductors'
    // timers and refresh spend something, and the whole is between its parts.
    let idle = cell("idle CPU ms/s (before/after)");
    let idle: Vec<f64> = idle
        .as_str()
        .expect("idle")
        .split(['(', '/', ')', ' '])
        .filter(|s| !s.is_empty())
        .map(|m| m.parse().expect("ms/s"))
        .collect();
    assert_eq!(idle.len(), 3, "{idle:?}");
    assert!(idle[0] > 0.0, "{idle:?}");
    assert!(
        idle[0] >= idle[1].min(idle[2]) - 0.05 && idle[0] <= idle[1].max(idle[2]) + 0.05,
        "{idle:?}"
    );
    assert!(number(&cell("CPU ms/heartbeat")) > 0.0);
    assert!(number(&cell("CPU ms/report")) >= 0.0);
    // Every agent reported at least once in the steady window, by digest.
    let digest = cell("by digest");
    let (by_digest, reports) = digest
        .as_str()
        .and_then(|d| d.split_once('/'))
        .expect("by digest is n/m");
    assert!(by_digest.parse::<u64>().expect("n") >= 20, "{digest}");
    assert!(reports.parse::<u64>().expect("m") >= 20, "{digest}");
    let rss = cell("RSS MiB");
    let rss: Vec<f64> = rss
        .as_str()
        .expect("rss")
        .split_whitespace()
        .map(|m| m.parse().expect("MiB"))
        .collect();
    assert_eq!(rss.len(), 2, "one RSS per conductor");
    assert!(rss.iter().all(|m| *m > 1.0), "{rss:?}");
    let finalize = number(&cell("finalize s"));
    assert!(finalize > 0.0 && finalize < 30.0, "finalize {finalize}");

    let charts = file["charts"].as_array().expect("charts");
    let ids: Vec<&str> = charts.iter().filter_map(|c| c["id"].as_str()).collect();
    assert_eq!(ids, ["fleet-latency", "fleet-cpu", "fleet-finalize"]);
    for chart in charts {
        for series in chart["series"].as_array().expect("series") {
            let points = series["points"].as_array().expect("points");
            assert!(!points.is_empty(), "{series}");
            assert_eq!(points[0][0], 20.0);
        }
    }
    let targets = file["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 3, "{targets:?}");
    for t in targets {
        assert!(t["met"].is_boolean() && t["value"].is_number(), "{t}");
        assert!(t["better"] == "lower" || t["better"] == "higher", "{t}");
    }
}
