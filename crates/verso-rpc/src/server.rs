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
use crate::message::{Message, Reply, Request};
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

    /// Dispatches a request dict and builds the reply dict, as a broker transport's peer
    /// sees them.
    pub async fn handle_message(&self, message: Message) -> Message {
        self.handle(Request::from_message(message))
            .await
            .into_message()
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
mod tests {
    use super::*;
    use crate::testing::Recording;
    use crate::transport::memory::MemoryTransport;
    use crate::{ArgSpec, ArgType, MethodSpec, RemoteException, RpcClient};
    use serde::{Deserialize, Serialize};
    use serde_json::json;
    use serde_json::Map;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use verso::{RequestContext, Version};

    fn v(major: u32, minor: u32) -> Version {
        Version::new(major, minor)
    }

    fn ctx() -> RequestContext {
        RequestContext::new("req-1")
    }

    fn ping_endpoint(version: Version) -> Endpoint {
        Endpoint::new(version).method(
            MethodSpec::new("ping", v(version.major(), 0)),
            move |_ctx, _args| async move { Ok(json!(version.to_string())) },
        )
    }

    async fn serve(t: &Arc<MemoryTransport>, topic: &str, eps: Vec<Endpoint>) -> ServerHandle {
        let mut s = RpcServer::new(t.clone(), Target::new(topic));
        for e in eps {
            s = s.endpoint(e).expect("valid endpoint");
        }
        s.start().await.expect("listening")
    }

    fn client(t: &Arc<MemoryTransport>, topic: &str) -> RpcClient {
        RpcClient::new(t.clone(), Target::new(topic))
    }

    #[tokio::test]
    async fn a_1_1_server_answers_a_1_0_call() {
        let t = Arc::new(MemoryTransport::new());
        let s = serve(&t, "c", vec![ping_endpoint(v(1, 1))]).await;
        let got = client(&t, "c")
            .call(&ctx(), "ping", "1.0", json!({}))
            .await
            .expect("1.1 serves 1.0");
        assert_eq!(got, json!("1.1"));
        s.stop().await;
    }

    #[tokio::test]
    async fn a_2_0_call_to_a_1_x_server_is_unsupported_naming_both_versions() {
        let t = Arc::new(MemoryTransport::new());
        let s = serve(&t, "c", vec![ping_endpoint(v(1, 1))]).await;
        let c = client(&t, "c");
        for requested in ["2.0", "1.2"] {
            let err = c
                .call(&ctx(), "ping", requested, json!({}))
                .await
                .expect_err("unsupported");
            let msg = err.to_string();
            match err {
                RpcError::UnsupportedVersion {
                    method,
                    requested: r,
                    available,
                } => {
                    assert_eq!(method, "ping");
                    assert_eq!(r.to_string(), requested);
                    assert_eq!(available, vec![v(1, 1)]);
                    assert!(msg.contains(requested) && msg.contains("1.1"), "{msg}");
                }
                other => panic!("expected UnsupportedVersion, got {other:?}"),
            }
        }
        s.stop().await;
    }

    #[tokio::test]
    async fn endpoints_are_picked_by_major_and_namespace() {
        let t = Arc::new(MemoryTransport::new());
        let s = serve(
            &t,
            "c",
            vec![
                ping_endpoint(v(1, 3)),
                ping_endpoint(v(2, 1)),
                ping_endpoint(v(1, 9)).namespace("admin"),
            ],
        )
        .await;
        let c = client(&t, "c");
        assert_eq!(
            c.call(&ctx(), "ping", "1.2", json!({})).await.expect("1.x"),
            json!("1.3")
        );
        assert_eq!(
            c.call(&ctx(), "ping", "2.0", json!({})).await.expect("2.x"),
            json!("2.1")
        );
        // 1.5 is in no endpoint of the default namespace, though `admin` has 1.9.
        assert!(matches!(
            c.call(&ctx(), "ping", "1.5", json!({})).await,
            Err(RpcError::UnsupportedVersion { available, .. }) if available == vec![v(1, 3), v(2, 1)]
        ));
        let admin = RpcClient::new(t.clone(), Target::new("c").with_namespace("admin"));
        assert_eq!(
            admin
                .call(&ctx(), "ping", "1.5", json!({}))
                .await
                .expect("admin"),
            json!("1.9")
        );
        let other = RpcClient::new(t.clone(), Target::new("c").with_namespace("nope"));
        assert!(matches!(
            other.call(&ctx(), "ping", "1.0", json!({})).await,
            Err(RpcError::UnsupportedVersion { available, .. }) if available.is_empty()
        ));
        s.stop().await;
    }

    #[tokio::test]
    async fn a_compatible_endpoint_without_the_method_is_no_such_method() {
        let t = Arc::new(MemoryTransport::new());
        let s = serve(&t, "c", vec![ping_endpoint(v(1, 1))]).await;
        assert!(matches!(
            client(&t, "c").call(&ctx(), "nope", "1.0", json!({})).await,
            Err(RpcError::NoSuchMethod { method }) if method == "nope"
        ));
        s.stop().await;
    }

    #[tokio::test]
    async fn a_method_newer_than_the_call_version_is_refused() {
        let t = Arc::new(MemoryTransport::new());
        let ep = Endpoint::new(v(1, 2))
            .method(MethodSpec::new("fresh", v(1, 2)), |_ctx, _args| async {
                Ok(Value::Null)
            });
        let s = serve(&t, "c", vec![ep]).await;
        let c = client(&t, "c");
        assert!(matches!(
            c.call(&ctx(), "fresh", "1.1", json!({})).await,
            Err(RpcError::MethodNotInVersion { since, requested, .. }) if since == v(1, 2) && requested == v(1, 1)
        ));
        c.call(&ctx(), "fresh", "1.2", json!({}))
            .await
            .expect("at 1.2");
        s.stop().await;
    }

    #[tokio::test]
    async fn arguments_are_checked_and_defaults_filled_over_the_wire() {
        let t = Arc::new(MemoryTransport::new());
        let ep = Endpoint::new(v(1, 1)).method(
            MethodSpec::new("get", v(1, 0))
                .arg(ArgSpec::required("id", ArgType::Int))
                .arg(ArgSpec::optional("deleted", ArgType::Bool, false).since(v(1, 1))),
            |_ctx, args: Args| async move { Ok(Value::Object(args.into_map())) },
        );
        let s = serve(&t, "c", vec![ep]).await;
        let c = client(&t, "c");
        assert_eq!(
            c.call(&ctx(), "get", "1.0", json!({"id": 1}))
                .await
                .expect("old client"),
            json!({"id": 1, "deleted": false})
        );
        assert!(matches!(
            c.call(&ctx(), "get", "1.1", json!({})).await,
            Err(RpcError::MissingArgument { argument, .. }) if argument == "id"
        ));
        assert!(matches!(
            c.call(&ctx(), "get", "1.1", json!({"id": 1, "colour": 2})).await,
            Err(RpcError::UnknownArgument { argument, .. }) if argument == "colour"
        ));
        assert!(matches!(
            c.call(&ctx(), "get", "1.1", json!({"id": "one"})).await,
            Err(RpcError::InvalidArgument { argument, .. }) if argument == "id"
        ));
        s.stop().await;
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct DeviceNotFound {
        device_id: u64,
    }
    impl std::fmt::Display for DeviceNotFound {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "device {} not found", self.device_id)
        }
    }
    impl RemoteException for DeviceNotFound {
        const KIND: &'static str = "DeviceNotFound";
        const MODULE: &'static str = "accel.errors";
    }

    #[tokio::test]
    async fn remote_errors_round_trip_with_their_kind() {
        let t = Arc::new(MemoryTransport::new());
        let ep = Endpoint::new(v(1, 0))
            .method(
                MethodSpec::new("get", v(1, 0)).arg(ArgSpec::required("id", ArgType::Int)),
                |_ctx, args: Args| async move {
                    let device_id = args.get::<u64>("id")?;
                    Err(DeviceNotFound { device_id }.into())
                },
            )
            .method(MethodSpec::new("boom", v(1, 0)), |_ctx, _args| async {
                Err(RemoteError::new("ValueError", "builtins", "bad value").with_field("why", "x"))
            });
        let s = serve(&t, "c", vec![ep]).await;
        let c = client(&t, "c");
        let err = c
            .call(&ctx(), "get", "1.0", json!({"id": 7}))
            .await
            .expect_err("raises");
        let remote = err.as_remote().expect("a remote error");
        assert_eq!(remote.kind, "DeviceNotFound");
        assert_eq!(remote.module, "accel.errors");
        assert_eq!(remote.message, "device 7 not found");
        assert_eq!(remote.fields["device_id"], 7);
        assert_eq!(
            remote.downcast::<DeviceNotFound>(),
            Some(DeviceNotFound { device_id: 7 })
        );

        match c.call(&ctx(), "boom", "1.0", json!({})).await {
            Err(RpcError::Remote(r)) => {
                assert_eq!(
                    (r.kind.as_str(), r.module.as_str()),
                    ("ValueError", "builtins")
                );
                assert_eq!(r.fields["why"], "x");
                assert!(r.downcast::<DeviceNotFound>().is_none());
            }
            other => panic!("expected a remote error, got {other:?}"),
        }
        s.stop().await;
    }

    #[tokio::test]
    async fn a_panicking_handler_is_a_typed_error_and_the_server_keeps_serving() {
        let t = Arc::new(MemoryTransport::new());
        let ep = ping_endpoint(v(1, 0)).method(
            MethodSpec::new("panics", v(1, 0)),
            |_ctx, _args| async move {
                let empty: Vec<u8> = Vec::new();
                Ok(json!(empty[1]))
            },
        );
        let s = serve(&t, "c", vec![ep]).await;
        let c = client(&t, "c");
        match c.call(&ctx(), "panics", "1.0", json!({})).await {
            Err(RpcError::Remote(r)) => assert_eq!(r.kind, "HandlerPanicked"),
            other => panic!("expected HandlerPanicked, got {other:?}"),
        }
        c.call(&ctx(), "ping", "1.0", json!({}))
            .await
            .expect("still serving");
        s.stop().await;
    }

    #[tokio::test]
    async fn a_slow_handler_does_not_block_a_fast_one() {
        let t = Arc::new(MemoryTransport::new());
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        let slow_done = Arc::new(AtomicUsize::new(0));
        let done = slow_done.clone();
        let ep =
            ping_endpoint(v(1, 0)).method(MethodSpec::new("slow", v(1, 0)), move |_ctx, _args| {
                let mut release = release_rx.clone();
                let done = done.clone();
                async move {
                    let _ = release.wait_for(|r| *r).await;
                    done.fetch_add(1, Ordering::SeqCst);
                    Ok(json!("slow"))
                }
            });
        let s = RpcServer::new(t.clone(), Target::new("c"))
            .endpoint(ep)
            .expect("valid")
            .max_concurrency(4)
            .start()
            .await
            .expect("listening");
        let c = client(&t, "c");
        let slow = tokio::spawn({
            let c = c.clone();
            async move { c.call(&ctx(), "slow", "1.0", json!({})).await }
        });
        tokio::task::yield_now().await;
        let fast = c
            .prepare()
            .timeout(Duration::from_secs(5))
            .call(&ctx(), "ping", "1.0", json!({}))
            .await
            .expect("fast call answered while the slow one runs");
        assert_eq!(fast, json!("1.0"));
        assert_eq!(slow_done.load(Ordering::SeqCst), 0, "slow is still running");
        release_tx.send(true).expect("slow handler waiting");
        assert_eq!(
            slow.await.expect("joined").expect("slow answered"),
            json!("slow")
        );
        s.stop().await;
    }

    #[tokio::test]
    async fn handler_concurrency_is_bounded() {
        let t = Arc::new(MemoryTransport::new());
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (r, p) = (running.clone(), peak.clone());
        let ep =
            Endpoint::new(v(1, 0)).method(MethodSpec::new("work", v(1, 0)), move |_ctx, _args| {
                let (r, p) = (r.clone(), p.clone());
                async move {
                    let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    r.fetch_sub(1, Ordering::SeqCst);
                    Ok(Value::Null)
                }
            });
        let s = RpcServer::new(t.clone(), Target::new("c"))
            .endpoint(ep)
            .expect("valid")
            .max_concurrency(2)
            .start()
            .await
            .expect("listening");
        let c = client(&t, "c");
        let calls: Vec<_> = (0..6)
            .map(|_| {
                let c = c.clone();
                tokio::spawn(async move { c.call(&ctx(), "work", "1.0", json!({})).await })
            })
            .collect();
        for call in calls {
            call.await.expect("joined").expect("answered");
        }
        assert_eq!(peak.load(Ordering::SeqCst), 2, "two at a time, never more");
        s.stop().await;
    }

    fn named(name: &'static str) -> Endpoint {
        Endpoint::new(v(1, 0)).method(
            MethodSpec::new("who", v(1, 0)),
            move |_ctx, _args| async move { Ok(json!(name)) },
        )
    }

    #[tokio::test]
    async fn calls_to_a_topic_go_round_robin_and_server_targets_go_to_one() {
        let t = Arc::new(MemoryTransport::new());
        let a = RpcServer::new(t.clone(), Target::new("agent").with_server("a"))
            .endpoint(named("a"))
            .expect("valid")
            .start()
            .await
            .expect("a");
        let b = RpcServer::new(t.clone(), Target::new("agent").with_server("b"))
            .endpoint(named("b"))
            .expect("valid")
            .start()
            .await
            .expect("b");
        let c = client(&t, "agent");
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(c.call(&ctx(), "who", "1.0", json!({})).await.expect("call"));
        }
        assert_eq!(seen, vec![json!("a"), json!("b"), json!("a"), json!("b")]);
        for _ in 0..3 {
            let got = c
                .prepare()
                .server("b")
                .call(&ctx(), "who", "1.0", json!({}))
                .await;
            assert_eq!(got.expect("to b"), json!("b"));
        }
        a.stop().await;
        b.stop().await;
    }

    #[tokio::test]
    async fn casts_and_fanout_run_the_handlers() {
        let t = Recording::default();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut servers = Vec::new();
        for name in ["a", "b", "c"] {
            let tx = tx.clone();
            let ep = Endpoint::new(v(1, 0)).method(
                MethodSpec::new("note", v(1, 0)).arg(ArgSpec::required("n", ArgType::Int)),
                move |_ctx, args: Args| {
                    let tx = tx.clone();
                    async move {
                        let _ = tx.send((name, args.get::<i64>("n")?));
                        Ok(Value::Null)
                    }
                },
            );
            servers.push(
                RpcServer::new(Arc::new(t.clone()), Target::new("agent").with_server(name))
                    .endpoint(ep)
                    .expect("valid")
                    .start()
                    .await
                    .expect("listening"),
            );
        }
        let c = RpcClient::new(Arc::new(t.clone()), Target::new("agent"));
        c.prepare()
            .fanout()
            .cast(&ctx(), "note", "1.0", json!({"n": 1}))
            .await
            .expect("fanout");
        c.prepare()
            .server("b")
            .cast(&ctx(), "note", "1.0", json!({"n": 2}))
            .await
            .expect("cast");
        // A cast that fails on the server is logged there; the caller does not wait.
        c.cast(&ctx(), "note", "1.0", json!({}))
            .await
            .expect("sent");
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(rx.recv().await.expect("handler ran"));
        }
        got.sort();
        assert_eq!(got, vec![("a", 1), ("b", 1), ("b", 2), ("c", 1)]);
        let kinds: Vec<_> = t
            .sent
            .lock()
            .expect("lock")
            .iter()
            .map(|(k, _, _)| *k)
            .collect();
        use crate::testing::Sent;
        assert_eq!(kinds, vec![Sent::Fanout, Sent::Cast, Sent::Cast]);
        for s in servers {
            s.stop().await;
        }
    }

    #[tokio::test]
    async fn stop_waits_for_running_handlers_and_then_nobody_listens() {
        let t = Arc::new(MemoryTransport::new());
        let finished = Arc::new(AtomicUsize::new(0));
        let f = finished.clone();
        let ep =
            Endpoint::new(v(1, 0)).method(MethodSpec::new("work", v(1, 0)), move |_ctx, _args| {
                let f = f.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    f.fetch_add(1, Ordering::SeqCst);
                    Ok(Value::Null)
                }
            });
        let s = serve(&t, "c", vec![ep]).await;
        let c = client(&t, "c");
        c.cast(&ctx(), "work", "1.0", json!({}))
            .await
            .expect("sent");
        tokio::time::sleep(Duration::from_millis(5)).await;
        s.stop().await;
        assert_eq!(
            finished.load(Ordering::SeqCst),
            1,
            "stop waited for the handler"
        );
        assert!(matches!(
            c.call(&ctx(), "work", "1.0", json!({})).await,
            Err(RpcError::Unreachable { .. })
        ));
    }

    #[tokio::test]
    async fn malformed_requests_get_a_typed_failure_reply() {
        let d = Dispatcher::new(vec![ping_endpoint(v(1, 0))]).expect("valid");
        let mut bad = Message::new();
        bad.insert("args".into(), json!({}));
        let reply = Reply::from_message(d.handle_message(bad).await).expect("a reply");
        let remote = reply.0.expect_err("a failure");
        assert!(matches!(
            RpcError::from_remote(remote, "?", v(1, 0)),
            RpcError::MalformedMessage { .. }
        ));
    }

    /// Log lines written by a `tracing_subscriber` into memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn each_request_is_logged_at_debug_and_each_failure_once_at_warn() {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let d = Dispatcher::new(vec![ping_endpoint(v(1, 0))]).expect("valid");
        let mut service = pipeline(
            d,
            Arc::new(NoOpSerializer),
            Vec::new(),
            Arc::new(Semaphore::new(4)),
        );
        let req = |method: &str, id: &str| Request {
            method: method.into(),
            args: Map::new(),
            version: v(1, 0),
            namespace: None,
            context: RequestContext::new(id),
        };
        // Handlers run on this thread (current_thread runtime), under the subscriber.
        for incoming in [
            Incoming::cast(Ok(req("ping", "req-ok"))),
            Incoming::cast(Ok(req("nope", "req-bad"))),
            Incoming::cast(Err(RpcError::MalformedMessage {
                detail: "body is not JSON".into(),
            })),
        ] {
            service.ready().await.expect("ready");
            respond(&mut service, incoming).await;
        }

        let text = String::from_utf8(logs.0.lock().expect("lock").clone()).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        let debug: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.contains("DEBUG") && l.contains("RPC request"))
            .collect();
        assert_eq!(debug.len(), 2, "{text}");
        assert!(
            debug[0].contains("request_id=req-ok")
                && debug[0].contains("method=ping")
                && debug[0].contains("version=1.0"),
            "{text}"
        );
        let warn: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.contains("WARN"))
            .collect();
        assert_eq!(warn.len(), 2, "one warning per failure: {text}");
        assert!(
            warn[0].contains("request_id=req-bad")
                && warn[0].contains("method=nope")
                && warn[0].contains("does not support RPC method nope"),
            "{text}"
        );
        assert!(
            warn[1].contains("cannot be read") && warn[1].contains("body is not JSON"),
            "{text}"
        );
    }

    #[test]
    fn registration_refuses_invalid_endpoints() {
        let t = Arc::new(MemoryTransport::new());
        let bad = Endpoint::new(v(1, 1)).method(
            MethodSpec::new("m", v(1, 0))
                .arg(ArgSpec::required("new", ArgType::Int).since(v(1, 1))),
            |_ctx, _args| async { Ok(Value::Null) },
        );
        assert!(matches!(
            RpcServer::new(t, Target::new("c")).endpoint(bad),
            Err(RpcError::InvalidEndpoint { .. })
        ));
    }
}

