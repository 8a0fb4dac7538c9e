//! Upgrade actions: code that runs once its version is finalized (a data migration, a
//! rewrite of an on-disk format).
//!
//! An action belongs to one component version and is a list of named steps. Finalization
//! runs the steps of each version in order, persisting each completed step, so a crash
//! resumes at the first step not recorded. A step may therefore run more than once (if
//! the crash falls between its effect and the record) and must be idempotent: run twice,
//! it leaves the same data as run once.
//!
//! A step fails [`ActionError::Transient`] for what may pass (a database restarting):
//! finalization retries it with backoff and shows it as retrying in status. It fails
//! [`ActionError::Permanent`] for what will not pass by waiting (data an operator must
//! fix): finalization stops, status shows the error, and the next `finalize` starts again
//! at that step.

use crate::ComponentVersion;
use futures::future::BoxFuture;
use std::future::Future;
use std::sync::Arc;

/// Why a step failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// May pass if retried.
    #[error("transient: {0}")]
    Transient(String),
    /// Will not pass by retrying; needs an operator.
    #[error("{0}")]
    Permanent(String),
}

pub(crate) type StepFn = Arc<dyn Fn() -> BoxFuture<'static, Result<(), ActionError>> + Send + Sync>;

/// One step of an action.
#[derive(Clone)]
pub(crate) struct Step {
    pub(crate) name: &'static str,
    pub(crate) run: StepFn,
}

/// An upgrade action: steps that run when `version` is finalized.
///
/// ```
/// use verso_upgrade::{ActionError, UpgradeAction};
/// # verso_upgrade::component_versions! { pub enum V: "c" { A = 1 => "a", B = 2 => "b" } }
/// let action = UpgradeAction::new(V::B, "backfill-control-path-ids")
///     .step("add-column", || async { Ok::<(), ActionError>(()) })
///     .step("fill-column", || async { Ok(()) });
/// assert_eq!(action.name(), "backfill-control-path-ids");
/// ```
#[derive(Clone)]
pub struct UpgradeAction<V> {
    pub(crate) version: V,
    pub(crate) name: &'static str,
    pub(crate) steps: Vec<Step>,
}

impl<V: ComponentVersion> UpgradeAction<V> {
    /// An action of `version`, with no steps yet.
    pub fn new(version: V, name: &'static str) -> Self {
        UpgradeAction {
            version,
            name,
            steps: Vec::new(),
        }
    }

    /// Adds a step; steps run in the order they are added.
    pub fn step<F, Fut>(mut self, name: &'static str, run: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), ActionError>> + Send + 'static,
    {
        self.steps.push(Step {
            name,
            run: Arc::new(move || Box::pin(run())),
        });
        self
    }

    /// The version it belongs to.
    pub fn version(&self) -> V {
        self.version
    }

    /// Its name (unique within its version).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The step names, in order.
    pub fn step_names(&self) -> Vec<&'static str> {
        self.steps.iter().map(|s| s.name).collect()
    }
}

impl<V: ComponentVersion> std::fmt::Debug for UpgradeAction<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpgradeAction")
            .field("version", &self.version)
            .field("name", &self.name)
            .field("steps", &self.step_names())
            .finish()
    }
}

/// The id a completed step is recorded under.
pub(crate) fn step_id<V: ComponentVersion>(version: V, action: &str, step: &str) -> String {
    format!("{}/{action}/{step}", version.number())
}
