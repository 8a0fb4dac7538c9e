//! The agent as a library: [`start`] brings one agent up over a transport and returns a
//! [`RunningAgent`]; the `accel agent` command, `accel all-in-one` and the demo (many
//! agents in one process) all use it.
//!
//! [`start`] does, in order, and refuses to start (a typed [`AgentStartError`]) when a
//! step says the agent must not run:
//! 1. opens the agent's component-version record (`agent-HOST.version` in `state_dir`);
//!    a fresh agent starts at the conductor's apparent version, asked with a heartbeat;
//! 2. heartbeats to the conductor's `upgrade` API (`accel-upgrade`): a fenced agent stops;
//! 3. checks the RPC requirement of its features: `[pci] managed = false` needs object
//!    indirection (conductor RPC 1.1), so with `[upgrade_levels] conductor = "1.0"` it
//!    refuses with [`IndirectionUnavailable`] (the feature, 1.1, the cap, the option);
//!    with no such feature enabled it runs with cap 1.0 and skips the steps below that
//!    need indirection. `managed = false` also waits for `AccelVersion::DriverFeatures`
//!    to be finalized: before, the start is refused with
//!    [`AgentStartError::NotFinalized`] (the typed [`NotSupportedBeforeFinalization`]);
//! 4. validates the PCI managed mode against the persisted attach handles (one
//!    `AttachHandleList.get_by_host` call): an allocated handle whose mode would change
//!    refuses the start, naming the device, the handle, the instance and the setting to
//!    revert; an unallocated one is updated (`AttachHandle.update_managed`,
//!    compare-and-swap, re-read on a lost race);
//! 5. recovers NVMe cleanups: this host's handles left in `cleaning` (an erase
//!    interrupted by a crash, or a release whose `cleanup_device` never came) are erased
//!    again, in the background; recovery is idempotent;
//! 6. reports its inventory (`report_data`);
//! 7. serves the agent API (`accel-agent`, server = host: `report_now`,
//!    `cleanup_device`) and loops: heartbeat and report every `report_interval`;
//!    rediscovery (reported when it changed) and the `cleaning` scan every
//!    `scan_interval`.
//!
//! Each cleanup claims the handle (`cleanup_started`), runs the configured command with a
//! timeout, and records `cleanup_succeeded` or `cleanup_failed`; every transition is a
//! compare-and-swap on the conductor, retried with the same expected revision when the
//! conductor or the broker does not answer, so it lands exactly once.

use crate::cleanup::{self, CleanupMethod};
use crate::client::{fenced, heartbeat, HeartbeatError, Reported, Reporter};
use crate::discovery::{discover, DiscoveryError};
use crate::fpga::Programmer;
use crate::report::driver_devices;
use accel_objects::errors::{classify, ErrorKind, HandleErrorKind};
use accel_objects::rpc::{
    AgentApi, CleanupDevice, ConductorApi, ProgramFpga, ReportNow, AGENT_TOPIC, CONDUCTOR_TOPIC,
    UPGRADE_TOPIC,
};
use accel_objects::{AccelVersion, AttachHandle, AttachHandleList, AttachType, DriverDeviceList};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use verso::indirection::CallError;
use verso::{ObjectList, RequestContext, Version};
use verso_rpc::conductor::{ConductorApi as Indirection, IndirectionUnavailable};
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcClient, RpcError, RpcServer, ServerHandle, Target};
use verso_upgrade::admin::{Heartbeat, UpgradeApi};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{
    ComponentStatus, ComponentVersion, Fenced, FileStore, MemberReport,
    NotSupportedBeforeFinalization, Observed, UpgradeError, VersionManager,
};

/// The feature name `[pci] managed = false` is refused under when indirection is capped.
pub const UNMANAGED_PCI_FEATURE: &str = "PCI unmanaged mode ([pci] managed = false)";

/// The error module of the agent API's remote errors.
pub const ERROR_MODULE: &str = "accel.agent";

/// `[nvme]`: how released NVMe devices are erased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmeConfig {
    /// `program args...`, run with the namespace's device path appended; `None` (or
    /// empty): the built-in nvme-cli sanitize / secure-erase format, checked before use.
    pub cleanup_command: Option<String>,
    /// A cleanup that runs longer is killed and counts as failed.
    pub cleanup_timeout: Duration,
}

impl Default for NvmeConfig {
    fn default() -> Self {
        NvmeConfig {
            cleanup_command: None,
            cleanup_timeout: Duration::from_secs(3600),
        }
    }
}

