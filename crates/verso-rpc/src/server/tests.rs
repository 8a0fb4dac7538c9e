//! Unit tests of `server`, beside the private items they exercise.

use super::*;
use crate::message::Message;
use crate::testing::Recording;
use crate::transport::memory::MemoryTransport;
use crate::{ArgSpec, ArgType, MethodSpec, RemoteException, RpcClient};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::Map;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use verso::{RequestContext, Version};

fn v(major: u32, minor: u32) -> Version {
    Version::new(major, minor)
}

fn ctx() -> RequestContext {
    RequestContext::new("req-1")
}

fn ping_endpoint(version: Version) -> Endpoint {
    Endpoint::new(version).method(
        MethodSpec::new("ping", v(version.major(), 0)),
        move |_ctx, _args| async move { Ok(json!(version.to_string())) },
    )
}

async fn serve(t: &Arc<MemoryTransport>, topic: &str, eps: Vec<Endpoint>) -> ServerHandle {
    let mut s = RpcServer::new(t.clone(), Target::new(topic));
    for e in eps {
        s = s.endpoint(e).expect("valid endpoint");
    }
    s.start().await.expect("listening")
}

fn client(t: &Arc<MemoryTransport>, topic: &str) -> RpcClient {
    RpcClient::new(t.clone(), Target::new(topic))
}

#[tokio::test]
async fn a_1_1_server_answers_a_1_0_call() {
    let t = Arc::new(MemoryTransport::new());
    let s = serve(&t, "c", vec![ping_endpoint(v(1, 1))]).await;
    let got = client(&t, "c")
        .call(&ctx(), "ping", "1.0", json!({}))
        .await
        .expect("1.1 serves 1.0");
    assert_eq!(got, json!("1.1"));
    s.stop().await;
}

#[tokio::test]
async fn a_2_0_call_to_a_1_x_server_is_unsupported_naming_both_versions() {
    let t = Arc::new(MemoryTransport::new());
    let s = serve(&t, "c", vec![ping_endpoint(v(1, 1))]).await;
    let c = client(&t, "c");
    for requested in ["2.0", "1.2"] {
        let err = c
            .call(&ctx(), "ping", requested, json!({}))
            .await
            .expect_err("unsupported");
        let msg = err.to_string();
        match err {
            RpcError::UnsupportedVersion {
                method,
                requested: r,
                available,
            } => {
                assert_eq!(method, "ping");
                assert_eq!(r.to_string(), requested);
                assert_eq!(available, vec![v(1, 1)]);
                assert!(msg.contains(requested) && msg.contains("1.1"), "{msg}");
            }
            other => panic!("expected UnsupportedVersion, got {other:?}"),
        }
    }
    s.stop().await;
}

#[tokio::test]
async fn endpoints_are_picked_by_major_and_namespace() {
    let t = Arc::new(MemoryTransport::new());
    let s = serve(
        &t,
        "c",
        vec![
            ping_endpoint(v(1, 3)),
            ping_endpoint(v(2, 1)),
            ping_endpoint(v(1, 9)).namespace("admin"),
        ],
    )
    .await;
    let c = client(&t, "c");
    assert_eq!(
        c.call(&ctx(), "ping", "1.2", json!({})).await.expect("1.x"),
        json!("1.3")
    );
    assert_eq!(
        c.call(&ctx(), "ping", "2.0", json!({})).await.expect("2.x"),
        json!("2.1")
    );
    // 1.5 is in no endpoint of the default namespace, though `admin` has 1.9.
    assert!(matches!(
        c.call(&ctx(), "ping", "1.5", json!({})).await,
        Err(RpcError::UnsupportedVersion { available, .. }) if available == vec![v(1, 3), v(2, 1)]
    ));
    let admin = RpcClient::new(t.clone(), Target::new("c").with_namespace("admin"));
    assert_eq!(
        admin
            .call(&ctx(), "ping", "1.5", json!({}))
            .await
            .expect("admin"),
        json!("1.9")
    );
    let other = RpcClient::new(t.clone(), Target::new("c").with_namespace("nope"));
    assert!(matches!(
        other.call(&ctx(), "ping", "1.0", json!({})).await,
        Err(RpcError::UnsupportedVersion { available, .. }) if available.is_empty()
    ));
    s.stop().await;
}

#[tokio::test]
async fn a_compatible_endpoint_without_the_method_is_no_such_method() {
    let t = Arc::new(MemoryTransport::new());
    let s = serve(&t, "c", vec![ping_endpoint(v(1, 1))]).await;
    assert!(matches!(
        client(&t, "c").call(&ctx(), "nope", "1.0", json!({})).await,
        Err(RpcError::NoSuchMethod { method }) if method == "nope"
    ));
    s.stop().await;
}

