//! Listeners: a server's queues, declared and consumed on every session, the loop that
//! hands requests to the server, and the `_unique_id` window that drops redelivered
//! duplicates.

use super::error::{broker_err, refused, AmqpError};
use super::io::lock;
use super::io::{io_handle, on_io_thread};
use super::reply::{start_heartbeat, AmqpReply};
use super::session::{session_channel, Role, Session};
use super::state::{Inner, ListenerState};
use super::topology::{amqp_name, declare_on_own_channel, Kind};
use crate::message::{read_body, MessageLimits, Request};
use crate::transport::{Incoming, Undecoded};
use amqprs::channel::{
    BasicAckArguments, BasicConsumeArguments, BasicQosArguments, Channel, ConsumerMessage,
    ExchangeDeclareArguments, QueueBindArguments, QueueDeclareArguments,
};
use futures::StreamExt;
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Re-subscribes a listener that could not be attached after a reconnect, with a growing
/// delay, for as long as its session lives (a new session attaches it anyway).
pub(super) async fn retry_attach(
    weak: Weak<Inner>,
    session: Weak<Session>,
    state: Arc<ListenerState>,
) {
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

/// Declares the queues of `state`'s target on `session` and consumes them (once per
/// session), on the I/O thread.
pub(super) async fn attach(
    inner: &Arc<Inner>,
    session: &Arc<Session>,
    state: &Arc<ListenerState>,
) -> Result<(), AmqpError> {
    let (inner, session, state) = (inner.clone(), session.clone(), state.clone());
    on_io_thread(async move { attach_here(&inner, &session, &state).await }).await
}

pub(super) async fn attach_here(
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
    let prefetch = u16::try_from(crate::transport::LISTENER_BUFFER).unwrap_or(u16::MAX);
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

pub(super) async fn listen_loop(
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
                // The server stopped: unsubscribe, once the requests it took are
                // acknowledged (closing first would send them to another consumer).
                close_after_acks(&state, channel).await;
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
        // dropped by the `_unique_id` check (and acknowledged then). Decoded by the
        // server (Listener::next, on its runtime), not on this thread, which does every
        // connection's I/O.
        let ack = BasicAckArguments::new(deliver.delivery_tag(), false);
        let (weak, taken, ch) = (weak.clone(), state.clone(), channel.clone());
        let undecoded: Undecoded = Box::new(move || {
            let acks = taken.acks.clone();
            let acknowledge = move || {
                acks.spawn_on(
                    async move {
                        if let Err(e) = ch.basic_ack(ack).await {
                            tracing::warn!(error = %e, "acknowledging a request failed");
                        }
                    },
                    io_handle(),
                );
            };
            match read_request(&weak, &taken, &limits, &data) {
                Some(incoming) => Some(incoming.with_ack(acknowledge)),
                None => {
                    acknowledge();
                    None
                }
            }
        });
        // Waits while the server's buffer is full (backpressure).
        if state.tx.send(undecoded).await.is_err() {
            // The server stopped: the requests it did not take go back.
            close_after_acks(&state, channel).await;
            return;
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

/// Closes a stopped server's channel after the acknowledgements of the requests it took
/// are queued on it (amqprs writes a channel's frames in order, so they reach the broker
/// before the close): the requests it never took are redelivered to another consumer,
/// and none it took and ran is.
async fn close_after_acks(state: &ListenerState, channel: Channel) {
    state.acks.close();
    // Bounded: a connection that stalled fails its acks anyway (the broker then
    // redelivers, and a reconnect would find the channel gone).
    if tokio::time::timeout(ACK_FLUSH, state.acks.wait())
        .await
        .is_err()
    {
        tracing::warn!(target = %state.target, pending = state.acks.len(),
            "closing a stopped server's channel before every acknowledgement was queued");
    }
    let _ = channel.close().await;
}

/// How long a stopping listener waits for its acknowledgements to be queued.
const ACK_FLUSH: Duration = Duration::from_secs(5);

/// The received request, or why it cannot be read: a call whose reply address can be
/// found is answered with the reason, anything else goes to the server as a failed
/// cast, for it to log.
pub(super) fn read_request(
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
    // Seconds since the Unix epoch; anything else (an oslo caller sends none) is no
    // deadline rather than a refusal.
    let deadline = msg
        .remove("_deadline")
        .and_then(|t| t.as_f64())
        .filter(|t| t.is_finite() && *t > 0.0)
        .and_then(|t| std::time::UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(t).ok()?));
    match (msg_id, reply_q) {
        (Some(Value::String(msg_id)), Some(Value::String(reply_q))) => {
            let heartbeat = monitor
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(|t| start_heartbeat(weak.clone(), reply_q.clone(), msg_id.clone(), t));
            Some(
                Incoming::call(
                    Request::from_message(msg),
                    Box::new(AmqpReply {
                        inner: weak.clone(),
                        reply_q,
                        msg_id,
                        _heartbeat: heartbeat,
                    }),
                )
                .with_deadline(deadline),
            )
        }
        _ => Some(Incoming::cast(Request::from_message(msg))),
    }
}
