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
//! And, accel's own addition to the seed spec (not a change of Cyborg's), **conductor
//! RPC 1.2**: [`ReportUnchanged`], an agent's unchanged inventory named by its
//! [`report_digest`] instead of sent whole, as accel's own conductor API has had since
//! its 1.2.
//!
//! [`registry`] is Cyborg 17's registry with [`DeviceList`]; `cyborg.lock` beside
//! this crate pins both APIs and the new class (`tests/cyborg.rs`), which also checks the class's fingerprint against oslo.versionedobjects'
//! fingerprint of the spec's example class declared over Cyborg 17's own registry.
//!
//! **Its dependent features** (the spec's two examples, each "a conductor-executed"
//! operation an agent requests), as version bumps of Cyborg 17's classes, each backported
//! to Cyborg 17's version by the caller's manifest (no field changes, so a 1.0 handle and
//! a 1.5 device read the same):
//! - PCI managed mode: [`AttachHandle`] 1.1 adds the remotable `update_managed(managed)`,
//!   which sets `managed` in an unallocated handle's attach info, keeping its UUID, only
//!   if the stored handle is still what the agent read; [`AttachHandleList`] 1.0 with
//!   `get_by_hostname` is the read;
//! - NVMe cleanup on Cyborg's own lifecycle (`device_state`): [`Device`] 1.6 adds the
//!   remotable `cleanup_started()`, `cleanup_succeeded()` and `cleanup_failed(reason)`,
//!   each recorded only from the state the agent read (`pending_cleaning`, then
//!   `cleaning`), so a stale or second runner loses; `DeviceList.get_by_hostname` finds
//!   the devices left in those states.
//!
//! The method bodies run on the conductor, which attaches a [`CyborgStore`] (its
//! database) to each request context ([`attach`]); a process without one answers
//! [`NO_DATABASE`].

use accel_cyborg17::objects::{
    self as n, AttachHandleType, CyborgObject, DeviceState, DeviceStatus, DeviceType,
};
use accel_cyborg17::rpc;
use std::sync::Arc;
use uuid::Uuid;
use verso::indirection::{BoxFuture, CallError};
use verso::{DateTime, Field, ObjectMeta, Registry, RequestContext, Version, VersionedObject};
use verso_rpc::{MethodSpec, RpcApi, RpcMethod};

/// The conductor RPC version the seed spec adds object indirection at.
pub const INDIRECTION_VERSION: Version = Version::new(1, 1);

/// The agent RPC version the NVMe feature adds `cleanup_device` at (the seed spec keeps
/// the agent API and its default cap at 1.0; this is the feature's own requirement).
pub const AGENT_CLEANUP_VERSION: Version = Version::new(1, 1);

/// The error kind of an object method called where no [`CyborgStore`] is attached.
pub const NO_DATABASE: &str = "NoDatabase";

/// A physical device on a host: Cyborg 17's `Device` 1.5 and, in 1.6, the remotable
/// cleanup transitions of the NVMe feature. The fields are 1.5's.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.6", remotable)]
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

/// What an instance attaches: Cyborg 17's `AttachHandle` 1.0 and, in 1.1, the
/// remotable `update_managed` of the PCI managed-mode feature. The fields are 1.0's.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1", remotable)]
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
    /// The address (JSON text); a PCI handle's holds `managed` once set.
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

/// The attach handles of one host (1.0, a list of `AttachHandle`): the managed-mode
/// feature's read.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.0", list, remotable)]
pub struct AttachHandleList {
    /// The members.
    pub objects: Field<Vec<AttachHandle>>,
    /// Created (as `DeviceList`'s).
    pub created_at: Field<Option<DateTime>>,
    /// Updated.
    pub updated_at: Field<Option<DateTime>>,
    /// Instance state.
    pub meta: ObjectMeta,
}

/// A step of a device's cleanup, as its agent reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanupStep {
    /// The agent starts erasing (`pending_cleaning` to `cleaning`), under `claim` (the
    /// calling request's id: a retry of the same call answers the same).
    Started {
        /// The claim.
        claim: String,
    },
    /// The erase succeeded and was verified (`cleaning` to `available`).
    Succeeded,
    /// The erase failed or timed out (`cleaning` to `error`, never allocated again
    /// without an operator).
    Failed {
        /// Why.
        reason: String,
    },
}

