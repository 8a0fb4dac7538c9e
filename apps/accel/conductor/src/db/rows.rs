//! The rows the queries return, and what an agent reports.

use crate::lifecycle::ArqState;
use accel_objects::CleanupState;
use serde::{Deserialize, Serialize};
use sqlx::any::{Any, AnyTypeInfo, AnyValueRef};
use sqlx::error::BoxDynError;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

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
    /// The device's further deployables, each with its own handles, attributes and
    /// Placement provider: a Cyborg agent's (its Intel NIC driver reports each SR-IOV
    /// virtual function as a deployable). The fields above describe the first one;
    /// accel's agents report one deployable per device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_deployables: Vec<ReportedDeployable>,
}

/// A further deployable of a reported device ([`ReportedDevice::more_deployables`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportedDeployable {
    /// Its name, unique among the device's deployables (Cyborg names the Placement
    /// provider after it).
    pub name: String,
    /// The bound driver.
    pub driver_name: Option<String>,
    /// What can be attached to a guest: (attach type, attach info).
    pub handles: Vec<(String, String)>,
    /// Its attributes, as [`ReportedDevice::attributes`].
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
}

/// One deployable of a reported device, the first or a further one
/// ([`ReportedDevice::deployables_on`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeployableReport<'a> {
    /// Its name on the host.
    pub name: &'a str,
    /// The bound driver.
    pub driver_name: Option<&'a str>,
    /// Its handles.
    pub handles: &'a [(String, String)],
    /// Its attributes.
    pub attributes: &'a BTreeMap<String, String>,
}

impl ReportedDevice {
    /// The name its deployable gets on `host`.
    pub fn deployable_name_on(&self, host: &str) -> String {
        self.deployable_name
            .clone()
            .unwrap_or_else(|| format!("{host}_{}", self.control_path_id))
    }

    /// The device with `deployables`, in order: the first one's name, driver, handles
    /// and attributes become the device's own fields (an empty name leaves
    /// [`ReportedDevice::deployable_name`] unset, accel's `<host>_<control path>`), the
    /// others its [`ReportedDevice::more_deployables`]. None: a device with no handles.
    pub fn with_deployables(self, deployables: Vec<ReportedDeployable>) -> ReportedDevice {
        let mut deployables = deployables.into_iter();
        let first = deployables.next().unwrap_or_default();
        ReportedDevice {
            driver_name: first.driver_name,
            handles: first.handles,
            attributes: first.attributes,
            deployable_name: Some(first.name).filter(|n| !n.is_empty()),
            more_deployables: deployables.collect(),
            ..self
        }
    }

    /// Every deployable of the device on `host`: the first one (named by
    /// [`ReportedDevice::deployable_name_on`], passed in as `first_name`) and the
    /// further ones, in the report's order.
    pub fn deployables_on<'a>(&'a self, first_name: &'a str) -> Vec<DeployableReport<'a>> {
        let first = DeployableReport {
            name: first_name,
            driver_name: self.driver_name.as_deref(),
            handles: &self.handles,
            attributes: &self.attributes,
        };
        std::iter::once(first)
            .chain(self.more_deployables.iter().map(|d| DeployableReport {
                name: &d.name,
                driver_name: d.driver_name.as_deref(),
                handles: &d.handles,
                attributes: &d.attributes,
            }))
            .collect()
    }