/// One agent's configuration.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// This host's name: the agent's identity, its devices' host, its server name.
    pub host: String,
    /// Where sysfs is (`/sys`, or a fixture tree).
    pub sysfs_root: PathBuf,
    /// Where the component-version record is kept (`agent-HOST.version`).
    pub state_dir: PathBuf,
    /// Between heartbeats and full reports.
    pub report_interval: Duration,
    /// `[upgrade_levels] conductor`: the newest conductor RPC version to send (`None`:
    /// the newest this build knows).
    pub conductor_cap: Option<Version>,
    /// `[pci] managed`: the PCI managed mode guests get (`false` needs conductor 1.1).
    pub pci_managed: bool,
    /// `[nvme]`.
    pub nvme: NvmeConfig,
    /// `[agent] scan_interval`: between rediscoveries and scans for handles in `cleaning`.
    pub scan_interval: Duration,
    /// `[fpga]` and `[glance]`: how FPGAs are programmed (`None`: `program_fpga` is
    /// refused).
    pub fpga: Option<Arc<Programmer>>,
}

impl AgentConfig {
    /// `host` on `sysfs_root`, its record in `state_dir`, everything else at its default
    /// (60 s reports, 10 s scans, managed, no cap, the built-in cleanup).
    pub fn new(host: impl Into<String>, sysfs_root: PathBuf, state_dir: PathBuf) -> Self {
        AgentConfig {
            host: host.into(),
            sysfs_root,
            state_dir,
            report_interval: Duration::from_secs(60),
            conductor_cap: None,
            pci_managed: true,
            nvme: NvmeConfig::default(),
            scan_interval: Duration::from_secs(10),
            fpga: None,
        }
    }
}

/// Why an agent did not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentStartError {
    /// The configuration cannot work (an empty host name, a zero interval).
    #[error("agent configuration: {0}")]
    Config(String),
    /// The state directory cannot be created.
    #[error("cannot create the agent's state directory {dir}: {source}")]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The version record refuses this build (a downgrade after finalization, ...).
    #[error("agent version record: {0}")]
    Versions(#[source] UpgradeError),
    /// The conductor did not answer (or refused) a call the start needs.
    #[error("{what}: {source}")]
    Conductor {
        /// What the call was for.
        what: &'static str,
        /// The RPC error.
        #[source]
        source: RpcError,
    },
    /// The conductor refuses this agent (fencing): the reason says what to do.
    #[error("refused by the conductor: {0}")]
    Fenced(Fenced),
    /// A configured feature needs conductor RPC the cap does not allow.
    #[error("configuration error: {0}")]
    Indirection(#[from] IndirectionUnavailable),
    /// An allocated attach handle would change its PCI managed mode.
    #[error(
        "refusing to start: [pci] managed = {configured} would change attach handle {handle} \
         of device {device} from managed = {persisted} while it is allocated to instance \
         {instance}; revert the setting to [pci] managed = {persisted}, or release the \
         instance's accelerator first"
    )]
    ManagedModeInUse {
        /// The device (uuid, type and PCI address).
        device: String,
        /// The attach handle's uuid.
        handle: String,
        /// The instance it is bound to.
        instance: String,
        /// The persisted managed mode.
        persisted: bool,
        /// The configured one.
        configured: bool,
    },
    /// The configured managed mode is refused until the upgrade is finalized.
    #[error("refusing to start: {0}")]
    NotFinalized(NotSupportedBeforeFinalization),
    /// An attach-handle call through the conductor failed.
    #[error("{what}: {source}")]
    Handles {
        /// What the call was for.
        what: String,
        /// The call error (its kind is the one to match on).
        #[source]
        source: CallError,
    },
    /// Devices cannot be discovered.
    #[error("discovery: {0}")]
    Discovery(#[from] DiscoveryError),
    /// The agent API cannot be served.
    #[error("cannot serve the agent API on {AGENT_TOPIC}: {0}")]
    Serve(#[source] RpcError),
}

/// Why a report failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Devices cannot be discovered.
    #[error("discovery: {0}")]
    Discovery(#[from] DiscoveryError),
    /// The conductor did not take the report.
    #[error("report_data: {0}")]
    Conductor(#[from] RpcError),
}

/// Why a running agent stopped.
#[derive(Clone, Debug)]
pub enum AgentStop {
    /// [`RunningAgent::stop`] was called.
    Stopped,
    /// The conductor refused it (fencing): the reason says what to do.
    Fenced(Fenced),
    /// Its version record no longer allows this build to run.
    Versions(Arc<UpgradeError>),
}

impl std::fmt::Display for AgentStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentStop::Stopped => f.write_str("stopped"),
            AgentStop::Fenced(fenced) => {
                write!(f, "refused by the conductor: {}", fenced.reason)
            }
            AgentStop::Versions(e) => write!(f, "{e}"),
        }
    }
}