#[cfg(test)]
mod layer_tests {
    use super::*;
    use crate::client::Outgoing;
    use crate::transport::memory::MemoryTransport;
    use crate::{MethodSpec, RpcClient};
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use verso::{RequestContext, Version};

    /// A user-written server layer: refuses requests without a user (authorization) and
    /// records the methods it let through.
    #[derive(Clone)]
    struct Authorize(Arc<Mutex<Vec<String>>>);

    impl<S> Layer<S> for Authorize {
        type Service = AuthorizeService<S>;
        fn layer(&self, inner: S) -> Self::Service {
            AuthorizeService {
                inner,
                seen: self.0.clone(),
            }
        }
    }

    #[derive(Clone)]
    struct AuthorizeService<S> {
        inner: S,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl<S> Service<Request> for AuthorizeService<S>
    where
        S: Service<Request, Response = Value, Error = RpcError>,
        S::Future: Send + 'static,
    {
        type Response = Value;
        type Error = RpcError;
        type Future = futures::future::BoxFuture<'static, Result<Value, RpcError>>;

        fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
            self.inner.poll_ready(cx)
        }

        fn call(&mut self, request: Request) -> Self::Future {
            if request.context.user.is_none() {
                return Box::pin(async {
                    Err(RemoteError::new("NotAuthorized", "accel.errors", "who are you?").into())
                });
            }
            self.seen.lock().expect("lock").push(request.method.clone());
            Box::pin(self.inner.call(request))
        }
    }

