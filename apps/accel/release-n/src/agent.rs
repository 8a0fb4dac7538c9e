//! Release N's agent: discovers devices from a sysfs tree, reports them to the conductor
//! with release N's objects at conductor API 1.0, heartbeats on the `upgrade` API, and
//! serves release N's agent API (1.0, `report_now`) on topic `accel-agent` under its host
//! name.
//!
//! Discovery reuses `accel_agent::discovery` (reading sysfs is not part of the wire);
//! the objects it reports are release N's own ([`crate::objects::DriverDevice`]).
//! A fenced agent (the conductor's deployment finalized past release N) stops serving
//! and records the reason ([`RunningAgent::stopped`]).

use crate::objects::{
    AccelVersion, AttachType, DeviceType, DriverAttachHandle, DriverDevice, DriverDeviceList,
};
use crate::rpc::{
    ConductorApi, ReportData, ReportNow, AGENT_TOPIC, CONDUCTOR_TOPIC, CONDUCTOR_VERSION,
    UPGRADE_TOPIC,
};
use accel_agent::discovery::{self, discover, Discovery, DiscoveryError, PciFunction};
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use verso::{Field, ObjectList, RequestContext, VersionedObject};
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcClient, RpcError, RpcServer, ServerHandle, Target};
use verso_upgrade::admin::{Heartbeat, UpgradeApi};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{
    ComponentVersion, Fenced, FileStore, MemberReport, Observed, UpgradeError, VersionManager,
};

/// What a release N agent needs.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Its host name: its member id in heartbeats, its server name on `accel-agent`, and
    /// the host its devices are reported under.
    pub host: String,
    /// The root of the sysfs tree to discover (`/sys` on a real host).
    pub sysfs_root: PathBuf,
    /// Where its version record lives (`agent-<host>.version`).
    pub state_dir: PathBuf,
    /// How often it heartbeats and reports.
    pub report_interval: Duration,
}

/// Why release N's agent did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration cannot be used.
    #[error("release N agent: invalid configuration: {0}")]
    Config(String),
    /// The state directory could not be created.
    #[error("release N agent {host}: cannot create the state directory {path}: {source}")]
    StateDir {
        /// The host.
        host: String,
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The version record does not let release N run (e.g. finalized by release N+1).
    #[error("release N agent {host}: {source}")]
    Versions {
        /// The host.
        host: String,
        /// The cause.
        #[source]
        source: UpgradeError,
    },
    /// The conductor's `upgrade` API did not answer the first heartbeat.
    #[error("release N agent {host}: the conductor did not answer its heartbeat on topic {UPGRADE_TOPIC}: {source}")]
    Heartbeat {
        /// The host.
        host: String,
        /// The cause.
        #[source]
        source: RpcError,
    },
    /// The conductor refused the agent.
    #[error("release N agent: {0}")]
    Fenced(Fenced),
    /// The first heartbeat asked for a finalization the version record refused.
    #[error("release N agent {host}: {why}")]
    Finalize {
        /// The host.
        host: String,
        /// What the version record said.
        why: String,
    },
    /// The agent API could not be served.
    #[error("release N agent {host}: cannot serve topic {AGENT_TOPIC}: {source}")]
    Serve {
        /// The host.
        host: String,
        /// The cause.
        #[source]
        source: RpcError,
    },
}

/// Why a report failed.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The sysfs tree could not be read.
    #[error("discovery failed: {0}")]
    Discovery(#[from] DiscoveryError),
    /// The discovery task did not finish.
    #[error("discovery did not finish: {0}")]
    Task(String),
    /// The conductor did not take the report.
    #[error("report_data to {CONDUCTOR_TOPIC} failed: {0}")]
    Rpc(#[from] RpcError),
}

/// Why a running agent stopped on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentStopped {
    /// The conductor refused it: the reason says what to do.
    Fenced(Fenced),
    /// Its version record refused a finalization the conductor asked for.
    Versions(String),
}

impl std::fmt::Display for AgentStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentStopped::Fenced(fenced) => write!(f, "refused by the conductor: {fenced}"),
            AgentStopped::Versions(why) => write!(f, "component versions: {why}"),
        }
    }
}

