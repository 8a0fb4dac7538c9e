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
//!    refuses with [`IndirectionUnavailable`](verso_rpc::conductor::IndirectionUnavailable) (the feature, 1.1, the cap, the option);
//!    with no such feature enabled it runs with cap 1.0 and skips the steps below that
//!    need indirection. `managed = false` also waits for `AccelVersion::DriverFeatures`
//!    to be finalized: before, the start is refused with
//!    [`AgentStartError::NotFinalized`] (the typed [`NotSupportedBeforeFinalization`](verso_upgrade::NotSupportedBeforeFinalization));
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
//!
//! On Cyborg's wire ([`AgentConfig::cyborg_wire`], [`CyborgWire`]) the same steps run on
//! Cyborg's APIs with the seed spec: reports are Cyborg's `report_data` on
//! `cyborg-conductor`, the managed mode and cleanups go through `accel_cyborg17::
//! indirection`'s classes there (a cleanup is a device's, on its `device_state`), and
//! Cyborg's agent API is served on `cyborg-agent` with `cleanup_device` (1.1), beside
//! accel's (its `cleanup_device` of a handle cleans the handle's device); the version
//! record and heartbeats stay on `accel-upgrade`.

use crate::cleanup::CleanupMethod;
use crate::client::{fenced, heartbeat, HeartbeatError, Reported, Reporter};
use crate::discovery::{discover, DiscoveryError};
use crate::report::driver_devices;
use accel_objects::errors::ErrorKind;
use accel_objects::rpc::{
    AgentApi, CleanupDevice, ConductorApi, ProgramFpga, ReportNow, AGENT_TOPIC, CONDUCTOR_TOPIC,
    UPGRADE_TOPIC,
};
use accel_objects::{AccelVersion, DriverDeviceList};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use verso::indirection::CallError;
use verso::{ObjectList, RequestContext, Version};
use verso_rpc::conductor::ConductorApi as Indirection;
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcClient, RpcError, RpcServer, ServerHandle, Target};
use verso_upgrade::admin::{Heartbeat, UpgradeApi};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{
    ComponentStatus, ComponentVersion, FileStore, MemberReport, Observed, UpgradeError,
    VersionManager,
};
mod config;
mod cyborg_handles;
mod handles;

pub use config::{
    AgentConfig, AgentStartError, AgentStop, CyborgWire, NvmeConfig, ReportError, StartStep,
    ERROR_MODULE, UNMANAGED_PCI_FEATURE,
};

/// A started agent.
pub struct RunningAgent {
    agent: Arc<Agent>,
    shutdown: watch::Sender<bool>,
    task: Option<JoinHandle<AgentStop>>,
    servers: Vec<ServerHandle>,
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
        for server in std::mem::take(&mut self.servers) {
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
    let conductor = conductor_client(transport.clone(), config.conductor_cap);
    let upgrade = RpcClient::for_api::<UpgradeApi>(transport.clone(), UPGRADE_TOPIC);

    // 1. The version record.
    let versions = open_versions(&upgrade, &host, &config.state_dir).await?;
    let (indirection, cyborg) = match &config.cyborg_wire {
        None => (
            Indirection::new(conductor.clone(), accel_objects::rpc::INDIRECTION_VERSION),
            None,
        ),
        Some(wire) => {
            let client = RpcClient::for_api::<accel_objects::cyborg::ConductorApi>(
                wire.transport.clone(),
                accel_cyborg17::rpc::CONDUCTOR_TOPIC,
            )
            .with_cap(wire.conductor_cap);
            let reporter = crate::cyborg::CyborgReporter::new(
                wire.transport.clone(),
                host.clone(),
                config.sysfs_root.clone(),
                wire.report_timeout,
            )
            .with_digests(client.clone().timeout(wire.report_timeout));
            (
                Indirection::new(client, accel_objects::cyborg::INDIRECTION_VERSION)
                    .cap_option(CYBORG_CONDUCTOR_CAP),
                Some(reporter),
            )
        }
    };
    let agent = Arc::new(Agent {
        method: CleanupMethod::from_config(config.nvme.cleanup_command.as_deref()),
        indirection: indirection
            .supports_object_indirection()
            .then(|| Arc::new(indirection.clone())),
        reporter: Reporter::new(host.clone(), conductor.clone()),
        cyborg,
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
                step: StartStep::FirstHeartbeat,
                source,
            })
        }
    }

    // 3 to 7; a refusal or failure leaves nothing running (recovered cleanups included).
    let servers = match bring_up(&agent, &indirection, transport).await {
        Ok(servers) => servers,
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
        servers,
        outcome: None,
    })
}

