//! Cyborg 17's RPC APIs as its `conductor/rpcapi.py` and `agent/rpcapi.py` send them:
//! the control exchange, the topics, each method's name, version and argument names.
//!
//! | API | topic (server) | version | methods |
//! |---|---|---|---|
//! | `conductor` | `cyborg-conductor` | 1.0 | `report_data`, `device_profile_create`, `device_profile_delete`, `arq_create`, `arq_delete_by_uuid`, `arq_delete_by_instance_uuid`, `arq_apply_patch` |
//! | `agent` | `cyborg-agent` (the host name) | 1.0 | `fpga_program`, `create_vgpu_mdev`, `remove_vgpu_mdev` |
//!
//! Cyborg's clients are capped at 1.0 and its servers serve 1.0, so every method is
//! "since 1.0" and every argument required. Objects travel as `cyborg_object`
//! primitives; a list of objects (an agent's report) as a plain JSON list of them.

use crate::objects::{DeviceProfile, DriverDevice, ExtArq};
use serde_json::Value;
use std::collections::BTreeMap;
use verso::Version;
use verso_rpc::{MethodSpec, RpcApi, RpcMethod};

/// The oslo.messaging control exchange Cyborg's services use (`rpc.set_defaults`).
pub const CONTROL_EXCHANGE: &str = "cyborg";
/// The conductor's topic (`constants.CONDUCTOR_TOPIC`).
pub const CONDUCTOR_TOPIC: &str = "cyborg-conductor";
/// The agents' topic (`constants.AGENT_TOPIC`); each agent serves it with its host name
/// as the server.
pub const AGENT_TOPIC: &str = "cyborg-agent";

/// An agent's whole inventory; the conductor diffs it against the database. Replies
/// nothing.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_data", since = "1.0")]
pub struct ReportData {
    /// The reporting host.
    pub hostname: String,
    /// Every device the host's drivers found.
    pub driver_device_list: Vec<DriverDevice>,
}

/// Saves a device profile the API built; replies it as saved.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "device_profile_create", since = "1.0", reply = DeviceProfile)]
pub struct DeviceProfileCreate {
    /// The profile, not yet saved.
    pub obj_devprof: DeviceProfile,
}

/// Deletes a device profile.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "device_profile_delete", since = "1.0")]
pub struct DeviceProfileDelete {
    /// The profile.
    pub obj_devprof: DeviceProfile,
}

/// Saves an accelerator request the API built from a profile group; replies it as
/// saved.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "arq_create", since = "1.0", reply = ExtArq)]
pub struct ArqCreate {
    /// The request, not yet saved.
    pub obj_extarq: ExtArq,
    /// The database id of its profile.
    pub devprof_id: i64,
}

/// Deletes accelerator requests by UUID (kept by Cyborg 17 for older APIs; its own API
/// deletes directly).
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "arq_delete_by_uuid", since = "1.0")]
pub struct ArqDeleteByUuid {
    /// The UUIDs, joined with `,`.
    pub arqs: String,
}

/// Deletes every accelerator request of an instance (kept, as above).
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "arq_delete_by_instance_uuid", since = "1.0")]
pub struct ArqDeleteByInstanceUuid {
    /// The instance's UUID.
    pub instance: String,
}

/// Binds or unbinds accelerator requests by JSON patches.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "arq_apply_patch", since = "1.0")]
pub struct ArqApplyPatch {
    /// A JSON patch (a list of operations) per request UUID.
    #[rpc(arg_type = Dict)]
    pub patch_list: BTreeMap<String, Value>,
    /// Per request UUID, the fields the patches set (`hostname`, `device_rp_uuid`,
    /// `instance_uuid`).
    #[rpc(arg_type = Dict)]
    pub valid_fields: BTreeMap<String, Value>,
}

/// Cyborg's conductor API.
#[derive(Debug, Clone, Copy)]
pub struct ConductorApi;

impl RpcApi for ConductorApi {
    const NAME: &'static str = "conductor";
    const VERSION: Version = Version::new(1, 0);

    fn methods() -> Vec<&'static MethodSpec> {
        vec![
            ReportData::spec(),
            DeviceProfileCreate::spec(),
            DeviceProfileDelete::spec(),
            ArqCreate::spec(),
            ArqDeleteByUuid::spec(),
            ArqDeleteByInstanceUuid::spec(),
            ArqApplyPatch::spec(),
        ]
    }
}

/// Programs an FPGA's bitstream (downloaded from the image service); replies the
/// driver's result.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "fpga_program", since = "1.0", reply = Value)]
pub struct FpgaProgram {
    /// The control path row (its `cpid_info` decoded into a JSON object).
    #[rpc(arg_type = Dict)]
    pub controlpath_id: Value,
    /// The bitstream's image UUID.
    pub bitstream_uuid: String,
    /// The FPGA driver's name.
    pub driver_name: String,
}

/// Creates a mediated device of a type on a GPU.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "create_vgpu_mdev", since = "1.0")]
pub struct CreateVgpuMdev {
    /// The GPU's PCI address.
    pub pci_addr: String,
    /// The mdev type (`nvidia-35`, ...).
    pub asked_type: String,
    /// The attach handle's UUID, which becomes the mdev's UUID.
    pub ah_uuid: String,
}

/// Removes a mediated device.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "remove_vgpu_mdev", since = "1.0")]
pub struct RemoveVgpuMdev {
    /// The GPU's PCI address.
    pub pci_addr: String,
    /// The mdev type.
    pub asked_type: String,
    /// The mdev's UUID.
    pub ah_uuid: String,
}

/// Cyborg's agent API.
#[derive(Debug, Clone, Copy)]
pub struct AgentApi;

impl RpcApi for AgentApi {
    const NAME: &'static str = "agent";
    const VERSION: Version = Version::new(1, 0);

    fn methods() -> Vec<&'static MethodSpec> {
        vec![
            FpgaProgram::spec(),
            CreateVgpuMdev::spec(),
            RemoveVgpuMdev::spec(),
        ]
    }
}
