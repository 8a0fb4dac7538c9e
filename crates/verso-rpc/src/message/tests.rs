use super::*;
use serde_json::json;
use verso::LimitError;

/// The `call` of `ping` captured from oslo.messaging 18.3.1 (oslo-messaging-wire.md).
const CAPTURED_CALL: &str = r#"{"oslo.version": "2.0", "oslo.message": "{\"method\": \"ping\", \"args\": {\"arg\": {\"hello\": \"world\"}}, \"version\": \"1.0\", \"_msg_id\": \"8af5b91c48354d08928b786258049a61\", \"_reply_q\": \"reply_853863b1a2654979a939feea01bfa9f1\", \"_timeout\": null, \"_unique_id\": \"6915156c076442fb8a88188edfa0fd28\", \"_context_user\": \"demo-user\", \"_context_project_id\": \"demo-project\", \"_context_system_scope\": null, \"_context_project\": \"demo-project\", \"_context_domain\": null, \"_context_user_domain\": null, \"_context_project_domain\": null, \"_context_is_admin\": false, \"_context_read_only\": false, \"_context_show_deleted\": false, \"_context_auth_token\": null, \"_context_request_id\": \"req-11111111-2222-3333-4444-555555555555\", \"_context_global_request_id\": null, \"_context_resource_uuid\": null, \"_context_roles\": [], \"_context_user_identity\": \"demo-user demo-project - - -\", \"_context_is_admin_project\": true}"}"#;

#[test]
fn captured_python_call_is_read() {
    let body: Value = serde_json::from_str(CAPTURED_CALL).expect("json");
    let req = Request::from_message(open_envelope(body).expect("envelope")).expect("request");
    assert_eq!(req.method, "ping");
    assert_eq!(req.version, Version::new(1, 0));
    assert_eq!(req.args["arg"], json!({"hello": "world"}));
    assert_eq!(req.context.user.as_deref(), Some("demo-user"));
    assert_eq!(
        req.context.request_id,
        "req-11111111-2222-3333-4444-555555555555"
    );
    assert!(req.context.extra.is_empty(), "{:?}", req.context.extra);
}

#[test]
fn our_request_has_the_captured_keys() {
    let body: Value = serde_json::from_str(CAPTURED_CALL).expect("json");
    let captured = open_envelope(body).expect("envelope");
    let req = Request::from_message(captured.clone()).expect("request");
    let ours = req.into_message();
    // Every captured key except the transport's own, with equal values.
    for (k, v) in &captured {
        if ["_msg_id", "_reply_q", "_timeout", "_unique_id"].contains(&k.as_str()) {
            continue;
        }
        assert_eq!(ours.get(k), Some(v), "key {k}");
    }
    assert_eq!(ours.len(), captured.len() - 4);
}

