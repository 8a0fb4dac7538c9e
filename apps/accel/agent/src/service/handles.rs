//! What the agent does with this host's attach handles through the conductor: the PCI
//! managed mode brought to the configured one at start, and NVMe cleanups (claimed,
//! erased with the configured command, recorded, each transition a compare-and-swap).

use super::{Agent, AgentStartError, ERROR_MODULE};
use crate::cleanup;
use crate::discovery::discover;
use accel_objects::errors::{classify, HandleErrorKind};
use accel_objects::{AttachHandle, AttachHandleList, AttachType};
use std::sync::{Arc, PoisonError};
use std::time::Duration;
use verso::indirection::{BoxFuture, CallError};
use verso::{ObjectList, RequestContext};
use verso_rpc::RemoteError;

/// The refusal when a host's handles changed under every read of the managed-mode check.
fn kept_changing() -> AgentStartError {
    AgentStartError::Handles {
        what: "updating this host's attach handles' managed mode".into(),
        source: CallError::method(
            accel_objects::errors::STALE_HANDLE,
            "the handles kept changing under five consecutive reads",
        ),
    }
}

/// What a transition step of a cleanup did.
pub(super) enum Step {
    Started,
    Succeeded,
    Failed(String),
}

impl Agent {
    /// Brings the persisted managed mode of this host's PCI handles to the configured
    /// one. `at_start`: an allocated handle that would change refuses the start;
    /// otherwise it is left as it is (and logged).
    pub(super) async fn reconcile_managed(&self, at_start: bool) -> Result<usize, AgentStartError> {
        if self.cyborg.is_some() {
            self.reconcile::<accel_objects::cyborg::AttachHandle>(at_start)
                .await
        } else {
            self.reconcile::<AttachHandle>(at_start).await
        }
    }

    /// [`Agent::reconcile_managed`] over the handles of one wire's classes: read them
    /// all, refuse (or log) an allocated one that would change, update the free ones
    /// (each a compare-and-swap on the handle as read), and read again after a lost
    /// race, five times at most.
    async fn reconcile<H: ManagedHandle>(&self, at_start: bool) -> Result<usize, AgentStartError> {
        let desired = self.config.pci_managed;
        let mut updated = 0;
        for _attempt in 0..5 {
            let ctx = self.ctx("managed");
            let handles = H::list(self, &ctx)
                .await
                .map_err(|source| AgentStartError::Handles {
                    what: format!("reading this host's attach handles ({})", H::LIST),
                    source,
                })?;
            // The PCI handles whose mode differs, with what each says: a handle the
            // conductor sent without a field this needs is refused, naming it.
            let mut differing = Vec::new();
            for h in handles.iter().filter(|h| h.is_pci()) {
                let (persisted, in_use) = h.read().map_err(|e| AgentStartError::Handles {
                    what: format!("reading attach handle {} ({})", h.uuid(), H::LIST),
                    source: e.into(),
                })?;
                if persisted != desired {
                    differing.push((h, persisted, in_use));
                }
            }
            // Refusals first: a refused start changes nothing.
            for &(h, persisted, _) in differing.iter().filter(|(_, _, in_use)| *in_use) {
                let refusal = AgentStartError::ManagedModeInUse {
                    device: h.describe(self).await,
                    handle: h.uuid(),
                    instance: h.instance(),
                    persisted,
                    configured: desired,
                };
                if at_start {
                    return Err(refusal);
                }
                tracing::warn!(host = self.host(), "{refusal}");
            }
            let mut raced = false;
            for &(h, _, _) in differing.iter().filter(|(_, _, in_use)| !*in_use) {
                let mut h = h.clone();
                h.set_context(ctx.clone());
                match h.update(desired).await {
                    Ok(()) => {
                        updated += 1;
                        tracing::info!(host = self.host(), handle = %h.uuid(), managed = desired, "attach handle managed mode updated");
                    }
                    Err(e) => {
                        self.lost_managed_race(&h.uuid(), e)?;
                        raced = true;
                    }
                }
            }
            if !raced {
                return Ok(updated);
            }
        }
        Err(kept_changing())
    }

