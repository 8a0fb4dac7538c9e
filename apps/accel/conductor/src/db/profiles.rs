//! Device profiles.

use super::sql::Sql;
use super::{check_len, new_uuid, page_limit, read_error, shown};
use super::{Backend, Db, DbError, DeviceProfileRow, ListFilter, ARQS};
use std::collections::BTreeMap;

impl Db {
    /// Creates a profile; each group must ask for one known device type.
    pub async fn create_profile(
        &self,
        name: &str,
        groups: Vec<BTreeMap<String, String>>,
        description: Option<String>,
    ) -> Result<DeviceProfileRow, DbError> {
        crate::groups::check_name(name)?;
        check_len("device profile description", description.as_deref())?;
        for (k, v) in groups.iter().flatten() {
            check_len("device profile group key", Some(k))?;
            check_len("device profile group value", Some(v))?;
        }
        if groups.is_empty() {
            return Err(DbError::Invalid {
                what: "device profile",
                why: "it needs at least one group".into(),
            });
        }
        let groups = groups
            .into_iter()
            .map(crate::groups::normalize)
            .collect::<Result<Vec<_>, _>>()?;
        let uuid = new_uuid();
        let d = self.dialect();
        let at = d.now();
        // Cyborg's `profile_json` as Cyborg's API writes it (`{"groups": [...]}`, Python's
        // `json.dumps` text).
        let stored = accel_cyborg17::schema::python_json(&serde_json::json!({ "groups": groups }));
        let id: i64 = sqlx::query_scalar(&d.sql(&format!(
            "INSERT INTO device_profiles (uuid, name, profile_json, description, created_at) VALUES ($1, $2, $3, $4, $5{}) RETURNING id",
            d.ts()
        )))
        .bind(&uuid)
        .bind(name)
        .bind(&stored)
        .bind(&description)
        .bind(&at)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| DbError::from_insert(e, "device profile", name))?;
        Ok(DeviceProfileRow {
            id,
            uuid,
            name: name.to_owned(),
            groups,
            description,
            created_at: d.shown_time(&at),
        })
    }

    /// Every profile, by name.
    pub async fn profiles(&self) -> Result<Vec<DeviceProfileRow>, DbError> {
        self.profiles_page(&ListFilter {
            limit: Some(u32::MAX),
            ..ListFilter::default()
        })
        .await
    }

    /// A page of profiles by name: those after the profile with UUID `filter.marker`,
    /// at most `filter.limit` (`filter.host` is ignored).
    pub async fn profiles_page(
        &self,
        filter: &ListFilter,
    ) -> Result<Vec<DeviceProfileRow>, DbError> {
        let mut sql = Sql::new(
            self.backend,
            format!(
                "SELECT {} FROM device_profiles",
                self.dialect().profile_columns()
            ),
        );
        // By name, so a marker that names no profile gives an empty page.
        if let Some(marker) = filter.marker.as_ref().filter(|m| !m.is_empty()) {
            sql.push(" WHERE name > (SELECT name FROM device_profiles WHERE uuid = ")
                .bind(marker.clone())
                .push(")");
        }
        sql.push(" ORDER BY name LIMIT ").bind(page_limit(filter));
        sql.fetch_all("device_profiles", &self.pool).await
    }

    /// One profile by name or UUID, the same way for every caller (get, delete, request
    /// creation), on both databases: text that parses as a UUID names the profile with
    /// that UUID when there is one, otherwise the profile with that name (as Cyborg,
    /// which looks a UUID-like text up as a UUID); any other text is a name. So a profile
    /// whose name is another profile's UUID is reached by its own UUID only.
    pub async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, DbError> {
        if let Ok(uuid) = uuid::Uuid::parse_str(name_or_uuid) {
            // Stored UUIDs are hyphenated lower case; any spelling that parses reaches them.
            let row = sqlx::query_as(&self.backend.sql(&format!(
                "SELECT {} FROM device_profiles WHERE uuid = $1",
                self.dialect().profile_columns()
            )))
            .bind(uuid.hyphenated().to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(read_error("device_profiles"))?;
            if let Some(row) = row {
                return Ok(row);
            }
        }
        self.profile_by_name(name_or_uuid).await
    }

    /// One profile by its UUID only.
    pub async fn profile_by_uuid(&self, uuid: &str) -> Result<DeviceProfileRow, DbError> {
        self.one(
            "device_profiles",
            &self.dialect().profile_columns(),
            "device profile",
            uuid,
        )
        .await
    }

    /// One profile by its name only (what a request records, `device_profile_name`).
    pub async fn profile_by_name(&self, name: &str) -> Result<DeviceProfileRow, DbError> {
        sqlx::query_as(&self.backend.sql(&format!(
            "SELECT {} FROM device_profiles WHERE name = $1",
            self.dialect().profile_columns()
        )))
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error("device_profiles"))?
        .ok_or_else(|| DbError::NotFound {
            kind: "device profile",
            id: shown(name),
        })
    }

    /// Deletes a profile no request uses.
    pub async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), DbError> {
        let profile = self.profile(name_or_uuid).await?;
        let mut tx = self.pool.begin().await?;
        // The profile's row locked first (`lock_profile`), so a request being created
        // from it either committed before (and is seen below) or waits and finds it gone.
        lock_profile(&mut tx, &profile).await?;
        let deleted = sqlx::query(&self.backend.sql(&format!(
            "DELETE FROM device_profiles WHERE id = $1 AND NOT EXISTS \
             (SELECT 1 FROM {ARQS} WHERE device_profile_id = $2)"
        )))
        .bind(profile.id)
        .bind(profile.id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        if deleted == 0 {
            return Err(DbError::ProfileInUse(profile.name));
        }
        Ok(())
    }
}

/// Locks a profile's row for the transaction, as its first statement: a no-op write,
/// which on PostgreSQL takes the row lock (a delete and a request creation from the
/// profile then run one after the other, the second seeing what the first committed)
/// and on SQLite the database's write lock. `NotFound` when the profile is gone.
pub(super) async fn lock_profile(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    profile: &DeviceProfileRow,
) -> Result<(), DbError> {
    let locked =
        sqlx::query(&Backend::of(tx).sql("UPDATE device_profiles SET name = name WHERE id = $1"))
            .bind(profile.id)
            .execute(&mut **tx)
            .await?
            .rows_affected();
    if locked == 0 {
        return Err(DbError::NotFound {
            kind: "device profile",
            id: shown(&profile.name),
        });
    }
    Ok(())
}
