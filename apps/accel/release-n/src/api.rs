//! Release N's REST API: accel's Cyborg v2 HTTP API over release N's database (schema
//! N), serving microversion 2.0 only (2.1, the device `status` field, came with N+1).
//!
//! The HTTP layer is not the versioned part: it is `accel_api`'s router, pinned to 2.0
//! with [`accel_api::router_up_to`], over [`ReleaseNService`], an
//! [`accel_api::AccelService`] whose every operation is release N's own query
//! ([`crate::conductor::db`]). The row types of that trait are plain data the handlers
//! shape into JSON; nothing here crosses the RPC wire. Like release N+1's API, this one
//! does not migrate: it refuses a database without schema N, or one release N cannot run
//! on (see [`crate::conductor::StartError`]).

use crate::conductor::db::{self as ndb, Db, DbError};
use crate::conductor::{check_database, StartError, CONNECT_WAIT};
use crate::schema::SCHEMA_VERSION;
use accel_api::service::{ArqRow, ArqState, DeployableRow, DeviceProfileRow, DeviceRow};
use accel_api::{
    AccelService, ApiVersion, Binding, ErrorKind, ListQuery, NewProfile, ServiceError,
};
use async_trait::async_trait;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;

/// The newest microversion release N serves.
pub const MAX_MICROVERSION: ApiVersion = ApiVersion::new(2, 0);

/// [`AccelService`] over release N's database.
#[derive(Clone, Debug)]
pub struct ReleaseNService {
    db: Db,
}

impl ReleaseNService {
    /// Serves from `db` (schema N).
    pub fn new(db: Db) -> ReleaseNService {
        ReleaseNService { db }
    }
}

fn service_error(e: DbError) -> ServiceError {
    let kind = match &e {
        DbError::NotFound { .. } => ErrorKind::NotFound,
        DbError::Duplicate { .. } => ErrorKind::Duplicate,
        DbError::InvalidTransition { .. } => ErrorKind::InvalidTransition,
        DbError::NoFreeHandle { .. } => ErrorKind::NoFreeHandle,
        DbError::ProfileInUse(_) => ErrorKind::ProfileInUse,
        DbError::Invalid { what, .. } if what.starts_with("stored") => ErrorKind::Internal,
        DbError::Invalid { .. } => ErrorKind::BadRequest,
        DbError::UnsupportedUrl(_) | DbError::Connect { .. } => ErrorKind::Unavailable,
        DbError::Migrate(_) | DbError::Query(_) => ErrorKind::Internal,
    };
    let message = match kind {
        ErrorKind::Unavailable => "the accel database cannot be reached".to_owned(),
        _ => e.to_string(),
    };
    ServiceError::with_source(kind, message, e)
}

fn device(d: ndb::DeviceRow) -> Result<DeviceRow, ServiceError> {
    // The API's row types the status; release N stores the same names.
    let status = d
        .status
        .parse()
        .map_err(|e: accel_conductor::db::UnknownDeviceStatus| {
            ServiceError::new(ErrorKind::Internal, format!("stored devices.status: {e}"))
        })?;
    Ok(DeviceRow {
        id: d.id,
        uuid: d.uuid,
        device_type: d.device_type,
        vendor: d.vendor,
        model: d.model,
        std_board_info: d.std_board_info,
        hostname: d.hostname,
        vendor_board_info: d.vendor_board_info,
        status,
        // Release N has no device maintenance (release N+1's conductor API 1.3).
        maintaining: false,
        created_at: d.created_at,
        updated_at: d.updated_at,
    })
}

fn deployable(d: ndb::DeployableRow) -> DeployableRow {
    DeployableRow {
        // A function of the name (Cyborg's provider UUID), as release N+1 shows it.
        rp_uuid: accel_conductor::db::rp_uuid(&d.name),
        id: d.id,
        uuid: d.uuid,
        name: d.name,
        device_id: d.device_id,
        hostname: d.hostname,
        control_path_id: d.control_path_id,
        num_accelerators: d.num_accelerators,
        driver_name: d.driver_name,
        enabled: d.enabled,
        // Release N keeps no attributes (release N+1's migration 6).
        attributes: Default::default(),
        created_at: String::new(),
        updated_at: String::new(),
    }
}