    /// Every handle of the device, of all its deployables.
    pub fn all_handles(&self) -> impl Iterator<Item = &(String, String)> {
        self.handles
            .iter()
            .chain(self.more_deployables.iter().flat_map(|d| d.handles.iter()))
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct DeviceRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Device type.
    #[sqlx(rename = "type")]
    pub device_type: String,
    /// Vendor.
    pub vendor: String,
    /// Model.
    pub model: String,
    /// Board details.
    #[sqlx(try_from = "TextOption")]
    pub std_board_info: Option<String>,
    /// Host.
    pub hostname: String,
    /// Vendor board details.
    #[sqlx(try_from = "TextOption")]
    pub vendor_board_info: Option<String>,
    /// Whether reports still show it ([`DeviceStatus`]).
    pub status: DeviceStatus,
    /// Taken out of service by an operator (Cyborg's `maintaining`, after
    /// `POST /v2/devices/{uuid}/disable`): given to no new request.
    #[serde(default)]
    #[sqlx(try_from = "Maintaining")]
    pub maintaining: bool,
    /// Created.
    pub created_at: String,
    /// Last changed.
    pub updated_at: String,
}

/// A deployable row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
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
    #[sqlx(try_from = "IntFlag")]
    pub enabled: bool,
    /// Its resource provider in Placement: [`rp_uuid`] of its name, so the same
    /// deployable has the same provider whichever conductor (or Cyborg) reports it.
    /// Computed, not stored (filled by the queries that return deployables).
    #[serde(default)]
    #[sqlx(skip)]
    pub rp_uuid: String,
    /// Its attributes by key ([`AttributeRow`]), as Cyborg shows them in a deployable's
    /// `attributes_list` (rows of `attributes`, filled by the same queries).
    #[serde(default)]
    #[sqlx(skip)]
    pub attributes: BTreeMap<String, String>,
    /// The bitstream (a Glance image UUID) a bind last programmed its FPGA with
    /// (Cyborg's `bitstream_id`); none for a deployable never programmed so.
    #[serde(default)]
    pub bitstream_id: Option<String>,
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct AttributeRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable ([`DeployableRow::id`]).
    pub deployable_id: i64,
    /// Key (`rc`, `trait0`, ...), unique per deployable.
    #[sqlx(try_from = "Text")]
    pub key: String,
    /// Value.
    #[sqlx(try_from = "Text")]
    pub value: String,
    /// Creation time.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

/// An attach handle row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct AttachHandleRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its deployable.
    pub deployable_id: i64,
    /// Its device's control path ([`ControlPathRow::id`], Cyborg's
    /// `AttachHandle.cpid_id`); `None` for a device whose control path is not a PCI
    /// address.
    pub cpid_id: Option<i64>,
    /// Taken by a request.
    #[sqlx(try_from = "IntFlag")]
    pub in_use: bool,
    /// `PCI`, ...
    pub attach_type: String,
    /// JSON text (the PCI address).
    pub attach_info: String,
}

/// A device's control path, Cyborg's `controlpath_ids` row: written with the device by a
/// report (or by Cyborg's conductor, or kept from Cyborg's database by `accel db
/// import-cyborg`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct ControlPathRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Its device.
    pub device_id: i64,
    /// `PCI`.
    pub cpid_type: String,
    /// The PCI address as the JSON text Cyborg's drivers write
    /// (`{"bus": "3b", "device": "00", "domain": "0000", "function": "0"}`).
    pub cpid_info: String,
}

/// A device profile row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct DeviceProfileRow {
    /// Primary key.
    pub id: i64,
    /// UUID.
    pub uuid: String,
    /// Unique name.
    pub name: String,
    /// Groups: each a map such as `{"resources:FPGA": "1", "trait:CUSTOM_X": "required"}`.
    #[sqlx(try_from = "ProfileGroups")]
    pub groups: Vec<BTreeMap<String, String>>,
    /// Description.
    #[sqlx(try_from = "TextOption")]
    pub description: Option<String>,
    /// Created.
    pub created_at: String,
}

/// An accelerator request row, with its attach handle when bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
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
    #[sqlx(rename = "handle_uuid")]
    pub attach_handle_uuid: Option<String>,
    /// The handle's type, when bound.
    #[sqlx(rename = "handle_type")]
    pub attach_handle_type: Option<String>,
    /// The handle's info, when bound.
    #[sqlx(rename = "handle_info")]
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

/// Whether an in-use device is still in its host's reports (`devices.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceStatus {
    /// In the host's last report (every device that is not in use is, or is deleted).
    Available,
    /// In use, and the host's last report lacked it or one of its in-use handles: given
    /// to no new request until a report has it again.
    Missing,
    /// In use, and a second report confirmed it gone.
    Lost,
}

impl DeviceStatus {
    /// Every status.
    pub const ALL: [DeviceStatus; 3] = [
        DeviceStatus::Available,
        DeviceStatus::Missing,
        DeviceStatus::Lost,
    ];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceStatus::Available => "available",
            DeviceStatus::Missing => "missing",
            DeviceStatus::Lost => "lost",
        }
    }
}

