//! Finalization across a deployment: a server (the conductor) and its clients (agents)
//! that share one version enum, as Ozone's SCM and datanodes share `HDDSVersion`.
//!
//! - **Heartbeats.** Each client reports its id, host, software and apparent version
//!   ([`MemberReport`]) through whatever RPC the service has; the [`Coordinator`] answers
//!   with a [`HeartbeatReply`] or refuses the client ([`Fenced`]).
//! - **Finalize.** One admin call ([`Coordinator::finalize`]), idempotent. Before
//!   anything is persisted it checks that every live client runs the newest software and
//!   refuses with the [`Blocker`]s otherwise. Then the server finalizes itself (its
//!   upgrade actions, checkpoint `ServerFinalized`), and only then are clients told to
//!   finalize, in their heartbeat replies, until every live client has; a client that
//!   comes back later is told then. Server before client, always.
//! - **Fencing.** The server refuses a client whose software is newer than its own (the
//!   server is upgraded first), a client whose apparent version is above the server's,
//!   and, once the server is finalized past what a client's software can act as, a
//!   client still running that older software.
//! - **The fleet record** ([`FleetStore`]): every heartbeat is recorded there by
//!   whichever server received it; servers of one deployment share it (accel: a table
//!   in the conductors' database), so finalize decides on the whole fleet, under the
//!   version record's lock, and a client on older software heartbeating meanwhile is
//!   counted or fenced, never missed.
//! - **Status** is computed on each request from the server's record and the fleet
//!   record; nothing is kept per status caller.

// Defined with the error that carries them (so `error` imports nothing from here);
// they belong to the coordinator's API.
use crate::error::UpgradeError;
pub use crate::error::{Blocker, Fenced};
pub use crate::fleet::Incarnation;
use crate::fleet::{Admission, Admit, FleetMember, FleetStore, Heard, MemoryFleet};
use crate::manager::{ComponentStatus, FinalizeOutcome, UpgradeState, VersionManager};
use crate::store::{Checkpoint, Finalizing, PersistedState};
use crate::version::{ComponentVersion, Observed};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// What a client sends with each heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberReport {
    /// Unique per client (the agent's host name is a good one).
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its software version's number.
    pub software: u32,
    /// Its apparent version's number.
    pub apparent: u32,
    /// Which run of the client sent it ([`VersionManager::report`] sets it). Absent
    /// from older clients, whose reports are recorded as they arrive; a server that
    /// does not know the field ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Incarnation>,
}

impl MemberReport {
    /// A report without an [`Incarnation`] (a probe, or a client that does not count
    /// its runs).
    pub fn new(
        id: impl Into<String>,
        host: impl Into<String>,
        software: u32,
        apparent: u32,
    ) -> Self {
        MemberReport {
            id: id.into(),
            host: host.into(),
            software,
            apparent,
            incarnation: None,
        }
    }
}

/// The server's answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Finalize up to this version now: the server has finalized it.
    pub finalize_to: Option<u32>,
    /// The server's apparent version.
    pub server_apparent: u32,
}

/// Why a heartbeat (or another sign of life, [`Coordinator::seen`]) was not taken.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The client must stop, for the reason given.
    #[error(transparent)]
    Fenced(#[from] Fenced),
    /// The fleet record could not be written. The heartbeat is not counted, so it is not
    /// accepted either (a finalization could otherwise miss the client); the client keeps
    /// running and retries.
    #[error("the heartbeat could not be recorded (retry): {0}")]
    Unrecorded(#[source] UpgradeError),
}

impl HeartbeatError {
    /// The fencing, if that is what it is.
    pub fn into_fenced(self) -> Result<Fenced, HeartbeatError> {
        match self {
            HeartbeatError::Fenced(f) => Ok(f),
            other => Err(other),
        }
    }
}

/// One client as the server last heard of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// Its id.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Its software version.
    pub software: u32,
    /// Its apparent version.
    pub apparent: u32,
    /// Derived: finalized when its apparent version is the newest software's.
    pub state: UpgradeState,
    /// Heard from within the liveness window.
    pub live: bool,
    /// Seconds since its last heartbeat.
    pub last_seen_secs: u64,
    /// Its component kind (`agent`).
    #[serde(default)]
    pub component: String,
    /// The server that heard it last.
    #[serde(default)]
    pub heard_by: String,
    /// False when it is known only from its reports (it sends no heartbeat).
    #[serde(default = "yes")]
    pub heartbeats: bool,
}

