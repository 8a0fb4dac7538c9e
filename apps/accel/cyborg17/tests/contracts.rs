//! Cyborg 17's contracts are pinned: the checked-in `objects.lock` matches the code, so
//! a change of this crate that would leave Cyborg 17's wire fails here even where the
//! Python package is not installed (`tests/cyborg.rs` checks the lock's source, the
//! code, against the package itself).

use verso_cli::{execute, Application};

fn app() -> Application {
    Application::new("cyborg", accel_cyborg17::registry())
        .api::<accel_cyborg17::rpc::ConductorApi>()
        .api::<accel_cyborg17::rpc::AgentApi>()
        .default_lock(concat!(env!("CARGO_MANIFEST_DIR"), "/objects.lock"))
}

/// Cyborg 17 with the seed spec: its registry with `DeviceList`, conductor API 1.1.
fn app_with_indirection() -> Application {
    Application::new("cyborg", accel_cyborg17::indirection::registry())
        .api::<accel_cyborg17::indirection::ConductorApi>()
        .api::<accel_cyborg17::indirection::AgentApi>()
        .default_lock(concat!(env!("CARGO_MANIFEST_DIR"), "/indirection.lock"))
}

#[test]
fn the_checked_in_lock_matches_the_code() {
    let mut out = Vec::new();
    let ok = execute(Some(&app()), ["verso", "objects", "check"], &mut out).expect("runs");
    assert!(ok, "{}", String::from_utf8_lossy(&out));
}

/// `indirection.lock` pins what the seed spec adds, and it adds only: two new list
/// classes; `Device` and `AttachHandle` bumped by a minor version with their fields
/// unchanged (their new remotable methods are the change); every other class of Cyborg
/// 17 as it is; the conductor API's seven methods at 1.0 beside the three of 1.1; the
/// agent API's three at 1.0 beside the NVMe feature's `cleanup_device` at 1.1.
#[test]
fn the_seed_specs_lock_matches_the_code_and_only_adds_to_cyborg_17() {
    let mut out = Vec::new();
    let ok = execute(
        Some(&app_with_indirection()),
        ["verso", "objects", "check"],
        &mut out,
    )
    .expect("runs");
    assert!(ok, "{}", String::from_utf8_lossy(&out));

    let n = accel_cyborg17::registry();
    let n1 = accel_cyborg17::indirection::registry();
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
    let new = accel_cyborg17::indirection::ConductorApi::methods();
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
        ]
    );
    // The agent API: Cyborg 17's three methods at 1.0, the NVMe feature's one at 1.1.
    let old = accel_cyborg17::rpc::AgentApi::methods();
    let new = accel_cyborg17::indirection::AgentApi::methods();
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

/// Cyborg 17 declares no `obj_relationships`: its nested objects are backported by the
/// peer's manifest only (a backport without one fails, in Cyborg as here). The lint
/// names exactly those fields and nothing else.
#[test]
fn the_lint_finds_only_what_cyborg_17_itself_has() {
    let mut out = Vec::new();
    let ok = execute(Some(&app()), ["verso", "objects", "lint"], &mut out).expect("runs");
    let text = String::from_utf8_lossy(&out);
    assert!(!ok, "the lint has findings: {text}");
    let mut found: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once(" "))
        .filter(|(_, rest)| rest.starts_with('['))
        .map(|(field, rest)| {
            assert!(rest.starts_with("[object-field-no-relationship]"), "{text}");
            field
        })
        .collect();
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "DriverDeployable.attach_handle_list",
            "DriverDeployable.attribute_list",
            "DriverDevice.controlpath_id",
            "DriverDevice.deployable_list",
            "ExtARQ.arq",
            "FPGAExtARQ.arq",
        ],
        "{text}"
    );
}
