//! The fleet record in the conductor's database (`fleet_members`, migration 3): every
//! agent any conductor of the deployment heard of, with its software and apparent
//! version, when (the database's clock) and through which conductor, so that
//! finalization is decided on the whole fleet by whichever conductor the operator's
//! `finalize` reaches ([`verso_upgrade::FleetStore`]).
//!
//! The record and the version record (`component_versions`) are one database, so the
//! invariant is two locks on the version record's row:
//!
//! - finalize decides in a [`DbVersionStore`](crate::DbVersionStore) transaction, which
//!   took the row's write lock (`begin` writes it; PostgreSQL `SELECT ... FOR UPDATE`),
//!   and reads the members in it ([`FleetStore::members_in`]);
//! - an agent on older software (and any report of an agent) is recorded in a
//!   transaction that first takes the row's shared lock (PostgreSQL `FOR SHARE`, which
//!   waits for a finalize decision to commit and then reads what it wrote; SQLite: the
//!   upsert first, which takes the database's write lock, then the read), and checks the
//!   record before committing. So it either committed before the decision read the
//!   members (and is counted) or sees the decision (and is refused, then fenced).
//!
//! An agent on the newest software cannot block finalization: its heartbeat is one
//! upsert, no lock. And with [`DbFleetStore::with_write_interval`] (the conductor's:
//! a quarter of the agents' liveness), a heartbeat that repeats what this conductor
//! wrote for the member within the interval (same software, same apparent version) is
//! not written again: the row already says it, and only its last-seen time would move,
//! so a live member's row is at most one interval older than its last heartbeat, well
//! inside its liveness. Every change is written before the reply, as is every record of
//! older software (checked, never skipped), and a checked record forgets what this
//! conductor wrote for the member; so a skipped write never hides a member's older
//! software: at worst the row shows older software than the member now runs, which
//! only blocks (the safe side).
//!
//! Several conductors share one queue, so an agent's heartbeats go to each in turn, and
//! a conductor alone would write most of them (it last wrote that member longer ago than
//! the interval, or never). [`DbFleetStore::learn`] (the conductor runs it every few
//! seconds) takes what *any* conductor wrote within the interval from the record
//! itself: a row heartbeats wrote, with its versions, run and the time it was last seen,
//! counts as written at that time. The rule above holds unchanged: a skip still means the
//! row says exactly what the heartbeat says and was written less than the interval ago,
//! and only a member on the newest software is ever skipped.

use crate::db::{Backend, Db};
use async_trait::async_trait;
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use verso_upgrade::fleet::{
    run_order, Admission, Admit, FleetMember, FleetStore, Heard, Incarnation, RunOrder,
};
use verso_upgrade::store::{PersistedState, StoreError};

/// The fleet record over the conductor's database, beside the version record of
/// `component` (`accel`).
#[derive(Clone, Debug)]
pub struct DbFleetStore {
    db: Db,
    component: String,
    /// Heartbeats repeating what was written within this long are not written again.
    write_interval: Duration,
    /// What this store last wrote for each newest-software member, and when.
    written: Arc<Mutex<HashMap<(String, String), Written>>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Written {
    software: u32,
    apparent: u32,
    /// The run it came from: a new run is always written.
    run: Option<u64>,
    at: Instant,
}

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(e))
}

use crate::db::now_ms;

/// A row of `fleet_members` as [`DbFleetStore::members_sql`] selects it.
#[derive(sqlx::FromRow)]
struct MemberRow {
    component: String,
    member_id: String,
    host: String,
    software: i64,
    apparent: i64,
    heard_by: String,
    heartbeats: i64,
    age_ms: i64,
}

/// A row of `fleet_members` as [`DbFleetStore::learn`] selects it.
#[derive(sqlx::FromRow)]
struct LearnedRow {
    component: String,
    member_id: String,
    software: i64,
    apparent: i64,
    run_started_ms: Option<i64>,
    age_ms: i64,
}

impl DbFleetStore {
    /// The fleet record in `db`, beside the version record of `component`.
    pub fn new(db: Db, component: &str) -> Self {
        DbFleetStore {
            db,
            component: component.to_owned(),
            write_interval: Duration::ZERO,
            written: Arc::default(),
        }
    }

