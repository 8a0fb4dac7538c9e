//! accel's RPC APIs, declared once: the conductor's (what agents and the API call) and
//! the agent's (what the conductor calls). Clients, servers and `objects.lock`'s
//! `[rpc.*]` tables are built from these declarations.
//!
//! | API | version | methods |
//! |---|---|---|
//! | `conductor` | 1.0 | `report_data`, `create_device_profile`, `delete_device_profile`, `create_arqs`, `bind_arq`, `unbind_arq`, `delete_arqs` |
//! | `conductor` | 1.1 | + object indirection (`object_class_action_versions`, `object_action`, `object_backport_versions`) |
//! | `conductor` | 1.2 | + `report_unchanged` (an unchanged inventory by its [`report_digest`]) |
//! | `conductor` | 1.3 | + `set_device_maintaining` (Cyborg's device disable and enable) |
//! | `conductor` | 1.4 | + `create_attribute`, `delete_attribute` (Cyborg's `/v2/attributes`) |
//! | `conductor` | 1.5 | + `program_deployable` (Cyborg's `PATCH /v2/deployables/{uuid}/program`) |
//! | `conductor` | 1.6 | `bind_arq` takes `project_id` (Cyborg's bind records the request's project) |
//! | `agent` | 1.0 | `report_now` |
//! | `agent` | 1.1 | + `cleanup_device` |
//! | `agent` | 1.2 | + `program_fpga` |
//!
//! The conductor serves on [`CONDUCTOR_TOPIC`], its `upgrade` API (heartbeats, finalize,
//! status) on [`UPGRADE_TOPIC`]; each agent serves the agent API on [`AGENT_TOPIC`] with
//! its host name as the server, so the conductor addresses one host's agent.
//!
//! Objects travel as their primitives (an agent's report is a [`DriverDeviceList`],
//! requests come back as [`AcceleratorRequest`]s).

use crate::{AcceleratorRequest, AcceleratorRequestList, DeviceProfile, DriverDeviceList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use verso::Version;
use verso::{ObjectList, VersionedEnum};
use verso_rpc::{MethodSpec, RpcApi, RpcMethod};

/// The topic the conductor API is served on.
pub const CONDUCTOR_TOPIC: &str = "accel-conductor";
/// The topic the `upgrade` API (heartbeats, finalize, status) is served on.
pub const UPGRADE_TOPIC: &str = "accel-upgrade";
/// The topic each agent serves the agent API on (server: the agent's host name).
pub const AGENT_TOPIC: &str = "accel-agent";

/// What a report changed, by control-path id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportSummary {
    /// New devices.
    pub added: Vec<String>,
    /// Devices that changed (or came back after being lost).
    pub updated: Vec<String>,
    /// Devices no longer reported, deleted.
    pub removed: Vec<String>,
    /// Devices no longer reported but in use: kept, marked lost.
    pub lost: Vec<String>,
    /// Devices reported unchanged.
    pub unchanged: u64,
}

/// An agent's full inventory; the conductor diffs it against the database.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_data", since = "1.0", reply = ReportSummary)]
pub struct ReportData {
    /// The reporting host.
    pub hostname: String,
    /// Every device it has.
    pub devices: DriverDeviceList,
}

/// An agent's inventory, unchanged since its last full report, named by its
/// [`report_digest`] (conductor API 1.2). The conductor answers the summary of a report
/// that changed nothing when the digest is the one it stored for the host with the
/// last full report it applied (and nothing has changed the host's devices since);
/// otherwise `None`, and the agent sends the full report.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_unchanged", since = "1.2", reply = Option<ReportSummary>)]
pub struct ReportUnchanged {
    /// The reporting host.
    pub hostname: String,
    /// The [`report_digest`] of the inventory it would report.
    pub digest: String,
}

/// The conductor API version that added [`ReportUnchanged`].
pub const REPORT_UNCHANGED_VERSION: Version = Version::new(1, 2);

