//! Release N is frozen: the demo's and the mixed-version tests' claim ("N+1 works with
//! release N as it shipped") holds only while release N stays what it was. Release N is
//! OpenStack Cyborg 17 in Rust, four crates: this one (Cyborg 17's contracts and schema)
//! and `accel-cyborg17-conductor`, `-api` and `-agent`. This test hashes their own
//! files ([`FROZEN_PATHS`]: manifests, sources, the object lock and the schema; not
//! their tests, not the Python peers the tests run, not `src/testing.rs`) and fails
//! when they no longer match `FROZEN.sha256`, so release N is never changed in passing
//! while N+1 is worked on.
//!
//! A deliberate change (a fix that must reach the release N the demo runs, or a change
//! forced by a crate release N still shares with N+1: the agent's sysfs discovery and
//! report form in `accel-agent`, the HTTP layer in `accel-api`) is re-frozen on purpose:
//!
//! ```sh
//! VERSO_REFREEZE_RELEASE_N=1 cargo test -p accel-cyborg17 --test frozen
//! ```
//!
//! which rewrites `FROZEN.sha256`; the commit says why release N changed. What the test
//! cannot see: the N+1 crates release N still depends on (`accel-agent`, `accel-api`,
//! `accel-conductor`'s row types, `accel-keystone`); the differential tests against
//! openstack-cyborg 17.0.0 hold what they do for release N (docs/architecture.md,
//! "Release N: Cyborg 17 in Rust, frozen").

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
