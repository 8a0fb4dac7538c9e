//! Cyborg 17's agent API, served by accel's agent so that a Cyborg 17 conductor still
//! running during a migration can call it: topic `cyborg-agent`, server = the host name,
//! on Cyborg's control exchange (`[cyborg] serve_conductor`).
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
//! With a [`DeviceCleanups`] handler ([`endpoint_with`]: release N+1's agent on Cyborg's
//! wire), the API is 1.1 and also serves the NVMe feature's `cleanup_device(device_uuid)`.
//!
//! Every argument is checked before anything is touched (a PCI address `DDDD:BB:DD.F`,
//! an mdev type that is one path component, a UUID), so a caller cannot make the agent
//! write outside the mdev tree; a refused call answers a typed error naming the value.
//!
//! The other direction, for a host whose agent is replaced before the control plane
//! (`[cyborg] report_to_cyborg`): [`CyborgReporter`] reports the host's devices to a
//! Cyborg 17 conductor with Cyborg's own `report_data` (topic `cyborg-conductor`), as
//! Cyborg's agent would: a plain list of `DriverDevice` 1.4 objects, made by
//! [`driver_devices`] from the same discovery and the same report form accel's
//! conductor gets, so both conductors see the same inventory of a host.

use crate::discovery::{discover, DiscoveryError};
use crate::fpga::{ProgramError, Programmer};
use accel_cyborg17::objects::{
    DeviceType, DriverAttachHandle, DriverAttribute, DriverControlPathID, DriverDeployable,
    DriverDevice,
};
use accel_cyborg17::rpc::{
    ConductorApi, CreateVgpuMdev, FpgaProgram, RemoveVgpuMdev, ReportData, AGENT_TOPIC,
    CONDUCTOR_TOPIC,
};
use accel_objects::cyborg::{CleanupDevice, AGENT_CLEANUP_VERSION};
use accel_objects::DriverDeviceList;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use verso::indirection::BoxFuture;
use verso::{ObjectList, RequestContext, Version, VersionedEnum, VersionedObject};
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

/// What runs a device's NVMe cleanup when a conductor asks (`cleanup_device`, agent
/// API 1.1): accel's N+1 agent on Cyborg's wire.
pub trait DeviceCleanups: Send + Sync + 'static {
    /// Starts the cleanup of device `device_uuid` of this host (or finds it running);
    /// refuses a device that is not waiting for one.
    fn cleanup_device<'a>(&'a self, device_uuid: &'a str)
        -> BoxFuture<'a, Result<(), RemoteError>>;
}

/// What Cyborg's agent API works on: the host's sysfs tree and, when programming is
/// configured, the FPGA programmer.
#[derive(Clone)]
struct AgentState {
    sysfs_root: PathBuf,
    programmer: Option<Arc<Programmer>>,
}

/// Cyborg's agent API over the sysfs tree at `sysfs_root` (`/sys` on a host), programming
/// FPGAs with `programmer` (none: `fpga_program` is not supported): Cyborg 17's, 1.0.
pub fn endpoint(sysfs_root: PathBuf, programmer: Option<Arc<Programmer>>) -> Endpoint {
    endpoint_with(sysfs_root, programmer, None)
}

