//! The seed spec's `DeviceList.get_by_hostname` over accel's database: a host's devices
//! as Cyborg 17's `Device` (1.5), for Cyborg agents calling through object indirection
//! (conductor RPC 1.1 on Cyborg's topic, [`accel_cyborg17::indirection`]).
//!
//! `device_state` is Cyborg's cleaning lifecycle read from the device's attach handles,
//! as Cyborg's own conductor derives it (`data_migrations._device_state_from_attach_handles`:
//! `allocated` when a handle is in use, else `available`) with accel's NVMe cleanup in
//! Cyborg's remaining states ([`device_state`]).

use crate::db::{Db, DeviceRow};
use crate::handles::HostHandle;
use crate::objects::to_call_error;
use accel_cyborg17::indirection::DeviceSource;
use accel_cyborg17::objects::{Device, DeviceState, DeviceStatus, DeviceType};
use accel_objects::errors;
use accel_objects::CleanupState;
use std::collections::HashMap;
use verso::indirection::{BoxFuture, CallError};
use verso::{DateTime, VersionedEnum, VersionedObject};

/// The conductor's database as the source of [`accel_cyborg17::indirection::DeviceList`].
#[derive(Clone, Debug)]
pub struct DbDevices {
    db: Db,
}

impl DbDevices {
    /// Devices read from `db`.
    pub fn new(db: Db) -> Self {
        DbDevices { db }
    }
}

impl DeviceSource for DbDevices {
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
    let corrupt = |field: &str, value: &str| {
        tracing::error!(device = %row.uuid, field, value, "a stored device does not parse");
        CallError::method(
            errors::CORRUPT_RECORD,
            format!(
                "stored device {} has an invalid {field}: {value:?}",
                row.uuid
            ),
        )
    };
    let time = |field: &str, text: &str| {
        chrono::DateTime::parse_from_rfc3339(text)
            .map(DateTime::from_fixed)
            .map_err(|_| corrupt(field, text))
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
        created_at: Some(time("created_at", &row.created_at)?).into(),
        updated_at: Some(time("updated_at", &row.updated_at)?).into(),
        ..Device::blank()
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
            device_uuid: "d".into(),
            device_type: "SSD".into(),
            control_path_id: "0000:00:01.0".into(),
            hostname: "h1".into(),
            instance_uuid: None,
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
