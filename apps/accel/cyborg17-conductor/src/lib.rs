//! OpenStack Cyborg 17's conductor, in Rust, on Cyborg 17's own database schema: what
//! accel's release N is becoming (issue 25: release N *is* Cyborg 17 on the wire and in
//! the database, so a Cyborg deployment moves to accel node by node).
//!
//! - [`db::Store`]: Cyborg's tables on SQLite or MySQL/MariaDB, made from the schema
//!   `accel-cyborg17` declares ([`accel_cyborg17::schema`]) and stamped with Cyborg's
//!   alembic head, so Cyborg's own `cyborg-dbsync` and objects take the database as
//!   theirs, and this conductor takes over one a real Cyborg 17 made.
//! - [`report::Reports`]: `report_data`, Cyborg's report diff step for step (devices by
//!   control path, deployables by name, attributes by key, handles by attach info), with
//!   its Placement calls ([`placement::Placement`]).
//! - [`requests::Requests`]: device profiles and accelerator requests for Cyborg's API
//!   (`device_profile_create`/`delete`, `arq_create`, `arq_delete_by_uuid`,
//!   `arq_delete_by_instance_uuid`, and `arq_apply_patch`: binds and unbinds, mediated
//!   devices through the host's agent, FPGAs programmed with Glance's bitstreams, Nova
//!   told as Cyborg tells it).
//! - [`service`]: the conductor API 1.0 on `cyborg-conductor`, exchange `cyborg`;
//!   `accel-cyborg17-conductor --config-file cyborg.conf` runs it from Cyborg's own
//!   configuration file ([`config`]).
//!
//! `tests/differential.rs` holds it to Cyborg's own conductor: the same reports, one
//! applied by Cyborg 17's `ConductorManager` (the Python package) and one by this crate,
//! leave the two databases equal through Cyborg's own objects and Placement the same.
//!
//! Binds are in [`binds`], FPGA programming at bind in [`fpga`]. Where this conductor
//! differs from Cyborg 17, on purpose, is listed in docs/cyborg-compatibility.md.

pub mod binds;
pub mod config;
pub mod db;
pub mod fpga;
pub mod placement;
pub mod report;
pub mod requests;
pub mod run;
pub mod service;

pub use db::Store;
pub use placement::Placement;
pub use report::Reports;
pub use requests::Requests;
pub use service::Conductor;
