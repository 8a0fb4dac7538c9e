//! Release N is frozen: the demo's and the mixed-version tests' claim ("N+1 works with
//! release N as it shipped") holds only while release N stays what it was. Release N is
//! OpenStack Cyborg 17 in Rust, four crates: this one (Cyborg 17's contracts and schema,
//! and release N's Keystone session) and `accel-cyborg17-conductor`, `-api` and
//! `-agent`. This test hashes their own files ([`FROZEN_PATHS`]: manifests, sources, the
//! object lock and the schema; not their tests, not the Python peers the tests run, not
//! `src/testing.rs`) and fails when they no longer match `FROZEN.sha256`, so release N
//! is never changed in passing while N+1 is worked on.
//!
//! The hash covers all of release N's code because release N depends on no crate of
//! N+1 but verso's (`crates/`): what it took from accel's N+1 crates (the Keystone
//! session, the agent's discovery and report form, the HTTP layer) is copied into it.
//! [`release_n_depends_on_no_n_plus_1_crate`] fails when one of the four manifests names
//! an `accel-*` crate other than `accel-cyborg17*` again (dev-dependencies excepted: the
//! tests may use N+1's fixtures).
//!
//! A deliberate change (a fix that must reach the release N the demo runs) is re-frozen
//! on purpose:
//!
//! ```sh
//! VERSO_REFREEZE_RELEASE_N=1 cargo test -p accel-cyborg17 --test frozen
//! ```
//!
//! which rewrites `FROZEN.sha256`; the commit says why release N changed. The
//! differential tests against openstack-cyborg 17.0.0 hold what they do for release N
//! (docs/architecture.md, "Release N: Cyborg 17 in Rust, frozen").

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Release N's own files and folders, relative to `apps/accel`.
const FROZEN_PATHS: &[&str] = &[
    "cyborg17/Cargo.toml",
    "cyborg17/objects.lock",
    "cyborg17/schema",
    "cyborg17/src",
    "cyborg17/examples",
    "cyborg17-conductor/Cargo.toml",
    "cyborg17-conductor/src",
    "cyborg17-api/Cargo.toml",
    "cyborg17-api/src",
    "cyborg17-agent/Cargo.toml",
    "cyborg17-agent/src",
];

/// Release N's crates, by folder under `apps/accel`.
const RELEASE_N: &[&str] = &[
    "cyborg17",
    "cyborg17-conductor",
    "cyborg17-api",
    "cyborg17-agent",
];

/// Test support inside a frozen folder, left out of the hash.
const NOT_FROZEN: &[&str] = &["cyborg17/src/testing.rs"];

/// Every file under `path`, relative to `root`; Python's caches and [`NOT_FROZEN`] left
/// out.
fn files(root: &Path, path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        for entry in std::fs::read_dir(path)? {
            let entry = entry?.path();
            if entry.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            files(root, &entry, out)?;
        }
    } else if let Ok(relative) = path.strip_prefix(root) {
        if !NOT_FROZEN.iter().any(|n| relative == Path::new(n)) {
            out.push(relative.to_path_buf());
        }
    }
    Ok(())
}

/// Release N's own files under `root` ([`FROZEN_PATHS`]), relative to it, sorted.
fn frozen_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut all = Vec::new();
    for p in FROZEN_PATHS {
        files(root, &root.join(p), &mut all)?;
    }
    all.sort();
    Ok(all)
}

/// SHA-256 over each file's relative path and contents, in path order.
fn fingerprint(root: &Path) -> std::io::Result<(String, usize)> {
    let all = frozen_files(root)?;
    let mut hash = Sha256::new();
    for relative in &all {
        let text = std::fs::read(root.join(relative))?;
        let name = relative.to_string_lossy();
        hash.update((name.len() as u64).to_le_bytes());
        hash.update(name.as_bytes());
        hash.update((text.len() as u64).to_le_bytes());
        hash.update(&text);
    }
    let hex: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, all.len()))
}