/// A started agent.
pub struct RunningAgent {
    agent: Arc<Agent>,
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<AgentStop>>,
    server: Option<ServerHandle>,
    outcome: Option<AgentStop>,
}

impl std::fmt::Debug for RunningAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningAgent")
            .field("host", &self.agent.config.host)
            .field("versions", &self.versions())
            .finish()
    }
}

impl RunningAgent {
    /// The agent's host name.
    pub fn host(&self) -> &str {
        &self.agent.config.host
    }

    /// Its component versions: software, apparent, state.
    pub fn versions(&self) -> ComponentStatus {
        self.agent.versions.status()
    }

    /// Its apparent version (what it acts as).
    pub fn apparent(&self) -> AccelVersion {
        self.agent.versions.apparent()
    }

    /// Whether it talks to the conductor with object indirection (conductor RPC 1.1):
    /// without it the driver features are off.
    pub fn uses_indirection(&self) -> bool {
        self.agent.indirection.is_some()
    }

    /// Discovers and reports now (what `report_now` does); returns how many devices.
    pub async fn report_now(&self) -> Result<u64, ReportError> {
        self.agent.report().await
    }

    /// Scans for this host's handles in `cleaning` now and starts their cleanups;
    /// returns how many were started.
    pub async fn scan_now(&self) -> Result<usize, CallError> {
        self.agent.scan_cleaning().await
    }

    /// How many devices the last report had.
    pub fn devices_reported(&self) -> u64 {
        self.agent.reported_count.load(Ordering::Relaxed)
    }

    /// How many cleanups are running.
    pub fn cleanups_running(&self) -> usize {
        self.agent.running_cleanups()
    }

    /// Stops serving and looping. Cleanups still running are killed (their handles stay
    /// in `cleaning`; the next start erases them again).
    pub async fn stop(mut self) {
        self.shutdown_now().await;
    }

    /// Waits until the agent stops on its own (fenced, its version record) or is
    /// stopped; cancel-safe, and answers the same again once stopped.
    pub async fn stopped(&mut self) -> AgentStop {
        if let Some(stop) = &self.outcome {
            return stop.clone();
        }
        let stop = match self.task.as_mut() {
            Some(task) => task.await.unwrap_or(AgentStop::Stopped),
            None => AgentStop::Stopped,
        };
        self.task = None;
        self.outcome = Some(stop.clone());
        stop
    }

    async fn shutdown_now(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
        let _ = self.shutdown.send(true);
        if let Some(task) = self.task.take() {
            let stop = task.await.unwrap_or(AgentStop::Stopped);
            self.outcome.get_or_insert(stop);
        }
        self.agent.abort_cleanups();
    }
}

impl Drop for RunningAgent {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.agent.abort_cleanups();
    }
}

