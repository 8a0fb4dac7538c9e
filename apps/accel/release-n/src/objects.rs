//! Release N's versioned objects: the same classes (namespace `cyborg`, same names and
//! field names) as release N+1's `accel-objects`, at the versions release N shipped, as
//! this crate's own Rust types in its own [`Registry`]. Release N and N+1 share no Rust
//! type: they meet only in the wire form, primitives backported by manifest.
//!
//! | class | N | N+1 | what N+1 added |
//! |---|---|---|---|
//! | `Device` | 1.2 | 1.2 | |
//! | `Deployable` | 1.1 | 1.2 | `control_path_id` |
//! | `AttachHandle` | 1.2 | 1.3 | `revision`, `cleanup_state`, `instance_uuid`, managed mode in `attach_info` |
//! | `DeviceList` | 1.2 | 1.2 | |
//! | `DeployableList` | 1.0 (no child-version rule: OVO's fallback) | 1.1 | `child_versions`, Deployable 1.2 |
//! | `AttachHandleList` | 1.1 (relationship table, no `child_versions`) | 1.3 | 1.2 `child_versions`, 1.3 AttachHandle 1.3 |
//! | `DeviceProfile`, `AcceleratorRequest`, `DriverAttachHandle`, `DriverDevice` and their lists | 1.0 | 1.0 | |
//!
//! The older rows are the Cyborg classes of the golden vectors (`examples/cyborg-model`,
//! without its remotable methods); release N+1's `objects.lock` records only its own
//! versions, so `tests/wire.rs` checks N's fingerprints against it where the versions are
//! equal, and `objects.lock` beside this crate records release N's own contracts.

use std::collections::BTreeMap;
use uuid::Uuid;
use verso::{DateTime, Field, ObjectMeta, Registry, VersionedEnum, VersionedObject};

/// The project namespace of every class here.
pub const NAMESPACE: &str = "cyborg";

verso_upgrade::component_versions! {
    /// Release N's component versions: only the first. Release N+1 adds
    /// `DriverFeatures = 2`; a database or agent record at 2 is one release N cannot run
    /// on.
    pub enum AccelVersion: "accel" {
        /// Release N: inventory, profiles, accelerator requests.
        Initial = 1 => "release N",
    }
}

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
/// 1.0 initial; 1.1 added `labels`, `utilization`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1")]
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
    /// Instance state.
    pub meta: ObjectMeta,
}

/// How one accelerator is attached.
///
/// 1.0 initial; 1.1 added `device` (Device 1.1); 1.2 Device 1.2.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.2")]
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
    /// Attach information (JSON text: the PCI address).
    pub attach_info: Field<String>,
    /// The device, when loaded.
    #[verso(since = "1.1", relationships = [("1.1", "1.1"), ("1.2", "1.2")])]
    pub device: Field<Option<Device>>,
    /// Instance state.
    pub meta: ObjectMeta,
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
/// 1.0 initial.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0")]
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

/// A list of deployables with no child-version rule (OVO's fallback sends members at
/// 1.0 to a peer that names no Deployable version).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0", list)]
pub struct DeployableList {
    /// The members.
    pub objects: Field<Vec<Deployable>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of attach handles: a relationship table but no `child_versions`.
///
/// 1.0 AttachHandle 1.1; 1.1 AttachHandle 1.2.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1", list)]
pub struct AttachHandleList {
    /// The members.
    #[verso(relationships = [("1.0", "1.1"), ("1.1", "1.2")])]
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
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0", list, child_versions = [("1.0", "1.0")])]
pub struct DriverDeviceList {
    /// The members.
    pub objects: Field<Vec<DriverDevice>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A registry holding every class of release N.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register::<Device>()
        .register::<Deployable>()
        .register::<AttachHandle>()
        .register::<DeviceProfile>()
        .register::<AcceleratorRequest>()
        .register::<DriverAttachHandle>()
        .register::<DriverDevice>()
        .register::<DeviceList>()
        .register::<DeployableList>()
        .register::<AttachHandleList>()
        .register::<DeviceProfileList>()
        .register::<AcceleratorRequestList>()
        .register::<DriverDeviceList>();
    r
}

/// The versions release N has of every class: the manifest a release N+1 peer
/// backports to when it talks to release N.
pub fn manifest() -> verso::VersionManifest {
    registry()
        .schemas()
        .map(|s| (s.name.to_owned(), s.version))
        .collect()
}
