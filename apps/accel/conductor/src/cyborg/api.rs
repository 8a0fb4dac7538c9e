//! Cyborg 17's API-facing conductor methods, served by release N+1 on Cyborg's topic so
//! that Cyborg's own API service keeps working while the conductor under it is accel's:
//! the control plane moves one service at a time, conductor first.
//!
//! | method | what accel does |
//! |---|---|
//! | `device_profile_create(obj_devprof)` | [`Db::create_profile`](crate::Db::create_profile); replies the stored profile |
//! | `device_profile_delete(obj_devprof)` | deletes the profile of the object's UUID (one a request uses is refused) |
//! | `arq_create(obj_extarq, devprof_id)` | one `Initial` request of the ARQ's profile group; replies it as Cyborg's conductor does |
//! | `arq_delete_by_uuid(arqs)`, `arq_delete_by_instance_uuid(instance)` | deleted as accel's API deletes, each device released by the release policy |
//! | `arq_apply_patch(patch_list, valid_fields)` | each request bound (its `valid_fields`) or unbound, as accel's API binds and unbinds |
//!
//! Each runs the same code as accel's own conductor method ([`Shared`]): NVMe cleanup on
//! release once finalized, mediated devices made and removed on their hosts, Nova told
//! when an instance's binds end. Errors reach Cyborg's API as the Cyborg exceptions that
//! stand for them (module `cyborg.common.exception`, [`cyborg_exception`]), which its
//! oslo.messaging rebuilds, so it answers the HTTP status Cyborg's own conductor would
//! make it answer.
//!
//! Where Cyborg's semantics differ, Cyborg's are kept: a bind that finds no free device
//! ends `BindFailed` and Nova hears `failed`, and the patch itself succeeds (Cyborg binds
//! in jobs after answering); a request deleted by UUID that is not there is named in one
//! `ResourceNotFound` after the others are deleted.

use crate::db::{ArqRow, DbError, DeviceProfileRow};
use crate::service::{to_remote, Shared};
use accel_cyborg17::objects::{Arq, ArqState, DeviceProfile, ExtArq};
use accel_cyborg17::rpc::{
    ArqApplyPatch, ArqCreate, ArqDeleteByInstanceUuid, ArqDeleteByUuid, DeviceProfileCreate,
    DeviceProfileDelete,
};
use accel_objects::errors::ErrorKind;
use serde_json::Value;
use std::collections::BTreeMap;
use verso::{DateTime, VersionedEnum, VersionedObject};
use verso_rpc::{RemoteError, WithState};

/// The module of the errors these methods raise: Cyborg's own, which Cyborg's API
/// rebuilds into its exceptions.
pub const CYBORG_EXCEPTIONS: &str = "cyborg.common.exception";

/// The Cyborg exception class that stands for accel's error kind `kind`, so Cyborg's
/// API answers the status its own conductor would make it answer: `ResourceNotFound`
/// (404), `DuplicateDeviceProfileName` and `Conflict` (409), `InvalidParameterValue`
/// (400), `ARQBadState`, `ServiceUnavailable` (503), otherwise `CyborgException` (500).
pub fn cyborg_exception(kind: &str) -> &'static str {
    match ErrorKind::parse(kind) {
        Some(ErrorKind::NotFound) => "ResourceNotFound",
        Some(ErrorKind::Duplicate) => "DuplicateDeviceProfileName",
        Some(ErrorKind::InvalidTransition) => "ARQBadState",
        Some(ErrorKind::Invalid) => "InvalidParameterValue",
        Some(
            ErrorKind::ProfileInUse
            | ErrorKind::StaleHandle
            | ErrorKind::HandleInUse
            | ErrorKind::NotCleaning
            | ErrorKind::NotSupportedBeforeFinalization,
        ) => "Conflict",
        Some(ErrorKind::DatabaseUnavailable) => "ServiceUnavailable",
        Some(
            ErrorKind::NoFreeHandle
            | ErrorKind::DatabaseError
            | ErrorKind::CorruptRecord
            | ErrorKind::NoStore
            | ErrorKind::ProgramFailed
            | ErrorKind::MdevFailed,
        )
        | None => "CyborgException",
    }
}

/// accel's remote error as Cyborg's exception, its message kept.
fn as_cyborg(e: RemoteError) -> RemoteError {
    RemoteError::new(cyborg_exception(&e.kind), CYBORG_EXCEPTIONS, e.message)
}

/// A database error as Cyborg's exception.
fn db_error(e: DbError) -> RemoteError {
    as_cyborg(to_remote(e))
}

/// Cyborg's `InvalidParameterValue` with `message`.
fn invalid(message: String) -> RemoteError {
    RemoteError::new("InvalidParameterValue", CYBORG_EXCEPTIONS, message)
}