/// Starts an agent over `transport` (see the module documentation for the steps).
pub async fn start(
    config: AgentConfig,
    transport: Arc<dyn Transport>,
) -> Result<RunningAgent, AgentStartError> {
    if config.host.trim().is_empty() {
        return Err(AgentStartError::Config("the host name is empty".into()));
    }
    if config.report_interval.is_zero() || config.scan_interval.is_zero() {
        return Err(AgentStartError::Config(
            "report_interval and scan_interval must be above zero".into(),
        ));
    }
    let host = config.host.clone();
    let mut conductor = RpcClient::for_api::<ConductorApi>(transport.clone(), CONDUCTOR_TOPIC);
    if let Some(cap) = config.conductor_cap {
        conductor = conductor.version_cap(cap);
    }
    let upgrade = RpcClient::for_api::<UpgradeApi>(transport.clone(), UPGRADE_TOPIC);

    // 1. The version record.
    let versions = open_versions(&upgrade, &host, &config.state_dir).await?;
    let indirection = Indirection::new(conductor.clone(), accel_objects::rpc::INDIRECTION_VERSION);
    let agent = Arc::new(Agent {
        method: CleanupMethod::from_config(config.nvme.cleanup_command.as_deref()),
        indirection: indirection
            .supports_object_indirection()
            .then(|| Arc::new(indirection.clone())),
        reporter: Reporter::new(host.clone(), conductor.clone()),
        config,
        upgrade,
        versions,
        cleanups: Mutex::new(HashMap::new()),
        reported: Mutex::new(None),
        reported_count: AtomicU64::new(0),
    });

    // 2. Heartbeat.
    match agent.heartbeat().await {
        Ok(()) => {}
        Err(HeartbeatError::Fenced(f)) => return Err(AgentStartError::Fenced(f)),
        Err(HeartbeatError::Versions(e)) => return Err(AgentStartError::Versions(e)),
        Err(HeartbeatError::Rpc(source)) => {
            return Err(AgentStartError::Conductor {
                what: "the first heartbeat to the conductor's upgrade API (accel-upgrade)",
                source,
            })
        }
    }

    // 3 to 7; a refusal or failure leaves nothing running (recovered cleanups included).
    let server = match bring_up(&agent, &indirection, transport).await {
        Ok(server) => server,
        Err(e) => {
            agent.abort_cleanups();
            return Err(e);
        }
    };
    let (shutdown, rx) = watch::channel(false);
    let task = tokio::spawn(run_loop(agent.clone(), rx));
    tracing::info!(host, apparent = %agent.versions.apparent().label(), indirection = agent.indirection.is_some(), "agent started");
    Ok(RunningAgent {
        agent,
        shutdown,
        task: Some(task),
        server: Some(server),
        outcome: None,
    })
}

/// Start steps 3 to 7: the RPC requirement, the managed mode, recovery, the first report,
/// the agent API's server.
async fn bring_up(
    agent: &Arc<Agent>,
    indirection: &Indirection,
    transport: Arc<dyn Transport>,
) -> Result<ServerHandle, AgentStartError> {
    let host = agent.host();
    // 3. The RPC requirement of the configured features.
    if !agent.config.pci_managed {
        indirection.require_indirection(UNMANAGED_PCI_FEATURE)?;
        // Unmanaged handles wait for finalization (old agents and API clients do not
        // understand them): the agent's own apparent version says, before any handle
        // is read, so the refusal does not depend on the host's handles. The conductor
        // checks the same gate in AttachHandle.update_managed for any other caller.
        agent
            .versions
            .require(
                AccelVersion::DriverFeatures,
                accel_objects::UNMANAGED_FEATURE,
            )
            .map_err(AgentStartError::NotFinalized)?;
    }
    if agent.indirection.is_none() {
        tracing::info!(host, cap = ?agent.config.conductor_cap, "conductor RPC capped below 1.1: no object indirection, so no PCI managed-mode validation and no NVMe cleanup on this agent until the cap is raised");
    }

    // 4. PCI managed mode, before any report.
    if agent.indirection.is_some() {
        agent.reconcile_managed(true).await?;
    }

    // 5. NVMe recovery (in the background: an erase may take long).
    if agent.indirection.is_some() {
        match agent.scan_cleaning().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                host,
                handles = n,
                "resuming cleanups interrupted or missed before this start"
            ),
            Err(source) => return Err(AgentStartError::Handles {
                what:
                    "finding this host's handles left in cleaning (AttachHandleList.get_cleaning)"
                        .into(),
                source,
            }),
        }
    }

    // 6. The first report; then the handles it created get the managed mode.
    let devices = agent.discover()?;
    agent
        .send_report(devices)
        .await
        .map_err(|source| AgentStartError::Conductor {
            what: "the first inventory report (report_data)",
            source,
        })?;
    if agent.indirection.is_some() && !agent.config.pci_managed {
        agent.reconcile_managed(false).await?;
    }

    // 7. Serve and loop.
    RpcServer::new(
        transport,
        Target::new(AGENT_TOPIC).with_server(agent.config.host.clone()),
    )
    .endpoint(agent_endpoint(agent.clone()))
    .map_err(AgentStartError::Serve)?
    .start()
    .await
    .map_err(AgentStartError::Serve)
}

/// A client of the conductor API on its topic, capped at `conductor_cap` (`[upgrade_levels]
/// conductor`; `None`: the newest version this build speaks).
pub fn conductor_client(
    transport: Arc<dyn Transport>,
    conductor_cap: Option<Version>,
) -> RpcClient {
    let client = RpcClient::for_api::<ConductorApi>(transport, CONDUCTOR_TOPIC);
    match conductor_cap {
        Some(cap) => client.version_cap(cap),
        None => client,
    }
}

