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
//! - **Status** is computed on each request from the server's record and the last
//!   heartbeats; nothing is kept per status caller.

use crate::error::UpgradeError;
use crate::manager::{ComponentStatus, FinalizeOutcome, UpgradeState, VersionManager};
use crate::store::Checkpoint;
use crate::version::{ComponentVersion, Observed};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

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
}

/// The server's answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Finalize up to this version now: the server has finalized it.
    pub finalize_to: Option<u32>,
    /// The server's apparent version.
    pub server_apparent: u32,
}

/// A client the server will not work with; the client should exit with this message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{member} on {host} is refused by the {server}: {reason}")]
pub struct Fenced {
    /// The client's id.
    pub member: String,
    /// Its host.
    pub host: String,
    /// The server component.
    pub server: String,
    /// Why, and what to do.
    pub reason: String,
}

/// A component that keeps finalization from starting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    /// The component kind.
    pub component: String,
    /// Its id.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Its software version.
    pub software: u32,
    /// Seconds since its last heartbeat.
    pub last_seen_secs: u64,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for Blocker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} on {} (software {}, last seen {} s ago): {}",
            self.component, self.id, self.host, self.software, self.last_seen_secs, self.reason
        )
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
            "{:<12} {:<20} {:<20} {:>8} {:>8}  {:<14} {:>9}",
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
            writeln!(
                f,
                "{:<12} {:<20} {:<20} {:>8} {:>8}  {:<14} {:>7} s{}",
                self.client_component,
                c.id,
                c.host,
                c.software,
                c.apparent,
                state(c.state),
                c.last_seen_secs,
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

#[derive(Clone, Debug)]
struct Member {
    report: MemberReport,
    seen: Instant,
}

/// The server side of deployment-wide finalization.
#[derive(Debug)]
pub struct Coordinator<V: ComponentVersion> {
    manager: VersionManager<V>,
    client_component: &'static str,
    liveness: Duration,
    members: Mutex<BTreeMap<String, Member>>,
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
    /// `client_component`, each live while heard from within `liveness`.
    pub fn new(
        manager: VersionManager<V>,
        client_component: &'static str,
        liveness: Duration,
    ) -> Self {
        Coordinator {
            manager,
            client_component,
            liveness,
            members: Mutex::new(BTreeMap::new()),
        }
    }

    /// The server's version manager.
    pub fn manager(&self) -> &VersionManager<V> {
        &self.manager
    }

    fn members(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Member>> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// Takes a client's heartbeat: records it, fences it if it must not work with this
    /// server, and tells it to finalize once the server has.
    pub async fn heartbeat(&self, report: MemberReport) -> Result<HeartbeatReply, Fenced> {
        let server_apparent = self.manager.apparent();
        let software = match V::observe(report.software) {
            Ok(Observed::Known(v)) => v,
            Ok(Observed::Future(n)) => {
                return Err(self.fence(
                    &report,
                    format!("its software version {n} is newer than this {} ({}); upgrade the {} first: servers are upgraded before their clients", V::COMPONENT, V::software().number(), V::COMPONENT),
                ))
            }
            Err(e) => return Err(self.fence(&report, e.to_string())),
        };
        if report.apparent > server_apparent.number() {
            return Err(self.fence(
                &report,
                format!(
                    "its apparent version {} is above the {}'s {}; a client never finalizes before its server",
                    report.apparent,
                    V::COMPONENT,
                    server_apparent.number()
                ),
            ));
        }
        if software < server_apparent {
            return Err(self.fence(
                &report,
                format!(
                    "it runs software version {} but the deployment is finalized at {}: upgrade it to the release with {}",
                    software.number(),
                    server_apparent.number(),
                    server_apparent.label()
                ),
            ));
        }
        let finalize_to = (self.server_finalized() && report.apparent < server_apparent.number())
            .then_some(server_apparent.number());
        self.members().insert(
            report.id.clone(),
            Member {
                report,
                seen: Instant::now(),
            },
        );
        if let Err(e) = self.complete_if_done().await {
            tracing::warn!(error = %e, "could not record the end of finalization; retried on the next heartbeat");
        }
        Ok(HeartbeatReply {
            finalize_to,
            server_apparent: server_apparent.number(),
        })
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
    pub fn forget(&self, id: &str) -> bool {
        self.members().remove(id).is_some()
    }

    /// Live clients not on the newest software.
    fn blockers(&self) -> Vec<Blocker> {
        let software = V::software().number();
        self.members()
            .values()
            .filter(|m| m.seen.elapsed() <= self.liveness && m.report.software < software)
            .map(|m| Blocker {
                component: self.client_component.to_owned(),
                id: m.report.id.clone(),
                host: m.report.host.clone(),
                software: m.report.software,
                last_seen_secs: m.seen.elapsed().as_secs(),
                reason: format!(
                    "runs software version {}, not {software}: upgrade it first",
                    m.report.software
                ),
            })
            .collect()
    }

    /// Starts (or continues) finalization. Idempotent: a call while one runs waits for
    /// it and reports progress; a call after it finished reports that.
    ///
    /// It first [refreshes](VersionManager::refresh) the server's record: another server
    /// over the same store may have finalized already.
    pub async fn finalize(&self) -> Result<FinalizeProgress, UpgradeError> {
        self.manager.refresh().await?;
        if self.manager.checkpoint().is_none() {
            if self.status().state == UpgradeState::Finalized {
                return Ok(FinalizeProgress::AlreadyFinalized);
            }
            if self.manager.state() == UpgradeState::PreFinalized {
                let blockers = self.blockers();
                if !blockers.is_empty() {
                    return Err(UpgradeError::Blocked(blockers));
                }
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

    /// Clears the marker once every live client is finalized.
    async fn complete_if_done(&self) -> Result<(), UpgradeError> {
        if self.manager.checkpoint() != Some(Checkpoint::ServerFinalized) {
            return Ok(());
        }
        let software = V::software().number();
        let done = self
            .members()
            .values()
            .filter(|m| m.seen.elapsed() <= self.liveness)
            .all(|m| m.report.apparent >= software);
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
    /// store did; a failed refresh is logged and the status shown as this server has it.
    pub async fn refreshed_status(&self) -> DeploymentStatus {
        if let Err(e) = self.manager.refresh().await {
            tracing::warn!(error = %e, "could not re-read the version record for status");
        }
        self.status()
    }

    /// The deployment's status, computed now.
    pub fn status(&self) -> DeploymentStatus {
        let server = self.manager.status();
        let software = V::software().number();
        let clients: Vec<MemberStatus> = self
            .members()
            .values()
            .map(|m| MemberStatus {
                id: m.report.id.clone(),
                host: m.report.host.clone(),
                software: m.report.software,
                apparent: m.report.apparent,
                state: if m.report.apparent >= software {
                    UpgradeState::Finalized
                } else if self.server_finalized() {
                    UpgradeState::Finalizing
                } else {
                    UpgradeState::PreFinalized
                },
                live: m.seen.elapsed() <= self.liveness,
                last_seen_secs: m.seen.elapsed().as_secs(),
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
        let mut blockers = self.blockers();
        if state == UpgradeState::Finalizing {
            blockers.extend(
                live.iter()
                    .filter(|c| c.state != UpgradeState::Finalized)
                    .map(|c| Blocker {
                        component: self.client_component.to_owned(),
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
        DeploymentStatus {
            state,
            server,
            client_component: self.client_component.to_owned(),
            clients,
            clients_finalized,
            clients_live,
            blockers,
        }
    }
}

impl<V: ComponentVersion> VersionManager<V> {
    /// This client's heartbeat report.
    pub fn report(&self, id: &str, host: &str) -> MemberReport {
        MemberReport {
            id: id.to_owned(),
            host: host.to_owned(),
            software: V::software().number(),
            apparent: self.apparent().number(),
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
