//! The conductor's component versions live in its database (`component_versions`), so
//! a conductor's apparent version moves with the schema it describes: a restored backup
//! brings back the matching record, and every conductor of one deployment reads the
//! same one.

use crate::db::Db;
use async_trait::async_trait;
use sqlx::Row;
use verso_upgrade::store::{PersistedState, StoreError, VersionStore};

/// A [`VersionStore`] over the conductor's database: one row per component.
#[derive(Clone, Debug)]
pub struct DbVersionStore {
    db: Db,
    component: String,
}

impl DbVersionStore {
    /// The record of `component` (`conductor`) in `db`.
    pub fn new(db: Db, component: &str) -> Self {
        DbVersionStore {
            db,
            component: component.to_owned(),
        }
    }
}

fn backend(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Backend(Box::new(e))
}

#[async_trait]
impl VersionStore for DbVersionStore {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        let row = sqlx::query("SELECT record FROM component_versions WHERE component = $1")
            .bind(&self.component)
            .fetch_optional(self.db.pool())
            .await
            .map_err(backend)?;
        let Some(row) = row else { return Ok(None) };
        let text: String = row.try_get("record").map_err(backend)?;
        let state: PersistedState =
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                path: format!("component_versions/{}", self.component).into(),
                why: e.to_string(),
            })?;
        Ok(Some(state))
    }

    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        let text = serde_json::to_string(state).map_err(backend)?;
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        // One statement on both backends: insert, or replace the component's row.
        sqlx::query(
            "INSERT INTO component_versions (component, record, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (component) DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at",
        )
        .bind(&self.component)
        .bind(&text)
        .bind(&at)
        .execute(self.db.pool())
        .await
        .map_err(backend)?;
        Ok(())
    }
}