fn yes() -> bool {
    true
}

/// The deployment's status: the JSON form is documented in the operator guide and kept
/// stable (fields are only ever added).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentStatus {
    /// The deployment's state: pre-finalized until finalize is called, finalizing until
    /// the server and every live client are finalized, then finalized.
    pub state: UpgradeState,
    /// The server.
    pub server: ComponentStatus,
    /// The client kind (`agent`).
    pub client_component: String,
    /// Every client heard of, sorted by id.
    pub clients: Vec<MemberStatus>,
    /// Live clients finalized.
    pub clients_finalized: usize,
    /// Live clients.
    pub clients_live: usize,
    /// What keeps finalization from starting or completing.
    pub blockers: Vec<Blocker>,
}

impl std::fmt::Display for DeploymentStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = |s: UpgradeState| match s {
            UpgradeState::PreFinalized => "pre-finalized",
            UpgradeState::Finalizing => "finalizing",
            UpgradeState::Finalized => "finalized",
        };
        writeln!(f, "deployment: {}", state(self.state))?;
        writeln!(
            f,
            "{:<12} {:<20} {:<20} {:>8} {:>8}  {:<14} {:>9}  heard by",
            "component", "id", "host", "software", "apparent", "state", "last seen"
        )?;
        writeln!(
            f,
            "{:<12} {:<20} {:<20} {:>8} {:>8}  {:<14} {:>9}",
            self.server.component,
            "-",
            "-",
            self.server.software,
            self.server.apparent,
            state(self.server.state),
            "-"
        )?;
        for c in &self.clients {
            let component = if c.component.is_empty() {
                &self.client_component
            } else {
                &c.component
            };
            writeln!(
                f,
                "{:<12} {:<20} {:<20} {:>8} {:>8}  {:<14} {:>7} s  {}{}{}",
                component,
                c.id,
                c.host,
                c.software,
                c.apparent,
                state(c.state),
                c.last_seen_secs,
                c.heard_by,
                if c.heartbeats { "" } else { " (reports only)" },
                if c.live { "" } else { " (not live)" }
            )?;
        }
        writeln!(
            f,
            "{}s finalized: {}/{}",
            self.client_component, self.clients_finalized, self.clients_live
        )?;
        if let Some(failed) = &self.server.failed {
            writeln!(f, "failed: {failed}")?;
        }
        if let Some(retrying) = &self.server.retrying {
            writeln!(f, "retrying: {retrying}")?;
        }
        for b in &self.blockers {
            writeln!(f, "blocker: {b}")?;
        }
        Ok(())
    }
}

/// The server side of deployment-wide finalization.
pub struct Coordinator<V: ComponentVersion> {
    manager: VersionManager<V>,
    client_component: &'static str,
    liveness: Duration,
    fleet: Arc<dyn FleetStore>,
    server_id: String,
    /// Heartbeats (shared) against the finalize decision (exclusive) in this process:
    /// what keeps them apart when the stores do not (a single server over a file).
    admission: tokio::sync::RwLock<()>,
    /// The live members the last completion check found not finalized (`None`: no
    /// check yet). A check reads the whole fleet record; a finalized member's heartbeat
    /// only takes itself off this list, and checks again once the list is empty.
    unfinalized: std::sync::Mutex<Option<std::collections::HashSet<String>>>,
}

impl<V: ComponentVersion> std::fmt::Debug for Coordinator<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("manager", &self.manager)
            .field("client_component", &self.client_component)
            .field("liveness", &self.liveness)
            .field("server_id", &self.server_id)
            .finish()
    }
}

/// What [`Coordinator::finalize`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizeProgress {
    /// Everything was already finalized.
    AlreadyFinalized,
    /// The server is finalized; clients are being finalized through their heartbeats.
    ServerFinalized,
    /// The server and every live client are finalized.
    Complete,
}

impl<V: ComponentVersion> Coordinator<V> {
    /// The coordinator of a server whose versions `manager` holds, for clients of kind
    /// `client_component`, each live while heard from within `liveness`. Its fleet
    /// record is its own, in memory ([`MemoryFleet`]): enough for a deployment with one
    /// server; several servers share one with [`with_fleet`](Self::with_fleet).
    pub fn new(
        manager: VersionManager<V>,
        client_component: &'static str,
        liveness: Duration,
    ) -> Self {
        Coordinator {
            manager,
            client_component,
            liveness,
            fleet: Arc::new(MemoryFleet::new()),
            server_id: V::COMPONENT.to_owned(),
            admission: tokio::sync::RwLock::new(()),
            unfinalized: std::sync::Mutex::new(None),
        }
    }

