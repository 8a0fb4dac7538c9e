//! The conductor's RPC service: accel's `conductor` API (1.0 inventory, profiles and
//! requests; 1.1 object indirection; 1.2 `report_unchanged`, an unchanged inventory
//! named by its digest; 1.3 `set_device_maintaining`; 1.4 `create_attribute`,
//! `delete_attribute`; 1.5 `program_deployable`, which asks the deployable's agent)
//! served over the database.
//!
//! Errors reach the caller with their kind (`NotFound`, `Duplicate`, `InvalidTransition`,
//! `NoFreeHandle`, `ProfileInUse`, `StaleHandle`, `HandleInUse`, `NotCleaning`,
//! `Invalid`, `DatabaseUnavailable`, `DatabaseError`), module `accel`, so a client matches on `kind`; a
//! database failure is logged here and sent as `DatabaseError` without its details.

use crate::db::{AgentWire, ArqRow, Db, DbError, DeviceProfileRow, Release, ReportedDevice};
use crate::fpga::{Glance, Programming};
use crate::nova::{BindStatus, Notifier};
use accel_objects::errors::ErrorKind;
use accel_objects::rpc::{
    BindArq, ConductorApi, CreateArqs, CreateAttribute, CreateDeviceProfile, DeleteArqs,
    DeleteAttribute, DeleteDeviceProfile, ProgramDeployable, ReportData, ReportSummary,
    ReportUnchanged, SetDeviceMaintaining, UnbindArq,
};
use accel_objects::{AcceleratorRequest, AcceleratorRequestList, DeviceProfile};
use std::sync::Arc;
use verso::{Field, ObjectList, Registry, RequestContext, VersionedEnum, VersionedObject};
use verso_rpc::{Endpoint, RemoteError};

/// The error module accel's remote errors carry.
pub const ERROR_MODULE: &str = "accel";

/// A database error as the caller sees it.
pub fn to_remote(e: DbError) -> RemoteError {
    let kind = match &e {
        DbError::NotFound { .. } => ErrorKind::NotFound,
        DbError::Duplicate { .. } => ErrorKind::Duplicate,
        DbError::InvalidTransition { .. } => ErrorKind::InvalidTransition,
        DbError::NoFreeHandle { .. } => ErrorKind::NoFreeHandle,
        DbError::ProfileInUse(_) => ErrorKind::ProfileInUse,
        DbError::StaleHandle { .. } => ErrorKind::StaleHandle,
        DbError::HandleInUse { .. } => ErrorKind::HandleInUse,
        DbError::NotCleaning { .. } => ErrorKind::NotCleaning,
        DbError::Invalid { .. } | DbError::UnsupportedUrl(_) => ErrorKind::Invalid,
        DbError::Corrupt { .. } => {
            tracing::error!(error = %e, "a stored record does not parse");
            ErrorKind::CorruptRecord
        }
        DbError::Connect { .. } | DbError::Migrate(_) | DbError::Query(_) if e.is_unavailable() => {
            tracing::error!(error = %e, "database unavailable");
            return RemoteError::new(
                ErrorKind::DatabaseUnavailable.as_str(),
                ERROR_MODULE,
                "the conductor's database cannot be reached; retry later",
            );
        }
        DbError::Connect { .. }
        | DbError::Migrate(_)
        | DbError::Query(_)
        | DbError::CyborgDatabase { .. }
        | DbError::AccelHistory { .. }
        | DbError::NotOnCyborg17 { .. } => {
            tracing::error!(error = %e, "database failure");
            return database_failed();
        }
    };
    RemoteError::new(kind.as_str(), ERROR_MODULE, e.to_string())
}

/// What a caller is told when the conductor's database failed (the cause is logged).
fn database_failed() -> RemoteError {
    RemoteError::new(
        ErrorKind::DatabaseError.as_str(),
        ERROR_MODULE,
        "the conductor's database failed; see its log",
    )
}

/// A stored UUID as the object's field; one that does not parse is `CorruptRecord`
/// naming `table`'s `uuid` column, never an unset field.
fn uuid_field(table: &'static str, text: &str) -> Result<Field<uuid::Uuid>, DbError> {
    text.parse()
        .map(Field::new)
        .map_err(|e: uuid::Error| DbError::Corrupt {
            table,
            column: "uuid".into(),
            why: format!("{:?}: {e}", crate::db::shown(text)),
        })
}

