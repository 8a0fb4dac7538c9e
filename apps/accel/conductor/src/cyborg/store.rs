//! The seed spec's object methods on Cyborg's topic over accel's database
//! ([`accel_objects::cyborg::CyborgStore`]), for Cyborg agents calling through
//! object indirection (conductor RPC 1.1): a host's devices as Cyborg's `Device` and its
//! handles as Cyborg's `AttachHandle`, the managed-mode update and the device cleanup
//! transitions.
//!
//! `device_state` is Cyborg's cleaning lifecycle read from the device's attach handles,
//! as Cyborg's own conductor derives it (`data_migrations._device_state_from_attach_handles`:
//! `allocated` when a handle is in use, else `available`) with accel's NVMe cleanup in
//! Cyborg's remaining states ([`device_state`]). The transitions are accel's handle
//! transitions (`Db::start_cleanup`, `Db::finish_cleanup`, `Db::update_handle_info`,
//! each a compare-and-swap on the handle's revision) applied to the device's handles,
//! after checking that the stored state is the one the agent read.

use crate::db::{Db, DeviceRow};
use crate::handles::{CleanupResult, HostHandle};
use crate::objects::{corrupt_record, to_call_error};
use accel_cyborg17::objects::{AttachHandleType, DeviceState, DeviceStatus, DeviceType};
use accel_objects::cyborg::{AttachHandle, CleanupStep, CyborgStore, Device};
use accel_objects::errors;
use accel_objects::{AccelVersion, CleanupState, UNMANAGED_FEATURE};
use std::collections::HashMap;
use verso::indirection::{BoxFuture, CallError};
use verso::{DateTime, Field, VersionedEnum, VersionedObject};
use verso_upgrade::VersionManager;

/// The conductor's database as the seed spec's object methods see it, with the
/// conductor's component versions (`managed = false` waits for finalization, as
/// accel's own `AttachHandle.update_managed`).
#[derive(Clone)]
pub struct DbCyborgStore {
    db: Db,
    versions: Option<VersionManager<AccelVersion>>,
}

impl DbCyborgStore {
    /// Methods over `db`; without `versions`, the release is taken as not finalized (the
    /// gated `managed = false` is refused).
    pub fn new(db: Db, versions: Option<VersionManager<AccelVersion>>) -> Self {
        DbCyborgStore { db, versions }
    }

    /// The attach handles of device `uuid` on `host`.
    async fn handles_of(&self, host: &str, uuid: &str) -> Result<Vec<HostHandle>, CallError> {
        Ok(self
            .db
            .host_handles(host)
            .await
            .map_err(to_call_error)?
            .into_iter()
            .filter(|h| h.device_uuid == uuid)
            .collect())
    }

    async fn stored_device(&self, uuid: &str) -> Result<Device, CallError> {
        let row = self.db.device(uuid).await.map_err(to_call_error)?;
        let handles = self.handles_of(&row.hostname, &row.uuid).await?;
        device(&row, device_state(&handles))
    }
}

impl CyborgStore for DbCyborgStore {
    fn devices_on<'a>(
        &'a self,
        hostname: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Device>, CallError>> {
        Box::pin(async move {
            let rows = self.db.devices_on(hostname).await.map_err(to_call_error)?;
            let handles = self
                .db
                .host_handles(hostname)
                .await
                .map_err(to_call_error)?;
            let mut by_device: HashMap<&str, Vec<&HostHandle>> = HashMap::new();
            for h in &handles {
                by_device.entry(h.device_uuid.as_str()).or_default().push(h);
            }
            rows.iter()
                .map(|row| {
                    let handles = by_device
                        .get(row.uuid.as_str())
                        .map_or(&[][..], Vec::as_slice);
                    device(row, device_state(handles.iter().copied()))
                })
                .collect()
        })
    }

    fn handles_on<'a>(
        &'a self,
        hostname: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AttachHandle>, CallError>> {
        Box::pin(async move {
            self.db
                .host_handles(hostname)
                .await
                .map_err(to_call_error)?
                .iter()
                .map(handle)
                .collect()
        })
    }