    /// Keeps the fleet record in `fleet`, shared with the deployment's other servers
    /// (each over the same version store), this server recorded as `server_id` in what
    /// it hears. Finalization is then decided on every member any of them heard.
    pub fn with_fleet(mut self, fleet: Arc<dyn FleetStore>, server_id: impl Into<String>) -> Self {
        self.fleet = fleet;
        self.server_id = server_id.into();
        self
    }

    /// The server's version manager.
    pub fn manager(&self) -> &VersionManager<V> {
        &self.manager
    }

    /// The fleet record.
    pub fn fleet(&self) -> &Arc<dyn FleetStore> {
        &self.fleet
    }

    /// How long a silent member still counts (and blocks finalization).
    pub fn liveness(&self) -> Duration {
        self.liveness
    }

    fn fence(&self, r: &MemberReport, reason: String) -> Fenced {
        tracing::warn!(client = %r.id, host = %r.host, %reason, "client fenced");
        Fenced {
            member: r.id.clone(),
            host: r.host.clone(),
            server: V::COMPONENT.to_owned(),
            reason,
        }
    }

    /// Takes a client's heartbeat: records it in the fleet record, fences it if it must
    /// not work with this server, and tells it to finalize once the server has.
    ///
    /// A client on older software is recorded atomically against finalize's decision
    /// (see [`FleetStore::record`]): if a finalization by any server sharing the fleet
    /// record has started, it is fenced rather than recorded.
    pub async fn heartbeat(&self, report: MemberReport) -> Result<HeartbeatReply, HeartbeatError> {
        let mut server_apparent = self.manager.apparent();
        if report.apparent > server_apparent.number() {
            // Another server of the same version record may have finalized since this
            // one last read it (servers re-read it periodically), and finalized this
            // client through its heartbeat: read the record again before refusing it.
            if let Err(e) = self.manager.refresh().await {
                tracing::warn!(error = %e, "could not re-read the version record for a client ahead of this server");
            }
            server_apparent = self.manager.apparent();
        }
        let software = match V::observe(report.software) {
            Ok(Observed::Known(v)) => v,
            Ok(Observed::Future(n)) => {
                return Err(HeartbeatError::Fenced(self.fence(
                    &report,
                    format!("its software version {n} is newer than this {} ({}); upgrade the {} first: servers are upgraded before their clients", V::COMPONENT, V::software().number(), V::COMPONENT),
                )))
            }
            Err(e) => return Err(HeartbeatError::Fenced(self.fence(&report, e.to_string()))),
        };
        if report.apparent > server_apparent.number() {
            return Err(HeartbeatError::Fenced(self.fence(
                &report,
                format!(
                    "its apparent version {} is above the {}'s {}; a client never finalizes before its server",
                    report.apparent,
                    V::COMPONENT,
                    server_apparent.number()
                ),
            )));
        }
        if software < server_apparent {
            return Err(HeartbeatError::Fenced(self.fence(
                &report,
                finalized_reason(
                    software.number(),
                    server_apparent.number(),
                    server_apparent.label(),
                ),
            )));
        }
        let heard = Heard {
            component: self.client_component,
            id: &report.id,
            host: &report.host,
            software: report.software,
            apparent: report.apparent,
            heard_by: &self.server_id,
            heartbeats: true,
            incarnation: report.incarnation,
            liveness: self.liveness,
        };
        let recorded = {
            let _not_deciding = self.admission.read().await;
            let check: Option<&Admit> = (software < V::software()).then_some(&admit_older);
            self.fleet.record(&heard, check).await
        };
        match recorded {
            // A later report of the same run is recorded already: this one changes
            // nothing, and is answered as it.
            Ok(Admission::Recorded | Admission::Superseded) => {}
            Ok(Admission::Refused(reason)) => {
                return Err(HeartbeatError::Fenced(self.fence(&report, reason)))
            }
            Err(e) => {
                tracing::warn!(client = %report.id, error = %e, "cannot record a heartbeat");
                return Err(HeartbeatError::Unrecorded(e.into()));
            }
        }
        let finalize_to = (self.server_finalized() && report.apparent < server_apparent.number())
            .then_some(server_apparent.number());
        // Only a finalized member can be the last one finalization waits for; the others
        // would make the check (a read of the whole fleet record) fail anyway.
        let may_complete = report.apparent >= V::software().number();
        if !may_complete {
            return Ok(HeartbeatReply {
                finalize_to,
                server_apparent: server_apparent.number(),
            });
        }
        if self.completion_check_due(&report.id) {
            if let Err(e) = self.complete_if_done().await {
                tracing::warn!(error = %e, "could not record the end of finalization; retried on the next heartbeat");
            }
        }
        Ok(HeartbeatReply {
            finalize_to,
            server_apparent: server_apparent.number(),
        })
    }

