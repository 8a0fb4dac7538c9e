//! Unit tests of `client`, beside the private items they exercise.

use super::*;
use crate::caps::{ApiCap, UpgradeLevels};
use crate::testing::{Recording, Sent};
use crate::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RpcServer, ServerHandle};
use serde_json::json;

fn v(major: u32, minor: u32) -> Version {
    Version::new(major, minor)
}

fn ctx() -> RequestContext {
    RequestContext::new("req-1").with_user("demo")
}

/// A conductor at `version` whose `ping` echoes the version the call was sent at.
async fn conductor(t: &Recording, version: Version) -> ServerHandle {
    let ep = Endpoint::new(version)
        .method(
            MethodSpec::new("ping", v(1, 0)).arg(ArgSpec::optional("arg", ArgType::Any, ())),
            |_ctx, args: Args| async move { Ok(json!({"arg": args.value("arg")})) },
        )
        .method(MethodSpec::new("slow", v(1, 0)), |_ctx, _args| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(Value::Null)
        });
    RpcServer::new(
        Arc::new(t.clone()),
        Target::new("conductor").with_server("c1"),
    )
    .endpoint(ep)
    .expect("valid endpoint")
    .start()
    .await
    .expect("listening")
}

fn client(t: &Recording) -> RpcClient {
    RpcClient::new(Arc::new(t.clone()), Target::new("conductor"))
}

#[tokio::test]
async fn cap_1_0_allows_1_0_and_refuses_1_1_before_sending() {
    let t = Recording::default();
    let server = conductor(&t, v(1, 1)).await;
    let c = client(&t).version_cap(v(1, 0));

    c.call(&ctx(), "ping", "1.0", json!({"arg": 1}))
        .await
        .expect("1.0 is within the cap");
    assert_eq!(t.count(), 1);

    let err = c
        .call(&ctx(), "ping", "1.1", json!({"arg": 1}))
        .await
        .expect_err("1.1 is above the cap");
    assert!(
        matches!(err, RpcError::VersionCap { requested, cap } if requested == v(1, 1) && cap == v(1, 0)),
        "{err:?}"
    );
    let err = c
        .cast(&ctx(), "ping", "1.1", json!({}))
        .await
        .expect_err("casts are capped too");
    assert!(matches!(err, RpcError::VersionCap { .. }));
    let err = c
        .prepare()
        .fanout()
        .cast(&ctx(), "ping", "2.0", json!({}))
        .await
        .expect_err("fanouts are capped too");
    assert!(matches!(err, RpcError::VersionCap { .. }));
    assert_eq!(t.count(), 1, "nothing was sent for the refused calls");
    server.stop().await;
}

#[tokio::test]
async fn cap_1_1_allows_1_1_and_sends_each_call_at_its_own_version() {
    let t = Recording::default();
    let server = conductor(&t, v(1, 1)).await;
    let c = client(&t).version_cap(v(1, 1));
    c.call(&ctx(), "ping", "1.1", json!({}))
        .await
        .expect("1.1 within cap 1.1");
    c.call(&ctx(), "ping", "1.0", json!({}))
        .await
        .expect("1.0 within cap 1.1");
    // No relabelling: the 1.0 call went out at 1.0, not raised to the cap.
    assert_eq!(t.versions(), vec!["1.1", "1.0"]);
    server.stop().await;
}

#[test]
fn an_unset_level_leaves_the_client_uncapped_and_a_set_one_caps_it() {
    let t = Recording::default();
    assert_eq!(client(&t).with_cap(None).cap(), None);
    assert_eq!(client(&t).with_cap(Some(v(1, 0))).cap(), Some(v(1, 0)));
    assert!(!client(&t).with_cap(Some(v(1, 0))).can_send_version("1.1"));
}

