//! Cyborg's names for what a device offers: the resource class and traits its drivers
//! report as a deployable's attributes (`rc`, `trait0`, `trait1`, ...), which its
//! conductor puts in Placement. accel's agents report the same attributes
//! ([`attributes`]), and accel's conductor keeps Placement from them.

use std::collections::BTreeMap;

/// The resource class of a device type, as Cyborg 17's drivers report it
/// (`cyborg.common.constants.RESOURCES`): `GPU` is `PGPU`; accel's `AICHIP` is
/// `CUSTOM_AICHIP`.
pub fn resource_class(device_type: &str) -> String {
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
pub fn traits(device_type: &str, vendor: &str, model: &str) -> Vec<String> {
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

/// A deployable's attributes as Cyborg's drivers report them: `rc` (its
/// [`resource_class`]) and `trait0`, `trait1`, ... (its [`traits`]).
pub fn attributes(device_type: &str, vendor: &str, model: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("rc".to_owned(), resource_class(device_type));
    for (i, t) in traits(device_type, vendor, model).into_iter().enumerate() {
        out.insert(format!("trait{i}"), t);
    }
    out
}

/// The longest name Placement takes for a trait or resource class.
const PLACEMENT_NAME_MAX: usize = 255;

/// Whether Placement takes `name` as a custom trait or resource class of its own
/// (`CUSTOM_` and `A-Z0-9_`).
pub fn is_custom_name(name: &str) -> bool {
    name.len() > "CUSTOM_".len()
        && name.len() <= PLACEMENT_NAME_MAX
        && name.starts_with("CUSTOM_")
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
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
        let a = attributes("GPU", "10de", "1eb8");
        assert_eq!(
            a.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>(),
            [
                "rc=PGPU",
                "trait0=CUSTOM_GPU_NVIDIA",
                "trait1=CUSTOM_GPU_PRODUCT_ID_1EB8"
            ]
        );
        assert!(is_custom_name("CUSTOM_FAKE_DEVICE"));
        for bad in ["CUSTOM_", "FPGA", "CUSTOM_a", "CUSTOM_X-1", ""] {
            assert!(!is_custom_name(bad), "{bad}");
        }
    }
}