fn profile(p: ndb::DeviceProfileRow) -> DeviceProfileRow {
    DeviceProfileRow {
        id: p.id,
        uuid: p.uuid,
        name: p.name,
        groups: p.groups,
        description: p.description,
        created_at: p.created_at,
    }
}

fn arq(r: ndb::ArqRow) -> Result<ArqRow, ServiceError> {
    let state = ArqState::from_str(r.state.as_str())
        .map_err(|e| ServiceError::with_source(ErrorKind::Internal, e.to_string(), e))?;
    Ok(ArqRow {
        id: r.id,
        uuid: r.uuid,
        state,
        device_profile_name: r.device_profile_name,
        device_profile_group_id: r.device_profile_group_id,
        hostname: r.hostname,
        device_rp_uuid: r.device_rp_uuid,
        instance_uuid: r.instance_uuid,
        project_id: r.project_id,
        attach_handle_uuid: r.attach_handle_uuid,
        attach_handle_type: r.attach_handle_type,
        attach_handle_info: r.attach_handle_info,
        // Release N's API shows no request timestamps.
        created_at: None,
        updated_at: None,
    })
}

/// One page of `rows` (oldest first): those after `marker` (which must be one of
/// them) that `keep` accepts, at most `limit`.
fn page<T>(
    rows: Vec<T>,
    query: &ListQuery,
    uuid: fn(&T) -> &str,
    keep: impl Fn(&T) -> bool,
) -> Result<Vec<T>, ServiceError> {
    let start = match &query.marker {
        None => 0,
        Some(m) => {
            rows.iter()
                .position(|r| uuid(r) == m)
                .ok_or_else(|| ServiceError::bad_request(format!("marker {m} not found")))?
                + 1
        }
    };
    Ok(rows
        .into_iter()
        .skip(start)
        .filter(|r| keep(r))
        .take(query.limit.max(1) as usize)
        .collect())
}

