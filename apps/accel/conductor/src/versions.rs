//! The conductor's component versions live in its database (`component_versions`), so
//! a conductor's apparent version moves with the schema it describes: a restored backup
//! brings back the matching record, and every conductor of one deployment reads the
//! same one.
//!
//! [`DbVersionStore`] is also a [`TransactionalStore`]: an upgrade action's
//! transactional step ([`verso_upgrade::UpgradeAction::step_in_tx`]) receives a
//! [`DbTransaction`], writes its rows in it, and the step's completion is recorded in the
//! same transaction, so a crash leaves both or neither.

use crate::db::{Backend, Db};
use accel_objects::AccelVersion;
use async_trait::async_trait;
use verso_upgrade::store::{PersistedState, StoreError, TransactionalStore, VersionStore};
use verso_upgrade::ComponentVersion;

/// The transaction a transactional upgrade step receives: write with `&mut **tx`.
pub type DbTransaction = sqlx::Transaction<'static, sqlx::Any>;

/// A [`VersionStore`] over the conductor's database: one row per component.
#[derive(Clone, Debug)]
pub struct DbVersionStore {
    db: Db,
    component: String,
    fresh: Fresh,
}

/// Who makes the record of a database that has none.
#[derive(Clone, Copy, Debug)]
enum Fresh {
    /// The version manager, from its builder's `fresh_at` ([`DbVersionStore::new`]).
    Manager,
    /// The store ([`DbVersionStore::creating`]): at this version when given, else at
    /// release N when the database holds Cyborg's rows and at the newest otherwise.
    Store(Option<AccelVersion>),
}

impl DbVersionStore {
    /// Replaces the component's row with `state` through `e` (one statement on every
    /// backend: insert, or replace).
    async fn write<'c, E>(&self, state: &PersistedState, e: E) -> Result<(), StoreError>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        let record = serde_json::to_string(state).map_err(backend)?;
        let b = self.db.backend();
        let sql = b
            .sql(&format!(
            "INSERT INTO component_versions (component, record, updated_at) VALUES ($1, $2, $3) {}",
            b.replace_on_conflict("component", &["record", "updated_at"])
        ))
            .into_owned();
        sqlx::query(&sql)
            .bind(&self.component)
            .bind(record)
            .bind(crate::db::now())
            .execute(e)
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// The record of `component` (`conductor`) in `db`.
    pub fn new(db: Db, component: &str) -> Self {
        DbVersionStore {
            db,
            component: component.to_owned(),
            fresh: Fresh::Manager,
        }
    }

    /// accel's record in `db` as a conductor opens it: when the database has none, the
    /// store's first `load` makes it, in one transaction under the version-record lock
    /// ([`Db::lock_version_record`]): at `at` when given, else at release N when the
    /// database holds Cyborg's rows (a Cyborg deployment taken in place or imported:
    /// its hosts run Cyborg 17) and at the newest release otherwise. Deciding under the
    /// lock, from what the database holds then, is what keeps a conductor that starts
    /// while `accel db import-cyborg` writes Cyborg's rows (the import takes the same
    /// lock) from opening the deployment at the newest release: it waits for the import
    /// and sees its rows, or makes its record first and the import is refused
    /// (`TargetPastReleaseN`).
    pub fn creating(db: Db, at: Option<AccelVersion>) -> Self {
        DbVersionStore {
            db,
            component: AccelVersion::COMPONENT.to_owned(),
            fresh: Fresh::Store(at),
        }
    }

    /// A transaction holding the version-record lock, taken first as every writer of
    /// the record takes it (one order, no deadlock).
    async fn begin_locked(&self) -> Result<DbTransaction, StoreError> {
        let mut tx = self.db.pool().begin().await.map_err(backend)?;
        self.db
            .lock_version_record(&mut tx)
            .await
            .map_err(backend)?;
        Ok(tx)
    }

