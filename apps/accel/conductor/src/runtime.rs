//! The conductor as a library: [`start`] serves accel's `conductor` API (with object
//! indirection for the attach-handle methods) and the `upgrade` API over a database and
//! a transport, so the `accel` binary, the demo and the tests start it the same way.

use crate::db::{Db, DbError, Release};
use crate::objects;
use crate::service::{endpoint_over, AgentNotifier, ReleasePolicy, Shared};
use crate::{DbFleetStore, DbVersionStore};
use accel_objects::rpc::{CONDUCTOR_TOPIC, UPGRADE_TOPIC};
use accel_objects::AccelVersion;
use std::sync::Arc;
use std::time::Duration;
use verso::Version;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcError, RpcServer, ServerHandle, Target};
use verso_upgrade::{ComponentVersion, Coordinator, UpgradeError, VersionManager};

/// How long an agent counts as live after it was last heard of (a heartbeat, or a
/// report of an agent that sends no heartbeat): while live, an agent on older software
/// blocks finalization. The default of `[conductor] agent_liveness`: three of the
/// agents' default 60 s intervals, so one lost heartbeat does not let finalization
/// through.
pub const AGENT_LIVENESS: Duration = Duration::from_secs(180);

/// How long a stopping conductor waits for the calls it took ([`RunningConductor::stop_within`]).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a running conductor re-reads its version record
/// ([`VersionManager::refresh`]): when another conductor on the same database finalizes
/// (the operator's `finalize` reaches one of them), this one's gates open and its
/// coordinator tells its agents within this interval, without a restart.
pub const VERSION_REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// What [`start_with`] takes beyond [`start`]'s arguments.
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// How often the version record is re-read ([`VERSION_REFRESH_INTERVAL`]).
    pub version_refresh: Duration,
    /// How long a silent agent still counts ([`AGENT_LIVENESS`]).
    pub agent_liveness: Duration,
    /// This conductor's name in the fleet record's `heard_by` (default: host name and
    /// process id, [`conductor_id`]).
    pub conductor_id: Option<String>,
    /// The apparent version a database without a version record starts at. Default:
    /// decided by the database under the version-record lock
    /// ([`crate::DbVersionStore::creating`]): release N ([`AccelVersion::Initial`]) on one
    /// holding Cyborg's rows (a Cyborg deployment taken over: its hosts are release N
    /// until replaced), this build's (a fresh install) otherwise.
    pub fresh_at: Option<AccelVersion>,
    /// Nova's `accelerator-request-bound` events (`[nova]`); unset: Nova is not told.
    pub nova: Option<crate::nova::Notifier>,
    /// Agents on Cyborg's wire (`[cyborg] serve_agents`): a transport on Cyborg's
    /// control exchange and `[upgrade_levels] cyborg_agent`, for their
    /// `cleanup_device`; unset: only accel's agent API is told.
    pub cyborg_agents: Option<CyborgAgents>,
    /// Glance, where the bitstreams of FPGAs programmed at bind are read from
    /// (`[glance]`): without it a bind whose profile group names a bitstream or a
    /// function is refused.
    pub glance: Option<crate::fpga::Glance>,
}

/// The `[upgrade_levels]` option capping the conductor's casts of Cyborg's agent API
/// ([`CyborgAgents::cap`]).
pub const CYBORG_AGENT_CAP: &str = "cyborg_agent";

/// How the conductor reaches agents on Cyborg's wire ([`StartOptions::cyborg_agents`]).
#[derive(Clone)]
pub struct CyborgAgents {
    /// A transport on Cyborg's control exchange.
    pub transport: Arc<dyn Transport>,
    /// `[upgrade_levels] cyborg_agent`.
    pub cap: Option<Version>,
}

impl std::fmt::Debug for CyborgAgents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CyborgAgents")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            version_refresh: VERSION_REFRESH_INTERVAL,
            agent_liveness: AGENT_LIVENESS,
            conductor_id: None,
            fresh_at: None,
            nova: None,
            cyborg_agents: None,
            glance: None,
        }
    }
}