/// A request context whose remotable calls of accel's objects go to the conductor
/// (object indirection through `[upgrade_levels] conductor` = `conductor_cap`), as an
/// agent's do: for tools and tests that call `AttachHandleList::get_by_host`,
/// `AttachHandle::update_managed` and the like directly. Above the cap the calls fail
/// before anything is sent.
pub fn conductor_context(
    transport: Arc<dyn Transport>,
    conductor_cap: Option<Version>,
) -> RequestContext {
    let client = conductor_client(transport, conductor_cap);
    RequestContext::generate().with_indirection(
        accel_objects::NAMESPACE,
        Arc::new(Indirection::new(
            client,
            accel_objects::rpc::INDIRECTION_VERSION,
        )),
    )
}

/// Opens the agent's version record (`agent-HOST.version` in `state_dir`); a fresh agent
/// starts at the conductor's apparent version (asked with a heartbeat at the oldest
/// version through `upgrade`), never above it.
pub async fn open_versions(
    upgrade: &RpcClient,
    host: &str,
    state_dir: &Path,
) -> Result<VersionManager<AccelVersion>, AgentStartError> {
    std::fs::create_dir_all(state_dir).map_err(|source| AgentStartError::StateDir {
        dir: state_dir.to_owned(),
        source,
    })?;
    let store = FileStore::new(state_dir.join(format!("agent-{host}.version")));
    let mut builder = VersionManager::<AccelVersion>::builder(store.clone());
    let existing = store
        .load()
        .await
        .map_err(|e| AgentStartError::Versions(UpgradeError::Store(e)))?;
    if existing.is_none() {
        // Before the version manager exists: no run number (recorded as such).
        let probe = MemberReport::new(
            host,
            host,
            AccelVersion::software().number(),
            AccelVersion::oldest().number(),
        );
        let ctx = RequestContext::new(format!("req-heartbeat-{host}"));
        let reply = upgrade
            .call_method(&ctx, Heartbeat { report: probe })
            .await
            .map_err(|source| match fenced(&source) {
                Some(f) => AgentStartError::Fenced(f),
                None => AgentStartError::Conductor {
                    what: "asking the conductor's apparent version (first heartbeat on accel-upgrade)",
                    source,
                },
            })?;
        let server = AccelVersion::observe(reply.server_apparent)
            .ok()
            .and_then(Observed::known);
        builder = builder.fresh_at(server.unwrap_or_else(AccelVersion::oldest));
    }
    builder.open().await.map_err(AgentStartError::Versions)
}

/// What a transition step of a cleanup did.
enum Step {
    Started,
    Succeeded,
    Failed(String),
}

struct Agent {
    config: AgentConfig,
    upgrade: RpcClient,
    /// The inventory's reports (by digest when unchanged).
    reporter: Reporter,
    versions: VersionManager<AccelVersion>,
    /// The conductor's object API, when the cap allows indirection.
    indirection: Option<Arc<Indirection>>,
    method: CleanupMethod,
    /// Running cleanups by handle uuid: the RPC and the scan never run one twice.
    cleanups: Mutex<HashMap<String, JoinHandle<()>>>,
    /// The last inventory reported.
    reported: Mutex<Option<DriverDeviceList>>,
    /// How many devices the last report had.
    reported_count: AtomicU64,
}

impl Agent {
    fn host(&self) -> &str {
        &self.config.host
    }

    /// A context for a call; with the conductor as the object API when allowed.
    fn ctx(&self, what: &str) -> RequestContext {
        // A fresh request id per context: a cleanup's claim is the request id of the
        // context it runs with (its retries reuse it; another runner's differs).
        let ctx = RequestContext::generate();
        tracing::debug!(host = %self.config.host, request_id = %ctx.request_id, what, "request context");
        match &self.indirection {
            Some(api) => ctx.with_indirection(accel_objects::NAMESPACE, api.clone()),
            None => ctx,
        }
    }

    async fn heartbeat(&self) -> Result<(), HeartbeatError> {
        if let Some(outcome) = heartbeat(&self.upgrade, &self.versions, self.host()).await? {
            tracing::info!(host = self.host(), ?outcome, apparent = %self.versions.apparent().label(), "agent finalized");
        }
        Ok(())
    }

    fn discover(&self) -> Result<DriverDeviceList, DiscoveryError> {
        let found = discover(&self.config.sysfs_root)?;
        for p in &found.problems {
            tracing::warn!(host = self.host(), path = %p.path.display(), why = %p.why, "device skipped");
        }
        Ok(driver_devices(&found))
    }

