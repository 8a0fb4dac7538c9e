//! [`Census`]: how many of each thing the database holds, in one read-only pass that
//! works on the schema release N and N+1 share (the cleanup columns are counted only
//! once accel's additions to Cyborg 17's schema, migration 101, have added them:
//! Cyborg 17's schema alone, release N's, has none). Operators' checks and the rolling-upgrade demo use
//! it to verify side effects in the database, not only API answers.

use crate::db::{Db, DbError};
use accel_objects::CleanupState;
use serde::Serialize;
use std::collections::BTreeMap;

/// What the database holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Census {
    /// Devices.
    pub devices: i64,
    /// Deployables.
    pub deployables: i64,
    /// Attach handles.
    pub attach_handles: i64,
    /// Attach handles allocated to a request.
    pub handles_in_use: i64,
    /// Attach handles in NVMe cleanup (`None` before the cleanup columns exist).
    pub handles_cleaning: Option<i64>,
    /// Attach handles whose cleanup failed (`None` before the cleanup columns exist).
    pub handles_failed_cleanup: Option<i64>,
    /// Device profiles.
    pub device_profiles: i64,
    /// Accelerator requests by state.
    pub arqs: BTreeMap<String, i64>,
}

impl Census {
    /// Accelerator requests in every state.
    pub fn arqs_total(&self) -> i64 {
        self.arqs.values().sum()
    }

    /// Accelerator requests in `state`.
    pub fn arqs_in(&self, state: &str) -> i64 {
        self.arqs.get(state).copied().unwrap_or(0)
    }
}

impl Db {
    async fn count(&self, sql: &str) -> Result<i64, DbError> {
        Ok(sqlx::query_scalar(&self.backend().sql(sql))
            .fetch_one(self.pool())
            .await?)
    }

    /// Handles in cleanup state `state`.
    async fn handles_in(&self, state: CleanupState) -> Result<i64, DbError> {
        Ok(sqlx::query_scalar(
            &self
                .backend()
                .sql("SELECT COUNT(*) AS n FROM attach_handles WHERE cleanup_state = $1"),
        )
        .bind(state.as_str())
        .fetch_one(self.pool())
        .await?)
    }

    /// Counts what the database holds.
    pub async fn census(&self) -> Result<Census, DbError> {
        let d = self.dialect();
        // The cleanup columns: accel's first addition to Cyborg's schema.
        let cleanup = self
            .applied_migrations()
            .await?
            .contains(&crate::db::FIRST_ADDITION);
        let mut arqs = BTreeMap::new();
        let counted: Vec<(String, i64)> = sqlx::query_as(&format!(
            "SELECT {} AS state, COUNT(*) AS n FROM {} GROUP BY state",
            d.text("state"),
            crate::db::ARQS
        ))
        .fetch_all(self.pool())
        .await?;
        arqs.extend(counted);
        Ok(Census {
            devices: self.count("SELECT COUNT(*) AS n FROM devices").await?,
            deployables: self.count("SELECT COUNT(*) AS n FROM deployables").await?,
            attach_handles: self
                .count("SELECT COUNT(*) AS n FROM attach_handles")
                .await?,
            handles_in_use: self
                .count(&format!(
                    "SELECT COUNT(*) AS n FROM attach_handles WHERE in_use = {}",
                    d.yes()
                ))
                .await?,
            handles_cleaning: match cleanup {
                true => Some(self.handles_in(CleanupState::Cleaning).await?),
                false => None,
            },
            handles_failed_cleanup: match cleanup {
                true => Some(self.handles_in(CleanupState::Error).await?),
                false => None,
            },
            device_profiles: self
                .count("SELECT COUNT(*) AS n FROM device_profiles")
                .await?,
            arqs,
        })
    }
}