/// Logs a refusal of `method` and passes it on.
fn refused(method: &'static str) -> impl Fn(RemoteError) -> RemoteError {
    move |e| {
        tracing::warn!(method, kind = %e.kind, error = %e.message, "refused");
        e
    }
}

/// `table`'s time column `column` as the database layer reads it, as an object's field
/// (`crate::db::shown_time_value`); one that does not parse is `Corrupt`, naming it.
fn time(
    table: &'static str,
    column: &str,
    shown: Option<&str>,
) -> Result<Option<DateTime>, DbError> {
    let text = shown.unwrap_or_default();
    crate::db::shown_time_value(text).map_err(|e| DbError::Corrupt {
        table,
        column: column.into(),
        why: format!("{text:?}: {e}"),
    })
}

/// A stored profile as Cyborg's `DeviceProfile` (1.1).
fn cyborg_profile(p: &DeviceProfileRow) -> Result<DeviceProfile, DbError> {
    let mut out = DeviceProfile::blank();
    out.id.set(p.id);
    out.uuid.set(p.uuid.clone());
    out.name.set(p.name.clone());
    out.groups.set(
        p.groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone())))
                    .collect()
            })
            .collect(),
    );
    out.description.set(p.description.clone());
    out.created_at
        .set(time("device_profiles", "created_at", Some(&p.created_at))?);
    out.updated_at.set(None);
    out.reset_changes();
    Ok(out)
}

/// A new (`Initial`) request as Cyborg's conductor replies `arq_create`: every field set
/// as Cyborg's `ExtARQ._from_db_object` sets an unbound one's (attach handle type and
/// info empty, deployable UUID all zeros), `profile`'s group named.
fn cyborg_new_arq(row: &ArqRow, profile: &DeviceProfileRow) -> Result<ExtArq, DbError> {
    let corrupt = |column: &str, why: String| DbError::Corrupt {
        table: "extended_accelerator_requests",
        column: column.into(),
        why,
    };
    let uuid = row
        .uuid
        .parse::<uuid::Uuid>()
        .map_err(|e| corrupt("uuid", format!("{:?}: {e}", row.uuid)))?;
    let state = ArqState::from_str(row.state.as_str())
        .ok_or_else(|| corrupt("state", format!("{:?} is no Cyborg 17 state", row.state)))?;
    let created_at = time(
        "extended_accelerator_requests",
        "created_at",
        row.created_at.as_deref(),
    )?;
    let updated_at = time(
        "extended_accelerator_requests",
        "updated_at",
        row.updated_at.as_deref(),
    )?;
    let group = usize::try_from(row.device_profile_group_id)
        .ok()
        .and_then(|i| profile.groups.get(i))
        .cloned();
    let mut arq = Arq::blank();
    arq.id.set(row.id);
    arq.uuid.set(uuid);
    arq.state.set(state);
    arq.device_profile_name.set(row.device_profile_name.clone());
    arq.device_profile_group_id.set(row.device_profile_group_id);
    arq.hostname.set(row.hostname.clone());
    arq.device_rp_uuid.set(row.device_rp_uuid.clone());
    arq.instance_uuid.set(row.instance_uuid.clone());
    arq.project_id.set(row.project_id.clone());
    arq.attach_handle_type.set(Some(String::new()));
    arq.attach_handle_uuid.set(None);
    arq.attach_handle_info.set(Some(BTreeMap::new()));
    arq.created_at.set(created_at);
    arq.updated_at.set(updated_at);
    arq.reset_changes();
    let mut ext = ExtArq::blank();
    ext.arq.set(arq);
    ext.substate.set(ArqState::Initial.as_str().to_owned());
    ext.deployable_uuid.set(Some(uuid::Uuid::nil()));
    ext.device_profile_group.set(group);
    ext.attach_handle_id.set(None);
    ext.deployable_id.set(None);
    ext.created_at.set(created_at);
    ext.updated_at.set(updated_at);
    ext.reset_changes();
    Ok(ext)
}

/// A profile's groups as accel stores them: every value text (Cyborg's API sends
/// `resources:`, `trait:` and `accel:` keys with text values; a null is refused, the
/// refusal's message naming it).
fn groups_of(
    groups: &[BTreeMap<String, Option<String>>],
) -> Result<Vec<BTreeMap<String, String>>, String> {
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            g.iter()
                .map(|(k, v)| match v {
                    Some(v) => Ok((k.clone(), v.clone())),
                    None => Err(format!("device profile group {i}: {k} has no value")),
                })
                .collect()
        })
        .collect()
}

