//! Device discovery from a sysfs tree (`/sys` on a host, a fixture tree in tests):
//! release N's frozen copy of what accel's N+1 crate `accel-agent` had
//! (`accel_agent::discovery`), so the devices release N's agent reports do not change
//! when N+1's discovery does.
//!
//! Every PCI function under `<root>/bus/pci/devices/` is read: its address (the
//! control-path id the conductor keys devices by), vendor and device ids, class code
//! (which gives the device type), bound driver, IOMMU group, NUMA node, SR-IOV relations
//! (a physical function's virtual functions, a virtual function's physical function),
//! and, for NVMe controllers, their namespaces. Functions whose class is not an
//! accelerator type (bridges, host controllers, ...) are left out.
//!
//! A function whose files cannot be read or parsed does not fail the whole discovery:
//! it is reported in [`Discovery::problems`] (and logged), and every other device is
//! still reported, so one broken device never hides a host's inventory.

use std::path::{Path, PathBuf};

/// The kinds of device accel manages (Cyborg's device types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceType {
    /// Graphics processors (PCI class 0x03).
    Gpu,
    /// FPGA cards (processing accelerators of FPGA vendors).
    Fpga,
    /// Other processing accelerators (class 0x12).
    Aichip,
    /// Intel QuickAssist (co-processor class 0x0b40 from Intel).
    Qat,
    /// Network controllers (class 0x02).
    Nic,
    /// NVMe solid-state drives (class 0x010802).
    Ssd,
}

impl DeviceType {
    /// The type of a PCI function from its class code (24 bits: class, subclass,
    /// programming interface) and vendor, or `None` for a function accel does not manage.
    pub fn classify(class_code: u32, vendor_id: u16) -> Option<DeviceType> {
        const INTEL: u16 = 0x8086;
        const FPGA_VENDORS: [u16; 3] = [
            0x10ee, /* Xilinx/AMD */
            0x1172, /* Altera */
            0x1bd4, /* Inspur */
        ];
        let class = (class_code >> 16) as u8;
        let subclass = (class_code >> 8) as u8;
        let prog_if = class_code as u8;
        match (class, subclass) {
            (0x03, _) => Some(DeviceType::Gpu),
            (0x01, 0x08) if prog_if == 0x02 => Some(DeviceType::Ssd),
            (0x02, _) => Some(DeviceType::Nic),
            (0x0b, 0x40) if vendor_id == INTEL => Some(DeviceType::Qat),
            (0x0b, 0x40) => Some(DeviceType::Aichip),
            (0x12, _) if FPGA_VENDORS.contains(&vendor_id) => Some(DeviceType::Fpga),
            (0x12, _) => Some(DeviceType::Aichip),
            // Some FPGA cards (Xilinx Alveo management functions) report a memory or
            // "other" class; the vendor decides.
            (0x05 | 0xff, _) if FPGA_VENDORS.contains(&vendor_id) => Some(DeviceType::Fpga),
            _ => None,
        }
    }
}

/// SR-IOV capability of a physical function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sriov {
    /// `sriov_totalvfs`.
    pub total_vfs: u32,
    /// `sriov_numvfs`: VFs currently enabled.
    pub num_vfs: u32,
}

/// An NVMe namespace: what a guest gets and what cleanup erases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmeNamespace {
    /// `nvme0n1`.
    pub name: String,
    /// Size in bytes (`size` is in 512-byte sectors).
    pub size_bytes: u64,
    /// `/dev/nvme0n1`.
    pub dev_path: String,
}

/// An NVMe controller on a PCI function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmeController {
    /// `nvme0`.
    pub name: String,
    /// `model`, trimmed.
    pub model: Option<String>,
    /// `serial`, trimmed.
    pub serial: Option<String>,
    /// Its namespaces, by name.
    pub namespaces: Vec<NvmeNamespace>,
}