#[tokio::test]
async fn a_method_newer_than_the_call_version_is_refused() {
    let t = Arc::new(MemoryTransport::new());
    let ep = Endpoint::new(v(1, 2))
        .method(MethodSpec::new("fresh", v(1, 2)), |_ctx, _args| async {
            Ok(Value::Null)
        });
    let s = serve(&t, "c", vec![ep]).await;
    let c = client(&t, "c");
    assert!(matches!(
        c.call(&ctx(), "fresh", "1.1", json!({})).await,
        Err(RpcError::MethodNotInVersion { since, requested, .. }) if since == v(1, 2) && requested == v(1, 1)
    ));
    c.call(&ctx(), "fresh", "1.2", json!({}))
        .await
        .expect("at 1.2");
    s.stop().await;
}

#[tokio::test]
async fn arguments_are_checked_and_defaults_filled_over_the_wire() {
    let t = Arc::new(MemoryTransport::new());
    let ep = Endpoint::new(v(1, 1)).method(
        MethodSpec::new("get", v(1, 0))
            .arg(ArgSpec::required("id", ArgType::Int))
            .arg(ArgSpec::optional("deleted", ArgType::Bool, false).since(v(1, 1))),
        |_ctx, args: Args| async move { Ok(Value::Object(args.into_map())) },
    );
    let s = serve(&t, "c", vec![ep]).await;
    let c = client(&t, "c");
    assert_eq!(
        c.call(&ctx(), "get", "1.0", json!({"id": 1}))
            .await
            .expect("old client"),
        json!({"id": 1, "deleted": false})
    );
    assert!(matches!(
        c.call(&ctx(), "get", "1.1", json!({})).await,
        Err(RpcError::MissingArgument { argument, .. }) if argument == "id"
    ));
    assert!(matches!(
        c.call(&ctx(), "get", "1.1", json!({"id": 1, "colour": 2})).await,
        Err(RpcError::UnknownArgument { argument, .. }) if argument == "colour"
    ));
    assert!(matches!(
        c.call(&ctx(), "get", "1.1", json!({"id": "one"})).await,
        Err(RpcError::InvalidArgument { argument, .. }) if argument == "id"
    ));
    s.stop().await;
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct DeviceNotFound {
    device_id: u64,
}
impl std::fmt::Display for DeviceNotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} not found", self.device_id)
    }
}
impl RemoteException for DeviceNotFound {
    const KIND: &'static str = "DeviceNotFound";
    const MODULE: &'static str = "accel.errors";
}