    /// Heartbeats of a member on the newest software that repeat what this store wrote
    /// for it less than `interval` ago are not written again (see the module docs);
    /// zero (the default) writes every one.
    pub fn with_write_interval(mut self, interval: Duration) -> Self {
        self.write_interval = interval;
        self
    }

    /// The write interval ([`DbFleetStore::with_write_interval`]).
    pub fn write_interval(&self) -> Duration {
        self.write_interval
    }

    fn written(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Written>> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn key(heard: &Heard<'_>) -> (String, String) {
        (heard.component.to_owned(), heard.id.to_owned())
    }

    /// The upsert of `heard`, returning the software the row holds afterwards. A
    /// heartbeat replaces the row's versions and run, where
    /// [`verso_upgrade::fleet::run_order`] records it (the `WHERE` is that rule; a
    /// heartbeat it drops returns no row); other traffic only refreshes when and by
    /// whom, except on a row no heartbeat ever wrote.
    fn upsert_sql(&self, heartbeats: bool) -> String {
        let now = now_ms(self.db.backend());
        let on_conflict = if heartbeats {
            "host = excluded.host, software = excluded.software, apparent = excluded.apparent, \
             heard_by = excluded.heard_by, heartbeats = 1, last_seen_ms = excluded.last_seen_ms, \
             run_started_ms = excluded.run_started_ms, run_seq = excluded.run_seq \
             WHERE excluded.run_started_ms IS NULL OR fleet_members.run_started_ms IS NULL \
             OR excluded.run_started_ms > fleet_members.run_started_ms \
             OR (excluded.run_started_ms = fleet_members.run_started_ms AND excluded.run_seq > fleet_members.run_seq) \
             OR (excluded.run_started_ms < fleet_members.run_started_ms \
                 AND fleet_members.last_seen_ms < excluded.last_seen_ms - $10)"
        } else {
            "heard_by = excluded.heard_by, last_seen_ms = excluded.last_seen_ms"
        };
        format!(
            "INSERT INTO fleet_members (component, member_id, host, software, apparent, heard_by, heartbeats, last_seen_ms, run_started_ms, run_seq) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, {now}, $8, $9) \
             ON CONFLICT (component, member_id) DO UPDATE SET {on_conflict} \
             RETURNING software"
        )
    }

    /// Why a heartbeat the upsert did not record was dropped: the stored run, by
    /// [`run_order`]. (The upsert's `WHERE` decided; this names the reason.)
    async fn not_recorded(&self, heard: &Heard<'_>) -> Result<Admission, StoreError> {
        let row: Option<(Option<i64>, Option<i64>, i64)> = sqlx::query_as(&format!(
            "SELECT run_started_ms, run_seq, {} - last_seen_ms FROM fleet_members \
             WHERE component = $1 AND member_id = $2",
            now_ms(self.db.backend())
        ))
        .bind(heard.component)
        .bind(heard.id)
        .fetch_optional(self.db.pool())
        .await
        .map_err(backend)?;
        let (recorded, age) = match row {
            Some((Some(started), Some(seq), age)) => (
                Some(Incarnation {
                    started_ms: u64::try_from(started).unwrap_or(0),
                    seq: u64::try_from(seq).unwrap_or(0),
                }),
                Duration::from_millis(u64::try_from(age).unwrap_or(0)),
            ),
            _ => (None, Duration::ZERO),
        };
        Ok(
            match run_order(heard.incarnation, recorded, age, heard.liveness) {
                RunOrder::Earlier(reason) => Admission::Refused(reason),
                // Superseded, or the row changed since the upsert: nothing was written.
                RunOrder::Superseded | RunOrder::Record => Admission::Superseded,
            },
        )
    }

    /// Takes what any conductor wrote from heartbeats within the write interval from the
    /// record, as if this store had written it then (see the module docs): its
    /// heartbeats repeating a row another conductor wrote are then not written again.
    /// An entry of this store with the same versions keeps the later time; one whose
    /// versions the record no longer has is replaced by the record's. The number of rows
    /// read.
    pub async fn learn(&self) -> Result<usize, StoreError> {
        if self.write_interval.is_zero() {
            return Ok(0);
        }
        let window = i64::try_from(self.write_interval.as_millis()).unwrap_or(i64::MAX);
        let now_sql = now_ms(self.db.backend());
        let rows: Vec<LearnedRow> = sqlx::query_as(&format!(
            "SELECT component, member_id, software, apparent, run_started_ms, \
             {now_sql} - last_seen_ms AS age_ms FROM fleet_members \
             WHERE heartbeats = 1 AND last_seen_ms > {now_sql} - $1"
        ))
        .bind(window)
        .fetch_all(self.db.pool())
        .await
        .map_err(backend)?;
        let read = rows.len();
        let now = Instant::now();
        let mut written = self.written();
        for r in rows {
            let (Ok(software), Ok(apparent)) =
                (u32::try_from(r.software), u32::try_from(r.apparent))
            else {
                // Not a version: never a repeat of a heartbeat; `members` reports it.
                continue;
            };
            // A clock step backwards reads as just written.
            let age = Duration::from_millis(u64::try_from(r.age_ms).unwrap_or(0));
            let Some(at) = now.checked_sub(age) else {
                continue;
            };
            let learned = Written {
                software,
                apparent,
                run: r.run_started_ms.and_then(|t| u64::try_from(t).ok()),
                at,
            };
            // The row is the record as it is now: one that says other versions than this
            // store's entry was written since, whatever the two times say (they are a
            // millisecond apart at most when two conductors write in quick succession,
            // and the database's milliseconds cannot order them against this process's
            // clock). The same versions keep the later time.
            written
                .entry((r.component, r.member_id))
                .and_modify(|w| {
                    let same = (w.software, w.apparent, w.run)
                        == (learned.software, learned.apparent, learned.run);
                    if !same || w.at < at {
                        *w = learned;
                    }
                })
                .or_insert(learned);
        }
        Ok(read)
    }

    fn members_sql(&self) -> String {
        format!(
            "SELECT component, member_id, host, software, apparent, heard_by, heartbeats, \
             {} - last_seen_ms AS age_ms FROM fleet_members ORDER BY component, member_id",
            now_ms(self.db.backend())
        )
    }

    fn parse(rows: Vec<MemberRow>) -> Result<Vec<FleetMember>, StoreError> {
        rows.into_iter()
            .map(|r| {
                let number = |col: &str, n: i64| -> Result<u32, StoreError> {
                    u32::try_from(n).map_err(|_| StoreError::Corrupt {
                        path: "fleet_members".into(),
                        why: format!("{col} {n} is not a version number"),
                    })
                };
                Ok(FleetMember {
                    software: number("software", r.software)?,
                    apparent: number("apparent", r.apparent)?,
                    component: r.component,
                    id: r.member_id,
                    host: r.host,
                    heard_by: r.heard_by,
                    heartbeats: r.heartbeats != 0,
                    // A clock step backwards reads as just seen.
                    age: Duration::from_millis(u64::try_from(r.age_ms).unwrap_or(0)),
                })
            })
            .collect()
    }

    /// The upsert of `heard` ([`Self::upsert_sql`]), returning the row's `software`
    /// column.
    fn bind<'q>(
        sql: &'q str,
        heard: &Heard<'q>,
    ) -> sqlx::query::QueryScalar<'q, sqlx::Any, i64, sqlx::any::AnyArguments<'q>> {
        let number = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let query = sqlx::query_scalar(sql)
            .bind(heard.component)
            .bind(heard.id)
            .bind(heard.host)
            .bind(i64::from(heard.software))
            .bind(i64::from(heard.apparent))
            .bind(heard.heard_by)
            .bind(i64::from(heard.heartbeats))
            .bind(heard.incarnation.map(|r| number(r.started_ms)))
            .bind(heard.incarnation.map(|r| number(r.seq)));
        if heard.heartbeats {
            query.bind(i64::try_from(heard.liveness.as_millis()).unwrap_or(i64::MAX))
        } else {
            query
        }
    }

