//! accel's conductor: the one accel component that owns the database. Agents reach
//! persisted state only through it (reports, and object methods it runs for them).
//!
//! - [`census`]: how many of each thing the database holds (checks, the demo).
//! - [`db`]: the schema (sqlx migrations for SQLite and PostgreSQL) and every query:
//!   inventory reports diffed by control-path id, device profiles, accelerator requests
//!   with their lifecycle enforced in the database.
//! - [`handles`]: attach handles as agents see them: managed-mode metadata by
//!   compare-and-swap, NVMe cleanup states.
//! - [`objects`]: the store the attach-handle remotable methods run against when an
//!   agent calls them through object indirection.
//! - [`service`]: accel's `conductor` RPC API served over the database, and the
//!   conductor's calls to agents (`cleanup_device`).
//! - [`nova`]: Nova's `accelerator-request-bound` events, sent in the background with
//!   retries when a bind resolves an instance's last request.
//! - [`runtime`]: the conductor as a library (`start`, `RunningConductor`).
//! - [`lifecycle`]: the accelerator request states and the table of allowed transitions.
//! - [`versions`]: the conductor's component versions (verso-upgrade), kept in the database.
//! - [`cyborg`]: real Cyborg 17 agents' `report_data`, served into the same inventory.
//! - [`cyborg_import`]: `accel db import-cyborg`, a Cyborg 17 database taken over.
//! - [`fpga`]: FPGAs programmed at bind (a profile group's bitstream or function), with
//!   Glance's image metadata, as Cyborg 17 programs them.
//! - [`groups`]: device profile groups, checked and counted as Cyborg 17 does.
//! - [`placement`]: the Placement reconciler (one provider per deployable, under a lease).
//! - [`keystone`]: the service user's Keystone session (re-exported `accel-keystone`).
//! - [`fleet`]: the fleet record (every agent any conductor heard of, its versions, when
//!   and through which conductor) in the database, what finalization is decided on.

pub mod census;
pub mod cyborg;
pub mod cyborg_import;
pub mod db;
pub mod fleet;
pub mod fpga;
pub mod groups;
pub mod handles;
/// The Keystone session (its own crate, shared with the agent, which has no database).
pub use accel_keystone as keystone;
pub mod lifecycle;
pub mod nova;
pub mod objects;
pub mod placement;
pub mod runtime;
pub mod service;
#[cfg(feature = "testing")]
pub mod testing;
pub mod versions;

pub use db::{Db, DbError};
pub use fleet::DbFleetStore;
pub use lifecycle::ArqState;
pub use versions::{DbTransaction, DbVersionStore};
