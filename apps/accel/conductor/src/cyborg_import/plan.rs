//! The import's checks: Cyborg's rows read by [`super::read_source`] shaped as accel's
//! ([`plan`]), every refusal an [`ImportError::Row`] naming the table and UUID, before
//! anything is written.

use super::{
    CyAttribute, CyControlPath, CyDeployable, CyHandle, ImportError, ImportSummary, Source,
    UpgradeState, ACCEL_TYPES,
};
use crate::db::{rp_uuid, DeviceStatus};
use crate::lifecycle::ArqState;
use accel_objects::CleanupState;
use chrono::SubsecRound;
use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

/// A time as the import writes it: UTC, whole seconds (Cyborg's MySQL `DATETIME`s are).
pub(super) type Time = chrono::DateTime<chrono::Utc>;

/// A Cyborg time (`2026-12-05 09:01:04.269132` on SQLite, `2026-12-05 09:01:04` on
/// MySQL; both UTC), or accel's former RFC 3339 text, to the second.
pub(super) fn time(text: &str) -> Option<Time> {
    let text = text.trim();
    // accel's former history stored RFC 3339 text (`2026-12-05T09:01:04Z`).
    let naive = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f"))
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(text).map(|t| t.naive_utc()))
        .ok()?;
    Some(naive.and_utc().trunc_subsecs(0))
}

/// A row's created and updated times: unset or unreadable ones become now (an updated
/// time unset is the created one, as Cyborg leaves it until the first update).
pub(super) fn times(
    table: &'static str,
    uuid: &str,
    created: Option<&str>,
    updated: Option<&str>,
) -> Result<(Time, Time), ImportError> {
    let parse = |t: Option<&str>| -> Result<Option<Time>, ImportError> {
        match t {
            None => Ok(None),
            Some(t) => time(t).map(Some).ok_or_else(|| {
                ImportError::row(
                    table,
                    uuid,
                    format!("time {t:?} is not a UTC date and time"),
                )
            }),
        }
    };
    let created = parse(created)?.unwrap_or_else(|| chrono::Utc::now().trunc_subsecs(0));
    let updated = parse(updated)?.unwrap_or(created);
    Ok((created, updated))
}

/// An accel device and its one deployable, as the import writes them.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PlannedDevice {
    pub(super) uuid: String,
    pub(super) device_type: String,
    pub(super) vendor: String,
    pub(super) model: String,
    pub(super) std_board_info: Option<String>,
    pub(super) vendor_board_info: Option<String>,
    pub(super) hostname: String,
    pub(super) maintaining: bool,
    /// Cyborg's `device_state`, kept.
    pub(super) device_state: Option<String>,
    /// accel's inventory state (`available` unless accel's former history said
    /// otherwise).
    pub(super) inventory_status: DeviceStatus,
    pub(super) created_at: Time,
    pub(super) updated_at: Time,
    /// Its control path, Cyborg's row as it is (UUID, type, `cpid_info` text, times).
    pub(super) control_path: PlannedControlPath,
    /// Its deployables, a root one (no parent) first, then by Cyborg's id.
    pub(super) deployables: Vec<PlannedDeployable>,
}

