//! Device profiles and accelerator requests as Cyborg 17's conductor keeps them for its
//! API: `device_profile_create` / `device_profile_delete`, `arq_create`,
//! `arq_delete_by_uuid` and `arq_delete_by_instance_uuid` (Cyborg's `DeviceProfile` and
//! `ExtARQ` objects over `db/sqlalchemy/api.py`).
//!
//! A profile's groups are stored as Cyborg stores them, `profile_json` =
//! `{"groups": [...]}` in Python's `json.dumps` form. A request is one row of
//! `extended_accelerator_requests`, created `Initial` (state and substate) under its
//! profile's id; replies are the objects Cyborg's conductor returns, every field set as
//! Cyborg's `_from_db_object` sets it (an unbound request's attach handle type and info
//! empty, its deployable UUID all zeros).
//!
//! Deleting a request that is not `Initial` unbinds it first, as Cyborg does: its attach
//! handle is released (`in_use` false) and the request's host, device provider, instance,
//! handle and deployable cleared. A mediated-device handle is removed on its host first
//! (Cyborg's agent `remove_vgpu_mdev`), through [`Agents`].

use crate::binds::Nova;
use crate::db::{now, DbError, Dialect, Store};
use accel_cyborg17::objects::{Arq, ArqState, DeviceProfile, ExtArq};
use accel_cyborg17::rpc::{CreateVgpuMdev, FpgaProgram, RemoveVgpuMdev, AGENT_TOPIC};
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;
use verso::{DateTime, RequestContext, VersionedEnum, VersionedObject};
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, Target};

/// Why a profile or request operation failed; each is one of Cyborg's exceptions
/// ([`RequestError::cyborg_exception`]).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The object sent lacks a field the operation needs, or has one it cannot take.
    #[error("invalid: {0}")]
    Invalid(String),
    /// A profile of that name exists.
    #[error("Device profile with name {0} already exists.")]
    DuplicateName(String),
    /// A row of that UUID exists.
    #[error("{what} with uuid {uuid} already exists.")]
    AlreadyExists {
        /// Which kind of row.
        what: &'static str,
        /// Its UUID.
        uuid: String,
    },
    /// Rows that are not there.
    #[error("{resource} {msg} could not be found.")]
    NotFound {
        /// Cyborg's resource name.
        resource: &'static str,
        /// Which.
        msg: String,
    },
    /// The host's agent could not remove a mediated device.
    #[error("could not remove mediated device {handle} on {host}: {reason}")]
    Agent {
        /// The host.
        host: String,
        /// The attach handle (the mdev's UUID).
        handle: String,
        /// The agent's answer.
        reason: String,
    },
    /// A request is not in a state the operation starts from (Cyborg's `ARQBadState`).
    #[error("Bad state: {state} for ARQ: {uuid}. Expected state(s): {expected:?}")]
    BadState {
        /// Its state.
        state: String,
        /// The request.
        uuid: String,
        /// The states the operation starts from.
        expected: Vec<&'static str>,
    },
    /// Nova did not take the bind events (Cyborg's `InvalidAPIResponse`).
    #[error("Nova: os-server-external-events: {0}")]
    Nova(String),
    /// A bind needs an FPGA programmed and this conductor has no Glance, or the profile
    /// group names both a bitstream and a function.
    #[error("request {uuid}: {reason}")]
    Programming {
        /// The request.
        uuid: String,
        /// Why.
        reason: String,
    },
    /// Glance did not answer as asked.
    #[error("Glance: {0}")]
    Glance(String),
    /// Placement refused the function traits.
    #[error("Placement: {0}")]
    Placement(String),
    /// Not exactly one of something (Cyborg's `ExpectedOneObject`).
    #[error("Expected one object of type {what}, but got {count}.")]
    ExpectedOne {
        /// What.
        what: &'static str,
        /// How many there are.
        count: usize,
    },
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

