//! The conductor's database: SQLite (a file, created and migrated on first start),
//! PostgreSQL or MySQL/MariaDB, chosen by URL, through sqlx's Any driver; one schema, one
//! set of queries. Queries are written with PostgreSQL's numbered placeholders, which
//! [`Backend::sql`] turns into MySQL's `?`; where MySQL has no form of a statement (a
//! conditional upsert, `RETURNING` on an upsert, a transaction-scoped advisory lock) the
//! query module says what it does there instead.
//!
//! Rules the queries keep, on every backend:
//! - every state change of an accelerator request is a conditional update on the
//!   allowed predecessor states ([`ArqState::allowed_from`]); a request that moved
//!   meanwhile is a typed [`DbError::InvalidTransition`], never overwritten;
//! - an attach handle is taken by `UPDATE ... SET in_use = 1 WHERE id = ? AND in_use = 0`,
//!   so of two conductors racing for one handle exactly one gets it;
//! - every write transaction starts with a write, so SQLite takes its write lock first
//!   (waiting up to its busy timeout) instead of failing a read-to-write upgrade;
//! - reports of one host are applied one after the other (see [`Db::report`]).
//!
//! # The schema: Cyborg 17's, plus accel's additions
//!
//! The database is OpenStack Cyborg 17's (its tables as its alembic revision
//! `b47c8f2d1e3a` makes them, [`accel_cyborg17::schema`]) with accel's additions, sqlx
//! migrations numbered from [`FIRST_ADDITION`] (`migrations-cyborg17/{sqlite,postgres,
//! mysql}`, one set per backend with the same versions); [`Db::migrate`] makes it in an
//! empty database or takes a Cyborg 17 database in place (the `on_cyborg17` module's text).
//!
//! The additions run before release N+1 is finalized, while release N (Cyborg 17, its own
//! services or accel's in Rust) may still run, or be rolled back to, on the same
//! database. So they **only add**: new tables, and new columns that are nullable or have
//! a default, which Cyborg 17's inserts fill by default and its reads never name (a
//! trigger fills accel's column from what a Cyborg writer stores, where accel needs it).
//! Anything that removes or rewrites (drop or rename a column or table, `NOT NULL`
//! without a default, change a type, move or rewrite data, a constraint old rows or old
//! writers may break) waits for a later release, after this one is finalized; release N
//! then can no longer start. Queries name their columns (no `SELECT *`, no positional
//! `INSERT`). A migration file is never edited once released (sqlx checks the checksums
//! it recorded), so the rule lives here and in `docs/architecture.md` (Conventions), not
//! in the SQL.

mod arqs;
mod attributes;
mod changes;
mod dialect;
mod inventory;
pub use inventory::FpgaTarget;
mod leases;
mod on_cyborg17;
mod profiles;
mod reports;
mod rows;
mod sql;
pub(crate) use leases::now_ms;

pub use arqs::Release;
pub use changes::ChangeMarks;
pub use dialect::Dialect;
pub(crate) use on_cyborg17::holds_cyborg_rows;
pub use on_cyborg17::{addition_versions, OnCyborg17, FIRST_ADDITION};

/// Cyborg's table of accelerator requests, which accel's requests are.
pub const ARQS: &str = "extended_accelerator_requests";

/// The column of accel's inventory state of a device (`available`, `missing`, `lost`),
/// beside Cyborg's `status` (the operator's disable, `enabled` or `maintaining`).
pub const INVENTORY_STATUS: &str = "inventory_status";

pub use rows::{
    rp_uuid, AgentWire, ArqRow, AttachHandleRow, AttributeRow, ControlPathRow, DeployableReport,
    DeployableRow, DeviceProfileRow, DeviceRow, DeviceStatus, ListFilter, ReportOutcome,
    ReportedDeployable, ReportedDevice, UnknownAgentWire, UnknownDeviceStatus,
};
pub(crate) use rows::{text_compatible, text_of, IntFlag, ParsedOption};

use crate::lifecycle::ArqState;
use sql::Sql;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::Migrate;
use sqlx::AnyPool;
use std::collections::BTreeSet;
use std::time::Duration;

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite://path` (created if missing).
    Sqlite,
    /// `postgres://user:pass@host/db`.
    Postgres,
    /// `mysql://user:pass@host/db` (or `mariadb://`): MariaDB 10.5 or newer, the
    /// database OpenStack deployments, Cyborg's included, run on.
    Mysql,
}

