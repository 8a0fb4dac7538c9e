//! accel's agent. It runs on every host with accelerators: it discovers devices from
//! sysfs and reports them to the conductor, and runs driver work the conductor asks for.
//! [`service`] is the agent's runtime as a library (start, serve the agent API, loop,
//! stop), so one process can run many agents.
//! It never touches the database: this crate does not depend on a database driver, and
//! a test checks its dependency tree (`tests/no_database.rs`).

pub mod cleanup;
pub mod client;
pub mod cyborg;
pub mod discovery;
pub mod fixture;
pub mod fpga;
pub mod report;
pub mod service;
