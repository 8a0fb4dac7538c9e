//! Transactional upgrade steps: a step's data and its completion commit in one
//! transaction of the version store, so a crash at any point leaves both or neither, and
//! the resumed finalization writes the data exactly once.
//!
//! The store here is an in-memory "database" (committed rows and the version record)
//! whose every operation can be made to crash: the operation fails (or lands and then
//! fails) and every later one fails too, as if the process died there. The next start
//! opens a new manager over what was committed.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use async_trait::async_trait;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use verso_upgrade::store::{PersistedState, StoreError};
use verso_upgrade::{
    component_versions, ActionError, FileStore, RetryPolicy, TransactionalStore, UpgradeAction,
    UpgradeError, UpgradeState, VersionManager, VersionStore,
};

component_versions! {
    /// A component with two versions whose actions write rows.
    pub enum New: "conductor" {
        /// First release.
        Initial = 1 => "first release",
        /// Feature B.
        B = 2 => "feature B",
        /// Feature C.
        C = 3 => "feature C",
    }
}

/// How the crash falls on its operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crash {
    /// The operation does not happen.
    Before,
    /// The operation happens, then the process dies before it hears back.
    After,
}

#[derive(Default)]
struct Committed {
    record: Option<PersistedState>,
    rows: Vec<String>,
}

#[derive(Default)]
struct Db {
    committed: Committed,
    /// Operations so far (begin, insert, save_in, commit, save, rollback).
    ops: usize,
    /// The operation that crashes, and how.
    crash: Option<(usize, Crash)>,
    dead: bool,
    /// Commits that land but report an error (the connection broke in the reply).
    lying_commits: usize,
    /// Step bodies run (including rolled-back attempts).
    attempts: Vec<String>,
    /// The record's lock: taken by `load_in` and held by the transaction until it ends
    /// (a database's row lock), and by `update`.
    record_lock: Arc<tokio::sync::Mutex<()>>,
}

impl Db {
    /// Counts an operation; `Err` if the store is dead. `Ok(true)` means: do it, then die.
    fn op(&mut self) -> Result<bool, StoreError> {
        if self.dead {
            return Err(StoreError::Backend("the process has crashed".into()));
        }
        self.ops += 1;
        match self.crash {
            Some((at, how)) if at == self.ops => {
                self.dead = true;
                match how {
                    Crash::Before => Err(StoreError::Backend("injected crash".into())),
                    Crash::After => Ok(true),
                }
            }
            _ => Ok(false),
        }
    }
}

type Shared = Arc<Mutex<Db>>;

fn lock(db: &Shared) -> std::sync::MutexGuard<'_, Db> {
    db.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn died() -> StoreError {
    StoreError::Backend("injected crash (after the operation)".into())
}

#[derive(Clone)]
struct MemStore(Shared);

/// A transaction: writes buffered until commit.
struct MemTx {
    db: Shared,
    record: Option<PersistedState>,
    rows: Vec<String>,
    /// The record's lock once `load_in` took it; released when the transaction ends.
    locked: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl MemTx {
    /// The data write of a step.
    fn insert(&mut self, row: &str) -> Result<(), ActionError> {
        let mut db = lock(&self.db);
        let die = db.op().map_err(|e| ActionError::Transient(e.to_string()))?;
        self.rows.push(row.to_owned());
        if die {
            return Err(ActionError::Transient(died().to_string()));
        }
        Ok(())
    }
}

#[async_trait]
impl VersionStore for MemStore {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        let db = lock(&self.0);
        if db.dead {
            return Err(StoreError::Backend("the process has crashed".into()));
        }
        Ok(db.committed.record.clone())
    }

    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        let mut db = lock(&self.0);
        let die = db.op()?;
        db.committed.record = Some(state.clone());
        if die {
            return Err(died());
        }
        Ok(())
    }
}

#[async_trait]
impl TransactionalStore for MemStore {
    type Tx = MemTx;

    async fn begin(&self) -> Result<MemTx, StoreError> {
        if lock(&self.0).op()? {
            return Err(died());
        }
        Ok(MemTx {
            db: self.0.clone(),
            record: None,
            rows: Vec::new(),
            locked: None,
        })
    }

    /// Not an operation of the crash count (like `load`): a read.
    async fn load_in(&self, tx: &mut MemTx) -> Result<Option<PersistedState>, StoreError> {
        if tx.locked.is_none() {
            let record_lock = lock(&self.0).record_lock.clone();
            tx.locked = Some(record_lock.lock_owned().await);
        }
        self.load().await
    }

