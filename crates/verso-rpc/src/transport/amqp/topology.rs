//! Topology: the exchanges and queues verso declares, the names AMQP can carry (and the
//! ids in them), and declarations on a channel of their own (a refusal closes its
//! channel).

use super::error::{refused, AmqpError, ClosedReason};
use super::io::{lock, on_io_thread};
use super::session::{open_channel, opened, Callbacks, Role, Session};
use super::state::Inner;
use crate::{RpcError, Target};
use amqprs::channel::{Channel, ExchangeDeclareArguments};
use amqprs::{FieldTable, FieldValue};
use std::sync::Arc;

/// The exchange types verso declares.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    Topic,
    Fanout,
}

impl Kind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Kind::Topic => "topic",
            Kind::Fanout => "fanout",
        }
    }
}

/// Refuses a name AMQP cannot carry (more than 255 bytes), before amqprs sees it.
pub(super) fn amqp_name(what: &'static str, name: &str) -> Result<(), AmqpError> {
    if name.len() > 255 {
        return Err(AmqpError::NameTooLong {
            what,
            name: name.to_owned(),
            len: name.len(),
        });
    }
    Ok(())
}

impl Inner {
    pub(super) async fn declare_exchange(
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

    pub(super) fn queue_args(&self) -> FieldTable {
        let mut args = FieldTable::new();
        let ms = i32::try_from(self.config.transient_queues_ttl.as_millis()).unwrap_or(i32::MAX);
        if let Ok(key) = "x-expires".try_into() {
            args.insert(key, FieldValue::I(ms));
        }
        args
    }
}

/// Runs `declare` on a channel of its own, given where the broker's reason lands if it
/// refuses a declaration (a refusal closes the channel it is on, and the session's
/// channels must stay open), then closes that channel. A failed declaration counts
/// towards [`Session::refused_channel`].
pub(super) async fn declare_on_own_channel<T, F, Fut>(
    session: &Session,
    declare: F,
) -> Result<T, AmqpError>
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

pub(super) fn routing_key(target: &Target) -> String {
    match &target.server {
        Some(s) => format!("{}.{s}", target.topic),
        None => target.topic.clone(),
    }
}

/// A fresh id in the form oslo.messaging writes them (32 hex digits): queue name suffixes,
/// `_msg_id`, `_unique_id`.
pub(super) fn uuid_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
