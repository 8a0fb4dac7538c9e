//! [`AccelService`]: the operations behind the HTTP handlers.
//!
//! The handlers know only this trait: they parse and check the request, call one
//! operation, and shape its result for the microversion asked for. The trait speaks in
//! plain data (the conductor's serde row types, strings, [`ServiceError`]) and carries no
//! database types: [`DbService`](crate::DbService) is the database itself (tools and
//! tests), [`ConductorService`](crate::ConductorService) reads the database and sends
//! every write to the conductor over RPC (what `accel api` serves).

use crate::error::ServiceError;
use async_trait::async_trait;
use std::collections::BTreeMap;

pub use accel_conductor::db::{ArqRow, AttributeRow, DeployableRow, DeviceProfileRow, DeviceRow};
pub use accel_conductor::ArqState;

/// A page of a list (devices, deployables, device profiles, accelerator requests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Only this host's (devices and deployables).
    pub hostname: Option<String>,
    /// Only devices of this type (`GPU`, `FPGA`, ...); for deployables, of their device
    /// (devices and deployables).
    pub device_type: Option<String>,
    /// Only devices of this vendor (the PCI vendor ID as reported, `10de`), as Cyborg's
    /// `?vendor=`.
    pub vendor: Option<String>,
    /// Only profiles with one of these names (Cyborg's `?name=a,b`; empty: all). Nova
    /// looks a flavor's profile up this way and expects exactly one.
    pub names: Vec<String>,
    /// At most this many (the handlers always set it, 1 to the configured
    /// [`Limits::max_page_size`](crate::Limits::max_page_size)).
    pub limit: u32,
    /// Only those after the one with this UUID (which must exist).
    pub marker: Option<String>,
    /// Only accelerator requests of this project (project isolation: a caller that
    /// does not see every project's; other lists ignore it).
    pub project_id: Option<String>,
}

/// A device profile to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewProfile {
    /// Unique name.
    pub name: String,
    /// Groups, each asking for one device: `{"resources:FPGA": "1", "trait:X": "required"}`.
    pub groups: Vec<BTreeMap<String, String>>,
    /// Description.
    pub description: Option<String>,
}

/// Where an accelerator request is bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// The compute host.
    pub hostname: String,
    /// The instance the device is for.
    pub instance_uuid: String,
    /// Placement's resource provider of the device, when the caller knows it.
    pub device_rp_uuid: Option<String>,
    /// The project the request is for from now on (Cyborg 17 records one at bind).
    pub project: BindProject,
}

/// Which project a bind records, and how firmly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindProject {
    /// The patch's `/project_id` (an administrator's, microversion 2.1): recorded, or
    /// the bind refused.
    Patch(String),
    /// The binding caller's own project: recorded where every conductor takes it, else
    /// the request keeps its project.
    Caller(String),
    /// None known: the request keeps its project.
    Unchanged,
}

impl BindProject {
    /// The project to record, if any.
    pub fn id(&self) -> Option<&str> {
        match self {
            BindProject::Patch(p) | BindProject::Caller(p) => Some(p),
            BindProject::Unchanged => None,
        }
    }
}

/// The operations of the accel API.
///
/// Binding semantics every implementation keeps: `bind` of a request with no free device
/// of its type on the host fails with [`ErrorKind::NoFreeHandle`](crate::ErrorKind::NoFreeHandle)
/// and leaves the request `BindFailed` (it may be unbound, then bound again, or deleted);
/// deletes are idempotent.
#[async_trait]
pub trait AccelService: Send + Sync + 'static {
    /// A page of devices, oldest first.
    async fn devices(&self, query: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError>;
    /// One device.
    async fn device(&self, uuid: &str) -> Result<DeviceRow, ServiceError>;
    /// Takes a device out of service (`true`, Cyborg's disable) or puts it back
    /// (`false`, enable); the device as it is now. A service that cannot (an older
    /// release) answers 405, the default.
    async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, ServiceError> {
        let _ = (uuid, maintaining);
        Err(ServiceError::new(
            crate::ErrorKind::MethodNotAllowed,
            "device maintenance is not served by this release",
        ))
    }
    /// A page of deployables, oldest first.
    async fn deployables(&self, query: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError>;
    /// One deployable.
    async fn deployable(&self, uuid: &str) -> Result<DeployableRow, ServiceError>;

    /// A page of deployables' attributes, oldest first: only of the deployable with this
    /// database id, only with this key (Cyborg's `?deployable_id=`, `?key=`). A release
    /// without attributes answers 405, the default.
    async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<AttributeRow>, ServiceError> {
        let _ = (deployable_id, key, query);
        Err(no_attributes())
    }
    /// One attribute.
    async fn attribute(&self, uuid: &str) -> Result<AttributeRow, ServiceError> {
        let _ = uuid;
        Err(no_attributes())
    }
    /// Creates an attribute of the deployable with this database id.
    async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, ServiceError> {
        let _ = (deployable_id, key, value);
        Err(no_attributes())
    }
    /// Deletes an attribute.
    async fn delete_attribute(&self, uuid: &str) -> Result<(), ServiceError> {
        let _ = uuid;
        Err(no_attributes())
    }
    /// Programs the FPGA deployable `uuid` with the Glance image `bitstream`, through
    /// its host's agent.
    async fn program_deployable(&self, uuid: &str, bitstream: &str) -> Result<(), ServiceError> {
        let _ = (uuid, bitstream);
        Err(ServiceError::new(
            crate::ErrorKind::MethodNotAllowed,
            "FPGA programming needs the conductor (this service writes to the database only)",
        ))
    }

    /// A page of device profiles, by name.
    async fn profiles(&self, query: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError>;
    /// One device profile by name or UUID: text that parses as a UUID names the profile
    /// with that UUID if there is one, else the profile with that name
    /// ([`accel_conductor::Db::profile`]); the same rule for get, delete and request
    /// creation.
    async fn profile(&self, name_or_uuid: &str) -> Result<DeviceProfileRow, ServiceError>;
    /// Creates a device profile.
    async fn create_profile(&self, profile: NewProfile) -> Result<DeviceProfileRow, ServiceError>;
    /// Deletes a device profile no request uses.
    async fn delete_profile(&self, name_or_uuid: &str) -> Result<(), ServiceError>;

    /// Creates one request per group of the profile, or one for the given group.
    async fn create_arqs(
        &self,
        profile: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, ServiceError>;
    /// A page of requests, optionally of one instance, oldest first.
    async fn arqs(
        &self,
        instance_uuid: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<ArqRow>, ServiceError>;
    /// One request.
    async fn arq(&self, uuid: &str) -> Result<ArqRow, ServiceError>;
    /// Binds a request to a free device on the binding's host.
    async fn bind(&self, uuid: &str, binding: &Binding) -> Result<ArqRow, ServiceError>;
    /// Releases a request's device (idempotent).
    async fn unbind(&self, uuid: &str) -> Result<ArqRow, ServiceError>;
    /// Deletes requests; missing ones are ignored.
    async fn delete_arqs(&self, uuids: &[String]) -> Result<(), ServiceError>;
    /// Deletes every request of an instance; none is fine.
    async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<(), ServiceError>;
}

fn no_attributes() -> ServiceError {
    ServiceError::new(
        crate::ErrorKind::MethodNotAllowed,
        "attributes are not served by this release",
    )
}