    fn update_managed<'a>(
        &'a self,
        read: &'a AttachHandle,
        managed: bool,
    ) -> BoxFuture<'a, Result<AttachHandle, CallError>> {
        Box::pin(async move {
            if !managed {
                match &self.versions {
                    Some(v) => v
                        .require(AccelVersion::DriverFeatures, UNMANAGED_FEATURE)
                        .map_err(|e| errors::refused(&e))?,
                    None => {
                        return Err(CallError::method(
                            errors::NOT_SUPPORTED_BEFORE_FINALIZATION,
                            format!("{UNMANAGED_FEATURE}: this conductor has no version record"),
                        ))
                    }
                }
            }
            const METHOD: &str = "update_managed";
            let uuid = sent(&read.uuid, "AttachHandle", "uuid", METHOD)?.to_string();
            let info = sent(&read.attach_info, "AttachHandle", "attach_info", METHOD)?;
            let in_use = *sent(&read.in_use, "AttachHandle", "in_use", METHOD)?;
            let stored = self.db.host_handle(&uuid).await.map_err(to_call_error)?;
            if stored.attach_info != *info || stored.in_use != in_use {
                return Err(CallError::method(
                    errors::STALE_HANDLE,
                    format!(
                        "attach handle {uuid} changed since it was read (attach info {:?}, in use \
                         {}): read it again",
                        stored.attach_info, stored.in_use
                    ),
                ));
            }
            let updated = accel_objects::attach_info_with_managed(info, managed).ok_or_else(|| {
                CallError::BadArguments {
                    object: "AttachHandle",
                    method: "update_managed".into(),
                    reason: format!("attach_info {info:?} is not a JSON object (a PCI address): not overwritten"),
                }
            })?;
            let h = self
                .db
                .update_handle_info(&uuid, stored.revision, &updated)
                .await
                .map_err(to_call_error)?;
            handle(&h)
        })
    }

    fn device_cleanup<'a>(
        &'a self,
        read: &'a Device,
        step: CleanupStep,
    ) -> BoxFuture<'a, Result<Device, CallError>> {
        Box::pin(async move {
            let method = step.method();
            let uuid = sent(&read.uuid, "Device", "uuid", method)?.to_string();
            let host = sent(&read.hostname, "Device", "hostname", method)?;
            let was =
                sent(&read.device_state, "Device", "device_state", method)?.ok_or_else(|| {
                    CallError::BadArguments {
                        object: "Device",
                        method: method.into(),
                        reason: "Device.device_state is null: send the device as read".into(),
                    }
                })?;
            let handles = self.handles_of(host, &uuid).await?;
            let now = device_state(&handles);
            let cleaning = handles
                .iter()
                .filter(|h| h.cleanup_state == Some(CleanupState::Cleaning));
            let not_cleaning = |wanted: DeviceState| {
                CallError::method(
                    errors::NOT_CLEANING,
                    format!(
                        "device {uuid} is {} (read as {}): this step needs {}",
                        now.as_str(),
                        was.as_str(),
                        wanted.as_str()
                    ),
                )
            };
            match &step {
                CleanupStep::Started { claim } => {
                    if was != DeviceState::PendingCleaning {
                        return Err(not_cleaning(DeviceState::PendingCleaning));
                    }
                    let mut any = false;
                    for h in cleaning {
                        any = true;
                        // A handle already claimed: this call's retry lands again only
                        // if it was this claim (`Db::start_cleanup` recognises its own
                        // mark one revision back); another runner's is `StaleHandle`.
                        let expected = if h.cleanup_reason.is_some() {
                            h.revision - 1
                        } else {
                            h.revision
                        };
                        self.db
                            .start_cleanup(&h.uuid, expected, claim)
                            .await
                            .map_err(to_call_error)?;
                    }
                    if !any {
                        return Err(not_cleaning(DeviceState::PendingCleaning));
                    }
                }
                CleanupStep::Succeeded | CleanupStep::Failed { .. } => {
                    if was != DeviceState::Cleaning {
                        return Err(not_cleaning(DeviceState::Cleaning));
                    }
                    let result = match &step {
                        CleanupStep::Failed { reason } => CleanupResult::Failed(reason.clone()),
                        _ => CleanupResult::Clean,
                    };
                    let claimed: Vec<&HostHandle> =
                        cleaning.filter(|h| h.cleanup_reason.is_some()).collect();
                    if claimed.is_empty() {
                        // Already recorded (a retry whose reply was lost) answers the
                        // same; anything else is not this step's to take.
                        let done = match result {
                            CleanupResult::Clean => DeviceState::Available,
                            CleanupResult::Failed(_) => DeviceState::Error,
                        };
                        if now != done {
                            return Err(not_cleaning(DeviceState::Cleaning));
                        }
                    }
                    for h in claimed {
                        self.db
                            .finish_cleanup(&h.uuid, h.revision, &result)
                            .await
                            .map_err(to_call_error)?;
                    }
                }
            }
            tracing::info!(device = %uuid, ?step, "a Cyborg agent's cleanup step recorded");
            self.stored_device(&uuid).await
        })
    }
}

