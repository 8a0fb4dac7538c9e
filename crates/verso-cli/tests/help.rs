//! The `verso` binary and the application example answer `--help` with their commands,
//! and a wrong command line exits 2 with clap's message.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;

fn run(bin: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin)
        .args(args)
        .output()
        .expect("run the binary");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_verso_binary_answers_help() {
    let verso = Path::new(env!("CARGO_BIN_EXE_verso"));
    let (code, out, err) = run(verso, &["--help"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("objects"), "{out}");
    let (code, out, err) = run(verso, &["objects", "diff", "--help"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("<OLD>") && out.contains("<NEW>"), "{out}");
    let (code, _, err) = run(verso, &["objects", "diff"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("<OLD>"), "{err}");
}

/// The example `cargo test -p verso-cli` builds beside the test binaries.
#[test]
fn the_application_example_answers_help() {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("examples")
        .join(format!("cyborg{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run through `cargo test -p verso-cli`, which builds the examples",
        bin.display()
    );
    let (code, out, err) = run(&bin, &["objects", "--help"]);
    assert_eq!(code, Some(0), "{err}");
    for command in ["list", "check", "update-lock", "diff", "lint"] {
        assert!(out.contains(command), "{command}: {out}");
    }
}
