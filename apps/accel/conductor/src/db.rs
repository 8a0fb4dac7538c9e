//! The conductor's database: SQLite (a file, created and migrated on first start) or
//! PostgreSQL, chosen by URL, through sqlx's Any driver; one schema, one set of queries.
//!
//! Rules the queries keep, on both backends:
//! - every state change of an accelerator request is a conditional update on the
//!   allowed predecessor states ([`ArqState::allowed_from`]); a request that moved
//!   meanwhile is a typed [`DbError::InvalidTransition`], never overwritten;
//! - an attach handle is taken by `UPDATE ... SET in_use = 1 WHERE id = ? AND in_use = 0`,
//!   so of two conductors racing for one handle exactly one gets it;
//! - every write transaction starts with a write, so SQLite takes its write lock first
//!   (waiting up to its busy timeout) instead of failing a read-to-write upgrade;
//! - reports of one host are applied one after the other (see [`Db::report`]).
//!
//! # Migrations: expand before finalization, contract after
//!
//! A release's migrations (`migrations/{sqlite,postgres}`) run before that release is
//! finalized, while the previous release may still run, or be rolled back to, on the
//! same database (the downgrade window: release N's conductor starts on a database these
//! migrations expanded, until the `accel` record is finalized). So they **only add**:
//! new tables, and new columns that are nullable or have a default, which the previous
//! release's inserts fill by default and its reads never name. Anything that removes or
//! rewrites (drop or rename a column or table, `NOT NULL` without a default, change a
//! type, move or rewrite data, a constraint old rows or old writers may break) waits for
//! a later release, after this one is finalized; the previous release then can no longer
//! start. Queries name their columns (no `SELECT *`, no positional `INSERT`). A migration
//! file is never edited once released (sqlx checks the checksums it recorded), so the
//! rule lives here and in `docs/architecture.md` (Conventions), not in the SQL.

use crate::lifecycle::ArqState;
use serde::{Deserialize, Serialize};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite://path` (created if missing).
    Sqlite,
    /// `postgres://user:pass@host/db`.
    Postgres,
}

/// Errors of the database layer.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL names no supported database.
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://USER:PASS@HOST/DB")]
    UnsupportedUrl(String),
    /// The database could not be reached or opened.
    #[error("cannot open the database {url}: {source}")]
    Connect {
        /// The URL, password masked.
        url: String,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
    /// Applying the schema migrations failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query failed.
    #[error("database query failed: {0}")]
    Query(#[from] sqlx::Error),
    /// Nothing has that id.
    #[error("{kind} {id} not found")]
    NotFound {
        /// What was looked for.
        kind: &'static str,
        /// Its id or name.
        id: String,
    },
    /// A unique name is taken.
    #[error("{kind} {name:?} already exists")]
    Duplicate {
        /// What.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// The request is not in a state that allows the change.
    #[error("accelerator request {uuid} is {from}, which cannot become {to}")]
    InvalidTransition {
        /// The request.
        uuid: String,
        /// Its current state.
        from: ArqState,
        /// The state asked for.
        to: ArqState,
    },
    /// No free device matches the request on that host.
    #[error("no free {device_type} on host {host} for accelerator request {uuid}")]
    NoFreeHandle {
        /// The request.
        uuid: String,
        /// The host.
        host: String,
        /// The device type its profile asks for.
        device_type: String,
    },
    /// An attach handle changed since the caller read it (compare-and-swap lost).
    #[error("attach handle {uuid} changed since it was read (revision {expected}, now {found}): read it again")]
    StaleHandle {
        /// The handle.
        uuid: String,
        /// The revision the caller read.
        expected: i64,
        /// The revision it has now.
        found: i64,
    },
    /// The handle is allocated to an instance: its metadata cannot change.
    #[error(
        "attach handle {uuid} is allocated to instance {instance}: it cannot change while in use"
    )]
    HandleInUse {
        /// The handle.
        uuid: String,
        /// The instance it is bound to.
        instance: String,
    },
    /// A cleanup result for a handle that is not being cleaned (any more).
    #[error(
        "attach handle {uuid} is not cleaning (cleanup state {state}): the result was not recorded"
    )]
    NotCleaning {
        /// The handle.
        uuid: String,
        /// Its cleanup state (`none` when available).
        state: String,
    },
    /// A device profile is still used by requests.
    #[error("device profile {0:?} is used by accelerator requests; delete them first")]
    ProfileInUse(String),
    /// Input the database refuses.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// What was invalid.
        what: &'static str,
        /// Why.
        why: String,
    },
}

impl DbError {
    /// Whether the database could not be reached or is gone (down, restarting, dropped,
    /// a file that cannot be opened or read): a retry later may succeed. Clients get 503.
    pub fn is_unavailable(&self) -> bool {
        match self {
            DbError::Connect { .. } => true,
            DbError::Query(e) => unavailable(e),
            DbError::Migrate(sqlx::migrate::MigrateError::Execute(e)) => unavailable(e),
            _ => false,
        }
    }

    fn from_insert(e: sqlx::Error, kind: &'static str, name: &str) -> DbError {
        match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => DbError::Duplicate {
                kind,
                name: shown(name),
            },
            _ => DbError::Query(e),
        }
    }
}

/// Whether a sqlx error means the database is out of reach rather than refusing this
/// query.
fn unavailable(e: &sqlx::Error) -> bool {
    match e {
        // A protocol error is a connection whose bytes made no sense: seen while
        // PostgreSQL restarts (`unexpected response from SSLRequest: 0x00` on connect),
        // never caused by a query's content.
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => {
            let code = d.code().unwrap_or_default();
            if d.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                // SQLite's primary codes (the low byte of the extended code): 3 PERM,
                // 8 READONLY, 10 IOERR, 14 CANTOPEN, 26 NOTADB: the file went away or
                // cannot be read or written.
                code.parse::<i32>()
                    .is_ok_and(|c| matches!(c & 0xff, 3 | 8 | 10 | 14 | 26))
            } else {
                // PostgreSQL's SQLSTATE: class 08 (connection exception), 57P01-57P03
                // (shutting down, cannot connect now), 3D000 (the database was dropped),
                // 53300 (too many connections).
                code.starts_with("08")
                    || code.starts_with("57P")
                    || code == "3D000"
                    || code == "53300"
            }
        }
        _ => false,
    }
}

/// What an agent reports of one device (a physical function and its handles).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedDevice {
    /// The PCI address of the physical function: the key reports are diffed by.
    pub control_path_id: String,
    /// `GPU`, `FPGA`, `AICHIP`, `QAT`, `NIC`, `SSD`.
    pub device_type: String,
    /// Vendor id.
    pub vendor: String,
    /// Model (device id or model text).
    pub model: String,
    /// Board details as JSON text.
    pub std_board_info: Option<String>,
    /// The bound driver.
    pub driver_name: Option<String>,
    /// What can be attached to a guest: (attach type, attach info).
    pub handles: Vec<(String, String)>,
    /// The deployable's attributes (Cyborg's `attribute_list`: `rc`, `trait0`, ...),
    /// kept as rows of `attributes` ([`AttributeRow`]). A report owns the keys it
    /// reports: it sets their values, and deletes the keys the host's previous report
    /// had and this one has not; keys created through the API that no report names
    /// stay.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// The deployable's name as the agent's driver gives it (a Cyborg agent's; Cyborg
    /// names its Placement provider after it); `None`: `<host>_<control path>`, accel's.
    #[serde(default)]
    pub deployable_name: Option<String>,
    /// The vendor's board details (JSON text), as a Cyborg agent reports them.
    #[serde(default)]
    pub vendor_board_info: Option<String>,
}

impl ReportedDevice {
    /// The name its deployable gets on `host`.
    pub fn deployable_name_on(&self, host: &str) -> String {
        self.deployable_name
            .clone()
            .unwrap_or_else(|| format!("{host}_{}", self.control_path_id))
    }
}

/// What a report changed, by control-path id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportOutcome {
    /// New devices.
    pub added: Vec<String>,
    /// Devices whose fields or handles changed (or that came back after being lost).
    pub updated: Vec<String>,
    /// Devices the report no longer has, deleted.
    pub removed: Vec<String>,
    /// Devices in use whose loss a second report confirmed (they were already
    /// `missing`, or `lost`): kept, marked `lost`.
    pub lost: Vec<String>,
    /// Devices in use that this report drops (the device or an in-use handle is not in
    /// it) for the first time: kept and marked `missing`, not `lost`, until the host's
    /// next report confirms it. One report, spurious or forged, cannot take an in-use
    /// device away.
    #[serde(default)]
    pub unconfirmed: Vec<String>,
    /// Devices reported as they are.
    pub unchanged: usize,
}

