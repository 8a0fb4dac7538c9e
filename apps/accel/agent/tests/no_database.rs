//! Agents never touch the database: the dependency trees (normal and build dependencies)
//! of accel's agent and of Cyborg 17's agent in Rust (`accel-cyborg17-agent`) hold no
//! database driver.
// A failed `cargo tree` fails the test with its message.
#![allow(clippy::expect_used)]

use std::process::Command;

#[test]
fn the_agents_depend_on_no_database_crate() {
    for agent in ["accel-agent", "accel-cyborg17-agent"] {
        no_database_under(agent);
    }
}

fn no_database_under(package: &str) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            package,
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.lines()
            .next()
            .is_some_and(|l| l.starts_with(&format!("{package} "))),
        "{tree}"
    );
    for forbidden in [
        "sqlx",
        "postgres",
        "tokio-postgres",
        "rusqlite",
        "libsqlite3-sys",
        "diesel",
        "sea-orm",
    ] {
        let hit = tree
            .lines()
            .find(|l| l.split_whitespace().next() == Some(forbidden));
        assert!(hit.is_none(), "{package} depends on {forbidden}: {hit:?}");
    }
}
