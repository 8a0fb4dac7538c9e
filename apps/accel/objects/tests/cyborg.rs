//! Release N+1 on Cyborg 17's wire (`accel_objects::cyborg`: Cyborg 17 with the seed
//! spec): `cyborg.lock` matches the code and only adds to Cyborg 17's contracts
//! (`accel-cyborg17`'s `objects.lock`), and the seed spec's classes have the
//! fingerprints oslo.versionedobjects gives them over the installed Cyborg's registry.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::testing::python;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use verso::fingerprint::{fingerprint, ovo_hashed_text};
use verso_cli::{execute, Application};

/// Cyborg 17 with the seed spec: its registry with `DeviceList`, conductor API 1.1.
fn app() -> Application {
    Application::new("cyborg", accel_objects::cyborg::registry())
        .api::<accel_objects::cyborg::ConductorApi>()
        .api::<accel_objects::cyborg::AgentApi>()
        .default_lock(concat!(env!("CARGO_MANIFEST_DIR"), "/cyborg.lock"))
}

/// `cyborg.lock` pins what the seed spec adds, and it adds only: two new list
/// classes; `Device` and `AttachHandle` bumped by a minor version with their fields
/// unchanged (their new remotable methods are the change); every other class of Cyborg
/// 17 as it is; the conductor API's seven methods at 1.0 beside the three of 1.1 (and
/// accel's `report_unchanged` at 1.2); the agent API's three at 1.0 beside the NVMe
/// feature's `cleanup_device` at 1.1.
#[test]
fn the_seed_specs_lock_matches_the_code_and_only_adds_to_cyborg_17() {
    let mut out = Vec::new();
    let ok = execute(Some(&app()), ["verso", "objects", "check"], &mut out).expect("runs");
    assert!(ok, "{}", String::from_utf8_lossy(&out));

    let n = accel_cyborg17::registry();
    let n1 = accel_objects::cyborg::registry();
    let names =
        |r: &verso::Registry| -> Vec<String> { r.schemas().map(|s| s.name.to_string()).collect() };
    let mut added: Vec<String> = names(&n1)
        .into_iter()
        .filter(|c| !names(&n).contains(c))
        .collect();
    added.sort();
    assert_eq!(added, ["AttachHandleList", "DeviceList"]);
    let fields = |s: &verso::ObjectSchema| -> Vec<(String, String, bool)> {
        s.fields
            .iter()
            .map(|f| (f.name.to_string(), f.ty.to_string(), f.nullable))
            .collect()
    };
    for schema in n.schemas() {
        let again = n1.schema(schema.name).expect("kept");
        match schema.name {
            "Device" | "AttachHandle" => {
                assert_eq!(
                    again.version.major(),
                    schema.version.major(),
                    "{}",
                    schema.name
                );
                assert_eq!(
                    again.version.minor(),
                    schema.version.minor() + 1,
                    "{}",
                    schema.name
                );
                assert_eq!(fields(again), fields(schema), "{}", schema.name);
                assert!(schema.methods.is_empty() && !again.methods.is_empty());
            }
            _ => assert_eq!(
                verso::fingerprint::fingerprint(again),
                verso::fingerprint::fingerprint(schema),
                "{} changed",
                schema.name
            ),
        }
    }
    use verso_rpc::RpcApi;
    let old = accel_cyborg17::rpc::ConductorApi::methods();
    let new = accel_objects::cyborg::ConductorApi::methods();
    for m in &old {
        let kept = new.iter().find(|n| n.name == m.name).expect("kept");
        assert_eq!(kept.since, m.since, "{}", m.name);
    }
    let mut added: Vec<(&str, String)> = new
        .iter()
        .filter(|n| !old.iter().any(|m| m.name == n.name))
        .map(|n| (n.name.as_str(), n.since.to_string()))
        .collect();
    added.sort();
    assert_eq!(
        added,
        [
            ("object_action", "1.1".to_owned()),
            ("object_backport_versions", "1.1".to_owned()),
            ("object_class_action_versions", "1.1".to_owned()),
            // accel's own addition, after the seed spec's.
            ("report_unchanged", "1.2".to_owned()),
        ]
    );
    // The agent API: Cyborg 17's three methods at 1.0, the NVMe feature's one at 1.1.
    let old = accel_cyborg17::rpc::AgentApi::methods();
    let new = accel_objects::cyborg::AgentApi::methods();
    for m in &old {
        let kept = new.iter().find(|n| n.name == m.name).expect("kept");
        assert_eq!((kept.since, &kept.args), (m.since, &m.args), "{}", m.name);
    }
    let added: Vec<(&str, String)> = new
        .iter()
        .filter(|n| !old.iter().any(|m| m.name == n.name))
        .map(|n| (n.name.as_str(), n.since.to_string()))
        .collect();
    assert_eq!(added, [("cleanup_device", "1.1".to_owned())]);
}

/// The seed spec's classes (`accel_objects::cyborg`: `DeviceList`,
/// `AttachHandleList`, `Device` 1.6, `AttachHandle` 1.1) have the fingerprints
/// oslo.versionedobjects gives the same classes declared over the installed Cyborg's
/// registry (`python/cyborg_indirection.py`): fields (with the `created_at` and
/// `updated_at` every `CyborgObject` has), remotable methods and their arguments, a
/// list's empty `child_versions`.
#[test]
fn the_seed_specs_classes_have_ovos_fingerprints() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cyborg17/python/cyborg_indirection.py");
    let out = Command::new(python())
        .arg(&script)
        .arg("fingerprint")
        .output()
        .expect("the test Python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: BTreeMap<String, String> = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(theirs.len(), 4, "{theirs:?}");
    let registry = accel_objects::cyborg::registry();
    for (name, expected) in &theirs {
        let ours = registry.schema(name).expect("registered");
        assert_eq!(
            &fingerprint(ours),
            expected,
            "{name}: verso hashed {}",
            ovo_hashed_text(ours)
        );
    }
}
