//! A Python agent written with oslo.versionedobjects, one release behind (Device 1.1,
//! DeviceList 1.1), uses the example conductor (`examples/conductor.rs`, started here as
//! the real binary) over RabbitMQ: remotable class and instance methods run on the
//! conductor and come back backported to the agent's manifest in the same reply.
//!
//! Needs RabbitMQ (`VERSO_TEST_RABBIT_URL`, default `rabbit://guest:guest@127.0.0.1:5672/`)
//! and a Python with oslo.messaging (`VERSO_TEST_PYTHON`, default `.venv/bin/python`);
//! `.ci/run` provides both, and a missing one fails the test with what to do.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // as the interop and TLS suites: the shared support module unwraps

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use support::{example_binary, start_ready, unique_topic, Env};

#[test]
fn python_agent_runs_remotable_methods_on_the_verso_conductor() {
    let Env { url, python } = Env::get();
    let topic = unique_topic("cyborg-conductor");
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/cyborg-seed.json");
    let mut conductor = Command::new(example_binary("conductor"));
    conductor
        .args(["--transport-url", &url, "--topic", &topic, "--seed"])
        .arg(&seed)
        .stderr(Stdio::inherit());
    let _conductor = start_ready(conductor, "the example conductor");

    let out = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/cyborg_agent.py"))
        .args([
            "--transport-url",
            &url,
            "--topic",
            &topic,
            "--hostname",
            "host1",
        ])
        .args(["--uuid", "5d5a3e0b-6b2f-4b9a-9d0c-000000000002"])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "python agent failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");

    // DeviceList.get_by_hostname: one reply, backported to the agent's DeviceList 1.1.
    assert_eq!(got["list"]["version"], "1.1", "{got}");
    let members = got["members"].as_array().expect("members");
    assert_eq!(members.len(), 2, "{got}");
    for m in members {
        assert_eq!(m["version"], "1.1", "{got}");
        let fields: Vec<&str> = m["fields"]
            .as_array()
            .expect("fields")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            fields.contains(&"vendor_board_info") && !fields.contains(&"managed_mode"),
            "{got}"
        );
    }
    // Device.get_by_uuid, then save() through object_action: the change reached the store
    // and the agent's change tracking came back reset.
    assert_eq!(got["device"]["version"], "1.1", "{got}");
    assert_eq!(got["after_save_changes"], serde_json::json!([]), "{got}");
    assert_eq!(got["saved_vendor_board_info"], "from-python", "{got}");
    // A body's error reaches the Python agent with its kind.
    assert_eq!(got["missing"], "DeviceNotFound", "{got}");
}
