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
//! application's runtime.
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

mod tls;
mod url;

pub use url::{
    redact, AmqpConfig, BrokerHost, TlsOptions, DEFAULT_CONTROL_EXCHANGE, KNOWN_OPTIONS,
};

use super::{Incoming, Listener, ReplySink, Transport, LISTENER_BUFFER};
use crate::message::{envelope, open_envelope, read_body, Message, MessageLimits, Reply, Request};
use crate::{RpcError, Target};
use amqprs::callbacks::{ChannelCallback, ConnectionCallback};
use amqprs::channel::{
    BasicAckArguments, BasicConsumeArguments, BasicPublishArguments, BasicQosArguments, Channel,
    ConsumerMessage, ExchangeDeclareArguments, QueueBindArguments, QueueDeclareArguments,
};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::Return;
use amqprs::{Ack, BasicProperties, Cancel, Close, CloseChannel, FieldTable, FieldValue, Nack};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, OnceCell};

/// How many `_unique_id`s a listener remembers to drop redelivered duplicates.
const DEDUP_WINDOW: usize = 1024;
/// How many abandoned reply queues are remembered (oslo.messaging keeps 200).
const OBSOLETE_REPLY_QUEUES: usize = 200;
/// The pause between attempts to deliver a reply whose queue is missing (oslo's 0.25 s).
const MISSING_REPLY_QUEUE_PAUSE: Duration = Duration::from_millis(250);
/// How long one connection attempt to one broker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the supervisor checks that the connection is still up (besides amqprs's
/// failure notice and the broker's connection.close).
const WATCHDOG: Duration = Duration::from_millis(500);

/// Errors of the AMQP transport's configuration and connection. At the [`Transport`]
/// boundary they become [`RpcError::Transport`] with the same message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AmqpError {
    /// The transport URL cannot be read.
    #[error(
        "invalid transport_url '{url}': {detail} (the form is \
         rabbit://user:pass@host:5672[,user:pass@host2:5672]/vhost?ssl=true)"
    )]
    InvalidUrl {
        /// The URL, passwords replaced by `***`.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A query option of the URL has a value this transport cannot use.
    #[error("transport_url option {option}={value:?}: {detail}")]
    InvalidOption {
        /// The option.
        option: String,
        /// Its value.
        value: String,
        /// What to write instead.
        detail: String,
    },
    /// A query option this transport does not know (a typo?).
    #[error("transport_url has the unknown option '{option}'; known options: {known}")]
    UnknownOption {
        /// The option given.
        option: String,
        /// The options that exist.
        known: String,
    },
    /// The `ssl_ca_file` cannot be read.
    #[error("ssl_ca_file {path}: {detail}; give a readable PEM file of CA certificates")]
    CaFile {
        /// The file.
        path: String,
        /// Why it cannot be read.
        detail: String,
    },
    /// The client certificate (`ssl_cert_file`) cannot be read.
    #[error(
        "ssl_cert_file {path}: {detail}; give a readable PEM file with the client \
         certificate (its intermediate certificates may follow it)"
    )]
    ClientCert {
        /// The file.
        path: String,
        /// Why it cannot be used.
        detail: String,
    },
    /// The client certificate's private key (`ssl_key_file`) cannot be read or used.
    #[error(
        "ssl_key_file {path}: {detail}; give a readable, unencrypted PEM private key \
         (PKCS#8, PKCS#1 RSA or SEC1 EC) of the ssl_cert_file certificate"
    )]
    ClientKey {
        /// The file.
        path: String,
        /// Why it cannot be used.
        detail: String,
    },
    /// `ssl=true` without `ssl_ca_file` verifies the broker against the system's CA
    /// certificates, and none could be loaded.
    #[error(
        "TLS without ssl_ca_file trusts the system's CA certificates, and they cannot be \
         loaded: {detail}; install them or give ssl_ca_file"
    )]
    SystemRoots {
        /// Why they cannot be loaded.
        detail: String,
    },
    /// No broker of the URL accepted a connection.
    #[error("cannot connect to RabbitMQ{}: {detail}", at_brokers(brokers, detail))]
    Connect {
        /// The brokers tried, passwords replaced by `***` (empty when the failure came
        /// before any broker was tried).
        brokers: String,
        /// Why: with one broker, its failure; with several, each broker's failure after
        /// its address. What the broker said is put in words where verso recognises it
        /// (a missing vhost, TLS to a plain port, ...); otherwise it ends with what to
        /// check.
        detail: String,
    },
    /// A name AMQP cannot carry: exchange and queue names and routing keys are at most
    /// 255 bytes.
    #[error(
        "{what} '{name}' is {len} bytes long, and AMQP names are at most 255; shorten the \
         topic or server name"
    )]
    NameTooLong {
        /// What the name is for (`routing key`, `queue`, ...).
        what: &'static str,
        /// The name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The broker refused a declaration or a subscription.
    #[error("RabbitMQ refused to {action}: {detail}")]
    Broker {
        /// What was being done (`declare queue 'x'`, ...).
        action: String,
        /// The broker's or client's error.
        detail: String,
    },
}

impl From<AmqpError> for RpcError {
    fn from(e: AmqpError) -> Self {
        RpcError::Transport {
            detail: e.to_string(),
        }
    }
}

/// The RabbitMQ transport. Cheap to clone (clones share one connection); the connection
/// closes when the last clone is dropped or [`close`](Self::close) is called.
///
/// One connection carries everything: one channel to publish on, one for the reply queue
/// and one per listener.
#[derive(Clone)]
pub struct AmqpTransport {
    inner: Arc<Inner>,
}

struct Inner {
    config: AmqpConfig,
    /// This transport's reply queue, `reply_<uuid hex>`, kept across reconnects.
    reply_q: String,
    /// Whether the reply queue is needed (a call was made): re-declared on reconnect.
    reply_wanted: AtomicBool,
    /// The live session, `None` while reconnecting.
    session: watch::Sender<Option<Arc<Session>>>,
    /// Calls waiting for their reply, by `_msg_id`.
    pending: Mutex<HashMap<String, Pending>>,
    /// Listeners to re-attach after a reconnect.
    listeners: Mutex<Vec<Arc<ListenerState>>>,
    next_session: AtomicU64,
    /// Reply queues whose replies were abandoned (the queue never appeared): further
    /// replies to them are dropped at once, as oslo.messaging's obsolete-queue cache does.
    obsolete_reply_qs: Mutex<Dedup>,
    /// Replies the broker gave back (no such reply queue), by `"<reply_q> <msg_id>"`:
    /// when they first came back.
    returned_replies: Mutex<HashMap<String, std::time::Instant>>,
    /// Set by [`AmqpTransport::close`]: the supervisor does not reconnect, and the
    /// listeners' tasks end, which ends their streams.
    closed: watch::Sender<bool>,
    /// Dropped with the transport: tells the background tasks to stop.
    _alive: watch::Sender<()>,
    alive: watch::Receiver<()>,
}

struct Pending {
    session: u64,
    tx: oneshot::Sender<Result<Message, RpcError>>,
    /// A result sent with `ending: false` by an older server, delivered at `ending: true`.
    stash: Option<Message>,
}

/// Where [`Inner::publish_on`] publishes.
struct Publish<'a> {
    channel: &'a Channel,
    mandatory: bool,
    exchange: &'a str,
    routing_key: &'a str,
    expiration: Option<Duration>,
}

