//! Agents' inventory reports: the diff of one host's devices, deployables, handles and
//! reported attributes against what its previous report left.

use super::attributes::insert_attribute;
use super::rows::{IntFlag, Text, TextOption};
use super::{
    new_uuid, read_error, AgentWire, Backend, Db, DbError, DeviceStatus, Dialect, INVENTORY_STATUS,
};
use super::{DeployableReport, ReportOutcome, ReportedDevice};
use std::collections::{BTreeMap, BTreeSet};

/// A deployable, and its device, as the host's previous report left them.
#[derive(sqlx::FromRow)]
struct Existing {
    control_path_id: String,
    dep_id: i64,
    device_id: i64,
    #[sqlx(flatten)]
    device: DeviceFields,
    name: String,
    driver_name: Option<String>,
    num_accelerators: i64,
    status: DeviceStatus,
    /// The keys the previous report gave (JSON; see [`HostAttributes::sync`]).
    reported_attributes: String,
}

/// An attach handle of a reported deployable.
#[derive(sqlx::FromRow)]
struct Handle {
    id: i64,
    attach_type: String,
    attach_info: String,
    #[sqlx(try_from = "IntFlag")]
    in_use: bool,
}

/// A host's stored report digest.
#[derive(sqlx::FromRow)]
struct Digest {
    digest: String,
    devices: i64,
}

/// A host's stored report digest and the wire its agent last reported on.
#[derive(sqlx::FromRow)]
struct DigestOnWire {
    digest: String,
    devices: i64,
    wire: Option<AgentWire>,
}

/// `host_reports.devices` as a count: a negative one is a corrupt row.
fn device_count(stored: i64) -> Result<u64, DbError> {
    u64::try_from(stored).map_err(|_| DbError::Corrupt {
        table: "host_reports",
        column: "devices".into(),
        why: format!("{stored} devices"),
    })
}

/// An attribute row of one of the host's deployables.
#[derive(sqlx::FromRow)]
struct Attribute {
    id: i64,
    deployable_id: i64,
    #[sqlx(try_from = "Text")]
    key: String,
    #[sqlx(try_from = "Text")]
    value: String,
}

impl Db {
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
    /// diff once, whatever the number of racers (MySQL: the host's row in
    /// `report_locks`, written first). A writer that does not take the lock
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
    /// report (`None`: forgets it), for [`Db::report_digest`]. Migration 101's triggers
    /// forget a host's digest on every later write of a column the diff compares.
    pub async fn report_with_digest(
        &self,
        host: &str,
        devices: &[ReportedDevice],
        digest: Option<&str>,
    ) -> Result<ReportOutcome, DbError> {
        self.report_on(host, None, devices, digest).await
    }

