//! The message dictionaries, exactly as oslo.messaging builds them.
//!
//! A request is `{"method", "args", "version", "namespace"?, "_context_<key>"...}`; a reply
//! is `{"result", "failure", "ending"}` with `failure` a JSON string (see [`RemoteError`]).
//! Transport-level keys (`_msg_id`, `_reply_q`, `_timeout`, `_unique_id`, and verso's
//! `_deadline`: the caller's deadline in seconds since the Unix epoch, which an
//! oslo.messaging server ignores) are each transport's business: a transport adds them
//! on send and a request ignores them on receive. On a broker the dictionary travels inside the `oslo.version` 2.0 envelope
//! ([`envelope`], [`open_envelope`]).

use crate::{RemoteError, RpcError};
use serde_json::{Map, Value};
use verso::{DecodeLimits, RequestContext, Version};

/// One message: a JSON object, as oslo.messaging's message dict.
pub type Message = Map<String, Value>;

/// The prefix oslo.messaging puts before each serialized context key.
const CONTEXT_PREFIX: &str = "_context_";

/// The envelope version oslo.messaging writes.
const ENVELOPE_VERSION: &str = "2.0";

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
    /// The oslo.messaging message dict of this request ([`RequestBody`] without
    /// transport keys, as a map).
    pub fn into_message(self) -> Message {
        let body = RequestBody {
            request: &self,
            transport: &[],
        };
        match serde_json::to_value(body) {
            Ok(Value::Object(m)) => m,
            // A map of strings and JSON values always serializes to an object.
            _ => Message::new(),
        }
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

/// A request's message dict as a peer's transport sends it: `method`, `args`,
/// `version`, `namespace` (when set), the context's entries each as `_context_<key>`,
/// then the transport's own keys (`_msg_id`, `_unique_id`, ...).
/// Serialized straight into JSON, without building the dict ([`envelope_bytes`]).
///
/// ```
/// use serde_json::json;
/// use verso::{RequestContext, Version};
/// use verso_rpc::message::{Request, RequestBody};
///
/// let req = Request {
///     method: "ping".into(),
///     args: Default::default(),
///     version: Version::new(1, 2),
///     namespace: None,
///     context: RequestContext::new("req-1").with_user("demo"),
/// };
/// let transport = [("_msg_id", json!("m1"))];
/// let body = serde_json::to_value(RequestBody { request: &req, transport: &transport })?;
/// assert_eq!(body["version"], "1.2");
/// assert_eq!(body["_context_user"], "demo");
/// assert_eq!(body["_msg_id"], "m1");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RequestBody<'a> {
    /// The request.
    pub request: &'a Request,
    /// The transport's keys, written after the request's.
    pub transport: &'a [(&'a str, Value)],
}

impl serde::Serialize for RequestBody<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        /// A context key with oslo.messaging's prefix, written without allocating it
        /// where the serializer allows.
        struct ContextKey<'k>(&'k str);
        impl serde::Serialize for ContextKey<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(&format_args!("{CONTEXT_PREFIX}{}", self.0))
            }
        }
        /// The version as its text.
        struct Text<'v>(&'v Version);
        impl serde::Serialize for Text<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self.0)
            }
        }
        let r = self.request;
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("method", &r.method)?;
        m.serialize_entry("args", &r.args)?;
        m.serialize_entry("version", &Text(&r.version))?;
        if let Some(ns) = &r.namespace {
            m.serialize_entry("namespace", ns)?;
        }
        for (k, v) in r.context.dict_entries() {
            m.serialize_entry(&ContextKey(k), &v)?;
        }
        for (k, v) in self.transport {
            m.serialize_entry(k, v)?;
        }
        m.end()
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