    #[tokio::test]
    async fn user_layers_run_on_the_client_and_on_the_server() {
        let t = Arc::new(MemoryTransport::new());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ep = Endpoint::new(Version::new(1, 0)).method(
            MethodSpec::new("whoami", Version::new(1, 0)),
            |ctx: RequestContext, _args| async move { Ok(json!(ctx.user)) },
        );
        let server = RpcServer::new(t.clone(), Target::new("c"))
            .endpoint(ep)
            .expect("valid")
            .layer(Authorize(seen.clone()))
            .start()
            .await
            .expect("listening");

        // Client side: credentials stamped on each request, and a count of what left.
        let sent = Arc::new(AtomicUsize::new(0));
        let count = sent.clone();
        let plain = RpcClient::new(t.clone(), Target::new("c"));
        let client = plain.clone().layer(
            tower::ServiceBuilder::new()
                .map_request(move |mut o: Outgoing| {
                    count.fetch_add(1, Ordering::SeqCst);
                    o.request.context.user = Some("svc-agent".into());
                    o
                })
                .map_response(|reply: Option<Reply>| reply),
        );
        let ctx = RequestContext::new("req-layers");
        assert_eq!(
            client
                .call(&ctx, "whoami", "1.0", json!({}))
                .await
                .expect("authorized"),
            json!("svc-agent")
        );
        client
            .cast(&ctx, "whoami", "1.0", json!({}))
            .await
            .expect("sent");
        assert_eq!(sent.load(Ordering::SeqCst), 2);

        // Without the client's layer the server's layer refuses, as a typed remote error.
        match plain.call(&ctx, "whoami", "1.0", json!({})).await {
            Err(RpcError::Remote(r)) => assert_eq!(r.kind, "NotAuthorized"),
            other => panic!("expected NotAuthorized, got {other:?}"),
        }
        // A cap refusal never reaches the client's layers.
        let capped = client.clone().version_cap(Version::new(1, 0));
        let refused = capped.call(&ctx, "whoami", "1.1", json!({})).await;
        assert!(
            matches!(refused, Err(RpcError::VersionCap { .. })),
            "{refused:?}"
        );
        assert_eq!(sent.load(Ordering::SeqCst), 2);
        server.stop().await;
        assert_eq!(*seen.lock().expect("lock"), vec!["whoami", "whoami"]);
    }
}