/// The digest of an inventory as the conductor's diff sees it: SHA-256 over every
/// field the inventory takes from each device and attach handle (control path, type,
/// vendor, model, board info, driver, each handle's type and info, the attributes), devices in
/// control-path order and handles sorted, each value length-prefixed so no two
/// inventories share a text. Object metadata (versions, change tracking) is left out,
/// so the agent and the conductor compute the same digest from the object they built
/// and the object they decoded. `v2:` names this rule: a peer with another rule never
/// matches, which costs a full report, never a wrong skip. (`v1:` had no attributes.)
pub fn report_digest(devices: &DriverDeviceList) -> String {
    use sha2::{Digest, Sha256};
    let text = hash_text;
    let mut rows: Vec<&crate::DriverDevice> = devices.iter().collect();
    rows.sort_by(|a, b| a.control_path_id.get().cmp(&b.control_path_id.get()));
    let mut hash = Sha256::new();
    hash.update((rows.len() as u64).to_le_bytes());
    for d in rows {
        text(&mut hash, d.control_path_id.get().map(String::as_str));
        text(&mut hash, d.r#type.get().map(|t| t.as_str()));
        text(&mut hash, d.vendor.get().map(String::as_str));
        text(&mut hash, d.model.get().map(String::as_str));
        text(&mut hash, d.std_board_info.get().and_then(Option::as_deref));
        text(&mut hash, d.driver_name.get().and_then(Option::as_deref));
        let mut handles: Vec<(Option<&str>, Option<&str>)> = d
            .attach_handles
            .get()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|h| {
                (
                    h.attach_type.get().map(|t| t.as_str()),
                    h.attach_info.get().map(String::as_str),
                )
            })
            .collect();
        handles.sort();
        hash.update((handles.len() as u64).to_le_bytes());
        for (t, info) in handles {
            text(&mut hash, t);
            text(&mut hash, info);
        }
        // DriverDevice 1.1: the attributes, in key order (none in a 1.0 report).
        let attributes = d.attributes.get();
        hash.update((attributes.map_or(0, |a| a.len()) as u64).to_le_bytes());
        for (k, v) in attributes.into_iter().flatten() {
            text(&mut hash, Some(k));
            text(&mut hash, Some(v));
        }
    }
    digest_text("v2:", &hash.finalize())
}

/// Hashes `t` into a report digest, length-prefixed (0 for unset, length + 1 otherwise),
/// so no two sequences of texts hash alike.
pub(crate) fn hash_text(hash: &mut sha2::Sha256, t: Option<&str>) {
    use sha2::Digest;
    match t {
        Some(t) => {
            hash.update((t.len() as u64 + 1).to_le_bytes());
            hash.update(t.as_bytes());
        }
        None => hash.update(0u64.to_le_bytes()),
    }
}

/// A digest as the text reports store and compare: `prefix` (which names the rule that
/// made it), then the bytes in lower-case hexadecimal.
pub fn digest_text(prefix: &str, sum: &[u8]) -> String {
    let mut out = String::with_capacity(prefix.len() + 2 * sum.len());
    out.push_str(prefix);
    for b in sum {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Creates a device profile.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "create_device_profile", since = "1.0", reply = DeviceProfile)]
pub struct CreateDeviceProfile {
    /// Unique name.
    pub name: String,
    /// Groups (`{"resources:FPGA": "1"}`).
    pub groups: Vec<BTreeMap<String, String>>,
    /// Description.
    #[rpc(default = None)]
    pub description: Option<String>,
}

/// Deletes a device profile no request uses.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "delete_device_profile", since = "1.0")]
pub struct DeleteDeviceProfile {
    /// Name or UUID.
    pub name: String,
}

/// Creates accelerator requests: one per group of the profile, or only `group_id`.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "create_arqs", since = "1.0", reply = AcceleratorRequestList)]
pub struct CreateArqs {
    /// The profile.
    pub device_profile_name: String,
    /// One group only.
    #[rpc(default = None)]
    pub group_id: Option<i64>,
    /// The project.
    #[rpc(default = None)]
    pub project_id: Option<String>,
}

/// Binds a request to a free device on a host.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "bind_arq", since = "1.0", reply = AcceleratorRequest)]
pub struct BindArq {
    /// The request.
    pub uuid: String,
    /// The host.
    pub hostname: String,
    /// The instance.
    pub instance_uuid: String,
    /// The resource provider.
    #[rpc(default = None)]
    pub device_rp_uuid: Option<String>,
    /// The project the request is for from now on, as Cyborg 17's bind records it (an
    /// administrator's patch, or the binding caller's project); unset: unchanged.
    #[rpc(since = "1.6", default = None)]
    pub project_id: Option<String>,
}

/// The conductor API version whose `bind_arq` takes `project_id`.
pub const BIND_PROJECT_VERSION: Version = Version::new(1, 6);

/// Releases a request's device.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "unbind_arq", since = "1.0", reply = AcceleratorRequest)]
pub struct UnbindArq {
    /// The request.
    pub uuid: String,
}

/// Deletes requests (by UUID, or all of an instance); idempotent. Replies how many went.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "delete_arqs", since = "1.0", reply = i64)]
pub struct DeleteArqs {
    /// The requests.
    #[rpc(default = Vec::<String>::new())]
    pub uuids: Vec<String>,
    /// Or every request of this instance.
    #[rpc(default = None)]
    pub instance_uuid: Option<String>,
}

/// Takes a device out of service (`maintaining`, Cyborg's `POST /v2/devices/{uuid}/disable`)
/// or puts it back (`enable`): a device in maintenance is given to no new request; the
/// requests bound to it keep it. Idempotent.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "set_device_maintaining", since = "1.3")]
pub struct SetDeviceMaintaining {
    /// The device's UUID.
    pub uuid: String,
    /// In maintenance (disabled) or not.
    pub maintaining: bool,
}

/// The conductor API version that added [`SetDeviceMaintaining`].
pub const DEVICE_MAINTENANCE_VERSION: Version = Version::new(1, 3);

