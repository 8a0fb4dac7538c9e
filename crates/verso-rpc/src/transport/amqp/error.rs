//! Errors of the AMQP transport: [`AmqpError`] (configuration and connection), the
//! helpers that turn amqprs's errors into it, and the [`RpcError`]s the transport
//! returns at the [`Transport`](crate::transport::Transport) boundary.

use crate::RpcError;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Why the broker closed a channel, as its `channel.close` said: what a refused
/// declaration reports (amqprs reports only that the channel closed).
pub(super) type ClosedReason = Arc<Mutex<Option<String>>>;

/// Errors of the AMQP transport's configuration and connection. At the
/// [`Transport`](crate::transport::Transport) boundary they become [`RpcError::Transport`] with the same message.
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
        /// What kind of failure it was: the kind every broker tried failed with, or
        /// [`ConnectKind::Other`] when they failed differently.
        kind: ConnectKind,
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
    /// The transport was closed ([`AmqpTransport::close`](super::AmqpTransport::close), or its
    /// last clone dropped).
    #[error("the transport was closed{when}")]
    Closed {
        /// When it was found closed (` before the reply was sent`), or empty.
        when: &'static str,
    },
    /// No connection came back within the wait while reconnecting; nothing was sent.
    #[error(
        "not connected to RabbitMQ at {brokers} (reconnecting) within {wait:?}; nothing was \
         sent; check the broker"
    )]
    NotConnected {
        /// The brokers, passwords replaced by `***`.
        brokers: String,
        /// How long the caller waited.
        wait: Duration,
    },
    /// Publishing failed: the channel is unusable, and the transport reconnects.
    #[error(
        "publishing to exchange '{exchange}' with routing key '{routing_key}' failed: \
         {detail}; the transport is reconnecting"
    )]
    Publish {
        /// The exchange.
        exchange: String,
        /// The routing key.
        routing_key: String,
        /// amqprs's error.
        detail: String,
    },
    /// A reply was not delivered: its caller's reply queue does not exist (any more).
    #[error(
        "the reply to call {msg_id} was not delivered: its reply queue '{reply_q}' does not \
         exist"
    )]
    MissingReplyQueue {
        /// The caller's reply queue.
        reply_q: String,
        /// The call's `_msg_id`.
        msg_id: String,
    },
    /// The I/O thread's task ended without an answer (it panicked or was cancelled).
    #[error("the AMQP I/O task failed: {detail}")]
    IoTask {
        /// The task's end.
        detail: String,
    },
}

/// What kind of failure a connect error ([`AmqpError::Connect`]) is, for a caller to
/// match on (the message says it in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectKind {
    /// The vhost does not exist (RabbitMQ's 530 NOT_ALLOWED, "vhost ... not found").
    VhostNotFound,
    /// The user may not use the vhost (530 NOT_ALLOWED, "access ... refused for user").
    VhostRefused,
    /// The broker refused the login: a wrong user or password. Either it said so (403
    /// ACCESS_REFUSED), or it reset the connection during the handshake, which is how
    /// RabbitMQ refuses a login to a client that does not ask for the reason (as amqprs
    /// does not); verso takes such a reset as a refused login.
    LoginRefused,
    /// The broker closed the connection for another reason it gave.
    BrokerClosed,
    /// TLS could not be set up with the given files, the handshake failed, or TLS and
    /// plain AMQP ports were mixed up.
    Tls,
    /// No answer within the connect timeout.
    Timeout,
    /// The broker could not be reached, or the connection failed otherwise.
    Other,
}

impl AmqpError {
    /// The kind of a connect error, `None` for other errors.
    pub fn connect_kind(&self) -> Option<ConnectKind> {
        match self {
            AmqpError::Connect { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

impl From<AmqpError> for RpcError {
    /// [`RpcError::Transport`] with the same message, keeping the error as its source.
    fn from(e: AmqpError) -> Self {
        RpcError::transport_caused_by(e)
    }
}

pub(super) fn broker_err(
    action: impl Into<String>,
) -> impl FnOnce(amqprs::error::Error) -> AmqpError {
    let action = action.into();
    move |e| AmqpError::Broker {
        action,
        detail: e.to_string(),
    }
}

/// Like [`broker_err`], with the reason the broker gave when it closed the channel (a
/// refused declaration closes its channel, and amqprs reports only that it closed).
pub(super) fn refused(
    action: impl Into<String>,
    closed: &ClosedReason,
) -> impl FnOnce(amqprs::error::Error) -> AmqpError {
    let action = action.into();
    let closed = closed.clone();
    move |e| AmqpError::Broker {
        action,
        detail: match closed.lock().unwrap_or_else(PoisonError::into_inner).take() {
            Some(reason) => reason,
            None => e.to_string(),
        },
    }
}

pub(super) fn missing_reply_queue(reply_q: &str, msg_id: &str) -> RpcError {
    AmqpError::MissingReplyQueue {
        reply_q: reply_q.to_owned(),
        msg_id: msg_id.to_owned(),
    }
    .into()
}

/// The transport was closed (`when`: ` before the reply was sent`, or empty).
pub(super) fn closed(when: &'static str) -> RpcError {
    AmqpError::Closed { when }.into()
}

/// " at BROKERS" for the connect error, or nothing when no broker was tried or when
/// `detail` names each broker with its own failure already (a URL with several).
pub(super) fn at_brokers(brokers: &str, detail: &str) -> String {
    let listed = brokers
        .split(',')
        .any(|b| detail.starts_with(&format!("{b}: ")));
    if brokers.is_empty() || listed {
        String::new()
    } else {
        format!(" at {brokers}")
    }
}