/// A request row as the object callers get.
pub fn arq_object(r: &ArqRow) -> Result<AcceleratorRequest, DbError> {
    Ok(AcceleratorRequest {
        id: r.id.into(),
        uuid: uuid_field("accelerator_requests", &r.uuid)?,
        state: r.state.as_str().to_owned().into(),
        device_profile_name: r.device_profile_name.clone().into(),
        device_profile_group_id: r.device_profile_group_id.into(),
        hostname: r.hostname.clone().into(),
        device_rp_uuid: r.device_rp_uuid.clone().into(),
        instance_uuid: r.instance_uuid.clone().into(),
        project_id: r.project_id.clone().into(),
        attach_handle_type: r.attach_handle_type.clone().into(),
        attach_handle_info: r.attach_handle_info.clone().into(),
        attach_handle_uuid: r.attach_handle_uuid.clone().into(),
        ..AcceleratorRequest::blank()
    })
}

/// A profile row as the object callers get.
pub fn profile_object(p: &DeviceProfileRow) -> Result<DeviceProfile, DbError> {
    Ok(DeviceProfile {
        id: p.id.into(),
        uuid: uuid_field("device_profiles", &p.uuid)?,
        name: p.name.clone().into(),
        groups: p.groups.clone().into(),
        description: p.description.clone().into(),
        ..DeviceProfile::blank()
    })
}

/// A reported device (or handle) without a field the inventory needs (`unset` names
/// the object and field).
fn missing(device: usize, unset: verso::Error) -> DbError {
    DbError::Invalid {
        what: "report",
        why: format!("reported device #{device}: {unset}"),
    }
}

/// An agent's report as the database's rows; a device or handle without a field the
/// inventory needs (control path, type, vendor, model, a handle's type and info) is
/// refused, naming it, and nothing of the report is applied: a device stored with an
/// empty field could never be bound.
pub fn reported(devices: &accel_objects::DriverDeviceList) -> Result<Vec<ReportedDevice>, DbError> {
    use accel_objects::{DriverAttachHandle, DriverDevice};
    const DEVICE: &str = DriverDevice::NAME;
    const HANDLE: &str = DriverAttachHandle::NAME;
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let missing = |e| missing(i, e);
            let handles = d
                .attach_handles
                .get()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|h| {
                    Ok((
                        h.attach_type
                            .require(HANDLE, "attach_type")
                            .map_err(missing)?
                            .as_str()
                            .to_owned(),
                        h.attach_info
                            .require(HANDLE, "attach_info")
                            .map_err(missing)?
                            .clone(),
                    ))
                })
                .collect::<Result<Vec<_>, DbError>>()?;
            Ok(ReportedDevice {
                control_path_id: d
                    .control_path_id
                    .require(DEVICE, "control_path_id")
                    .map_err(missing)?
                    .clone(),
                device_type: d
                    .r#type
                    .require(DEVICE, "type")
                    .map_err(missing)?
                    .as_str()
                    .to_owned(),
                vendor: d.vendor.require(DEVICE, "vendor").map_err(missing)?.clone(),
                model: d.model.require(DEVICE, "model").map_err(missing)?.clone(),
                std_board_info: d.std_board_info.get().cloned().flatten(),
                driver_name: d.driver_name.get().cloned().flatten(),
                handles,
                // DriverDevice 1.1; a 1.0 report (release N's agent) has none.
                attributes: d.attributes.get().cloned().unwrap_or_default(),
                // accel's agents report one deployable per device, name none and
                // report no vendor board details.
                deployable_name: None,
                vendor_board_info: None,
                more_deployables: Vec::new(),
            })
        })
        .collect()
}

/// How the conductor releases devices (release N+1's NVMe cleanup turns on when its
/// version is finalized): asked on every release.
pub type ReleasePolicy = Arc<dyn Fn() -> Release + Send + Sync>;

mod agents;
use agents::{make_mdev, notify_released, program_on_host, remove_mdev};
pub use agents::{AgentNotifier, CleanupNotice, PROGRAM_TIMEOUT};