    /// Programs the FPGA at `address` with `bitstream` (agent API 1.2): only an FPGA this
    /// agent reported, only with a programmer configured.
    async fn program_fpga(&self, address: &str, bitstream: &str) -> Result<(), RemoteError> {
        let failed = |message: String| {
            RemoteError::new(ErrorKind::ProgramFailed.as_str(), ERROR_MODULE, message)
        };
        let reported_fpga = self
            .reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|devices| {
                ObjectList::iter(devices).any(|d| {
                    d.control_path_id.get().map(String::as_str) == Some(address)
                        && d.r#type.get() == Some(&accel_objects::DeviceType::Fpga)
                })
            });
        if !reported_fpga {
            return Err(failed(format!(
                "{}: no FPGA at {address} in this agent's last report",
                self.host()
            )));
        }
        let Some(programmer) = &self.config.fpga else {
            return Err(failed(format!(
                "{}: this agent has no [fpga] program_command",
                self.host()
            )));
        };
        programmer.program(address, bitstream).await.map_err(|e| {
            tracing::error!(host = self.host(), %address, %bitstream, error = %e, "FPGA programming failed");
            failed(format!("{}: {e}", self.host()))
        })?;
        tracing::info!(host = self.host(), %address, %bitstream, "FPGA programmed");
        Ok(())
    }

    /// Discovers and reports; returns how many devices.
    async fn report(&self) -> Result<u64, ReportError> {
        let devices = self.discover()?;
        let (n, changed) = self.send_report(devices).await?;
        self.after_report(changed).await;
        Ok(n)
    }

    /// Reports `devices` (by digest when unchanged since the last full report); returns
    /// how many, and whether handles may have been added.
    async fn send_report(&self, devices: DriverDeviceList) -> Result<(u64, bool), RpcError> {
        let n = ObjectList::len(&devices) as u64;
        let sent = self.reporter.report(&devices).await?;
        let summary = sent.summary();
        *self.reported.lock().unwrap_or_else(PoisonError::into_inner) = Some(devices);
        self.reported_count.store(n, Ordering::Relaxed);
        tracing::info!(
            host = self.host(),
            devices = n,
            by_digest = matches!(sent, Reported::Unchanged(_)),
            added = summary.added.len(),
            updated = summary.updated.len(),
            removed = summary.removed.len(),
            lost = summary.lost.len(),
            "inventory reported"
        );
        Ok((n, !summary.added.is_empty() || !summary.updated.is_empty()))
    }

    /// After a report outside the start: new handles get the configured managed mode
    /// (a failure is logged; the next report or start tries again).
    async fn after_report(&self, changed: bool) {
        if changed && self.indirection.is_some() && !self.config.pci_managed {
            if let Err(e) = self.reconcile_managed(false).await {
                tracing::warn!(host = self.host(), error = %e, "new handles keep the default managed mode for now");
            }
        }
    }

    /// Reports when the discovered inventory differs from the last one reported.
    async fn report_if_changed(&self) {
        let devices = match self.discover() {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(host = self.host(), error = %e, "discovery failed");
                return;
            }
        };
        let same = self
            .reported
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|last| *last == devices);
        if !same {
            match self.send_report(devices).await {
                Ok((_, changed)) => self.after_report(changed).await,
                Err(e) => {
                    tracing::warn!(host = self.host(), error = %e, "inventory report failed; retried at the next scan")
                }
            }
        }
    }

    /// Brings the persisted managed mode of this host's PCI handles to the configured
    /// one. `at_start`: an allocated handle that would change refuses the start;
    /// otherwise it is left as it is (and logged).
    async fn reconcile_managed(&self, at_start: bool) -> Result<usize, AgentStartError> {
        let desired = self.config.pci_managed;
        let mut updated = 0;
        for _attempt in 0..5 {
            let ctx = self.ctx("managed");
            let handles = AttachHandleList::get_by_host(&ctx, self.host().to_owned())
                .await
                .map_err(|source| AgentStartError::Handles {
                    what: "reading this host's attach handles (AttachHandleList.get_by_host)"
                        .into(),
                    source,
                })?;
            let mut raced = false;
            // The PCI handles whose mode differs, with what each says: a handle the
            // conductor sent without a field this needs is refused, naming it.
            let mut differing = Vec::new();
            for h in handles
                .iter()
                .filter(|h| h.attach_type.get() == Some(&AttachType::Pci))
            {
                let read = (|| {
                    Ok::<_, verso::Error>((h.managed()?, h.is_in_use()?, h.current_revision()?))
                })()
                .map_err(|e| AgentStartError::Handles {
                    what: format!(
                        "reading attach handle {} (AttachHandleList.get_by_host)",
                        handle_uuid(h)
                    ),
                    source: e.into(),
                })?;
                if read.0 != desired {
                    differing.push((h, read));
                }
            }
            // Refusals first: a refused start changes nothing.
            for &(h, (persisted, _, _)) in differing.iter().filter(|(_, (_, in_use, _))| *in_use) {
                let refusal = AgentStartError::ManagedModeInUse {
                    device: describe_device(h),
                    handle: handle_uuid(h),
                    instance: h
                        .instance_uuid
                        .get()
                        .cloned()
                        .flatten()
                        .unwrap_or_else(|| "unknown".into()),
                    persisted,
                    configured: desired,
                };
                if at_start {
                    return Err(refusal);
                }
                tracing::warn!(host = self.host(), "{refusal}");
            }
            for &(h, (_, _, expected)) in differing.iter().filter(|(_, (_, in_use, _))| !*in_use) {
                let mut h = h.clone();
                h.meta.context = Some(Box::new(ctx.clone()));
                match h.update_managed(desired, expected).await {
                    Ok(()) => {
                        updated += 1;
                        tracing::info!(host = self.host(), handle = %handle_uuid(&h), managed = desired, revision = ?h.revision.get(), "attach handle managed mode updated");
                    }
                    Err(e) => match classify(&e) {
                        HandleErrorKind::Stale | HandleErrorKind::InUse | HandleErrorKind::NotFound => {
                            tracing::warn!(host = self.host(), handle = %handle_uuid(&h), error = %e, "attach handle changed since it was read: reading again");
                            raced = true;
                        }
                        HandleErrorKind::NotFinalized(n) => {
                            return Err(AgentStartError::NotFinalized(n))
                        }
                        _ => {
                            return Err(AgentStartError::Handles {
                                what: format!(
                                    "updating the managed mode of attach handle {} (AttachHandle.update_managed)",
                                    handle_uuid(&h)
                                ),
                                source: e,
                            })
                        }
                    },
                }
            }
            if !raced {
                return Ok(updated);
            }
        }
        Err(AgentStartError::Handles {
            what: "updating this host's attach handles' managed mode".into(),
            source: CallError::method(
                accel_objects::errors::STALE_HANDLE,
                "the handles kept changing under five consecutive reads",
            ),
        })
    }

    /// Starts a cleanup for each of this host's handles in `cleaning` not already being
    /// cleaned; returns how many were started.
    async fn scan_cleaning(self: &Arc<Self>) -> Result<usize, CallError> {
        if self.indirection.is_none() {
            return Ok(0);
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
    async fn cleanup_requested(self: &Arc<Self>, uuid: &str) -> Result<(), RemoteError> {
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

    fn running_cleanups(&self) -> usize {
        let mut map = self.cleanups.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, t| !t.is_finished());
        map.len()
    }

    fn abort_cleanups(&self) {
        let mut map = self.cleanups.lock().unwrap_or_else(PoisonError::into_inner);
        for (_, task) in map.drain() {
            task.abort();
        }
    }

    fn spawn_cleanup(self: &Arc<Self>, handle: AttachHandle) -> bool {
        let uuid = handle_uuid(&handle);
        let mut map = self.cleanups.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, t| !t.is_finished());
        if map.contains_key(&uuid) {
            return false;
        }
        let agent = self.clone();
        map.insert(uuid, tokio::spawn(async move { agent.clean(handle).await }));
        true
    }

    /// One cleanup: claim, erase, record.
    async fn clean(&self, mut h: AttachHandle) {
        let uuid = handle_uuid(&h);
        h.meta.context = Some(Box::new(self.ctx("cleanup")));
        if !self.transition(&mut h, Step::Started).await {
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
        if self.transition(&mut h, step).await {
            tracing::info!(host = self.host(), handle = %uuid, state = ?h.cleanup_state.get(), "cleanup recorded");
        }
    }

    async fn erase(&self, paths: &[String]) -> Result<(), String> {
        for path in paths {
            cleanup::clean(&self.method, path, self.config.nvme.cleanup_timeout)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The namespace device paths of the NVMe function a handle's attach info names.
    fn namespaces_of(&self, h: &AttachHandle) -> Result<Vec<String>, String> {
        let address = h
            .attach_info
            .get()
            .and_then(|info| pci_address(info))
            .ok_or_else(|| format!("attach info {:?} names no PCI address", h.attach_info.get()))?;
        let found = discover(&self.config.sysfs_root).map_err(|e| e.to_string())?;
        let function = found
            .devices
            .iter()
            .find(|f| f.address == address)
            .ok_or_else(|| format!("no PCI function {address} on this host"))?;
        let paths: Vec<String> = function
            .nvme
            .iter()
            .flat_map(|c| c.namespaces.iter().map(|n| n.dev_path.clone()))
            .collect();
        if paths.is_empty() {
            return Err(format!(
                "PCI function {address} has no NVMe namespace to erase"
            ));
        }
        Ok(paths)
    }

    /// Records a cleanup step, retrying (same expected revision) while the conductor
    /// does not answer. False when the handle was moved by someone else or the step
    /// cannot be recorded.
    async fn transition(&self, h: &mut AttachHandle, step: Step) -> bool {
        let uuid = handle_uuid(h);
        let mut delay = Duration::from_millis(100);
        for attempt in 1..=100 {
            let result = match &step {
                Step::Started => h.cleanup_started().await,
                Step::Succeeded => h.cleanup_succeeded().await,
                Step::Failed(why) => h.cleanup_failed(why.clone()).await,
            };
            let e = match result {
                Ok(()) => return true,
                Err(e) => e,
            };
            match classify(&e) {
                HandleErrorKind::Retryable => {
                    tracing::warn!(host = self.host(), handle = %uuid, attempt, error = %e, "cleanup transition not recorded yet: retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                HandleErrorKind::NotCleaning
                | HandleErrorKind::Stale
                | HandleErrorKind::NotFound => {
                    tracing::info!(host = self.host(), handle = %uuid, error = %e, "the handle was moved by someone else: left as it is");
                    return false;
                }
                _ => {
                    tracing::error!(host = self.host(), handle = %uuid, error = %e, "cleanup transition refused");
                    return false;
                }
            }
        }
        tracing::error!(host = self.host(), handle = %uuid, "cleanup transition not recorded after 100 attempts: the handle stays in cleaning for the next scan");
        false
    }
}

fn handle_uuid(h: &AttachHandle) -> String {
    h.uuid.get().map(ToString::to_string).unwrap_or_default()
}

fn describe_device(h: &AttachHandle) -> String {
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
fn pci_address(attach_info: &str) -> Option<String> {
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

fn agent_endpoint(agent: Arc<Agent>) -> Endpoint {
    Endpoint::for_api::<AgentApi>()
        .with_state(agent)
        .handle(|agent: Arc<Agent>, _ctx, _m: ReportNow| async move {
            agent
                .report()
                .await
                .map_err(|e| RemoteError::new("ReportFailed", ERROR_MODULE, e.to_string()))
        })
        .handle(|agent: Arc<Agent>, _ctx, m: CleanupDevice| async move {
            agent.cleanup_requested(&m.handle_uuid).await
        })
        .handle(|agent: Arc<Agent>, _ctx, m: ProgramFpga| async move {
            agent.program_fpga(&m.address, &m.bitstream_uuid).await
        })
        .into_endpoint()
}

async fn run_loop(agent: Arc<Agent>, mut shutdown: watch::Receiver<bool>) -> AgentStop {
    use tokio::time::{interval_at, Instant, MissedTickBehavior};
    let mut beat = interval_at(
        Instant::now() + agent.config.report_interval,
        agent.config.report_interval,
    );
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut scan = interval_at(
        Instant::now() + agent.config.scan_interval,
        agent.config.scan_interval,
    );
    scan.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return AgentStop::Stopped;
                }
            }
            _ = beat.tick() => {
                match agent.heartbeat().await {
                    Ok(()) => {}
                    Err(HeartbeatError::Fenced(f)) => return AgentStop::Fenced(f),
                    Err(HeartbeatError::Versions(e)) => return AgentStop::Versions(Arc::new(e)),
                    Err(HeartbeatError::Rpc(e)) => {
                        tracing::warn!(host = agent.host(), error = %e, "heartbeat failed; retried at the next interval");
                    }
                }
                if let Err(e) = agent.report().await {
                    tracing::warn!(host = agent.host(), error = %e, "inventory report failed; retried at the next interval");
                }
            }
            _ = scan.tick() => {
                agent.report_if_changed().await;
                if let Err(e) = agent.scan_cleaning().await {
                    tracing::warn!(host = agent.host(), error = %e, "cleaning scan failed; retried at the next scan");
                }
            }
        }
    }
}
