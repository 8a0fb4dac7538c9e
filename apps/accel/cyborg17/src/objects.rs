//! Cyborg 17's object classes, each at the version openstack-cyborg 17.0.0 registers,
//! with its fields as Cyborg declares them (the base class's `created_at` and
//! `updated_at` included). Where a field arrived after a class's 1.0, `since` says so,
//! from the version history in Cyborg's class comments, so a backport to an older
//! Cyborg drops it as Cyborg's `obj_make_compatible` does.
//!
//! Cyborg has no list classes: lists travel as plain JSON lists of primitives (an
//! agent's report is a list of [`DriverDevice`]s).

use std::collections::BTreeMap;
use uuid::Uuid;
use verso::{DateTime, Field, ObjectFamily, ObjectMeta, Registry, VersionedEnum, VersionedObject};

/// Cyborg's object family, as its base class `CyborgObject` declares it: project
/// namespace `cyborg` (`OBJ_PROJECT_NAMESPACE`), serial namespace `cyborg_object`
/// (`OBJ_SERIAL_NAMESPACE`, the prefix of every primitive key).
#[derive(ObjectFamily)]
#[verso(namespace = "cyborg", serial_namespace = "cyborg_object")]
pub struct CyborgObject;

/// The project namespace of every class here.
pub const NAMESPACE: &str = <CyborgObject as verso::ObjectFamily>::NAMESPACE;

/// The serial namespace of every class here.
pub const SERIAL_NAMESPACE: &str = <CyborgObject as verso::ObjectFamily>::SERIAL_NAMESPACE;

/// A device's type (`constants.DEVICE_TYPE`).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceType {
    /// A GPU.
    #[verso(value = "GPU")]
    Gpu,
    /// An FPGA.
    #[verso(value = "FPGA")]
    Fpga,
    /// An AI accelerator chip (Device 1.1).
    #[verso(value = "AICHIP")]
    AiChip,
    /// Intel QuickAssist.
    #[verso(value = "QAT")]
    Qat,
    /// A smart NIC.
    #[verso(value = "NIC")]
    Nic,
    /// A solid-state drive.
    #[verso(value = "SSD")]
    Ssd,
    /// A mediated device (Device 1.3).
    #[verso(value = "MDEV")]
    Mdev,
    /// A generic PCI device (Device 1.3).
    #[verso(value = "PCI")]
    Pci,
    /// An NVMe device, cleaned before reuse (Device 1.4).
    #[verso(value = "NVME")]
    Nvme,
}

/// Whether a device may be allocated (`constants.DEVICE_STATUS`, Device 1.2; API 2.3).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceStatus {
    /// Schedulable.
    #[verso(value = "enabled")]
    Enabled,
    /// Taken out of service by an operator.
    #[verso(value = "maintaining")]
    Maintaining,
}

/// Where a device is in its cleaning lifecycle (`constants.DEVICE_STATES`, Device 1.5).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceState {
    /// Free.
    #[verso(value = "available")]
    Available,
    /// In use by an instance.
    #[verso(value = "allocated")]
    Allocated,
    /// Released, waiting for its cleanup to start.
    #[verso(value = "pending_cleaning")]
    PendingCleaning,
    /// Being cleaned.
    #[verso(value = "cleaning")]
    Cleaning,
    /// Its cleanup failed.
    #[verso(value = "error")]
    Error,
}

/// An accelerator request's state (`constants.ARQ_STATES`).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArqState {
    /// Created, not bound.
    Initial,
    /// A bind is under way.
    BindStarted,
    /// Bound to a device on a host, for an instance.
    Bound,
    /// Released.
    Unbound,
    /// The bind failed.
    BindFailed,
    /// The unbind failed.
    UnbindFailed,
    /// Being deleted.
    Deleting,
}

/// How an attach handle is attached (`constants.ATTACH_HANDLE_TYPES`).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttachHandleType {
    /// A PCI function.
    #[verso(value = "PCI")]
    Pci,
    /// A mediated device.
    #[verso(value = "MDEV")]
    Mdev,
    /// A PCI function of Cyborg's test driver.
    #[verso(value = "TEST_PCI")]
    TestPci,
}

/// How a device's control path is addressed (`constants.CPID_TYPE`).
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlpathType {
    /// A PCI address.
    #[verso(value = "PCI")]
    Pci,
}

