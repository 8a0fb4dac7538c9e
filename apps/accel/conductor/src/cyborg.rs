//! Real OpenStack Cyborg 17 agents reporting to accel's conductor, for a migration from
//! Cyborg node by node: the conductor serves Cyborg's own `report_data` (conductor API
//! 1.0 of `accel_cyborg17`, topic `cyborg-conductor` on exchange `cyborg`), and a Cyborg
//! agent's report becomes accel's inventory of that host exactly as an accel agent's
//! would: the same diff, the same rows, visible in the API.
//!
//! What a Cyborg report says is mapped field by field ([`reported`]); what accel's
//! inventory cannot hold yet is refused whole with a [`CyborgReportError`] naming the
//! device, so a host's inventory never changes by half (the agent reports again on its
//! next period): device types beyond accel's six (`MDEV`, `PCI`, `NVME`) and `stub`
//! devices (Cyborg's "keep what you have" marker). Cyborg's other conductor methods are
//! called by Cyborg's API service: served too ([`api`]), so Cyborg's API keeps working
//! on accel's conductor until accel's API replaces it.
//!
//! The endpoint is at 1.1, Cyborg 17 with the seed spec ([`accel_objects::cyborg`]):
//! a Cyborg agent that has the spec's object indirection runs object methods here
//! ([`DbCyborgStore`]): the spec's `DeviceList.get_by_hostname` answered from accel's
//! inventory (`device_state` read from the handles), `AttachHandleList.get_by_hostname`,
//! the managed-mode update (`AttachHandle` 1.1) and the cleanup steps (`Device` 1.6), each
//! reply backported to the agent's manifest. Cyborg 17's own agents send only 1.0, which
//! a 1.1 server accepts.

pub mod api;
mod store;

pub use store::{device_state, DbCyborgStore};

use crate::db::{AgentWire, Db, ReportedDeployable, ReportedDevice};
use crate::service::{to_remote, witness_report, ReportWitness, Shared};
use accel_cyborg17::objects::{DeviceType, DriverDevice};
use accel_cyborg17::rpc::{ReportData, CONDUCTOR_TOPIC};
use accel_objects::cyborg::{self, CyborgStore, INDIRECTION_VERSION};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use verso::VersionedEnum;
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcError, RpcServer, ServerHandle, Target};

/// The error module of the remote errors this endpoint raises.
pub const ERROR_MODULE: &str = "accel.cyborg";

/// Why a Cyborg agent's report was refused (nothing of it was applied).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CyborgReportError {
    /// A field accel needs is unset.
    #[error("device {device} of the report has no {field}")]
    Missing {
        /// Which device (its position, and its vendor and model when known).
        device: String,
        /// The field.
        field: &'static str,
    },
    /// The control path is not a PCI address accel can key the device by.
    #[error("device {device}: control path {info:?} is not a PCI address (domain, bus, device, function)")]
    ControlPath {
        /// Which device.
        device: String,
        /// The `cpid_info` text.
        info: String,
    },
    /// A device type accel's inventory does not have yet.
    #[error("device {device}: type {ty} is not one accel manages yet (GPU, FPGA, AICHIP, QAT, NIC, SSD)")]
    UnsupportedType {
        /// Which device.
        device: String,
        /// Its type.
        ty: &'static str,
    },
    /// A stub device, which asks the conductor to keep the stored one unchanged.
    #[error("device {device} is a stub (keep the stored device), which accel does not take yet")]
    Stub {
        /// Which device.
        device: String,
    },
}

impl CyborgReportError {
    fn to_remote(&self) -> RemoteError {
        RemoteError::new("InvalidReport", ERROR_MODULE, self.to_string())
    }
}

/// A Cyborg agent's report as accel's inventory rows.
pub fn reported(devices: &[DriverDevice]) -> Result<Vec<ReportedDevice>, CyborgReportError> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| reported_device(i, d))
        .collect()
}

