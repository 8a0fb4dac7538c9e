//! Device profiles as OpenStack Cyborg 17 checks them (its API's `_validate_post_request`
//! and ARQ creation). Release N's frozen copy of what accel's N+1 crate
//! `accel-conductor` had (`accel_conductor::groups`, the part release N's API uses), so
//! the profiles release N takes do not change when N+1's do.
//!
//! - A name is `^[a-zA-Z0-9-_]+$`.
//! - A group's keys start with `resources:`, `trait:` or `accel:` (spaces after the prefix
//!   are dropped, `"resources: FPGA"` is `"resources:FPGA"`); a trait is `CUSTOM_*` and
//!   `required` or `forbidden`; a resource class is one of Cyborg's ([`CYBORG_CLASSES`]),
//!   accel's own device types ([`ACCEL_CLASSES`], which release N's API then refuses, as
//!   Cyborg does), or any `CUSTOM_*`, and its value a whole number.
//! - Creating requests makes one per unit of every resource of every group
//!   ([`arq_count`]): `resources:FPGA=2` is two requests of that group; a group with
//!   `trait:CUSTOM_FPGA_XILINX=required` counts its FPGAs twice (management and user
//!   function, as Cyborg).

use std::collections::BTreeMap;

/// Input Cyborg refuses, shown as
/// `invalid <what>: <why>`.
#[derive(Debug, thiserror::Error)]
#[error("invalid {what}: {why}")]
pub struct Invalid {
    /// What was invalid.
    pub what: &'static str,
    /// Why.
    pub why: String,
}
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

fn invalid(what: &'static str, why: String) -> Invalid {
    Invalid { what, why }
}

/// Refuses a profile name Cyborg refuses.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    let ok = !name.is_empty()
        && name.len() <= crate::http::MAX_TEXT
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
                crate::http::shown(name),
                crate::http::MAX_TEXT
            ),
        ))
    }
}

/// A group checked as Cyborg checks it, with its keys in their standard form.
pub fn normalize(group: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Invalid> {
    let mut out = BTreeMap::new();
    for (key, value) in group {
        let key = if let Some(name) = key.strip_prefix(TRAIT) {
            let name = name.trim();
            if !name.starts_with("CUSTOM_") {
                return Err(invalid(
                    "device profile group",
                    format!(
                        "trait {:?}: a trait name starts with CUSTOM_",
                        crate::http::shown(name)
                    ),
                ));
            }
            if value != "required" && value != "forbidden" {
                return Err(invalid(
                    "device profile group",
                    format!(
                        "trait {name}={:?}: the value is required or forbidden",
                        crate::http::shown(&value)
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
                        crate::http::shown(class),
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
                        crate::http::shown(&value)
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
                    crate::http::shown(&key)
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
                matches!(normalize(bad.clone()), Err(Invalid { .. })),
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
    fn requests_per_group() {
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
    }
}
