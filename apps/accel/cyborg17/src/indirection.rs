//! Cyborg 17 with the seed spec (`versioned-object-indirection`): what accel's release
//! N+1 conductor serves to Cyborg agents on Cyborg's own topic.
//!
//! The spec changes no object of Cyborg 17 ("no new object fields, object version
//! changes, database schema changes or data migrations"). It adds:
//! - **conductor RPC 1.1** ([`ConductorApi`]): Cyborg 17's seven methods, unchanged, and
//!   oslo.versionedobjects' three indirection methods (`object_class_action_versions`,
//!   `object_action`, `object_backport_versions`) through Cyborg's serializer, so a
//!   Cyborg agent runs object methods on the conductor instead of the database;
//! - **a versioned list class for a host's devices** ([`DeviceList`] 1.0, the spec's own
//!   example), whose remotable class method `get_by_hostname` runs where the database
//!   is. Its result is backported to the caller's manifest in the same reply, members
//!   included: an agent whose `Device` is 1.4 (Cyborg 16) gets its devices without
//!   `device_state`.
//!
//! [`registry`] is Cyborg 17's registry with [`DeviceList`]; `indirection.lock` beside
//! this crate pins both APIs and the new class (`tests/contracts.rs`), and
//! `tests/cyborg.rs` checks the class's fingerprint against oslo.versionedobjects'
//! fingerprint of the spec's example class declared over Cyborg 17's own registry.
//!
//! The method bodies run on the conductor, which attaches a [`DeviceSource`] (its
//! database) to each request context ([`attach`]); a process without one
//! answers [`NO_DEVICE_SOURCE`].

use crate::objects::{CyborgObject, Device};
use crate::rpc;
use std::sync::Arc;
use verso::indirection::{BoxFuture, CallError};
use verso::{DateTime, Field, ObjectMeta, Registry, RequestContext, Version, VersionedObject};
use verso_rpc::{MethodSpec, RpcApi};

/// The conductor RPC version the seed spec adds object indirection at.
pub const INDIRECTION_VERSION: Version = Version::new(1, 1);

/// The error kind of an object method called where no [`DeviceSource`] is attached.
pub const NO_DEVICE_SOURCE: &str = "NoDeviceSource";

/// The devices of one host: the spec's `DeviceList` (1.0, a list of `Device`).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0", list, remotable)]
pub struct DeviceList {
    /// The members.
    pub objects: Field<Vec<Device>>,
    /// Created (every `CyborgObject` has it, lists too).
    pub created_at: Field<Option<DateTime>>,
    /// Updated (as `created_at`).
    pub updated_at: Field<Option<DateTime>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// Where the object methods read devices: the conductor's database.
pub trait DeviceSource: Send + Sync + 'static {
    /// Every device of `hostname`, oldest first, as Cyborg 17's `Device` (1.5, with
    /// `device_state`).
    fn devices_on<'a>(&'a self, hostname: &'a str)
        -> BoxFuture<'a, Result<Vec<Device>, CallError>>;
}

/// `ctx` with `source` attached: the conductor endpoint's `prepare`.
pub fn attach(source: &Arc<dyn DeviceSource>, ctx: RequestContext) -> RequestContext {
    ctx.with_extension(Attached(source.clone()))
}

/// The extension [`attach`] puts in a context.
#[derive(Clone)]
struct Attached(Arc<dyn DeviceSource>);

fn source(ctx: &RequestContext) -> Result<&dyn DeviceSource, CallError> {
    ctx.extension::<Attached>()
        .map(|a| a.0.as_ref())
        .ok_or_else(|| {
            CallError::method(
                NO_DEVICE_SOURCE,
                "this service has no database: DeviceList methods run on the conductor \
                 (conductor RPC 1.1, [upgrade_levels] conductor)",
            )
        })
}

#[verso::remotable]
impl DeviceList {
    /// Every device of `hostname` (the spec's example lookup): one call for a host's
    /// devices, whatever their number.
    #[remotable]
    pub async fn get_by_hostname(
        ctx: &RequestContext,
        hostname: String,
    ) -> Result<DeviceList, CallError> {
        let devices = source(ctx)?.devices_on(&hostname).await?;
        let mut list = <DeviceList as verso::ObjectList>::from_objects(devices);
        list.reset_changes_of(&[], true);
        Ok(list)
    }
}

/// Cyborg's conductor API with the seed spec: 1.1, Cyborg 17's methods and the three
/// object-indirection methods.
#[derive(Debug, Clone, Copy)]
pub struct ConductorApi;

impl RpcApi for ConductorApi {
    const NAME: &'static str = "conductor";
    const VERSION: Version = INDIRECTION_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        let mut methods = <rpc::ConductorApi as RpcApi>::methods();
        methods.extend(verso_rpc::conductor::object_methods_since(
            INDIRECTION_VERSION,
        ));
        methods
    }
}

/// Cyborg 17's classes and [`DeviceList`], with its remotable method.
pub fn registry() -> Registry {
    let mut r = crate::objects::registry();
    r.register_remotable::<DeviceList>();
    r
}
