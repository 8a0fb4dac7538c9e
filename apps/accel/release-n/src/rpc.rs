//! Release N's RPC APIs, declared with release N's object types.
//!
//! | API | topic | version | methods |
//! |---|---|---|---|
//! | `conductor` | `accel-conductor` | 1.0 | `report_data`, `create_device_profile`, `delete_device_profile`, `create_arqs`, `bind_arq`, `unbind_arq`, `delete_arqs` |
//! | `agent` | `accel-agent` (server: the host name) | 1.0 | `report_now` |
//!
//! Release N+1 serves the same 1.0 methods with the same names and arguments, and adds
//! conductor 1.1 (object indirection) and agent 1.1 (`cleanup_device`). Release N has no
//! indirection: its objects travel only as the arguments and replies below.

use crate::objects::{AcceleratorRequest, AcceleratorRequestList, DeviceProfile, DriverDeviceList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use verso::Version;
use verso_rpc::{MethodSpec, RpcApi, RpcMethod};

/// The topic the conductor API is served on.
pub const CONDUCTOR_TOPIC: &str = "accel-conductor";
/// The topic the `upgrade` admin API (heartbeats, finalize, status) is served on.
pub const UPGRADE_TOPIC: &str = "accel-upgrade";
/// The topic agents serve the agent API on, each under its host name as server.
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
}

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

/// Release N's conductor API: version 1.0 only (no object indirection).
#[derive(Debug, Clone, Copy)]
pub struct ConductorApi;

/// Release N's conductor API version.
pub const CONDUCTOR_VERSION: Version = Version::new(1, 0);

impl RpcApi for ConductorApi {
    const NAME: &'static str = "conductor";
    const VERSION: Version = CONDUCTOR_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        vec![
            ReportData::spec(),
            CreateDeviceProfile::spec(),
            DeleteDeviceProfile::spec(),
            CreateArqs::spec(),
            BindArq::spec(),
            UnbindArq::spec(),
            DeleteArqs::spec(),
        ]
    }
}

/// Asks an agent to discover its devices again and report them now; replies how many
/// devices it reported.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_now", since = "1.0", reply = u64)]
pub struct ReportNow {}

/// Release N's agent API: version 1.0, `report_now`.
#[derive(Debug, Clone, Copy)]
pub struct AgentApi;

/// Release N's agent API version.
pub const AGENT_VERSION: Version = Version::new(1, 0);

impl RpcApi for AgentApi {
    const NAME: &'static str = "agent";
    const VERSION: Version = AGENT_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        vec![ReportNow::spec()]
    }
}