/// One connection and its channels.
struct Session {
    id: u64,
    host_index: usize,
    broker: String,
    conn: OnIo<Connection>,
    /// Requests, casts and call-monitor heartbeats.
    publish: OnIo<Channel>,
    /// Replies, published `mandatory`; the broker's returns are read by
    /// [`watch_returns`].
    replies: OnIo<Channel>,
    declared: Mutex<HashSet<String>>,
    reply: OnceCell<()>,
    dead: Arc<watch::Sender<bool>>,
    /// Channels the broker closed on refused declarations ([`Session::refused_channel`]).
    refused_channels: AtomicU64,
}

impl Drop for Session {
    /// A session nobody holds any more (replaced after a reconnect, or dropped before it
    /// was handed out) is closed: its connection's background tasks end.
    fn drop(&mut self) {
        self.mark_dead();
        if self.conn.is_open() {
            let conn = (*self.conn).clone();
            io_handle().spawn(async move {
                let _ = conn.close().await;
            });
        }
    }
}

/// An amqprs connection or channel that is dropped in the I/O runtime's context. amqprs
/// closes one still open when it is dropped, with `tokio::spawn`, which panics outside a
/// runtime: a [`Session`] may be dropped anywhere (the application's last clone of the
/// transport, after its runtime ended).
struct OnIo<T>(Option<T>);

impl<T> OnIo<T> {
    fn new(value: T) -> Self {
        OnIo(Some(value))
    }
}

impl<T> std::ops::Deref for OnIo<T> {
    type Target = T;

    fn deref(&self) -> &T {
        match &self.0 {
            Some(v) => v,
            // Taken only in `drop`.
            None => unreachable!("OnIo is emptied only when dropped"),
        }
    }
}

impl<T> Drop for OnIo<T> {
    fn drop(&mut self) {
        let _io = io_handle().enter();
        drop(self.0.take());
    }
}

/// Channels whose broker refusal amqprs never frees (it keeps their ids): past this many
/// on one session, the session reconnects, which frees them all, long before the
/// connection's `channel_max` (2047 on RabbitMQ).
const REFUSED_CHANNELS_MAX: u64 = 64;

impl Session {
    fn mark_dead(&self) {
        self.dead.send_replace(true);
    }

    /// Counts a channel the broker closed on a refused declaration; too many reconnect.
    fn refused_channel(&self) {
        let n = self.refused_channels.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= REFUSED_CHANNELS_MAX {
            tracing::warn!(broker = %self.broker, refused = n,
                "many declarations were refused on this connection; reconnecting to free \
                 their channels");
            self.mark_dead();
        }
    }

    fn is_dead(&self) -> bool {
        *self.dead.borrow()
    }
}

struct ListenerState {
    target: Target,
    fanout_q: String,
    tx: mpsc::Sender<Incoming>,
    dedup: Mutex<Dedup>,
    /// The session this listener is consuming on (0: none yet).
    attached: tokio::sync::Mutex<u64>,
}

/// The last ids seen (`_unique_id`s, or abandoned reply queues), oldest first, at most
/// `cap` of them.
struct Dedup {
    cap: usize,
    order: VecDeque<String>,
    seen: HashSet<String>,
}

impl Default for Dedup {
    fn default() -> Self {
        Dedup::with_capacity(DEDUP_WINDOW)
    }
}

