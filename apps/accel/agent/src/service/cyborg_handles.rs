//! The same two features as `handles`, on Cyborg's wire with the seed spec
//! ([`super::CyborgWire`]): the PCI managed mode (`handles`' check, over the seed spec's
//! `AttachHandleList.get_by_hostname` and `AttachHandle.update_managed`, 1.1), NVMe cleanups on Cyborg's own
//! `Device.device_state` through `DeviceList.get_by_hostname` and `Device` 1.6's
//! `cleanup_started` / `cleanup_succeeded` / `cleanup_failed`.
//!
//! A Cyborg `Device` carries no PCI address: its functions are the attach handles whose
//! `cpid_id` is the device's `id` (the device's control path; accel's conductor keeps it
//! in the device's row), each handle's `attach_info` naming one function.

use super::handles::{pci_address, ManagedHandle, Step};
use super::{Agent, ERROR_MODULE};
use accel_cyborg17::objects::{AttachHandleType, DeviceState};
use accel_objects::attach_info_managed;
use accel_objects::cyborg::{AttachHandle, AttachHandleList, Device, DeviceList};
use accel_objects::errors::{NOT_CLEANING, NOT_FOUND};
use std::sync::Arc;
use verso::indirection::{BoxFuture, CallError};
use verso::{ObjectList, RequestContext, VersionedEnum};
use verso_rpc::RemoteError;

/// A failed call through the conductor as the agent API's answer.
fn remote(e: CallError) -> RemoteError {
    RemoteError::new(e.kind().to_owned(), ERROR_MODULE, e.to_string())
}

fn uuid_of(h: &AttachHandle) -> String {
    h.uuid.get().map(ToString::to_string).unwrap_or_default()
}

fn device_uuid(d: &Device) -> String {
    d.uuid.get().map(ToString::to_string).unwrap_or_default()
}

/// Whether a device's state says it waits for (or is in) a cleanup.
fn to_clean(d: &Device) -> bool {
    matches!(
        d.device_state.get(),
        Some(Some(DeviceState::PendingCleaning | DeviceState::Cleaning))
    )
}

impl Agent {
    /// The device of handle `h` as the refusal names it: UUID, type and the handle's PCI
    /// address (one more read, only when refusing).
    async fn describe_cyborg_device(&self, h: &AttachHandle) -> String {
        let address = h
            .attach_info
            .get()
            .and_then(|i| pci_address(i))
            .unwrap_or_else(|| "unknown address".into());
        let device = match h.cpid_id.get() {
            Some(id) => DeviceList::get_by_hostname(&self.ctx("describe"), self.host().to_owned())
                .await
                .ok()
                .and_then(|l| l.iter().find(|d| d.id.get() == Some(id)).cloned()),
            None => None,
        };
        match device {
            Some(d) => format!(
                "{} ({} at PCI {address})",
                device_uuid(&d),
                d.r#type.get().map_or("device", |t| t.as_str())
            ),
            None => format!("unknown (at PCI {address})"),
        }
    }

    /// Starts a cleanup for each of this host's devices waiting for one
    /// (`pending_cleaning`) or left in one (`cleaning`: an erase interrupted by a stop)
    /// not already running here; returns how many were started.
    pub(super) async fn scan_cleaning_cyborg(self: &Arc<Self>) -> Result<usize, CallError> {
        let devices =
            DeviceList::get_by_hostname(&self.ctx("scan"), self.host().to_owned()).await?;
        let mut started = 0;
        for d in devices.iter().filter(|d| to_clean(d)) {
            if self.spawn_device_cleanup(d.clone()) {
                started += 1;
            }
        }
        Ok(started)
    }

