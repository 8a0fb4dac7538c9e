//! The agent's configuration, its errors, and why it stopped.

use crate::discovery::DiscoveryError;
use crate::fpga::Programmer;
use accel_objects::rpc::AGENT_TOPIC;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use verso::indirection::CallError;
use verso::Version;
use verso_rpc::conductor::IndirectionUnavailable;
use verso_rpc::transport::Transport;
use verso_rpc::RpcError;
use verso_upgrade::{Fenced, NotSupportedBeforeFinalization, UpgradeError};

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
    /// `None`: the agent speaks accel's own conductor and agent APIs. `Some`: Cyborg's,
    /// with the seed spec ([`CyborgWire`]).
    pub cyborg_wire: Option<CyborgWire>,
}

/// Release N+1 on Cyborg's wire (`accel agent`'s default: `[cyborg] report_to_cyborg`
/// with `[upgrade_levels] cyborg_conductor` at 1.1): the agent reports with Cyborg 17's `report_data` on
/// `cyborg-conductor`, runs the PCI managed-mode check and NVMe cleanups through the seed
/// spec's object indirection there (`AttachHandleList`, `AttachHandle` 1.1,
/// `DeviceList`, `Device` 1.6), and serves Cyborg's agent API with `cleanup_device`
/// (1.1) on `cyborg-agent`. Heartbeats and the version record stay on accel's upgrade
/// API (`accel-upgrade`, the agent's own transport): Cyborg has neither.
#[derive(Clone)]
pub struct CyborgWire {
    /// A transport on Cyborg's control exchange (`cyborg`).
    pub transport: Arc<dyn Transport>,
    /// `[upgrade_levels] cyborg_conductor`: the newest Cyborg conductor RPC version to
    /// send (`None`: 1.1, the newest this build knows). Below 1.1 nothing needing object
    /// indirection runs (and `[pci] managed = false` refuses the start).
    pub conductor_cap: Option<Version>,
    /// How long a report waits for the conductor (Cyborg's `rpc_response_timeout`).
    pub report_timeout: Duration,
}

impl std::fmt::Debug for CyborgWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CyborgWire")
            .field("conductor_cap", &self.conductor_cap)
            .field("report_timeout", &self.report_timeout)
            .finish_non_exhaustive()
    }
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
            cyborg_wire: None,
        }
    }
}

/// The step of an agent's start that calls the conductor ([`AgentStartError::Conductor`]):
/// a caller that knows the deployment (which conductor the agent was pointed at) says
/// what to check by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartStep {
    /// Asking the conductor's apparent version (the first heartbeat, on accel's upgrade
    /// API).
    ApparentVersion,
    /// The first heartbeat (accel's upgrade API).
    FirstHeartbeat,
    /// The first inventory report (`report_data`).
    FirstReport,
}

impl StartStep {
    /// What the step's call was for, in words.
    pub fn what(self) -> &'static str {
        match self {
            StartStep::ApparentVersion => {
                "asking the conductor's apparent version (first heartbeat on accel-upgrade)"
            }
            StartStep::FirstHeartbeat => {
                "the first heartbeat to the conductor's upgrade API (accel-upgrade)"
            }
            StartStep::FirstReport => "the first inventory report (report_data)",
        }
    }

    /// Whether the call went to accel's upgrade API (a heartbeat), which only accel's
    /// conductor serves.
    pub fn is_heartbeat(self) -> bool {
        matches!(self, StartStep::ApparentVersion | StartStep::FirstHeartbeat)
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
    #[error("{}: {source}", step.what())]
    Conductor {
        /// The step whose call failed.
        step: StartStep,
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
         of device {device} from managed = {persisted} while it is allocated to {}; revert \
         the setting to [pci] managed = {persisted}, or release the instance's accelerator \
         first",
        instance.as_deref().map_or_else(|| "an instance".to_owned(), |i| format!("instance {i}"))
    )]
    ManagedModeInUse {
        /// The device (uuid, type and PCI address).
        device: String,
        /// The attach handle's uuid.
        handle: String,
        /// The instance it is bound to (Cyborg's `AttachHandle` names none).
        instance: Option<String>,
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
    /// [`RunningAgent::stop`](super::RunningAgent::stop) was called.
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
