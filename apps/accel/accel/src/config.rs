//! accel's configuration: one TOML file (`--config`), environment variables
//! (`ACCEL_<SECTION>_<KEY>`, `ACCEL_UPGRADE_LEVELS_CONDUCTOR`), then `--set
//! SECTION.KEY=VALUE`, layered by verso's configuration loader (which also checks
//! `[upgrade_levels]`); `accel config show` prints every value with its origin,
//! passwords masked.

use accel_objects::rpc::ConductorApi;
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
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            url: "memory://".into(),
            control_exchange: "accel".into(),
        }
    }
}

/// `[api]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Api {
    /// Where the HTTP API listens (loopback by default).
    pub listen: String,
}

impl Default for Api {
    fn default() -> Self {
        Api {
            listen: accel_api::DEFAULT_LISTEN.into(),
        }
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
}

impl Default for Agent {
    fn default() -> Self {
        Agent {
            host: None,
            sysfs_root: PathBuf::from("/sys"),
            report_interval: 60,
            state_dir: PathBuf::from("/var/lib/accel"),
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
    /// `[api]`.
    pub api: Api,
    /// `[agent]`.
    pub agent: Agent,
    /// The layered configuration (caps, origins).
    pub layers: Config,
}

/// The RPC APIs accel's clients call, with their default caps.
pub fn apis() -> [ApiCap; 1] {
    [ApiCap::for_api::<ConductorApi>(Version::new(1, 1))]
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
        .section("api")
        .section("agent")
        .maybe_file(file)
        .overrides(overrides.iter().cloned())
        .load()?;
    Ok(AccelConfig {
        database: layers.section("database")?,
        transport: layers.section("transport")?,
        api: layers.section("api")?,
        agent: layers.section("agent")?,
        layers,
    })
}
