//! The conductor started from its configuration: the database made or checked, the
//! Keystone sessions, the broker on Cyborg's exchange, the endpoint served. The binary
//! runs this until a signal; `accel demo --from cyborg` runs it in place of Cyborg's own
//! conductor.

use crate::binds::Nova;
use crate::config::{Config, ServiceAuth};
use crate::db::DbError;
use crate::fpga::{Glance, Programming};
use crate::requests::Agents;
use crate::{service, Conductor, Placement, Reports, Requests, Store};
use accel_cyborg17::keystone::Session;
use accel_cyborg17::service::{connect, ConnectError};
use std::sync::Arc;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcError, ServerHandle};

/// Why the conductor did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database cannot be used (or is not Cyborg 17's).
    #[error("the database: {0}")]
    Database(#[from] DbError),
    /// A Keystone section cannot make a session.
    #[error("[{section}]: {reason}")]
    Session {
        /// `placement` or `nova`.
        section: &'static str,
        /// Why.
        reason: String,
    },
    /// The broker cannot be had.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The topic could not be served.
    #[error("serving cyborg-conductor: {0}")]
    Serve(#[from] RpcError),
}

impl StartError {
    /// The binary's exit status for it: 2 when the configuration or the database is
    /// refused, 1 when a service could not be reached.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Connect(e) => e.exit_code(),
            StartError::Serve(_) => 1,
            _ => 2,
        }
    }
}

/// A started conductor.
pub struct Running {
    server: ServerHandle,
    /// Whether the database was empty and got Cyborg 17's schema.
    pub schema_made: bool,
}

impl Running {
    /// Stops serving once the calls in hand are answered.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

fn session(of: &ServiceAuth, section: &'static str) -> Result<Session, StartError> {
    Session::new(of.auth.clone()).map_err(|e| StartError::Session {
        section,
        reason: e.to_string(),
    })
}

/// Starts the conductor `config` describes, on RabbitMQ (`transport_url`, exchange
/// `cyborg`).
pub async fn start(config: &Config) -> Result<Running, StartError> {
    let transport = connect(&config.transport_url).await?;
    start_with(config, transport).await
}

/// Starts the conductor on `transport`, whose control exchange must be Cyborg's (an
/// embedding's in-process transport, or RabbitMQ); `config`'s `transport_url` is not
/// read.
pub async fn start_with(
    config: &Config,
    transport: Arc<dyn Transport>,
) -> Result<Running, StartError> {
    let store = Store::connect(&config.database_url).await?;
    let schema_made = store.sync().await?;
    for missing in config.without_openstack() {
        tracing::warn!("{missing}");
    }
    let mut requests = Requests::new(
        store.clone(),
        Some(Agents::new(transport.clone(), config.agent_timeout)),
    );
    let reports = match &config.placement {
        Some(auth) => {
            let service_user = session(auth, "placement")?;
            let placement = Placement::new(service_user.clone(), auth.endpoint_override.clone());
            requests = requests.with_programming(Programming {
                glance: Glance::new(service_user, config.glance_endpoint.clone()),
                placement: placement.clone(),
            });
            Reports::new(store, placement)
        }
        None => Reports::without_placement(store),
    };
    if let Some(nova) = &config.nova {
        requests = requests.with_nova(Nova::new(
            session(nova, "nova")?,
            nova.endpoint_override.clone(),
        ));
    }
    let conductor = Conductor { reports, requests };
    let server = service::serve(transport, conductor, service::TOPIC).await?;
    Ok(Running {
        server,
        schema_made,
    })
}
