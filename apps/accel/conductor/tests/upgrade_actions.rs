//! Transactional upgrade steps over the conductor's database, on SQLite and PostgreSQL:
//! a step's row and its completion (the `component_versions` record) commit together.
//!
//! A crash is injected after a step wrote its row and before the commit: the finalizing
//! future is dropped mid-transaction and the pool closed, as a dying process would; the
//! next start (a new pool on the same database) finds neither the row nor the
//! completion, and the resumed finalization writes the row once.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;
use accel_conductor::{Db, DbTransaction, DbVersionStore};
use async_trait::async_trait;
use sqlx::Row;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use verso_upgrade::action::BoxFuture;
use verso_upgrade::store::{PersistedState, StoreError};
use verso_upgrade::{
    component_versions, ActionError, RetryPolicy, TransactionalStore, UpgradeAction, UpgradeError,
    UpgradeState, VersionManager, VersionStore,
};

component_versions! {
    /// Release N+1 of a conductor whose finalization backfills rows.
    pub enum New: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
        /// Release N+1.
        Next = 2 => "release N+1",
    }
}

component_versions! {
    /// Release N.
    pub enum Old: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
    }
}

/// How often each step's body ran (rolled-back attempts included).
#[derive(Default)]
struct Runs {
    first: AtomicUsize,
    second: AtomicUsize,
}

fn transient(e: sqlx::Error) -> ActionError {
    ActionError::Transient(e.to_string())
}

/// Inserts a row naming `step`: not idempotent on its own, the transaction keeps it once.
fn insert<'t>(
    tx: &'t mut DbTransaction,
    step: &'static str,
) -> BoxFuture<'t, Result<(), ActionError>> {
    Box::pin(async move {
        let sql = accel_conductor::db::Backend::of(tx)
            .sql("INSERT INTO backfilled (step) VALUES ($1)")
            .into_owned();
        sqlx::query(&sql)
            .bind(step)
            .execute(&mut **tx)
            .await
            .map_err(transient)?;
        Ok(())
    })
}

/// Two transactional steps over a store `S` whose transaction is the database's.
fn backfill<S: TransactionalStore<Tx = DbTransaction>>(runs: &Arc<Runs>) -> UpgradeAction<New> {
    let (r1, r2) = (runs.clone(), runs.clone());
    UpgradeAction::new(New::Next, "backfill")
        .step_in_tx::<S>("first", move |tx| {
            r1.first.fetch_add(1, Ordering::SeqCst);
            insert(tx, "first")
        })
        .step_in_tx::<S>("second", move |tx| {
            r2.second.fetch_add(1, Ordering::SeqCst);
            insert(tx, "second")
        })
}

/// The conductor's store, except that its `hang_at`-th `save_in` (after the step wrote
/// its row, before the commit) says so and never returns: the process dies there.
struct Crashing {
    inner: DbVersionStore,
    save_ins: AtomicUsize,
    hang_at: usize,
    reached: Arc<Notify>,
}

#[async_trait]
impl VersionStore for Crashing {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        self.inner.load().await
    }
    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        self.inner.save(state).await
    }
}

#[async_trait]
impl TransactionalStore for Crashing {
    type Tx = DbTransaction;
    async fn begin(&self) -> Result<DbTransaction, StoreError> {
        self.inner.begin().await
    }
    async fn load_in(&self, tx: &mut DbTransaction) -> Result<Option<PersistedState>, StoreError> {
        self.inner.load_in(tx).await
    }
    /// The inner store's own (its `save_in` is not counted: only the steps' are).
    async fn update(
        &self,
        change: &(dyn Fn(Option<PersistedState>) -> PersistedState + Send + Sync),
    ) -> Result<PersistedState, StoreError> {
        self.inner.update(change).await
    }
    async fn save_in(
        &self,
        tx: &mut DbTransaction,
        state: &PersistedState,
    ) -> Result<(), StoreError> {
        if self.save_ins.fetch_add(1, Ordering::SeqCst) + 1 == self.hang_at {
            self.reached.notify_one();
            std::future::pending::<()>().await;
        }
        self.inner.save_in(tx, state).await
    }
    async fn commit(&self, tx: DbTransaction) -> Result<(), StoreError> {
        self.inner.commit(tx).await
    }
    async fn rollback(&self, tx: DbTransaction) -> Result<(), StoreError> {
        self.inner.rollback(tx).await
    }
}