    /// An `update_managed` that failed: `Ok` when the handle changed since it was read
    /// (read again), the start's refusal otherwise.
    fn lost_managed_race(&self, handle: &str, e: CallError) -> Result<(), AgentStartError> {
        match classify(&e) {
            HandleErrorKind::Stale | HandleErrorKind::InUse | HandleErrorKind::NotFound => {
                tracing::warn!(host = self.host(), handle, error = %e, "attach handle changed since it was read: reading again");
                Ok(())
            }
            HandleErrorKind::NotFinalized(n) => Err(AgentStartError::NotFinalized(n)),
            _ => Err(AgentStartError::Handles {
                what: format!(
                    "updating the managed mode of attach handle {handle} (AttachHandle.update_managed)"
                ),
                source: e,
            }),
        }
    }

    /// Starts a cleanup for each of this host's handles in `cleaning` not already being
    /// cleaned; returns how many were started.
    pub(super) async fn scan_cleaning(self: &Arc<Self>) -> Result<usize, CallError> {
        if self.indirection.is_none() {
            return Ok(0);
        }
        if self.cyborg.is_some() {
            return self.scan_cleaning_cyborg().await;
        }
        let ctx = self.ctx("scan");
        let handles = AttachHandleList::get_cleaning(&ctx, self.host().to_owned()).await?;
        let mut started = 0;
        for h in handles.iter() {
            if self.spawn_cleanup(h.clone()) {
                started += 1;
            }
        }
        Ok(started)
    }

    /// `cleanup_device`: the handle must be this host's and in `cleaning`.
    pub(super) async fn cleanup_requested(self: &Arc<Self>, uuid: &str) -> Result<(), RemoteError> {
        if self.cyborg.is_some() {
            return self.handle_cleanup_cyborg(uuid).await;
        }
        if self.indirection.is_none() {
            return Err(RemoteError::new(
                "IndirectionUnavailable",
                ERROR_MODULE,
                "this agent runs with [upgrade_levels] conductor below 1.1 and cannot record cleanups",
            ));
        }
        let ctx = self.ctx("cleanup");
        let handles = AttachHandleList::get_cleaning(&ctx, self.host().to_owned())
            .await
            .map_err(|e| RemoteError::new(e.kind().to_owned(), ERROR_MODULE, e.to_string()))?;
        match handles.iter().find(|h| handle_uuid(h) == uuid) {
            Some(h) => {
                self.spawn_cleanup(h.clone());
                Ok(())
            }
            None => Err(RemoteError::new(
                accel_objects::errors::NOT_CLEANING,
                ERROR_MODULE,
                format!(
                    "attach handle {uuid} is not in cleaning on host {}",
                    self.host()
                ),
            )),
        }
    }

