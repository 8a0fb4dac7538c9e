//! The conductor's calls to agents: each host's agent on the wire it reports on
//! ([`crate::db::AgentWire`], recorded with every applied report): NVMe cleanups cast on
//! release, FPGAs programmed, mediated devices made and removed at bind and release.

use super::{ReportWitness, ERROR_MODULE};
use crate::db::{AgentWire, ArqRow, Db, Release};
use accel_objects::errors::ErrorKind;
use accel_objects::rpc::{
    AgentApi, CleanupDevice, ProgramFpga, AGENT_TOPIC, CLEANUP_DEVICE_VERSION, PROGRAM_FPGA_VERSION,
};
use std::sync::Arc;
use verso::{RequestContext, Version};
use verso_rpc::transport::Transport;
use verso_rpc::{RemoteError, RpcClient};

/// What the conductor did to have a released NVMe device erased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanupNotice {
    /// `cleanup_device` (agent API 1.1) was cast to the agent of the device's host.
    Sent,
    /// `[upgrade_levels] agent` does not allow 1.1: nothing was sent (never relabelled as
    /// 1.0); the handle waits in `cleaning` for the agent's periodic scan.
    LeftForScan {
        /// The configured cap.
        cap: String,
    },
    /// The cast could not be sent (the broker failed): the scan picks the handle up.
    SendFailed(String),
}

/// The conductor's client of the agents' API (`agent` on `accel-agent`, one server per
/// host), capped by `[upgrade_levels] agent`; and, with [`AgentNotifier::with_cyborg`],
/// of Cyborg's agent API (`cyborg-agent`) for hosts whose agent is on Cyborg's wire,
/// capped by `[upgrade_levels] cyborg_agent`.
#[derive(Clone)]
pub struct AgentNotifier {
    client: RpcClient,
    cyborg: Option<RpcClient>,
}

impl AgentNotifier {
    /// A client over `transport`; `cap` is `[upgrade_levels] agent` (1.0 by default
    /// while any agent may run release N).
    pub fn new(transport: Arc<dyn Transport>, cap: Option<Version>) -> Self {
        AgentNotifier {
            client: RpcClient::for_api::<AgentApi>(transport, AGENT_TOPIC).with_cap(cap),
            cyborg: None,
        }
    }

    /// Also tells agents on Cyborg's wire: `transport` is on Cyborg's control exchange,
    /// `cap` is `[upgrade_levels] cyborg_agent` (1.0 by default: a Cyborg 17 agent has
    /// no `cleanup_device`).
    pub fn with_cyborg(mut self, transport: Arc<dyn Transport>, cap: Option<Version>) -> Self {
        self.cyborg = Some(
            RpcClient::for_api::<accel_objects::cyborg::AgentApi>(
                transport,
                accel_cyborg17::rpc::AGENT_TOPIC,
            )
            .with_cap(cap),
        );
        self
    }

    /// Whether the cap allows `cleanup_device` (agent API 1.1). Sends nothing.
    pub fn sends_cleanup(&self) -> bool {
        self.client.can_send_version(CLEANUP_DEVICE_VERSION)
    }

    /// Asks the agent of `host` to erase `handle_uuid` (just put in `cleaning`).
    ///
    /// A cast, not a call: the release that caused it must neither wait for the erase
    /// nor fail because an agent is down or slow, and nothing is lost when the cast is:
    /// the handle stays in `cleaning`, where the agent's periodic scan and its startup
    /// recovery find it, and the cleanup transitions are compare-and-swap, so a device
    /// that both the cast and the scan reach is erased and recorded once.
    pub async fn cleanup_released(&self, host: &str, handle_uuid: &str) -> CleanupNotice {
        cast_cleanup(
            &self.client,
            "agent",
            host,
            handle_uuid,
            CleanupDevice {
                handle_uuid: handle_uuid.to_owned(),
            },
        )
        .await
    }