    fn record_of(&self, text: Option<String>) -> Result<Option<PersistedState>, StoreError> {
        let Some(text) = text else { return Ok(None) };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: format!("component_versions/{}", self.component).into(),
                why: e.to_string(),
            })
    }

    /// [`FleetStore::record`] with an admission check, in one transaction (see the
    /// module docs for the order of its statements on each backend).
    async fn record_checked(
        &self,
        heard: &Heard<'_>,
        admit: &Admit,
    ) -> Result<Admission, StoreError> {
        let upsert = self.upsert_sql(heard.heartbeats);
        let mut tx = self.db.pool().begin().await.map_err(backend)?;
        let (stored, software) = match self.db.backend() {
            Backend::Postgres => {
                let row = sqlx::query_scalar(
                    "SELECT record FROM component_versions WHERE component = $1 FOR SHARE",
                )
                .bind(&self.component)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
                let stored = self.record_of(row)?;
                let software: Option<i64> = Self::bind(&upsert, heard)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(backend)?;
                (stored, software)
            }
            Backend::Sqlite => {
                let software: Option<i64> = Self::bind(&upsert, heard)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(backend)?;
                let row = sqlx::query_scalar(
                    "SELECT record FROM component_versions WHERE component = $1",
                )
                .bind(&self.component)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
                (self.record_of(row)?, software)
            }
        };
        let Some(software) = software else {
            tx.rollback().await.map_err(backend)?;
            return self.not_recorded(heard).await;
        };
        let software = u32::try_from(software).unwrap_or(0);
        match admit(stored.as_ref(), software) {
            Ok(()) => {
                tx.commit().await.map_err(backend)?;
                Ok(Admission::Recorded)
            }
            Err(reason) => {
                tx.rollback().await.map_err(backend)?;
                Ok(Admission::Refused(reason))
            }
        }
    }
}