/// [`endpoint`], and with `cleanups` the NVMe feature's `cleanup_device` (agent API 1.1,
/// [`accel_objects::cyborg::AgentApi`]).
pub fn endpoint_with(
    sysfs_root: PathBuf,
    programmer: Option<Arc<Programmer>>,
    cleanups: Option<Arc<dyn DeviceCleanups>>,
) -> Endpoint {
    let version = if cleanups.is_some() {
        AGENT_CLEANUP_VERSION
    } else {
        Version::new(1, 0)
    };
    let endpoint = Endpoint::new(version)
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
        });
    let Some(cleanups) = cleanups else {
        return endpoint.into_endpoint();
    };
    endpoint
        .handle(move |_state: AgentState, _ctx, m: CleanupDevice| {
            let cleanups = cleanups.clone();
            async move {
                check_uuid(&m.device_uuid).map_err(refused)?;
                // Answered in Cyborg's exception module, so a Cyborg conductor reads the
                // refusal as its own class (`NotFound`, ...).
                cleanups
                    .cleanup_device(&m.device_uuid)
                    .await
                    .map_err(|mut e| {
                        e.module = ERROR_MODULE.to_owned();
                        e
                    })
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
    serve_endpoint(transport, host, endpoint(sysfs_root, programmer)).await
}

/// Serves `endpoint` (one of [`endpoint`], [`endpoint_with`]) as host `host`'s Cyborg
/// agent.
pub async fn serve_endpoint(
    transport: Arc<dyn Transport>,
    host: &str,
    endpoint: Endpoint,
) -> Result<ServerHandle, RpcError> {
    RpcServer::new(transport, Target::new(AGENT_TOPIC).with_server(host))
        .endpoint(endpoint)?
        .start()
        .await
}

/// The name of the deployable of the device at `address` on `host`, as accel's
/// conductor names an accel agent's deployables and Cyborg's GPU drivers name theirs
/// (`<host>_<PCI address>`): the name Cyborg's conductor gives its Placement provider.
pub fn deployable_name(host: &str, address: &str) -> String {
    format!("{host}_{address}")
}

/// A host's report (accel's form, [`crate::report::driver_devices`]) as Cyborg 17's
/// agent sends it: per device, its control path (`PCI`, the address as Cyborg's
/// `cpid_info`), and one deployable holding every attach handle (a handle per enabled
/// virtual function, or the function itself), its attributes (`rc`, `trait*`: the
/// provider Cyborg's conductor makes in Placement) and the bound driver. A device whose
/// address or type does not convert is left out, and named in the second list.
pub fn driver_devices(host: &str, report: &DriverDeviceList) -> (Vec<DriverDevice>, Vec<String>) {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for d in ObjectList::iter(report) {
        match driver_device(host, d) {
            Some(device) => out.push(device),
            None => left_out.push(d.control_path_id.get().cloned().unwrap_or_default()),
        }
    }
    (out, left_out)
}

fn driver_device(host: &str, d: &accel_objects::DriverDevice) -> Option<DriverDevice> {
    let address = d.control_path_id.get()?;
    let ty = DeviceType::from_str(d.r#type.get()?.as_str())?;
    let handles: Vec<DriverAttachHandle> = d
        .attach_handles
        .get()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|h| {
            Some(DriverAttachHandle {
                attach_type: h.attach_type.get()?.as_str().to_owned().into(),
                attach_info: h.attach_info.get()?.clone().into(),
                in_use: false.into(),
                ..DriverAttachHandle::blank()
            })
        })
        .collect();
    let attributes: Vec<DriverAttribute> = d
        .attributes
        .get()
        .into_iter()
        .flatten()
        .map(|(key, value)| DriverAttribute {
            key: key.clone().into(),
            value: value.clone().into(),
            ..DriverAttribute::blank()
        })
        .collect();
    let deployable = DriverDeployable {
        name: deployable_name(host, address).into(),
        num_accelerators: i64::try_from(handles.len()).ok()?.into(),
        attribute_list: Some(attributes).into(),
        attach_handle_list: Some(handles).into(),
        driver_name: d.driver_name.get().cloned().flatten().into(),
        ..DriverDeployable::blank()
    };
    Some(DriverDevice {
        vendor: d.vendor.get()?.clone().into(),
        model: d.model.get()?.clone().into(),
        r#type: ty.into(),
        std_board_info: d.std_board_info.get().cloned().flatten().into(),
        vendor_board_info: None.into(),
        controlpath_id: DriverControlPathID {
            cpid_type: "PCI".to_owned().into(),
            cpid_info: crate::report::pci_attach_info(address)?.into(),
            ..DriverControlPathID::blank()
        }
        .into(),
        deployable_list: vec![deployable].into(),
        stub: false.into(),
        device_state: None.into(),
        ..DriverDevice::blank()
    })
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

/// What a report to Cyborg's conductor sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivered {
    /// How many devices the inventory has.
    pub devices: usize,
    /// Whether it went by digest (`report_unchanged`, the conductor knew it).
    pub by_digest: bool,
}

/// Reports a host's devices to a Cyborg 17 conductor, as Cyborg 17's agent does; with
/// [`CyborgReporter::with_digests`], an unchanged inventory goes by digest to a
/// conductor that serves accel's `report_unchanged` (1.2).
#[derive(Clone)]
pub struct CyborgReporter {
    conductor: RpcClient,
    /// A client of the seed spec's conductor API under the operator's cap, when
    /// unchanged inventories may go by digest.
    digests: Option<RpcClient>,
    /// The digest of the last inventory the conductor took in full.
    last: Arc<std::sync::Mutex<Option<String>>>,
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
            digests: None,
            last: Arc::default(),
            host: host.into(),
            sysfs_root,
        }
    }

    /// This reporter, sending an inventory unchanged since the last one the conductor
    /// took in full as its digest (`report_unchanged`,
    /// [`accel_objects::cyborg::ReportUnchanged`]) through `client` (the seed spec's
    /// conductor API, [`accel_objects::cyborg::ConductorApi`], under `[upgrade_levels]
    /// cyborg_conductor`) when its cap allows 1.2; in full otherwise, and when the
    /// conductor asks for it.
    pub fn with_digests(mut self, client: RpcClient) -> CyborgReporter {
        self.digests = Some(client);
        self
    }

    /// The client unchanged inventories go through, when the cap allows it.
    fn digest_client(&self) -> Option<&RpcClient> {
        self.digests
            .as_ref()
            .filter(|c| c.can_send_version(accel_objects::cyborg::REPORT_UNCHANGED_VERSION))
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
        Ok(self.send(&crate::report::driver_devices(&found)).await?)
    }

    /// Reports `devices` (accel's report form, [`crate::report::driver_devices`]) in
    /// Cyborg's form; returns how many were reported.
    pub async fn send(&self, devices: &DriverDeviceList) -> Result<usize, RpcError> {
        self.deliver(devices).await.map(|d| d.devices)
    }

    /// [`CyborgReporter::send`], saying whether the inventory went by digest.
    pub async fn deliver(&self, devices: &DriverDeviceList) -> Result<Delivered, RpcError> {
        let (devices, left_out) = driver_devices(&self.host, devices);
        for address in &left_out {
            tracing::warn!(host = %self.host, %address, "device left out of the report to Cyborg's conductor: no Cyborg form");
        }
        let n = devices.len();
        let ctx = RequestContext::new(format!("req-cyborg-report-{}", self.host));
        let client = self.digest_client();
        let digest = client.map(|_| accel_objects::cyborg::report_digest(&devices));
        if let (Some(client), Some(digest)) = (client, &digest) {
            let last = self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            if last.as_ref() == Some(digest) {
                let known = client
                    .call_method(
                        &ctx,
                        accel_objects::cyborg::ReportUnchanged {
                            hostname: self.host.clone(),
                            digest: digest.clone(),
                        },
                    )
                    .await?;
                if known.is_some() {
                    tracing::debug!(host = %self.host, devices = n, "inventory unchanged (by digest)");
                    return Ok(Delivered {
                        devices: n,
                        by_digest: true,
                    });
                }
                tracing::debug!(host = %self.host, "the conductor asked for the full inventory");
            }
        }
        self.conductor
            .call_method(
                &ctx,
                ReportData {
                    hostname: self.host.clone(),
                    driver_device_list: devices,
                },
            )
            .await?;
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = digest;
        tracing::info!(host = %self.host, devices = n, "inventory reported to Cyborg's conductor");
        Ok(Delivered {
            devices: n,
            by_digest: false,
        })
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
            assert_eq!(check_type(bad).expect_err(bad).0, "InvalidParameterValue");
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
