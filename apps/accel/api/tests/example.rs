//! The serve example as the README runs it: `--help`, the curl session of the README
//! (over reqwest), and a refused database URL. The binary is the one
//! `cargo test -p accel-api` builds beside the test binaries.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

fn example() -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory")
        .join("examples")
        .join(format!("serve{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run through `cargo test -p accel-api`, which builds the examples",
        bin.display()
    );
    Command::new(bin)
}

/// Ends the child when the test ends, passed or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_answers_help() {
    let out = example().arg("--help").output().expect("run --help");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--database",
        "--listen",
        "--demo-inventory",
        "127.0.0.1:6666",
    ] {
        assert!(
            text.contains(option),
            "--help does not name {option}:\n{text}"
        );
    }
}

#[test]
fn serve_refuses_an_unknown_database_url() {
    let out = example()
        .args(["--database", "mssql://x/y", "--listen", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sqlite://PATH"), "{err}");
}

#[tokio::test]
async fn the_readme_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let database = format!("sqlite://{}", dir.path().join("demo.db").display());
    let mut child = example()
        .args([
            "--demo-inventory",
            "--database",
            &database,
            "--listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the example");
    let stdout = child.stdout.take().expect("stdout");
    let running = Running(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("join")
    .expect("read the first line");
    let base = line
        .trim()
        .strip_prefix("accel API listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();

    let client = reqwest::Client::new();
    let gpus: serde_json::Value = client
        .get(format!("{base}/v2/devices?type=GPU"))
        .header("OpenStack-API-Version", "accelerator 2.3")
        .send()
        .await
        .expect("GET devices")
        .json()
        .await
        .expect("JSON");
    let gpus = gpus["devices"].as_array().cloned().unwrap_or_default();
    assert_eq!(gpus.len(), 2);
    assert!(gpus.iter().all(|d| d["type"] == "GPU"
        && d["status"] == "enabled"
        && d["inventory_status"] == "available"));

    // curl -d sends a form content type: the body is read as JSON all the same.
    let created = client
        .post(format!("{base}/v2/device_profiles"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(r#"[{"name": "one-fpga", "groups": [{"resources:FPGA": "1"}]}]"#)
        .send()
        .await
        .expect("POST profile");
    assert_eq!(created.status().as_u16(), 201);

    let refused = client
        .get(format!("{base}/v2/devices"))
        .header("OpenStack-API-Version", "accelerator 2.9")
        .send()
        .await
        .expect("GET at 2.9");
    assert_eq!(refused.status().as_u16(), 406);
    assert_eq!(
        refused.text().await.expect("body"),
        r#"{"error":{"message":"accelerator API version 2.9 is not supported: this service supports 2.0 to 2.3","status":406,"type":"NotAcceptable"},"error_message":"{\"debuginfo\":null,\"faultcode\":\"Client\",\"faultstring\":\"accelerator API version 2.9 is not supported: this service supports 2.0 to 2.3\"}"}"#
    );
    drop(running);
}
