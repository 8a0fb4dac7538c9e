//! Fixture sysfs trees: the layout the kernel exposes under `/sys/bus/pci/devices`,
//! written to a directory, so agents can run (in tests, `accel all-in-one` and
//! `accel demo`) on machines without accelerators.
//!
//! The tree has what [`discover`](crate::discovery::discover) reads: per function
//! `vendor`, `device`, `class`, `numa_node`, a `driver` link into `bus/pci/drivers/`,
//! an `iommu_group` link into `kernel/iommu_groups/`, `sriov_totalvfs`/`sriov_numvfs`
//! and `virtfnN`/`physfn` links for SR-IOV, and `nvme/nvmeX/nvmeXnY/size` for NVMe.

use std::io;
use std::path::{Path, PathBuf};

/// One PCI function to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureFunction {
    /// `0000:3b:00.0`.
    pub address: String,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// 24-bit class code.
    pub class: u32,
    /// Bound driver.
    pub driver: Option<String>,
    /// IOMMU group.
    pub iommu_group: Option<u32>,
    /// NUMA node (-1 for none, as sysfs writes it).
    pub numa_node: i32,
    /// Virtual functions to enable (`sriov_totalvfs` is twice this, at least 1); they
    /// are written as functions `.1`, `.2`, ... of the same slot, bound to `vfio-pci`.
    pub vfs: u32,
    /// An NVMe controller on this function.
    pub nvme: Option<FixtureNvme>,
}

/// An NVMe controller of a fixture function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureNvme {
    /// `nvme0`.
    pub controller: String,
    /// The model text.
    pub model: String,
    /// Namespaces: name and size in 512-byte sectors.
    pub namespaces: Vec<(String, u64)>,
}

impl FixtureFunction {
    /// A function with no driver, IOMMU group, VFs or NVMe.
    pub fn new(address: &str, vendor: u16, device: u16, class: u32) -> Self {
        FixtureFunction {
            address: address.to_owned(),
            vendor,
            device,
            class,
            driver: None,
            iommu_group: None,
            numa_node: 0,
            vfs: 0,
            nvme: None,
        }
    }

    /// Bound to `driver`.
    pub fn driver(mut self, driver: &str) -> Self {
        self.driver = Some(driver.to_owned());
        self
    }

    /// In IOMMU group `group`.
    pub fn iommu_group(mut self, group: u32) -> Self {
        self.iommu_group = Some(group);
        self
    }

    /// With `n` enabled virtual functions.
    pub fn vfs(mut self, n: u32) -> Self {
        self.vfs = n;
        self
    }

    /// An NVMe controller `controller` (model text) with `namespaces` of `sectors` each.
    pub fn nvme(mut self, controller: &str, model: &str, namespaces: &[u64]) -> Self {
        let ns = namespaces
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("{controller}n{}", i + 1), *s))
            .collect();
        self.nvme = Some(FixtureNvme {
            controller: controller.to_owned(),
            model: model.to_owned(),
            namespaces: ns,
        });
        self
    }
}