    /// Takes a sign of life of a client that sends no heartbeat (accel: the inventory
    /// report of an agent of a release without heartbeats, Cyborg 17's): it is recorded
    /// in the fleet record as running the oldest software unless its heartbeats are live
    /// (then they stand: [`Heard::heartbeats`]), so while live it blocks finalization;
    /// once a finalization started it is refused, as a heartbeat on that software would
    /// be. A client whose heartbeats stopped while its reports go on has gone back to a
    /// release without heartbeats: once its last heartbeat is older than the liveness,
    /// it is that release again.
    pub async fn seen(&self, id: &str, host: &str) -> Result<(), HeartbeatError> {
        let oldest = V::oldest().number();
        let report = MemberReport::new(id, host, oldest, oldest);
        let heard = Heard {
            component: self.client_component,
            id,
            host,
            software: oldest,
            apparent: oldest,
            heard_by: &self.server_id,
            heartbeats: false,
            incarnation: None,
            liveness: self.liveness,
        };
        let recorded = {
            let _not_deciding = self.admission.read().await;
            self.fleet.record(&heard, Some(&admit_older)).await
        };
        match recorded {
            Ok(Admission::Recorded | Admission::Superseded) => Ok(()),
            Ok(Admission::Refused(reason)) => {
                Err(HeartbeatError::Fenced(self.fence(&report, reason)))
            }
            Err(e) => {
                tracing::warn!(client = %id, error = %e, "cannot record a client's report in the fleet record");
                Err(HeartbeatError::Unrecorded(e.into()))
            }
        }
    }

    /// Whether the heartbeat of finalized member `id` checks for the end of a
    /// finalization this server started: when no check was made yet, or when `id` was
    /// the last member the previous check found not finalized. With thousands of
    /// members finalizing at once that is a few reads of the fleet record, not one per
    /// heartbeat; members finalizing through other servers are seen by the next full
    /// check (status, `finalize`, the service's periodic call).
    fn completion_check_due(&self, id: &str) -> bool {
        if self.manager.checkpoint() != Some(Checkpoint::ServerFinalized) {
            return false;
        }
        let mut unfinalized = self
            .unfinalized
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match unfinalized.as_mut() {
            None => true,
            Some(left) => {
                left.remove(id);
                left.is_empty()
            }
        }
    }

    /// True once the server's own finalization is done (clients may follow).
    fn server_finalized(&self) -> bool {
        match self.manager.checkpoint() {
            Some(Checkpoint::ServerFinalized) => true,
            Some(Checkpoint::Started) => false,
            None => self.manager.state() == UpgradeState::Finalized,
        }
    }

    /// Forgets a client that left the deployment for good (decommissioned).
    pub async fn forget(&self, id: &str) -> Result<bool, UpgradeError> {
        Ok(self.fleet.forget(self.client_component, id).await?)
    }

    /// Starts (or continues) finalization. Idempotent: a call while one runs waits for
    /// it and reports progress; a call after it finished reports that.
    ///
    /// It first [refreshes](VersionManager::refresh) the server's record: another server
    /// over the same store may have finalized already. The decision to start is taken on
    /// the fleet record, read under the version record's lock, and the marker is written
    /// in the same step: no server starts while any live member anywhere runs older
    /// software.
    pub async fn finalize(&self) -> Result<FinalizeProgress, UpgradeError> {
        self.manager.refresh().await?;
        if self.manager.checkpoint().is_none() {
            if self.manager.state() == UpgradeState::Finalized
                && self.status().await?.state == UpgradeState::Finalized
            {
                return Ok(FinalizeProgress::AlreadyFinalized);
            }
            if self.manager.state() == UpgradeState::PreFinalized {
                self.start().await?;
            }
        }
        self.finalize_server().await?;
        self.complete_if_done().await?;
        Ok(if self.manager.checkpoint().is_none() {
            FinalizeProgress::Complete
        } else {
            FinalizeProgress::ServerFinalized
        })
    }

