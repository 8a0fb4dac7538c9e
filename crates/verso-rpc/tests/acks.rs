//! A request the server took is acknowledged to the broker at once, reply or not (a
//! cast, a call), so a server whose connection goes away afterwards does not have it
//! redelivered. Each test closes the server's connection without stopping the server, as
//! a crash would: what the broker had no acknowledgement for goes back to the queue,
//! where a passive declaration counts it. (`server::ack_tests` holds the other half: not
//! before it is taken.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use serde_json::json;
use std::time::Duration;
use support::*;
use verso::RequestContext;
use verso_rpc::{RpcClient, Target};

/// Messages ready on `queue`, once the broker has had `settle` to requeue what a closed
/// connection left unacknowledged.
async fn ready_after(raw: &RawPeer, queue: &str, settle: Duration) -> u32 {
    tokio::time::sleep(settle).await;
    raw.ready(queue).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_cast_is_acknowledged_though_nothing_follows_it() {
    let env = Env::get();
    let topic = unique_topic("ack-cast");
    let t = env.amqp().await;
    let (server, mut casts) = start_verso_server(t.clone(), &topic, "a1").await;
    let raw = RawPeer::connect(&env.url).await;
    let msg = json!({"method": "record", "args": {"arg": "once"}, "version": "1.0",
        "_unique_id": "0123456789abcdef0123456789abcdef"});
    raw.publish_enveloped("openstack", &topic, &msg).await;
    assert_eq!(recv(&mut casts).await, json!("once"));
    // No reply and no other delivery follows it; then the connection goes away.
    tokio::time::sleep(Duration::from_millis(500)).await;
    t.close().await;
    assert_eq!(
        ready_after(&raw, &topic, Duration::from_millis(300)).await,
        0,
        "the cast the server took was never acknowledged: the broker requeued it"
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answered_call_is_not_redelivered_when_its_server_goes_away() {
    let env = Env::get();
    let topic = unique_topic("ack-call");
    let t = env.amqp().await;
    let (server, _casts) = start_verso_server(t.clone(), &topic, "a1").await;
    let client = RpcClient::new(env.transport().await, Target::new(topic.as_str()))
        .timeout(Duration::from_secs(20));
    for n in 0..3 {
        let reply = client
            .call(
                &RequestContext::new("req-ack"),
                "ping",
                "1.0",
                json!({"arg": n}),
            )
            .await
            .expect("answered");
        assert_eq!(reply["arg"], n);
    }
    // At once: the last call's acknowledgement was queued before its reply (at the
    // take), and one connection's frames reach the broker in order.
    t.close().await;
    assert_eq!(
        ready_after(
            &RawPeer::connect(&env.url).await,
            &topic,
            Duration::from_millis(300)
        )
        .await,
        0,
        "an answered call was left unacknowledged: the broker requeued it"
    );
    drop(server);
}
