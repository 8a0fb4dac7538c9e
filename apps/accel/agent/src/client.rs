//! The agent's two periodic calls to the conductor, shared by the agent
//! ([`crate::service`]) and by simulations of many agents in one process
//! (`accel bench fleet`), so a simulated agent sends what a real one sends:
//!
//! - [`heartbeat`]: the agent's versions to the conductor's `upgrade` API, applying a
//!   `finalize_to` from the reply to its version record;
//! - [`Reporter`]: the inventory to the conductor API. When the inventory is the one
//!   it last reported in full and the `[upgrade_levels] conductor` cap allows 1.2, it
//!   sends only its digest (`report_unchanged`); the conductor answers `None` when the
//!   host's rows may differ from that report (another report, a release N conductor's
//!   write, a restored database), and the full report follows.

use accel_objects::rpc::{
    report_digest, ReportData, ReportSummary, ReportUnchanged, REPORT_UNCHANGED_VERSION,
};
use accel_objects::{AccelVersion, DriverDeviceList};
use std::sync::{Mutex, PoisonError};
use verso::RequestContext;
use verso_rpc::{RpcClient, RpcError};
use verso_upgrade::admin::Heartbeat;
use verso_upgrade::{Fenced, FinalizeOutcome, UpgradeError, VersionManager};

/// Why a heartbeat failed.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The conductor refuses this agent: the reason says what to do.
    #[error("refused by the conductor: {}", .0.reason)]
    Fenced(Fenced),
    /// The reply's `finalize_to` could not be applied to the version record.
    #[error("agent version record: {0}")]
    Versions(#[source] UpgradeError),
    /// The call failed (no answer, a transport error, a remote error).
    #[error("heartbeat: {0}")]
    Rpc(#[source] RpcError),
}

/// The typed `Fenced` inside a remote error, if that is what it is.
pub fn fenced(e: &RpcError) -> Option<Fenced> {
    match e {
        RpcError::Remote(r) => r.downcast::<Fenced>(),
        _ => None,
    }
}

/// One heartbeat of the agent on `host` with its version record `versions`, through
/// `upgrade` (a client of the `upgrade` API on `accel-upgrade`); returns what a
/// `finalize_to` in the reply did, if there was one.
pub async fn heartbeat(
    upgrade: &RpcClient,
    versions: &VersionManager<AccelVersion>,
    host: &str,
) -> Result<Option<FinalizeOutcome>, HeartbeatError> {
    let ctx = RequestContext::new(format!("req-heartbeat-{host}"));
    let report = versions.report(host, host);
    match upgrade.call_method(&ctx, Heartbeat { report }).await {
        Ok(reply) => versions
            .apply(&reply)
            .await
            .map_err(HeartbeatError::Versions),
        Err(e) => Err(match fenced(&e) {
            Some(f) => HeartbeatError::Fenced(f),
            None => HeartbeatError::Rpc(e),
        }),
    }
}

/// How a report went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
    /// Only the digest was sent: the conductor holds exactly this inventory.
    Unchanged(ReportSummary),
    /// The whole inventory was sent and diffed.
    Full(ReportSummary),
}

impl Reported {
    /// What the report changed.
    pub fn summary(&self) -> &ReportSummary {
        match self {
            Reported::Unchanged(s) | Reported::Full(s) => s,
        }
    }
}

/// Reports one host's inventory to the conductor, by digest when it is unchanged.
#[derive(Debug)]
pub struct Reporter {
    host: String,
    conductor: RpcClient,
    /// The digest of the last inventory the conductor took in full.
    last: Mutex<Option<String>>,
}

impl Reporter {
    /// Reports of `host` through `conductor` (a client of the conductor API, with the
    /// operator's cap).
    pub fn new(host: impl Into<String>, conductor: RpcClient) -> Self {
        Reporter {
            host: host.into(),
            conductor,
            last: Mutex::new(None),
        }
    }

    /// Whether unchanged inventories go by digest (the cap allows conductor API 1.2).
    pub fn sends_digests(&self) -> bool {
        self.conductor.can_send_version(REPORT_UNCHANGED_VERSION)
    }

    /// Reports `devices`: by digest when they are what was last reported in full and
    /// the cap allows it, in full otherwise (and when the conductor asks for it).
    pub async fn report(&self, devices: &DriverDeviceList) -> Result<Reported, RpcError> {
        let digest = report_digest(devices);
        let last = self
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if last.as_deref() == Some(digest.as_str()) && self.sends_digests() {
            let ctx = RequestContext::new(format!("req-report-{}", self.host));
            let known = self
                .conductor
                .call_method(
                    &ctx,
                    ReportUnchanged {
                        hostname: self.host.clone(),
                        digest: digest.clone(),
                    },
                )
                .await?;
            if let Some(summary) = known {
                return Ok(Reported::Unchanged(summary));
            }
            tracing::debug!(host = %self.host, "the conductor asked for the full inventory");
        }
        let ctx = RequestContext::new(format!("req-report-{}", self.host));
        let summary = self
            .conductor
            .call_method(
                &ctx,
                ReportData {
                    hostname: self.host.clone(),
                    devices: devices.clone(),
                },
            )
            .await?;
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(digest);
        Ok(Reported::Full(summary))
    }
}