impl RequestError {
    /// The Cyborg exception class that stands for this error.
    pub fn cyborg_exception(&self) -> &'static str {
        match self {
            RequestError::Invalid(_) => "InvalidParameterValue",
            RequestError::DuplicateName(_) => "DuplicateDeviceProfileName",
            RequestError::AlreadyExists {
                what: "Device profile",
                ..
            } => "DeviceProfileAlreadyExists",
            RequestError::AlreadyExists { .. } => "ExtArqAlreadyExists",
            RequestError::NotFound { .. } => "ResourceNotFound",
            RequestError::BadState { .. } => "ARQBadState",
            RequestError::Nova(_) => "InvalidAPIResponse",
            RequestError::Programming { .. } => "InvalidParameterValue",
            RequestError::ExpectedOne { .. } => "ExpectedOneObject",
            RequestError::Glance(_) | RequestError::Placement(_) => "CyborgException",
            RequestError::Agent { .. } | RequestError::Db(_) => "CyborgException",
        }
    }
}

impl From<sqlx::Error> for RequestError {
    fn from(e: sqlx::Error) -> Self {
        RequestError::Db(DbError::Sql(e))
    }
}

/// A stored time (`YYYY-MM-DD HH:MM:SS[.ffffff]`, UTC) as an object field.
fn time(text: Option<String>) -> Result<Option<DateTime>, RequestError> {
    let Some(text) = text else { return Ok(None) };
    let parsed =
        chrono::NaiveDateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S%.f").map_err(|e| {
            DbError::Corrupt {
                what: format!("a time in {text:?} ({e})"),
            }
        })?;
    Ok(Some(DateTime::from(parsed.and_utc())))
}

/// Group `group_id` of a profile's groups.
pub(crate) fn group_of(
    profile: &DeviceProfile,
    group_id: i64,
) -> Option<BTreeMap<String, Option<String>>> {
    let groups = profile.groups.get()?;
    usize::try_from(group_id)
        .ok()
        .and_then(|i| groups.get(i))
        .cloned()
}

/// Reaches a host's agent (Cyborg's agent API on `cyborg-agent`, server = host).
#[derive(Clone)]
pub struct Agents {
    transport: Arc<dyn Transport>,
    timeout: Duration,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agents")
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Agents {
    /// Agents over `transport` (Cyborg's control exchange), each call waiting up to
    /// `timeout`.
    pub fn new(transport: Arc<dyn Transport>, timeout: Duration) -> Agents {
        Agents { transport, timeout }
    }

    /// Cyborg's agent `fpga_program` on `host`: the device's control path row (its
    /// `cpid_info` decoded), the bitstream's image and the deployable's driver; the
    /// agent's answer (`true` when programmed).
    pub async fn fpga_program(
        &self,
        host: &str,
        controlpath_id: Value,
        bitstream_uuid: &str,
        driver_name: &str,
    ) -> Result<Value, RequestError> {
        RpcClient::new(
            self.transport.clone(),
            Target::new(AGENT_TOPIC).with_server(host),
        )
        .timeout(self.timeout)
        .call_method(
            &RequestContext::new(format!("req-{}", Uuid::new_v4())),
            FpgaProgram {
                controlpath_id,
                bitstream_uuid: bitstream_uuid.to_owned(),
                driver_name: driver_name.to_owned(),
            },
        )
        .await
        .map_err(|e| RequestError::Agent {
            host: host.to_owned(),
            handle: bitstream_uuid.to_owned(),
            reason: e.to_string(),
        })
    }

    /// Cyborg's agent `create_vgpu_mdev` (`create`) or `remove_vgpu_mdev` on `host` for
    /// the mediated-device handle `handle` whose `attach_info` names the GPU and type.
    pub(crate) async fn mdev(
        &self,
        create: bool,
        host: &str,
        attach_info: &str,
        handle: &str,
    ) -> Result<(), RequestError> {
        let fail = |reason: String| RequestError::Agent {
            host: host.to_owned(),
            handle: handle.to_owned(),
            reason,
        };
        let info: Value =
            serde_json::from_str(attach_info).map_err(|e| fail(format!("attach_info: {e}")))?;
        let part = |k: &str| {
            info[k]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| fail(format!("attach_info has no {k}")))
        };
        let pci_addr = format!(
            "{}:{}:{}.{}",
            part("domain")?,
            part("bus")?,
            part("device")?,
            part("function")?
        );
        let asked_type = part("asked_type")?;
        let client = RpcClient::new(
            self.transport.clone(),
            Target::new(AGENT_TOPIC).with_server(host),
        )
        .timeout(self.timeout);
        let ctx = RequestContext::new(format!("req-{}", Uuid::new_v4()));
        let ah_uuid = handle.to_owned();
        let sent = if create {
            client
                .call_method(
                    &ctx,
                    CreateVgpuMdev {
                        pci_addr,
                        asked_type,
                        ah_uuid,
                    },
                )
                .await
        } else {
            client
                .call_method(
                    &ctx,
                    RemoveVgpuMdev {
                        pci_addr,
                        asked_type,
                        ah_uuid,
                    },
                )
                .await
        };
        sent.map_err(|e| fail(e.to_string()))
    }
}