fn reported_device(i: usize, d: &DriverDevice) -> Result<ReportedDevice, CyborgReportError> {
    let name = || match (d.vendor.get(), d.model.get()) {
        (Some(v), Some(m)) => format!("#{i} ({v} {m})"),
        _ => format!("#{i}"),
    };
    let missing = |field| CyborgReportError::Missing {
        device: name(),
        field,
    };
    if d.stub.get() == Some(&true) {
        return Err(CyborgReportError::Stub { device: name() });
    }
    let ty = *d.r#type.get().ok_or_else(|| missing("type"))?;
    let device_type = match ty {
        DeviceType::Gpu
        | DeviceType::Fpga
        | DeviceType::AiChip
        | DeviceType::Qat
        | DeviceType::Nic
        | DeviceType::Ssd => ty.as_str(),
        DeviceType::Mdev | DeviceType::Pci | DeviceType::Nvme => {
            return Err(CyborgReportError::UnsupportedType {
                device: name(),
                ty: ty.as_str(),
            })
        }
    };
    let cpid = d
        .controlpath_id
        .get()
        .ok_or_else(|| missing("controlpath_id"))?;
    let info = cpid
        .cpid_info
        .get()
        .ok_or_else(|| missing("controlpath_id.cpid_info"))?;
    let control_path_id = pci_address(info).ok_or_else(|| CyborgReportError::ControlPath {
        device: name(),
        info: info.clone(),
    })?;
    let deployables = d
        .deployable_list
        .get()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // Each of Cyborg's deployables is one of accel's: the first one's fields are the
    // device's own, the others its `more_deployables` (their names are needed: each
    // names its Placement provider).
    let mut reported = Vec::with_capacity(deployables.len());
    for dep in deployables {
        let mut attributes = BTreeMap::new();
        for a in dep
            .attribute_list
            .get()
            .cloned()
            .flatten()
            .unwrap_or_default()
        {
            let key = a.key.get().ok_or_else(|| missing("attribute key"))?;
            let value = a.value.get().ok_or_else(|| missing("attribute value"))?;
            attributes.insert(key.clone(), value.clone());
        }
        let mut handles = Vec::new();
        for h in dep
            .attach_handle_list
            .get()
            .cloned()
            .flatten()
            .unwrap_or_default()
        {
            let ty = h.attach_type.get().ok_or_else(|| missing("attach_type"))?;
            let info = h.attach_info.get().ok_or_else(|| missing("attach_info"))?;
            handles.push((ty.clone(), info.clone()));
        }
        reported.push(ReportedDeployable {
            name: dep.name.get().cloned().unwrap_or_default(),
            driver_name: dep.driver_name.get().cloned().flatten(),
            handles,
            attributes,
        });
    }
    if reported.iter().skip(1).any(|dep| dep.name.is_empty()) {
        return Err(missing("deployable name"));
    }
    let device = ReportedDevice {
        control_path_id,
        device_type: device_type.to_owned(),
        vendor: d.vendor.get().cloned().ok_or_else(|| missing("vendor"))?,
        model: d.model.get().cloned().ok_or_else(|| missing("model"))?,
        std_board_info: d.std_board_info.get().cloned().flatten(),
        vendor_board_info: d.vendor_board_info.get().cloned().flatten(),
        ..ReportedDevice::default()
    };
    // Cyborg names each Placement provider after its deployable: the names keep the
    // providers a Cyborg conductor made.
    Ok(device.with_deployables(reported))
}

/// Cyborg's `cpid_info` of the PCI address `DDDD:BB:DD.F`, decoded, as Cyborg's API
/// sends it to `fpga_program` (`{"bus", "device", "domain", "function"}`).
pub(crate) fn cpid_info(address: &str) -> Option<Value> {
    let (domain, rest) = address.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let address_of = pci_address(
        &serde_json::json!({"domain": domain, "bus": bus, "device": device, "function": function})
            .to_string(),
    )?;
    (address_of == address).then(|| {
        serde_json::json!({"bus": bus, "device": device, "domain": domain, "function": function})
    })
}

/// Cyborg's `cpid_info` text of the PCI address `DDDD:BB:DD.F`, as its drivers write
/// it (keys sorted, Python's separators), or `None` if `address` is not one.
pub(crate) fn cpid_info_text(address: &str) -> Option<String> {
    let info = cpid_info(address)?;
    let part = |key: &str| info.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(format!(
        "{{\"bus\": \"{}\", \"device\": \"{}\", \"domain\": \"{}\", \"function\": \"{}\"}}",
        part("bus")?,
        part("device")?,
        part("domain")?,
        part("function")?
    ))
}

/// `DDDD:BB:DD.F` from Cyborg's `cpid_info`, `{"domain": "0000", "bus": "0c", "device":
/// "00", "function": "0"}` (the form accel's own agents key devices by).
pub(crate) fn pci_address(info: &str) -> Option<String> {
    let v: Value = serde_json::from_str(info).ok()?;
    // Each part is hexadecimal text within PCI's bounds.
    let part = |key: &str, max: u32| -> Option<u32> {
        let n = u32::from_str_radix(v.get(key)?.as_str()?, 16).ok()?;
        (n <= max).then_some(n)
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        part("domain", 0xffff)?,
        part("bus", 0xff)?,
        part("device", 0x1f)?,
        part("function", 0x7)?
    ))
}

