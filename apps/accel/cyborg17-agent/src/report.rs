//! A host's discovered devices in Cyborg 17's report form: the `DriverDevice` 1.4 list
//! `report_data` takes. Release N's frozen copy of what accel's N+1 crates had for it
//! (`accel_agent::report`, `accel_agent::cyborg::driver_devices` and
//! `accel_objects::traits`), made in one step here, so the devices release N reports
//! (and the keys Cyborg's conductor files them under) do not change when N+1's report
//! form does.
//!
//! One device per physical function, keyed by its PCI address (the control path, as
//! Cyborg's `cpid_info`), with one deployable named `<host>_<PCI address>` holding every
//! attach handle (the enabled virtual functions of an SR-IOV device, otherwise the
//! function itself), the attributes Cyborg's drivers report (`rc`, `trait0`, ...: the
//! provider Cyborg's conductor makes in Placement) and the bound driver. Board details
//! (class, IOMMU group, NUMA node, NVMe namespaces) go in `std_board_info` as JSON text.

use crate::discovery::{self, Discovery, PciFunction};
use accel_cyborg17::objects::{
    DeviceType, DriverAttachHandle, DriverAttribute, DriverControlPathID, DriverDeployable,
    DriverDevice,
};
use serde_json::json;
use std::collections::BTreeMap;
use verso::{VersionedEnum, VersionedObject};

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

/// The resource class of a device type, as Cyborg 17's drivers report it
/// (`cyborg.common.constants.RESOURCES`): `GPU` is `PGPU`; `AICHIP` is `CUSTOM_AICHIP`.
fn resource_class(device_type: &str) -> String {
    match device_type {
        "FPGA" => "FPGA".into(),
        "GPU" => "PGPU".into(),
        other => format!("CUSTOM_{}", trait_part(other)),
    }
}

/// The vendor names of Cyborg's drivers, by PCI vendor ID.
fn vendor_name(vendor: &str) -> Option<&'static str> {
    let id = vendor.trim_start_matches("0x").to_ascii_lowercase();
    Some(match id.as_str() {
        "10de" => "NVIDIA",
        "102b" => "MATROX",
        "10ee" => "XILINX",
        "8086" => "INTEL",
        "1bd4" => "INSPUR",
        "1002" => "AMD",
        "19e5" => "HUAWEI",
        _ => return None,
    })
}

/// Upper case, and every character a trait name cannot have (`A-Z0-9_`) made `_`.
fn trait_part(text: &str) -> String {
    text.trim_start_matches("0x")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// A device's traits, as Cyborg's drivers name them: `CUSTOM_FPGA_XILINX`,
/// `CUSTOM_FPGA_PRODUCT_ID_5020` (the vendor's trait only for vendors Cyborg names),
/// sorted.
fn traits(device_type: &str, vendor: &str, model: &str) -> Vec<String> {
    let kind = trait_part(device_type);
    let mut out = Vec::new();
    if let Some(v) = vendor_name(vendor) {
        out.push(format!("CUSTOM_{kind}_{v}"));
    }
    if !model.is_empty() {
        out.push(format!("CUSTOM_{kind}_PRODUCT_ID_{}", trait_part(model)));
    }
    out.sort();
    out
}

/// A deployable's attributes as Cyborg's drivers report them, by key: `rc` (its
/// resource class) and `trait0`, `trait1`, ... (its traits).
fn attributes(device_type: &str, vendor: &str, model: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("rc".to_owned(), resource_class(device_type));
    for (i, t) in traits(device_type, vendor, model).into_iter().enumerate() {
        out.insert(format!("trait{i}"), t);
    }
    out
}

/// The name of the deployable of the device at `address` on `host` (`<host>_<PCI
/// address>`), as Cyborg's GPU drivers name theirs: the name Cyborg's conductor gives its
/// Placement provider.
pub fn deployable_name(host: &str, address: &str) -> String {
    format!("{host}_{address}")
}

/// A host's discovery in Cyborg's report form, every physical function a device. A
/// function whose address does not convert is left out, and named in the second list.
pub fn driver_devices(host: &str, found: &Discovery) -> (Vec<DriverDevice>, Vec<String>) {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for f in found.devices.iter().filter(|f| f.physfn.is_none()) {
        match driver_device(host, f) {
            Some(device) => out.push(device),
            None => left_out.push(f.address.clone()),
        }
    }
    (out, left_out)
}

fn driver_device(host: &str, f: &PciFunction) -> Option<DriverDevice> {
    let addresses: Vec<&str> = if f.virtfns.is_empty() {
        vec![f.address.as_str()]
    } else {
        f.virtfns.iter().map(String::as_str).collect()
    };
    let handles: Vec<DriverAttachHandle> = addresses
        .into_iter()
        .filter_map(|address| {
            Some(DriverAttachHandle {
                attach_type: "PCI".to_owned().into(),
                attach_info: pci_attach_info(address)?.into(),
                in_use: false.into(),
                ..DriverAttachHandle::blank()
            })
        })
        .collect();
    let ty = device_type(f.device_type);
    let attributes: Vec<DriverAttribute> = attributes(ty.as_str(), &f.vendor_id, &f.device_id)
        .into_iter()
        .map(|(key, value)| DriverAttribute {
            key: key.into(),
            value: value.into(),
            ..DriverAttribute::blank()
        })
        .collect();
    let deployable = DriverDeployable {
        name: deployable_name(host, &f.address).into(),
        num_accelerators: i64::try_from(handles.len()).ok()?.into(),
        attribute_list: Some(attributes).into(),
        attach_handle_list: Some(handles).into(),
        driver_name: f.driver.clone().into(),
        ..DriverDeployable::blank()
    };
    Some(DriverDevice {
        vendor: f.vendor_id.clone().into(),
        model: f.device_id.clone().into(),
        r#type: ty.into(),
        std_board_info: Some(board_info(f)).into(),
        vendor_board_info: None.into(),
        controlpath_id: DriverControlPathID {
            cpid_type: "PCI".to_owned().into(),
            cpid_info: pci_attach_info(&f.address)?.into(),
            ..DriverControlPathID::blank()
        }
        .into(),
        deployable_list: vec![deployable].into(),
        stub: false.into(),
        device_state: None.into(),
        ..DriverDevice::blank()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cyborgs() {
        assert_eq!(resource_class("FPGA"), "FPGA");
        assert_eq!(resource_class("GPU"), "PGPU");
        assert_eq!(resource_class("QAT"), "CUSTOM_QAT");
        assert_eq!(resource_class("AICHIP"), "CUSTOM_AICHIP");
        assert_eq!(
            traits("FPGA", "10ee", "5020"),
            ["CUSTOM_FPGA_PRODUCT_ID_5020", "CUSTOM_FPGA_XILINX"]
        );
        assert_eq!(
            traits("GPU", "0x10DE", "1eb8"),
            ["CUSTOM_GPU_NVIDIA", "CUSTOM_GPU_PRODUCT_ID_1EB8"]
        );
        assert_eq!(traits("NIC", "abcd", "x-1"), ["CUSTOM_NIC_PRODUCT_ID_X_1"]);
        let info = pci_attach_info("0000:3b:00.1").unwrap_or_default();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&info).ok(),
            Some(json!({"domain": "0000", "bus": "3b", "device": "00", "function": "1"}))
        );
        assert_eq!(pci_attach_info("3b:00"), None);
    }
}
