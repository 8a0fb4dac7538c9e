//! Starting the API from its configuration: the database checked (never migrated: that
//! is the conductor's), the broker connected on Cyborg's exchange, Keystone's layer
//! built, the listener bound.

use crate::config::ApiConfig;
use crate::http::{Authenticator, Limits, Policy, ServeOptions};
use crate::service::CyborgApi;
use accel_cyborg17::keystone::Session;
use accel_cyborg17::service::{connect, ConnectError};
use accel_cyborg17_conductor::db::{DbError, Store};
use accel_cyborg17_conductor::placement::Placement;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use verso_rpc::transport::Transport;

/// Why the API did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database cannot be used, or is not Cyborg 17's.
    #[error("the database: {0}")]
    Database(#[from] DbError),
    /// A Keystone section cannot make a session or the authentication layer.
    #[error("[{section}]: {reason}")]
    Keystone {
        /// `placement` or `keystone_authtoken`.
        section: &'static str,
        /// Why.
        reason: String,
    },
    /// The broker cannot be had.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The address cannot be listened on.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// `[api] host_ip` and `port`.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl StartError {
    /// The binary's exit status for it: 2 when the configuration or the database is
    /// refused, 1 when a service or the address could not be had.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Connect(e) => e.exit_code(),
            StartError::Listen { .. } => 1,
            _ => 2,
        }
    }
}

/// A started API.
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Stops accepting, finishes the requests under way.
    pub async fn stop(self) -> std::io::Result<()> {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(std::io::Error::other(e)),
        }
    }
}

/// Starts the API `config` describes, reaching the conductor and agents on RabbitMQ
/// (`transport_url`, exchange `cyborg`).
pub async fn start(config: &ApiConfig) -> Result<Running, StartError> {
    let transport = connect(&config.common.transport_url).await?;
    start_with(config, transport).await
}

/// Starts the API reaching the conductor and agents on `transport`, whose control
/// exchange must be Cyborg's (an embedding's in-process transport, or RabbitMQ).
pub async fn start_with(
    config: &ApiConfig,
    transport: Arc<dyn Transport>,
) -> Result<Running, StartError> {
    let store = Store::connect(&config.common.database_url).await?;
    store.check().await?;
    // Without Placement (an all-in-one) device disable and enable are refused, naming it.
    let placement = match &config.common.placement {
        Some(user) => {
            let session = Session::new(user.auth.clone()).map_err(|e| StartError::Keystone {
                section: "placement",
                reason: e.to_string(),
            })?;
            Some(Placement::new(session, user.endpoint_override.clone()))
        }
        None => None,
    };
    let auth = Authenticator::new(config.auth.clone(), Policy::default()).map_err(|e| {
        StartError::Keystone {
            section: "keystone_authtoken",
            reason: e.to_string(),
        }
    })?;
    let service = CyborgApi::new(store, transport, config.common.agent_timeout, placement);
    let router = crate::http::router_with(Arc::new(service), Limits::default(), auth);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| StartError::Listen {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen {
        addr: config.listen,
        source,
    })?;
    let options = ServeOptions {
        public_endpoint: config.public_endpoint.clone(),
        ..ServeOptions::default()
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(crate::http::server::serve(
        listener,
        router,
        options,
        async {
            let _ = stopped.await;
        },
    ));
    Ok(Running { addr, stop, task })
}