/// What a request's patch asks: `Some` the binding (every op `add`), `None` an unbind.
struct Binding {
    hostname: String,
    instance_uuid: String,
    device_rp_uuid: Option<String>,
    project_id: Option<String>,
}

/// The patch of request `uuid` read as Cyborg's `apply_patch` reads it: its first op
/// decides (`add` binds with the request's `valid_fields`, anything else unbinds), as
/// Cyborg's API checked the ops before sending them. What is missing is the message.
fn binding(uuid: &str, patch: &Value, fields: Option<&Value>) -> Result<Option<Binding>, String> {
    let op = patch
        .as_array()
        .and_then(|ops| ops.first())
        .and_then(|op| op.get("op"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the patch of ARQ {uuid} has no operation"))?;
    if op != "add" {
        return Ok(None);
    }
    let field = |name: &str| {
        fields
            .and_then(|f| f.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let required = |name: &'static str| {
        field(name).ok_or_else(|| format!("binding ARQ {uuid}: {name} is required"))
    };
    Ok(Some(Binding {
        hostname: required("hostname")?,
        instance_uuid: required("instance_uuid")?,
        device_rp_uuid: field("device_rp_uuid"),
        project_id: field("project_id"),
    }))
}

/// `endpoint` with Cyborg 17's API-facing conductor methods, over `Shared`.
pub(crate) fn methods(endpoint: WithState<Shared>) -> WithState<Shared> {
    endpoint
        .handle(|shared: Shared, _ctx, m: DeviceProfileCreate| async move {
            let name = m
                .obj_devprof
                .name
                .get()
                .ok_or_else(|| invalid("create: name is required".into()))?
                .clone();
            let groups = m
                .obj_devprof
                .groups
                .get()
                .ok_or_else(|| invalid("device profile groups expected".into()))?;
            let groups = groups_of(groups).map_err(invalid)?;
            let description = m.obj_devprof.description.get().cloned().flatten();
            let p = shared
                .db()
                .create_profile(&name, groups, description)
                .await
                .map_err(db_error)
                .map_err(refused("device_profile_create"))?;
            tracing::info!(profile = %p.name, uuid = %p.uuid, "device profile created for Cyborg's API");
            cyborg_profile(&p).map_err(db_error)
        })
        .handle(|shared: Shared, _ctx, m: DeviceProfileDelete| async move {
            let uuid = m
                .obj_devprof
                .uuid
                .get()
                .ok_or_else(|| invalid("delete: the profile's uuid is required".into()))?;
            // By UUID only, as Cyborg's `destroy`: a name may be another profile's UUID.
            let p = shared.db().profile_by_uuid(uuid).await.map_err(db_error)?;
            shared
                .db()
                .delete_profile(&p.name)
                .await
                .map_err(db_error)
                .map_err(refused("device_profile_delete"))?;
            tracing::info!(profile = %p.name, %uuid, "device profile deleted for Cyborg's API");
            Ok(())
        })
        .handle(|shared: Shared, _ctx, m: ArqCreate| async move {
            let arq = m
                .obj_extarq
                .arq
                .get()
                .ok_or_else(|| invalid("create: the ARQ is required".into()))?;
            let name = arq
                .device_profile_name
                .get()
                .ok_or_else(|| invalid("create: device profile name is required in ARQ".into()))?;
            let group = *arq.device_profile_group_id.get().ok_or_else(|| {
                invalid("create: the ARQ's device_profile_group_id is required".into())
            })?;
            let profile = shared.db().profile_by_name(name).await.map_err(db_error)?;
            // The API resolved the profile by name and sends its id too: a profile renamed
            // or replaced in between is not the one the request was asked of.
            if profile.id != m.devprof_id {
                return Err(RemoteError::new(
                    "ResourceNotFound",
                    CYBORG_EXCEPTIONS,
                    format!("Device Profile with id={} could not be found.", m.devprof_id),
                ));
            }
            let project = arq.project_id.get().cloned().flatten();
            let row = shared
                .db()
                .create_arq(&profile.name, group, project.as_deref())
                .await
                .map_err(db_error)
                .map_err(refused("arq_create"))?;
            tracing::info!(arq = %row.uuid, profile = %profile.name, group, "request created for Cyborg's API");
            cyborg_new_arq(&row, &profile).map_err(db_error)
        })
        .handle(|shared: Shared, _ctx, m: ArqDeleteByUuid| async move {
            let mut missing = Vec::new();
            for uuid in m.arqs.split(',').filter(|u| !u.is_empty()) {
                if !shared.delete(uuid).await.map_err(as_cyborg)? {
                    missing.push(uuid.to_owned());
                }
            }
            if missing.is_empty() {
                Ok(())
            } else {
                Err(RemoteError::new(
                    "ResourceNotFound",
                    CYBORG_EXCEPTIONS,
                    format!("ARQ with uuids {missing:?} could not be found."),
                ))
            }
        })
        .handle(|shared: Shared, _ctx, m: ArqDeleteByInstanceUuid| async move {
            let arqs = shared
                .db()
                .arqs(Some(&m.instance))
                .await
                .map_err(db_error)?;
            for arq in arqs {
                shared.delete(&arq.uuid).await.map_err(as_cyborg)?;
            }
            Ok(())
        })
        .handle(|shared: Shared, _ctx, m: ArqApplyPatch| async move {
            // Every patch read before any is applied, as Cyborg's API validated them all.
            let mut steps = Vec::with_capacity(m.patch_list.len());
            for (uuid, patch) in &m.patch_list {
                let step = binding(uuid, patch, m.valid_fields.get(uuid)).map_err(invalid)?;
                steps.push((uuid, step));
            }
            for (uuid, step) in steps {
                match step {
                    Some(b) => {
                        let bound = shared
                            .bind(
                                uuid,
                                &b.hostname,
                                &b.instance_uuid,
                                b.device_rp_uuid.as_deref(),
                                b.project_id.as_deref(),
                            )
                            .await;
                        match bound {
                            Ok(row) => {
                                tracing::info!(arq = %uuid, host = %b.hostname, instance = %b.instance_uuid,
                                    handle = row.attach_handle_uuid.as_deref().unwrap_or_default(),
                                    "bound for Cyborg's API");
                            }
                            // Ended BindFailed, Nova told: Cyborg's bind job fails so,
                            // after the patch was answered.
                            Err(e) if e.kind == ErrorKind::NoFreeHandle.as_str() => {
                                tracing::warn!(arq = %uuid, host = %b.hostname, error = %e.message,
                                    "bind failed: BindFailed");
                            }
                            Err(e) => return Err(refused("arq_apply_patch")(as_cyborg(e))),
                        }
                    }
                    None => {
                        shared
                            .unbind(uuid)
                            .await
                            .map_err(as_cyborg)
                            .map_err(refused("arq_apply_patch"))?;
                        tracing::info!(arq = %uuid, "unbound for Cyborg's API");
                    }
                }
            }
            Ok(())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_the_cyborg_exception_of_its_status() {
        for kind in ErrorKind::ALL {
            let class = cyborg_exception(kind.as_str());
            let expected = match kind {
                ErrorKind::NotFound => "ResourceNotFound",
                ErrorKind::Duplicate => "DuplicateDeviceProfileName",
                ErrorKind::InvalidTransition => "ARQBadState",
                ErrorKind::Invalid => "InvalidParameterValue",
                ErrorKind::DatabaseUnavailable => "ServiceUnavailable",
                ErrorKind::ProfileInUse
                | ErrorKind::StaleHandle
                | ErrorKind::HandleInUse
                | ErrorKind::NotCleaning
                | ErrorKind::NotSupportedBeforeFinalization => "Conflict",
                _ => "CyborgException",
            };
            assert_eq!(class, expected, "{kind}");
        }
        assert_eq!(cyborg_exception("SomethingNew"), "CyborgException");
    }

    #[test]
    fn a_patch_binds_with_its_valid_fields_or_unbinds() {
        let add = serde_json::json!([{"path": "/hostname", "op": "add", "value": "h"}]);
        let fields = serde_json::json!({"hostname": "h", "instance_uuid": "i",
            "device_rp_uuid": "rp"});
        let b = binding("a", &add, Some(&fields))
            .expect("valid")
            .expect("a bind");
        assert_eq!(
            (
                b.hostname.as_str(),
                b.instance_uuid.as_str(),
                b.device_rp_uuid.as_deref()
            ),
            ("h", "i", Some("rp"))
        );
        assert_eq!(b.project_id, None);
        let remove = serde_json::json!([{"path": "/hostname", "op": "remove"}]);
        assert!(binding("a", &remove, None).expect("valid").is_none());
        let e = binding("a", &add, Some(&serde_json::json!({"hostname": "h"})))
            .err()
            .expect("no instance");
        assert!(e.contains("instance_uuid"), "{e}");
        let e = binding("a", &serde_json::json!([]), None)
            .err()
            .expect("no op");
        assert!(e.contains("no operation"), "{e}");
    }

    #[test]
    fn a_null_group_value_is_refused_naming_it() {
        let mut g = BTreeMap::new();
        g.insert("resources:FPGA".to_owned(), Some("1".to_owned()));
        g.insert("trait:CUSTOM_X".to_owned(), None);
        let e = groups_of(&[g]).expect_err("refused");
        assert!(e.contains("trait:CUSTOM_X"), "{e}");
    }
}
