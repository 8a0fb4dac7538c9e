//! Devices, deployables and attach handles as the API and Placement read them, and an
//! operator's maintenance switch.

use super::sql::Sql;
use super::{read_error, rp_uuid, shown};
use super::{AttachHandleRow, ControlPathRow, Db, DbError, DeployableRow, DeviceRow, ListFilter};
use std::collections::BTreeMap;

/// One attribute of a deployable, as a deployable shows it.
#[derive(sqlx::FromRow)]
struct Attribute {
    deployable_id: i64,
    #[sqlx(try_from = "super::rows::Text")]
    key: String,
    #[sqlx(try_from = "super::rows::Text")]
    value: String,
}

/// What programming a deployable's FPGA needs of it ([`Db::fpga_target`]).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct FpgaTarget {
    /// Its UUID.
    pub uuid: String,
    /// Its driver (Cyborg's `fpga_program` names it).
    pub driver_name: Option<String>,
    /// The bitstream it was last programmed with at bind.
    pub bitstream_id: Option<String>,
}

impl Db {
    /// Devices, oldest first.
    pub async fn devices(&self, filter: &ListFilter) -> Result<Vec<DeviceRow>, DbError> {
        self.page("devices", &self.dialect().device_columns(), filter)
            .await
    }

    /// Every device of `host`, oldest first, however many.
    pub async fn devices_on(&self, host: &str) -> Result<Vec<DeviceRow>, DbError> {
        let mut sql = Sql::new(
            self.backend,
            format!(
                "SELECT {} FROM devices t WHERE hostname = ",
                self.dialect().device_columns()
            ),
        );
        sql.bind(host.to_owned()).push(" ORDER BY id");
        sql.fetch_all("devices", &self.pool).await
    }

    /// One device by UUID.
    pub async fn device(&self, uuid: &str) -> Result<DeviceRow, DbError> {
        self.one("devices", &self.dialect().device_columns(), "device", uuid)
            .await
    }

    /// Deployables, oldest first.
    pub async fn deployables(&self, filter: &ListFilter) -> Result<Vec<DeployableRow>, DbError> {
        let mut page = self
            .page("deployables", &self.dialect().deployable_columns(), filter)
            .await?;
        self.complete(&mut page).await?;
        Ok(page)
    }

    /// Every device and deployable of `hosts`, oldest first: what the Placement
    /// reconciler reads for the hosts that changed. A few queries for any number of
    /// hosts (each a list of hostnames, through the hostname indexes).
    pub async fn inventory_of_hosts(
        &self,
        hosts: &[String],
    ) -> Result<(Vec<DeviceRow>, Vec<DeployableRow>), DbError> {
        // Well below SQLite's and PostgreSQL's limits on bound values per statement.
        const HOSTS_PER_QUERY: usize = 500;
        let (mut devices, mut deployables) = (Vec::new(), Vec::new());
        for chunk in hosts.chunks(HOSTS_PER_QUERY) {
            let mut sql = Sql::new(
                self.backend,
                format!(
                    "SELECT {} FROM devices t WHERE hostname IN ",
                    self.dialect().device_columns()
                ),
            );
            sql.bind_list(chunk.to_vec()).push(" ORDER BY id");
            devices.extend(sql.fetch_all::<DeviceRow, _>("devices", &self.pool).await?);
            let mut sql = Sql::new(
                self.backend,
                format!(
                    "SELECT {} FROM deployables t WHERE hostname IN ",
                    self.dialect().deployable_columns()
                ),
            );
            sql.bind_list(chunk.to_vec()).push(" ORDER BY id");
            let mut page: Vec<DeployableRow> = sql.fetch_all("deployables", &self.pool).await?;
            self.complete(&mut page).await?;
            deployables.extend(page);
        }
        Ok((devices, deployables))
    }

    /// One deployable by UUID.
    pub async fn deployable(&self, uuid: &str) -> Result<DeployableRow, DbError> {
        let one = self
            .one(
                "deployables",
                &self.dialect().deployable_columns(),
                "deployable",
                uuid,
            )
            .await?;
        let mut page = vec![one];
        self.complete(&mut page).await?;
        Ok(page.remove(0))
    }