#[test]
fn missing_version_means_1_0_and_bad_fields_are_typed() {
    let m = json!({"method": "m"}).as_object().cloned().expect("object");
    assert_eq!(
        Request::from_message(m).expect("ok").version,
        Version::new(1, 0)
    );
    for bad in [
        json!({}),
        json!({"method": 3}),
        json!({"method": "m", "version": 1.1}),
        json!({"method": "m", "version": "1.x"}),
        json!({"method": "m", "args": [1]}),
    ] {
        let m = bad.as_object().cloned().expect("object");
        assert!(
            matches!(
                Request::from_message(m),
                Err(RpcError::MalformedMessage { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn captured_python_failure_reply_is_read() {
    let reply = json!({
        "result": null,
        "failure": "{\"class\": \"NoSuchMethod\", \"module\": \"oslo_messaging.rpc.dispatcher\", \"message\": \"Endpoint does not support RPC method no_such_method\", \"tb\": [], \"args\": [\"Endpoint does not support RPC method no_such_method\"], \"kwargs\": {}}",
        "ending": true,
        "_msg_id": "d3afe8de500c4082b1849175deef4be9",
    });
    let r = Reply::from_message(reply.as_object().cloned().expect("object")).expect("reply");
    let e = r.0.expect_err("a failure");
    assert_eq!(e.kind, "NoSuchMethod");
}

fn enveloped(inner: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"oslo.version": "2.0", "oslo.message": inner})).expect("json")
}

fn addr(u: &Unreadable) -> Option<(String, String)> {
    u.reply_to().map(|a| (a.msg_id, a.reply_q))
}

fn m1() -> Option<(String, String)> {
    Some(("m1".into(), "reply_q1".into()))
}

#[test]
fn a_body_over_the_size_limit_is_refused_unread_with_its_reply_address() {
    let limits = MessageLimits {
        max_message_size: 1000,
        ..MessageLimits::default()
    };
    let inner = format!(
        r#"{{"method": "ping", "args": {{"x": "{}"}}, "_msg_id": "m1", "_reply_q": "reply_q1"}}"#,
        "\\\"".repeat(600)
    );
    for body in [enveloped(&inner), inner.clone().into_bytes()] {
        let u = read_body(&body, &limits).expect_err("too big");
        assert!(
            matches!(u.error, RpcError::MessageTooLarge { size, limit: 1000 } if size == body.len()),
            "{:?}",
            u.error
        );
        assert_eq!(addr(&u), m1());
    }
    // At the limit it is read.
    let body = enveloped(r#"{"method": "ping"}"#);
    let exact = MessageLimits {
        max_message_size: body.len(),
        ..MessageLimits::default()
    };
    assert_eq!(read_body(&body, &exact).expect("read")["method"], "ping");
}

#[test]
fn deep_or_long_messages_are_refused_unparsed_with_their_reply_address() {
    let limits = MessageLimits::default();
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let long = format!("[{}1]", "1,".repeat(100_000));
    for (arg, limit) in [
        (&deep, LimitError::TooDeep { limit: 32 }),
        (&long, LimitError::TooManyMembers { limit: 100_000 }),
    ] {
        let inner = format!(
            r#"{{"_msg_id": "m1", "method": "ping", "args": {{"x": {arg}}}, "_reply_q": "reply_q1"}}"#
        );
        for body in [enveloped(&inner), inner.clone().into_bytes()] {
            let u = read_body(&body, &limits).expect_err("over a limit");
            assert!(
                matches!(u.error, RpcError::LimitExceeded { source } if source == limit),
                "{:?}",
                u.error
            );
            assert_eq!(addr(&u), m1());
        }
    }
}

#[test]
fn garbage_is_a_typed_error_with_a_reply_address_where_one_can_be_found() {
    let limits = MessageLimits::default();
    type Address = Option<(String, String)>;
    let cases: Vec<(Vec<u8>, Address)> = vec![
        (b"not json at all".to_vec(), None),
        (b"\xff\xfe{".to_vec(), None),
        (b"[1, 2]".to_vec(), None),
        (b"\"a string\"".to_vec(), None),
        (enveloped("{nope"), None),
        (enveloped("[1]"), None),
        (
            br#"{"oslo.version": "2.0", "oslo.message": 5, "_msg_id": "m1", "_reply_q": "reply_q1"}"#.to_vec(),
            m1(),
        ),
        (
            br#"{"oslo.version": "3.0", "oslo.message": "{\"_msg_id\": \"m1\", \"_reply_q\": \"reply_q1\"}"}"#.to_vec(),
            m1(),
        ),
        (
            br#"{"oslo.version": 2, "oslo.message": "{\"_msg_id\": \"m1\", \"_reply_q\": \"reply_q1\"}"}"#.to_vec(),
            m1(),
        ),
    ];
    for (body, want) in cases {
        let u = read_body(&body, &limits).expect_err("garbage");
        assert!(
            matches!(u.error, RpcError::MalformedMessage { .. }),
            "{:?}",
            u.error
        );
        assert_eq!(addr(&u), want, "{}", String::from_utf8_lossy(&body));
    }
    // An envelope of a compatible version is read.
    let ok = br#"{"oslo.version": "2.0", "oslo.message": "{\"method\": \"m\"}"}"#;
    assert_eq!(read_body(ok, &limits).expect("read")["method"], "m");
}

#[test]
fn reply_addresses_are_found_at_the_top_level_only() {
    let cases = [
        (r#"{"_msg_id": "m1", "_reply_q": "reply_q1"}"#, m1()),
        (r#" { "_reply_q" : "reply_q1" , "_msg_id" : "m1" } "#, m1()),
        // Nested keys of the same name are someone else's.
        (
            r#"{"args": {"_msg_id": "x", "_reply_q": "y"}, "_msg_id": "m1", "_reply_q": "reply_q1"}"#,
            m1(),
        ),
        (r#"{"args": {"_msg_id": "x", "_reply_q": "y"}}"#, None),
        (r#"{"a": "_msg_id", "b": "_reply_q"}"#, None),
        // The last of a repeated key wins, as when parsing.
        (
            r#"{"_msg_id": "x", "_reply_q": "reply_q1", "_msg_id": "m1"}"#,
            m1(),
        ),
        // Escapes are read; a non-string value is no address.
        (r#"{"_msg_id": "m\u0031", "_reply_q": "reply_q1"}"#, m1()),
        (r#"{"_msg_id": 1, "_reply_q": "reply_q1"}"#, None),
        (
            r#"{"_msg_id": null, "_reply_q": "reply_q1", "x": "m1"}"#,
            None,
        ),
        (r#"["_msg_id", "m1", "_reply_q", "reply_q1"]"#, None),
        (r#"{"_msg_id": "m1", "_reply_q": "reply_q1"#, None),
        ("", None),
    ];
    for (text, want) in cases {
        let (msg_id, reply_q) = address(text.as_bytes());
        let got = msg_id.zip(reply_q);
        assert_eq!(got, want, "{text}");
    }
}

#[test]
fn unenveloped_and_broken_bodies() {
    let bare = json!({"method": "m"});
    assert_eq!(open_envelope(bare.clone()).expect("bare")["method"], "m");
    for broken in [
        json!([1]),
        json!({"oslo.version": "2.0", "oslo.message": "{nope"}),
        json!({"oslo.version": "2.0"}),
    ] {
        let e = open_envelope(broken.clone()).expect_err("refused");
        assert!(
            matches!(e, RpcError::MalformedMessage { .. }),
            "{broken}: {e:?}"
        );
    }
}

/// The body a broker transport writes (`RequestBody` straight into the envelope)
/// reads back as the request's dict plus the transport's keys, through the fast
/// path and through the general one; a context key of `extra` that repeats a known
/// one wins, as in `to_dict`.
#[test]
fn a_request_body_on_the_wire_is_its_dict() {
    let mut context = RequestContext::new("req-1")
        .with_user("u")
        .with_project("p")
        .with_role("member");
    context.extra.insert("user".into(), json!("from-extra"));
    context
        .extra
        .insert("service_catalog".into(), json!([{"a": "\"q\""}]));
    let request = Request {
        method: "ping".into(),
        args: json!({"arg": {"text": "line\nbreak \u{e9}"}})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        version: Version::new(1, 3),
        namespace: Some("ns".into()),
        context,
    };
    let transport = [("_msg_id", json!("m1")), ("_timeout", json!(null))];
    let bytes = envelope_bytes(&RequestBody {
        request: &request,
        transport: &transport,
    })
    .expect("encode");
    let mut want = request.clone().into_message();
    want.insert("_msg_id".into(), json!("m1"));
    want.insert("_timeout".into(), json!(null));
    assert_eq!(want["_context_user"], "from-extra");
    let fast = read_body(&bytes, &MessageLimits::default()).expect("read");
    assert_eq!(fast, want);
    let general = open_envelope(serde_json::from_slice(&bytes).expect("JSON")).expect("open");
    assert_eq!(general, want);
    let mut back = want.clone();
    back.remove("_msg_id");
    back.remove("_timeout");
    let mut again = Request::from_message(back).expect("request");
    // `extra` keeps the repeated key; the dict's `user` came from it.
    again.context.extra.remove("user");
    let mut sent = request;
    sent.context.extra.remove("user");
    sent.context.user = Some("from-extra".into());
    assert_eq!(again, sent);
}
