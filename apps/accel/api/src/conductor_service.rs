//! [`ConductorService`]: [`AccelService`] with reads from the database and writes through
//! the conductor's RPC API.
//!
//! This is what a deployment runs. Writes go to the conductor because some of them are
//! more than rows: releasing an NVMe device sends it through secure cleanup, which only
//! the conductor starts (it knows the finalized component version and the agent API cap).
//! An API writing the database itself would skip that. Reads stay on the database
//! ([`DbService`]): they are most of the traffic and scale with API replicas.
//!
//! After a write the row is read back from the database, so the API answers with what
//! was stored, in the same shape as every read.

use crate::db_service::DbService;
use crate::error::{retry_advice, ErrorKind, ServiceError};
use crate::service::{
    AccelService, ArqRow, AttributeRow, BindProject, Binding, DeployableRow, DeviceProfileRow,
    DeviceRow, ListQuery, NewProfile,
};
use accel_objects::errors::ErrorKind as RemoteKind;
use accel_objects::rpc::{
    BindArq, CreateArqs, CreateAttribute, CreateDeviceProfile, DeleteArqs, DeleteAttribute,
    DeleteDeviceProfile, ProgramDeployable, SetDeviceMaintaining, UnbindArq, ATTRIBUTES_VERSION,
    BIND_PROJECT_VERSION, DEVICE_MAINTENANCE_VERSION, PROGRAM_VERSION,
};
use async_trait::async_trait;
use verso::RequestContext;
use verso::Version;
use verso_rpc::{RpcClient, RpcError, RpcMethod};

/// The accel API's operations: reads from the database, writes through the conductor.
#[derive(Clone)]
pub struct ConductorService {
    reads: DbService,
    conductor: RpcClient,
}

impl ConductorService {
    /// Reads from `reads`' database; writes with `conductor`, a client of accel's
    /// `conductor` API (with the operator's cap applied by the caller).
    pub fn new(reads: DbService, conductor: RpcClient) -> ConductorService {
        ConductorService { reads, conductor }
    }

    /// The database reads come from.
    pub fn db_service(&self) -> &DbService {
        &self.reads
    }

    /// Refuses (503) a write whose conductor method is newer than the operator's cap.
    fn needs(&self, version: Version, what: &str) -> Result<(), ServiceError> {
        if self.conductor.can_send_version(version) {
            return Ok(());
        }
        Err(ServiceError::new(
            ErrorKind::Unavailable,
            format!(
                "{what} needs conductor API {version}; [upgrade_levels] conductor is {}: \
                 raise it once every conductor runs this release",
                self.conductor
                    .cap()
                    .map_or_else(|| "unset".to_owned(), |v| v.to_string())
            ),
        ))
    }

    async fn call<M: RpcMethod>(&self, method: M) -> Result<M::Reply, ServiceError> {
        let ctx = RequestContext::new(format!("req-api-{}", uuid::Uuid::new_v4()));
        self.conductor
            .call_method(&ctx, method)
            .await
            .map_err(|e| service_error(M::NAME, e))
    }
}

impl std::fmt::Debug for ConductorService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConductorService")
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

/// The row a write is answered with, read after the conductor made the change: when the
/// database cannot be read at that moment, the change is still made, so the answer must
/// not be a plain 503 (which says nothing was done).
fn read_back<T>(row: Result<T, ServiceError>) -> Result<T, ServiceError> {
    row.map_err(|e| match e.kind {
        ErrorKind::Unavailable => ServiceError {
            kind: ErrorKind::OutcomeUnknown,
            message: "the change was made, but reading it back failed (the database is \
                      unavailable): read the resource before doing anything else"
                .to_owned(),
            source: e.source,
        },
        _ => e,
    })
}