impl Dedup {
    fn with_capacity(cap: usize) -> Self {
        Dedup {
            cap,
            order: VecDeque::new(),
            seen: HashSet::new(),
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.seen.contains(id)
    }

    /// Records `id`; false if it was already seen.
    fn insert(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        if self.order.len() == self.cap {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.order.push_back(id.to_owned());
        self.seen.insert(id.to_owned());
        true
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing panics while holding these locks; recover the data if something ever did.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn uuid_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn broker_err(action: impl Into<String>) -> impl FnOnce(amqprs::error::Error) -> AmqpError {
    let action = action.into();
    move |e| AmqpError::Broker {
        action,
        detail: e.to_string(),
    }
}

/// Like [`broker_err`], with the reason the broker gave when it closed the channel (a
/// refused declaration closes its channel, and amqprs reports only that it closed).
fn refused(
    action: impl Into<String>,
    closed: &ClosedReason,
) -> impl FnOnce(amqprs::error::Error) -> AmqpError {
    let action = action.into();
    let closed = closed.clone();
    move |e| AmqpError::Broker {
        action,
        detail: match lock(&closed).take() {
            Some(reason) => reason,
            None => e.to_string(),
        },
    }
}

/// Why the broker closed a channel, as its `channel.close` said.
type ClosedReason = Arc<Mutex<Option<String>>>;

/// Which channel a [`Callbacks`] serves: what the broker closing it or cancelling its
/// consumer means.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// A channel the session needs (publishing, replies, the reply queue's and the
    /// listeners' consumers): losing it reconnects everything.
    Vital,
    /// A channel for declarations: a refusal closes it, and the waiting call reports it.
    Declare,
}

/// What amqprs calls for the broker's asynchronous messages on a channel.
struct Callbacks {
    role: Role,
    dead: Arc<watch::Sender<bool>>,
    closed: ClosedReason,
    /// Where the replies channel hands the replies the broker gave back.
    returns: Option<mpsc::UnboundedSender<Returned>>,
}

/// A reply the broker gave back: its reply queue and its body.
type Returned = (String, Vec<u8>);

impl Callbacks {
    fn new(role: Role, dead: &Arc<watch::Sender<bool>>) -> Self {
        Callbacks {
            role,
            dead: dead.clone(),
            closed: Arc::default(),
            returns: None,
        }
    }
}

#[async_trait]
impl ChannelCallback for Callbacks {
    async fn close(
        &mut self,
        channel: &Channel,
        close: CloseChannel,
    ) -> Result<(), amqprs::error::Error> {
        let reason = format!("{close}");
        *lock(&self.closed) = Some(reason.clone());
        if self.role == Role::Vital {
            tracing::warn!(channel = channel.channel_id(), reason = %reason,
                "RabbitMQ closed a channel; reconnecting");
            self.dead.send_replace(true);
        }
        Ok(())
    }

    async fn cancel(
        &mut self,
        channel: &Channel,
        cancel: Cancel,
    ) -> Result<(), amqprs::error::Error> {
        // The queue was deleted (or its node went away): reconnecting declares it again,
        // as oslo.messaging does when its consumer is cancelled.
        tracing::warn!(channel = channel.channel_id(), consumer = %cancel.consumer_tag(),
            "RabbitMQ cancelled a consumer; reconnecting");
        self.dead.send_replace(true);
        Ok(())
    }

    async fn flow(
        &mut self,
        _channel: &Channel,
        active: bool,
    ) -> Result<bool, amqprs::error::Error> {
        Ok(active)
    }

    async fn publish_ack(&mut self, _channel: &Channel, _ack: Ack) {}

    async fn publish_nack(&mut self, _channel: &Channel, _nack: Nack) {}

    async fn publish_return(
        &mut self,
        _channel: &Channel,
        ret: Return,
        _properties: BasicProperties,
        content: Vec<u8>,
    ) {
        if let Some(tx) = &self.returns {
            let _ = tx.send((ret.routing_key().clone(), content));
        }
    }
}

/// What amqprs calls for the broker's messages about the whole connection.
struct ConnectionEvents {
    broker: String,
    dead: Arc<watch::Sender<bool>>,
}

#[async_trait]
impl ConnectionCallback for ConnectionEvents {
    async fn close(
        &mut self,
        _connection: &Connection,
        close: Close,
    ) -> Result<(), amqprs::error::Error> {
        tracing::warn!(broker = %self.broker, reason = %close, "RabbitMQ closed the connection");
        self.dead.send_replace(true);
        Ok(())
    }

    async fn blocked(&mut self, _connection: &Connection, reason: String) {
        tracing::warn!(broker = %self.broker, reason = %reason,
            "RabbitMQ blocks this connection's publishers (a resource alarm)");
    }

    async fn unblocked(&mut self, _connection: &Connection) {
        tracing::info!(broker = %self.broker, "RabbitMQ unblocked this connection's publishers");
    }

    async fn secret_updated(&mut self, _connection: &Connection) {}
}

/// Opens a channel on `conn` with the callbacks of `role`.
async fn open_channel(
    conn: &Connection,
    callbacks: Callbacks,
) -> Result<Channel, amqprs::error::Error> {
    let ch = conn.open_channel(None).await?;
    ch.register_callback(callbacks).await?;
    Ok(ch)
}

fn missing_reply_queue(reply_q: &str, msg_id: &str) -> RpcError {
    RpcError::Transport {
        detail: format!(
            "the reply to call {msg_id} was not delivered: its reply queue '{reply_q}' does \
             not exist"
        ),
    }
}

fn lost(detail: impl Into<String>) -> RpcError {
    RpcError::Transport {
        detail: detail.into(),
    }
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

impl Drop for Inner {
    fn drop(&mut self) {
        let session = self.session.send_replace(None);
        if let Some(s) = session {
            s.mark_dead();
            io_handle().spawn(close_connection(s));
        }
    }
}

impl Inner {
    /// The live session, waiting up to `wait` while reconnecting.
    async fn session_within(&self, wait: Duration) -> Result<Arc<Session>, RpcError> {
        if *self.closed.borrow() {
            return Err(lost("the transport was closed"));
        }
        let mut rx = self.session.subscribe();
        let found = tokio::time::timeout(wait, async {
            rx.wait_for(|s| s.as_ref().is_some_and(|s| !s.is_dead()))
                .await
                .ok()
                .and_then(|s| s.clone())
        })
        .await;
        match found {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(lost("the transport was closed")),
            Err(_) => Err(lost(format!(
                "not connected to RabbitMQ at {} (reconnecting) within {wait:?}; nothing was \
                 sent; check the broker",
                self.config
            ))),
        }
    }

    /// Fails every call waiting on session `id`: its reply can no longer arrive.
    fn fail_pending(&self, id: u64) {
        let mut pending = lock(&self.pending);
        let lost_ids: Vec<String> = pending
            .iter()
            .filter(|(_, p)| p.session <= id)
            .map(|(k, _)| k.clone())
            .collect();
        for msg_id in lost_ids {
            if let Some(p) = pending.remove(&msg_id) {
                let _ = p.tx.send(Err(RpcError::ConnectionLost {
                    detail: format!(
                        "the connection to RabbitMQ at {} was lost while waiting for the \
                         reply; the server may or may not have run it, so it was not retried \
                         (retry it yourself if the method is idempotent)",
                        self.config
                    ),
                    msg_id,
                }));
            }
        }
    }

    async fn declare_exchange(
        &self,
        session: &Arc<Session>,
        name: &str,
        kind: Kind,
    ) -> Result<(), RpcError> {
        if lock(&session.declared).contains(name) {
            return Ok(());
        }
        amqp_name("exchange", name)?;
        let (durable, auto_delete) = match kind {
            Kind::Fanout => (false, true),
            Kind::Topic => (self.config.durable_queues, false),
        };
        let (session, name) = (session.clone(), name.to_owned());
        on_io_thread(async move {
            let exchange = name.as_str();
            declare_on_own_channel(&session, |ch, closed| async move {
                ch.exchange_declare(ExchangeDeclareArguments {
                    durable,
                    auto_delete,
                    ..ExchangeDeclareArguments::new(exchange, kind.as_str())
                })
                .await
                .map_err(refused(format!("declare exchange '{exchange}'"), &closed))
            })
            .await?;
            lock(&session.declared).insert(name);
            Ok(())
        })
        .await
        .map_err(RpcError::from)
    }

    async fn publish(
        &self,
        session: &Session,
        exchange: &str,
        routing_key: &str,
        message: &Message,
        expiration: Option<Duration>,
    ) -> Result<(), RpcError> {
        let publish = Publish {
            channel: &session.publish,
            mandatory: false,
            exchange,
            routing_key,
            expiration,
        };
        self.publish_on(session, publish, message).await
    }

    /// Publishes a reply as oslo.messaging does, `mandatory`: the broker gives back a
    /// reply whose queue does not exist, and [`watch_returns`] retries it.
    async fn publish_reply(
        &self,
        session: &Session,
        reply_q: &str,
        payload: Vec<u8>,
    ) -> Result<(), RpcError> {
        let publish = Publish {
            channel: &session.replies,
            mandatory: true,
            exchange: "",
            routing_key: reply_q,
            expiration: None,
        };
        self.publish_bytes(session, publish, payload).await
    }

    async fn publish_on(
        &self,
        session: &Session,
        to: Publish<'_>,
        message: &Message,
    ) -> Result<(), RpcError> {
        self.publish_bytes(session, to, encode(message)?).await
    }

    async fn publish_bytes(
        &self,
        session: &Session,
        to: Publish<'_>,
        payload: Vec<u8>,
    ) -> Result<(), RpcError> {
        let Publish {
            channel,
            mandatory,
            exchange,
            routing_key,
            expiration,
        } = to;
        amqp_name("exchange", exchange)?;
        amqp_name("routing key", routing_key)?;
        let mut props = BasicProperties::default();
        props
            .with_content_type("application/json")
            .with_content_encoding("utf-8")
            .with_delivery_mode(2)
            .with_priority(0)
            .with_headers(FieldTable::new());
        if let Some(t) = expiration {
            props.with_expiration(&t.as_millis().max(1).to_string());
        }
        let args = BasicPublishArguments {
            mandatory,
            ..BasicPublishArguments::new(exchange, routing_key)
        };
        // Queued for the connection's writer task (which writes it soon after): a write
        // that fails later breaks the connection, which fails the waiting calls and
        // reconnects.
        match channel.basic_publish(props.finish(), payload, args).await {
            Ok(()) => Ok(()),
            Err(e) => {
                // The channel is unusable: reconnect everything.
                session.mark_dead();
                Err(lost(format!(
                    "publishing to exchange '{exchange}' with routing key '{routing_key}' \
                     failed: {e}; the transport is reconnecting"
                )))
            }
        }
    }

    /// Declares and consumes the reply queue on `session`, once. The work runs on the I/O
    /// thread, cell included: a caller that gives up meanwhile leaves it to finish, and
    /// the next caller finds it done (or waits for it) instead of starting a second one.
    async fn ensure_reply(self: &Arc<Self>, session: &Arc<Session>) -> Result<(), RpcError> {
        if session.reply.initialized() {
            return Ok(());
        }
        let (inner, session) = (self.clone(), session.clone());
        on_io_thread(async move {
            session
                .reply
                .get_or_try_init(|| start_reply_consumer(&inner, &session))
                .await
                .map(|_| ())
        })
        .await
        .map_err(RpcError::from)
    }

    fn queue_args(&self) -> FieldTable {
        let mut args = FieldTable::new();
        let ms = i32::try_from(self.config.transient_queues_ttl.as_millis()).unwrap_or(i32::MAX);
        if let Ok(key) = "x-expires".try_into() {
            args.insert(key, FieldValue::I(ms));
        }
        args
    }
}

/// The exchange types verso declares.
#[derive(Clone, Copy)]
enum Kind {
    Topic,
    Fanout,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Topic => "topic",
            Kind::Fanout => "fanout",
        }
    }
}

/// Refuses a name AMQP cannot carry (more than 255 bytes), before amqprs sees it.
fn amqp_name(what: &'static str, name: &str) -> Result<(), AmqpError> {
    if name.len() > 255 {
        return Err(AmqpError::NameTooLong {
            what,
            name: name.to_owned(),
            len: name.len(),
        });
    }
    Ok(())
}

/// Closes the session's connection (with the broker's handshake when it is still up).
async fn close_connection(session: Arc<Session>) {
    let _ = session.conn.clone().close().await;
}

/// The runtime of the broker-side tasks: one thread per process ("verso-amqp") runs
/// amqprs's tasks (each connection's reader and writer, each channel's dispatcher), the
/// reconnect supervisor and the consumer loops, whatever runtime the application uses.
///
/// amqprs spawns its tasks on the runtime that opens the connection or the channel, and
/// passes every frame between them through channels: on one thread those hand-offs are
/// task switches, not cross-thread wake-ups. Application code (handlers, callers) never
/// runs here: requests reach the server's runtime through its listener channel and
/// replies reach callers through oneshots. amqprs requests are started here too, and
/// awaited from elsewhere: one cancelled halfway (a caller's timeout) would otherwise
/// leave its channel's dispatcher without the answer it expects.
fn io_handle() -> &'static tokio::runtime::Handle {
    static IO: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    IO.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("verso-amqp".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match rt {
                    Ok(rt) => {
                        let _ = tx.send(Some(rt.handle().clone()));
                        rt.block_on(std::future::pending::<()>());
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "cannot build the AMQP I/O runtime");
                        let _ = tx.send(None);
                    }
                }
            });
        match spawned.ok().and_then(|_| rx.recv().ok().flatten()) {
            Some(handle) => handle,
            // No thread or no runtime (out of resources): fall back to the caller's
            // runtime, which works, only with more cross-thread wake-ups.
            None => tokio::runtime::Handle::current(),
        }
    })
}

