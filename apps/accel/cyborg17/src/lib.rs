//! OpenStack Cyborg 17's wire contracts (openstack-cyborg 17.0.0), declared with verso:
//! the object classes its services exchange ([`objects`]) and its conductor and agent
//! RPC APIs ([`rpc`]).
//!
//! accel's release N is to be Cyborg 17 on the wire and in the database, and its
//! release N+1 Cyborg 17 plus the seed spec, each change a version bump from these. This
//! crate is the fixed point of that plan: every class here has the version, the fields
//! (names, types, nullability, defaults) and therefore the OVO fingerprint that Cyborg
//! 17 declares, and every RPC method the name, version and argument names Cyborg's
//! `rpcapi.py` sends. `tests/cyborg.rs` checks both against the installed Python
//! package itself (the fingerprints through oslo.versionedobjects' own
//! `ObjectVersionChecker` over Cyborg's registry), and `objects.lock` beside this crate
//! pins them for the day the Python package is not at hand.
//!
//! [`objects`] and [`rpc`] do not behave: Cyborg 17 has no remotable methods, so these are
//! data contracts. Its serial namespace is `cyborg_object` (its primitives' keys read
//! `cyborg_object.name`, ...), its project namespace `cyborg`.
//!
//! With feature `keystone`, module `keystone` is release N's own Keystone session and
//! `cyborg.conf` reader, which its three services share (a copy of N+1's
//! `accel-keystone`: release N depends on no N+1 crate). Without it this crate is
//! declarations only, as N+1's crates that use them take it.
//!
//! Release N is frozen: this crate's own files (not its tests or its Python test
//! peers) are hashed in `FROZEN.sha256` with the other three crates of Cyborg 17 in
//! Rust (`tests/frozen.rs` says how to re-freeze on purpose). Release N+1's side of
//! Cyborg's wire, the seed spec's version bumps and object indirection, is
//! `accel_objects::cyborg`, which only adds to these classes and APIs.

#[cfg(feature = "keystone")]
pub mod keystone;
pub mod objects;
pub mod rpc;
pub mod schema;
pub mod service;
#[cfg(feature = "testing")]
pub mod testing;

pub use objects::registry;
