//! Taking over a real OpenStack Cyborg 17 database (`accel db import-cyborg`): the
//! devices, deployables, attach handles, attributes, device profiles and accelerator
//! requests a running Cyborg deployment holds become accel's, UUIDs kept, so Nova's
//! requests, the API's links and Placement's providers stay valid across the switch.
//!
//! The source is Cyborg's own database (`mysql://` as Cyborg's `[database] connection`
//! names it, `mysql+pymysql://` accepted; or `sqlite://`), at Cyborg 17's schema
//! revision ([`CYBORG_17_REVISION`]); or accel's own database (that schema with accel's
//! additions; also `postgres://`), moved to another server; or a database of accel's own
//! former schema history at its last migration (13; also `postgres://`), which
//! [`Db::migrate`] refuses: it holds Cyborg's control paths, `profile_json` and (as a
//! view) its `extended_accelerator_requests`. From accel's databases what only accel
//! holds (a device's inventory state and disable, a handle's cleanup) is kept too. It is
//! only read, in one read transaction (a consistent snapshot). Everything is written to
//! accel's database in one transaction, checked first: a row accel cannot hold refuses
//! the whole import, naming the row, and nothing is written.
//!
//! What changes shape on the way:
//! - a device's control path (`controlpath_ids`, Cyborg's `cpid_info` JSON) is kept as
//!   Cyborg's row (UUID, text, times; its handles' `cpid_id` point at it) and also
//!   becomes its deployables' PCI address, the key accel's reports are diffed by;
//! - every deployable of a device is kept, with its UUID, name (so its provider),
//!   attach handles and attributes (Cyborg's Intel NIC driver makes one per SR-IOV
//!   virtual function); their names must differ within a device, as accel's report
//!   diff pairs a device's deployables by name;
//! - a profile's `profile_json` becomes its groups, checked as accel checks a new
//!   profile ([`crate::groups::normalize`]), and is kept as Cyborg wrote it;
//! - ids are the target's own: a request's profile and attach handle, a handle's
//!   deployable and control path, point at the rows imported;
//! - times are whole seconds (Cyborg's MySQL `DATETIME`s are), in the target's form.
//!
//! Placement is not called: Cyborg named each deployable's provider with the same
//! name-based UUID accel computes ([`crate::db::rp_uuid`]), so the providers Cyborg
//! made are the ones accel's reconciler keeps (the import marks every imported host
//! changed, so the next pass looks at them). Cyborg's stored `rp_uuid` is kept until
//! the reconciler has synced the host and writes its own; one that differs from the
//! name's is reported in [`ImportSummary::notes`].
//!
//! The target is an empty database, which gets accel's schema (Cyborg 17's with accel's
//! additions, as `accel db sync` makes it there), or one holding no rows yet; the rows
//! are written as Cyborg stores them (its device `status` and `device_state`, a
//! request's `substate` and profile id, its times as `DATETIME`s) with accel's additions
//! filled. A Cyborg 17 source puts the deployment at release N (its rows without an accel
//! version record: [`Db::starts_at_release_n`]): its hosts run Cyborg 17 until accel's
//! agents replace them. A target an
//! accel conductor has already started on at a later release is refused
//! ([`ImportError::TargetPastReleaseN`]): Cyborg's hosts would be refused as older.
//!
//! Run it again and it changes nothing: an accel database that already holds exactly
//! this Cyborg database's rows answers [`Imported::Already`]; one that holds anything
//! else is refused ([`ImportError::TargetNotEmpty`]).

use crate::db::{Db, DbError, ARQS};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, FromRow};
use std::collections::BTreeSet;
use std::time::Duration;

/// The alembic revision of Cyborg 17's schema (`add_device_state`, the head of
/// openstack-cyborg 17.0.0's migrations): the only one this import reads.
pub const CYBORG_17_REVISION: &str = "b47c8f2d1e3a";

