//! Release N's conductor database: schema N (migration 1) on SQLite or PostgreSQL
//! through sqlx's Any driver, with only what release N does, against release N's
//! columns (no revisions, no cleanup states: a released device is free at once).
//!
//! Release N also runs on a schema release N+1 expanded and has not finalized (the
//! downgrade window): every query names its columns, and the columns N+1 added are
//! nullable or defaulted, so release N's inserts fill them with their defaults and its
//! reads never see them. Release N's writes of `attach_handles.in_use` do not move N+1's
//! `revision`; N+1's compare-and-swap updates also require `in_use = 0`, so a handle
//! release N took is never rewritten under it.
//!
//! The same rules as release N+1 hold, since both may run on one database during an
//! upgrade: a request moves only from an allowed state (a conditional update), an attach
//! handle is taken by `UPDATE ... SET in_use = 1 WHERE id = ? AND in_use = 0`, and every
//! write transaction starts with a write so SQLite takes its write lock first.

use crate::schema::{self, Backend};
use serde::{Deserialize, Serialize};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// Errors of release N's database layer.
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
    /// Applying the schema migration failed.
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

fn insert_error(e: sqlx::Error, kind: &'static str, name: &str) -> DbError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => DbError::Duplicate {
            kind,
            name: name.to_owned(),
        },
        _ => DbError::Query(e),
    }
}

/// The state of an accelerator request (Cyborg's names), as release N stores them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArqState {
    /// Created, not bound.
    Initial,
    /// A bind is under way.
    BindStarted,
    /// Bound to an attach handle on a host.
    Bound,
    /// The bind failed (no free device).
    BindFailed,
    /// Released; it may be bound again.
    Unbound,
    /// Releasing failed.
    UnbindFailed,
    /// Being deleted.
    Deleting,
}

impl ArqState {
    /// Every state.
    pub const ALL: [ArqState; 7] = [
        ArqState::Initial,
        ArqState::BindStarted,
        ArqState::Bound,
        ArqState::BindFailed,
        ArqState::Unbound,
        ArqState::UnbindFailed,
        ArqState::Deleting,
    ];

    /// The states a request may be in to move to `self`.
    pub fn allowed_from(self) -> &'static [ArqState] {
        use ArqState::*;
        match self {
            Initial => &[],
            BindStarted => &[Initial, Unbound],
            Bound => &[BindStarted],
            BindFailed => &[BindStarted],
            Unbound => &[Bound, BindFailed, UnbindFailed],
            UnbindFailed => &[Bound],
            Deleting => &[Initial, Bound, BindFailed, Unbound, UnbindFailed],
        }
    }

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ArqState::Initial => "Initial",
            ArqState::BindStarted => "BindStarted",
            ArqState::Bound => "Bound",
            ArqState::BindFailed => "BindFailed",
            ArqState::Unbound => "Unbound",
            ArqState::UnbindFailed => "UnbindFailed",
            ArqState::Deleting => "Deleting",
        }
    }

    /// The state a stored name denotes.
    pub fn parse(s: &str) -> Result<ArqState, DbError> {
        ArqState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| DbError::Invalid {
                what: "stored accelerator request state",
                why: format!("{s:?} is not a state release N knows"),
            })
    }
}

impl fmt::Display for ArqState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an agent reports of one device (a physical function and its handles).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedDevice {
    /// The PCI address of the physical function: the key reports are diffed by.
    pub control_path_id: String,
    /// `GPU`, `FPGA`, `AICHIP`, `QAT`, `NIC`, `SSD`.
    pub device_type: String,
    /// Vendor id.
    pub vendor: String,
    /// Model.
    pub model: String,
    /// Board details as JSON text.
    pub std_board_info: Option<String>,
    /// The bound driver.
    pub driver_name: Option<String>,
    /// What can be attached: (attach type, attach info).
    pub handles: Vec<(String, String)>,
}

