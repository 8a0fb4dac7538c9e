//! Where the model's remotable bodies read and write: a [`Store`] attached to the
//! conductor's request contexts as a [`StoreHandle`]. [`MemoryStore`] is the in-memory one
//! the example conductor loads from a seed file.

use crate::{AttachHandle, Deployable, Device};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use uuid::Uuid;
use verso::indirection::CallError;
use verso::{RequestContext, VersionedObject};

/// The storage the remotable bodies need.
pub trait Store: Send + Sync + 'static {
    /// Every device.
    fn devices(&self) -> Result<Vec<Device>, CallError>;
    /// One device.
    fn device(&self, uuid: &Uuid) -> Result<Option<Device>, CallError>;
    /// Writes a device's changed fields.
    fn save_device(&self, device: &Device) -> Result<(), CallError>;
    /// Every deployable.
    fn deployables(&self) -> Result<Vec<Deployable>, CallError>;
    /// One deployable.
    fn deployable(&self, uuid: &Uuid) -> Result<Option<Deployable>, CallError>;
    /// Every attach handle.
    fn attach_handles(&self) -> Result<Vec<AttachHandle>, CallError>;
    /// One attach handle.
    fn attach_handle(&self, uuid: &Uuid) -> Result<Option<AttachHandle>, CallError>;
    /// Writes an attach handle's changed fields.
    fn save_attach_handle(&self, handle: &AttachHandle) -> Result<(), CallError>;
}

/// The store of a service, as a context extension.
#[derive(Clone)]
pub struct StoreHandle(pub Arc<dyn Store>);

/// The store attached to `ctx`; a service without one (an agent) gets `NoStore`, which
/// is how a missing indirection configuration shows up instead of a silent local read.
pub fn of(ctx: &RequestContext) -> Result<&dyn Store, CallError> {
    ctx.extension::<StoreHandle>().map(|h| h.0.as_ref()).ok_or_else(|| {
        CallError::method("NoStore", "this service has no database: remotable calls must go through the conductor (configure object indirection)")
    })
}

/// Rows kept as objects, by uuid.
#[derive(Default)]
struct Tables {
    devices: BTreeMap<Uuid, Device>,
    deployables: BTreeMap<Uuid, Deployable>,
    attach_handles: BTreeMap<Uuid, AttachHandle>,
}

/// An in-memory store.
#[derive(Default)]
pub struct MemoryStore(Mutex<Tables>);

/// A seed file that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// Not JSON, or not an object of lists.
    #[error(
        "seed is not a JSON object mapping Device/Deployable/AttachHandle to lists of rows: {0}"
    )]
    Shape(String),
    /// A row that does not decode as its object.
    #[error("{class} row {index}: {source}")]
    Row {
        /// The class.
        class: String,
        /// The row's position.
        index: usize,
        /// Why.
        source: verso::Error,
    },
    /// A class the store does not hold.
    #[error("unknown class {0} in seed (expected Device, Deployable, AttachHandle)")]
    UnknownClass(String),
}

fn row<O: VersionedObject>(index: usize, data: &Value) -> Result<O, SeedError> {
    let prim = json!({
        "versioned_object.name": O::NAME,
        "versioned_object.namespace": O::NAMESPACE,
        "versioned_object.version": O::VERSION.to_string(),
        "versioned_object.data": data,
    });
    O::from_primitive(&prim).map_err(|source| SeedError::Row {
        class: O::NAME.into(),
        index,
        source,
    })
}

fn uuid_of<O: VersionedObject>(o: &O) -> Result<Uuid, CallError> {
    let mut p = o.to_primitive(verso::Target::Own)?;
    let text = p["versioned_object.data"]["uuid"].take();
    text.as_str()
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| {
            CallError::method(
                "ValueError",
                format!("{} without a uuid cannot be stored", O::NAME),
            )
        })
}

/// Writes the set fields of `new` over `old` (or stores `new`), unchanged afterwards.
fn upsert<O: VersionedObject>(table: &mut BTreeMap<Uuid, O>, new: &O) -> Result<(), CallError> {
    let uuid = uuid_of(new)?;
    let mut merged = table.remove(&uuid).unwrap_or_else(O::blank);
    let data = new.to_primitive(verso::Target::Own)?;
    if let Some(fields) = data["versioned_object.data"].as_object() {
        for (k, v) in fields {
            merged.set_field_primitive(k, v)?;
        }
    }
    merged.meta_mut().context = None;
    merged.reset_changes_of(&[], true);
    table.insert(uuid, merged);
    Ok(())
}

impl MemoryStore {
    /// A store holding the rows of a seed document: `{"Device": [row...], ...}`, each row
    /// the field values as in that object's `versioned_object.data` at its newest version.
    pub fn from_seed(seed: &Value) -> Result<Self, SeedError> {
        let map: &Map<String, Value> = seed
            .as_object()
            .ok_or_else(|| SeedError::Shape("not an object".into()))?;
        let mut t = Tables::default();
        for (class, rows) in map {
            let rows = rows
                .as_array()
                .ok_or_else(|| SeedError::Shape(format!("{class} is not a list")))?;
            for (i, data) in rows.iter().enumerate() {
                let bad = |e: CallError| SeedError::Shape(format!("{class} row {i}: {e}"));
                match class.as_str() {
                    "Device" => upsert(&mut t.devices, &row::<Device>(i, data)?).map_err(bad)?,
                    "Deployable" => {
                        upsert(&mut t.deployables, &row::<Deployable>(i, data)?).map_err(bad)?
                    }
                    "AttachHandle" => upsert(&mut t.attach_handles, &row::<AttachHandle>(i, data)?)
                        .map_err(bad)?,
                    other => return Err(SeedError::UnknownClass(other.into())),
                }
            }
        }
        Ok(MemoryStore(Mutex::new(t)))
    }

    fn tables(&self) -> Result<MutexGuard<'_, Tables>, CallError> {
        self.0.lock().map_err(|_| {
            CallError::method(
                "StoreUnavailable",
                "the store's lock was poisoned by a failed writer",
            )
        })
    }
}

impl Store for MemoryStore {
    fn devices(&self) -> Result<Vec<Device>, CallError> {
        Ok(self.tables()?.devices.values().cloned().collect())
    }
    fn device(&self, uuid: &Uuid) -> Result<Option<Device>, CallError> {
        Ok(self.tables()?.devices.get(uuid).cloned())
    }
    fn save_device(&self, device: &Device) -> Result<(), CallError> {
        upsert(&mut self.tables()?.devices, device)
    }
    fn deployables(&self) -> Result<Vec<Deployable>, CallError> {
        Ok(self.tables()?.deployables.values().cloned().collect())
    }
    fn deployable(&self, uuid: &Uuid) -> Result<Option<Deployable>, CallError> {
        Ok(self.tables()?.deployables.get(uuid).cloned())
    }
    fn attach_handles(&self) -> Result<Vec<AttachHandle>, CallError> {
        Ok(self.tables()?.attach_handles.values().cloned().collect())
    }
    fn attach_handle(&self, uuid: &Uuid) -> Result<Option<AttachHandle>, CallError> {
        Ok(self.tables()?.attach_handles.get(uuid).cloned())
    }
    fn save_attach_handle(&self, handle: &AttachHandle) -> Result<(), CallError> {
        upsert(&mut self.tables()?.attach_handles, handle)
    }
}