    /// [`AgentNotifier::cleanup_released`] for an agent on Cyborg's wire: Cyborg's
    /// agent API 1.1 `cleanup_device(device_uuid)` on `cyborg-agent`, the device now
    /// `pending_cleaning`. `None` without [`AgentNotifier::with_cyborg`].
    ///
    /// The conductor casts on the wire the host reports on (`host_wires`), and to both
    /// APIs for a host whose wire is not recorded: an agent listens on one (the broker
    /// drops the other cast), and a device is cleaned once whichever cast arrives.
    pub async fn cyborg_cleanup_released(
        &self,
        host: &str,
        device_uuid: &str,
    ) -> Option<CleanupNotice> {
        let client = self.cyborg.as_ref()?;
        let message = accel_objects::cyborg::CleanupDevice {
            device_uuid: device_uuid.to_owned(),
        };
        Some(cast_cleanup(client, "cyborg_agent", host, device_uuid, message).await)
    }
}

impl AgentNotifier {
    /// Makes (`create`) or removes the mediated device `ah_uuid` of type `asked_type` on
    /// the GPU at `pci` of `host`, through Cyborg's agent API (`create_vgpu_mdev`,
    /// `remove_vgpu_mdev`: 1.0, a call); the reason when it was not.
    pub async fn mdev(
        &self,
        host: &str,
        pci: &str,
        asked_type: &str,
        ah_uuid: &str,
        create: bool,
    ) -> Result<(), String> {
        let Some(client) = &self.cyborg else {
            return Err(format!(
                "{host}'s mediated devices are made through Cyborg's agent API, and this \
                 conductor has no client of it ([cyborg] serve_agents)"
            ));
        };
        let ctx = RequestContext::new(format!("req-mdev-{ah_uuid}"));
        let call = client.prepare().server(host);
        let done = if create {
            call.call_method(
                &ctx,
                accel_cyborg17::rpc::CreateVgpuMdev {
                    pci_addr: pci.to_owned(),
                    asked_type: asked_type.to_owned(),
                    ah_uuid: ah_uuid.to_owned(),
                },
            )
            .await
        } else {
            call.call_method(
                &ctx,
                accel_cyborg17::rpc::RemoveVgpuMdev {
                    pci_addr: pci.to_owned(),
                    asked_type: asked_type.to_owned(),
                    ah_uuid: ah_uuid.to_owned(),
                },
            )
            .await
        };
        done.map(|_| ()).map_err(|e| match e {
            verso_rpc::RpcError::Remote(r) => {
                format!("the agent of {host}: {} ({})", r.message, r.kind)
            }
            e => format!("the agent of {host}: {e}"),
        })
    }

    /// Whether [`AgentNotifier::with_cyborg`] gave it a client of Cyborg's agent API.
    pub fn reaches_cyborg_agents(&self) -> bool {
        self.cyborg.is_some()
    }

    /// [`AgentNotifier::program`] for a host whose agent serves Cyborg's agent API only:
    /// Cyborg 17's `fpga_program(controlpath_id, bitstream_uuid, driver_name)` on
    /// `cyborg-agent`, the control path as Cyborg's conductor sends it (`PCI`, the
    /// address as `cpid_info`), waiting [`PROGRAM_TIMEOUT`]. Cyborg's drivers answer
    /// `false` when the tool failed: that, a refusal or silence is `ProgramFailed` with
    /// the reason.
    pub async fn program_cyborg(
        &self,
        host: &str,
        address: &str,
        bitstream: &str,
        driver_name: &str,
    ) -> Result<(), RemoteError> {
        let failed = |message: String| {
            RemoteError::new(ErrorKind::ProgramFailed.as_str(), ERROR_MODULE, message)
        };
        let Some(client) = &self.cyborg else {
            return Err(failed(format!(
                "{host} runs Cyborg's agent API and this conductor has no client of it ([cyborg] serve_agents)"
            )));
        };
        let cpid_info = crate::cyborg::cpid_info(address)
            .ok_or_else(|| failed(format!("{address} is not a PCI address")))?;
        let ctx = RequestContext::new(format!("req-program-{bitstream}"));
        let answer = client
            .prepare()
            .server(host)
            .timeout(PROGRAM_TIMEOUT)
            .call_method(
                &ctx,
                accel_cyborg17::rpc::FpgaProgram {
                    controlpath_id: serde_json::json!({"cpid_type": "PCI", "cpid_info": cpid_info}),
                    bitstream_uuid: bitstream.to_owned(),
                    driver_name: driver_name.to_owned(),
                },
            )
            .await
            .map_err(|e| match e {
                verso_rpc::RpcError::Remote(r) => failed(format!(
                    "Cyborg agent of {host}: {} ({})",
                    r.message, r.kind
                )),
                e => failed(format!(
                    "the Cyborg agent of {host} did not program {address}: {e}"
                )),
            })?;
        match answer {
            serde_json::Value::Bool(true) => Ok(()),
            other => Err(failed(format!(
                "the Cyborg agent of {host} answered {other} programming {address} (its driver failed)"
            ))),
        }
    }
}

