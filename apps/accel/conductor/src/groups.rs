//! Device profiles as OpenStack Cyborg 17 checks them (its API's `_validate_post_request`
//! and ARQ creation), and what accel makes of a group when a bind names no resource
//! provider.
//!
//! - A name is `^[a-zA-Z0-9-_]+$`.
//! - A group's keys start with `resources:`, `trait:` or `accel:` (spaces after the prefix
//!   are dropped, `"resources: FPGA"` is `"resources:FPGA"`); a trait is `CUSTOM_*` and
//!   `required` or `forbidden`; a resource class is one of Cyborg's ([`CYBORG_CLASSES`]),
//!   accel's own device types ([`ACCEL_CLASSES`], as accel took them before), or any
//!   `CUSTOM_*`, and its value a whole number.
//! - Creating requests makes one per unit of every resource of every group
//!   ([`arq_count`]): `resources:FPGA=2` is two requests of that group; a group with
//!   `trait:CUSTOM_FPGA_XILINX=required` counts its FPGAs twice (management and user
//!   function, as Cyborg).
//! - A bind that names Placement's `device_rp_uuid` (what Nova sends) takes that
//!   deployable ([`crate::Db::bind`]). One that names none picks a free device of its
//!   group's device type ([`device_type`]): every resource class of the group must name
//!   the same one; a group mixing device types, or asking only for a `CUSTOM_*` class
//!   accel cannot map, is accepted (Cyborg accepts it) and binds only by provider.

use crate::db::DbError;
use std::collections::BTreeMap;

/// `resources:<CLASS>`.
pub const RESOURCES: &str = "resources:";
/// `trait:<CUSTOM_NAME>`.
pub const TRAIT: &str = "trait:";
/// `accel:<key>` (bitstream, function id, ...), stored as given.
pub const ACCEL: &str = "accel:";

/// Cyborg 17's resource classes (`cyborg.common.constants.SUPPORT_RESOURCES`).
pub const CYBORG_CLASSES: [&str; 7] = [
    "FPGA",
    "GPU",
    "VGPU",
    "PGPU",
    "CUSTOM_QAT",
    "CUSTOM_NIC",
    "CUSTOM_SSD",
];

/// accel's device types as resource classes, accepted as before (Cyborg spells three of
/// them `CUSTOM_*`).
pub const ACCEL_CLASSES: [&str; 4] = ["QAT", "NIC", "SSD", "AICHIP"];

fn invalid(what: &'static str, why: String) -> DbError {
    DbError::Invalid { what, why }
}

/// Refuses a profile name Cyborg refuses.
pub fn check_name(name: &str) -> Result<(), DbError> {
    let ok = !name.is_empty()
        && name.len() <= crate::db::MAX_TEXT
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "device profile name",
            format!(
                "{:?}: letters, digits, '-' and '_' only (^[a-zA-Z0-9-_]+$), 1 to {} bytes",
                crate::db::shown(name),
                crate::db::MAX_TEXT
            ),
        ))
    }
}

/// A group checked as Cyborg checks it, with its keys in their standard form.
pub fn normalize(group: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, DbError> {
    let mut out = BTreeMap::new();
    for (key, value) in group {
        let key = if let Some(name) = key.strip_prefix(TRAIT) {
            let name = name.trim();
            if !name.starts_with("CUSTOM_") {
                return Err(invalid(
                    "device profile group",
                    format!(
                        "trait {:?}: a trait name starts with CUSTOM_",
                        crate::db::shown(name)
                    ),
                ));
            }
            if value != "required" && value != "forbidden" {
                return Err(invalid(
                    "device profile group",
                    format!(
                        "trait {name}={:?}: the value is required or forbidden",
                        crate::db::shown(&value)
                    ),
                ));
            }
            format!("{TRAIT}{name}")
        } else if let Some(class) = key.strip_prefix(RESOURCES) {
            let class = class.trim();
            if !known_class(class) {
                return Err(invalid(
                    "device profile group",
                    format!(
                        "unsupported resource class {:?} (one of {}, {} or CUSTOM_*)",
                        crate::db::shown(class),
                        CYBORG_CLASSES.join(", "),
                        ACCEL_CLASSES.join(", ")
                    ),
                ));
            }
            if value.trim().parse::<u32>().is_err() {
                return Err(invalid(
                    "device profile group",
                    format!(
                        "resources:{class}={:?}: the amount is a whole number",
                        crate::db::shown(&value)
                    ),
                ));
            }
            format!("{RESOURCES}{class}")
        } else if key.starts_with(ACCEL) {
            key
        } else {
            return Err(invalid(
                "device profile group",
                format!(
                    "key {:?}: keys start with resources:, trait: or accel:",
                    crate::db::shown(&key)
                ),
            ));
        };
        out.insert(key, value);
    }
    Ok(out)
}

fn known_class(class: &str) -> bool {
    CYBORG_CLASSES.contains(&class) || ACCEL_CLASSES.contains(&class) || {
        class.len() > "CUSTOM_".len()
            && class.starts_with("CUSTOM_")
            && class
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    }
}

/// The resources a group asks for, by class, with their amounts (a stored group that
/// no longer parses counts 0, and is refused at bind).
fn resources(group: &BTreeMap<String, String>) -> impl Iterator<Item = (&str, u64)> {
    group.iter().filter_map(|(k, v)| {
        let class = k.strip_prefix(RESOURCES)?;
        Some((class, v.trim().parse::<u64>().unwrap_or(0)))
    })
}

/// How many accelerator requests a group makes: the sum of its amounts; with
/// `trait:CUSTOM_FPGA_XILINX=required`, twice its FPGAs (Cyborg binds both of a Xilinx
/// card's physical functions).
pub fn arq_count(group: &BTreeMap<String, String>) -> u64 {
    let xilinx = group
        .get("trait:CUSTOM_FPGA_XILINX")
        .is_some_and(|v| v == "required");
    match (xilinx, group.get("resources:FPGA")) {
        (true, Some(n)) => 2 * n.trim().parse::<u64>().unwrap_or(0),
        _ => resources(group).map(|(_, n)| n).sum(),
    }
}

/// The accel device type a resource class asks for.
fn class_device_type(class: &str) -> Option<&'static str> {
    Some(match class {
        "FPGA" => "FPGA",
        "GPU" | "PGPU" | "VGPU" => "GPU",
        "QAT" | "CUSTOM_QAT" => "QAT",
        "NIC" | "CUSTOM_NIC" => "NIC",
        "SSD" | "CUSTOM_SSD" => "SSD",
        "AICHIP" => "AICHIP",
        _ => return None,
    })
}

