//! One way every long-running `accel` command stops what it runs: on SIGTERM or SIGINT,
//! or when a component ends on its own (an agent fenced by the conductor, the API's
//! server failing), every component stops taking work and finishes what it took, the
//! last started first (clients before the servers they call: agents, then the API,
//! then the conductor), all within one deadline; then the transports are closed, so the
//! last answers leave the process before it exits.

use accel_agent::service::{AgentStop, RunningAgent};
use accel_conductor::runtime::RunningConductor;
use futures::future::{select_all, BoxFuture, FutureExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use verso_rpc::transport::Transport;
use verso_rpc::ServerHandle;

/// A running component.
pub(crate) enum Part {
    /// accel's conductor (its RPC servers, the version-record refresher).
    Conductor(RunningConductor),
    /// An agent on `host`.
    Agent {
        /// Its host, for the exit message.
        host: String,
        /// The agent.
        running: RunningAgent,
    },
    /// The REST API's server: `stop` ends its accepting, `task` ends once the requests
    /// under way are answered.
    Api {
        /// Tells the server to stop.
        stop: oneshot::Sender<()>,
        /// The server.
        task: JoinHandle<()>,
    },
    /// An RPC server of its own (the Cyborg-facing ones).
    Server(ServerHandle),
    /// A background loop that holds nothing to finish (the Placement reconciler, the
    /// reports to Cyborg's conductor): aborted.
    Task(JoinHandle<()>),
}

/// Why the components are being stopped.
pub(crate) enum Ended {
    /// SIGTERM or SIGINT.
    Signal,
    /// An agent stopped on its own, for this reason.
    Agent {
        /// Its host.
        host: String,
        /// Why.
        stop: AgentStop,
    },
    /// The API's server ended without being asked.
    Api,
}

/// The components of one process, and their stop.
pub(crate) struct Lifecycle {
    parts: Vec<Part>,
    transports: Vec<Arc<dyn Transport>>,
    limit: Duration,
}

impl Lifecycle {
    /// Nothing yet; stopping takes at most `limit` (`[conductor] stop_timeout`).
    pub(crate) fn new(limit: Duration) -> Lifecycle {
        Lifecycle {
            parts: Vec::new(),
            transports: Vec::new(),
            limit,
        }
    }

    /// A component that started.
    pub(crate) fn push(&mut self, part: Part) {
        self.parts.push(part);
    }

    /// A transport closed once every component stopped.
    pub(crate) fn close_at_end(&mut self, transport: Arc<dyn Transport>) {
        self.transports.push(transport);
    }

    /// Waits for a signal, or for a component to end on its own.
    pub(crate) async fn ended(&mut self) -> Ended {
        let mut waits: Vec<BoxFuture<'_, Ended>> = vec![verso_rpc::shutdown::shutdown_signal()
            .map(|()| Ended::Signal)
            .boxed()];
        for part in &mut self.parts {
            match part {
                Part::Agent { host, running } => {
                    let host = host.clone();
                    waits.push(
                        running
                            .stopped()
                            .map(move |stop| Ended::Agent { host, stop })
                            .boxed(),
                    );
                }
                Part::Api { task, .. } => waits.push((&mut *task).map(|_| Ended::Api).boxed()),
                Part::Conductor(_) | Part::Server(_) | Part::Task(_) => {}
            }
        }
        select_all(waits).await.0
    }

    /// Stops every component, the last started first, within the limit, then closes the
    /// transports. `false` when something was still running at the deadline (it was
    /// abandoned).
    pub(crate) async fn stop(self) -> bool {
        let deadline = Instant::now() + self.limit;
        let mut finished = true;
        for part in self.parts.into_iter().rev() {
            let left = deadline.saturating_duration_since(Instant::now());
            finished &= match part {
                Part::Conductor(c) => c.stop_within(left).await,
                Part::Agent { running, .. } => {
                    tokio::time::timeout(left, running.stop()).await.is_ok()
                }
                Part::Api { stop, task } => {
                    let _ = stop.send(());
                    // Ended on its own already (what `ended` saw): nothing to wait for.
                    task.is_finished() || tokio::time::timeout(left, task).await.is_ok()
                }
                Part::Server(server) => tokio::time::timeout(left, server.stop()).await.is_ok(),
                Part::Task(task) => {
                    task.abort();
                    true
                }
            };
        }
        for transport in self.transports {
            transport.close().await;
        }
        finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API part whose server drains for `drain` after it is told to stop.
    fn api(drain: Duration) -> (Part, Arc<std::sync::atomic::AtomicBool>) {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stop, stopping) = oneshot::channel::<()>();
        let finished = done.clone();
        let task = tokio::spawn(async move {
            let _ = stopping.await;
            tokio::time::sleep(drain).await;
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        (Part::Api { stop, task }, done)
    }

    #[tokio::test]
    async fn stop_lets_work_finish_within_the_limit_and_abandons_it_after() {
        let mut parts = Lifecycle::new(Duration::from_secs(5));
        let (server, drained) = api(Duration::from_millis(50));
        parts.push(server);
        let background = tokio::spawn(std::future::pending::<()>());
        let aborted = background.abort_handle();
        parts.push(Part::Task(background));
        assert!(parts.stop().await, "finished within the limit");
        assert!(drained.load(std::sync::atomic::Ordering::SeqCst));
        tokio::task::yield_now().await;
        assert!(aborted.is_finished(), "a background loop is aborted");

        let mut parts = Lifecycle::new(Duration::from_millis(20));
        let (server, drained) = api(Duration::from_secs(60));
        parts.push(server);
        assert!(!parts.stop().await, "abandoned at the limit");
        assert!(!drained.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_server_that_ends_on_its_own_ends_the_wait() {
        let mut parts = Lifecycle::new(Duration::from_secs(5));
        let (stop, _never) = oneshot::channel::<()>();
        parts.push(Part::Api {
            stop,
            task: tokio::spawn(async {}),
        });
        let ended = tokio::time::timeout(Duration::from_secs(5), parts.ended())
            .await
            .expect("the API's end is seen");
        assert!(matches!(ended, Ended::Api));
        // Already ended: stopping does not wait for it again.
        assert!(parts.stop().await);
    }
}
