//! Differential test against oslo.versionedobjects: the fuzzer
//! `crates/verso/interop/ovo_fuzz.py` generates random cases whose expects the real
//! Python library computes, and every one runs through the same case runner as the
//! golden vectors (`support/cases.rs`).
//!
//! - `VERSO_TEST_PYTHON`: the Python with oslo.versionedobjects (default
//!   `<workspace>/.venv/bin/python`). Missing Python or library is a failure, not a skip.
//! - `VERSO_FUZZ_SEED` / `VERSO_FUZZ_CASES`: the seed and the number of cases (default
//!   a fixed seed and 2,000 cases) in the default serial namespace, `versioned_object`.
//! - `VERSO_FUZZ_FAMILY_CASES`: the number of cases generated, with the same seed, in
//!   the `cyborg_object` serial namespace (Cyborg's `OBJ_SERIAL_NAMESPACE`; default
//!   1,000), run against the same model declared in that family.
//!
//! On failure it prints the seed and each failing case (name and why), and writes the
//! failing cases to `target/verso-fuzz-failures/seed-<N>[-<serial>].json`, a case file that
//! `VERSO_EXTRA_VECTORS=target/verso-fuzz-failures cargo test -p verso --test
//! conformance` replays.

#[path = "support/cases.rs"]
mod cases;

use cases::{case_name, load_case_file, registry_for, run_case};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const DEFAULT_SEED: u64 = 20_261_203;
const DEFAULT_CASES: usize = 2_000;
const DEFAULT_FAMILY_CASES: usize = 1_000;
/// The other serial namespace the fuzzer runs in.
const FAMILY: &str = "cyborg_object";

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{name}={s:?} is not a number")),
        Err(_) => Ok(default),
    }
}

fn python() -> Result<PathBuf, String> {
    let python = std::env::var_os("VERSO_TEST_PYTHON")
        .map_or_else(|| workspace_root().join(".venv/bin/python"), PathBuf::from);
    let how = "create it with `python3 -m venv .venv && .venv/bin/pip install \
               oslo.versionedobjects oslo.messaging` at the workspace root, or point \
               VERSO_TEST_PYTHON at a Python that has oslo.versionedobjects";
    let out = Command::new(&python)
        .args(["-c", "import oslo_versionedobjects"])
        .output()
        .map_err(|e| format!("cannot run {} ({e}): {how}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import oslo_versionedobjects ({}): {how}",
            python.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or_default()
                .trim()
        ));
    }
    Ok(python)
}

fn generate(
    python: &Path,
    seed: u64,
    count: usize,
    serial: &str,
    out: &Path,
) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/ovo_fuzz.py");
    let status = Command::new(python)
        .arg(&script)
        .args(["generate", "--seed", &seed.to_string()])
        .args(["--count", &count.to_string()])
        .args(["--serial-namespace", serial])
        .arg("--out")
        .arg(out)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} generate failed ({status})", script.display()))
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

fn run() -> Result<bool, String> {
    let seed = env_number("VERSO_FUZZ_SEED", DEFAULT_SEED)?;
    let count = env_number("VERSO_FUZZ_CASES", DEFAULT_CASES)?;
    let family_count = env_number("VERSO_FUZZ_FAMILY_CASES", DEFAULT_FAMILY_CASES)?;
    let python = python()?;
    let default_ok = run_in(
        &python,
        seed,
        count,
        verso::primitive::DEFAULT_SERIAL_NAMESPACE,
    )?;
    let family_ok = run_in(&python, seed, family_count, FAMILY)?;
    Ok(default_ok && family_ok)
}

/// Generates `count` cases in serial namespace `serial` and runs them; whether all pass.
fn run_in(python: &Path, seed: u64, count: usize, serial: &str) -> Result<bool, String> {
    let work = target_dir().join("verso-fuzz");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let default = serial == verso::primitive::DEFAULT_SERIAL_NAMESPACE;
    let tag = if default {
        format!("seed-{seed}")
    } else {
        format!("seed-{seed}-{serial}")
    };
    let generated = work.join(format!("{tag}-{count}.json"));
    generate(python, seed, count, serial, &generated)?;
    let (file_serial, cases) = load_case_file(&generated)?;
    if cases.len() != count {
        return Err(format!("asked for {count} cases, got {}", cases.len()));
    }
    if file_serial != serial {
        return Err(format!(
            "asked for cases in {serial}, the file says {file_serial}"
        ));
    }

    let reg = registry_for(serial)?;
    let mut failing = Vec::new();
    for case in &cases {
        // A panic is a failure of its case, reported like any other.
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_case(&reg, case)))
                .unwrap_or_else(|_| Err("verso panicked".into()));
        if let Err(why) = outcome {
            println!("FAIL {}: {why}", case_name(case));
            failing.push(case.clone());
        }
    }
    let deliberate = cases
        .iter()
        .filter(|c| c.get("deliberate").is_some())
        .count();
    println!(
        "seed {seed}, {serial}: {} passed, {} failed ({deliberate} cases are deliberate differences)",
        cases.len() - failing.len(),
        failing.len()
    );
    if failing.is_empty() {
        return Ok(true);
    }
    let dir = target_dir().join("verso-fuzz-failures");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join(format!("{tag}.json"));
    let doc = serde_json::json!({
        "format": 1,
        "generator": "oslo.versionedobjects 3.12.0 (Python)",
        "model": "ovo-model.json",
        "serial_namespace": serial,
        "group": "fuzz-failures",
        "seed": seed,
        "cases": failing,
    });
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    println!(
        "seed {seed}: failing cases written to {}; replay them with \
         VERSO_EXTRA_VECTORS={} cargo test -p verso --test conformance",
        file.display(),
        dir.display()
    );
    Ok(false)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            println!("FAIL differential test: {e}");
            ExitCode::FAILURE
        }
    }
}
