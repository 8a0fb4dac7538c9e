//! accel's configuration: one TOML file (`--config`), environment variables
//! (`ACCEL_<SECTION>_<KEY>`, `ACCEL_UPGRADE_LEVELS_CONDUCTOR`), then `--set
//! SECTION.KEY=VALUE`, layered by verso's configuration loader (which also checks
//! `[upgrade_levels]`); `accel config show` prints every value with its origin,
//! passwords masked.

use accel_objects::rpc::{AgentApi, ConductorApi};
use serde::Deserialize;
use std::path::PathBuf;
use verso::Version;
use verso_rpc::caps::ApiCap;
use verso_rpc::config::{Config, ConfigError, ConfigLoader};

/// `[database]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Database {
    /// `sqlite://PATH` (created and migrated on first start) or `postgres://...`.
    pub url: String,
}

impl Default for Database {
    fn default() -> Self {
        Database {
            url: "sqlite://accel.db".into(),
        }
    }
}

/// `[transport]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transport {
    /// `memory://` (one process) or `rabbit://user:pass@host:5672/`.
    pub url: String,
    /// The control exchange.
    pub control_exchange: String,
    /// Seconds a call waits for its server's next call-monitor heartbeat (oslo's
    /// `call_monitor_timeout`) before it fails as "outcome unknown": a conductor killed
    /// with calls taken is noticed in this time, not the 60 s call timeout. 0: off.
    /// RabbitMQ only.
    pub call_monitor_timeout: u64,
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            url: "memory://".into(),
            control_exchange: "accel".into(),
            call_monitor_timeout: 10,
        }
    }
}

/// `[conductor]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Conductor {
    /// Seconds an agent still counts after it was last heard of (a heartbeat, or a
    /// report of an agent that sends none): while it counts, an agent on older software
    /// blocks `accel upgrade finalize`. At least 1; keep it above the agents'
    /// `report_interval`, or a live agent between two heartbeats is missed.
    pub agent_liveness: u64,
    /// Seconds a stopping conductor (SIGTERM, Ctrl-C) waits for the calls it already
    /// took to finish and be answered before it exits anyway. It takes no new call
    /// meanwhile: the broker gives those to the other conductors.
    pub stop_timeout: u64,
}

impl Default for Conductor {
    fn default() -> Self {
        Conductor {
            agent_liveness: accel_conductor::runtime::AGENT_LIVENESS.as_secs(),
            stop_timeout: accel_conductor::runtime::STOP_TIMEOUT.as_secs(),
        }
    }
}

/// `[api]`: where the HTTP API listens, TLS, and its limits and timeouts (each default
/// is `accel_api::Limits::default()` / `accel_api::ServeOptions::default()`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Api {
    /// Where the HTTP API listens (loopback by default).
    pub listen: String,
    /// HTTPS: the PEM certificate chain (with `tls_key_file`); unset: plain HTTP.
    pub tls_cert_file: Option<PathBuf>,
    /// HTTPS: the PEM private key of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// The URL the API's links are built on (Cyborg's `[api] public_endpoint`) when
    /// clients reach it through a proxy or another name; unset: the request's `Host`.
    pub public_endpoint: Option<String>,
    /// Seconds for a request's headers to arrive (also the idle keep-alive timeout).
    pub header_read_timeout: u64,
    /// Seconds a request body may pause.
    pub body_read_timeout: u64,
    /// Seconds a request may take in all.
    pub request_timeout: u64,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Rows per page of every list: the default and largest `limit`.
    pub max_page_size: u32,
    /// Groups a device profile may have.
    pub max_groups_per_profile: usize,
    /// Accelerator requests one `POST /v2/accelerator_requests` may create.
    pub max_arqs_per_request: usize,
}

impl Default for Api {
    fn default() -> Self {
        let limits = accel_api::Limits::default();
        let serve = accel_api::ServeOptions::default();
        Api {
            listen: accel_api::DEFAULT_LISTEN.into(),
            tls_cert_file: None,
            tls_key_file: None,
            public_endpoint: None,
            header_read_timeout: serve.header_read_timeout.as_secs(),
            body_read_timeout: serve.body_read_timeout.as_secs(),
            request_timeout: serve.request_timeout.as_secs(),
            max_connections: serve.max_connections,
            max_page_size: limits.max_page_size,
            max_groups_per_profile: limits.max_groups_per_profile,
            max_arqs_per_request: limits.max_arqs_per_request,
        }
    }
}

impl Api {
    /// The API's limits and server options; a zero or a lone TLS file is refused with
    /// the option named.
    pub fn options(&self) -> Result<(accel_api::Limits, accel_api::ServeOptions), String> {
        let positive = |name: &str, v: u64| {
            if v == 0 {
                Err(format!("[api] {name} must be at least 1"))
            } else {
                Ok(v)
            }
        };
        let secs = |name: &str, v: u64| positive(name, v).map(std::time::Duration::from_secs);
        let tls = match (&self.tls_cert_file, &self.tls_key_file) {
            (None, None) => None,
            (Some(cert), Some(key)) => {
                Some(accel_api::server::tls_config(cert, key).map_err(|e| e.to_string())?)
            }
            _ => {
                return Err(
                    "[api] tls_cert_file and tls_key_file go together: set both or neither".into(),
                )
            }
        };
        let limits = accel_api::Limits {
            max_page_size: positive("max_page_size", u64::from(self.max_page_size))? as u32,
            max_groups_per_profile: positive(
                "max_groups_per_profile",
                self.max_groups_per_profile as u64,
            )? as usize,
            max_arqs_per_request: positive(
                "max_arqs_per_request",
                self.max_arqs_per_request as u64,
            )? as usize,
        };
        let public_endpoint = self
            .public_endpoint
            .as_deref()
            .map(|u| {
                accel_api::PublicEndpoint::parse(u)
                    .map_err(|e| format!("[api] public_endpoint {e}"))
            })
            .transpose()?;
        let serve = accel_api::ServeOptions {
            public_endpoint,
            header_read_timeout: secs("header_read_timeout", self.header_read_timeout)?,
            body_read_timeout: secs("body_read_timeout", self.body_read_timeout)?,
            request_timeout: secs("request_timeout", self.request_timeout)?,
            max_connections: positive("max_connections", self.max_connections as u64)? as usize,
            tls,
        };
        Ok((limits, serve))
    }
}

