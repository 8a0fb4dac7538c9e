//! verso-upgrade: component versions and finalization, so a service turns on an
//! incompatible feature only once every node that must understand it runs the new code
//! and the operator has finalized, can be downgraded until then, and is never left
//! half-finalized. The model is Apache Ozone's zero-downtime upgrade.
//!
//! - [`ComponentVersion`] (declared with [`component_versions!`]): each component's
//!   ordered list of incompatible changes; the newest is the *software version*.
//! - [`VersionManager`]: the *apparent version* (what the component acts as), persisted
//!   in a [`VersionStore`] before it is acted on; [`VersionManager::is_allowed`] and
//!   [`Gate`]s for features; [`UpgradeAction`]s that run at finalization, step by step,
//!   resumable after a crash.
//! - [`RequestValidators`]: refuse a request that uses a new field or value before its
//!   version is finalized.
//! - [`rpc::FinalizationGates`]: a server layer refusing gated RPC methods until
//!   finalized.
//! - [`admin`]: the `upgrade` RPC API (heartbeat, finalize, status) and
//!   [`admin::finalize_and_wait`], what an admin command runs.
//! - [`Coordinator`]: finalization across a server and its clients: one admin command,
//!   the invariant checked first, the server before its clients, fencing, status.
//! - [`FleetStore`]: the fleet record every server of a deployment shares (who runs
//!   which versions, last heard when and by whom), so finalization is decided on the
//!   whole fleet under the version record's lock; [`MemoryFleet`] in memory.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use verso_upgrade::{component_versions, store::FileStore, VersionManager};
//!
//! component_versions! {
//!     /// Conductor versions.
//!     pub enum ConductorVersion: "conductor" {
//!         /// First release.
//!         Initial = 1 => "first release",
//!         /// Agents run object methods on the conductor.
//!         Indirection = 2 => "object indirection",
//!     }
//! }
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("conductor.version");
//! // A record written by the first release: this build starts pre-finalized.
//! std::fs::write(&path, r#"{"format": 1, "component": "conductor", "apparent": 1}"#)?;
//! let versions = VersionManager::<ConductorVersion>::open(FileStore::new(&path)).await?;
//! let indirection = versions.gate(ConductorVersion::Indirection, "object indirection");
//! let refused = indirection.check().err().map(|e| e.feature);
//! assert_eq!(refused.as_deref(), Some("object indirection"));
//! versions.finalize().await?;
//! assert!(indirection.is_open());
//! # Ok(()) }
//! ```

pub mod action;
pub mod admin;
pub mod coordinator;
pub mod error;
pub mod fleet;
pub mod manager;
pub mod rpc;
pub mod store;
pub mod validate;
pub mod version;

pub use action::{ActionError, UpgradeAction};
pub use coordinator::{
    Blocker, Coordinator, DeploymentStatus, Fenced, FinalizeProgress, HeartbeatError,
    HeartbeatReply, Incarnation, MemberReport, MemberStatus,
};
pub use error::{NotSupportedBeforeFinalization, UpgradeError};
pub use fleet::{FleetMember, FleetStore, MemoryFleet, RunOrder};
pub use manager::{
    ComponentStatus, FinalizeOutcome, Gate, Introduced, RetryPolicy, UpgradeState, VersionManager,
    VersionUse,
};
pub use store::{FileStore, TransactionalStore, VersionStore};
pub use validate::RequestValidators;
pub use version::{ComponentVersion, Observed, UnknownVersion};
