//! verso: versioned objects for services that upgrade one node at a time.
//!
//! (crate docs are filled in as the modules land)

pub mod context;
pub mod version;

pub use context::RequestContext;
pub use version::{Version, VersionError};
