//! [`transport_from_url`]: the transport an oslo.messaging `transport_url` names. It names
//! every transport, so it sits above them all.

#[cfg(feature = "amqp")]
use super::amqp;
use super::memory::MemoryTransport;
#[cfg(not(feature = "amqp"))]
use super::redact;
use super::Transport;
use crate::RpcError;
use std::sync::Arc;

/// A transport for an oslo.messaging `transport_url`: `memory://` for the in-process
/// [`MemoryTransport`], `rabbit://user:pass@host:port/vhost` (several hosts
/// comma-separated, `?ssl=true` for TLS) for `AmqpTransport` on RabbitMQ (feature `amqp`).
/// `control_exchange` overrides oslo.messaging's default `openstack` (RabbitMQ only).
///
/// ```
/// use verso_rpc::transport::transport_from_url;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), verso_rpc::RpcError> {
/// let t = transport_from_url("memory://", None).await?;
/// # let _ = t;
/// let Err(err) = transport_from_url("http://x/", None).await else { panic!("not RabbitMQ") };
/// assert!(err.to_string().contains("rabbit://"));
/// # Ok(()) }
/// ```
pub async fn transport_from_url(
    url: &str,
    control_exchange: Option<&str>,
) -> Result<Arc<dyn Transport>, RpcError> {
    if url == "memory://" || url.starts_with("memory:") {
        return Ok(Arc::new(MemoryTransport::new()));
    }
    #[cfg(feature = "amqp")]
    {
        let mut config = amqp::AmqpConfig::from_url(url)?;
        if let Some(x) = control_exchange {
            config = config.with_control_exchange(x);
        }
        Ok(Arc::new(amqp::AmqpTransport::connect_with(config).await?))
    }
    #[cfg(not(feature = "amqp"))]
    {
        let _ = control_exchange;
        Err(RpcError::transport(format!(
            "transport_url '{}': this build of verso-rpc has no RabbitMQ transport (cargo \
             feature `amqp`); use memory://, or build with the feature for rabbit:// URLs",
            redact(url)
        )))
    }
}