/// A field `method` needs from the object as the agent sent it; unset, the call is
/// refused naming the field and the method.
fn sent<'a, T>(
    field: &'a Field<T>,
    object: &'static str,
    name: &'static str,
    method: &str,
) -> Result<&'a T, CallError> {
    field
        .require(object, name)
        .map_err(|e| CallError::BadArguments {
            object,
            method: method.into(),
            reason: format!("{e}: send the object as read"),
        })
}

/// Cyborg's `device_state` of a device with these attach handles: `error` when a
/// cleanup failed, `cleaning` while an agent erases one (it claimed the cleanup),
/// `pending_cleaning` while one waits for its agent, `allocated` when one is in use,
/// else `available`; the first that holds, in that order.
pub fn device_state<'a>(handles: impl IntoIterator<Item = &'a HostHandle>) -> DeviceState {
    let mut state = DeviceState::Available;
    let rank = |s: DeviceState| match s {
        DeviceState::Available => 0,
        DeviceState::Allocated => 1,
        DeviceState::PendingCleaning => 2,
        DeviceState::Cleaning => 3,
        DeviceState::Error => 4,
    };
    for h in handles {
        let this = match h.cleanup_state {
            Some(CleanupState::Error) => DeviceState::Error,
            // An agent's claim is recorded in the reason (`Db::start_cleanup`).
            Some(CleanupState::Cleaning) if h.cleanup_reason.is_some() => DeviceState::Cleaning,
            Some(CleanupState::Cleaning) => DeviceState::PendingCleaning,
            None if h.in_use => DeviceState::Allocated,
            None => DeviceState::Available,
        };
        if rank(this) > rank(state) {
            state = this;
        }
    }
    state
}

/// One stored device as Cyborg's `Device`; a stored value that does not parse is
/// `CorruptRecord` naming it, never an unset field.
fn device(row: &DeviceRow, state: DeviceState) -> Result<Device, CallError> {
    let corrupt = |field: &str, value: &str| corrupt_record("device", &row.uuid, field, value);
    let time = |field: &str, text: &str| -> Result<Option<DateTime>, CallError> {
        crate::db::shown_time_value(text).map_err(|_| corrupt(field, text))
    };
    let mut obj = Device {
        id: row.id.into(),
        uuid: row
            .uuid
            .parse::<uuid::Uuid>()
            .map_err(|_| corrupt("uuid", &row.uuid))?
            .into(),
        r#type: <DeviceType as VersionedEnum>::from_str(&row.device_type)
            .ok_or_else(|| corrupt("type", &row.device_type))?
            .into(),
        vendor: row.vendor.clone().into(),
        model: row.model.clone().into(),
        std_board_info: row.std_board_info.clone().into(),
        vendor_board_info: row.vendor_board_info.clone().into(),
        hostname: row.hostname.clone().into(),
        status: if row.maintaining {
            DeviceStatus::Maintaining
        } else {
            DeviceStatus::Enabled
        }
        .into(),
        device_state: Some(state).into(),
        created_at: time("created_at", &row.created_at)?.into(),
        updated_at: time("updated_at", &row.updated_at)?.into(),
        ..Device::blank()
    };
    obj.reset_changes_of(&[], true);
    Ok(obj)
}

