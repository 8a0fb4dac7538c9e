//! The `accel` binary as an operator runs it: all-in-one serving real devices over the
//! real HTTP API, db sync and upgrade check exit codes, config show with origins.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn accel() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel"));
    c.env("RUST_LOG", "warn");
    c
}

struct Killed(std::process::Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn all_in_one_serves_every_agents_devices() {
    let mut child = accel()
        .args([
            "all-in-one",
            "--agents",
            "2",
            "--set",
            "api.listen=127.0.0.1:0",
            "--set",
            "agent.report_interval=1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("accel starts");
    let stdout = child.stdout.take().expect("stdout");
    let child = Killed(child);
    let mut api = None;
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(url) = line.strip_prefix("api: listening on ") {
            api = Some(url.to_owned());
            break;
        }
        lines.push(line);
    }
    let api = api.unwrap_or_else(|| panic!("no API address; output: {lines:?}"));
    assert!(
        lines
            .iter()
            .any(|l| l == "all-in-one: 2 agents reported 10 devices"),
        "{lines:?}"
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let body: serde_json::Value = rt.block_on(async {
        reqwest::get(format!("{api}/v2/devices"))
            .await
            .expect("GET")
            .json()
            .await
            .expect("json")
    });
    let devices = body["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 10, "{body}");
    for host in ["host1", "host2"] {
        assert_eq!(
            devices.iter().filter(|d| d["hostname"] == host).count(),
            5,
            "{host}"
        );
    }
    drop(child);
}

#[test]
fn db_sync_and_upgrade_check_say_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!(
        "database.url=sqlite://{}",
        dir.path().join("a.db").display()
    );
    let check = |expect: i32, says: &str| {
        let out = accel()
            .args(["--set", &url, "upgrade", "check"])
            .output()
            .expect("runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(expect), "{text}");
        assert!(text.contains(says), "{text}");
    };
    // A new database lacks its migrations: a warning.
    check(1, "run `accel db sync`");
    let out = accel()
        .args(["--set", &url, "db", "sync"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied migrations [1, 2]"));
    check(0, "no component version recorded yet");
    // An unreachable database is a failure.
    let out = accel()
        .args([
            "--set",
            "database.url=postgres://x:secret@127.0.0.1:1/none",
            "upgrade",
            "check",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("secret"));
}

#[test]
fn config_show_names_origins_and_masks_passwords() {
    let out = accel()
        .args([
            "--config",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../accel.toml"),
            "--set",
            "database.url=postgres://accel:hunter2@db:5432/accel",
            "config",
            "show",
        ])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("accel.toml"), "{text}");
    assert!(text.contains("command line"), "{text}");
    // "auto" is refused: caps are pinned by the operator.
    let out = accel()
        .args(["--set", "upgrade_levels.conductor=auto", "config", "show"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("auto"));
}
