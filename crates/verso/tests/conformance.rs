//! Conformance with oslo.versionedobjects: runs every golden vector of
//! `tests/vectors/ovo/*.json` (and of `$VERSO_EXTRA_VECTORS/*.json` when set) against the
//! cyborg example model in the file's serial namespace (`versioned_object`, or
//! `cyborg_object` for the `cyborg_object_*.json` files), and prints one line per failing
//! case and `N passed, N failed`.
//!
//! A case that cannot be run (an unknown `op`, a malformed case) is a failure, not a skip.

#[path = "support/cases.rs"]
mod cases;

use cases::{case_name, json_files, load_case_file, registry_for, run_case};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn vector_dir() -> PathBuf {
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/ovo");
    std::env::var_os("VERSO_VECTORS").map_or(vendored, PathBuf::from)
}

fn main() -> ExitCode {
    let mut dirs = vec![vector_dir()];
    if let Some(extra) = std::env::var_os("VERSO_EXTRA_VECTORS") {
        // cargo runs tests in the package directory: a relative directory that is not
        // there is read from the workspace root, where the command was likely typed.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        dirs.extend(std::env::split_paths(&extra).map(|d| {
            if d.is_relative() && !d.exists() {
                root.join(d)
            } else {
                d
            }
        }));
    }
    let (mut passed, mut failed) = (0usize, 0usize);
    for dir in &dirs {
        let files = match json_files(dir) {
            Ok(f) => f,
            Err(e) => {
                println!("FAIL {e}");
                failed += 1;
                continue;
            }
        };
        for file in files {
            // Each file is run against the model in its serial namespace.
            let (cases, reg) = match load_case_file(&file)
                .and_then(|(serial, cases)| Ok((cases, registry_for(&serial)?)))
            {
                Ok(c) => c,
                Err(e) => {
                    println!("FAIL {e}");
                    failed += 1;
                    continue;
                }
            };
            for case in &cases {
                match run_case(&reg, case) {
                    Ok(()) => passed += 1,
                    Err(why) => {
                        failed += 1;
                        println!(
                            "FAIL {} ({}): {why}",
                            case_name(case),
                            file.file_name()
                                .map(|f| f.to_string_lossy())
                                .unwrap_or_default()
                        );
                    }
                }
            }
        }
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 || passed == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
