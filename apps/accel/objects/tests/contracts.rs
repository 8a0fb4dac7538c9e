//! accel's object contracts: the checked-in `objects.lock` matches the code, and the
//! model has none of the gaps `verso objects lint` finds.

use verso_cli::{execute, Application};

fn app() -> Application {
    Application::new("accel", accel_objects::registry())
        .api::<accel_objects::rpc::ConductorApi>()
        .api::<accel_objects::rpc::AgentApi>()
        .default_lock(concat!(env!("CARGO_MANIFEST_DIR"), "/objects.lock"))
}

#[test]
fn the_checked_in_lock_matches_the_code() {
    let mut out = Vec::new();
    let ok = execute(Some(&app()), ["verso", "objects", "check"], &mut out).expect("runs");
    assert!(ok, "{}", String::from_utf8_lossy(&out));
}

#[test]
fn the_model_has_no_lint_findings() {
    let mut out = Vec::new();
    let ok = execute(Some(&app()), ["verso", "objects", "lint"], &mut out).expect("runs");
    assert!(ok, "{}", String::from_utf8_lossy(&out));
}