/// A device's `controlpath_ids` row, kept as Cyborg wrote it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PlannedControlPath {
    pub(super) uuid: String,
    pub(super) cpid_type: String,
    pub(super) cpid_info: String,
    pub(super) created_at: Time,
    pub(super) updated_at: Time,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct PlannedDeployable {
    pub(super) uuid: String,
    pub(super) name: String,
    pub(super) control_path_id: String,
    pub(super) num_accelerators: i64,
    pub(super) driver_name: Option<String>,
    /// Cyborg's stored provider (null until Cyborg had made it); accel's reconciler
    /// writes its own once Placement has the provider.
    pub(super) rp_uuid: Option<String>,
    pub(super) bitstream_id: Option<String>,
    pub(super) created_at: Time,
    pub(super) updated_at: Time,
    pub(super) handles: Vec<PlannedHandle>,
    /// By key: (uuid, value, created, updated).
    pub(super) attributes: BTreeMap<String, (String, String, Time, Time)>,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct PlannedHandle {
    pub(super) cyborg_id: i64,
    pub(super) uuid: String,
    pub(super) in_use: bool,
    pub(super) attach_type: String,
    pub(super) attach_info: String,
    /// accel's cleanup (only accel's former history holds one).
    pub(super) cleanup_state: Option<CleanupState>,
    pub(super) cleanup_reason: Option<String>,
    pub(super) created_at: Time,
    pub(super) updated_at: Time,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct PlannedProfile {
    pub(super) uuid: String,
    pub(super) name: String,
    pub(super) groups: String,
    /// Cyborg's own text of them, kept as it is.
    pub(super) profile_json: String,
    pub(super) description: Option<String>,
    pub(super) created_at: Time,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) struct PlannedArq {
    pub(super) uuid: String,
    pub(super) state: ArqState,
    pub(super) profile: String,
    pub(super) group_id: i64,
    pub(super) hostname: Option<String>,
    pub(super) device_rp_uuid: Option<String>,
    pub(super) instance_uuid: Option<String>,
    pub(super) project_id: Option<String>,
    /// Cyborg's attach handle id (the planned handle with this `cyborg_id`).
    pub(super) handle: Option<i64>,
    /// Cyborg's `substate` (kept on Cyborg's schema; accel's own has no column).
    pub(super) substate: String,
    pub(super) created_at: Time,
    pub(super) updated_at: Time,
}

/// What the import writes, checked.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) devices: Vec<PlannedDevice>,
    pub(super) profiles: Vec<PlannedProfile>,
    pub(super) arqs: Vec<PlannedArq>,
    pub(super) notes: Vec<String>,
    /// accel's version and fleet records (accel's own database only), copied as they are.
    pub(super) upgrade: UpgradeState,
}

impl Plan {
    pub(super) fn deployables(&self) -> impl Iterator<Item = &PlannedDeployable> {
        self.devices.iter().flat_map(|d| d.deployables.iter())
    }

    pub(super) fn summary(&self) -> ImportSummary {
        let hosts: BTreeSet<&str> = self.devices.iter().map(|d| d.hostname.as_str()).collect();
        ImportSummary {
            hosts: hosts.len(),
            devices: self.devices.len(),
            deployables: self.deployables().count(),
            attach_handles: self.deployables().map(|dep| dep.handles.len()).sum(),
            attributes: self.deployables().map(|dep| dep.attributes.len()).sum(),
            device_profiles: self.profiles.len(),
            accelerator_requests: self.arqs.len(),
            notes: self.notes.clone(),
        }
    }
}

/// One of Cyborg's deployables as accel holds it, with its handles and attributes.
fn plan_deployable(
    dep: &CyDeployable,
    control_path_id: &str,
    handles: Vec<&CyHandle>,
    attributes: Vec<&CyAttribute>,
    notes: &mut Vec<String>,
) -> Result<PlannedDeployable, ImportError> {
    if let Some(stored) = dep.rp_uuid.as_deref() {
        if stored != rp_uuid(&dep.name) {
            notes.push(format!(
                "deployable {} ({}): Cyborg stored provider {stored}; accel uses {}, its name's",
                dep.uuid,
                dep.name,
                rp_uuid(&dep.name)
            ));
        }
    }
    let (created_at, updated_at) = times(
        "deployables",
        &dep.uuid,
        dep.created_at.as_deref(),
        dep.updated_at.as_deref(),
    )?;
    let mut planned_handles = Vec::with_capacity(handles.len());
    let mut infos = BTreeSet::new();
    for h in handles {
        if !infos.insert(h.attach_info.clone()) {
            return Err(ImportError::row(
                "attach_handles",
                &h.uuid,
                format!(
                    "deployable {} has a second handle {}",
                    dep.uuid, h.attach_info
                ),
            ));
        }
        let (created_at, updated_at) = times(
            "attach_handles",
            &h.uuid,
            h.created_at.as_deref(),
            h.updated_at.as_deref(),
        )?;
        planned_handles.push(PlannedHandle {
            cyborg_id: h.id,
            uuid: h.uuid.clone(),
            in_use: h.in_use.unwrap_or(0) != 0,
            attach_type: h.attach_type.clone(),
            attach_info: h.attach_info.clone(),
            cleanup_state: h
                .cleanup_state
                .as_deref()
                .map(CleanupState::from_str)
                .transpose()
                .map_err(|e| ImportError::row("attach_handles", &h.uuid, e.to_string()))?,
            cleanup_reason: h.cleanup_reason.clone(),
            created_at,
            updated_at,
        });
    }
    let mut planned_attributes = BTreeMap::new();
    for a in attributes {
        let (created_at, updated_at) = times(
            "attributes",
            &a.uuid,
            a.created_at.as_deref(),
            a.updated_at.as_deref(),
        )?;
        let row = (a.uuid.clone(), a.value.clone(), created_at, updated_at);
        if let Some(old) = planned_attributes.insert(a.key.clone(), row) {
            notes.push(format!(
                "attribute {} ({}={}) of deployable {} is replaced by {}: one key per deployable",
                old.0, a.key, old.1, dep.uuid, a.uuid
            ));
        }
    }
    Ok(PlannedDeployable {
        uuid: dep.uuid.clone(),
        name: dep.name.clone(),
        control_path_id: control_path_id.to_owned(),
        num_accelerators: dep.num_accelerators,
        driver_name: dep.driver_name.clone(),
        rp_uuid: dep.rp_uuid.clone(),
        bitstream_id: dep.bitstream_id.clone(),
        created_at,
        updated_at,
        handles: planned_handles,
        attributes: planned_attributes,
    })
}

/// Checks Cyborg's rows and shapes them as accel's (see the module's list).
pub(super) fn plan(source: Source) -> Result<Plan, ImportError> {
    let mut notes = Vec::new();
    let mut control_paths: BTreeMap<i64, &CyControlPath> = BTreeMap::new();
    for cp in &source.control_paths {
        if control_paths.insert(cp.device_id, cp).is_some() {
            return Err(ImportError::row(
                "controlpath_ids",
                &cp.uuid,
                format!("device id {} has a second control path", cp.device_id),
            ));
        }
    }
    let mut deployables_of: BTreeMap<i64, Vec<&CyDeployable>> = BTreeMap::new();
    for dep in &source.deployables {
        deployables_of.entry(dep.device_id).or_default().push(dep);
    }
    let mut handles_of: BTreeMap<i64, Vec<&CyHandle>> = BTreeMap::new();
    for h in &source.handles {
        handles_of.entry(h.deployable_id).or_default().push(h);
    }
    let mut attributes_of: BTreeMap<i64, Vec<&CyAttribute>> = BTreeMap::new();
    for a in &source.attributes {
        attributes_of.entry(a.deployable_id).or_default().push(a);
    }
    // Cyborg's ids of the deployables kept (all of every imported device's).
    let mut kept: BTreeSet<i64> = BTreeSet::new();
    let mut devices = Vec::new();
    for d in &source.devices {
        if !ACCEL_TYPES.contains(&d.r#type.as_str()) {
            return Err(ImportError::row(
                "devices",
                &d.uuid,
                format!(
                    "type {} is not one accel manages yet ({})",
                    d.r#type,
                    ACCEL_TYPES.join(", ")
                ),
            ));
        }
        let inventory_status = match d.inventory_status.as_deref() {
            None => DeviceStatus::Available,
            Some(s) => DeviceStatus::from_str(s)
                .map_err(|e| ImportError::row("devices", &d.uuid, e.to_string()))?,
        };
        let maintaining = match d.status.as_str() {
            "enabled" => false,
            "maintaining" => true,
            other => {
                return Err(ImportError::row(
                    "devices",
                    &d.uuid,
                    format!("status {other:?} is neither enabled nor maintaining"),
                ))
            }
        };
        let cp = control_paths
            .get(&d.id)
            .ok_or_else(|| ImportError::row("devices", &d.uuid, "it has no control path"))?;
        if cp.cpid_type != "PCI" {
            return Err(ImportError::row(
                "controlpath_ids",
                &cp.uuid,
                format!("type {} is not PCI", cp.cpid_type),
            ));
        }
        let control_path_id = crate::cyborg::pci_address(&cp.cpid_info).ok_or_else(|| {
            ImportError::row(
                "controlpath_ids",
                &cp.uuid,
                format!(
                    "{:?} is not a PCI address (domain, bus, device, function)",
                    cp.cpid_info
                ),
            )
        })?;
        let (cp_created_at, cp_updated_at) = times(
            "controlpath_ids",
            &cp.uuid,
            cp.created_at.as_deref(),
            cp.updated_at.as_deref(),
        )?;
        let control_path = PlannedControlPath {
            uuid: cp.uuid.clone(),
            cpid_type: cp.cpid_type.clone(),
            cpid_info: cp.cpid_info.clone(),
            created_at: cp_created_at,
            updated_at: cp_updated_at,
        };
        let (created_at, updated_at) = times(
            "devices",
            &d.uuid,
            d.created_at.as_deref(),
            d.updated_at.as_deref(),
        )?;
        let mut deps = deployables_of.remove(&d.id).unwrap_or_default();
        // A root deployable (no parent) first, then the oldest: the device's first.
        deps.sort_by_key(|dep| (dep.parent_id.is_some(), dep.id));
        let mut deployables = Vec::with_capacity(deps.len().max(1));
        if deps.is_empty() {
            notes.push(format!(
                "device {} had no deployable: it gets one named {}_{control_path_id}",
                d.uuid, d.hostname
            ));
            deployables.push(PlannedDeployable {
                uuid: uuid::Uuid::new_v4().to_string(),
                name: format!("{}_{control_path_id}", d.hostname),
                control_path_id: control_path_id.clone(),
                num_accelerators: 0,
                driver_name: None,
                rp_uuid: None,
                bitstream_id: None,
                created_at,
                updated_at,
                handles: Vec::new(),
                attributes: BTreeMap::new(),
            });
        }
        let mut names = BTreeSet::new();
        for dep in &deps {
            if !names.insert(dep.name.as_str()) {
                return Err(ImportError::row(
                    "deployables",
                    &dep.uuid,
                    format!(
                        "device {} has a second deployable named {:?}",
                        d.uuid, dep.name
                    ),
                ));
            }
            kept.insert(dep.id);
            deployables.push(plan_deployable(
                dep,
                &control_path_id,
                handles_of.remove(&dep.id).unwrap_or_default(),
                attributes_of.remove(&dep.id).unwrap_or_default(),
                &mut notes,
            )?);
        }
        devices.push(PlannedDevice {
            uuid: d.uuid.clone(),
            device_type: d.r#type.clone(),
            vendor: d.vendor.clone(),
            model: d.model.clone(),
            std_board_info: d.std_board_info.clone(),
            vendor_board_info: d.vendor_board_info.clone(),
            hostname: d.hostname.clone(),
            maintaining,
            device_state: d.device_state.clone(),
            inventory_status,
            created_at,
            updated_at,
            control_path,
            deployables,
        });
    }
    if let Some(dep) = deployables_of.values().flatten().next() {
        return Err(ImportError::row(
            "deployables",
            &dep.uuid,
            format!("its device id {} does not exist", dep.device_id),
        ));
    }
    if let Some(h) = handles_of.values().flatten().next() {
        return Err(ImportError::row(
            "attach_handles",
            &h.uuid,
            format!("its deployable id {} does not exist", h.deployable_id),
        ));
    }
    if let Some(a) = attributes_of.values().flatten().next() {
        return Err(ImportError::row(
            "attributes",
            &a.uuid,
            format!("its deployable id {} does not exist", a.deployable_id),
        ));
    }

    let mut profiles = Vec::new();
    let mut profile_names = BTreeMap::new();
    for p in &source.profiles {
        let bad = |why: String| ImportError::row("device_profiles", &p.uuid, why);
        crate::groups::check_name(&p.name).map_err(|e| bad(e.to_string()))?;
        #[derive(serde::Deserialize)]
        struct ProfileJson {
            groups: Vec<BTreeMap<String, String>>,
        }
        let json: ProfileJson = serde_json::from_str(&p.profile_json).map_err(|e| {
            bad(format!(
                "profile_json is not Cyborg's {{\"groups\": [...]}}: {e}"
            ))
        })?;
        if json.groups.is_empty() {
            return Err(bad("it has no group".into()));
        }
        let groups = json
            .groups
            .into_iter()
            .map(crate::groups::normalize)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(e.to_string()))?;
        let (created_at, _) = times("device_profiles", &p.uuid, p.created_at.as_deref(), None)?;
        profile_names.insert(p.id, (p.name.clone(), groups.len()));
        profiles.push(PlannedProfile {
            uuid: p.uuid.clone(),
            name: p.name.clone(),
            groups: serde_json::to_string(&groups).map_err(|e| bad(e.to_string()))?,
            profile_json: p.profile_json.clone(),
            description: p.description.clone(),
            created_at,
        });
    }

    let handle_ids: BTreeMap<i64, &PlannedHandle> = devices
        .iter()
        .flat_map(|d| d.deployables.iter())
        .flat_map(|dep| dep.handles.iter().map(|h| (h.cyborg_id, h)))
        .collect();
    let kept_rps: BTreeMap<String, &str> = devices
        .iter()
        .flat_map(|d| {
            d.deployables
                .iter()
                .map(|dep| (rp_uuid(&dep.name), d.hostname.as_str()))
        })
        .collect();
    let mut arqs = Vec::new();
    for r in &source.arqs {
        let bad = |why: String| ImportError::row("extended_accelerator_requests", &r.uuid, why);
        let state = ArqState::from_str(&r.state)
            .map_err(|_| bad(format!("state {:?} is not one of Cyborg's", r.state)))?;
        let (profile, groups) = profile_names.get(&r.device_profile_id).ok_or_else(|| {
            bad(format!(
                "its device profile id {} does not exist",
                r.device_profile_id
            ))
        })?;
        if r.device_profile_group_id < 0 || r.device_profile_group_id as usize >= *groups {
            return Err(bad(format!(
                "group {} of profile {profile}, which has {groups}",
                r.device_profile_group_id
            )));
        }
        if let Some(dep) = r.deployable_id {
            if !kept.contains(&dep) {
                return Err(bad(format!("its deployable id {dep} does not exist")));
            }
        }
        if let Some(rp) = r.device_rp_uuid.as_deref() {
            let bound = matches!(state, ArqState::BindStarted | ArqState::Bound);
            match kept_rps.get(rp) {
                Some(host) if r.hostname.as_deref().is_some_and(|h| h != *host) => {
                    return Err(bad(format!(
                        "its provider {rp} is on host {host}, not {}",
                        r.hostname.as_deref().unwrap_or_default()
                    )))
                }
                None if bound => {
                    return Err(bad(format!(
                        "it is {} on provider {rp}, which is no deployable's",
                        r.state
                    )))
                }
                _ => {}
            }
        }
        if let Some(h) = r.attach_handle_id {
            let handle = handle_ids
                .get(&h)
                .ok_or_else(|| bad(format!("its attach handle id {h} does not exist")))?;
            if !handle.in_use {
                return Err(bad(format!(
                    "it holds attach handle {}, which Cyborg has not marked in use",
                    handle.uuid
                )));
            }
        } else if state == ArqState::Bound {
            return Err(bad("it is Bound without an attach handle".into()));
        }
        let (created_at, updated_at) = times(
            "extended_accelerator_requests",
            &r.uuid,
            r.created_at.as_deref(),
            r.updated_at.as_deref(),
        )?;
        arqs.push(PlannedArq {
            uuid: r.uuid.clone(),
            state,
            profile: profile.clone(),
            group_id: r.device_profile_group_id,
            hostname: r.hostname.clone(),
            device_rp_uuid: r.device_rp_uuid.clone(),
            instance_uuid: r.instance_uuid.clone(),
            project_id: r.project_id.clone(),
            handle: r.attach_handle_id,
            substate: r.substate.clone(),
            created_at,
            updated_at,
        });
    }
    let held: BTreeSet<i64> = arqs.iter().filter_map(|a| a.handle).collect();
    for h in handle_ids.values() {
        if h.in_use && !held.contains(&h.cyborg_id) {
            notes.push(format!(
                "attach handle {} is in use by no request: imported in use, as Cyborg has it",
                h.uuid
            ));
        }
    }
    if !source.upgrade.versions.is_empty() {
        notes.push(format!(
            "accel's version record ({}) and fleet record ({} agents) kept as they are",
            source
                .upgrade
                .versions
                .iter()
                .map(|v| v.component.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            source.upgrade.fleet.len()
        ));
    }
    Ok(Plan {
        devices,
        profiles,
        arqs,
        notes,
        upgrade: source.upgrade,
    })
}
