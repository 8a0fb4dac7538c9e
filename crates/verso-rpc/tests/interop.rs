//! Interop with a real RabbitMQ and a real Python oslo.messaging peer
//! (`interop/peer.py`, oslo.messaging + oslo.versionedobjects from a virtualenv).
//!
//! RabbitMQ: `VERSO_TEST_RABBIT_URL` (default `rabbit://guest:guest@127.0.0.1:5672/`).
//! Python: `VERSO_TEST_PYTHON` (default `.venv/bin/python` at the workspace root).
//! `.ci/run` installs and starts both; a missing one FAILS these tests (never skips).
//!
//! Over 1,000 lines on purpose: each file under `tests/` is a test binary of its own that
//! links the whole crate and its dependencies, so splitting this one would add a link
//! to every CI run on a 2-core machine for no gain in reading (the tests share helpers).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
mod support;

use support::*;
use verso::{RequestContext, Version, VersionedObject};
use verso_rpc::message::Request;
use verso_rpc::transport::amqp::{AmqpError, AmqpTransport, ConnectKind};
use verso_rpc::{RpcClient, RpcError, Target};

// ---- 1. a Python oslo.messaging client calls a verso server ---------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_calls_verso_server() {
    let env = Env::get();
    let topic = unique_topic("py-to-rs");
    let transport = env.transport().await;
    let (server, _casts) = start_verso_server(transport, &topic, "rs-1").await;

    // Plain method, at the endpoint's base version and at its own (1.1).
    let out = env.py_client(
        &topic,
        &["--method", "ping", "--arg", r#"{"hello": "world"}"#],
    );
    assert_eq!(out["ok"]["arg"], json!({"hello": "world"}), "{out}");
    assert_eq!(out["ok"]["peer"], "verso");
    assert_eq!(out["ok"]["user"], "py-client", "context crossed: {out}");
    let out = env.py_client(
        &topic,
        &[
            "--method",
            "ping",
            "--arg",
            "7",
            "--version",
            "1.1",
            "--server",
            "rs-1",
        ],
    );
    assert_eq!(out["ok"]["arg"], 7, "{out}");

    // Above the server's version: oslo's UnsupportedVersion comes back.
    let out = env.py_client(
        &topic,
        &["--method", "ping", "--arg", "1", "--version", "1.2"],
    );
    // As from a Python server: the dispatcher's module is not in allowed_remote_exmods.
    let err = &out["error"];
    assert_eq!(err["class"], "RemoteError", "{out}");
    assert_eq!(err["exc_type"], "UnsupportedVersion", "{out}");
    assert!(
        err["message"]
            .as_str()
            .unwrap_or("")
            .contains("does not support RPC version 1.2"),
        "{out}"
    );

    // Object argument and object result, as OVO primitives both ways.
    let out = env.py_client(
        &topic,
        &[
            "--method",
            "echo_thing",
            "--version",
            "1.1",
            "--thing",
            r#"{"id": 3, "name": "gpu", "tags": ["a"]}"#,
        ],
    );
    let thing = InteropThing::from_primitive(&out["ok"]).expect("an InteropThing primitive");
    assert_eq!(thing.id.get(), Some(&3));
    assert_eq!(thing.name.get().map(String::as_str), Some("GPU"));
    assert_eq!(
        thing.tags.get().cloned(),
        Some(vec!["a".to_string(), "rs".to_string()])
    );

    // A remote error raised by the verso method.
    let out = env.py_client(
        &topic,
        &["--method", "fail", "--version", "1.1", "--arg", r#""boom""#],
    );
    assert_eq!(out["error"]["class"], "RemoteError", "{out}");
    assert_eq!(out["error"]["exc_type"], "InteropError", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("boom"),
        "{out}"
    );

    server.stop().await;
}

// ---- 2. a verso client calls a Python oslo.messaging server ---------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verso_client_calls_python_server() {
    let env = Env::get();
    let topic = unique_topic("rs-to-py");
    let _py = env.py_server(&topic, "py-1", None);
    let transport = env.transport().await;
    let ctx = RequestContext::new("req-rs-interop").with_user("rs-client");

    let client = RpcClient::new(transport.clone(), Target::new(topic.clone()))
        .version_cap(Version::new(1, 1))
        .timeout(Duration::from_secs(15));
    let got = client
        .call(&ctx, "ping", "1.0", json!({"arg": {"hello": "world"}}))
        .await
        .expect("ping");
    assert_eq!(got["arg"], json!({"hello": "world"}));
    assert_eq!(got["peer"], "python");
    assert_eq!(got["user"], "rs-client", "context crossed: {got}");
    let got = client
        .prepare()
        .server("py-1")
        .call(&ctx, "ping", "1.1", json!({"arg": 5}))
        .await
        .expect("ping at 1.1 to one server");
    assert_eq!(got["arg"], 5);

    // Above the Python server's version: typed UnsupportedVersion.
    let wide = RpcClient::new(transport.clone(), Target::new(topic.clone()))
        .timeout(Duration::from_secs(15));
    match wide.call(&ctx, "ping", "1.2", json!({"arg": 1})).await {
        Err(RpcError::UnsupportedVersion { requested, .. }) => {
            assert_eq!(requested, Version::new(1, 2))
        }
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }

    // Caps respected: above the cap fails locally, nothing sent.
    let capped = RpcClient::new(transport.clone(), Target::new(topic.clone()))
        .version_cap(Version::new(1, 0));
    assert!(capped.can_send_version("1.0"));
    assert!(!capped.can_send_version("1.1"));
    match capped
        .call(&ctx, "echo_thing", "1.1", json!({"thing": null}))
        .await
    {
        Err(RpcError::VersionCap { requested, cap }) => {
            assert_eq!((requested, cap), (Version::new(1, 1), Version::new(1, 0)))
        }
        other => panic!("expected VersionCap, got {other:?}"),
    }

    // Object argument and result, as OVO primitives both ways.
    let thing = InteropThing {
        id: 9.into(),
        name: "fpga".into(),
        tags: vec!["x".to_string()].into(),
        ..InteropThing::blank()
    };
    let got = client
        .call(
            &ctx,
            "echo_thing",
            "1.1",
            json!({"thing": verso::FieldValue::to_primitive(&thing)}),
        )
        .await
        .expect("echo_thing");
    let back = InteropThing::from_primitive(&got).expect("an InteropThing primitive");
    assert_eq!(back.name.get().map(String::as_str), Some("FPGA"));
    assert_eq!(
        back.tags.get().cloned(),
        Some(vec!["x".to_string(), "py".to_string()])
    );

    // A remote error raised by the Python method.
    match client
        .call(&ctx, "fail", "1.0", json!({"message": "kaput"}))
        .await
    {
        Err(RpcError::Remote(r)) => {
            assert_eq!(r.kind, "ValueError");
            assert_eq!(r.module, "builtins");
            assert!(r.message.contains("kaput"), "{r:?}");
        }
        other => panic!("expected Remote(ValueError), got {other:?}"),
    }
    match client.call(&ctx, "no_such_method", "1.0", json!({})).await {
        Err(RpcError::NoSuchMethod { method }) => assert_eq!(method, "no_such_method"),
        other => panic!("expected NoSuchMethod, got {other:?}"),
    }

    // The rpc_client example against the Python server.
    let out = env.example_client(&topic, &["--method", "ping", "--arg", r#"{"k": 1}"#]);
    assert!(out.status.success(), "{out:?}");
    let line: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(line["arg"], json!({"k": 1}));
    let out = env.example_client(
        &topic,
        &[
            "--method",
            "ping",
            "--arg",
            "1",
            "--version",
            "1.1",
            "--cap",
            "1.0",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("VersionCap"),
        "{out:?}"
    );
    let out = env.example_client(
        &topic,
        &["--method", "ping", "--arg", "1", "--version", "1.2"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("UnsupportedVersion"),
        "{out:?}"
    );
}

/// `InteropThing` as a release that stops at 1.0 has it (no `tags`).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "verso_interop", name = "InteropThing", version = "1.0")]
struct InteropThingN {
    id: verso::Field<i64>,
    name: verso::Field<String>,
    meta: verso::ObjectMeta,
}

/// peer.py's `echo_thing`, as a release N client declares it.
#[derive(verso_rpc::RpcMethod, Debug)]
#[rpc(name = "echo_thing", since = "1.1", reply = InteropThingN)]
struct EchoThingN {
    thing: InteropThingN,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_n_client_gets_a_python_servers_newer_reply_backported() {
    use verso_rpc::conductor::{add_object_endpoints, ConductorApi, INDIRECTION_VERSION};
    let env = Env::get();
    let topic = unique_topic("rs-n-to-py");
    let _py = env.py_server(&topic, "py-1", None);
    let transport = env.transport().await;
    // A verso conductor that knows InteropThing 1.1 serves object_backport_versions.
    let mut registry = verso::Registry::new();
    registry.register::<InteropThing>();
    let conductor_topic = format!("{topic}-conductor");
    let conductor = verso_rpc::RpcServer::new(transport.clone(), Target::new(&conductor_topic))
        .endpoint(add_object_endpoints(
            verso_rpc::Endpoint::new(Version::new(1, 1)),
            INDIRECTION_VERSION,
            Arc::new(registry),
            |ctx| ctx,
        ))
        .expect("endpoint")
        .start()
        .await
        .expect("conductor starts");
    let api = ConductorApi::new(
        RpcClient::new(transport.clone(), Target::new(&conductor_topic))
            .timeout(Duration::from_secs(15)),
        INDIRECTION_VERSION,
    );
    let ctx = RequestContext::new("req-rs-n").with_indirection("verso_interop", Arc::new(api));
    let client = RpcClient::new(transport.clone(), Target::new(topic.clone()))
        .timeout(Duration::from_secs(15));
    let thing = InteropThingN {
        id: 9.into(),
        name: "fpga".into(),
        ..InteropThingN::blank()
    };

    // The Python server replies InteropThing 1.1 (OVO's serializer, its own version);
    // the release N client has the conductor backport it to 1.0 and decodes that.
    let back = client
        .call_method(
            &ctx,
            EchoThingN {
                thing: thing.clone(),
            },
        )
        .await
        .expect("a backported reply");
    assert_eq!(back.name.get().map(String::as_str), Some("FPGA"));
    assert_eq!(back.id.get(), Some(&9));
    let primitive = verso::FieldValue::to_primitive(&back);
    assert_eq!(primitive["versioned_object.version"], "1.0");
    assert!(primitive["versioned_object.data"].get("tags").is_none());

    // Without indirection: refused as before.
    let err = client
        .call_method(&RequestContext::new("req-rs-plain"), EchoThingN { thing })
        .await
        .expect_err("1.1 is newer than this client");
    assert!(
        matches!(&err, RpcError::Serialization { detail }
            if detail.contains("Version 1.1 of InteropThing is not supported, supported version is 1.0")),
        "{err}"
    );
    conductor.stop().await;
}

// ---- 3. cast and fanout both ways -----------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn casts_and_fanout_from_python_to_verso() {
    let env = Env::get();
    let topic = unique_topic("cast-py-to-rs");
    let (a, mut casts_a) = start_verso_server(env.transport().await, &topic, "rs-a").await;
    let (b, mut casts_b) = start_verso_server(env.transport().await, &topic, "rs-b").await;

    let out = env.py_client(
        &topic,
        &[
            "--method",
            "record",
            "--arg",
            r#""direct""#,
            "--server",
            "rs-b",
            "--cast",
        ],
    );
    assert_eq!(out, json!({"ok": null}));
    assert_eq!(recv(&mut casts_b).await, json!("direct"));

    let out = env.py_client(
        &topic,
        &["--method", "record", "--arg", r#""all""#, "--fanout"],
    );
    assert_eq!(out, json!({"ok": null}));
    assert_eq!(recv(&mut casts_a).await, json!("all"));
    assert_eq!(recv(&mut casts_b).await, json!("all"));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), casts_a.recv())
            .await
            .is_err(),
        "server a got the direct cast to b"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn casts_and_fanout_from_verso_to_python() {
    let env = Env::get();
    let topic = unique_topic("cast-rs-to-py");
    let dir = tempdir();
    let rec_a = dir.path().join("a.jsonl");
    let rec_b = dir.path().join("b.jsonl");
    let _a = env.py_server(&topic, "py-a", Some(&rec_a));
    let _b = env.py_server(&topic, "py-b", Some(&rec_b));
    let client = RpcClient::new(env.transport().await, Target::new(topic.clone()));
    let ctx = RequestContext::new("req-cast");

    client
        .prepare()
        .server("py-a")
        .cast(&ctx, "record", "1.0", json!({"arg": "direct"}))
        .await
        .expect("cast");
    client
        .prepare()
        .fanout()
        .cast(&ctx, "record", "1.0", json!({"arg": "all"}))
        .await
        .expect("fanout");
    let a = wait_lines(&rec_a, 2).await;
    let b = wait_lines(&rec_b, 1).await;
    let args = |lines: &[Value]| lines.iter().map(|l| l["arg"].clone()).collect::<Vec<_>>();
    let mut got_a = args(&a);
    got_a.sort_by_key(ToString::to_string);
    assert_eq!(got_a, vec![json!("all"), json!("direct")]);
    assert_eq!(args(&b), vec![json!("all")]);
}

// ---- the wire itself, read with bare lapin --------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_flags_match_oslo_messaging() {
    let env = Env::get();
    let topic = unique_topic("wire");
    let raw = RawPeer::connect(&env.url).await;
    let queue = raw.bind_topic_queue(&topic).await;
    let transport = env.transport().await;
    let client = RpcClient::new(transport.clone(), Target::new(topic.clone()))
        .timeout(Duration::from_secs(7));
    let ctx = RequestContext::new("req-wire").with_user("u");

    let call =
        tokio::spawn(async move { client.call(&ctx, "ping", "1.0", json!({"arg": 1})).await });
    let d = raw.next(&queue).await;
    let p = &d.properties;
    assert_eq!(
        p.content_type().as_ref().map(|s| s.as_str()),
        Some("application/json")
    );
    assert_eq!(
        p.content_encoding().as_ref().map(|s| s.as_str()),
        Some("utf-8")
    );
    assert_eq!(*p.delivery_mode(), Some(2));
    assert_eq!(*p.priority(), Some(0));
    assert_eq!(p.expiration().as_ref().map(|s| s.as_str()), Some("7000"));
    assert!(p.reply_to().is_none() && p.correlation_id().is_none());
    let body: Value = serde_json::from_slice(&d.data).unwrap();
    assert_eq!(body["oslo.version"], "2.0");
    let inner: Value = serde_json::from_str(body["oslo.message"].as_str().unwrap()).unwrap();
    for key in ["_msg_id", "_reply_q", "_unique_id"] {
        assert!(inner[key].is_string(), "{key} in {inner}");
    }
    assert!(inner["_timeout"].is_null());
    assert_eq!(inner["_context_user"], "u");
    let reply_q = inner["_reply_q"].as_str().unwrap().to_owned();
    assert!(
        reply_q.starts_with("reply_") && reply_q.len() == 6 + 32,
        "{reply_q}"
    );
    // Reply as an oslo.messaging 18 server does.
    let reply = json!({"result": {"pong": 1}, "failure": null, "ending": true,
        "_msg_id": inner["_msg_id"], "_unique_id": "0123456789abcdef0123456789abcdef"});
    raw.publish_enveloped("", &reply_q, &reply).await;
    assert_eq!(call.await.unwrap().unwrap(), json!({"pong": 1}));

    // A cast: no expiration, no call keys.
    transport
        .cast(
            &Target::new(topic.clone()),
            Request::from_message(json!({"method": "m"}).as_object().cloned().unwrap()).unwrap(),
        )
        .await
        .unwrap();
    let d = raw.next(&queue).await;
    assert!(d.properties.expiration().is_none());
    let body: Value = serde_json::from_slice(&d.data).unwrap();
    let inner: Value = serde_json::from_str(body["oslo.message"].as_str().unwrap()).unwrap();
    assert!(
        inner["_unique_id"].is_string() && inner.get("_msg_id").is_none(),
        "{inner}"
    );

    // The reply queue's and a server's queues' flags, as the broker sees them.
    let (_srv, _casts) = start_verso_server(transport.clone(), &topic, "w1").await;
    raw.assert_queue(&reply_q, true).await;
    raw.assert_queue(&topic, false).await;
    raw.assert_queue(&format!("{topic}.w1"), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_deliveries_run_once() {
    let env = Env::get();
    let topic = unique_topic("dup");
    let (server, mut casts) = start_verso_server(env.transport().await, &topic, "d1").await;
    let raw = RawPeer::connect(&env.url).await;
    let msg = json!({"method": "record", "args": {"arg": "once"}, "version": "1.0",
        "_unique_id": "feedfacefeedfacefeedfacefeedface"});
    raw.publish_enveloped("openstack", &topic, &msg).await;
    raw.publish_enveloped("openstack", &topic, &msg).await;
    assert_eq!(recv(&mut casts).await, json!("once"));
    assert!(
        tokio::time::timeout(Duration::from_millis(500), casts.recv())
            .await
            .is_err(),
        "the duplicate ran"
    );
    server.stop().await;
}

/// A call as oslo.messaging sends it, answered to `reply_q`.
fn raw_call(msg_id: &str, reply_q: &str, arg: i64) -> Value {
    json!({"method": "ping", "args": {"arg": arg}, "version": "1.0", "_msg_id": msg_id,
        "_reply_q": reply_q, "_timeout": null,
        "_unique_id": uuid::Uuid::new_v4().simple().to_string()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_wait_for_a_missing_reply_queue_then_give_up() {
    let env = Env::get();
    let topic = unique_topic("missing-reply");
    // A server that retries a reply to a missing queue for 2 s (oslo's default is 60 s).
    let url = format!("{}?kombu_missing_consumer_retry_timeout=2", env.url);
    let server_t = Arc::new(AmqpTransport::connect(&url).await.expect("RabbitMQ"));
    let (server, _casts) = start_verso_server(server_t, &topic, "m1").await;
    let raw = RawPeer::connect(&env.url).await;

    // The caller's reply queue appears only after the reply was first sent (a caller that
    // is reconnecting): the server retries, and the reply arrives.
    let late_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
    raw.publish_enveloped("openstack", &topic, &raw_call("late", &late_q, 1))
        .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    raw.consume_queue(&late_q).await;
    let reply = raw
        .try_next(&late_q, Duration::from_secs(5))
        .await
        .expect("the retried reply arrived");
    assert_eq!(reply["_msg_id"], "late");
    assert_eq!(reply["result"]["arg"], 1);

    // A reply queue that never appears: abandoned after the timeout, and later replies
    // to it are dropped at once, even once the queue exists.
    let gone_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
    raw.publish_enveloped("openstack", &topic, &raw_call("gone-1", &gone_q, 2))
        .await;
    tokio::time::sleep(Duration::from_millis(3000)).await;
    raw.consume_queue(&gone_q).await;
    raw.publish_enveloped("openstack", &topic, &raw_call("gone-2", &gone_q, 3))
        .await;
    assert_eq!(
        raw.try_next(&gone_q, Duration::from_millis(1500)).await,
        None,
        "a reply to an abandoned reply queue was delivered"
    );

    // The server is fine: a caller whose queue exists gets its reply.
    let ok_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
    raw.consume_queue(&ok_q).await;
    raw.publish_enveloped("openstack", &topic, &raw_call("ok", &ok_q, 4))
        .await;
    let reply = raw
        .try_next(&ok_q, Duration::from_secs(5))
        .await
        .expect("a reply");
    assert_eq!(
        (reply["_msg_id"].clone(), reply["result"]["arg"].clone()),
        (json!("ok"), json!(4))
    );
    server.stop().await;
}

/// The application's runtime may end before its last clone of the transport is dropped:
/// that drop, outside any runtime, closes the connection without a panic.
#[test]
fn a_transport_dropped_outside_any_runtime_closes_quietly() {
    let env = Env::get();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let transport = rt.block_on(async {
        let t = env.amqp().await;
        serves_and_calls(&t).await;
        t
    });
    drop(rt);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(transport)));
    assert!(
        outcome.is_ok(),
        "dropping the transport outside a runtime panicked"
    );
}

/// Many calls in flight at once on one transport, to two servers of a topic: each gets
/// its own reply (correlation by `_msg_id` through the one reply queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_each_get_their_own_reply() {
    let env = Env::get();
    let topic = unique_topic("concurrent");
    let server_t = env.amqp().await;
    let (s1, _c1) = start_verso_server(server_t.clone(), &topic, "a").await;
    let (s2, _c2) = start_verso_server(server_t.clone(), &topic, "b").await;
    let client =
        RpcClient::new(env.transport().await, Target::new(topic)).timeout(Duration::from_secs(20));
    let calls = (0..300).map(|n| {
        let client = client.clone();
        tokio::spawn(async move {
            let ctx = RequestContext::new(format!("req-{n}"));
            let reply = client.call(&ctx, "ping", "1.0", json!({"arg": n})).await;
            (n, reply)
        })
    });
    let mut servers = std::collections::HashSet::new();
    for call in futures::future::join_all(calls).await {
        let (n, reply) = call.expect("task");
        let reply = reply.unwrap_or_else(|e| panic!("call {n}: {e:?}"));
        assert_eq!(reply["arg"], n, "call {n} got another call's reply");
        servers.insert(reply["server"].as_str().unwrap_or_default().to_owned());
    }
    assert_eq!(servers.len(), 2, "both servers answered: {servers:?}");
    s1.stop().await;
    s2.stop().await;
}

/// `close()` ends the transport for good: its listeners' streams end, it does not
/// reconnect, and calls fail at once saying it was closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_transport_stays_closed_and_ends_its_listeners() {
    let env = Env::get();
    let t = env.amqp().await;
    let target = Target::new(unique_topic("closed")).with_server("c1");
    let mut listener = verso_rpc::transport::Transport::listen(&*t, &target)
        .await
        .expect("listen");
    t.close().await;
    let end = tokio::time::timeout(Duration::from_secs(5), listener.next())
        .await
        .expect("the listener's stream ends after close()");
    assert!(end.is_none(), "{end:?}");
    // Longer than the reconnect delay (1 s): still closed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!t.is_connected());
    let started = std::time::Instant::now();
    let call = RpcClient::new(t.clone(), target)
        .timeout(Duration::from_secs(10))
        .call(
            &RequestContext::new("req-closed"),
            "ping",
            "1.0",
            json!({"arg": 1}),
        )
        .await;
    match call {
        Err(e @ RpcError::Transport { .. }) => {
            let RpcError::Transport { detail, .. } = &e else {
                unreachable!()
            };
            assert!(detail.contains("closed"), "{detail}");
            // The cause is kept: the transport's own error says it was closed.
            assert!(
                matches!(e.transport_cause(), Some(AmqpError::Closed { .. })),
                "{e:?}"
            );
        }
        other => panic!("expected a typed Transport error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(1), "failed at once");
}

/// A declaration the broker refuses fails the cast with the broker's reason, every time,
/// and the transport goes on working (each refusal costs amqprs a channel it never frees;
/// the transport reconnects before they run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_declarations_carry_the_brokers_reason() {
    let env = Env::get();
    let topic = unique_topic("refused");
    // `<topic>_fanout` as something else than oslo's auto-delete fanout exchange.
    RawPeer::connect(&env.url)
        .await
        .declare_durable_topic_exchange(&format!("{topic}_fanout"))
        .await;
    let t = env.amqp().await;
    let client = RpcClient::new(t.clone(), Target::new(topic.clone()));
    let ctx = RequestContext::new("req-refused");
    for _ in 0..80 {
        let fanout = client
            .prepare()
            .fanout()
            .cast(&ctx, "ping", "1.0", json!({"arg": 1}))
            .await;
        match fanout {
            Err(RpcError::Transport { detail, .. }) => assert!(
                detail.contains("refused to declare exchange")
                    && detail.contains("PRECONDITION_FAILED"),
                "{detail}"
            ),
            other => panic!("expected the broker's refusal, got {other:?}"),
        }
    }
    serves_and_calls(&t).await;
    RawPeer::connect(&env.url)
        .await
        .delete_exchange(&format!("{topic}_fanout"))
        .await;
}

/// A server whose queue is deleted under it (the broker cancels its consumer) reconnects,
/// declares the queue again and serves calls to its topic again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_queue_is_deleted_declares_it_again() {
    let env = Env::get();
    let topic = unique_topic("deleted");
    let server_t = env.amqp().await;
    let (server, _casts) = start_verso_server(server_t.clone(), &topic, "d1").await;
    let client = RpcClient::new(env.transport().await, Target::new(topic.clone()))
        .timeout(Duration::from_secs(3));
    let ctx = RequestContext::new("req-deleted");
    let ok = client.call(&ctx, "ping", "1.0", json!({"arg": 1})).await;
    assert_eq!(ok.expect("before the delete")["arg"], 1);

    RawPeer::connect(&env.url).await.delete_queue(&topic).await;
    // Until the queue is back a call is unroutable and times out; then it is served.
    ping_until_served(&client, &ctx, Duration::from_secs(20), |e| {
        matches!(e, RpcError::Timeout { .. })
    })
    .await;
    server.stop().await;
}

/// Names longer than AMQP's 255 bytes are typed errors before anything is sent, and the
/// transport goes on working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_amqp_cannot_carry_are_typed_errors() {
    let env = Env::get();
    let t = env.amqp().await;
    let long = "t".repeat(300);
    let client =
        RpcClient::new(t.clone(), Target::new(long.clone())).timeout(Duration::from_secs(5));
    let ctx = RequestContext::new("req-long");
    for result in [
        client
            .call(&ctx, "ping", "1.0", json!({"arg": 1}))
            .await
            .map(drop),
        client.cast(&ctx, "ping", "1.0", json!({"arg": 1})).await,
        client
            .prepare()
            .fanout()
            .cast(&ctx, "ping", "1.0", json!({"arg": 1}))
            .await,
    ] {
        match result {
            Err(RpcError::Transport { ref detail, .. }) => {
                assert!(detail.contains("at most 255"), "{detail}");
                let e = result.as_ref().unwrap_err();
                assert!(
                    matches!(e.transport_cause(), Some(AmqpError::NameTooLong { .. })),
                    "{e:?}"
                );
            }
            other => panic!("expected a typed Transport error, got {other:?}"),
        }
    }
    match verso_rpc::transport::Transport::listen(&*t, &Target::new(long))
        .await
        .map(drop)
    {
        Err(RpcError::Transport { detail, .. }) => {
            assert!(detail.contains("at most 255"), "{detail}")
        }
        other => panic!("expected a typed Transport error, got {other:?}"),
    }
    serves_and_calls(&t).await;
}

/// A vhost the broker does not have is named as such (RabbitMQ refuses `connection.open`
/// with 530 NOT_ALLOWED), and the connect error names the broker once, without the
/// password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_vhost_is_named_and_the_broker_once() {
    let env = Env::get();
    let mut config = verso_rpc::transport::amqp::AmqpConfig::from_url(&env.url).expect("url");
    let vhost = format!("verso-no-such-vhost-{}", uuid::Uuid::new_v4().simple());
    config.vhost = vhost.clone();
    let broker = config.hosts[0].to_string();
    let password = config.hosts[0].password.clone();
    let e = match AmqpTransport::connect_with(config).await {
        Err(e @ verso_rpc::transport::amqp::AmqpError::Connect { .. }) => e,
        Err(other) => panic!("expected Connect, got {other:?}"),
        Ok(_) => panic!("connected to a vhost that does not exist"),
    };
    assert_eq!(e.connect_kind(), Some(ConnectKind::VhostNotFound), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("vhost '{vhost}' not found")),
        "{text}"
    );
    assert!(text.contains("rabbitmqctl add_vhost"), "{text}");
    assert!(!text.contains("MethodHeader"), "no raw frame: {text}");
    assert_eq!(text.matches(&broker).count(), 1, "the broker once: {text}");
    assert!(
        !text.contains(&format!(":{password}@")),
        "no password: {text}"
    );
}

/// A wrong password is a refused login, typed as such, and the password is not shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_is_typed() {
    let env = Env::get();
    let mut config = verso_rpc::transport::amqp::AmqpConfig::from_url(&env.url).expect("url");
    let wrong = format!("wrong-{}", uuid::Uuid::new_v4().simple());
    config.hosts[0].password = wrong.clone();
    let e = match AmqpTransport::connect_with(config).await {
        Err(e) => e,
        Ok(_) => panic!("connected with a wrong password"),
    };
    assert_eq!(e.connect_kind(), Some(ConnectKind::LoginRefused), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("refuses a login"), "{text}");
    assert!(!text.contains(&wrong), "no password: {text}");
}

