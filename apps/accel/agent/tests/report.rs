//! A host's discovery as the report objects the conductor takes.

use accel_agent::discovery::discover;
use accel_agent::report::{driver_devices, pci_attach_info};
use accel_objects::{DeviceType, DriverDeviceList};
use std::path::Path;
use verso::{ObjectList, VersionedObject};

#[test]
fn a_report_has_one_device_per_physical_function_and_vfs_as_handles(
) -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/host1");
    let report = driver_devices(&discover(&root)?);
    let summary: Vec<(String, DeviceType, usize)> = report
        .iter()
        .map(|d| {
            (
                d.control_path_id.get().cloned().unwrap_or_default(),
                *d.r#type.get().expect("type"),
                d.attach_handles.get().map_or(0, Vec::len),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("0000:3b:00.0".to_owned(), DeviceType::Gpu, 1),
            ("0000:3c:00.0".to_owned(), DeviceType::Ssd, 1),
            ("0000:3e:00.0".to_owned(), DeviceType::Qat, 2),
            ("0000:3f:00.0".to_owned(), DeviceType::Ssd, 1),
            ("0000:40:00.0".to_owned(), DeviceType::Nic, 1),
        ]
    );
    let gpu = &report[0];
    let vf = &gpu.attach_handles.get().expect("handles")[0];
    assert_eq!(
        vf.attach_info.get().map(String::as_str),
        pci_attach_info("0000:3b:00.1").as_deref()
    );
    let ssd_info: serde_json::Value = serde_json::from_str(
        report[3]
            .std_board_info
            .get()
            .and_then(|s| s.as_deref())
            .expect("board info"),
    )?;
    assert_eq!(
        ssd_info["nvme"][0]["namespaces"][1]["dev_path"],
        "/dev/nvme1n2"
    );
    // It travels as an OVO primitive and comes back whole.
    let primitive = report.to_primitive(verso::Target::Own)?;
    assert_eq!(primitive["versioned_object.name"], "DriverDeviceList");
    assert_eq!(DriverDeviceList::from_primitive(&primitive)?, report);
    Ok(())
}

#[test]
fn pci_addresses_become_cyborg_attach_info() {
    let info: serde_json::Value =
        serde_json::from_str(&pci_attach_info("0000:3b:00.1").expect("valid")).expect("json");
    assert_eq!(
        info,
        serde_json::json!({"domain": "0000", "bus": "3b", "device": "00", "function": "1"})
    );
    assert_eq!(pci_attach_info("garbage"), None);
}
