//! Cyborg's deployable attributes (`/v2/attributes`).

use super::sql::Sql;
use super::Dialect;
use super::{after_marker, new_uuid, page_limit};
use super::{AttributeRow, Db, DbError, ListFilter};

impl Db {
    /// A page of attributes, oldest first, as Cyborg's `GET /v2/attributes`: only of the
    /// deployable with this id, only with this key (either, both or neither).
    pub async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        filter: &ListFilter,
    ) -> Result<Vec<AttributeRow>, DbError> {
        let mut sql = Sql::new(
            self.backend,
            format!(
                "SELECT {} FROM attributes a WHERE 1 = 1",
                self.dialect().attribute_columns()
            ),
        );
        if let Some(id) = deployable_id {
            sql.push(" AND a.deployable_id = ").bind(id);
        }
        if let Some(key) = key.filter(|k| !k.is_empty()) {
            sql.push(" AND a.key = ").bind(key.to_owned());
        }
        after_marker(&mut sql, "attributes", "a", filter);
        sql.push(" ORDER BY a.id LIMIT ").bind(page_limit(filter));
        sql.fetch_all("attributes", &self.pool).await
    }

    /// One attribute by UUID.
    pub async fn attribute(&self, uuid: &str) -> Result<AttributeRow, DbError> {
        self.one(
            "attributes",
            &self.dialect().attribute_columns(),
            "attribute",
            uuid,
        )
        .await
    }

    /// Creates an attribute of the deployable with this id (Cyborg's `POST
    /// /v2/attributes`): `NotFound` if there is no such deployable, `Duplicate` if it
    /// has the key. A key its host's agent reports is the report's: the next applied
    /// report sets its value ([`ReportedDevice::attributes`](super::ReportedDevice::attributes)).
    pub async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, DbError> {
        let mut tx = self.pool.begin().await?;
        let exists: Option<i64> =
            sqlx::query_scalar(&self.backend.sql("SELECT id FROM deployables WHERE id = $1"))
                .bind(deployable_id)
                .fetch_optional(&mut *tx)
                .await?;
        if exists.is_none() {
            return Err(DbError::NotFound {
                kind: "deployable",
                id: deployable_id.to_string(),
            });
        }
        let d = self.dialect();
        let row = match insert_attribute(&mut tx, d, deployable_id, key, value, &d.now()).await {
            // The key is taken: `UNIQUE (deployable_id, key)` decides, concurrent
            // creates included.
            Err(DbError::Query(sqlx::Error::Database(e))) if e.is_unique_violation() => {
                return Err(DbError::Duplicate {
                    kind: "attribute",
                    name: key.to_owned(),
                })
            }
            other => other?,
        };
        tx.commit().await?;
        Ok(row)
    }

    /// Deletes an attribute by UUID; `NotFound` if there is none. A key its host's agent
    /// reports comes back with the host's next report.
    pub async fn delete_attribute(&self, uuid: &str) -> Result<(), DbError> {
        let done = sqlx::query(&self.backend.sql("DELETE FROM attributes WHERE uuid = $1"))
            .bind(uuid)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 0 {
            return Err(DbError::NotFound {
                kind: "attribute",
                id: uuid.to_owned(),
            });
        }
        Ok(())
    }
}

pub(super) async fn insert_attribute(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    deployable_id: i64,
    key: &str,
    value: &str,
    at: &str,
) -> Result<AttributeRow, DbError> {
    let uuid = new_uuid();
    let id: i64 = sqlx::query_scalar(&d.sql(&format!(
        "INSERT INTO attributes (uuid, deployable_id, \"key\", value, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5{ts}, $6{ts}) RETURNING id",
        ts = d.ts()
    )))
    .bind(&uuid)
    .bind(deployable_id)
    .bind(key)
    .bind(value)
    .bind(at)
    .bind(at)
    .fetch_one(&mut **tx)
    .await?;
    Ok(AttributeRow {
        id,
        uuid,
        deployable_id,
        key: key.to_owned(),
        value: value.to_owned(),
        created_at: d.shown_time(at),
        updated_at: d.shown_time(at),
    })
}
