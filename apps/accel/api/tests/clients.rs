//! The OpenStack clients against accel's API, serving through a conductor on a fresh
//! SQLite file: `tests/clients/lifecycle.py` drives an accelerator request's life as
//! Nova and openstacksdk 4.22 do (profile by name, create, bind to the provider Placement
//! picked (`device_rp_uuid`) and unbind by both PATCH
//! forms, read by instance, delete by instance and by UUID, profiles deleted by UUID and
//! by `?value=`), and `openstack accelerator ...` (python-openstackclient 10.5 with
//! python-cyborgclient 3.0's commands) lists, creates, shows and deletes. Both need the
//! test virtualenv (`$VERSO_TEST_PYTHON`, default `.venv/bin/python`, from
//! `requirements-test.txt`; `openstack` is beside that Python).

mod support;

use accel_conductor::db::ReportedDevice;
use serde_json::Value;
use std::process::Command;
use support::{device, Api};

/// `openstack --os-auth-type none --os-endpoint BASE ARGS... -f json`, parsed (commands
/// that print nothing give `Null`); panics with the output when it fails.
fn openstack(base: &str, args: &[&str]) -> Value {
    let python = python();
    let bin = std::path::Path::new(&python).with_file_name("openstack");
    let out = Command::new(&bin)
        .args(["--os-auth-type", "none", "--os-endpoint", base])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs (scripts/test.sh makes .venv): {e}", bin.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "openstack {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    }
}

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
    // The FPGA's resource class, as agents report it: Nova's bind names its provider.
    let mut fpga = device("0000:3b:00.0", "FPGA", 1);
    fpga.attributes = [("rc".to_owned(), "FPGA".to_owned())].into_iter().collect();
    api.db.report("h1", &[fpga, gpu]).await.expect("report h1");
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

#[tokio::test]
async fn the_openstack_cli_runs_devices_profiles_and_requests() {
    let (db, _dir) = support::sqlite().await;
    let api = Api::start_through_conductor(db).await;
    api.db
        .report("h1", &[device("0000:3b:00.0", "FPGA", 1)])
        .await
        .expect("report h1");
    let base = api.base.clone();
    let seen = tokio::task::spawn_blocking(move || {
        let devices = openstack(&base, &["accelerator", "device", "list", "-f", "json"]);
        let device = devices[0]["uuid"].as_str().expect("uuid").to_owned();
        openstack(&base, &["accelerator", "device", "disable", &device]);
        let deployables = openstack(&base, &["accelerator", "deployable", "list", "-f", "json"]);
        let created = openstack(
            &base,
            &[
                "accelerator",
                "device",
                "profile",
                "create",
                "cli-fpga",
                "--group",
                "resources:FPGA=1",
                "--description",
                "one FPGA",
                "-f",
                "json",
            ],
        );
        let shown = openstack(
            &base,
            &[
                "accelerator",
                "device",
                "profile",
                "show",
                "cli-fpga",
                "-f",
                "json",
            ],
        );
        let arq = openstack(
            &base,
            &["accelerator", "arq", "create", "cli-fpga", "-f", "json"],
        );
        let uuid = arq["uuid"].as_str().expect("uuid").to_owned();
        let listed = openstack(&base, &["accelerator", "arq", "list", "-f", "json"]);
        let arq_shown = openstack(&base, &["accelerator", "arq", "show", &uuid, "-f", "json"]);
        openstack(&base, &["accelerator", "arq", "delete", &uuid]);
        let after = openstack(&base, &["accelerator", "arq", "list", "-f", "json"]);
        openstack(
            &base,
            &["accelerator", "device", "profile", "delete", "cli-fpga"],
        );
        let profiles = openstack(
            &base,
            &["accelerator", "device", "profile", "list", "-f", "json"],
        );
        (
            devices,
            deployables,
            created,
            shown,
            arq,
            listed,
            arq_shown,
            after,
            profiles,
        )
    })
    .await
    .expect("join");
    let (devices, deployables, created, shown, arq, listed, arq_shown, after, profiles) = seen;
    assert_eq!(devices[0]["type"], "FPGA", "{devices}");
    // `device disable` put it into maintenance.
    let rows = api
        .db
        .devices(&accel_conductor::db::ListFilter::default())
        .await
        .expect("devices");
    assert!(rows[0].maintaining, "{rows:?}");
    assert_eq!(devices[0]["hostname"], "h1", "{devices}");
    assert_eq!(
        deployables.as_array().map(Vec::len),
        Some(1),
        "{deployables}"
    );
    assert_eq!(created["name"], "cli-fpga", "{created}");
    assert_eq!(shown["uuid"], created["uuid"], "{shown}");
    assert_eq!(shown["description"], "one FPGA", "{shown}");
    assert_eq!(arq["state"], "Initial", "{arq}");
    assert_eq!(arq["device_profile_name"], "cli-fpga", "{arq}");
    assert_eq!(listed[0]["uuid"], arq["uuid"], "{listed}");
    assert_eq!(arq_shown["uuid"], arq["uuid"], "{arq_shown}");
    assert_eq!(after, serde_json::json!([]));
    assert_eq!(profiles, serde_json::json!([]));
    assert!(api.db.arqs(None).await.expect("arqs").is_empty());
}

/// `openstack accelerator device attribute create|list|show|delete` (python-cyborgclient 3.0):
/// the reported attributes listed beside an operator's, which is created (the CLI sends
/// the deployable id as text) and deleted.
#[tokio::test]
async fn the_openstack_cli_runs_attributes() {
    let (db, _dir) = support::sqlite().await;
    let api = Api::start_through_conductor(db).await;
    let mut fpga = device("0000:3b:00.0", "FPGA", 1);
    fpga.attributes = [("rc".to_owned(), "FPGA".to_owned())].into_iter().collect();
    api.db.report("h1", &[fpga]).await.expect("report h1");
    let dep_id = api
        .db
        .deployables(&accel_conductor::db::ListFilter::default())
        .await
        .expect("deployables")[0]
        .id
        .to_string();
    let base = api.base.clone();
    let (created, listed, shown, after) = tokio::task::spawn_blocking(move || {
        let created = openstack(
            &base,
            &[
                "accelerator",
                "device",
                "attribute",
                "create",
                &dep_id,
                "owner",
                "team-a",
                "-f",
                "json",
            ],
        );
        let listed = openstack(
            &base,
            &["accelerator", "device", "attribute", "list", "-f", "json"],
        );
        let uuid = created["uuid"].as_str().expect("uuid").to_owned();
        let shown = openstack(
            &base,
            &[
                "accelerator",
                "device",
                "attribute",
                "show",
                &uuid,
                "-f",
                "json",
            ],
        );
        openstack(
            &base,
            &["accelerator", "device", "attribute", "delete", &uuid],
        );
        let after = openstack(
            &base,
            &["accelerator", "device", "attribute", "list", "-f", "json"],
        );
        (created, listed, shown, after)
    })
    .await
    .expect("join");
    assert_eq!(
        (&created["key"], &created["value"]),
        (&serde_json::json!("owner"), &serde_json::json!("team-a")),
        "{created}"
    );
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v
            .as_array()
            .expect("list")
            .iter()
            .map(|a| a["key"].as_str().unwrap_or("").to_owned())
            .collect();
        k.sort();
        k
    };
    assert_eq!(keys(&listed), ["owner", "rc"], "{listed}");
    assert_eq!(shown["uuid"], created["uuid"], "{shown}");
    assert_eq!(keys(&after), ["rc"], "{after}");
}