#[cfg(test)]
mod ack_tests {
    use super::*;
    use crate::transport::Incoming;
    use crate::MethodSpec;
    use async_trait::async_trait;
    use serde_json::json;
    use serde_json::Map;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;
    use tokio::sync::mpsc;
    use verso::{RequestContext, Version};

    /// A transport whose one listener is fed by the test, as a broker transport feeds it.
    struct Feed(Mutex<Option<mpsc::Receiver<Incoming>>>);

    #[async_trait]
    impl Transport for Feed {
        async fn call(&self, t: &Target, _: Request, _: Duration) -> Result<Reply, RpcError> {
            Err(RpcError::MalformedMessage {
                detail: format!("no calls to {t}"),
            })
        }
        async fn cast(&self, _: &Target, _: Request) -> Result<(), RpcError> {
            Ok(())
        }
        async fn fanout(&self, _: &Target, _: Request) -> Result<(), RpcError> {
            Ok(())
        }
        async fn listen(&self, _: &Target) -> Result<Listener, RpcError> {
            let rx = self.0.lock().expect("lock").take();
            rx.map(Listener::bounded).ok_or(RpcError::MalformedMessage {
                detail: "one listener only".into(),
            })
        }
    }

    fn cast(acks: &Arc<AtomicUsize>) -> Incoming {
        let acks = acks.clone();
        Incoming::cast(Ok(Request {
            method: "slow".into(),
            args: Map::new(),
            version: Version::new(1, 0),
            namespace: None,
            context: RequestContext::new("req-ack"),
        }))
        .with_ack(move || {
            acks.fetch_add(1, Ordering::SeqCst);
        })
    }

