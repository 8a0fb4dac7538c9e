//! Release N+1's schema on OpenStack Cyborg 17's: Cyborg's tables as Cyborg 17 makes
//! them (alembic revision [`ALEMBIC_HEAD`]), plus accel's additions
//! (`migrations-cyborg17/{sqlite,postgres,mysql}`, sqlx migrations numbered from 101).
//!
//! This is accel's schema (docs/cyborg-compatibility.md, "accel's schema on Cyborg
//! 17's"): a database a Cyborg 17 deployment made is taken in place (the additions
//! only), and Cyborg 17's own services, and accel's release N (Cyborg 17 in Rust), keep
//! running on it, because every addition to a Cyborg table has a default or may be null
//! and triggers fill accel's columns from what a Cyborg writer stores. [`Db::migrate`]
//! (`accel db sync`, every accel service's start) makes it in an empty database and
//! takes a Cyborg 17 database in place.
//!
//! How a database is recognised, before anything is written:
//! - no table at all: Cyborg 17's schema is made (stamped [`ALEMBIC_HEAD`], so Cyborg's
//!   own `cyborg-dbsync` sees it as its own), then the additions;
//! - `alembic_version` at [`ALEMBIC_HEAD`]: Cyborg 17's (or one made here): the additions
//!   it lacks are applied;
//! - accel's own former history (sqlx migrations 1-13, what accel made before its release
//!   N became Cyborg 17) is refused with [`DbError::AccelHistory`]: `accel db
//!   import-cyborg` copies its rows into an empty database;
//! - anything else is refused with [`DbError::NotOnCyborg17`] or
//!   [`DbError::CyborgDatabase`]: another Cyborg revision, tables of something else.

use super::ARQS;
use super::{Backend, Db, DbError};
use accel_cyborg17::schema::{ALEMBIC_HEAD, MYSQL, POSTGRES, SQLITE};
use accel_objects::AccelVersion;
use sqlx::migrate::Migrator;
use verso_upgrade::ComponentVersion;

/// What [`Db::sync_on_cyborg17`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnCyborg17 {
    /// Whether Cyborg 17's schema was made (the database was empty).
    pub made_cyborg_schema: bool,
    /// accel's additions applied now, by version.
    pub applied: Vec<i64>,
    /// Whether a conductor starting on this database opens the deployment at release N
    /// ([`Db::starts_at_release_n`]: Cyborg's rows and no accel version record): a
    /// deployment taken over from Cyborg, which finalizes once no host runs Cyborg 17.
    pub at_release_n: bool,
}

/// The first version of accel's additions to Cyborg's schema; accel's own former history
/// (migrations 1-13) stays below it, so the two are never mistaken for each other.
pub const FIRST_ADDITION: i64 = 101;

/// The versions of accel's additions to Cyborg's schema, in order: what `accel db sync`
/// applies to a Cyborg 17 database it takes in place (every backend has the same).
pub fn addition_versions() -> Vec<i64> {
    sqlx::migrate!("migrations-cyborg17/sqlite")
        .iter()
        .map(|m| m.version)
        .collect()
}

/// Whether the database holds Cyborg's rows (devices, device profiles or requests): a
/// Cyborg deployment's, whose hosts run release N ([`Db::starts_at_release_n`]).
pub(crate) async fn holds_cyborg_rows(conn: &mut sqlx::AnyConnection) -> Result<bool, DbError> {
    let rows: i64 = sqlx::query_scalar(&format!(
        "SELECT (SELECT COUNT(*) FROM devices) + (SELECT COUNT(*) FROM device_profiles) \
         + (SELECT COUNT(*) FROM {ARQS})"
    ))
    .fetch_one(conn)
    .await?;
    Ok(rows > 0)
}

impl Db {
    pub(super) fn additions(&self) -> Migrator {
        match self.backend {
            Backend::Sqlite => sqlx::migrate!("migrations-cyborg17/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations-cyborg17/postgres"),
            Backend::Mysql => sqlx::migrate!("migrations-cyborg17/mysql"),
        }
    }

    /// Makes the database release N+1's schema on Cyborg 17's (see the module's text);
    /// refuses, writing nothing, a database that is neither empty nor Cyborg 17's.
    pub async fn sync_on_cyborg17(&self) -> Result<OnCyborg17, DbError> {
        let made_cyborg_schema = self.cyborg17_or_empty().await?;
        let applied = self.apply_additions().await?;
        let at_release_n = !made_cyborg_schema && self.starts_at_release_n().await?;
        Ok(OnCyborg17 {
            made_cyborg_schema,
            applied,
            at_release_n,
        })
    }

    /// Whether a conductor starting on this database opens the deployment at release N
    /// (Cyborg 17): it holds no accel version record (no accel conductor has started
    /// on it) and Cyborg's rows (devices, device profiles or accelerator requests), so
    /// it is a Cyborg deployment's database, taken in place or imported, whose hosts run
    /// Cyborg 17 until accel's agents replace them. A database without Cyborg's rows
    /// starts at the newest release (a fresh install: nothing to migrate). Decided from
    /// what the database holds, not from what one run of `db sync` saw, so a crash
    /// between steps or conductors starting together cannot lose it: each decides the
    /// same.
    pub async fn starts_at_release_n(&self) -> Result<bool, DbError> {
        let d = self.backend();
        let record: i64 = sqlx::query_scalar(
            &d.sql("SELECT COUNT(*) FROM component_versions WHERE component = $1"),
        )
        .bind(AccelVersion::COMPONENT)
        .fetch_one(&self.pool)
        .await?;
        if record > 0 {
            return Ok(false);
        }
        let mut conn = self.pool.acquire().await?;
        holds_cyborg_rows(&mut conn).await
    }