    /// [`Db::report_with_digest`] of a report that came on `wire`: in the same
    /// transaction the host's wire is recorded (`host_wires`), for [`Db::host_wire`].
    /// `None` leaves it as it was (a report not from an agent: tools, tests).
    pub async fn report_on(
        &self,
        host: &str,
        wire: Option<AgentWire>,
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
            let first = d.deployable_name_on(host);
            let mut names = BTreeSet::new();
            for dep in d.deployables_on(&first) {
                if dep.name.is_empty() || !names.insert(dep.name) {
                    return Err(DbError::Invalid {
                        what: "report",
                        why: format!(
                            "device {}: deployable name {:?} is empty or given twice",
                            d.control_path_id, dep.name
                        ),
                    });
                }
            }
        }
        const ATTEMPTS: u32 = 3;
        let mut attempt = 1;
        loop {
            match self.report_once(host, wire, devices, digest).await {
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
        wire: Option<AgentWire>,
        devices: &[ReportedDevice],
        digest: Option<&str>,
    ) -> Result<ReportOutcome, DbError> {
        let mut tx = self.pool.begin().await?;
        let d = self.dialect();
        let at = d.now();
        match self.backend {
            // Released at commit or rollback; see `report`.
            Backend::Postgres => {
                sqlx::query(
                    "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))::text AS locked",
                )
                .bind(format!("accel-report/{host}"))
                .fetch_one(&mut *tx)
                .await?;
            }
            // MySQL's named locks are the session's, not the transaction's: the host's
            // row of `report_locks` (MySQL's migration 101), locked until commit or
            // rollback, is the same lock.
            Backend::Mysql => {
                sqlx::query(
                    "INSERT INTO report_locks (hostname) VALUES (?) \
                     ON DUPLICATE KEY UPDATE hostname = hostname",
                )
                .bind(host)
                .execute(&mut *tx)
                .await?;
            }
            Backend::Sqlite => {}
        }
        // A first write takes SQLite's write lock before anything is read.
        sqlx::query(
            &self
                .backend
                .sql("UPDATE devices SET updated_at = updated_at WHERE hostname = $1"),
        )
        .bind(host)
        .execute(&mut *tx)
        .await?;
        let existing: Vec<Existing> = sqlx::query_as(&d.sql(&format!(
            "SELECT d.id AS dep_id, d.control_path_id, d.driver_name, d.device_id, \
             d.attributes AS reported_attributes, d.name, d.num_accelerators, \
             {}, v.vendor, v.model, v.std_board_info, v.vendor_board_info, v.{} AS status \
             FROM deployables d JOIN devices v ON d.device_id = v.id WHERE d.hostname = $1 \
             ORDER BY d.id",
            d.text_as("v.type"),
            INVENTORY_STATUS,
        )))
        .bind(host)
        .fetch_all(&mut *tx)
        .await
        .map_err(read_error("devices"))?;
        let mut attributes = HostAttributes::read(&mut tx, d, host).await?;
        // A device's deployables, by its control path (the first one is the oldest).
        let mut by_cp: BTreeMap<String, Vec<Existing>> = BTreeMap::new();
        for e in existing {
            by_cp.entry(e.control_path_id.clone()).or_default().push(e);
        }
        let mut out = ReportOutcome::default();
        for rd in devices {
            let first_name = rd.deployable_name_on(host);
            let wanted = rd.deployables_on(&first_name);
            let Some(group) = by_cp.remove(&rd.control_path_id) else {
                let device_id = insert_device(&mut tx, d, host, rd, &at).await?;
                for dep in &wanted {
                    let cp = &rd.control_path_id;
                    insert_deployable(&mut tx, d, &mut attributes, host, device_id, cp, dep, &at)
                        .await?;
                }
                out.added.push(rd.control_path_id.clone());
                continue;
            };
            let (device_id, status) = (group[0].device_id, group[0].status);
            let fields = DeviceFields {
                device_type: rd.device_type.clone(),
                vendor: rd.vendor.clone(),
                model: rd.model.clone(),
                std_board_info: rd.std_board_info.clone(),
                vendor_board_info: rd.vendor_board_info.clone(),
            };
            let mut changed = group[0].device != fields || status != DeviceStatus::Available;
            if changed {
                sqlx::query(&d.sql(&format!(
                    "UPDATE devices SET type = $1, vendor = $2, model = $3, std_board_info = $4, vendor_board_info = $5, {} = $6, updated_at = $7{ts} WHERE id = $8",
                    INVENTORY_STATUS,
                    ts = d.ts(),
                )))
                .bind(&rd.device_type)
                .bind(&rd.vendor)
                .bind(&rd.model)
                .bind(&rd.std_board_info)
                .bind(&rd.vendor_board_info)
                .bind(DeviceStatus::Available.as_str())
                .bind(&at)
                .bind(device_id)
                .execute(&mut *tx)
                .await?;
            }
            let (pairs, added, gone) = pair_deployables(group, &wanted);
            let mut lost_handle = false;
            for (e, dep) in pairs {
                let diff = sync_deployable(&mut tx, d, &mut attributes, &e, dep, &at).await?;
                changed |= diff.changed;
                lost_handle |= diff.lost_handle;
            }
            for dep in added {
                let cp = &rd.control_path_id;
                insert_deployable(&mut tx, d, &mut attributes, host, device_id, cp, dep, &at)
                    .await?;
                changed = true;
            }
            for e in gone {
                if in_use_handles(&mut tx, d, HandlesOf::Deployable(e.dep_id)).await? > 0 {
                    lost_handle = true;
                } else {
                    delete_deployable(&mut tx, d, e.dep_id).await?;
                    changed = true;
                }
            }
            if lost_handle {
                let cp = rd.control_path_id.clone();
                drop_in_use(&mut tx, d, host, status, device_id, cp, &at, &mut out).await?;
            } else if changed {
                out.updated.push(rd.control_path_id.clone());
            } else {
                out.unchanged += 1;
            }
        }
        for (cp, group) in by_cp {
            let (device_id, status) = (group[0].device_id, group[0].status);
            if in_use_handles(&mut tx, d, HandlesOf::Device(device_id)).await? > 0 {
                drop_in_use(&mut tx, d, host, status, device_id, cp, &at, &mut out).await?;
            } else {
                delete_device(&mut tx, d, device_id).await?;
                out.removed.push(cp);
            }
        }
        // Last: the diff's own writes above made the triggers forget the old digest. A
        // host left holding devices its report lacks (in use, so kept missing or lost)
        // keeps no digest: its rows are not what the report says, and its next reports
        // must be diffed to confirm the loss and to delete the device once released.
        let held = !out.lost.is_empty() || !out.unconfirmed.is_empty();
        match digest.filter(|_| !held) {
            Some(digest) => {
                let upsert = self
                    .backend
                    .replace_on_conflict("hostname", &["digest", "devices", "updated_at"]);
                sqlx::query(&self.backend.sql(&format!(
                    "INSERT INTO host_reports (hostname, digest, devices, updated_at) \
                     VALUES ($1, $2, $3, $4) {upsert}"
                )))
                .bind(host)
                .bind(digest)
                .bind(devices.len() as i64)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query(
                    &self
                        .backend
                        .sql("DELETE FROM host_reports WHERE hostname = $1"),
                )
                .bind(host)
                .execute(&mut *tx)
                .await?;
            }
        }
        if let Some(wire) = wire {
            self.record_wire(&mut *tx, host, wire, &at).await?;
        }
        tx.commit().await?;
        Ok(out)
    }

    /// How many devices the host's last applied report had, when that report's digest
    /// is `digest` and nothing changed the host's devices since: the report `digest`
    /// names needs no diff. `None` otherwise (send, or diff, the report whole).
    ///
    /// The report came on `wire`: when the host's recorded wire is another or none (a
    /// host whose full report was applied before migration 102), it is recorded. One read
    /// otherwise: an unchanged report is the common case and stays cheap.
    pub async fn unchanged_report(
        &self,
        host: &str,
        digest: &str,
        wire: AgentWire,
    ) -> Result<Option<u64>, DbError> {
        let row: Option<DigestOnWire> = sqlx::query_as(&self.backend.sql(
            "SELECT r.digest, r.devices, w.wire FROM host_reports r \
             LEFT JOIN host_wires w ON w.hostname = r.hostname WHERE r.hostname = $1",
        ))
        .bind(host)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error("host_reports"))?;
        let Some(row) = row.filter(|r| r.digest == digest) else {
            return Ok(None);
        };
        let devices = device_count(row.devices)?;
        if row.wire != Some(wire) {
            let at = self.dialect().now();
            self.record_wire(&self.pool, host, wire, &at).await?;
        }
        Ok(Some(devices))
    }