/// The device types accel manages (Cyborg's others, `MDEV`, `PCI` and `NVME`, refuse
/// the import, as they refuse a Cyborg agent's report).
const ACCEL_TYPES: [&str; 6] = ["GPU", "FPGA", "AICHIP", "QAT", "NIC", "SSD"];

/// Why an import did not happen (nothing was written).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The source URL is not a database this import reads.
    #[error("unsupported Cyborg database URL {0:?}: use mysql://USER:PASS@HOST/DB (or Cyborg's mysql+pymysql:// form), sqlite://PATH, or for accel's former schema also postgres://USER:PASS@HOST/DB")]
    UnsupportedUrl(String),
    /// Cyborg's database could not be opened.
    #[error("cannot open the Cyborg database {url}: {source}")]
    Connect {
        /// The URL, password masked.
        url: String,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
    /// The source is not at Cyborg 17's schema (or not a Cyborg database).
    #[error("the database is not at Cyborg 17's schema revision {CYBORG_17_REVISION} (found {}): run openstack-cyborg 17's `cyborg-dbsync upgrade` on it first", .found.as_deref().unwrap_or("no alembic_version"))]
    Revision {
        /// The revision found, if any.
        found: Option<String>,
    },
    /// The source holds accel's own former schema history, but not all of it: only its
    /// last migration (13) has the rows in the form this import reads.
    #[error("the database holds accel's former schema at migration {found} of 13: migrate it to 13 with `accel db sync` of an accel release before this one (one that still ran that history), then import it")]
    AccelHistoryBehind {
        /// The newest migration of that history it has.
        found: i64,
    },
    /// Reading a table of Cyborg's failed.
    #[error("reading Cyborg's {table}: {source}")]
    Read {
        /// The table.
        table: &'static str,
        /// The cause.
        #[source]
        source: sqlx::Error,
    },
    /// A row of Cyborg's that accel cannot hold.
    #[error("Cyborg's {table} row {uuid}: {why}")]
    Row {
        /// The table.
        table: &'static str,
        /// The row's UUID (or id).
        uuid: String,
        /// What is wrong.
        why: String,
    },
    /// accel's database already holds rows this Cyborg database does not have.
    #[error("accel's database already holds {what} {uuid}, which the Cyborg database does not: import into an empty database")]
    TargetNotEmpty {
        /// Which kind of row.
        what: &'static str,
        /// Its UUID.
        uuid: String,
    },
    /// accel's database holds a deployment past release N: a Cyborg 17 source's hosts,
    /// which run release N, would be refused as older than it.
    #[error("accel's database holds a deployment at apparent version {apparent} (finalizing: {finalizing}), past release N (1, not finalizing), where Cyborg 17's hosts are: they would be refused; import into a database no accel conductor has started on")]
    TargetPastReleaseN {
        /// The target's apparent version.
        apparent: u32,
        /// Whether a finalization is under way there.
        finalizing: bool,
    },
    /// accel's database failed.
    #[error("accel's database: {0}")]
    Target(#[from] DbError),
}

impl ImportError {
    fn row(table: &'static str, uuid: impl Into<String>, why: impl Into<String>) -> Self {
        ImportError::Row {
            table,
            uuid: uuid.into(),
            why: why.into(),
        }
    }
}

/// What an import did (or, with `dry_run`, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ImportSummary {
    /// Hosts with devices.
    pub hosts: usize,
    /// Devices.
    pub devices: usize,
    /// Deployables written (one per device).
    pub deployables: usize,
    /// Attach handles.
    pub attach_handles: usize,
    /// Attributes.
    pub attributes: usize,
    /// Device profiles.
    pub device_profiles: usize,
    /// Accelerator requests.
    pub accelerator_requests: usize,
    /// What changed shape on the way (a device without a deployable, overridden
    /// attributes, a provider UUID Cyborg stored otherwise), one line each.
    pub notes: Vec<String>,
}

