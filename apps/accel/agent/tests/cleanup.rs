//! The cleanup runner with fake cleanup commands (scripts that succeed, fail or hang),
//! never a real disk.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_agent::cleanup::{clean, CleanupError, CleanupMethod};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn script(dir: &Path, name: &str, body: &str) -> CleanupMethod {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    CleanupMethod::Command {
        program: path,
        args: vec!["--quick".into()],
    }
}

#[tokio::test]
async fn a_succeeding_command_gets_the_device_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seen = dir.path().join("seen");
    let ok = script(
        dir.path(),
        "ok.sh",
        &format!("echo \"$@\" > {}", seen.display()),
    );
    clean(&ok, "/dev/nvme1n1", Duration::from_secs(10))
        .await
        .expect("clean");
    assert_eq!(
        std::fs::read_to_string(&seen).expect("seen").trim(),
        "--quick /dev/nvme1n1"
    );
}

#[tokio::test]
async fn a_failing_command_is_a_failure_with_its_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fail = script(dir.path(), "fail.sh", "echo 'medium error' >&2; exit 3");
    let err = clean(&fail, "/dev/nvme1n1", Duration::from_secs(10))
        .await
        .expect_err("fails");
    assert!(
        matches!(&err, CleanupError::Failed { stderr, .. } if stderr == "medium error"),
        "{err}"
    );
    assert!(err.to_string().contains("exit status: 3"), "{err}");
}

#[tokio::test]
async fn a_hanging_command_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hang = script(dir.path(), "hang.sh", "exec sleep 30");
    let started = Instant::now();
    let err = clean(&hang, "/dev/nvme1n1", Duration::from_millis(300))
        .await
        .expect_err("times out");
    assert!(matches!(err, CleanupError::Timeout { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_missing_program_or_device_is_never_a_success() {
    let missing = CleanupMethod::Command {
        program: "/nonexistent/erase".into(),
        args: vec![],
    };
    assert!(matches!(
        clean(&missing, "/dev/nvme1n1", Duration::from_secs(1)).await,
        Err(CleanupError::Spawn { .. })
    ));
    // The built-in refuses a path that is not an NVMe namespace before running anything.
    assert!(matches!(
        clean(&CleanupMethod::NvmeCli, "/dev/sda", Duration::from_secs(1)).await,
        Err(CleanupError::Unsupported { .. })
    ));
}