/// What a report changed, by control-path id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportOutcome {
    /// New devices.
    pub added: Vec<String>,
    /// Devices whose fields or handles changed (or that came back after being lost).
    pub updated: Vec<String>,
    /// Devices the report no longer has, deleted.
    pub removed: Vec<String>,
    /// Devices the report no longer has (or whose handles vanished) while in use: kept,
    /// marked lost.
    pub lost: Vec<String>,
    /// Devices reported as they are.
    pub unchanged: u64,
}

/// A device with its deployable (release N keeps one deployable per device).
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
    /// Vendor board details.
    pub vendor_board_info: Option<String>,
    /// Host.
    pub hostname: String,
    /// `available` or `lost`.
    pub status: String,
    /// The PCI address of its physical function.
    pub control_path_id: String,
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
    /// Groups, each a map such as `{"resources:FPGA": "1"}`.
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
}

/// The device type a profile group asks for: exactly one `resources:<TYPE>=1` (`PGPU`
/// and `VGPU` ask for a GPU), other keys `trait:<NAME>`.
pub fn group_device_type(group: &BTreeMap<String, String>) -> Result<String, DbError> {
    let invalid = |why: String| DbError::Invalid {
        what: "device profile group",
        why,
    };
    let resources: Vec<(&String, &String)> = group
        .iter()
        .filter(|(k, _)| k.starts_with("resources:"))
        .collect();
    let [(key, count)] = resources.as_slice() else {
        return Err(invalid(format!(
            "a group names exactly one resources:<TYPE> (found {})",
            resources.len()
        )));
    };
    if count.as_str() != "1" {
        return Err(invalid(format!(
            "{key}={count}: each group asks for one device"
        )));
    }
    let rc = &key["resources:".len()..];
    let t = match rc {
        "PGPU" | "VGPU" | "GPU" => "GPU",
        "FPGA" | "QAT" | "NIC" | "SSD" | "AICHIP" => rc,
        other => {
            return Err(invalid(format!(
                "unknown resource class {other:?} (known: PGPU, VGPU, FPGA, QAT, NIC, SSD, AICHIP)"
            )))
        }
    };
    if let Some(k) = group
        .keys()
        .find(|k| !k.starts_with("resources:") && !k.starts_with("trait:"))
    {
        return Err(invalid(format!(
            "{k:?}: keys are resources:<TYPE> or trait:<NAME>"
        )));
    }
    Ok(t.to_owned())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Masks the password of a database URL for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:****{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Release N's conductor database.
#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
}

const DEVICE_SELECT: &str = "SELECT v.id, v.uuid, v.type, v.vendor, v.model, v.std_board_info, \
     v.vendor_board_info, v.hostname, v.status, v.created_at, v.updated_at, d.control_path_id \
     FROM devices v JOIN deployables d ON d.device_id = v.id";

const DEPLOYABLE_SELECT: &str = "SELECT id, uuid, name, device_id, hostname, control_path_id, \
     num_accelerators, driver_name, enabled FROM deployables";

const ARQ_SELECT: &str =
    "SELECT r.id, r.uuid, r.state, r.device_profile_name, r.device_profile_group_id, \
     r.hostname, r.device_rp_uuid, r.instance_uuid, r.project_id, \
     h.uuid AS handle_uuid, h.attach_type AS handle_type, h.attach_info AS handle_info \
     FROM accelerator_requests r LEFT JOIN attach_handles h ON r.attach_handle_id = h.id";

const PROFILE_SELECT: &str =
    "SELECT id, uuid, name, groups, description, created_at FROM device_profiles";

type Tx<'a> = sqlx::Transaction<'a, sqlx::Any>;

impl Db {
    /// Opens the database the URL names (a SQLite file is created if missing), waiting
    /// up to `wait` for it. Does not migrate: see [`Db::migrate`].
    pub async fn connect(url: &str, wait: Duration) -> Result<Db, DbError> {
        sqlx::any::install_default_drivers();
        let backend =
            Backend::of_url(url).ok_or_else(|| DbError::UnsupportedUrl(redact_url(url)))?;
        let url_owned = match backend {
            Backend::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_owned(),
        };
        // An in-memory SQLite database exists once per connection: one connection.
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let pool = AnyPoolOptions::new()
            .max_connections(match backend {
                Backend::Sqlite if in_memory => 1,
                Backend::Sqlite => 4,
                Backend::Postgres => 8,
            })
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

    /// The pool.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Applies release N's migration if it is missing; true when it was applied now.
    /// Newer migrations already applied (release N+1's, which only add) are left alone
    /// and not refused here: whether release N may run on them is
    /// [`crate::conductor::check_database`]'s decision, made before this is called.
    pub async fn migrate(&self) -> Result<bool, DbError> {
        let before = self.applied_migrations().await?;
        let mut migrator = schema::migrator(self.backend);
        // Without this sqlx fails with `VersionMissing` on migrations it has no file for.
        migrator.set_ignore_missing(true);
        migrator.run(&self.pool).await?;
        Ok(!before.contains(&schema::SCHEMA_VERSION))
    }

    /// Migrations applied to the database (by any release).
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

    // ---- inventory -----------------------------------------------------------------

    /// Applies one host's full inventory, diffed by control-path id: adds new devices,
    /// updates changed ones, deletes vanished ones, and keeps (marked `lost`) vanished
    /// ones whose handles are in use. Two reports of one host racing to add the same
    /// device (the loser hits the unique key) are applied one after the other.
    pub async fn report(
        &self,
        host: &str,
        devices: &[ReportedDevice],
    ) -> Result<ReportOutcome, DbError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            match self.report_once(host, devices).await {
                Err(DbError::Query(sqlx::Error::Database(d)))
                    if d.is_unique_violation() && attempts < 3 =>
                {
                    tracing::debug!(host, "concurrent report of the same host: applied again");
                }
                other => return other,
            }
        }
    }

    async fn report_once(
        &self,
        host: &str,
        devices: &[ReportedDevice],
    ) -> Result<ReportOutcome, DbError> {
        let mut seen = BTreeSet::new();
        if let Some(d) = devices
            .iter()
            .find(|d| !seen.insert(d.control_path_id.as_str()))
        {
            return Err(DbError::Invalid {
                what: "report",
                why: format!("control-path id {} is reported twice", d.control_path_id),
            });
        }
        if host.is_empty() {
            return Err(DbError::Invalid {
                what: "report",
                why: "the host name is empty".into(),
            });
        }
        let mut tx = self.pool.begin().await?;
        let at = now();
        sqlx::query("UPDATE devices SET updated_at = updated_at WHERE hostname = $1")
            .bind(host)
            .execute(&mut *tx)
            .await?;
        let rows = sqlx::query(
            "SELECT d.id AS dep_id, d.control_path_id, d.driver_name, d.device_id, \
             v.type, v.vendor, v.model, v.std_board_info, v.status \
             FROM deployables d JOIN devices v ON d.device_id = v.id WHERE d.hostname = $1",
        )
        .bind(host)
        .fetch_all(&mut *tx)
        .await?;
        type Fields = (String, String, String, Option<String>, Option<String>);
        let mut existing: BTreeMap<String, (i64, i64, Fields, String)> = BTreeMap::new();
        for r in &rows {
            existing.insert(
                r.try_get("control_path_id")?,
                (
                    r.try_get("dep_id")?,
                    r.try_get("device_id")?,
                    (
                        r.try_get("type")?,
                        r.try_get("vendor")?,
                        r.try_get("model")?,
                        r.try_get("std_board_info")?,
                        r.try_get("driver_name")?,
                    ),
                    r.try_get("status")?,
                ),
            );
        }
        let mut out = ReportOutcome::default();
        for d in devices {
            let fields: Fields = (
                d.device_type.clone(),
                d.vendor.clone(),
                d.model.clone(),
                d.std_board_info.clone(),
                d.driver_name.clone(),
            );
            let Some((dep_id, device_id, old, status)) = existing.remove(&d.control_path_id) else {
                add_device(&mut tx, host, d, &at).await?;
                out.added.push(d.control_path_id.clone());
                continue;
            };
            let mut changed = old != fields || status != "available";
            if changed {
                sqlx::query(
                    "UPDATE devices SET type = $1, vendor = $2, model = $3, std_board_info = $4, \
                     status = 'available', updated_at = $5 WHERE id = $6",
                )
                .bind(&d.device_type)
                .bind(&d.vendor)
                .bind(&d.model)
                .bind(&d.std_board_info)
                .bind(&at)
                .bind(device_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "UPDATE deployables SET driver_name = $1, num_accelerators = $2, updated_at = $3 WHERE id = $4",
                )
                .bind(&d.driver_name)
                .bind(d.handles.len() as i64)
                .bind(&at)
                .bind(dep_id)
                .execute(&mut *tx)
                .await?;
            }
            let handles = sqlx::query(
                "SELECT id, attach_type, attach_info, in_use FROM attach_handles WHERE deployable_id = $1",
            )
            .bind(dep_id)
            .fetch_all(&mut *tx)
            .await?;
            let mut have: BTreeMap<(String, String), (i64, bool)> = BTreeMap::new();
            for h in &handles {
                have.insert(
                    (h.try_get("attach_type")?, h.try_get("attach_info")?),
                    (h.try_get("id")?, h.try_get::<i64, _>("in_use")? != 0),
                );
            }
            for key in &d.handles {
                if have.remove(key).is_none() {
                    insert_handle(&mut tx, dep_id, &key.0, &key.1, &at).await?;
                    changed = true;
                }
            }
            let mut lost = false;
            for (id, in_use) in have.into_values() {
                if in_use {
                    lost = true;
                } else {
                    sqlx::query("DELETE FROM attach_handles WHERE id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    changed = true;
                }
            }
            if lost {
                mark_lost(&mut tx, device_id, &at).await?;
                out.lost.push(d.control_path_id.clone());
            } else if changed {
                out.updated.push(d.control_path_id.clone());
            } else {
                out.unchanged += 1;
            }
        }
        for (cp, (dep_id, device_id, _, status)) in existing {
            let in_use: i64 = sqlx::query(
                "SELECT COUNT(*) AS n FROM attach_handles WHERE deployable_id = $1 AND in_use = 1",
            )
            .bind(dep_id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("n")?;
            if in_use > 0 {
                if status != "lost" {
                    mark_lost(&mut tx, device_id, &at).await?;
                }
                tracing::warn!(host, control_path_id = %cp, "device vanished while in use: kept and marked lost");
                out.lost.push(cp);
            } else {
                sqlx::query("DELETE FROM devices WHERE id = $1")
                    .bind(device_id)
                    .execute(&mut *tx)
                    .await?;
                out.removed.push(cp);
            }
        }
        tx.commit().await?;
        Ok(out)
    }

    /// Devices of one host (or all), oldest first.
    pub async fn devices(&self, host: Option<&str>) -> Result<Vec<DeviceRow>, DbError> {
        let rows = sqlx::query(&format!(
            "{DEVICE_SELECT} WHERE ($1 = '' OR v.hostname = $2) ORDER BY v.id"
        ))
        .bind(host.unwrap_or_default())
        .bind(host.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(device_row).collect()
    }

    /// One device by UUID.
    pub async fn device(&self, uuid: &str) -> Result<DeviceRow, DbError> {
        let row = sqlx::query(&format!("{DEVICE_SELECT} WHERE v.uuid = $1"))
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| DbError::NotFound {
                kind: "device",
                id: uuid.to_owned(),
            })?;
        device_row(&row)
    }

    /// Deployables of one host (or all), oldest first.
    pub async fn deployables(&self, host: Option<&str>) -> Result<Vec<DeployableRow>, DbError> {
        let rows = sqlx::query(&format!(
            "{DEPLOYABLE_SELECT} WHERE ($1 = '' OR hostname = $2) ORDER BY id"
        ))
        .bind(host.unwrap_or_default())
        .bind(host.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(deployable_row).collect()
    }

    /// One deployable by UUID.
    pub async fn deployable(&self, uuid: &str) -> Result<DeployableRow, DbError> {
        let row = sqlx::query(&format!("{DEPLOYABLE_SELECT} WHERE uuid = $1"))
            .bind(uuid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| DbError::NotFound {
                kind: "deployable",
                id: uuid.to_owned(),
            })?;
        deployable_row(&row)
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
        if name.is_empty() || name.len() > 255 {
            return Err(DbError::Invalid {
                what: "device profile name",
                why: "1 to 255 characters".into(),
            });
        }
        if groups.is_empty() {
            return Err(DbError::Invalid {
                what: "device profile",
                why: "it needs at least one group".into(),
            });
        }
        for g in &groups {
            group_device_type(g)?;
        }
        let groups_json = serde_json::to_string(&groups).map_err(|e| DbError::Invalid {
            what: "device profile groups",
            why: e.to_string(),
        })?;
        let (uuid, at) = (new_uuid(), now());
        let id: i64 = sqlx::query(
            "INSERT INTO device_profiles (uuid, name, groups, description, created_at) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&uuid)
        .bind(name)
        .bind(&groups_json)
        .bind(&description)
        .bind(&at)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| insert_error(e, "device profile", name))?
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
        let rows = sqlx::query(&format!("{PROFILE_SELECT} ORDER BY name"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(profile_row).collect()
    }

    /// One profile by name or UUID.
    pub async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, DbError> {
        let row = sqlx::query(&format!("{PROFILE_SELECT} WHERE name = $1 OR uuid = $2"))
            .bind(name_or_uuid)
            .bind(name_or_uuid)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| DbError::NotFound {
                kind: "device profile",
                id: name_or_uuid.to_owned(),
            })?;
        profile_row(&row)
    }

    /// Deletes a profile no request uses.
    pub async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), DbError> {
        let profile = self.profile(name_or_uuid).await?;
        let deleted = sqlx::query(
            "DELETE FROM device_profiles WHERE id = $1 AND NOT EXISTS \
             (SELECT 1 FROM accelerator_requests WHERE device_profile_name = $2)",
        )
        .bind(profile.id)
        .bind(&profile.name)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if deleted == 0 {
            return Err(DbError::ProfileInUse(profile.name));
        }
        Ok(())
    }

    // ---- accelerator requests -----------------------------------------------------

    /// Creates a request in state `Initial` for one group of a profile.
    pub async fn create_arq(
        &self,
        profile: &str,
        group_id: i64,
        project_id: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        let p = self.profile(profile).await?;
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
        let (uuid, at) = (new_uuid(), now());
        sqlx::query(
            "INSERT INTO accelerator_requests (uuid, state, device_profile_name, device_profile_group_id, \
             project_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&uuid)
        .bind(ArqState::Initial.as_str())
        .bind(&p.name)
        .bind(group_id)
        .bind(project_id)
        .bind(&at)
        .bind(&at)
        .execute(&self.pool)
        .await?;
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
                id: uuid.to_owned(),
            })?;
        arq_row(&row)
    }

    /// Requests, optionally of one instance, oldest first.
    pub async fn arqs(&self, instance: Option<&str>) -> Result<Vec<ArqRow>, DbError> {
        let rows = sqlx::query(&format!(
            "{ARQ_SELECT} WHERE ($1 = '' OR r.instance_uuid = $2) ORDER BY r.id"
        ))
        .bind(instance.unwrap_or_default())
        .bind(instance.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(arq_row).collect()
    }

    /// Moves a request to `to` from an allowed state, in `tx`.
    async fn transition(&self, tx: &mut Tx<'_>, uuid: &str, to: ArqState) -> Result<(), DbError> {
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
                id: uuid.to_owned(),
            }),
            Some(s) => Err(DbError::InvalidTransition {
                uuid: uuid.to_owned(),
                from: ArqState::parse(&s)?,
                to,
            }),
        }
    }

    /// Binds a request to a free device of its group's type on `host`: `BindStarted`,
    /// then a free attach handle picked and marked in use in one transaction, `Bound`;
    /// `BindFailed` ([`DbError::NoFreeHandle`]) when none is free. Binding a request
    /// already bound to the same instance returns it unchanged.
    pub async fn bind(
        &self,
        uuid: &str,
        host: &str,
        instance_uuid: &str,
        device_rp_uuid: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        let current = self.arq(uuid).await?;
        if current.state == ArqState::Bound
            && current.instance_uuid.as_deref() == Some(instance_uuid)
        {
            return Ok(current);
        }
        let profile = self.profile(&current.device_profile_name).await?;
        let group = usize::try_from(current.device_profile_group_id)
            .ok()
            .and_then(|g| profile.groups.get(g))
            .ok_or_else(|| DbError::Invalid {
                what: "device profile group id",
                why: format!(
                    "profile {} has no group {}",
                    profile.name, current.device_profile_group_id
                ),
            })?;
        let device_type = group_device_type(group)?;
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::BindStarted)
            .await?;
        sqlx::query(
            "UPDATE accelerator_requests SET hostname = $1, instance_uuid = $2, device_rp_uuid = $3 WHERE uuid = $4",
        )
        .bind(host)
        .bind(instance_uuid)
        .bind(device_rp_uuid)
        .bind(uuid)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;

        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE accelerator_requests SET updated_at = $1 WHERE uuid = $2")
            .bind(now())
            .bind(uuid)
            .execute(&mut *tx)
            .await?;
        let taken = loop {
            let candidate: Option<i64> = sqlx::query(
                "SELECT h.id FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
                 JOIN devices v ON d.device_id = v.id \
                 WHERE d.hostname = $1 AND v.type = $2 AND v.status = 'available' AND d.enabled = 1 \
                 AND h.in_use = 0 ORDER BY h.id LIMIT 1",
            )
            .bind(host)
            .bind(&device_type)
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get("id"))
            .transpose()?;
            let Some(id) = candidate else { break None };
            let won = sqlx::query(
                "UPDATE attach_handles SET in_use = 1, updated_at = $1 WHERE id = $2 AND in_use = 0",
            )
            .bind(now())
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
                == 1;
            if won {
                break Some(id);
            }
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
                    host: host.to_owned(),
                    device_type,
                })
            }
        }
    }

    /// Releases a request's device: `Unbound`, the handle free again at once (release N
    /// has no cleanup). Idempotent.
    pub async fn unbind(&self, uuid: &str) -> Result<ArqRow, DbError> {
        let current = self.arq(uuid).await?;
        if current.state == ArqState::Unbound {
            return Ok(current);
        }
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::Unbound).await?;
        release_handle(&mut tx, uuid).await?;
        tx.commit().await?;
        self.arq(uuid).await
    }

    /// Deletes a request, releasing its device at once. Deleting a missing request is
    /// `Ok(false)`.
    pub async fn delete_arq(&self, uuid: &str) -> Result<bool, DbError> {
        let mut tx = self.pool.begin().await?;
        match self.transition(&mut tx, uuid, ArqState::Deleting).await {
            Ok(()) => {}
            Err(DbError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
        release_handle(&mut tx, uuid).await?;
        sqlx::query("DELETE FROM accelerator_requests WHERE uuid = $1")
            .bind(uuid)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// At conductor start: requests left in `BindStarted` by a crash become `BindFailed`.
    pub async fn recover_interrupted_binds(&self) -> Result<u64, DbError> {
        Ok(sqlx::query(
            "UPDATE accelerator_requests SET state = $1, updated_at = $2 WHERE state = $3",
        )
        .bind(ArqState::BindFailed.as_str())
        .bind(now())
        .bind(ArqState::BindStarted.as_str())
        .execute(&self.pool)
        .await?
        .rows_affected())
    }
}

async fn add_device(
    tx: &mut Tx<'_>,
    host: &str,
    d: &ReportedDevice,
    at: &str,
) -> Result<(), DbError> {
    let device_id: i64 = sqlx::query(
        "INSERT INTO devices (uuid, type, vendor, model, std_board_info, hostname, status, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'available', $7, $8) RETURNING id",
    )
    .bind(new_uuid())
    .bind(&d.device_type)
    .bind(&d.vendor)
    .bind(&d.model)
    .bind(&d.std_board_info)
    .bind(host)
    .bind(at)
    .bind(at)
    .fetch_one(&mut **tx)
    .await?
    .try_get("id")?;
    let dep_id: i64 = sqlx::query(
        "INSERT INTO deployables (uuid, name, device_id, hostname, control_path_id, num_accelerators, \
         driver_name, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(new_uuid())
    .bind(format!("{host}_{}", d.control_path_id))
    .bind(device_id)
    .bind(host)
    .bind(&d.control_path_id)
    .bind(d.handles.len() as i64)
    .bind(&d.driver_name)
    .bind(at)
    .bind(at)
    .fetch_one(&mut **tx)
    .await?
    .try_get("id")?;
    for (attach_type, attach_info) in &d.handles {
        insert_handle(tx, dep_id, attach_type, attach_info, at).await?;
    }
    Ok(())
}

async fn insert_handle(
    tx: &mut Tx<'_>,
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

async fn mark_lost(tx: &mut Tx<'_>, device_id: i64, at: &str) -> Result<(), DbError> {
    sqlx::query("UPDATE devices SET status = 'lost', updated_at = $1 WHERE id = $2")
        .bind(at)
        .bind(device_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn release_handle(tx: &mut Tx<'_>, uuid: &str) -> Result<(), DbError> {
    sqlx::query(
        "UPDATE attach_handles SET in_use = 0, updated_at = $1 \
         WHERE id = (SELECT attach_handle_id FROM accelerator_requests WHERE uuid = $2)",
    )
    .bind(now())
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
        vendor_board_info: r.try_get("vendor_board_info")?,
        hostname: r.try_get("hostname")?,
        status: r.try_get("status")?,
        control_path_id: r.try_get("control_path_id")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn deployable_row(r: &AnyRow) -> Result<DeployableRow, DbError> {
    Ok(DeployableRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        name: r.try_get("name")?,
        device_id: r.try_get("device_id")?,
        hostname: r.try_get("hostname")?,
        control_path_id: r.try_get("control_path_id")?,
        num_accelerators: r.try_get("num_accelerators")?,
        driver_name: r.try_get("driver_name")?,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
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
        state: ArqState::parse(&state)?,
        device_profile_name: r.try_get("device_profile_name")?,
        device_profile_group_id: r.try_get("device_profile_group_id")?,
        hostname: r.try_get("hostname")?,
        device_rp_uuid: r.try_get("device_rp_uuid")?,
        instance_uuid: r.try_get("instance_uuid")?,
        project_id: r.try_get("project_id")?,
        attach_handle_uuid: r.try_get("handle_uuid")?,
        attach_handle_type: r.try_get("handle_type")?,
        attach_handle_info: r.try_get("handle_info")?,
    })
}