/// How an import ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Imported {
    /// Written (or, dry run, checked and rolled back).
    Done(ImportSummary),
    /// accel's database already holds exactly these rows: nothing written.
    Already(ImportSummary),
}

// Cyborg's rows. Every column is read through a CAST so the one query reads MySQL
// (whose DATETIME, TINYINT and ENUM columns sqlx's Any driver does not map) and SQLite
// alike: text as CHAR, booleans as SIGNED; text columns are read as [`Text`] (MySQL
// sends a TEXT column, cast or not, as a BLOB with a character set).

/// A text column, sent as text (SQLite, MySQL's VARCHAR) or as bytes (MySQL's TEXT),
/// which must then be UTF-8. sqlx's Any driver reads a `String` from text only.
struct Text(String);

impl sqlx::Type<sqlx::Any> for Text {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <String as sqlx::Type<sqlx::Any>>::type_info()
    }
    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        crate::db::text_compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Any> for Text {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        Ok(Text(crate::db::text_of(value)?))
    }
}

impl From<Text> for String {
    fn from(t: Text) -> String {
        t.0
    }
}

/// A nullable [`Text`] column.
struct OptText(Option<String>);

impl sqlx::Type<sqlx::Any> for OptText {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <Text as sqlx::Type<sqlx::Any>>::type_info()
    }
    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        <Text as sqlx::Type<sqlx::Any>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Any> for OptText {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        use sqlx::ValueRef;
        if value.is_null() {
            return Ok(OptText(None));
        }
        Ok(OptText(Some(
            <Text as sqlx::Decode<'r, sqlx::Any>>::decode(value)?.0,
        )))
    }
}

impl From<OptText> for Option<String> {
    fn from(t: OptText) -> Option<String> {
        t.0
    }
}

#[derive(Debug, FromRow)]
struct CyDevice {
    id: i64,
    #[sqlx(try_from = "Text")]
    uuid: String,
    #[sqlx(try_from = "Text")]
    r#type: String,
    #[sqlx(try_from = "Text")]
    vendor: String,
    #[sqlx(try_from = "Text")]
    model: String,
    #[sqlx(try_from = "OptText")]
    std_board_info: Option<String>,
    #[sqlx(try_from = "OptText")]
    vendor_board_info: Option<String>,
    #[sqlx(try_from = "Text")]
    hostname: String,
    #[sqlx(try_from = "Text")]
    status: String,
    #[sqlx(try_from = "OptText")]
    device_state: Option<String>,
    /// accel's inventory state (`available`, `missing`, `lost`), which only accel's
    /// former history holds; `available` when unset.
    #[sqlx(try_from = "OptText")]
    inventory_status: Option<String>,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
    #[sqlx(try_from = "OptText")]
    updated_at: Option<String>,
}

#[derive(Debug, FromRow)]
struct CyControlPath {
    device_id: i64,
    #[sqlx(try_from = "Text")]
    uuid: String,
    #[sqlx(try_from = "Text")]
    cpid_type: String,
    #[sqlx(try_from = "Text")]
    cpid_info: String,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
    #[sqlx(try_from = "OptText")]
    updated_at: Option<String>,
}

#[derive(Debug, FromRow)]
struct CyDeployable {
    id: i64,
    #[sqlx(try_from = "Text")]
    uuid: String,
    parent_id: Option<i64>,
    #[sqlx(try_from = "Text")]
    name: String,
    num_accelerators: i64,
    device_id: i64,
    #[sqlx(try_from = "OptText")]
    rp_uuid: Option<String>,
    #[sqlx(try_from = "OptText")]
    driver_name: Option<String>,
    #[sqlx(try_from = "OptText")]
    bitstream_id: Option<String>,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
    #[sqlx(try_from = "OptText")]
    updated_at: Option<String>,
}