/// One discovered PCI function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciFunction {
    /// `0000:3b:00.0`: the control-path id.
    pub address: String,
    /// `10de` (lower-case hex, no prefix).
    pub vendor_id: String,
    /// `20b5`.
    pub device_id: String,
    /// The 24-bit class code.
    pub class_code: u32,
    /// Derived from the class code and vendor.
    pub device_type: DeviceType,
    /// The bound driver (`vfio-pci`, `nvme`, ...), if any.
    pub driver: Option<String>,
    /// The IOMMU group, if the IOMMU is on.
    pub iommu_group: Option<u32>,
    /// The NUMA node, if known (sysfs says -1 for none).
    pub numa_node: Option<u32>,
    /// SR-IOV capability, for a physical function that has it.
    pub sriov: Option<Sriov>,
    /// For a virtual function: its physical function's address.
    pub physfn: Option<String>,
    /// For a physical function: its enabled virtual functions' addresses, in order.
    pub virtfns: Vec<String>,
    /// NVMe controllers (for an SSD).
    pub nvme: Vec<NvmeController>,
}

/// A function that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The function's directory.
    pub path: PathBuf,
    /// What was wrong.
    pub why: String,
}

/// The result of one discovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Devices accel manages, sorted by address.
    pub devices: Vec<PciFunction>,
    /// Functions skipped because their files were unreadable or malformed.
    pub problems: Vec<Problem>,
}