async fn rows(db: &Db) -> Vec<String> {
    sqlx::query("SELECT step FROM backfilled ORDER BY step")
        .fetch_all(db.pool())
        .await
        .expect("select")
        .iter()
        .map(|r| r.try_get::<String, _>("step").expect("step"))
        .collect()
}

async fn record(db: &Db) -> PersistedState {
    DbVersionStore::new(db.clone(), "conductor")
        .load()
        .await
        .expect("load")
        .expect("a record")
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        initial: Duration::from_millis(5),
        max: Duration::from_millis(20),
        attempts: 3,
    }
}

/// Release N installed on `url`; then release N+1 crashes in the second step of its
/// finalization, after that step's row was written; then it starts again and resumes.
async fn crash_between_data_and_commit(url: &str) -> Result<(), UpgradeError> {
    let db = Db::connect(url).await.expect("connect");
    VersionManager::<Old>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    sqlx::query("CREATE TABLE backfilled (step VARCHAR(64) NOT NULL)")
        .execute(db.pool())
        .await
        .expect("create table");

    let runs = Arc::new(Runs::default());
    let reached = Arc::new(Notify::new());
    let crashing = Crashing {
        inner: DbVersionStore::new(db.clone(), "conductor"),
        save_ins: AtomicUsize::new(0),
        hang_at: 2,
        reached: reached.clone(),
    };
    let m = VersionManager::<New>::builder_tx(crashing)
        .action(backfill::<Crashing>(&runs))
        .open()
        .await?;
    assert_eq!(m.state(), UpgradeState::PreFinalized);
    let finalizing = tokio::spawn(async move { m.finalize().await });
    tokio::time::timeout(Duration::from_secs(30), reached.notified())
        .await
        .expect("the second step reached its record write");
    // The process dies: the transaction is never committed nor rolled back by verso.
    finalizing.abort();
    assert!(finalizing.await.expect_err("aborted").is_cancelled());
    db.close().await;

    // The next start.
    let db = Db::connect(url).await.expect("reconnect");
    // The first step committed with its completion; the second left neither.
    assert_eq!(rows(&db).await, ["first"]);
    let before = record(&db).await;
    assert_eq!(before.apparent, 1);
    let marker = before.finalizing.expect("the finalization marker");
    assert_eq!(marker.steps_done, ["2/backfill/first"]);
    assert_eq!(runs.first.load(Ordering::SeqCst), 1);
    assert_eq!(runs.second.load(Ordering::SeqCst), 1);

    let m = VersionManager::<New>::builder_tx(DbVersionStore::new(db.clone(), "conductor"))
        .action(backfill::<DbVersionStore>(&runs))
        .retry(fast_retry())
        .open()
        .await?;
    assert_eq!(m.state(), UpgradeState::Finalizing);
    m.resume().await?;
    assert_eq!(m.state(), UpgradeState::Finalized);
    // Each row once; the first step did not run again, the second ran once more.
    assert_eq!(rows(&db).await, ["first", "second"]);
    assert_eq!(runs.first.load(Ordering::SeqCst), 1);
    assert_eq!(runs.second.load(Ordering::SeqCst), 2);
    let after = record(&db).await;
    assert_eq!((after.apparent, after.finalizing), (2, None));
    db.close().await;
    Ok(())
}

