//! Release N's components as separate processes (`accel-release-n conductor|agent`) on
//! PostgreSQL and RabbitMQ, as the demo's multi-process mode runs them; and the exit
//! codes of a refused start.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use accel_release_n::conductor::db::Db;
use std::process::Stdio;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use verso_upgrade::{ComponentVersion, VersionManager};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_accel-release-n"));
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Waits for `child` to print a line containing `ready`.
async fn ready(child: &mut Child, ready: &str) {
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read") {
            if line.contains(ready) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the process never printed {ready:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_processes_on_postgres_and_rabbitmq() {
    let url = accel_conductor::testing::postgres_database().await;
    let exchange = exchange();
    let dir = tempfile::tempdir().expect("tempdir");
    let root = sysfs(dir.path(), 1);
    let mut conductor = bin()
        .args(["conductor", "--database-url", &url, "--transport-url"])
        .arg(rabbit_url())
        .args(["--exchange", &exchange])
        .spawn()
        .expect("conductor process");
    ready(&mut conductor, "release N conductor: serving").await;
    let mut agent = bin()
        .args(["agent", "--host", "host1", "--sysfs-root"])
        .arg(&root)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["--report-interval", "1", "--transport-url"])
        .arg(rabbit_url())
        .args(["--exchange", &exchange])
        .spawn()
        .expect("agent process");
    ready(&mut agent, "release N agent host1").await;
    let db = Db::connect(&url, Duration::from_secs(10))
        .await
        .expect("open");
    let mut devices = 0;
    for _ in 0..100 {
        devices = db.devices(Some("host1")).await.expect("devices").len() as u64;
        if devices == HOST1_DEVICES {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(devices, HOST1_DEVICES, "the agent process reported");
    agent.kill().await.expect("stop agent");
    conductor.kill().await.expect("stop conductor");
    db.close().await;

    // N+1 migrates and finalizes; release N's conductor then refuses, exit 2.
    let new = accel_conductor::Db::connect(&url).await.expect("open");
    new.migrate().await.expect("N+1 migrates");
    VersionManager::<accel_objects::AccelVersion>::open(accel_conductor::DbVersionStore::new(
        new.clone(),
        accel_objects::AccelVersion::COMPONENT,
    ))
    .await
    .expect("versions")
    .finalize()
    .await
    .expect("finalize");
    new.close().await;
    let out = bin()
        .args(["conductor", "--database-url", &url, "--transport-url"])
        .arg(rabbit_url())
        .args(["--exchange", &exchange])
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("finalized at accel version 2") && stderr.contains("run release N+1"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_bad_transport_url_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bin()
        .args(["conductor", "--database-url"])
        .arg(sqlite_url(dir.path()))
        .args(["--transport-url", "carrier-pigeon://nowhere"])
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("transport"),
        "{out:?}"
    );
}
