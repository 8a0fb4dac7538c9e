//! [`RpcError`]: everything that can go wrong in this crate, one enum.
//!
//! Errors come in two families, and each variant says what the user can do:
//! - **local**, raised before anything is sent (`VersionCap`, `InvalidVersion`, ...) or
//!   by the transport (`Timeout`, `Transport`, `ConnectionLost`);
//! - **dispatch**, raised by the server's dispatcher and carried back over the wire, so a
//!   caller can match on them (`UnsupportedVersion`, `MissingArgument`, ...).
//!
//! As reqwest's and hyper's errors do, an error says what kind of failure it is
//! ([`RpcError::is_timeout`], [`RpcError::is_connection_lost`], ...) and keeps its cause:
//! a transport failure holds the transport's own error as its [`source`](std::error::Error::source),
//! which [`RpcError::transport_cause`] downcasts (`AmqpError::NameTooLong`, ...).
//! Configuration errors are [`ConfigError`](crate::config::ConfigError)s.
//!
//! Errors raised by an endpoint's own code arrive as [`RpcError::Remote`], holding the
//! [`RemoteError`] in oslo.messaging's failure form.

use crate::remote::RemoteError;
use serde_json::{Map, Value};
use std::time::Duration;
use verso::{LimitError, Version, VersionError};

/// The module name a Python peer uses for the dispatcher's own errors; `UnsupportedVersion`
/// and `NoSuchMethod` keep it so a Python client recognises them.
pub(crate) const OSLO_DISPATCHER: &str = "oslo_messaging.rpc.dispatcher";
/// The module name of the dispatcher errors verso adds (argument checking).
pub(crate) const VERSO_DISPATCHER: &str = "verso_rpc.dispatcher";