#[derive(Debug, FromRow)]
struct CyAttribute {
    #[sqlx(try_from = "Text")]
    uuid: String,
    deployable_id: i64,
    #[sqlx(try_from = "Text")]
    key: String,
    #[sqlx(try_from = "Text")]
    value: String,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
    #[sqlx(try_from = "OptText")]
    updated_at: Option<String>,
}

#[derive(Debug, FromRow)]
struct CyHandle {
    id: i64,
    #[sqlx(try_from = "Text")]
    uuid: String,
    deployable_id: i64,
    in_use: Option<i64>,
    #[sqlx(try_from = "Text")]
    attach_type: String,
    #[sqlx(try_from = "Text")]
    attach_info: String,
    /// accel's cleanup of the handle (an NVMe SSD being erased), which only accel's
    /// former history holds.
    #[sqlx(try_from = "OptText")]
    cleanup_state: Option<String>,
    #[sqlx(try_from = "OptText")]
    cleanup_reason: Option<String>,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
    #[sqlx(try_from = "OptText")]
    updated_at: Option<String>,
}

#[derive(Debug, FromRow)]
struct CyProfile {
    id: i64,
    #[sqlx(try_from = "Text")]
    uuid: String,
    #[sqlx(try_from = "Text")]
    name: String,
    #[sqlx(try_from = "Text")]
    profile_json: String,
    #[sqlx(try_from = "OptText")]
    description: Option<String>,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
}

#[derive(Debug, FromRow)]
struct CyArq {
    #[sqlx(try_from = "Text")]
    uuid: String,
    #[sqlx(try_from = "OptText")]
    project_id: Option<String>,
    #[sqlx(try_from = "Text")]
    state: String,
    device_profile_id: i64,
    device_profile_group_id: i64,
    #[sqlx(try_from = "OptText")]
    hostname: Option<String>,
    #[sqlx(try_from = "OptText")]
    device_rp_uuid: Option<String>,
    #[sqlx(try_from = "OptText")]
    instance_uuid: Option<String>,
    attach_handle_id: Option<i64>,
    deployable_id: Option<i64>,
    #[sqlx(try_from = "Text")]
    substate: String,
    #[sqlx(try_from = "OptText")]
    created_at: Option<String>,
    #[sqlx(try_from = "OptText")]
    updated_at: Option<String>,
}

/// A `component_versions` row of accel's database: a component's version record.
#[derive(Debug, FromRow)]
struct VersionRecordRow {
    #[sqlx(try_from = "Text")]
    component: String,
    /// The record, JSON text, copied as it is.
    #[sqlx(try_from = "Text")]
    record: String,
    #[sqlx(try_from = "Text")]
    updated_at: String,
}

/// A `fleet_members` row of accel's database: an agent some conductor heard.
#[derive(Debug, FromRow)]
struct FleetRow {
    #[sqlx(try_from = "Text")]
    component: String,
    #[sqlx(try_from = "Text")]
    member_id: String,
    #[sqlx(try_from = "Text")]
    host: String,
    software: i64,
    apparent: i64,
    #[sqlx(try_from = "Text")]
    heard_by: String,
    heartbeats: i64,
    last_seen_ms: i64,
    run_started_ms: Option<i64>,
    run_seq: Option<i64>,
}

/// accel's upgrade state, read from accel's own database only (empty from any other
/// source): copied as it is, so a deployment moved to another server stays as finalized
/// (or not) as it was, and an agent it heard on older software keeps blocking a
/// finalize until it heartbeats again or its liveness runs out.
#[derive(Debug, Default)]
struct UpgradeState {
    versions: Vec<VersionRecordRow>,
    fleet: Vec<FleetRow>,
    /// A Cyborg 17 source: its hosts run release N, where the deployment then starts
    /// (no accel version record and Cyborg's rows: [`Db::starts_at_release_n`]); a
    /// target an accel conductor started on past release N, or finalizing, is refused
    /// ([`ImportError::TargetPastReleaseN`]).
    at_release_n: bool,
}

