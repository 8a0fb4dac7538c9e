//! [`RpcServer`]: listens on a [`Target`] and dispatches each request to an [`Endpoint`],
//! with a bounded number of handlers running at once.
//!
//! Dispatch follows oslo.messaging's dispatcher: an endpoint matches when its namespace
//! equals the request's (`None` matches no namespace) and its version accepts the
//! request's (same major, request minor <= endpoint minor). The first matching endpoint
//! that has the method runs it; if matching endpoints exist but none has the method, the
//! error is [`RpcError::NoSuchMethod`], otherwise [`RpcError::UnsupportedVersion`].

use crate::endpoint::{Args, Endpoint, EndpointSpec, Method};
use crate::message::{Message, Reply, Request};
use crate::serializer::{NoOpSerializer, Serializer};
use crate::transport::{Incoming, Listener, Transport};
use crate::{RemoteError, RpcError, Target};
use futures::FutureExt;
use serde_json::{Map, Value};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinHandle;

/// How many handlers run at once unless told otherwise (oslo.messaging's
/// `executor_thread_pool_size`).
pub const DEFAULT_MAX_CONCURRENCY: usize = 64;

/// Picks the endpoint for a request, checks its arguments and runs its handler. The
/// server's core, usable without a transport (e.g. to test endpoints).
///
/// ```
/// use serde_json::json;
/// use verso::{RequestContext, Version};
/// use verso_rpc::{message::Request, Dispatcher, Endpoint, MethodSpec, RpcError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), RpcError> {
/// let d = Dispatcher::new(vec![Endpoint::new(Version::new(1, 1))
///     .method(MethodSpec::new("ping", Version::new(1, 0)), |_ctx, _args| async { Ok(json!("pong")) })])?;
/// let req = |v: Version| Request {
///     method: "ping".into(), args: Default::default(), version: v, namespace: None,
///     context: RequestContext::new("r"),
/// };
/// assert_eq!(d.dispatch(req(Version::new(1, 0))).await?, json!("pong"));
/// assert!(matches!(d.dispatch(req(Version::new(2, 0))).await,
///     Err(RpcError::UnsupportedVersion { .. })));
/// # Ok(()) }
/// ```
pub struct Dispatcher {
    endpoints: Vec<Endpoint>,
    serializer: Arc<dyn Serializer>,
}

impl Dispatcher {
    /// A dispatcher over `endpoints` (each validated), with the no-op serializer.
    pub fn new(endpoints: Vec<Endpoint>) -> Result<Self, RpcError> {
        for e in &endpoints {
            e.validate()?;
        }
        Ok(Dispatcher {
            endpoints,
            serializer: Arc::new(NoOpSerializer),
        })
    }

    /// Uses `serializer` for arguments and results.
    pub fn with_serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// The declarations of every endpoint.
    pub fn specs(&self) -> Vec<EndpointSpec> {
        self.endpoints.iter().map(Endpoint::spec).collect()
    }

    /// Dispatches one request and returns the handler's result (serialized for the wire).
    pub async fn dispatch(&self, request: Request) -> Result<Value, RpcError> {
        let method = self.select(&request)?;
        let Request {
            method: name,
            args,
            version,
            context,
            ..
        } = request;
        if version < method.spec.since {
            return Err(RpcError::MethodNotInVersion {
                method: name,
                since: method.spec.since,
                requested: version,
            });
        }
        let args = method
            .spec
            .check_args(version, args)?
            .into_iter()
            .map(|(k, v)| Ok((k, self.serializer.deserialize_entity(&context, v)?)))
            .collect::<Result<Map<_, _>, RpcError>>()?;
        let run = method.handler.call(context.clone(), Args::from(args));
        let result = match AssertUnwindSafe(run).catch_unwind().await {
            Ok(result) => result?,
            Err(_) => {
                tracing::error!(method = %name, "RPC handler panicked");
                return Err(RemoteError::new(
                    "HandlerPanicked",
                    crate::error::VERSO_DISPATCHER,
                    format!("the server failed while running '{name}'; see its log"),
                )
                .into());
            }
        };
        self.serializer.serialize_entity(&context, result)
    }

    /// Dispatches a request dict and builds the reply dict (failures included).
    pub async fn handle(&self, message: Message) -> Message {
        let result = match Request::from_message(message) {
            Ok(request) => self.dispatch(request).await,
            Err(e) => Err(e),
        };
        Reply(result.map_err(|e| e.to_remote())).into_message()
    }

