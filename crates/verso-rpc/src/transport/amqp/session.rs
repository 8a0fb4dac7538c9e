//! Sessions and their supervision: one connection and its channels, the callbacks of the
//! broker's asynchronous messages, connecting to the first broker that answers, and the
//! supervisor that reconnects when the connection drops.

use super::connect::{connect_once, Failure, CONNECT_CHECKLIST};
use super::error::{broker_err, closed, AmqpError, ConnectKind};
use super::io::{io_handle, OnIo};
use super::listen::{attach, retry_attach, ListenerState};
use super::reply::watch_returns;
use super::{lock, Inner};
use crate::RpcError;
use amqprs::callbacks::{ChannelCallback, ConnectionCallback};
use amqprs::channel::Channel;
use amqprs::connection::Connection;
use amqprs::{Ack, BasicProperties, Cancel, Close, CloseChannel, Nack, Return};
use async_trait::async_trait;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, watch, OnceCell};

/// How often the supervisor checks that the connection is still up (besides amqprs's
/// failure notice and the broker's connection.close).
pub(super) const WATCHDOG: Duration = Duration::from_millis(500);

/// One connection and its channels.
pub(super) struct Session {
    pub(super) id: u64,
    pub(super) host_index: usize,
    pub(super) broker: String,
    pub(super) conn: OnIo<Connection>,
    /// Requests, casts and call-monitor heartbeats.
    pub(super) publish: OnIo<Channel>,
    /// Replies, published `mandatory`; the broker's returns are read by
    /// [`watch_returns`].
    pub(super) replies: OnIo<Channel>,
    pub(super) declared: Mutex<HashSet<String>>,
    pub(super) reply: OnceCell<()>,
    pub(super) dead: Arc<watch::Sender<bool>>,
    /// Channels the broker closed on refused declarations ([`Session::refused_channel`]).
    pub(super) refused_channels: AtomicU64,
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

/// Channels whose broker refusal amqprs never frees (it keeps their ids): past this many
/// on one session, the session reconnects, which frees them all, long before the
/// connection's `channel_max` (2047 on RabbitMQ).
pub(super) const REFUSED_CHANNELS_MAX: u64 = 64;

impl Session {
    pub(super) fn mark_dead(&self) {
        self.dead.send_replace(true);
    }

    /// Counts a channel the broker closed on a refused declaration; too many reconnect.
    pub(super) fn refused_channel(&self) {
        let n = self.refused_channels.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= REFUSED_CHANNELS_MAX {
            tracing::warn!(broker = %self.broker, refused = n,
                "many declarations were refused on this connection; reconnecting to free \
                 their channels");
            self.mark_dead();
        }
    }

    pub(super) fn is_dead(&self) -> bool {
        *self.dead.borrow()
    }
}

/// Why the broker closed a channel, as its `channel.close` said.
pub(super) type ClosedReason = Arc<Mutex<Option<String>>>;

/// Which channel a [`Callbacks`] serves: what the broker closing it or cancelling its
/// consumer means.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Role {
    /// A channel the session needs (publishing, replies, the reply queue's and the
    /// listeners' consumers): losing it reconnects everything.
    Vital,
    /// A channel for declarations: a refusal closes it, and the waiting call reports it.
    Declare,
}

/// What amqprs calls for the broker's asynchronous messages on a channel.
pub(super) struct Callbacks {
    pub(super) role: Role,
    pub(super) dead: Arc<watch::Sender<bool>>,
    pub(super) closed: ClosedReason,
    /// Where the replies channel hands the replies the broker gave back.
    pub(super) returns: Option<mpsc::UnboundedSender<Returned>>,
}

/// A reply the broker gave back: its reply queue and its body.
pub(super) type Returned = (String, Vec<u8>);

impl Callbacks {
    pub(super) fn new(role: Role, dead: &Arc<watch::Sender<bool>>) -> Self {
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
pub(super) struct ConnectionEvents {
    pub(super) broker: String,
    pub(super) dead: Arc<watch::Sender<bool>>,
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
pub(super) async fn open_channel(
    conn: &Connection,
    callbacks: Callbacks,
) -> Result<Channel, amqprs::error::Error> {
    let ch = conn.open_channel(None).await?;
    ch.register_callback(callbacks).await?;
    Ok(ch)
}

/// Closes the session's connection (with the broker's handshake when it is still up).
pub(super) async fn close_connection(session: Arc<Session>) {
    let _ = session.conn.clone().close().await;
}

impl Inner {
    /// The live session, waiting up to `wait` while reconnecting.
    pub(super) async fn session_within(&self, wait: Duration) -> Result<Arc<Session>, RpcError> {
        if *self.closed.borrow() {
            return Err(closed(""));
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
            Ok(None) => Err(closed("")),
            Err(_) => Err(AmqpError::NotConnected {
                brokers: self.config.to_string(),
                wait,
            }
            .into()),
        }
    }
}

/// Connects to the first broker that answers, starting at host `start`, and attaches the
/// reply queue (if wanted) and every live listener.
pub(super) async fn connect_session(
    inner: &Arc<Inner>,
    start: usize,
) -> Result<Arc<Session>, AmqpError> {
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
    let kind = match failures.split_first() {
        Some(((_, first), rest)) if rest.iter().all(|(_, f)| f.kind == first.kind) => first.kind,
        _ => ConnectKind::Other,
    };
    Err(AmqpError::Connect {
        brokers,
        detail,
        kind,
    })
}

/// Watches the session; when it dies, fails its calls and reconnects.
pub(super) async fn supervise(weak: Weak<Inner>, mut session: Arc<Session>) {
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

/// A channel of the session with the callbacks of `role`.
pub(super) async fn session_channel(session: &Session, role: Role) -> Result<Channel, AmqpError> {
    let ch = open_channel(&session.conn, Callbacks::new(role, &session.dead)).await;
    opened(session, ch)
}

/// A channel that cannot be opened means a broken (or exhausted) connection: reconnect.
pub(super) fn opened(
    session: &Session,
    ch: Result<Channel, amqprs::error::Error>,
) -> Result<Channel, AmqpError> {
    ch.map_err(|e| {
        session.mark_dead();
        broker_err("open a channel")(e)
    })
}
