//! Cyborg 17's agent API 1.0 as release N's agent serves it (topic `cyborg-agent`, server
//! = the host name, on Cyborg's control exchange), and its reports to Cyborg's conductor.
//! Release N's frozen copy of what accel's N+1 crate `accel-agent` had
//! (`accel_agent::cyborg`), without what only N+1 sends or serves there (agent API 1.1's
//! NVMe `cleanup_device`, reports by digest), so release N's agent does not change when
//! N+1's does.
//!
//! - `create_vgpu_mdev(pci_addr, asked_type, ah_uuid)` writes the attach handle's UUID to
//!   `class/mdev_bus/<pci_addr>/mdev_supported_types/<asked_type>/create` under the
//!   agent's sysfs root, and `remove_vgpu_mdev` writes `1` to
//!   `.../<asked_type>/devices/<ah_uuid>/remove`: what Cyborg's GPU utilities do, so
//!   the kernel makes (or removes) the mediated device. A device already absent is
//!   removed (Cyborg's agent fails there), so the conductor's retry of a removal whose
//!   answer was lost succeeds.
//! - `fpga_program(controlpath_id, bitstream_uuid, driver_name)` refuses a bitstream
//!   that is no UUID as Cyborg's agent does (`InvalidUUID`) and a control path that is
//!   not a PCI address (`InvalidType`), downloads the bitstream from Glance and runs the
//!   operator's programming tool on it ([`crate::fpga`]); it replies `true` when the tool
//!   succeeded and `false` when it failed, as Cyborg's drivers do (Cyborg's API then
//!   answers `FPGAProgramError`). A download that fails is Cyborg's exception for it
//!   (`ResourceNotFound`, `ImageNotAuthorized`, `ImageUnacceptable`,
//!   `GlanceConnectionFailed`). Without `[fpga] program_command` it answers
//!   `NotSupported`, and nothing is fetched or written.
//!
//! Every argument is checked before anything is touched (a PCI address `DDDD:BB:DD.F`,
//! an mdev type that is one path component, a UUID), so a caller cannot make the agent
//! write outside the mdev tree; a refused call answers a typed error naming the value.
//!
//! [`CyborgReporter`] reports the host's devices with Cyborg's own `report_data` (topic
//! `cyborg-conductor`), as Cyborg's agent does: a plain list of `DriverDevice` 1.4
//! objects ([`crate::report::driver_devices`]).

use crate::discovery::{discover, DiscoveryError};
use crate::fpga::{ProgramError, Programmer};
use crate::report::driver_devices;
use accel_cyborg17::rpc::{
    ConductorApi, CreateVgpuMdev, FpgaProgram, RemoveVgpuMdev, ReportData, AGENT_TOPIC,
    CONDUCTOR_TOPIC,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcClient, RpcError, RpcServer, ServerHandle, Target};

/// The module of the remote errors this API answers with (Cyborg's exceptions module,
/// so Cyborg's conductor reads them as its own).
pub const ERROR_MODULE: &str = "cyborg.common.exception";

fn invalid(kind: &str, message: String) -> RemoteError {
    RemoteError::new(kind, ERROR_MODULE, message)
}

/// An argument refused: Cyborg's exception class and the message.
type Refused = (&'static str, String);

fn refused((kind, message): Refused) -> RemoteError {
    invalid(kind, message)
}

/// `DDDD:BB:DD.F`, lower-case hexadecimal, as the kernel names PCI functions.
fn check_pci(pci: &str) -> Result<(), Refused> {
    let b = pci.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(|c| c.is_ascii_hexdigit());
    let ok = b.len() == 12
        && hex(0..4)
        && b[4] == b':'
        && hex(5..7)
        && b[7] == b':'
        && hex(8..10)
        && b[10] == b'.'
        && (b'0'..=b'7').contains(&b[11]);
    if ok {
        Ok(())
    } else {
        Err((
            "InvalidParameterValue",
            format!("pci_addr {pci:?} is not a PCI address (DDDD:BB:DD.F)"),
        ))
    }
}

/// An mdev type is one directory name (`nvidia-35`, `i915-GVTg_V5_4`).
fn check_type(t: &str) -> Result<(), Refused> {
    let ok = !t.is_empty()
        && t.len() <= 255
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err((
            "InvalidParameterValue",
            format!("asked_type {t:?} is not an mdev type name"),
        ))
    }
}