#[tokio::test]
async fn can_send_version_answers_locally() {
    let t = Recording::default();
    let c = client(&t).version_cap(v(1, 1));
    assert!(c.can_send_version("1.0"));
    assert!(c.can_send_version("1.1"));
    assert!(c.can_send_version(v(1, 1)));
    assert!(!c.can_send_version("1.2"));
    assert!(!c.can_send_version("1.10"));
    assert!(!c.can_send_version("2.0"));
    assert!(!c.can_send_version("0.9"));
    assert!(!c.can_send_version("1.x"));
    let uncapped = client(&t);
    assert!(uncapped.can_send_version("7.3"));
    // No server exists at all, and nothing was sent.
    assert_eq!(t.count(), 0);
}

#[tokio::test]
async fn agent_calls_stay_at_1_0_under_the_default_levels() {
    let levels = UpgradeLevels::defaults([
        ApiCap::new("conductor", v(1, 2), v(1, 1)),
        ApiCap::new("agent", v(1, 2), v(1, 0)),
    ])
    .expect("defaults fit");
    let t = Recording::default();
    let ep = Endpoint::new(v(1, 2))
        .method(MethodSpec::new("refresh", v(1, 0)), |_ctx, _args| async {
            Ok(json!("ok"))
        });
    let agent = RpcServer::new(
        Arc::new(t.clone()),
        Target::new("agent").with_server("host1"),
    )
    .endpoint(ep)
    .expect("valid")
    .start()
    .await
    .expect("listening");
    let cap = levels.cap("agent").expect("declared");
    let c = RpcClient::new(Arc::new(t.clone()), Target::new("agent")).version_cap(cap);
    assert_eq!(c.cap(), Some(v(1, 0)));
    c.prepare()
        .server("host1")
        .call(&ctx(), "refresh", "1.0", json!({}))
        .await
        .expect("1.0 agent call");
    assert!(!c.can_send_version("1.1"));
    assert!(matches!(
        c.call(&ctx(), "refresh", "1.1", json!({})).await,
        Err(RpcError::VersionCap { .. })
    ));
    assert_eq!(t.versions(), vec!["1.0"]);
    let (kind, target, _) = t.last().expect("one message");
    assert_eq!(kind, Sent::Call);
    assert_eq!(target.server.as_deref(), Some("host1"));
    agent.stop().await;
}

#[tokio::test]
async fn a_call_above_the_clients_own_version_is_refused_locally() {
    let t = Recording::default();
    let c = RpcClient::new(
        Arc::new(t.clone()),
        Target::new("conductor").with_version(v(1, 2)),
    );
    assert!(c.can_send_version("1.2"));
    assert!(!c.can_send_version("1.3"));
    assert!(matches!(
        c.call(&ctx(), "ping", "1.3", json!({})).await,
        Err(RpcError::VersionAboveLocal { local, .. }) if local == v(1, 2)
    ));
    assert_eq!(t.count(), 0);
}