/// A step that writes its row and then fails leaves neither the row nor its completion;
/// once the cause is gone, the next `finalize` writes the row once.
async fn failed_step_rolls_back(db: &Db) -> Result<(), UpgradeError> {
    VersionManager::<Old>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    sqlx::query("CREATE TABLE backfilled (step VARCHAR(64) NOT NULL)")
        .execute(db.pool())
        .await
        .expect("create table");
    let broken = Arc::new(AtomicUsize::new(1));
    let flag = broken.clone();
    let action = UpgradeAction::new(New::Next, "backfill").step_in_tx::<DbVersionStore>(
        "checked",
        move |tx: &mut DbTransaction| -> BoxFuture<'_, Result<(), ActionError>> {
            let broken = flag.load(Ordering::SeqCst) == 1;
            Box::pin(async move {
                insert(tx, "checked").await?;
                if broken {
                    return Err(ActionError::Permanent("a row an operator must fix".into()));
                }
                Ok(())
            })
        },
    );
    let m = VersionManager::<New>::builder_tx(DbVersionStore::new(db.clone(), "conductor"))
        .action(action)
        .open()
        .await?;
    let err = m.finalize().await.expect_err("the step fails");
    assert!(matches!(err, UpgradeError::ActionFailed { .. }), "{err}");
    assert_eq!(rows(db).await, Vec::<String>::new());
    let stopped = record(db).await;
    let marker = stopped.finalizing.expect("marker");
    assert!(marker.steps_done.is_empty());
    assert_eq!(
        marker.failed.as_deref(),
        Some("2/backfill/checked: a row an operator must fix")
    );

    broken.store(0, Ordering::SeqCst);
    m.finalize().await?;
    assert_eq!(rows(db).await, ["checked"]);
    assert_eq!(m.state(), UpgradeState::Finalized);
    Ok(())
}

/// Like [`backfill`], but each step keeps its transaction open a while after its insert,
/// so that a second conductor finalizing at the same time reaches the same step meanwhile;
/// the first step's body says when it starts.
fn slow_backfill(runs: &Arc<Runs>, inside: &Arc<Notify>) -> UpgradeAction<New> {
    fn slow_insert<'t>(
        tx: &'t mut DbTransaction,
        step: &'static str,
    ) -> BoxFuture<'t, Result<(), ActionError>> {
        Box::pin(async move {
            insert(tx, step).await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(())
        })
    }
    let (r1, r2, inside) = (runs.clone(), runs.clone(), inside.clone());
    UpgradeAction::new(New::Next, "backfill")
        .step_in_tx::<DbVersionStore>("first", move |tx| {
            r1.first.fetch_add(1, Ordering::SeqCst);
            inside.notify_one();
            slow_insert(tx, "first")
        })
        .step_in_tx::<DbVersionStore>("second", move |tx| {
            r2.second.fetch_add(1, Ordering::SeqCst);
            slow_insert(tx, "second")
        })
}

/// When the second of two conductors starts finalizing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Second {
    /// With the first (a barrier).
    Together,
    /// Once the first is inside its first step: its first record write (the marker) then
    /// waits for the first's transaction, and must not overwrite the step it committed.
    WhileFirstIsInAStep,
}