/// One `extended_accelerator_requests` row with what its object needs.
pub(crate) struct ArqRow {
    pub(crate) id: i64,
    pub(crate) uuid: String,
    pub(crate) project_id: Option<String>,
    pub(crate) state: String,
    pub(crate) device_profile_id: i64,
    pub(crate) device_profile_group_id: i64,
    pub(crate) hostname: Option<String>,
    pub(crate) device_rp_uuid: Option<String>,
    pub(crate) instance_uuid: Option<String>,
    pub(crate) attach_handle_id: Option<i64>,
    pub(crate) substate: String,
    pub(crate) deployable_id: Option<i64>,
    pub(crate) created_at: Option<String>,
    pub(crate) updated_at: Option<String>,
}

/// Profiles and requests on a [`Store`].
#[derive(Clone, Debug)]
pub struct Requests {
    pub(crate) store: Store,
    pub(crate) agents: Option<Agents>,
    pub(crate) nova: Option<Nova>,
    pub(crate) programming: Option<crate::fpga::Programming>,
}

impl Requests {
    /// Requests on `store`; `agents` reach hosts to remove mediated devices (without
    /// them, releasing an `MDEV` handle is refused).
    pub fn new(store: Store, agents: Option<Agents>) -> Requests {
        Requests {
            store,
            agents,
            nova: None,
            programming: None,
        }
    }

    /// These requests, telling `nova` when binds finish (without it, in a deployment
    /// without Nova, binds end without the event).
    pub fn with_nova(mut self, nova: Nova) -> Requests {
        self.nova = Some(nova);
        self
    }

    /// These requests, programming FPGAs at bind with bitstreams from Glance (without
    /// it such a bind is refused before it starts).
    pub fn with_programming(mut self, programming: crate::fpga::Programming) -> Requests {
        self.programming = Some(programming);
        self
    }

    pub(crate) fn d(&self) -> Dialect {
        self.store.dialect()
    }

    /// The row `sql` selects by the id `id`, or Cyborg's `ResourceNotFound` of
    /// `resource` `msg`.
    async fn row_by_id(
        &self,
        sql: &str,
        id: i64,
        resource: &'static str,
        msg: String,
    ) -> Result<AnyRow, RequestError> {
        sqlx::query(sql)
            .bind(id)
            .fetch_optional(self.store.pool())
            .await?
            .ok_or(RequestError::NotFound { resource, msg })
    }

