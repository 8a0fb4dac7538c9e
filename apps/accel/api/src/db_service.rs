//! [`DbService`]: [`AccelService`] over the conductor's database, reads and writes.
//!
//! Reads stay here for good: every API replica reads the database itself, so reads scale
//! with API replicas and never load the conductor. Its writes go to the database
//! directly, which suits tools and tests; a deployment serves
//! [`ConductorService`](crate::ConductorService), which keeps these reads and sends
//! writes through the conductor (releases must coordinate with the agents).

use crate::error::{retry_advice, ErrorKind, ServiceError};
use crate::service::{
    AccelService, ArqRow, AttributeRow, Binding, DeployableRow, DeviceProfileRow, DeviceRow,
    ListQuery, NewProfile,
};
use accel_conductor::db::ListFilter;
use accel_conductor::{Db, DbError};
use async_trait::async_trait;
use std::collections::BTreeSet;

/// The accel API's operations on the conductor's database.
#[derive(Clone, Debug)]
pub struct DbService {
    db: Db,
}

impl DbService {
    /// Serves from this database (connected and migrated by the caller).
    pub fn new(db: Db) -> DbService {
        DbService { db }
    }

    /// The database.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

impl From<DbError> for ServiceError {
    fn from(e: DbError) -> ServiceError {
        let kind = match &e {
            DbError::NotFound { .. } => ErrorKind::NotFound,
            DbError::Duplicate { .. } => ErrorKind::Duplicate,
            DbError::InvalidTransition { .. } => ErrorKind::InvalidTransition,
            DbError::NoFreeHandle { .. } => ErrorKind::NoFreeHandle,
            DbError::ProfileInUse(_) => ErrorKind::ProfileInUse,
            // What the database holds is damaged: not the client's fault.
            DbError::Corrupt { .. } => ErrorKind::Internal,
            DbError::Invalid { .. } => ErrorKind::BadRequest,
            DbError::UnsupportedUrl(_) => ErrorKind::Unavailable,
            // An outage (down, restarting, dropped, unreadable): retry later.
            e if e.is_unavailable() => ErrorKind::Unavailable,
            _ => ErrorKind::Internal,
        };
        let message = match kind {
            ErrorKind::Unavailable => {
                "the accel database cannot be reached; retry later".to_owned()
            }
            _ => e.to_string(),
        };
        ServiceError::with_source(kind, message, e)
    }
}

/// A write's error. The database going away during a write may have come after its
/// commit (or after the first of several steps), so the outcome is unknown, as when the
/// conductor answers `DatabaseUnavailable`: a plain 503 promises nothing was done.
/// `method` is the conductor method the write stands for (see [`retry_advice`]).
fn write_error(method: &'static str) -> impl FnOnce(DbError) -> ServiceError {
    move |e| {
        let unavailable = e.is_unavailable();
        let mut err = ServiceError::from(e);
        if unavailable {
            err.kind = ErrorKind::OutcomeUnknown;
            err.message = format!(
                "the accel database became unavailable during the write, which may have \
                 been applied before the connection dropped, so the outcome is unknown: {}",
                retry_advice(method)
            );
        }
        err
    }
}

/// The database's page of a list query.
fn filter(query: &ListQuery) -> ListFilter {
    ListFilter {
        host: None,
        limit: Some(query.limit.max(1)),
        marker: query.marker.clone(),
        project: query.project_id.clone(),
    }
}

impl DbService {
    async fn all_devices(&self, host: Option<String>) -> Result<Vec<DeviceRow>, DbError> {
        const PAGE: u32 = 1000;
        let mut all: Vec<DeviceRow> = Vec::new();
        loop {
            let page = self
                .db
                .devices(&ListFilter {
                    host: host.clone(),
                    limit: Some(PAGE),
                    marker: all.last().map(|d| d.uuid.clone()),
                    project: None,
                })
                .await?;
            let done = page.len() < PAGE as usize;
            all.extend(page);
            if done {
                return Ok(all);
            }
        }
    }

    /// A marker must name an existing row: a page after a row that is gone, or never was,
    /// would silently restart from the beginning.
    async fn check_marker<T, F, Fut>(
        &self,
        marker: Option<&str>,
        find: F,
    ) -> Result<(), ServiceError>
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = Result<T, DbError>>,
    {
        match marker {
            None => Ok(()),
            Some(m) => match find(m.to_owned()).await {
                Ok(_) => Ok(()),
                Err(DbError::NotFound { .. }) => {
                    Err(ServiceError::bad_request(format!("marker {m} not found")))
                }
                Err(e) => Err(e.into()),
            },
        }
    }