    /// Fills what a deployable row shows but does not store: its resource provider
    /// ([`rp_uuid`] of its name) and its attributes (one query for the page).
    async fn complete(&self, page: &mut [DeployableRow]) -> Result<(), DbError> {
        for d in page.iter_mut() {
            d.rp_uuid = rp_uuid(&d.name);
        }
        if page.is_empty() {
            return Ok(());
        }
        let mut sql = Sql::new(
            self.backend,
            "SELECT deployable_id, \"key\", value FROM attributes WHERE deployable_id IN ",
        );
        sql.bind_list(page.iter().map(|d| d.id).collect::<Vec<_>>());
        let mut by_id: BTreeMap<i64, BTreeMap<String, String>> = BTreeMap::new();
        for a in sql
            .fetch_all::<Attribute, _>("attributes", &self.pool)
            .await?
        {
            by_id
                .entry(a.deployable_id)
                .or_default()
                .insert(a.key, a.value);
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
        let d = self.dialect();
        let mut sql = Sql::new(
            self.backend,
            format!(
                "SELECT h.id, h.uuid, h.deployable_id, h.cpid_id, {}, {}, \
                 h.attach_info FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id",
                d.flag_as("h.in_use"),
                d.text_as("h.attach_type"),
            ),
        );
        if let Some(host) = host.filter(|h| !h.is_empty()) {
            sql.push(" WHERE d.hostname = ").bind(host.to_owned());
        }
        sql.push(" ORDER BY h.id");
        sql.fetch_all("attach_handles", &self.pool).await
    }

    /// The control paths of the devices of `host` (every host's if `None`), by id.
    pub async fn control_paths(&self, host: Option<&str>) -> Result<Vec<ControlPathRow>, DbError> {
        let mut sql = Sql::new(
            self.backend,
            format!(
                "SELECT c.id, c.uuid, c.device_id, {}, c.cpid_info \
                 FROM controlpath_ids c JOIN devices v ON c.device_id = v.id",
                self.dialect().text_as("c.cpid_type"),
            ),
        );
        if let Some(host) = host.filter(|h| !h.is_empty()) {
            sql.push(" WHERE v.hostname = ").bind(host.to_owned());
        }
        sql.push(" ORDER BY c.id");
        sql.fetch_all("controlpath_ids", &self.pool).await
    }

    /// What programming the deployable of database id `deployable_id` needs: its UUID,
    /// driver and the bitstream it was last programmed with (Cyborg's
    /// `deployables.bitstream_id`). One read.
    pub async fn fpga_target(&self, deployable_id: i64) -> Result<FpgaTarget, DbError> {
        let d = self.dialect();
        sqlx::query_as(&d.sql(&format!(
            "SELECT {}, {}, {} FROM deployables WHERE id = $1",
            d.text_as("uuid"),
            d.text_as("driver_name"),
            d.text_as("bitstream_id")
        )))
        .bind(deployable_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error("deployables"))?
        .ok_or_else(|| DbError::NotFound {
            kind: "deployable",
            id: deployable_id.to_string(),
        })
    }

    /// Records that a deployable now holds `bitstream`: Cyborg's `bitstream_id`, and its
    /// function's trait as the attribute `function_attribute` (`function_trait`; `None`:
    /// the attribute removed, the image naming no function). One transaction; the
    /// attribute's change marks the host for the Placement sync.
    pub async fn record_programmed(
        &self,
        deployable_id: i64,
        bitstream: &str,
        function_attribute: &str,
        function_trait: Option<&str>,
    ) -> Result<(), DbError> {
        let d = self.dialect();
        let at = d.now();
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(&d.sql(&format!(
            "UPDATE deployables SET bitstream_id = $1, updated_at = $2{} WHERE id = $3",
            d.ts()
        )))
        .bind(bitstream)
        .bind(&at)
        .bind(deployable_id)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(DbError::NotFound {
                kind: "deployable",
                id: deployable_id.to_string(),
            });
        }
        sqlx::query(&d.sql("DELETE FROM attributes WHERE deployable_id = $1 AND \"key\" = $2"))
            .bind(deployable_id)
            .bind(function_attribute)
            .execute(&mut *tx)
            .await?;
        if let Some(value) = function_trait {
            super::attributes::insert_attribute(
                &mut tx,
                d,
                deployable_id,
                function_attribute,
                value,
                &at,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Takes a device out of service or puts it back (Cyborg's disable and enable):
    /// a device in maintenance is given to no new request, and the requests bound to it
    /// keep it. Idempotent; the device as it is now.
    pub async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, DbError> {
        let d = self.dialect();
        // Cyborg's disable: its `status`.
        let query = format!(
            "UPDATE devices SET status = CASE WHEN $1 = 1 THEN 'maintaining' ELSE 'enabled' END, \
             updated_at = $2{} WHERE uuid = $3",
            d.ts()
        );
        let done = sqlx::query(&d.sql(&query))
            .bind(i64::from(maintaining))
            .bind(d.now())
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
