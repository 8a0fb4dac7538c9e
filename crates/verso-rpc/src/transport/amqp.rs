//! The RabbitMQ transport (AMQP 0-9-1, through `amqprs`), wire-compatible with
//! oslo.messaging's rabbit driver: a verso service and a Python oslo.messaging service
//! can call each other through one broker.
//!
//! What goes on the wire (see `tests/vectors/oslo-messaging-wire.md`):
//! - the `control_exchange` (default `openstack`, type `topic`, not durable) carries calls
//!   and casts, routing key `topic` or `topic.server`;
//! - a server declares and consumes the queues `topic` and `topic.server` (bound with their
//!   own names) and a `topic_fanout_<uuid hex>` queue (`x-expires`) bound to the
//!   `topic_fanout` exchange (type `fanout`, auto-delete);
//! - a client has one `reply_<uuid hex>` queue (`x-expires`) for all its calls, declared on
//!   its first call; replies come through the default exchange and are matched by
//!   `_msg_id`;
//! - bodies are the `oslo.version` 2.0 envelope; every message carries `_unique_id`, a
//!   call also `_msg_id`, `_reply_q` and `_timeout`; properties are
//!   `content_type: application/json`, `content_encoding: utf-8`, `delivery_mode: 2`,
//!   `priority: 0`, empty headers, and `expiration` (ms) on call requests only.
//!
//! Failures: when the connection drops (broker restart, network), the transport reconnects
//! by itself with a growing delay, trying the URL's hosts in turn, and re-declares and
//! re-consumes every listener's queues, so servers come back without help. Calls waiting
//! for a reply when the connection dropped fail at once with [`RpcError::ConnectionLost`]
//! (they are not retried: the server may have run them); a call or cast made while the
//! transport is reconnecting waits for the connection (a call up to its timeout, a cast up
//! to [`AmqpConfig::publish_wait`]), since nothing was sent yet. A request delivered twice
//! (the broker redelivers one whose acknowledgement was lost) is recognised by its
//! `_unique_id` and dispatched once. Requests are acknowledged when the server takes
//! them (it has a free handler slot), not on receipt: at most [`LISTENER_BUFFER`]
//! requests per queue wait unacknowledged in the transport (the consumer's prefetch), so
//! a saturated server leaves the rest on the broker, and when a server crashes or stops
//! the broker redelivers the requests it had not taken to another consumer (a
//! redelivered duplicate is dropped by its `_unique_id`). Replies are published `mandatory`: one
//! whose reply queue does not exist (its caller is reconnecting) comes back from the
//! broker and is retried every 0.25 s for [`AmqpConfig::missing_reply_queue_timeout`]
//! (oslo's `kombu_missing_consumer_retry_timeout`, 60 s), then abandoned, and later
//! replies to that queue are dropped at once, as oslo.messaging does.
//!
//! Threads: the connections' reader and writer tasks, their channels' dispatchers, the
//! consumer loops and the reconnect supervisor of every transport run on one thread,
//! `verso-amqp`, whatever runtime the application uses. Handlers and callers stay on the
//! application's runtime. A process whose runtime is one thread can put the broker's
//! tasks on it too ([`run_io_on`]): a call then costs that thread one wake-up instead of
//! two threads two each; its handlers must then never block, or the connection stalls
//! with them.
//!
//! The modules, one concern each (this file holds [`AmqpTransport`] and its
//! [`Transport`] methods, over all of them):
//!
//! | module | owns |
//! |---|---|
//! | `supervisor` | connecting to the first broker that answers (the reply queue and every listener attached to the new session), the supervisor that reconnects |
//! | `listen` | a server's queues on every session, the loop that hands requests to the server |
//! | `reply` | the reply queue and the calls waiting on it, the server's reply sink and its heartbeats, the retry of returned replies |
//! | `publish` | publishing with oslo.messaging's properties |
//! | `topology` | the exchanges and queues verso declares, AMQP's name limit, declarations on a channel of their own |
//! | `state` | `Inner`, the state the transport's clones share (the live session, the calls waiting, the listeners, the `_unique_id` window) |
//! | `session` | one connection and its channels (`Session`), the broker's callbacks |
//! | `connect` | one connection attempt to one broker, and the diagnosis of a failed one |
//! | `url` | the transport URL, parsed into [`AmqpConfig`] |
//! | `tls` | [`TlsOptions`] and the rustls configuration they make |
//! | `io` | the one `verso-amqp` thread every connection's tasks run on |
//! | `error` | [`AmqpError`] and the transport's [`RpcError`]s |
//!
//! Each module imports only modules below it in this table (`tests/modules.rs`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use serde_json::json;
//! use verso::{RequestContext, Version};
//! use verso_rpc::{transport::amqp::AmqpTransport, *};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), RpcError> {
//! let transport = Arc::new(AmqpTransport::connect("rabbit://guest:guest@127.0.0.1:5672/").await?);
//! let endpoint = Endpoint::new(Version::new(1, 1)).method(
//!     MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
//!     |_ctx, args: Args| async move { Ok(json!({"arg": args.value("arg")})) },
//! );
//! let server = RpcServer::new(transport.clone(), Target::new("demo").with_server("s1"))
//!     .endpoint(endpoint)?
//!     .start()
//!     .await?;
//! let client = RpcClient::new(transport, Target::new("demo"));
//! let reply = client.call(&RequestContext::new("req-1"), "ping", "1.0", json!({"arg": 1})).await?;
//! assert_eq!(reply, json!({"arg": 1}));
//! server.stop().await;
//! # Ok(()) }
//! ```