/// An error from an RPC client, server or transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RpcError {
    // ---- local, before sending -------------------------------------------------------
    /// The call's version is above the operator's version cap; nothing was sent.
    #[error(
        "requested message version {requested} is incompatible with the version cap {cap}: \
         it needs the same major version and a minor version <= the cap's; nothing was sent \
         (check can_send_version() and send the older form, or raise [upgrade_levels] once \
         every server runs the newer code)"
    )]
    VersionCap {
        /// The version the call asked for.
        requested: Version,
        /// The client's cap.
        cap: Version,
    },
    /// The call's version is newer than the API version of the client's own target.
    #[error(
        "message version {requested} is not supported by this client, which speaks up to \
         {local}; nothing was sent (this is a bug in the calling code)"
    )]
    VersionAboveLocal {
        /// The version the call asked for.
        requested: Version,
        /// The client target's version.
        local: Version,
    },
    /// A version string could not be parsed.
    #[error("invalid version '{text}': {source}; write MAJOR.MINOR such as \"1.1\"")]
    InvalidVersion {
        /// The text given.
        text: String,
        /// Why it is not a version.
        source: VersionError,
    },
    /// The arguments of a call are not a JSON object (keyword arguments).
    #[error("arguments of '{method}' must be a JSON object of named arguments, got {found}")]
    ArgumentsNotAnObject {
        /// The method called.
        method: String,
        /// The JSON type given instead.
        found: &'static str,
    },
    /// No reply came within the call's timeout.
    #[error(
        "no reply to '{method}' on topic '{topic}' within {timeout:?}; the server may be down \
         or busy (raise the timeout with prepare().timeout() if the method is slow)"
    )]
    Timeout {
        /// The method called.
        method: String,
        /// The target's topic.
        topic: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// No server listens on the target.
    #[error("no server listens on topic '{topic}'{}; start one or check the target", server.as_ref().map(|s| format!(", server '{s}'")).unwrap_or_default())]
    Unreachable {
        /// The target's topic.
        topic: String,
        /// The target's server, if the call was directed to one.
        server: Option<String>,
    },
    /// The transport failed (not connected within the wait, server stopped before
    /// replying, ...). Nothing says the request reached a server.
    #[error("transport error: {detail}")]
    Transport {
        /// What failed.
        detail: String,
        /// The transport's own error, when there is one (an `AmqpError` of
        /// `transport::amqp` on RabbitMQ): see [`RpcError::transport_cause`].
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The broker connection dropped while the call waited for its reply. The request
    /// had been sent: the server may or may not have run it, so it was not retried.
    /// Retry it only if the method is idempotent.
    #[error("connection lost with call '{msg_id}' in flight: {detail}")]
    ConnectionLost {
        /// The call's `_msg_id`.
        msg_id: String,
        /// What was lost, and where.
        detail: String,
    },
    /// Neither the reply nor a call-monitor heartbeat (oslo's `call_monitor_timeout`)
    /// came in time: no server took the call, or the one that did died or lost its
    /// broker connection with the call taken. It may or may not have run; retry only an
    /// idempotent method.
    #[error(
        "no reply or heartbeat for '{method}' on topic '{topic}' within {after:?}: no \
         server took the call, or the one that did went silent (stopped, or lost the \
         broker) with it running, so the outcome is unknown"
    )]
    ServerSilent {
        /// The method called.
        method: String,
        /// The target's topic.
        topic: String,
        /// The call-monitor timeout that expired.
        after: Duration,
    },
    /// A serializer hook could not convert an argument or result.
    #[error("serialization failed: {detail}")]
    Serialization {
        /// What failed.
        detail: String,
    },

    // ---- dispatch: raised by the server, carried back to the caller ------------------
    /// No endpoint of the server's namespace serves the requested version (the major
    /// differs, or the minor is newer than every endpoint's).
    #[error(
        "Endpoint does not support RPC version {requested}. Attempted method: {method}. \
         Server endpoint versions: [{}]; send an older version or upgrade the server",
        available.iter().map(Version::to_string).collect::<Vec<_>>().join(", ")
    )]
    UnsupportedVersion {
        /// The method called.
        method: String,
        /// The version the call asked for.
        requested: Version,
        /// The versions of the server's endpoints in the call's namespace (empty when the
        /// server did not say, as a Python server does not).
        available: Vec<Version>,
    },
    /// A compatible endpoint exists but has no such method.
    #[error("Endpoint does not support RPC method {method}")]
    NoSuchMethod {
        /// The method called.
        method: String,
    },
    /// The method exists but was added in a later version than the call was sent at.
    #[error(
        "method '{method}' was added in version {since}; a call at {requested} cannot use it \
         (send it at {since} or later, guarded by can_send_version)"
    )]
    MethodNotInVersion {
        /// The method called.
        method: String,
        /// The version that added the method.
        since: Version,
        /// The version the call was sent at.
        requested: Version,
    },
    /// A required argument is missing.
    #[error("'{method}' is missing the required argument '{argument}'")]
    MissingArgument {
        /// The method called.
        method: String,
        /// The missing argument.
        argument: String,
    },
    /// The call named an argument the method does not have.
    #[error("'{method}' got an unexpected argument '{argument}'")]
    UnknownArgument {
        /// The method called.
        method: String,
        /// The unexpected argument.
        argument: String,
    },
    /// The call used an argument added after the version it was sent at.
    #[error(
        "argument '{argument}' of '{method}' was added in version {since}; a call at \
         {requested} cannot send it (build the older form, or send at {since})"
    )]
    ArgumentNotInVersion {
        /// The method called.
        method: String,
        /// The argument.
        argument: String,
        /// The version that added the argument.
        since: Version,
        /// The version the call was sent at.
        requested: Version,
    },
    /// An argument has the wrong JSON type.
    #[error("argument '{argument}' of '{method}' must be {expected}, got {found}")]
    InvalidArgument {
        /// The method called.
        method: String,
        /// The argument.
        argument: String,
        /// The type the method declares.
        expected: String,
        /// The JSON type received.
        found: String,
    },
    /// A message could not be understood (missing `method`, version not a string, ...).
    #[error("malformed RPC message: {detail}")]
    MalformedMessage {
        /// What is wrong with it.
        detail: String,
    },
    /// A received message was bigger than the receiver's limit
    /// ([`MessageLimits::max_message_size`](crate::message::MessageLimits)); it was
    /// refused unread, and nothing of it ran.
    #[error(
        "message of {size} bytes refused: the receiver's limit is {limit} bytes \
         (max_message_size); send less per call, or raise the limit on the receiving side"
    )]
    MessageTooLarge {
        /// The message's size in bytes.
        size: usize,
        /// The receiver's limit in bytes.
        limit: usize,
    },
    /// A received message was nested too deep or held a list too long for the
    /// receiver's [`DecodeLimits`](verso::DecodeLimits); it was refused unread, and
    /// nothing of it ran.
    #[error("message refused: {source}; send less per call, or raise the receiver's limits")]
    LimitExceeded {
        /// The limit crossed.
        #[source]
        source: LimitError,
    },
    /// The server dropped the call without running it: the caller's deadline (the
    /// call's timeout, carried as `_deadline`) had passed when a handler became free, so
    /// nobody waited for the answer any more.
    #[error(
        "'{method}' was not run: its caller's deadline had passed {late_ms} ms before the \
         server could start it (the server is overloaded or the call waited out a fault)"
    )]
    DeadlineExpired {
        /// The method called.
        method: String,
        /// How late the server was, in milliseconds.
        late_ms: u64,
    },
    /// The endpoint's method raised an error; match on [`RemoteError::kind`] or use
    /// [`RemoteError::downcast`] to get your own error type back.
    #[error("remote error: {0}")]
    Remote(Box<RemoteError>),

    /// One of the application's tower layers ([`RpcClient::layer`](crate::RpcClient::layer),
    /// [`RpcServer::layer`](crate::RpcServer::layer)) failed the request with an error of
    /// its own, such as tower's `LoadShed` (`Overloaded`) or `Timeout` (`Elapsed`); the
    /// error is kept as the source ([`RpcError::layer_cause`]). An `RpcError` a layer
    /// passes on stays what it is.
    #[error("refused by a layer: {detail}")]
    Layer {
        /// The layer's error, as text.
        detail: String,
        /// The layer's error.
        #[source]
        source: tower::BoxError,
    },

    // ---- server setup ----------------------------------------------------------------
    /// An endpoint declaration breaks a rule (see [`crate::Endpoint`]).
    #[error("invalid endpoint: {detail}")]
    InvalidEndpoint {
        /// The rule broken.
        detail: String,
    },
}

