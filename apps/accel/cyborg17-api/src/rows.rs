//! Cyborg 17's rows as the HTTP layer's row types ([`crate::http::service`]), its times as Cyborg's API shows them, and
//! the failures of the database, the conductor and the conductor crate's code as the
//! API's errors.

use crate::http::service::{
    ArqRow, ArqState, AttributeRow, DeployableRow, DeviceProfileRow, DeviceRow,
};
use crate::http::{ErrorKind, ServiceError};
use accel_cyborg17::objects::{Arq, ExtArq};
use accel_cyborg17_conductor::db::{text, DbError};
use accel_cyborg17_conductor::requests::RequestError;
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::Row;
use std::collections::BTreeMap;
use uuid::Uuid;
use verso::DateTime;
use verso_rpc::RpcError;

pub(crate) fn db_error(e: sqlx::Error) -> ServiceError {
    ServiceError::with_source(ErrorKind::Internal, format!("database: {e}"), e)
}

pub(crate) fn corrupt(what: String) -> ServiceError {
    ServiceError::new(ErrorKind::Internal, format!("stored {what} does not parse"))
}

pub(crate) fn required(row: &AnyRow, i: usize) -> Result<String, ServiceError> {
    text(row, i)
        .map_err(|e| ServiceError::new(ErrorKind::Internal, e.to_string()))?
        .ok_or_else(|| corrupt(format!("column {i} (NULL in a NOT NULL column)")))
}

pub(crate) fn optional(row: &AnyRow, i: usize) -> Result<Option<String>, ServiceError> {
    text(row, i).map_err(|e| ServiceError::new(ErrorKind::Internal, e.to_string()))
}

pub(crate) fn int(row: &AnyRow, i: usize) -> Result<i64, ServiceError> {
    row.try_get::<i64, _>(i).map_err(db_error)
}

/// A stored `DATETIME` (`YYYY-MM-DD HH:MM:SS[.ffffff]`, UTC) as Cyborg's API shows it:
/// Python's `isoformat()` of the aware time. An unset time is empty.
pub fn api_time(stored: Option<&str>) -> Result<String, ServiceError> {
    let Some(stored) = stored else {
        return Ok(String::new());
    };
    let t = chrono::NaiveDateTime::parse_from_str(stored, "%Y-%m-%d %H:%M:%S%.f")
        .map_err(|e| corrupt(format!("time {stored:?} ({e})")))?;
    Ok(isoformat(t))
}

fn isoformat(t: chrono::NaiveDateTime) -> String {
    use chrono::Timelike;
    if t.nanosecond() / 1000 == 0 {
        t.format("%Y-%m-%dT%H:%M:%S+00:00").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string()
    }
}

pub(crate) fn object_time(t: Option<&DateTime>) -> String {
    t.map(|t| isoformat(t.as_chrono().naive_utc()))
        .unwrap_or_default()
}

pub(crate) fn device_row(row: &AnyRow) -> Result<DeviceRow, ServiceError> {
    let status = required(row, 8)?;
    let maintaining = match status.as_str() {
        "enabled" => false,
        "maintaining" => true,
        other => return Err(corrupt(format!("devices.status {other:?}"))),
    };
    Ok(DeviceRow {
        id: int(row, 0)?,
        uuid: required(row, 1)?,
        device_type: required(row, 2)?,
        vendor: required(row, 3)?,
        model: required(row, 4)?,
        std_board_info: optional(row, 5)?,
        hostname: required(row, 6)?,
        vendor_board_info: optional(row, 7)?,
        maintaining,
        created_at: api_time(optional(row, 9)?.as_deref())?,
        updated_at: api_time(optional(row, 10)?.as_deref())?,
    })
}

pub(crate) fn deployable_row(row: &AnyRow) -> Result<DeployableRow, ServiceError> {
    Ok(DeployableRow {
        id: int(row, 0)?,
        uuid: required(row, 1)?,
        name: required(row, 2)?,
        device_id: int(row, 3)?,
        hostname: required(row, 4)?,
        num_accelerators: int(row, 5)?,
        driver_name: optional(row, 6)?,
        rp_uuid: optional(row, 7)?.unwrap_or_default(),
        attributes: BTreeMap::new(),
        created_at: api_time(optional(row, 8)?.as_deref())?,
        updated_at: api_time(optional(row, 9)?.as_deref())?,
    })
}

pub(crate) fn attribute_row(row: &AnyRow) -> Result<AttributeRow, ServiceError> {
    Ok(AttributeRow {
        id: int(row, 0)?,
        uuid: required(row, 1)?,
        deployable_id: int(row, 2)?,
        key: required(row, 3)?,
        value: required(row, 4)?,
        created_at: api_time(optional(row, 5)?.as_deref())?,
        updated_at: api_time(optional(row, 6)?.as_deref())?,
    })
}