    /// One operation (like `save`), under the record's lock.
    async fn update(
        &self,
        change: &(dyn Fn(Option<PersistedState>) -> PersistedState + Send + Sync),
    ) -> Result<PersistedState, StoreError> {
        let record_lock = lock(&self.0).record_lock.clone();
        let _locked = record_lock.lock().await;
        let mut db = lock(&self.0);
        let die = db.op()?;
        let next = change(db.committed.record.clone());
        db.committed.record = Some(next.clone());
        if die {
            return Err(died());
        }
        Ok(next)
    }

    async fn save_in(&self, tx: &mut MemTx, state: &PersistedState) -> Result<(), StoreError> {
        let die = lock(&self.0).op()?;
        tx.record = Some(state.clone());
        if die {
            return Err(died());
        }
        Ok(())
    }

    async fn commit(&self, tx: MemTx) -> Result<(), StoreError> {
        let mut db = lock(&self.0);
        let die = db.op()?;
        db.committed.rows.extend(tx.rows);
        if let Some(r) = tx.record {
            db.committed.record = Some(r);
        }
        if die {
            return Err(died());
        }
        if db.lying_commits > 0 {
            db.lying_commits -= 1;
            return Err(StoreError::Backend(
                "connection reset while committing".into(),
            ));
        }
        Ok(())
    }

    async fn rollback(&self, _tx: MemTx) -> Result<(), StoreError> {
        if lock(&self.0).op()? {
            return Err(died());
        }
        Ok(())
    }
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        initial: std::time::Duration::from_millis(1),
        max: std::time::Duration::from_millis(2),
        attempts: 3,
    }
}

/// A transactional step inserting `row` (not idempotent on its own: the transaction
/// is what keeps it to once).
fn insert(
    db: Shared,
    row: &'static str,
) -> impl for<'t> Fn(&'t mut MemTx) -> BoxFuture<'t, Result<(), ActionError>> + Send + Sync {
    move |tx: &mut MemTx| -> BoxFuture<'_, Result<(), ActionError>> {
        lock(&db).attempts.push(row.to_owned());
        Box::pin(async move { tx.insert(row) })
    }
}

/// Like [`insert`], but the step holds its transaction open for `wait` after the
/// insert, so that a concurrent finalizer reaches the same step meanwhile.
fn slow_insert(
    db: Shared,
    row: &'static str,
    wait: std::time::Duration,
) -> impl for<'t> Fn(&'t mut MemTx) -> BoxFuture<'t, Result<(), ActionError>> + Send + Sync {
    move |tx: &mut MemTx| -> BoxFuture<'_, Result<(), ActionError>> {
        lock(&db).attempts.push(row.to_owned());
        Box::pin(async move {
            tx.insert(row)?;
            tokio::time::sleep(wait).await;
            Ok(())
        })
    }
}

/// B: two transactional steps; C: a plain idempotent step, then a transactional one.
fn actions(db: &Shared) -> Vec<UpgradeAction<New>> {
    let plain_db = db.clone();
    vec![
        UpgradeAction::new(New::B, "b-backfill")
            .step_in_tx::<MemStore>("b1", insert(db.clone(), "b1"))
            .step_in_tx::<MemStore>("b2", insert(db.clone(), "b2")),
        UpgradeAction::new(New::C, "c-migrate")
            .step("c1", move || {
                let db = plain_db.clone();
                async move {
                    let mut db = lock(&db);
                    db.attempts.push("c1".into());
                    // Outside any transaction: at least once, idempotent.
                    let die = db.op().map_err(|e| ActionError::Transient(e.to_string()))?;
                    if !db.committed.rows.iter().any(|r| r == "c1") {
                        db.committed.rows.push("c1".into());
                    }
                    if die {
                        return Err(ActionError::Transient(died().to_string()));
                    }
                    Ok(())
                }
            })
            .step_in_tx::<MemStore>("c2", insert(db.clone(), "c2")),
    ]
}

async fn open(db: &Shared) -> Result<VersionManager<New>, UpgradeError> {
    let mut b = VersionManager::<New>::builder_tx(MemStore(db.clone())).retry(fast_retry());
    for a in actions(db) {
        b = b.action(a);
    }
    b.open().await
}

fn upgraded_db() -> Shared {
    let db = Shared::default();
    lock(&db).committed.record = Some(PersistedState {
        format: 1,
        component: "conductor".into(),
        apparent: 1,
        finalizing: None,
    });
    db
}