/// Creates an attribute of a deployable (Cyborg's `POST /v2/attributes`); replies its
/// UUID. Refused (`NotFound`) if there is no such deployable, (`Duplicate`) if it has
/// the key.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "create_attribute", since = "1.4", reply = String)]
pub struct CreateAttribute {
    /// The deployable's database id (Cyborg's `deployable_id`).
    pub deployable_id: i64,
    /// The key, unique per deployable.
    pub key: String,
    /// The value.
    pub value: String,
}

/// Deletes an attribute by UUID (Cyborg's `DELETE /v2/attributes/{uuid}`); `NotFound`
/// if there is none.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "delete_attribute", since = "1.4")]
pub struct DeleteAttribute {
    /// The attribute's UUID.
    pub uuid: String,
}

/// The conductor API version that added [`CreateAttribute`] and [`DeleteAttribute`].
pub const ATTRIBUTES_VERSION: Version = Version::new(1, 4);

/// Programs an FPGA deployable with a bitstream, a Glance image (Cyborg's `PATCH
/// /v2/deployables/{uuid}/program`): the conductor asks the deployable's agent
/// ([`ProgramFpga`]) and replies when it has programmed. `NotFound` for no such
/// deployable, `Invalid` for one that is not an FPGA or a bitstream that is no UUID,
/// `ProgramFailed` when the agent could not (its reason in the message).
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "program_deployable", since = "1.5")]
pub struct ProgramDeployable {
    /// The deployable's UUID.
    pub deployable_uuid: String,
    /// The bitstream's Glance image UUID.
    pub bitstream_uuid: String,
}

/// The conductor API version that added [`ProgramDeployable`].
pub const PROGRAM_VERSION: Version = Version::new(1, 5);

/// The conductor's API.
#[derive(Debug, Clone, Copy)]
pub struct ConductorApi;

/// The conductor API's newest version (1.6: `bind_arq`'s `project_id`).
pub const CONDUCTOR_VERSION: Version = Version::new(1, 6);

/// The conductor API version that added object indirection (its three methods are served
/// and called at it).
pub const INDIRECTION_VERSION: Version = Version::new(1, 1);

impl RpcApi for ConductorApi {
    const NAME: &'static str = "conductor";
    const VERSION: Version = CONDUCTOR_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        let mut m = vec![
            ReportData::spec(),
            CreateDeviceProfile::spec(),
            DeleteDeviceProfile::spec(),
            CreateArqs::spec(),
            BindArq::spec(),
            UnbindArq::spec(),
            DeleteArqs::spec(),
        ];
        m.extend(verso_rpc::conductor::object_methods_since(
            INDIRECTION_VERSION,
        ));
        m.push(ReportUnchanged::spec());
        m.push(SetDeviceMaintaining::spec());
        m.push(CreateAttribute::spec());
        m.push(DeleteAttribute::spec());
        m.push(ProgramDeployable::spec());
        m
    }
}

/// Asks an agent to discover its devices and report them now; replies how many devices
/// it reported.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_now", since = "1.0", reply = u64)]
pub struct ReportNow {}

/// Asks an agent to erase the NVMe device of an attach handle the conductor put in
/// `cleaning` (agent API 1.1). The agent starts the cleanup and replies at once; the
/// result reaches the conductor through the handle's remotable cleanup transitions.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "cleanup_device", since = "1.1")]
pub struct CleanupDevice {
    /// The attach handle in `cleaning`.
    pub handle_uuid: String,
}

/// Programs the FPGA at a PCI address of the agent's host with a bitstream from Glance
/// (agent API 1.2); replies when the programming tool has finished. Fails with the
/// kind `ProgramFailed` and the reason (no tool configured, the image refused, the tool
/// failed).
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "program_fpga", since = "1.2")]
pub struct ProgramFpga {
    /// The FPGA's PCI address (its control path id).
    pub address: String,
    /// The bitstream's Glance image UUID.
    pub bitstream_uuid: String,
}

/// The agent's API (what the conductor calls), served by each agent on [`AGENT_TOPIC`]
/// with its host name as the server.
#[derive(Debug, Clone, Copy)]
pub struct AgentApi;

/// The agent API's newest version (1.2: `program_fpga`).
pub const AGENT_VERSION: Version = Version::new(1, 2);

/// The agent API version `program_fpga` needs: a conductor whose `[upgrade_levels]
/// agent` cap is below it refuses to program.
pub const PROGRAM_FPGA_VERSION: Version = Version::new(1, 2);

/// The agent API version `cleanup_device` needs: a conductor whose `[upgrade_levels]
/// agent` cap is below it never sends it (the agent's periodic scan finds the handle).
pub const CLEANUP_DEVICE_VERSION: Version = Version::new(1, 1);

impl RpcApi for AgentApi {
    const NAME: &'static str = "agent";
    const VERSION: Version = AGENT_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        vec![
            ReportNow::spec(),
            CleanupDevice::spec(),
            ProgramFpga::spec(),
        ]
    }
}
