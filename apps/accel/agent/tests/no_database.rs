//! Agents never touch the database: the agent crate's dependency tree (normal and build
//! dependencies) holds no database driver.

use std::process::Command;

#[test]
fn the_agent_depends_on_no_database_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "accel-agent",
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
            .is_some_and(|l| l.starts_with("accel-agent ")),
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
        assert!(hit.is_none(), "the agent depends on {forbidden}: {hit:?}");
    }
}
