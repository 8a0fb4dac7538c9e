//! Cyborg 17's conductor on RabbitMQ: [`accel_cyborg17::rpc::ConductorApi`] 1.0 on topic
//! `cyborg-conductor` (control exchange `cyborg`), as Cyborg's `ConductorManager`
//! serves it. Errors reach the caller as Cyborg's exceptions (module
//! `cyborg.common.exception`), which a Cyborg service's oslo.messaging rebuilds.

use crate::report::{ReportError, Reports};
use crate::requests::{RequestError, Requests};
use accel_cyborg17::rpc::{
    ArqApplyPatch, ArqCreate, ArqDeleteByInstanceUuid, ArqDeleteByUuid, DeviceProfileCreate,
    DeviceProfileDelete, ReportData, CONDUCTOR_TOPIC,
};
use std::sync::Arc;
use verso::Version;
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcError, RpcServer, ServerHandle, Target};

/// The module of the errors this conductor raises: Cyborg's own.
pub const ERROR_MODULE: &str = "cyborg.common.exception";

/// The conductor API version served: Cyborg 17's.
pub const VERSION: Version = Version::new(1, 0);

/// A report error as the Cyborg exception that stands for it.
pub fn to_remote(e: &ReportError) -> RemoteError {
    let kind = match e {
        ReportError::Invalid(_) => "InvalidParameterValue",
        ReportError::Db(_) => "CyborgException",
        ReportError::Placement(p) => p.cyborg_exception(),
    };
    RemoteError::new(kind, ERROR_MODULE, e.to_string())
}

/// A profile or request error as the Cyborg exception that stands for it.
pub fn request_to_remote(e: &RequestError) -> RemoteError {
    RemoteError::new(e.cyborg_exception(), ERROR_MODULE, e.to_string())
}

/// What the conductor serves: agents' reports, and the API's profiles and requests.
#[derive(Clone, Debug)]
pub struct Conductor {
    /// `report_data`.
    pub reports: Reports,
    /// Profiles and requests.
    pub requests: Requests,
}

fn refused(method: &'static str) -> impl Fn(RequestError) -> RemoteError {
    move |e| {
        tracing::warn!(method, error = %e, "refused");
        request_to_remote(&e)
    }
}

/// The conductor's endpoint.
pub fn endpoint(conductor: Conductor) -> Endpoint {
    Endpoint::new(VERSION)
        .with_state(conductor)
        .handle(|c, _ctx, call: ReportData| async move {
            match c
                .reports
                .report(&call.hostname, &call.driver_device_list)
                .await
            {
                Ok(outcome) => {
                    tracing::info!(host = %call.hostname, ?outcome, "report applied");
                    Ok(())
                }
                Err(e) => {
                    tracing::warn!(host = %call.hostname, error = %e, "report failed");
                    Err(to_remote(&e))
                }
            }
        })
        .handle(|c, _ctx, call: DeviceProfileCreate| async move {
            c.requests
                .create_profile(&call.obj_devprof)
                .await
                .map_err(refused("device_profile_create"))
        })
        .handle(|c, _ctx, call: DeviceProfileDelete| async move {
            c.requests
                .delete_profile(&call.obj_devprof)
                .await
                .map_err(refused("device_profile_delete"))
        })
        .handle(|c, _ctx, call: ArqCreate| async move {
            c.requests
                .create_arq(&call.obj_extarq, Some(call.devprof_id))
                .await
                .map_err(refused("arq_create"))
        })
        .handle(|c, _ctx, call: ArqDeleteByUuid| async move {
            c.requests
                .delete_by_uuid(&call.arqs)
                .await
                .map_err(refused("arq_delete_by_uuid"))
        })
        .handle(|c, _ctx, call: ArqDeleteByInstanceUuid| async move {
            c.requests
                .delete_by_instance(&call.instance)
                .await
                .map_err(refused("arq_delete_by_instance_uuid"))
        })
        .handle(|c, ctx, call: ArqApplyPatch| async move {
            c.requests
                .apply_patch(&call.patch_list, &call.valid_fields, ctx.project.as_deref())
                .await
                .map_err(refused("arq_apply_patch"))
        })
        .into_endpoint()
}

/// Serves the conductor on `topic` (Cyborg's is [`CONDUCTOR_TOPIC`]) over `transport`,
/// whose control exchange must be Cyborg's (`cyborg`).
pub async fn serve(
    transport: Arc<dyn Transport>,
    conductor: Conductor,
    topic: &str,
) -> Result<ServerHandle, RpcError> {
    RpcServer::new(transport, Target::new(topic))
        .endpoint(endpoint(conductor))?
        .start()
        .await
}

/// The topic [`serve`] takes in a deployment: Cyborg's conductor topic.
pub const TOPIC: &str = CONDUCTOR_TOPIC;