/// Runs `f` on the broker I/O runtime and awaits it from any runtime.
async fn on_io_thread<T: Send + 'static>(
    f: impl std::future::Future<Output = Result<T, AmqpError>> + Send + 'static,
) -> Result<T, AmqpError> {
    io_handle().spawn(f).await.unwrap_or_else(|e| {
        Err(AmqpError::Connect {
            brokers: String::new(),
            detail: format!("the AMQP I/O task failed: {e}"),
        })
    })
}

/// " at BROKERS" for the connect error, or nothing when no broker was tried or when
/// `detail` names each broker with its own failure already (a URL with several).
fn at_brokers(brokers: &str, detail: &str) -> String {
    let listed = brokers
        .split(',')
        .any(|b| detail.starts_with(&format!("{b}: ")));
    if brokers.is_empty() || listed {
        String::new()
    } else {
        format!(" at {brokers}")
    }
}

/// What to check when a connection failed for a reason verso does not recognise.
const CONNECT_CHECKLIST: &str = "check that the broker runs, the host and port, the user, \
                                 password and vhost, and ssl=true if it wants TLS";

/// Why one broker could not be connected to.
struct Failure {
    /// The reason, without the broker's address (the error names it once).
    why: String,
    /// Whether `why` says what is wrong; if not, the error adds what to check.
    diagnosed: bool,
}

impl Failure {
    fn plain(why: String) -> Self {
        Failure {
            why,
            diagnosed: false,
        }
    }

    fn diagnosed(why: String) -> Self {
        Failure {
            why,
            diagnosed: true,
        }
    }
}

/// Connects to one broker.
async fn connect_once(config: &AmqpConfig, host: &BrokerHost) -> Result<Connection, Failure> {
    let mut args =
        OpenConnectionArguments::new(&host.host, host.port, &host.username, &host.password);
    args.virtual_host(&config.vhost)
        .heartbeat(heartbeat_secs(config.heartbeat))
        .connection_name("verso-rpc");
    if let Some(tls) = &config.tls {
        // The files are read on every attempt: a renewed certificate is used on the next
        // reconnect.
        args.tls_adaptor(
            tls::adaptor(tls, &host.host).map_err(|e| Failure::diagnosed(e.to_string()))?,
        );
    }
    // In a task of its own: amqprs's open, cancelled after it started the connection's
    // tasks, leaves them waiting for an answer that never comes. A late open is closed.
    let args = args.finish();
    let mut opening = io_handle().spawn(async move { Connection::open(&args).await });
    match tokio::time::timeout(CONNECT_TIMEOUT, &mut opening).await {
        Ok(Ok(Ok(c))) => Ok(c),
        Ok(Ok(Err(e))) => {
            let e = e.to_string();
            if let Some(explained) = open_refusal(config, &host.username, &e) {
                return Err(Failure::diagnosed(explained));
            }
            let hints = [
                client_cert_hint(config, &e).to_owned(),
                plain_port_hint(config, host, &e),
                tls_port_hint(config, host, &e),
            ]
            .concat();
            Err(if hints.is_empty() {
                Failure::plain(e)
            } else {
                Failure::diagnosed(format!("{e}{hints}"))
            })
        }
        Ok(Err(e)) => Err(Failure::plain(format!(
            "the connection attempt failed: {e}"
        ))),
        Err(_) => {
            io_handle().spawn(async move {
                match tokio::time::timeout(CONNECT_TIMEOUT, &mut opening).await {
                    Ok(Ok(Ok(late))) => {
                        let _ = late.close().await;
                    }
                    Ok(_) => {}
                    Err(_) => opening.abort(),
                }
            });
            Err(Failure::plain(format!(
                "no answer within {CONNECT_TIMEOUT:?}"
            )))
        }
    }
}

/// The heartbeat verso proposes: 0 takes the broker's proposal, and at least 2 s
/// otherwise (amqprs sends one every half of it, in whole seconds: 1 s would send them
/// without pause).
fn heartbeat_secs(heartbeat: Duration) -> u16 {
    match heartbeat.as_secs() {
        0 => 0,
        s => u16::try_from(s).unwrap_or(u16::MAX).max(2),
    }
}

/// The reply code and text of a `connection.close` the broker answered with, out of
/// amqprs's error text, which carries the frame only in its `Debug` form
/// (`... Close { reply_code: 530, reply_text: ShortStr(37, "NOT_ALLOWED - ..."), ... }`).
fn broker_close(error: &str) -> Option<(u16, String)> {
    let after = |key: &str| error.find(key).map(|i| &error[i + key.len()..]);
    let code = after("reply_code: ")?;
    let code: u16 = code
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    // The text is a Rust string literal: read it up to the unescaped closing quote.
    let quoted = after("reply_text: ShortStr(")?;
    let mut chars = quoted.split_once('"')?.1.chars();
    let mut text = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some((code, text)),
            '\\' => text.extend(chars.next()),
            c => text.push(c),
        }
    }
    None
}

/// The broker's refusal of `connection.open` (or of the login before it) in words, when
/// it closed the connection with a reason: a vhost that does not exist or that the user
/// may not use. RabbitMQ answers both with 530 NOT_ALLOWED.
fn open_refusal(config: &AmqpConfig, user: &str, error: &str) -> Option<String> {
    let (code, text) = broker_close(error)?;
    let vhost = &config.vhost;
    let said = format!("the broker answered {code} {text}");
    Some(if code == 530 && text.contains("not found") {
        format!(
            "vhost '{vhost}' not found ({said}); create it (rabbitmqctl add_vhost '{vhost}') \
             or name an existing one as the URL's path (rabbit://user:pass@host:5672/VHOST, \
             where an empty path is the default vhost '/')"
        )
    } else if code == 530 && text.contains("refused for user") {
        format!(
            "user '{user}' may not use vhost '{vhost}' ({said}); grant it \
             (rabbitmqctl set_permissions -p '{vhost}' '{user}' '.*' '.*' '.*') or use a \
             vhost it may"
        )
    } else {
        format!("the broker closed the connection: {code} {text}")
    })
}