/// The device type a request of this group binds to.
pub fn device_type(group: &BTreeMap<String, String>) -> Result<String, DbError> {
    let mut types = Vec::new();
    for (class, _) in resources(group).filter(|(_, n)| *n > 0) {
        let Some(t) = class_device_type(class) else {
            return Err(invalid(
                "device profile group",
                format!(
                    "resource class {class} names no device type accel knows; bind it \
                     by its resource provider (device_rp_uuid)"
                ),
            ));
        };
        if !types.contains(&t) {
            types.push(t);
        }
    }
    match types.as_slice() {
        [t] => Ok((*t).to_owned()),
        [] => Err(invalid(
            "device profile group",
            "the group asks for no device (no resources:<CLASS> above 0)".to_owned(),
        )),
        mixed => Err(invalid(
            "device profile group",
            format!(
                "the group mixes device types ({}); bind it by its resource provider \
                 (device_rp_uuid)",
                mixed.join(", ")
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn groups_cyborg_accepts_are_accepted() {
        for ok in [
            g(&[("resources:FPGA", "1")]),
            g(&[("resources:FPGA", "2"), ("accel:bitstream_id", "b1")]),
            g(&[("resources:CUSTOM_ACCELERATOR_X", "1")]),
            g(&[("resources:PGPU", "1"), ("trait:CUSTOM_A100", "required")]),
            g(&[("resources:CUSTOM_SSD", "1"), ("resources:CUSTOM_NIC", "1")]),
            g(&[("resources:SSD", "1")]),
            g(&[("trait:CUSTOM_X", "forbidden")]),
        ] {
            normalize(ok.clone()).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        let spaced = normalize(g(&[
            ("resources: FPGA", "1"),
            ("trait: CUSTOM_X", "required"),
        ]))
        .expect("spaces after the prefix");
        assert_eq!(
            spaced,
            g(&[("resources:FPGA", "1"), ("trait:CUSTOM_X", "required")])
        );
    }

    #[test]
    fn groups_cyborg_refuses_are_refused() {
        for bad in [
            g(&[("resources:DISK", "1")]),
            g(&[("resources:FPGA", "one")]),
            g(&[("resources:FPGA", "-1")]),
            g(&[("trait:HW_GPU", "required")]),
            g(&[("trait:CUSTOM_X", "preferred")]),
            g(&[("color", "red")]),
            g(&[("resources:CUSTOM_", "1")]),
        ] {
            assert!(
                matches!(normalize(bad.clone()), Err(DbError::Invalid { .. })),
                "{bad:?}"
            );
        }
        for name in ["", "a b", "a.b", "é", "a/b"] {
            assert!(check_name(name).is_err(), "{name:?}");
        }
        for name in ["fpga-1", "GPU_a100", "0"] {
            check_name(name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
    }

    #[test]
    fn requests_per_group_and_the_device_they_bind() {
        assert_eq!(arq_count(&g(&[("resources:FPGA", "2")])), 2);
        assert_eq!(
            arq_count(&g(&[("resources:FPGA", "1"), ("resources:PGPU", "1")])),
            2
        );
        assert_eq!(
            arq_count(&g(&[
                ("resources:FPGA", "1"),
                ("trait:CUSTOM_FPGA_XILINX", "required")
            ])),
            2
        );
        assert_eq!(arq_count(&g(&[("trait:CUSTOM_X", "required")])), 0);
        assert_eq!(
            device_type(&g(&[("resources:PGPU", "1"), ("resources:VGPU", "2")]))
                .ok()
                .as_deref(),
            Some("GPU")
        );
        assert_eq!(
            device_type(&g(&[("resources:CUSTOM_SSD", "1")]))
                .ok()
                .as_deref(),
            Some("SSD")
        );
        for unbindable in [
            g(&[("resources:FPGA", "1"), ("resources:PGPU", "1")]),
            g(&[("resources:CUSTOM_ACCELERATOR_X", "1")]),
            g(&[("trait:CUSTOM_X", "required")]),
        ] {
            assert!(device_type(&unbindable).is_err(), "{unbindable:?}");
        }
    }
}
