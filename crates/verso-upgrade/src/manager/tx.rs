//! Transactional steps: one database transaction holding the step's own writes and the
//! record's, for stores that have them ([`TransactionalStore`]).

use crate::action::TxStepFn;
use crate::fleet::{FleetMember, FleetStore};
use crate::store::{PersistedState, StoreError, TransactionalStore};
use crate::ActionError;
use async_trait::async_trait;
use std::any::{Any, TypeId};
use std::sync::Arc;

/// The manager's view of a [`TransactionalStore`], its transaction type erased.
#[async_trait]
pub(super) trait TxRunner: Send + Sync {
    fn store_type(&self) -> TypeId;
    fn store_name(&self) -> &'static str;
    /// Begins, reads the stored record under its lock (`load_in`); if it already records
    /// step `id` of `version` (another manager ran it), rolls back and returns it as
    /// [`TxOutcome::AlreadyDone`]. Otherwise runs `step`, saves the stored record plus
    /// `id` in the transaction (`current`, the manager's, only if nothing is stored),
    /// commits and returns what it saved. `Err` is the store's failure.
    async fn run(
        &self,
        step: &TxStepFn,
        id: &str,
        version: u32,
        current: &PersistedState,
    ) -> Result<TxOutcome, TxFailure>;
    /// [`TransactionalStore::update`].
    async fn update(
        &self,
        change: &(dyn Fn(Option<PersistedState>) -> PersistedState + Send + Sync),
    ) -> Result<PersistedState, StoreError>;
    /// Begins, reads the stored record under its lock and `fleet`'s members in the same
    /// transaction, and writes `change(stored record or current, members)`; `None` from
    /// `change` rolls back and is returned as `None`.
    async fn update_with_fleet(
        &self,
        fleet: &dyn FleetStore,
        current: &PersistedState,
        change: &FleetChange<'_>,
    ) -> Result<Option<PersistedState>, StoreError>;
}

/// A change of the record decided on the fleet's members: `None` refuses it.
pub(crate) type FleetChange<'a> =
    dyn Fn(&PersistedState, &[FleetMember]) -> Option<PersistedState> + Send + Sync + 'a;

/// What a transactional step's transaction did.
pub(super) enum TxOutcome {
    /// The step ran and committed with this record.
    Ran(PersistedState),
    /// The stored record already had the step done (another manager's): nothing ran.
    AlreadyDone(PersistedState),
    /// The step failed; its transaction was rolled back.
    Failed(ActionError),
}

/// Whether `record` has step `id` of `version` done: listed in the marker, or its
/// version already finalized (which clears the list).
pub(super) fn step_recorded(record: &PersistedState, version: u32, id: &str) -> bool {
    record.apparent >= version
        || record
            .finalizing
            .as_ref()
            .is_some_and(|f| f.steps_done.iter().any(|d| d == id))
}

pub(super) async fn rollback_quietly<S: TransactionalStore>(store: &S, tx: S::Tx, why: &str) {
    if let Err(rb) = store.rollback(tx).await {
        tracing::warn!(error = %rb, "rollback {why} failed (the transaction is abandoned)");
    }
}

/// Where a transaction failed: before its commit (nothing landed) or in it (unknown).
pub(super) enum TxFailure {
    Before(StoreError),
    Commit(StoreError),
}

pub(super) struct TxBinding<S>(pub(super) Arc<S>);

#[async_trait]
impl<S: TransactionalStore> TxRunner for TxBinding<S> {
    fn store_type(&self) -> TypeId {
        TypeId::of::<S>()
    }

    fn store_name(&self) -> &'static str {
        std::any::type_name::<S>()
    }

    async fn run(
        &self,
        step: &TxStepFn,
        id: &str,
        version: u32,
        current: &PersistedState,
    ) -> Result<TxOutcome, TxFailure> {
        let store = &*self.0;
        let mut tx = store.begin().await.map_err(TxFailure::Before)?;
        // The decision is made on the stored record, locked until commit or rollback:
        // a concurrent manager's transaction for this step waits here, then sees it done.
        let stored = match store.load_in(&mut tx).await {
            Ok(stored) => stored,
            Err(e) => {
                rollback_quietly(store, tx, "after a failed record read").await;
                return Err(TxFailure::Before(e));
            }
        };
        if let Some(stored) = stored.as_ref().filter(|s| step_recorded(s, version, id)) {
            rollback_quietly(store, tx, "of a step already done").await;
            return Ok(TxOutcome::AlreadyDone(stored.clone()));
        }
        let mut record = stored.unwrap_or_else(|| current.clone());
        match &mut record.finalizing {
            Some(f) => f.steps_done.push(id.to_owned()),
            // Not expected (the manager wrote its marker first): keep the manager's.
            None => {
                record.finalizing = current.finalizing.clone().map(|mut f| {
                    f.steps_done = vec![id.to_owned()];
                    f
                })
            }
        }
        let outcome = step(&mut tx as &mut (dyn Any + Send)).await;
        let saved = match outcome {
            Ok(()) => store.save_in(&mut tx, &record).await,
            Err(e) => {
                rollback_quietly(store, tx, "of a failed upgrade step").await;
                return Ok(TxOutcome::Failed(e));
            }
        };
        if let Err(e) = saved {
            rollback_quietly(store, tx, "after a failed record write").await;
            return Err(TxFailure::Before(e));
        }
        store.commit(tx).await.map_err(TxFailure::Commit)?;
        Ok(TxOutcome::Ran(record))
    }

    async fn update(
        &self,
        change: &(dyn Fn(Option<PersistedState>) -> PersistedState + Send + Sync),
    ) -> Result<PersistedState, StoreError> {
        self.0.update(change).await
    }

    async fn update_with_fleet(
        &self,
        fleet: &dyn FleetStore,
        current: &PersistedState,
        change: &FleetChange<'_>,
    ) -> Result<Option<PersistedState>, StoreError> {
        let store = &*self.0;
        let mut tx = store.begin().await?;
        let stored = match store.load_in(&mut tx).await {
            Ok(stored) => stored,
            Err(e) => {
                rollback_quietly(store, tx, "after a failed record read").await;
                return Err(e);
            }
        };
        // Read under the record's lock: a member recorded with an admission check either
        // committed before (it is in this list) or waits and then sees what this writes.
        let members = match fleet.members_in(&mut tx as &mut (dyn Any + Send)).await {
            Ok(m) => m,
            Err(e) => {
                rollback_quietly(store, tx, "after a failed fleet read").await;
                return Err(e);
            }
        };
        let Some(next) = change(stored.as_ref().unwrap_or(current), &members) else {
            rollback_quietly(store, tx, "of a refused change").await;
            return Ok(None);
        };
        if let Err(e) = store.save_in(&mut tx, &next).await {
            rollback_quietly(store, tx, "after a failed record write").await;
            return Err(e);
        }
        store.commit(tx).await?;
        Ok(Some(next))
    }
}
