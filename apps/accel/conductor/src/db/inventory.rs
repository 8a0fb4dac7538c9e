//! Devices, deployables and attach handles as the API and Placement read them, and an
//! operator's maintenance switch.

use super::rows::{deployable_row, device_row};
use super::{now, shown, AttachHandleRow, Db, DbError, DeployableRow, DeviceRow, ListFilter};
use super::{DEPLOYABLE_COLUMNS, DEVICE_COLUMNS};
use sqlx::Row;
use std::collections::BTreeMap;
impl Db {
    /// Devices, oldest first.
    pub async fn devices(&self, filter: &ListFilter) -> Result<Vec<DeviceRow>, DbError> {
        self.page("devices", DEVICE_COLUMNS, filter, device_row)
            .await
    }

    /// One device by UUID.
    pub async fn device(&self, uuid: &str) -> Result<DeviceRow, DbError> {
        self.one("devices", DEVICE_COLUMNS, "device", uuid, device_row)
            .await
    }

    /// Deployables, oldest first.
    pub async fn deployables(&self, filter: &ListFilter) -> Result<Vec<DeployableRow>, DbError> {
        let mut page = self
            .page("deployables", DEPLOYABLE_COLUMNS, filter, deployable_row)
            .await?;
        self.with_attributes(&mut page).await?;
        Ok(page)
    }

    /// One deployable by UUID.
    pub async fn deployable(&self, uuid: &str) -> Result<DeployableRow, DbError> {
        let one = self
            .one(
                "deployables",
                DEPLOYABLE_COLUMNS,
                "deployable",
                uuid,
                deployable_row,
            )
            .await?;
        let mut page = vec![one];
        self.with_attributes(&mut page).await?;
        Ok(page.remove(0))
    }

    /// Fills each deployable's [`DeployableRow::attributes`] (one query for the page).
    async fn with_attributes(&self, page: &mut [DeployableRow]) -> Result<(), DbError> {
        if page.is_empty() {
            return Ok(());
        }
        let marks = (1..=page.len())
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT deployable_id, key, value FROM attributes WHERE deployable_id IN ({marks})"
        );
        let mut query = sqlx::query(&sql);
        for d in page.iter() {
            query = query.bind(d.id);
        }
        let mut by_id: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
        for r in query.fetch_all(&self.pool).await? {
            by_id
                .entry(r.try_get("deployable_id")?)
                .or_default()
                .insert(r.try_get("key")?, r.try_get("value")?);
        }
        for d in page.iter_mut() {
            d.attributes = by_id.remove(&d.id).unwrap_or_default();
        }
        Ok(())
    }

    /// Attach handles of one host (or all), oldest first.
    pub async fn attach_handles(
        &self,
        host: Option<&str>,
    ) -> Result<Vec<AttachHandleRow>, DbError> {
        let rows = sqlx::query(
            "SELECT h.id, h.uuid, h.deployable_id, h.in_use, h.attach_type, h.attach_info \
             FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
             WHERE ($1 = '' OR d.hostname = $2) ORDER BY h.id",
        )
        .bind(host.unwrap_or_default())
        .bind(host.unwrap_or_default())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AttachHandleRow {
                    id: r.try_get("id")?,
                    uuid: r.try_get("uuid")?,
                    deployable_id: r.try_get("deployable_id")?,
                    in_use: r.try_get::<i64, _>("in_use")? != 0,
                    attach_type: r.try_get("attach_type")?,
                    attach_info: r.try_get("attach_info")?,
                })
            })
            .collect()
    }

    /// Takes a device out of service or puts it back (Cyborg's disable and enable):
    /// a device in maintenance is given to no new request, and the requests bound to it
    /// keep it. Idempotent; the device as it is now.
    pub async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, DbError> {
        let done =
            sqlx::query("UPDATE devices SET maintaining = $1, updated_at = $2 WHERE uuid = $3")
                .bind(i64::from(maintaining))
                .bind(now())
                .bind(uuid)
                .execute(&self.pool)
                .await?;
        if done.rows_affected() == 0 {
            return Err(DbError::NotFound {
                kind: "device",
                id: shown(uuid),
            });
        }
        self.device(uuid).await
    }
}