/// `apps/accel`, where the four crates are.
fn apps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn release_n_is_frozen() -> std::io::Result<()> {
    let root = apps();
    let root = root.as_path();
    let (now, count) = fingerprint(root)?;
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("FROZEN.sha256");
    if std::env::var_os("VERSO_REFREEZE_RELEASE_N").is_some() {
        std::fs::write(&file, format!("{now}\n"))?;
        eprintln!("release N re-frozen: {count} files, {now}");
        return Ok(());
    }
    let frozen = std::fs::read_to_string(&file)?;
    assert_eq!(
        frozen.trim(),
        now,
        "release N's files changed ({count} files hashed): release N is frozen. If the \
         change is deliberate, re-freeze with `VERSO_REFREEZE_RELEASE_N=1 cargo test -p \
         accel-cyborg17 --test frozen` and say in the commit why release N changed; \
         otherwise undo the change to apps/accel/cyborg17*"
    );
    Ok(())
}

#[test]
fn the_fingerprint_sees_a_change() -> std::io::Result<()> {
    // A copy of release N's files with one byte changed must fingerprint differently
    // (so the test above can fail), and an unchanged copy the same.
    let root = apps();
    let root = root.as_path();
    let copy = tempfile::tempdir()?;
    for relative in &frozen_files(root)? {
        let to = copy.path().join(relative);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(root.join(relative), &to)?;
    }
    assert_eq!(fingerprint(copy.path())?, fingerprint(root)?);
    let lib = copy.path().join("cyborg17-conductor/src/lib.rs");
    let mut text = std::fs::read(&lib)?;
    text.push(b'\n');
    std::fs::write(&lib, text)?;
    assert_ne!(fingerprint(copy.path())?.0, fingerprint(root)?.0);
    Ok(())
}

/// The `accel-*` crates a manifest's dependencies name (normal, build and
/// target-specific; by package name, so a renamed dependency counts) that are not
/// release N's own (`accel-cyborg17*`).
fn n_plus_1_dependencies(manifest: &str) -> Result<Vec<String>, toml::de::Error> {
    let doc: toml::Table = toml::from_str(manifest)?;
    let mut tables: Vec<&toml::Table> = Vec::new();
    for key in ["dependencies", "build-dependencies"] {
        tables.extend(doc.get(key).and_then(toml::Value::as_table));
    }
    for target in doc
        .get("target")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|t| t.values())
    {
        for key in ["dependencies", "build-dependencies"] {
            tables.extend(target.get(key).and_then(toml::Value::as_table));
        }
    }
    let mut found = Vec::new();
    for table in tables {
        for (name, spec) in table {
            let package = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(name);
            if package.starts_with("accel") && !package.starts_with("accel-cyborg17") {
                found.push(package.to_owned());
            }
        }
    }
    Ok(found)
}

#[test]
fn release_n_depends_on_no_n_plus_1_crate() -> Result<(), Box<dyn std::error::Error>> {
    let root = apps();
    for krate in RELEASE_N {
        let path = root.join(krate).join("Cargo.toml");
        let found = n_plus_1_dependencies(&std::fs::read_to_string(&path)?)?;
        assert!(
            found.is_empty(),
            "{} depends on N+1's {found:?}: release N depends on no N+1 crate but verso's \
             (crates/), so that N+1 cannot change it; copy what it needs into release N \
             (docs/architecture.md, \"Release N: Cyborg 17 in Rust, frozen\")",
            path.display()
        );
    }
    Ok(())
}

#[test]
fn the_dependency_check_sees_n_plus_1_crates() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = r#"
        [dependencies]
        accel-cyborg17 = { path = "../cyborg17" }
        accel-cyborg17-conductor = { path = "../cyborg17-conductor" }
        verso.workspace = true
        keystone = { path = "../keystone", package = "accel-keystone" }
        [target.'cfg(unix)'.dependencies]
        accel-api = { path = "../api" }
        [build-dependencies]
        accel-objects = { path = "../objects" }
        [dev-dependencies]
        accel-agent = { path = "../agent" }
    "#;
    let mut found = n_plus_1_dependencies(manifest)?;
    found.sort();
    assert_eq!(found, ["accel-api", "accel-keystone", "accel-objects"]);
    Ok(())
}