/// A physical device on a host.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.5")]
pub struct Device {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID.
    pub uuid: Field<Uuid>,
    /// Its type.
    pub r#type: Field<DeviceType>,
    /// Vendor id.
    pub vendor: Field<String>,
    /// Model.
    pub model: Field<String>,
    /// Standard board information (JSON text).
    pub std_board_info: Field<Option<String>>,
    /// Vendor board information (JSON text).
    pub vendor_board_info: Field<Option<String>>,
    /// The host.
    pub hostname: Field<String>,
    /// Enabled or in maintenance.
    #[verso(since = "1.2", default = DeviceStatus::Enabled)]
    pub status: Field<DeviceStatus>,
    /// The cleaning lifecycle's state.
    #[verso(since = "1.5")]
    pub device_state: Field<Option<DeviceState>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// A schedulable unit of a device (one resource provider in Placement).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1")]
pub struct Deployable {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID.
    pub uuid: Field<Uuid>,
    /// The parent deployable.
    pub parent_id: Field<Option<i64>>,
    /// The root deployable.
    pub root_id: Field<Option<i64>>,
    /// Its name.
    pub name: Field<String>,
    /// How many accelerators it has.
    pub num_accelerators: Field<i64>,
    /// Its device's id.
    pub device_id: Field<i64>,
    /// The driver that reported it.
    #[verso(since = "1.1")]
    pub driver_name: Field<Option<String>>,
    /// Its resource provider in Placement.
    #[verso(since = "1.1")]
    pub rp_uuid: Field<Option<Uuid>>,
    /// The bitstream programmed into it (FPGA).
    #[verso(since = "1.1")]
    pub bitstream_id: Field<Option<Uuid>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// What an instance attaches: a PCI function or a mediated device of a deployable.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0")]
pub struct AttachHandle {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID.
    pub uuid: Field<Uuid>,
    /// Its deployable's id.
    pub deployable_id: Field<i64>,
    /// Its control path's id.
    pub cpid_id: Field<i64>,
    /// PCI or MDEV.
    pub attach_type: Field<AttachHandleType>,
    /// The address (JSON text).
    pub attach_info: Field<String>,
    /// Whether an accelerator request holds it.
    #[verso(default = false)]
    pub in_use: Field<bool>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// How a device's control path is reached (its physical function).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1")]
pub struct ControlpathID {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID.
    pub uuid: Field<Uuid>,
    /// Its device's id.
    pub device_id: Field<i64>,
    /// PCI.
    #[verso(ovo_values_as_text)]
    pub cpid_type: Field<ControlpathType>,
    /// The address (JSON text).
    pub cpid_info: Field<String>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// A named set of accelerator request groups (`{"resources:FPGA": "1", ...}`).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1")]
pub struct DeviceProfile {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID (a string field in Cyborg, not a UUID field).
    pub uuid: Field<String>,
    /// Its unique name.
    pub name: Field<String>,
    /// The request groups.
    pub groups: Field<Vec<BTreeMap<String, Option<String>>>>,
    /// A description.
    #[verso(since = "1.1")]
    pub description: Field<Option<String>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// An accelerator request as Nova sees it.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, name = "ARQ", version = "1.1")]
pub struct Arq {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID.
    pub uuid: Field<Uuid>,
    /// Its state.
    #[verso(ovo_enum_class = "ARQState")]
    pub state: Field<ArqState>,
    /// The profile it was created from.
    pub device_profile_name: Field<String>,
    /// Which group of the profile.
    pub device_profile_group_id: Field<i64>,
    /// The host it is bound on.
    pub hostname: Field<Option<String>>,
    /// The resource provider it is bound to.
    pub device_rp_uuid: Field<Option<String>>,
    /// The instance it is bound for.
    pub instance_uuid: Field<Option<String>>,
    /// The project that owns it.
    pub project_id: Field<Option<String>>,
    /// The bound handle's type.
    pub attach_handle_type: Field<Option<String>>,
    /// The bound handle's UUID.
    pub attach_handle_uuid: Field<Option<String>>,
    /// The bound handle's address.
    pub attach_handle_info: Field<Option<BTreeMap<String, String>>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// An accelerator request with Cyborg's private state (one database row with its
/// [`Arq`]).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, name = "ExtARQ", version = "1.2")]
pub struct ExtArq {
    /// The request.
    pub arq: Field<Arq>,
    /// Cyborg's sub-state.
    pub substate: Field<String>,
    /// The bound deployable.
    pub deployable_uuid: Field<Option<Uuid>>,
    /// The profile group, copied at creation.
    pub device_profile_group: Field<Option<BTreeMap<String, String>>>,
    /// The bound handle's id.
    pub attach_handle_id: Field<Option<i64>>,
    /// The bound deployable's id.
    #[verso(since = "1.2")]
    pub deployable_id: Field<Option<i64>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// An [`ExtArq`] for an FPGA (programming before binding); the same fields.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, name = "FPGAExtARQ", version = "1.2")]
pub struct FpgaExtArq {
    /// The request.
    pub arq: Field<Arq>,
    /// Cyborg's sub-state.
    pub substate: Field<String>,
    /// The bound deployable.
    pub deployable_uuid: Field<Option<Uuid>>,
    /// The profile group, copied at creation.
    pub device_profile_group: Field<Option<BTreeMap<String, String>>>,
    /// The bound handle's id.
    pub attach_handle_id: Field<Option<i64>>,
    /// The bound deployable's id.
    #[verso(since = "1.2")]
    pub deployable_id: Field<Option<i64>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// A key and value of a deployable (traits, resource class, ...).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0")]
pub struct Attribute {
    /// Database id.
    pub id: Field<i64>,
    /// Its UUID.
    pub uuid: Field<Uuid>,
    /// Its deployable's id.
    pub deployable_id: Field<i64>,
    /// The key (`rc`, `trait0`, ...).
    pub key: Field<String>,
    /// The value.
    pub value: Field<String>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// An attach handle as a driver reports it.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0")]
pub struct DriverAttachHandle {
    /// PCI or MDEV (text).
    pub attach_type: Field<String>,
    /// The address (JSON text).
    pub attach_info: Field<String>,
    /// Whether it is in use.
    #[verso(default = false)]
    pub in_use: Field<bool>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// An attribute as a driver reports it.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0")]
pub struct DriverAttribute {
    /// The key.
    pub key: Field<String>,
    /// The value.
    pub value: Field<String>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// A control path as a driver reports it.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0")]
pub struct DriverControlPathID {
    /// PCI (text).
    pub cpid_type: Field<String>,
    /// The address (JSON text).
    pub cpid_info: Field<String>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// A deployable as a driver reports it.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0")]
pub struct DriverDeployable {
    /// Its name.
    pub name: Field<String>,
    /// How many accelerators it has.
    pub num_accelerators: Field<i64>,
    /// Its attributes.
    #[verso(default = Vec::<DriverAttribute>::new())]
    pub attribute_list: Field<Option<Vec<DriverAttribute>>>,
    /// Its attach handles.
    #[verso(default = Vec::<DriverAttachHandle>::new())]
    pub attach_handle_list: Field<Option<Vec<DriverAttachHandle>>>,
    /// The driver.
    pub driver_name: Field<Option<String>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// A device as a driver reports it: what an agent's `report_data` carries, one per
/// physical function.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.4")]
pub struct DriverDevice {
    /// Vendor id.
    pub vendor: Field<String>,
    /// Model.
    pub model: Field<String>,
    /// Its type (Cyborg's `DeviceTypeField`, an auto-typed enum).
    #[verso(ovo_auto_typed)]
    pub r#type: Field<DeviceType>,
    /// Standard board information.
    pub std_board_info: Field<Option<String>>,
    /// Vendor board information.
    pub vendor_board_info: Field<Option<String>>,
    /// Its control path.
    pub controlpath_id: Field<DriverControlPathID>,
    /// Its deployables.
    #[verso(default = Vec::<DriverDeployable>::new())]
    pub deployable_list: Field<Vec<DriverDeployable>>,
    /// A placeholder device of a driver with nothing to report.
    #[verso(default = false)]
    pub stub: Field<bool>,
    /// The cleaning lifecycle's state, as the driver sees it.
    #[verso(since = "1.4")]
    pub device_state: Field<Option<DeviceState>>,
    /// Created.
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Object metadata.
    pub meta: ObjectMeta,
}

/// Every class of Cyborg 17, registered.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register::<Device>();
    r.register::<Deployable>();
    r.register::<AttachHandle>();
    r.register::<ControlpathID>();
    r.register::<DeviceProfile>();
    r.register::<Arq>();
    r.register::<ExtArq>();
    r.register::<FpgaExtArq>();
    r.register::<Attribute>();
    r.register::<DriverAttachHandle>();
    r.register::<DriverAttribute>();
    r.register::<DriverControlPathID>();
    r.register::<DriverDeployable>();
    r.register::<DriverDevice>();
    r
}