/// The endpoint serving Cyborg's conductor API with the seed spec
/// ([`cyborg::ConductorApi`], 1.1) over `db`: Cyborg 17's `report_data` and its API's
/// methods ([`api`]) (1.0), and
/// object indirection over [`cyborg::registry`] (1.1), whose methods run on `db`
/// ([`DbCyborgStore`], gated on the coordinator's versions). With `witness` (the
/// conductor's coordinator), each reporting host is recorded in the fleet record first:
/// a Cyborg agent sends no heartbeat, so this is how finalization learns that a host
/// still runs Cyborg 17, i.e. release N, and refuses while it is live; a report the
/// coordinator refuses (a host never heard before, after a finalization started) is
/// not applied and answers `Fenced`.
///
/// Cyborg's API methods here release devices at once and reach neither agents nor Nova:
/// a conductor's own parts are [`endpoint_with`]'s.
pub fn endpoint(db: Db, witness: Option<ReportWitness>) -> Endpoint {
    endpoint_with(Shared::new(db).with_witness(witness))
}

/// [`endpoint`] over the parts a running conductor's own API has
/// ([`crate::runtime::RunningConductor::shared`]): Cyborg's API methods release devices
/// by its release policy (NVMe cleanup once finalized), make and remove mediated devices
/// through its agents, tell its Nova.
pub fn endpoint_with(shared: Shared) -> Endpoint {
    let versions = shared.witness.as_ref().map(|w| w.manager().clone());
    let store: Arc<dyn CyborgStore> = Arc::new(DbCyborgStore::new(shared.db.clone(), versions));
    let endpoint = Endpoint::new(<cyborg::ConductorApi as verso_rpc::RpcApi>::VERSION)
        .with_state(shared)
        .handle(|Shared { db, witness, .. }, _ctx, report: ReportData| async move {
            // A Cyborg 17 agent reports its whole inventory every period and sends no
            // digest: the conductor's own digest of the report lets an unchanged one skip
            // the mapping and the diff, as `report_unchanged` does for an agent that
            // names it. The stored digest is forgotten by every write to the host's
            // devices (migration 101's triggers), so a match means the rows still say
            // what this report says, and it was valid when applied.
            let digest = cyborg::report_digest(&report.driver_device_list);
            let known = db
                .unchanged_report(&report.hostname, &digest, AgentWire::Cyborg)
                .await
                .map_err(to_remote)?;
            if let Some(devices) = known {
                witness_report(witness.as_ref(), &report.hostname).await?;
                tracing::debug!(host = %report.hostname, devices, %digest,
                    "a Cyborg agent's report is unchanged");
                return Ok(());
            }
            let rows = reported(&report.driver_device_list).map_err(|e| {
                tracing::warn!(host = %report.hostname, error = %e, "a Cyborg agent's report was refused");
                e.to_remote()
            })?;
            witness_report(witness.as_ref(), &report.hostname).await?;
            let outcome = db
                .report_on(&report.hostname, Some(AgentWire::Cyborg), &rows, Some(&digest))
                .await
                .map_err(to_remote)?;
            tracing::info!(
                host = %report.hostname,
                added = outcome.added.len(),
                updated = outcome.updated.len(),
                removed = outcome.removed.len(),
                "a Cyborg agent reported"
            );
            // Cyborg's conductor replies None.
            Ok(())
        })
        .handle(|Shared { db, .. }, _ctx, m: cyborg::ReportUnchanged| async move {
            // Not witnessed, as accel's own `report_unchanged`: only an agent of this
            // release calls 1.2, it heartbeats, and a digest matches only a full report
            // of its host this conductor applied, which was witnessed.
            let known = db
                .unchanged_report(&m.hostname, &m.digest, AgentWire::Cyborg)
                .await
                .map_err(to_remote)?;
            Ok(known.map(|devices| {
                tracing::debug!(host = %m.hostname, devices, "report unchanged");
                i64::try_from(devices).unwrap_or(i64::MAX)
            }))
        });
    let endpoint = api::methods(endpoint).into_endpoint();
    verso_rpc::conductor::add_object_endpoints(
        endpoint,
        INDIRECTION_VERSION,
        Arc::new(cyborg::registry()),
        move |ctx| cyborg::attach(&store, ctx),
    )
}

/// Serves Cyborg's `report_data` on `topic` (Cyborg's is [`CONDUCTOR_TOPIC`]) over
/// `transport`, whose control exchange must be Cyborg's (`cyborg`); `witness` as in
/// [`endpoint`].
pub async fn serve(
    transport: Arc<dyn Transport>,
    db: Db,
    topic: &str,
    witness: Option<ReportWitness>,
) -> Result<ServerHandle, RpcError> {
    serve_with(transport, topic, Shared::new(db).with_witness(witness)).await
}