#[tokio::test]
async fn remote_errors_round_trip_with_their_kind() {
    let t = Arc::new(MemoryTransport::new());
    let ep = Endpoint::new(v(1, 0))
        .method(
            MethodSpec::new("get", v(1, 0)).arg(ArgSpec::required("id", ArgType::Int)),
            |_ctx, args: Args| async move {
                let device_id = args.get::<u64>("id")?;
                Err(DeviceNotFound { device_id }.into())
            },
        )
        .method(MethodSpec::new("boom", v(1, 0)), |_ctx, _args| async {
            Err(RemoteError::new("ValueError", "builtins", "bad value").with_field("why", "x"))
        });
    let s = serve(&t, "c", vec![ep]).await;
    let c = client(&t, "c");
    let err = c
        .call(&ctx(), "get", "1.0", json!({"id": 7}))
        .await
        .expect_err("raises");
    let remote = err.as_remote().expect("a remote error");
    assert_eq!(remote.kind, "DeviceNotFound");
    assert_eq!(remote.module, "accel.errors");
    assert_eq!(remote.message, "device 7 not found");
    assert_eq!(remote.fields["device_id"], 7);
    assert_eq!(
        remote.downcast::<DeviceNotFound>(),
        Some(DeviceNotFound { device_id: 7 })
    );

    match c.call(&ctx(), "boom", "1.0", json!({})).await {
        Err(RpcError::Remote(r)) => {
            assert_eq!(
                (r.kind.as_str(), r.module.as_str()),
                ("ValueError", "builtins")
            );
            assert_eq!(r.fields["why"], "x");
            assert!(r.downcast::<DeviceNotFound>().is_none());
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    s.stop().await;
}

#[tokio::test]
async fn a_panicking_handler_is_a_typed_error_and_the_server_keeps_serving() {
    let t = Arc::new(MemoryTransport::new());
    let ep = ping_endpoint(v(1, 0)).method(
        MethodSpec::new("panics", v(1, 0)),
        |_ctx, _args| async move {
            let empty: Vec<u8> = Vec::new();
            Ok(json!(empty[1]))
        },
    );
    let s = serve(&t, "c", vec![ep]).await;
    let c = client(&t, "c");
    match c.call(&ctx(), "panics", "1.0", json!({})).await {
        Err(RpcError::Remote(r)) => assert_eq!(r.kind, "HandlerPanicked"),
        other => panic!("expected HandlerPanicked, got {other:?}"),
    }
    c.call(&ctx(), "ping", "1.0", json!({}))
        .await
        .expect("still serving");
    s.stop().await;
}

#[tokio::test]
async fn a_slow_handler_does_not_block_a_fast_one() {
    let t = Arc::new(MemoryTransport::new());
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let slow_done = Arc::new(AtomicUsize::new(0));
    let done = slow_done.clone();
    let ep = ping_endpoint(v(1, 0)).method(MethodSpec::new("slow", v(1, 0)), move |_ctx, _args| {
        let mut release = release_rx.clone();
        let done = done.clone();
        async move {
            let _ = release.wait_for(|r| *r).await;
            done.fetch_add(1, Ordering::SeqCst);
            Ok(json!("slow"))
        }
    });
    let s = RpcServer::new(t.clone(), Target::new("c"))
        .endpoint(ep)
        .expect("valid")
        .max_concurrency(4)
        .start()
        .await
        .expect("listening");
    let c = client(&t, "c");
    let slow = tokio::spawn({
        let c = c.clone();
        async move { c.call(&ctx(), "slow", "1.0", json!({})).await }
    });
    tokio::task::yield_now().await;
    let fast = c
        .prepare()
        .timeout(Duration::from_secs(5))
        .call(&ctx(), "ping", "1.0", json!({}))
        .await
        .expect("fast call answered while the slow one runs");
    assert_eq!(fast, json!("1.0"));
    assert_eq!(slow_done.load(Ordering::SeqCst), 0, "slow is still running");
    release_tx.send(true).expect("slow handler waiting");
    assert_eq!(
        slow.await.expect("joined").expect("slow answered"),
        json!("slow")
    );
    s.stop().await;
}

#[tokio::test]
async fn handler_concurrency_is_bounded() {
    let t = Arc::new(MemoryTransport::new());
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let ep = Endpoint::new(v(1, 0)).method(MethodSpec::new("work", v(1, 0)), move |_ctx, _args| {
        let (r, p) = (r.clone(), p.clone());
        async move {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            r.fetch_sub(1, Ordering::SeqCst);
            Ok(Value::Null)
        }
    });
    let s = RpcServer::new(t.clone(), Target::new("c"))
        .endpoint(ep)
        .expect("valid")
        .max_concurrency(2)
        .start()
        .await
        .expect("listening");
    let c = client(&t, "c");
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.call(&ctx(), "work", "1.0", json!({})).await })
        })
        .collect();
    for call in calls {
        call.await.expect("joined").expect("answered");
    }
    assert_eq!(peak.load(Ordering::SeqCst), 2, "two at a time, never more");
    s.stop().await;
}

fn named(name: &'static str) -> Endpoint {
    Endpoint::new(v(1, 0)).method(
        MethodSpec::new("who", v(1, 0)),
        move |_ctx, _args| async move { Ok(json!(name)) },
    )
}

#[tokio::test]
async fn calls_to_a_topic_go_round_robin_and_server_targets_go_to_one() {
    let t = Arc::new(MemoryTransport::new());
    let a = RpcServer::new(t.clone(), Target::new("agent").with_server("a"))
        .endpoint(named("a"))
        .expect("valid")
        .start()
        .await
        .expect("a");
    let b = RpcServer::new(t.clone(), Target::new("agent").with_server("b"))
        .endpoint(named("b"))
        .expect("valid")
        .start()
        .await
        .expect("b");
    let c = client(&t, "agent");
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(c.call(&ctx(), "who", "1.0", json!({})).await.expect("call"));
    }
    assert_eq!(seen, vec![json!("a"), json!("b"), json!("a"), json!("b")]);
    for _ in 0..3 {
        let got = c
            .prepare()
            .server("b")
            .call(&ctx(), "who", "1.0", json!({}))
            .await;
        assert_eq!(got.expect("to b"), json!("b"));
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn casts_and_fanout_run_the_handlers() {
    let t = Recording::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut servers = Vec::new();
    for name in ["a", "b", "c"] {
        let tx = tx.clone();
        let ep = Endpoint::new(v(1, 0)).method(
            MethodSpec::new("note", v(1, 0)).arg(ArgSpec::required("n", ArgType::Int)),
            move |_ctx, args: Args| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send((name, args.get::<i64>("n")?));
                    Ok(Value::Null)
                }
            },
        );
        servers.push(
            RpcServer::new(Arc::new(t.clone()), Target::new("agent").with_server(name))
                .endpoint(ep)
                .expect("valid")
                .start()
                .await
                .expect("listening"),
        );
    }
    let c = RpcClient::new(Arc::new(t.clone()), Target::new("agent"));
    c.prepare()
        .fanout()
        .cast(&ctx(), "note", "1.0", json!({"n": 1}))
        .await
        .expect("fanout");
    c.prepare()
        .server("b")
        .cast(&ctx(), "note", "1.0", json!({"n": 2}))
        .await
        .expect("cast");
    // A cast that fails on the server is logged there; the caller does not wait.
    c.cast(&ctx(), "note", "1.0", json!({}))
        .await
        .expect("sent");
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(rx.recv().await.expect("handler ran"));
    }
    got.sort();
    assert_eq!(got, vec![("a", 1), ("b", 1), ("b", 2), ("c", 1)]);
    let kinds: Vec<_> = t
        .sent
        .lock()
        .expect("lock")
        .iter()
        .map(|(k, _, _)| *k)
        .collect();
    use crate::testing::Sent;
    assert_eq!(kinds, vec![Sent::Fanout, Sent::Cast, Sent::Cast]);
    for s in servers {
        s.stop().await;
    }
}

