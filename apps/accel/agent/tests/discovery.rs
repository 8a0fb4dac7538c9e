//! Discovery over the checked-in fixture trees (three hosts' worth of GPUs with SR-IOV,
//! NVMe SSDs with namespaces, an FPGA, a QAT card with VFs, a NIC) and over broken trees.

use accel_agent::discovery::{discover, DeviceType, DiscoveryError};
use accel_agent::fixture::{sample_host, write_tree, FixtureFunction};
use std::path::{Path, PathBuf};

fn fixture(host: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(host)
}

#[test]
fn a_host_tree_gives_its_devices_with_their_relations() -> Result<(), DiscoveryError> {
    let found = discover(&fixture("host1"))?;
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let summary: Vec<(&str, DeviceType)> = found
        .devices
        .iter()
        .map(|d| (d.address.as_str(), d.device_type))
        .collect();
    assert_eq!(
        summary,
        [
            ("0000:3b:00.0", DeviceType::Gpu),
            ("0000:3b:00.1", DeviceType::Gpu),
            ("0000:3c:00.0", DeviceType::Ssd),
            ("0000:3e:00.0", DeviceType::Qat),
            ("0000:3e:00.1", DeviceType::Qat),
            ("0000:3e:00.2", DeviceType::Qat),
            ("0000:3f:00.0", DeviceType::Ssd),
            ("0000:40:00.0", DeviceType::Nic),
        ],
        "bridges and the host controller are left out"
    );
    let gpu = &found.devices[0];
    assert_eq!(
        (gpu.vendor_id.as_str(), gpu.device_id.as_str()),
        ("10de", "20b5")
    );
    assert_eq!(gpu.driver.as_deref(), Some("nvidia"));
    assert_eq!(gpu.iommu_group, Some(10));
    assert_eq!(gpu.numa_node, Some(0));
    assert_eq!(
        gpu.sriov.as_ref().map(|s| (s.total_vfs, s.num_vfs)),
        Some((2, 1))
    );
    assert_eq!(gpu.virtfns, ["0000:3b:00.1"]);
    let vf = &found.devices[1];
    assert_eq!(vf.physfn.as_deref(), Some("0000:3b:00.0"));
    assert_eq!(vf.driver.as_deref(), Some("vfio-pci"));
    let qat = &found.devices[3];
    assert_eq!(qat.virtfns, ["0000:3e:00.1", "0000:3e:00.2"]);
    let ssd = &found.devices[6];
    assert_eq!(ssd.nvme.len(), 1);
    let c = &ssd.nvme[0];
    assert_eq!(c.name, "nvme1");
    assert_eq!(c.model.as_deref(), Some("INTEL SSDPE2KX010T8"));
    let ns: Vec<(&str, u64, &str)> = c
        .namespaces
        .iter()
        .map(|n| (n.name.as_str(), n.size_bytes, n.dev_path.as_str()))
        .collect();
    assert_eq!(
        ns,
        [
            ("nvme1n1", 1_953_525_168 * 512, "/dev/nvme1n1"),
            ("nvme1n2", 2_097_152 * 512, "/dev/nvme1n2")
        ]
    );
    Ok(())
}

#[test]
fn hosts_differ_in_their_device_mix() -> Result<(), DiscoveryError> {
    let count = |host: &str, t: DeviceType| -> Result<usize, DiscoveryError> {
        Ok(discover(&fixture(host))?
            .devices
            .iter()
            .filter(|d| d.device_type == t)
            .count())
    };
    assert_eq!(count("host2", DeviceType::Fpga)?, 1);
    assert_eq!(count("host2", DeviceType::Qat)?, 0);
    assert_eq!(count("host3", DeviceType::Qat)?, 3);
    assert_eq!(
        count("host3", DeviceType::Gpu)?,
        1,
        "host 3 enables no GPU VF"
    );
    for host in ["host1", "host2", "host3"] {
        assert_eq!(count(host, DeviceType::Ssd)?, 2, "{host}");
    }
    Ok(())
}

#[test]
fn one_broken_function_is_reported_and_the_rest_still_discovered(
) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    write_tree(dir.path(), &sample_host(2))?;
    let broken = dir.path().join("bus/pci/devices/0000:3b:00.0");
    std::fs::write(broken.join("class"), "not-hex\n")?;
    std::fs::remove_file(dir.path().join("bus/pci/devices/0000:3c:00.0/vendor"))?;
    let found = discover(dir.path())?;
    assert_eq!(found.problems.len(), 2, "{:?}", found.problems);
    assert!(
        found.problems[0].why.contains("class is not a hex number"),
        "{:?}",
        found.problems
    );
    assert!(
        found.problems[1].why.contains("vendor is missing"),
        "{:?}",
        found.problems
    );
    assert_eq!(
        found.devices.len(),
        discover(&fixture("host2"))?.devices.len() - 2
    );
    Ok(())
}

#[test]
fn a_wrong_root_is_a_typed_error_naming_it() {
    let err = discover(Path::new("/nonexistent-sysfs")).expect_err("no bus");
    assert!(matches!(err, DiscoveryError::NoPciBus { .. }));
    assert!(
        err.to_string()
            .contains("/nonexistent-sysfs/bus/pci/devices"),
        "{err}"
    );
    assert!(err.to_string().contains("--sysfs-root"), "{err}");
}

#[test]
fn an_nvme_function_without_its_driver_has_no_namespaces() -> Result<(), Box<dyn std::error::Error>>
{
    let dir = tempfile::tempdir()?;
    write_tree(
        dir.path(),
        &[FixtureFunction::new("0000:5e:00.0", 0x144d, 0xa80a, 0x010802).driver("vfio-pci")],
    )?;
    let found = discover(dir.path())?;
    assert_eq!(found.devices.len(), 1);
    assert_eq!(found.devices[0].device_type, DeviceType::Ssd);
    assert!(found.devices[0].nvme.is_empty());
    assert_eq!(found.devices[0].iommu_group, None);
    Ok(())
}
