//! The object model of the golden vectors (`crates/verso/tests/vectors/ovo-model.json`:
//! OpenStack Cyborg's accelerator objects, namespace `cyborg`), defined once with verso's
//! derive.
//!
//! The conformance tests, the example conductor and the CLI example all use this one
//! model. Its gaps are on purpose: they pin OVO's behaviour (`DeployableList` has no
//! child-version rule at all, so OVO's fallback applies; `AttachHandleList` has a
//! relationship table but no `child_versions`).

use std::collections::BTreeMap;
use uuid::Uuid;
use verso::indirection::CallError;
use verso::{
    DateTime, Field, ObjectList, ObjectMeta, Registry, RequestContext, VersionedEnum,
    VersionedObject,
};

pub mod store;
pub use store::{MemoryStore, Store, StoreHandle};

/// The project namespace of every class here.
pub const NAMESPACE: &str = "cyborg";

/// Accelerator device types.
#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
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
#[verso(namespace = "cyborg", version = "1.2", remotable)]
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

/// A deployable unit of a device (a GPU partition, an FPGA region).
///
/// 1.0 initial; 1.1 added `labels`, `utilization`.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1", remotable)]
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
#[verso(namespace = "cyborg", version = "1.2", remotable)]
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
    #[verso(since = "1.1", relationships = [("1.1", "1.1"), ("1.2", "1.2")])]
    pub device: Field<Option<Device>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of devices.
///
/// 1.0 Device 1.0; 1.1 Device 1.1; 1.2 Device 1.2.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.2", list, remotable, child_versions = [("1.0", "1.0"), ("1.1", "1.1"), ("1.2", "1.2")])]
pub struct DeviceList {
    /// The members.
    pub objects: Field<Vec<Device>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of attach handles: a relationship table but no `child_versions`, so a
/// manifest decides the members' versions.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.1", list, remotable)]
pub struct AttachHandleList {
    /// The members.
    #[verso(relationships = [("1.0", "1.1"), ("1.1", "1.2")])]
    pub objects: Field<Vec<AttachHandle>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A list of deployables with no rules at all (OVO's fallback sends members at 1.0).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "cyborg", version = "1.0", list, remotable)]
pub struct DeployableList {
    /// The members.
    pub objects: Field<Vec<Deployable>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A registry holding every class of the model, with their remotable methods.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register_remotable::<Device>()
        .register_remotable::<Deployable>()
        .register_remotable::<AttachHandle>()
        .register_remotable::<DeviceList>()
        .register_remotable::<AttachHandleList>()
        .register_remotable::<DeployableList>();
    r
}

// The remotable bodies run where the store is: on the conductor. An agent's contexts
// carry an indirection API instead, so these bodies never run there.

#[verso::remotable]
impl Device {
    /// The device with this uuid (`DeviceNotFound` when there is none).
    #[remotable]
    pub async fn get_by_uuid(ctx: &RequestContext, uuid: Uuid) -> Result<Device, CallError> {
        store::of(ctx)?
            .device(&uuid)?
            .ok_or_else(|| not_found("Device", &uuid))
    }

    /// Writes the changed fields to the store.
    #[remotable]
    pub async fn save(&mut self) -> Result<(), CallError> {
        let ctx = self.context().cloned().unwrap_or_default();
        self.updated_at.set(Some(DateTime::now()));
        store::of(&ctx)?.save_device(self)?;
        self.reset_changes();
        Ok(())
    }

    /// Sets the PCI managed mode and saves; only an admin may.
    #[remotable]
    pub async fn set_managed(&mut self, mode: ManagedMode) -> Result<(), CallError> {
        let ctx = self.context().cloned().unwrap_or_default();
        if !ctx.is_admin && !ctx.has_role("admin") {
            return Err(CallError::method(
                "Forbidden",
                "changing the managed mode needs the admin role",
            ));
        }
        self.managed_mode.set(mode);
        self.__verso_local_save().await
    }
}

#[verso::remotable]
impl Deployable {
    /// The deployable with this uuid.
    #[remotable]
    pub async fn get_by_uuid(ctx: &RequestContext, uuid: Uuid) -> Result<Deployable, CallError> {
        store::of(ctx)?
            .deployable(&uuid)?
            .ok_or_else(|| not_found("Deployable", &uuid))
    }
}

#[verso::remotable]
impl AttachHandle {
    /// The attach handle with this uuid.
    #[remotable]
    pub async fn get_by_uuid(ctx: &RequestContext, uuid: Uuid) -> Result<AttachHandle, CallError> {
        store::of(ctx)?
            .attach_handle(&uuid)?
            .ok_or_else(|| not_found("AttachHandle", &uuid))
    }

    /// Marks the handle in use and saves it (`AttachHandleInUse` if it already is).
    #[remotable]
    pub async fn allocate(&mut self) -> Result<(), CallError> {
        let ctx = self.context().cloned().unwrap_or_default();
        if self.in_use.get() == Some(&true) {
            return Err(CallError::method(
                "AttachHandleInUse",
                "the attach handle is already in use",
            ));
        }
        self.in_use.set(true);
        store::of(&ctx)?.save_attach_handle(self)?;
        self.reset_changes();
        Ok(())
    }
}

#[verso::remotable]
impl DeviceList {
    /// Every device.
    #[remotable]
    pub async fn get_all(ctx: &RequestContext) -> Result<DeviceList, CallError> {
        Ok(listed(store::of(ctx)?.devices()?))
    }

    /// The devices of one host.
    #[remotable]
    pub async fn get_by_hostname(
        ctx: &RequestContext,
        hostname: String,
    ) -> Result<DeviceList, CallError> {
        let devices = store::of(ctx)?.devices()?;
        Ok(listed(
            devices
                .into_iter()
                .filter(|d| d.hostname.get() == Some(&hostname))
                .collect(),
        ))
    }
}

#[verso::remotable]
impl AttachHandleList {
    /// Every attach handle.
    #[remotable]
    pub async fn get_all(ctx: &RequestContext) -> Result<AttachHandleList, CallError> {
        Ok(listed(store::of(ctx)?.attach_handles()?))
    }
}

#[verso::remotable]
impl DeployableList {
    /// The deployables of one device.
    #[remotable]
    pub async fn get_by_device_id(
        ctx: &RequestContext,
        device_id: i64,
    ) -> Result<DeployableList, CallError> {
        let all = store::of(ctx)?.deployables()?;
        Ok(listed(
            all.into_iter()
                .filter(|d| d.device_id.get() == Some(&device_id))
                .collect(),
        ))
    }
}

/// A list as loaded from the store: nothing changed.
fn listed<L: ObjectList>(objects: Vec<L::Item>) -> L {
    let mut list = L::from_objects(objects);
    list.reset_changes_of(&[], true);
    list
}

fn not_found(class: &str, uuid: &Uuid) -> CallError {
    CallError::method(
        format!("{class}NotFound"),
        format!("{class} {uuid} could not be found"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_follow_the_model_file() {
        assert_eq!(Device::VERSION.to_string(), "1.2");
        let s = Device::schema();
        assert_eq!(s.fields.len(), 11);
        assert_eq!(s.field("type").map(|f| f.ty.ovo_class()), Some("Enum"));
        assert_eq!(
            s.field("managed_mode").and_then(|f| f.default.clone()),
            Some("unmanaged".into())
        );
        assert!(AttachHandle::schema()
            .field("device")
            .is_some_and(|f| f.nullable));
    }
}