/// This process's name as a conductor: `HOST:PID`.
pub fn conductor_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

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
    refresher: Refresher,
    // Behind an `Arc`: the handle is moved around whole, the parts are read once.
    shared: Arc<Shared>,
}

impl RunningConductor {
    /// What its conductor API's methods run on (database, release policy, agents, fleet
    /// record, Nova), for Cyborg's conductor API beside it
    /// ([`crate::cyborg::serve_with`]).
    pub fn shared(&self) -> Shared {
        Shared::clone(&self.shared)
    }

    /// Stops the version-record refresh and both servers, waiting as long as the calls
    /// they took need.
    pub async fn stop(self) {
        self.refresher.stop().await;
        // All at once: each stops taking calls before any waits for its running ones.
        let mut stopping = tokio::task::JoinSet::new();
        for server in self.servers {
            stopping.spawn(server.stop());
        }
        while stopping.join_next().await.is_some() {}
    }

    /// Stops gracefully within `limit`: every server stops taking calls at once (the
    /// broker gives the rest to the other conductors), then the calls already taken run
    /// to the end and are answered. `false` when `limit` passed first: the calls still
    /// running are abandoned, and their callers learn it from their call monitor or
    /// timeout. Close the transport afterwards, so the replies reach the broker.
    pub async fn stop_within(self, limit: Duration) -> bool {
        let finished = tokio::time::timeout(limit, self.stop()).await.is_ok();
        if !finished {
            tracing::warn!(
                limit_secs = limit.as_secs(),
                "the conductor stopped before every call it took was answered"
            );
        }
        finished
    }
}

/// The task re-reading the version record; ended by [`Refresher::stop`], or when dropped
/// (a conductor dropped without `stop`).
struct Refresher(Option<tokio::task::JoinHandle<()>>);

impl Refresher {
    /// Every `every`, takes a finalization another conductor on the same database did,
    /// and completes one this conductor started once every live agent finalized (its
    /// agents may heartbeat to the other conductors, which do not hold its marker).
    /// About four times per write interval it also learns what the other conductors
    /// wrote to the fleet record ([`DbFleetStore::learn`]), so that heartbeats they
    /// recorded are not written again here.
    fn spawn(
        coordinator: Arc<Coordinator<AccelVersion>>,
        fleet: Arc<DbFleetStore>,
        every: Duration,
    ) -> Refresher {
        Refresher(Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is immediate: `start` has just read the record.
            tick.tick().await;
            let mut failing: Option<String> = None;
            let learn_every = fleet.write_interval() / 4;
            let mut learned_at: Option<tokio::time::Instant> = None;
            loop {
                tick.tick().await;
                if learned_at.is_none_or(|t| t.elapsed() >= learn_every) {
                    learned_at = Some(tokio::time::Instant::now());
                    // Only a saving: a failure leaves heartbeats written as before.
                    if let Err(e) = fleet.learn().await {
                        tracing::debug!(error = %e, "could not read the fleet record's recent rows");
                    }
                }
                // An advance is logged by the manager.
                let done = match coordinator.manager().refresh().await {
                    Ok(_) => coordinator.complete_if_done().await,
                    Err(e) => Err(e),
                };
                match done {
                    Ok(()) => {
                        if failing.take().is_some() {
                            tracing::info!("the version record can be read again");
                        }
                    }
                    Err(e) => {
                        let why = e.to_string();
                        // Once per distinct failure, not every few seconds.
                        if failing.as_deref() != Some(why.as_str()) {
                            tracing::warn!(error = %why, "cannot re-read the version record; retrying");
                            failing = Some(why);
                        }
                    }
                }
            }
        })))
    }

    async fn stop(mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
            // Cancelled (the expected outcome) or already ended: either way it is over.
            let _ = task.await;
        }
    }
}