/// What to check when a TLS handshake got an answer that is not TLS at all: rustls reads
/// a plain AMQP listener's protocol header ("AMQP...") as a record of an unknown type.
fn plain_port_hint(config: &AmqpConfig, host: &BrokerHost, error: &str) -> String {
    if config.tls.is_some() && error.contains("InvalidContentType") {
        format!(
            " (port {} answered without TLS: it looks like a plain AMQP port; use the \
             broker's TLS port, usually 5671, or remove ssl=true to connect without TLS)",
            host.port
        )
    } else {
        String::new()
    }
}

/// What to check when a connection without TLS to port 5671, RabbitMQ's usual TLS port,
/// was dropped: a TLS listener closes a connection whose first bytes are not a handshake.
fn tls_port_hint(config: &AmqpConfig, host: &BrokerHost, error: &str) -> String {
    let dropped = [
        "Connection reset",
        "Broken pipe",
        "UnexpectedEof",
        "early eof",
    ]
    .iter()
    .any(|d| error.contains(d));
    if config.tls.is_none() && host.port == 5671 && dropped {
        " (port 5671 is usually RabbitMQ's TLS port: add ?ssl=true, with ssl_ca_file for a \
         private CA, or use the plain port, usually 5672)"
            .to_owned()
    } else {
        String::new()
    }
}

/// What to check when a TLS connection that presents a client certificate fails in a way
/// that a broker refusing the certificate causes. Under TLS 1.3 the client finishes its
/// handshake before the broker has looked at the certificate, so the refusal may arrive
/// only as a closed socket ("Broken pipe", "Connection reset") on the first AMQP bytes.
fn client_cert_hint(config: &AmqpConfig, error: &str) -> &'static str {
    let presents_cert = config.tls.as_ref().is_some_and(|t| t.cert_file.is_some());
    let refusal = [
        "Broken pipe",
        "Connection reset",
        "UnknownCA",
        "BadCertificate",
        "CertificateRequired",
        "CertificateExpired",
        "CertificateRevoked",
        "AccessDenied",
    ];
    if presents_cert && refusal.iter().any(|r| error.contains(r)) {
        " (the broker may have refused the client certificate: check that ssl_cert_file's \
         certificate is signed by a CA the broker trusts and is still valid)"
    } else {
        ""
    }
}

/// The body of a message: its `oslo.version` 2.0 envelope.
fn encode(message: &Message) -> Result<Vec<u8>, RpcError> {
    serde_json::to_vec(&envelope(message)).map_err(|e| RpcError::Serialization {
        detail: format!("message body: {e}"),
    })
}

/// Retries replies the broker returned because their reply queue did not exist (a caller
/// that is reconnecting), as oslo.messaging does: every 0.25 s until
/// [`AmqpConfig::missing_reply_queue_timeout`] after the first return, then the reply is
/// abandoned and its queue remembered as obsolete (later replies to it are dropped).
/// `returned` is fed by the replies channel's [`Callbacks`].
async fn watch_returns(
    weak: Weak<Inner>,
    session: Weak<Session>,
    mut returned: mpsc::UnboundedReceiver<Returned>,
) {
    let Some(mut dead) = session.upgrade().map(|s| s.dead.subscribe()) else {
        return;
    };
    loop {
        let (reply_q, body) = tokio::select! {
            r = returned.recv() => match r {
                Some(r) => r,
                None => return,
            },
            _ = dead.wait_for(|d| *d) => return,
        };
        let (Some(inner), Some(s)) = (weak.upgrade(), session.upgrade()) else {
            return;
        };
        let timeout = inner.config.missing_reply_queue_timeout;
        let now = std::time::Instant::now();
        let retry = {
            let mut first = lock(&inner.returned_replies);
            // Forget replies that stopped coming back (delivered after a retry).
            first.retain(|_, t| now.duration_since(*t) < timeout * 2 + MISSING_REPLY_QUEUE_PAUSE);
            let key = format!("{reply_q} {}", reply_msg_id(&body));
            let since = *first.entry(key.clone()).or_insert(now);
            if now.duration_since(since) >= timeout {
                first.remove(&key);
                lock(&inner.obsolete_reply_qs).insert(&reply_q);
                tracing::error!(reply_q = %reply_q, waited = ?now.duration_since(since),
                    "abandoning a reply: its reply queue does not exist");
                false
            } else {
                tracing::debug!(reply_q = %reply_q,
                    "the reply queue does not exist (yet); retrying the reply");
                true
            }
        };
        if retry {
            let (weak, session) = (weak.clone(), Arc::downgrade(&s));
            tokio::spawn(async move {
                tokio::time::sleep(MISSING_REPLY_QUEUE_PAUSE).await;
                let (Some(inner), Some(s)) = (weak.upgrade(), session.upgrade()) else {
                    return;
                };
                if lock(&inner.obsolete_reply_qs).contains(&reply_q) {
                    return;
                }
                if let Err(e) = inner.publish_reply(&s, &reply_q, body).await {
                    tracing::debug!(reply_q = %reply_q, error = %e, "retrying a reply failed");
                }
            });
        }
    }
}

/// The `_msg_id` of a reply body, for telling returned replies apart ("" if unreadable).
fn reply_msg_id(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| open_envelope(b).ok())
        .and_then(|mut m| match m.remove("_msg_id") {
            Some(Value::String(id)) => Some(id),
            _ => None,
        })
        .unwrap_or_default()
}