    pub(super) fn running_cleanups(&self) -> usize {
        let mut map = self.cleanups.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, t| !t.is_finished());
        map.len()
    }

    pub(super) fn abort_cleanups(&self) {
        let mut map = self.cleanups.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, task) in map.drain() {
            task.abort();
        }
    }

    pub(super) fn spawn_cleanup(self: &Arc<Self>, handle: AttachHandle) -> bool {
        let agent = self.clone();
        self.spawn_keyed(
            handle_uuid(&handle),
            async move { agent.clean(handle).await },
        )
    }

    /// Runs `cleanup` unless one under `key` (a handle's or device's UUID) still runs.
    pub(super) fn spawn_keyed(
        &self,
        key: String,
        cleanup: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> bool {
        let mut map = self.cleanups.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, t| !t.is_finished());
        if map.contains_key(&key) {
            return false;
        }
        map.insert(key, tokio::spawn(cleanup));
        true
    }

    /// One cleanup: claim, erase, record.
    pub(super) async fn clean(&self, mut h: AttachHandle) {
        let uuid = handle_uuid(&h);
        h.meta.context = Some(Box::new(self.ctx("cleanup")));
        if !self.transition(&mut h, &uuid, Step::Started).await {
            return;
        }
        tracing::info!(host = self.host(), handle = %uuid, "cleanup started");
        let result = match self.namespaces_of(&h) {
            Ok(paths) => self.erase(&paths).await,
            Err(why) => Err(why),
        };
        let step = match result {
            Ok(()) => Step::Succeeded,
            Err(why) => {
                tracing::warn!(host = self.host(), handle = %uuid, %why, "cleanup failed: the device stays out of the pool");
                Step::Failed(why)
            }
        };
        if self.transition(&mut h, &uuid, step).await {
            tracing::info!(host = self.host(), handle = %uuid, state = ?h.cleanup_state.get(), "cleanup recorded");
        }
    }

    pub(super) async fn erase(&self, paths: &[String]) -> Result<(), String> {
        for path in paths {
            cleanup::clean(&self.method, path, self.config.nvme.cleanup_timeout)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The namespace device paths of the NVMe function a handle's attach info names.
    pub(super) fn namespaces_of(&self, h: &AttachHandle) -> Result<Vec<String>, String> {
        let address = h
            .attach_info
            .get()
            .and_then(|info| pci_address(info))
            .ok_or_else(|| format!("attach info {:?} names no PCI address", h.attach_info.get()))?;
        self.namespaces_at(&[address])
    }

    /// The namespace device paths of the NVMe functions at `addresses`, each of which
    /// must be on this host and have at least one.
    pub(super) fn namespaces_at(&self, addresses: &[String]) -> Result<Vec<String>, String> {
        let found = discover(&self.config.sysfs_root).map_err(|e| e.to_string())?;
        let mut paths = Vec::new();
        for address in addresses {
            let function = found
                .devices
                .iter()
                .find(|f| &f.address == address)
                .ok_or_else(|| format!("no PCI function {address} on this host"))?;
            let before = paths.len();
            paths.extend(
                function
                    .nvme
                    .iter()
                    .flat_map(|c| c.namespaces.iter().map(|n| n.dev_path.clone())),
            );
            if paths.len() == before {
                return Err(format!(
                    "PCI function {address} has no NVMe namespace to erase"
                ));
            }
        }
        Ok(paths)
    }

    /// Records a cleanup step on `subject` (named `uuid` in the log), retrying (with the
    /// same context, so the same claim and expected state) while the conductor does not
    /// answer. False when the subject was moved by someone else or the step cannot be
    /// recorded.
    pub(super) async fn transition<S: CleanupSubject>(
        &self,
        subject: &mut S,
        uuid: &str,
        step: Step,
    ) -> bool {
        let mut delay = Duration::from_millis(100);
        for attempt in 1..=100 {
            let result = subject.record(&step).await;
            let e = match result {
                Ok(()) => return true,
                Err(e) => e,
            };
            match classify(&e) {
                HandleErrorKind::Retryable => {
                    tracing::warn!(host = self.host(), uuid = %uuid, attempt, error = %e, "cleanup transition not recorded yet: retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                HandleErrorKind::NotCleaning
                | HandleErrorKind::Stale
                | HandleErrorKind::NotFound => {
                    tracing::info!(host = self.host(), uuid = %uuid, error = %e, "the handle was moved by someone else: left as it is");
                    return false;
                }
                _ => {
                    tracing::error!(host = self.host(), uuid = %uuid, error = %e, "cleanup transition refused");
                    return false;
                }
            }
        }
        tracing::error!(host = self.host(), uuid = %uuid, "cleanup transition not recorded after 100 attempts: it stays in cleaning for the next scan");
        false
    }
}

/// A PCI attach handle as the managed-mode check reads and updates it through the
/// conductor: accel's (`AttachHandle` 1.4, the update a compare-and-swap on the revision
/// read) or, on Cyborg's wire, the seed spec's (`AttachHandle` 1.1, on the attach info
/// and allocation read).
pub(super) trait ManagedHandle: Clone + Send + Sync + Sized + 'static {
    /// The read of a host's handles, as messages name it.
    const LIST: &'static str;
    /// This host's attach handles.
    fn list<'a>(
        agent: &'a Agent,
        ctx: &'a RequestContext,
    ) -> BoxFuture<'a, Result<Vec<Self>, CallError>>;
    /// Whether it is a PCI handle (the only kind with a managed mode).
    fn is_pci(&self) -> bool;
    /// Its UUID (empty when unset).
    fn uuid(&self) -> String;
    /// Its persisted managed mode and whether it is allocated; a field the check or its
    /// update needs that the conductor did not send is an error naming it.
    fn read(&self) -> Result<(bool, bool), verso::Error>;
    /// The instance holding it, when the class carries it.
    fn instance(&self) -> Option<String>;
    /// Its device as a refusal names it: UUID, type, PCI address.
    fn describe<'a>(&'a self, agent: &'a Agent) -> BoxFuture<'a, String>;
    /// The context its remotable calls run with.
    fn set_context(&mut self, ctx: RequestContext);
    /// Sets its managed mode through the conductor; on success it is as stored.
    fn update(&mut self, managed: bool) -> BoxFuture<'_, Result<(), CallError>>;
}

impl ManagedHandle for AttachHandle {
    const LIST: &'static str = "AttachHandleList.get_by_host";

    fn list<'a>(
        agent: &'a Agent,
        ctx: &'a RequestContext,
    ) -> BoxFuture<'a, Result<Vec<Self>, CallError>> {
        Box::pin(async move {
            let list = AttachHandleList::get_by_host(ctx, agent.host().to_owned()).await?;
            Ok(list.iter().cloned().collect())
        })
    }

    fn is_pci(&self) -> bool {
        self.attach_type.get() == Some(&AttachType::Pci)
    }

    fn uuid(&self) -> String {
        handle_uuid(self)
    }

    fn read(&self) -> Result<(bool, bool), verso::Error> {
        // The update swaps against the revision read: one the conductor did not send
        // refuses the check here, naming it.
        self.current_revision()?;
        Ok((self.managed()?, self.is_in_use()?))
    }

    fn instance(&self) -> Option<String> {
        self.instance_uuid.get().cloned().flatten()
    }

    fn describe<'a>(&'a self, _agent: &'a Agent) -> BoxFuture<'a, String> {
        Box::pin(std::future::ready(describe_device(self)))
    }

    fn set_context(&mut self, ctx: RequestContext) {
        self.meta.context = Some(Box::new(ctx));
    }

    fn update(&mut self, managed: bool) -> BoxFuture<'_, Result<(), CallError>> {
        Box::pin(async move {
            let expected = self.current_revision()?;
            self.update_managed(managed, expected).await
        })
    }
}

