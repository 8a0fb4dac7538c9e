//! Replies and pending calls: the client's reply queue and the calls waiting on it, the
//! server's reply sink with its call-monitor heartbeats, and the retry of replies whose
//! queue is missing.

use super::error::{broker_err, closed, missing_reply_queue, refused, AmqpError};
use super::io::{io_handle, lock, on_io_thread};
use super::publish::{encode, Publish};
use super::session::{session_channel, Returned, Role, Session};
use super::state::Inner;
use super::topology::{declare_on_own_channel, uuid_hex};
use crate::message::{open_envelope, route_reply, Message, Reply, ReplyBody};
use crate::transport::ReplySink;
use crate::RpcError;
use amqprs::channel::{BasicConsumeArguments, Channel, ConsumerMessage, QueueDeclareArguments};
use async_trait::async_trait;
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many abandoned reply queues are remembered (oslo.messaging keeps 200).
pub(super) const OBSOLETE_REPLY_QUEUES: usize = 200;
/// The pause between attempts to deliver a reply whose queue is missing (oslo's 0.25 s).
pub(super) const MISSING_REPLY_QUEUE_PAUSE: Duration = Duration::from_millis(250);

impl Inner {
    /// Publishes a reply as oslo.messaging does, `mandatory`: the broker gives back a
    /// reply whose queue does not exist, and [`watch_returns`] retries it.
    pub(super) async fn publish_reply(
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

    /// Declares and consumes the reply queue on `session`, once. The work runs on the I/O
    /// thread, cell included: a caller that gives up meanwhile leaves it to finish, and
    /// the next caller finds it done (or waits for it) instead of starting a second one.
    pub(super) async fn ensure_reply(
        self: &Arc<Self>,
        session: &Arc<Session>,
    ) -> Result<(), RpcError> {
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
}

/// Retries replies the broker returned because their reply queue did not exist (a caller
/// that is reconnecting), as oslo.messaging does: every 0.25 s until
/// [`AmqpConfig::missing_reply_queue_timeout`] after the first return, then the reply is
/// abandoned and its queue remembered as obsolete (later replies to it are dropped).
/// `returned` is fed by the replies channel's [`Callbacks`].
pub(super) async fn watch_returns(
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
pub(super) fn reply_msg_id(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| open_envelope(b).ok())
        .and_then(|mut m| match m.remove("_msg_id") {
            Some(Value::String(id)) => Some(id),
            _ => None,
        })
        .unwrap_or_default()
}

pub(super) async fn start_reply_consumer(
    inner: &Arc<Inner>,
    session: &Arc<Session>,
) -> Result<(), AmqpError> {
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

pub(super) async fn reply_loop(
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
        // Routed here, read by the waiting call on its own runtime: this thread does
        // every connection's I/O.
        let (msg_id, reply) = match route_reply(&data, &inner.config.limits) {
            Ok(routed) => (routed.msg_id, Ok(routed.body)),
            Err(unreadable) => {
                // A call whose reply cannot be read fails with the reason at once.
                let unreadable = *unreadable;
                tracing::warn!(queue = %inner.reply_q, msg_id = ?unreadable.msg_id,
                    error = %unreadable.error, "refusing an unreadable reply");
                (unreadable.msg_id, Err(unreadable.error))
            }
        };
        let Some(msg_id) = msg_id else {
            tracing::warn!(queue = %inner.reply_q, "dropping a reply without _msg_id");
            continue;
        };
        if let Some(p) = lock(&inner.pending).get(&msg_id) {
            let _ = p.tx.send(reply);
        };
    }
    if let Some(s) = session.upgrade() {
        s.mark_dead();
    }
}

/// Waits for the answer to a call among the messages its reply queue routes to it
/// (`replies`): call-monitor heartbeats (`ending: false`, nothing else) restart the
/// `silent` wait when the call asked for them, an older server's result before its
/// empty `ending: true` is kept for it, and the first message with `ending: true` is the
/// answer.
pub(super) async fn await_reply(
    replies: &mut mpsc::UnboundedReceiver<Result<ReplyBody, RpcError>>,
    silent: Option<(Duration, &str, &str)>,
) -> Result<Reply, RpcError> {
    let mut stash: Option<Message> = None;
    loop {
        let next = match silent {
            Some((after, method, topic)) => tokio::select! {
                r = replies.recv() => r,
                () = tokio::time::sleep(after) => {
                    return Err(RpcError::ServerSilent {
                        method: method.to_owned(),
                        topic: topic.to_owned(),
                        after,
                    });
                }
            },
            None => replies.recv().await,
        };
        // Its transport keys (`_msg_id`, `_unique_id`) may stay: a reply reads only
        // `result` and `failure` (Reply::from_message).
        let msg = next
            .ok_or_else(|| closed(" while waiting for a reply"))??
            .into_message()?;
        let ending = msg.get("ending").and_then(Value::as_bool).unwrap_or(false);
        let has_payload = !msg.get("result").unwrap_or(&Value::Null).is_null()
            || !msg.get("failure").unwrap_or(&Value::Null).is_null();
        if ending {
            let reply = match (has_payload, stash) {
                (false, Some(stash)) => stash,
                _ => msg,
            };
            return Reply::from_message(reply);
        }
        if has_payload {
            // An older server: the result first, then an empty `ending: true`.
            stash = Some(msg);
        }
        // Else a call-monitor heartbeat: the server still works on the call.
    }
}

/// Removes a call's pending entry when the call ends, timed out or not.
pub(super) struct PendingGuard<'a> {
    pub(super) inner: &'a Inner,
    pub(super) msg_id: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.inner.pending).remove(&self.msg_id);
    }
}

/// Sends call-monitor heartbeats (`ending: false`) every `timeout / 2` seconds until the
/// returned sender is dropped (the reply is sent or abandoned).
pub(super) fn start_heartbeat(
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
            let Ok(body) = encode(&m) else { continue };
            let _ = inner.publish(&session, "", &reply_q, body, None).await;
        }
    });
    tx
}

pub(super) struct AmqpReply {
    pub(super) inner: Weak<Inner>,
    pub(super) reply_q: String,
    pub(super) msg_id: String,
    pub(super) _heartbeat: Option<oneshot::Sender<()>>,
}

#[async_trait]
impl ReplySink for AmqpReply {
    async fn send(self: Box<Self>, reply: Reply) -> Result<(), RpcError> {
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| closed(" before the reply was sent"))?;
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