/// The bytes of [`envelope`]`(message)`, written directly: the message (a [`Message`],
/// or a [`RequestBody`]) serialized once and escaped once into the body, without
/// building the envelope's own map. For a [`Message`], the same bytes as
/// `serde_json::to_vec(&envelope(message))` (keys in that order, compact).
///
/// ```
/// use verso_rpc::message::{envelope, envelope_bytes, Message};
/// let mut m = Message::new();
/// m.insert("method".into(), "ping \"quoted\"".into());
/// assert_eq!(envelope_bytes(&m)?, serde_json::to_vec(&envelope(&m))?);
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn envelope_bytes<M: serde::Serialize + ?Sized>(
    message: &M,
) -> Result<Vec<u8>, serde_json::Error> {
    let inner = serde_json::to_string(message)?;
    // The escaped text is at least as long as the text, plus quotes and the keys.
    let mut out = Vec::with_capacity(inner.len() + inner.len() / 8 + 48);
    out.extend_from_slice(br#"{"oslo.message":"#);
    serde_json::to_writer(&mut out, inner.as_str())?;
    out.extend_from_slice(br#","oslo.version":""#);
    out.extend_from_slice(ENVELOPE_VERSION.as_bytes());
    out.extend_from_slice(br#""}"#);
    Ok(out)
}

/// Opens a message body: an enveloped one, or (as oslo.messaging accepts) a bare dict.
/// The enveloped message is not checked against any limits; see [`read_body`] for
/// bytes from a peer.
pub fn open_envelope(body: Value) -> Result<Message, RpcError> {
    open_envelope_limited(body, &DecodeLimits::UNLIMITED).map_err(|u| u.error)
}

/// [`open_envelope`], checking the enveloped message's text against `limits` before it
/// is parsed. A refusal carries the reply address when it can be found: nothing is
/// copied for it unless the body is refused.
fn open_envelope_limited(body: Value, limits: &DecodeLimits) -> Result<Message, Box<Unreadable>> {
    let malformed = |detail: String| RpcError::MalformedMessage { detail };
    let mut m = match body {
        Value::Object(m) => m,
        other => {
            let detail = format!("message body must be an object, got {}", json_type(&other));
            return Err(Unreadable::new(malformed(detail), (None, None)));
        }
    };
    let version_error = match m.get("oslo.version") {
        None => return Ok(m),
        Some(Value::String(v)) => check_envelope_version(v).err(),
        Some(other) => Some(malformed(format!(
            "'oslo.version' must be a string such as \"2.0\", got {}",
            json_type(other)
        ))),
    };
    if let Some(error) = version_error {
        return Err(Unreadable::new(error, address_of_envelope(&m)));
    }
    let text = match m.remove("oslo.message") {
        Some(Value::String(text)) => text,
        other => {
            if let Some(v) = other {
                m.insert("oslo.message".into(), v);
            }
            let detail = "an enveloped body needs 'oslo.message' as a JSON string".into();
            return Err(Unreadable::new(malformed(detail), address_of_envelope(&m)));
        }
    };
    open_enveloped_text(&text, limits)
}

/// The message dict of an envelope's `oslo.message` text, checked against `limits`
/// before it is parsed.
fn open_enveloped_text(text: &str, limits: &DecodeLimits) -> Result<Message, Box<Unreadable>> {
    let malformed = |detail: String| RpcError::MalformedMessage { detail };
    let refused = |error: RpcError| Unreadable::new(error, address(text.as_bytes()));
    if let Err(source) = limits.check_json(text.as_bytes()) {
        return Err(refused(RpcError::LimitExceeded { source }));
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(inner)) => Ok(inner),
        Ok(other) => Err(refused(malformed(format!(
            "'oslo.message' must hold an object, got {}",
            json_type(&other)
        )))),
        Err(e) => Err(refused(malformed(format!(
            "'oslo.message' is not JSON: {e}"
        )))),
    }
}

/// `_msg_id` and `_reply_q` of a parsed envelope: in the enveloped message's text, or
/// beside it.
fn address_of_envelope(m: &Message) -> (Option<String>, Option<String>) {
    if let Some(Value::String(text)) = m.get("oslo.message") {
        return address(text.as_bytes());
    }
    let member = |key: &str| match m.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    (member("_msg_id"), member("_reply_q"))
}

/// Refuses an envelope version this side cannot read, as oslo.messaging does
/// (`UnsupportedRpcEnvelopeVersion`): the same major as ours, a minor no newer.
fn check_envelope_version(text: &str) -> Result<(), RpcError> {
    let ours: Version = Version::new(2, 0);
    match text.parse::<Version>() {
        Ok(v) if ours.accepts(&v) => Ok(()),
        _ => Err(RpcError::MalformedMessage {
            detail: format!(
                "envelope version 'oslo.version' {text:?} is not supported: this side reads \
                 {ENVELOPE_VERSION}"
            ),
        }),
    }
}

/// The receiving side's bounds on a message from a peer (see [`read_body`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageLimits {
    /// The biggest message body, in bytes (default [`DEFAULT_MAX_MESSAGE_SIZE`]).
    pub max_message_size: usize,
    /// How deep and how wide the message may be (default [`DecodeLimits::default`]:
    /// 32 levels, 100,000 members per list or dict).
    pub decode: DecodeLimits,
}

/// The default [`MessageLimits::max_message_size`]: 16 MiB, RabbitMQ 4's own default
/// `max_message_size`.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

impl Default for MessageLimits {
    fn default() -> Self {
        MessageLimits {
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            decode: DecodeLimits::default(),
        }
    }
}

/// Where a call's reply goes: its `_msg_id` and `_reply_q`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyAddress {
    /// The call's `_msg_id`.
    pub msg_id: String,
    /// The caller's reply queue, `_reply_q`.
    pub reply_q: String,
}

