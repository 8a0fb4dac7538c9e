//! accel release N, beside release N+1 (the rest of `apps/accel`), for mixed-version
//! (Grenade-style) tests and the rolling-upgrade demo.
//!
//! Release N is what accel shipped before release N+1: its object versions
//! ([`objects`]), its RPC APIs ([`rpc`]: conductor 1.0, agent 1.0), its component
//! versions ([`AccelVersion`]: only `Initial = 1`), its database schema (migration 1
//! only, [`schema`]), and a conductor ([`conductor`]), an agent ([`agent`]) and a REST
//! API ([`api`]) built on them; [`cli`] runs each as a command.
//!
//! The rule: release N and release N+1 share no Rust type that crosses the wire. They
//! meet only in the wire form (oslo.versionedobjects primitives, backported by manifest,
//! and oslo.messaging RPC messages) and in the database (release N's schema is the first
//! migration of release N+1's, taken from the same files). What is not part of the wire
//! is reused: the agent's sysfs parsing (`accel_agent::discovery`).

pub mod agent;
pub mod api;
pub mod cli;
pub mod conductor;
pub mod objects;
pub mod rpc;
pub mod schema;

pub use objects::AccelVersion;
