//! [`CyborgApi`]: the operations of Cyborg 17's v2 API (`cyborg/api/controllers/v2`) on
//! Cyborg 17's own tables and conductor, behind the HTTP layer ([`crate::http`]).
//!
//! Who does what is Cyborg's split, kept exactly because a Cyborg 17 service may share the
//! database and the broker with this one:
//!
//! | operation | Cyborg 17's API | here |
//! |---|---|---|
//! | lists and reads | its objects read the database | the same rows read with SQL ([`Store`]) |
//! | device profile create / delete | conductor `device_profile_create` / `device_profile_delete` | the same calls, on `cyborg-conductor` |
//! | request create | conductor `arq_create`, one per accelerator a group asks for | the same |
//! | bind / unbind | conductor `arq_apply_patch` | the same |
//! | request delete | `ExtARQ.delete_by_uuid` / `delete_by_instance` in the API process (a mediated device removed through the host's agent) | [`Requests::delete_by_uuid`] / [`Requests::delete_by_instance`], the conductor crate's code for the same methods |
//! | device disable / enable | `devices.status` written, the deployable's inventory reserved in Placement | the same |
//! | attribute create / delete | the API writes the row | the same |
//! | FPGA program | agent `fpga_program` on the device's host | the same |
//!
//! Times are shown as Cyborg's API shows them (Python's `isoformat()` of a UTC time:
//! `2026-12-06T12:00:00.123456+00:00`, no fraction when it is zero).

use crate::http::groups;
use crate::http::service::{
    ArqRow, ArqState, AttributeRow, DeployableRow, DeviceProfileRow, DeviceRow,
};
use crate::http::{AccelService, Binding, ErrorKind, ListQuery, NewProfile, ServiceError};
use crate::rows::{
    arq_row, attribute_row, corrupt, db_error, deployable_row, device_row, profile_row,
    request_error, required, rpc_error,
};
use accel_cyborg17::objects::{Arq, DeviceProfile, ExtArq};
use accel_cyborg17::rpc::{
    ArqApplyPatch, ArqCreate, DeviceProfileCreate, DeviceProfileDelete, CONDUCTOR_TOPIC,
};
use accel_cyborg17_conductor::db::{now, Dialect, Store};
use accel_cyborg17_conductor::placement::Placement;
use accel_cyborg17_conductor::requests::{Agents, RequestError, Requests};
use async_trait::async_trait;
use serde_json::{json, Value};
use sqlx::any::AnyRow;
use sqlx::Row;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;
use verso::{RequestContext, VersionedObject};
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, Target};

/// Cyborg 17's API over its database and conductor.
#[derive(Clone)]
pub struct CyborgApi {
    store: Store,
    requests: Requests,
    conductor: RpcClient,
    agents: Agents,
    placement: Option<Placement>,
}

impl std::fmt::Debug for CyborgApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CyborgApi")
            .field("dialect", &self.store.dialect())
            .finish_non_exhaustive()
    }
}

impl CyborgApi {
    /// The API on `store`, reaching Cyborg's conductor and agents over `transport`
    /// (exchange `cyborg`), each call waiting up to `timeout`; device disable and enable
    /// keep the deployable's inventory in `placement` (refused without it).
    pub fn new(
        store: Store,
        transport: Arc<dyn Transport>,
        timeout: Duration,
        placement: Option<Placement>,
    ) -> CyborgApi {
        let agents = Agents::new(transport.clone(), timeout);
        CyborgApi {
            requests: Requests::new(store.clone(), Some(agents.clone())),
            store,
            conductor: RpcClient::new(transport, Target::new(CONDUCTOR_TOPIC)).timeout(timeout),
            agents,
            placement,
        }
    }

    fn d(&self) -> Dialect {
        self.store.dialect()
    }

    fn context(project: Option<&str>) -> RequestContext {
        let ctx = RequestContext::new(format!("req-{}", Uuid::new_v4()));
        match project {
            Some(p) => ctx.with_project(p),
            None => ctx,
        }
    }