pub(crate) fn profile_row(row: &AnyRow) -> Result<DeviceProfileRow, ServiceError> {
    let uuid = required(row, 1)?;
    let json = required(row, 3)?;
    let parsed: Value = serde_json::from_str(&json)
        .map_err(|e| corrupt(format!("profile_json of profile {uuid} ({e})")))?;
    let groups = serde_json::from_value(parsed["groups"].clone()).map_err(|e| {
        corrupt(format!(
            "groups of profile {uuid} as lists of strings ({e})"
        ))
    })?;
    Ok(DeviceProfileRow {
        id: int(row, 0)?,
        uuid,
        name: required(row, 2)?,
        groups,
        description: optional(row, 4)?,
        created_at: api_time(optional(row, 5)?.as_deref())?,
    })
}

pub(crate) fn arq_row(ext: &ExtArq) -> Result<ArqRow, ServiceError> {
    let arq: &Arq = ext
        .arq
        .get()
        .ok_or_else(|| corrupt("a request without its ARQ".into()))?;
    let state_name = arq
        .state
        .get()
        .map(|s| verso::VersionedEnum::as_str(s))
        .ok_or_else(|| corrupt("a request without a state".into()))?;
    let state: ArqState = state_name
        .parse()
        .map_err(|_| corrupt(format!("request state {state_name:?}")))?;
    let info = arq.attach_handle_info.get().cloned().flatten();
    Ok(ArqRow {
        id: arq.id.get().copied().unwrap_or_default(),
        uuid: arq.uuid.get().map(Uuid::to_string).unwrap_or_default(),
        state,
        device_profile_name: arq.device_profile_name.get().cloned().unwrap_or_default(),
        device_profile_group_id: arq
            .device_profile_group_id
            .get()
            .copied()
            .unwrap_or_default(),
        hostname: arq.hostname.get().cloned().flatten(),
        device_rp_uuid: arq.device_rp_uuid.get().cloned().flatten(),
        instance_uuid: arq.instance_uuid.get().cloned().flatten(),
        project_id: arq.project_id.get().cloned().flatten(),
        attach_handle_uuid: arq.attach_handle_uuid.get().cloned().flatten(),
        attach_handle_type: arq.attach_handle_type.get().cloned().flatten(),
        attach_handle_info: info
            .filter(|i| !i.is_empty())
            .map(|i| serde_json::to_string(&i).unwrap_or_default()),
        created_at: Some(object_time(
            arq.created_at.get().cloned().flatten().as_ref(),
        )),
        updated_at: arq
            .updated_at
            .get()
            .cloned()
            .flatten()
            .map(|t| object_time(Some(&t))),
    })
}

/// A failure of the conductor's code (Cyborg's exception class), or of the call.
pub(crate) fn rpc_error(e: RpcError) -> ServiceError {
    match &e {
        RpcError::Remote(remote) => {
            let kind = match remote.kind.as_str() {
                "DuplicateDeviceProfileName"
                | "DeviceProfileAlreadyExists"
                | "ExtArqAlreadyExists" => ErrorKind::Duplicate,
                "ResourceNotFound" | "NotFound" => ErrorKind::NotFound,
                "ARQBadState" => ErrorKind::InvalidTransition,
                "InvalidParameterValue" | "Invalid" | "PatchError" => ErrorKind::BadRequest,
                _ => ErrorKind::Internal,
            };
            let message = if remote.message.is_empty() {
                remote.kind.clone()
            } else {
                remote.message.clone()
            };
            ServiceError::with_source(kind, message, e)
        }
        RpcError::Timeout { .. } | RpcError::Unreachable { .. } => ServiceError::with_source(
            ErrorKind::Unavailable,
            "Cyborg's conductor does not answer",
            e,
        ),
        _ => ServiceError::with_source(ErrorKind::Internal, e.to_string(), e),
    }
}

pub(crate) fn request_error(e: RequestError) -> ServiceError {
    let kind = match &e {
        RequestError::NotFound { .. } => ErrorKind::NotFound,
        RequestError::BadState { .. } => ErrorKind::InvalidTransition,
        RequestError::Invalid(_) => ErrorKind::BadRequest,
        RequestError::DuplicateName(_) | RequestError::AlreadyExists { .. } => ErrorKind::Duplicate,
        RequestError::Db(DbError::NotFound { .. }) => ErrorKind::NotFound,
        _ => ErrorKind::Internal,
    };
    ServiceError::with_source(kind, e.to_string(), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shown_as_pythons_isoformat() {
        assert_eq!(
            api_time(Some("2026-12-06 12:00:01.250000")).ok(),
            Some("2026-12-06T12:00:01.250000+00:00".to_owned())
        );
        assert_eq!(
            api_time(Some("2026-12-06 12:00:01")).ok(),
            Some("2026-12-06T12:00:01+00:00".to_owned())
        );
        assert_eq!(api_time(None).ok(), Some(String::new()));
        let bad = api_time(Some("yesterday")).err().map(|e| e.kind);
        assert_eq!(bad, Some(ErrorKind::Internal));
    }
}