/// Everything read from Cyborg's database.
#[derive(Debug, Default)]
struct Source {
    devices: Vec<CyDevice>,
    control_paths: Vec<CyControlPath>,
    deployables: Vec<CyDeployable>,
    attributes: Vec<CyAttribute>,
    handles: Vec<CyHandle>,
    profiles: Vec<CyProfile>,
    arqs: Vec<CyArq>,
    upgrade: UpgradeState,
}

/// The URL sqlx opens for Cyborg's `url`, or `None` if it is not one this reads.
/// Cyborg's `[database] connection` is SQLAlchemy's form: its driver suffix
/// (`mysql+pymysql://`) is dropped.
pub fn source_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    match scheme {
        "mysql" | "mysql+pymysql" | "mysql+mysqldb" | "mariadb" | "mariadb+pymysql" => {
            Some(format!("mysql://{rest}"))
        }
        "sqlite" => Some(format!("sqlite://{rest}")),
        // accel's former schema only: Cyborg 17 has no PostgreSQL.
        "postgres" | "postgresql" | "postgresql+psycopg2" => Some(format!("postgres://{rest}")),
        _ => None,
    }
}

/// The source opened for reading, and its backend.
async fn open_source(url: &str) -> Result<(AnyPool, crate::db::Backend), ImportError> {
    use crate::db::Backend;
    sqlx::any::install_default_drivers();
    let shown = crate::db::redact_url(url);
    let sqlx_url = source_url(url).ok_or_else(|| ImportError::UnsupportedUrl(shown.clone()))?;
    let backend = if sqlx_url.starts_with("mysql:") {
        Backend::Mysql
    } else if sqlx_url.starts_with("postgres:") {
        Backend::Postgres
    } else {
        Backend::Sqlite
    };
    // Only read: a SQLite source is opened read-only, never created.
    let sqlx_url = if sqlx_url.starts_with("sqlite:") && !sqlx_url.contains("mode=") {
        let sep = if sqlx_url.contains('?') { '&' } else { '?' };
        format!("{sqlx_url}{sep}mode=ro")
    } else {
        sqlx_url
    };
    let pool = AnyPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        .connect(&sqlx_url)
        .await
        .map_err(|source| ImportError::Connect { url: shown, source })?;
    Ok((pool, backend))
}

async fn read_table<T>(
    conn: &mut sqlx::AnyConnection,
    table: &'static str,
    sql: &str,
) -> Result<Vec<T>, ImportError>
where
    T: for<'r> FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
{
    sqlx::query_as::<_, T>(sql)
        .fetch_all(&mut *conn)
        .await
        .map_err(|source| ImportError::Read { table, source })
}

/// What the source database is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// OpenStack Cyborg 17's (alembic revision [`CYBORG_17_REVISION`]).
    Cyborg17,
    /// accel's own: Cyborg 17's with accel's additions (migration
    /// [`crate::db::FIRST_ADDITION`] applied), whose inventory state, disable and
    /// cleanups are kept too (moving accel's database to another server).
    Accel,
    /// accel's own former schema history at its last migration (13), which holds
    /// Cyborg's control paths, `profile_json` and (as a view) its
    /// `extended_accelerator_requests` beside accel's inventory state and cleanups.
    AccelHistory,
}

/// How the source's backend reads a column as text, aliased as itself (MySQL's `CHAR`
/// is its text; PostgreSQL's `CHAR` is one character).
#[derive(Clone, Copy)]
struct Reader(crate::db::Backend);

impl Reader {
    fn text(self, col: &str) -> String {
        self.text_as(col, col)
    }

    /// The column `col` as text, aliased `name`.
    fn text_as(self, col: &str, name: &str) -> String {
        match self.0 {
            crate::db::Backend::Mysql => format!("CAST(`{col}` AS CHAR) AS `{name}`"),
            _ => format!("CAST(\"{col}\" AS TEXT) AS \"{name}\""),
        }
    }

