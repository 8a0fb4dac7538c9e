//! The errors of this crate.

use crate::store::StoreError;
use crate::version::UnknownVersion;
use serde::{Deserialize, Serialize};

/// A request or a write that needs a version that is not finalized yet (Ozone's
/// `DisallowedUntilLayoutVersion`). Serializable, so it crosses the wire as itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{feature} is not supported before {component} version {required} ({required_name}) is finalized; the apparent version is {apparent}: finalize the upgrade first")]
pub struct NotSupportedBeforeFinalization {
    /// The component whose version gates it.
    pub component: String,
    /// What was refused.
    pub feature: String,
    /// The version it needs.
    pub required: u32,
    /// That version's name.
    pub required_name: String,
    /// The component's apparent version when it was refused.
    pub apparent: u32,
}

/// What can go wrong opening a component's versions or finalizing it.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    /// The version store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The record names a version inside the known range that does not exist.
    #[error(transparent)]
    Unknown(#[from] UnknownVersion),
    /// The record belongs to another component.
    #[error("the version record belongs to component {found:?}, not {expected:?}: check the path of the version file")]
    WrongComponent {
        /// This component.
        expected: &'static str,
        /// The record's.
        found: String,
    },
    /// The apparent version on disk is above this build's software version: newer software
    /// finalized it, and this build cannot act as that version.
    #[error("{component}: the apparent version on disk is {apparent}, above this build's software version {software}; the component was finalized by newer software and cannot be downgraded past that: install release with {component} version {apparent} or later")]
    DowngradeAfterFinalization {
        /// The component.
        component: &'static str,
        /// The persisted apparent version.
        apparent: u32,
        /// This build's software version.
        software: u32,
    },
    /// A finalization to a version above this build's was under way.
    #[error("{component}: a finalization to version {target} was started by newer software; this build (software version {software}) cannot continue it: install the newer release again and let the finalization finish")]
    DowngradeDuringFinalization {
        /// The component.
        component: &'static str,
        /// The finalization's target.
        target: u32,
        /// This build's software version.
        software: u32,
    },
    /// The persisted data is older than the oldest version this build can upgrade from.
    #[error("{component}: the apparent version on disk is {apparent}, older than {min_supported}, the oldest this build can upgrade from: upgrade through an intermediate release first")]
    TooOld {
        /// The component.
        component: &'static str,
        /// The persisted apparent version.
        apparent: u32,
        /// The oldest version this build supports.
        min_supported: u32,
    },
    /// An upgrade action failed for good: finalization stopped at it.
    #[error("{component}: upgrade action {action} (version {version}, step {step}) failed: {reason}; fix the cause and finalize again")]
    ActionFailed {
        /// The component.
        component: &'static str,
        /// The version the action belongs to.
        version: u32,
        /// The action.
        action: String,
        /// The step.
        step: String,
        /// The error.
        reason: String,
    },
    /// An upgrade action has a transactional step, but the manager's store is not a
    /// transactional store of the type the step was written for: its data and its
    /// completion could not be committed together.
    #[error("{component}: upgrade action {action} (version {version}) has step {step} that runs in a transaction of {wanted}, but the version manager was built over {store}: build it with VersionManager::builder_tx over a {wanted}")]
    TransactionalStepWithoutStore {
        /// The component.
        component: &'static str,
        /// The version the action belongs to.
        version: u32,
        /// The action.
        action: String,
        /// The step.
        step: String,
        /// The store type the step needs.
        wanted: &'static str,
        /// What the manager has instead.
        store: &'static str,
    },
    /// Finalization cannot start: components that must run the newest software do not.
    #[error("finalization refused: {} component(s) do not run the newest software: {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Blocked(Vec<Blocker>),
    /// A peer this component must not work with (fencing).
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

/// A client the server will not work with; the client should exit with this message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{member} on {host} is fenced by {server}'s server: {reason}")]
pub struct Fenced {
    /// The client's id.
    pub member: String,
    /// Its host.
    pub host: String,
    /// The component whose server fenced it (`accel`, say).
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