/// After a bind of `instance`'s request: when every request of the instance is resolved
/// (Bound, BindFailed or Deleting), queues one `accelerator-request-bound` event per
/// request for Nova, as Cyborg does. An instance's requests are bound one call each, so
/// after the first of several only that one carries the instance; the notifier holds a
/// batch briefly and the instance's next batch replaces it ([`Notifier`]), so binds in
/// quick succession make one request to Nova. Never fails the bind: a failed read is
/// logged, and sending is in the background.
pub async fn notify_nova(db: &Db, nova: Option<&Notifier>, instance: &str) {
    let Some(nova) = nova else {
        return;
    };
    let arqs = match db.arqs(Some(instance)).await {
        Ok(arqs) => arqs,
        Err(e) => {
            tracing::warn!(instance, error = %e, "accelerator-request-bound events not sent: the requests cannot be read");
            return;
        }
    };
    let events: Option<Vec<_>> = arqs
        .iter()
        .map(|a| BindStatus::of(a.state).map(|s| (a.uuid.clone(), s)))
        .collect();
    match events {
        Some(events) => nova.notify(instance, events),
        None => tracing::debug!(
            instance,
            "requests of the instance still binding: Nova is told after the last"
        ),
    }
}

/// The conductor's endpoint: accel's `conductor` API over `db`, with object indirection
/// for `registry`'s classes (their remotable bodies get contexts from `prepare`).
/// Released NVMe devices wait in `cleaning` for their agents' scans; see
/// [`endpoint_with_agents`] to also tell the agents.
pub fn endpoint(
    db: Db,
    registry: Registry,
    release: ReleasePolicy,
    prepare: impl Fn(RequestContext) -> RequestContext + Send + Sync + 'static,
) -> Endpoint {
    endpoint_with_agents(db, registry, release, None, None, None, prepare)
}

/// The conductor's upgrade coordinator, told of every agent that reports: an agent that
/// sends no heartbeat (Cyborg 17's) is known to the fleet record only this way.
pub type ReportWitness = Arc<verso_upgrade::Coordinator<accel_objects::AccelVersion>>;

/// Records a reporting host in the fleet record through `witness` (the only way it
/// learns of an agent that sends no heartbeat, Cyborg 17's): a refusal (a host never
/// heard before, after a finalization started) is the typed `Fenced`, and the report
/// must not be applied; a failed write is the conductor's `DatabaseError`.
pub async fn witness_report(
    witness: Option<&ReportWitness>,
    host: &str,
) -> Result<(), RemoteError> {
    let Some(w) = witness else {
        return Ok(());
    };
    w.seen(host, host).await.map_err(|e| match e {
        verso_upgrade::HeartbeatError::Fenced(f) => RemoteError::from_exception(&f),
        other => {
            tracing::error!(host, error = %other, "report not applied: the fleet record failed");
            database_failed()
        }
    })
}

/// What every conductor method's handler shares, on accel's conductor API and on
/// Cyborg's ([`crate::cyborg::endpoint_with`]): the database, how devices are released,
/// the agents, the fleet record, Nova. A clone per call: each part is a handle.
#[derive(Clone)]
pub struct Shared {
    pub(crate) db: Db,
    pub(crate) release: ReleasePolicy,
    pub(crate) agents: Option<AgentNotifier>,
    pub(crate) witness: Option<ReportWitness>,
    pub(crate) nova: Option<Notifier>,
    pub(crate) glance: Option<Glance>,
}

impl Shared {
    /// `db` alone: devices released at once, no agents, no fleet record, no Nova.
    pub fn new(db: Db) -> Shared {
        Shared {
            db,
            release: Arc::new(|| Release::Immediate),
            agents: None,
            witness: None,
            nova: None,
            glance: None,
        }
    }