    /// Takes, in `tx`, the lock that serializes writers of the version record: a
    /// conductor making the record of a database that has none
    /// ([`crate::DbVersionStore::creating`]), every locked read-modify-write of it (its
    /// `begin`), and `accel db import-cyborg`, whose rows decide the release a fresh
    /// record starts at. Held until `tx` ends. PostgreSQL: a transaction-scoped advisory
    /// lock; MySQL: a row of `report_locks` (migration 101) no host name can be; SQLite:
    /// the database's write lock, taken by a first write.
    pub async fn lock_version_record(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    ) -> Result<(), DbError> {
        const KEY: &str = "~accel-version-record";
        let sql = match self.backend {
            Backend::Postgres => {
                "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))::text AS locked"
            }
            Backend::Mysql => {
                "INSERT INTO report_locks (hostname) VALUES ($1) \
                 ON DUPLICATE KEY UPDATE hostname = hostname"
            }
            Backend::Sqlite => {
                "UPDATE component_versions SET updated_at = updated_at WHERE component = $1"
            }
        };
        let query = self.backend.sql(sql);
        if self.backend == Backend::Postgres {
            sqlx::query(&query).bind(KEY).fetch_one(&mut **tx).await?;
        } else {
            sqlx::query(&query).bind(KEY).execute(&mut **tx).await?;
        }
        Ok(())
    }

    /// accel's additions the database (at Cyborg 17's revision) lacks, applied; their
    /// versions. Refused, unwritten, if it holds accel's own history too.
    async fn apply_additions(&self) -> Result<Vec<i64>, DbError> {
        let applied_before = self.applied_migrations().await?;
        if let Some(old) = applied_before.iter().find(|v| **v < FIRST_ADDITION) {
            return Err(DbError::NotOnCyborg17 {
                found: format!("Cyborg 17's schema with accel's own migration {old} applied"),
                hint: "this database mixes the two histories; restore it from a backup",
            });
        }
        let additions = self.additions();
        additions.run(&self.pool).await?;
        Ok(additions
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied_before.contains(v))
            .collect())
    }

    /// Whether the database is empty (then Cyborg 17's schema is made in it, and
    /// `true`) or at Cyborg 17's revision (`false`); anything else is refused, unwritten.
    async fn cyborg17_or_empty(&self) -> Result<bool, DbError> {
        Ok(match self.alembic_revision().await? {
            Some(revision) if revision == ALEMBIC_HEAD => false,
            Some(revision) => return Err(DbError::CyborgDatabase { revision }),
            None if self.table_exists("_sqlx_migrations").await? => {
                return Err(DbError::AccelHistory {
                    applied: self.applied_migrations().await?.into_iter().collect(),
                })
            }
            None if self.has_tables().await? => {
                return Err(DbError::NotOnCyborg17 {
                    found: "tables of neither Cyborg nor accel".into(),
                    hint: "use an empty database",
                })
            }
            None => {
                self.make_cyborg_schema().await?;
                true
            }
        })
    }

    /// The revision `alembic_version` holds, if the table exists (`none` if it is
    /// empty).
    async fn alembic_revision(&self) -> Result<Option<String>, DbError> {
        if !self.table_exists("alembic_version").await? {
            return Ok(None);
        }
        // MySQL hands a VARCHAR of a table in a binary-compatible character set over as
        // bytes through the Any driver: read it as text.
        let sql = match self.backend {
            Backend::Mysql => "SELECT CAST(version_num AS CHAR) FROM alembic_version",
            _ => "SELECT version_num FROM alembic_version",
        };
        let revision: Option<String> = sqlx::query_scalar(sql).fetch_optional(&self.pool).await?;
        Ok(Some(revision.unwrap_or_else(|| "none".into())))
    }

    pub(super) async fn has_tables(&self) -> Result<bool, DbError> {
        let sql = match self.backend {
            Backend::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()"
            }
            Backend::Mysql => {
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
            }
        };
        let n: i64 = sqlx::query_scalar(sql).fetch_one(&self.pool).await?;
        Ok(n > 0)
    }

    /// Cyborg 17's schema in an empty database, in one transaction where the database
    /// has transactional DDL (SQLite, PostgreSQL). MySQL commits each `CREATE TABLE`: a
    /// failure half-way leaves tables without the alembic stamp (written last), which the
    /// next attempt refuses rather than guess at.
    async fn make_cyborg_schema(&self) -> Result<(), DbError> {
        let script = match self.backend {
            Backend::Sqlite => SQLITE,
            Backend::Postgres => POSTGRES,
            Backend::Mysql => MYSQL,
        };
        let mut tx = self.pool.begin().await?;
        sqlx::raw_sql(script).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }
}