    /// The decision: under the version record's lock, with the fleet read in the same
    /// transaction, the marker is written only if no live member runs older software.
    /// A record another server already marked (or finalized) is taken as it is.
    async fn start(&self) -> Result<(), UpgradeError> {
        let _one = self.manager_lock().await;
        let _no_heartbeats = self.admission.write().await;
        let software = V::software().number();
        let found = std::sync::Mutex::new(Vec::new());
        let decide = |stored: &PersistedState, members: &[FleetMember]| {
            if stored.finalizing.is_some() || stored.apparent >= software {
                return Some(stored.clone());
            }
            let blockers = self.blockers(members);
            if !blockers.is_empty() {
                *found.lock().unwrap_or_else(PoisonError::into_inner) = blockers;
                return None;
            }
            let mut next = stored.clone();
            next.finalizing = Some(Finalizing {
                checkpoint: Checkpoint::Started,
                target: software,
                steps_done: Vec::new(),
                failed: None,
            });
            Some(next)
        };
        if self
            .manager
            .persist_with_fleet(&*self.fleet, &decide)
            .await?
        {
            Ok(())
        } else {
            Err(UpgradeError::Blocked(
                found.into_inner().unwrap_or_else(PoisonError::into_inner),
            ))
        }
    }

    /// Live members not on the newest software.
    fn blockers(&self, members: &[FleetMember]) -> Vec<Blocker> {
        let software = V::software().number();
        members
            .iter()
            .filter(|m| m.is_live(self.liveness) && m.software < software)
            .map(|m| Blocker {
                component: m.component.clone(),
                id: m.id.clone(),
                host: m.host.clone(),
                software: m.software,
                last_seen_secs: m.age.as_secs(),
                reason: if m.heartbeats {
                    format!(
                        "runs software version {}, not {software}: upgrade it first",
                        m.software
                    )
                } else {
                    format!(
                        "known only from its reports, which a release sending no heartbeat makes (taken as software version {}): upgrade it first",
                        m.software
                    )
                },
            })
            .collect()
    }

    /// Resumes at start what a crash interrupted (a no-op without a marker).
    pub async fn resume(&self) -> Result<(), UpgradeError> {
        if self.manager.checkpoint() == Some(Checkpoint::Started) {
            self.finalize_server().await?;
        }
        Ok(())
    }

    async fn finalize_server(&self) -> Result<(), UpgradeError> {
        let _one = self.manager_lock().await;
        if self.manager.checkpoint() == Some(Checkpoint::ServerFinalized) {
            return Ok(());
        }
        self.manager
            .run_to(V::software(), Checkpoint::Started)
            .await?;
        self.manager
            .persist(|r| {
                if let Some(f) = &mut r.finalizing {
                    f.checkpoint = Checkpoint::ServerFinalized;
                }
            })
            .await?;
        tracing::info!(
            server = V::COMPONENT,
            "server finalized; clients follow through their heartbeats"
        );
        Ok(())
    }

