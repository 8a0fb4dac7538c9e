//! Cyborg 17's conductor on RabbitMQ: [`accel_cyborg17::rpc::ConductorApi`] 1.0 on topic
//! `cyborg-conductor` (control exchange `cyborg`), as Cyborg's `ConductorManager`
//! serves it. Errors reach the caller as Cyborg's exceptions (module
//! `cyborg.common.exception`), which a Cyborg service's oslo.messaging rebuilds.

use crate::report::{ReportError, Reports};
use accel_cyborg17::rpc::{ReportData, CONDUCTOR_TOPIC};
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

/// The conductor's endpoint over `reports`.
pub fn endpoint(reports: Reports) -> Endpoint {
    Endpoint::new(VERSION)
        .with_state(reports)
        .handle(|reports, _ctx, call: ReportData| async move {
            match reports
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
        .into_endpoint()
}

/// Serves the conductor on `topic` (Cyborg's is [`CONDUCTOR_TOPIC`]) over `transport`,
/// whose control exchange must be Cyborg's (`cyborg`).
pub async fn serve(
    transport: Arc<dyn Transport>,
    reports: Reports,
    topic: &str,
) -> Result<ServerHandle, RpcError> {
    RpcServer::new(transport, Target::new(topic))
        .endpoint(endpoint(reports))?
        .start()
        .await
}

/// The topic [`serve`] takes in a deployment: Cyborg's conductor topic.
pub const TOPIC: &str = CONDUCTOR_TOPIC;