/// What a cleanup records its steps on: accel's attach handle (its `cleanup_*` methods,
/// `AttachHandle` 1.3), or Cyborg's device with the seed spec (`Device` 1.6).
pub(super) trait CleanupSubject: Send {
    /// Records `step` through the conductor; on success this object is as stored.
    fn record<'a>(&'a mut self, step: &'a Step) -> BoxFuture<'a, Result<(), CallError>>;
}

impl CleanupSubject for AttachHandle {
    fn record<'a>(&'a mut self, step: &'a Step) -> BoxFuture<'a, Result<(), CallError>> {
        match step {
            Step::Started => Box::pin(self.cleanup_started()),
            Step::Succeeded => Box::pin(self.cleanup_succeeded()),
            Step::Failed(why) => Box::pin(self.cleanup_failed(why.clone())),
        }
    }
}

impl CleanupSubject for accel_objects::cyborg::Device {
    fn record<'a>(&'a mut self, step: &'a Step) -> BoxFuture<'a, Result<(), CallError>> {
        match step {
            Step::Started => Box::pin(self.cleanup_started()),
            Step::Succeeded => Box::pin(self.cleanup_succeeded()),
            Step::Failed(why) => Box::pin(self.cleanup_failed(why.clone())),
        }
    }
}

pub(super) fn handle_uuid(h: &AttachHandle) -> String {
    h.uuid.get().map(ToString::to_string).unwrap_or_default()
}

pub(super) fn describe_device(h: &AttachHandle) -> String {
    let device = h.device.get().cloned().flatten();
    let uuid = device
        .as_ref()
        .and_then(|d| d.uuid.get().map(ToString::to_string))
        .unwrap_or_else(|| "unknown".into());
    let kind = device
        .as_ref()
        .and_then(|d| {
            d.r#type
                .get()
                .map(|t| verso::VersionedEnum::as_str(t).to_owned())
        })
        .unwrap_or_else(|| "device".into());
    let address = h
        .attach_info
        .get()
        .and_then(|i| pci_address(i))
        .unwrap_or_else(|| "unknown address".into());
    format!("{uuid} ({kind} at PCI {address})")
}

/// `DDDD:BB:DD.F` from Cyborg's PCI attach info.
pub(super) fn pci_address(attach_info: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(attach_info).ok()?;
    let part = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
    Some(format!(
        "{}:{}:{}.{}",
        part("domain")?,
        part("bus")?,
        part("device")?,
        part("function")?
    ))
}