impl RpcError {
    /// A transport failure without a cause of its own.
    pub fn transport(detail: impl Into<String>) -> Self {
        RpcError::Transport {
            detail: detail.into(),
            source: None,
        }
    }

    /// A transport failure caused by `source` (the message is `source`'s).
    pub fn transport_caused_by(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        RpcError::Transport {
            detail: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// An error of one of the application's layers, in verso's type: the `RpcError` it
    /// passed on, unchanged, or any other error as [`RpcError::Layer`]. The pipelines
    /// call it at the edge of the application's layers, so those may be tower's own
    /// (`Timeout`, `LoadShed`, `Buffer`), whose errors are boxed.
    pub fn from_layer(error: impl Into<tower::BoxError>) -> Self {
        match error.into().downcast::<RpcError>() {
            Ok(own) => *own,
            Err(other) => RpcError::Layer {
                detail: other.to_string(),
                source: other,
            },
        }
    }

    /// The error of type `E` an application's layer failed with ([`RpcError::Layer`]),
    /// such as `tower::load_shed::error::Overloaded`.
    pub fn layer_cause<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            RpcError::Layer { source, .. } => source.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// No reply came within the call's timeout ([`RpcError::Timeout`]), or a tower
    /// `Timeout` among the application's layers expired.
    pub fn is_timeout(&self) -> bool {
        matches!(self, RpcError::Timeout { .. })
            || self
                .layer_cause::<tower::timeout::error::Elapsed>()
                .is_some()
    }

    /// Whether the call was sent and may or may not have run: no reply within the
    /// timeout ([`RpcError::Timeout`], or a tower `Timeout` of the application's client
    /// layers, which sit around the transport), the server went silent
    /// ([`RpcError::ServerSilent`]) or the connection dropped
    /// ([`RpcError::ConnectionLost`]). A caller may retry only an idempotent method.
    pub fn is_outcome_unknown(&self) -> bool {
        self.is_timeout()
            || matches!(
                self,
                RpcError::ServerSilent { .. } | RpcError::ConnectionLost { .. }
            )
    }

    /// The connection dropped with the call in flight ([`RpcError::ConnectionLost`]): the
    /// server may or may not have run it.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, RpcError::ConnectionLost { .. })
    }

    /// The transport failed ([`RpcError::Transport`] or [`RpcError::ConnectionLost`]).
    pub fn is_transport(&self) -> bool {
        matches!(
            self,
            RpcError::Transport { .. } | RpcError::ConnectionLost { .. }
        )
    }

    /// The call was above the operator's cap, or this client's own version: nothing was
    /// sent.
    pub fn is_version_cap(&self) -> bool {
        matches!(
            self,
            RpcError::VersionCap { .. } | RpcError::VersionAboveLocal { .. }
        )
    }

    /// The server's dispatcher refused the call (a version, method or argument it does not
    /// serve, a malformed or too large message); the endpoint's code did not run.
    pub fn is_dispatch(&self) -> bool {
        matches!(
            self,
            RpcError::UnsupportedVersion { .. }
                | RpcError::NoSuchMethod { .. }
                | RpcError::MethodNotInVersion { .. }
                | RpcError::MissingArgument { .. }
                | RpcError::UnknownArgument { .. }
                | RpcError::ArgumentNotInVersion { .. }
                | RpcError::InvalidArgument { .. }
                | RpcError::MalformedMessage { .. }
                | RpcError::MessageTooLarge { .. }
                | RpcError::LimitExceeded { .. }
                | RpcError::DeadlineExpired { .. }
        )
    }

    /// The endpoint's own code raised the error ([`RpcError::Remote`]).
    pub fn is_remote(&self) -> bool {
        matches!(self, RpcError::Remote(_))
    }

    /// The first error of type `E` in this error's chain of causes: the transport's own
    /// error behind a [`RpcError::Transport`].
    ///
    /// ```
    /// use verso_rpc::RpcError;
    /// let e = RpcError::transport_caused_by(std::io::Error::other("reset"));
    /// assert!(e.is_transport());
    /// assert_eq!(e.transport_cause::<std::io::Error>().map(|io| io.kind()), Some(std::io::ErrorKind::Other));
    /// ```
    pub fn transport_cause<E: std::error::Error + 'static>(&self) -> Option<&E> {
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            if let Some(found) = e.downcast_ref::<E>() {
                return Some(found);
            }
            cause = e.source();
        }
        None
    }

    /// The error in oslo.messaging's failure form, for sending back to a caller.
    ///
    /// Dispatch errors keep their fields in `kwargs` so a verso client rebuilds the typed
    /// variant; [`RpcError::Remote`] is sent as it is; any other error (which a server
    /// only meets in a serializer hook) travels as `class = "RpcError"`.
    pub fn to_remote(&self) -> RemoteError {
        use RpcError as E;
        let (module, class, fields): (&str, &str, Map<String, Value>) = match self {
            E::Remote(r) => return (**r).clone(),
            E::UnsupportedVersion {
                method,
                requested,
                available,
            } => (
                OSLO_DISPATCHER,
                "UnsupportedVersion",
                fields([
                    ("method", method.as_str().into()),
                    ("requested", requested.to_string().into()),
                    (
                        "available",
                        available
                            .iter()
                            .map(|v| Value::from(v.to_string()))
                            .collect(),
                    ),
                ]),
            ),
            E::NoSuchMethod { method } => (
                OSLO_DISPATCHER,
                "NoSuchMethod",
                fields([("method", method.as_str().into())]),
            ),
            E::MethodNotInVersion {
                method,
                since,
                requested,
            } => (
                VERSO_DISPATCHER,
                "MethodNotInVersion",
                fields([
                    ("method", method.as_str().into()),
                    ("since", since.to_string().into()),
                    ("requested", requested.to_string().into()),
                ]),
            ),
            E::MissingArgument { method, argument } => (
                VERSO_DISPATCHER,
                "MissingArgument",
                fields([
                    ("method", method.as_str().into()),
                    ("argument", argument.as_str().into()),
                ]),
            ),
            E::UnknownArgument { method, argument } => (
                VERSO_DISPATCHER,
                "UnknownArgument",
                fields([
                    ("method", method.as_str().into()),
                    ("argument", argument.as_str().into()),
                ]),
            ),
            E::ArgumentNotInVersion {
                method,
                argument,
                since,
                requested,
            } => (
                VERSO_DISPATCHER,
                "ArgumentNotInVersion",
                fields([
                    ("method", method.as_str().into()),
                    ("argument", argument.as_str().into()),
                    ("since", since.to_string().into()),
                    ("requested", requested.to_string().into()),
                ]),
            ),
            E::InvalidArgument {
                method,
                argument,
                expected,
                found,
            } => (
                VERSO_DISPATCHER,
                "InvalidArgument",
                fields([
                    ("method", method.as_str().into()),
                    ("argument", argument.as_str().into()),
                    ("expected", expected.as_str().into()),
                    ("found", found.as_str().into()),
                ]),
            ),
            E::DeadlineExpired { method, late_ms } => (
                VERSO_DISPATCHER,
                "DeadlineExpired",
                fields([
                    ("method", method.as_str().into()),
                    ("late_ms", (*late_ms).into()),
                ]),
            ),
            E::MalformedMessage { detail } => (
                VERSO_DISPATCHER,
                "MalformedMessage",
                fields([("detail", detail.as_str().into())]),
            ),
            E::MessageTooLarge { size, limit } => (
                VERSO_DISPATCHER,
                "MessageTooLarge",
                fields([("size", (*size).into()), ("limit", (*limit).into())]),
            ),
            E::LimitExceeded { source } => {
                let (which, limit) = match source {
                    LimitError::TooDeep { limit } => ("depth", *limit),
                    LimitError::TooManyMembers { limit } => ("members", *limit),
                    _ => ("other", 0),
                };
                (
                    VERSO_DISPATCHER,
                    "LimitExceeded",
                    fields([("limit_kind", which.into()), ("limit", limit.into())]),
                )
            }
            _ => (VERSO_DISPATCHER, "RpcError", Map::new()),
        };
        RemoteError::new(class, module, self.to_string()).with_fields(fields)
    }

    /// Rebuilds the typed error from a failure received in reply to `method` sent at
    /// `requested`. Dispatch errors (from a verso or a Python server) become their
    /// variant; everything else becomes [`RpcError::Remote`].
    pub fn from_remote(remote: RemoteError, method: &str, requested: Version) -> RpcError {
        let s = |k: &str| {
            remote
                .fields
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let v = |k: &str| s(k).and_then(|t| t.parse::<Version>().ok());
        let n = |k: &str| {
            remote
                .fields
                .get(k)
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
        };
        let method_ = || s("method").unwrap_or_else(|| method.to_owned());
        let arg = || s("argument");
        let known = matches!(remote.module.as_str(), OSLO_DISPATCHER | VERSO_DISPATCHER);
        if !known {
            return RpcError::Remote(Box::new(remote));
        }
        let typed = match remote.kind.as_str() {
            // A Python server sends these with empty kwargs: fill in what the caller knows.
            "UnsupportedVersion" => Some(RpcError::UnsupportedVersion {
                method: method_(),
                requested: v("requested").unwrap_or(requested),
                available: remote
                    .fields
                    .get("available")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .filter_map(|t| t.parse().ok())
                            .collect()
                    })
                    .unwrap_or_default(),
            }),
            "NoSuchMethod" => Some(RpcError::NoSuchMethod { method: method_() }),
            "MethodNotInVersion" => v("since").map(|since| RpcError::MethodNotInVersion {
                method: method_(),
                since,
                requested: v("requested").unwrap_or(requested),
            }),
            "MissingArgument" => arg().map(|argument| RpcError::MissingArgument {
                method: method_(),
                argument,
            }),
            "UnknownArgument" => arg().map(|argument| RpcError::UnknownArgument {
                method: method_(),
                argument,
            }),
            "ArgumentNotInVersion" => match (arg(), v("since")) {
                (Some(argument), Some(since)) => Some(RpcError::ArgumentNotInVersion {
                    method: method_(),
                    argument,
                    since,
                    requested: v("requested").unwrap_or(requested),
                }),
                _ => None,
            },
            "InvalidArgument" => arg().map(|argument| RpcError::InvalidArgument {
                method: method_(),
                argument,
                expected: s("expected").unwrap_or_default(),
                found: s("found").unwrap_or_default(),
            }),
            "MessageTooLarge" => match (n("size"), n("limit")) {
                (Some(size), Some(limit)) => Some(RpcError::MessageTooLarge { size, limit }),
                _ => None,
            },
            "LimitExceeded" => match (s("limit_kind").as_deref(), n("limit")) {
                (Some("depth"), Some(limit)) => Some(RpcError::LimitExceeded {
                    source: LimitError::TooDeep { limit },
                }),
                (Some("members"), Some(limit)) => Some(RpcError::LimitExceeded {
                    source: LimitError::TooManyMembers { limit },
                }),
                _ => None,
            },
            "DeadlineExpired" => Some(RpcError::DeadlineExpired {
                method: method_(),
                late_ms: remote
                    .fields
                    .get("late_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            }),
            "MalformedMessage" => Some(RpcError::MalformedMessage {
                detail: s("detail").unwrap_or_else(|| remote.message.clone()),
            }),
            _ => None,
        };
        typed.unwrap_or_else(|| RpcError::Remote(Box::new(remote)))
    }

    /// The remote error, when the endpoint's own code raised it.
    pub fn as_remote(&self) -> Option<&RemoteError> {
        match self {
            RpcError::Remote(r) => Some(r),
            _ => None,
        }
    }
}

impl From<RemoteError> for RpcError {
    fn from(r: RemoteError) -> Self {
        RpcError::Remote(Box::new(r))
    }
}

fn fields<const N: usize>(kv: [(&str, Value); N]) -> Map<String, Value> {
    kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_errors_round_trip_through_the_failure_form() {
        let cases = [
            RpcError::UnsupportedVersion {
                method: "ping".into(),
                requested: Version::new(2, 0),
                available: vec![Version::new(1, 1)],
            },
            RpcError::NoSuchMethod {
                method: "nope".into(),
            },
            RpcError::MissingArgument {
                method: "m".into(),
                argument: "a".into(),
            },
            RpcError::UnknownArgument {
                method: "m".into(),
                argument: "zz".into(),
            },
            RpcError::ArgumentNotInVersion {
                method: "m".into(),
                argument: "b".into(),
                since: Version::new(1, 2),
                requested: Version::new(1, 1),
            },
            RpcError::MethodNotInVersion {
                method: "m".into(),
                since: Version::new(1, 2),
                requested: Version::new(1, 1),
            },
            RpcError::InvalidArgument {
                method: "m".into(),
                argument: "a".into(),
                expected: "string".into(),
                found: "number".into(),
            },
            RpcError::MessageTooLarge {
                size: 20_000_000,
                limit: 16 << 20,
            },
            RpcError::LimitExceeded {
                source: LimitError::TooDeep { limit: 32 },
            },
            RpcError::LimitExceeded {
                source: LimitError::TooManyMembers { limit: 100_000 },
            },
            RpcError::DeadlineExpired {
                method: "bind".into(),
                late_ms: 1_500,
            },
        ];
        for e in cases {
            let wire = e.to_remote().to_failure_string();
            let back = RemoteError::from_failure_str(&wire).expect("own failure parses");
            let typed = RpcError::from_remote(back, "other", Version::new(9, 9));
            assert_eq!(typed.to_string(), e.to_string(), "{wire}");
        }
    }

    #[test]
    fn python_unsupported_version_is_typed_with_the_callers_version() {
        // As captured from oslo.messaging 18.3.1 (kwargs empty, tb shortened).
        let failure = r#"{"class": "UnsupportedVersion", "module": "oslo_messaging.rpc.dispatcher",
            "message": "Endpoint does not support RPC version 1.2. Attempted method: ping",
            "tb": ["Traceback (most recent call last):\n"],
            "args": ["Endpoint does not support RPC version 1.2. Attempted method: ping"],
            "kwargs": {}}"#;
        let remote = RemoteError::from_failure_str(failure).expect("python failure parses");
        match RpcError::from_remote(remote, "ping", Version::new(1, 2)) {
            RpcError::UnsupportedVersion {
                method,
                requested,
                available,
            } => {
                assert_eq!(method, "ping");
                assert_eq!(requested, Version::new(1, 2));
                assert!(available.is_empty());
            }
            other => panic!("expected UnsupportedVersion, got {other:?}"),
        }
    }

    #[test]
    fn application_errors_stay_remote() {
        let r = RemoteError::new("DeviceNotFound", "accel.errors", "no device 7");
        match RpcError::from_remote(r, "get", Version::new(1, 0)) {
            RpcError::Remote(r) => assert_eq!(r.kind, "DeviceNotFound"),
            other => panic!("expected Remote, got {other:?}"),
        }
    }
}
