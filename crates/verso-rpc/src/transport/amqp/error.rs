//! Errors of the AMQP transport: [`AmqpError`] (configuration and connection), the
//! helpers that turn amqprs's errors into it, and the [`RpcError`]s the transport
//! returns at the [`Transport`] boundary.

use super::*;

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
        detail: match lock(&closed).take() {
            Some(reason) => reason,
            None => e.to_string(),
        },
    }
}

pub(super) fn missing_reply_queue(reply_q: &str, msg_id: &str) -> RpcError {
    RpcError::Transport {
        detail: format!(
            "the reply to call {msg_id} was not delivered: its reply queue '{reply_q}' does \
             not exist"
        ),
    }
}

pub(super) fn lost(detail: impl Into<String>) -> RpcError {
    RpcError::Transport {
        detail: detail.into(),
    }
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
