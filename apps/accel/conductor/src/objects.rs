//! The attach-handle methods' store over the database: what the remotable bodies of
//! `AttachHandle` and `AttachHandleList` (in accel-objects) read and write when the
//! conductor runs them for an agent.
//!
//! The conductor attaches a [`ConductorState`] to every context its object endpoints
//! run with ([`state`], then `ConductorState::attach` as the endpoint's `prepare`).
//! Database errors become the method error kinds an agent matches on
//! (`accel_objects::errors`): the same names as the conductor API's remote errors.

use crate::db::{Db, DbError};
use crate::handles::{CleanupResult, HostHandle};
use accel_objects::errors::{self, ErrorKind};
use accel_objects::store::{CleanupTransition, ConductorState, HandleStore};
use accel_objects::{AccelVersion, AttachHandle, AttachType, Device, DeviceType};
use std::sync::Arc;
use verso::indirection::{BoxFuture, CallError};
use verso::{VersionedEnum, VersionedObject};
use verso_upgrade::VersionManager;

/// The database as the attach-handle methods' store.
#[derive(Clone)]
pub struct DbHandleStore {
    db: Db,
}

impl DbHandleStore {
    /// Over `db`.
    pub fn new(db: Db) -> Self {
        DbHandleStore { db }
    }
}

/// The state the conductor attaches to its object methods' contexts.
pub fn state(db: Db, versions: VersionManager<AccelVersion>) -> ConductorState {
    ConductorState {
        store: Arc::new(DbHandleStore::new(db)),
        versions,
    }
}

/// A database error as the method error an agent matches on.
pub fn to_call_error(e: DbError) -> CallError {
    let kind = match &e {
        DbError::StaleHandle { .. } => ErrorKind::StaleHandle,
        DbError::HandleInUse { .. } => ErrorKind::HandleInUse,
        DbError::NotCleaning { .. } => ErrorKind::NotCleaning,
        DbError::NotFound { .. } => ErrorKind::NotFound,
        DbError::Corrupt { .. } => {
            tracing::error!(error = %e, "a stored record does not parse");
            ErrorKind::CorruptRecord
        }
        DbError::Connect { .. } | DbError::Migrate(_) | DbError::Query(_) => {
            tracing::error!(error = %e, "database failure in an object method");
            return CallError::method(
                ErrorKind::DatabaseError.as_str(),
                "the conductor's database failed; see its log",
            );
        }
        _ => ErrorKind::Invalid,
    };
    CallError::method(kind.as_str(), e.to_string())
}

/// The `CorruptRecord` error of a stored `what` (`attach handle`, `device`) whose
/// `field` holds `value`, which does not parse; logged, since only an operator can mend
/// it.
pub(crate) fn corrupt_record(what: &str, uuid: &str, field: &str, value: &str) -> CallError {
    tracing::error!(what, uuid, field, value, "a stored row does not parse");
    CallError::method(
        errors::CORRUPT_RECORD,
        format!("stored {what} {uuid} has an invalid {field}: {value:?}"),
    )
}

/// A handle row as the object agents get (its device loaded with uuid, type and host).
/// A stored value that does not parse is reported as [`errors::CORRUPT_RECORD`] naming
/// the handle and the field, never turned into an unset field an agent would act on.
pub fn handle_object(h: &HostHandle) -> Result<AttachHandle, CallError> {
    let corrupt = |field: &str, value: &str| corrupt_record("attach handle", &h.uuid, field, value);
    let device = Device {
        uuid: h
            .device_uuid
            .parse::<uuid::Uuid>()
            .map_err(|_| corrupt("device uuid", &h.device_uuid))?
            .into(),
        r#type: <DeviceType as VersionedEnum>::from_str(&h.device_type)
            .ok_or_else(|| corrupt("device type", &h.device_type))?
            .into(),
        hostname: h.hostname.clone().into(),
        ..Device::blank()
    };
    let mut obj = AttachHandle {
        id: h.id.into(),
        uuid: h
            .uuid
            .parse::<uuid::Uuid>()
            .map_err(|_| corrupt("uuid", &h.uuid))?
            .into(),
        deployable_id: h.deployable_id.into(),
        in_use: h.in_use.into(),
        attach_type: <AttachType as VersionedEnum>::from_str(&h.attach_type)
            .ok_or_else(|| corrupt("attach type", &h.attach_type))?
            .into(),
        attach_info: h.attach_info.clone().into(),
        device: Some(device).into(),
        revision: h.revision.into(),
        cleanup_state: h.cleanup_state.map(|s| s.as_str().to_owned()).into(),
        instance_uuid: h.instance_uuid.clone().into(),
        ..AttachHandle::blank()
    };
    obj.reset_changes_of(&[], true);
    Ok(obj)
}

