//! Sessions: one connection and its channels, and the callbacks of the broker's
//! asynchronous messages on them. Connecting and reconnecting is `supervisor`'s.

use super::error::{broker_err, AmqpError, ClosedReason};
use super::io::{io_handle, lock, OnIo};
use amqprs::callbacks::{ChannelCallback, ConnectionCallback};
use amqprs::channel::Channel;
use amqprs::connection::Connection;
use amqprs::{Ack, BasicProperties, Cancel, Close, CloseChannel, Nack, Return};
use async_trait::async_trait;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch, OnceCell};

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