    /// Records that `host`'s agent reports on `wire`.
    async fn record_wire<'e, E>(
        &self,
        executor: E,
        host: &str,
        wire: AgentWire,
        at: &str,
    ) -> Result<(), DbError>
    where
        E: sqlx::Executor<'e, Database = sqlx::Any>,
    {
        let upsert = self
            .backend
            .replace_on_conflict("hostname", &["wire", "updated_at"]);
        sqlx::query(&self.backend.sql(&format!(
            "INSERT INTO host_wires (hostname, wire, updated_at) VALUES ($1, $2, $3) {upsert}"
        )))
        .bind(host)
        .bind(wire.as_str())
        .bind(at)
        .execute(executor)
        .await?;
        Ok(())
    }

    /// The wire `host`'s agent last reported on, as this conductor's database recorded it
    /// ([`Db::report_on`]); `None` for a host no accel conductor applied a report of since
    /// migration 102.
    pub async fn host_wire(&self, host: &str) -> Result<Option<AgentWire>, DbError> {
        sqlx::query_scalar(
            &self
                .backend
                .sql("SELECT wire FROM host_wires WHERE hostname = $1"),
        )
        .bind(host)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error("host_wires"))
    }

    /// The digest of the host's last applied report and how many devices it had, if
    /// nothing changed the host's devices since ([`Db::report_with_digest`]).
    pub async fn report_digest(&self, host: &str) -> Result<Option<(String, u64)>, DbError> {
        let row: Option<Digest> = sqlx::query_as(
            &self
                .backend
                .sql("SELECT digest, devices FROM host_reports WHERE hostname = $1"),
        )
        .bind(host)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error("host_reports"))?;
        row.map(|r| Ok((r.digest, device_count(r.devices)?)))
            .transpose()
    }
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

