//! The quick-start's backport example as a newcomer runs it: a short summary of what the
//! peer receives, the full primitives only on `--full`, and a clear refusal (exit 2) of
//! what it cannot do. Runs the binary `cargo test -p cyborg-model` builds.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;

fn backport(args: &[&str]) -> (Option<i32>, String, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("examples")
        .join(format!("backport{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run through `cargo test -p cyborg-model`, which builds the examples",
        bin.display()
    );
    let out = Command::new(bin).args(args).output().expect("run backport");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The summary line of the object at `label` (e.g. `objects[0].device Device`).
fn line<'a>(out: &'a str, label: &str) -> &'a str {
    out.lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no line for {label}:\n{out}"))
}

#[test]
fn the_default_peer_gets_a_summary_of_what_changed() {
    let (code, out, err) = backport(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("peer:       AttachHandle 1.1, AttachHandleList 1.0, Device 1.1"),
        "{out}"
    );
    assert!(
        line(&out, "AttachHandleList").contains("1.1 -> 1.0"),
        "{out}"
    );
    for i in 0..2 {
        let handle = line(&out, &format!("objects[{i}] AttachHandle"));
        assert!(handle.contains("1.2 -> 1.1"), "{handle}");
        let device = line(&out, &format!("objects[{i}].device Device"));
        assert!(device.contains("1.2 -> 1.1"), "{device}");
        assert!(device.contains("dropped managed_mode"), "{device}");
    }
    // No JSON dump without --full.
    assert!(!out.contains("versioned_object.data"), "{out}");
}

#[test]
fn an_older_peer_loses_more_and_full_prints_the_primitives() {
    let (code, out, err) = backport(&["Device=1.0", "AttachHandle=1.0", "--full"]);
    assert_eq!(code, Some(0), "{err}");
    // AttachHandle 1.0 had no device, but with a manifest OVO backports an object field
    // by the manifest and never drops it by the relationship table: the device is sent,
    // at 1.0, and the summary says so.
    let handle = line(&out, "objects[0] AttachHandle");
    assert!(handle.contains("1.2 -> 1.0"), "{handle}");
    assert!(
        handle.contains("kept device though newer than 1.0"),
        "{handle}"
    );
    let device = line(&out, "objects[0].device Device");
    assert!(device.contains("1.2 -> 1.0"), "{device}");
    assert!(
        device.contains("dropped managed_mode, vendor_board_info"),
        "{device}"
    );
    // Not named: the list keeps its version.
    assert!(
        line(&out, "AttachHandleList").contains("1.1 (unchanged version)"),
        "{out}"
    );
    assert!(out.contains("# as sent to the peer"), "{out}");
    // The list, two handles and two devices, in each primitive.
    assert_eq!(
        out.matches("\"versioned_object.data\"").count(),
        2 * 5,
        "{out}"
    );
}

#[test]
fn what_it_cannot_do_is_refused_with_a_reason() {
    for (arg, want) in [
        ("Foo=1.0", "'Foo' is not a class of this model"),
        ("DeviceList=1.0", "never contains a DeviceList"),
        (
            "Device=2.0",
            "another major version than this build's Device 1.2",
        ),
        ("Device=0.9", "another major version"),
        ("Device=1.3", "newer than this build's Device 1.2"),
        ("Device=1.x", "'1.x' is not a version; write MAJOR.MINOR"),
        ("Device", "expected CLASS=VERSION"),
    ] {
        let (code, out, err) = backport(&[arg]);
        assert_eq!(code, Some(2), "{arg}: {out}{err}");
        assert!(err.contains(want), "{arg}: {err}");
        assert!(!err.contains("invalid literal for int()"), "{arg}: {err}");
        assert!(out.is_empty(), "{arg}: nothing printed on stdout: {out}");
    }
    let (code, _, err) = backport(&["Device=1.0", "Device=1.1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("Device is named twice"), "{err}");
}

#[test]
fn help_is_not_an_error() {
    let (code, out, err) = backport(&["--help"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("CLASS=VERSION") && out.contains("--full"),
        "{out}"
    );
}