/// [`serve`] over a running conductor's parts ([`endpoint_with`]).
pub async fn serve_with(
    transport: Arc<dyn Transport>,
    topic: &str,
    shared: Shared,
) -> Result<ServerHandle, RpcError> {
    RpcServer::new(transport, Target::new(topic))
        .endpoint(endpoint_with(shared))?
        .start()
        .await
}

/// The topic [`serve`] takes by default: Cyborg's conductor topic.
pub const TOPIC: &str = CONDUCTOR_TOPIC;

#[cfg(test)]
mod tests {
    use super::*;
    use accel_cyborg17::objects::{DriverAttachHandle, DriverControlPathID, DriverDeployable};
    use verso::VersionedObject;

    #[test]
    fn a_control_path_goes_to_cyborg_and_back() {
        let info = cpid_info("0000:3d:00.1").expect("an address");
        assert_eq!(
            info,
            serde_json::json!({"bus": "3d", "device": "00", "domain": "0000", "function": "1"})
        );
        assert_eq!(
            pci_address(&info.to_string()).as_deref(),
            Some("0000:3d:00.1")
        );
        for bad in [
            "",
            "0000:3d:00",
            "3d:00.1",
            "0000:zz:00.1",
            "0000:3d:00.9",
            "0:3d:00.1",
        ] {
            assert_eq!(cpid_info(bad), None, "{bad}");
        }
    }

    fn device(ty: DeviceType, cpid_info: &str) -> DriverDevice {
        DriverDevice {
            vendor: "0x8086".to_owned().into(),
            model: "0x0b30".to_owned().into(),
            r#type: ty.into(),
            std_board_info: None.into(),
            controlpath_id: DriverControlPathID {
                cpid_type: "PCI".to_owned().into(),
                cpid_info: cpid_info.to_owned().into(),
                ..DriverControlPathID::blank()
            }
            .into(),
            deployable_list: vec![DriverDeployable {
                name: "dep".to_owned().into(),
                num_accelerators: 1.into(),
                driver_name: Some("intel".to_owned()).into(),
                attach_handle_list: Some(vec![DriverAttachHandle {
                    attach_type: "PCI".to_owned().into(),
                    attach_info: r#"{"domain":"0000","bus":"5e","device":"00","function":"1"}"#
                        .to_owned()
                        .into(),
                    ..DriverAttachHandle::blank()
                }])
                .into(),
                ..DriverDeployable::blank()
            }]
            .into(),
            stub: false.into(),
            ..DriverDevice::blank()
        }
    }

    const PF: &str = r#"{"domain":"0000","bus":"5e","device":"00","function":"0"}"#;

    #[test]
    fn a_cyborg_device_becomes_accels_row() {
        let rows = reported(&[device(DeviceType::Fpga, PF)]).expect("maps");
        assert_eq!(rows[0].control_path_id, "0000:5e:00.0");
        assert_eq!(rows[0].device_type, "FPGA");
        assert_eq!(rows[0].driver_name.as_deref(), Some("intel"));
        assert_eq!(rows[0].handles.len(), 1);
        assert_eq!(rows[0].handles[0].0, "PCI");
    }

    #[test]
    fn short_hex_parts_are_padded_like_accels_own_addresses() {
        let rows = reported(&[device(
            DeviceType::Gpu,
            r#"{"domain":"0","bus":"c","device":"0","function":"0"}"#,
        )])
        .expect("maps");
        assert_eq!(rows[0].control_path_id, "0000:0c:00.0");
    }

    #[test]
    fn what_accel_cannot_hold_is_refused_naming_the_device() {
        let e = reported(&[device(DeviceType::Fpga, PF), device(DeviceType::Nvme, PF)])
            .expect_err("NVMe");
        assert_eq!(
            e,
            CyborgReportError::UnsupportedType {
                device: "#1 (0x8086 0x0b30)".into(),
                ty: "NVME"
            }
        );
        let e = reported(&[device(DeviceType::Fpga, "not json")]).expect_err("bad cpid");
        assert!(matches!(e, CyborgReportError::ControlPath { .. }), "{e}");
        let e = reported(&[device(
            DeviceType::Fpga,
            r#"{"domain":"0000","bus":"100","device":"00","function":"0"}"#,
        )])
        .expect_err("bus out of range");
        assert!(matches!(e, CyborgReportError::ControlPath { .. }), "{e}");
        let mut stub = device(DeviceType::Gpu, PF);
        stub.stub = true.into();
        assert!(matches!(
            reported(&[stub]),
            Err(CyborgReportError::Stub { .. })
        ));
        let mut unset = device(DeviceType::Gpu, PF);
        unset.vendor = verso::Field::default();
        assert_eq!(
            reported(&[unset]),
            Err(CyborgReportError::Missing {
                device: "#0".into(),
                field: "vendor"
            })
        );
    }
}