/// One stored handle as Cyborg's `AttachHandle`. `cpid_id` is sent as the device's id,
/// not the handle's stored `controlpath_ids` row: the seed spec's classes
/// give an agent no way from a control path to its device (no `ControlpathID` list, no
/// deployable on a handle's device), and there is one control path per device, so the
/// agent finds a `Device`'s handles (and through their attach info, its functions) by
/// it. The times (not in the host's handle query) are left unset.
fn handle(h: &HostHandle) -> Result<AttachHandle, CallError> {
    let corrupt = |field: &str, value: &str| corrupt_record("attach handle", &h.uuid, field, value);
    let mut obj = AttachHandle {
        id: h.id.into(),
        uuid: h
            .uuid
            .parse::<uuid::Uuid>()
            .map_err(|_| corrupt("uuid", &h.uuid))?
            .into(),
        deployable_id: h.deployable_id.into(),
        cpid_id: h.device_id.into(),
        attach_type: <AttachHandleType as VersionedEnum>::from_str(&h.attach_type)
            .ok_or_else(|| corrupt("attach_type", &h.attach_type))?
            .into(),
        attach_info: h.attach_info.clone().into(),
        in_use: h.in_use.into(),
        ..AttachHandle::blank()
    };
    obj.reset_changes_of(&[], true);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(in_use: bool, cleanup: Option<CleanupState>, reason: Option<&str>) -> HostHandle {
        HostHandle {
            id: 1,
            deployable_id: 1,
            uuid: "h".into(),
            attach_type: "PCI".into(),
            attach_info: "{}".into(),
            revision: 0,
            in_use,
            cleanup_state: cleanup,
            cleanup_reason: reason.map(str::to_owned),
            device_id: 1,
            device_uuid: "d".into(),
            device_type: "SSD".into(),
            control_path_id: "0000:00:01.0".into(),
            hostname: "h1".into(),
            instance_uuid: None,
        }
    }

    fn row(created_at: &str, updated_at: &str) -> DeviceRow {
        DeviceRow {
            id: 1,
            uuid: "3eeef1f3-5777-4335-b82b-7dd40d79248b".into(),
            device_type: "GPU".into(),
            vendor: "10de".into(),
            model: "1eb8".into(),
            std_board_info: None,
            hostname: "h1".into(),
            vendor_board_info: None,
            status: crate::db::DeviceStatus::Available,
            maintaining: false,
            created_at: created_at.into(),
            updated_at: updated_at.into(),
        }
    }

    /// A device Cyborg's own conductor wrote has no `updated_at` until it changes (read
    /// as empty): an unset field, not a corrupt record; a time that does not parse is one.
    #[test]
    fn a_device_without_an_update_time_is_read_as_cyborg_wrote_it() {
        let created = "2026-12-06T12:00:01.250000+00:00";
        let obj = device(&row(created, ""), DeviceState::Available).expect("read");
        assert!(obj.created_at.get().is_some_and(Option::is_some));
        assert!(obj.updated_at.get().is_some_and(Option::is_none));
        match device(&row(created, "yesterday"), DeviceState::Available) {
            Err(CallError::Method { kind, message, .. }) => {
                assert_eq!(kind, errors::CORRUPT_RECORD);
                assert!(message.contains("updated_at"), "{message}");
            }
            other => panic!("not refused as a corrupt record: {other:?}"),
        }
    }

    /// Cyborg's lifecycle from the handles, the most pressing state winning.
    #[test]
    fn the_device_state_is_read_from_the_handles() {
        let free = handle(false, None, None);
        let used = handle(true, None, None);
        let pending = handle(false, Some(CleanupState::Cleaning), None);
        let claimed = handle(false, Some(CleanupState::Cleaning), Some("cleanup started"));
        let failed = handle(false, Some(CleanupState::Error), Some("erase failed"));
        assert_eq!(device_state([]), DeviceState::Available);
        assert_eq!(device_state([&free, &free]), DeviceState::Available);
        assert_eq!(device_state([&free, &used]), DeviceState::Allocated);
        assert_eq!(
            device_state([&used, &pending]),
            DeviceState::PendingCleaning
        );
        assert_eq!(device_state([&pending, &claimed]), DeviceState::Cleaning);
        assert_eq!(device_state([&failed, &claimed, &used]), DeviceState::Error);
    }
}