/// `[agent]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Agent {
    /// This host's name (default: the machine's).
    pub host: Option<String>,
    /// Where sysfs is.
    pub sysfs_root: PathBuf,
    /// Seconds between inventory reports (and heartbeats).
    pub report_interval: u64,
    /// Where the agent keeps its component-version record (`agent-HOST.version`).
    pub state_dir: PathBuf,
    /// Seconds between rediscoveries (reported when changed) and scans for this host's
    /// NVMe handles left in `cleaning`.
    pub scan_interval: u64,
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            host: None,
            sysfs_root: PathBuf::from("/sys"),
            report_interval: 60,
            state_dir: PathBuf::from("/var/lib/accel"),
            scan_interval: 10,
        }
    }
}

/// `[pci]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Pci {
    /// The PCI managed mode guests get: `true` (libvirt detaches and reattaches the
    /// device) or `false` (VFIO variant drivers: the operator binds the driver; needs
    /// `[upgrade_levels] conductor = "1.1"` and a finalized upgrade).
    pub managed: bool,
}

impl Default for Pci {
    fn default() -> Self {
        Pci { managed: true }
    }
}

/// `[nvme]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Nvme {
    /// The command that erases a released NVMe namespace, run with its device path as
    /// the last argument; exit 0 means clean. Unset: the built-in nvme-cli sanitize or
    /// secure-erase format, checked against the controller's capabilities.
    pub cleanup_command: Option<String>,
    /// Seconds a cleanup may take; a longer one is killed and the device goes to `error`.
    pub cleanup_timeout: u64,
}

impl Default for Nvme {
    fn default() -> Self {
        Nvme {
            cleanup_command: None,
            cleanup_timeout: 3600,
        }
    }
}

/// `[cyborg]`: serving real OpenStack Cyborg 17 agents during a migration from Cyborg.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cyborg {
    /// Whether `accel conductor` also serves Cyborg's `report_data` (topic
    /// `cyborg-conductor`) so Cyborg 17 agents not yet replaced report into accel.
    pub serve_agents: bool,
    /// The control exchange Cyborg's services use, on `[transport] url`'s broker.
    pub control_exchange: String,
}

impl Default for Cyborg {
    fn default() -> Self {
        Cyborg {
            serve_agents: false,
            control_exchange: accel_cyborg17::rpc::CONTROL_EXCHANGE.into(),
        }
    }
}

/// The whole configuration.
#[derive(Debug)]
pub struct AccelConfig {
    /// `[database]`.
    pub database: Database,
    /// `[transport]`.
    pub transport: Transport,
    /// `[conductor]`.
    pub conductor: Conductor,
    /// `[api]`.
    pub api: Api,
    /// `[agent]`.
    pub agent: Agent,
    /// `[pci]`.
    pub pci: Pci,
    /// `[nvme]`.
    pub nvme: Nvme,
    /// `[cyborg]`.
    pub cyborg: Cyborg,
    /// The layered configuration (caps, origins).
    pub layers: Config,
}

/// The RPC APIs accel's clients call, with their default caps: agents call the
/// conductor at its newest (1.3: object indirection, unchanged reports by digest,
/// device maintenance; conductors are upgraded first); the conductor calls agents at 1.0 until the
/// operator raises `[upgrade_levels] agent` to 1.1 once every agent runs release N+1
/// (`cleanup_device`).
pub fn apis() -> [ApiCap; 2] {
    [
        ApiCap::for_api::<ConductorApi>(Version::new(1, 3)),
        ApiCap::for_api::<AgentApi>(Version::new(1, 0)),
    ]
}

/// Loads the configuration from `file`, the environment and `overrides`.
pub fn load(file: Option<&PathBuf>, overrides: &[String]) -> Result<AccelConfig, ConfigError> {
    let mut loader = ConfigLoader::new().env_prefix("ACCEL");
    for api in apis() {
        loader = loader.api(api);
    }
    let layers = loader
        .section("database")
        .section("transport")
        .section("conductor")
        .section("api")
        .section("agent")
        .section("pci")
        .section("nvme")
        .section("cyborg")
        .maybe_file(file)
        .overrides(overrides.iter().cloned())
        .load()?;
    Ok(AccelConfig {
        database: layers.section("database")?,
        transport: layers.section("transport")?,
        conductor: layers.section("conductor")?,
        api: layers.section("api")?,
        agent: layers.section("agent")?,
        pci: layers.section("pci")?,
        nvme: layers.section("nvme")?,
        cyborg: layers.section("cyborg")?,
        layers,
    })
}
