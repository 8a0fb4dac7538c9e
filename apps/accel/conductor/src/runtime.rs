//! The conductor as a library: [`start`] serves accel's `conductor` API (with object
//! indirection for the attach-handle methods) and the `upgrade` API over a database and
//! a transport, so the `accel` binary, the demo and the tests start it the same way.

use crate::db::{Db, DbError, Release};
use crate::objects;
use crate::service::{endpoint_with_agents, AgentNotifier, ReleasePolicy};
use crate::DbVersionStore;
use accel_objects::rpc::{CONDUCTOR_TOPIC, UPGRADE_TOPIC};
use accel_objects::AccelVersion;
use std::sync::Arc;
use std::time::Duration;
use verso::Version;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcError, RpcServer, ServerHandle, Target};
use verso_upgrade::{ComponentVersion, Coordinator, UpgradeError, VersionManager};

/// How long an agent counts as live after its last heartbeat.
pub const AGENT_LIVENESS: Duration = Duration::from_secs(180);

/// Why the conductor did not start.
#[derive(Debug, thiserror::Error)]
pub enum ConductorStartError {
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The conductor's version record refuses this build.
    #[error(transparent)]
    Versions(#[from] UpgradeError),
    /// A server could not start.
    #[error("cannot serve on the transport: {0}")]
    Serve(#[from] RpcError),
}

/// A running conductor.
pub struct RunningConductor {
    /// Its component versions (finalization, gates).
    pub versions: VersionManager<AccelVersion>,
    /// The upgrade coordinator its `upgrade` API serves (heartbeats, finalize, status).
    pub coordinator: Arc<Coordinator<AccelVersion>>,
    servers: Vec<ServerHandle>,
}

impl RunningConductor {
    /// Stops both servers.
    pub async fn stop(self) {
        for s in self.servers {
            s.stop().await;
        }
    }
}

/// Starts a conductor on `db` (migrated) over `transport`. `agent_cap` is
/// `[upgrade_levels] agent`: `cleanup_device` is sent to agents only when it allows 1.1.
///
/// Interrupted binds are marked failed; the component-version record is opened from the
/// database; the NVMe cleanup on release and unmanaged PCI handles are gated on
/// `AccelVersion::DriverFeatures` being finalized.
pub async fn start(
    db: Db,
    transport: Arc<dyn Transport>,
    agent_cap: Option<Version>,
) -> Result<RunningConductor, ConductorStartError> {
    let recovered = db.recover_interrupted_binds().await?;
    if recovered > 0 {
        tracing::warn!(
            recovered,
            "binds interrupted by a restart marked BindFailed"
        );
    }
    let versions = VersionManager::<AccelVersion>::open(DbVersionStore::new(
        db.clone(),
        AccelVersion::COMPONENT,
    ))
    .await?;
    let cleanup = versions.gate(AccelVersion::DriverFeatures, "NVMe secure cleanup");
    // Registered so `status` lists it; AttachHandle.update_managed's body checks it.
    let _unmanaged = versions.gate(
        AccelVersion::DriverFeatures,
        accel_objects::UNMANAGED_FEATURE,
    );
    let state = objects::state(db.clone(), versions.clone());
    let coordinator = Arc::new(Coordinator::new(versions.clone(), "agent", AGENT_LIVENESS));
    coordinator.resume().await?;
    let release: ReleasePolicy = Arc::new(move || {
        if cleanup.is_open() {
            Release::CleanSsd
        } else {
            Release::Immediate
        }
    });
    let agents = AgentNotifier::new(transport.clone(), agent_cap);
    let conductor = RpcServer::new(transport.clone(), Target::new(CONDUCTOR_TOPIC))
        .endpoint(endpoint_with_agents(
            db,
            accel_objects::registry(),
            release,
            Some(agents),
            move |ctx| state.attach(ctx),
        ))?
        .start()
        .await?;
    let upgrade = RpcServer::new(transport, Target::new(UPGRADE_TOPIC))
        .endpoint(verso_upgrade::admin::endpoint(coordinator.clone()))?
        .start()
        .await?;
    Ok(RunningConductor {
        versions,
        coordinator,
        servers: vec![conductor, upgrade],
    })
}