/// The conductor's typed errors as the API's; the kinds are accel's remote error kinds
/// (`accel_conductor::service::to_remote`).
fn service_error(method: &str, e: RpcError) -> ServiceError {
    let (kind, message) = match &e {
        RpcError::Remote(r) => {
            let kind = match RemoteKind::parse(&r.kind) {
                Some(RemoteKind::NotFound) => ErrorKind::NotFound,
                Some(RemoteKind::Duplicate) => ErrorKind::Duplicate,
                Some(RemoteKind::InvalidTransition) => ErrorKind::InvalidTransition,
                Some(RemoteKind::NoFreeHandle) => ErrorKind::NoFreeHandle,
                Some(RemoteKind::ProfileInUse) => ErrorKind::ProfileInUse,
                Some(RemoteKind::Invalid) => ErrorKind::BadRequest,
                Some(RemoteKind::ProgramFailed) => ErrorKind::ProgramFailed,
                // The database went away while the conductor wrote: the connection may
                // have dropped after the commit, so the write may be done.
                Some(RemoteKind::DatabaseUnavailable) => ErrorKind::OutcomeUnknown,
                _ => ErrorKind::Internal,
            };
            let message = if kind == ErrorKind::OutcomeUnknown {
                format!(
                    "{}; the database may have applied the change before the connection \
                     dropped, so the outcome is unknown: {}",
                    r.message,
                    retry_advice(method)
                )
            } else {
                r.message.clone()
            };
            (kind, message)
        }
        e if e.is_outcome_unknown() => (
            ErrorKind::OutcomeUnknown,
            format!(
                "the accel conductor took the request but its answer was lost ({}); the \
                 outcome is unknown: {}",
                match e {
                    RpcError::ServerSilent { .. } => "the conductor stopped answering",
                    RpcError::ConnectionLost { .. } => "the broker connection dropped",
                    _ => "no answer in time",
                },
                retry_advice(method)
            ),
        ),
        // Not run: the conductor dropped it because the deadline had passed.
        RpcError::DeadlineExpired { .. }
        | RpcError::Unreachable { .. }
        | RpcError::Transport { .. } => (
            ErrorKind::Unavailable,
            "the accel conductor cannot be reached".to_owned(),
        ),
        other => (ErrorKind::Internal, other.to_string()),
    };
    if matches!(
        kind,
        ErrorKind::Internal | ErrorKind::Unavailable | ErrorKind::OutcomeUnknown
    ) {
        tracing::error!(error = %e, "conductor call failed");
    }
    ServiceError::with_source(kind, message, e)
}