    async fn manager_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.manager.finalizing_lock().await
    }

    /// Clears the marker once every live member is finalized. Checked on each heartbeat
    /// and finalize call; a server whose members may heartbeat to other servers of the
    /// deployment (which do not hold its marker) calls it periodically too.
    pub async fn complete_if_done(&self) -> Result<(), UpgradeError> {
        if self.manager.checkpoint() != Some(Checkpoint::ServerFinalized) {
            return Ok(());
        }
        let software = V::software().number();
        let left: std::collections::HashSet<String> = self
            .fleet
            .members()
            .await?
            .into_iter()
            .filter(|m| m.is_live(self.liveness) && m.apparent < software)
            .map(|m| m.id)
            .collect();
        let done = left.is_empty();
        *self
            .unfinalized
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (!done).then_some(left);
        if done {
            let _one = self.manager_lock().await;
            if self.manager.checkpoint() == Some(Checkpoint::ServerFinalized) {
                self.manager.persist(|r| r.finalizing = None).await?;
                tracing::info!(server = V::COMPONENT, "finalization complete");
            }
        }
        Ok(())
    }

    /// [`status`](Self::status) after [refreshing](VersionManager::refresh) the server's
    /// record (one store read), so it shows a finalization another server over the same
    /// store did, and after completing one this server started if every live member has
    /// finalized; a failed refresh is logged and the status shown as this server has it.
    pub async fn refreshed_status(&self) -> Result<DeploymentStatus, UpgradeError> {
        if let Err(e) = self.manager.refresh().await {
            tracing::warn!(error = %e, "could not re-read the version record for status");
        }
        // A finalization this server started may be complete by now through heartbeats
        // other servers took: status says so at once, not at the next periodic check.
        if let Err(e) = self.complete_if_done().await {
            tracing::warn!(error = %e, "could not record the end of finalization");
        }
        self.status().await
    }

    /// The deployment's status, computed now from the server's record and the fleet
    /// record (every member any server sharing it heard).
    pub async fn status(&self) -> Result<DeploymentStatus, UpgradeError> {
        let members = self.fleet.members().await?;
        let server = self.manager.status();
        let software = V::software().number();
        let clients: Vec<MemberStatus> = members
            .iter()
            .map(|m| MemberStatus {
                id: m.id.clone(),
                host: m.host.clone(),
                software: m.software,
                apparent: m.apparent,
                state: if m.apparent >= software {
                    UpgradeState::Finalized
                } else if self.server_finalized() {
                    UpgradeState::Finalizing
                } else {
                    UpgradeState::PreFinalized
                },
                live: m.is_live(self.liveness),
                last_seen_secs: m.age.as_secs(),
                component: m.component.clone(),
                heard_by: m.heard_by.clone(),
                heartbeats: m.heartbeats,
            })
            .collect();
        let live: Vec<&MemberStatus> = clients.iter().filter(|c| c.live).collect();
        let clients_finalized = live
            .iter()
            .filter(|c| c.state == UpgradeState::Finalized)
            .count();
        let clients_live = live.len();
        let state = if server.state == UpgradeState::Finalized && clients_finalized == clients_live
        {
            UpgradeState::Finalized
        } else if server.checkpoint.is_some() || server.state == UpgradeState::Finalized {
            UpgradeState::Finalizing
        } else {
            UpgradeState::PreFinalized
        };
        let mut blockers = self.blockers(&members);
        if state == UpgradeState::Finalizing {
            blockers.extend(
                live.iter()
                    .filter(|c| c.state != UpgradeState::Finalized)
                    .map(|c| Blocker {
                        component: c.component.clone(),
                        id: c.id.clone(),
                        host: c.host.clone(),
                        software: c.software,
                        last_seen_secs: c.last_seen_secs,
                        reason: format!(
                            "apparent version {} not yet finalized to {software}",
                            c.apparent
                        ),
                    }),
            );
        }
        Ok(DeploymentStatus {
            state,
            server,
            client_component: self.client_component.to_owned(),
            clients,
            clients_finalized,
            clients_live,
            blockers,
        })
    }
}

/// Why a member on `software` is fenced once the deployment is finalized at `apparent`.
fn finalized_reason(software: u32, apparent: u32, label: String) -> String {
    format!(
        "it runs software version {software} but the deployment is finalized at {apparent}: upgrade it to the release with {label}"
    )
}

/// The admission check of a member on older `software`, on the stored version record:
/// refused once a finalization past it started or finished (any server's).
fn admit_older(stored: Option<&PersistedState>, software: u32) -> Result<(), String> {
    let Some(stored) = stored else { return Ok(()) };
    if stored.apparent > software {
        return Err(format!(
            "it runs software version {software} but the deployment is finalized at {}: upgrade it",
            stored.apparent
        ));
    }
    match &stored.finalizing {
        Some(f) if f.target > software => Err(format!(
            "it runs software version {software} and a finalization to {} has started (decided without it: it was not live then): upgrade it",
            f.target
        )),
        _ => Ok(()),
    }
}

impl<V: ComponentVersion> VersionManager<V> {
    /// This client's heartbeat report, numbered in this process's run
    /// ([`Incarnation`]).
    pub fn report(&self, id: &str, host: &str) -> MemberReport {
        MemberReport {
            incarnation: Some(self.next_incarnation()),
            ..MemberReport::new(id, host, V::software().number(), self.apparent().number())
        }
    }

    /// Acts on the server's reply: finalizes to what the server has finalized.
    pub async fn apply(
        &self,
        reply: &HeartbeatReply,
    ) -> Result<Option<FinalizeOutcome>, UpgradeError> {
        match reply.finalize_to.map(V::observe) {
            None => Ok(None),
            Some(Ok(Observed::Known(v))) => self.finalize_to(v).await.map(Some),
            // The server finalized past what this build knows: finalize as far as this
            // build can; the server fences it on the next heartbeat if that is not enough.
            Some(Ok(Observed::Future(_))) => self.finalize().await.map(Some),
            Some(Err(e)) => Err(e.into()),
        }
    }
}
