//! Release N's conductor API (1.0) served over release N's database.
//!
//! Errors reach the caller with the kinds release N+1 uses (`NotFound`, `Duplicate`,
//! `InvalidTransition`, `NoFreeHandle`, `ProfileInUse`, `Invalid`, `DatabaseError`),
//! module `accel`.

use super::db::{ArqRow, Db, DbError, DeviceProfileRow, ReportedDevice};
use crate::objects::{AcceleratorRequest, AcceleratorRequestList, DeviceProfile, DriverDeviceList};
use crate::rpc::{
    BindArq, ConductorApi, CreateArqs, CreateDeviceProfile, DeleteArqs, DeleteDeviceProfile,
    ReportData, ReportSummary, UnbindArq,
};
use verso::{Field, ObjectList, VersionedEnum, VersionedObject};
use verso_rpc::{Endpoint, RemoteError};

/// The error module accel's remote errors carry.
pub const ERROR_MODULE: &str = "accel";

/// A database error as the caller sees it (a database failure is logged here and sent
/// without its details).
pub fn to_remote(e: DbError) -> RemoteError {
    let kind = match &e {
        DbError::NotFound { .. } => "NotFound",
        DbError::Duplicate { .. } => "Duplicate",
        DbError::InvalidTransition { .. } => "InvalidTransition",
        DbError::NoFreeHandle { .. } => "NoFreeHandle",
        DbError::ProfileInUse(_) => "ProfileInUse",
        DbError::Invalid { .. } | DbError::UnsupportedUrl(_) => "Invalid",
        DbError::Connect { .. } | DbError::Migrate(_) | DbError::Query(_) => {
            tracing::error!(error = %e, "database failure");
            return RemoteError::new(
                "DatabaseError",
                ERROR_MODULE,
                "the conductor's database failed; see its log",
            );
        }
    };
    RemoteError::new(kind, ERROR_MODULE, e.to_string())
}

/// A request row as release N's object.
pub fn arq_object(r: &ArqRow) -> AcceleratorRequest {
    AcceleratorRequest {
        id: r.id.into(),
        uuid: r.uuid.parse().map(Field::new).unwrap_or_default(),
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
    }
}

/// A profile row as release N's object.
pub fn profile_object(p: &DeviceProfileRow) -> DeviceProfile {
    DeviceProfile {
        id: p.id.into(),
        uuid: p.uuid.parse().map(Field::new).unwrap_or_default(),
        name: p.name.clone().into(),
        groups: p.groups.clone().into(),
        description: p.description.clone().into(),
        ..DeviceProfile::blank()
    }
}

fn missing(what: &str) -> DbError {
    DbError::Invalid {
        what: "report",
        why: format!("a reported device has no {what}"),
    }
}

/// An agent's report as the database's rows; a device or handle without a required
/// field is refused.
pub fn reported(devices: &DriverDeviceList) -> Result<Vec<ReportedDevice>, DbError> {
    devices
        .iter()
        .map(|d| {
            let handles = d
                .attach_handles
                .get()
                .ok_or_else(|| missing("attach_handles"))?
                .iter()
                .map(|h| {
                    Ok((
                        h.attach_type
                            .get()
                            .ok_or_else(|| missing("attach_type"))?
                            .as_str()
                            .to_owned(),
                        h.attach_info
                            .get()
                            .ok_or_else(|| missing("attach_info"))?
                            .clone(),
                    ))
                })
                .collect::<Result<Vec<_>, DbError>>()?;
            Ok(ReportedDevice {
                control_path_id: d
                    .control_path_id
                    .get()
                    .ok_or_else(|| missing("control_path_id"))?
                    .clone(),
                device_type: d
                    .r#type
                    .get()
                    .ok_or_else(|| missing("type"))?
                    .as_str()
                    .to_owned(),
                vendor: d.vendor.get().ok_or_else(|| missing("vendor"))?.clone(),
                model: d.model.get().ok_or_else(|| missing("model"))?.clone(),
                std_board_info: d.std_board_info.get().cloned().flatten(),
                driver_name: d.driver_name.get().cloned().flatten(),
                handles,
            })
        })
        .collect()
}

/// Release N's conductor endpoint: the `conductor` API 1.0 over `db`.
pub fn endpoint(db: Db) -> Endpoint {
    let (d1, d2, d3, d4, d5, d6, d7) = (
        db.clone(),
        db.clone(),
        db.clone(),
        db.clone(),
        db.clone(),
        db.clone(),
        db,
    );
    Endpoint::for_api::<ConductorApi>()
        .handle(move |_ctx, m: ReportData| {
            let db = d1.clone();
            async move {
                let devices = reported(&m.devices).map_err(to_remote)?;
                let out = db.report(&m.hostname, &devices).await.map_err(to_remote)?;
                tracing::info!(host = %m.hostname, added = out.added.len(), updated = out.updated.len(),
                    removed = out.removed.len(), lost = out.lost.len(), "report applied (release N)");
                Ok(ReportSummary {
                    added: out.added,
                    updated: out.updated,
                    removed: out.removed,
                    lost: out.lost,
                    unchanged: out.unchanged,
                })
            }
        })
        .handle(move |_ctx, m: CreateDeviceProfile| {
            let db = d2.clone();
            async move {
                let p = db
                    .create_profile(&m.name, m.groups, m.description)
                    .await
                    .map_err(to_remote)?;
                Ok(profile_object(&p))
            }
        })
        .handle(move |_ctx, m: DeleteDeviceProfile| {
            let db = d3.clone();
            async move { db.delete_profile(&m.name).await.map_err(to_remote) }
        })
        .handle(move |_ctx, m: CreateArqs| {
            let db = d4.clone();
            async move {
                let profile = db
                    .profile(&m.device_profile_name)
                    .await
                    .map_err(to_remote)?;
                let groups: Vec<i64> = match m.group_id {
                    Some(g) => vec![g],
                    None => (0..profile.groups.len() as i64).collect(),
                };
                let mut arqs = Vec::new();
                for g in groups {
                    let row = db
                        .create_arq(&profile.name, g, m.project_id.as_deref())
                        .await
                        .map_err(to_remote)?;
                    arqs.push(arq_object(&row));
                }
                Ok(AcceleratorRequestList {
                    objects: Field::new(arqs),
                    ..AcceleratorRequestList::blank()
                })
            }
        })
        .handle(move |_ctx, m: BindArq| {
            let db = d5.clone();
            async move {
                let row = db
                    .bind(
                        &m.uuid,
                        &m.hostname,
                        &m.instance_uuid,
                        m.device_rp_uuid.as_deref(),
                    )
                    .await
                    .map_err(to_remote)?;
                Ok(arq_object(&row))
            }
        })
        .handle(move |_ctx, m: UnbindArq| {
            let db = d6.clone();
            async move {
                let row = db.unbind(&m.uuid).await.map_err(to_remote)?;
                Ok(arq_object(&row))
            }
        })
        .handle(move |_ctx, m: DeleteArqs| {
            let db = d7.clone();
            async move {
                let mut uuids = m.uuids;
                if let Some(instance) = &m.instance_uuid {
                    let arqs = db.arqs(Some(instance)).await.map_err(to_remote)?;
                    uuids.extend(arqs.into_iter().map(|a| a.uuid));
                }
                let mut n = 0;
                for uuid in uuids {
                    if db.delete_arq(&uuid).await.map_err(to_remote)? {
                        n += 1;
                    }
                }
                Ok(n)
            }
        })
}