#[async_trait]
impl AccelService for ReleaseNService {
    async fn devices(&self, query: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError> {
        let rows: Vec<DeviceRow> = self
            .db
            .devices(query.hostname.as_deref())
            .await
            .map_err(service_error)?
            .into_iter()
            .map(device)
            .collect::<Result<_, _>>()?;
        let wanted = query.device_type.as_deref();
        page(
            rows,
            query,
            |d| &d.uuid,
            |d| wanted.is_none_or(|t| d.device_type == t),
        )
    }

    async fn device(&self, uuid: &str) -> Result<DeviceRow, ServiceError> {
        self.db
            .device(uuid)
            .await
            .map_err(service_error)
            .and_then(device)
    }

    async fn deployables(&self, query: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError> {
        let rows: Vec<DeployableRow> = self
            .db
            .deployables(query.hostname.as_deref())
            .await
            .map_err(service_error)?
            .into_iter()
            .map(deployable)
            .collect();
        let ids: Option<std::collections::BTreeSet<i64>> = match &query.device_type {
            None => None,
            Some(t) => Some(
                self.db
                    .devices(query.hostname.as_deref())
                    .await
                    .map_err(service_error)?
                    .into_iter()
                    .filter(|d| &d.device_type == t)
                    .map(|d| d.id)
                    .collect(),
            ),
        };
        page(
            rows,
            query,
            |d| &d.uuid,
            |d| ids.as_ref().is_none_or(|ids| ids.contains(&d.device_id)),
        )
    }

    async fn deployable(&self, uuid: &str) -> Result<DeployableRow, ServiceError> {
        self.db
            .deployable(uuid)
            .await
            .map(deployable)
            .map_err(service_error)
    }

    async fn profiles(&self, query: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError> {
        let rows: Vec<DeviceProfileRow> = self
            .db
            .profiles()
            .await
            .map_err(service_error)?
            .into_iter()
            .map(profile)
            .collect();
        page(rows, query, |p| &p.uuid, |_| true)
    }

    async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, ServiceError> {
        self.db
            .profile(name_or_uuid)
            .await
            .map(profile)
            .map_err(service_error)
    }

    async fn create_profile(&self, p: NewProfile) -> Result<DeviceProfileRow, ServiceError> {
        self.db
            .create_profile(&p.name, p.groups, p.description)
            .await
            .map(profile)
            .map_err(service_error)
    }

    async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), ServiceError> {
        self.db
            .delete_profile(name_or_uuid)
            .await
            .map_err(service_error)
    }

    async fn create_arqs(
        &self,
        profile_name: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        let p = self.db.profile(profile_name).await.map_err(service_error)?;
        let groups: Vec<i64> = match group_id {
            Some(g) => vec![g],
            None => (0..p.groups.len() as i64).collect(),
        };
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            let row = self
                .db
                .create_arq(&p.name, g, project_id)
                .await
                .map_err(service_error)?;
            out.push(arq(row)?);
        }
        Ok(out)
    }

    async fn arqs(
        &self,
        instance_uuid: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        let rows = self
            .db
            .arqs(instance_uuid)
            .await
            .map_err(service_error)?
            .into_iter()
            .map(arq)
            .collect::<Result<Vec<_>, _>>()?;
        page(rows, query, |a| &a.uuid, |_| true)
    }

    async fn arq(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        arq(self.db.arq(uuid).await.map_err(service_error)?)
    }

    async fn bind(&self, uuid: &str, b: &Binding) -> Result<ArqRow, ServiceError> {
        let row = self
            .db
            .bind(
                uuid,
                &b.hostname,
                &b.instance_uuid,
                b.device_rp_uuid.as_deref(),
            )
            .await
            .map_err(service_error)?;
        arq(row)
    }

    async fn unbind(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        arq(self.db.unbind(uuid).await.map_err(service_error)?)
    }

    async fn delete_arqs(&self, uuids: &[String]) -> Result<(), ServiceError> {
        for uuid in uuids {
            self.db.delete_arq(uuid).await.map_err(service_error)?;
        }
        Ok(())
    }

    async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<(), ServiceError> {
        for r in self
            .db
            .arqs(Some(instance_uuid))
            .await
            .map_err(service_error)?
        {
            self.db.delete_arq(&r.uuid).await.map_err(service_error)?;
        }
        Ok(())
    }
}

/// Release N's router over `db`: accel-api's handlers, microversion 2.0 only.
pub fn router(db: Db) -> Result<axum::Router, accel_api::microversion::VersionError> {
    accel_api::router_up_to(Arc::new(ReleaseNService::new(db)), MAX_MICROVERSION)
}

/// Why release N's API did not start.
#[derive(Debug, thiserror::Error)]
pub enum ApiStartError {
    /// The database is not one release N's API can serve.
    #[error("release N API: {0}")]
    Database(#[from] StartError),
    /// The database lacks schema N: the conductor creates it.
    #[error("release N API: the database has no accel schema (migration {SCHEMA_VERSION}): start release N's conductor on it first")]
    NoSchema,
    /// The listener could not be bound.
    #[error("release N API: cannot listen on {listen}: {source}")]
    Listen {
        /// The address asked for.
        listen: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The microversion range is not one this build of accel-api has.
    #[error("release N API: {0}")]
    Version(#[from] accel_api::microversion::VersionError),
}

/// A running release N API.
#[derive(Debug)]
pub struct RunningApi {
    addr: SocketAddr,
    db: Db,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl RunningApi {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Finishes the requests under way, stops listening and closes the database.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "release N API stopped with an error"),
            Err(e) => tracing::warn!(error = %e, "release N API task failed"),
        }
        self.db.close().await;
    }
}

/// Starts release N's API on `listen` (`127.0.0.1:0` for any port) over the database
/// at `database_url`, which release N's conductor has created.
pub async fn start(database_url: &str, listen: &str) -> Result<RunningApi, ApiStartError> {
    let db = Db::connect(database_url, CONNECT_WAIT)
        .await
        .map_err(StartError::from)?;
    let checked = async {
        check_database(&db, database_url).await?;
        if !db
            .applied_migrations()
            .await
            .map_err(StartError::from)?
            .contains(&SCHEMA_VERSION)
        {
            return Err(ApiStartError::NoSchema);
        }
        let router = router(db.clone())?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| ApiStartError::Listen {
                listen: listen.to_owned(),
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ApiStartError::Listen {
                listen: listen.to_owned(),
                source,
            })?;
        Ok((router, listener, addr))
    }
    .await;
    let (router, listener, addr) = match checked {
        Ok(x) => x,
        Err(e) => {
            db.close().await;
            return Err(e);
        }
    };
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = rx.await;
            })
            .await
    });
    Ok(RunningApi {
        addr,
        db,
        shutdown: Some(tx),
        task,
    })
}
