//! Taking over a real OpenStack Cyborg 17 database (`accel db import-cyborg`): the
//! devices, deployables, attach handles, attributes, device profiles and accelerator
//! requests a running Cyborg deployment holds become accel's, UUIDs kept, so Nova's
//! requests, the API's links and Placement's providers stay valid across the switch.
//!
//! The source is Cyborg's own database (`mysql://` as Cyborg's `[database] connection`
//! names it, `mysql+pymysql://` accepted; or `sqlite://`), at Cyborg 17's schema
//! revision ([`CYBORG_17_REVISION`]); it is only read, in one read transaction (a
//! consistent snapshot). Everything is written to accel's database in one transaction,
//! checked first: a row accel cannot hold refuses the whole import, naming
//! the row, and nothing is written.
//!
//! What changes shape on the way:
//! - a device's control path (`controlpath_ids`, Cyborg's `cpid_info` JSON) is kept as
//!   Cyborg's row (UUID, text, times; its handles' `cpid_id` point at it) and also
//!   becomes its deployables' PCI address, the key accel's reports are diffed by;
//! - every deployable of a device is kept, with its UUID, name (so its provider),
//!   attach handles and attributes (Cyborg's Intel NIC driver makes one per SR-IOV
//!   virtual function); their names must differ within a device, as accel's report
//!   diff pairs a device's deployables by name;
//! - on accel's own former history, Cyborg's device `status` (`enabled`/`maintaining`)
//!   becomes accel's `maintaining` flag and its `device_state` is not kept;
//! - a profile's `profile_json` becomes its groups, checked as accel checks a new
//!   profile ([`crate::groups::normalize`]), and is kept as Cyborg wrote it;
//! - ids are the target's own: a request's profile and attach handle, a handle's
//!   deployable and control path, point at the rows imported (on accel's own former
//!   history a request names its profile);
//! - times are whole seconds (Cyborg's MySQL `DATETIME`s are), in the target's form.
//!
//! Placement is not called: Cyborg named each deployable's provider with the same
//! name-based UUID accel computes ([`crate::db::rp_uuid`]), so the providers Cyborg
//! made are the ones accel's reconciler keeps (the import marks every imported host
//! changed, so the next pass looks at them). Cyborg's stored `rp_uuid` is kept until
//! the reconciler has synced the host and writes its own; one that differs from the
//! name's is reported in [`ImportSummary::notes`].
//!
//! The target is an empty database, which gets the schema `accel db sync` makes there
//! (Cyborg 17's with accel's additions), or one holding no rows yet; the rows are
//! written in its schema's form ([`Dialect`]): on Cyborg's schema as Cyborg stores them
//! (its device `status` and `device_state`, a request's `substate` and profile id, its
//! times as `DATETIME`s) with accel's additions filled, on accel's own former history
//! as that history holds them.
//!
//! Run it again and it changes nothing: an accel database that already holds exactly
//! this Cyborg database's rows answers [`Imported::Already`]; one that holds anything
//! else is refused ([`ImportError::TargetNotEmpty`]).

use crate::db::{Db, DbError, Dialect, Schema};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, FromRow};
use std::collections::{BTreeMap, BTreeSet};
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
    #[error("unsupported Cyborg database URL {0:?}: use mysql://USER:PASS@HOST/DB (or Cyborg's mysql+pymysql:// form) or sqlite://PATH")]
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
}

const TIMES: &str =
    "CAST(created_at AS CHAR) AS created_at, CAST(updated_at AS CHAR) AS updated_at";

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
        _ => None,
    }
}

