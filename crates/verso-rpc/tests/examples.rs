//! The examples as a newcomer runs them: `--help` works, the sample configuration the
//! README points at is shipped and reads, and bad input exits non-zero with a message.
//! No broker needed: the binaries are the ones `cargo test -p verso-rpc` builds beside
//! the test binaries.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run through `cargo test -p verso-rpc`, which builds the examples",
        bin.display()
    );
    let mut cmd = Command::new(bin);
    // As the README runs them: from the workspace root, with no caps in the environment.
    cmd.current_dir(root())
        .env_remove("VERSO_UPGRADE_LEVELS_CONDUCTOR")
        .env_remove("VERSO_UPGRADE_LEVELS_AGENT");
    cmd
}

fn run(cmd: &mut Command) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run the example");
    (
        status.code(),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

#[test]
fn every_example_answers_help() {
    for (name, options) in [
        ("rpc_client", &["--transport-url", "--timeout", "--cap"][..]),
        ("rpc_server", &["--transport-url", "--topic", "--server"]),
        ("conductor", &["--transport-url", "--seed"]),
        ("show_config", &["--config", "--set", "--show-config"]),
    ] {
        let (code, out, err) = run(example(name).arg("--help"));
        assert_eq!(code, Some(0), "{name} --help: {err}");
        for o in options {
            assert!(out.contains(o), "{name} --help does not name {o}:\n{out}");
        }
    }
}

#[test]
fn the_client_timeout_defaults_to_the_librarys() {
    let (_, out, _) = run(example("rpc_client").arg("--help"));
    let default = format!("[default: {}]", verso_rpc::DEFAULT_TIMEOUT.as_secs());
    let line = out
        .lines()
        .skip_while(|l| !l.contains("--timeout"))
        .take_while(|l| !l.trim_start().starts_with("--cast"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(line.contains(&default), "--timeout: {line}");
}

#[test]
fn the_readme_sample_config_reads_as_written() {
    let sample = "crates/verso-rpc/examples/accel.toml";
    let (code, out, err) = run(example("show_config").args(["--config", sample, "--show-config"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(&format!("conductor = \"1.0\"  # file {sample}")),
        "{out}"
    );
    assert!(out.contains("agent = \"1.0\"  # file"), "{out}");

    // The README's second command: --set wins over the file.
    let (code, out, err) = run(example("show_config").args([
        "--config",
        sample,
        "--set",
        "upgrade_levels.conductor=1.1",
        "--show-config",
    ]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("conductor = \"1.1\"  # command line"), "{out}");

    // Without --show-config it only checks.
    let (code, out, _) = run(example("show_config").args(["--config", sample]));
    assert_eq!(code, Some(0));
    assert!(out.contains("configuration is valid"), "{out}");
}

#[test]
fn bad_configuration_and_arguments_exit_2_with_a_message() {
    let (code, _, err) =
        run(example("show_config").args(["--set", "upgrade_levels.conductor=1.x"]));
    assert_eq!(code, Some(2));
    assert!(err.contains("1.x"), "{err}");
    let (code, _, err) = run(example("show_config").args(["--config", "no/such/accel.toml"]));
    assert_eq!(code, Some(2));
    assert!(err.contains("no/such/accel.toml"), "{err}");
    let (code, _, err) = run(example("show_config").arg("--frobnicate"));
    assert_eq!(code, Some(2));
    assert!(err.contains("--frobnicate"), "{err}");

    let (code, _, err) = run(example("rpc_client").args([
        "--transport-url",
        "memory://",
        "--topic",
        "t",
        "--method",
        "ping",
        "--timeout",
        "0",
    ]));
    assert_eq!(code, Some(2));
    assert!(err.contains("positive number of seconds"), "{err}");
    let (code, _, err) = run(example("rpc_client").args(["--topic", "t", "--method", "ping"]));
    assert_eq!(code, Some(2));
    assert!(err.contains("--transport-url"), "{err}");
}

#[test]
fn the_client_refuses_a_version_above_its_cap_before_sending() {
    let (code, _, err) = run(example("rpc_client").args([
        "--transport-url",
        "memory://",
        "--topic",
        "t",
        "--method",
        "ping",
        "--version",
        "1.1",
        "--cap",
        "1.0",
    ]));
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("VersionCap"), "{err}");
}

#[test]
fn the_readme_example_runs_and_its_checks_hold() {
    let (code, out, err) = run(&mut example("readme"));
    assert_eq!(code, Some(0), "{out}\n{err}");
    for line in [
        "conductor = \"1.0\"",
        "scheduler = \"2.1\"  # command line",
        "typed call under cap 1.0: h1 verbose=false",
        "layers: the server's saw 1 request, the client's sent 1",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}