impl fmt::Display for DeviceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device status name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown device status {0:?}")]
pub struct UnknownDeviceStatus(pub String);

impl FromStr for DeviceStatus {
    type Err = UnknownDeviceStatus;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DeviceStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownDeviceStatus(s.to_owned()))
    }
}

/// The RPC wire a host's agent reports on (`host_wires.wire`, migration 102), and so the
/// agent API it serves: the conductor calls a host's agent on that wire only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentWire {
    /// Cyborg's: reports on `cyborg-conductor`, serves Cyborg's agent API
    /// (`cyborg-agent`: `fpga_program`, the mdevs, and at 1.1 `cleanup_device` of a
    /// device). A Cyborg 17 agent, or accel's with `[cyborg] report_to_cyborg`.
    Cyborg,
    /// accel's own: reports on `accel-conductor`, serves accel's agent API
    /// (`accel-agent`: `program_fpga`, `cleanup_device` of a handle).
    Accel,
}

impl AgentWire {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentWire::Cyborg => "cyborg",
            AgentWire::Accel => "accel",
        }
    }
}

impl fmt::Display for AgentWire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A wire name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown agent wire {0:?} (cyborg or accel)")]
pub struct UnknownAgentWire(pub String);

impl FromStr for AgentWire {
    type Err = UnknownAgentWire;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [AgentWire::Cyborg, AgentWire::Accel]
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| UnknownAgentWire(s.to_owned()))
    }
}

/// Decodes a text column by parsing it: a value the type does not have is the column's
/// decode error, which the queries report as [`super::DbError::Corrupt`].
macro_rules! decode_parsed {
    ($t:ty) => {
        impl sqlx::Type<Any> for $t {
            fn type_info() -> AnyTypeInfo {
                <String as sqlx::Type<Any>>::type_info()
            }
            fn compatible(ty: &AnyTypeInfo) -> bool {
                <String as sqlx::Type<Any>>::compatible(ty)
            }
        }
        impl<'r> sqlx::Decode<'r, Any> for $t {
            fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(<String as sqlx::Decode<'r, Any>>::decode(value)?.parse()?)
            }
        }
    };
}

decode_parsed!(DeviceStatus);
decode_parsed!(ArqState);
decode_parsed!(AgentWire);

/// An integer column that holds a flag (`0` or `1`, as both schemas store booleans),
/// read as `bool` (`#[sqlx(try_from = "IntFlag")]`); any other value is refused rather
/// than taken as set.
pub struct IntFlag(bool);

/// A flag column holding neither 0 nor 1.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not a flag (0 or 1)")]
pub struct NotAFlag(i64);

impl sqlx::Type<Any> for IntFlag {
    fn type_info() -> AnyTypeInfo {
        <i64 as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        <i64 as sqlx::Type<Any>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Any> for IntFlag {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        // The check is here, not in a `TryFrom`: sqlx's derive loses a conversion's
        // message, a decode error keeps it.
        match <i64 as sqlx::Decode<'r, Any>>::decode(value)? {
            0 => Ok(IntFlag(false)),
            1 => Ok(IntFlag(true)),
            n => Err(NotAFlag(n).into()),
        }
    }
}

/// Whether a device is taken out of service: accel's `maintaining` flag (0 or 1,
/// [`IntFlag`]), or Cyborg's `status` (`enabled` or `maintaining`); anything else is
/// refused.
pub struct Maintaining(bool);

/// A Cyborg device status that is neither `enabled` nor `maintaining`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a Cyborg device status (enabled or maintaining)")]
pub struct NotADeviceStatus(String);

