//! accel's versioned objects: what the conductor, the agents and the API exchange, in
//! namespace `cyborg` with oslo.versionedobjects' wire form, so a Python agent written
//! with oslo.versionedobjects on this model talks to an accel conductor.
//!
//! The model starts from the Cyborg classes of the golden vectors (`Device` 1.2,
//! `Deployable` 1.1, `AttachHandle` 1.2 and their lists) and grows by version bumps,
//! each recorded in `objects.lock` beside this crate (`cargo run -p accel-objects
//! --example verso-accel -- objects check`):
//! - `Deployable` 1.2 adds `control_path_id` (the PCI address the conductor keys
//!   reports by); `DeployableList` 1.1 gains `child_versions`;
//! - `AttachHandleList` 1.2 gains `child_versions`;
//! - `AttachHandle` 1.3 carries the PCI managed mode, a revision and the cleanup state;
//!   1.4 adds the remotable methods of the driver features (`update_managed`, the
//!   cleanup transitions), `AttachHandleList` 1.4 its remotable lookups (`get_by_host`,
//!   `get_cleaning`): their bodies run on the conductor through [`store`];
//! - new: `DeviceProfile`, `AcceleratorRequest`, and the report an agent sends
//!   (`DriverDevice` with its `DriverAttachHandle`s), each with a list.
//!
//! [`cyborg`] is release N+1 on OpenStack Cyborg 17's wire: Cyborg 17's contracts
//! (`accel-cyborg17`, release N, frozen) with the seed spec's version bumps and object
//! indirection (conductor RPC 1.1, agent RPC 1.1), pinned by `cyborg.lock`.
//!
//! [`rpc`] declares accel's RPC APIs. This crate has no database: the agent depends on
//! it and must stay free of one; the remotable bodies reach the conductor's database
//! through the [`store::HandleStore`] its request contexts carry, and fail with the
//! kinds of [`errors`].

pub mod cyborg;
pub mod errors;
pub mod rpc;
pub mod store;
pub mod traits;

verso_upgrade::component_versions! {
    /// accel's component versions, shared by the conductor and its agents (the conductor
    /// finalizes first, then tells the agents in their heartbeat replies).
    pub enum AccelVersion: "accel" {
        /// Release N: inventory, profiles, accelerator requests.
        Initial = 1 => "release N",
        /// Release N+1: object indirection, PCI managed-mode metadata, NVMe secure cleanup.
        DriverFeatures = 2 => "release N+1 driver features",
    }
}

use std::collections::BTreeMap;
use uuid::Uuid;
use verso::indirection::CallError;
use verso::{
    DateTime, Field, ObjectMeta, Registry, RequestContext, VersionedEnum, VersionedObject,
};

/// The project namespace of every class here.
pub const NAMESPACE: &str = "cyborg";

/// Accelerator device types.
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceType {
    /// A GPU.
    #[verso(value = "GPU")]
    Gpu,
    /// An FPGA.
    #[verso(value = "FPGA")]
    Fpga,
    /// An AI accelerator chip.
    #[verso(value = "AICHIP")]
    AiChip,
    /// Intel QuickAssist.
    #[verso(value = "QAT")]
    Qat,
    /// A smart NIC.
    #[verso(value = "NIC")]
    Nic,
    /// An NVMe SSD.
    #[verso(value = "SSD")]
    Ssd,
}

/// Whether the host manages the device (PCI managed mode).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagedMode {
    /// Managed by the host.
    #[verso(value = "managed")]
    Managed,
    /// Not managed (the default).
    #[verso(value = "unmanaged")]
    Unmanaged,
}

/// How an accelerator is attached to an instance.
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachType {
    /// PCI passthrough.
    #[verso(value = "PCI")]
    Pci,
    /// A mediated device.
    #[verso(value = "MDEV")]
    Mdev,
    /// Test PCI.
    #[verso(value = "TEST_PCI")]
    TestPci,
}