fn check_uuid(u: &str) -> Result<(), Refused> {
    uuid::Uuid::parse_str(u)
        .map(|_| ())
        .map_err(|_| ("InvalidUUID", format!("Expected a uuid but received {u}.")))
}

/// The directory of one mdev type of one GPU.
fn type_dir(sysfs_root: &Path, pci: &str, asked_type: &str) -> PathBuf {
    sysfs_root
        .join("class/mdev_bus")
        .join(pci)
        .join("mdev_supported_types")
        .join(asked_type)
}

/// Writes `text` to the sysfs attribute `path`, which must exist (sysfs attributes are
/// never created by writing): a missing one is `NotFound` naming it.
async fn write_attribute(path: PathBuf, text: String) -> Result<(), RemoteError> {
    let shown = path.display().to_string();
    let done = tokio::task::spawn_blocking(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
    })
    .await
    .map_err(|e| invalid("AgentError", format!("writing {shown}: {e}")))?;
    done.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => invalid("NotFound", format!("{shown} does not exist")),
        _ => invalid("AgentError", format!("writing {shown}: {e}")),
    })
}

/// The PCI address (`DDDD:BB:DD.F`) of a control path as Cyborg sends it to
/// `fpga_program`: `{"cpid_type": "PCI", "cpid_info": {"domain", "bus", "device",
/// "function"}}` (`cpid_info` decoded; text is taken too).
fn control_path_address(cpid: &serde_json::Value) -> Result<String, Refused> {
    let ty = cpid.get("cpid_type").and_then(serde_json::Value::as_str);
    if ty != Some("PCI") {
        return Err((
            "InvalidType",
            format!("controlpath_id is of type {ty:?}, expected PCI"),
        ));
    }
    let info = match cpid.get("cpid_info") {
        Some(serde_json::Value::String(text)) => serde_json::from_str(text).ok(),
        other => other.cloned(),
    };
    let part = |key: &str, width: usize| {
        let text = info.as_ref()?.get(key)?.as_str()?;
        let n = u32::from_str_radix(text.trim_start_matches("0x"), 16).ok()?;
        Some(format!("{n:0width$x}"))
    };
    let address = (|| {
        Some(format!(
            "{}:{}:{}.{}",
            part("domain", 4)?,
            part("bus", 2)?,
            part("device", 2)?,
            part("function", 1)?
        ))
    })()
    .ok_or_else(|| {
        (
            "InvalidParameterValue",
            format!("controlpath_id's cpid_info {info:?} is not a PCI address"),
        )
    })?;
    check_pci(&address)?;
    Ok(address)
}

/// What Cyborg's agent API works on: the host's sysfs tree and, when programming is
/// configured, the FPGA programmer.
#[derive(Clone)]
struct AgentState {
    sysfs_root: PathBuf,
    programmer: Option<Arc<Programmer>>,
}

