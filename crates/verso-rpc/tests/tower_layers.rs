//! tower's own middleware as the application's layers, on the client and on the server:
//! their errors are boxed, and come back at the edge of the application's layers as
//! `RpcError::Layer` with the cause kept; an `RpcError` passed through them stays itself.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use verso::{RequestContext, Version};
use verso_rpc::tower::ServiceBuilder;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{Endpoint, MethodSpec, RpcClient, RpcError, RpcServer, Target};

/// An endpoint whose `hold` says on `started` that it runs, then waits for `release`.
fn holding(started: mpsc::UnboundedSender<()>, release: Arc<Notify>) -> Endpoint {
    Endpoint::new(Version::new(1, 0)).method(
        MethodSpec::new("hold", Version::new(1, 0)),
        move |_ctx, _args| {
            let (started, release) = (started.clone(), release.clone());
            async move {
                let _ = started.send(());
                release.notified().await;
                Ok(json!("done"))
            }
        },
    )
}

#[tokio::test]
async fn a_tower_timeout_on_the_client_is_a_timeout_whose_outcome_is_unknown() {
    let transport = Arc::new(MemoryTransport::new());
    let (started, mut running) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let server = RpcServer::new(transport.clone(), Target::new("svc"))
        .endpoint(holding(started, release.clone()))
        .unwrap()
        .start()
        .await
        .unwrap();
    let client = RpcClient::new(transport, Target::new("svc")).layer(
        tower::timeout::TimeoutLayer::new(Duration::from_millis(100)),
    );
    let ctx = RequestContext::new("req-1");

    let err = client
        .call(&ctx, "hold", "1.0", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, RpcError::Layer { .. }), "{err:?}");
    assert!(err
        .layer_cause::<tower::timeout::error::Elapsed>()
        .is_some());
    assert!(err.is_timeout() && err.is_outcome_unknown(), "{err:?}");
    // It was sent: the handler runs.
    running.recv().await.expect("the call reached the handler");
    release.notify_one();
    server.stop().await;
}

#[tokio::test]
async fn an_rpc_error_through_tower_layers_stays_itself() {
    let client = RpcClient::new(Arc::new(MemoryTransport::new()), Target::new("nobody")).layer(
        ServiceBuilder::new()
            .load_shed()
            .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(30))),
    );
    let err = client
        .call(&RequestContext::new("req-1"), "ping", "1.0", json!({}))
        .await
        .unwrap_err();
    assert!(
        matches!(err, RpcError::Unreachable { ref topic, .. } if topic == "nobody"),
        "{err:?}"
    );
}

#[tokio::test]
async fn load_shedding_on_the_server_refuses_what_its_limit_cannot_take() {
    let transport = Arc::new(MemoryTransport::new());
    let (started, mut running) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let server = RpcServer::new(transport.clone(), Target::new("svc"))
        .endpoint(holding(started, release.clone()))
        .unwrap()
        .layer(ServiceBuilder::new().load_shed().concurrency_limit(1))
        .start()
        .await
        .unwrap();
    let client = RpcClient::new(transport, Target::new("svc"));
    let first = tokio::spawn({
        let client = client.clone();
        async move {
            client
                .call(&RequestContext::new("req-1"), "hold", "1.0", json!({}))
                .await
        }
    });
    running.recv().await.expect("the first call runs");

    // The limit's one slot is taken: the second is shed, answered, never run.
    let err = client
        .call(&RequestContext::new("req-2"), "hold", "1.0", json!({}))
        .await
        .unwrap_err();
    match &err {
        RpcError::Remote(remote) => {
            assert!(remote.message.contains("overloaded"), "{remote:?}")
        }
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    assert!(running.try_recv().is_err(), "the shed call did not run");

    release.notify_one();
    assert_eq!(first.await.unwrap().unwrap(), json!("done"));
    server.stop().await;
}

/// tower's `Buffer` as a client layer: calls from many tasks through one bounded queue
/// (4) in front of the transport, each answered with its own reply.
#[tokio::test]
async fn a_buffered_client_answers_every_caller() {
    let transport = Arc::new(MemoryTransport::new());
    let server = RpcServer::new(transport.clone(), Target::new("svc"))
        .endpoint(
            Endpoint::new(Version::new(1, 0)).method(
                MethodSpec::new("echo", Version::new(1, 0))
                    .arg(verso_rpc::ArgSpec::required("n", verso_rpc::ArgType::Int)),
                |_ctx, args: verso_rpc::Args| async move { args.get::<serde_json::Value>("n") },
            ),
        )
        .unwrap()
        .start()
        .await
        .unwrap();
    // A builder call after the layer builds the stack (and the buffer's worker) again.
    let client = RpcClient::new(transport, Target::new("svc"))
        .layer(tower::buffer::BufferLayer::new(4))
        .version_cap(Version::new(1, 0));
    let calls = (0..32).map(|n| {
        let client = client.clone();
        tokio::spawn(async move {
            let ctx = RequestContext::new(format!("req-{n}"));
            client.call(&ctx, "echo", "1.0", json!({ "n": n })).await
        })
    });
    for (n, call) in calls.collect::<Vec<_>>().into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), json!(n));
    }
    server.stop().await;
}
