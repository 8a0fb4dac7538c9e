//! What the Rust replacements of Cyborg 17's services (`accel-cyborg17-conductor`,
//! `-api`, `-agent`) share: reaching Cyborg's broker on Cyborg's control exchange, and
//! waiting for the signal to stop.

use crate::rpc::CONTROL_EXCHANGE;
use std::sync::Arc;
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};
use verso_rpc::transport::Transport;

/// Why the broker could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// `transport_url` is not a RabbitMQ URL.
    #[error("[DEFAULT] transport_url: {0}")]
    Url(String),
    /// The broker cannot be reached.
    #[error("RabbitMQ: {0}")]
    Broker(String),
}

impl ConnectError {
    /// A service binary's exit status for it: 2 for a URL refused (the configuration),
    /// 1 for a broker out of reach.
    pub fn exit_code(&self) -> u8 {
        match self {
            ConnectError::Url(_) => 2,
            ConnectError::Broker(_) => 1,
        }
    }
}

/// RabbitMQ at `transport_url` (oslo.messaging's `rabbit://user:pass@host:port/vhost`),
/// on Cyborg's control exchange.
pub async fn connect(transport_url: &str) -> Result<Arc<dyn Transport>, ConnectError> {
    let mut amqp =
        AmqpConfig::from_url(transport_url).map_err(|e| ConnectError::Url(e.to_string()))?;
    amqp.control_exchange = CONTROL_EXCHANGE.to_owned();
    let transport = AmqpTransport::connect_with(amqp)
        .await
        .map_err(|e| ConnectError::Broker(e.to_string()))?;
    Ok(Arc::new(transport))
}

/// Returns at SIGINT or SIGTERM (SIGINT only where SIGTERM cannot be listened to).
pub async fn wait_for_stop() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