/// Cyborg's agent API 1.0 over the sysfs tree at `sysfs_root` (`/sys` on a host),
/// programming FPGAs with `programmer` (none: `fpga_program` is not supported).
pub fn endpoint(sysfs_root: PathBuf, programmer: Option<Arc<Programmer>>) -> Endpoint {
    Endpoint::new(Version::new(1, 0))
        .with_state(AgentState {
            sysfs_root,
            programmer,
        })
        .handle(|state: AgentState, _ctx, m: CreateVgpuMdev| async move {
            let root = state.sysfs_root;
            check_pci(&m.pci_addr).map_err(refused)?;
            check_type(&m.asked_type).map_err(refused)?;
            check_uuid(&m.ah_uuid).map_err(refused)?;
            let path = type_dir(&root, &m.pci_addr, &m.asked_type).join("create");
            write_attribute(path, m.ah_uuid.clone()).await?;
            tracing::info!(pci = %m.pci_addr, mdev_type = %m.asked_type, mdev = %m.ah_uuid, "mediated device created for Cyborg's conductor");
            Ok(())
        })
        .handle(|state: AgentState, _ctx, m: RemoveVgpuMdev| async move {
            let root = state.sysfs_root;
            check_pci(&m.pci_addr).map_err(refused)?;
            check_type(&m.asked_type).map_err(refused)?;
            check_uuid(&m.ah_uuid).map_err(refused)?;
            let device = type_dir(&root, &m.pci_addr, &m.asked_type)
                .join("devices")
                .join(&m.ah_uuid);
            // Already gone (removed by an earlier call whose answer was lost, or by the
            // host's operator): what was asked holds, so a conductor's retry succeeds.
            if !tokio::fs::try_exists(&device).await.unwrap_or(true) {
                tracing::info!(pci = %m.pci_addr, mdev_type = %m.asked_type, mdev = %m.ah_uuid, "mediated device already absent");
                return Ok(());
            }
            write_attribute(device.join("remove"), "1".to_owned()).await?;
            tracing::info!(pci = %m.pci_addr, mdev_type = %m.asked_type, mdev = %m.ah_uuid, "mediated device removed for Cyborg's conductor");
            Ok(())
        })
        .handle(|state: AgentState, _ctx, m: FpgaProgram| async move {
            check_uuid(&m.bitstream_uuid).map_err(refused)?;
            let address = control_path_address(&m.controlpath_id).map_err(refused)?;
            let Some(programmer) = state.programmer else {
                return Err(invalid(
                    "NotSupported",
                    format!(
                        "fpga_program of bitstream {} on {address} (driver {}): this agent \
                         has no [fpga] program_command",
                        m.bitstream_uuid, m.driver_name
                    ),
                ));
            };
            match programmer.program(&address, &m.bitstream_uuid).await {
                Ok(()) => {
                    tracing::info!(%address, bitstream = %m.bitstream_uuid, driver = %m.driver_name, "FPGA programmed for Cyborg's conductor");
                    Ok(serde_json::Value::Bool(true))
                }
                // Cyborg's drivers answer False when the tool fails.
                Err(e @ ProgramError::Tool { .. }) => {
                    tracing::error!(%address, bitstream = %m.bitstream_uuid, error = %e, "FPGA programming failed");
                    Ok(serde_json::Value::Bool(false))
                }
                Err(e) => Err(invalid(e.cyborg_class(), e.to_string())),
            }
        })
        .into_endpoint()
}

/// Serves [`endpoint`] as host `host`'s Cyborg agent (topic `cyborg-agent`, server
/// `host`) over `transport`, whose control exchange must be Cyborg's.
pub async fn serve(
    transport: Arc<dyn Transport>,
    host: &str,
    sysfs_root: PathBuf,
    programmer: Option<Arc<Programmer>>,
) -> Result<ServerHandle, RpcError> {
    RpcServer::new(transport, Target::new(AGENT_TOPIC).with_server(host))
        .endpoint(endpoint(sysfs_root, programmer))?
        .start()
        .await
}

