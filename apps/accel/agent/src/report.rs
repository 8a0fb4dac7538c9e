//! What an agent reports: its discovered devices as the objects the conductor's
//! `report_data` takes (a [`DriverDeviceList`]).
//!
//! One [`DriverDevice`] per physical function, keyed by its PCI address (the control-path
//! id). What a guest can be given are its attach handles: the enabled virtual functions
//! of an SR-IOV device, otherwise the function itself. Attach info is the PCI address
//! in Cyborg's form (`{"domain": "0000", "bus": "3b", "device": "00", "function": "1"}`),
//! and board details (class, IOMMU group, NUMA node, NVMe namespaces) go in
//! `std_board_info` as JSON text.

use crate::discovery::{self, Discovery, PciFunction};
use accel_objects::{AttachType, DeviceType, DriverAttachHandle, DriverDevice, DriverDeviceList};
use serde_json::json;
use verso::VersionedEnum;
use verso::{Field, VersionedObject};

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
pub fn pci_attach_info(address: &str) -> Option<String> {
    let (domain, rest) = address.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    Some(json!({"domain": domain, "bus": bus, "device": device, "function": function}).to_string())
}

fn handle(address: &str) -> Option<DriverAttachHandle> {
    Some(DriverAttachHandle {
        attach_type: AttachType::Pci.into(),
        attach_info: pci_attach_info(address)?.into(),
        ..DriverAttachHandle::blank()
    })
}

fn board_info(f: &PciFunction) -> String {
    let mut info = json!({
        "class": format!("0x{:06x}", f.class_code),
        "iommu_group": f.iommu_group,
        "numa_node": f.numa_node,
    });
    if !f.nvme.is_empty() {
        info["nvme"] = json!(f
            .nvme
            .iter()
            .map(|c| json!({
                "controller": c.name,
                "model": c.model,
                "serial": c.serial,
                "namespaces": c.namespaces.iter().map(|n| json!({"name": n.name, "size_bytes": n.size_bytes, "dev_path": n.dev_path})).collect::<Vec<_>>(),
            }))
            .collect::<Vec<_>>());
    }
    info.to_string()
}

/// The report of a host's discovery: every physical function with its handles.
pub fn driver_devices(found: &Discovery) -> DriverDeviceList {
    let devices: Vec<DriverDevice> = found
        .devices
        .iter()
        .filter(|f| f.physfn.is_none())
        .map(|f| {
            let addresses: Vec<&str> = if f.virtfns.is_empty() {
                vec![f.address.as_str()]
            } else {
                f.virtfns.iter().map(String::as_str).collect()
            };
            let ty = device_type(f.device_type);
            DriverDevice {
                control_path_id: f.address.clone().into(),
                r#type: ty.into(),
                vendor: f.vendor_id.clone().into(),
                model: f.device_id.clone().into(),
                std_board_info: Some(board_info(f)).into(),
                driver_name: f.driver.clone().into(),
                attach_handles: addresses
                    .into_iter()
                    .filter_map(handle)
                    .collect::<Vec<_>>()
                    .into(),
                attributes: accel_objects::traits::attributes(
                    ty.as_str(),
                    &f.vendor_id,
                    &f.device_id,
                )
                .into(),
                ..DriverDevice::blank()
            }
        })
        .collect();
    DriverDeviceList {
        objects: Field::new(devices),
        ..DriverDeviceList::blank()
    }
}
