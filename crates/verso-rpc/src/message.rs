//! The message dictionaries, exactly as oslo.messaging builds them.
//!
//! A request is `{"method", "args", "version", "namespace"?, "_context_<key>"...}`; a reply
//! is `{"result", "failure", "ending"}` with `failure` a JSON string (see [`RemoteError`]).
//! Transport-level keys (`_msg_id`, `_reply_q`, `_timeout`, `_unique_id`) are each
//! transport's business: a transport adds them on send and a request ignores them on
//! receive. On a broker the dictionary travels inside the `oslo.version` 2.0 envelope
//! ([`envelope`], [`open_envelope`]).

use crate::{RemoteError, RpcError};
use serde_json::{Map, Value};
use verso::{RequestContext, Version};

/// One message: a JSON object, as oslo.messaging's message dict.
pub type Message = Map<String, Value>;

/// The prefix oslo.messaging puts before each serialized context key.
pub const CONTEXT_PREFIX: &str = "_context_";

/// The envelope version oslo.messaging writes.
pub const ENVELOPE_VERSION: &str = "2.0";

/// A request: what a client sends and a server dispatches.
///
/// ```
/// use serde_json::json;
/// use verso::{RequestContext, Version};
/// use verso_rpc::message::Request;
///
/// let req = Request {
///     method: "ping".into(),
///     args: json!({"arg": 1}).as_object().cloned().unwrap_or_default(),
///     version: Version::new(1, 0),
///     namespace: None,
///     context: RequestContext::new("req-1").with_user("demo"),
/// };
/// let msg = req.clone().into_message();
/// assert_eq!(msg["version"], "1.0");
/// assert_eq!(msg["_context_user"], "demo");
/// assert!(!msg.contains_key("namespace"));
/// assert_eq!(Request::from_message(msg)?, req);
/// # Ok::<(), verso_rpc::RpcError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The method name.
    pub method: String,
    /// Named arguments.
    pub args: Map<String, Value>,
    /// The version the call is sent at.
    pub version: Version,
    /// The endpoint namespace, if any.
    pub namespace: Option<String>,
    /// Who is asking.
    pub context: RequestContext,
}

impl Request {
    /// The oslo.messaging message dict of this request.
    pub fn into_message(self) -> Message {
        let mut m = Message::new();
        m.insert("method".into(), Value::String(self.method));
        m.insert("args".into(), Value::Object(self.args));
        m.insert("version".into(), Value::String(self.version.to_string()));
        if let Some(ns) = self.namespace {
            m.insert("namespace".into(), Value::String(ns));
        }
        for (k, v) in self.context.to_dict() {
            // Built by hand: format! costs more than the rest of the insert.
            let mut key = String::with_capacity(CONTEXT_PREFIX.len() + k.len());
            key.push_str(CONTEXT_PREFIX);
            key.push_str(&k);
            m.insert(key, v);
        }
        m
    }

    /// Reads a request dict. A missing `version` means `1.0` and a missing or null
    /// `namespace` means none, as on an oslo.messaging server.
    pub fn from_message(message: Message) -> Result<Request, RpcError> {
        let malformed = |detail: String| RpcError::MalformedMessage { detail };
        let mut method = None;
        let mut args = Map::new();
        let mut version = Version::new(1, 0);
        let mut namespace = None;
        let mut ctx = Map::new();
        for (k, v) in message {
            if let Some(key) = k.strip_prefix(CONTEXT_PREFIX) {
                ctx.insert(key.to_owned(), v);
                continue;
            }
            match (k.as_str(), v) {
                ("method", Value::String(s)) => method = Some(s),
                ("method", other) => {
                    return Err(malformed(format!(
                        "'method' must be a string, got {}",
                        json_type(&other)
                    )))
                }
                ("args", Value::Object(a)) => args = a,
                ("args", Value::Null) => {}
                ("args", other) => {
                    return Err(malformed(format!(
                        "'args' must be an object, got {}",
                        json_type(&other)
                    )))
                }
                ("version", Value::String(s)) => {
                    version = s
                        .parse()
                        .map_err(|e| malformed(format!("'version' {s:?}: {e}")))?;
                }
                ("version", Value::Null) => {}
                ("version", other) => {
                    return Err(malformed(format!(
                        "'version' must be a string such as \"1.0\", got {other}"
                    )))
                }
                ("namespace", Value::String(s)) => namespace = Some(s),
                ("namespace", Value::Null) => {}
                ("namespace", other) => {
                    return Err(malformed(format!(
                        "'namespace' must be a string, got {}",
                        json_type(&other)
                    )))
                }
                _ => {}
            }
        }
        let method = method.ok_or_else(|| malformed("no 'method' key".into()))?;
        Ok(Request {
            method,
            args,
            version,
            namespace,
            context: RequestContext::from_dict(&ctx),
        })
    }
}