    fn select(&self, request: &Request) -> Result<&Method, RpcError> {
        let mut found_compatible = false;
        let mut available = Vec::new();
        for ep in &self.endpoints {
            if ep.namespace_name() != request.namespace.as_deref() {
                continue;
            }
            available.push(ep.version());
            if !ep.version().accepts(&request.version) {
                continue;
            }
            if let Some(m) = ep.find(&request.method) {
                return Ok(m);
            }
            found_compatible = true;
        }
        if found_compatible {
            Err(RpcError::NoSuchMethod {
                method: request.method.clone(),
            })
        } else {
            Err(RpcError::UnsupportedVersion {
                method: request.method.clone(),
                requested: request.version,
                available,
            })
        }
    }
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

/// An RPC server: endpoints, a target to listen on, a transport.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::json;
/// use verso::Version;
/// use verso_rpc::{transport::memory::MemoryTransport, Endpoint, MethodSpec, RpcServer, Target};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), verso_rpc::RpcError> {
/// let server = RpcServer::new(Arc::new(MemoryTransport::new()), Target::new("svc").with_server("s1"))
///     .endpoint(Endpoint::new(Version::new(1, 1))
///         .method(MethodSpec::new("ping", Version::new(1, 0)), |_ctx, _args| async { Ok(json!("pong")) }))?
///     .max_concurrency(16)
///     .start()
///     .await?;
/// server.stop().await; // stops receiving, waits for running handlers
/// # Ok(()) }
/// ```
pub struct RpcServer {
    transport: Arc<dyn Transport>,
    target: Target,
    endpoints: Vec<Endpoint>,
    max_concurrency: usize,
    serializer: Arc<dyn Serializer>,
}

impl RpcServer {
    /// A server for `target` over `transport`, with no endpoints yet.
    pub fn new(transport: Arc<dyn Transport>, target: Target) -> Self {
        RpcServer {
            transport,
            target,
            endpoints: Vec::new(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            serializer: Arc::new(NoOpSerializer),
        }
    }

    /// Adds an endpoint, refusing one that breaks a declaration rule
    /// ([`Endpoint::validate`]).
    pub fn endpoint(mut self, endpoint: Endpoint) -> Result<Self, RpcError> {
        endpoint.validate()?;
        self.endpoints.push(endpoint);
        Ok(self)
    }

    /// At most `n` handlers run at once (at least 1); further requests wait their turn.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n.max(1);
        self
    }

    /// Uses `serializer` for arguments and results.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self
    }

    /// The declarations of every endpoint.
    pub fn specs(&self) -> Vec<EndpointSpec> {
        self.endpoints.iter().map(Endpoint::spec).collect()
    }

    /// Subscribes to the target and starts serving in a background task.
    pub async fn start(self) -> Result<ServerHandle, RpcError> {
        let listener = self.transport.listen(&self.target).await?;
        let dispatcher = Arc::new(Dispatcher {
            endpoints: self.endpoints,
            serializer: self.serializer,
        });
        let permits = Arc::new(Semaphore::new(self.max_concurrency));
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(serve(listener, dispatcher, permits.clone(), stop_rx));
        tracing::debug!(target = %self.target, "RPC server started");
        Ok(ServerHandle {
            target: self.target,
            stop: Some(stop_tx),
            task,
            permits,
            max: self.max_concurrency,
        })
    }
}

impl std::fmt::Debug for RpcServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcServer")
            .field("target", &self.target)
            .field("endpoints", &self.endpoints)
            .field("max_concurrency", &self.max_concurrency)
            .finish_non_exhaustive()
    }
}

/// A running server. [`stop`](Self::stop) it to finish gracefully; dropping it stops
/// receiving without waiting.
#[must_use = "dropping the handle stops the server"]
#[derive(Debug)]
pub struct ServerHandle {
    target: Target,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    permits: Arc<Semaphore>,
    max: usize,
}

impl ServerHandle {
    /// The target served.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Stops receiving, then waits for the handlers still running. Requests received but
    /// not started are dropped (their callers see a transport error), as on a broker
    /// with at-most-once delivery.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.task).await {
            tracing::error!(error = %e, "RPC server loop ended abnormally");
        }
        let max = u32::try_from(self.max).unwrap_or(u32::MAX);
        // Every permit back means no handler is running.
        let _ = self.permits.acquire_many(max).await;
        tracing::debug!(target = %self.target, "RPC server stopped");
    }
}

async fn serve(
    mut listener: Listener,
    dispatcher: Arc<Dispatcher>,
    permits: Arc<Semaphore>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        // Take a permit first, so a saturated server stops taking messages (backpressure).
        let permit = tokio::select! {
            biased;
            _ = &mut stop => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let incoming = tokio::select! {
            biased;
            _ = &mut stop => break,
            i = listener.next() => match i {
                Some(i) => i,
                None => break,
            },
        };
        let dispatcher = dispatcher.clone();
        tokio::spawn(async move {
            handle(&dispatcher, incoming).await;
            drop(permit);
        });
    }
}

async fn handle(dispatcher: &Dispatcher, incoming: Incoming) {
    let (message, reply) = incoming.into_parts();
    match reply {
        Some(sink) => {
            let reply = dispatcher.handle(message).await;
            if let Err(e) = sink.send(reply).await {
                tracing::debug!(error = %e, "reply not delivered");
            }
        }
        None => {
            let result = match Request::from_message(message) {
                Ok(request) => dispatcher.dispatch(request).await.map(drop),
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "cast failed");
            }
        }
    }
}