impl Backend {
    /// The backend a connection of the pool speaks (for queries run on a transaction
    /// away from [`Db`]).
    pub fn of(conn: &sqlx::AnyConnection) -> Backend {
        match conn.backend_name() {
            "PostgreSQL" => Backend::Postgres,
            "MySQL" => Backend::Mysql,
            _ => Backend::Sqlite,
        }
    }
}

/// Errors of the database layer.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL names no supported database.
    #[error("unsupported database URL {0:?}: use sqlite://PATH, postgres://USER:PASS@HOST/DB or mysql://USER:PASS@HOST/DB")]
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
    /// A stored value does not parse (a state, status, flag or JSON text the model does
    /// not have): the database is damaged or was written by something else; an operator
    /// must look at it.
    #[error("stored {table}.{column} does not parse: {why}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// The column.
        column: String,
        /// Why it does not parse.
        why: String,
    },
    /// The database holds accel's own former schema history (sqlx migrations 1-13, made
    /// by accel before its release N became OpenStack Cyborg 17), which this build no
    /// longer migrates or reads in place; nothing was written.
    #[error(
        "this database holds accel's former schema (its migrations {applied:?} of 1-13), \
         which this accel no longer runs on: copy its rows into an empty database with \
         `accel db import-cyborg --from URL` (operator guide, \"A database of accel's former \
         schema\")"
    )]
    AccelHistory {
        /// The versions of that history the database has.
        applied: Vec<i64>,
    },
    /// The database is OpenStack Cyborg's at a revision other than Cyborg 17's: accel
    /// takes only Cyborg 17's in place, so nothing is applied.
    #[error(
        "this is an OpenStack Cyborg database at alembic revision {revision}, not Cyborg 17's \
         (b47c8f2d1e3a), which is the one accel takes in place: upgrade it with Cyborg 17's \
         `cyborg-dbsync upgrade` first (operator guide, \"Taking over Cyborg's database\")"
    )]
    CyborgDatabase {
        /// Cyborg's schema revision (`b47c8f2d1e3a` for Cyborg 17).
        revision: String,
    },
    /// [`Db::migrate`] found a database that is neither empty, Cyborg 17's nor accel's
    /// former history; nothing was written.
    #[error("not an empty or OpenStack Cyborg 17 database ({found}): {hint}")]
    NotOnCyborg17 {
        /// What the database is.
        found: String,
        /// What the operator can do.
        hint: &'static str,
    },
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