/// Every transactional step's row is committed iff its completion is: recorded in
/// `steps_done`, or its version already finalized (which clears `steps_done`).
fn assert_atomic(db: &Shared, context: &str) {
    let db = lock(db);
    let record = db.committed.record.clone().expect("a record");
    let done = |version: u32, id: &str| {
        record.apparent >= version
            || record
                .finalizing
                .as_ref()
                .is_some_and(|f| f.steps_done.iter().any(|d| d == id))
    };
    for (version, action, row) in [
        (2, "b-backfill", "b1"),
        (2, "b-backfill", "b2"),
        (3, "c-migrate", "c2"),
    ] {
        let present = db.committed.rows.iter().filter(|r| *r == row).count();
        let completed = done(version, &format!("{version}/{action}/{row}"));
        assert!(present <= 1, "{context}: {row} committed {present} times");
        assert_eq!(
            present == 1,
            completed,
            "{context}: row {row} present: {}, completion recorded: {completed} (rows {:?}, record {record:?})",
            present == 1,
            db.committed.rows
        );
    }
}

#[tokio::test]
async fn a_crash_at_every_operation_leaves_data_and_completion_both_or_neither(
) -> Result<(), UpgradeError> {
    // Without a crash: every row once, in order.
    let db = upgraded_db();
    let m = open(&db).await?;
    m.finalize().await?;
    assert_eq!(m.state(), UpgradeState::Finalized);
    let (total_ops, expected) = {
        let db = lock(&db);
        (db.ops, db.committed.rows.clone())
    };
    assert_eq!(expected, ["b1", "b2", "c1", "c2"]);
    // marker, 2 x (begin, insert, save_in, commit), apparent 2, c1, its record,
    // begin, insert, save_in, commit, apparent 3, clear.
    assert_eq!(total_ops, 18);

    let mut interrupted = 0;
    for how in [Crash::Before, Crash::After] {
        for at in 1..=total_ops {
            let context = format!("crash {how:?} operation {at}");
            let db = upgraded_db();
            lock(&db).crash = Some((at, how));
            let m = open(&db).await?;
            if m.finalize().await.is_err() {
                interrupted += 1;
            }
            assert!(lock(&db).dead, "{context}: the crash happened");
            assert_atomic(&db, &context);

            // The next start, over what was committed.
            {
                let mut db = lock(&db);
                db.crash = None;
                db.dead = false;
            }
            let m = open(&db).await?;
            m.resume().await?;
            if m.state() != UpgradeState::Finalized {
                m.finalize().await?;
            }
            assert_eq!(m.state(), UpgradeState::Finalized, "{context}");
            assert_atomic(&db, &context);
            assert_eq!(lock(&db).committed.rows, expected, "{context}");
        }
    }
    // Every crash interrupts finalization, even one after the last write (its reply is lost).
    assert_eq!(interrupted, 2 * total_ops);
    Ok(())
}

#[tokio::test]
async fn a_failing_step_rolls_back_its_data_and_the_next_finalize_writes_it_once(
) -> Result<(), UpgradeError> {
    let db = upgraded_db();
    let fail = Arc::new(Mutex::new(true));
    let action = {
        let fail = fail.clone();
        UpgradeAction::new(New::B, "b-backfill").step_in_tx::<MemStore>(
            "b1",
            move |tx: &mut MemTx| -> BoxFuture<'_, Result<(), ActionError>> {
                let fail = *fail.lock().expect("flag");
                Box::pin(async move {
                    // The data is written, then the step fails: the write must not remain.
                    tx.insert("b1")?;
                    if fail {
                        return Err(ActionError::Permanent("bad row".into()));
                    }
                    Ok(())
                })
            },
        )
    };
    let m = VersionManager::<New>::builder_tx(MemStore(db.clone()))
        .action(action)
        .open()
        .await?;
    let err = m.finalize().await.expect_err("the step fails");
    assert!(matches!(err, UpgradeError::ActionFailed { .. }), "{err}");
    assert!(lock(&db).committed.rows.is_empty());
    assert_eq!(
        m.status().failed.as_deref(),
        Some("2/b-backfill/b1: bad row")
    );

    *fail.lock().expect("flag") = false;
    m.finalize().await?;
    assert_eq!(lock(&db).committed.rows, ["b1"]);
    assert_eq!(m.apparent(), New::C);
    Ok(())
}

#[tokio::test]
async fn a_commit_that_landed_but_reported_an_error_is_not_run_again() -> Result<(), UpgradeError> {
    let db = upgraded_db();
    lock(&db).lying_commits = 1;
    let m = open(&db).await?;
    m.finalize().await?;
    let db = lock(&db);
    assert_eq!(db.committed.rows, ["b1", "b2", "c1", "c2"]);
    // b1's commit landed and said it failed: the manager read the record back and went on.
    assert_eq!(db.attempts, ["b1", "b2", "c1", "c2"]);
    Ok(())
}

