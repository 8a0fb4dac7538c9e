//! The agent's configuration, read from Cyborg 17's own `cyborg.conf`.
//!
//! | section | option | used for |
//! |---|---|---|
//! | `[DEFAULT]` | `transport_url` | RabbitMQ, exchange `cyborg` |
//! | `[DEFAULT]` | `host` (default: the machine's host name) | the agent's RPC server name and the host its devices are filed under (the compute node's name in Placement) |
//! | `[DEFAULT]` | `rpc_response_timeout` (default 60 s, oslo.messaging's) | how long a report waits for the conductor |
//! | `[agent]` | `report_interval` (accel's; default 60 s, Cyborg's fixed period) | how often the host's devices are reported |
//! | `[agent]` | `sysfs_root` (accel's; default `/sys`) | where devices are discovered (accel's discovery, in place of Cyborg's drivers) |
//! | `[fpga]` | `program_command` (accel's), `program_timeout` (600 s), `max_bitstream_bytes` (1 GiB), `work_dir` (the system's temporary directory) | `fpga_program`: the bitstream from Glance handed to the operator's tool; unset: `NotSupported` |
//! | `[glance]` | keystoneauth's password options, `endpoint_override` | where bitstreams are downloaded from (needed with `[fpga] program_command`) |

use crate::fpga::FpgaOptions;
pub use accel_cyborg17::keystone::oslo::ConfigError;
use accel_cyborg17::keystone::oslo::{get, service, ServiceAuth};
use ini::Ini;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// FPGA programming: Glance's service user and the tool.
#[derive(Clone, Debug)]
pub struct FpgaConfig {
    /// `[glance]`.
    pub glance: ServiceAuth,
    /// `[fpga]`.
    pub options: FpgaOptions,
}

/// What the agent runs with.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// `[DEFAULT] transport_url`.
    pub transport_url: String,
    /// `[DEFAULT] host`, or the machine's host name.
    pub host: String,
    /// `[DEFAULT] rpc_response_timeout`.
    pub rpc_timeout: Duration,
    /// `[agent] report_interval`.
    pub report_interval: Duration,
    /// `[agent] sysfs_root`.
    pub sysfs_root: PathBuf,
    /// `[fpga]` with `[glance]`, when `program_command` is set.
    pub fpga: Option<FpgaConfig>,
}

fn seconds(
    ini: &Ini,
    section: &'static str,
    option: &'static str,
    default: u64,
) -> Result<u64, ConfigError> {
    let Some(v) = get(ini, section, option) else {
        return Ok(default);
    };
    match v.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::Invalid {
            section,
            option,
            value: v.to_owned(),
            reason: "a whole number of at least 1".into(),
        }),
    }
}

/// The machine's host name (what oslo.config's `host` defaults to).
fn machine_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

impl AgentConfig {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<AgentConfig, ConfigError> {
        let ini = accel_cyborg17::keystone::oslo::load(path)?;
        AgentConfig::from_ini(&ini)
    }

    /// Reads an already parsed file.
    pub fn from_ini(ini: &Ini) -> Result<AgentConfig, ConfigError> {
        let transport_url = get(ini, "DEFAULT", "transport_url")
            .ok_or(ConfigError::Missing {
                section: "DEFAULT",
                option: "transport_url",
            })?
            .to_owned();
        let command: Vec<String> = get(ini, "fpga", "program_command")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let fpga = if command.is_empty() {
            None
        } else {
            let glance = service(ini, "glance")?.ok_or(ConfigError::Missing {
                section: "glance",
                option: "auth_url",
            })?;
            Some(FpgaConfig {
                glance,
                options: FpgaOptions {
                    program_command: command,
                    program_timeout: Duration::from_secs(seconds(
                        ini,
                        "fpga",
                        "program_timeout",
                        600,
                    )?),
                    max_bitstream_bytes: seconds(ini, "fpga", "max_bitstream_bytes", 1 << 30)?,
                    work_dir: get(ini, "fpga", "work_dir")
                        .map(PathBuf::from)
                        .unwrap_or_else(std::env::temp_dir),
                },
            })
        };
        Ok(AgentConfig {
            transport_url,
            host: get(ini, "DEFAULT", "host")
                .map(str::to_owned)
                .unwrap_or_else(machine_host),
            rpc_timeout: Duration::from_secs(seconds(ini, "DEFAULT", "rpc_response_timeout", 60)?),
            report_interval: Duration::from_secs(seconds(ini, "agent", "report_interval", 60)?),
            sysfs_root: get(ini, "agent", "sysfs_root")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/sys")),
            fpga,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<AgentConfig, ConfigError> {
        let ini = accel_cyborg17::keystone::oslo::parse(text, "test")?;
        AgentConfig::from_ini(&ini)
    }

    #[test]
    fn a_cyborg_agents_file_is_read_with_cyborgs_defaults() {
        let c = read(
            "[DEFAULT]\ntransport_url = rabbit://guest:guest@rabbit:5672/\nhost = compute-1\n",
        )
        .expect("a good file");
        assert_eq!(c.host, "compute-1");
        assert_eq!(c.rpc_timeout, Duration::from_secs(60));
        assert_eq!(c.report_interval, Duration::from_secs(60));
        assert_eq!(c.sysfs_root, PathBuf::from("/sys"));
        assert!(c.fpga.is_none());
        let c = read(
            "[DEFAULT]\ntransport_url = rabbit://r/\n[agent]\nreport_interval = 5\n\
             sysfs_root = /tmp/sys\n[fpga]\nprogram_command = /usr/bin/flash --yes\n\
             [glance]\nauth_url = http://keystone/v3\nusername = cyborg\npassword = p\n\
             project_name = service\n",
        )
        .expect("with FPGA programming");
        assert_eq!(c.report_interval, Duration::from_secs(5));
        let fpga = c.fpga.expect("programming");
        assert_eq!(fpga.options.program_command, ["/usr/bin/flash", "--yes"]);
        assert_eq!(fpga.glance.auth.username, "cyborg");
    }

    #[test]
    fn bad_files_name_the_option() {
        let e = read("[agent]\nreport_interval = 5\n").expect_err("no broker");
        assert_eq!(e.to_string(), "[DEFAULT] transport_url is required");
        let e = read("[DEFAULT]\ntransport_url = rabbit://r/\n[agent]\nreport_interval = 0\n")
            .expect_err("no interval");
        assert!(
            e.to_string().starts_with("[agent] report_interval = \"0\""),
            "{e}"
        );
        let e = read("[DEFAULT]\ntransport_url = rabbit://r/\n[fpga]\nprogram_command = flash\n")
            .expect_err("no Glance");
        assert_eq!(e.to_string(), "[glance] auth_url is required");
    }
}