mod connect;
mod error;
mod io;
mod listen;
mod publish;
mod reply;
mod session;
mod state;
mod supervisor;
mod tls;
mod topology;
mod url;

/// Kept here for the code that found it here; it masks any URL (`transport::redact`).
pub use crate::transport::redact;
pub use error::{AmqpError, ConnectKind};
pub use io::{run_io_on, IoRuntimeChosen};
pub use tls::TlsOptions;
pub use url::{AmqpConfig, BrokerHost, DEFAULT_CONTROL_EXCHANGE};

use io::{io_handle, lock, on_io_thread};
use listen::attach;
use publish::{encode, Publish};
use reply::{await_reply, PendingGuard, OBSOLETE_REPLY_QUEUES};
use session::close_connection;
use state::{Dedup, Inner, ListenerState, Pending};
use supervisor::{connect_session, supervise};
use topology::{amqp_name, routing_key, uuid_hex, Kind};

use crate::message::{Reply, Request, RequestBody};
use crate::transport::{Listener, Transport, LISTENER_BUFFER};
use crate::{RpcError, Target};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The RabbitMQ transport. Cheap to clone (clones share one connection); the connection
/// closes when the last clone is dropped or [`close`](Self::close) is called.
///
/// One connection carries everything: one channel to publish on, one for the reply queue
/// and one per listener.
#[derive(Clone)]
pub struct AmqpTransport {
    inner: Arc<Inner>,
}

/// The caller's deadline, `timeout` from now, in seconds since the Unix epoch (the
/// `_deadline` a server drops a call after).
fn deadline_secs(timeout: Duration) -> Option<f64> {
    let at = std::time::SystemTime::now().checked_add(timeout)?;
    at.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64())
}

impl AmqpTransport {
    /// Connects to the broker of an oslo.messaging transport URL, with the default
    /// control exchange (`openstack`).
    pub async fn connect(url: &str) -> Result<AmqpTransport, AmqpError> {
        Self::connect_with(AmqpConfig::from_url(url)?).await
    }

