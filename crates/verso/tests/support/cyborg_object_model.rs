//! The golden vectors' model (`ovo-model.json`, the classes of `examples/cyborg-model`)
//! declared a second time in the `cyborg_object` serial namespace, as OpenStack Cyborg
//! declares its objects (`OBJ_SERIAL_NAMESPACE = 'cyborg_object'`): the same classes,
//! versions, fields and rules, so the case files that `ovo_fuzz.py rekey` moved to that
//! serial namespace (and the differential fuzzer's cases generated in it) run against
//! it. The enums are the example model's: a serial namespace changes object keys only.
//!
//! Included by `support/cases.rs`.

use cyborg_model::{AttachType, DeviceType, ManagedMode};
use std::collections::BTreeMap;
use uuid::Uuid;
use verso::{DateTime, Field, ObjectFamily, ObjectMeta, Registry, VersionedObject};

/// The family: Cyborg's project namespace and serial namespace, declared once.
#[derive(ObjectFamily)]
#[verso(namespace = "cyborg", serial_namespace = "cyborg_object")]
pub struct CyborgObject;

/// `Device` 1.2.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.2")]
pub struct Device {
    pub id: Field<i64>,
    pub uuid: Field<Uuid>,
    pub r#type: Field<DeviceType>,
    pub vendor: Field<String>,
    pub model: Field<String>,
    pub std_board_info: Field<Option<String>>,
    pub hostname: Field<String>,
    #[verso(since = "1.1")]
    pub vendor_board_info: Field<Option<String>>,
    #[verso(since = "1.2", default = ManagedMode::Unmanaged)]
    pub managed_mode: Field<ManagedMode>,
    pub created_at: Field<Option<DateTime>>,
    pub updated_at: Field<Option<DateTime>>,
    pub meta: ObjectMeta,
}

/// `Deployable` 1.1.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1")]
pub struct Deployable {
    pub id: Field<i64>,
    pub uuid: Field<Uuid>,
    pub name: Field<String>,
    pub device_id: Field<i64>,
    pub num_accelerators: Field<i64>,
    pub driver_name: Field<Option<String>>,
    #[verso(default = BTreeMap::new())]
    pub attributes: Field<BTreeMap<String, String>>,
    #[verso(default = true)]
    pub enabled: Field<bool>,
    pub created_at: Field<Option<DateTime>>,
    #[verso(since = "1.1", default = Vec::<String>::new())]
    pub labels: Field<Vec<String>>,
    #[verso(since = "1.1", default = 0.0)]
    pub utilization: Field<f64>,
    pub meta: ObjectMeta,
}

/// `AttachHandle` 1.2, with its `Device` (in the same family, so in the same keys).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.2")]
pub struct AttachHandle {
    pub id: Field<i64>,
    pub uuid: Field<Uuid>,
    pub deployable_id: Field<i64>,
    #[verso(default = false)]
    pub in_use: Field<bool>,
    pub attach_type: Field<AttachType>,
    pub attach_info: Field<String>,
    #[verso(since = "1.1", relationships = [("1.1", "1.1"), ("1.2", "1.2")])]
    pub device: Field<Option<Device>>,
    pub meta: ObjectMeta,
}

/// `DeviceList` 1.2 (`child_versions`).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.2", list, child_versions = [("1.0", "1.0"), ("1.1", "1.1"), ("1.2", "1.2")])]
pub struct DeviceList {
    pub objects: Field<Vec<Device>>,
    pub meta: ObjectMeta,
}

/// `AttachHandleList` 1.1 (a relationship table, no `child_versions`).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1", list)]
pub struct AttachHandleList {
    #[verso(relationships = [("1.0", "1.1"), ("1.1", "1.2")])]
    pub objects: Field<Vec<AttachHandle>>,
    pub meta: ObjectMeta,
}

/// `DeployableList` 1.0 (no rule at all: OVO's fallback).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0", list)]
pub struct DeployableList {
    pub objects: Field<Vec<Deployable>>,
    pub meta: ObjectMeta,
}

/// Every class of the family.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register::<Device>()
        .register::<Deployable>()
        .register::<AttachHandle>()
        .register::<DeviceList>()
        .register::<AttachHandleList>()
        .register::<DeployableList>();
    r
}
