//! `verso upgrade status` and `verso upgrade finalize [--wait]` against a deployment's
//! `upgrade` API served over the real RabbitMQ (`VERSO_TEST_RABBIT_URL`, started by
//! scripts/test.sh; the test fails without it).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;
use verso_cli::execute;
use verso_rpc::transport::amqp::AmqpTransport;
use verso_rpc::{RpcServer, Target};
use verso_upgrade::{component_versions, Coordinator, FileStore, MemberReport, VersionManager};

component_versions! {
    /// Versions of the test deployment.
    pub enum V: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
        /// Release N+1.
        Next = 2 => "release N+1",
    }
}

fn rabbit_url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

fn run(args: &[&str]) -> (Result<bool, String>, String) {
    let mut out = Vec::new();
    let result = execute(None, args.iter().copied(), &mut out).map_err(|e| e.to_string());
    (result, String::from_utf8(out).expect("utf-8"))
}

#[test]
fn status_and_finalize_over_rabbitmq() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conductor.version");
    std::fs::write(
        &path,
        r#"{"format": 1, "component": "conductor", "apparent": 1}"#,
    )
    .expect("write");
    let topic = format!("upgrade-cli-{}", uuid::Uuid::new_v4().simple());
    let (coordinator, server) = rt.block_on(async {
        let m = VersionManager::<V>::open(FileStore::new(&path)).await.expect("open");
        let c = Arc::new(Coordinator::new(m, "agent", Duration::from_secs(60)));
        let transport = AmqpTransport::connect(&rabbit_url())
            .await
            .unwrap_or_else(|e| panic!("{e}\nthis test needs RabbitMQ: run scripts/test.sh, or start it and set VERSO_TEST_RABBIT_URL"));
        let server = RpcServer::new(Arc::new(transport), Target::new(topic.clone()))
            .endpoint(verso_upgrade::admin::endpoint(c.clone()))
            .expect("endpoint")
            .start()
            .await
            .expect("start");
        (c, server)
    });
    let url = rabbit_url();
    let base = ["--transport-url", url.as_str(), "--topic", topic.as_str()];

    // An old agent blocks finalization: exit 1, the blocker named.
    rt.block_on(coordinator.heartbeat(MemberReport {
        id: "old-agent".into(),
        host: "h9".into(),
        software: 1,
        apparent: 1,
        incarnation: None,
    }))
    .expect("heartbeat");
    let (ok, out) = run(&[&["verso", "upgrade", "finalize"][..], &base[..]].concat());
    assert_eq!(ok, Ok(false), "{out}");
    assert!(
        out.contains("blocker: agent old-agent on h9 (software 1"),
        "{out}"
    );

    // Status as JSON says pre-finalized.
    let (ok, out) = run(&[&["verso", "upgrade", "status", "--json"][..], &base[..]].concat());
    assert_eq!(ok, Ok(true), "{out}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(status["state"], "pre_finalized");
    assert_eq!(status["server"]["apparent"], 1);

    // The old agent leaves; finalize --wait completes (no live agent left behind).
    assert!(rt
        .block_on(coordinator.forget("old-agent"))
        .expect("forget"));
    let (ok, out) = run(&[
        &["verso", "upgrade", "finalize", "--wait", "--timeout", "30"][..],
        &base[..],
    ]
    .concat());
    assert_eq!(ok, Ok(true), "{out}");
    assert!(out.contains("deployment: finalized"), "{out}");
    assert!(out.contains("agents finalized: 0/0"), "{out}");

    // An unreachable deployment is an error (exit 2), not a hang.
    let (ok, _) = run(&[
        "verso",
        "upgrade",
        "status",
        "--transport-url",
        "rabbit://guest:guest@127.0.0.1:1/",
        "--topic",
        "x",
    ]);
    let e = ok.expect_err("unreachable");
    assert!(e.starts_with("the deployment did not answer"), "{e}");
    rt.block_on(server.stop());
}