/// What a failed read of `table`'s rows is: a column whose stored value does not decode
/// is [`DbError::Corrupt`] naming the table and the column, anything else the query's
/// failure.
pub(crate) fn read_error(table: &'static str) -> impl Fn(sqlx::Error) -> DbError {
    move |e| match e {
        sqlx::Error::ColumnDecode { index, source } => DbError::Corrupt {
            table,
            // sqlx names the column with its Debug form (quoted) when a plain field
            // does not decode, plainly when a conversion refuses it.
            column: index.trim_matches('"').to_owned(),
            why: source.to_string(),
        },
        e => DbError::Query(e),
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
            } else if let Some(m) = d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                // MySQL/MariaDB's error numbers: 1040 too many connections, 1049 the
                // database is gone, 1053 shutting down, 1152 connection aborted, 1927
                // connection killed, 4031 disconnected for inactivity.
                matches!(m.number(), 1040 | 1049 | 1053 | 1152 | 1927 | 4031)
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

pub(crate) fn now() -> String {
    timestamp(chrono::Utc::now())
}

/// The text every stored timestamp has (RFC 3339 to the second, `Z`): fixed width, so
/// two compare as text in SQL as they do in time.
pub(crate) fn timestamp(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A time as the queries read it (`Dialect::time`: `YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00`,
/// empty for a null column, which Cyborg's writers leave in `updated_at` until a change)
/// as an object's field; the parse error when it is neither.
pub(crate) fn shown_time_value(text: &str) -> Result<Option<verso::DateTime>, chrono::ParseError> {
    if text.is_empty() {
        return Ok(None);
    }
    chrono::DateTime::parse_from_rfc3339(text).map(|t| Some(verso::DateTime::from_fixed(t)))
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

/// `text`, cut to `SHOWN` characters with `...` when longer: messages echo what a
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

/// Whether a MySQL-protocol server of `version` (its `VERSION()`) runs accel's queries:
/// MariaDB 10.5 or newer, the first with `INSERT ... RETURNING`, which accel's inserts
/// use on every backend. MySQL itself has no `RETURNING`.
fn supported_mysql(version: &str) -> Result<(), String> {
    if !version.contains("MariaDB") {
        return Err(format!(
            "{version:?} is MySQL; accel's database runs on MariaDB 10.5 or newer (MySQL has no INSERT ... RETURNING)"
        ));
    }
    // MariaDB before 11 put `5.5.5-` before its version in the handshake's version text.
    let own = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut numbers = own.split(['.', '-']).map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(major)), Some(Ok(minor))) if (major, minor) >= (10, 5) => Ok(()),
        _ => Err(format!(
            "MariaDB {version:?}: accel's database runs on MariaDB 10.5 or newer"
        )),
    }
}

/// The conductor's database.
#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

impl Dialect {
    /// The columns of a [`DeviceRow`].
    pub(crate) fn device_columns(self) -> String {
        // Cyborg's `status` is the operator's disable (`maintaining` when not
        // `enabled`); accel's inventory state is `inventory_status`.
        format!(
            "id, uuid, {}, vendor, model, std_board_info, hostname, vendor_board_info, \
             {INVENTORY_STATUS} AS status, {} AS maintaining, {}, {}",
            self.text_as("type"),
            self.text("status"),
            self.time_as("created_at"),
            self.time_as("updated_at"),
        )
    }

    /// The columns of a [`DeployableRow`].
    pub(crate) fn deployable_columns(self) -> String {
        format!(
            "id, uuid, name, device_id, hostname, control_path_id, num_accelerators, \
             driver_name, enabled, {}, {}, {}",
            self.text_as("bitstream_id"),
            self.time_as("created_at"),
            self.time_as("updated_at"),
        )
    }

    /// The columns of an [`AttributeRow`] (`key` is quoted: MySQL reserves the word, and
    /// its connections run with `ANSI_QUOTES`).
    pub(crate) fn attribute_columns(self) -> String {
        format!(
            "id, uuid, deployable_id, \"key\", value, {}, {}",
            self.time_as("created_at"),
            self.time_as("updated_at"),
        )
    }

    /// The columns of a [`DeviceProfileRow`]: the groups are Cyborg's `profile_json`
    /// (`{"groups": [...]}`) whole, parsed by the row (`rows::ProfileGroups`), so text
    /// that is not JSON is reported as such rather than failing the query.
    pub(crate) fn profile_columns(self) -> String {
        format!(
            "id, uuid, name, profile_json AS \"groups\", description, {}",
            self.time_as("created_at"),
        )
    }

    /// A request with its handle, before a `WHERE` on `r` (the request) and `h` (its
    /// handle): Cyborg's `extended_accelerator_requests` by profile id, the name joined.
    pub(crate) fn arq_select(self) -> String {
        format!(
            "SELECT r.id, r.uuid, {} AS state, p.name AS device_profile_name, \
             r.device_profile_group_id, r.hostname, r.device_rp_uuid, r.instance_uuid, \
             r.project_id, {} AS created_at, {} AS updated_at, \
             h.uuid AS handle_uuid, {} AS handle_type, h.attach_info AS handle_info \
             FROM {ARQS} r \
             JOIN device_profiles p ON p.id = r.device_profile_id \
             LEFT JOIN attach_handles h ON r.attach_handle_id = h.id",
            self.text("r.state"),
            self.time("r.created_at"),
            self.time("r.updated_at"),
            self.text("h.attach_type"),
        )
    }
}

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
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Backend::Mysql
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
        let unreachable = |source| DbError::Connect {
            url: redact_url(url),
            source,
        };
        let in_memory = backend == Backend::Sqlite && is_sqlite_memory(url);
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite if in_memory => 1,
                Backend::Sqlite => 4,
                Backend::Postgres | Backend::Mysql => 16,
            })
            .min_connections(u32::from(in_memory))
            .idle_timeout((!in_memory).then_some(Duration::from_secs(10 * 60)))
            .max_lifetime((!in_memory).then_some(Duration::from_secs(30 * 60)))
            .acquire_timeout(wait)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    match backend {
                        Backend::Sqlite => {
                            sqlx::query("PRAGMA foreign_keys = ON")
                                .execute(&mut *conn)
                                .await?;
                            sqlx::query("PRAGMA busy_timeout = 30000")
                                .execute(&mut *conn)
                                .await?;
                        }
                        // The queries are the other backends': `"key"` an identifier
                        // (ANSI_QUOTES), text too long for its column refused rather than
                        // cut (strict), and PostgreSQL's isolation, under which every
                        // statement reads what committed before it.
                        Backend::Mysql => {
                            sqlx::query(
                                "SET SESSION sql_mode = CONCAT(@@sql_mode, \
                                 ',ANSI_QUOTES,STRICT_ALL_TABLES,NO_ZERO_DATE')",
                            )
                            .execute(&mut *conn)
                            .await?;
                            sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                                .execute(&mut *conn)
                                .await?;
                        }
                        Backend::Postgres => {}
                    }
                    Ok(())
                })
            })
            .connect(&url_owned)
            .await
            .map_err(unreachable)?;
        if backend == Backend::Mysql {
            let version: String = sqlx::query_scalar("SELECT VERSION()")
                .fetch_one(&pool)
                .await
                .map_err(unreachable)?;
            if let Err(why) = supported_mysql(&version) {
                pool.close().await;
                return Err(DbError::Invalid {
                    what: "database server",
                    why,
                });
            }
        }
        Ok(Db { pool, backend })
    }

    /// Creates an empty database named `name` on the server `server` reaches (MySQL's
    /// with `utf8mb4_bin`, as accel's tables are) and returns its URL: `server` with its
    /// database, if it names one, replaced. For tests and benchmarks that make a database
    /// per run; `name` must be a plain identifier.
    pub async fn create_database(server: &str, name: &str) -> Result<String, DbError> {
        Db::on_server(server, |backend| {
            let options = match backend {
                Backend::Mysql => " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
                Backend::Postgres | Backend::Sqlite => "",
            };
            format!("CREATE DATABASE {name}{options}")
        })
        .await?;
        let (base, query) = server
            .split_once('?')
            .map_or((server, None), |(b, q)| (b, Some(q)));
        // What follows `scheme://authority` is the database, if any.
        let base = match base.split_once("://") {
            Some((scheme, rest)) => {
                let authority = rest.split_once('/').map_or(rest, |(a, _)| a);
                format!("{scheme}://{authority}")
            }
            None => base.to_owned(),
        };
        Ok(match query {
            Some(q) => format!("{base}/{name}?{q}"),
            None => format!("{base}/{name}"),
        })
    }

    /// Drops database `name` on the server `server` reaches, if it is there (on
    /// PostgreSQL whatever sessions it still has).
    pub async fn drop_database(server: &str, name: &str) -> Result<(), DbError> {
        Db::on_server(server, |backend| {
            let force = match backend {
                Backend::Postgres => " WITH (FORCE)",
                Backend::Mysql | Backend::Sqlite => "",
            };
            format!("DROP DATABASE IF EXISTS {name}{force}")
        })
        .await
    }

    /// Runs one administrative statement, written by `statement` for the server's
    /// backend, on a connection of its own to the server `server` reaches, closed after.
    async fn on_server(
        server: &str,
        statement: impl FnOnce(Backend) -> String,
    ) -> Result<(), DbError> {
        let admin = Db::connect_within(server, Duration::from_secs(10)).await?;
        let done = sqlx::query(&statement(admin.backend))
            .execute(admin.pool())
            .await;
        admin.close().await;
        done?;
        Ok(())
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// How queries are written for it.
    pub fn dialect(&self) -> Dialect {
        Dialect {
            backend: self.backend,
        }
    }

    /// Makes the database accel's schema, Cyborg 17's with accel's additions; returns
    /// the versions of the additions applied now.
    ///
    /// An empty database gets OpenStack Cyborg 17's schema (stamped with its alembic
    /// revision [`accel_cyborg17::schema::ALEMBIC_HEAD`], as Cyborg's `cyborg-dbsync`
    /// would) and the additions. A database of Cyborg 17's is taken in place: it gets
    /// the additions it lacks, its rows kept as they are. Anything else is refused
    /// before anything is written: another Cyborg revision ([`DbError::CyborgDatabase`]),
    /// accel's own former schema history (migrations 1-13, which this build no longer
    /// migrates: [`DbError::AccelHistory`]), tables of something else
    /// ([`DbError::NotOnCyborg17`]). [`Db::sync_on_cyborg17`] says also whether it made
    /// Cyborg's schema.
    pub async fn migrate(&self) -> Result<Vec<i64>, DbError> {
        Ok(self.sync_on_cyborg17().await?.applied)
    }

    /// accel's additions not applied to the database yet (all of them for an empty
    /// database, which [`Db::migrate`] gives Cyborg 17's schema first).
    pub async fn pending_migrations(&self) -> Result<Vec<i64>, DbError> {
        let applied = self.applied_migrations().await?;
        Ok(self
            .additions()
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect())
    }

    /// Whether the database has a table `name` (in the connection's schema).
    async fn table_exists(&self, name: &str) -> Result<bool, DbError> {
        let n: i64 = sqlx::query_scalar(&tables_named(self.backend))
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        Ok(n > 0)
    }

    /// Migrations applied to the database (by any build).
    pub async fn applied_migrations(&self) -> Result<BTreeSet<i64>, DbError> {
        // sqlx's `Migrate` reads its table but fails when there is none, and creating it
        // (`ensure_migrations_table`) is a write: `accel api` and `accel upgrade check`
        // ask on databases they must not change. So whether it exists is asked first.
        if !self.table_exists("_sqlx_migrations").await? {
            return Ok(BTreeSet::new());
        }
        let mut conn = self.pool.acquire().await?;
        // A migration that failed half-way is recorded, but not applied.
        let failed = conn.dirty_version().await?;
        Ok(conn
            .list_applied_migrations()
            .await?
            .into_iter()
            .map(|m| m.version)
            .filter(|v| Some(*v) != failed)
            .collect())
    }

    /// The pool, for the conductor's own queries.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A page of `table` (which has `id`, `uuid` and `hostname`) by `filter`, oldest first.
    async fn page<T>(
        &self,
        table: &'static str,
        columns: &str,
        filter: &ListFilter,
    ) -> Result<Vec<T>, DbError>
    where
        T: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        let mut sql = Sql::new(
            self.backend,
            format!("SELECT {columns} FROM {table} t WHERE 1 = 1"),
        );
        if let Some(host) = filter.host.as_ref().filter(|h| !h.is_empty()) {
            sql.push(" AND hostname = ").bind(host.clone());
        }
        after_marker(&mut sql, table, "t", filter);
        sql.push(" ORDER BY id LIMIT ").bind(page_limit(filter));
        sql.fetch_all(table, &self.pool).await
    }

    /// The row of `table` with `uuid`, or `NotFound` naming `kind`.
    async fn one<T>(
        &self,
        table: &'static str,
        columns: &str,
        kind: &'static str,
        uuid: &str,
    ) -> Result<T, DbError>
    where
        T: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
    {
        sqlx::query_as(
            &self
                .backend
                .sql(&format!("SELECT {columns} FROM {table} WHERE uuid = $1")),
        )
        .bind(uuid)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error(table))?
        .ok_or_else(|| DbError::NotFound {
            kind,
            id: shown(uuid),
        })
    }
}

