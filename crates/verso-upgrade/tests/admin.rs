//! The `upgrade` RPC API over a transport: heartbeats, fencing, finalize refused with
//! its blockers, and finalize-and-wait until every client has followed.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;
use verso::RequestContext;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{RpcClient, RpcError, RpcServer, Target};
use verso_upgrade::admin::{self, finalize_and_wait, Heartbeat, UpgradeApi, WaitOutcome};
use verso_upgrade::{
    component_versions, Coordinator, Fenced, FileStore, MemberReport, UpgradeState, VersionManager,
};

component_versions! {
    /// Versions shared by the server and its agents.
    pub enum V: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
        /// Release N+1.
        Next = 2 => "release N+1",
    }
}

async fn manager(dir: &std::path::Path, name: &str) -> VersionManager<V> {
    let path = dir.join(name);
    std::fs::write(
        &path,
        r#"{"format": 1, "component": "conductor", "apparent": 1}"#,
    )
    .expect("write");
    VersionManager::<V>::open(FileStore::new(path))
        .await
        .expect("open")
}

fn report(id: &str, software: u32, apparent: u32) -> MemberReport {
    MemberReport {
        id: id.into(),
        host: id.into(),
        software,
        apparent,
        incarnation: None,
    }
}

#[tokio::test]
async fn finalize_through_the_api_waits_for_every_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let coordinator = Arc::new(Coordinator::new(
        manager(dir.path(), "server").await,
        "agent",
        Duration::from_secs(60),
    ));
    let transport = Arc::new(MemoryTransport::new());
    let server = RpcServer::new(transport.clone(), Target::new("upgrade"))
        .endpoint(admin::endpoint(coordinator.clone()))
        .expect("endpoint")
        .start()
        .await
        .expect("start");
    let client = RpcClient::for_api::<UpgradeApi>(transport, "upgrade");
    let ctx = RequestContext::new("admin");

    // An agent on release N is live: finalize is refused, naming it.
    client
        .call_method(
            &ctx,
            Heartbeat {
                report: report("old", 1, 1),
            },
        )
        .await
        .expect("heartbeat");
    match finalize_and_wait(
        &client,
        &ctx,
        Duration::from_millis(200),
        Duration::from_millis(20),
    )
    .await
    .expect("runs")
    {
        WaitOutcome::Refused(r) => {
            assert_eq!(r.blockers.len(), 1);
            assert_eq!(r.blockers[0].id, "old");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(coordinator.forget("old").await.expect("forget"));

    // Two upgraded agents: the server finalizes, the wait runs out while they lag.
    let agents = [
        manager(dir.path(), "a1").await,
        manager(dir.path(), "a2").await,
    ];
    for (i, a) in agents.iter().enumerate() {
        client
            .call_method(
                &ctx,
                Heartbeat {
                    report: a.report(&format!("a{i}"), "h"),
                },
            )
            .await
            .expect("heartbeat");
    }
    let outcome = finalize_and_wait(
        &client,
        &ctx,
        Duration::from_millis(100),
        Duration::from_millis(20),
    )
    .await
    .expect("runs");
    assert_eq!(outcome.exit_code(), 3);
    let WaitOutcome::TimedOut(status) = outcome else {
        panic!("expected a timeout")
    };
    assert_eq!((status.clients_finalized, status.clients_live), (0, 2));
    // The agents follow on their next heartbeat; a second finalize is fine and completes.
    for (i, a) in agents.iter().enumerate() {
        let reply = client
            .call_method(
                &ctx,
                Heartbeat {
                    report: a.report(&format!("a{i}"), "h"),
                },
            )
            .await
            .expect("heartbeat");
        assert_eq!(reply.finalize_to, Some(2));
        a.apply(&reply).await.expect("finalize agent");
        client
            .call_method(
                &ctx,
                Heartbeat {
                    report: a.report(&format!("a{i}"), "h"),
                },
            )
            .await
            .expect("heartbeat");
    }
    let outcome = finalize_and_wait(
        &client,
        &ctx,
        Duration::from_secs(5),
        Duration::from_millis(20),
    )
    .await
    .expect("runs");
    assert_eq!(outcome.exit_code(), 0, "{outcome:?}");
    let status = client
        .call_method(&ctx, admin::Status {})
        .await
        .expect("status");
    assert_eq!(status.state, UpgradeState::Finalized);

    // Release N after finalization is fenced, and the caller gets the reason typed.
    let err = client
        .call_method(
            &ctx,
            Heartbeat {
                report: report("late", 1, 1),
            },
        )
        .await
        .expect_err("fenced");
    let RpcError::Remote(remote) = err else {
        panic!("not a remote error: {err}")
    };
    let fenced = remote.downcast::<Fenced>().expect("typed Fenced");
    assert!(fenced.reason.contains("upgrade it"), "{fenced}");
    server.stop().await;
}