fn objects(rows: Result<Vec<HostHandle>, DbError>) -> Result<Vec<AttachHandle>, CallError> {
    rows.map_err(to_call_error)?
        .iter()
        .map(handle_object)
        .collect()
}

impl HandleStore for DbHandleStore {
    fn host_handles<'a>(
        &'a self,
        host: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AttachHandle>, CallError>> {
        Box::pin(async move { objects(self.db.host_handles(host).await) })
    }

    fn cleaning_handles<'a>(
        &'a self,
        host: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AttachHandle>, CallError>> {
        Box::pin(async move { objects(self.db.cleaning_handles(host).await) })
    }

    fn update_attach_info<'a>(
        &'a self,
        uuid: &'a str,
        expected_revision: i64,
        attach_info: String,
    ) -> BoxFuture<'a, Result<AttachHandle, CallError>> {
        Box::pin(async move {
            let h = self
                .db
                .update_handle_info(uuid, expected_revision, &attach_info)
                .await
                .map_err(to_call_error)?;
            handle_object(&h)
        })
    }

    fn cleanup_transition<'a>(
        &'a self,
        uuid: &'a str,
        expected_revision: i64,
        transition: CleanupTransition,
    ) -> BoxFuture<'a, Result<AttachHandle, CallError>> {
        Box::pin(async move {
            let h = match transition {
                CleanupTransition::Started { claim } => {
                    self.db.start_cleanup(uuid, expected_revision, &claim).await
                }
                CleanupTransition::Succeeded => {
                    self.db
                        .finish_cleanup(uuid, expected_revision, &CleanupResult::Clean)
                        .await
                }
                CleanupTransition::Failed { reason } => {
                    self.db
                        .finish_cleanup(uuid, expected_revision, &CleanupResult::Failed(reason))
                        .await
                }
            }
            .map_err(to_call_error)?;
            tracing::info!(handle = uuid, revision = h.revision, state = ?h.cleanup_state, "cleanup transition recorded");
            handle_object(&h)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accel_objects::errors::{classify, HandleErrorKind};

    fn row() -> HostHandle {
        HostHandle {
            id: 1,
            deployable_id: 2,
            uuid: "7f1c2e9a-4b5d-4c3e-9f10-2a3b4c5d6e7f".into(),
            attach_type: "PCI".into(),
            attach_info: r#"{"bus":"5e","device":"00","domain":"0000","function":"1"}"#.into(),
            revision: 3,
            in_use: false,
            cleanup_state: None,
            cleanup_reason: None,
            device_id: 1,
            device_uuid: "0b6c6a52-2f0e-4a59-8d3a-5c1f2e3d4a5b".into(),
            device_type: "SSD".into(),
            control_path_id: "0000:5e:00.0".into(),
            hostname: "host1".into(),
            instance_uuid: None,
        }
    }

    #[test]
    fn a_stored_handle_becomes_the_object() {
        let obj = handle_object(&row()).expect("parses");
        assert_eq!(obj.uuid.get().map(ToString::to_string), Some(row().uuid));
        assert_eq!(obj.attach_type.get(), Some(&AttachType::Pci));
    }

    #[test]
    fn a_stored_value_that_does_not_parse_is_reported_never_unset() {
        let bad = [
            HostHandle {
                uuid: "not-a-uuid".into(),
                ..row()
            },
            HostHandle {
                device_uuid: "".into(),
                ..row()
            },
            HostHandle {
                device_type: "TPU".into(),
                ..row()
            },
            HostHandle {
                attach_type: "USB".into(),
                ..row()
            },
        ];
        for h in bad {
            let e = handle_object(&h).expect_err("refused");
            assert!(
                matches!(&e, CallError::Method { kind, .. } if kind == errors::CORRUPT_RECORD),
                "{e}"
            );
            assert_eq!(classify(&e), HandleErrorKind::Fatal, "not retried: {e}");
        }
    }

    /// A stored value the database layer cannot decode reaches an agent as
    /// `CorruptRecord` (not retried) and an RPC caller the same kind, never `Invalid`
    /// (the caller's fault) or a database outage (retried).
    #[test]
    fn a_corrupt_row_is_corrupt_record_on_every_path() {
        let corrupt = || DbError::Corrupt {
            table: "attach_handles",
            column: "cleanup_state".into(),
            why: "unknown cleanup state \"dusty\"".into(),
        };
        let e = to_call_error(corrupt());
        assert!(
            matches!(&e, CallError::Method { kind, message, .. }
                if kind == errors::CORRUPT_RECORD && message.contains("attach_handles.cleanup_state")),
            "{e}"
        );
        assert_eq!(classify(&e), HandleErrorKind::Fatal);
        let remote = crate::service::to_remote(corrupt());
        assert_eq!(remote.kind, errors::CORRUPT_RECORD);
        assert!(
            remote.message.contains("attach_handles.cleanup_state"),
            "{remote:?}"
        );
    }
}