/// A physical accelerator on a host.
///
/// 1.0 initial; 1.1 added `vendor_board_info`; 1.2 added `managed_mode`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.2")]
pub struct Device {
    /// Database id.
    pub id: Field<i64>,
    /// Stable id.
    pub uuid: Field<Uuid>,
    /// Device type.
    pub r#type: Field<DeviceType>,
    /// PCI vendor id.
    pub vendor: Field<String>,
    /// Model name.
    pub model: Field<String>,
    /// Standard board information (JSON text).
    pub std_board_info: Field<Option<String>>,
    /// The host the device is on.
    pub hostname: Field<String>,
    /// Vendor board information.
    #[verso(since = "1.1")]
    pub vendor_board_info: Field<Option<String>>,
    /// PCI managed mode.
    #[verso(since = "1.2", default = ManagedMode::Unmanaged)]
    pub managed_mode: Field<ManagedMode>,
    /// Creation time.
    pub created_at: Field<Option<DateTime>>,
    /// Last update time.
    pub updated_at: Field<Option<DateTime>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A deployable unit of a device (a physical function with its virtual functions).
///
/// 1.0 initial; 1.1 added `labels`, `utilization`; 1.2 added `control_path_id`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.2")]
pub struct Deployable {
    /// Database id.
    pub id: Field<i64>,
    /// Stable id.
    pub uuid: Field<Uuid>,
    /// Name.
    pub name: Field<String>,
    /// The device it belongs to.
    pub device_id: Field<i64>,
    /// How many accelerators it offers.
    pub num_accelerators: Field<i64>,
    /// Driver name.
    pub driver_name: Field<Option<String>>,
    /// Free-form attributes.
    #[verso(default = BTreeMap::new())]
    pub attributes: Field<BTreeMap<String, String>>,
    /// Whether it may be scheduled.
    #[verso(default = true)]
    pub enabled: Field<bool>,
    /// Creation time.
    pub created_at: Field<Option<DateTime>>,
    /// Labels.
    #[verso(since = "1.1", default = Vec::<String>::new())]
    pub labels: Field<Vec<String>>,
    /// Utilization, 0.0 to 1.0.
    #[verso(since = "1.1", default = 0.0)]
    pub utilization: Field<f64>,
    /// The PCI address of its physical function.
    #[verso(since = "1.2")]
    pub control_path_id: Field<Option<String>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// How one accelerator is attached.
///
/// 1.0 initial; 1.1 added `device` (Device 1.1); 1.2 Device 1.2; 1.3 added `revision`,
/// `cleanup_state`, `instance_uuid`, and the PCI managed mode in `attach_info`
/// (`"managed": "yes" | "no"`), which a backport below 1.3 removes: older peers see the
/// old form and assume `yes`, as before; 1.4 added the remotable methods
/// `update_managed`, `cleanup_started`, `cleanup_succeeded`, `cleanup_failed`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.4", remotable, make_compatible = attach_handle_compatible)]
pub struct AttachHandle {
    /// Database id.
    pub id: Field<i64>,
    /// Stable id.
    pub uuid: Field<Uuid>,
    /// The deployable it belongs to.
    pub deployable_id: Field<i64>,
    /// Whether it is attached.
    #[verso(default = false)]
    pub in_use: Field<bool>,
    /// Attach type.
    pub attach_type: Field<AttachType>,
    /// Attach information (JSON text).
    pub attach_info: Field<String>,
    /// The device, when loaded.
    #[verso(since = "1.1", relationships = [("1.1", "1.1"), ("1.2", "1.2"), ("1.3", "1.2"), ("1.4", "1.2")])]
    pub device: Field<Option<Device>>,
    /// Changes with every allocation, release, metadata or cleanup update: the
    /// compare-and-swap token of `update_managed` and the cleanup results.
    #[verso(since = "1.3", default = 0)]
    pub revision: Field<i64>,
    /// `cleaning` (a released NVMe device being erased) or `error` (cleanup failed);
    /// `None` when available.
    #[verso(since = "1.3")]
    pub cleanup_state: Field<Option<String>>,
    /// The instance it is bound to, when allocated.
    #[verso(since = "1.3")]
    pub instance_uuid: Field<Option<String>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// The managed mode recorded in an attach handle's info (`yes` when absent: the form
/// before 1.3 and the libvirt default).
pub fn attach_info_managed(attach_info: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(attach_info)
        .ok()
        .and_then(|v| v.get("managed").and_then(|m| m.as_str().map(|m| m != "no")))
        .unwrap_or(true)
}

/// `attach_info` with the managed mode set; `None` when `attach_info` is not a JSON
/// object (a PCI address), which a mode must never replace.
pub fn attach_info_with_managed(attach_info: &str, managed: bool) -> Option<String> {
    let mut v = serde_json::from_str::<serde_json::Value>(attach_info)
        .ok()
        .filter(serde_json::Value::is_object)?;
    v["managed"] = serde_json::Value::from(if managed { "yes" } else { "no" });
    Some(v.to_string())
}

/// AttachHandle's backport: the default rules, and below 1.3 the managed mode leaves
/// `attach_info` (an old peer would not expect the key).
fn attach_handle_compatible(
    obj: &AttachHandle,
    data: &mut verso::PrimitiveData,
    target: &verso::Version,
    manifest: Option<&verso::VersionManifest>,
) -> verso::Result<()> {
    verso::default_make_compatible(obj, data, target, manifest)?;
    if *target < verso::Version::new(1, 3) {
        if let Some(serde_json::Value::String(info)) = data.get_mut("attach_info") {
            if let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str(info) {
                if map.remove("managed").is_some() {
                    *info = serde_json::Value::Object(map).to_string();
                }
            }
        }
    }
    Ok(())
}

/// A named set of accelerator requirements (`resources:FPGA=1`, `trait:CUSTOM_X`).
///
/// 1.0 initial.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0")]
pub struct DeviceProfile {
    /// Database id.
    pub id: Field<i64>,
    /// Stable id.
    pub uuid: Field<Uuid>,
    /// Unique name.
    pub name: Field<String>,
    /// Groups, each a map of requirements.
    pub groups: Field<Vec<BTreeMap<String, String>>>,
    /// Description.
    pub description: Field<Option<String>>,
    /// Creation time.
    pub created_at: Field<Option<DateTime>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// An accelerator request (ARQ): one group of a device profile, bound to a device on a
/// host for an instance.
///
/// 1.0 initial.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0")]
pub struct AcceleratorRequest {
    /// Database id.
    pub id: Field<i64>,
    /// Stable id.
    pub uuid: Field<Uuid>,
    /// Lifecycle state (`Initial`, `BindStarted`, `Bound`, `BindFailed`, `Unbound`,
    /// `UnbindFailed`, `Deleting`).
    pub state: Field<String>,
    /// The profile.
    pub device_profile_name: Field<String>,
    /// The profile group.
    pub device_profile_group_id: Field<i64>,
    /// The host, once binding.
    pub hostname: Field<Option<String>>,
    /// The resource provider, once binding.
    pub device_rp_uuid: Field<Option<String>>,
    /// The instance, once binding.
    pub instance_uuid: Field<Option<String>>,
    /// The project.
    pub project_id: Field<Option<String>>,
    /// The attach handle's type, when bound.
    pub attach_handle_type: Field<Option<String>>,
    /// The attach handle's info, when bound.
    pub attach_handle_info: Field<Option<String>>,
    /// The attach handle's uuid, when bound.
    pub attach_handle_uuid: Field<Option<String>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// What an agent reports of one attachable part of a device.
///
/// 1.0 initial.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0")]
pub struct DriverAttachHandle {
    /// Attach type.
    pub attach_type: Field<AttachType>,
    /// Attach information (JSON text: the PCI address).
    pub attach_info: Field<String>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// What an agent reports of one device (a physical function and what it offers).
///
/// 1.0 initial; 1.1 added `attributes` (Cyborg's deployable attributes: `rc`,
/// `trait0`, ...; see [`traits::attributes`]).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1")]
pub struct DriverDevice {
    /// The PCI address of the physical function: the key reports are diffed by.
    pub control_path_id: Field<String>,
    /// Device type.
    pub r#type: Field<DeviceType>,
    /// PCI vendor id.
    pub vendor: Field<String>,
    /// Model (PCI device id or model text).
    pub model: Field<String>,
    /// Standard board information (JSON text).
    pub std_board_info: Field<Option<String>>,
    /// Bound driver.
    pub driver_name: Field<Option<String>>,
    /// What can be attached to a guest.
    #[verso(relationships = [("1.0", "1.0")])]
    pub attach_handles: Field<Vec<DriverAttachHandle>>,
    /// Its deployable's attributes (the resource class and traits Placement gets).
    #[verso(since = "1.1", default = BTreeMap::new())]
    pub attributes: Field<BTreeMap<String, String>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of devices.
///
/// 1.0 Device 1.0; 1.1 Device 1.1; 1.2 Device 1.2.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.2", list, child_versions = [("1.0", "1.0"), ("1.1", "1.1"), ("1.2", "1.2")])]
pub struct DeviceList {
    /// The members.
    pub objects: Field<Vec<Device>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of deployables.
///
/// 1.0 Deployable 1.0 (no rules: OVO's fallback); 1.1 Deployable 1.2, with `child_versions`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1", list, child_versions = [("1.0", "1.0"), ("1.1", "1.2")])]
pub struct DeployableList {
    /// The members.
    pub objects: Field<Vec<Deployable>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of attach handles.
///
/// 1.0 AttachHandle 1.1; 1.1 AttachHandle 1.2; 1.2 adds `child_versions`; 1.3
/// AttachHandle 1.3; 1.4 AttachHandle 1.4, and the remotable `get_by_host`,
/// `get_cleaning`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.4", list, remotable, child_versions = [("1.0", "1.1"), ("1.1", "1.2"), ("1.2", "1.2"), ("1.3", "1.3"), ("1.4", "1.4")])]
pub struct AttachHandleList {
    /// The members.
    pub objects: Field<Vec<AttachHandle>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of device profiles.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0", list, child_versions = [("1.0", "1.0")])]
pub struct DeviceProfileList {
    /// The members.
    pub objects: Field<Vec<DeviceProfile>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of accelerator requests.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0", list, child_versions = [("1.0", "1.0")])]
pub struct AcceleratorRequestList {
    /// The members.
    pub objects: Field<Vec<AcceleratorRequest>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// An agent's whole report.
///
/// 1.0 DriverDevice 1.0; 1.1 DriverDevice 1.1.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1", list, child_versions = [("1.0", "1.0"), ("1.1", "1.1")])]
pub struct DriverDeviceList {
    /// The members.
    pub objects: Field<Vec<DriverDevice>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A registry holding every class of the model.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register::<Device>()
        .register::<Deployable>()
        .register_remotable::<AttachHandle>()
        .register::<DeviceProfile>()
        .register::<AcceleratorRequest>()
        .register::<DriverAttachHandle>()
        .register::<DriverDevice>()
        .register::<DeviceList>()
        .register::<DeployableList>()
        .register_remotable::<AttachHandleList>()
        .register::<DeviceProfileList>()
        .register::<AcceleratorRequestList>()
        .register::<DriverDeviceList>();
    r
}

/// The feature `AttachHandle.update_managed` to `managed = false` is gated as: old
/// agents and old API clients do not understand unmanaged handles, so none is written
/// before `AccelVersion::DriverFeatures` is finalized.
pub const UNMANAGED_FEATURE: &str = "unmanaged PCI attach handles ([pci] managed = false)";

/// An attach handle's cleanup state (`AttachHandle.cleanup_state`, the column
/// `attach_handles.cleanup_state`; unset: the handle is available). The object's field
/// stays text on the wire; this is the one list of its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CleanupState {
    /// Being erased (an NVMe SSD released by its request): not allocatable until its
    /// agent reports the erase done.
    Cleaning,
    /// The erase failed or timed out: out of the pool until an operator acts.
    Error,
}

impl CleanupState {
    /// The stored and sent name.
    pub const fn as_str(self) -> &'static str {
        match self {
            CleanupState::Cleaning => "cleaning",
            CleanupState::Error => "error",
        }
    }
}

impl std::fmt::Display for CleanupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cleanup state name that is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownCleanupState(pub String);

impl std::fmt::Display for UnknownCleanupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown cleanup state {:?}", self.0)
    }
}

impl std::error::Error for UnknownCleanupState {}

impl std::str::FromStr for CleanupState {
    type Err = UnknownCleanupState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [CleanupState::Cleaning, CleanupState::Error]
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCleanupState(s.to_owned()))
    }
}

/// The cleanup state of a handle being erased.
pub const CLEANING: &str = CleanupState::Cleaning.as_str();
/// The cleanup state of a handle whose erase failed.
pub const CLEANUP_ERROR: &str = CleanupState::Error.as_str();

// The remotable bodies run where the database is: on the conductor, whose request
// contexts carry a `store::ConductorState`. An agent's contexts carry an indirection API
// (conductor RPC 1.1) instead, so these bodies never run there.

#[verso::remotable]
impl AttachHandleList {
    /// Every attach handle of `host`, with its device, allocation, managed mode and
    /// cleanup state: one RPC for a host's handles.
    #[remotable]
    pub async fn get_by_host(
        ctx: &RequestContext,
        host: String,
    ) -> Result<AttachHandleList, CallError> {
        Ok(listed(store::of(ctx)?.store.host_handles(&host).await?))
    }