    /// Pages through the database until `limit` rows pass `keep` or the rows run out.
    async fn filtered<T, F, Fut>(
        &self,
        query: &ListQuery,
        mut fetch: F,
        uuid: fn(&T) -> &str,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<T>, ServiceError>
    where
        F: FnMut(ListFilter) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<T>, DbError>>,
    {
        let limit = query.limit.max(1);
        let mut out = Vec::new();
        let mut marker = query.marker.clone();
        loop {
            let page = fetch(ListFilter {
                host: query.hostname.clone(),
                limit: Some(limit),
                marker: marker.clone(),
                project: query.project_id.clone(),
            })
            .await?;
            let full = page.len() == limit as usize;
            marker = page.last().map(|row| uuid(row).to_owned());
            out.extend(page.into_iter().filter(|row| keep(row)));
            if out.len() >= limit as usize {
                out.truncate(limit as usize);
                return Ok(out);
            }
            if !full {
                return Ok(out);
            }
        }
    }
}

#[async_trait]
impl AccelService for DbService {
    async fn devices(&self, query: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError> {
        self.check_marker(query.marker.as_deref(), |m| async move {
            self.db.device(&m).await
        })
        .await?;
        let (wanted, vendor) = (query.device_type.clone(), query.vendor.clone());
        self.filtered(
            query,
            |f| async move { self.db.devices(&f).await },
            |d: &DeviceRow| d.uuid.as_str(),
            |d| {
                wanted.as_deref().is_none_or(|t| d.device_type == t)
                    && vendor.as_deref().is_none_or(|v| d.vendor == v)
            },
        )
        .await
    }

    async fn device(&self, uuid: &str) -> Result<DeviceRow, ServiceError> {
        Ok(self.db.device(uuid).await?)
    }

    async fn deployables(&self, query: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError> {
        self.check_marker(query.marker.as_deref(), |m| async move {
            self.db.deployable(&m).await
        })
        .await?;
        // With a type filter: the ids of that host's devices of that type.
        let device_ids: Option<BTreeSet<i64>> = match &query.device_type {
            None => None,
            Some(t) => Some(
                self.all_devices(query.hostname.clone())
                    .await?
                    .into_iter()
                    .filter(|d| &d.device_type == t)
                    .map(|d| d.id)
                    .collect(),
            ),
        };
        self.filtered(
            query,
            |f| async move { self.db.deployables(&f).await },
            |d: &DeployableRow| d.uuid.as_str(),
            |d| {
                device_ids
                    .as_ref()
                    .is_none_or(|ids| ids.contains(&d.device_id))
            },
        )
        .await
    }

    async fn deployable(&self, uuid: &str) -> Result<DeployableRow, ServiceError> {
        Ok(self.db.deployable(uuid).await?)
    }

    async fn profiles(&self, query: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError> {
        self.check_marker(query.marker.as_deref(), |m| async move {
            self.db.profile_by_uuid(&m).await
        })
        .await?;
        if query.names.is_empty() {
            return Ok(self.db.profiles_page(&filter(query)).await?);
        }
        self.filtered(
            query,
            |f| async move { self.db.profiles_page(&f).await },
            |p: &DeviceProfileRow| p.uuid.as_str(),
            |p| query.names.contains(&p.name),
        )
        .await
    }

    async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, ServiceError> {
        Ok(self.db.profile(name_or_uuid).await?)
    }

    async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<AttributeRow>, ServiceError> {
        self.check_marker(query.marker.as_deref(), |m| async move {
            self.db.attribute(&m).await
        })
        .await?;
        Ok(self
            .db
            .attributes(deployable_id, key, &filter(query))
            .await?)
    }

    async fn attribute(&self, uuid: &str) -> Result<AttributeRow, ServiceError> {
        Ok(self.db.attribute(uuid).await?)
    }

    async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, ServiceError> {
        self.db
            .create_attribute(deployable_id, key, value)
            .await
            .map_err(write_error("create_attribute"))
    }

    async fn delete_attribute(&self, uuid: &str) -> Result<(), ServiceError> {
        self.db
            .delete_attribute(uuid)
            .await
            .map_err(write_error("delete_attribute"))
    }

    async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, ServiceError> {
        self.db
            .set_device_maintaining(uuid, maintaining)
            .await
            .map_err(write_error("set_device_maintaining"))
    }

    async fn create_profile(&self, p: NewProfile) -> Result<DeviceProfileRow, ServiceError> {
        self.db
            .create_profile(&p.name, p.groups, p.description)
            .await
            .map_err(write_error("create_device_profile"))
    }

    async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), ServiceError> {
        self.db
            .delete_profile(name_or_uuid)
            .await
            .map_err(write_error("delete_device_profile"))
    }

    async fn create_arqs(
        &self,
        profile: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        let p = self.db.profile(profile).await?;
        self.db
            .create_arqs(&p.name, group_id, project_id)
            .await
            .map_err(write_error("create_arqs"))
    }

    async fn arqs(
        &self,
        instance_uuid: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        self.check_marker(
            query.marker.as_deref(),
            |m| async move { self.db.arq(&m).await },
        )
        .await?;
        Ok(self.db.arqs_page(instance_uuid, &filter(query)).await?)
    }

    async fn arq(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        Ok(self.db.arq(uuid).await?)
    }

    async fn bind(&self, uuid: &str, b: &Binding) -> Result<ArqRow, ServiceError> {
        self.db
            .bind_for(
                uuid,
                &b.hostname,
                &b.instance_uuid,
                b.device_rp_uuid.as_deref(),
                b.project.id(),
            )
            .await
            .map_err(write_error("bind_arq"))
    }

    async fn unbind(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        self.db
            .unbind(uuid)
            .await
            .map_err(write_error("unbind_arq"))
    }

    async fn delete_arqs(&self, uuids: &[String]) -> Result<(), ServiceError> {
        for uuid in uuids {
            self.db
                .delete_arq(uuid)
                .await
                .map_err(write_error("delete_arqs"))?;
        }
        Ok(())
    }

    async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<(), ServiceError> {
        self.db
            .delete_arqs_of_instance(instance_uuid)
            .await
            .map_err(write_error("delete_arqs"))?;
        Ok(())
    }
}
