//! Attach handles as agents see them (release N+1): the handles of one host with their
//! allocation, PCI managed-mode metadata updated by compare-and-swap on a revision, and
//! the NVMe cleanup states.
//!
//! Every change checks the state the caller expects inside the update itself
//! (`... WHERE revision = $expected`, `... AND cleanup_state = 'cleaning'`), so a stale
//! agent, a second agent or an operator racing through the API can never overwrite a
//! newer state: the loser gets a typed error and reads again. A retried call whose first
//! attempt already landed (the reply was lost) is recognised by the revision it left
//! and answers the same result, so a transition lands exactly once.

use crate::db::{read_error, Db, DbError, Dialect, IntFlag, ParsedOption};
use accel_objects::CleanupState;
use serde::{Deserialize, Serialize};

/// One attach handle with what an agent needs to reason about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct HostHandle {
    /// The handle's database id.
    pub id: i64,
    /// Its deployable's database id.
    pub deployable_id: i64,
    /// The handle's UUID.
    pub uuid: String,
    /// Attach type (`PCI`).
    pub attach_type: String,
    /// Attach info (JSON text; holds `managed` for PCI handles in release N+1).
    pub attach_info: String,
    /// Changes on every allocation, release, metadata or cleanup update.
    pub revision: i64,
    /// Allocated to a request.
    #[sqlx(try_from = "IntFlag")]
    pub in_use: bool,
    /// `None` (available), `cleaning` or `error`.
    #[sqlx(try_from = "ParsedOption<CleanupState>")]
    pub cleanup_state: Option<CleanupState>,
    /// Why the last cleanup failed.
    pub cleanup_reason: Option<String>,
    /// The device's database id (Cyborg's `AttachHandle.cpid_id`: accel keeps a device's
    /// control path in the device's own row).
    pub device_id: i64,
    /// The device's UUID.
    pub device_uuid: String,
    /// The device's type (`SSD`, ...).
    pub device_type: String,
    /// The physical function's PCI address.
    pub control_path_id: String,
    /// The device's host.
    pub hostname: String,
    /// The instance it is bound to, when allocated.
    pub instance_uuid: Option<String>,
}

/// The outcome of an agent's cleanup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CleanupResult {
    /// The device was erased and verified: available again.
    Clean,
    /// Cleanup failed or timed out: the device stays out of the pool (`error`).
    Failed(String),
}

/// A handle with its device and the instance of the request bound to it.
fn select(d: Dialect) -> String {
    format!(
        "SELECT h.id, h.deployable_id, h.uuid, {}, h.attach_info, h.revision, {}, \
         h.cleanup_state, h.cleanup_reason, v.id AS device_id, v.uuid AS device_uuid, {} AS device_type, \
         d.control_path_id, d.hostname, r.instance_uuid \
         FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
         JOIN devices v ON d.device_id = v.id \
         LEFT JOIN {} r ON r.attach_handle_id = h.id",
        d.text_as("h.attach_type"),
        d.flag_as("h.in_use"),
        d.text("v.type"),
        crate::db::ARQS,
    )
}

impl Db {
    /// Every attach handle of `host`, in one query (one RPC for an agent).
    pub async fn host_handles(&self, host: &str) -> Result<Vec<HostHandle>, DbError> {
        sqlx::query_as(&self.backend().sql(&format!(
            "{} WHERE d.hostname = $1 ORDER BY h.id",
            select(self.dialect())
        )))
        .bind(host)
        .fetch_all(self.pool())
        .await
        .map_err(read_error("attach_handles"))
    }

    /// The handles of `host` in `cleaning`: what its agent must (still) clean.
    pub async fn cleaning_handles(&self, host: &str) -> Result<Vec<HostHandle>, DbError> {
        sqlx::query_as(&self.backend().sql(&format!(
            "{} WHERE d.hostname = $1 AND h.cleanup_state = $2 ORDER BY h.id",
            select(self.dialect())
        )))
        .bind(host)
        .bind(CleanupState::Cleaning.as_str())
        .fetch_all(self.pool())
        .await
        .map_err(read_error("attach_handles"))
    }