    /// The handles of `host` left in `cleaning`: what its agent must (still) erase.
    #[remotable]
    pub async fn get_cleaning(
        ctx: &RequestContext,
        host: String,
    ) -> Result<AttachHandleList, CallError> {
        Ok(listed(store::of(ctx)?.store.cleaning_handles(&host).await?))
    }
}

#[verso::remotable]
impl AttachHandle {
    /// Sets the PCI managed mode in an unallocated handle's attach info, if the handle
    /// is still at `expected_revision` (compare-and-swap): a lost race fails with
    /// `StaleHandle` and nothing is written; an allocated handle with `HandleInUse`.
    /// The handle keeps its UUID; on success this object is the stored one.
    /// `managed = false` is refused with `NotSupportedBeforeFinalization` until
    /// `AccelVersion::DriverFeatures` is finalized.
    #[remotable]
    pub async fn update_managed(
        &mut self,
        managed: bool,
        expected_revision: i64,
    ) -> Result<(), CallError> {
        let ctx = self.context().cloned().unwrap_or_default();
        let state = store::of(&ctx)?;
        if !managed {
            state
                .versions
                .require(AccelVersion::DriverFeatures, UNMANAGED_FEATURE)
                .map_err(|e| errors::refused(&e))?;
        }
        let uuid = self.uuid_text("update_managed")?;
        let bad = |reason: String| CallError::BadArguments {
            object: "AttachHandle",
            method: "update_managed".into(),
            reason,
        };
        let info = handle_field("update_managed", &self.attach_info, "attach_info")?;
        let info = attach_info_with_managed(info, managed).ok_or_else(|| {
            bad(format!(
                "attach_info {info:?} is not a JSON object (a PCI address): not overwritten"
            ))
        })?;
        let updated = state
            .store
            .update_attach_info(&uuid, expected_revision, info)
            .await?;
        self.become_stored(updated);
        Ok(())
    }