    /// `device_profile_create`: stores the profile; the stored profile.
    pub async fn create_profile(&self, obj: &DeviceProfile) -> Result<DeviceProfile, RequestError> {
        let name = obj
            .name
            .get()
            .ok_or_else(|| RequestError::Invalid("create: name is required".into()))?;
        let groups = obj
            .groups
            .get()
            .ok_or_else(|| RequestError::Invalid("device profile groups expected".into()))?;
        let uuid = obj
            .uuid
            .get()
            .cloned()
            .unwrap_or_else(|| Uuid::new_v4().to_string());
        let profile_json =
            accel_cyborg17::schema::python_json(&serde_json::json!({ "groups": groups }));
        let sql = format!(
            "INSERT INTO device_profiles (created_at, uuid, name, profile_json, description) \
             VALUES (?, ?, ?, ?, ?) RETURNING {}",
            self.d().int("id")
        );
        let inserted = sqlx::query_scalar::<_, i64>(&sql)
            .bind(now())
            .bind(&uuid)
            .bind(name)
            .bind(&profile_json)
            .bind(obj.description.get().cloned().flatten())
            .fetch_one(self.store.pool())
            .await;
        let id = match inserted {
            Ok(id) => id,
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Err(
                    if e.message().contains("name") || self.profile_named(name).await?.is_some() {
                        RequestError::DuplicateName(name.clone())
                    } else {
                        RequestError::AlreadyExists {
                            what: "Device profile",
                            uuid,
                        }
                    },
                );
            }
            Err(e) => return Err(e.into()),
        };
        self.profile(id).await
    }

    pub(crate) async fn profile_named(&self, name: &str) -> Result<Option<i64>, RequestError> {
        let sql = format!(
            "SELECT {} FROM device_profiles WHERE name = ?",
            self.d().int("id")
        );
        Ok(sqlx::query_scalar::<_, i64>(&sql)
            .bind(name)
            .fetch_optional(self.store.pool())
            .await?)
    }

    /// The profile of database id `id`, as Cyborg's `DeviceProfile.get_by_id` reads it.
    pub async fn profile(&self, id: i64) -> Result<DeviceProfile, RequestError> {
        let d = self.d();
        let sql = format!(
            "SELECT {}, {}, {}, {}, {}, {}, {} FROM device_profiles WHERE id = ?",
            d.int("id"),
            d.text("uuid"),
            d.text("name"),
            d.text("profile_json"),
            d.text("description"),
            d.time("created_at"),
            d.time("updated_at"),
        );
        let row = self
            .row_by_id(&sql, id, "Device Profile", format!("with id={id}"))
            .await?;
        let text = |i| crate::db::text(&row, i).map_err(RequestError::from);
        let profile_json = text(3)?.unwrap_or_default();
        let parsed: Value = serde_json::from_str(&profile_json).map_err(|e| DbError::Corrupt {
            what: format!("the groups of profile {id} ({e})"),
        })?;
        let groups: Vec<BTreeMap<String, Option<String>>> =
            serde_json::from_value(parsed["groups"].clone()).map_err(|e| DbError::Corrupt {
                what: format!("the groups of profile {id} ({e})"),
            })?;
        let mut p = DeviceProfile::blank();
        p.id.set(row.try_get::<i64, _>(0).map_err(DbError::from)?);
        p.uuid.set(text(1)?.unwrap_or_default());
        p.name.set(text(2)?.unwrap_or_default());
        p.groups.set(groups);
        p.description.set(text(4)?);
        p.created_at.set(time(text(5)?)?);
        p.updated_at.set(time(text(6)?)?);
        p.reset_changes();
        Ok(p)
    }

    /// `device_profile_delete`: deletes the profile of the object's UUID.
    pub async fn delete_profile(&self, obj: &DeviceProfile) -> Result<(), RequestError> {
        let uuid = obj.uuid.get().ok_or_else(|| {
            RequestError::Invalid("delete: the profile's uuid is required".into())
        })?;
        let done = sqlx::query("DELETE FROM device_profiles WHERE uuid = ?")
            .bind(uuid)
            .execute(self.store.pool())
            .await?;
        if done.rows_affected() != 1 {
            return Err(RequestError::NotFound {
                resource: "Device Profile",
                msg: format!("with uuid={uuid}"),
            });
        }
        Ok(())
    }

    /// `arq_create`: stores the request `Initial` under profile `devprof_id` (or, without
    /// one, the profile its `device_profile_name` names); the stored request.
    pub async fn create_arq(
        &self,
        obj: &ExtArq,
        devprof_id: Option<i64>,
    ) -> Result<ExtArq, RequestError> {
        let arq = obj
            .arq
            .get()
            .ok_or_else(|| RequestError::Invalid("create: the ARQ is required".into()))?;
        let profile_id = match devprof_id {
            Some(id) => id,
            None => {
                let name = arq.device_profile_name.get().ok_or_else(|| {
                    RequestError::Invalid("create: device profile name is required in ARQ".into())
                })?;
                self.profile_named(name)
                    .await?
                    .ok_or_else(|| RequestError::NotFound {
                        resource: "Device Profile",
                        msg: format!("with name={name}"),
                    })?
            }
        };
        let group_id = *arq.device_profile_group_id.get().ok_or_else(|| {
            RequestError::Invalid("create: the ARQ's device_profile_group_id is required".into())
        })?;
        let uuid = arq
            .uuid
            .get()
            .map(Uuid::to_string)
            .unwrap_or_else(|| Uuid::new_v4().to_string());
        let inserted = sqlx::query(
            "INSERT INTO extended_accelerator_requests (created_at, uuid, project_id, state, \
             device_profile_id, hostname, device_rp_uuid, instance_uuid, substate, \
             device_profile_group_id) VALUES (?, ?, ?, 'Initial', ?, ?, ?, ?, 'Initial', ?)",
        )
        .bind(now())
        .bind(&uuid)
        .bind(arq.project_id.get().cloned().flatten())
        .bind(profile_id)
        .bind(arq.hostname.get().cloned().flatten())
        .bind(arq.device_rp_uuid.get().cloned().flatten())
        .bind(arq.instance_uuid.get().cloned().flatten())
        .bind(group_id)
        .execute(self.store.pool())
        .await;
        match inserted {
            Ok(_) => {}
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                return Err(RequestError::AlreadyExists {
                    what: "ExtArq",
                    uuid,
                });
            }
            Err(e) => return Err(e.into()),
        }
        self.arq(&uuid).await
    }

    fn arq_columns(&self) -> String {
        let d = self.d();
        [
            d.int("id"),
            d.text("uuid"),
            d.text("project_id"),
            d.text("state"),
            d.int("device_profile_id"),
            d.int("device_profile_group_id"),
            d.text("hostname"),
            d.text("device_rp_uuid"),
            d.text("instance_uuid"),
            d.int("attach_handle_id"),
            d.text("substate"),
            d.int("deployable_id"),
            d.time("created_at"),
            d.time("updated_at"),
        ]
        .join(", ")
    }

    fn arq_row(row: &AnyRow) -> Result<ArqRow, RequestError> {
        let text = |i| crate::db::text(row, i).map_err(RequestError::from);
        let int = |i| {
            row.try_get::<Option<i64>, _>(i)
                .map_err(|e| RequestError::from(DbError::from(e)))
        };
        Ok(ArqRow {
            id: int(0)?.unwrap_or_default(),
            uuid: text(1)?.unwrap_or_default(),
            project_id: text(2)?,
            state: text(3)?.unwrap_or_default(),
            device_profile_id: int(4)?.unwrap_or_default(),
            device_profile_group_id: int(5)?.unwrap_or_default(),
            hostname: text(6)?,
            device_rp_uuid: text(7)?,
            instance_uuid: text(8)?,
            attach_handle_id: int(9)?,
            substate: text(10)?.unwrap_or_default(),
            deployable_id: int(11)?,
            created_at: text(12)?,
            updated_at: text(13)?,
        })
    }

    pub(crate) async fn arq_rows(
        &self,
        filter: &str,
        value: &str,
    ) -> Result<Vec<ArqRow>, RequestError> {
        let sql = format!(
            "SELECT {} FROM extended_accelerator_requests WHERE {filter} = ? ORDER BY id",
            self.arq_columns()
        );
        let rows = sqlx::query(&sql)
            .bind(value)
            .fetch_all(self.store.pool())
            .await?;
        rows.iter().map(Self::arq_row).collect()
    }

    /// The request `uuid` as Cyborg's `ExtARQ.get` builds it.
    pub async fn arq(&self, uuid: &str) -> Result<ExtArq, RequestError> {
        let row = self.one_arq(uuid).await?;
        self.ext_arq(row).await
    }

    async fn ext_arq(&self, row: ArqRow) -> Result<ExtArq, RequestError> {
        let profile = self.profile(row.device_profile_id).await?;
        let state = ArqState::from_str(&row.state).ok_or_else(|| DbError::Corrupt {
            what: format!("a known state in request {} ({:?})", row.uuid, row.state),
        })?;
        let mut handle_type = String::new();
        let mut handle_uuid = None;
        let mut handle_info = BTreeMap::new();
        if state == ArqState::Bound {
            let id = row.attach_handle_id.ok_or_else(|| RequestError::NotFound {
                resource: "Attach Handle",
                msg: format!("of bound request {}", row.uuid),
            })?;
            let (uuid, attach_type, attach_info) = self.handle(id).await?;
            handle_type = attach_type;
            handle_uuid = Some(uuid);
            handle_info = serde_json::from_str(&attach_info).map_err(|e| DbError::Corrupt {
                what: format!("the attach info of handle {id} as a dict of strings ({e})"),
            })?;
        }
        let deployable_uuid = match row.deployable_id {
            Some(id) => self.deployable_uuid(id).await?,
            None => Uuid::nil(),
        };
        let group = group_of(&profile, row.device_profile_group_id).map(|g| {
            g.into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect::<BTreeMap<String, String>>()
        });
        let created_at = time(row.created_at)?;
        let updated_at = time(row.updated_at)?;
        let mut arq = Arq::blank();
        arq.id.set(row.id);
        arq.uuid
            .set(Uuid::parse_str(&row.uuid).map_err(|e| DbError::Corrupt {
                what: format!("a UUID in request {:?} ({e})", row.uuid),
            })?);
        arq.state.set(state);
        arq.device_profile_name
            .set(profile.name.get().cloned().unwrap_or_default());
        arq.device_profile_group_id.set(row.device_profile_group_id);
        arq.hostname.set(row.hostname);
        arq.device_rp_uuid.set(row.device_rp_uuid);
        arq.instance_uuid.set(row.instance_uuid);
        arq.project_id.set(row.project_id);
        arq.attach_handle_type.set(Some(handle_type));
        arq.attach_handle_uuid.set(handle_uuid);
        arq.attach_handle_info.set(Some(handle_info));
        arq.created_at.set(created_at);
        arq.updated_at.set(updated_at);
        arq.reset_changes();
        let mut ext = ExtArq::blank();
        ext.arq.set(arq);
        ext.substate.set(row.substate);
        ext.deployable_uuid.set(Some(deployable_uuid));
        ext.device_profile_group.set(group);
        ext.attach_handle_id.set(row.attach_handle_id);
        ext.deployable_id.set(row.deployable_id);
        ext.created_at.set(created_at);
        ext.updated_at.set(updated_at);
        ext.reset_changes();
        Ok(ext)
    }

    pub(crate) async fn handle(&self, id: i64) -> Result<(String, String, String), RequestError> {
        let d = self.d();
        let sql = format!(
            "SELECT {}, {}, {} FROM attach_handles WHERE id = ?",
            d.text("uuid"),
            d.text("attach_type"),
            d.text("attach_info")
        );
        let row = self
            .row_by_id(&sql, id, "Attach Handle", format!("with id={id}"))
            .await?;
        let text = |i| crate::db::text(&row, i).map(Option::unwrap_or_default);
        Ok((text(0)?, text(1)?, text(2)?))
    }

    async fn deployable_uuid(&self, id: i64) -> Result<Uuid, RequestError> {
        let sql = format!(
            "SELECT {} FROM deployables WHERE id = ?",
            self.d().text("uuid")
        );
        let text: String = sqlx::query_scalar(&sql)
            .bind(id)
            .fetch_optional(self.store.pool())
            .await?
            .ok_or_else(|| RequestError::NotFound {
                resource: "Deployable",
                msg: format!("with id={id}"),
            })?;
        Uuid::parse_str(&text).map_err(|e| {
            RequestError::Db(DbError::Corrupt {
                what: format!("a UUID in deployable {id} ({e})"),
            })
        })
    }

    /// Cyborg's `ExtARQ.unbind`: releases the request's attach handle (removing its
    /// mediated device on the host first) and clears its binding.
    pub(crate) async fn unbind(&self, row: &ArqRow) -> Result<(), RequestError> {
        if let Some(handle_id) = row.attach_handle_id {
            let (uuid, attach_type, attach_info) = self.handle(handle_id).await?;
            if attach_type == "MDEV" {
                let host = row.hostname.clone().unwrap_or_default();
                let agents = self.agents.as_ref().ok_or_else(|| RequestError::Agent {
                    host: host.clone(),
                    handle: uuid.clone(),
                    reason: "this conductor reaches no agents".into(),
                })?;
                agents.mdev(false, &host, &attach_info, &uuid).await?;
            }
            sqlx::query("UPDATE attach_handles SET in_use = 0, updated_at = ? WHERE id = ?")
                .bind(now())
                .bind(handle_id)
                .execute(self.store.pool())
                .await?;
        }
        sqlx::query(
            "UPDATE extended_accelerator_requests SET hostname = NULL, device_rp_uuid = NULL, \
             instance_uuid = NULL, state = 'Unbound', attach_handle_id = NULL, \
             deployable_id = NULL, updated_at = ? WHERE id = ?",
        )
        .bind(now())
        .bind(row.id)
        .execute(self.store.pool())
        .await?;
        Ok(())
    }

    pub(crate) async fn delete_row(&self, row: &ArqRow) -> Result<(), RequestError> {
        sqlx::query("DELETE FROM extended_accelerator_requests WHERE id = ?")
            .bind(row.id)
            .execute(self.store.pool())
            .await?;
        Ok(())
    }

    /// `arq_delete_by_uuid`: deletes each request of `uuids` (comma-separated), unbinding
    /// it first unless `Initial`; the ones not found are named in one `ResourceNotFound`
    /// after the others are deleted.
    pub async fn delete_by_uuid(&self, uuids: &str) -> Result<(), RequestError> {
        let mut missing = Vec::new();
        for uuid in uuids.split(',') {
            let Some(row) = self.arq_rows("uuid", uuid).await?.into_iter().next() else {
                missing.push(uuid.to_owned());
                continue;
            };
            if row.state != ArqState::Initial.as_str() {
                self.unbind(&row).await?;
            }
            self.delete_row(&row).await?;
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(RequestError::NotFound {
                resource: "ARQ",
                msg: format!("with uuids {missing:?}"),
            })
        }
    }

    /// `arq_delete_by_instance_uuid`: unbinds and deletes every request of the instance
    /// (none is no error).
    pub async fn delete_by_instance(&self, instance: &str) -> Result<(), RequestError> {
        for row in self.arq_rows("instance_uuid", instance).await? {
            self.unbind(&row).await?;
            self.delete_row(&row).await?;
        }
        Ok(())
    }
}