#[async_trait]
impl AccelService for ConductorService {
    async fn devices(&self, query: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError> {
        self.reads.devices(query).await
    }

    async fn device(&self, uuid: &str) -> Result<DeviceRow, ServiceError> {
        self.reads.device(uuid).await
    }

    async fn deployables(&self, query: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError> {
        self.reads.deployables(query).await
    }

    async fn deployable(&self, uuid: &str) -> Result<DeployableRow, ServiceError> {
        self.reads.deployable(uuid).await
    }

    async fn profiles(&self, query: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError> {
        self.reads.profiles(query).await
    }

    async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, ServiceError> {
        self.reads.profile(name_or_uuid).await
    }

    async fn create_profile(&self, profile: NewProfile) -> Result<DeviceProfileRow, ServiceError> {
        let name = profile.name.clone();
        self.call(CreateDeviceProfile {
            name: profile.name,
            groups: profile.groups,
            description: profile.description,
        })
        .await?;
        // By name only: the new profile's name may be another profile's UUID.
        let row = self.reads.db().profile_by_name(&name).await;
        read_back(row.map_err(ServiceError::from))
    }

    async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<AttributeRow>, ServiceError> {
        self.reads.attributes(deployable_id, key, query).await
    }

    async fn attribute(&self, uuid: &str) -> Result<AttributeRow, ServiceError> {
        self.reads.attribute(uuid).await
    }

    async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, ServiceError> {
        self.needs(ATTRIBUTES_VERSION, "attributes")?;
        let uuid = self
            .call(CreateAttribute {
                deployable_id,
                key: key.to_owned(),
                value: value.to_owned(),
            })
            .await?;
        read_back(self.reads.attribute(&uuid).await)
    }

    async fn program_deployable(&self, uuid: &str, bitstream: &str) -> Result<(), ServiceError> {
        self.needs(PROGRAM_VERSION, "FPGA programming")?;
        self.call(ProgramDeployable {
            deployable_uuid: uuid.to_owned(),
            bitstream_uuid: bitstream.to_owned(),
        })
        .await
    }

    async fn delete_attribute(&self, uuid: &str) -> Result<(), ServiceError> {
        self.needs(ATTRIBUTES_VERSION, "attributes")?;
        self.call(DeleteAttribute {
            uuid: uuid.to_owned(),
        })
        .await
    }

    async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, ServiceError> {
        self.needs(DEVICE_MAINTENANCE_VERSION, "device maintenance")?;
        self.call(SetDeviceMaintaining {
            uuid: uuid.to_owned(),
            maintaining,
        })
        .await?;
        read_back(self.reads.device(uuid).await)
    }

    async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), ServiceError> {
        self.call(DeleteDeviceProfile {
            name: name_or_uuid.to_owned(),
        })
        .await
    }

    async fn create_arqs(
        &self,
        profile: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        let created = self
            .call(CreateArqs {
                device_profile_name: profile.to_owned(),
                group_id,
                project_id: project_id.map(str::to_owned),
            })
            .await?;
        let mut rows = Vec::new();
        for arq in verso::ObjectList::iter(&created) {
            let uuid = arq.uuid.get().ok_or_else(|| {
                ServiceError::new(
                    ErrorKind::Internal,
                    "the conductor returned an accelerator request without a uuid",
                )
            })?;
            rows.push(read_back(self.reads.arq(&uuid.to_string()).await)?);
        }
        Ok(rows)
    }

    async fn arqs(
        &self,
        instance_uuid: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<ArqRow>, ServiceError> {
        self.reads.arqs(instance_uuid, query).await
    }

    async fn arq(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        self.reads.arq(uuid).await
    }

    async fn bind(&self, uuid: &str, binding: &Binding) -> Result<ArqRow, ServiceError> {
        // The binding caller's own project is recorded once every conductor takes it
        // (until then the request keeps the project it was created with, as before); an
        // administrator's explicit one is refused rather than dropped.
        let project_id = match &binding.project {
            BindProject::Patch(p) => {
                self.needs(BIND_PROJECT_VERSION, "a bind's /project_id")?;
                Some(p.clone())
            }
            BindProject::Caller(p) => {
                Some(p.clone()).filter(|_| self.conductor.can_send_version(BIND_PROJECT_VERSION))
            }
            BindProject::Unchanged => None,
        };
        self.call(BindArq {
            uuid: uuid.to_owned(),
            hostname: binding.hostname.clone(),
            instance_uuid: binding.instance_uuid.clone(),
            device_rp_uuid: binding.device_rp_uuid.clone(),
            project_id,
        })
        .await?;
        read_back(self.reads.arq(uuid).await)
    }

    async fn unbind(&self, uuid: &str) -> Result<ArqRow, ServiceError> {
        self.call(UnbindArq {
            uuid: uuid.to_owned(),
        })
        .await?;
        read_back(self.reads.arq(uuid).await)
    }

    async fn delete_arqs(&self, uuids: &[String]) -> Result<(), ServiceError> {
        self.call(DeleteArqs {
            uuids: uuids.to_vec(),
            instance_uuid: None,
        })
        .await
        .map(drop)
    }

    async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<(), ServiceError> {
        self.call(DeleteArqs {
            uuids: Vec::new(),
            instance_uuid: Some(instance_uuid.to_owned()),
        })
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn silent() -> RpcError {
        RpcError::ServerSilent {
            method: "m".into(),
            topic: "accel-conductor".into(),
            after: Duration::from_secs(10),
        }
    }

    #[test]
    fn an_unknown_outcome_says_whether_retrying_is_safe() {
        for method in [
            "bind_arq",
            "unbind_arq",
            "delete_arqs",
            "delete_device_profile",
        ] {
            let e = service_error(method, silent());
            assert_eq!(e.kind, ErrorKind::OutcomeUnknown, "{method}");
            assert!(
                e.message.contains("retrying is safe"),
                "{method}: {}",
                e.message
            );
        }
        let e = service_error("create_arqs", silent());
        assert_eq!(e.kind, ErrorKind::OutcomeUnknown);
        assert!(e.message.contains("do not retry blindly"), "{}", e.message);
        let timeout = RpcError::Timeout {
            method: "bind_arq".into(),
            topic: "accel-conductor".into(),
            timeout: Duration::from_secs(60),
        };
        assert_eq!(
            service_error("bind_arq", timeout).kind,
            ErrorKind::OutcomeUnknown
        );
        assert_eq!(ErrorKind::OutcomeUnknown.status().as_u16(), 503);
        // Dropped unrun by the conductor, or never sent: a plain 503, retry later.
        let dropped = RpcError::DeadlineExpired {
            method: "bind_arq".into(),
            late_ms: 10,
        };
        assert_eq!(
            service_error("bind_arq", dropped).kind,
            ErrorKind::Unavailable
        );
        // The conductor's database dropped during the write: maybe committed.
        let db_gone = RpcError::Remote(Box::new(verso_rpc::RemoteError::new(
            "DatabaseUnavailable",
            "accel",
            "the conductor's database cannot be reached",
        )));
        let e = service_error("create_device_profile", db_gone);
        assert_eq!(e.kind, ErrorKind::OutcomeUnknown);
        assert!(e.message.contains("409 Duplicate"), "{}", e.message);
    }
}
