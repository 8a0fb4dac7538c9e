//! The fleet record in the conductor's database (`fleet_members`, migration 101): every
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
//!   transaction that first takes the row's shared lock (PostgreSQL `FOR SHARE`, MySQL
//!   `LOCK IN SHARE MODE`, which wait for a finalize decision to commit and then read
//!   what it wrote; SQLite: the upsert first, which takes the database's write lock,
//!   then the read), and checks the record before committing. So it either committed
//!   before the decision read the members (and is counted) or sees the decision (and is
//!   refused, then fenced).
//!
//! Other traffic than heartbeats (an inventory report, [`Heard::heartbeats`] false) says
//! a member is live but not what it runs: a member whose heartbeats are live keeps the
//! row its heartbeats wrote, untouched (so the row's age is its heartbeats'), and a
//! member never heard heartbeating, or whose heartbeats stopped longer than the
//! liveness ago while its reports go on (a host gone back to Cyborg 17's agent, which
//! sends none), is recorded at the assumed (oldest) versions, and so blocks
//! finalization, or after one is fenced (`REPORT_RULE`).
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

    /// The upsert of `heard` on PostgreSQL and SQLite, returning the software the row
    /// holds afterwards. A heartbeat replaces the row's versions and run, where
    /// [`verso_upgrade::fleet::run_order`] records it (the `WHERE` is that rule,
    /// [`RECORD_RULE`]; a heartbeat it drops returns no row); other traffic replaces
    /// them with the assumed ones unless the row's heartbeats are live
    /// ([`REPORT_RULE`]; then no row).
    fn upsert_sql(&self, heartbeats: bool) -> String {
        let now = now_ms(self.db.backend());
        let set = assignments(heartbeats, "");
        let rule = format!(" WHERE {}", upsert_rule(heartbeats));
        format!(
            "INSERT INTO fleet_members ({MEMBER_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, {now}, $8, $9) \
             ON CONFLICT (component, member_id) DO UPDATE SET {set}{rule} \
             RETURNING software"
        )
    }

    /// Writes `heard` in `conn` (on MySQL, which has neither `ON CONFLICT ... WHERE` nor
    /// `RETURNING` on an upsert, in a transaction the caller holds): the software the
    /// row holds afterwards, or `None` when [`RECORD_RULE`] dropped it.
    async fn write(
        &self,
        conn: &mut sqlx::AnyConnection,
        heard: &Heard<'_>,
    ) -> Result<Option<i64>, StoreError> {
        let b = self.db.backend();
        if b != Backend::Mysql {
            let sql = self.upsert_sql(heard.heartbeats);
            let row = bind(sqlx::query(&b.sql(&sql)), heard, true)
                .fetch_optional(&mut *conn)
                .await
                .map_err(backend)?;
            return row
                .map(|r| sqlx::Row::try_get::<i64, _>(&r, 0))
                .transpose()
                .map_err(backend);
        }
        // An update where the rule records it; a member with no row yet is inserted; an
        // insert that finds a row another conductor inserted meanwhile updates once more.
        let now = now_ms(b);
        let rule = format!(" WHERE {}", upsert_rule(heard.heartbeats));
        let update = format!(
            "UPDATE fleet_members JOIN (SELECT $1 AS component, $2 AS member_id, $3 AS host, \
             $4 AS software, $5 AS apparent, $6 AS heard_by, $7 AS heartbeats, \
             {now} AS last_seen_ms, $8 AS run_started_ms, $9 AS run_seq) AS excluded \
             ON fleet_members.component = excluded.component \
             AND fleet_members.member_id = excluded.member_id \
             SET {}{rule}",
            assignments(heard.heartbeats, "fleet_members.")
        );
        let insert = format!(
            "INSERT INTO fleet_members ({MEMBER_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, {now}, $8, $9)"
        );
        let mut inserted = false;
        for _ in 0..2 {
            let updated = bind(sqlx::query(&b.sql(&update)), heard, true)
                .execute(&mut *conn)
                .await
                .map_err(backend)?
                .rows_affected();
            if updated == 0 && !inserted {
                match bind(sqlx::query(&b.sql(&insert)), heard, false)
                    .execute(&mut *conn)
                    .await
                {
                    Ok(_) => {}
                    Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                        inserted = true;
                        continue;
                    }
                    Err(e) => return Err(backend(e)),
                }
            } else if updated == 0 {
                return Ok(None);
            }
            return sqlx::query_scalar(&b.sql(
                "SELECT software FROM fleet_members WHERE component = $1 AND member_id = $2",
            ))
            .bind(heard.component)
            .bind(heard.id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(backend);
        }
        Ok(None)
    }

    /// Why a heartbeat the upsert did not record was dropped: the stored run, by
    /// [`run_order`]. (The upsert's `WHERE` decided; this names the reason.)
    async fn not_recorded(&self, heard: &Heard<'_>) -> Result<Admission, StoreError> {
        let row: Option<(Option<i64>, Option<i64>, i64)> =
            sqlx::query_as(&self.db.backend().sql(&format!(
                "SELECT run_started_ms, run_seq, {} - last_seen_ms FROM fleet_members \
             WHERE component = $1 AND member_id = $2",
                now_ms(self.db.backend())
            )))
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
        let rows: Vec<LearnedRow> = sqlx::query_as(&self.db.backend().sql(&format!(
            "SELECT component, member_id, software, apparent, run_started_ms, \
             {now_sql} - last_seen_ms AS age_ms FROM fleet_members \
             WHERE heartbeats = 1 AND last_seen_ms > {now_sql} - $1"
        )))
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
        let mut tx = self.db.pool().begin().await.map_err(backend)?;
        let (stored, software) = match self.db.backend() {
            b @ (Backend::Postgres | Backend::Mysql) => {
                let lock = if b == Backend::Postgres {
                    "FOR SHARE"
                } else {
                    "LOCK IN SHARE MODE"
                };
                let row = sqlx::query_scalar(&b.sql(&format!(
                    "SELECT record FROM component_versions WHERE component = $1 {lock}"
                )))
                .bind(&self.component)
                .fetch_optional(&mut *tx)
                .await
                .map_err(backend)?;
                let stored = self.record_of(row)?;
                (stored, self.write(&mut tx, heard).await?)
            }
            Backend::Sqlite => {
                let software = self.write(&mut tx, heard).await?;
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
            if !heard.heartbeats {
                // A report of a member whose heartbeats are live: their row stands.
                return Ok(Admission::Superseded);
            }
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

/// The columns of `fleet_members` a write names, in the order it binds them.
const MEMBER_COLUMNS: &str = "component, member_id, host, software, apparent, heard_by, \
     heartbeats, last_seen_ms, run_started_ms, run_seq";

/// When a heartbeat replaces a member's row: [`verso_upgrade::fleet::run_order`] as SQL,
/// over the stored row (`fleet_members`) and the heartbeat's values (`excluded`), with
/// the liveness bound as `$10`.
const RECORD_RULE: &str = "excluded.run_started_ms IS NULL OR fleet_members.run_started_ms IS NULL \
     OR excluded.run_started_ms > fleet_members.run_started_ms \
     OR (excluded.run_started_ms = fleet_members.run_started_ms AND excluded.run_seq > fleet_members.run_seq) \
     OR (excluded.run_started_ms < fleet_members.run_started_ms \
         AND fleet_members.last_seen_ms < excluded.last_seen_ms - $10)";

/// When other traffic than a heartbeat (a report) rewrites a member's row: unless the
/// row was written by heartbeats within the liveness (`$10`). A live heartbeat outranks
/// a report, which an agent that heartbeats may send as well; a row whose heartbeats
/// stopped while reports go on is a member gone back to a release without heartbeats.
const REPORT_RULE: &str =
    "NOT (fleet_members.heartbeats = 1 AND fleet_members.last_seen_ms > excluded.last_seen_ms - $10)";

/// The rule of an upsert: [`RECORD_RULE`] for a heartbeat, [`REPORT_RULE`] for other
/// traffic.
fn upsert_rule(heartbeats: bool) -> &'static str {
    if heartbeats {
        RECORD_RULE
    } else {
        REPORT_RULE
    }
}

/// What a write of a member's row sets from the heard values (`excluded`), each column
/// written as `prefix` + its name: everything, and whether heartbeats wrote it.
fn assignments(heartbeats: bool, prefix: &str) -> String {
    let columns: &[&str] = &[
        "host",
        "software",
        "apparent",
        "heard_by",
        "last_seen_ms",
        "run_started_ms",
        "run_seq",
    ];
    let mut set: Vec<String> = columns
        .iter()
        .map(|c| format!("{prefix}{c} = excluded.{c}"))
        .collect();
    set.push(format!("{prefix}heartbeats = {}", i64::from(heartbeats)));
    set.join(", ")
}

/// `query` bound to `heard`'s values in [`MEMBER_COLUMNS`]' order (the time is the
/// database's), then the liveness when `liveness`.
fn bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    heard: &Heard<'q>,
    liveness: bool,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    let number = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let query = query
        .bind(heard.component)
        .bind(heard.id)
        .bind(heard.host)
        .bind(i64::from(heard.software))
        .bind(i64::from(heard.apparent))
        .bind(heard.heard_by)
        .bind(i64::from(heard.heartbeats))
        .bind(heard.incarnation.map(|r| number(r.started_ms)))
        .bind(heard.incarnation.map(|r| number(r.seq)));
    if liveness {
        query.bind(i64::try_from(heard.liveness.as_millis()).unwrap_or(i64::MAX))
    } else {
        query
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
                let written = if self.db.backend() == Backend::Mysql {
                    let mut tx = self.db.pool().begin().await.map_err(backend)?;
                    let written = self.write(&mut tx, heard).await?;
                    tx.commit().await.map_err(backend)?;
                    written
                } else {
                    let mut conn = self.db.pool().acquire().await.map_err(backend)?;
                    self.write(&mut conn, heard).await?
                };
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
        let rows = sqlx::query_as(&self.db.backend().sql(&self.members_sql()))
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
        let rows = sqlx::query_as(&self.db.backend().sql(&self.members_sql()))
            .fetch_all(&mut **tx)
            .await
            .map_err(backend)?;
        Self::parse(rows)
    }

    async fn forget(&self, component: &str, id: &str) -> Result<bool, StoreError> {
        self.written()
            .remove(&(component.to_owned(), id.to_owned()));
        let done = sqlx::query(
            &self
                .db
                .backend()
                .sql("DELETE FROM fleet_members WHERE component = $1 AND member_id = $2"),
        )
        .bind(component)
        .bind(id)
        .execute(self.db.pool())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() > 0)
    }
}