    /// The agent starts erasing this handle's device: recorded only if the handle is
    /// `cleaning` at this object's revision (`NotCleaning`, `StaleHandle` otherwise), so
    /// one runner claims it. The claim is this call's request id: a retry with the same
    /// context answers the same; another runner (another context) loses.
    #[remotable]
    pub async fn cleanup_started(&mut self) -> Result<(), CallError> {
        let claim = self
            .context()
            .map(|c| c.request_id.clone())
            .unwrap_or_default();
        self.cleanup_transition(
            "cleanup_started",
            store::CleanupTransition::Started { claim },
        )
        .await
    }

    /// The erase succeeded and was verified: the handle is available again.
    #[remotable]
    pub async fn cleanup_succeeded(&mut self) -> Result<(), CallError> {
        self.cleanup_transition("cleanup_succeeded", store::CleanupTransition::Succeeded)
            .await
    }

    /// The erase failed or timed out: the handle goes to `error` with `reason` and is
    /// never allocated again without an operator.
    #[remotable]
    pub async fn cleanup_failed(&mut self, reason: String) -> Result<(), CallError> {
        self.cleanup_transition(
            "cleanup_failed",
            store::CleanupTransition::Failed { reason },
        )
        .await
    }
}

impl AttachHandle {
    /// The PCI managed mode this handle's attach info records ([`attach_info_managed`]:
    /// an attach info without a `managed` key is managed, libvirt's default). A handle
    /// read without its attach info is [`verso::Error::UnsetField`], not a default.
    pub fn managed(&self) -> Result<bool, verso::Error> {
        self.attach_info
            .require(Self::NAME, "attach_info")
            .map(|i| attach_info_managed(i))
    }