    /// An operator puts a device whose cleanup failed back in the pool: each of its
    /// handles in `error` loses the state and the reason (the revision moves on, so an
    /// agent holding an older read loses). Only for a device the operator has dealt with
    /// by hand (erased and checked, or replaced): the failure meant its erase could not
    /// be verified. The handles cleared, none when none was in `error`;
    /// [`DbError::NotFound`] for an unknown device.
    pub async fn clear_failed_cleanup(
        &self,
        device_uuid: &str,
    ) -> Result<Vec<HostHandle>, DbError> {
        let device = self.device(device_uuid).await?;
        let failed: Vec<HostHandle> = self
            .host_handles(&device.hostname)
            .await?
            .into_iter()
            .filter(|h| {
                h.device_uuid == device.uuid && h.cleanup_state == Some(CleanupState::Error)
            })
            .collect();
        let mut cleared = Vec::with_capacity(failed.len());
        for h in failed {
            // Each only from `error` at the revision read: a concurrent change wins.
            let d = self.dialect();
            let done = sqlx::query(&d.sql(&format!(
                "UPDATE attach_handles SET cleanup_state = NULL, cleanup_reason = NULL, \
                 revision = revision + 1, updated_at = $1{} \
                 WHERE uuid = $2 AND revision = $3 AND cleanup_state = $4",
                d.ts()
            )))
            .bind(d.now())
            .bind(&h.uuid)
            .bind(h.revision)
            .bind(CleanupState::Error.as_str())
            .execute(self.pool())
            .await?
            .rows_affected();
            if done == 1 {
                tracing::warn!(device = device_uuid, handle = %h.uuid, reason = ?h.cleanup_reason,
                    "a failed cleanup was cleared by an operator: the device is allocatable again");
                cleared.push(self.host_handle(&h.uuid).await?);
            }
        }
        Ok(cleared)
    }

    /// One handle.
    pub async fn host_handle(&self, uuid: &str) -> Result<HostHandle, DbError> {
        sqlx::query_as(
            &self
                .backend()
                .sql(&format!("{} WHERE h.uuid = $1", select(self.dialect()))),
        )
        .bind(uuid)
        .fetch_optional(self.pool())
        .await
        .map_err(read_error("attach_handles"))?
        .ok_or_else(|| DbError::NotFound {
            kind: "attach handle",
            id: uuid.to_owned(),
        })
    }

    /// Replaces an unallocated handle's attach info if its revision is still
    /// `expected_revision`; the handle keeps its UUID. A handle that changed meanwhile is
    /// [`DbError::StaleHandle`], an allocated one [`DbError::HandleInUse`].
    pub async fn update_handle_info(
        &self,
        uuid: &str,
        expected_revision: i64,
        attach_info: &str,
    ) -> Result<HostHandle, DbError> {
        let d = self.dialect();
        let updated = sqlx::query(&d.sql(&format!(
            "UPDATE attach_handles SET attach_info = $1, revision = revision + 1, updated_at = $2{} \
             WHERE uuid = $3 AND revision = $4 AND in_use = {}",
            d.ts(),
            d.no()
        )))
        .bind(attach_info)
        .bind(d.now())
        .bind(uuid)
        .bind(expected_revision)
        .execute(self.pool())
        .await?
        .rows_affected();
        let current = self.host_handle(uuid).await?;
        if updated == 1 {
            return Ok(current);
        }
        // A retry of an update that already landed finds its own result.
        if current.revision == expected_revision + 1 && current.attach_info == attach_info {
            return Ok(current);
        }
        if current.in_use {
            return Err(DbError::HandleInUse {
                uuid: uuid.to_owned(),
                instance: current.instance_uuid.unwrap_or_else(|| "unknown".into()),
            });
        }
        Err(DbError::StaleHandle {
            uuid: uuid.to_owned(),
            expected: expected_revision,
            found: current.revision,
        })
    }

