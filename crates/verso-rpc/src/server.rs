//! [`RpcServer`]: listens on a [`Target`] and dispatches each request to an [`Endpoint`],
//! with a bounded number of handlers running at once.
//!
//! Dispatch follows oslo.messaging's dispatcher: an endpoint matches when its namespace
//! equals the request's (`None` matches no namespace) and its version accepts the
//! request's (same major, request minor <= endpoint minor). The first matching endpoint
//! that has the method runs it; if matching endpoints exist but none has the method, the
//! error is [`RpcError::NoSuchMethod`], otherwise [`RpcError::UnsupportedVersion`].

use crate::endpoint::{Args, Endpoint, EndpointSpec, HandlerResult, Method};
use crate::layer::{
    GlobalConcurrencyLimitLayer, RequestLog, RequestLogLayer, Serialize, SerializerLayer,
};
use crate::message::{Reply, Request};
use crate::serializer::{NoOpSerializer, Serializer};
use crate::transport::{Incoming, Listener, Transport};
use crate::{RemoteError, RpcError, Target};
use futures::future::{BoxFuture, CatchUnwind};
use futures::FutureExt;
use pin_project_lite::pin_project;
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{oneshot, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tower::limit::ConcurrencyLimit;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

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
}

impl Dispatcher {
    /// A dispatcher over `endpoints` (each validated).
    pub fn new(endpoints: Vec<Endpoint>) -> Result<Self, RpcError> {
        for e in &endpoints {
            e.validate()?;
        }
        Ok(Dispatcher { endpoints })
    }

    /// The declarations of every endpoint.
    pub fn specs(&self) -> Vec<EndpointSpec> {
        self.endpoints.iter().map(Endpoint::spec).collect()
    }

    /// Dispatches one request and returns the handler's result.
    pub async fn dispatch(&self, request: Request) -> Result<Value, RpcError> {
        self.start(request)?.await
    }

    /// The synchronous part of dispatch: picks the method, checks the arguments and
    /// starts the handler; the future finishes it (a panic in the handler becomes a typed
    /// error). Kept out of the async part so the future a server spawns per request stays
    /// small (it is copied into the task).
    fn start(&self, request: Request) -> Result<Finish, RpcError> {
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
        let args = method.spec.check_args(version, args)?;
        Ok(Finish {
            run: AssertUnwindSafe(method.handler.call(context, Args::from(args))).catch_unwind(),
            name,
        })
    }

    /// Dispatches a received request (or the reason it could not be read) and builds the
    /// reply, failures included.
    pub async fn handle(&self, request: Result<Request, RpcError>) -> Reply {
        let result = match request.and_then(|r| self.start(r)) {
            Ok(run) => run.await,
            Err(e) => Err(e),
        };
        Reply(result.map_err(|e| e.to_remote()))
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

pin_project! {
    /// A started handler: its result, a panic caught and turned into a typed error.
    pub struct Finish {
        #[pin]
        run: CatchUnwind<AssertUnwindSafe<BoxFuture<'static, HandlerResult>>>,
        name: String,
    }
}

impl std::future::Future for Finish {
    type Output = Result<Value, RpcError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        Poll::Ready(match std::task::ready!(this.run.poll(cx)) {
            Ok(result) => Ok(result?),
            Err(_) => {
                let name = &*this.name;
                tracing::error!(method = %name, "RPC handler panicked");
                Err(RemoteError::new(
                    "HandlerPanicked",
                    crate::error::VERSO_DISPATCHER,
                    format!("the server failed while running '{name}'; see its log"),
                )
                .into())
            }
        })
    }
}

impl std::fmt::Debug for Finish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finish")
            .field("method", &self.name)
            .finish_non_exhaustive()
    }
}

/// The server's pipeline as a [`tower::Service`]: a request in, the handler's result
/// out. [`RpcServer::layer`] wraps it in the application's own layers.
pub type ServerService = BoxCloneSyncService<Request, Value, RpcError>;

/// The [`Dispatcher`] as the innermost [`tower::Service`] of the server's pipeline.
#[derive(Debug, Clone)]
pub struct DispatchService(Arc<Dispatcher>);

impl DispatchService {
    /// The service of `dispatcher`.
    pub fn new(dispatcher: Dispatcher) -> Self {
        DispatchService(Arc::new(dispatcher))
    }
}