    /// The stored record's text, through `e`.
    async fn read_record<'c, E>(&self, e: E) -> Result<Option<String>, StoreError>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        sqlx::query_scalar(
            &self
                .db
                .backend()
                .sql("SELECT record FROM component_versions WHERE component = $1"),
        )
        .bind(&self.component)
        .fetch_optional(e)
        .await
        .map_err(backend)
    }

    /// The stored record, or the one this store makes under the lock (see
    /// [`DbVersionStore::creating`]).
    async fn load_or_create(&self, at: Option<AccelVersion>) -> Result<PersistedState, StoreError> {
        let mut tx = self.begin_locked().await?;
        let held = self.read_record(&mut *tx).await?;
        if let Some(state) = self.parse(held)? {
            tx.commit().await.map_err(backend)?;
            return Ok(state);
        }
        let start = match at {
            Some(v) => v,
            None if crate::db::holds_cyborg_rows(&mut tx)
                .await
                .map_err(backend)? =>
            {
                AccelVersion::Initial
            }
            None => AccelVersion::software(),
        };
        let state = PersistedState {
            format: 1,
            component: self.component.clone(),
            apparent: start.number(),
            finalizing: None,
        };
        self.write(&state, &mut *tx).await?;
        tx.commit().await.map_err(backend)?;
        tracing::info!(component = %self.component, version = %start.label(), "fresh install: version record made");
        Ok(state)
    }
}

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(e))
}

impl DbVersionStore {
    /// The record in `text` (the `record` column), if any.
    fn parse(&self, text: Option<String>) -> Result<Option<PersistedState>, StoreError> {
        let Some(text) = text else { return Ok(None) };
        let state: PersistedState =
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                path: format!("component_versions/{}", self.component).into(),
                why: e.to_string(),
            })?;
        Ok(Some(state))
    }
}

#[async_trait]
impl VersionStore for DbVersionStore {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        let row = self.read_record(self.db.pool()).await?;
        match (row, self.fresh) {
            (None, Fresh::Store(at)) => self.load_or_create(at).await.map(Some),
            (row, _) => self.parse(row),
        }
    }

    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        self.write(state, self.db.pool()).await?;
        Ok(())
    }
}

#[async_trait]
impl TransactionalStore for DbVersionStore {
    type Tx = DbTransaction;

    /// Opens a transaction whose first statement writes (it touches the component's
    /// row), so SQLite takes its write lock before anything is read (the rule in
    /// [`crate::db`]: a deferred `BEGIN` followed by a write waits for the lock up to the
    /// busy timeout, like `BEGIN IMMEDIATE`, where a read first would fail to upgrade),
    /// and PostgreSQL holds the record's row lock until commit.
    async fn begin(&self) -> Result<DbTransaction, StoreError> {
        let mut tx = self.begin_locked().await?;
        sqlx::query(
            &self
                .db
                .backend()
                .sql("UPDATE component_versions SET updated_at = updated_at WHERE component = $1"),
        )
        .bind(&self.component)
        .execute(&mut *tx)
        .await
        .map_err(backend)?;
        Ok(tx)
    }

    /// Reads the record in `tx`, locked until `tx` ends. SQLite: `tx` took the database's
    /// write lock in [`begin`](TransactionalStore::begin), before any read, so a
    /// concurrent transaction waits in its own `begin` and then reads what this one
    /// committed. PostgreSQL: `SELECT ... FOR UPDATE` on the component's row (which
    /// `begin` already locked when the row exists).
    async fn load_in(&self, tx: &mut DbTransaction) -> Result<Option<PersistedState>, StoreError> {
        let sql = match self.db.backend() {
            Backend::Postgres | Backend::Mysql => {
                "SELECT record FROM component_versions WHERE component = $1 FOR UPDATE"
            }
            Backend::Sqlite => "SELECT record FROM component_versions WHERE component = $1",
        };
        let row = sqlx::query_scalar(&self.db.backend().sql(sql))
            .bind(&self.component)
            .fetch_optional(&mut **tx)
            .await
            .map_err(backend)?;
        self.parse(row)
    }

    async fn save_in(
        &self,
        tx: &mut DbTransaction,
        state: &PersistedState,
    ) -> Result<(), StoreError> {
        self.write(state, &mut **tx).await?;
        Ok(())
    }

    async fn commit(&self, tx: DbTransaction) -> Result<(), StoreError> {
        tx.commit().await.map_err(backend)
    }

    async fn rollback(&self, tx: DbTransaction) -> Result<(), StoreError> {
        tx.rollback().await.map_err(backend)
    }
}