    fn texts(self, cols: &[&str]) -> String {
        cols.iter()
            .map(|c| self.text(c))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A null text column named `name`.
    fn null(self, name: &str) -> String {
        match self.0 {
            crate::db::Backend::Mysql => format!("CAST(NULL AS CHAR) AS `{name}`"),
            _ => format!("CAST(NULL AS TEXT) AS \"{name}\""),
        }
    }

    /// The integer (or flag) column `col` as a 64-bit integer, aliased as itself
    /// (PostgreSQL casts a `BOOLEAN`, Cyborg's flags there, to `INTEGER` only).
    fn int(self, col: &str) -> String {
        match self.0 {
            crate::db::Backend::Mysql => format!("CAST({col} AS SIGNED) AS {col}"),
            crate::db::Backend::Postgres => {
                format!("CAST(CAST({col} AS INTEGER) AS BIGINT) AS {col}")
            }
            crate::db::Backend::Sqlite => format!("CAST({col} AS BIGINT) AS {col}"),
        }
    }
}

/// Whether the source has the table `name` ([`crate::db::tables_named`]).
async fn has_table(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    reader: Reader,
    name: &'static str,
) -> Result<bool, ImportError> {
    let n: i64 = sqlx::query_scalar(&crate::db::tables_named(reader.0))
        .bind(name)
        .fetch_one(&mut **tx)
        .await
        .map_err(|source| ImportError::Read {
            table: name,
            source,
        })?;
    Ok(n > 0)
}

/// Which the source is: Cyborg 17's, or accel's former history at migration 13; refused
/// otherwise.
async fn origin(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    reader: Reader,
) -> Result<Origin, ImportError> {
    let read = |table| move |source| ImportError::Read { table, source };
    let found: Option<String> = if has_table(tx, reader, "alembic_version").await? {
        let alembic = format!("SELECT {} FROM alembic_version", reader.text("version_num"));
        sqlx::query_scalar(&alembic)
            .fetch_optional(&mut **tx)
            .await
            .map_err(read("alembic_version"))?
    } else {
        None
    };
    if found.as_deref() == Some(CYBORG_17_REVISION) {
        // accel's additions applied (not failed half-way): accel's own database.
        let accel = has_table(tx, reader, "_sqlx_migrations").await?
            && sqlx::query_scalar::<_, i64>(&reader.0.sql(
                "SELECT COUNT(*) FROM _sqlx_migrations WHERE version = $1 AND success = TRUE",
            ))
            .bind(crate::db::FIRST_ADDITION)
            .fetch_one(&mut **tx)
            .await
            .map_err(read("_sqlx_migrations"))?
                > 0;
        return Ok(if accel {
            Origin::Accel
        } else {
            Origin::Cyborg17
        });
    }
    // No alembic stamp: accel's former history, if its sqlx record is there.
    if found.is_some() || !has_table(tx, reader, "_sqlx_migrations").await? {
        return Err(ImportError::Revision { found });
    }
    let versions: Vec<i64> = sqlx::query_scalar(
        "SELECT version FROM _sqlx_migrations WHERE success = TRUE ORDER BY version",
    )
    .fetch_all(&mut **tx)
    .await
    .map_err(read("_sqlx_migrations"))?;
    match versions.iter().copied().filter(|v| *v <= 13).max() {
        Some(13) => Ok(Origin::AccelHistory),
        Some(found) => Err(ImportError::AccelHistoryBehind { found }),
        None => Err(ImportError::Revision { found: None }),
    }
}

/// accel's version and fleet records, from accel's own database.
async fn read_upgrade_state(
    conn: &mut sqlx::AnyConnection,
    r: Reader,
) -> Result<UpgradeState, ImportError> {
    Ok(UpgradeState {
        versions: read_table(
            conn,
            "component_versions",
            &format!(
                "SELECT {} FROM component_versions ORDER BY component",
                r.texts(&["component", "record", "updated_at"]),
            ),
        )
        .await?,
        fleet: read_table(
            conn,
            "fleet_members",
            &format!(
                "SELECT software, apparent, heartbeats, last_seen_ms, run_started_ms, \
                 run_seq, {} FROM fleet_members ORDER BY component, member_id",
                r.texts(&["component", "member_id", "host", "heard_by"]),
            ),
        )
        .await?,
        at_release_n: false,
    })
}

/// Reads every table the import takes, in one read transaction.
async fn read_source(pool: &AnyPool, backend: crate::db::Backend) -> Result<Source, ImportError> {
    let mut tx = pool.begin().await.map_err(|source| ImportError::Read {
        table: "alembic_version",
        source,
    })?;
    let r = Reader(backend);
    let origin = origin(&mut tx, r).await?;
    let times = r.texts(&["created_at", "updated_at"]);
    // Cyborg's device status (the operator's disable) and its cleaning state, with
    // accel's inventory state; accel's former history keeps the disable as its
    // `maintaining` flag and has no cleaning state.
    let device_states = match origin {
        Origin::Accel => r.texts(&["status", "device_state", "inventory_status"]),
        Origin::Cyborg17 => format!(
            "{}, {}",
            r.texts(&["status", "device_state"]),
            r.null("inventory_status")
        ),
        Origin::AccelHistory => format!(
            "CASE WHEN maintaining = 0 THEN 'enabled' ELSE 'maintaining' END AS status, {}, {}",
            r.null("device_state"),
            r.text_as("status", "inventory_status")
        ),
    };
    let cleanups = match origin {
        Origin::Cyborg17 => format!("{}, {}", r.null("cleanup_state"), r.null("cleanup_reason")),
        Origin::Accel | Origin::AccelHistory => r.texts(&["cleanup_state", "cleanup_reason"]),
    };
    let conn: &mut sqlx::AnyConnection = &mut tx;
    let source = Source {
        devices: read_table(
            conn,
            "devices",
            &format!(
                "SELECT id, {}, {device_states}, {times} FROM devices ORDER BY id",
                r.texts(&[
                    "uuid",
                    "type",
                    "vendor",
                    "model",
                    "std_board_info",
                    "vendor_board_info",
                    "hostname"
                ]),
            ),
        )
        .await?,
        control_paths: read_table(
            conn,
            "controlpath_ids",
            &format!(
                "SELECT device_id, {}, {times} FROM controlpath_ids ORDER BY id",
                r.texts(&["uuid", "cpid_type", "cpid_info"]),
            ),
        )
        .await?,
        deployables: read_table(
            conn,
            "deployables",
            &format!(
                "SELECT id, parent_id, num_accelerators, device_id, {}, {times} \
                 FROM deployables ORDER BY id",
                r.texts(&["uuid", "name", "rp_uuid", "driver_name", "bitstream_id"]),
            ),
        )
        .await?,
        attributes: read_table(
            conn,
            "attributes",
            &format!(
                "SELECT deployable_id, {}, {times} FROM attributes ORDER BY id",
                r.texts(&["uuid", "key", "value"]),
            ),
        )
        .await?,
        handles: read_table(
            conn,
            "attach_handles",
            &format!(
                "SELECT id, deployable_id, {}, {}, {cleanups}, {times} \
                 FROM attach_handles ORDER BY id",
                r.int("in_use"),
                r.texts(&["uuid", "attach_type", "attach_info"]),
            ),
        )
        .await?,
        profiles: read_table(
            conn,
            "device_profiles",
            &format!(
                "SELECT id, {} FROM device_profiles ORDER BY id",
                r.texts(&["uuid", "name", "profile_json", "description", "created_at"]),
            ),
        )
        .await?,
        arqs: read_table(
            conn,
            "extended_accelerator_requests",
            &format!(
                "SELECT device_profile_id, device_profile_group_id, attach_handle_id, \
                 deployable_id, {}, {times} FROM extended_accelerator_requests ORDER BY id",
                r.texts(&[
                    "uuid",
                    "project_id",
                    "state",
                    "hostname",
                    "device_rp_uuid",
                    "instance_uuid",
                    "substate"
                ]),
            ),
        )
        .await?,
        upgrade: match origin {
            Origin::Accel => read_upgrade_state(conn, r).await?,
            Origin::Cyborg17 => UpgradeState {
                at_release_n: true,
                ..UpgradeState::default()
            },
            Origin::AccelHistory => UpgradeState::default(),
        },
    };
    // Read only: nothing to keep.
    let _ = tx.rollback().await;
    Ok(source)
}

/// The UUIDs of a kind of row in accel's database.
async fn target_uuids(db: &Db, table: &str) -> Result<BTreeSet<String>, ImportError> {
    let rows: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT {} FROM {table}",
        db.dialect().text("uuid")
    ))
    .fetch_all(db.pool())
    .await
    .map_err(DbError::from)?;
    Ok(rows.into_iter().collect())
}