/// Casts a `cleanup_device` to `host`'s agent through `client`, capped by
/// `[upgrade_levels] option`; what happened.
async fn cast_cleanup<M: verso_rpc::RpcMethod>(
    client: &RpcClient,
    option: &str,
    host: &str,
    uuid: &str,
    message: M,
) -> CleanupNotice {
    if !client.can_send_version(M::spec().since) {
        let cap = client
            .cap()
            .map_or_else(|| "unset".into(), |v| v.to_string());
        tracing::info!(host, uuid, %cap, "cleanup_device needs agent API 1.1 above [upgrade_levels] {option}: left for the agent's scan");
        return CleanupNotice::LeftForScan { cap };
    }
    let ctx = RequestContext::new(format!("req-cleanup-{uuid}"));
    match client
        .prepare()
        .server(host)
        .cast_method(&ctx, message)
        .await
    {
        Ok(()) => {
            tracing::info!(host, uuid, api = option, "cleanup_device sent");
            CleanupNotice::Sent
        }
        Err(e) => {
            tracing::warn!(host, uuid, api = option, error = %e, "cleanup_device not sent: left for the agent's scan");
            CleanupNotice::SendFailed(e.to_string())
        }
    }
}

/// How long the conductor waits for an agent to program an FPGA: the download and the
/// tool (`[fpga] program_timeout`, 600 s by default, on the agent) with room to spare.
pub const PROGRAM_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(900);

impl AgentNotifier {
    /// Asks the agent of `host` to program the FPGA at `address` with `bitstream` and
    /// waits for it ([`PROGRAM_TIMEOUT`]). Refused (`ProgramFailed`, nothing sent) while
    /// `[upgrade_levels] agent` is below 1.2; the agent's refusal or silence is
    /// `ProgramFailed` with its reason.
    pub async fn program(
        &self,
        host: &str,
        address: &str,
        bitstream: &str,
    ) -> Result<(), RemoteError> {
        let failed = |message: String| {
            RemoteError::new(ErrorKind::ProgramFailed.as_str(), ERROR_MODULE, message)
        };
        if !self.client.can_send_version(PROGRAM_FPGA_VERSION) {
            let cap = self
                .client
                .cap()
                .map_or_else(|| "unset".into(), |v| v.to_string());
            return Err(failed(format!(
                "program_fpga needs agent API {PROGRAM_FPGA_VERSION}, above [upgrade_levels] \
                 agent ({cap}): raise it once every agent runs this release"
            )));
        }
        let ctx = RequestContext::new(format!("req-program-{bitstream}"));
        self.client
            .prepare()
            .server(host)
            .timeout(PROGRAM_TIMEOUT)
            .call_method(
                &ctx,
                ProgramFpga {
                    address: address.to_owned(),
                    bitstream_uuid: bitstream.to_owned(),
                },
            )
            .await
            .map_err(|e| match e {
                verso_rpc::RpcError::Remote(r) => failed(format!("agent of {host}: {}", r.message)),
                e => failed(format!(
                    "the agent of {host} did not program {address}: {e}"
                )),
            })
    }
}

/// The mediated device of a request's `MDEV` attach handle, as its host's agent names
/// it: the handle's UUID (the mdev's), the host, and from the attach info as Cyborg's
/// GPU driver writes it (`{"asked_type", "bus", "device", "domain", "function",
/// "vgpu_mark"}`) the GPU's PCI address and the mdev type, `None` when it names none.
struct Mdev<'a> {
    handle: &'a str,
    host: &'a str,
    info: &'a str,
    gpu: Option<(String, String)>,
}

