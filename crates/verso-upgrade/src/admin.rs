//! The upgrade's RPC API (`upgrade`, version 1.0): how clients heartbeat, and how an
//! operator finalizes and asks for status, served by the server that owns the
//! [`Coordinator`] and called by any process with the deployment's transport.
//!
//! | method | arguments | reply |
//! |---|---|---|
//! | `upgrade_heartbeat` | `report`: [`MemberReport`] | [`HeartbeatReply`], or the typed [`Fenced`] (the client stops), or `HeartbeatNotRecorded` (the fleet record failed; the client retries) |
//! | `upgrade_finalize` | none | the state after the call (`finalizing`, `finalized`), or the typed [`FinalizeRefused`] naming each blocker |
//! | `upgrade_status` | none | [`DeploymentStatus`] |
//!
//! [`finalize_and_wait`] is what an admin command runs: it starts finalization (an
//! idempotent call) and polls status until every live client has finalized.

use crate::coordinator::{
    Coordinator, DeploymentStatus, Fenced, HeartbeatError, HeartbeatReply, MemberReport,
};
use crate::error::UpgradeError;
use crate::manager::UpgradeState;
use crate::version::ComponentVersion;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::{
    Endpoint, MethodSpec, RemoteError, RemoteException, RpcApi, RpcClient, RpcError, RpcMethod,
};

/// A client's heartbeat.
#[derive(RpcMethod, Debug)]
#[rpc(name = "upgrade_heartbeat", since = "1.0", reply = HeartbeatReply)]
pub struct Heartbeat {
    /// Who is reporting, and at which versions.
    pub report: MemberReport,
}

/// Starts (or continues) finalization.
#[derive(RpcMethod, Debug)]
#[rpc(name = "upgrade_finalize", since = "1.0", reply = UpgradeState)]
pub struct Finalize {}

/// The deployment's status.
#[derive(RpcMethod, Debug)]
#[rpc(name = "upgrade_status", since = "1.0", reply = DeploymentStatus)]
pub struct Status {}

/// The `upgrade` API.
#[derive(Debug)]
pub struct UpgradeApi;

impl RpcApi for UpgradeApi {
    const NAME: &'static str = "upgrade";
    const VERSION: Version = Version::new(1, 0);
    fn methods() -> Vec<&'static MethodSpec> {
        vec![Heartbeat::spec(), Finalize::spec(), Status::spec()]
    }
}

impl RemoteException for Fenced {
    const KIND: &'static str = "Fenced";
    const MODULE: &'static str = "verso_upgrade";
}

/// Finalization could not start or stopped: the blockers, or the failed action.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{message}")]
pub struct FinalizeRefused {
    /// What `UpgradeError` said.
    pub message: String,
    /// The components that keep it from starting (empty for a failed action).
    pub blockers: Vec<crate::coordinator::Blocker>,
}

impl RemoteException for FinalizeRefused {
    const KIND: &'static str = "FinalizeRefused";
    const MODULE: &'static str = "verso_upgrade";
}

/// The endpoint of the `upgrade` API over `coordinator`.
pub fn endpoint<V: ComponentVersion>(coordinator: Arc<Coordinator<V>>) -> Endpoint {
    Endpoint::for_api::<UpgradeApi>()
        .with_state(coordinator)
        .handle(
            |c: Arc<Coordinator<V>>, _ctx: RequestContext, h: Heartbeat| async move {
                c.heartbeat(h.report).await.map_err(|e| match e {
                    HeartbeatError::Fenced(f) => RemoteError::from_exception(&f),
                    // Not a fencing: the client retries at its next interval.
                    other => {
                        RemoteError::new("HeartbeatNotRecorded", "verso_upgrade", other.to_string())
                    }
                })
            },
        )
        .handle(
            |c: Arc<Coordinator<V>>, _ctx: RequestContext, _f: Finalize| async move {
                match c.finalize().await.and(Ok(())) {
                    Ok(()) => match c.status().await {
                        Ok(status) => Ok(status.state),
                        Err(e) => Err(RemoteError::new(
                            "UpgradeError",
                            "verso_upgrade",
                            e.to_string(),
                        )),
                    },
                    Err(e) => {
                        let blockers = match &e {
                            UpgradeError::Blocked(b) => b.clone(),
                            _ => Vec::new(),
                        };
                        Err(RemoteError::from_exception(&FinalizeRefused {
                            message: e.to_string(),
                            blockers,
                        }))
                    }
                }
            },
        )
        .handle(
            |c: Arc<Coordinator<V>>, _ctx: RequestContext, _s: Status| async move {
                c.refreshed_status()
                    .await
                    .map_err(|e| RemoteError::new("UpgradeError", "verso_upgrade", e.to_string()))
            },
        )
        .into_endpoint()
}

/// How [`finalize_and_wait`] ended.
#[derive(Debug)]
pub enum WaitOutcome {
    /// Every live client finalized (exit 0).
    Finalized(DeploymentStatus),
    /// Refused or stopped, with the reason (exit 1).
    Refused(FinalizeRefused),
    /// Still finalizing when the wait ran out (exit 3).
    TimedOut(DeploymentStatus),
}

impl WaitOutcome {
    /// The documented exit code: 0 finalized, 1 refused, 3 still finalizing.
    pub fn exit_code(&self) -> u8 {
        match self {
            WaitOutcome::Finalized(_) => 0,
            WaitOutcome::Refused(_) => 1,
            WaitOutcome::TimedOut(_) => 3,
        }
    }
}

/// Starts finalization through `client` (an `upgrade` API client) and polls status
/// every `poll` until finalized or `wait` has passed. Transport failures are errors
/// (exit 2 for a command).
pub async fn finalize_and_wait(
    client: &RpcClient,
    ctx: &RequestContext,
    wait: Duration,
    poll: Duration,
) -> Result<WaitOutcome, RpcError> {
    match client.call_method(ctx, Finalize {}).await {
        Ok(_) => {}
        Err(RpcError::Remote(r)) => {
            return match r.downcast::<FinalizeRefused>() {
                Some(refused) => Ok(WaitOutcome::Refused(refused)),
                None => Err(RpcError::Remote(r)),
            }
        }
        Err(e) => return Err(e),
    }
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let status = client.call_method(ctx, Status {}).await?;
        if status.state == UpgradeState::Finalized {
            return Ok(WaitOutcome::Finalized(status));
        }
        if let Some(failed) = &status.server.failed {
            return Ok(WaitOutcome::Refused(FinalizeRefused {
                message: failed.clone(),
                blockers: status.blockers.clone(),
            }));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(WaitOutcome::TimedOut(status));
        }
        tokio::time::sleep(poll).await;
    }
}