/// What the report diff compares of a device (besides its deployables); a difference
/// rewrites the device's row.
#[derive(PartialEq, Eq, sqlx::FromRow)]
struct DeviceFields {
    #[sqlx(rename = "type")]
    device_type: String,
    vendor: String,
    model: String,
    #[sqlx(try_from = "TextOption")]
    std_board_info: Option<String>,
    #[sqlx(try_from = "TextOption")]
    vendor_board_info: Option<String>,
}

/// Pairs a reported device's deployables with the ones its previous report left: by
/// name, or, when each side has exactly one, with each other whatever their names (a
/// driver that renames the one deployable keeps its UUID, handles and attributes).
/// Returns the pairs, the reported deployables that are new, and the stored ones the
/// report no longer has.
fn pair_deployables<'w, 'a>(
    group: Vec<Existing>,
    wanted: &'w [DeployableReport<'a>],
) -> (
    Vec<(Existing, &'w DeployableReport<'a>)>,
    Vec<&'w DeployableReport<'a>>,
    Vec<Existing>,
) {
    if let ([_], [dep]) = (group.as_slice(), wanted) {
        return (
            group.into_iter().map(|e| (e, dep)).collect(),
            vec![],
            vec![],
        );
    }
    let mut stored: BTreeMap<String, Existing> =
        group.into_iter().map(|e| (e.name.clone(), e)).collect();
    let mut pairs = Vec::new();
    let mut added = Vec::new();
    for dep in wanted {
        match stored.remove(dep.name) {
            Some(e) => pairs.push((e, dep)),
            None => added.push(dep),
        }
    }
    (pairs, added, stored.into_values().collect())
}

/// What [`sync_deployable`] found.
struct DeployableDiff {
    /// A row of the deployable, its handles or its reported attributes was written.
    changed: bool,
    /// An in-use handle is not in the report (kept: the device is then missing or lost).
    lost_handle: bool,
}

