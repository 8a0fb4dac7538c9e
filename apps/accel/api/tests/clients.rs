//! The OpenStack clients against accel's API: `tests/clients/lifecycle.py` drives an
//! accelerator request's life as Nova and openstacksdk 4.22 do (profile by name,
//! create, bind and unbind by both PATCH forms, read by instance, delete by instance
//! and by UUID, profiles deleted by UUID and by `?value=`), against the API serving
//! through a conductor on a fresh SQLite file. It needs the Python at
//! `$VERSO_TEST_PYTHON` (default `.venv/bin/python`, from `requirements-test.txt`).

mod support;

use accel_conductor::db::ReportedDevice;
use serde_json::Value;
use std::process::Command;
use support::{device, Api};

fn python() -> String {
    std::env::var("VERSO_TEST_PYTHON").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../.venv/bin/python").to_owned()
    })
}

#[tokio::test]
async fn openstacksdk_and_novas_calls_run_a_requests_life() {
    let (db, _dir) = support::sqlite().await;
    let api = Api::start_through_conductor(db).await;
    // An FPGA of vendor 10ee and a GPU of another vendor, on h1.
    let gpu = ReportedDevice {
        vendor: "10de".to_owned(),
        ..device("0000:3c:00.0", "GPU", 1)
    };
    api.db
        .report("h1", &[device("0000:3b:00.0", "FPGA", 1), gpu])
        .await
        .expect("report h1");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/lifecycle.py");
    let base = api.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python())
            .args([script, &base, "h1"])
            .output()
            .expect("the test Python runs (scripts/test.sh makes .venv)")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lifecycle.py failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(
        seen["profiles_by_two_names"],
        serde_json::json!(["sdk-fpga", "sdk-gpu"])
    );
    assert_eq!(seen["devices_of_vendor_10ee"], 1, "{seen}");
    assert_eq!(seen["attach_handle_type"], "PCI", "{seen}");
    assert_eq!(
        seen["attach_handle_info"]["address"], "0000:3b:00.0",
        "Nova reads the bound device's address: {seen}"
    );
    // Everything the script made is gone.
    assert!(api.db.arqs(None).await.expect("arqs").is_empty());
}
