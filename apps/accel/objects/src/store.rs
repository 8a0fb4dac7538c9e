//! Where the attach-handle methods' bodies read and write: a [`HandleStore`] that only the
//! conductor has (it implements it over its database), attached to the conductor's
//! request contexts as a [`ConductorState`] by the `prepare` function of its endpoint.
//!
//! An agent's contexts carry an indirection API instead, so the bodies never run there;
//! a service with neither gets the typed `NoStore` error, never a silent local read.
//! This crate stays free of a database: the trait speaks in objects and [`CallError`]s.

use crate::{AccelVersion, AttachHandle};
use std::sync::Arc;
use verso::indirection::{BoxFuture, CallError};
use verso::RequestContext;
use verso_upgrade::VersionManager;

/// A cleanup transition of an attach handle in `cleaning`, recorded by the conductor
/// only if the handle is still at the revision the agent read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanupTransition {
    /// The agent starts erasing the device: it claims the handle at this revision. The
    /// claim is the request id of the claiming call, so a retry of the same call (same
    /// context) is recognised as its own, and a second runner from the same revision
    /// loses.
    Started {
        /// The claiming call's request id.
        claim: String,
    },
    /// The erase succeeded: available again.
    Succeeded,
    /// The erase failed or timed out: `error`, never reused.
    Failed {
        /// Why.
        reason: String,
    },
}

/// The persistence the attach-handle methods need. The conductor implements it over its
/// database; every write checks the state the caller expects (compare-and-swap on the
/// revision) and recognises a retry of a write that already landed.
pub trait HandleStore: Send + Sync + 'static {
    /// Every attach handle of `host` (one query).
    fn host_handles<'a>(
        &'a self,
        host: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AttachHandle>, CallError>>;

    /// The handles of `host` in `cleaning`.
    fn cleaning_handles<'a>(
        &'a self,
        host: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AttachHandle>, CallError>>;

    /// Replaces an unallocated handle's attach info if its revision is still
    /// `expected_revision` (`StaleHandle`, `HandleInUse` otherwise).
    fn update_attach_info<'a>(
        &'a self,
        uuid: &'a str,
        expected_revision: i64,
        attach_info: String,
    ) -> BoxFuture<'a, Result<AttachHandle, CallError>>;

    /// Records a cleanup transition of a handle in `cleaning` at `expected_revision`
    /// (`NotCleaning`, `StaleHandle` otherwise).
    fn cleanup_transition<'a>(
        &'a self,
        uuid: &'a str,
        expected_revision: i64,
        transition: CleanupTransition,
    ) -> BoxFuture<'a, Result<AttachHandle, CallError>>;
}

/// What the conductor attaches to each request context its object methods run with:
/// the store and its component versions (some methods are gated on finalization).
#[derive(Clone)]
pub struct ConductorState {
    /// The database, as the methods see it.
    pub store: Arc<dyn HandleStore>,
    /// The conductor's component versions.
    pub versions: VersionManager<AccelVersion>,
}

impl ConductorState {
    /// `ctx` with this state attached (the conductor endpoint's `prepare`).
    pub fn attach(&self, ctx: RequestContext) -> RequestContext {
        ctx.with_extension(self.clone())
    }
}

/// The state attached to `ctx`, or the typed `NoStore` error.
pub fn of(ctx: &RequestContext) -> Result<&ConductorState, CallError> {
    ctx.extension::<ConductorState>().ok_or_else(|| {
        CallError::method(
            crate::errors::NO_STORE,
            "this service has no database: attach-handle methods run on the conductor \
             (object indirection, [upgrade_levels] conductor = \"1.1\")",
        )
    })
}