/// A device row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Device type.
    pub device_type: String,
    /// Vendor.
    pub vendor: String,
    /// Model.
    pub model: String,
    /// Board details.
    pub std_board_info: Option<String>,
    /// Host.
    pub hostname: String,
    /// Vendor board details.
    pub vendor_board_info: Option<String>,
    /// `available`; `missing` (in use, and the host's last report lacked it or one of
    /// its in-use handles: not given to new requests); `lost` (a second report
    /// confirmed it).
    pub status: String,
    /// Taken out of service by an operator (Cyborg's `maintaining`, after
    /// `POST /v2/devices/{uuid}/disable`): given to no new request.
    #[serde(default)]
    pub maintaining: bool,
    /// Created.
    pub created_at: String,
    /// Last changed.
    pub updated_at: String,
}

/// A deployable row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployableRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Name.
    pub name: String,
    /// Its device.
    pub device_id: i64,
    /// Host.
    pub hostname: String,
    /// PCI address.
    pub control_path_id: String,
    /// Accelerators it offers.
    pub num_accelerators: i64,
    /// Driver.
    pub driver_name: Option<String>,
    /// Usable.
    pub enabled: bool,
    /// Its resource provider in Placement: [`rp_uuid`] of its name, so the same
    /// deployable has the same provider whichever conductor (or Cyborg) reports it.
    #[serde(default)]
    pub rp_uuid: String,
    /// Its attributes by key ([`AttributeRow`]), as Cyborg shows them in a deployable's
    /// `attributes_list`.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Creation time.
    #[serde(default)]
    pub created_at: String,
    /// Last change.
    #[serde(default)]
    pub updated_at: String,
}

/// The resource provider UUID of the deployable named `name`: a name-based UUID
/// (version 3, DNS namespace), the one Cyborg 17's conductor gives the provider it
/// makes for a deployable, so a deployment moved from Cyborg keeps its providers.
pub fn rp_uuid(name: &str) -> String {
    uuid::Uuid::new_v3(&uuid::Uuid::NAMESPACE_DNS, name.as_bytes()).to_string()
}

/// An attribute of a deployable (Cyborg's `attributes` table and `/v2/attributes`):
/// reported by its host's agent (see [`ReportedDevice::attributes`]) or created by an
/// operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable ([`DeployableRow::id`]).
    pub deployable_id: i64,
    /// Key (`rc`, `trait0`, ...), unique per deployable.
    pub key: String,
    /// Value.
    pub value: String,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

/// An attach handle row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachHandleRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable.
    pub deployable_id: i64,
    /// Taken by a request.
    pub in_use: bool,
    /// `PCI`, ...
    pub attach_type: String,
    /// JSON text (the PCI address).
    pub attach_info: String,
}

/// A device profile row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceProfileRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Unique name.
    pub name: String,
    /// Groups: each a map such as `{"resources:FPGA": "1", "trait:CUSTOM_X": "required"}`.
    pub groups: Vec<BTreeMap<String, String>>,
    /// Description.
    pub description: Option<String>,
    /// Created.
    pub created_at: String,
}

/// An accelerator request row, with its attach handle when bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArqRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Lifecycle state.
    pub state: ArqState,
    /// Its profile.
    pub device_profile_name: String,
    /// The profile group it satisfies.
    pub device_profile_group_id: i64,
    /// Host, once binding.
    pub hostname: Option<String>,
    /// Resource provider, once binding.
    pub device_rp_uuid: Option<String>,
    /// Instance, once binding.
    pub instance_uuid: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// The handle's UUID, when bound.
    pub attach_handle_uuid: Option<String>,
    /// The handle's type, when bound.
    pub attach_handle_type: Option<String>,
    /// The handle's info, when bound.
    pub attach_handle_info: Option<String>,
    /// Created (always set by this release; unset when read by release N's API).
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last changed (as `created_at`).
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// A page of a list: rows after `marker` (a UUID), at most `limit`, optionally one host's.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    /// Only this host's rows.
    pub host: Option<String>,
    /// At most this many (default 1000).
    pub limit: Option<u32>,
    /// Only rows after the row with this UUID.
    pub marker: Option<String>,
    /// Only this project's accelerator requests (project isolation; other lists
    /// ignore it).
    pub project: Option<String>,
}

pub(crate) fn now() -> String {
    timestamp(chrono::Utc::now())
}

/// The text every stored timestamp has (RFC 3339 to the second, `Z`): fixed width, so
/// two compare as text in SQL as they do in time.
fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Masks every password of a database URL for messages: the userinfo's
/// (`postgres://u:***@h/db`) and password-like query parameters (`?password=***`,
/// `&sslpassword=***`); see [`verso_rpc::transport::amqp::redact`].
pub fn redact_url(url: &str) -> String {
    verso_rpc::transport::amqp::redact(url)
}

/// The longest hostname, name, description, project id or other free text the database
/// takes, in bytes (a PostgreSQL index entry must stay well under its ~2.7 KB limit).
pub const MAX_TEXT: usize = 255;

/// At most this many characters of a client's text go into a message.
const SHOWN: usize = 64;

/// `text`, cut to [`SHOWN`] characters with `...` when longer: messages echo what a
/// client sent, never all of it.
pub fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}...", &text[..end]),
    }
}

/// Refuses a text over [`MAX_TEXT`] bytes, without repeating it.
fn check_len(what: &'static str, text: Option<&str>) -> Result<(), DbError> {
    match text {
        Some(t) if t.len() > MAX_TEXT => Err(DbError::Invalid {
            what,
            why: format!("{} bytes; at most {MAX_TEXT}", t.len()),
        }),
        _ => Ok(()),
    }
}

/// A binding's host, instance and resource provider are bounded texts (the API checks
/// at its edge that the instance is a UUID, as Cyborg does).
fn check_binding(
    host: &str,
    instance_uuid: &str,
    device_rp_uuid: Option<&str>,
) -> Result<(), DbError> {
    check_len("hostname", Some(host))?;
    check_len("instance_uuid", Some(instance_uuid))?;
    check_len("device_rp_uuid", device_rp_uuid)
}

/// Whether a SQLite URL names an in-memory database (`sqlite::memory:`,
/// `sqlite://:memory:`, or `mode=memory` among its parameters).
fn is_sqlite_memory(url: &str) -> bool {
    let (path, params) = url.split_once('?').unwrap_or((url, ""));
    let path = path
        .strip_prefix("sqlite://")
        .or_else(|| path.strip_prefix("sqlite:"))
        .unwrap_or(path);
    path == ":memory:" || params.split('&').any(|p| p == "mode=memory")
}

/// The conductor's database.
#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

const DEVICE_COLUMNS: &str = "id, uuid, type, vendor, model, std_board_info, hostname, \
     vendor_board_info, status, maintaining, created_at, updated_at";

const DEPLOYABLE_COLUMNS: &str =
    "id, uuid, name, device_id, hostname, control_path_id, num_accelerators, driver_name, enabled, \
     created_at, updated_at";

const ATTRIBUTE_COLUMNS: &str = "id, uuid, deployable_id, key, value, created_at, updated_at";

const PROFILE_COLUMNS: &str = "id, uuid, name, groups, description, created_at";

const ARQ_SELECT: &str =
    "SELECT r.id, r.uuid, r.state, r.device_profile_name, r.device_profile_group_id, \
     r.hostname, r.device_rp_uuid, r.instance_uuid, r.project_id, r.created_at, r.updated_at, \
     h.uuid AS handle_uuid, h.attach_type AS handle_type, h.attach_info AS handle_info \
     FROM accelerator_requests r LEFT JOIN attach_handles h ON r.attach_handle_id = h.id";

impl Db {
    /// Opens the database the URL names (a SQLite file is created if missing), retrying
    /// for up to 30 s while it is unreachable. Does not migrate: call [`Db::migrate`].
    pub async fn connect(url: &str) -> Result<Db, DbError> {
        Self::connect_within(url, Duration::from_secs(30)).await
    }