    /// `cleanup_device` (Cyborg agent API 1.1): the device must be this host's and
    /// waiting for (or in) a cleanup.
    pub(super) async fn cleanup_device_cyborg(
        self: &Arc<Self>,
        uuid: &str,
    ) -> Result<(), RemoteError> {
        if let Some(refused) = self.cannot_record_cleanups() {
            return Err(refused);
        }
        let devices = self.host_devices().await?;
        match devices.iter().find(|d| device_uuid(d) == uuid) {
            Some(d) => self.start_cleanup_of(d).map_or(Ok(()), Err),
            None => Err(RemoteError::new(
                NOT_FOUND,
                ERROR_MODULE,
                format!("no device {uuid} on host {}", self.host()),
            )),
        }
    }

    /// accel's `cleanup_device` of a handle (agent API 1.1 on `accel-agent`) on Cyborg's
    /// wire: the cleanup of the handle's device (its `cpid_id`).
    pub(super) async fn handle_cleanup_cyborg(
        self: &Arc<Self>,
        handle_uuid: &str,
    ) -> Result<(), RemoteError> {
        if let Some(refused) = self.cannot_record_cleanups() {
            return Err(refused);
        }
        let handles =
            AttachHandleList::get_by_hostname(&self.ctx("cleanup"), self.host().to_owned())
                .await
                .map_err(remote)?;
        let device = handles
            .iter()
            .find(|h| uuid_of(h) == handle_uuid)
            .and_then(|h| h.cpid_id.get().copied());
        let devices = self.host_devices().await?;
        match devices
            .iter()
            .find(|d| device.is_some() && d.id.get() == device.as_ref())
        {
            Some(d) => self.start_cleanup_of(d).map_or(Ok(()), Err),
            None => Err(RemoteError::new(
                NOT_CLEANING,
                ERROR_MODULE,
                format!(
                    "attach handle {handle_uuid} is not in cleaning on host {}",
                    self.host()
                ),
            )),
        }
    }

    /// This host's devices, read through the conductor for a `cleanup_device`.
    async fn host_devices(&self) -> Result<DeviceList, RemoteError> {
        DeviceList::get_by_hostname(&self.ctx("cleanup"), self.host().to_owned())
            .await
            .map_err(remote)
    }

    /// Starts the cleanup of device `d` (or finds it running) if it waits for one (or is
    /// in one); the refusal (`NotCleaning`) otherwise.
    fn start_cleanup_of(self: &Arc<Self>, d: &Device) -> Option<RemoteError> {
        if to_clean(d) {
            self.spawn_device_cleanup(d.clone());
            return None;
        }
        Some(RemoteError::new(
            NOT_CLEANING,
            ERROR_MODULE,
            format!(
                "device {} on host {} is {}, not waiting for a cleanup",
                device_uuid(d),
                self.host(),
                d.device_state
                    .get()
                    .cloned()
                    .flatten()
                    .map_or("of no state", |s| s.as_str())
            ),
        ))
    }

    /// Cleanups are recorded through object indirection, which the cap must allow: the
    /// refusal when it does not.
    fn cannot_record_cleanups(&self) -> Option<RemoteError> {
        self.indirection.is_none().then(|| {
            RemoteError::new(
                "IndirectionUnavailable",
                ERROR_MODULE,
                "this agent runs with [upgrade_levels] cyborg_conductor below 1.1 and cannot record cleanups",
            )
        })
    }

    fn spawn_device_cleanup(self: &Arc<Self>, device: Device) -> bool {
        let agent = self.clone();
        self.spawn_keyed(device_uuid(&device), async move {
            agent.clean_device(device).await
        })
    }