/// Connects to the first broker that answers, starting at host `start`, and attaches the
/// reply queue (if wanted) and every live listener.
async fn connect_session(inner: &Arc<Inner>, start: usize) -> Result<Arc<Session>, AmqpError> {
    let hosts = &inner.config.hosts;
    // Each broker's failure; the error names a broker once.
    let mut failures: Vec<(String, Failure)> = Vec::new();
    for k in 0..hosts.len() {
        let index = (start + k) % hosts.len();
        let host = &hosts[index];
        let conn = match connect_once(&inner.config, host).await {
            Ok(c) => c,
            Err(e) => {
                failures.push((host.to_string(), e));
                continue;
            }
        };
        let dead = Arc::new(watch::channel(false).0);
        let broker = host.to_string();
        if let Err(e) = conn
            .register_callback(ConnectionEvents {
                broker: broker.clone(),
                dead: dead.clone(),
            })
            .await
        {
            failures.push((host.to_string(), Failure::plain(e.to_string())));
            let _ = conn.close().await;
            continue;
        }
        let publish = match open_channel(&conn, Callbacks::new(Role::Vital, &dead)).await {
            Ok(ch) => ch,
            Err(e) => {
                failures.push((
                    host.to_string(),
                    Failure::plain(format!("opening a channel: {e}")),
                ));
                let _ = conn.close().await;
                continue;
            }
        };
        let (returns_tx, returns_rx) = mpsc::unbounded_channel();
        let reply_callbacks = Callbacks {
            returns: Some(returns_tx),
            ..Callbacks::new(Role::Vital, &dead)
        };
        let replies = match open_channel(&conn, reply_callbacks).await {
            Ok(ch) => ch,
            Err(e) => {
                failures.push((
                    host.to_string(),
                    Failure::plain(format!("opening the reply channel: {e}")),
                ));
                let _ = conn.close().await;
                continue;
            }
        };
        // A broken socket (or the end of the connection for any other reason).
        let (watched, dead_on_failure) = (conn.clone(), dead.clone());
        let watched_broker = broker.clone();
        let mut marked = dead.subscribe();
        io_handle().spawn(async move {
            // Until the session is dead for any reason: this clone keeps the connection.
            tokio::select! {
                failed = watched.listen_network_io_failure() => if failed {
                    tracing::warn!(broker = %watched_broker, "the connection to RabbitMQ failed");
                },
                _ = marked.wait_for(|d| *d) => {}
            }
            dead_on_failure.send_replace(true);
        });
        let session = Arc::new(Session {
            id: inner.next_session.fetch_add(1, Ordering::Relaxed),
            host_index: index,
            broker,
            conn: OnIo::new(conn),
            publish: OnIo::new(publish),
            replies: OnIo::new(replies),
            declared: Mutex::new(HashSet::new()),
            reply: OnceCell::new(),
            dead,
            refused_channels: AtomicU64::new(0),
        });
        io_handle().spawn(watch_returns(
            Arc::downgrade(inner),
            Arc::downgrade(&session),
            returns_rx,
        ));
        if inner.reply_wanted.load(Ordering::Relaxed) {
            if let Err(e) = inner.ensure_reply(&session).await {
                failures.push((host.to_string(), Failure::plain(e.to_string())));
                session.mark_dead();
                close_connection(session).await;
                continue;
            }
        }
        let listeners: Vec<Arc<ListenerState>> = {
            let mut l = lock(&inner.listeners);
            l.retain(|s| !s.tx.is_closed());
            l.clone()
        };
        for state in listeners {
            if let Err(e) = attach(inner, &session, &state).await {
                tracing::error!(target = %state.target, error = %e,
                    "cannot re-subscribe a listener after reconnecting; retrying");
                io_handle().spawn(retry_attach(
                    Arc::downgrade(inner),
                    Arc::downgrade(&session),
                    state,
                ));
            }
        }
        tracing::info!(broker = %session.broker, "connected to RabbitMQ");
        return Ok(session);
    }
    let brokers = hosts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut detail = match failures.as_slice() {
        [] => "no broker in the URL".to_owned(),
        // The error's "at BROKER" names it.
        [(_, f)] if hosts.len() == 1 => f.why.clone(),
        several => several
            .iter()
            .map(|(host, f)| format!("{host}: {}", f.why))
            .collect::<Vec<_>>()
            .join("; "),
    };
    if failures.iter().any(|(_, f)| !f.diagnosed) {
        detail = format!("{detail}; {CONNECT_CHECKLIST}");
    }
    Err(AmqpError::Connect { brokers, detail })
}

/// Re-subscribes a listener that could not be attached after a reconnect, with a growing
/// delay, for as long as its session lives (a new session attaches it anyway).
async fn retry_attach(weak: Weak<Inner>, session: Weak<Session>, state: Arc<ListenerState>) {
    let Some((mut delay, max)) = weak.upgrade().map(|i| {
        let c = &i.config;
        (c.retry_interval, c.retry_interval_max.max(c.retry_interval))
    }) else {
        return;
    };
    loop {
        tokio::time::sleep(delay).await;
        let (Some(inner), Some(s)) = (weak.upgrade(), session.upgrade()) else {
            return;
        };
        if s.is_dead() || state.tx.is_closed() || *inner.closed.borrow() {
            return;
        }
        match attach(&inner, &s, &state).await {
            Ok(()) => {
                tracing::info!(target = %state.target, "listener re-subscribed");
                return;
            }
            Err(e) => tracing::warn!(target = %state.target, error = %e, retry_in = ?delay,
                "re-subscribing a listener failed"),
        }
        delay = (delay * 2).min(max);
    }
}

/// Watches the session; when it dies, fails its calls and reconnects.
async fn supervise(weak: Weak<Inner>, mut session: Arc<Session>) {
    let Some(mut alive) = weak.upgrade().map(|i| i.alive.clone()) else {
        return;
    };
    loop {
        let mut dead = session.dead.subscribe();
        loop {
            tokio::select! {
                r = dead.wait_for(|d| *d) => { let _ = r; break; }
                r = alive.changed() => if r.is_err() { return; },
                () = tokio::time::sleep(WATCHDOG) => {
                    if !session.conn.is_open() {
                        session.mark_dead();
                    }
                }
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        if *inner.closed.borrow() {
            inner.fail_pending(session.id);
            return;
        }
        inner.session.send_if_modified(|s| match s {
            Some(cur) if cur.id == session.id => {
                *s = None;
                true
            }
            _ => false,
        });
        inner.fail_pending(session.id);
        if lock(&inner.listeners).is_empty() && !inner.reply_wanted.load(Ordering::Relaxed) {
            tracing::info!(broker = %session.broker, "connection to RabbitMQ lost; reconnecting");
        } else {
            tracing::warn!(broker = %session.broker, "connection to RabbitMQ lost; reconnecting");
        }
        close_connection(session.clone()).await;
        let mut delay = inner.config.retry_interval;
        let max = inner.config.retry_interval_max.max(delay);
        let mut next_host = session.host_index + 1;
        drop(inner);
        loop {
            let Some(inner) = weak.upgrade() else { return };
            if *inner.closed.borrow() {
                return;
            }
            match connect_session(&inner, next_host).await {
                Ok(s) => {
                    inner.session.send_replace(Some(s.clone()));
                    session = s;
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?delay, "reconnecting to RabbitMQ failed");
                }
            }
            drop(inner);
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                r = alive.changed() => if r.is_err() { return; },
            }
            delay = (delay * 2).min(max);
            next_host += 1;
        }
    }
}

async fn start_reply_consumer(inner: &Arc<Inner>, session: &Arc<Session>) -> Result<(), AmqpError> {
    let q = inner.reply_q.as_str();
    declare_on_own_channel(session, |ch, closed| async move {
        ch.queue_declare(
            QueueDeclareArguments::new(q)
                .arguments(inner.queue_args())
                .finish(),
        )
        .await
        .map_err(refused(format!("declare reply queue '{q}'"), &closed))
    })
    .await?;
    let ch = session_channel(session, Role::Vital).await?;
    let args = BasicConsumeArguments {
        no_ack: true,
        ..BasicConsumeArguments::new(q, &format!("verso-{q}"))
    };
    let (_, consumer) = ch
        .basic_consume_rx(args)
        .await
        .map_err(broker_err(format!("consume reply queue '{q}'")))?;
    io_handle().spawn(reply_loop(
        Arc::downgrade(inner),
        Arc::downgrade(session),
        consumer,
        ch,
    ));
    Ok(())
}

/// Runs `declare` on a channel of its own, given where the broker's reason lands if it
/// refuses a declaration (a refusal closes the channel it is on, and the session's
/// channels must stay open), then closes that channel. A failed declaration counts
/// towards [`Session::refused_channel`].
async fn declare_on_own_channel<T, F, Fut>(session: &Session, declare: F) -> Result<T, AmqpError>
where
    F: FnOnce(Channel, ClosedReason) -> Fut,
    Fut: std::future::Future<Output = Result<T, AmqpError>>,
{
    let callbacks = Callbacks::new(Role::Declare, &session.dead);
    let closed = callbacks.closed.clone();
    let ch = opened(session, open_channel(&session.conn, callbacks).await)?;
    let declared = declare(ch.clone(), closed).await;
    let _ = ch.close().await;
    if declared.is_err() {
        session.refused_channel();
    }
    declared
}

/// A channel of the session with the callbacks of `role`.
async fn session_channel(session: &Session, role: Role) -> Result<Channel, AmqpError> {
    let ch = open_channel(&session.conn, Callbacks::new(role, &session.dead)).await;
    opened(session, ch)
}

/// A channel that cannot be opened means a broken (or exhausted) connection: reconnect.
fn opened(
    session: &Session,
    ch: Result<Channel, amqprs::error::Error>,
) -> Result<Channel, AmqpError> {
    ch.map_err(|e| {
        session.mark_dead();
        broker_err("open a channel")(e)
    })
}