/// The query counting the tables named `$1` in the connection's schema, on `backend`:
/// asked of the catalog, so a missing table is no error (which would abort a PostgreSQL
/// transaction).
pub(crate) fn tables_named(backend: Backend) -> std::borrow::Cow<'static, str> {
    backend.sql(match backend {
        Backend::Sqlite => {
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = $1"
        }
        Backend::Postgres => {
            "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name = $1 AND table_schema = current_schema()"
        }
        Backend::Mysql => {
            "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_name = $1 AND table_schema = DATABASE()"
        }
    })
}

/// At most this many rows in a page without a limit.
const DEFAULT_PAGE: u32 = 1000;

/// A page's limit as bound.
fn page_limit(filter: &ListFilter) -> i64 {
    i64::from(filter.limit.unwrap_or(DEFAULT_PAGE))
}

/// With a marker, only rows of `table` (aliased `alias`) after the marker row, by id (a
/// marker that names no row: from the start).
fn after_marker(sql: &mut Sql, table: &str, alias: &str, filter: &ListFilter) {
    if let Some(marker) = filter.marker.as_ref().filter(|m| !m.is_empty()) {
        sql.push(&format!(
            " AND {alias}.id > COALESCE((SELECT id FROM {table} WHERE uuid = "
        ))
        .bind(marker.clone())
        .push("), 0)");
    }
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
    fn mariadb_from_10_5_is_supported_and_mysql_is_not() {
        for ok in [
            "10.11.6-MariaDB-0+deb12u1",
            "10.5.0-MariaDB",
            "11.4.2-MariaDB-log",
            "5.5.5-10.6.1-MariaDB",
        ] {
            assert_eq!(supported_mysql(ok), Ok(()), "{ok}");
        }
        for refused in [
            "10.4.32-MariaDB",
            "8.0.36",
            "8.4.0-commercial",
            "5.5.5-10.1.48-MariaDB",
        ] {
            assert!(supported_mysql(refused).is_err(), "{refused}");
        }
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