    /// One device's cleanup: claim it (unless a stopped run had: `cleaning`), erase
    /// every NVMe namespace of its functions, record the outcome.
    async fn clean_device(&self, mut d: Device) {
        let uuid = device_uuid(&d);
        d.meta.context = Some(Box::new(self.ctx("cleanup")));
        let resumed = d.device_state.get() == Some(&Some(DeviceState::Cleaning));
        if !resumed && !self.transition(&mut d, &uuid, Step::Started).await {
            return;
        }
        tracing::info!(host = self.host(), device = %uuid, resumed, "cleanup started");
        let result = match self.device_functions(&d).await {
            Ok(addresses) => match self.namespaces_at(&addresses) {
                Ok(paths) => self.erase(&paths).await,
                Err(why) => Err(why),
            },
            Err(why) => Err(why),
        };
        let step = match result {
            Ok(()) => Step::Succeeded,
            Err(why) => {
                tracing::warn!(host = self.host(), device = %uuid, %why, "cleanup failed: the device stays out of the pool");
                Step::Failed(why)
            }
        };
        if self.transition(&mut d, &uuid, step).await {
            tracing::info!(host = self.host(), device = %uuid, state = ?d.device_state.get(), "cleanup recorded");
        }
    }

    /// The PCI addresses of device `d`'s functions: the attach info of the handles
    /// whose control path is `d`'s.
    async fn device_functions(&self, d: &Device) -> Result<Vec<String>, String> {
        let id = *d
            .id
            .get()
            .ok_or("the conductor sent the device without its id")?;
        let handles =
            AttachHandleList::get_by_hostname(&self.ctx("cleanup"), self.host().to_owned())
                .await
                .map_err(|e| format!("reading the device's attach handles: {e}"))?;
        let mut addresses = Vec::new();
        for h in handles.iter().filter(|h| h.cpid_id.get() == Some(&id)) {
            let info = h.attach_info.get().map(String::as_str).unwrap_or_default();
            addresses.push(
                pci_address(info)
                    .ok_or_else(|| format!("attach info {info:?} names no PCI address"))?,
            );
        }
        if addresses.is_empty() {
            return Err(format!(
                "device {} has no attach handle on this host",
                device_uuid(d)
            ));
        }
        addresses.sort();
        addresses.dedup();
        Ok(addresses)
    }
}

/// The seed spec's handle on Cyborg's wire: its mode is the `managed` key of its attach
/// info (absent: managed); the update is a compare-and-swap on the attach info and
/// allocation as read.
impl ManagedHandle for AttachHandle {
    const LIST: &'static str = "AttachHandleList.get_by_hostname";

    fn list<'a>(
        agent: &'a Agent,
        ctx: &'a RequestContext,
    ) -> BoxFuture<'a, Result<Vec<Self>, CallError>> {
        Box::pin(async move {
            let list = AttachHandleList::get_by_hostname(ctx, agent.host().to_owned()).await?;
            Ok(list.iter().cloned().collect())
        })
    }

    fn is_pci(&self) -> bool {
        self.attach_type.get() == Some(&AttachHandleType::Pci)
    }

    fn uuid(&self) -> String {
        uuid_of(self)
    }

    fn read(&self) -> Result<(bool, bool), verso::Error> {
        Ok((
            attach_info_managed(self.attach_info.require("AttachHandle", "attach_info")?),
            *self.in_use.require("AttachHandle", "in_use")?,
        ))
    }

    /// Cyborg's `AttachHandle` names no instance.
    fn instance(&self) -> Option<String> {
        None
    }

    fn describe<'a>(&'a self, agent: &'a Agent) -> BoxFuture<'a, String> {
        Box::pin(agent.describe_cyborg_device(self))
    }

    fn set_context(&mut self, ctx: RequestContext) {
        self.meta.context = Some(Box::new(ctx));
    }

    fn update(&mut self, managed: bool) -> BoxFuture<'_, Result<(), CallError>> {
        Box::pin(self.update_managed(managed))
    }
}

/// The agent as Cyborg's agent API's `cleanup_device` handler.
pub(super) struct Cleanups(pub(super) Arc<Agent>);

impl crate::cyborg::DeviceCleanups for Cleanups {
    fn cleanup_device<'a>(
        &'a self,
        device_uuid: &'a str,
    ) -> BoxFuture<'a, Result<(), RemoteError>> {
        Box::pin(self.0.cleanup_device_cyborg(device_uuid))
    }
}