fn device_type(t: discovery::DeviceType) -> DeviceType {
    match t {
        discovery::DeviceType::Gpu => DeviceType::Gpu,
        discovery::DeviceType::Fpga => DeviceType::Fpga,
        discovery::DeviceType::Aichip => DeviceType::AiChip,
        discovery::DeviceType::Qat => DeviceType::Qat,
        discovery::DeviceType::Nic => DeviceType::Nic,
        discovery::DeviceType::Ssd => DeviceType::Ssd,
    }
}

/// Cyborg's PCI attach info for an address `DDDD:BB:DD.F`; `None` for a malformed one.
/// The same text release N+1 reports, so an agent upgrade changes no attach handle.
pub fn pci_attach_info(address: &str) -> Option<String> {
    let (domain, rest) = address.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    Some(json!({"domain": domain, "bus": bus, "device": device, "function": function}).to_string())
}

fn board_info(f: &PciFunction) -> String {
    let mut info = json!({
        "class": format!("0x{:06x}", f.class_code),
        "iommu_group": f.iommu_group,
        "numa_node": f.numa_node,
    });
    if !f.nvme.is_empty() {
        info["nvme"] = f
            .nvme
            .iter()
            .map(|c| {
                json!({
                    "controller": c.name,
                    "model": c.model,
                    "serial": c.serial,
                    "namespaces": c.namespaces.iter()
                        .map(|n| json!({"name": n.name, "size_bytes": n.size_bytes, "dev_path": n.dev_path}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
    }
    info.to_string()
}

/// Release N's report of a discovery: one [`DriverDevice`] per physical function, its
/// enabled virtual functions (or itself) as attach handles.
pub fn driver_devices(found: &Discovery) -> DriverDeviceList {
    let devices = found
        .devices
        .iter()
        .filter(|f| f.physfn.is_none())
        .map(|f| {
            let addresses: Vec<&str> = if f.virtfns.is_empty() {
                vec![f.address.as_str()]
            } else {
                f.virtfns.iter().map(String::as_str).collect()
            };
            let handles: Vec<DriverAttachHandle> = addresses
                .into_iter()
                .filter_map(pci_attach_info)
                .map(|info| DriverAttachHandle {
                    attach_type: AttachType::Pci.into(),
                    attach_info: info.into(),
                    ..DriverAttachHandle::blank()
                })
                .collect();
            DriverDevice {
                control_path_id: f.address.clone().into(),
                r#type: device_type(f.device_type).into(),
                vendor: f.vendor_id.clone().into(),
                model: f.device_id.clone().into(),
                std_board_info: Some(board_info(f)).into(),
                driver_name: f.driver.clone().into(),
                attach_handles: handles.into(),
                ..DriverDevice::blank()
            }
        })
        .collect::<Vec<_>>();
    DriverDeviceList {
        objects: Field::new(devices),
        ..DriverDeviceList::blank()
    }
}

struct Inner {
    host: String,
    sysfs_root: PathBuf,
    conductor: RpcClient,
    upgrade: RpcClient,
    versions: VersionManager<AccelVersion>,
    /// One report at a time (the loop's and `report_now`'s).
    reporting: tokio::sync::Mutex<()>,
}

impl Inner {
    async fn report(&self) -> Result<u64, ReportError> {
        let _one = self.reporting.lock().await;
        let root = self.sysfs_root.clone();
        let found = tokio::task::spawn_blocking(move || discover(&root))
            .await
            .map_err(|e| ReportError::Task(e.to_string()))??;
        for p in &found.problems {
            tracing::warn!(host = %self.host, path = %p.path.display(), why = %p.why, "device skipped");
        }
        let devices = driver_devices(&found);
        let n = devices.len() as u64;
        let ctx = RequestContext::new(format!("req-report-{}", self.host));
        let summary = self
            .conductor
            .call_method(
                &ctx,
                ReportData {
                    hostname: self.host.clone(),
                    devices,
                },
            )
            .await?;
        tracing::info!(host = %self.host, devices = n, added = summary.added.len(),
            updated = summary.updated.len(), removed = summary.removed.len(),
            lost = summary.lost.len(), "inventory reported (release N)");
        Ok(n)
    }

    /// One heartbeat: `Err` when the agent must stop; a transport failure is retried at
    /// the next interval.
    async fn heartbeat(&self) -> Result<(), AgentStopped> {
        let ctx = RequestContext::new(format!("req-heartbeat-{}", self.host));
        let report = self.versions.report(&self.host, &self.host);
        match self.upgrade.call_method(&ctx, Heartbeat { report }).await {
            Ok(reply) => {
                if let Some(outcome) = self
                    .versions
                    .apply(&reply)
                    .await
                    .map_err(|e| AgentStopped::Versions(e.to_string()))?
                {
                    tracing::info!(host = %self.host, ?outcome, "agent finalized");
                }
                Ok(())
            }
            Err(RpcError::Remote(r)) if r.is::<Fenced>() => match r.downcast::<Fenced>() {
                Some(f) => Err(AgentStopped::Fenced(f)),
                None => Ok(()),
            },
            Err(e) => {
                tracing::warn!(host = %self.host, error = %e, "heartbeat failed; retried at the next interval");
                Ok(())
            }
        }
    }
}

/// A running release N agent.
pub struct RunningAgent {
    inner: Arc<Inner>,
    server: Arc<Mutex<Option<ServerHandle>>>,
    task: tokio::task::JoinHandle<()>,
    stopped: watch::Receiver<Option<AgentStopped>>,
    halt: watch::Sender<bool>,
}

impl std::fmt::Debug for RunningAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningAgent")
            .field("host", &self.inner.host)
            .finish_non_exhaustive()
    }
}

fn take_server(server: &Mutex<Option<ServerHandle>>) -> Option<ServerHandle> {
    server.lock().unwrap_or_else(PoisonError::into_inner).take()
}

impl RunningAgent {
    /// Its host name.
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// Its apparent accel version (always 1: release N knows no other).
    pub fn apparent(&self) -> AccelVersion {
        self.inner.versions.apparent()
    }

    /// Discovers and reports now; returns how many devices were reported.
    pub async fn report_now(&self) -> Result<u64, ReportError> {
        self.inner.report().await
    }

    /// Why it stopped on its own, if it did (fenced by the conductor).
    pub fn stopped(&self) -> Option<AgentStopped> {
        self.stopped.borrow().clone()
    }

    /// Waits until it stops on its own (for example when fenced) or `timeout` passes.
    pub async fn wait_stopped(&mut self, timeout: Duration) -> Option<AgentStopped> {
        let rx = &mut self.stopped;
        tokio::time::timeout(timeout, rx.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|s| s.clone())
    }

    /// Stops heartbeating, reporting and serving. A heartbeat or report under way is
    /// finished first (within [`STOP_WAIT`]): aborted mid-call, its message could still
    /// reach the conductor after this host's next agent started, and record this host
    /// at release N again.
    pub async fn stop(mut self) {
        let _ = self.halt.send(true);
        if tokio::time::timeout(STOP_WAIT, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
        if let Some(server) = take_server(&self.server) {
            server.stop().await;
        }
    }
}

/// Starts release N's agent: opens its version record (a fresh one at the conductor's
/// apparent version, asked with a heartbeat), heartbeats once (a fenced agent does not
/// start), serves the agent API, and heartbeats and reports every `report_interval`
/// (the first report at once).
pub async fn start(
    config: AgentConfig,
    transport: Arc<dyn Transport>,
) -> Result<RunningAgent, StartError> {
    let host = config.host.clone();
    if host.is_empty() || host.contains(['/', '\\']) {
        return Err(StartError::Config(format!(
            "host {host:?}: a non-empty name without path separators"
        )));
    }
    if config.report_interval.is_zero() {
        return Err(StartError::Config(
            "report_interval must be above zero".into(),
        ));
    }
    std::fs::create_dir_all(&config.state_dir).map_err(|source| StartError::StateDir {
        host: host.clone(),
        path: config.state_dir.clone(),
        source,
    })?;
    let upgrade = RpcClient::for_api::<UpgradeApi>(transport.clone(), UPGRADE_TOPIC);
    let store = FileStore::new(config.state_dir.join(format!("agent-{host}.version")));
    let versions_error = |source: UpgradeError| StartError::Versions {
        host: host.clone(),
        source,
    };
    let mut builder = VersionManager::<AccelVersion>::builder(store.clone());
    if store
        .load()
        .await
        .map_err(|e| versions_error(e.into()))?
        .is_none()
    {
        let probe = MemberReport {
            id: host.clone(),
            host: host.clone(),
            software: AccelVersion::software().number(),
            apparent: AccelVersion::oldest().number(),
            incarnation: None,
        };
        let ctx = RequestContext::new(format!("req-heartbeat-{host}"));
        let reply = match upgrade.call_method(&ctx, Heartbeat { report: probe }).await {
            Ok(reply) => reply,
            Err(RpcError::Remote(r)) if r.is::<Fenced>() => {
                if let Some(f) = r.downcast::<Fenced>() {
                    return Err(StartError::Fenced(f));
                }
                return Err(StartError::Heartbeat {
                    host,
                    source: RpcError::Remote(r),
                });
            }
            Err(source) => return Err(StartError::Heartbeat { host, source }),
        };
        let server = AccelVersion::observe(reply.server_apparent)
            .ok()
            .and_then(Observed::known);
        builder = builder.fresh_at(server.unwrap_or_else(AccelVersion::oldest));
    }
    let versions = builder.open().await.map_err(versions_error)?;
    let conductor = RpcClient::for_api::<ConductorApi>(transport.clone(), CONDUCTOR_TOPIC)
        .version_cap(CONDUCTOR_VERSION);
    let inner = Arc::new(Inner {
        host: host.clone(),
        sysfs_root: config.sysfs_root.clone(),
        conductor,
        upgrade,
        versions,
        reporting: tokio::sync::Mutex::new(()),
    });
    if let Err(stop) = inner.heartbeat().await {
        return Err(match stop {
            AgentStopped::Fenced(f) => StartError::Fenced(f),
            AgentStopped::Versions(why) => StartError::Finalize { host, why },
        });
    }
    let for_api = inner.clone();
    let endpoint =
        Endpoint::for_api::<crate::rpc::AgentApi>().handle(move |_ctx, _m: ReportNow| {
            let inner = for_api.clone();
            async move {
                inner
                    .report()
                    .await
                    .map_err(|e| RemoteError::new("ReportFailed", "accel", e.to_string()))
            }
        });
    let server = RpcServer::new(
        transport,
        Target::new(AGENT_TOPIC).with_server(host.clone()),
    )
    .endpoint(endpoint)
    .map_err(|source| StartError::Serve {
        host: host.clone(),
        source,
    })?
    .start()
    .await
    .map_err(|source| StartError::Serve {
        host: host.clone(),
        source,
    })?;
    let server = Arc::new(Mutex::new(Some(server)));
    let (tx, rx) = watch::channel(None);
    let (halt, halted) = watch::channel(false);
    let task = tokio::spawn(agent_loop(
        inner.clone(),
        server.clone(),
        tx,
        halted,
        config.report_interval,
    ));
    Ok(RunningAgent {
        inner,
        server,
        task,
        stopped: rx,
        halt,
    })
}

async fn agent_loop(
    inner: Arc<Inner>,
    server: Arc<Mutex<Option<ServerHandle>>>,
    stopped: watch::Sender<Option<AgentStopped>>,
    mut halted: watch::Receiver<bool>,
    interval: Duration,
) {
    let mut first = true;
    loop {
        if !first {
            if let Err(stop) = inner.heartbeat().await {
                tracing::error!(host = %inner.host, reason = %stop, "release N agent stops");
                if let Some(s) = take_server(&server) {
                    s.stop().await;
                }
                let _ = stopped.send(Some(stop));
                return;
            }
        }
        first = false;
        if let Err(e) = inner.report().await {
            tracing::warn!(host = %inner.host, error = %e, "inventory report failed; retried at the next interval");
        }
        // Stopped between calls only, never in the middle of one.
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            // (A dropped handle is not a stop: the agent runs on, as before.)
            Ok(_) = halted.wait_for(|h| *h) => return,
        }
    }
}

/// How long [`RunningAgent::stop`] waits for a heartbeat or report under way.
pub const STOP_WAIT: Duration = Duration::from_secs(30);