/// A received body that cannot be read ([`read_body`]): why, and its `_msg_id` and
/// `_reply_q` when they could be found.
#[derive(Debug)]
pub struct Unreadable {
    /// Why the body cannot be read.
    pub error: RpcError,
    /// The message's `_msg_id` (a call's, or the call's a reply answers), if found.
    pub msg_id: Option<String>,
    /// The call's `_reply_q`, if found.
    pub reply_q: Option<String>,
}

impl Unreadable {
    fn new(error: RpcError, (msg_id, reply_q): (Option<String>, Option<String>)) -> Box<Self> {
        Box::new(Unreadable {
            error,
            msg_id,
            reply_q,
        })
    }

    /// Where the caller waits for a reply, when the body is a call that says so.
    pub fn reply_to(&self) -> Option<ReplyAddress> {
        match (&self.msg_id, &self.reply_q) {
            (Some(msg_id), Some(reply_q)) => Some(ReplyAddress {
                msg_id: msg_id.clone(),
                reply_q: reply_q.clone(),
            }),
            _ => None,
        }
    }
}

/// Reads a body received from a peer into its message dict, refusing it whole when it is
/// over `limits`: a body bigger than [`MessageLimits::max_message_size`] is not parsed at
/// all ([`RpcError::MessageTooLarge`]), and the text of the body and of the enveloped
/// message are checked against [`MessageLimits::decode`] before they are parsed
/// ([`RpcError::LimitExceeded`]). Whatever is wrong, the reply address of a call is
/// looked for (without parsing the message, so at any size or depth), so the caller can
/// be told instead of waiting for its timeout.
///
/// ```
/// use verso_rpc::message::{read_body, MessageLimits};
/// use verso_rpc::RpcError;
///
/// let limits = MessageLimits { max_message_size: 64, ..MessageLimits::default() };
/// let ok = br#"{"method": "ping", "_msg_id": "m1", "_reply_q": "reply_1"}"#;
/// assert_eq!(read_body(ok, &limits).map_err(|u| u.error.to_string())?["method"], "ping");
///
/// let big = format!(r#"{{"method": "ping", "_msg_id": "m1", "_reply_q": "reply_1", "args": {{"x": "{}"}}}}"#, "y".repeat(100));
/// let refused = read_body(big.as_bytes(), &limits).expect_err("too big");
/// assert!(matches!(refused.error, RpcError::MessageTooLarge { limit: 64, .. }));
/// assert_eq!(refused.reply_to().map(|a| a.reply_q).as_deref(), Some("reply_1"));
/// # Ok::<(), String>(())
/// ```
pub fn read_body(data: &[u8], limits: &MessageLimits) -> Result<Message, Box<Unreadable>> {
    check_body(data, limits)?;
    // The usual body, an envelope whose version this side reads, is opened without
    // building a value of the envelope itself; anything else (a bare dict, a version
    // that is no string or not ours, a body that is not JSON) takes the general path,
    // which says what is wrong with it.
    if let Some(text) = usual_envelope(data) {
        return open_enveloped_text(&text, &limits.decode);
    }
    let body: Value = serde_json::from_slice(data).map_err(|e| {
        let detail = format!("body is not JSON: {e}");
        Unreadable::new(RpcError::MalformedMessage { detail }, (None, None))
    })?;
    open_envelope_limited(body, &limits.decode)
}

/// A reply as its reply queue reads it: the call it answers, and its message dict, still
/// as text when it came in the usual envelope (the waiting call parses it, on its own
/// runtime, with [`ReplyBody::into_message`]).
pub(crate) struct RoutedReply {
    /// The `_msg_id` of the call it answers, where one is found.
    pub(crate) msg_id: Option<String>,
    pub(crate) body: ReplyBody,
}

/// A reply's message dict: its checked text, or already parsed (a body that took the
/// general path of [`read_body`]).
pub(crate) enum ReplyBody {
    Text(String),
    Parsed(Message),
}

impl ReplyBody {
    /// The message dict; text that is not a JSON object is a typed error.
    pub(crate) fn into_message(self) -> Result<Message, RpcError> {
        match self {
            ReplyBody::Parsed(m) => Ok(m),
            ReplyBody::Text(text) => {
                open_enveloped_text(&text, &DecodeLimits::UNLIMITED).map_err(|u| u.error)
            }
        }
    }
}

/// Reads a reply body as far as routing it needs: the checks of [`read_body`] (size,
/// limits of the body and of the enveloped text), then the `_msg_id`, found in the text
/// without parsing it. A body that is not the usual envelope takes [`read_body`]'s
/// general path. A refusal carries the reply address when it can be found.
pub(crate) fn route_reply(
    data: &[u8],
    limits: &MessageLimits,
) -> Result<RoutedReply, Box<Unreadable>> {
    check_body(data, limits)?;
    if let Some(text) = usual_envelope(data) {
        if let Err(source) = limits.decode.check_json(text.as_bytes()) {
            let error = RpcError::LimitExceeded { source };
            return Err(Unreadable::new(error, address(text.as_bytes())));
        }
        let [msg_id] = top_level_strings(text.as_bytes(), ["_msg_id"]);
        return Ok(RoutedReply {
            msg_id,
            body: ReplyBody::Text(text.into_owned()),
        });
    }
    let mut m = read_body(data, limits)?;
    let msg_id = match m.remove("_msg_id") {
        Some(Value::String(id)) => Some(id),
        _ => None,
    };
    Ok(RoutedReply {
        msg_id,
        body: ReplyBody::Parsed(m),
    })
}