    /// Waits (at most 10 s, on a loaded machine) until `n` acknowledgements were made.
    async fn until(acks: &AtomicUsize, n: usize) {
        for _ in 0..1000 {
            if acks.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "{n} acknowledgements expected, {} made",
            acks.load(Ordering::SeqCst)
        );
    }

    #[tokio::test]
    async fn a_request_is_acknowledged_when_the_server_takes_it_not_before() {
        let (tx, rx) = mpsc::channel(4);
        let (release, released) = tokio::sync::watch::channel(false);
        let ep = Endpoint::new(Version::new(1, 0)).method(
            MethodSpec::new("slow", Version::new(1, 0)),
            move |_ctx, _args| {
                let mut released = released.clone();
                async move {
                    let _ = released.wait_for(|r| *r).await;
                    Ok(json!(null))
                }
            },
        );
        let server = RpcServer::new(Arc::new(Feed(Mutex::new(Some(rx)))), Target::new("c"))
            .endpoint(ep)
            .expect("valid")
            .max_concurrency(1)
            .start()
            .await
            .expect("listening");
        let acks = Arc::new(AtomicUsize::new(0));
        tx.send(cast(&acks)).await.expect("queued");
        tx.send(cast(&acks)).await.expect("queued");
        // One handler slot: the first is taken (acknowledged), the second waits unacknowledged.
        until(&acks, 1).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(acks.load(Ordering::SeqCst), 1);
        release.send(true).expect("handler waiting");
        until(&acks, 2).await;
        server.stop().await;
    }
}