/// Discovery cannot start at all.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// `<root>/bus/pci/devices` cannot be listed.
    #[error("cannot list PCI devices in {path} (is --sysfs-root right?): {source}")]
    NoPciBus {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Reads every PCI function under `sysfs_root`.
///
/// ```no_run
/// let found = accel_cyborg17_agent::discovery::discover(std::path::Path::new("/sys"))?;
/// for d in &found.devices {
///     println!("{} {:?} {}:{}", d.address, d.device_type, d.vendor_id, d.device_id);
/// }
/// # Ok::<(), accel_cyborg17_agent::discovery::DiscoveryError>(())
/// ```
pub fn discover(sysfs_root: &Path) -> Result<Discovery, DiscoveryError> {
    let bus = sysfs_root.join("bus/pci/devices");
    let entries = std::fs::read_dir(&bus).map_err(|source| DiscoveryError::NoPciBus {
        path: bus.clone(),
        source,
    })?;
    let mut found = Discovery::default();
    for entry in entries {
        let path = match entry {
            Ok(e) => e.path(),
            Err(e) => {
                found.problems.push(Problem {
                    path: bus.clone(),
                    why: e.to_string(),
                });
                continue;
            }
        };
        match read_function(&path) {
            Ok(Some(f)) => found.devices.push(f),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(path = %path.display(), %why, "PCI function skipped");
                found.problems.push(Problem { path, why });
            }
        }
    }
    found.devices.sort_by(|a, b| a.address.cmp(&b.address));
    found.problems.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

fn read_text(dir: &Path, name: &str) -> Result<Option<String>, String> {
    match std::fs::read_to_string(dir.join(name)) {
        Ok(t) => Ok(Some(t.trim().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

fn required(dir: &Path, name: &str) -> Result<String, String> {
    read_text(dir, name)?.ok_or_else(|| format!("{name} is missing"))
}

fn hex(text: &str, name: &str, max: u32) -> Result<u32, String> {
    let digits = text.strip_prefix("0x").unwrap_or(text);
    u32::from_str_radix(digits, 16)
        .ok()
        .filter(|v| *v <= max)
        .ok_or_else(|| format!("{name} is not a hex number up to {max:#x}: {text:?}"))
}

/// The file name a symlink points at (`driver` -> `.../drivers/nvme` gives `nvme`).
fn link_name(path: &Path) -> Option<String> {
    std::fs::read_link(path)
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
}

fn read_function(dir: &Path) -> Result<Option<PciFunction>, String> {
    let address = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or("no address")?;
    let vendor = hex(&required(dir, "vendor")?, "vendor", 0xffff)?;
    let device = hex(&required(dir, "device")?, "device", 0xffff)?;
    let class_code = hex(&required(dir, "class")?, "class", 0xff_ffff)?;
    let Some(device_type) = DeviceType::classify(class_code, vendor as u16) else {
        return Ok(None);
    };
    let iommu_group = match link_name(&dir.join("iommu_group")) {
        Some(g) => Some(
            g.parse()
                .map_err(|_| format!("iommu_group is not a number: {g:?}"))?,
        ),
        None => None,
    };
    let numa_node = match read_text(dir, "numa_node")? {
        Some(n) => {
            let n: i64 = n
                .parse()
                .map_err(|_| format!("numa_node is not a number: {n:?}"))?;
            u32::try_from(n).ok()
        }
        None => None,
    };
    let sriov = match read_text(dir, "sriov_totalvfs")? {
        Some(total) => {
            let total_vfs = total
                .parse()
                .map_err(|_| format!("sriov_totalvfs is not a number: {total:?}"))?;
            let num = read_text(dir, "sriov_numvfs")?.unwrap_or_else(|| "0".into());
            let num_vfs = num
                .parse()
                .map_err(|_| format!("sriov_numvfs is not a number: {num:?}"))?;
            (total_vfs > 0).then_some(Sriov { total_vfs, num_vfs })
        }
        None => None,
    };
    let mut virtfns: Vec<(u32, String)> = Vec::new();
    let listing = std::fs::read_dir(dir).map_err(|e| format!("cannot list: {e}"))?;
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(index) = name.strip_prefix("virtfn").and_then(|i| i.parse().ok()) {
            if let Some(target) = link_name(&entry.path()) {
                virtfns.push((index, target));
            }
        }
    }
    virtfns.sort();
    let nvme = if device_type == DeviceType::Ssd {
        read_nvme(&dir.join("nvme"))?
    } else {
        Vec::new()
    };
    Ok(Some(PciFunction {
        address,
        vendor_id: format!("{vendor:04x}"),
        device_id: format!("{device:04x}"),
        class_code,
        device_type,
        driver: link_name(&dir.join("driver")),
        iommu_group,
        numa_node,
        sriov,
        physfn: link_name(&dir.join("physfn")),
        virtfns: virtfns.into_iter().map(|(_, a)| a).collect(),
        nvme,
    }))
}

fn read_nvme(dir: &Path) -> Result<Vec<NvmeController>, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        // An NVMe function without a bound nvme driver has no controller directory.
        return Ok(Vec::new());
    };
    let mut controllers = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let mut namespaces = Vec::new();
        for ns in std::fs::read_dir(&path)
            .map_err(|e| format!("nvme/{name}: {e}"))?
            .flatten()
        {
            let ns_name = ns.file_name().to_string_lossy().into_owned();
            if !(ns_name.starts_with(&name) && ns_name[name.len()..].starts_with('n')) {
                continue;
            }
            let sectors = required(&ns.path(), "size")?;
            let sectors: u64 = sectors
                .parse()
                .map_err(|_| format!("nvme/{name}/{ns_name}/size is not a number: {sectors:?}"))?;
            namespaces.push(NvmeNamespace {
                dev_path: format!("/dev/{ns_name}"),
                name: ns_name,
                size_bytes: sectors.saturating_mul(512),
            });
        }
        namespaces.sort_by(|a, b| a.name.cmp(&b.name));
        controllers.push(NvmeController {
            model: read_text(&path, "model")?,
            serial: read_text(&path, "serial")?,
            name,
            namespaces,
        });
    }
    controllers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(controllers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_codes_give_device_types() {
        assert_eq!(
            DeviceType::classify(0x030200, 0x10de),
            Some(DeviceType::Gpu)
        );
        assert_eq!(
            DeviceType::classify(0x030000, 0x1002),
            Some(DeviceType::Gpu)
        );
        assert_eq!(
            DeviceType::classify(0x010802, 0x144d),
            Some(DeviceType::Ssd)
        );
        assert_eq!(
            DeviceType::classify(0x010601, 0x8086),
            None,
            "AHCI is not NVMe"
        );
        assert_eq!(
            DeviceType::classify(0x020000, 0x15b3),
            Some(DeviceType::Nic)
        );
        assert_eq!(
            DeviceType::classify(0x0b4000, 0x8086),
            Some(DeviceType::Qat)
        );
        assert_eq!(
            DeviceType::classify(0x120000, 0x10ee),
            Some(DeviceType::Fpga)
        );
        assert_eq!(
            DeviceType::classify(0x120000, 0x1e52),
            Some(DeviceType::Aichip)
        );
        assert_eq!(
            DeviceType::classify(0x060400, 0x8086),
            None,
            "bridges are not devices"
        );
    }
}