    /// [`Db::connect`], giving up after `wait`.
    pub async fn connect_within(url: &str, wait: Duration) -> Result<Db, DbError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(DbError::UnsupportedUrl(redact_url(url)));
        };
        // sqlx does not know libpq's `sslpassword` and logs unknown parameters with
        // their values: refuse it here, naming the parameter only.
        if url.split_once('?').is_some_and(|(_, q)| {
            q.split('&')
                .any(|p| p.to_ascii_lowercase().starts_with("sslpassword="))
        }) {
            return Err(DbError::Invalid {
                what: "database URL",
                why: "sslpassword is not supported (an encrypted client key): give an unencrypted sslkey file readable only by accel".into(),
            });
        }
        let url_owned = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_owned(),
        };
        // An in-memory SQLite database lives in the connection that opened it: through the
        // Any driver each new connection parses the URL again and gets its own empty
        // database. So the pool holds exactly one connection, opened now and never closed
        // for idleness or age (closing it would drop the database).
        let in_memory = backend == Backend::Sqlite && is_sqlite_memory(url);
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite if in_memory => 1,
                Backend::Sqlite => 4,
                Backend::Postgres => 16,
            })
            .min_connections(u32::from(in_memory))
            .idle_timeout((!in_memory).then_some(Duration::from_secs(10 * 60)))
            .max_lifetime((!in_memory).then_some(Duration::from_secs(30 * 60)))
            .acquire_timeout(wait)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlx::query("PRAGMA foreign_keys = ON")
                            .execute(&mut *conn)
                            .await?;
                        sqlx::query("PRAGMA busy_timeout = 30000")
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(())
                })
            })
            .connect(&url_owned)
            .await
            .map_err(|source| DbError::Connect {
                url: redact_url(url),
                source,
            })?;
        Ok(Db { pool, backend })
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    fn migrator(&self) -> sqlx::migrate::Migrator {
        match self.backend {
            Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
            Backend::Postgres => sqlx::migrate!("migrations/postgres"),
        }
    }

    /// Applies the migrations not applied yet; returns their versions.
    pub async fn migrate(&self) -> Result<Vec<i64>, DbError> {
        let pending = self.pending_migrations().await?;
        self.migrator().run(&self.pool).await?;
        Ok(pending)
    }

    /// Migrations of this build not applied to the database yet.
    pub async fn pending_migrations(&self) -> Result<Vec<i64>, DbError> {
        let applied = self.applied_migrations().await?;
        Ok(self
            .migrator()
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect())
    }

    /// Migrations applied to the database (by any build).
    pub async fn applied_migrations(&self) -> Result<BTreeSet<i64>, DbError> {
        let table = match self.backend {
            Backend::Sqlite => {
                "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name = '_sqlx_migrations' AND table_schema = current_schema()"
            }
        };
        let n: i64 = sqlx::query(table)
            .fetch_one(&self.pool)
            .await?
            .try_get("n")?;
        if n == 0 {
            return Ok(BTreeSet::new());
        }
        let rows = sqlx::query("SELECT version FROM _sqlx_migrations WHERE success = TRUE")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| r.try_get::<i64, _>("version").map_err(DbError::from))
            .collect()
    }

    /// The pool, for the conductor's own queries.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    // ---- devices -------------------------------------------------------------------

    /// Applies one host's full inventory: adds new devices, updates changed ones, deletes
    /// vanished ones, and keeps vanished ones whose handles are in use: `missing` after
    /// the first report without them, `lost` once a second one confirms it.
    ///
    /// Reports of one host are applied one after the other, each diffed against what the
    /// previous one left. On SQLite the transaction's first write takes the database's
    /// write lock. On PostgreSQL a transaction-scoped advisory lock keyed by the host
    /// name serializes them: the first write (`UPDATE devices ... WHERE hostname`) locks
    /// only rows that exist, so two reports adding a device the host never had would both
    /// read "absent" and the later insert would fail on `(hostname, control_path_id)`.
    /// The lock (rather than retrying that failure) makes the second report wait and
    /// diff once, whatever the number of racers. A writer that does not take the lock
    /// (release N's conductor during a rolling upgrade) can still win such an insert:
    /// that unique violation is retried once the other transaction committed.
    ///
    /// The host's stored report digest is forgotten (see [`Db::report_with_digest`]).
    pub async fn report(
        &self,
        host: &str,
        devices: &[ReportedDevice],
    ) -> Result<ReportOutcome, DbError> {
        self.report_with_digest(host, devices, None).await
    }

    /// [`Db::report`], and in the same transaction records `digest`
    /// (`accel_objects::rpc::report_digest` of the report) as the host's last applied
    /// report (`None`: forgets it), for [`Db::report_digest`]. Migration 4's triggers
    /// forget a host's digest on every later write of a column the diff compares.
    pub async fn report_with_digest(
        &self,
        host: &str,
        devices: &[ReportedDevice],
        digest: Option<&str>,
    ) -> Result<ReportOutcome, DbError> {
        let mut seen = BTreeSet::new();
        for d in devices {
            if !seen.insert(d.control_path_id.as_str()) {
                return Err(DbError::Invalid {
                    what: "report",
                    why: format!("control-path id {} is reported twice", d.control_path_id),
                });
            }
        }
        const ATTEMPTS: u32 = 3;
        let mut attempt = 1;
        loop {
            match self.report_once(host, devices, digest).await {
                Err(DbError::Query(sqlx::Error::Database(e)))
                    if e.is_unique_violation() && attempt < ATTEMPTS =>
                {
                    tracing::debug!(host, attempt, error = %e, "a concurrent report of the host added the same device: diffed again");
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn report_once(
        &self,
        host: &str,
        devices: &[ReportedDevice],
        digest: Option<&str>,
    ) -> Result<ReportOutcome, DbError> {
        let mut tx = self.pool.begin().await?;
        let at = now();
        if self.backend == Backend::Postgres {
            // Released at commit or rollback; see `report`.
            sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))::text AS locked")
                .bind(format!("accel-report/{host}"))
                .fetch_one(&mut *tx)
                .await?;
        }
        // A first write takes SQLite's write lock before anything is read.
        sqlx::query("UPDATE devices SET updated_at = updated_at WHERE hostname = $1")
            .bind(host)
            .execute(&mut *tx)
            .await?;
        let existing = sqlx::query(
            "SELECT d.id AS dep_id, d.control_path_id, d.driver_name, d.device_id, \
             d.attributes AS reported_attributes, d.name, \
             v.type, v.vendor, v.model, v.std_board_info, v.vendor_board_info, v.status \
             FROM deployables d JOIN devices v ON d.device_id = v.id WHERE d.hostname = $1",
        )
        .bind(host)
        .fetch_all(&mut *tx)
        .await?;
        let mut attributes = HostAttributes::read(&mut tx, host).await?;
        struct Existing {
            dep_id: i64,
            device_id: i64,
            fields: ReportedFields,
            status: String,
            reported_attributes: String,
        }
        let mut by_cp: BTreeMap<String, Existing> = BTreeMap::new();
        for r in &existing {
            by_cp.insert(
                r.try_get("control_path_id")?,
                Existing {
                    dep_id: r.try_get("dep_id")?,
                    device_id: r.try_get("device_id")?,
                    fields: ReportedFields {
                        device_type: r.try_get("type")?,
                        vendor: r.try_get("vendor")?,
                        model: r.try_get("model")?,
                        std_board_info: r.try_get("std_board_info")?,
                        vendor_board_info: r.try_get("vendor_board_info")?,
                        driver_name: r.try_get("driver_name")?,
                        name: r.try_get("name")?,
                    },
                    status: r.try_get("status")?,
                    reported_attributes: r.try_get("reported_attributes")?,
                },
            );
        }
        let mut out = ReportOutcome::default();
        for d in devices {
            match by_cp.remove(&d.control_path_id) {
                None => {
                    let device_id: i64 = sqlx::query(
                        "INSERT INTO devices (uuid, type, vendor, model, std_board_info, vendor_board_info, hostname, status, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, 'available', $8, $9) RETURNING id",
                    )
                    .bind(new_uuid())
                    .bind(&d.device_type)
                    .bind(&d.vendor)
                    .bind(&d.model)
                    .bind(&d.std_board_info)
                    .bind(&d.vendor_board_info)
                    .bind(host)
                    .bind(&at)
                    .bind(&at)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("id")?;
                    let dep_id: i64 = sqlx::query(
                        "INSERT INTO deployables (uuid, name, device_id, hostname, control_path_id, num_accelerators, driver_name, created_at, updated_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
                    )
                    .bind(new_uuid())
                    .bind(d.deployable_name_on(host))
                    .bind(device_id)
                    .bind(host)
                    .bind(&d.control_path_id)
                    .bind(d.handles.len() as i64)
                    .bind(&d.driver_name)
                    .bind(&at)
                    .bind(&at)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("id")?;
                    for (attach_type, attach_info) in &d.handles {
                        insert_handle(&mut tx, dep_id, attach_type, attach_info, &at).await?;
                    }
                    attributes
                        .sync(&mut tx, dep_id, "{}", &d.attributes, &at)
                        .await?;
                    out.added.push(d.control_path_id.clone());
                }
                Some(e) => {
                    let fields = ReportedFields {
                        device_type: d.device_type.clone(),
                        vendor: d.vendor.clone(),
                        model: d.model.clone(),
                        std_board_info: d.std_board_info.clone(),
                        vendor_board_info: d.vendor_board_info.clone(),
                        driver_name: d.driver_name.clone(),
                        name: d.deployable_name_on(host),
                    };
                    let mut changed = e.fields != fields || e.status != "available";
                    if changed {
                        sqlx::query(
                            "UPDATE devices SET type = $1, vendor = $2, model = $3, std_board_info = $4, vendor_board_info = $5, status = 'available', updated_at = $6 WHERE id = $7",
                        )
                        .bind(&d.device_type)
                        .bind(&d.vendor)
                        .bind(&d.model)
                        .bind(&d.std_board_info)
                        .bind(&d.vendor_board_info)
                        .bind(&at)
                        .bind(e.device_id)
                        .execute(&mut *tx)
                        .await?;
                        sqlx::query("UPDATE deployables SET driver_name = $1, num_accelerators = $2, name = $3, updated_at = $4 WHERE id = $5")
                            .bind(&d.driver_name)
                            .bind(d.handles.len() as i64)
                            .bind(&fields.name)
                            .bind(&at)
                            .bind(e.dep_id)
                            .execute(&mut *tx)
                            .await?;
                    }
                    let handles = sqlx::query(
                        "SELECT id, attach_type, attach_info, in_use FROM attach_handles WHERE deployable_id = $1",
                    )
                    .bind(e.dep_id)
                    .fetch_all(&mut *tx)
                    .await?;
                    let mut have: BTreeMap<(String, String), (i64, bool)> = BTreeMap::new();
                    for h in &handles {
                        let info: String = h.try_get("attach_info")?;
                        have.insert(
                            (h.try_get("attach_type")?, handle_identity(&info)),
                            (h.try_get("id")?, h.try_get::<i64, _>("in_use")? != 0),
                        );
                    }
                    if attributes
                        .sync(
                            &mut tx,
                            e.dep_id,
                            &e.reported_attributes,
                            &d.attributes,
                            &at,
                        )
                        .await?
                    {
                        changed = true;
                    }
                    let mut lost_handle = false;
                    for key in &d.handles {
                        if have
                            .remove(&(key.0.clone(), handle_identity(&key.1)))
                            .is_none()
                        {
                            insert_handle(&mut tx, e.dep_id, &key.0, &key.1, &at).await?;
                            changed = true;
                        }
                    }
                    for (_, (id, in_use)) in have {
                        if in_use {
                            lost_handle = true;
                        } else {
                            sqlx::query("DELETE FROM attach_handles WHERE id = $1")
                                .bind(id)
                                .execute(&mut *tx)
                                .await?;
                            changed = true;
                        }
                    }
                    if lost_handle {
                        let cp = d.control_path_id.clone();
                        drop_in_use(&mut tx, host, &e.status, e.device_id, cp, &at, &mut out)
                            .await?;
                    } else if changed {
                        out.updated.push(d.control_path_id.clone());
                    } else {
                        out.unchanged += 1;
                    }
                }
            }
        }
        for (cp, e) in by_cp {
            let in_use: i64 = sqlx::query(
                "SELECT COUNT(*) AS n FROM attach_handles WHERE deployable_id = $1 AND in_use = 1",
            )
            .bind(e.dep_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
            if in_use > 0 {
                drop_in_use(&mut tx, host, &e.status, e.device_id, cp, &at, &mut out).await?;
            } else {
                sqlx::query("DELETE FROM devices WHERE id = $1")
                    .bind(e.device_id)
                    .execute(&mut *tx)
                    .await?;
                out.removed.push(cp);
            }
        }
        // Last: the diff's own writes above made the triggers forget the old digest.
        match digest {
            Some(digest) => {
                sqlx::query(
                    "INSERT INTO host_reports (hostname, digest, devices, updated_at) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (hostname) DO UPDATE SET digest = excluded.digest, \
                     devices = excluded.devices, updated_at = excluded.updated_at",
                )
                .bind(host)
                .bind(digest)
                .bind(devices.len() as i64)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM host_reports WHERE hostname = $1")
                    .bind(host)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(out)
    }

    /// The digest of the host's last applied report and how many devices it had, if
    /// nothing changed the host's devices since ([`Db::report_with_digest`]).
    pub async fn report_digest(&self, host: &str) -> Result<Option<(String, u64)>, DbError> {
        let row = sqlx::query("SELECT digest, devices FROM host_reports WHERE hostname = $1")
            .bind(host)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let devices: i64 = row.try_get("devices")?;
        Ok(Some((
            row.try_get("digest")?,
            u64::try_from(devices).unwrap_or(0),
        )))
    }

    /// Devices, oldest first.
    pub async fn devices(&self, filter: &ListFilter) -> Result<Vec<DeviceRow>, DbError> {
        self.page("devices", DEVICE_COLUMNS, filter, device_row)
            .await
    }

    /// One device by UUID.
    pub async fn device(&self, uuid: &str) -> Result<DeviceRow, DbError> {
        self.one("devices", DEVICE_COLUMNS, "device", uuid, device_row)
            .await
    }

    /// Deployables, oldest first.
    pub async fn deployables(&self, filter: &ListFilter) -> Result<Vec<DeployableRow>, DbError> {
        let mut page = self
            .page("deployables", DEPLOYABLE_COLUMNS, filter, deployable_row)
            .await?;
        self.with_attributes(&mut page).await?;
        Ok(page)
    }

    /// One deployable by UUID.
    pub async fn deployable(&self, uuid: &str) -> Result<DeployableRow, DbError> {
        let one = self
            .one(
                "deployables",
                DEPLOYABLE_COLUMNS,
                "deployable",
                uuid,
                deployable_row,
            )
            .await?;
        let mut page = vec![one];
        self.with_attributes(&mut page).await?;
        Ok(page.remove(0))
    }

    /// Fills each deployable's [`DeployableRow::attributes`] (one query for the page).
    async fn with_attributes(&self, page: &mut [DeployableRow]) -> Result<(), DbError> {
        if page.is_empty() {
            return Ok(());
        }
        let marks = (1..=page.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT deployable_id, key, value FROM attributes WHERE deployable_id IN ({marks})"
        );
        let mut query = sqlx::query(&sql);
        for d in page.iter() {
            query = query.bind(d.id);
        }
        let mut by_id: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
        for r in query.fetch_all(&self.pool).await? {
            by_id
                .entry(r.try_get("deployable_id")?)
                .or_default()
                .insert(r.try_get("key")?, r.try_get("value")?);
        }
        for d in page.iter_mut() {
            d.attributes = by_id.remove(&d.id).unwrap_or_default();
        }
        Ok(())
    }

    // ---- attributes ----------------------------------------------------------------

    /// A page of attributes, oldest first, as Cyborg's `GET /v2/attributes`: only of the
    /// deployable with this id, only with this key (either, both or neither).
    pub async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        filter: &ListFilter,
    ) -> Result<Vec<AttributeRow>, DbError> {
        let rows = sqlx::query(&format!(
            "SELECT {ATTRIBUTE_COLUMNS} FROM attributes WHERE ($1 = 0 OR deployable_id = $2) \
             AND ($3 = '' OR key = $4) \
             AND id > COALESCE((SELECT id FROM attributes WHERE uuid = $5), 0) ORDER BY id LIMIT $6"
        ))
        .bind(i64::from(deployable_id.is_some()))
        .bind(deployable_id.unwrap_or(0))
        .bind(key.unwrap_or_default())
        .bind(key.unwrap_or_default())
        .bind(filter.marker.clone().unwrap_or_default())
        .bind(i64::from(filter.limit.unwrap_or(1000)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(attribute_row).collect()
    }

    /// One attribute by UUID.
    pub async fn attribute(&self, uuid: &str) -> Result<AttributeRow, DbError> {
        let row = sqlx::query(&format!(
            "SELECT {ATTRIBUTE_COLUMNS} FROM attributes WHERE uuid = $1"
        ))
        .bind(uuid)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| DbError::NotFound {
            kind: "attribute",
            id: uuid.to_owned(),
        })?;
        attribute_row(&row)
    }

    /// Creates an attribute of the deployable with this id (Cyborg's `POST
    /// /v2/attributes`): `NotFound` if there is no such deployable, `Duplicate` if it
    /// has the key. A key its host's agent reports is the report's: the next applied
    /// report sets its value ([`ReportedDevice::attributes`]).
    pub async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, DbError> {
        let mut tx = self.pool.begin().await?;
        let exists = sqlx::query("SELECT id FROM deployables WHERE id = $1")
            .bind(deployable_id)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_none() {
            return Err(DbError::NotFound {
                kind: "deployable",
                id: deployable_id.to_string(),
            });
        }
        let row = match insert_attribute(&mut tx, deployable_id, key, value, &now()).await {
            // The key is taken: `UNIQUE (deployable_id, key)` decides, concurrent
            // creates included.
            Err(DbError::Query(sqlx::Error::Database(e))) if e.is_unique_violation() => {
                return Err(DbError::Duplicate {
                    kind: "attribute",
                    name: key.to_owned(),
                })
            }
            other => other?,
        };
        tx.commit().await?;
        Ok(row)
    }

    /// Deletes an attribute by UUID; `NotFound` if there is none. A key its host's agent
    /// reports comes back with the host's next report.
    pub async fn delete_attribute(&self, uuid: &str) -> Result<(), DbError> {
        let done = sqlx::query("DELETE FROM attributes WHERE uuid = $1")
            .bind(uuid)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(DbError::NotFound {
                kind: "attribute",
                id: uuid.to_owned(),
            });
        }
        Ok(())
    }

    /// A page of `table` (which has `id`, `uuid` and `hostname`) by `filter`, oldest first.
    async fn page<T>(
        &self,
        table: &str,
        columns: &str,
        filter: &ListFilter,
        map: fn(&AnyRow) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        let host = filter.host.clone().unwrap_or_default();
        let rows = sqlx::query(&format!(
            "SELECT {columns} FROM {table} WHERE ($1 = '' OR hostname = $2) \
             AND id > COALESCE((SELECT id FROM {table} WHERE uuid = $3), 0) ORDER BY id LIMIT $4"
        ))
        .bind(&host)
        .bind(&host)
        .bind(filter.marker.clone().unwrap_or_default())
        .bind(i64::from(filter.limit.unwrap_or(1000)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(map).collect()
    }

    /// The row of `table` with `uuid`, or `NotFound` naming `kind`.
    async fn one<T>(
        &self,
        table: &str,
        columns: &str,
        kind: &'static str,
        uuid: &str,
        map: fn(&AnyRow) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let row = sqlx::query(&format!("SELECT {columns} FROM {table} WHERE uuid = $1"))
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| DbError::NotFound {
                kind,
                id: shown(uuid),
            })?;
        map(&row)
    }

    /// Attach handles of one host (or all), oldest first.
    pub async fn attach_handles(
        &self,
        host: Option<&str>,
    ) -> Result<Vec<AttachHandleRow>, DbError> {
        let rows = sqlx::query(
            "SELECT h.id, h.uuid, h.deployable_id, h.in_use, h.attach_type, h.attach_info \
             FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
             WHERE ($1 = '' OR d.hostname = $2) ORDER BY h.id",
        )
        .bind(host.unwrap_or_default())
        .bind(host.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AttachHandleRow {
                    id: r.try_get("id")?,
                    uuid: r.try_get("uuid")?,
                    deployable_id: r.try_get("deployable_id")?,
                    in_use: r.try_get::<i64, _>("in_use")? != 0,
                    attach_type: r.try_get("attach_type")?,
                    attach_info: r.try_get("attach_info")?,
                })
            })
            .collect()
    }

    // ---- device profiles ----------------------------------------------------------

    /// Creates a profile; each group must ask for one known device type.
    pub async fn create_profile(
        &self,
        name: &str,
        groups: Vec<BTreeMap<String, String>>,
        description: Option<String>,
    ) -> Result<DeviceProfileRow, DbError> {
        crate::groups::check_name(name)?;
        check_len("device profile description", description.as_deref())?;
        for (k, v) in groups.iter().flatten() {
            check_len("device profile group key", Some(k))?;
            check_len("device profile group value", Some(v))?;
        }
        if groups.is_empty() {
            return Err(DbError::Invalid {
                what: "device profile",
                why: "it needs at least one group".into(),
            });
        }
        let groups = groups
            .into_iter()
            .map(crate::groups::normalize)
            .collect::<Result<Vec<_>, _>>()?;
        let uuid = new_uuid();
        let at = now();
        let groups_json = serde_json::to_string(&groups).map_err(|e| DbError::Invalid {
            what: "device profile groups",
            why: e.to_string(),
        })?;
        let id: i64 = sqlx::query(
            "INSERT INTO device_profiles (uuid, name, groups, description, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&uuid)
        .bind(name)
        .bind(&groups_json)
        .bind(&description)
        .bind(&at)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| DbError::from_insert(e, "device profile", name))?
        .try_get("id")?;
        Ok(DeviceProfileRow {
            id,
            uuid,
            name: name.to_owned(),
            groups,
            description,
            created_at: at,
        })
    }

    /// Every profile, by name.
    pub async fn profiles(&self) -> Result<Vec<DeviceProfileRow>, DbError> {
        self.profiles_page(&ListFilter {
            limit: Some(u32::MAX),
            ..ListFilter::default()
        })
        .await
    }

    /// A page of profiles by name: those after the profile with UUID `filter.marker`,
    /// at most `filter.limit` (`filter.host` is ignored).
    pub async fn profiles_page(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<DeviceProfileRow>, DbError> {
        let rows = sqlx::query(&format!(
            "SELECT {PROFILE_COLUMNS} FROM device_profiles WHERE $1 = '' \
             OR name > (SELECT name FROM device_profiles WHERE uuid = $2) ORDER BY name LIMIT $3"
        ))
        .bind(filter.marker.clone().unwrap_or_default())
        .bind(filter.marker.clone().unwrap_or_default())
        .bind(i64::from(filter.limit.unwrap_or(1000)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(profile_row).collect()
    }

    /// One profile by name or UUID, the same way for every caller (get, delete, request
    /// creation), on both databases: text that parses as a UUID names the profile with
    /// that UUID when there is one, otherwise the profile with that name (as Cyborg,
    /// which looks a UUID-like text up as a UUID); any other text is a name. So a profile
    /// whose name is another profile's UUID is reached by its own UUID only.
    pub async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, DbError> {
        if let Ok(uuid) = uuid::Uuid::parse_str(name_or_uuid) {
            // Stored UUIDs are hyphenated lower case; any spelling that parses reaches them.
            let row = sqlx::query(&format!(
                "SELECT {PROFILE_COLUMNS} FROM device_profiles WHERE uuid = $1"
            ))
            .bind(uuid.hyphenated().to_string())
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = row {
                return profile_row(&row);
            }
        }
        self.profile_by_name(name_or_uuid).await
    }

    /// One profile by its UUID only.
    pub async fn profile_by_uuid(&self, uuid: &str) -> Result<DeviceProfileRow, DbError> {
        self.one(
            "device_profiles",
            PROFILE_COLUMNS,
            "device profile",
            uuid,
            profile_row,
        )
        .await
    }

    /// One profile by its name only (what a request records, `device_profile_name`).
    pub async fn profile_by_name(&self, name: &str) -> Result<DeviceProfileRow, DbError> {
        let row = sqlx::query(&format!(
            "SELECT {PROFILE_COLUMNS} FROM device_profiles WHERE name = $1"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?
        .ok_or_else(|| DbError::NotFound {
            kind: "device profile",
            id: shown(name),
        })?;
        profile_row(&row)
    }

    /// Deletes a profile no request uses.
    pub async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), DbError> {
        let profile = self.profile(name_or_uuid).await?;
        let mut tx = self.pool.begin().await?;
        // The profile's row locked first (`lock_profile`), so a request being created
        // from it either committed before (and is seen below) or waits and finds it gone.
        lock_profile(&mut tx, &profile).await?;
        let deleted = sqlx::query(
            "DELETE FROM device_profiles WHERE id = $1 AND NOT EXISTS \
             (SELECT 1 FROM accelerator_requests WHERE device_profile_name = $2)",
        )
        .bind(profile.id)
        .bind(&profile.name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if deleted == 0 {
            return Err(DbError::ProfileInUse(profile.name));
        }
        Ok(())
    }

    // ---- accelerator requests -----------------------------------------------------

    /// Takes a device out of service or puts it back (Cyborg's disable and enable):
    /// a device in maintenance is given to no new request, and the requests bound to it
    /// keep it. Idempotent; the device as it is now.
    pub async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, DbError> {
        let done =
            sqlx::query("UPDATE devices SET maintaining = $1, updated_at = $2 WHERE uuid = $3")
                .bind(i64::from(maintaining))
                .bind(now())
                .bind(uuid)
                .execute(&self.pool)
                .await?;
        if done.rows_affected() == 0 {
            return Err(DbError::NotFound {
                kind: "device",
                id: shown(uuid),
            });
        }
        self.device(uuid).await
    }

    /// Creates a profile's accelerator requests as Cyborg does: for each group (or only
    /// `group_id`), one per unit it asks for ([`crate::groups::arq_count`]). By name only,
    /// as [`Db::create_arq`].
    pub async fn create_arqs(
        &self,
        profile: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, DbError> {
        let p = self.profile_by_name(profile).await?;
        let groups: Vec<(i64, &BTreeMap<String, String>)> = match group_id {
            None => (0..).zip(p.groups.iter()).collect(),
            Some(g) => {
                let group = usize::try_from(g)
                    .ok()
                    .and_then(|i| p.groups.get(i))
                    .ok_or_else(|| DbError::Invalid {
                        what: "device profile group id",
                        why: format!("profile {} has {} groups", p.name, p.groups.len()),
                    })?;
                vec![(g, group)]
            }
        };
        let mut out = Vec::new();
        for (g, group) in groups {
            for _ in 0..crate::groups::arq_count(group) {
                out.push(self.create_arq(&p.name, g, project_id).await?);
            }
        }
        Ok(out)
    }

    /// Creates a request in state `Initial` for one group of the profile named `profile`
    /// (its name, as [`Db::profile`] resolved it).
    pub async fn create_arq(
        &self,
        profile: &str,
        group_id: i64,
        project_id: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        check_len("project id", project_id)?;
        // By name only: callers resolve what the client typed with `profile` first, and
        // a name may be another profile's UUID.
        let p = self.profile_by_name(profile).await?;
        if group_id < 0 || group_id as usize >= p.groups.len() {
            return Err(DbError::Invalid {
                what: "device profile group id",
                why: format!(
                    "{group_id}: profile {} has groups 0..{}",
                    p.name,
                    p.groups.len()
                ),
            });
        }
        let uuid = new_uuid();
        let at = now();
        let mut tx = self.pool.begin().await?;
        // A profile deleted meanwhile is NotFound here, never an orphan request.
        lock_profile(&mut tx, &p).await?;
        sqlx::query(
            "INSERT INTO accelerator_requests (uuid, state, device_profile_name, device_profile_group_id, project_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&uuid)
        .bind(ArqState::Initial.as_str())
        .bind(&p.name)
        .bind(group_id)
        .bind(project_id)
        .bind(&at)
        .bind(&at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.arq(&uuid).await
    }

    /// One request.
    pub async fn arq(&self, uuid: &str) -> Result<ArqRow, DbError> {
        let row = sqlx::query(&format!("{ARQ_SELECT} WHERE r.uuid = $1"))
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| DbError::NotFound {
                kind: "accelerator request",
                id: shown(uuid),
            })?;
        arq_row(&row)
    }

    /// Requests, optionally of one instance, oldest first.
    pub async fn arqs(&self, instance: Option<&str>) -> Result<Vec<ArqRow>, DbError> {
        self.arqs_page(
            instance,
            &ListFilter {
                limit: Some(u32::MAX),
                ..ListFilter::default()
            },
        )
        .await
    }

    /// A page of requests, optionally of one instance and of one project
    /// (`filter.project`), oldest first: those after the request with UUID
    /// `filter.marker`, at most `filter.limit` (`filter.host` ignored).
    pub async fn arqs_page(
        &self,
        instance: Option<&str>,
        filter: &ListFilter,
    ) -> Result<Vec<ArqRow>, DbError> {
        let rows = sqlx::query(&format!(
            "{ARQ_SELECT} WHERE ($1 = '' OR r.instance_uuid = $2) \
             AND r.id > COALESCE((SELECT id FROM accelerator_requests WHERE uuid = $3), 0) \
             AND ($5 = '' OR r.project_id = $6) \
             ORDER BY r.id LIMIT $4"
        ))
        .bind(instance.unwrap_or_default())
        .bind(instance.unwrap_or_default())
        .bind(filter.marker.clone().unwrap_or_default())
        .bind(i64::from(filter.limit.unwrap_or(1000)))
        .bind(filter.project.clone().unwrap_or_default())
        .bind(filter.project.clone().unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(arq_row).collect()
    }

    /// Moves a request to `to` from an allowed state, in `tx`; the typed conflict names
    /// the state it was really in.
    async fn transition(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        uuid: &str,
        to: ArqState,
    ) -> Result<(), DbError> {
        let allowed = to.allowed_from();
        let placeholders: Vec<String> = (0..allowed.len()).map(|i| format!("${}", i + 4)).collect();
        let sql = format!(
            "UPDATE accelerator_requests SET state = $1, updated_at = $2 WHERE uuid = $3 AND state IN ({})",
            placeholders.join(", ")
        );
        let mut q = sqlx::query(&sql).bind(to.as_str()).bind(now()).bind(uuid);
        for s in allowed {
            q = q.bind(s.as_str());
        }
        if q.execute(&mut **tx).await?.rows_affected() == 1 {
            return Ok(());
        }
        let current: Option<String> =
            sqlx::query("SELECT state FROM accelerator_requests WHERE uuid = $1")
                .bind(uuid)
                .fetch_optional(&mut **tx)
                .await?
                .map(|r| r.try_get("state"))
                .transpose()?;
        match current {
            None => Err(DbError::NotFound {
                kind: "accelerator request",
                id: shown(uuid),
            }),
            Some(s) => Err(DbError::InvalidTransition {
                uuid: uuid.to_owned(),
                from: s
                    .parse()
                    .map_err(|e: crate::lifecycle::UnknownState| DbError::Invalid {
                        what: "stored state",
                        why: e.to_string(),
                    })?,
                to,
            }),
        }
    }

    /// Binds a request to a free device on `host`: `BindStarted`, then, in a second
    /// transaction, a free attach handle taken atomically and `Bound`, or `BindFailed`
    /// when none is free (returned as [`DbError::NoFreeHandle`]). With
    /// `device_rp_uuid` (Placement's choice, what Nova sends) the handle is one of the
    /// deployable with that resource provider, which must be on `host`
    /// ([`DbError::Invalid`] otherwise, nothing changed); without, one of any deployable
    /// of the profile group's device type. Binding a request already bound to the
    /// same instance returns it unchanged.
    pub async fn bind(
        &self,
        uuid: &str,
        host: &str,
        instance_uuid: &str,
        device_rp_uuid: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        check_binding(host, instance_uuid, device_rp_uuid)?;
        let current = self.arq(uuid).await?;
        if current.state == ArqState::Bound
            && current.instance_uuid.as_deref() == Some(instance_uuid)
        {
            return Ok(current);
        }
        let profile = self.profile_by_name(&current.device_profile_name).await?;
        let group = profile
            .groups
            .get(current.device_profile_group_id as usize)
            .ok_or_else(|| DbError::Invalid {
                what: "device profile group id",
                why: format!(
                    "profile {} lost group {}",
                    profile.name, current.device_profile_group_id
                ),
            })?;
        // Placement chose the deployable: exactly that one. Otherwise any of the group's
        // device type (which a group accel cannot map refuses).
        let (device_type, deployable, wanted) = match device_rp_uuid {
            Some(rp) => {
                let on_host = sqlx::query("SELECT id, name FROM deployables WHERE hostname = $1")
                    .bind(host)
                    .fetch_all(&self.pool)
                    .await?;
                let mut found = None;
                for row in &on_host {
                    let name: String = row.try_get("name")?;
                    if rp_uuid(&name) == rp {
                        found = Some(row.try_get::<i64, _>("id")?);
                    }
                }
                let id = found.ok_or_else(|| DbError::Invalid {
                    what: "device_rp_uuid",
                    why: format!(
                        "{} is the resource provider of no deployable of host {}",
                        shown(rp),
                        shown(host)
                    ),
                })?;
                let wanted = format!("device of resource provider {}", shown(rp));
                (String::new(), id, wanted)
            }
            None => {
                let t = crate::groups::device_type(group)?;
                (t.clone(), 0, t)
            }
        };
        // One transaction from `BindStarted` to `Bound` or `BindFailed`: whatever fails
        // in between (the database, the connection, this process) rolls the request
        // back to the state it had, free to bind, unbind or delete again. No bind of
        // this release ever leaves `BindStarted` committed, so no other conductor can
        // find one of its binds in progress and take it for abandoned. The transition
        // is the first statement, a write (see the module docs: SQLite then waits for
        // its write lock here instead of failing when a read would become a write).
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::BindStarted)
            .await?;
        sqlx::query("UPDATE accelerator_requests SET hostname = $1, instance_uuid = $2, device_rp_uuid = $3 WHERE uuid = $4")
            .bind(host)
            .bind(instance_uuid)
            .bind(device_rp_uuid)
            .bind(uuid)
            .execute(&mut *tx)
            .await?;
        let taken = loop {
            let candidate: Option<i64> = sqlx::query(
                "SELECT h.id FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
                 JOIN devices v ON d.device_id = v.id \
                 WHERE d.hostname = $1 AND (v.type = $2 OR d.id = $3) AND v.status = 'available' AND v.maintaining = 0 AND d.enabled = 1 AND h.in_use = 0 AND h.cleanup_state IS NULL \
                 ORDER BY h.id LIMIT 1",
            )
            .bind(host)
            .bind(&device_type)
            .bind(deployable)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get("id"))
            .transpose()?;
            let Some(id) = candidate else { break None };
            let won = sqlx::query("UPDATE attach_handles SET in_use = 1, revision = revision + 1, updated_at = $1 WHERE id = $2 AND in_use = 0")
                .bind(now())
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1;
            if won {
                break Some(id);
            }
            // Another conductor took it between our read and our write: try the next.
        };
        match taken {
            Some(handle) => {
                self.transition(&mut tx, uuid, ArqState::Bound).await?;
                sqlx::query(
                    "UPDATE accelerator_requests SET attach_handle_id = $1 WHERE uuid = $2",
                )
                .bind(handle)
                .bind(uuid)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                self.arq(uuid).await
            }
            None => {
                self.transition(&mut tx, uuid, ArqState::BindFailed).await?;
                tx.commit().await?;
                Err(DbError::NoFreeHandle {
                    uuid: uuid.to_owned(),
                    host: shown(host),
                    device_type: wanted,
                })
            }
        }
    }

    /// Releases a request's device: `Unbound`, the handle free again at once. Idempotent:
    /// an unbound request is returned as it is.
    pub async fn unbind(&self, uuid: &str) -> Result<ArqRow, DbError> {
        self.unbind_with(uuid, Release::Immediate).await
    }

    /// [`Db::unbind`] with the release policy: with [`Release::CleanSsd`] an NVMe SSD's
    /// handle goes to `cleaning` instead of back to the pool.
    pub async fn unbind_with(&self, uuid: &str, release: Release) -> Result<ArqRow, DbError> {
        let current = self.arq(uuid).await?;
        if current.state == ArqState::Unbound {
            return Ok(current);
        }
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::Unbound).await?;
        release_handle(&mut tx, uuid, release).await?;
        // As Cyborg's unbind: the request belongs to no host, instance or provider any
        // more (a failed bind keeps them, for Nova to read it by instance).
        sqlx::query(
            "UPDATE accelerator_requests SET hostname = NULL, instance_uuid = NULL, \
             device_rp_uuid = NULL WHERE uuid = $1",
        )
        .bind(uuid)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.arq(uuid).await
    }

    /// Deletes a request (releasing its device at once). Idempotent: deleting a missing
    /// request is `Ok(false)`.
    pub async fn delete_arq(&self, uuid: &str) -> Result<bool, DbError> {
        self.delete_arq_with(uuid, Release::Immediate).await
    }

    /// [`Db::delete_arq`] with the release policy.
    pub async fn delete_arq_with(&self, uuid: &str, release: Release) -> Result<bool, DbError> {
        let mut tx = self.pool.begin().await?;
        match self.transition(&mut tx, uuid, ArqState::Deleting).await {
            Ok(()) => {}
            Err(DbError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
        release_handle(&mut tx, uuid, release).await?;
        sqlx::query("DELETE FROM accelerator_requests WHERE uuid = $1")
            .bind(uuid)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes every request of an instance; returns how many.
    pub async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<usize, DbError> {
        let mut n = 0;
        for arq in self.arqs(Some(instance_uuid)).await? {
            if self.delete_arq(&arq.uuid).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// What breaks the database's invariants between requests and devices, in words
    /// (empty: consistent): a handle held by two requests, a request on a free handle,
    /// a `Bound` request without a handle, an in-use handle no request holds, a request
    /// whose profile is gone, a request in a transient state (`BindStarted`,
    /// `Deleting`) for longer than `lease`. The fault campaign (`accel chaos`) checks it
    /// continuously; an operator can run it on a live database.
    pub async fn consistency_violations(&self, lease: Duration) -> Result<Vec<String>, DbError> {
        let cutoff =
            timestamp(chrono::Utc::now() - chrono::Duration::from_std(lease).unwrap_or_default());
        let checks: [(&str, &str); 6] = [
            (
                "handle held by more than one request",
                "SELECT CAST(attach_handle_id AS TEXT) AS what FROM accelerator_requests \
                 WHERE attach_handle_id IS NOT NULL GROUP BY attach_handle_id HAVING COUNT(*) > 1",
            ),
            (
                "request holding a free handle",
                "SELECT r.uuid AS what FROM accelerator_requests r \
                 JOIN attach_handles h ON r.attach_handle_id = h.id WHERE h.in_use = 0",
            ),
            (
                "Bound request without a handle",
                "SELECT uuid AS what FROM accelerator_requests \
                 WHERE state = 'Bound' AND attach_handle_id IS NULL",
            ),
            (
                "in-use handle no request holds",
                "SELECT h.uuid AS what FROM attach_handles h WHERE h.in_use = 1 AND NOT EXISTS \
                 (SELECT 1 FROM accelerator_requests r WHERE r.attach_handle_id = h.id)",
            ),
            (
                "request whose profile is gone",
                "SELECT r.uuid AS what FROM accelerator_requests r WHERE NOT EXISTS \
                 (SELECT 1 FROM device_profiles p WHERE p.name = r.device_profile_name)",
            ),
            (
                "request stuck in a transient state past its lease",
                "SELECT uuid AS what FROM accelerator_requests \
                 WHERE state IN ('BindStarted', 'Deleting') AND updated_at < $1",
            ),
        ];
        let mut found = Vec::new();
        for (what, sql) in checks {
            let mut q = sqlx::query(sql);
            if sql.contains("$1") {
                q = q.bind(&cutoff);
            }
            for row in q.fetch_all(&self.pool).await? {
                let id: String = row.try_get("what")?;
                found.push(format!("{what}: {id}"));
            }
        }
        Ok(found)
    }

    /// How long a request may stay in `BindStarted` before a starting conductor takes it
    /// for abandoned ([`Db::recover_interrupted_binds`]); release N's two-step bind
    /// finishes in well under a second.
    pub const INTERRUPTED_BIND_LEASE: Duration = Duration::from_secs(120);

    /// At conductor start: requests in `BindStarted` for longer than `lease` become
    /// `BindFailed` (they hold no device: a bind takes its device and leaves
    /// `BindStarted` in one transaction). This release never commits `BindStarted`, so
    /// what is found was left by release N's two-step bind (beside this release during
    /// a rolling upgrade) or by its crash; a younger one may be a bind still running on
    /// a release N conductor and is left to it.
    pub async fn recover_interrupted_binds(&self, lease: Duration) -> Result<u64, DbError> {
        let cutoff = timestamp(
            chrono::Duration::from_std(lease)
                .ok()
                .and_then(|lease| chrono::Utc::now().checked_sub_signed(lease))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC),
        );
        let n = sqlx::query(
            "UPDATE accelerator_requests SET state = $1, updated_at = $2 WHERE state = $3 AND updated_at < $4",
        )
        .bind(ArqState::BindFailed.as_str())
        .bind(now())
        .bind(ArqState::BindStarted.as_str())
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n)
    }
}

/// Locks a profile's row for the transaction, as its first statement: a no-op write,
/// which on PostgreSQL takes the row lock (a delete and a request creation from the
/// profile then run one after the other, the second seeing what the first committed)
/// and on SQLite the database's write lock. `NotFound` when the profile is gone.
async fn lock_profile(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    profile: &DeviceProfileRow,
) -> Result<(), DbError> {
    let locked = sqlx::query("UPDATE device_profiles SET name = name WHERE id = $1")
        .bind(profile.id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if locked == 0 {
        return Err(DbError::NotFound {
            kind: "device profile",
            id: shown(&profile.name),
        });
    }
    Ok(())
}

/// What identifies a reported handle: its attach info without the PCI managed mode,
/// which is metadata the conductor keeps (set through `AttachHandle.update_managed`),
/// not part of what an agent reports; a report never replaces a handle because of it.
fn handle_identity(attach_info: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(attach_info) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.remove("managed");
            serde_json::Value::Object(map).to_string()
        }
        _ => attach_info.to_owned(),
    }
}

/// What the report diff compares of a device and its deployable (besides handles and
/// attributes); a difference rewrites both rows.
#[derive(PartialEq, Eq)]
struct ReportedFields {
    device_type: String,
    vendor: String,
    model: String,
    std_board_info: Option<String>,
    vendor_board_info: Option<String>,
    driver_name: Option<String>,
    name: String,
}

/// The attribute rows of one host's deployables, read once per report and brought in
/// line with it deployable by deployable (see [`ReportedDevice::attributes`]).
struct HostAttributes {
    /// By deployable, by key: (row id, value).
    rows: BTreeMap<i64, BTreeMap<String, (i64, String)>>,
}

impl HostAttributes {
    async fn read(tx: &mut sqlx::Transaction<'_, sqlx::Any>, host: &str) -> Result<Self, DbError> {
        let found = sqlx::query(
            "SELECT a.id, a.deployable_id, a.key, a.value FROM attributes a \
             JOIN deployables d ON a.deployable_id = d.id WHERE d.hostname = $1",
        )
        .bind(host)
        .fetch_all(&mut **tx)
        .await?;
        let mut rows: BTreeMap<i64, BTreeMap<String, (i64, String)>> = BTreeMap::new();
        for r in &found {
            rows.entry(r.try_get("deployable_id")?)
                .or_default()
                .insert(r.try_get("key")?, (r.try_get("id")?, r.try_get("value")?));
        }
        Ok(Self { rows })
    }

    /// Sets the reported keys' values, deletes the keys `previously` reported (the
    /// deployable's `attributes` column, JSON) that `reported` no longer has, and records
    /// `reported` as the deployable's last reported keys; whether anything changed.
    async fn sync(
        &mut self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        deployable_id: i64,
        previously: &str,
        reported: &BTreeMap<String, String>,
        at: &str,
    ) -> Result<bool, DbError> {
        // The column was '{}' for every row before attributes existed; text that is not
        // a JSON object of strings (never written by accel) is taken as "none reported".
        let previously: BTreeMap<String, String> =
            serde_json::from_str(previously).unwrap_or_default();
        let rows = self.rows.remove(&deployable_id).unwrap_or_default();
        let mut changed = false;
        for (key, value) in reported {
            match rows.get(key) {
                Some((_, have)) if have == value => {}
                Some((id, _)) => {
                    sqlx::query("UPDATE attributes SET value = $1, updated_at = $2 WHERE id = $3")
                        .bind(value)
                        .bind(at)
                        .bind(id)
                        .execute(&mut **tx)
                        .await?;
                    changed = true;
                }
                None => {
                    insert_attribute(tx, deployable_id, key, value, at).await?;
                    changed = true;
                }
            }
        }
        for key in previously.keys().filter(|k| !reported.contains_key(*k)) {
            if let Some((id, _)) = rows.get(key) {
                sqlx::query("DELETE FROM attributes WHERE id = $1")
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
                changed = true;
            }
        }
        if previously != *reported {
            sqlx::query("UPDATE deployables SET attributes = $1 WHERE id = $2")
                .bind(
                    serde_json::to_string(reported).map_err(|e| DbError::Invalid {
                        what: "report",
                        why: format!("attributes do not serialize: {e}"),
                    })?,
                )
                .bind(deployable_id)
                .execute(&mut **tx)
                .await?;
            changed = true;
        }
        Ok(changed)
    }
}

async fn insert_attribute(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    deployable_id: i64,
    key: &str,
    value: &str,
    at: &str,
) -> Result<AttributeRow, DbError> {
    let uuid = new_uuid();
    let id: i64 = sqlx::query(
        "INSERT INTO attributes (uuid, deployable_id, key, value, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
    )
    .bind(&uuid)
    .bind(deployable_id)
    .bind(key)
    .bind(value)
    .bind(at)
    .bind(at)
    .fetch_one(&mut **tx)
    .await?
    .try_get("id")?;
    Ok(AttributeRow {
        id,
        uuid,
        deployable_id,
        key: key.to_owned(),
        value: value.to_owned(),
        created_at: at.to_owned(),
        updated_at: at.to_owned(),
    })
}

async fn insert_handle(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    deployable_id: i64,
    attach_type: &str,
    attach_info: &str,
    at: &str,
) -> Result<(), DbError> {
    sqlx::query(
        "INSERT INTO attach_handles (uuid, deployable_id, in_use, attach_type, attach_info, created_at, updated_at) \
         VALUES ($1, $2, 0, $3, $4, $5, $6)",
    )
    .bind(new_uuid())
    .bind(deployable_id)
    .bind(attach_type)
    .bind(attach_info)
    .bind(at)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A report drops an in-use device (or one of its in-use handles), whose status was
/// `status` before this report: the first time it is only marked `missing`; a later
/// report still without it (the device is `missing` or `lost`) confirms the loss:
/// `lost`. Either way the device and its handles stay, as the instance still has them.
async fn drop_in_use(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    host: &str,
    status: &str,
    device_id: i64,
    control_path_id: String,
    at: &str,
    out: &mut ReportOutcome,
) -> Result<(), DbError> {
    let confirmed = matches!(status, "missing" | "lost");
    let to = if confirmed { "lost" } else { "missing" };
    if status != to {
        sqlx::query("UPDATE devices SET status = $1, updated_at = $2 WHERE id = $3")
            .bind(to)
            .bind(at)
            .bind(device_id)
            .execute(&mut **tx)
            .await?;
    }
    if confirmed {
        if status != "lost" {
            tracing::warn!(host, control_path_id = %control_path_id,
                "a second report confirms an in-use device is gone: kept and marked lost");
        }
        out.lost.push(control_path_id);
    } else {
        tracing::warn!(host, control_path_id = %control_path_id,
            "a report drops an in-use device: kept and marked missing until the host's next report confirms it");
        out.unconfirmed.push(control_path_id);
    }
    Ok(())
}

/// What happens to a device when its request releases it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Back to the pool at once (release N's behaviour, and every device but SSDs).
    Immediate,
    /// An NVMe SSD goes to `cleaning` and is not allocatable until its agent reports the
    /// erase done; other devices go back at once.
    CleanSsd,
}

async fn release_handle(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    uuid: &str,
    release: Release,
) -> Result<(), DbError> {
    sqlx::query(
        "UPDATE attach_handles SET in_use = 0, updated_at = $1, revision = revision + 1, \
         cleanup_state = CASE WHEN $2 = 1 AND deployable_id IN \
           (SELECT d.id FROM deployables d JOIN devices v ON d.device_id = v.id WHERE v.type = 'SSD') \
           THEN 'cleaning' ELSE cleanup_state END \
         WHERE id = (SELECT attach_handle_id FROM accelerator_requests WHERE uuid = $3)",
    )
    .bind(now())
    .bind(i64::from(release == Release::CleanSsd))
    .bind(uuid)
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE accelerator_requests SET attach_handle_id = NULL WHERE uuid = $1")
        .bind(uuid)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

fn device_row(r: &AnyRow) -> Result<DeviceRow, DbError> {
    Ok(DeviceRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        device_type: r.try_get("type")?,
        vendor: r.try_get("vendor")?,
        model: r.try_get("model")?,
        std_board_info: r.try_get("std_board_info")?,
        hostname: r.try_get("hostname")?,
        vendor_board_info: r.try_get("vendor_board_info")?,
        status: r.try_get("status")?,
        maintaining: r.try_get::<i64, _>("maintaining")? != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn deployable_row(r: &AnyRow) -> Result<DeployableRow, DbError> {
    let name: String = r.try_get("name")?;
    Ok(DeployableRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        name: name.clone(),
        device_id: r.try_get("device_id")?,
        hostname: r.try_get("hostname")?,
        control_path_id: r.try_get("control_path_id")?,
        num_accelerators: r.try_get("num_accelerators")?,
        driver_name: r.try_get("driver_name")?,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
        rp_uuid: rp_uuid(&name),
        attributes: BTreeMap::new(),
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn attribute_row(r: &AnyRow) -> Result<AttributeRow, DbError> {
    Ok(AttributeRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        deployable_id: r.try_get("deployable_id")?,
        key: r.try_get("key")?,
        value: r.try_get("value")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn profile_row(r: &AnyRow) -> Result<DeviceProfileRow, DbError> {
    let groups: String = r.try_get("groups")?;
    Ok(DeviceProfileRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        name: r.try_get("name")?,
        groups: serde_json::from_str(&groups).map_err(|e| DbError::Invalid {
            what: "stored device profile groups",
            why: e.to_string(),
        })?,
        description: r.try_get("description")?,
        created_at: r.try_get("created_at")?,
    })
}

fn arq_row(r: &AnyRow) -> Result<ArqRow, DbError> {
    let state: String = r.try_get("state")?;
    Ok(ArqRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        state: state
            .parse()
            .map_err(|e: crate::lifecycle::UnknownState| DbError::Invalid {
                what: "stored state",
                why: e.to_string(),
            })?,
        device_profile_name: r.try_get("device_profile_name")?,
        device_profile_group_id: r.try_get("device_profile_group_id")?,
        hostname: r.try_get("hostname")?,
        device_rp_uuid: r.try_get("device_rp_uuid")?,
        instance_uuid: r.try_get("instance_uuid")?,
        project_id: r.try_get("project_id")?,
        attach_handle_uuid: r.try_get("handle_uuid")?,
        attach_handle_type: r.try_get("handle_type")?,
        attach_handle_info: r.try_get("handle_info")?,
        created_at: Some(r.try_get("created_at")?),
        updated_at: Some(r.try_get("updated_at")?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers PostgreSQL's TLS request with a zero byte, as seen through
    /// a proxy while PostgreSQL restarted: the error sqlx gives for it is an outage (503,
    /// or outcome unknown for a write), not an internal error (500).
    #[tokio::test]
    async fn a_connection_that_speaks_nonsense_is_an_outage() {
        use sqlx::Connection;
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let _ = s.write_all(&[0]).await;
            }
        });
        let url = format!("postgres://u:p@127.0.0.1:{port}/d?sslmode=prefer");
        let e = sqlx::PgConnection::connect(&url)
            .await
            .expect_err("no PostgreSQL there");
        assert!(matches!(e, sqlx::Error::Protocol(_)), "{e:?}");
        assert!(DbError::Query(e).is_unavailable());
    }

    #[test]
    fn in_memory_sqlite_urls_are_recognised() {
        for url in [
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite::memory:?cache=shared",
            "sqlite://accel?mode=memory",
            "sqlite:file:x?cache=shared&mode=memory",
        ] {
            assert!(is_sqlite_memory(url), "{url}");
        }
        for url in ["sqlite:///var/lib/accel.db", "sqlite://memory.db?mode=rwc"] {
            assert!(!is_sqlite_memory(url), "{url}");
        }
    }

    #[test]
    fn urls_are_redacted() {
        assert_eq!(
            redact_url("postgres://verso:secret@127.0.0.1:5432/db"),
            "postgres://verso:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact_url("postgres://verso@127.0.0.1/db?sslmode=require&password=secret"),
            "postgres://verso@127.0.0.1/db?sslmode=require&password=***"
        );
        assert_eq!(
            redact_url("sqlite:///var/lib/accel.db"),
            "sqlite:///var/lib/accel.db"
        );
    }
}
