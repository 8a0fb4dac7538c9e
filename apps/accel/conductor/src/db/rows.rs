//! The rows the queries return, and what an agent reports.

use super::DbError;
use crate::lifecycle::ArqState;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::Row;
use std::collections::BTreeMap;

/// What an agent reports of one device (a physical function and its handles).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedDevice {
    /// The PCI address of the physical function: the key reports are diffed by.
    pub control_path_id: String,
    /// `GPU`, `FPGA`, `AICHIP`, `QAT`, `NIC`, `SSD`.
    pub device_type: String,
    /// Vendor id.
    pub vendor: String,
    /// Model (device id or model text).
    pub model: String,
    /// Board details as JSON text.
    pub std_board_info: Option<String>,
    /// The bound driver.
    pub driver_name: Option<String>,
    /// What can be attached to a guest: (attach type, attach info).
    pub handles: Vec<(String, String)>,
    /// The deployable's attributes (Cyborg's `attribute_list`: `rc`, `trait0`, ...),
    /// kept as rows of `attributes` ([`AttributeRow`]). A report owns the keys it
    /// reports: it sets their values, and deletes the keys the host's previous report
    /// had and this one has not; keys created through the API that no report names
    /// stay.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// The deployable's name as the agent's driver gives it (a Cyborg agent's; Cyborg
    /// names its Placement provider after it); `None`: `<host>_<control path>`, accel's.
    #[serde(default)]
    pub deployable_name: Option<String>,
    /// The vendor's board details (JSON text), as a Cyborg agent reports them.
    #[serde(default)]
    pub vendor_board_info: Option<String>,
}

impl ReportedDevice {
    /// The name its deployable gets on `host`.
    pub fn deployable_name_on(&self, host: &str) -> String {
        self.deployable_name
            .clone()
            .unwrap_or_else(|| format!("{host}_{}", self.control_path_id))
    }
}

/// What a report changed, by control-path id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportOutcome {
    /// New devices.
    pub added: Vec<String>,
    /// Devices whose fields or handles changed (or that came back after being lost).
    pub updated: Vec<String>,
    /// Devices the report no longer has, deleted.
    pub removed: Vec<String>,
    /// Devices in use whose loss a second report confirmed (they were already
    /// `missing`, or `lost`): kept, marked `lost`.
    pub lost: Vec<String>,
    /// Devices in use that this report drops (the device or an in-use handle is not in
    /// it) for the first time: kept and marked `missing`, not `lost`, until the host's
    /// next report confirms it. One report, spurious or forged, cannot take an in-use
    /// device away.
    #[serde(default)]
    pub unconfirmed: Vec<String>,
    /// Devices reported as they are.
    pub unchanged: usize,
}

/// A device row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Device type.
    pub device_type: String,
    /// Vendor.
    pub vendor: String,
    /// Model.
    pub model: String,
    /// Board details.
    pub std_board_info: Option<String>,
    /// Host.
    pub hostname: String,
    /// Vendor board details.
    pub vendor_board_info: Option<String>,
    /// `available`; `missing` (in use, and the host's last report lacked it or one of
    /// its in-use handles: not given to new requests); `lost` (a second report
    /// confirmed it).
    pub status: String,
    /// Taken out of service by an operator (Cyborg's `maintaining`, after
    /// `POST /v2/devices/{uuid}/disable`): given to no new request.
    #[serde(default)]
    pub maintaining: bool,
    /// Created.
    pub created_at: String,
    /// Last changed.
    pub updated_at: String,
}

/// A deployable row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployableRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Name.
    pub name: String,
    /// Its device.
    pub device_id: i64,
    /// Host.
    pub hostname: String,
    /// PCI address.
    pub control_path_id: String,
    /// Accelerators it offers.
    pub num_accelerators: i64,
    /// Driver.
    pub driver_name: Option<String>,
    /// Usable.
    pub enabled: bool,
    /// Its resource provider in Placement: [`rp_uuid`] of its name, so the same
    /// deployable has the same provider whichever conductor (or Cyborg) reports it.
    #[serde(default)]
    pub rp_uuid: String,
    /// Its attributes by key ([`AttributeRow`]), as Cyborg shows them in a deployable's
    /// `attributes_list`.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Creation time.
    #[serde(default)]
    pub created_at: String,
    /// Last change.
    #[serde(default)]
    pub updated_at: String,
}

/// The resource provider UUID of the deployable named `name`: a name-based UUID
/// (version 3, DNS namespace), the one Cyborg 17's conductor gives the provider it
/// makes for a deployable, so a deployment moved from Cyborg keeps its providers.
pub fn rp_uuid(name: &str) -> String {
    uuid::Uuid::new_v3(&uuid::Uuid::NAMESPACE_DNS, name.as_bytes()).to_string()
}

