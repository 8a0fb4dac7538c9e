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
