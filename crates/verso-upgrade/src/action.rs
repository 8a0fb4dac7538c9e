//! Upgrade actions: code that runs once its version is finalized (a data migration, a
//! rewrite of an on-disk format).
//!
//! An action belongs to one component version and is a list of named steps. Finalization
//! runs the steps of each version in order, persisting each completed step, so a crash
//! resumes at the first step not recorded. A step may therefore run more than once (if
//! the crash falls between its effect and the record) and must be idempotent: run twice,
//! it leaves the same data as run once.
//!
//! A step whose data lives in the same database as the version record can instead be
//! *transactional* ([`UpgradeAction::step_in_tx`]): it receives a transaction of the
//! store ([`TransactionalStore`]), writes its data in it, and the manager records the
//! step's completion in that same transaction before committing. A crash then leaves
//! both or neither, so the step runs exactly once as far as committed data goes (it
//! may still be *attempted* again, its earlier attempt rolled back). This holds with
//! several managers finalizing over one store at once (two conductors on one database):
//! whether the step is done is read from the stored record, locked in the step's
//! transaction ([`TransactionalStore::load_in`]). Such a step needs
//! a manager built over that store type; [`crate::manager::Builder::open`] refuses
//! anything else with [`UpgradeError::TransactionalStepWithoutStore`](crate::UpgradeError::TransactionalStepWithoutStore). Plain and
//! transactional steps mix freely, within an action and across actions: plain steps
//! keep their at-least-once, idempotent contract.
//!
//! A step fails [`ActionError::Transient`] for what may pass (a database restarting):
//! finalization retries it with backoff and shows it as retrying in status. It fails
//! [`ActionError::Permanent`] for what will not pass by waiting (data an operator must
//! fix): finalization stops, status shows the error, and the next `finalize` starts again
//! at that step.

use crate::store::TransactionalStore;
use crate::ComponentVersion;
/// What a transactional step returns: `|tx| Box::pin(async move { ... })`.
pub use futures::future::BoxFuture;
use std::any::{Any, TypeId};
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

/// A transactional step, its transaction type-erased (the manager checks at `open` that
/// it is the transaction of the manager's store).
pub(crate) type TxStepFn = Arc<
    dyn for<'t> Fn(&'t mut (dyn Any + Send)) -> BoxFuture<'t, Result<(), ActionError>>
        + Send
        + Sync,
>;

/// How a step runs.
#[derive(Clone)]
pub(crate) enum StepKind {
    /// On its own; its completion is recorded afterwards (at least once, idempotent).
    Plain(StepFn),
    /// In a transaction of a store of type `store`, committed with its completion.
    InTx {
        store: TypeId,
        store_name: &'static str,
        run: TxStepFn,
    },
}

/// One step of an action.
#[derive(Clone)]
pub(crate) struct Step {
    pub(crate) name: &'static str,
    pub(crate) kind: StepKind,
}

/// Erases a transactional step's transaction type.
fn erase<S, F>(run: F) -> TxStepFn
where
    S: TransactionalStore,
    F: for<'t> Fn(&'t mut S::Tx) -> BoxFuture<'t, Result<(), ActionError>> + Send + Sync + 'static,
{
    Arc::new(
        move |tx: &mut (dyn Any + Send)| -> BoxFuture<'_, Result<(), ActionError>> {
            match tx.downcast_mut::<S::Tx>() {
                Some(tx) => run(tx),
                // `open` checked the store type; reaching this is a bug, reported as such.
                None => Box::pin(async {
                    Err(ActionError::Permanent(format!(
                        "internal error: the transaction is not a {}",
                        std::any::type_name::<S::Tx>()
                    )))
                }),
            }
        },
    )
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
            kind: StepKind::Plain(Arc::new(move || Box::pin(run()))),
        });
        self
    }

    /// Adds a transactional step over a store of type `S`: `run` writes its data in the
    /// transaction it is given, and the manager records the step done in that same
    /// transaction, then commits (see the module docs). On an error the transaction is
    /// rolled back, data and all; a transient error is retried in a new transaction.
    ///
    /// Before `run` is called, the manager reads the stored record in the transaction
    /// with [`TransactionalStore::load_in`], which locks it until commit or rollback. If
    /// it already has the step done (another manager finalizing over the same store ran
    /// it, or finalized its version), the transaction is rolled back and `run` is not
    /// called; otherwise the record saved with the step's data is the stored one plus
    /// this step, not the manager's own copy. So with two conductors finalizing one
    /// database at once, the step's data commits once: the second waits on the lock and
    /// then finds the step done.
    ///
    /// The manager must be built over an `S`
    /// ([`VersionManager::builder_tx`](crate::VersionManager::builder_tx)); `open`
    /// refuses any other store with [`UpgradeError::TransactionalStepWithoutStore`](crate::UpgradeError::TransactionalStepWithoutStore).
    ///
    /// Over accel's conductor database (`DbVersionStore`, whose `Tx` is an sqlx
    /// transaction; `apps/accel/conductor/tests/upgrade_actions.rs` runs this shape):
    ///
    /// ```text
    /// UpgradeAction::new(AccelVersion::DriverFeatures, "backfill")
    ///     .step_in_tx::<DbVersionStore>("fill", |tx| Box::pin(async move {
    ///         sqlx::query("UPDATE ...")
    ///             .execute(&mut **tx)
    ///             .await
    ///             .map_err(|e| ActionError::Transient(e.to_string()))?;
    ///         Ok(())
    ///     }))
    /// ```
    pub fn step_in_tx<S: TransactionalStore>(
        mut self,
        name: &'static str,
        run: impl for<'t> Fn(&'t mut S::Tx) -> BoxFuture<'t, Result<(), ActionError>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.steps.push(Step {
            name,
            kind: StepKind::InTx {
                store: TypeId::of::<S>(),
                store_name: std::any::type_name::<S>(),
                run: erase::<S, _>(run),
            },
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

/// The steps that run in a transaction of a store of another type than `store` (or in
/// any, when the manager's store is not transactional), as `(step, wanted store)`.
pub(crate) fn first_tx_step_not_over<V: ComponentVersion>(
    action: &UpgradeAction<V>,
    store: Option<TypeId>,
) -> Option<(&'static str, &'static str)> {
    action.steps.iter().find_map(|s| match &s.kind {
        StepKind::InTx {
            store: wanted,
            store_name,
            ..
        } if Some(*wanted) != store => Some((s.name, *store_name)),
        _ => None,
    })
}

/// The id a completed step is recorded under.
pub(crate) fn step_id<V: ComponentVersion>(version: V, action: &str, step: &str) -> String {
    format!("{}/{action}/{step}", version.number())
}
