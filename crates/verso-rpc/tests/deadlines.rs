//! A call's deadline and its server's liveness over a real RabbitMQ: a server drops a
//! call whose caller has given up (`_deadline`), and a caller learns within
//! `call_monitor_timeout` that the server which took its call went silent, instead of
//! waiting out the whole timeout.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
mod support;

use support::*;
use verso::{RequestContext, Version};
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};
use verso_rpc::{Endpoint, MethodSpec, RpcClient, RpcError, RpcServer, ServerHandle, Target};

/// A server of `topic` with one handler slot: `slow` holds it for `hold` (telling
/// `started` when it begins), `count` counts its runs.
async fn one_slot_server(
    transport: Arc<AmqpTransport>,
    topic: &str,
    hold: Duration,
    runs: Arc<AtomicUsize>,
    started: tokio::sync::mpsc::UnboundedSender<()>,
) -> ServerHandle {
    let endpoint = Endpoint::new(Version::new(1, 0))
        .method(
            MethodSpec::new("slow", Version::new(1, 0)),
            move |_ctx, _args| {
                let started = started.clone();
                async move {
                    let _ = started.send(());
                    tokio::time::sleep(hold).await;
                    Ok(json!("done"))
                }
            },
        )
        .method(
            MethodSpec::new("count", Version::new(1, 0)),
            move |_ctx, _args| {
                let runs = runs.clone();
                async move { Ok(json!(runs.fetch_add(1, Ordering::SeqCst) + 1)) }
            },
        );
    RpcServer::new(transport, Target::new(topic))
        .endpoint(endpoint)
        .expect("endpoint")
        .max_concurrency(1)
        .start()
        .await
        .expect("listening")
}

async fn connect(config: AmqpConfig) -> Arc<AmqpTransport> {
    Arc::new(AmqpTransport::connect_with(config).await.expect("RabbitMQ"))
}

fn config(env: &Env) -> AmqpConfig {
    AmqpConfig::from_url(&env.url).expect("test URL")
}

/// A call that waited behind a busy handler until its caller timed out is dropped, not
/// run late: the caller was told it failed, so running it would do work nobody hears of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_gave_up_is_not_run() {
    let env = Env::get();
    let topic = unique_topic("deadline");
    let runs = Arc::new(AtomicUsize::new(0));
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let server = one_slot_server(
        connect(config(&env)).await,
        &topic,
        Duration::from_secs(3),
        runs.clone(),
        started_tx,
    )
    .await;
    let client = RpcClient::new(connect(config(&env)).await, Target::new(&topic));
    let slow = {
        let client = client.clone();
        tokio::spawn(async move {
            client
                .prepare()
                .timeout(Duration::from_secs(20))
                .call(&RequestContext::new("req-slow"), "slow", "1.0", json!({}))
                .await
        })
    };
    tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the slow call started");
    let given_up = client
        .prepare()
        .timeout(Duration::from_millis(500))
        .call(&RequestContext::new("req-late"), "count", "1.0", json!({}))
        .await;
    assert!(
        matches!(given_up, Err(RpcError::Timeout { .. })),
        "{given_up:?}"
    );
    assert_eq!(slow.await.expect("task").expect("slow call"), json!("done"));
    // The slot is free again: a call with time to spare runs, and is the first to.
    let counted = client
        .prepare()
        .timeout(Duration::from_secs(10))
        .call(&RequestContext::new("req-now"), "count", "1.0", json!({}))
        .await
        .expect("count");
    assert_eq!(counted, json!(1), "the abandoned call must not have run");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    server.stop().await;
}

/// The server that took a call dies (its connection goes) while the handler runs: the
/// caller, monitoring the call, fails within the monitor timeout with `ServerSilent`,
/// not after its 60 s timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_learns_early_that_its_server_went_silent() {
    let env = Env::get();
    let topic = unique_topic("silent");
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let server_t = connect(config(&env)).await;
    let server = one_slot_server(
        server_t.clone(),
        &topic,
        Duration::from_secs(120),
        Arc::new(AtomicUsize::new(0)),
        started_tx,
    )
    .await;
    let monitored = config(&env).with_call_monitor_timeout(Some(Duration::from_secs(2)));
    let client = RpcClient::new(connect(monitored).await, Target::new(&topic))
        .timeout(Duration::from_secs(60));
    let call = tokio::spawn(async move {
        let began = Instant::now();
        let r = client
            .call(&RequestContext::new("req-1"), "slow", "1.0", json!({}))
            .await;
        (r, began.elapsed())
    });
    tokio::time::timeout(Duration::from_secs(10), started.recv())
        .await
        .expect("the call started");
    // Past two heartbeat periods: the heartbeats keep the call alive meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!call.is_finished(), "a working server's call stays open");
    server_t.close().await;
    let (result, took) = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the caller is told well before its 60 s timeout")
        .expect("task");
    match result {
        Err(e @ RpcError::ServerSilent { .. }) => {
            assert!(e.is_outcome_unknown(), "{e}");
            assert!(e.to_string().contains("outcome is unknown"), "{e}");
        }
        other => panic!("expected ServerSilent, got {other:?}"),
    }
    assert!(took < Duration::from_secs(15), "took {took:?}");
    drop(server);
}

/// A call monitored for 1 s to a handler that takes 4 s succeeds: the server's
/// heartbeats, not the handler's speed, keep it alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_that_heartbeats_outlives_the_monitor() {
    let env = Env::get();
    let topic = unique_topic("heartbeats");
    let (started_tx, _started) = tokio::sync::mpsc::unbounded_channel();
    let server = one_slot_server(
        connect(config(&env)).await,
        &topic,
        Duration::from_secs(4),
        Arc::new(AtomicUsize::new(0)),
        started_tx,
    )
    .await;
    let monitored = AmqpConfig::from_url(&format!(
        "{}{}call_monitor_timeout=1",
        env.url,
        if env.url.contains('?') { "&" } else { "?" }
    ))
    .expect("the URL option");
    assert_eq!(monitored.call_monitor_timeout, Some(Duration::from_secs(1)));
    let reply = RpcClient::new(connect(monitored).await, Target::new(&topic))
        .timeout(Duration::from_secs(30))
        .call(&RequestContext::new("req-1"), "slow", "1.0", json!({}))
        .await
        .expect("heartbeats keep a working server's call alive");
    assert_eq!(reply, json!("done"));
    server.stop().await;
}