impl CleanupStep {
    /// The remotable method of `Device` that reports this step.
    pub fn method(&self) -> &'static str {
        match self {
            CleanupStep::Started { .. } => "cleanup_started",
            CleanupStep::Succeeded => "cleanup_succeeded",
            CleanupStep::Failed { .. } => "cleanup_failed",
        }
    }
}

/// What the object methods do where the database is: the conductor's.
pub trait CyborgStore: Send + Sync + 'static {
    /// Every device of `hostname`, oldest first, with `device_state`.
    fn devices_on<'a>(&'a self, hostname: &'a str)
        -> BoxFuture<'a, Result<Vec<Device>, CallError>>;

    /// Every attach handle of `hostname`, oldest first.
    fn handles_on<'a>(
        &'a self,
        hostname: &'a str,
    ) -> BoxFuture<'a, Result<Vec<AttachHandle>, CallError>>;

    /// Sets `managed` in the attach info of the handle `read` is, if the stored handle
    /// still has `read`'s attach info and allocation and is not allocated; the handle
    /// as stored after.
    fn update_managed<'a>(
        &'a self,
        read: &'a AttachHandle,
        managed: bool,
    ) -> BoxFuture<'a, Result<AttachHandle, CallError>>;

    /// Records `step` of the cleanup of the device `read` is, if its stored
    /// `device_state` is still `read`'s; the device as stored after.
    fn device_cleanup<'a>(
        &'a self,
        read: &'a Device,
        step: CleanupStep,
    ) -> BoxFuture<'a, Result<Device, CallError>>;
}

/// `ctx` with `store` attached: the conductor endpoint's `prepare`.
pub fn attach(store: &Arc<dyn CyborgStore>, ctx: RequestContext) -> RequestContext {
    ctx.with_extension(Attached(store.clone()))
}

/// The extension [`attach`] puts in a context.
#[derive(Clone)]
struct Attached(Arc<dyn CyborgStore>);

fn store(ctx: &RequestContext) -> Result<&dyn CyborgStore, CallError> {
    ctx.extension::<Attached>()
        .map(|a| a.0.as_ref())
        .ok_or_else(|| {
            CallError::method(
                NO_DATABASE,
                "this service has no database: these object methods run on the conductor \
                 (conductor RPC 1.1, [upgrade_levels] conductor)",
            )
        })
}

fn listed<L: verso::ObjectList>(objects: Vec<L::Item>) -> L {
    let mut list = L::from_objects(objects);
    list.reset_changes_of(&[], true);
    list
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
        Ok(listed(store(ctx)?.devices_on(&hostname).await?))
    }
}

#[verso::remotable]
impl AttachHandleList {
    /// Every attach handle of `hostname`: what the agent compares its configured
    /// managed mode with at start.
    #[remotable]
    pub async fn get_by_hostname(
        ctx: &RequestContext,
        hostname: String,
    ) -> Result<AttachHandleList, CallError> {
        Ok(listed(store(ctx)?.handles_on(&hostname).await?))
    }
}

#[verso::remotable]
impl AttachHandle {
    /// Sets the PCI managed mode in this unallocated handle's attach info, keeping its
    /// UUID, if the stored handle is still as this object says (else `StaleHandle`,
    /// nothing written; allocated: `HandleInUse`). On success this object is the stored
    /// handle.
    #[remotable]
    pub async fn update_managed(&mut self, managed: bool) -> Result<(), CallError> {
        let ctx = self.meta.context.clone().unwrap_or_default();
        let stored = store(&ctx)?.update_managed(self, managed).await?;
        self.become_stored(stored);
        Ok(())
    }
}

#[verso::remotable]
impl Device {
    /// The agent starts erasing this device (`pending_cleaning` to `cleaning`), claimed
    /// by this call's request id: a retry with the same context answers the same,
    /// another runner loses (`StaleDevice`).
    #[remotable]
    pub async fn cleanup_started(&mut self) -> Result<(), CallError> {
        let claim = self
            .meta
            .context
            .as_ref()
            .map(|c| c.request_id.clone())
            .unwrap_or_default();
        self.cleanup(CleanupStep::Started { claim }).await
    }