/// A call to a topic nobody serves: the rpc_client example gives up after its
/// --timeout and says to raise --timeout, its own option, not a library call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_client_names_its_timeout_option() {
    let env = Env::get();
    let topic = unique_topic("nobody");
    let started = std::time::Instant::now();
    let out = env.example_client(&topic, &["--method", "ping", "--timeout", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr.contains("Timeout"), "{stderr}");
    assert!(stderr.contains(&format!("on topic '{topic}'")), "{stderr}");
    assert!(stderr.contains("within 1s"), "{stderr}");
    assert!(stderr.contains("raise --timeout"), "{stderr}");
    assert!(!stderr.contains("prepare()"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the last --timeout wins"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_the_connection_drops() {
    let env = Env::get();
    let topic = unique_topic("reconnect");
    let proxy = CuttableProxy::start(&env.url).await;
    let url = proxy.url(&env.url);
    let server_t = std::sync::Arc::new(AmqpTransport::connect(&url).await.expect("via proxy"));
    let client_t = std::sync::Arc::new(AmqpTransport::connect(&url).await.expect("via proxy"));
    let (server, _casts) = start_verso_server(server_t.clone(), &topic, "r1").await;
    let client = RpcClient::new(client_t.clone(), Target::new(topic.clone()))
        .timeout(Duration::from_secs(20));
    let ctx = RequestContext::new("req-reconnect");
    let ok = client.call(&ctx, "ping", "1.0", json!({"arg": 1})).await;
    assert_eq!(ok.expect("before the drop")["arg"], 1);

    // A call in flight when the connection drops fails with ConnectionLost, at once.
    let slow = {
        let client = client.clone();
        let ctx = ctx.clone();
        tokio::spawn(async move { client.call(&ctx, "sleep", "1.1", json!({"arg": 3})).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = std::time::Instant::now();
    proxy.cut();
    match slow.await.unwrap() {
        Err(RpcError::ConnectionLost { msg_id, detail }) => {
            assert_eq!(msg_id.len(), 32, "{msg_id}");
            assert!(
                detail.contains("connection to RabbitMQ") && detail.contains("was lost"),
                "{detail}"
            );
            assert!(!detail.contains("guest:guest"), "no password: {detail}");
        }
        other => panic!("expected ConnectionLost, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5), "failed fast");

    // Both sides reconnect by themselves; the server's listener is back.
    ping_until_served(&client, &ctx, Duration::from_secs(30), |_| true).await;
    assert!(server_t.is_connected() && client_t.is_connected());
    server.stop().await;
}

// ---- hostile input: answered where a reply is possible, and the server goes on -------

/// What the raw caller's reply to `msg_id` says: the typed error of its failure.
async fn failure_of(raw: &RawPeer, reply_q: &str, msg_id: &str) -> RpcError {
    let reply = raw
        .try_next(reply_q, Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("no reply to {msg_id} within 10 s"));
    assert_eq!(reply["_msg_id"], msg_id, "{reply}");
    let failure = reply["failure"]
        .as_str()
        .unwrap_or_else(|| panic!("a failure in reply to {msg_id}: {reply}"));
    let remote = verso_rpc::RemoteError::from_failure_str(failure).expect("a failure");
    RpcError::from_remote(remote, "?", Version::new(1, 0))
}

/// A call as oslo.messaging sends it, with the given method and arguments.
fn call_of(msg_id: &str, reply_q: &str, method: &str, args: Value) -> Value {
    json!({"method": method, "args": args, "version": "1.1", "_msg_id": msg_id,
        "_reply_q": reply_q, "_timeout": null,
        "_unique_id": uuid::Uuid::new_v4().simple().to_string()})
}

/// Garbage of every kind reaches a verso server through RabbitMQ: each call that says
/// where its reply goes gets a typed error, the rest is logged and dropped, and the next
/// valid call is served every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_typed_errors_and_the_server_keeps_serving() {
    use verso::{DecodeLimits, LimitError};
    use verso_rpc::message::MessageLimits;
    use verso_rpc::transport::amqp::AmqpConfig;
    let env = Env::get();
    let topic = unique_topic("garbage");
    let limits = MessageLimits {
        max_message_size: 1 << 20,
        decode: DecodeLimits::default(),
    };
    let config = AmqpConfig::from_url(&env.url)
        .expect("url")
        .with_limits(limits);
    let server_t = Arc::new(AmqpTransport::connect_with(config).await.expect("RabbitMQ"));
    let (server, _casts) = start_verso_server(server_t, &topic, "g1").await;
    // The conductor's object endpoints over the Cyborg registry, on a topic of their own.
    let conductor_topic = format!("{topic}-conductor");
    let conductor =
        verso_rpc::RpcServer::new(env.transport().await, Target::new(conductor_topic.clone()))
            .endpoint(verso_rpc::conductor::add_object_endpoints(
                verso_rpc::Endpoint::new(Version::new(1, 1)),
                verso_rpc::conductor::INDIRECTION_VERSION,
                Arc::new(cyborg_model::registry()),
                |ctx| ctx,
            ))
            .expect("endpoint")
            .start()
            .await
            .expect("conductor starts");

    let raw = RawPeer::connect(&env.url).await;
    let reply_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
    raw.consume_queue(&reply_q).await;
    let mut served = 0;
    // After each piece of garbage a valid call is answered, and it is the first reply
    // on the queue: nothing was sent for garbage that names no reply address.
    let mut still_serves = || {
        served += 1;
        let msg_id = format!("ok-{served}");
        let call = call_of(&msg_id, &reply_q, "ping", json!({"arg": served}));
        (msg_id, call, served)
    };
    macro_rules! assert_still_serves {
        () => {{
            let (msg_id, call, n) = still_serves();
            raw.publish_enveloped("openstack", &topic, &call).await;
            let reply = raw
                .try_next(&reply_q, Duration::from_secs(10))
                .await
                .expect("the server still answers");
            assert_eq!(
                (&reply["_msg_id"], &reply["result"]["arg"]),
                (&json!(msg_id), &json!(n)),
                "{reply}"
            );
        }};
    }

    // Not JSON, not an object, a broken envelope: no reply address, so no reply.
    for body in [
        &b"\x00\xffnot json {"[..],
        b"[1, 2, 3]",
        br#"{"oslo.version": "2.0", "oslo.message": "{nope"}"#,
        br#"{"oslo.version": "2.0", "oslo.message": "[1]"}"#,
        br#"{"oslo.version": "2.0"}"#,
    ] {
        raw.publish_raw("openstack", &topic, body).await;
        assert_still_serves!();
    }

    // An envelope this side cannot read, and a message dict without a method.
    let inner = call_of("bad-envelope", &reply_q, "ping", json!({"arg": 1}));
    let body = json!({"oslo.version": "3.0", "oslo.message": inner.to_string()});
    raw.publish_raw("openstack", &topic, body.to_string().as_bytes())
        .await;
    match failure_of(&raw, &reply_q, "bad-envelope").await {
        RpcError::MalformedMessage { detail } => assert!(detail.contains("3.0"), "{detail}"),
        other => panic!("expected MalformedMessage, got {other:?}"),
    }
    let mut no_method = call_of("no-method", &reply_q, "ping", json!({}));
    no_method.as_object_mut().expect("object").remove("method");
    raw.publish_enveloped("openstack", &topic, &no_method).await;
    assert!(matches!(
        failure_of(&raw, &reply_q, "no-method").await,
        RpcError::MalformedMessage { .. }
    ));
    assert_still_serves!();

    // An unknown method.
    raw.publish_enveloped(
        "openstack",
        &topic,
        &call_of("nope", &reply_q, "nope", json!({})),
    )
    .await;
    assert!(matches!(
        failure_of(&raw, &reply_q, "nope").await,
        RpcError::NoSuchMethod { method } if method == "nope"
    ));
    assert_still_serves!();

    // A primitive naming a class the conductor's registry does not have.
    let unknown = json!({"versioned_object.name": "Nope", "versioned_object.namespace": "cyborg",
        "versioned_object.version": "1.0", "versioned_object.data": {}});
    let call = call_of(
        "unregistered",
        &reply_q,
        "object_backport_versions",
        json!({"objinst": unknown, "object_versions": {}}),
    );
    raw.publish_enveloped("openstack", &conductor_topic, &call)
        .await;
    match failure_of(&raw, &reply_q, "unregistered").await {
        RpcError::Remote(r) => {
            assert_eq!(r.kind, "UnsupportedObjectError", "{r:?}");
            assert!(r.message.contains("Nope"), "{r:?}");
        }
        other => panic!("expected UnsupportedObjectError, got {other:?}"),
    }

    // A body over the server's 1 MiB limit, refused unread.
    let big = call_of("big", &reply_q, "ping", json!({"arg": "x".repeat(1 << 20)}));
    raw.publish_enveloped("openstack", &topic, &big).await;
    match failure_of(&raw, &reply_q, "big").await {
        RpcError::MessageTooLarge { size, limit } => {
            assert_eq!(limit, 1 << 20);
            assert!(size > limit, "{size}");
        }
        other => panic!("expected MessageTooLarge, got {other:?}"),
    }
    assert_still_serves!();

    // 100,000 nested lists, and a list of 100,001 members: refused unparsed.
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let long = format!("[{}0]", "0,".repeat(100_000));
    for (arg, want) in [
        (deep, LimitError::TooDeep { limit: 32 }),
        (long, LimitError::TooManyMembers { limit: 100_000 }),
    ] {
        let id = format!("limit-{want}");
        // Written by hand: serde_json would not build a document that deep.
        let inner = format!(
            r#"{{"method": "ping", "version": "1.0", "_msg_id": "{id}", "_reply_q": "{reply_q}", "args": {{"arg": {arg}}}}}"#
        );
        let body = json!({"oslo.version": "2.0", "oslo.message": inner});
        raw.publish_raw("openstack", &topic, body.to_string().as_bytes())
            .await;
        match failure_of(&raw, &reply_q, &id).await {
            RpcError::LimitExceeded { source } => assert_eq!(source, want),
            other => panic!("expected LimitExceeded, got {other:?}"),
        }
        assert_still_serves!();
    }

    // A verso client sees the same refusals as typed errors.
    let client = RpcClient::new(env.transport().await, Target::new(topic.clone()))
        .timeout(Duration::from_secs(20));
    let ctx = RequestContext::new("req-hostile");
    match client
        .call(&ctx, "ping", "1.0", json!({"arg": "x".repeat(1 << 20)}))
        .await
    {
        Err(RpcError::MessageTooLarge { limit, .. }) => assert_eq!(limit, 1 << 20),
        other => panic!("expected MessageTooLarge, got {other:?}"),
    }
    let mut deep = json!(1);
    for _ in 0..40 {
        deep = json!([deep]);
    }
    match client.call(&ctx, "ping", "1.0", json!({"arg": deep})).await {
        Err(RpcError::LimitExceeded { source }) => {
            assert_eq!(source, LimitError::TooDeep { limit: 32 })
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    assert_eq!(
        client
            .call(&ctx, "ping", "1.0", json!({"arg": "after"}))
            .await
            .expect("still served")["arg"],
        "after"
    );
    server.stop().await;
    conductor.stop().await;
}

/// A reply the caller cannot read (over its own limit) fails the call at once with the
/// reason, instead of leaving it to time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_reply_fails_its_call_at_once() {
    use verso_rpc::message::MessageLimits;
    use verso_rpc::transport::amqp::AmqpConfig;
    let env = Env::get();
    let topic = unique_topic("big-reply");
    let (server, _casts) = start_verso_server(env.transport().await, &topic, "b1").await;
    let config = AmqpConfig::from_url(&env.url)
        .expect("url")
        .with_limits(MessageLimits {
            max_message_size: 4096,
            ..MessageLimits::default()
        });
    let client_t = Arc::new(AmqpTransport::connect_with(config).await.expect("RabbitMQ"));
    let client = RpcClient::new(client_t, Target::new(topic)).timeout(Duration::from_secs(30));
    let ctx = RequestContext::new("req-big-reply");
    let started = std::time::Instant::now();
    // The request fits the server's 16 MiB; its echoed reply does not fit the client's 4 KiB.
    match client
        .call(&ctx, "ping", "1.0", json!({"arg": "y".repeat(5000)}))
        .await
    {
        Err(RpcError::MessageTooLarge { limit, .. }) => assert_eq!(limit, 4096),
        other => panic!("expected MessageTooLarge, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "failed at once"
    );
    let small = client.call(&ctx, "ping", "1.0", json!({"arg": 1})).await;
    assert_eq!(small.expect("a small reply")["arg"], 1);
    server.stop().await;
}