    /// Connects with a full configuration. Fails if no broker of the config accepts the
    /// first connection; after that, lost connections are re-established in the
    /// background.
    pub async fn connect_with(config: AmqpConfig) -> Result<AmqpTransport, AmqpError> {
        // Unreadable or mismatched certificate files are the operator's to fix: say which
        // (typed) before trying any broker.
        if let Some(tls) = &config.tls {
            tls.check()?;
        }
        amqp_name("virtual host", &config.vhost)?;
        amqp_name("control exchange", &config.control_exchange)?;
        let (session_tx, _) = watch::channel(None);
        let (alive_tx, alive_rx) = watch::channel(());
        let inner = Arc::new(Inner {
            config,
            reply_q: format!("reply_{}", uuid_hex()),
            reply_wanted: AtomicBool::new(false),
            session: session_tx,
            pending: Mutex::new(HashMap::new()),
            listeners: Mutex::new(Vec::new()),
            next_session: AtomicU64::new(1),
            obsolete_reply_qs: Mutex::new(Dedup::with_capacity(OBSOLETE_REPLY_QUEUES)),
            returned_replies: Mutex::new(HashMap::new()),
            closed: watch::channel(false).0,
            _alive: alive_tx,
            alive: alive_rx,
        });
        let session = on_io_thread({
            let inner = inner.clone();
            async move { connect_session(&inner, 0).await }
        })
        .await?;
        inner.session.send_replace(Some(session.clone()));
        io_handle().spawn(supervise(Arc::downgrade(&inner), session));
        Ok(AmqpTransport { inner })
    }

    /// The configuration (its `Display` hides passwords).
    pub fn config(&self) -> &AmqpConfig {
        &self.inner.config
    }

    /// The name of this transport's reply queue.
    pub fn reply_queue(&self) -> &str {
        &self.inner.reply_q
    }

    /// Whether the transport is connected right now.
    pub fn is_connected(&self) -> bool {
        self.inner
            .session
            .borrow()
            .as_ref()
            .is_some_and(|s| !s.is_dead() && s.conn.is_open())
    }

    /// Closes the connection now (clones stop working). Listeners see the end of their
    /// stream; waiting calls fail.
    pub async fn close(&self) {
        self.inner.closed.send_replace(true);
        let session = self.inner.session.send_replace(None);
        if let Some(s) = session {
            s.mark_dead();
            // On the I/O thread: an amqprs request cancelled halfway breaks its channel.
            let _ = io_handle().spawn(close_connection(s.clone())).await;
            self.inner.fail_pending(s.id);
        }
        lock(&self.inner.listeners).clear();
    }
}

impl std::fmt::Debug for AmqpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpTransport")
            .field("config", &self.inner.config)
            .field("reply_q", &self.inner.reply_q)
            .field("connected", &self.is_connected())
            .finish()
    }
}

#[async_trait]
impl Transport for AmqpTransport {
    async fn call(
        &self,
        target: &Target,
        request: Request,
        timeout: Duration,
    ) -> Result<Reply, RpcError> {
        let inner = &self.inner;
        inner.reply_wanted.store(true, Ordering::Relaxed);
        let session = inner.session_within(timeout).await?;
        inner.ensure_reply(&session).await?;
        let exchange = inner.config.control_exchange.as_str();
        inner
            .declare_exchange(&session, exchange, Kind::Topic)
            .await?;
        let msg_id = uuid_hex();
        let method = request.method.clone();
        let monitor = inner.config.call_monitor_timeout;
        let mut transport = vec![
            ("_msg_id", Value::String(msg_id.clone())),
            ("_reply_q", Value::String(inner.reply_q.clone())),
            (
                "_timeout",
                monitor.map_or(Value::Null, |m| Value::from(m.as_secs_f64())),
            ),
            ("_unique_id", Value::String(uuid_hex())),
        ];
        if let Some(deadline) = deadline_secs(timeout) {
            transport.push(("_deadline", Value::from(deadline)));
        }
        let body = encode(&RequestBody {
            request: &request,
            transport: &transport,
        })?;
        let (tx, mut replies) = mpsc::unbounded_channel();
        lock(&inner.pending).insert(
            msg_id.clone(),
            Pending {
                session: session.id,
                tx,
            },
        );
        let _guard = PendingGuard {
            inner,
            msg_id: msg_id.clone(),
        };
        let publish = Publish {
            channel: &session.publish,
            mandatory: false,
            exchange,
            routing_key: &routing_key(target),
            expiration: Some(timeout),
        };
        inner.publish_bytes(&session, publish, body).await?;
        let silent = monitor.map(|after| (after, method.as_str(), target.topic.as_str()));
        await_reply(&mut replies, silent).await
    }