impl sqlx::Type<Any> for Maintaining {
    fn type_info() -> AnyTypeInfo {
        <i64 as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        <i64 as sqlx::Type<Any>>::compatible(ty) || text_compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Any> for Maintaining {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        if <i64 as sqlx::Type<Any>>::compatible(&sqlx::ValueRef::type_info(&value)) {
            return Ok(Maintaining(
                <IntFlag as sqlx::Decode<'r, Any>>::decode(value)?.0,
            ));
        }
        match text_of(value)?.as_str() {
            "enabled" => Ok(Maintaining(false)),
            "maintaining" => Ok(Maintaining(true)),
            other => Err(NotADeviceStatus(other.to_owned()).into()),
        }
    }
}

impl From<Maintaining> for bool {
    fn from(v: Maintaining) -> bool {
        v.0
    }
}

/// A profile's groups: accel's `groups` (the JSON list), or Cyborg's `profile_json`
/// (`{"groups": [...]}`); text that is neither is refused.
pub struct ProfileGroups(Vec<BTreeMap<String, String>>);

impl sqlx::Type<Any> for ProfileGroups {
    fn type_info() -> AnyTypeInfo {
        <String as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        text_compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Any> for ProfileGroups {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Accel(Vec<BTreeMap<String, String>>),
            Cyborg {
                groups: Vec<BTreeMap<String, String>>,
            },
        }
        Ok(ProfileGroups(
            match serde_json::from_str::<Stored>(&text_of(value)?)? {
                Stored::Accel(groups) | Stored::Cyborg { groups } => groups,
            },
        ))
    }
}

impl From<ProfileGroups> for Vec<BTreeMap<String, String>> {
    fn from(v: ProfileGroups) -> Self {
        v.0
    }
}

impl From<IntFlag> for bool {
    fn from(v: IntFlag) -> bool {
        v.0
    }
}

/// Whether a column of type `ty` holds text: text, or bytes (sqlx's Any driver hands
/// MySQL's `TEXT` columns over as its `Blob` kind, as it does every type of MySQL's
/// BLOB family).
pub(crate) fn text_compatible(ty: &AnyTypeInfo) -> bool {
    <String as sqlx::Type<Any>>::compatible(ty) || <Vec<u8> as sqlx::Type<Any>>::compatible(ty)
}

/// A text column's value ([`text_compatible`]); bytes that are not UTF-8 are refused.
pub(crate) fn text_of(value: AnyValueRef<'_>) -> Result<String, BoxDynError> {
    match <String as sqlx::Decode<'_, Any>>::decode(value.clone()) {
        Ok(text) => Ok(text),
        Err(_) => Ok(String::from_utf8(
            <Vec<u8> as sqlx::Decode<'_, Any>>::decode(value)?,
        )?),
    }
}

/// A text column read as text whether the driver hands it over as text or as bytes
/// (MySQL's `TEXT`, which Cyborg's schema has: [`text_of`]);
/// `#[sqlx(try_from = "Text")]`.
pub struct Text(String);

impl sqlx::Type<Any> for Text {
    fn type_info() -> AnyTypeInfo {
        <String as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        text_compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Any> for Text {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Text(text_of(value)?))
    }
}

impl From<Text> for String {
    fn from(v: Text) -> Self {
        v.0
    }
}

/// A nullable [`Text`]; `#[sqlx(try_from = "TextOption")]`.
pub struct TextOption(Option<String>);

impl sqlx::Type<Any> for TextOption {
    fn type_info() -> AnyTypeInfo {
        <String as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        text_compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Any> for TextOption {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        if sqlx::ValueRef::is_null(&value) {
            return Ok(TextOption(None));
        }
        Ok(TextOption(Some(text_of(value)?)))
    }
}

impl From<TextOption> for Option<String> {
    fn from(v: TextOption) -> Self {
        v.0
    }
}

/// A nullable text column read as `Option<T>` by parsing
/// (`#[sqlx(try_from = "ParsedOption<T>")]`), for a `T` of another crate
/// (accel-objects' `CleanupState`), on which this crate cannot implement sqlx's traits.
pub struct ParsedOption<T>(Option<T>);

impl<T> sqlx::Type<Any> for ParsedOption<T> {
    fn type_info() -> AnyTypeInfo {
        <String as sqlx::Type<Any>>::type_info()
    }
    fn compatible(ty: &AnyTypeInfo) -> bool {
        <String as sqlx::Type<Any>>::compatible(ty)
    }
}

impl<'r, T> sqlx::Decode<'r, Any> for ParsedOption<T>
where
    T: FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        if sqlx::ValueRef::is_null(&value) {
            return Ok(ParsedOption(None));
        }
        let text = <String as sqlx::Decode<'r, Any>>::decode(value)?;
        Ok(ParsedOption(Some(text.parse()?)))
    }
}

impl From<ParsedOption<CleanupState>> for Option<CleanupState> {
    fn from(v: ParsedOption<CleanupState>) -> Self {
        v.0
    }
}
