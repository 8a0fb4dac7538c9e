//! Publishing a message with oslo.messaging's properties.

use super::error::AmqpError;
use super::session::Session;
use super::state::Inner;
use super::topology::amqp_name;
use crate::message::envelope_bytes;
use crate::RpcError;
use amqprs::channel::{BasicPublishArguments, Channel};
use amqprs::{BasicProperties, FieldTable};
use std::time::Duration;

/// Where [`Inner::publish_on`] publishes.
pub(super) struct Publish<'a> {
    pub(super) channel: &'a Channel,
    pub(super) mandatory: bool,
    pub(super) exchange: &'a str,
    pub(super) routing_key: &'a str,
    pub(super) expiration: Option<Duration>,
}

impl Inner {
    pub(super) async fn publish(
        &self,
        session: &Session,
        exchange: &str,
        routing_key: &str,
        body: Vec<u8>,
        expiration: Option<Duration>,
    ) -> Result<(), RpcError> {
        let publish = Publish {
            channel: &session.publish,
            mandatory: false,
            exchange,
            routing_key,
            expiration,
        };
        self.publish_bytes(session, publish, body).await
    }

    pub(super) async fn publish_bytes(
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
                Err(AmqpError::Publish {
                    exchange: exchange.to_owned(),
                    routing_key: routing_key.to_owned(),
                    detail: e.to_string(),
                }
                .into())
            }
        }
    }
}

/// The body of a message (a [`crate::message::Message`] or a
/// [`crate::message::RequestBody`]): its `oslo.version` 2.0 envelope.
pub(super) fn encode<M: serde::Serialize + ?Sized>(message: &M) -> Result<Vec<u8>, RpcError> {
    envelope_bytes(message).map_err(|e| RpcError::Serialization {
        detail: format!("message body: {e}"),
    })
}