/// An attribute of a deployable (Cyborg's `attributes` table and `/v2/attributes`):
/// reported by its host's agent (see [`ReportedDevice::attributes`]) or created by an
/// operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable ([`DeployableRow::id`]).
    pub deployable_id: i64,
    /// Key (`rc`, `trait0`, ...), unique per deployable.
    pub key: String,
    /// Value.
    pub value: String,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

/// An attach handle row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachHandleRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable.
    pub deployable_id: i64,
    /// Taken by a request.
    pub in_use: bool,
    /// `PCI`, ...
    pub attach_type: String,
    /// JSON text (the PCI address).
    pub attach_info: String,
}

/// A device profile row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceProfileRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Unique name.
    pub name: String,
    /// Groups: each a map such as `{"resources:FPGA": "1", "trait:CUSTOM_X": "required"}`.
    pub groups: Vec<BTreeMap<String, String>>,
    /// Description.
    pub description: Option<String>,
    /// Created.
    pub created_at: String,
}

/// An accelerator request row, with its attach handle when bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArqRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Lifecycle state.
    pub state: ArqState,
    /// Its profile.
    pub device_profile_name: String,
    /// The profile group it satisfies.
    pub device_profile_group_id: i64,
    /// Host, once binding.
    pub hostname: Option<String>,
    /// Resource provider, once binding.
    pub device_rp_uuid: Option<String>,
    /// Instance, once binding.
    pub instance_uuid: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// The handle's UUID, when bound.
    pub attach_handle_uuid: Option<String>,
    /// The handle's type, when bound.
    pub attach_handle_type: Option<String>,
    /// The handle's info, when bound.
    pub attach_handle_info: Option<String>,
    /// Created (always set by this release; unset when read by release N's API).
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last changed (as `created_at`).
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// A page of a list: rows after `marker` (a UUID), at most `limit`, optionally one host's.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    /// Only this host's rows.
    pub host: Option<String>,
    /// At most this many (default 1000).
    pub limit: Option<u32>,
    /// Only rows after the row with this UUID.
    pub marker: Option<String>,
    /// Only this project's accelerator requests (project isolation; other lists
    /// ignore it).
    pub project: Option<String>,
}

pub(super) fn device_row(r: &AnyRow) -> Result<DeviceRow, DbError> {
    Ok(DeviceRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        device_type: r.try_get("type")?,
        vendor: r.try_get("vendor")?,
        model: r.try_get("model")?,
        std_board_info: r.try_get("std_board_info")?,
        hostname: r.try_get("hostname")?,
        vendor_board_info: r.try_get("vendor_board_info")?,
        status: r.try_get("status")?,
        maintaining: r.try_get::<i64, _>("maintaining")? != 0,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

pub(super) fn deployable_row(r: &AnyRow) -> Result<DeployableRow, DbError> {
    let name: String = r.try_get("name")?;
    Ok(DeployableRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        name: name.clone(),
        device_id: r.try_get("device_id")?,
        hostname: r.try_get("hostname")?,
        control_path_id: r.try_get("control_path_id")?,
        num_accelerators: r.try_get("num_accelerators")?,
        driver_name: r.try_get("driver_name")?,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
        rp_uuid: rp_uuid(&name),
        attributes: BTreeMap::new(),
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

pub(super) fn attribute_row(r: &AnyRow) -> Result<AttributeRow, DbError> {
    Ok(AttributeRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        deployable_id: r.try_get("deployable_id")?,
        key: r.try_get("key")?,
        value: r.try_get("value")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

pub(super) fn profile_row(r: &AnyRow) -> Result<DeviceProfileRow, DbError> {
    let groups: String = r.try_get("groups")?;
    Ok(DeviceProfileRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        name: r.try_get("name")?,
        groups: serde_json::from_str(&groups).map_err(|e| DbError::Invalid {
            what: "stored device profile groups",
            why: e.to_string(),
        })?,
        description: r.try_get("description")?,
        created_at: r.try_get("created_at")?,
    })
}

pub(super) fn arq_row(r: &AnyRow) -> Result<ArqRow, DbError> {
    let state: String = r.try_get("state")?;
    Ok(ArqRow {
        id: r.try_get("id")?,
        uuid: r.try_get("uuid")?,
        state: state
            .parse()
            .map_err(|e: crate::lifecycle::UnknownState| DbError::Invalid {
                what: "stored state",
                why: e.to_string(),
            })?,
        device_profile_name: r.try_get("device_profile_name")?,
        device_profile_group_id: r.try_get("device_profile_group_id")?,
        hostname: r.try_get("hostname")?,
        device_rp_uuid: r.try_get("device_rp_uuid")?,
        instance_uuid: r.try_get("instance_uuid")?,
        project_id: r.try_get("project_id")?,
        attach_handle_uuid: r.try_get("handle_uuid")?,
        attach_handle_type: r.try_get("handle_type")?,
        attach_handle_info: r.try_get("handle_info")?,
        created_at: Some(r.try_get("created_at")?),
        updated_at: Some(r.try_get("updated_at")?),
    })
}