/// The checks of a body before anything is parsed: its size and its JSON limits.
fn check_body(data: &[u8], limits: &MessageLimits) -> Result<(), Box<Unreadable>> {
    if data.len() > limits.max_message_size {
        let error = RpcError::MessageTooLarge {
            size: data.len(),
            limit: limits.max_message_size,
        };
        return Err(Unreadable::new(error, address_of_body(data)));
    }
    if let Err(source) = limits.decode.check_json(data) {
        let error = RpcError::LimitExceeded { source };
        return Err(Unreadable::new(error, address_of_body(data)));
    }
    Ok(())
}

/// The enveloped text of the usual body: an `oslo.version` envelope whose version this
/// side reads, with `oslo.message` a string. `None` for anything else (the general
/// path says what is wrong with it).
fn usual_envelope(data: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    match serde_json::from_slice::<Envelope<'_>>(data) {
        Ok(Envelope {
            version: Some(version),
            message: Some(text),
        }) if check_envelope_version(&version).is_ok() => Some(text),
        _ => None,
    }
}

/// The two members of an `oslo.version` envelope, borrowed from the body where they
/// need no unescaping.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "oslo.version", borrow, default)]
    version: Option<std::borrow::Cow<'a, str>>,
    #[serde(rename = "oslo.message", borrow, default)]
    message: Option<std::borrow::Cow<'a, str>>,
}

/// `_msg_id` and `_reply_q` of a body of any size or depth: in its enveloped message,
/// or in the body itself when it is a bare dict.
fn address_of_body(data: &[u8]) -> (Option<String>, Option<String>) {
    let [inner] = top_level_strings(data, ["oslo.message"]);
    match inner {
        Some(text) => address(text.as_bytes()),
        None => address(data),
    }
}

/// `_msg_id` and `_reply_q` of a message dict's text, where they are strings.
fn address(text: &[u8]) -> (Option<String>, Option<String>) {
    let [msg_id, reply_q] = top_level_strings(text, ["_msg_id", "_reply_q"]);
    (msg_id, reply_q)
}

/// The string values of `keys` among the members of the JSON object `text`, found in
/// one pass without parsing (so at any depth and size, without recursion); the last
/// one wins for a key given twice, as when parsing. Anything that is not a JSON object
/// gives nothing; text that is not JSON may give anything.
fn top_level_strings<const N: usize>(text: &[u8], keys: [&str; N]) -> [Option<String>; N] {
    let mut found: [Option<String>; N] = std::array::from_fn(|_| None);
    let mut depth = 0usize;
    let mut i = 0;
    // In the top-level object: the key just read, and whether a ':' followed it.
    let mut key: Option<usize> = None;
    let mut after_colon = false;
    // Whether the next string at depth 1 is a key.
    let mut want_key = false;
    while i < text.len() {
        let b = text[i];
        match b {
            b'"' => {
                let end = string_end(text, i);
                if depth == 1 {
                    let raw = &text[i..end];
                    if want_key {
                        key = unescape(raw).and_then(|k| keys.iter().position(|x| *x == k));
                        want_key = false;
                        after_colon = false;
                    } else if after_colon {
                        if let Some(k) = key.take() {
                            found[k] = unescape(raw);
                        }
                        after_colon = false;
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                if depth == 0 && b == b'[' {
                    return found;
                }
                depth += 1;
                if depth == 1 {
                    want_key = true;
                } else if depth == 2 {
                    key = None;
                    after_colon = false;
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return found;
                }
            }
            b':' if depth == 1 => after_colon = key.is_some(),
            b',' if depth == 1 => {
                want_key = true;
                key = None;
                after_colon = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ if depth == 1 => {
                // A number, true, false or null: not a string value.
                key = None;
                after_colon = false;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The index just past the JSON string starting at `start` (a '"').
fn string_end(text: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// A JSON string literal (with its quotes) as text.
fn unescape(raw: &[u8]) -> Option<String> {
    if raw.len() < 2 || raw.last() != Some(&b'"') {
        return None;
    }
    if !raw.contains(&b'\\') {
        return std::str::from_utf8(&raw[1..raw.len() - 1])
            .ok()
            .map(str::to_owned);
    }
    serde_json::from_slice(raw).ok()
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
mod tests;