impl tower::Service<Request> for DispatchService {
    type Response = Value;
    type Error = RpcError;
    type Future = futures::future::Either<std::future::Ready<Result<Value, RpcError>>, Finish>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        use futures::future::Either;
        match self.0.start(request) {
            Ok(run) => Either::Right(run),
            Err(e) => Either::Left(std::future::ready(Err(e))),
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
/// Each message is taken from the transport only when the server's pipeline is ready
/// for it ([`crate::layer`]: request log, concurrency limit, the application's layers,
/// serializer, dispatch), so a saturated server leaves messages with the transport
/// (backpressure); a broker transport acknowledges a message when the server takes it.
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
    layers: Vec<Wrap>,
}

/// One layer of the application's, applied to the service built so far.
type Wrap = Box<dyn FnOnce(ServerService) -> ServerService + Send>;

impl RpcServer {
    /// A server for `target` over `transport`, with no endpoints yet.
    pub fn new(transport: Arc<dyn Transport>, target: Target) -> Self {
        RpcServer {
            transport,
            target,
            endpoints: Vec::new(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            serializer: Arc::new(NoOpSerializer),
            layers: Vec::new(),
        }
    }

    /// Wraps the server's pipeline (the serializer, endpoint selection, argument checks,
    /// the handler) in `layer`: metrics, tracing spans, rate limits, authorization. Each
    /// layer wraps what is there already, so the last one added runs first; add a
    /// [`tower::ServiceBuilder`] to add several in reading order. The application's
    /// layers run inside the request log and the concurrency limit ([`crate::layer`]). A
    /// layer that is not ready holds the next message back (backpressure). An error it
    /// returns is the caller's reply, as a dispatch error is; it may be any error, as
    /// tower's own middleware returns (`LoadShed`, `Timeout`, `Buffer`: boxed), made an
    /// `RpcError` by [`RpcError::from_layer`].
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use serde_json::json;
    /// use verso::{RequestContext, Version};
    /// use verso_rpc::{message::Request, transport::memory::MemoryTransport, Endpoint,
    ///     MethodSpec, RpcClient, RpcError, RpcServer, Target};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), RpcError> {
    /// // A metric: requests per method would go here; this one counts them.
    /// let seen = Arc::new(AtomicUsize::new(0));
    /// let count = seen.clone();
    /// let transport = Arc::new(MemoryTransport::new());
    /// let server = RpcServer::new(transport.clone(), Target::new("svc"))
    ///     .endpoint(Endpoint::new(Version::new(1, 0))
    ///         .method(MethodSpec::new("ping", Version::new(1, 0)), |_ctx, _args| async { Ok(json!("pong")) }))?
    ///     .layer(tower::ServiceBuilder::new().map_request(move |r: Request| {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///         r
    ///     }))
    ///     .start()
    ///     .await?;
    /// let client = RpcClient::new(transport, Target::new("svc"));
    /// client.call(&RequestContext::new("req-1"), "ping", "1.0", json!({})).await?;
    /// assert_eq!(seen.load(Ordering::Relaxed), 1);
    /// server.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<ServerService> + Send + 'static,
        L::Service: Service<Request, Response = Value> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request>>::Error: Into<tower::BoxError>,
        <L::Service as Service<Request>>::Future: Send + 'static,
    {
        // The layers' errors come back as `RpcError` here, at their edge.
        self.layers.push(Box::new(move |inner| {
            BoxCloneSyncService::new(layer.layer(inner).map_err(RpcError::from_layer))
        }));
        self
    }

    /// Adds an endpoint, refusing one that breaks a declaration rule
    /// ([`Endpoint::validate`]).
    pub fn endpoint(mut self, endpoint: Endpoint) -> Result<Self, RpcError> {
        endpoint.validate()?;
        self.endpoints.push(endpoint);
        Ok(self)
    }

    /// At most `n` handlers run at once (at least 1); further requests wait their turn
    /// with the transport.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n.max(1);
        self
    }

    /// Uses `serializer` for arguments and results ([`SerializerLayer`]).
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
        let permits = Arc::new(Semaphore::new(self.max_concurrency));
        let service = pipeline(
            Dispatcher {
                endpoints: self.endpoints,
            },
            self.serializer,
            self.layers,
            permits,
        );
        let tasks = TaskTracker::new();
        let (stop_tx, stop_rx) = oneshot::channel();
        let task = tokio::spawn(serve(listener, service, tasks.clone(), stop_rx));
        tracing::debug!(target = %self.target, "RPC server started");
        Ok(ServerHandle {
            target: self.target,
            stop: Some(stop_tx),
            task,
            tasks,
        })
    }
}