async fn reply_loop(
    weak: Weak<Inner>,
    session: Weak<Session>,
    mut consumer: mpsc::UnboundedReceiver<ConsumerMessage>,
    _channel: Channel,
) {
    while let Some(delivery) = consumer.recv().await {
        let Some(data) = delivery.content else {
            continue;
        };
        let Some(inner) = weak.upgrade() else { return };
        let mut msg = match read_body(&data, &inner.config.limits) {
            Ok(m) => m,
            Err(unreadable) => {
                let unreadable = *unreadable;
                // A call whose reply cannot be read fails with the reason at once.
                let pending = unreadable
                    .msg_id
                    .as_ref()
                    .and_then(|id| lock(&inner.pending).remove(id));
                let error = unreadable.error;
                tracing::warn!(queue = %inner.reply_q, msg_id = ?unreadable.msg_id,
                    error = %error, "refusing an unreadable reply");
                if let Some(p) = pending {
                    let _ = p.tx.send(Err(error));
                }
                continue;
            }
        };
        let Some(Value::String(msg_id)) = msg.remove("_msg_id") else {
            tracing::warn!(queue = %inner.reply_q, "dropping a reply without _msg_id");
            continue;
        };
        msg.remove("_unique_id");
        let ending = msg.get("ending").and_then(Value::as_bool).unwrap_or(false);
        let has_payload = !msg.get("result").unwrap_or(&Value::Null).is_null()
            || !msg.get("failure").unwrap_or(&Value::Null).is_null();
        let mut pending = lock(&inner.pending);
        if ending {
            if let Some(p) = pending.remove(&msg_id) {
                let reply = match (has_payload, p.stash) {
                    (false, Some(stash)) => stash,
                    _ => msg,
                };
                let _ = p.tx.send(Ok(reply));
            }
        } else if has_payload {
            // An older server: the result first, then an empty `ending: true`.
            if let Some(p) = pending.get_mut(&msg_id) {
                p.stash = Some(msg);
            }
        }
        // Otherwise a call-monitor heartbeat: the client's own timeout governs.
    }
    if let Some(s) = session.upgrade() {
        s.mark_dead();
    }
}

/// Removes a call's pending entry when the call ends, timed out or not.
struct PendingGuard<'a> {
    inner: &'a Inner,
    msg_id: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.pending).remove(&self.msg_id);
    }
}

fn routing_key(target: &Target) -> String {
    match &target.server {
        Some(s) => format!("{}.{s}", target.topic),
        None => target.topic.clone(),
    }
}

/// Declares the queues of `state`'s target on `session` and consumes them (once per
/// session), on the I/O thread.
async fn attach(
    inner: &Arc<Inner>,
    session: &Arc<Session>,
    state: &Arc<ListenerState>,
) -> Result<(), AmqpError> {
    let (inner, session, state) = (inner.clone(), session.clone(), state.clone());
    on_io_thread(async move { attach_here(&inner, &session, &state).await }).await
}

async fn attach_here(
    inner: &Arc<Inner>,
    session: &Arc<Session>,
    state: &Arc<ListenerState>,
) -> Result<(), AmqpError> {
    let mut attached = state.attached.lock().await;
    if *attached == session.id {
        return Ok(());
    }
    let exchange = inner.config.control_exchange.as_str();
    let durable = inner.config.durable_queues;
    let topic = state.target.topic.as_str();
    let mut queues = vec![topic.to_owned()];
    if let Some(server) = &state.target.server {
        queues.push(format!("{topic}.{server}"));
    }
    let fanout_x = format!("{topic}_fanout");
    let fq = state.fanout_q.as_str();
    amqp_name("exchange", exchange)?;
    amqp_name("exchange", &fanout_x)?;
    for q in queues.iter().map(String::as_str).chain([fq]) {
        amqp_name("queue", q)?;
    }
    let topic_queues = &queues;
    declare_on_own_channel(session, |dch, closed| async move {
        dch.exchange_declare(ExchangeDeclareArguments {
            durable,
            ..ExchangeDeclareArguments::new(exchange, Kind::Topic.as_str())
        })
        .await
        .map_err(refused(format!("declare exchange '{exchange}'"), &closed))?;
        for q in topic_queues {
            dch.queue_declare(QueueDeclareArguments::new(q).durable(durable).finish())
                .await
                .map_err(refused(format!("declare queue '{q}'"), &closed))?;
            dch.queue_bind(QueueBindArguments::new(q, exchange, q))
                .await
                .map_err(refused(
                    format!("bind queue '{q}' to '{exchange}'"),
                    &closed,
                ))?;
        }
        dch.exchange_declare(ExchangeDeclareArguments {
            auto_delete: true,
            ..ExchangeDeclareArguments::new(&fanout_x, Kind::Fanout.as_str())
        })
        .await
        .map_err(refused(format!("declare exchange '{fanout_x}'"), &closed))?;
        dch.queue_declare(
            QueueDeclareArguments::new(fq)
                .arguments(inner.queue_args())
                .finish(),
        )
        .await
        .map_err(refused(format!("declare queue '{fq}'"), &closed))?;
        dch.queue_bind(QueueBindArguments::new(fq, &fanout_x, topic))
            .await
            .map_err(refused(
                format!("bind queue '{fq}' to '{fanout_x}'"),
                &closed,
            ))?;
        Ok(())
    })
    .await?;
    queues.push(fq.to_owned());
    let ch = session_channel(session, Role::Vital).await?;
    // At most this many unacknowledged requests per queue: requests are acknowledged
    // when the server takes them, so a saturated server leaves the rest on the broker.
    let prefetch = u16::try_from(LISTENER_BUFFER).unwrap_or(u16::MAX);
    ch.basic_qos(BasicQosArguments::new(0, prefetch, false))
        .await
        .map_err(broker_err("set the consumer prefetch".to_owned()))?;
    let mut consumers = Vec::new();
    for (k, q) in queues.iter().enumerate() {
        let (_, mut rx) = ch
            .basic_consume_rx(BasicConsumeArguments::new(
                q,
                &format!("verso-{}-{k}", session.id),
            ))
            .await
            .map_err(broker_err(format!("consume queue '{q}'")))?;
        consumers.push(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed());
    }
    *attached = session.id;
    io_handle().spawn(listen_loop(
        Arc::downgrade(inner),
        Arc::downgrade(session),
        state.clone(),
        futures::stream::select_all(consumers),
        ch,
    ));
    Ok(())
}

async fn listen_loop(
    weak: Weak<Inner>,
    session: Weak<Session>,
    state: Arc<ListenerState>,
    mut deliveries: futures::stream::SelectAll<
        futures::stream::BoxStream<'static, ConsumerMessage>,
    >,
    channel: Channel,
) {
    let limits = weak
        .upgrade()
        .map(|inner| inner.config.limits)
        .unwrap_or_default();
    loop {
        let delivery = tokio::select! {
            d = deliveries.next() => d,
            () = state.tx.closed() => {
                // The server stopped: unsubscribe.
                let _ = channel.close().await;
                return;
            }
        };
        let Some(delivery) = delivery else { break };
        let (Some(deliver), Some(data)) = (delivery.deliver, delivery.content) else {
            continue;
        };
        // Acknowledged when the server takes it (Incoming::accept), not on receipt: a
        // request the server never took (it was full, then crashed or stopped) is
        // redelivered by the broker to another consumer, and one delivered twice is
        // dropped by the `_unique_id` check. What is not handed to the server is
        // acknowledged now.
        let ack = BasicAckArguments::new(deliver.delivery_tag(), false);
        match read_request(&weak, &state, &limits, &data) {
            Some(incoming) => {
                let ch = channel.clone();
                let incoming = incoming.with_ack(move || {
                    io_handle().spawn(async move {
                        if let Err(e) = ch.basic_ack(ack).await {
                            tracing::warn!(error = %e, "acknowledging a request failed");
                        }
                    });
                });
                // Waits while the server's buffer is full (backpressure).
                if state.tx.send(incoming).await.is_err() {
                    // The server stopped: its unacknowledged requests go back.
                    let _ = channel.close().await;
                    return;
                }
            }
            None => {
                if let Err(e) = channel.basic_ack(ack).await {
                    tracing::warn!(error = %e, "acknowledging a request failed");
                }
            }
        }
    }
    // The consumer ended without the listener being dropped: the connection or channel
    // went away. Reconnecting re-attaches this listener.
    if let Some(s) = session.upgrade() {
        if !state.tx.is_closed() {
            s.mark_dead();
        }
    }
}