    /// An agent starts erasing a handle in `cleaning` at `expected_revision`, under
    /// `claim` (the claiming call's request id): the revision moves on (a second runner
    /// or a stale agent loses with [`DbError::StaleHandle`]) and the reason records the
    /// claim. The handle stays in `cleaning`, so an agent killed during the erase finds
    /// it again at its next start. A retry of the same claim that landed answers the
    /// same.
    pub async fn start_cleanup(
        &self,
        uuid: &str,
        expected_revision: i64,
        claim: &str,
    ) -> Result<HostHandle, DbError> {
        if claim.is_empty() {
            return Err(DbError::Invalid {
                what: "cleanup claim",
                why: "a cleanup is claimed by a request id, and it is empty".into(),
            });
        }
        let marker = started_marker(expected_revision, claim);
        let d = self.dialect();
        let updated = sqlx::query(&d.sql(&format!(
            "UPDATE attach_handles SET cleanup_reason = $1, revision = revision + 1, updated_at = $2{} \
             WHERE uuid = $3 AND revision = $4 AND cleanup_state = $5",
            d.ts()
        )))
        .bind(&marker)
        .bind(d.now())
        .bind(uuid)
        .bind(expected_revision)
        .bind(CleanupState::Cleaning.as_str())
        .execute(self.pool())
        .await?
        .rows_affected();
        let current = self.host_handle(uuid).await?;
        if updated == 1 {
            return Ok(current);
        }
        if current.revision == expected_revision + 1
            && current.cleanup_state == Some(CleanupState::Cleaning)
            && current.cleanup_reason.as_deref() == Some(marker.as_str())
        {
            return Ok(current);
        }
        if current.cleanup_state != Some(CleanupState::Cleaning) {
            return Err(not_cleaning(uuid, current.cleanup_state));
        }
        Err(DbError::StaleHandle {
            uuid: uuid.to_owned(),
            expected: expected_revision,
            found: current.revision,
        })
    }

    /// Records an agent's cleanup of a handle in `cleaning` at `expected_revision`:
    /// available again when clean, `error` (with the reason) otherwise. A retry of a
    /// result that already landed answers the same; any other state is
    /// [`DbError::NotCleaning`] or [`DbError::StaleHandle`].
    pub async fn finish_cleanup(
        &self,
        uuid: &str,
        expected_revision: i64,
        result: &CleanupResult,
    ) -> Result<HostHandle, DbError> {
        let (state, reason) = match result {
            CleanupResult::Clean => (None, None),
            CleanupResult::Failed(why) => (Some(CleanupState::Error), Some(stored_reason(why))),
        };
        let d = self.dialect();
        let updated = sqlx::query(&d.sql(&format!(
            "UPDATE attach_handles SET cleanup_state = $1, cleanup_reason = $2, \
             revision = revision + 1, updated_at = $3{} \
             WHERE uuid = $4 AND revision = $5 AND cleanup_state = $6",
            d.ts()
        )))
        .bind(state.map(CleanupState::as_str))
        .bind(reason)
        .bind(d.now())
        .bind(uuid)
        .bind(expected_revision)
        .bind(CleanupState::Cleaning.as_str())
        .execute(self.pool())
        .await?
        .rows_affected();
        let current = self.host_handle(uuid).await?;
        if updated == 1 {
            return Ok(current);
        }
        if current.revision == expected_revision + 1
            && current.cleanup_state == state
            && current.cleanup_reason.as_deref() == reason
        {
            return Ok(current);
        }
        if current.cleanup_state != Some(CleanupState::Cleaning) {
            return Err(not_cleaning(uuid, current.cleanup_state));
        }
        Err(DbError::StaleHandle {
            uuid: uuid.to_owned(),
            expected: expected_revision,
            found: current.revision,
        })
    }
}

/// The longest failure reason a handle keeps, in bytes (MySQL's column holds 4,096
/// characters); a longer one (an erase tool's whole output) keeps its start.
pub const MAX_CLEANUP_REASON: usize = 4000;

/// `why` as stored: at most [`MAX_CLEANUP_REASON`] bytes, cut at a character boundary.
fn stored_reason(why: &str) -> &str {
    if why.len() <= MAX_CLEANUP_REASON {
        return why;
    }
    let mut end = MAX_CLEANUP_REASON;
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    &why[..end]
}

/// A cleanup transition found the handle `state` instead of `cleaning`.
fn not_cleaning(uuid: &str, state: Option<CleanupState>) -> DbError {
    DbError::NotCleaning {
        uuid: uuid.to_owned(),
        state: state.map_or("none", CleanupState::as_str).to_owned(),
    }
}

/// The reason a handle in `cleaning` carries once an agent started erasing it at
/// `revision` under `claim` (deterministic, so a retried start recognises its own write
/// and no other runner's).
fn started_marker(revision: i64, claim: &str) -> String {
    format!("cleanup started at revision {revision} by request {claim}")
}