/// Start steps 3 to 7: the RPC requirement, the managed mode, recovery, the first report,
/// the agent API's server.
async fn bring_up(
    agent: &Arc<Agent>,
    indirection: &Indirection,
    transport: Arc<dyn Transport>,
) -> Result<Vec<ServerHandle>, AgentStartError> {
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
            step: StartStep::FirstReport,
            source,
        })?;
    if agent.indirection.is_some() && !agent.config.pci_managed {
        agent.reconcile_managed(false).await?;
    }

    // 7. Serve and loop: accel's agent API, and on Cyborg's wire Cyborg's too (accel's
    // conductor calls accel's: `program_fpga`, `report_now`, `cleanup_device`).
    let accel = RpcServer::new(
        transport,
        Target::new(AGENT_TOPIC).with_server(agent.config.host.clone()),
    )
    .endpoint(agent_endpoint(agent.clone()))
    .map_err(AgentStartError::Serve)?
    .start()
    .await
    .map_err(AgentStartError::Serve)?;
    let mut servers = vec![accel];
    if let Some(wire) = &agent.config.cyborg_wire {
        let endpoint = crate::cyborg::endpoint_with(
            agent.config.sysfs_root.clone(),
            agent.config.fpga.clone(),
            Some(Arc::new(cyborg_handles::Cleanups(agent.clone()))),
        );
        match crate::cyborg::serve_endpoint(wire.transport.clone(), host, endpoint).await {
            Ok(cyborg) => servers.push(cyborg),
            Err(e) => {
                for s in servers {
                    s.stop().await;
                }
                return Err(AgentStartError::Serve(e));
            }
        }
    }
    Ok(servers)
}

/// A client of the conductor API on its topic, capped at `conductor_cap` (`[upgrade_levels]
/// conductor`; `None`: the newest version this build speaks).
pub fn conductor_client(
    transport: Arc<dyn Transport>,
    conductor_cap: Option<Version>,
) -> RpcClient {
    RpcClient::for_api::<ConductorApi>(transport, CONDUCTOR_TOPIC).with_cap(conductor_cap)
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
                    step: StartStep::ApparentVersion,
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

/// The `[upgrade_levels]` option capping Cyborg's conductor API ([`CyborgWire`]).
pub const CYBORG_CONDUCTOR_CAP: &str = "cyborg_conductor";

struct Agent {
    config: AgentConfig,
    upgrade: RpcClient,
    /// The inventory's reports (by digest when unchanged).
    reporter: Reporter,
    /// On Cyborg's wire ([`AgentConfig::cyborg_wire`]): its reports go there (object
    /// indirection and Cyborg's agent API too).
    cyborg: Option<crate::cyborg::CyborgReporter>,
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
        let namespace = if self.cyborg.is_some() {
            accel_cyborg17::objects::NAMESPACE
        } else {
            accel_objects::NAMESPACE
        };
        match &self.indirection {
            Some(api) => ctx.with_indirection(namespace, api.clone()),
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
        if let Some(reporter) = &self.cyborg {
            // Cyborg's report_data answers nothing: new handles may come from any change.
            reporter.send(&devices).await?;
            let mut last = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
            let changed = last.as_ref() != Some(&devices);
            *last = Some(devices);
            self.reported_count.store(n, Ordering::Relaxed);
            return Ok((n, changed));
        }
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