#[async_trait]
impl FleetStore for DbFleetStore {
    async fn record(
        &self,
        heard: &Heard<'_>,
        admit: Option<&Admit>,
    ) -> Result<Admission, StoreError> {
        match admit {
            Some(admit) => {
                // Whatever it runs now, the row is what this write leaves.
                self.written().remove(&Self::key(heard));
                self.record_checked(heard, admit).await
            }
            None => {
                let now = Instant::now();
                let repeats = heard.heartbeats
                    && !self.write_interval.is_zero()
                    && self.written().get(&Self::key(heard)).is_some_and(|w| {
                        w.software == heard.software
                            && w.apparent == heard.apparent
                            && w.run == heard.incarnation.map(|r| r.started_ms)
                            && now.duration_since(w.at) < self.write_interval
                    });
                if repeats {
                    return Ok(Admission::Recorded);
                }
                let upsert = self.upsert_sql(heard.heartbeats);
                let written: Option<i64> = Self::bind(&upsert, heard)
                    .fetch_optional(self.db.pool())
                    .await
                    .map_err(backend)?;
                if written.is_none() {
                    self.written().remove(&Self::key(heard));
                    return self.not_recorded(heard).await;
                }
                if heard.heartbeats && !self.write_interval.is_zero() {
                    self.written().insert(
                        Self::key(heard),
                        Written {
                            software: heard.software,
                            apparent: heard.apparent,
                            run: heard.incarnation.map(|r| r.started_ms),
                            at: now,
                        },
                    );
                }
                Ok(Admission::Recorded)
            }
        }
    }

    async fn members(&self) -> Result<Vec<FleetMember>, StoreError> {
        let rows = sqlx::query_as(&self.members_sql())
            .fetch_all(self.db.pool())
            .await
            .map_err(backend)?;
        Self::parse(rows)
    }

    async fn members_in(&self, tx: &mut (dyn Any + Send)) -> Result<Vec<FleetMember>, StoreError> {
        let Some(tx) = tx.downcast_mut::<crate::DbTransaction>() else {
            return Err(StoreError::Backend(
                "the fleet record is read in a transaction of the conductor's database, not of another store".into(),
            ));
        };
        let rows = sqlx::query_as(&self.members_sql())
            .fetch_all(&mut **tx)
            .await
            .map_err(backend)?;
        Self::parse(rows)
    }

    async fn forget(&self, component: &str, id: &str) -> Result<bool, StoreError> {
        self.written()
            .remove(&(component.to_owned(), id.to_owned()));
        let done = sqlx::query("DELETE FROM fleet_members WHERE component = $1 AND member_id = $2")
            .bind(component)
            .bind(id)
            .execute(self.db.pool())
            .await
            .map_err(backend)?;
        Ok(done.rows_affected() > 0)
    }
}