/// A reply: the method's result, or the error it raised.
///
/// ```
/// use serde_json::json;
/// use verso_rpc::{message::Reply, RemoteError};
///
/// let ok = Reply(Ok(json!({"pong": true}))).into_message();
/// assert_eq!(ok["failure"], json!(null));
/// assert_eq!(ok["ending"], json!(true));
///
/// let err = Reply(Err(RemoteError::new("E", "m", "boom"))).into_message();
/// assert!(err["failure"].is_string()); // a JSON string, as oslo.messaging sends it
/// let back = Reply::from_message(err)?;
/// assert_eq!(back.0.err().map(|e| e.kind), Some("E".to_string()));
/// # Ok::<(), verso_rpc::RpcError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Reply(pub Result<Value, RemoteError>);

impl Reply {
    /// The oslo.messaging reply dict (`result`, `failure`, `ending: true`).
    pub fn into_message(self) -> Message {
        let mut m = Message::new();
        match self.0 {
            Ok(result) => {
                m.insert("result".into(), result);
                m.insert("failure".into(), Value::Null);
            }
            Err(e) => {
                m.insert("result".into(), Value::Null);
                m.insert("failure".into(), Value::String(e.to_failure_string()));
            }
        }
        m.insert("ending".into(), Value::Bool(true));
        m
    }

    /// Reads a reply dict. A `failure` may be the JSON string oslo.messaging sends or, for
    /// leniency, an object.
    pub fn from_message(mut message: Message) -> Result<Reply, RpcError> {
        let malformed = |detail: String| RpcError::MalformedMessage { detail };
        match message.remove("failure") {
            None | Some(Value::Null) => {
                Ok(Reply(Ok(message.remove("result").unwrap_or(Value::Null))))
            }
            Some(Value::String(s)) => RemoteError::from_failure_str(&s)
                .map(|e| Reply(Err(e)))
                .map_err(|e| malformed(format!("reply 'failure' is not a failure: {e}"))),
            Some(v @ Value::Object(_)) => serde_json::from_value(v)
                .map(|e| Reply(Err(e)))
                .map_err(|e| malformed(format!("reply 'failure' is not a failure: {e}"))),
            Some(other) => Err(malformed(format!(
                "reply 'failure' must be a string, got {}",
                json_type(&other)
            ))),
        }
    }
}

/// Wraps a message in the oslo.messaging 2.0 envelope: `{"oslo.version": "2.0",
/// "oslo.message": "<the message as a JSON string>"}`.
///
/// ```
/// use verso_rpc::message::{envelope, open_envelope, Message};
/// let mut m = Message::new();
/// m.insert("method".into(), "ping".into());
/// let body = envelope(&m);
/// assert!(body["oslo.message"].is_string());
/// assert_eq!(open_envelope(body)?, m);
/// # Ok::<(), verso_rpc::RpcError>(())
/// ```
pub fn envelope(message: &Message) -> Value {
    let inner = serde_json::to_string(message).unwrap_or_else(|_| String::from("{}"));
    let mut m = Map::new();
    m.insert(
        "oslo.version".into(),
        Value::String(ENVELOPE_VERSION.into()),
    );
    m.insert("oslo.message".into(), Value::String(inner));
    Value::Object(m)
}

/// Opens a message body: an enveloped one, or (as oslo.messaging accepts) a bare dict.
pub fn open_envelope(body: Value) -> Result<Message, RpcError> {
    let malformed = |detail: String| RpcError::MalformedMessage { detail };
    let mut m = match body {
        Value::Object(m) => m,
        other => {
            return Err(malformed(format!(
                "message body must be an object, got {}",
                json_type(&other)
            )))
        }
    };
    if !m.contains_key("oslo.version") {
        return Ok(m);
    }
    match m.remove("oslo.message") {
        Some(Value::String(s)) => match serde_json::from_str(&s) {
            Ok(Value::Object(inner)) => Ok(inner),
            Ok(other) => Err(malformed(format!(
                "'oslo.message' must hold an object, got {}",
                json_type(&other)
            ))),
            Err(e) => Err(malformed(format!("'oslo.message' is not JSON: {e}"))),
        },
        _ => Err(malformed(
            "an enveloped body needs 'oslo.message' as a JSON string".into(),
        )),
    }
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    #[test]
    fn unenveloped_and_broken_bodies() {
        let bare = json!({"method": "m"});
        assert_eq!(open_envelope(bare.clone()).expect("bare")["method"], "m");
        assert!(open_envelope(json!([1])).is_err());
        assert!(open_envelope(json!({"oslo.version": "2.0", "oslo.message": "{nope"})).is_err());
        assert!(open_envelope(json!({"oslo.version": "2.0"})).is_err());
    }
}