/// The received request, or why it cannot be read: a call whose reply address can be
/// found is answered with the reason, anything else goes to the server as a failed
/// cast, for it to log.
fn read_request(
    weak: &Weak<Inner>,
    state: &ListenerState,
    limits: &MessageLimits,
    data: &[u8],
) -> Option<Incoming> {
    let mut msg = match read_body(data, limits) {
        Ok(m) => m,
        Err(unreadable) => {
            let unreadable = *unreadable;
            return Some(match unreadable.reply_to() {
                Some(to) => Incoming::call(
                    Err(unreadable.error),
                    Box::new(AmqpReply {
                        inner: weak.clone(),
                        reply_q: to.reply_q,
                        msg_id: to.msg_id,
                        _heartbeat: None,
                    }),
                ),
                None => Incoming::cast(Err(unreadable.error)),
            });
        }
    };
    if let Some(Value::String(unique_id)) = msg.remove("_unique_id") {
        if !lock(&state.dedup).insert(&unique_id) {
            tracing::warn!(target = %state.target, unique_id = %unique_id,
                "dropping a duplicate delivery of a request already received");
            return None;
        }
    }
    let msg_id = msg.remove("_msg_id");
    let reply_q = msg.remove("_reply_q");
    let monitor = msg.remove("_timeout").and_then(|t| t.as_f64());
    match (msg_id, reply_q) {
        (Some(Value::String(msg_id)), Some(Value::String(reply_q))) => {
            let heartbeat = monitor
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(|t| start_heartbeat(weak.clone(), reply_q.clone(), msg_id.clone(), t));
            Some(Incoming::call(
                Request::from_message(msg),
                Box::new(AmqpReply {
                    inner: weak.clone(),
                    reply_q,
                    msg_id,
                    _heartbeat: heartbeat,
                }),
            ))
        }
        _ => Some(Incoming::cast(Request::from_message(msg))),
    }
}

/// Sends call-monitor heartbeats (`ending: false`) every `timeout / 2` seconds until the
/// returned sender is dropped (the reply is sent or abandoned).
fn start_heartbeat(
    weak: Weak<Inner>,
    reply_q: String,
    msg_id: String,
    timeout: f64,
) -> oneshot::Sender<()> {
    let (tx, mut rx) = oneshot::channel::<()>();
    let every = Duration::from_secs_f64((timeout / 2.0).clamp(0.1, 3600.0));
    io_handle().spawn(async move {
        loop {
            tokio::select! {
                _ = &mut rx => return,
                () = tokio::time::sleep(every) => {}
            }
            let Some(inner) = weak.upgrade() else { return };
            let Ok(session) = inner.session_within(every).await else {
                continue;
            };
            let mut m = Message::new();
            m.insert("result".into(), Value::Null);
            m.insert("failure".into(), Value::Null);
            m.insert("ending".into(), Value::Bool(false));
            m.insert("_msg_id".into(), Value::String(msg_id.clone()));
            m.insert("_unique_id".into(), Value::String(uuid_hex()));
            let _ = inner.publish(&session, "", &reply_q, &m, None).await;
        }
    });
    tx
}

struct AmqpReply {
    inner: Weak<Inner>,
    reply_q: String,
    msg_id: String,
    _heartbeat: Option<oneshot::Sender<()>>,
}

#[async_trait]
impl ReplySink for AmqpReply {
    async fn send(self: Box<Self>, reply: Reply) -> Result<(), RpcError> {
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| lost("the transport was closed before the reply was sent"))?;
        if lock(&inner.obsolete_reply_qs).contains(&self.reply_q) {
            tracing::debug!(reply_q = %self.reply_q, msg_id = %self.msg_id,
                "dropping a reply to a reply queue already found missing");
            return Err(missing_reply_queue(&self.reply_q, &self.msg_id));
        }
        let mut reply = reply.into_message();
        reply.insert("_msg_id".into(), Value::String(self.msg_id.clone()));
        reply.insert("_unique_id".into(), Value::String(uuid_hex()));
        let session = inner.session_within(inner.config.publish_wait).await?;
        inner
            .publish_reply(&session, &self.reply_q, encode(&reply)?)
            .await
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
        let mut message = request.into_message();
        message.insert("_msg_id".into(), Value::String(msg_id.clone()));
        message.insert("_reply_q".into(), Value::String(inner.reply_q.clone()));
        message.insert("_timeout".into(), Value::Null);
        message.insert("_unique_id".into(), Value::String(uuid_hex()));
        let (tx, rx) = oneshot::channel();
        lock(&inner.pending).insert(
            msg_id.clone(),
            Pending {
                session: session.id,
                tx,
                stash: None,
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
        inner.publish_on(&session, publish, &message).await?;
        rx.await
            .unwrap_or_else(|_| Err(lost("the transport was closed while waiting for a reply")))
            .and_then(Reply::from_message)
    }

    async fn cast(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        let inner = &self.inner;
        let session = inner.session_within(inner.config.publish_wait).await?;
        let exchange = inner.config.control_exchange.as_str();
        inner
            .declare_exchange(&session, exchange, Kind::Topic)
            .await?;
        let mut message = request.into_message();
        message.insert("_unique_id".into(), Value::String(uuid_hex()));
        inner
            .publish(&session, exchange, &routing_key(target), &message, None)
            .await
    }

    async fn fanout(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        let inner = &self.inner;
        let session = inner.session_within(inner.config.publish_wait).await?;
        let exchange = format!("{}_fanout", target.topic);
        inner
            .declare_exchange(&session, &exchange, Kind::Fanout)
            .await?;
        let mut message = request.into_message();
        message.insert("_unique_id".into(), Value::String(uuid_hex()));
        inner.publish(&session, &exchange, "", &message, None).await
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
            Ok(()) => Ok(Listener::bounded(rx)),
            // The connection dropped meanwhile: the reconnect attaches it.
            Err(_) if session.is_dead() || !session.conn.is_open() => Ok(Listener::bounded(rx)),
            Err(e) => {
                lock(&inner.listeners).retain(|s| !Arc::ptr_eq(s, &state));
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert!(amqp_name("queue", &"é".repeat(128)).is_err());
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
        };
        assert_eq!(
            one.to_string(),
            "cannot connect to RabbitMQ at u:***@h:5672: refused"
        );
        let two = AmqpError::Connect {
            brokers: "u:***@h:5672,u:***@g:5672".into(),
            detail: "u:***@g:5672: refused; u:***@h:5672: reset".into(),
        };
        assert_eq!(
            two.to_string(),
            "cannot connect to RabbitMQ: u:***@g:5672: refused; u:***@h:5672: reset"
        );
        let none = AmqpError::Connect {
            brokers: String::new(),
            detail: "TLS cannot be set up".into(),
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