    /// These parts, each report's host recorded in the fleet record through `witness`.
    pub fn with_witness(mut self, witness: Option<ReportWitness>) -> Shared {
        self.witness = witness;
        self
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Binds request `uuid` (as [`Db::bind_for`]), then makes its mediated device on the
    /// host when its handle is one (a failure releases the request: `MdevFailed`), then
    /// programs its FPGA when its profile group names a bitstream or function
    /// ([`crate::fpga`]; a failure releases the request: `ProgramFailed`; without Glance
    /// such a bind is refused before anything changes), then tells Nova when this bind
    /// resolved the instance's last request. A bind that found no free device
    /// (`NoFreeHandle`) has ended too, `BindFailed`: Nova is told.
    pub(crate) async fn bind(
        &self,
        uuid: &str,
        hostname: &str,
        instance_uuid: &str,
        device_rp_uuid: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<ArqRow, RemoteError> {
        let programming = self.programming_of(uuid, instance_uuid).await?;
        let bound = self
            .db
            .bind_for(uuid, hostname, instance_uuid, device_rp_uuid, project_id)
            .await;
        // A mediated device (a vGPU) is made on its host before the bind counts, as
        // Cyborg's conductor makes it; failing that, the request is released. So is an
        // FPGA programmed.
        if let Ok(row) = &bound {
            make_mdev(&self.db, self.agents.as_ref(), row).await?;
            self.program_bound(row, &programming).await?;
        }
        // Both end the bind (Bound or BindFailed): Nova may be waiting for either.
        if matches!(bound, Ok(_) | Err(DbError::NoFreeHandle { .. })) {
            notify_nova(&self.db, self.nova.as_ref(), instance_uuid).await;
        }
        bound.map_err(to_remote)
    }

    /// What request `uuid`'s profile group asks to be programmed at its bind to
    /// `instance_uuid`; nothing when it is bound to that instance already (a repeated
    /// bind changes nothing, and the device may be in use). `Invalid` when the group
    /// names both a bitstream and a function, or either and this conductor has no
    /// Glance (`[glance]`) to read the image from.
    async fn programming_of(
        &self,
        uuid: &str,
        instance_uuid: &str,
    ) -> Result<Programming, RemoteError> {
        let arq = self.db.arq(uuid).await.map_err(to_remote)?;
        if arq.state == crate::lifecycle::ArqState::Bound
            && arq.instance_uuid.as_deref() == Some(instance_uuid)
        {
            return Ok(Programming::None);
        }
        let profile = self
            .db
            .profile_by_name(&arq.device_profile_name)
            .await
            .map_err(to_remote)?;
        let Some(group) = usize::try_from(arq.device_profile_group_id)
            .ok()
            .and_then(|g| profile.groups.get(g))
        else {
            // bind_for names the missing group.
            return Ok(Programming::None);
        };
        let invalid = |why: String| {
            RemoteError::new(
                ErrorKind::Invalid.as_str(),
                ERROR_MODULE,
                format!("request {uuid}: {why}"),
            )
        };
        let programming = Programming::of(group).map_err(invalid)?;
        if programming != Programming::None && self.glance.is_none() {
            return Err(invalid(format!(
                "its profile group names {} or {}, and this conductor reads bitstreams from \
                 no Glance ([glance] auth_url)",
                crate::fpga::BITSTREAM_ID,
                crate::fpga::FUNCTION_ID
            )));
        }
        Ok(programming)
    }

    /// Programs the FPGA of bound request `row` as `programming` asks: the image's
    /// metadata from Glance, the host's agent, the deployable's record
    /// ([`Db::record_programmed`]). Nothing when it asks nothing or the deployable already
    /// holds the bitstream. On failure the request is released (its device free again)
    /// and the error is `ProgramFailed`.
    async fn program_bound(
        &self,
        row: &ArqRow,
        programming: &Programming,
    ) -> Result<(), RemoteError> {
        if *programming == Programming::None {
            return Ok(());
        }
        let Err(why) = self.try_program(row, programming).await else {
            return Ok(());
        };
        tracing::error!(arq = %row.uuid, error = %why, "FPGA not programmed: the request is released");
        if let Err(e) = self.db.unbind_with(&row.uuid, Release::Immediate).await {
            tracing::error!(arq = %row.uuid, error = %e, "releasing the request after the failed programming failed");
        }
        Err(RemoteError::new(
            ErrorKind::ProgramFailed.as_str(),
            ERROR_MODULE,
            format!("binding {}: the FPGA was not programmed: {why}", row.uuid),
        ))
    }

    async fn try_program(&self, row: &ArqRow, programming: &Programming) -> Result<(), String> {
        let glance = self.glance.as_ref().ok_or("this conductor has no Glance")?;
        let handle = row
            .attach_handle_uuid
            .as_deref()
            .ok_or("the bound request holds no attach handle")?;
        let handle = self
            .db
            .host_handle(handle)
            .await
            .map_err(|e| e.to_string())?;
        if handle.device_type != "FPGA" {
            return Err(format!(
                "its device is a {}, not an FPGA",
                handle.device_type
            ));
        }
        let dep = self
            .db
            .fpga_target(handle.deployable_id)
            .await
            .map_err(|e| e.to_string())?;
        let image = match programming {
            Programming::None => return Ok(()),
            Programming::Bitstream(b) if dep.bitstream_id.as_deref() == Some(b.as_str()) => {
                tracing::info!(arq = %row.uuid, bitstream = %b, "the FPGA holds the bitstream already");
                return Ok(());
            }
            Programming::Bitstream(b) => glance.image(b).await?,
            Programming::Function(f) => glance.image_of_function(f).await?,
        };
        let image_id = image["id"]
            .as_str()
            .ok_or_else(|| format!("Glance's image has no id: {image}"))?
            .to_owned();
        let function = match programming {
            Programming::Function(f) => Some(f.clone()),
            _ => image[crate::fpga::FUNCTION_ID].as_str().map(str::to_owned),
        };
        let driver = dep.driver_name.clone().unwrap_or_default();
        program_on_host(
            &self.db,
            self.agents.as_ref(),
            self.witness.as_ref(),
            &handle.hostname,
            &handle.control_path_id,
            &image_id,
            &driver,
        )
        .await
        .map_err(|e| e.message)?;
        let function_trait = function.map(|f| crate::fpga::function_trait(&driver, &f));
        self.db
            .record_programmed(
                handle.deployable_id,
                &image_id,
                crate::fpga::FUNCTION_ATTRIBUTE,
                function_trait.as_deref(),
            )
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(arq = %row.uuid, host = %handle.hostname, deployable = %dep.uuid,
            bitstream = %image_id, function_trait, "FPGA programmed at bind");
        Ok(())
    }

    /// Unbinds request `uuid`: its mediated device removed on the host first (when it
    /// holds one; a failure leaves it `UnbindFailed`, `MdevFailed`), its device released
    /// by the release policy, the host's agent told of a device put in `cleaning`.
    pub(crate) async fn unbind(&self, uuid: &str) -> Result<ArqRow, RemoteError> {
        let before = self.db.arq(uuid).await.map_err(to_remote)?;
        remove_mdev(&self.db, self.agents.as_ref(), &before).await?;
        let row = self
            .db
            .unbind_with(uuid, (self.release)())
            .await
            .map_err(to_remote)?;
        notify_released(&self.db, self.agents.as_ref(), before.attach_handle_uuid).await;
        Ok(row)
    }

    /// Deletes request `uuid` as [`Shared::unbind`] releases it; `false` when there is no
    /// such request.
    pub(crate) async fn delete(&self, uuid: &str) -> Result<bool, RemoteError> {
        let before = match self.db.arq(uuid).await {
            Ok(arq) => Some(arq),
            Err(DbError::NotFound { .. }) => None,
            Err(e) => return Err(to_remote(e)),
        };
        if let Some(before) = &before {
            remove_mdev(&self.db, self.agents.as_ref(), before).await?;
        }
        let deleted = self
            .db
            .delete_arq_with(uuid, (self.release)())
            .await
            .map_err(to_remote)?;
        if deleted {
            if let Some(before) = before {
                notify_released(&self.db, self.agents.as_ref(), before.attach_handle_uuid).await;
            }
        }
        Ok(deleted)
    }
}

/// [`endpoint`], and each NVMe device a release puts in `cleaning` is announced to its
/// host's agent through `agents` (`cleanup_device`, when `[upgrade_levels] agent`
/// allows 1.1). With `witness`, each report's host is recorded in the fleet record
/// first ([`verso_upgrade::Coordinator::seen`]); a report the coordinator refuses (a
/// host never heard heartbeating, after a finalization started) is not applied and
/// answers the typed `Fenced`. With `nova`, Nova is told when a bind resolves the last
/// request of an instance ([`notify_nova`]).
pub fn endpoint_with_agents(
    db: Db,
    registry: Registry,
    release: ReleasePolicy,
    agents: Option<AgentNotifier>,
    witness: Option<ReportWitness>,
    nova: Option<Notifier>,
    prepare: impl Fn(RequestContext) -> RequestContext + Send + Sync + 'static,
) -> Endpoint {
    let shared = Shared {
        db,
        release,
        agents,
        witness,
        nova,
        glance: None,
    };
    endpoint_over(shared, registry, prepare)
}

/// [`endpoint_with_agents`] over its parts gathered in `shared`.
pub fn endpoint_over(
    shared: Shared,
    registry: Registry,
    prepare: impl Fn(RequestContext) -> RequestContext + Send + Sync + 'static,
) -> Endpoint {
    let endpoint = Endpoint::for_api::<ConductorApi>()
        .with_state(shared)
        .handle(|Shared { db, witness, .. }, _ctx, m: ReportData| async move {
            // Refused before anything is recorded: a bad report changes nothing.
            let devices = reported(&m.devices).map_err(to_remote)?;
            witness_report(witness.as_ref(), &m.hostname).await?;
            // The conductor's own digest of what it applies, never the agent's word:
            // `report_unchanged` later skips only what this conductor verified.
            let digest = accel_objects::rpc::report_digest(&m.devices);
            let out = db
                .report_on(&m.hostname, Some(AgentWire::Accel), &devices, Some(&digest))
                .await
                .map_err(to_remote)?;
            tracing::info!(host = %m.hostname, added = out.added.len(), updated = out.updated.len(),
                removed = out.removed.len(), lost = out.lost.len(),
                unconfirmed = out.unconfirmed.len(), "report applied");
            Ok(ReportSummary {
                added: out.added,
                updated: out.updated,
                removed: out.removed,
                lost: out.lost,
                unchanged: out.unchanged as u64,
            })
        })
        .handle(|Shared { db, .. }, _ctx, m: ReportUnchanged| async move {
            // Not witnessed in the fleet record, unlike a full report: only an agent
            // of this release or later calls 1.2, so it runs the newest software (it
            // can neither block finalization nor be fenced as older), it heartbeats
            // (its liveness), and a digest matches only a full report of its host
            // this conductor applied, which was witnessed.
            let known = db
                .unchanged_report(&m.hostname, &m.digest, AgentWire::Accel)
                .await
                .map_err(to_remote)?;
            Ok(known.map(|devices| {
                tracing::debug!(host = %m.hostname, devices, "report unchanged");
                ReportSummary {
                    unchanged: devices,
                    ..ReportSummary::default()
                }
            }))
        })
        .handle(|Shared { db, .. }, _ctx, m: CreateAttribute| async move {
            let a = db
                .create_attribute(m.deployable_id, &m.key, &m.value)
                .await
                .map_err(to_remote)?;
            tracing::info!(attribute = %a.uuid, deployable = a.deployable_id, key = %a.key, "attribute created");
            Ok(a.uuid)
        })
        .handle(|Shared { db, .. }, _ctx, m: DeleteAttribute| async move {
            db.delete_attribute(&m.uuid).await.map_err(to_remote)?;
            tracing::info!(attribute = %m.uuid, "attribute deleted");
            Ok(())
        })
        .handle(|Shared { db, agents, witness, .. }, _ctx, m: ProgramDeployable| async move {
            let invalid = |message: String| {
                RemoteError::new(ErrorKind::Invalid.as_str(), ERROR_MODULE, message)
            };
            uuid::Uuid::parse_str(&m.bitstream_uuid).map_err(|_| {
                invalid(format!("bitstream {:?} is not a UUID (a Glance image)", m.bitstream_uuid))
            })?;
            let d = db.deployable(&m.deployable_uuid).await.map_err(to_remote)?;
            let on_host = crate::db::ListFilter {
                host: Some(d.hostname.clone()),
                ..crate::db::ListFilter::default()
            };
            let device = db
                .devices(&on_host)
                .await
                .map_err(to_remote)?
                .into_iter()
                .find(|dev| dev.id == d.device_id);
            match device.as_ref().map(|dev| dev.device_type.as_str()) {
                Some("FPGA") => {}
                other => {
                    return Err(invalid(format!(
                        "deployable {} is a {} device, not an FPGA",
                        d.uuid,
                        other.unwrap_or("missing")
                    )))
                }
            }
            program_on_host(
                &db,
                agents.as_ref(),
                witness.as_ref(),
                &d.hostname,
                &d.control_path_id,
                &m.bitstream_uuid,
                d.driver_name.as_deref().unwrap_or_default(),
            )
            .await?;
            tracing::info!(deployable = %d.uuid, host = %d.hostname, bitstream = %m.bitstream_uuid, "FPGA programmed");
            Ok(())
        })
        .handle(|Shared { db, .. }, _ctx, m: SetDeviceMaintaining| async move {
            let d = db
                .set_device_maintaining(&m.uuid, m.maintaining)
                .await
                .map_err(to_remote)?;
            tracing::info!(device = %d.uuid, host = %d.hostname, maintaining = d.maintaining, "device maintenance set");
            Ok(())
        })
        .handle(|Shared { db, .. }, _ctx, m: CreateDeviceProfile| async move {
            let p = db.create_profile(&m.name, m.groups, m.description).await.map_err(to_remote)?;
            profile_object(&p).map_err(to_remote)
        })
        .handle(|Shared { db, .. }, _ctx, m: DeleteDeviceProfile| async move {
            db.delete_profile(&m.name).await.map_err(to_remote)
        })
        .handle(|Shared { db, .. }, _ctx, m: CreateArqs| async move {
            let profile = db.profile(&m.device_profile_name).await.map_err(to_remote)?;
            let rows = db
                .create_arqs(&profile.name, m.group_id, m.project_id.as_deref())
                .await
                .map_err(to_remote)?;
            let arqs = rows
                .iter()
                .map(arq_object)
                .collect::<Result<Vec<_>, _>>()
                .map_err(to_remote)?;
            Ok(AcceleratorRequestList {
                objects: Field::new(arqs),
                ..AcceleratorRequestList::blank()
            })
        })
        .handle(|shared: Shared, _ctx, m: BindArq| async move {
            let row = shared
                .bind(
                    &m.uuid,
                    &m.hostname,
                    &m.instance_uuid,
                    m.device_rp_uuid.as_deref(),
                    m.project_id.as_deref(),
                )
                .await?;
            arq_object(&row).map_err(to_remote)
        })
        .handle(|shared: Shared, _ctx, m: UnbindArq| async move {
            arq_object(&shared.unbind(&m.uuid).await?).map_err(to_remote)
        })
        .handle(|shared: Shared, _ctx, m: DeleteArqs| async move {
            let mut uuids = m.uuids;
            if let Some(instance) = &m.instance_uuid {
                uuids.extend(shared.db.arqs(Some(instance)).await.map_err(to_remote)?.into_iter().map(|a| a.uuid));
            }
            let mut n = 0;
            for uuid in uuids {
                if shared.delete(&uuid).await? {
                    n += 1;
                }
            }
            Ok(n)
        })
        .into_endpoint();
    verso_rpc::conductor::add_object_endpoints(
        endpoint,
        accel_objects::rpc::INDIRECTION_VERSION,
        Arc::new(registry),
        prepare,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::ArqState;

    /// A stored request or profile whose UUID does not parse reaches the caller as
    /// `CorruptRecord` naming the column, not as an object with its UUID unset.
    #[test]
    fn a_stored_uuid_that_does_not_parse_is_corrupt_record() {
        let arq = ArqRow {
            id: 1,
            uuid: "not-a-uuid".into(),
            state: ArqState::Initial,
            device_profile_name: "gpu".into(),
            device_profile_group_id: 0,
            hostname: None,
            device_rp_uuid: None,
            instance_uuid: None,
            project_id: None,
            attach_handle_uuid: None,
            attach_handle_type: None,
            attach_handle_info: None,
            created_at: None,
            updated_at: None,
        };
        let e = to_remote(arq_object(&arq).expect_err("refused"));
        assert_eq!(e.kind, accel_objects::errors::CORRUPT_RECORD);
        assert!(e.message.contains("accelerator_requests.uuid"), "{e:?}");
        let good = ArqRow {
            uuid: "7f1c2e9a-4b5d-4c3e-9f10-2a3b4c5d6e7f".into(),
            ..arq
        };
        assert!(arq_object(&good).is_ok());
        let profile = DeviceProfileRow {
            id: 1,
            uuid: String::new(),
            name: "gpu".into(),
            groups: Vec::new(),
            description: None,
            created_at: String::new(),
        };
        let e = to_remote(profile_object(&profile).expect_err("refused"));
        assert_eq!(e.kind, accel_objects::errors::CORRUPT_RECORD);
        assert!(e.message.contains("device_profiles.uuid"), "{e:?}");
    }
}
