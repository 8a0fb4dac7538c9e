//! `verso versions list` and `verso versions lint` over an application's component
//! versions: a declared version nothing uses is a finding.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use verso::Registry;
use verso_cli::{execute, Application};
use verso_upgrade::{component_versions, FileStore, UpgradeAction, VersionManager, VersionUse};

component_versions! {
    /// Test versions.
    pub enum V: "conductor" {
        /// Baseline.
        Initial = 1 => "first release",
        /// Used by a gate.
        Cleanup = 2 => "NVMe cleanup",
        /// Used by an action.
        Schema = 3 => "new column",
        /// Declared, used by nothing yet.
        Pending = 4 => "not wired yet",
    }
}

/// Builds the manager as a service would, on a throwaway store.
fn uses(with_pending: bool) -> Result<Vec<VersionUse>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let m = VersionManager::<V>::builder(FileStore::new(dir.path().join("v")))
            .action(UpgradeAction::new(V::Schema, "add-column"))
            .open()
            .await
            .map_err(|e| e.to_string())?;
        let _gate = m.gate(V::Cleanup, "NVMe cleanup");
        if with_pending {
            let _ = m.config_option(V::Pending, "[nvme] cleanup_command");
        }
        Ok(m.uses())
    })
}

fn run(app: &Application, args: &[&str]) -> (bool, String) {
    let mut out = Vec::new();
    let ok = execute(Some(app), args.iter().copied(), &mut out).expect("runs");
    (ok, String::from_utf8(out).expect("utf-8"))
}

#[test]
fn lint_reports_a_declared_version_nothing_uses() {
    let app = Application::new("demo", Registry::new()).component_versions(|| uses(false));
    let (ok, out) = run(&app, &["verso", "versions", "lint"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("conductor version 4 (Pending) is declared but no gate"),
        "{out}"
    );
    assert!(out.contains("1 finding(s)"), "{out}");
    let (ok, out) = run(&app, &["verso", "versions", "list"]);
    assert!(ok);
    assert!(
        out.contains("conductor 2 Cleanup: NVMe cleanup [gate NVMe cleanup]"),
        "{out}"
    );
    assert!(
        out.contains("conductor 3 Schema: new column [upgrade action add-column]"),
        "{out}"
    );
    assert!(
        out.contains("conductor 4 Pending: not wired yet [unused]"),
        "{out}"
    );
}

#[test]
fn lint_passes_when_every_version_is_used() {
    let app = Application::new("demo", Registry::new()).component_versions(|| uses(true));
    let (ok, out) = run(&app, &["verso", "versions", "lint"]);
    assert!(ok, "{out}");
    assert!(out.contains("0 finding(s)"), "{out}");
}