/// Whether accel's database is empty (`Ok(false)`), already holds exactly these rows
/// (`Ok(true)`), or holds others (an error naming one).
async fn already_imported(db: &Db, plan: &Plan) -> Result<bool, ImportError> {
    let kinds: [(&'static str, &str, BTreeSet<&str>); 3] = [
        (
            "device",
            "devices",
            plan.devices.iter().map(|d| d.uuid.as_str()).collect(),
        ),
        (
            "device profile",
            "device_profiles",
            plan.profiles.iter().map(|p| p.uuid.as_str()).collect(),
        ),
        (
            "accelerator request",
            ARQS,
            plan.arqs.iter().map(|a| a.uuid.as_str()).collect(),
        ),
    ];
    let mut empty = true;
    let mut same = true;
    for (what, table, wanted) in kinds {
        let held = target_uuids(db, table).await?;
        if let Some(other) = held.iter().find(|u| !wanted.contains(u.as_str())) {
            return Err(ImportError::TargetNotEmpty {
                what,
                uuid: other.clone(),
            });
        }
        empty &= held.is_empty();
        same &= held.len() == wanted.len();
    }
    match (empty, same) {
        (true, _) => Ok(false),
        (false, true) => Ok(true),
        // Some of these rows and not others: not an import of this database.
        (false, false) => Err(ImportError::TargetNotEmpty {
            what: "part of this Cyborg database's rows",
            uuid: "(an earlier, different import)".into(),
        }),
    }
}

/// Imports the Cyborg 17 database (or accel's former schema history) at `source` into
/// accel's `db` (migrated first: an empty database gets Cyborg 17's schema with accel's
/// additions). With `dry_run` everything is read, checked and written in the
/// transaction, which is then rolled back.
pub async fn import(source: &str, db: &Db, dry_run: bool) -> Result<Imported, ImportError> {
    let (pool, backend) = open_source(source).await?;
    let read = read_source(&pool, backend).await;
    pool.close().await;
    let plan = plan(read?)?;
    db.migrate().await?;
    if already_imported(db, &plan).await? {
        return Ok(Imported::Already(plan.summary()));
    }
    let mut tx = db.pool().begin().await.map_err(DbError::from)?;
    // Held to commit: a conductor starting meanwhile decides its release on these rows
    // (`DbVersionStore::creating`), never on the empty database under them.
    db.lock_version_record(&mut tx).await?;
    write(&mut tx, db.dialect(), &plan).await?;
    if dry_run {
        tx.rollback().await.map_err(DbError::from)?;
    } else {
        tx.commit().await.map_err(DbError::from)?;
    }
    Ok(Imported::Done(plan.summary()))
}

mod plan;
use plan::{plan, Plan};
mod write;
use write::write;

#[cfg(test)]
mod tests;