async fn open_source(url: &str) -> Result<AnyPool, ImportError> {
    sqlx::any::install_default_drivers();
    let shown = crate::db::redact_url(url);
    let sqlx_url = source_url(url).ok_or_else(|| ImportError::UnsupportedUrl(shown.clone()))?;
    // Only read: a SQLite source is opened read-only, never created.
    let sqlx_url = if sqlx_url.starts_with("sqlite:") && !sqlx_url.contains("mode=") {
        let sep = if sqlx_url.contains('?') { '&' } else { '?' };
        format!("{sqlx_url}{sep}mode=ro")
    } else {
        sqlx_url
    };
    AnyPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        .connect(&sqlx_url)
        .await
        .map_err(|source| ImportError::Connect { url: shown, source })
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

/// Reads every table the import takes, in one read transaction.
async fn read_source(pool: &AnyPool) -> Result<Source, ImportError> {
    let mut tx = pool.begin().await.map_err(|source| ImportError::Read {
        table: "alembic_version",
        source,
    })?;
    // A database without the table (not Cyborg's, or never migrated) answers a
    // database error; anything else (the connection) is a failed read.
    let found: Option<String> =
        match sqlx::query_scalar("SELECT CAST(version_num AS CHAR) FROM alembic_version")
            .fetch_optional(&mut *tx)
            .await
        {
            Ok(found) => found,
            Err(sqlx::Error::Database(_)) => None,
            Err(source) => {
                return Err(ImportError::Read {
                    table: "alembic_version",
                    source,
                })
            }
        };
    if found.as_deref() != Some(CYBORG_17_REVISION) {
        return Err(ImportError::Revision { found });
    }
    let conn: &mut sqlx::AnyConnection = &mut tx;
    let source = Source {
        devices: read_table(
            conn,
            "devices",
            &format!(
                "SELECT id, CAST(uuid AS CHAR) AS uuid, CAST(type AS CHAR) AS type, \
                 CAST(vendor AS CHAR) AS vendor, CAST(model AS CHAR) AS model, \
                 CAST(std_board_info AS CHAR) AS std_board_info, \
                 CAST(vendor_board_info AS CHAR) AS vendor_board_info, \
                 CAST(hostname AS CHAR) AS hostname, CAST(status AS CHAR) AS status, \
                 CAST(device_state AS CHAR) AS device_state, {TIMES} \
                 FROM devices ORDER BY id"
            ),
        )
        .await?,
        control_paths: read_table(
            conn,
            "controlpath_ids",
            &format!(
                "SELECT device_id, CAST(uuid AS CHAR) AS uuid, \
                 CAST(cpid_type AS CHAR) AS cpid_type, CAST(cpid_info AS CHAR) AS cpid_info, \
                 {TIMES} FROM controlpath_ids ORDER BY id"
            ),
        )
        .await?,
        deployables: read_table(
            conn,
            "deployables",
            &format!(
                "SELECT id, CAST(uuid AS CHAR) AS uuid, parent_id, CAST(name AS CHAR) AS name, \
                 num_accelerators, device_id, CAST(rp_uuid AS CHAR) AS rp_uuid, \
                 CAST(driver_name AS CHAR) AS driver_name, \
                 CAST(bitstream_id AS CHAR) AS bitstream_id, {TIMES} FROM deployables ORDER BY id"
            ),
        )
        .await?,
        attributes: read_table(
            conn,
            "attributes",
            &format!(
                "SELECT CAST(uuid AS CHAR) AS uuid, deployable_id, CAST(`key` AS CHAR) AS `key`, \
                 CAST(value AS CHAR) AS value, {TIMES} FROM attributes ORDER BY id"
            ),
        )
        .await?,
        handles: read_table(
            conn,
            "attach_handles",
            &format!(
                "SELECT id, CAST(uuid AS CHAR) AS uuid, deployable_id, \
                 CAST(in_use AS SIGNED) AS in_use, CAST(attach_type AS CHAR) AS attach_type, \
                 CAST(attach_info AS CHAR) AS attach_info, {TIMES} FROM attach_handles ORDER BY id"
            ),
        )
        .await?,
        profiles: read_table(
            conn,
            "device_profiles",
            "SELECT id, CAST(uuid AS CHAR) AS uuid, CAST(name AS CHAR) AS name, \
             CAST(profile_json AS CHAR) AS profile_json, \
             CAST(description AS CHAR) AS description, \
             CAST(created_at AS CHAR) AS created_at FROM device_profiles ORDER BY id",
        )
        .await?,
        arqs: read_table(
            conn,
            "extended_accelerator_requests",
            &format!(
                "SELECT CAST(uuid AS CHAR) AS uuid, CAST(project_id AS CHAR) AS project_id, \
                 CAST(state AS CHAR) AS state, device_profile_id, device_profile_group_id, \
                 CAST(hostname AS CHAR) AS hostname, \
                 CAST(device_rp_uuid AS CHAR) AS device_rp_uuid, \
                 CAST(instance_uuid AS CHAR) AS instance_uuid, attach_handle_id, deployable_id, \
                 CAST(substate AS CHAR) AS substate, {TIMES} \
                 FROM extended_accelerator_requests ORDER BY id"
            ),
        )
        .await?,
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
            db.dialect().arqs_table(),
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

/// Imports the Cyborg 17 database at `source` into accel's `db` (migrated first: an
/// empty database gets Cyborg 17's schema with accel's additions). With `dry_run`
/// everything is read, checked and written in the transaction, which is then rolled
/// back.
pub async fn import(source: &str, db: &mut Db, dry_run: bool) -> Result<Imported, ImportError> {
    let pool = open_source(source).await?;
    let read = read_source(&pool).await;
    pool.close().await;
    let plan = plan(read?)?;
    db.migrate().await?;
    if already_imported(db, &plan).await? {
        return Ok(Imported::Already(plan.summary()));
    }
    let mut tx = db.pool().begin().await.map_err(DbError::from)?;
    write(&mut tx, db.dialect(), &plan).await?;
    if dry_run {
        tx.rollback().await.map_err(DbError::from)?;
    } else {
        tx.commit().await.map_err(DbError::from)?;
    }
    Ok(Imported::Done(plan.summary()))
}

/// The planned time `rfc3339` (what [`plan::time`] made) in the target's stored form.
fn stored(d: Dialect, rfc3339: &str) -> Result<String, ImportError> {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339).map_err(|e| {
        ImportError::Target(DbError::Invalid {
            what: "time",
            why: format!("{rfc3339:?}: {e}"),
        })
    })?;
    Ok(d.time_text(t.with_timezone(&chrono::Utc)))
}

async fn write(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    plan: &Plan,
) -> Result<(), ImportError> {
    let q = |e: sqlx::Error| ImportError::Target(DbError::from(e));
    let cyborg = d.schema == Schema::Cyborg17;
    let ts = d.ts();
    // Cyborg's attach handle id -> the target's handle id and its deployable's.
    let mut handle_ids = BTreeMap::new();
    for dev in &plan.devices {
        let (created, updated) = (stored(d, &dev.created_at)?, stored(d, &dev.updated_at)?);
        // Cyborg's own columns as Cyborg stored them, accel's inventory state starting
        // `available` as an agent's report would make it; or accel's former history's.
        let sql = match cyborg {
            true => format!(
                "INSERT INTO devices (uuid, type, vendor, model, std_board_info, \
                 vendor_board_info, hostname, status, device_state, inventory_status, \
                 created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'available', $10{ts}, $11{ts}) \
                 RETURNING id"
            ),
            false => "INSERT INTO devices (uuid, type, vendor, model, std_board_info, \
                 vendor_board_info, hostname, maintaining, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'available', $9, $10) RETURNING id"
                .to_owned(),
        };
        let sql = d.sql(&sql);
        let query = sqlx::query_scalar(&sql)
            .bind(&dev.uuid)
            .bind(&dev.device_type)
            .bind(&dev.vendor)
            .bind(&dev.model)
            .bind(&dev.std_board_info)
            .bind(&dev.vendor_board_info)
            .bind(&dev.hostname);
        let query = match cyborg {
            true => query
                .bind(if dev.maintaining {
                    "maintaining"
                } else {
                    "enabled"
                })
                .bind(&dev.device_state),
            false => query.bind(i64::from(dev.maintaining)),
        };
        let device_id: i64 = query
            .bind(&created)
            .bind(&updated)
            .fetch_one(&mut **tx)
            .await
            .map_err(q)?;
        let cp = &dev.control_path;
        let cpid_id: i64 = sqlx::query_scalar(&d.sql(&format!(
            "INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5{ts}, $6{ts}) RETURNING id"
        )))
        .bind(&cp.uuid)
        .bind(device_id)
        .bind(&cp.cpid_type)
        .bind(&cp.cpid_info)
        .bind(stored(d, &cp.created_at)?)
        .bind(stored(d, &cp.updated_at)?)
        .fetch_one(&mut **tx)
        .await
        .map_err(q)?;
        for dep in &dev.deployables {
            // Every attribute Cyborg holds counts as its agent's last report (Cyborg's own
            // report diff deletes the keys a report drops), so the agent's next report,
            // now to accel, finds them unchanged.
            let reported: BTreeMap<&str, &str> = dep
                .attributes
                .iter()
                .map(|(k, (_, v, _, _))| (k.as_str(), v.as_str()))
                .collect();
            let reported = serde_json::to_string(&reported).map_err(|e| {
                ImportError::row("attributes", &dep.uuid, format!("do not serialize: {e}"))
            })?;
            // The same columns on both schemas: on Cyborg's, `hostname`,
            // `control_path_id` and `attributes` are accel's additions.
            let deployable_id: i64 = sqlx::query_scalar(&d.sql(&format!(
                "INSERT INTO deployables (uuid, name, device_id, hostname, control_path_id, \
                 num_accelerators, driver_name, attributes, rp_uuid, bitstream_id, created_at, \
                 updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11{ts}, $12{ts}) RETURNING id"
            )))
            .bind(&dep.uuid)
            .bind(&dep.name)
            .bind(device_id)
            .bind(&dev.hostname)
            .bind(&dep.control_path_id)
            .bind(dep.num_accelerators)
            .bind(&dep.driver_name)
            .bind(&reported)
            .bind(&dep.rp_uuid)
            .bind(&dep.bitstream_id)
            .bind(stored(d, &dep.created_at)?)
            .bind(stored(d, &dep.updated_at)?)
            .fetch_one(&mut **tx)
            .await
            .map_err(q)?;
            for h in &dep.handles {
                // A flag literal: PostgreSQL's `BOOLEAN` takes no integer.
                let in_use = if h.in_use { d.yes() } else { d.no() };
                let id: i64 = sqlx::query_scalar(&d.sql(&format!(
                    "INSERT INTO attach_handles (uuid, deployable_id, cpid_id, in_use, \
                     attach_type, attach_info, created_at, updated_at) \
                     VALUES ($1, $2, $3, {in_use}, $4, $5, $6{ts}, $7{ts}) RETURNING id"
                )))
                .bind(&h.uuid)
                .bind(deployable_id)
                .bind(cpid_id)
                .bind(&h.attach_type)
                .bind(&h.attach_info)
                .bind(stored(d, &h.created_at)?)
                .bind(stored(d, &h.updated_at)?)
                .fetch_one(&mut **tx)
                .await
                .map_err(q)?;
                handle_ids.insert(h.cyborg_id, (id, deployable_id));
            }
            for (key, (uuid, value, created_at, updated_at)) in &dep.attributes {
                sqlx::query(&d.sql(&format!(
                    "INSERT INTO attributes (uuid, deployable_id, \"key\", value, created_at, \
                     updated_at) VALUES ($1, $2, $3, $4, $5{ts}, $6{ts})"
                )))
                .bind(uuid)
                .bind(deployable_id)
                .bind(key)
                .bind(value)
                .bind(stored(d, created_at)?)
                .bind(stored(d, updated_at)?)
                .execute(&mut **tx)
                .await
                .map_err(q)?;
            }
        }
    }
    // A profile's name -> the target's profile id (Cyborg's requests name it by id).
    let mut profile_ids = BTreeMap::new();
    for p in &plan.profiles {
        let created = stored(d, &p.created_at)?;
        let sql = match cyborg {
            true => format!(
                "INSERT INTO device_profiles (uuid, name, profile_json, description, \
                 created_at) VALUES ($1, $2, $3, $4, $5{ts}) RETURNING id"
            ),
            false => "INSERT INTO device_profiles (uuid, name, profile_json, description, \
                 created_at, \"groups\") VALUES ($1, $2, $3, $4, $5, $6) RETURNING id"
                .to_owned(),
        };
        let sql = d.sql(&sql);
        let query = sqlx::query_scalar(&sql)
            .bind(&p.uuid)
            .bind(&p.name)
            .bind(&p.profile_json)
            .bind(&p.description)
            .bind(&created);
        let query = match cyborg {
            true => query,
            false => query.bind(&p.groups),
        };
        let id: i64 = query.fetch_one(&mut **tx).await.map_err(q)?;
        profile_ids.insert(p.name.as_str(), id);
    }
    for a in &plan.arqs {
        let handle = a.handle.and_then(|h| handle_ids.get(&h).copied());
        let (created, updated) = (stored(d, &a.created_at)?, stored(d, &a.updated_at)?);
        let sql = match cyborg {
            true => format!(
                "INSERT INTO extended_accelerator_requests (uuid, project_id, state, \
                 device_profile_id, device_profile_group_id, hostname, device_rp_uuid, \
                 instance_uuid, attach_handle_id, deployable_id, substate, created_at, \
                 updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12{ts}, $13{ts})"
            ),
            false => "INSERT INTO accelerator_requests (uuid, project_id, state, \
                 device_profile_name, device_profile_group_id, hostname, device_rp_uuid, \
                 instance_uuid, attach_handle_id, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                .to_owned(),
        };
        let sql = d.sql(&sql);
        let query = sqlx::query(&sql)
            .bind(&a.uuid)
            .bind(&a.project_id)
            .bind(a.state.as_str());
        // Cyborg's requests name their profile by id, accel's former ones by name.
        let query =
            match cyborg {
                true => query.bind(profile_ids.get(a.profile.as_str()).copied().ok_or_else(
                    || {
                        ImportError::row(
                            "extended_accelerator_requests",
                            &a.uuid,
                            format!("its profile {} was not imported", a.profile),
                        )
                    },
                )?),
                false => query.bind(&a.profile),
            };
        let query = query
            .bind(a.group_id)
            .bind(&a.hostname)
            .bind(&a.device_rp_uuid)
            .bind(&a.instance_uuid)
            .bind(handle.map(|(h, _)| h));
        let query = match cyborg {
            true => query.bind(handle.map(|(_, dep)| dep)).bind(&a.substate),
            false => query,
        };
        query
            .bind(&created)
            .bind(&updated)
            .execute(&mut **tx)
            .await
            .map_err(q)?;
    }
    Ok(())
}

mod plan;
use plan::{plan, Plan};

#[cfg(test)]
mod tests;