    async fn close(&self) {
        AmqpTransport::close(self).await;
    }

    async fn cast(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        let inner = &self.inner;
        let session = inner.session_within(inner.config.publish_wait).await?;
        let exchange = inner.config.control_exchange.as_str();
        inner
            .declare_exchange(&session, exchange, Kind::Topic)
            .await?;
        let transport = [("_unique_id", Value::String(uuid_hex()))];
        let body = encode(&RequestBody {
            request: &request,
            transport: &transport,
        })?;
        inner
            .publish(&session, exchange, &routing_key(target), body, None)
            .await
    }

    async fn fanout(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        let inner = &self.inner;
        let session = inner.session_within(inner.config.publish_wait).await?;
        let exchange = format!("{}_fanout", target.topic);
        inner
            .declare_exchange(&session, &exchange, Kind::Fanout)
            .await?;
        let transport = [("_unique_id", Value::String(uuid_hex()))];
        let body = encode(&RequestBody {
            request: &request,
            transport: &transport,
        })?;
        inner.publish(&session, &exchange, "", body, None).await
    }

    async fn listen(&self, target: &Target) -> Result<Listener, RpcError> {
        let inner = &self.inner;
        let (tx, rx) = mpsc::channel(LISTENER_BUFFER);
        let state = Arc::new(ListenerState {
            target: target.clone(),
            fanout_q: format!("{}_fanout_{}", target.topic, uuid_hex()),
            tx,
            dedup: Mutex::new(Dedup::default()),
            attached: tokio::sync::Mutex::new(0),
            acks: tokio_util::task::TaskTracker::new(),
        });
        lock(&inner.listeners).push(state.clone());
        // A server may keep only its listener: the transport lives as long as it does.
        let keepalive = (inner.clone(), state.clone());
        io_handle().spawn(async move {
            let (inner, state) = keepalive;
            let mut closed = inner.closed.subscribe();
            tokio::select! {
                () = state.tx.closed() => {}
                _ = closed.wait_for(|c| *c) => {}
            }
            lock(&inner.listeners).retain(|s| !Arc::ptr_eq(s, &state));
        });
        let session = match inner.session_within(inner.config.publish_wait).await {
            Ok(s) => s,
            Err(e) => {
                lock(&inner.listeners).retain(|s| !Arc::ptr_eq(s, &state));
                return Err(e);
            }
        };
        match attach(inner, &session, &state).await {
            Ok(()) => Ok(Listener::decoding(rx)),
            // The connection dropped meanwhile: the reconnect attaches it.
            Err(_) if session.is_dead() || !session.conn.is_open() => Ok(Listener::decoding(rx)),
            Err(e) => {
                lock(&inner.listeners).retain(|s| !Arc::ptr_eq(s, &state));
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::connect::{
        broker_close, client_cert_hint, close_kind, heartbeat_secs, login_hint, open_refusal,
        plain_port_hint, tls_port_hint,
    };
    use super::state::DEDUP_WINDOW;
    use super::*;

    #[test]
    fn dedup_window_forgets_the_oldest() {
        let mut d = Dedup::default();
        assert!(d.insert("a"));
        assert!(!d.insert("a"));
        for i in 0..DEDUP_WINDOW {
            assert!(d.insert(&i.to_string()));
        }
        assert!(d.insert("a"), "forgotten after the window");
    }

    #[test]
    fn names_amqp_cannot_carry_are_typed() {
        assert!(amqp_name("queue", &"q".repeat(255)).is_ok());
        match amqp_name("queue", &"q".repeat(256)) {
            Err(e @ AmqpError::NameTooLong { len: 256, .. }) => {
                assert!(e.to_string().contains("at most 255"), "{e}")
            }
            other => panic!("expected NameTooLong, got {other:?}"),
        }
        // Bytes, not characters: what the wire counts.
        assert!(matches!(
            amqp_name("queue", &"é".repeat(128)),
            Err(AmqpError::NameTooLong { len: 256, .. })
        ));
    }

    #[tokio::test]
    async fn a_vhost_amqp_cannot_carry_is_refused_before_connecting() {
        let url = format!("rabbit://u:p@127.0.0.1:1/{}", "v".repeat(300));
        match AmqpTransport::connect(&url).await {
            Err(AmqpError::NameTooLong { what, .. }) => assert_eq!(what, "virtual host"),
            other => panic!("expected NameTooLong, got {:?}", other.err()),
        }
    }

    #[test]
    fn heartbeats_are_never_under_two_seconds() {
        assert_eq!(heartbeat_secs(Duration::ZERO), 0);
        assert_eq!(heartbeat_secs(Duration::from_secs(1)), 2);
        assert_eq!(heartbeat_secs(Duration::from_millis(2500)), 2);
        assert_eq!(heartbeat_secs(Duration::from_secs(60)), 60);
        assert_eq!(heartbeat_secs(Duration::from_secs(1 << 20)), u16::MAX);
    }

    #[test]
    fn routing_keys() {
        assert_eq!(routing_key(&Target::new("t")), "t");
        assert_eq!(routing_key(&Target::new("t").with_server("s")), "t.s");
    }

    #[test]
    fn a_refused_client_certificate_is_named() {
        let with_cert =
            AmqpConfig::from_url("rabbit://h/?ssl=1&ssl_cert_file=/c.pem&ssl_key_file=/k.pem")
                .unwrap();
        let without = AmqpConfig::from_url("rabbit://h/?ssl=1").unwrap();
        for error in [
            "IO error: Broken pipe (os error 32)",
            "IO error: received fatal alert: UnknownCA",
            "IO error: Connection reset by peer (os error 104)",
        ] {
            assert!(
                client_cert_hint(&with_cert, error).contains("ssl_cert_file"),
                "{error}"
            );
            assert_eq!(client_cert_hint(&without, error), "", "{error}");
        }
        assert_eq!(
            client_cert_hint(&with_cert, "IO error: Connection refused (os error 111)"),
            ""
        );
    }

    /// amqprs's error for a `connection.close` answering `connection.open`, in its form.
    fn closed_with(code: u16, text: &str) -> String {
        format!(
            "AMQP connection open error: failed to open connection, reason: \
             Close(MethodHeader {{ class_id: 10, method_id: 50 }}, Close {{ reply_code: {code}, \
             reply_text: ShortStr({}, {text:?}), class_id: 10, method_id: 40 }})",
            text.len()
        )
    }

    #[test]
    fn the_brokers_refusals_are_put_in_words() {
        let config = AmqpConfig::from_url("rabbit://u:p@h:5672/prod").unwrap();
        let missing = closed_with(530, "NOT_ALLOWED - vhost prod not found");
        assert_eq!(
            broker_close(&missing),
            Some((530, "NOT_ALLOWED - vhost prod not found".to_owned()))
        );
        let said = open_refusal(&config, "u", &missing).unwrap();
        assert!(said.starts_with("vhost 'prod' not found"), "{said}");
        assert!(!said.contains("MethodHeader"), "{said}");

        let forbidden = closed_with(
            530,
            "NOT_ALLOWED - access to vhost 'prod' refused for user 'u'",
        );
        let said = open_refusal(&config, "u", &forbidden).unwrap();
        assert!(
            said.starts_with("user 'u' may not use vhost 'prod'"),
            "{said}"
        );
        assert!(said.contains("set_permissions -p 'prod' 'u'"), "{said}");

        // Quotes and backslashes in the text come back as the broker sent them.
        let odd = closed_with(320, r#"CONNECTION_FORCED - "bye" \ now"#);
        let said = open_refusal(&config, "u", &odd).unwrap();
        assert_eq!(
            said,
            r#"the broker closed the connection: 320 CONNECTION_FORCED - "bye" \ now"#
        );
        // Anything else is left as it is.
        assert_eq!(
            open_refusal(&config, "u", "AMQP network error: reset"),
            None
        );
        assert_eq!(
            broker_close("reply_code: 530, reply_text: ShortStr(3, \"abc"),
            None
        );
    }

    #[test]
    fn the_brokers_refusals_have_a_kind() {
        let kind = |code, text: &str| close_kind(code, text);
        assert_eq!(
            kind(530, "NOT_ALLOWED - vhost prod not found"),
            ConnectKind::VhostNotFound
        );
        assert_eq!(
            kind(
                530,
                "NOT_ALLOWED - access to vhost 'prod' refused for user 'u'"
            ),
            ConnectKind::VhostRefused
        );
        assert_eq!(
            kind(
                403,
                "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN"
            ),
            ConnectKind::LoginRefused
        );
        assert_eq!(kind(320, "CONNECTION_FORCED"), ConnectKind::BrokerClosed);
        let config = AmqpConfig::from_url("rabbit://u:p@h:5672/prod").unwrap();
        let login = closed_with(403, "ACCESS_REFUSED - Login was refused");
        let said = open_refusal(&config, "u", &login).unwrap();
        assert!(
            said.starts_with("the broker refused the login of user 'u'"),
            "{said}"
        );
        // RabbitMQ's way with a client that cannot be told why: a reset in the handshake.
        let reset = "network io error: Connection reset by peer (os error 104)";
        assert!(
            login_hint("u", reset).contains("refuses a login: check the password of user 'u'"),
            "{}",
            login_hint("u", reset)
        );
        assert_eq!(login_hint("u", "Connection refused (os error 111)"), "");
    }

    #[test]
    fn a_port_of_the_other_kind_is_named() {
        let tls = AmqpConfig::from_url("rabbit://u:p@h:5672/?ssl=1").unwrap();
        let plain = AmqpConfig::from_url("rabbit://u:p@h:5671/").unwrap();
        let corrupt = "AMQP network error: network io error: received corrupt message of type \
                       InvalidContentType";
        assert!(plain_port_hint(&tls, &tls.hosts[0], corrupt).contains("5671"));
        assert_eq!(plain_port_hint(&plain, &plain.hosts[0], corrupt), "");
        let reset = "AMQP network error: network io error: Connection reset by peer (os error 104)";
        assert!(tls_port_hint(&plain, &plain.hosts[0], reset).contains("ssl=true"));
        assert_eq!(tls_port_hint(&tls, &tls.hosts[0], reset), "");
    }

    #[test]
    fn the_connect_error_names_each_broker_once() {
        let one = AmqpError::Connect {
            brokers: "u:***@h:5672".into(),
            detail: "refused".into(),
            kind: ConnectKind::Other,
        };
        assert_eq!(
            one.to_string(),
            "cannot connect to RabbitMQ at u:***@h:5672: refused"
        );
        let two = AmqpError::Connect {
            brokers: "u:***@h:5672,u:***@g:5672".into(),
            detail: "u:***@g:5672: refused; u:***@h:5672: reset".into(),
            kind: ConnectKind::Other,
        };
        assert_eq!(
            two.to_string(),
            "cannot connect to RabbitMQ: u:***@g:5672: refused; u:***@h:5672: reset"
        );
        let none = AmqpError::Connect {
            brokers: String::new(),
            detail: "TLS cannot be set up".into(),
            kind: ConnectKind::Other,
        };
        assert_eq!(
            none.to_string(),
            "cannot connect to RabbitMQ: TLS cannot be set up"
        );
    }

    #[tokio::test]
    async fn unreachable_broker_is_a_typed_error_without_the_password() {
        let e = AmqpTransport::connect("rabbit://u:hunter2@127.0.0.1:1/")
            .await
            .unwrap_err();
        assert!(matches!(e, AmqpError::Connect { .. }), "{e:?}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
    }
}