impl<'a> Mdev<'a> {
    /// `row`'s, or `None` when the request holds no `MDEV` handle.
    fn of(row: &'a ArqRow) -> Option<Mdev<'a>> {
        if row.attach_handle_type.as_deref() != Some("MDEV") {
            return None;
        }
        let info = row.attach_handle_info.as_deref().unwrap_or_default();
        Some(Mdev {
            handle: row.attach_handle_uuid.as_deref()?,
            host: row.hostname.as_deref().unwrap_or_default(),
            info,
            gpu: gpu_of(info),
        })
    }

    /// Has the host's agent make (`create`) or remove it; the reason when it did not.
    async fn ask(&self, agents: Option<&AgentNotifier>, create: bool) -> Result<(), String> {
        let Some((pci, asked_type)) = &self.gpu else {
            return Err(format!(
                "attach info {:?} names no GPU and mdev type",
                self.info
            ));
        };
        match agents {
            Some(agents) => {
                agents
                    .mdev(self.host, pci, asked_type, self.handle, create)
                    .await
            }
            None => Err("this conductor has no client of the agents".to_owned()),
        }
    }
}

/// The GPU's PCI address and the mdev type an `MDEV` handle's attach info names.
fn gpu_of(attach_info: &str) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(attach_info).ok()?;
    let asked_type = v.get("asked_type")?.as_str()?.to_owned();
    Some((crate::cyborg::pci_address(attach_info)?, asked_type))
}

/// The mediated device of `row`'s `MDEV` handle, made on its host through Cyborg's
/// agent API (`create_vgpu_mdev(pci_addr, asked_type, ah_uuid)`, the handle's UUID the
/// mdev's) as Cyborg's conductor makes it at bind: only agents on Cyborg's agent API
/// report `MDEV` handles. Nothing for other handles. On failure the request is
/// unbound (its handle free again) and the bind answers `MdevFailed`.
pub(super) async fn make_mdev(
    db: &Db,
    agents: Option<&AgentNotifier>,
    row: &ArqRow,
) -> Result<(), RemoteError> {
    let Some(mdev) = Mdev::of(row) else {
        return Ok(());
    };
    let (host, handle) = (mdev.host, mdev.handle);
    let Err(why) = mdev.ask(agents, true).await else {
        tracing::info!(arq = %row.uuid, %host, %handle, "mediated device made");
        return Ok(());
    };
    tracing::error!(arq = %row.uuid, %host, %handle, %why, "no mediated device: the request is released");
    if let Err(e) = db.unbind_with(&row.uuid, Release::Immediate).await {
        tracing::error!(arq = %row.uuid, error = %e, "releasing the request after the failed mediated device failed");
    }
    Err(RemoteError::new(
        ErrorKind::MdevFailed.as_str(),
        ERROR_MODULE,
        format!(
            "binding {} on {host}: no mediated device for attach handle {handle}: {why}",
            row.uuid
        ),
    ))
}

/// Removes the mediated device of the `MDEV` handle the request `before` holds, before
/// the handle is released, as Cyborg's unbind does: nothing to do for other requests.
/// When the host cannot remove it, the request becomes `UnbindFailed`, keeping the
/// handle (given back, a later bind would make a device that already exists), and the
/// error is `MdevFailed`; an unbind or delete of it tries again.
pub(super) async fn remove_mdev(
    db: &Db,
    agents: Option<&AgentNotifier>,
    before: &ArqRow,
) -> Result<(), RemoteError> {
    let Some(mdev) = Mdev::of(before) else {
        return Ok(());
    };
    let (host, handle, info) = (mdev.host, mdev.handle, mdev.info);
    if mdev.gpu.is_none() {
        // No device can be named (a bind would have refused this handle): nothing to
        // keep the handle for.
        tracing::error!(arq = %before.uuid, %host, %handle, info,
            "a released MDEV handle names no GPU and mdev type: no mediated device removed");
        return Ok(());
    }
    let Err(why) = mdev.ask(agents, false).await else {
        tracing::info!(arq = %before.uuid, %host, %handle, "mediated device removed");
        return Ok(());
    };
    tracing::error!(arq = %before.uuid, %host, %handle, %why,
        "the mediated device was not removed: the request keeps its handle, UnbindFailed");
    if let Err(e) = db.unbind_failed(&before.uuid).await {
        tracing::error!(arq = %before.uuid, error = %e, "marking the request UnbindFailed failed");
    }
    Err(RemoteError::new(
        ErrorKind::MdevFailed.as_str(),
        ERROR_MODULE,
        format!(
            "releasing {} on {host}: mediated device {handle} not removed (the request is \
             UnbindFailed and keeps it; unbind or delete it again): {why}",
            before.uuid
        ),
    ))
}