/// Why a report to Cyborg's conductor failed.
#[derive(Debug, thiserror::Error)]
pub enum CyborgReportError {
    /// Devices cannot be discovered.
    #[error("discovery: {0}")]
    Discovery(#[from] DiscoveryError),
    /// Discovery's task did not finish.
    #[error("discovery did not finish: {0}")]
    Task(String),
    /// Cyborg's conductor did not take the report (its remote error, or no answer).
    #[error("report_data to Cyborg's conductor: {0}")]
    Conductor(#[from] RpcError),
}

/// Reports a host's devices to Cyborg 17's conductor, as Cyborg 17's agent does.
#[derive(Clone)]
pub struct CyborgReporter {
    conductor: RpcClient,
    host: String,
    sysfs_root: PathBuf,
}

impl CyborgReporter {
    /// A reporter for `host` (the name Cyborg's conductor files the devices under and
    /// looks the compute node's provider up by) reading `sysfs_root`, calling
    /// `cyborg-conductor` over `transport` (on Cyborg's control exchange), each call
    /// waiting at most `timeout` (Cyborg's conductor reports to Placement inside the
    /// call: give it Cyborg's `rpc_response_timeout`, 60 s by default).
    pub fn new(
        transport: Arc<dyn Transport>,
        host: impl Into<String>,
        sysfs_root: PathBuf,
        timeout: Duration,
    ) -> CyborgReporter {
        CyborgReporter {
            conductor: RpcClient::for_api::<ConductorApi>(transport, CONDUCTOR_TOPIC)
                .timeout(timeout),
            host: host.into(),
            sysfs_root,
        }
    }

    /// Discovers the host's devices and reports them; returns how many were reported.
    pub async fn report(&self) -> Result<usize, CyborgReportError> {
        let root = self.sysfs_root.clone();
        let found = tokio::task::spawn_blocking(move || discover(&root))
            .await
            .map_err(|e| CyborgReportError::Task(e.to_string()))??;
        for p in &found.problems {
            tracing::warn!(host = %self.host, path = %p.path.display(), why = %p.why, "device skipped");
        }
        let (devices, left_out) = driver_devices(&self.host, &found);
        for address in &left_out {
            tracing::warn!(host = %self.host, %address, "device left out of the report to Cyborg's conductor: no Cyborg form");
        }
        let n = devices.len();
        let ctx = RequestContext::new(format!("req-cyborg-report-{}", self.host));
        self.conductor
            .call_method(
                &ctx,
                ReportData {
                    hostname: self.host.clone(),
                    driver_device_list: devices,
                },
            )
            .await?;
        tracing::info!(host = %self.host, devices = n, "inventory reported to Cyborg's conductor");
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_before_any_write() {
        assert!(check_pci("0000:3b:00.0").is_ok());
        for bad in [
            "0000:3b:00",
            "../../etc",
            "0000:3b:00.8",
            "0000:3g:00.0",
            "",
        ] {
            assert_eq!(check_pci(bad).expect_err(bad).0, "InvalidParameterValue");
        }
        assert!(check_type("nvidia-35").is_ok());
        assert!(check_type("i915-GVTg_V5_4").is_ok());
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(check_type(bad).is_err(), "{bad}");
        }
        assert_eq!(check_uuid("x").expect_err("x").0, "InvalidUUID");
        let cpid =
            |info: serde_json::Value| serde_json::json!({"cpid_type": "PCI", "cpid_info": info});
        assert_eq!(
            control_path_address(&cpid(
                serde_json::json!({"domain": "0000", "bus": "5e", "device": "00", "function": "0"})
            )),
            Ok("0000:5e:00.0".to_owned())
        );
        // Text, as the database holds it, and Cyborg's unpadded forms.
        assert_eq!(
            control_path_address(&cpid(serde_json::json!(
                r#"{"domain": "0", "bus": "5e", "device": "0", "function": "1"}"#
            ))),
            Ok("0000:5e:00.1".to_owned())
        );
        assert_eq!(
            control_path_address(&serde_json::json!({"cpid_type": "MDEV", "cpid_info": {}}))
                .map_err(|e| e.0),
            Err("InvalidType")
        );
        for bad in [
            serde_json::json!({"bus": "5e"}),
            serde_json::json!({"domain": "0", "bus": "zz", "device": "0", "function": "0"}),
            serde_json::json!({"domain": "0", "bus": "0", "device": "0", "function": "9"}),
        ] {
            assert_eq!(
                control_path_address(&cpid(bad.clone())).map_err(|e| e.0),
                Err("InvalidParameterValue"),
                "{bad}"
            );
        }
        assert!(check_uuid("5f0b9d9e-4ec4-4d8b-9a6a-3b1f0d1e2c3a").is_ok());
    }
}