#[tokio::test]
async fn stop_waits_for_running_handlers_and_then_nobody_listens() {
    let t = Arc::new(MemoryTransport::new());
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let ep = Endpoint::new(v(1, 0)).method(MethodSpec::new("work", v(1, 0)), move |_ctx, _args| {
        let f = f.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            f.fetch_add(1, Ordering::SeqCst);
            Ok(Value::Null)
        }
    });
    let s = serve(&t, "c", vec![ep]).await;
    let c = client(&t, "c");
    c.cast(&ctx(), "work", "1.0", json!({}))
        .await
        .expect("sent");
    tokio::time::sleep(Duration::from_millis(5)).await;
    s.stop().await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "stop waited for the handler"
    );
    assert!(matches!(
        c.call(&ctx(), "work", "1.0", json!({})).await,
        Err(RpcError::Unreachable { .. })
    ));
}

#[tokio::test]
async fn malformed_requests_get_a_typed_failure_reply() {
    let d = Dispatcher::new(vec![ping_endpoint(v(1, 0))]).expect("valid");
    let mut bad = Message::new();
    bad.insert("args".into(), json!({}));
    let reply = Reply::from_message(d.handle(Request::from_message(bad)).await.into_message())
        .expect("a reply");
    let remote = reply.0.expect_err("a failure");
    assert!(matches!(
        RpcError::from_remote(remote, "?", v(1, 0)),
        RpcError::MalformedMessage { .. }
    ));
}

/// Log lines written by a `tracing_subscriber` into memory.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn each_request_is_logged_at_debug_and_each_failure_once_at_warn() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let d = Dispatcher::new(vec![ping_endpoint(v(1, 0))]).expect("valid");
    let mut service = pipeline(
        d,
        Arc::new(NoOpSerializer),
        Vec::new(),
        Arc::new(Semaphore::new(4)),
    );
    let req = |method: &str, id: &str| Request {
        method: method.into(),
        args: Map::new(),
        version: v(1, 0),
        namespace: None,
        context: RequestContext::new(id),
    };
    // Handlers run on this thread (current_thread runtime), under the subscriber.
    for incoming in [
        Incoming::cast(Ok(req("ping", "req-ok"))),
        Incoming::cast(Ok(req("nope", "req-bad"))),
        Incoming::cast(Err(RpcError::MalformedMessage {
            detail: "body is not JSON".into(),
        })),
    ] {
        service.ready().await.expect("ready");
        respond(&mut service, incoming).await;
    }

    let text = String::from_utf8(logs.0.lock().expect("lock").clone()).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    let debug: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("DEBUG") && l.contains("RPC request"))
        .collect();
    assert_eq!(debug.len(), 2, "{text}");
    assert!(
        debug[0].contains("request_id=req-ok")
            && debug[0].contains("method=ping")
            && debug[0].contains("version=1.0"),
        "{text}"
    );
    let warn: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("WARN"))
        .collect();
    assert_eq!(warn.len(), 2, "one warning per failure: {text}");
    assert!(
        warn[0].contains("request_id=req-bad")
            && warn[0].contains("method=nope")
            && warn[0].contains("does not support RPC method nope"),
        "{text}"
    );
    assert!(
        warn[1].contains("cannot be read") && warn[1].contains("body is not JSON"),
        "{text}"
    );
}

#[test]
fn registration_refuses_invalid_endpoints() {
    let t = Arc::new(MemoryTransport::new());
    let bad = Endpoint::new(v(1, 1)).method(
        MethodSpec::new("m", v(1, 0)).arg(ArgSpec::required("new", ArgType::Int).since(v(1, 1))),
        |_ctx, _args| async { Ok(Value::Null) },
    );
    assert!(matches!(
        RpcServer::new(t, Target::new("c")).endpoint(bad),
        Err(RpcError::InvalidEndpoint { .. })
    ));
}