/// Has `host`'s agent program the FPGA at `control_path_id` with `bitstream` on the wire
/// it reports on ([`host_wire`]): Cyborg's agent API (`fpga_program`, with
/// `driver_name`) for a host on Cyborg's, accel's (`program_fpga`) for one on accel's.
/// A host with no recorded wire is programmed through Cyborg's when the fleet record
/// knows it only from Cyborg's reports (a Cyborg 17 agent heartbeats nowhere), through
/// accel's otherwise. `ProgramFailed` with the reason when it was not.
pub(super) async fn program_on_host(
    db: &Db,
    agents: Option<&AgentNotifier>,
    witness: Option<&ReportWitness>,
    host: &str,
    control_path_id: &str,
    bitstream: &str,
    driver_name: &str,
) -> Result<(), RemoteError> {
    let Some(agents) = agents else {
        return Err(RemoteError::new(
            ErrorKind::ProgramFailed.as_str(),
            ERROR_MODULE,
            "this conductor has no client of the agents".to_owned(),
        ));
    };
    let on_cyborg = match host_wire(db, host).await {
        Some(wire) => wire == AgentWire::Cyborg,
        None => match witness {
            Some(w) => reports_only(w, host).await && agents.reaches_cyborg_agents(),
            None => false,
        },
    };
    if on_cyborg {
        agents
            .program_cyborg(host, control_path_id, bitstream, driver_name)
            .await
    } else {
        agents.program(host, control_path_id, bitstream).await
    }
}

/// The wire `host`'s agent reports on, as recorded; `None` when none is, or when the
/// record cannot be read (logged: the caller falls back as for a host without one).
async fn host_wire(db: &Db, host: &str) -> Option<AgentWire> {
    db.host_wire(host)
        .await
        .inspect_err(|e| tracing::warn!(host, error = %e, "cannot read the host's agent wire"))
        .ok()
        .flatten()
}

/// Whether `host`'s agent is known only from Cyborg's reports (it sends no heartbeat:
/// Cyborg's agent API is all it serves). A fleet record that cannot be read says no.
async fn reports_only(witness: &ReportWitness, host: &str) -> bool {
    match witness.fleet().members().await {
        Ok(members) => members
            .iter()
            .filter(|m| m.host == host)
            .any(|m| !m.heartbeats),
        Err(e) => {
            tracing::warn!(host, error = %e, "cannot read the fleet record: programming through accel's agent API");
            false
        }
    }
}

/// After a release: when `handle` went to `cleaning`, tell its host's agent (in the
/// background; the scan covers a lost notice).
pub(super) async fn notify_released(
    db: &Db,
    agents: Option<&AgentNotifier>,
    handle: Option<String>,
) {
    let (Some(agents), Some(handle)) = (agents, handle) else {
        return;
    };
    match db.host_handle(&handle).await {
        Ok(h) if h.cleanup_state == Some(accel_objects::CleanupState::Cleaning) => {
            let wire = host_wire(db, &h.hostname).await;
            let agents = agents.clone();
            tokio::spawn(async move {
                // On the host's wire only; both when it is not known (an agent listens
                // on one, the broker drops the other cast).
                if wire != Some(AgentWire::Cyborg) {
                    agents.cleanup_released(&h.hostname, &h.uuid).await;
                }
                if wire != Some(AgentWire::Accel)
                    && agents
                        .cyborg_cleanup_released(&h.hostname, &h.device_uuid)
                        .await
                        .is_none()
                    && wire.is_some()
                {
                    tracing::warn!(host = %h.hostname, handle = %h.uuid,
                        "the host's agent is on Cyborg's wire and this conductor has no client of it ([cyborg] serve_agents): left for the agent's scan");
                }
            });
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(handle, error = %e, "released handle not found"),
    }
}