fn symlink(target: &str, link: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Writes `functions` as a sysfs tree under `root` (created if missing).
pub fn write_tree(root: &Path, functions: &[FixtureFunction]) -> io::Result<()> {
    let devices = root.join("bus/pci/devices");
    std::fs::create_dir_all(&devices)?;
    std::fs::create_dir_all(root.join("bus/pci/drivers"))?;
    std::fs::create_dir_all(root.join("kernel/iommu_groups"))?;
    for f in functions {
        write_function(root, f)?;
        if f.vfs > 0 {
            let pf = devices.join(&f.address);
            std::fs::write(
                pf.join("sriov_totalvfs"),
                format!("{}\n", (f.vfs * 2).max(1)),
            )?;
            std::fs::write(pf.join("sriov_numvfs"), format!("{}\n", f.vfs))?;
            let slot = f
                .address
                .rsplit_once('.')
                .map_or(f.address.as_str(), |(s, _)| s);
            for i in 0..f.vfs {
                let vf_address = format!("{slot}.{}", i + 1);
                let vf = FixtureFunction {
                    address: vf_address.clone(),
                    device: f.device.wrapping_add(1),
                    driver: Some("vfio-pci".into()),
                    iommu_group: f.iommu_group.map(|g| g * 100 + i + 1),
                    vfs: 0,
                    nvme: None,
                    ..f.clone()
                };
                write_function(root, &vf)?;
                symlink(&format!("../{vf_address}"), &pf.join(format!("virtfn{i}")))?;
                symlink(
                    &format!("../{}", f.address),
                    &devices.join(&vf_address).join("physfn"),
                )?;
            }
        }
    }
    Ok(())
}

fn write_function(root: &Path, f: &FixtureFunction) -> io::Result<()> {
    let dir = root.join("bus/pci/devices").join(&f.address);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("vendor"), format!("0x{:04x}\n", f.vendor))?;
    std::fs::write(dir.join("device"), format!("0x{:04x}\n", f.device))?;
    std::fs::write(dir.join("class"), format!("0x{:06x}\n", f.class))?;
    std::fs::write(dir.join("numa_node"), format!("{}\n", f.numa_node))?;
    if let Some(driver) = &f.driver {
        std::fs::create_dir_all(root.join("bus/pci/drivers").join(driver))?;
        symlink(&format!("../../drivers/{driver}"), &dir.join("driver"))?;
    }
    if let Some(group) = f.iommu_group {
        std::fs::create_dir_all(root.join("kernel/iommu_groups").join(group.to_string()))?;
        symlink(
            &format!("../../../../kernel/iommu_groups/{group}"),
            &dir.join("iommu_group"),
        )?;
    }
    if let Some(FixtureNvme {
        controller,
        model,
        namespaces,
    }) = &f.nvme
    {
        let c = dir.join("nvme").join(controller);
        std::fs::create_dir_all(&c)?;
        std::fs::write(c.join("model"), format!("{model}\n"))?;
        std::fs::write(
            c.join("serial"),
            format!(
                "S{}{}\n",
                controller.to_uppercase(),
                f.address.replace([':', '.'], "")
            ),
        )?;
        for (name, sectors) in namespaces {
            std::fs::create_dir_all(c.join(name))?;
            std::fs::write(c.join(name).join("size"), format!("{sectors}\n"))?;
        }
    }
    Ok(())
}

/// A deterministic sample host: host `index` gets a mix of devices that varies with the
/// index (GPUs with VFs, an FPGA, NVMe SSDs, a QAT card with VFs, a NIC), plus a
/// bridge and a host controller that discovery must leave out.
pub fn sample_host(index: u32) -> Vec<FixtureFunction> {
    let bus = |b: u32| format!("0000:{:02x}:00.0", 0x3b + b);
    let mut f = vec![
        FixtureFunction::new("0000:00:00.0", 0x8086, 0x09a2, 0x060000),
        FixtureFunction::new("0000:00:1f.0", 0x8086, 0xa1c8, 0x060100),
    ];
    f.push(
        FixtureFunction::new(&bus(0), 0x10de, 0x20b5, 0x030200)
            .driver("nvidia")
            .iommu_group(10)
            .vfs(index % 3),
    );
    f.push(
        FixtureFunction::new(&bus(1), 0x144d, 0xa80a, 0x010802)
            .driver("nvme")
            .iommu_group(11)
            .nvme("nvme0", "SAMSUNG MZWLR3T8HBLS-00007", &[7_501_476_528]),
    );
    if index.is_multiple_of(2) {
        f.push(
            FixtureFunction::new(&bus(2), 0x10ee, 0x5020, 0x120000)
                .driver("xclmgmt")
                .iommu_group(12),
        );
    }
    if index % 2 == 1 {
        f.push(
            FixtureFunction::new(&bus(3), 0x8086, 0x4940, 0x0b4000)
                .driver("4xxx")
                .iommu_group(13)
                .vfs(2),
        );
    }
    f.push(
        FixtureFunction::new(&bus(4), 0x8086, 0x0a54, 0x010802)
            .driver("nvme")
            .iommu_group(14)
            .nvme("nvme1", "INTEL SSDPE2KX010T8", &[1_953_525_168, 2_097_152]),
    );
    f.push(
        FixtureFunction::new(&bus(5), 0x15b3, 0x101d, 0x020000)
            .driver("mlx5_core")
            .iommu_group(15),
    );
    f
}

/// The `mdev_supported_types` directory of mediated-device type `mdev_type` on the GPU
/// at PCI `address` under `root` (`class/mdev_bus/<address>/mdev_supported_types/<type>`,
/// with an empty `devices` directory and the `create` attribute, as the kernel has
/// them); its path. What Cyborg's agent API's `create_vgpu_mdev` and `remove_vgpu_mdev`
/// write to.
pub fn write_mdev_type(root: &Path, address: &str, mdev_type: &str) -> io::Result<PathBuf> {
    let dir = root
        .join("class/mdev_bus")
        .join(address)
        .join("mdev_supported_types")
        .join(mdev_type);
    std::fs::create_dir_all(dir.join("devices"))?;
    std::fs::write(dir.join("create"), "")?;
    Ok(dir)
}