    async fn rows(&self, sql: &str, binds: &[Bind<'_>]) -> Result<Vec<AnyRow>, ServiceError> {
        let mut q = sqlx::query(sql);
        for b in binds {
            q = match b {
                Bind::Text(t) => q.bind(t.to_string()),
                Bind::Int(i) => q.bind(*i),
            };
        }
        q.fetch_all(self.store.pool()).await.map_err(db_error)
    }

    /// The id of the row of `table` with `uuid`, for a list's marker.
    async fn marker_id(&self, table: &str, uuid: &str, what: &str) -> Result<i64, ServiceError> {
        let sql = format!("SELECT {} FROM {table} WHERE uuid = ?", self.d().int("id"));
        let rows = self.rows(&sql, &[Bind::Text(uuid)]).await?;
        match rows.first() {
            Some(r) => r.try_get::<i64, _>(0).map_err(db_error),
            None => Err(ServiceError::new(
                ErrorKind::BadRequest,
                format!("marker {uuid} is no {what}"),
            )),
        }
    }

    fn device_columns(&self) -> String {
        let d = self.d();
        [
            d.int("id"),
            d.text("uuid"),
            d.text("type"),
            d.text("vendor"),
            d.text("model"),
            d.text("std_board_info"),
            d.text("hostname"),
            d.text("vendor_board_info"),
            d.text("status"),
            d.time("created_at"),
            d.time("updated_at"),
        ]
        .join(", ")
    }

    fn deployable_columns(&self) -> String {
        let d = self.d();
        [
            d.int("dp.id"),
            d.text("dp.uuid"),
            d.text("dp.name"),
            d.int("dp.device_id"),
            d.text("dv.hostname"),
            d.int("dp.num_accelerators"),
            d.text("dp.driver_name"),
            d.text("dp.rp_uuid"),
            d.time("dp.created_at"),
            d.time("dp.updated_at"),
        ]
        .join(", ")
    }

    async fn deployable_rows(
        &self,
        filter: &str,
        binds: &[Bind<'_>],
        limit: Option<u32>,
    ) -> Result<Vec<DeployableRow>, ServiceError> {
        let sql = format!(
            "SELECT {} FROM deployables dp JOIN devices dv ON dv.id = dp.device_id \
             WHERE 1 = 1{filter} ORDER BY dp.id{}",
            self.deployable_columns(),
            limit_clause(limit)
        );
        let mut out = Vec::new();
        for row in self.rows(&sql, binds).await? {
            let mut dep = deployable_row(&row)?;
            dep.attributes = self.attributes_of(dep.id).await?;
            out.push(dep);
        }
        Ok(out)
    }

    /// A deployable's attributes, as Cyborg's `Deployable.attributes_list` shows them.
    async fn attributes_of(
        &self,
        deployable: i64,
    ) -> Result<BTreeMap<String, String>, ServiceError> {
        let d = self.d();
        let sql = format!(
            "SELECT {}, {} FROM attributes WHERE deployable_id = ? ORDER BY id",
            d.text(d.key()),
            d.text("value")
        );
        let rows = self.rows(&sql, &[Bind::Int(deployable)]).await?;
        rows.iter()
            .map(|r| Ok((required(r, 0)?, required(r, 1)?)))
            .collect()
    }

    fn attribute_columns(&self) -> String {
        let d = self.d();
        [
            d.int("id"),
            d.text("uuid"),
            d.int("deployable_id"),
            d.text(d.key()),
            d.text("value"),
            d.time("created_at"),
            d.time("updated_at"),
        ]
        .join(", ")
    }

    fn profile_columns(&self) -> String {
        let d = self.d();
        [
            d.int("id"),
            d.text("uuid"),
            d.text("name"),
            d.text("profile_json"),
            d.text("description"),
            d.time("created_at"),
        ]
        .join(", ")
    }

    async fn profile_rows(
        &self,
        filter: &str,
        binds: &[Bind<'_>],
        limit: Option<u32>,
    ) -> Result<Vec<DeviceProfileRow>, ServiceError> {
        let sql = format!(
            "SELECT {} FROM device_profiles WHERE 1 = 1{filter} ORDER BY id{}",
            self.profile_columns(),
            limit_clause(limit)
        );
        self.rows(&sql, binds)
            .await?
            .iter()
            .map(profile_row)
            .collect()
    }

    /// The request `uuid` as the HTTP layer's row.
    async fn arq_row(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        let ext = self.requests.arq(uuid).await.map_err(request_error)?;
        arq_row(&ext)
    }

    /// The profile named by `name_or_uuid`, as Cyborg's object.
    async fn profile_object(&self, name_or_uuid: &str) -> Result<DeviceProfile, ServiceError> {
        let row = self.profile(name_or_uuid).await?;
        let mut obj = DeviceProfile::blank();
        obj.id.set(row.id);
        obj.uuid.set(row.uuid);
        obj.name.set(row.name);
        obj.groups.set(
            row.groups
                .into_iter()
                .map(|g| g.into_iter().map(|(k, v)| (k, Some(v))).collect())
                .collect(),
        );
        obj.description.set(row.description);
        obj.reset_changes();
        Ok(obj)
    }

    async fn apply_patch(
        &self,
        uuid: &str,
        patch: Value,
        fields: Value,
        project: Option<&str>,
    ) -> Result<(), ServiceError> {
        let call = ArqApplyPatch {
            patch_list: BTreeMap::from([(uuid.to_owned(), patch)]),
            valid_fields: BTreeMap::from([(uuid.to_owned(), fields)]),
        };
        self.conductor
            .call_method(&Self::context(project), call)
            .await
            .map_err(rpc_error)
    }
}

/// ` LIMIT n` for a page, nothing for all rows.
fn limit_clause(limit: Option<u32>) -> String {
    limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default()
}

/// A bound parameter.
enum Bind<'a> {
    Text(&'a str),
    Int(i64),
}

/// A profile as Cyborg's `DeviceProfilesController._validate_post_request` checks it:
/// a name of `^[a-zA-Z0-9-_]+$`, at least one group, keys `resources:` (one of Cyborg's
/// classes or `CUSTOM_*`, a whole number), `trait:` (`CUSTOM_*`, `required` or
/// `forbidden`) or `accel:`, spaces after a prefix dropped. accel's own device types as
/// classes (`resources:QAT`, which accel's API takes) are refused, as Cyborg refuses
/// them.
pub fn checked_profile(profile: NewProfile) -> Result<NewProfile, ServiceError> {
    let invalid = |e: groups::Invalid| ServiceError::bad_request(e.to_string());
    groups::check_name(&profile.name).map_err(invalid)?;
    if profile.groups.is_empty() {
        return Err(ServiceError::bad_request(
            "Groups must be present in device profile",
        ));
    }
    let mut checked = Vec::with_capacity(profile.groups.len());
    for group in profile.groups {
        let group = groups::normalize(group).map_err(invalid)?;
        for key in group.keys() {
            let class = key.strip_prefix(groups::RESOURCES).unwrap_or_default();
            if groups::ACCEL_CLASSES.contains(&class) {
                return Err(ServiceError::bad_request(format!(
                    "Unsupported resource class {class}"
                )));
            }
        }
        checked.push(group);
    }
    Ok(NewProfile {
        groups: checked,
        ..profile
    })
}

#[async_trait]
impl AccelService for CyborgApi {
    async fn devices(&self, query: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError> {
        let mut filter = String::new();
        let mut binds = Vec::new();
        for (col, value) in [
            ("hostname", &query.hostname),
            ("type", &query.device_type),
            ("vendor", &query.vendor),
        ] {
            if let Some(v) = value {
                filter.push_str(&format!(" AND {col} = ?"));
                binds.push(Bind::Text(v));
            }
        }
        if let Some(m) = &query.marker {
            let id = self.marker_id("devices", m, "device").await?;
            filter.push_str(" AND id > ?");
            binds.push(Bind::Int(id));
        }
        let sql = format!(
            "SELECT {} FROM devices WHERE 1 = 1{filter} ORDER BY id LIMIT {}",
            self.device_columns(),
            query.limit
        );
        self.rows(&sql, &binds)
            .await?
            .iter()
            .map(device_row)
            .collect()
    }

    async fn device(&self, uuid: &str) -> Result<DeviceRow, ServiceError> {
        let sql = format!(
            "SELECT {} FROM devices WHERE uuid = ?",
            self.device_columns()
        );
        match self.rows(&sql, &[Bind::Text(uuid)]).await?.first() {
            Some(row) => device_row(row),
            None => Err(ServiceError::new(
                ErrorKind::NotFound,
                format!("Device not found with uuid={uuid}"),
            )),
        }
    }

    /// Cyborg's `DevicesController.disable`/`enable`: the device's status, then every unit
    /// of its deployable's inventory reserved (disable) or none (enable) in Placement.
    /// Cyborg 17 finds "the deployable" by the device's id taken as a deployable id; this
    /// takes the device's own deployables (the same one wherever ids agree, as they do
    /// when every device has one deployable).
    async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, ServiceError> {
        let device = self.device(uuid).await?;
        let placement = self.placement.as_ref().ok_or_else(|| {
            ServiceError::new(
                ErrorKind::MethodNotAllowed,
                "device disable and enable need [placement]",
            )
        })?;
        let status = if maintaining {
            "maintaining"
        } else {
            "enabled"
        };
        sqlx::query("UPDATE devices SET status = ?, updated_at = ? WHERE id = ?")
            .bind(status)
            .bind(now())
            .bind(device.id)
            .execute(self.store.pool())
            .await
            .map_err(db_error)?;
        let deployables = self
            .deployable_rows(" AND dp.device_id = ?", &[Bind::Int(device.id)], None)
            .await?;
        for dep in deployables {
            let rc = dep.attributes.get("rc").ok_or_else(|| {
                ServiceError::new(
                    ErrorKind::NotFound,
                    format!("Attribute not found with deployable_id={},key=rc", dep.id),
                )
            })?;
            let reserved = if maintaining { dep.num_accelerators } else { 0 };
            placement
                .update_reserved(&dep.rp_uuid, rc, dep.num_accelerators, reserved)
                .await
                .map_err(|e| {
                    ServiceError::new(ErrorKind::Unavailable, format!("Placement: {e}"))
                })?;
        }
        self.device(uuid).await
    }

    async fn deployables(&self, query: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError> {
        let mut filter = String::new();
        let mut binds = Vec::new();
        if let Some(h) = &query.hostname {
            filter.push_str(" AND dv.hostname = ?");
            binds.push(Bind::Text(h));
        }
        if let Some(t) = &query.device_type {
            filter.push_str(" AND dv.type = ?");
            binds.push(Bind::Text(t));
        }
        if let Some(m) = &query.marker {
            let id = self.marker_id("deployables", m, "deployable").await?;
            filter.push_str(" AND dp.id > ?");
            binds.push(Bind::Int(id));
        }
        self.deployable_rows(&filter, &binds, Some(query.limit))
            .await
    }

    async fn deployable(&self, uuid: &str) -> Result<DeployableRow, ServiceError> {
        self.deployable_rows(" AND dp.uuid = ?", &[Bind::Text(uuid)], None)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                ServiceError::new(
                    ErrorKind::NotFound,
                    format!("Deployable not found with uuid={uuid}"),
                )
            })
    }

    async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<AttributeRow>, ServiceError> {
        let d = self.d();
        let mut filter = String::new();
        let mut binds = Vec::new();
        if let Some(id) = deployable_id {
            filter.push_str(" AND deployable_id = ?");
            binds.push(Bind::Int(id));
        }
        if let Some(k) = key {
            filter.push_str(&format!(" AND {} = ?", d.key()));
            binds.push(Bind::Text(k));
        }
        if let Some(m) = &query.marker {
            let id = self.marker_id("attributes", m, "attribute").await?;
            filter.push_str(" AND id > ?");
            binds.push(Bind::Int(id));
        }
        let sql = format!(
            "SELECT {} FROM attributes WHERE 1 = 1{filter} ORDER BY id LIMIT {}",
            self.attribute_columns(),
            query.limit
        );
        self.rows(&sql, &binds)
            .await?
            .iter()
            .map(attribute_row)
            .collect()
    }

    async fn attribute(&self, uuid: &str) -> Result<AttributeRow, ServiceError> {
        let sql = format!(
            "SELECT {} FROM attributes WHERE uuid = ?",
            self.attribute_columns()
        );
        match self.rows(&sql, &[Bind::Text(uuid)]).await?.first() {
            Some(row) => attribute_row(row),
            None => Err(ServiceError::new(
                ErrorKind::NotFound,
                format!("Attribute not found with uuid={uuid}"),
            )),
        }
    }

    /// Cyborg's `AttributesController.post`: the API writes the row itself.
    async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, ServiceError> {
        let exists = self
            .rows(
                "SELECT id FROM deployables WHERE id = ?",
                &[Bind::Int(deployable_id)],
            )
            .await?;
        if exists.is_empty() {
            return Err(ServiceError::new(
                ErrorKind::NotFound,
                format!("Deployable not found with id={deployable_id}"),
            ));
        }
        let uuid = Uuid::new_v4().to_string();
        let sql = format!(
            "INSERT INTO attributes (uuid, deployable_id, {}, value, created_at) \
             VALUES (?, ?, ?, ?, ?)",
            self.d().key()
        );
        sqlx::query(&sql)
            .bind(&uuid)
            .bind(deployable_id)
            .bind(key)
            .bind(value)
            .bind(now())
            .execute(self.store.pool())
            .await
            .map_err(db_error)?;
        self.attribute(&uuid).await
    }

    async fn delete_attribute(&self, uuid: &str) -> Result<(), ServiceError> {
        self.attribute(uuid).await?;
        sqlx::query("DELETE FROM attributes WHERE uuid = ?")
            .bind(uuid)
            .execute(self.store.pool())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    /// Cyborg's `DeployablesController.program`: the agent of the device's host
    /// programs it with the device's control path and the deployable's driver.
    async fn program_deployable(&self, uuid: &str, bitstream: &str) -> Result<(), ServiceError> {
        let dep = self.deployable(uuid).await?;
        let controlpath = self
            .requests
            .control_path(dep.device_id)
            .await
            .map_err(request_error)?;
        let answer = self
            .agents
            .fpga_program(
                &dep.hostname,
                controlpath,
                bitstream,
                dep.driver_name.as_deref().unwrap_or_default(),
            )
            .await
            .map_err(|e| ServiceError::new(ErrorKind::ProgramFailed, e.to_string()))?;
        if answer == Value::Bool(true) {
            Ok(())
        } else {
            Err(ServiceError::new(
                ErrorKind::ProgramFailed,
                format!("FPGA programming failed: the agent answered {answer}"),
            ))
        }
    }

    async fn profiles(&self, query: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError> {
        let mut filter = String::new();
        let mut binds = Vec::new();
        if !query.names.is_empty() {
            let marks = vec!["?"; query.names.len()].join(", ");
            filter.push_str(&format!(" AND name IN ({marks})"));
            binds.extend(query.names.iter().map(|n| Bind::Text(n)));
        }
        if let Some(m) = &query.marker {
            let id = self
                .marker_id("device_profiles", m, "device profile")
                .await?;
            filter.push_str(" AND id > ?");
            binds.push(Bind::Int(id));
        }
        self.profile_rows(&filter, &binds, Some(query.limit)).await
    }

    async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, ServiceError> {
        if Uuid::parse_str(name_or_uuid).is_ok() {
            if let Some(p) = self
                .profile_rows(" AND uuid = ?", &[Bind::Text(name_or_uuid)], None)
                .await?
                .into_iter()
                .next()
            {
                return Ok(p);
            }
        }
        self.profile_rows(" AND name = ?", &[Bind::Text(name_or_uuid)], None)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                ServiceError::new(
                    ErrorKind::NotFound,
                    format!("Device Profile not found with {name_or_uuid}"),
                )
            })
    }

    async fn create_profile(&self, profile: NewProfile) -> Result<DeviceProfileRow, ServiceError> {
        let profile = checked_profile(profile)?;
        let mut obj = DeviceProfile::blank();
        obj.name.set(profile.name);
        obj.groups.set(
            profile
                .groups
                .into_iter()
                .map(|g| g.into_iter().map(|(k, v)| (k, Some(v))).collect())
                .collect(),
        );
        obj.description.set(profile.description);
        let saved: DeviceProfile = self
            .conductor
            .call_method(
                &Self::context(None),
                DeviceProfileCreate { obj_devprof: obj },
            )
            .await
            .map_err(rpc_error)?;
        let uuid = saved
            .uuid
            .get()
            .cloned()
            .ok_or_else(|| corrupt("a saved profile without a UUID".into()))?;
        self.profile(&uuid).await
    }

    async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), ServiceError> {
        let obj = self.profile_object(name_or_uuid).await?;
        self.conductor
            .call_method(
                &Self::context(None),
                DeviceProfileDelete { obj_devprof: obj },
            )
            .await
            .map_err(rpc_error)
    }

    /// Cyborg's `ARQsController.post`: per group (or the one asked for), one
    /// `arq_create` per accelerator the group asks for.
    async fn create_arqs(
        &self,
        profile: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        let profile = self.profile(profile).await?;
        let mut made = Vec::new();
        for (i, group) in profile.groups.iter().enumerate() {
            let i = i as i64;
            if group_id.is_some_and(|g| g != i) {
                continue;
            }
            for _ in 0..groups::arq_count(group) {
                let mut arq = Arq::blank();
                arq.device_profile_name.set(profile.name.clone());
                arq.device_profile_group_id.set(i);
                arq.project_id.set(project_id.map(str::to_owned));
                let mut ext = ExtArq::blank();
                ext.arq.set(arq);
                let saved: ExtArq = self
                    .conductor
                    .call_method(
                        &Self::context(project_id),
                        ArqCreate {
                            obj_extarq: ext,
                            devprof_id: profile.id,
                        },
                    )
                    .await
                    .map_err(rpc_error)?;
                made.push(arq_row(&saved)?);
            }
        }
        Ok(made)
    }

    async fn arqs(
        &self,
        instance_uuid: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        let mut filter = String::new();
        let mut binds = Vec::new();
        if let Some(i) = instance_uuid {
            filter.push_str(" AND instance_uuid = ?");
            binds.push(Bind::Text(i));
        }
        if let Some(p) = &query.project_id {
            filter.push_str(" AND project_id = ?");
            binds.push(Bind::Text(p));
        }
        if let Some(m) = &query.marker {
            let id = self
                .marker_id("extended_accelerator_requests", m, "accelerator request")
                .await?;
            filter.push_str(" AND id > ?");
            binds.push(Bind::Int(id));
        }
        let sql = format!(
            "SELECT {} FROM extended_accelerator_requests WHERE 1 = 1{filter} \
             ORDER BY id LIMIT {}",
            self.d().text("uuid"),
            query.limit
        );
        let mut out = Vec::new();
        for row in self.rows(&sql, &binds).await? {
            out.push(self.arq_row(&required(&row, 0)?).await?);
        }
        Ok(out)
    }

    async fn arq(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        self.arq_row(uuid).await
    }

    /// Cyborg's `ARQsController.patch` with one request: `add` of the host, the
    /// device's provider, the instance and the project, through the conductor's
    /// `arq_apply_patch`.
    async fn bind(&self, uuid: &str, binding: &Binding) -> Result<ArqRow, ServiceError> {
        let rp = binding
            .device_rp_uuid
            .clone()
            .ok_or_else(|| ServiceError::bad_request("Fields absent in patch device_rp_uuid"))?;
        let mut patch = vec![
            json!({"path": "/hostname", "op": "add", "value": binding.hostname}),
            json!({"path": "/device_rp_uuid", "op": "add", "value": rp}),
            json!({"path": "/instance_uuid", "op": "add", "value": binding.instance_uuid}),
        ];
        let mut fields = json!({
            "hostname": binding.hostname,
            "device_rp_uuid": rp,
            "instance_uuid": binding.instance_uuid,
            "project_id": Value::Null,
        });
        if let Some(p) = binding.project.id() {
            patch.push(json!({"path": "/project_id", "op": "add", "value": p}));
            fields["project_id"] = json!(p);
        }
        let bound = self
            .apply_patch(uuid, Value::Array(patch), fields, binding.project.id())
            .await;
        if let Err(e) = bound {
            // A bind that found no free handle leaves the request BindFailed.
            let failed = self
                .arq_row(uuid)
                .await
                .is_ok_and(|a| a.state == ArqState::BindFailed);
            if failed && e.kind == ErrorKind::NotFound {
                return Err(ServiceError::new(ErrorKind::NoFreeHandle, e.to_string()));
            }
            return Err(e);
        }
        self.arq_row(uuid).await
    }

    async fn unbind(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        let patch = json!([
            {"path": "/hostname", "op": "remove"},
            {"path": "/device_rp_uuid", "op": "remove"},
            {"path": "/instance_uuid", "op": "remove"},
        ]);
        let fields = json!({
            "hostname": Value::Null,
            "device_rp_uuid": Value::Null,
            "instance_uuid": Value::Null,
        });
        self.apply_patch(uuid, patch, fields, None).await?;
        self.arq_row(uuid).await
    }

    async fn delete_arqs(&self, uuids: &[String]) -> Result<(), ServiceError> {
        for uuid in uuids {
            match self.requests.delete_by_uuid(uuid).await {
                Ok(()) | Err(RequestError::NotFound { .. }) => {}
                Err(e) => return Err(request_error(e)),
            }
        }
        Ok(())
    }

    async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<(), ServiceError> {
        self.requests
            .delete_by_instance(instance_uuid)
            .await
            .map_err(request_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_are_checked_as_cyborgs_api_checks_them() {
        let profile = |name: &str, pairs: &[(&str, &str)]| NewProfile {
            name: name.to_owned(),
            groups: vec![pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()],
            description: None,
        };
        let ok = checked_profile(profile(
            "p",
            &[("resources: FPGA", "1"), ("trait: CUSTOM_X", "required")],
        ))
        .expect("Cyborg takes it");
        let keys: Vec<&str> = ok.groups[0].keys().map(String::as_str).collect();
        assert_eq!(keys, ["resources:FPGA", "trait:CUSTOM_X"]);
        for (name, pairs) in [
            ("bad name", &[("resources:FPGA", "1")][..]),
            ("p", &[("cpu:x", "1")][..]),
            ("p", &[("resources:QAT", "1")][..]),
            ("p", &[("resources:FPGA", "many")][..]),
            ("p", &[("trait:X", "required")][..]),
            ("p", &[("trait:CUSTOM_X", "wanted")][..]),
        ] {
            let refused = checked_profile(profile(name, pairs)).err().map(|e| e.kind);
            assert_eq!(refused, Some(ErrorKind::BadRequest), "{name} {pairs:?}");
        }
        let none = NewProfile {
            name: "p".into(),
            groups: Vec::new(),
            description: None,
        };
        assert_eq!(
            checked_profile(none).err().map(|e| e.kind),
            Some(ErrorKind::BadRequest)
        );
    }
}