    /// The erase succeeded and was verified: the device is `available` again.
    #[remotable]
    pub async fn cleanup_succeeded(&mut self) -> Result<(), CallError> {
        self.cleanup(CleanupStep::Succeeded).await
    }

    /// The erase failed or timed out: the device goes to `error` with `reason`.
    #[remotable]
    pub async fn cleanup_failed(&mut self, reason: String) -> Result<(), CallError> {
        self.cleanup(CleanupStep::Failed { reason }).await
    }
}

impl Device {
    async fn cleanup(&mut self, step: CleanupStep) -> Result<(), CallError> {
        let ctx = self.meta.context.clone().unwrap_or_default();
        let stored = store(&ctx)?.device_cleanup(self, step).await?;
        self.become_stored(stored);
        Ok(())
    }
}

/// The conductor RPC version accel adds [`ReportUnchanged`] at.
pub const REPORT_UNCHANGED_VERSION: Version = Version::new(1, 2);

/// An agent's inventory unchanged since its last full `report_data` the conductor
/// applied, named by its [`report_digest`]: the conductor answers the number of devices
/// when the digest is the one it stored for the host, `None` (send the inventory in
/// full) otherwise.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_unchanged", since = "1.2", reply = Option<i64>)]
pub struct ReportUnchanged {
    /// The reporting host.
    pub hostname: String,
    /// [`report_digest`] of the inventory.
    pub digest: String,
}

/// The digest of a Cyborg inventory (`report_data`'s `driver_device_list`) as the
/// conductor's mapping reads it: SHA-256 over every field of each device, its control
/// path, deployables, attributes and attach handles, devices in control-path order (the
/// order a driver lists them in does not matter), each value length-prefixed so no two
/// inventories share a text. Object metadata is left out, so the agent and the conductor
/// compute the same digest from the objects they built and decoded. `cyborg-v2:` names
/// this rule (`cyborg-v1:` hashed the conductor's mapped rows): a digest of another rule
/// never matches, which costs a full report, never a wrong skip.
pub fn report_digest(devices: &[n::DriverDevice]) -> String {
    use sha2::{Digest, Sha256};
    use verso::VersionedEnum;
    let text = crate::rpc::hash_text;
    fn count(hash: &mut Sha256, n: Option<usize>) {
        hash.update(n.map_or(0, |n| n as u64 + 1).to_le_bytes());
    }
    fn number(hash: &mut Sha256, n: Option<i64>) {
        match n {
            Some(n) => {
                hash.update([1]);
                hash.update(n.to_le_bytes());
            }
            None => hash.update([0]),
        }
    }
    let cpid = |d: &n::DriverDevice| {
        d.controlpath_id
            .get()
            .and_then(|c| c.cpid_info.get().cloned())
    };
    let mut rows: Vec<&n::DriverDevice> = devices.iter().collect();
    rows.sort_by_key(|d| cpid(d));
    let mut hash = Sha256::new();
    hash.update((rows.len() as u64).to_le_bytes());
    for d in rows {
        text(&mut hash, d.r#type.get().map(|t| t.as_str()));
        text(&mut hash, d.vendor.get().map(String::as_str));
        text(&mut hash, d.model.get().map(String::as_str));
        text(&mut hash, d.std_board_info.get().and_then(Option::as_deref));
        text(
            &mut hash,
            d.vendor_board_info.get().and_then(Option::as_deref),
        );
        number(&mut hash, d.stub.get().map(|s| i64::from(*s)));
        text(
            &mut hash,
            d.device_state
                .get()
                .and_then(|s| s.as_ref())
                .map(|s| s.as_str()),
        );
        let path = d.controlpath_id.get();
        text(
            &mut hash,
            path.and_then(|c| c.cpid_type.get()).map(String::as_str),
        );
        text(
            &mut hash,
            path.and_then(|c| c.cpid_info.get()).map(String::as_str),
        );
        let deployables = d.deployable_list.get();
        count(&mut hash, deployables.map(Vec::len));
        for dep in deployables.into_iter().flatten() {
            text(&mut hash, dep.name.get().map(String::as_str));
            number(&mut hash, dep.num_accelerators.get().copied());
            text(&mut hash, dep.driver_name.get().and_then(Option::as_deref));
            let attributes = dep.attribute_list.get().and_then(Option::as_ref);
            let mut pairs: Vec<(Option<&str>, Option<&str>)> = attributes
                .into_iter()
                .flatten()
                .map(|a| {
                    (
                        a.key.get().map(String::as_str),
                        a.value.get().map(String::as_str),
                    )
                })
                .collect();
            pairs.sort();
            count(&mut hash, attributes.map(|_| pairs.len()));
            for (k, v) in pairs {
                text(&mut hash, k);
                text(&mut hash, v);
            }
            let handles = dep.attach_handle_list.get().and_then(Option::as_ref);
            count(&mut hash, handles.map(Vec::len));
            for h in handles.into_iter().flatten() {
                text(&mut hash, h.attach_type.get().map(String::as_str));
                text(&mut hash, h.attach_info.get().map(String::as_str));
                number(&mut hash, h.in_use.get().map(|u| i64::from(*u)));
            }
        }
    }
    crate::rpc::digest_text("cyborg-v2:", &hash.finalize())
}

/// Cyborg's conductor API with the seed spec: 1.1, Cyborg 17's methods and the three
/// object-indirection methods; 1.2, accel's [`ReportUnchanged`].
#[derive(Debug, Clone, Copy)]
pub struct ConductorApi;

impl RpcApi for ConductorApi {
    const NAME: &'static str = "conductor";
    const VERSION: Version = REPORT_UNCHANGED_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        let mut methods = <rpc::ConductorApi as RpcApi>::methods();
        methods.extend(verso_rpc::conductor::object_methods_since(
            INDIRECTION_VERSION,
        ));
        methods.push(ReportUnchanged::spec());
        methods
    }
}

