//! Starting the agent: Cyborg's agent API 1.0 served as the host (topic `cyborg-agent`,
//! server = the host), and the host's devices reported to `cyborg-conductor` at once and
//! then every `[agent] report_interval`, as Cyborg's agent's periodic
//! `update_available_resource` does. A report that fails is logged and tried again at
//! the next interval (the conductor may be restarting, or the compute node not yet in
//! Placement); the agent keeps serving.

use crate::config::AgentConfig;
use crate::cyborg::{serve, CyborgReporter};
use crate::fpga::{Glance, Programmer};
use accel_cyborg17::keystone::Session;
use accel_cyborg17::service::{connect, ConnectError};
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcError, ServerHandle};

/// Why the agent did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `[glance]` cannot make a session.
    #[error("[glance]: {0}")]
    Glance(String),
    /// The broker cannot be had.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The agent's topic could not be served.
    #[error("serving cyborg-agent: {0}")]
    Serve(#[from] RpcError),
}

impl StartError {
    /// The binary's exit status for it: 2 when the configuration is refused, 1 when the
    /// broker could not be had.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Connect(e) => e.exit_code(),
            StartError::Serve(_) => 1,
            _ => 2,
        }
    }
}

/// What the last report came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reported {
    /// None made yet.
    Nothing,
    /// So many devices reported.
    Devices(usize),
    /// It failed, for this reason.
    Failed(String),
}

/// A started agent.
pub struct Running {
    server: ServerHandle,
    stop: oneshot::Sender<()>,
    reports: JoinHandle<()>,
    reported: watch::Receiver<(u64, Reported)>,
}

impl Running {
    /// The reports made so far and what the last one came to; changes at every report.
    pub fn reported(&self) -> watch::Receiver<(u64, Reported)> {
        self.reported.clone()
    }

    /// What the first report came to, once it is made.
    pub async fn first_report(&self) -> Reported {
        let mut reported = self.reported.clone();
        let first = match reported.wait_for(|(n, _)| *n >= 1).await {
            Ok(r) => r.1.clone(),
            // The report loop ended (the agent stopped) before reporting.
            Err(_) => Reported::Nothing,
        };
        first
    }

    /// Stops reporting, then serving once the calls in hand are answered.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.reports.await;
        self.server.stop().await;
    }
}

/// Starts the agent `config` describes on RabbitMQ (`transport_url`, exchange `cyborg`).
pub async fn start(config: &AgentConfig) -> Result<Running, StartError> {
    let transport = connect(&config.transport_url).await?;
    start_with(config, transport).await
}

/// Starts the agent on `transport`, whose control exchange must be Cyborg's (an
/// embedding's in-process transport, or RabbitMQ).
pub async fn start_with(
    config: &AgentConfig,
    transport: Arc<dyn Transport>,
) -> Result<Running, StartError> {
    let programmer = match &config.fpga {
        Some(fpga) => {
            let session = Session::new(fpga.glance.auth.clone())
                .map_err(|e| StartError::Glance(e.to_string()))?;
            let glance = Glance::new(session, fpga.glance.endpoint_override.clone());
            Programmer::new(glance, fpga.options.clone()).map(Arc::new)
        }
        None => None,
    };
    let server = serve(
        transport.clone(),
        &config.host,
        config.sysfs_root.clone(),
        programmer,
    )
    .await?;
    let reporter = CyborgReporter::new(
        transport,
        config.host.clone(),
        config.sysfs_root.clone(),
        config.rpc_timeout,
    );
    let (stop, mut stopped) = oneshot::channel::<()>();
    let (tell, reported) = watch::channel((0, Reported::Nothing));
    let interval = config.report_interval;
    let host = config.host.clone();
    let reports = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut n = 0;
        loop {
            tokio::select! {
                _ = &mut stopped => return,
                _ = ticks.tick() => {}
            }
            n += 1;
            let outcome = tokio::select! {
                _ = &mut stopped => return,
                r = reporter.report() => r,
            };
            let outcome = match outcome {
                Ok(devices) => Reported::Devices(devices),
                Err(e) => {
                    let reason = e.to_string();
                    tracing::warn!(%host, error = %reason, "report to Cyborg's conductor failed; trying again at the next interval");
                    Reported::Failed(reason)
                }
            };
            tell.send_replace((n, outcome));
        }
    });
    Ok(Running {
        server,
        stop,
        reports,
        reported,
    })
}