/// Brings one stored deployable in line with its report: its name, driver and count,
/// its handles (a handle in use that the report lacks is kept, and said) and its
/// reported attributes.
async fn sync_deployable(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    attributes: &mut HostAttributes,
    e: &Existing,
    dep: &DeployableReport<'_>,
    at: &str,
) -> Result<DeployableDiff, DbError> {
    let count = dep.handles.len() as i64;
    let mut changed = false;
    if e.name != dep.name
        || e.driver_name.as_deref() != dep.driver_name
        || e.num_accelerators != count
    {
        sqlx::query(&d.sql(&format!("UPDATE deployables SET driver_name = $1, num_accelerators = $2, name = $3, updated_at = $4{} WHERE id = $5", d.ts())))
            .bind(dep.driver_name)
            .bind(count)
            .bind(dep.name)
            .bind(at)
            .bind(e.dep_id)
            .execute(&mut **tx)
            .await?;
        changed = true;
    }
    let handles: Vec<Handle> = sqlx::query_as(&d.sql(&format!(
        "SELECT id, {}, attach_info, {} FROM attach_handles WHERE deployable_id = $1",
        d.text_as("attach_type"),
        d.flag_as("in_use"),
    )))
    .bind(e.dep_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(read_error("attach_handles"))?;
    let mut have: BTreeMap<(String, String), (i64, bool)> = handles
        .into_iter()
        .map(|h| {
            let identity = handle_identity(&h.attach_info);
            ((h.attach_type, identity), (h.id, h.in_use))
        })
        .collect();
    changed |= attributes
        .sync(tx, d, e.dep_id, &e.reported_attributes, dep.attributes, at)
        .await?;
    for (attach_type, attach_info) in dep.handles {
        let key = (attach_type.clone(), handle_identity(attach_info));
        if have.remove(&key).is_none() {
            insert_handle(tx, d, e.dep_id, attach_type, attach_info, at).await?;
            changed = true;
        }
    }
    let mut lost_handle = false;
    for (_, (id, in_use)) in have {
        if in_use {
            lost_handle = true;
        } else {
            sqlx::query(&d.sql("DELETE FROM attach_handles WHERE id = $1"))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            changed = true;
        }
    }
    Ok(DeployableDiff {
        changed,
        lost_handle,
    })
}

/// Adds a reported deployable of device `device_id`, with its handles and attributes.
#[allow(clippy::too_many_arguments)]
async fn insert_deployable(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    attributes: &mut HostAttributes,
    host: &str,
    device_id: i64,
    control_path_id: &str,
    dep: &DeployableReport<'_>,
    at: &str,
) -> Result<(), DbError> {
    let dep_id: i64 = sqlx::query_scalar(
        &d.sql(&format!("INSERT INTO deployables (uuid, name, device_id, hostname, control_path_id, num_accelerators, driver_name, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8{ts}, $9{ts}) RETURNING id", ts = d.ts())),
    )
    .bind(new_uuid())
    .bind(dep.name)
    .bind(device_id)
    .bind(host)
    .bind(control_path_id)
    .bind(dep.handles.len() as i64)
    .bind(dep.driver_name)
    .bind(at)
    .bind(at)
    .fetch_one(&mut **tx)
    .await?;
    for (attach_type, attach_info) in dep.handles {
        insert_handle(tx, d, dep_id, attach_type, attach_info, at).await?;
    }
    attributes
        .sync(tx, d, dep_id, "{}", dep.attributes, at)
        .await?;
    Ok(())
}

/// Whose handles [`in_use_handles`] counts.
#[derive(Clone, Copy)]
enum HandlesOf {
    Deployable(i64),
    Device(i64),
}

/// How many handles in use a deployable or a whole device has.
async fn in_use_handles(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    of: HandlesOf,
) -> Result<i64, DbError> {
    let yes = d.yes();
    let (sql, id) = match of {
        HandlesOf::Deployable(id) => (
            format!("SELECT COUNT(*) AS n FROM attach_handles WHERE deployable_id = $1 AND in_use = {yes}"),
            id,
        ),
        HandlesOf::Device(id) => (
            format!("SELECT COUNT(*) AS n FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
             WHERE d.device_id = $1 AND h.in_use = {yes}"),
            id,
        ),
    };
    Ok(sqlx::query_scalar(&d.sql(&sql))
        .bind(id)
        .fetch_one(&mut **tx)
        .await?)
}

/// The attribute rows of one host's deployables, read once per report and brought in
/// line with it deployable by deployable (see [`ReportedDevice::attributes`]).
struct HostAttributes {
    /// By deployable, by key: (row id, value).
    rows: BTreeMap<i64, BTreeMap<String, (i64, String)>>,
}

impl HostAttributes {
    async fn read(
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        d: Dialect,
        host: &str,
    ) -> Result<Self, DbError> {
        let found: Vec<Attribute> = sqlx::query_as(&d.sql(
            "SELECT a.id, a.deployable_id, a.\"key\", a.value FROM attributes a \
             JOIN deployables d ON a.deployable_id = d.id WHERE d.hostname = $1",
        ))
        .bind(host)
        .fetch_all(&mut **tx)
        .await
        .map_err(read_error("attributes"))?;
        let mut rows: BTreeMap<i64, BTreeMap<String, (i64, String)>> = BTreeMap::new();
        for a in found {
            rows.entry(a.deployable_id)
                .or_default()
                .insert(a.key, (a.id, a.value));
        }
        Ok(Self { rows })
    }

    /// Sets the reported keys' values, deletes the keys `previously` reported (the
    /// deployable's `attributes` column, JSON) that `reported` no longer has, and records
    /// `reported` as the deployable's last reported keys; whether anything changed.
    async fn sync(
        &mut self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        d: Dialect,
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
                    sqlx::query(&d.sql(&format!(
                        "UPDATE attributes SET value = $1, updated_at = $2{} WHERE id = $3",
                        d.ts()
                    )))
                    .bind(value)
                    .bind(at)
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
                    changed = true;
                }
                None => {
                    insert_attribute(tx, d, deployable_id, key, value, at).await?;
                    changed = true;
                }
            }
        }
        for key in previously.keys().filter(|k| !reported.contains_key(*k)) {
            if let Some((id, _)) = rows.get(key) {
                sqlx::query(&d.sql("DELETE FROM attributes WHERE id = $1"))
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
                changed = true;
            }
        }
        if previously != *reported {
            sqlx::query(&d.sql("UPDATE deployables SET attributes = $1 WHERE id = $2"))
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

async fn insert_handle(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    deployable_id: i64,
    attach_type: &str,
    attach_info: &str,
    at: &str,
) -> Result<(), DbError> {
    // A handle names its device's control path (Cyborg's `cpid_id`, NOT NULL).
    let query = format!(
        "INSERT INTO attach_handles (uuid, deployable_id, in_use, attach_type, attach_info, created_at, updated_at, cpid_id) \
         VALUES ($1, $2, {no}, $3, $4, $5{ts}, $6{ts}, (SELECT MIN(c.id) FROM controlpath_ids c \
         JOIN deployables dd ON dd.device_id = c.device_id WHERE dd.id = $7))",
        no = d.no(),
        ts = d.ts(),
    );
    sqlx::query(&d.sql(&query))
        .bind(new_uuid())
        .bind(deployable_id)
        .bind(attach_type)
        .bind(attach_info)
        .bind(at)
        .bind(at)
        .bind(deployable_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Adds a reported device and its control path, which its handles name; its id.
/// Cyborg's schema keys a device's control path by its PCI address, so a control path
/// that is not one (`DDDD:BB:DD.F`) is refused.
async fn insert_device(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    host: &str,
    rd: &ReportedDevice,
    at: &str,
) -> Result<i64, DbError> {
    // Cyborg's own columns as Cyborg 17's conductor fills them for a new device:
    // enabled, and `available` for its cleaning lifecycle.
    let query = format!(
        "INSERT INTO devices (uuid, type, vendor, model, std_board_info, vendor_board_info, hostname, {INVENTORY_STATUS}, created_at, updated_at, status, device_state) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9{ts}, $10{ts}, 'enabled', 'available') RETURNING id",
        ts = d.ts()
    );
    let device_id: i64 = sqlx::query_scalar(&d.sql(&query))
        .bind(new_uuid())
        .bind(&rd.device_type)
        .bind(&rd.vendor)
        .bind(&rd.model)
        .bind(&rd.std_board_info)
        .bind(&rd.vendor_board_info)
        .bind(host)
        .bind(DeviceStatus::Available.as_str())
        .bind(at)
        .bind(at)
        .fetch_one(&mut **tx)
        .await?;
    let info =
        crate::cyborg::cpid_info_text(&rd.control_path_id).ok_or_else(|| DbError::Invalid {
            what: "report",
            why: format!(
                "device control path {:?} is not a PCI address (DDDD:BB:DD.F)",
                super::shown(&rd.control_path_id)
            ),
        })?;
    sqlx::query(&d.sql(&format!(
        "INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, updated_at) \
         VALUES ($1, $2, 'PCI', $3, $4{ts}, $5{ts})",
        ts = d.ts()
    )))
    .bind(new_uuid())
    .bind(device_id)
    .bind(info)
    .bind(at)
    .bind(at)
    .execute(&mut **tx)
    .await?;
    Ok(device_id)
}

/// Deletes a deployable not in use. Cyborg's schema does not delete its handles and
/// attributes by cascade, so they go first, each by the deployable's index (a delete
/// through a subquery locks far more on MySQL, and deadlocked concurrent reports of
/// other hosts).
async fn delete_deployable(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    id: i64,
) -> Result<(), DbError> {
    for sql in [
        "DELETE FROM attributes WHERE deployable_id = $1",
        "DELETE FROM attach_handles WHERE deployable_id = $1",
    ] {
        sqlx::query(&d.sql(sql)).bind(id).execute(&mut **tx).await?;
    }
    sqlx::query(&d.sql("DELETE FROM deployables WHERE id = $1"))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Deletes a device not in use with everything under it (children first, as
/// [`delete_deployable`]).
async fn delete_device(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    id: i64,
) -> Result<(), DbError> {
    let deployables: Vec<i64> =
        sqlx::query_scalar(&d.sql("SELECT id FROM deployables WHERE device_id = $1"))
            .bind(id)
            .fetch_all(&mut **tx)
            .await?;
    for deployable in deployables {
        delete_deployable(tx, d, deployable).await?;
    }
    sqlx::query(&d.sql("DELETE FROM controlpath_ids WHERE device_id = $1"))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    sqlx::query(&d.sql("DELETE FROM devices WHERE id = $1"))
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A report drops an in-use device (or one of its in-use handles), whose status was
/// `status` before this report: the first time it is only marked `missing`; a later
/// report still without it (the device is `missing` or `lost`) confirms the loss:
/// `lost`. Either way the device and its handles stay, as the instance still has them.
#[allow(clippy::too_many_arguments)]
async fn drop_in_use(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    host: &str,
    status: DeviceStatus,
    device_id: i64,
    control_path_id: String,
    at: &str,
    out: &mut ReportOutcome,
) -> Result<(), DbError> {
    let confirmed = matches!(status, DeviceStatus::Missing | DeviceStatus::Lost);
    let to = if confirmed {
        DeviceStatus::Lost
    } else {
        DeviceStatus::Missing
    };
    if status != to {
        sqlx::query(&d.sql(&format!(
            "UPDATE devices SET {} = $1, updated_at = $2{} WHERE id = $3",
            INVENTORY_STATUS,
            d.ts(),
        )))
        .bind(to.as_str())
        .bind(at)
        .bind(device_id)
        .execute(&mut **tx)
        .await?;
    }
    if confirmed {
        if status != DeviceStatus::Lost {
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