/// Two conductors (each its own pool: two processes) finalize release N+1 on `url` at
/// once: each step runs once and its row lands once (the second conductor waits on the
/// record's lock, then finds the step done), and the record ends finalized.
async fn two_conductors_finalize_at_once(url: &str, second: Second) -> Result<(), UpgradeError> {
    let db = Db::connect(url).await.expect("connect");
    VersionManager::<Old>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    sqlx::query("CREATE TABLE backfilled (step VARCHAR(64) NOT NULL)")
        .execute(db.pool())
        .await
        .expect("create table");

    let runs = Arc::new(Runs::default());
    let inside = Arc::new(Notify::new());
    let start = Arc::new(tokio::sync::Barrier::new(2));
    let mut opened = Vec::new();
    for _ in 0..2 {
        let own = Db::connect(url).await.expect("connect");
        let m = VersionManager::<New>::builder_tx(DbVersionStore::new(own.clone(), "conductor"))
            .action(slow_backfill(&runs, &inside))
            .retry(fast_retry())
            .open()
            .await?;
        assert_eq!(m.state(), UpgradeState::PreFinalized);
        opened.push((m, own));
    }
    let mut conductors = Vec::new();
    for (n, (m, own)) in opened.into_iter().enumerate() {
        let (start, inside) = (start.clone(), inside.clone());
        conductors.push(tokio::spawn(async move {
            match second {
                Second::Together => {
                    start.wait().await;
                }
                Second::WhileFirstIsInAStep if n == 1 => inside.notified().await,
                Second::WhileFirstIsInAStep => {}
            }
            let outcome = m.finalize().await;
            (outcome, m, own)
        }));
    }
    for conductor in conductors {
        let (outcome, m, own) = conductor.await.expect("join");
        outcome?;
        assert_eq!(m.state(), UpgradeState::Finalized);
        own.close().await;
    }
    assert_eq!(rows(&db).await, ["first", "second"]);
    assert_eq!(runs.first.load(Ordering::SeqCst), 1);
    assert_eq!(runs.second.load(Ordering::SeqCst), 1);
    let after = record(&db).await;
    assert_eq!((after.apparent, after.finalizing), (2, None));
    db.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_conductors_finalizing_at_once_write_each_row_once() -> Result<(), UpgradeError>
{
    let (db, dir) = support::sqlite().await;
    db.close().await;
    let url = support::sqlite_url(&dir);
    two_conductors_finalize_at_once(&url, Second::Together).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_second_conductor_does_not_overwrite_a_step_the_first_committed(
) -> Result<(), UpgradeError> {
    let (db, dir) = support::sqlite().await;
    db.close().await;
    let url = support::sqlite_url(&dir);
    two_conductors_finalize_at_once(&url, Second::WhileFirstIsInAStep).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_conductors_finalizing_at_once_write_each_row_once() -> Result<(), UpgradeError>
{
    let url = support::postgres_database().await;
    let db = Db::connect(&url).await.expect("connect");
    support::make_schema(&db).await;
    db.close().await;
    two_conductors_finalize_at_once(&url, Second::Together).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_second_conductor_does_not_overwrite_a_step_the_first_committed(
) -> Result<(), UpgradeError> {
    let url = support::postgres_database().await;
    let db = Db::connect(&url).await.expect("connect");
    support::make_schema(&db).await;
    db.close().await;
    two_conductors_finalize_at_once(&url, Second::WhileFirstIsInAStep).await
}

#[tokio::test]
async fn sqlite_a_crash_before_commit_leaves_neither_row_nor_completion() -> Result<(), UpgradeError>
{
    let (db, dir) = support::sqlite().await;
    db.close().await;
    crash_between_data_and_commit(&support::sqlite_url(&dir)).await
}

#[tokio::test]
async fn postgres_a_crash_before_commit_leaves_neither_row_nor_completion(
) -> Result<(), UpgradeError> {
    let url = support::postgres_database().await;
    let db = Db::connect(&url).await.expect("connect");
    support::make_schema(&db).await;
    db.close().await;
    crash_between_data_and_commit(&url).await
}

#[tokio::test]
async fn sqlite_a_failed_step_rolls_back_its_row() -> Result<(), UpgradeError> {
    let (db, _dir) = support::sqlite().await;
    failed_step_rolls_back(&db).await
}

#[tokio::test]
async fn postgres_a_failed_step_rolls_back_its_row() -> Result<(), UpgradeError> {
    failed_step_rolls_back(&support::postgres().await).await
}

#[tokio::test]
async fn mysql_a_failed_step_rolls_back_its_row() -> Result<(), UpgradeError> {
    failed_step_rolls_back(&support::mysql().await).await
}