#[tokio::test]
async fn a_transactional_step_needs_a_transactional_store_of_its_type() {
    let db = upgraded_db();
    // Over a file store: refused at open, naming the step and the store it needs.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conductor.version");
    let mut b = VersionManager::<New>::builder(FileStore::new(&path));
    for a in actions(&db) {
        b = b.action(a);
    }
    let err = b.open().await.expect_err("no transactional store");
    match &err {
        UpgradeError::TransactionalStepWithoutStore {
            action,
            step,
            wanted,
            ..
        } => {
            assert_eq!((action.as_str(), step.as_str()), ("b-backfill", "b1"));
            assert!(wanted.ends_with("MemStore"), "{wanted}");
        }
        other => panic!("unexpected: {other}"),
    }
    assert!(err.to_string().contains("builder_tx"), "{err}");
    // Nothing was written: the refusal comes before the record is read or created.
    assert!(!path.exists());

    // Over a transactional store of another type: refused too.
    #[derive(Clone)]
    struct Other(MemStore);
    #[async_trait]
    impl VersionStore for Other {
        async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
            self.0.load().await
        }
        async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
            self.0.save(state).await
        }
    }
    #[async_trait]
    impl TransactionalStore for Other {
        type Tx = MemTx;
        async fn begin(&self) -> Result<MemTx, StoreError> {
            self.0.begin().await
        }
        async fn load_in(&self, tx: &mut MemTx) -> Result<Option<PersistedState>, StoreError> {
            self.0.load_in(tx).await
        }
        async fn save_in(&self, tx: &mut MemTx, s: &PersistedState) -> Result<(), StoreError> {
            self.0.save_in(tx, s).await
        }
        async fn commit(&self, tx: MemTx) -> Result<(), StoreError> {
            self.0.commit(tx).await
        }
        async fn rollback(&self, tx: MemTx) -> Result<(), StoreError> {
            self.0.rollback(tx).await
        }
    }
    let mut b = VersionManager::<New>::builder_tx(Other(MemStore(db.clone())));
    for a in actions(&db) {
        b = b.action(a);
    }
    let err = b.open().await.expect_err("another store type");
    assert!(err.to_string().contains("Other"), "{err}");
}

/// Two managers over one store (two processes on one database) finalizing at once, each
/// transactional step holding its transaction open a while: every transactional step
/// runs once (the other manager waits on the record's lock, then finds it done), its
/// row lands once, and neither manager's record writes undo the other's progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_managers_finalizing_at_once_run_each_transactional_step_once(
) -> Result<(), UpgradeError> {
    let db = upgraded_db();
    let wait = std::time::Duration::from_millis(50);
    let open_slow = |db: &Shared| {
        let plain_db = db.clone();
        VersionManager::<New>::builder_tx(MemStore(db.clone()))
            .retry(fast_retry())
            .action(
                UpgradeAction::new(New::B, "b-backfill")
                    .step_in_tx::<MemStore>("b1", slow_insert(db.clone(), "b1", wait))
                    .step_in_tx::<MemStore>("b2", slow_insert(db.clone(), "b2", wait)),
            )
            .action(
                UpgradeAction::new(New::C, "c-migrate")
                    .step("c1", move || {
                        let db = plain_db.clone();
                        async move {
                            // Plain, hence idempotent: either manager may run it.
                            let mut db = lock(&db);
                            if !db.committed.rows.iter().any(|r| r == "c1") {
                                db.committed.rows.push("c1".into());
                            }
                            Ok(())
                        }
                    })
                    .step_in_tx::<MemStore>("c2", slow_insert(db.clone(), "c2", wait)),
            )
            .open()
    };
    let first = open_slow(&db).await?;
    let second = open_slow(&db).await?;
    let start = Arc::new(tokio::sync::Barrier::new(2));
    let tasks: Vec<_> = [first, second]
        .into_iter()
        .map(|m| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                let outcome = m.finalize().await;
                (outcome, m)
            })
        })
        .collect();
    for task in tasks {
        let (outcome, m) = task.await.expect("join");
        outcome?;
        assert_eq!(m.state(), UpgradeState::Finalized);
        assert_eq!(m.apparent(), New::C);
    }
    let db = lock(&db);
    // Each transactional step's body ran once, and its row landed once.
    for row in ["b1", "b2", "c2"] {
        let ran = db.attempts.iter().filter(|a| *a == row).count();
        assert_eq!(ran, 1, "{row} ran {ran} times (attempts {:?})", db.attempts);
    }
    assert_eq!(db.committed.rows, ["b1", "b2", "c1", "c2"]);
    let record = db.committed.record.clone().expect("a record");
    assert_eq!((record.apparent, record.finalizing), (3, None));
    Ok(())
}