/// Asks a host's agent to erase a device its release left `pending_cleaning` (the NVMe
/// feature's conductor-to-agent call, agent RPC 1.1). The agent answers once the
/// cleanup is started (or already running); the erase goes on after the reply and its
/// outcome is recorded through `Device.cleanup_succeeded` / `cleanup_failed`.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "cleanup_device", since = "1.1")]
pub struct CleanupDevice {
    /// The device's UUID.
    pub device_uuid: String,
}

/// Cyborg's agent API with the NVMe feature: 1.1, Cyborg 17's three methods and
/// `cleanup_device`. A conductor sends 1.1 only under `[upgrade_levels] cyborg_agent`
/// (1.0 by default: a Cyborg 17 agent has no `cleanup_device`; the agent's own scan
/// finds a device whose call never came).
#[derive(Debug, Clone, Copy)]
pub struct AgentApi;

impl RpcApi for AgentApi {
    const NAME: &'static str = "agent";
    const VERSION: Version = AGENT_CLEANUP_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        let mut methods = <rpc::AgentApi as RpcApi>::methods();
        methods.push(CleanupDevice::spec());
        methods
    }
}

/// Cyborg 17's classes with the seed spec's: `Device` 1.6 and `AttachHandle` 1.1 in
/// place of 1.5 and 1.0, and the lists `DeviceList` and `AttachHandleList`.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register_remotable::<Device>()
        .register::<n::Deployable>()
        .register_remotable::<AttachHandle>()
        .register::<n::ControlpathID>()
        .register::<n::DeviceProfile>()
        .register::<n::Arq>()
        .register::<n::ExtArq>()
        .register::<n::FpgaExtArq>()
        .register::<n::Attribute>()
        .register::<n::DriverAttachHandle>()
        .register::<n::DriverAttribute>()
        .register::<n::DriverControlPathID>()
        .register::<n::DriverDeployable>()
        .register::<n::DriverDevice>()
        .register_remotable::<DeviceList>()
        .register_remotable::<AttachHandleList>();
    r
}
