//! Release N's conductor keeps its component versions where release N+1's does: one
//! row per component in `component_versions` (created by migration 1), the JSON of
//! verso-upgrade's [`PersistedState`]. So a database finalized by release N+1 says so to
//! release N, which then refuses to start.

use super::db::Db;
use async_trait::async_trait;
use sqlx::Row;
use verso_upgrade::store::{PersistedState, StoreError, VersionStore};

/// A [`VersionStore`] over release N's database.
#[derive(Clone, Debug)]
pub struct DbVersionStore {
    db: Db,
    component: String,
}

impl DbVersionStore {
    /// The record of `component` (`accel`) in `db`.
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
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: format!("component_versions/{}", self.component).into(),
                why: e.to_string(),
            })
    }

    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        let text = serde_json::to_string(state).map_err(backend)?;
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
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
