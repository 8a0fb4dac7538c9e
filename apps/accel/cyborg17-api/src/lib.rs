//! OpenStack Cyborg 17's REST API in Rust, on Cyborg 17's own schema and conductor: the
//! API of accel's release N to be, beside `accel-cyborg17-conductor`.
//!
//! It serves Cyborg's v2 API (microversions 2.0 to 2.3: devices with disable and enable,
//! deployables with FPGA programming, attributes, device profiles, accelerator requests
//! with Nova's bind, unbind and deletes) through its HTTP layer ([`http`]: routes,
//! checks, Keystone tokens, Cyborg 17's policy, views) over [`service::CyborgApi`], which reads
//! Cyborg's tables and sends every write Cyborg's API sends to the conductor to
//! `cyborg-conductor` (Cyborg's own `cyborg-conductor` or `accel-cyborg17-conductor`),
//! keeping the writes Cyborg's API makes itself. The binary reads Cyborg's own
//! `cyborg.conf` ([`config`]), so it replaces `cyborg-api` in place.
//!
//! Held to Cyborg 17's own API: `tests/differential.rs` sends the same calls to this API
//! and to Cyborg's (the pinned package's WSGI application) on one database and one
//! conductor and requires the same answers.
//!
//! [`http`] is release N's own copy of the HTTP layer of accel's N+1 API (`accel-api`)
//! as release N uses it: release N depends on no N+1 crate, so its answers do not change
//! when N+1's API does.

pub mod config;
pub mod http;
pub mod rows;
pub mod run;
pub mod service;

pub use http::AuthStrategy;
pub use service::CyborgApi;
