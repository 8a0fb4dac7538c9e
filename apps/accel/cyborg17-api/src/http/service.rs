//! [`AccelService`]: the operations behind the HTTP handlers, and the rows they speak.
//!
//! The handlers know only this trait: they parse and check the request, call one
//! operation, and shape its result for the microversion asked for. The trait speaks in
//! plain data (the rows below, strings, [`ServiceError`]); [`crate::CyborgApi`]
//! implements it on Cyborg 17's tables and conductor.
//!
//! Release N's frozen copy of what accel's N+1 crates had: `accel_api::service` and the
//! row types it took from `accel-conductor` (`accel_conductor::db`'s rows and
//! `ArqState`), trimmed to what release N's API shows, so release N does not change
//! when N+1's API or database does.

use crate::http::error::ServiceError;
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Device type.
    pub device_type: String,
    /// Vendor.
    pub vendor: String,
    /// Model.
    pub model: String,
    /// Board details.
    pub std_board_info: Option<String>,
    /// Host.
    pub hostname: String,
    /// Vendor board details.
    pub vendor_board_info: Option<String>,
    /// Taken out of service by an operator (Cyborg's `maintaining`, after
    /// `POST /v2/devices/{uuid}/disable`).
    pub maintaining: bool,
    /// Created, as shown.
    pub created_at: String,
    /// Last changed, as shown.
    pub updated_at: String,
}

/// A deployable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployableRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Name.
    pub name: String,
    /// Its device.
    pub device_id: i64,
    /// Host.
    pub hostname: String,
    /// Accelerators it offers.
    pub num_accelerators: i64,
    /// Driver.
    pub driver_name: Option<String>,
    /// Its resource provider in Placement.
    pub rp_uuid: String,
    /// Its attributes by key, as Cyborg shows them in a deployable's `attributes_list`.
    pub attributes: BTreeMap<String, String>,
    /// Creation time, as shown.
    pub created_at: String,
    /// Last change, as shown.
    pub updated_at: String,
}

/// An attribute of a deployable (Cyborg's `attributes` table and `/v2/attributes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable ([`DeployableRow::id`]).
    pub deployable_id: i64,
    /// Key (`rc`, `trait0`, ...), unique per deployable.
    pub key: String,
    /// Value.
    pub value: String,
    /// Creation time, as shown.
    pub created_at: String,
    /// Last change, as shown.
    pub updated_at: String,
}

/// A device profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProfileRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Unique name.
    pub name: String,
    /// Groups: each a map such as `{"resources:FPGA": "1", "trait:CUSTOM_X": "required"}`.
    pub groups: Vec<BTreeMap<String, String>>,
    /// Description.
    pub description: Option<String>,
    /// Created, as shown.
    pub created_at: String,
}

/// An accelerator request, with its attach handle when bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArqRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Lifecycle state.
    pub state: ArqState,
    /// Its profile.
    pub device_profile_name: String,
    /// The profile group it satisfies.
    pub device_profile_group_id: i64,
    /// Host, once binding.
    pub hostname: Option<String>,
    /// Resource provider, once binding.
    pub device_rp_uuid: Option<String>,
    /// Instance, once binding.
    pub instance_uuid: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// The handle's UUID, when bound.
    pub attach_handle_uuid: Option<String>,
    /// The handle's type, when bound.
    pub attach_handle_type: Option<String>,
    /// The handle's info, when bound.
    pub attach_handle_info: Option<String>,
    /// Created, as shown.
    pub created_at: Option<String>,
    /// Last changed, as shown.
    pub updated_at: Option<String>,
}

/// The state of an accelerator request (Cyborg's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArqState {
    /// Created, not bound.
    Initial,
    /// A bind is under way.
    BindStarted,
    /// Bound to an attach handle on a host.
    Bound,
    /// The bind failed (no free device); it may be unbound or deleted.
    BindFailed,
    /// Released; it may be bound again.
    Unbound,
    /// Releasing failed; it may be unbound again or deleted.
    UnbindFailed,
    /// Being deleted.
    Deleting,
}

impl ArqState {
    /// Every state.
    pub const ALL: [ArqState; 7] = [
        ArqState::Initial,
        ArqState::BindStarted,
        ArqState::Bound,
        ArqState::BindFailed,
        ArqState::Unbound,
        ArqState::UnbindFailed,
        ArqState::Deleting,
    ];

    /// The name stored in the database and shown by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ArqState::Initial => "Initial",
            ArqState::BindStarted => "BindStarted",
            ArqState::Bound => "Bound",
            ArqState::BindFailed => "BindFailed",
            ArqState::Unbound => "Unbound",
            ArqState::UnbindFailed => "UnbindFailed",
            ArqState::Deleting => "Deleting",
        }
    }
}

impl fmt::Display for ArqState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown accelerator request state {0:?}")]
pub struct UnknownArqState(pub String);

impl FromStr for ArqState {
    type Err = UnknownArqState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ArqState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownArqState(s.to_owned()))
    }
}

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
    /// [`Limits::max_page_size`](crate::http::Limits::max_page_size)).
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
/// of its type on the host fails with [`ErrorKind::NoFreeHandle`](crate::http::ErrorKind::NoFreeHandle)
/// and leaves the request `BindFailed` (it may be unbound, then bound again, or deleted);
/// deletes are idempotent.
#[async_trait]
pub trait AccelService: Send + Sync + 'static {
    /// A page of devices, oldest first.
    async fn devices(&self, query: &ListQuery) -> Result<Vec<DeviceRow>, ServiceError>;
    /// One device.
    async fn device(&self, uuid: &str) -> Result<DeviceRow, ServiceError>;
    /// Takes a device out of service (`true`, Cyborg's disable) or puts it back
    /// (`false`, enable); the device as it is now.
    async fn set_device_maintaining(
        &self,
        uuid: &str,
        maintaining: bool,
    ) -> Result<DeviceRow, ServiceError>;
    /// A page of deployables, oldest first.
    async fn deployables(&self, query: &ListQuery) -> Result<Vec<DeployableRow>, ServiceError>;
    /// One deployable.
    async fn deployable(&self, uuid: &str) -> Result<DeployableRow, ServiceError>;

    /// A page of deployables' attributes, oldest first: only of the deployable with this
    /// database id, only with this key (Cyborg's `?deployable_id=`, `?key=`).
    async fn attributes(
        &self,
        deployable_id: Option<i64>,
        key: Option<&str>,
        query: &ListQuery,
    ) -> Result<Vec<AttributeRow>, ServiceError>;
    /// One attribute.
    async fn attribute(&self, uuid: &str) -> Result<AttributeRow, ServiceError>;
    /// Creates an attribute of the deployable with this database id.
    async fn create_attribute(
        &self,
        deployable_id: i64,
        key: &str,
        value: &str,
    ) -> Result<AttributeRow, ServiceError>;
    /// Deletes an attribute.
    async fn delete_attribute(&self, uuid: &str) -> Result<(), ServiceError>;
    /// Programs the FPGA deployable `uuid` with the Glance image `bitstream`, through
    /// its host's agent.
    async fn program_deployable(&self, uuid: &str, bitstream: &str) -> Result<(), ServiceError>;

    /// A page of device profiles, by name.
    async fn profiles(&self, query: &ListQuery) -> Result<Vec<DeviceProfileRow>, ServiceError>;
    /// One device profile by name or UUID: text that parses as a UUID names the profile
    /// with that UUID if there is one, else the profile with that name
    /// (the same rule for get, delete and request creation).
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