    /// Whether the handle is allocated; unset is [`verso::Error::UnsetField`].
    pub fn is_in_use(&self) -> Result<bool, verso::Error> {
        self.in_use.require(Self::NAME, "in_use").copied()
    }

    /// The revision read with the handle, which compare-and-swap updates name; unset is
    /// [`verso::Error::UnsetField`] (a swap against a made-up revision would fail, or
    /// worse, match).
    pub fn current_revision(&self) -> Result<i64, verso::Error> {
        self.revision.require(Self::NAME, "revision").copied()
    }

    fn uuid_text(&self, method: &str) -> Result<String, CallError> {
        handle_field(method, &self.uuid, "uuid").map(ToString::to_string)
    }

    /// Replaces this object's data by the stored handle, keeping its context.
    async fn cleanup_transition(
        &mut self,
        method: &str,
        transition: store::CleanupTransition,
    ) -> Result<(), CallError> {
        let ctx = self.context().cloned().unwrap_or_default();
        let state = store::of(&ctx)?;
        let uuid = self.uuid_text(method)?;
        // Unset, the compare-and-swap would run against revision 0, a stored one.
        let revision = *handle_field(method, &self.revision, "revision")?;
        let updated = state
            .store
            .cleanup_transition(&uuid, revision, transition)
            .await?;
        self.become_stored(updated);
        Ok(())
    }
}

/// The value of field `name` of the handle a call of `method` needs; unset, the call is
/// refused naming it.
fn handle_field<'a, T>(
    method: &str,
    field: &'a Field<T>,
    name: &'static str,
) -> Result<&'a T, CallError> {
    field
        .require(AttachHandle::NAME, name)
        .map_err(|e| CallError::BadArguments {
            object: AttachHandle::NAME,
            method: method.to_owned(),
            reason: e.to_string(),
        })
}

/// A list as loaded from the store: nothing changed.
fn listed<L: verso::ObjectList>(objects: Vec<L::Item>) -> L {
    let mut list = L::from_objects(objects);
    list.reset_changes_of(&[], true);
    list
}