impl Drop for Refresher {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// Starts a conductor on `db` (migrated) over `transport`. `agent_cap` is
/// `[upgrade_levels] agent`: `cleanup_device` is sent to agents only when it allows 1.1.
///
/// Interrupted binds are marked failed; the component-version record is opened from the
/// database; the NVMe cleanup on release and unmanaged PCI handles are gated on
/// `AccelVersion::DriverFeatures` being finalized. While it runs, the record is re-read
/// every [`VERSION_REFRESH_INTERVAL`], so a finalization by another conductor on the same
/// database reaches this one too.
pub async fn start(
    db: Db,
    transport: Arc<dyn Transport>,
    agent_cap: Option<Version>,
) -> Result<RunningConductor, ConductorStartError> {
    start_with(db, transport, agent_cap, StartOptions::default()).await
}

/// [`start`] with [`StartOptions`] (tests refresh the version record more often).
pub async fn start_with(
    db: Db,
    transport: Arc<dyn Transport>,
    agent_cap: Option<Version>,
    options: StartOptions,
) -> Result<RunningConductor, ConductorStartError> {
    let recovered = db
        .recover_interrupted_binds(Db::INTERRUPTED_BIND_LEASE)
        .await?;
    if recovered > 0 {
        tracing::warn!(
            recovered,
            "binds interrupted by a restart marked BindFailed"
        );
    }
    // Over the database as a transactional store: every record write is a locked
    // read-modify-write, so conductors sharing the database cannot undo each other's.
    // A database without a record gets it from the store, decided under the lock that
    // `accel db import-cyborg` takes too (`DbVersionStore::creating`).
    let versions = VersionManager::<AccelVersion>::builder_tx(DbVersionStore::creating(
        db.clone(),
        options.fresh_at,
    ))
    .open()
    .await?;
    let cleanup = versions.gate(AccelVersion::DriverFeatures, "NVMe secure cleanup");
    // Registered so `status` lists it; AttachHandle.update_managed's body checks it.
    let _unmanaged = versions.gate(
        AccelVersion::DriverFeatures,
        accel_objects::UNMANAGED_FEATURE,
    );
    let state = objects::state(db.clone(), versions.clone());
    // The fleet record is the database's: every conductor on it decides finalization on
    // every agent any of them heard.
    // A heartbeat repeating what was written is written again only after a quarter of
    // the liveness: a live agent's row stays well inside it (see `fleet`).
    let fleet = Arc::new(
        DbFleetStore::new(db.clone(), AccelVersion::COMPONENT)
            .with_write_interval(options.agent_liveness / 4),
    );
    let coordinator = Arc::new(
        Coordinator::new(versions.clone(), "agent", options.agent_liveness).with_fleet(
            fleet.clone(),
            options.conductor_id.clone().unwrap_or_else(conductor_id),
        ),
    );
    coordinator.resume().await?;
    let release: ReleasePolicy = Arc::new(move || {
        if cleanup.is_open() {
            Release::CleanSsd
        } else {
            Release::Immediate
        }
    });
    let mut agents = AgentNotifier::new(transport.clone(), agent_cap);
    if let Some(cyborg) = options.cyborg_agents.clone() {
        agents = agents.with_cyborg(cyborg.transport, cyborg.cap);
    }
    let shared = Shared {
        db,
        release,
        agents: Some(agents),
        witness: Some(coordinator.clone()),
        nova: options.nova.clone(),
        glance: options.glance.clone(),
    };
    let conductor = RpcServer::new(transport.clone(), Target::new(CONDUCTOR_TOPIC))
        .endpoint(endpoint_over(
            shared.clone(),
            accel_objects::registry(),
            move |ctx| state.attach(ctx),
        ))?
        .start()
        .await?;
    let upgrade = RpcServer::new(transport, Target::new(UPGRADE_TOPIC))
        .endpoint(verso_upgrade::admin::endpoint(coordinator.clone()))?
        .start()
        .await?;
    let refresher = Refresher::spawn(coordinator.clone(), fleet, options.version_refresh);
    Ok(RunningConductor {
        versions,
        coordinator,
        servers: vec![conductor, upgrade],
        refresher,
        shared: Arc::new(shared),
    })
}