/// verso's outer server layers around `S` ([`crate::layer`]).
type Stack<S> = RequestLog<ConcurrencyLimit<S>>;

/// The server's pipeline: verso's layers around the serializer and dispatch, or around
/// the application's layers (boxed) around them.
type Pipeline = tower::util::Either<Stack<Serialize<DispatchService>>, Stack<ServerService>>;

/// Builds the server's pipeline ([`crate::layer`]): request log, concurrency limit over
/// `permits`, the application's `layers`, the serializer, dispatch.
fn pipeline(
    dispatcher: Dispatcher,
    serializer: Arc<dyn Serializer>,
    layers: Vec<Wrap>,
    permits: Arc<Semaphore>,
) -> Pipeline {
    let dispatch = ServiceBuilder::new()
        .layer(SerializerLayer::new(serializer))
        .service(DispatchService(Arc::new(dispatcher)));
    let outer = ServiceBuilder::new()
        .layer(RequestLogLayer)
        .layer(GlobalConcurrencyLimitLayer::with_semaphore(permits));
    if layers.is_empty() {
        return tower::util::Either::Left(outer.service(dispatch));
    }
    let mut inner = BoxCloneSyncService::new(dispatch);
    for wrap in layers {
        inner = wrap(inner);
    }
    tower::util::Either::Right(outer.service(inner))
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
    tasks: TaskTracker,
}

impl ServerHandle {
    /// The target served.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Stops receiving, then waits for the requests already taken: their handlers run to
    /// the end and their replies are sent. Messages not taken stay with the transport: a
    /// broker delivers them to another server of the topic, or again when this one
    /// comes back (duplicates of a request are dropped by its `_unique_id`).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Err(e) = (&mut self.task).await {
            tracing::error!(error = %e, "RPC server loop ended abnormally");
        }
        self.tasks.close();
        self.tasks.wait().await;
        tracing::debug!(target = %self.target, "RPC server stopped");
    }
}

/// Takes each message once the pipeline is ready for it and runs it in a task of its
/// own, until told to stop.
async fn serve(
    mut listener: Listener,
    mut service: Pipeline,
    tasks: TaskTracker,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        // Ready first (a handler slot is free, the application's layers allow it), so a
        // saturated server stops taking messages.
        let Some(ready) = unless_stopped(&mut stop, service.ready()).await else {
            break;
        };
        if let Err(e) = ready {
            tracing::error!(error = %e, "RPC server pipeline failed; the server stops");
            break;
        }
        let Some(incoming) = unless_stopped(&mut stop, listener.next()).await.flatten() else {
            break;
        };
        tasks.spawn(respond(&mut service, incoming));
    }
}

/// `fut`'s output, unless the server is told to stop first (checked first).
async fn unless_stopped<T>(
    stop: &mut oneshot::Receiver<()>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        _ = stop => None,
        v = fut => Some(v),
    }
}

/// Takes a message (a broker transport acknowledges the delivery now) and starts it on
/// the ready `service`; the future runs it to the end and sends a call's reply. A
/// message that cannot be read is logged here at warn (it has no request id) and a call
/// gets the typed failure.
fn respond(
    service: &mut Pipeline,
    mut incoming: Incoming,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    incoming.accept();
    let late = incoming
        .deadline()
        .and_then(|d| std::time::SystemTime::now().duration_since(d).ok());
    let (request, reply) = incoming.into_parts();
    let run = match request {
        Ok(r) if late.is_some() => {
            // The caller has given up: running it now would do work nobody is told
            // about (a bind answered 503 that binds anyway).
            let late_ms = late.map_or(0, |l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX));
            tracing::warn!(method = %r.method, request_id = %r.context.request_id, late_ms,
                "dropping a call whose caller's deadline has passed; not run");
            Err(RpcError::DeadlineExpired {
                method: r.method,
                late_ms,
            })
        }
        Ok(r) => Ok(service.call(r)),
        Err(e) => {
            tracing::warn!(error = %e, replied = reply.is_some(),
                "RPC request refused: the message cannot be read");
            Err(e)
        }
    };
    async move {
        let result = match run {
            Ok(run) => run.await,
            Err(e) => Err(e),
        };
        if let Some(sink) = reply {
            if let Err(e) = sink.send(Reply(result.map_err(|e| e.to_remote()))).await {
                tracing::debug!(error = %e, "reply not delivered");
            }
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod layer_tests;

#[cfg(test)]
mod ack_tests;