#[tokio::test]
async fn bad_versions_and_arguments_are_refused_before_sending() {
    let t = Recording::default();
    let c = client(&t);
    assert!(matches!(
        c.call(&ctx(), "ping", "1.x", json!({})).await,
        Err(RpcError::InvalidVersion { .. })
    ));
    assert!(matches!(
        c.call(&ctx(), "ping", "1.0", json!([1, 2])).await,
        Err(RpcError::ArgumentsNotAnObject { found: "list", .. })
    ));
    assert_eq!(t.count(), 0);
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_typed_per_call_and_by_default() {
    let t = Recording::default();
    let server = conductor(&t, v(1, 0)).await;
    let c = client(&t).timeout(Duration::from_secs(2));
    let err = c
        .prepare()
        .timeout(Duration::from_millis(50))
        .call(&ctx(), "slow", "1.0", json!({}))
        .await
        .expect_err("times out");
    assert!(
        matches!(&err, RpcError::Timeout { method, topic, timeout }
            if method == "slow" && topic == "conductor" && *timeout == Duration::from_millis(50)),
        "{err:?}"
    );
    let err = c
        .call(&ctx(), "slow", "1.0", json!({}))
        .await
        .expect_err("times out");
    assert!(matches!(err, RpcError::Timeout { timeout, .. } if timeout == Duration::from_secs(2)));
    // A fast call still works after the timeouts.
    c.call(&ctx(), "ping", "1.0", json!({}))
        .await
        .expect("fast call");
    drop(server);
}

#[tokio::test(start_paused = true)]
async fn the_call_timeout_bounds_the_applications_layers_too() {
    let t = Recording::default();
    let server = conductor(&t, v(1, 1)).await;
    // A layer that never lets a request through (a rate limit with no budget).
    let stuck = tower::layer::layer_fn(|inner: ClientService| {
        tower::util::BoxCloneSyncService::new(
            tower::ServiceBuilder::new()
                .then(|r: Result<Option<Reply>, RpcError>| async move {
                    std::future::pending::<()>().await;
                    r
                })
                .service(inner),
        )
    });
    let c = client(&t).timeout(Duration::from_secs(5)).layer(stuck);
    let err = c
        .call(&ctx(), "ping", "1.0", json!({}))
        .await
        .expect_err("the layer never answers");
    assert!(
        matches!(&err, RpcError::Timeout { method, timeout, .. }
            if method == "ping" && *timeout == Duration::from_secs(5)),
        "{err:?}"
    );
    // A cast is not timed: it is sent, and the layer holds only its result.
    assert!(
        tokio::time::timeout(
            Duration::from_secs(60),
            c.cast(&ctx(), "ping", "1.0", json!({}))
        )
        .await
        .is_err(),
        "a cast waits for its pipeline, with no timer of its own"
    );
    server.stop().await;
}

#[tokio::test]
async fn nobody_listening_is_unreachable() {
    let t = Recording::default();
    assert!(matches!(
        client(&t).call(&ctx(), "ping", "1.0", json!({})).await,
        Err(RpcError::Unreachable { .. })
    ));
}

#[tokio::test]
async fn the_context_travels_with_the_call() {
    let t = Recording::default();
    let ep = Endpoint::new(v(1, 0)).method(
        MethodSpec::new("whoami", v(1, 0)),
        |ctx: RequestContext, _args| async move {
            Ok(json!({
                "request_id": ctx.request_id,
                "user": ctx.user,
                "project": ctx.project,
                "roles": ctx.roles,
                "extra": ctx.extra,
            }))
        },
    );
    let server = RpcServer::new(Arc::new(t.clone()), Target::new("conductor"))
        .endpoint(ep)
        .expect("valid")
        .start()
        .await
        .expect("listening");
    let mut ctx = RequestContext::new("req-42")
        .with_user("alice")
        .with_project("demo")
        .with_role("admin");
    ctx.extra.insert("tenant_region".into(), json!("r1"));
    let got = client(&t)
        .call(&ctx, "whoami", "1.0", Value::Null)
        .await
        .expect("call");
    assert_eq!(
        got,
        json!({"request_id": "req-42", "user": "alice", "project": "demo",
               "roles": ["admin"], "extra": {"tenant_region": "r1"}})
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(msg["_context_user"], "alice");
    assert_eq!(msg["_context_request_id"], "req-42");
    assert_eq!(msg["_context_tenant_region"], "r1");
    assert_eq!(msg["method"], "whoami");
    assert_eq!(msg["args"], json!({}));
    assert!(!msg.contains_key("namespace"));
    server.stop().await;
}

/// The pattern: `update` gained an optional `force` in 1.2.
async fn update(c: &RpcClient, force: bool) -> Result<Value, RpcError> {
    if c.can_send_version("1.2") {
        c.call(&ctx(), "update", "1.2", json!({"id": 7, "force": force}))
            .await
    } else {
        c.call(&ctx(), "update", "1.1", json!({"id": 7})).await
    }
}

async fn update_server(t: &Recording, topic: &str, version: Version) -> ServerHandle {
    let mut spec = MethodSpec::new("update", v(1, 0)).arg(ArgSpec::required("id", ArgType::Int));
    if version >= v(1, 2) {
        spec = spec.arg(ArgSpec::optional("force", ArgType::Bool, false).since(v(1, 2)));
    }
    let ep = Endpoint::new(version).method(spec, |_ctx, args: Args| async move {
        Ok(json!({"force": args.value("force")}))
    });
    RpcServer::new(Arc::new(t.clone()), Target::new(topic))
        .endpoint(ep)
        .expect("valid")
        .start()
        .await
        .expect("listening")
}

#[tokio::test]
async fn can_send_version_pattern_works_against_old_and_new_servers() {
    let t = Recording::default();
    let old = update_server(&t, "old", v(1, 1)).await;
    let new = update_server(&t, "new", v(1, 2)).await;
    let to = |topic: &str, cap: Version| {
        RpcClient::new(Arc::new(t.clone()), Target::new(topic)).version_cap(cap)
    };

    // Pinned at 1.1: the old form, which both old and new servers take.
    assert_eq!(
        update(&to("old", v(1, 1)), true).await.expect("old"),
        json!({"force": null})
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(
        (msg["version"].as_str(), msg["args"].clone()),
        (Some("1.1"), json!({"id": 7}))
    );
    assert_eq!(
        update(&to("new", v(1, 1)), true).await.expect("new"),
        json!({"force": false})
    );

    // Unpinned to 1.2: the new form.
    assert_eq!(
        update(&to("new", v(1, 2)), true).await.expect("new"),
        json!({"force": true})
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(msg["version"], "1.2");

    // The server checks the argument set against the version it was sent at.
    let c = to("new", v(1, 2));
    assert!(matches!(
        c.call(&ctx(), "update", "1.1", json!({"id": 7, "force": true})).await,
        Err(RpcError::ArgumentNotInVersion { argument, since, requested, .. })
            if argument == "force" && since == v(1, 2) && requested == v(1, 1)
    ));
    // A 1.2 call to a 1.1 server is refused by its dispatcher.
    assert!(matches!(
        to("old", v(1, 2))
            .call(&ctx(), "update", "1.2", json!({"id": 7}))
            .await,
        Err(RpcError::UnsupportedVersion { .. })
    ));
    old.stop().await;
    new.stop().await;
}

/// Wraps strings in `{"s": ...}` on the wire, to see the hook run on both sides.
struct Boxing;
impl Serializer for Boxing {
    fn serialize_entity(&self, _: &RequestContext, v: Value) -> Result<Value, RpcError> {
        Ok(match v {
            Value::String(s) => json!({ "s": s }),
            v => v,
        })
    }
    fn deserialize_entity(&self, _: &RequestContext, v: Value) -> Result<Value, RpcError> {
        match v {
            Value::Object(mut m) if m.len() == 1 && m.contains_key("s") => {
                Ok(m.remove("s").unwrap_or_default())
            }
            Value::Object(m) if m.contains_key("bad") => Err(RpcError::Serialization {
                detail: "bad".into(),
            }),
            v => Ok(v),
        }
    }
}

#[tokio::test]
async fn serializer_hooks_run_on_both_sides() {
    let t = Recording::default();
    let ep = Endpoint::new(v(1, 0)).method(
        MethodSpec::new("upper", v(1, 0)).arg(ArgSpec::required("text", ArgType::Any)),
        |_ctx, args: Args| async move { Ok(json!(args.get::<String>("text")?.to_uppercase())) },
    );
    let server = RpcServer::new(Arc::new(t.clone()), Target::new("svc"))
        .serializer(Arc::new(Boxing))
        .endpoint(ep)
        .expect("valid")
        .start()
        .await
        .expect("listening");
    let c = RpcClient::new(Arc::new(t.clone()), Target::new("svc")).serializer(Arc::new(Boxing));
    let got = c
        .call(&ctx(), "upper", "1.0", json!({"text": "hi"}))
        .await
        .expect("call");
    assert_eq!(got, json!("HI"));
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(msg["args"], json!({"text": {"s": "hi"}}));
    // A server-side serializer failure comes back as an error, not a hang.
    let err = c
        .call(&ctx(), "upper", "1.0", json!({"text": {"bad": 1}}))
        .await
        .expect_err("the server's serializer refuses it");
    let remote = err.as_remote().expect("the server's answer");
    assert_eq!(remote.kind, "RpcError", "{err}");
    assert!(remote.message.contains("bad"), "{err}");
    server.stop().await;
}
