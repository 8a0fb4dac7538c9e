//! [`RpcClient`]: calls and casts to a [`Target`], under the operator's version cap.
//!
//! The cap is an upper limit, not the version every call is sent at: each call names the
//! version it needs, and one above the cap fails with [`RpcError::VersionCap`] before
//! anything is sent. There is no relabelling and no fallback; a caller that wants to
//! keep working with older servers asks [`RpcClient::can_send_version`] (answered from the
//! local cap alone) and builds the older form itself.

use crate::endpoint::MethodSpec;
use crate::layer::{
    check_version, CallTimeout, CallTimeoutLayer, RequestLog, RequestLogLayer, Serialize,
    SerializerLayer, VersionCheck, VersionCheckLayer,
};
/// The request the client's pipeline carries: defined with the layers that take it.
pub use crate::layer::{Delivery, Outgoing};
use crate::message::{json_type, Reply, Request};
use crate::method::{Encoder, RpcApi, RpcMethod};
use crate::serializer::{NoOpSerializer, Serializer};
use crate::transport::Transport;
use crate::{RpcError, Target};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use verso::{RequestContext, Version, VersionManifest};

/// How long a call waits for its reply unless told otherwise (oslo.messaging's
/// `rpc_response_timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Something that names a version: a [`Version`], or a string such as `"1.1"`.
pub trait IntoVersion {
    /// The version, or [`RpcError::InvalidVersion`].
    fn into_version(self) -> Result<Version, RpcError>;
}

impl IntoVersion for Version {
    fn into_version(self) -> Result<Version, RpcError> {
        Ok(self)
    }
}

impl IntoVersion for &Version {
    fn into_version(self) -> Result<Version, RpcError> {
        Ok(*self)
    }
}

impl IntoVersion for &str {
    fn into_version(self) -> Result<Version, RpcError> {
        self.parse().map_err(|source| RpcError::InvalidVersion {
            text: self.to_owned(),
            source,
        })
    }
}

impl IntoVersion for &String {
    fn into_version(self) -> Result<Version, RpcError> {
        self.as_str().into_version()
    }
}

/// A client of one RPC API at one [`Target`]. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use verso::Version;
/// use verso_rpc::{transport::memory::MemoryTransport, RpcClient, Target};
///
/// let client = RpcClient::new(Arc::new(MemoryTransport::new()), Target::new("accel-conductor"))
///     .version_cap(Version::new(1, 0))
///     .timeout(Duration::from_secs(10));
/// assert!(client.can_send_version("1.0"));
/// assert!(!client.can_send_version("1.1"));
/// ```
#[derive(Clone)]
pub struct RpcClient {
    transport: Arc<dyn Transport>,
    target: Arc<Target>,
    cap: Option<Version>,
    timeout: Duration,
    serializer: Arc<dyn Serializer>,
    /// The application's layers, innermost first.
    layers: Vec<ClientWrap>,
    /// The pipeline built from all of the above ([`crate::layer`]); rebuilt by each
    /// builder method.
    service: Pipeline,
}

/// verso's client layers around `S` ([`crate::layer`]).
type Stack<S> = RequestLog<VersionCheck<Serialize<CallTimeout<S>>>>;

/// The client's pipeline: verso's layers around the transport, or around the
/// application's layers (boxed) around the transport.
type Pipeline = tower::util::Either<Stack<TransportService>, Stack<ClientService>>;

/// One of the application's client layers, applied to the service built so far.
type ClientWrap = Arc<dyn Fn(ClientService) -> ClientService + Send + Sync>;

/// The client's pipeline as a [`tower::Service`]: an [`Outgoing`] request in, the reply
/// of a call (`None` for a cast) out. [`RpcClient::layer`] wraps it.
pub type ClientService = BoxCloneSyncService<Outgoing, Option<Reply>, RpcError>;

/// The innermost service of the client's pipeline: the transport. A call's wait is
/// bounded by [`CallTimeoutLayer`] around it.
#[derive(Clone)]
pub struct TransportService(Arc<dyn Transport>);

impl TransportService {
    /// The service sending through `transport`.
    pub fn new(transport: Arc<dyn Transport>) -> Self {
        TransportService(transport)
    }
}

impl std::fmt::Debug for TransportService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportService").finish_non_exhaustive()
    }
}

impl Service<Outgoing> for TransportService {
    type Response = Option<Reply>;
    type Error = RpcError;
    type Future = futures::future::BoxFuture<'static, Result<Option<Reply>, RpcError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, out: Outgoing) -> Self::Future {
        let transport = self.0.clone();
        Box::pin(async move {
            let Outgoing {
                target,
                request,
                delivery,
                timeout,
            } = out;
            match delivery {
                Delivery::Call => transport.call(&target, request, timeout).await.map(Some),
                Delivery::Cast => transport.cast(&target, request).await.map(|()| None),
                Delivery::Fanout => transport.fanout(&target, request).await.map(|()| None),
            }
        })
    }
}

impl RpcClient {
    /// A client for `target` over `transport`: no cap, [`DEFAULT_TIMEOUT`], no-op serializer.
    pub fn new(transport: Arc<dyn Transport>, target: Target) -> Self {
        let serializer: Arc<dyn Serializer> = Arc::new(NoOpSerializer);
        let service = Self::pipeline(&target, None, &serializer, &transport, &[]);
        RpcClient {
            transport,
            target: Arc::new(target),
            cap: None,
            timeout: DEFAULT_TIMEOUT,
            serializer,
            layers: Vec::new(),
            service,
        }
    }

    /// Builds the pipeline ([`crate::layer`]): request log, version check, serializer,
    /// call timeout, the application's layers, the transport.
    fn pipeline(
        target: &Target,
        cap: Option<Version>,
        serializer: &Arc<dyn Serializer>,
        transport: &Arc<dyn Transport>,
        layers: &[ClientWrap],
    ) -> Pipeline {
        let verso = ServiceBuilder::new()
            .layer(RequestLogLayer)
            .layer(VersionCheckLayer::new(target.version, cap))
            .layer(SerializerLayer::new(serializer.clone()))
            .layer(CallTimeoutLayer);
        let transport = TransportService::new(transport.clone());
        if layers.is_empty() {
            return tower::util::Either::Left(verso.service(transport));
        }
        let mut inner = BoxCloneSyncService::new(transport);
        for wrap in layers {
            inner = wrap(inner);
        }
        tower::util::Either::Right(verso.service(inner))
    }

    fn rebuild(&mut self) {
        self.service = Self::pipeline(
            &self.target,
            self.cap,
            &self.serializer,
            &self.transport,
            &self.layers,
        );
    }

    /// Wraps the transport in `layer`: metrics, tracing spans, rate limits, credentials.
    /// Each layer wraps what is there already, so the last one added runs first; add a
    /// [`tower::ServiceBuilder`] to add several in reading order. The application's
    /// layers run inside verso's ([`crate::layer`]): a call refused by the version check
    /// reaches none of them, they see the serialized request, and the call's timeout
    /// bounds their time too. A layer's error may be any error, as tower's own
    /// middleware returns (`Timeout`, `LoadShed`, `Buffer`: boxed); it reaches the caller
    /// as [`RpcError::from_layer`] makes it, an `RpcError` unchanged and anything else
    /// [`RpcError::Layer`] (a tower `Timeout`'s is a timeout: [`RpcError::is_timeout`]).
    /// The stack is built again by each builder call after this one (`version_cap`,
    /// `serializer`, another `layer`): a layer that spawns a task when it wraps a
    /// service (tower's `Buffer`, its worker) does so then, so build such a client inside
    /// a Tokio runtime; the previous stack's task ends with it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use verso_rpc::{transport::memory::MemoryTransport, Outgoing, RpcClient, Target};
    ///
    /// let sent = Arc::new(AtomicUsize::new(0));
    /// let count = sent.clone();
    /// let client = RpcClient::new(Arc::new(MemoryTransport::new()), Target::new("svc"))
    ///     .layer(tower::ServiceBuilder::new().map_request(move |o: Outgoing| {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///         o
    ///     }));
    /// # let _ = client;
    /// ```
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: Layer<ClientService> + Send + Sync + 'static,
        L::Service: Service<Outgoing, Response = Option<Reply>> + Clone + Send + Sync + 'static,
        <L::Service as Service<Outgoing>>::Error: Into<tower::BoxError>,
        <L::Service as Service<Outgoing>>::Future: Send + 'static,
    {
        // The layers' errors come back as `RpcError` here, at their edge.
        self.layers.push(Arc::new(move |inner| {
            BoxCloneSyncService::new(layer.layer(inner).map_err(RpcError::from_layer))
        }));
        self.rebuild();
        self
    }

    /// A client of the declared API `A` on `topic`: its own version is `A::VERSION`
    /// (nothing newer is sent) and its namespace `A::NAMESPACE`.
    pub fn for_api<A: RpcApi>(transport: Arc<dyn Transport>, topic: impl Into<String>) -> Self {
        let mut target = Target::new(topic).with_version(A::VERSION);
        if let Some(ns) = A::NAMESPACE {
            target = target.with_namespace(ns);
        }
        RpcClient::new(transport, target)
    }

    /// Sets the version cap (from `[upgrade_levels]`): calls above it are refused locally.
    pub fn version_cap(mut self, cap: Version) -> Self {
        self.cap = Some(cap);
        self.rebuild();
        self
    }

    /// The cap an `[upgrade_levels]` option gives ([`crate::config::Config::cap`]):
    /// [`RpcClient::version_cap`] when set, no cap (the newest version the API declares)
    /// when `None`.
    pub fn with_cap(self, cap: Option<Version>) -> Self {
        match cap {
            Some(cap) => self.version_cap(cap),
            None => self,
        }
    }

    /// Sets the default call timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the serializer hook for arguments and results.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
        self.rebuild();
        self
    }

    /// The target.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The version cap, if any.
    pub fn cap(&self) -> Option<Version> {
        self.cap
    }

    /// The default call timeout.
    pub fn default_timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether a message at `version` may be sent: the same major as the cap and a minor
    /// no newer than the cap's (and no newer than the target's version, when it has one).
    /// Answered locally; nothing is sent. A malformed version string is never sendable.
    ///
    /// The pattern for a method whose signature changed, here `update` gaining an
    /// optional `force` in 1.2:
    ///
    /// ```
    /// use serde_json::{json, Value};
    /// use verso::RequestContext;
    /// use verso_rpc::{RpcClient, RpcError};
    ///
    /// async fn update(client: &RpcClient, ctx: &RequestContext, id: u64, force: bool)
    ///     -> Result<Value, RpcError>
    /// {
    ///     if client.can_send_version("1.2") {
    ///         client.call(ctx, "update", "1.2", json!({"id": id, "force": force})).await
    ///     } else {
    ///         // A 1.1 server has no `force`: build the request the older way.
    ///         client.call(ctx, "update", "1.1", json!({"id": id})).await
    ///     }
    /// }
    /// # use std::sync::Arc;
    /// # use verso::Version;
    /// # use verso_rpc::{transport::memory::MemoryTransport, *};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), RpcError> {
    /// # let transport = Arc::new(MemoryTransport::new());
    /// # let ep = Endpoint::new(Version::new(1, 2)).method(
    /// #     MethodSpec::new("update", Version::new(1, 0))
    /// #         .arg(ArgSpec::required("id", ArgType::Int))
    /// #         .arg(ArgSpec::optional("force", ArgType::Bool, false).since(Version::new(1, 2))),
    /// #     |_ctx, args: Args| async move { Ok(json!(args.get::<bool>("force")?)) },
    /// # );
    /// # let server = RpcServer::new(transport.clone(), Target::new("c")).endpoint(ep)?.start().await?;
    /// # let ctx = RequestContext::new("req-1");
    /// let old = RpcClient::new(transport.clone(), Target::new("c")).version_cap(Version::new(1, 1));
    /// let new = RpcClient::new(transport.clone(), Target::new("c")).version_cap(Version::new(1, 2));
    /// assert_eq!(update(&old, &ctx, 7, true).await?, json!(false)); // default filled in
    /// assert_eq!(update(&new, &ctx, 7, true).await?, json!(true));
    /// # server.stop().await;
    /// # Ok(()) }
    /// ```
    pub fn can_send_version(&self, version: impl IntoVersion) -> bool {
        version
            .into_version()
            .is_ok_and(|v| check_version(self.target.version, self.cap, v).is_ok())
    }

    /// Options for the next call or cast (server, fanout, timeout), oslo's `prepare()`.
    pub fn prepare(&self) -> Prepared<'_> {
        Prepared {
            client: self,
            server: None,
            fanout: false,
            timeout: None,
            manifest: None,
        }
    }

    /// Whether the typed method `M` may be sent at all (at its own version, with every
    /// later argument at its default). Answered locally.
    pub fn can_send<M: RpcMethod>(&self) -> bool {
        self.can_send_version(M::SINCE)
    }

    /// Calls the typed method `m` and returns its typed reply. See
    /// [`Prepared::call_method`].
    pub async fn call_method<M: RpcMethod>(
        &self,
        ctx: &RequestContext,
        m: M,
    ) -> Result<M::Reply, RpcError> {
        self.prepare().call_method(ctx, m).await
    }

    /// Casts the typed method `m`: sent, not waited for.
    pub async fn cast_method<M: RpcMethod>(
        &self,
        ctx: &RequestContext,
        m: M,
    ) -> Result<(), RpcError> {
        self.prepare().cast_method(ctx, m).await
    }

    /// Calls `method` at `version` with named `args` (a JSON object, or `null` for none)
    /// and returns its result. See [`Prepared::call`].
    pub async fn call(
        &self,
        ctx: &RequestContext,
        method: &str,
        version: impl IntoVersion,
        args: Value,
    ) -> Result<Value, RpcError> {
        self.prepare().call(ctx, method, version, args).await
    }

    /// Casts `method` at `version` with named `args`: sent, not waited for.
    pub async fn cast(
        &self,
        ctx: &RequestContext,
        method: &str,
        version: impl IntoVersion,
        args: Value,
    ) -> Result<(), RpcError> {
        self.prepare().cast(ctx, method, version, args).await
    }

    /// The request of a call or cast: the one path of typed and untyped calls alike.
    fn request(
        &self,
        ctx: &RequestContext,
        method: &str,
        version: Version,
        args: Map<String, Value>,
    ) -> Request {
        Request {
            method: method.to_owned(),
            args,
            version,
            namespace: self.target.namespace.clone(),
            context: ctx.clone(),
        }
    }
}

/// Named arguments of an untyped call: a JSON object, or `null` for none.
fn args_map(method: &str, args: Value) -> Result<Map<String, Value>, RpcError> {
    match args {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(RpcError::ArgumentsNotAnObject {
            method: method.to_owned(),
            found: json_type(&other),
        }),
    }
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("target", &self.target)
            .field("cap", &self.cap)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// One call's options, from [`RpcClient::prepare`].
///
/// ```no_run
/// # use std::time::Duration;
/// # use serde_json::json;
/// # use verso::RequestContext;
/// # async fn f(client: &verso_rpc::RpcClient, ctx: &RequestContext) -> Result<(), verso_rpc::RpcError> {
/// client.prepare().server("agent-7").timeout(Duration::from_secs(5))
///     .call(ctx, "refresh", "1.0", json!({})).await?;
/// client.prepare().fanout().cast(ctx, "reload", "1.0", json!({})).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a prepared call does nothing until .call() or .cast()"]
pub struct Prepared<'a> {
    client: &'a RpcClient,
    server: Option<String>,
    fanout: bool,
    timeout: Option<Duration>,
    manifest: Option<&'a VersionManifest>,
}

impl<'a> Prepared<'a> {
    /// Sends to one server of the topic.
    pub fn server(mut self, server: impl Into<String>) -> Self {
        self.server = Some(server.into());
        self
    }

    /// Makes a cast go to every server of the topic.
    pub fn fanout(mut self) -> Self {
        self.fanout = true;
        self
    }

    /// Waits at most `timeout` for this call's reply.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Encodes the objects in a typed call's arguments for a peer that knows the
    /// versions in `manifest` (backported as the conductor's object endpoints do).
    pub fn peer_manifest(mut self, manifest: &'a VersionManifest) -> Self {
        self.manifest = Some(manifest);
        self
    }

    /// Calls the typed method `m` and decodes its reply.
    ///
    /// The call is sent at the method's version, raised to that of each argument whose
    /// value is not its default; later arguments at their default are left out (the
    /// server fills them in). Above the cap it fails with [`RpcError::VersionCap`]
    /// before anything is sent; otherwise as [`call`](Self::call).
    ///
    /// A reply holding an object at a version this build does not know (a newer minor
    /// of the same major: the server runs a newer release) is backported as
    /// oslo.versionedobjects' serializer does: when `ctx` has an indirection API for the
    /// object's namespace ([`RequestContext::with_indirection`], an agent's conductor),
    /// it is asked for `object_backport_versions(reply, this build's manifest of the
    /// reply type)` and the result is decoded. Without one the decode fails as it would
    /// (`IncompatibleObjectVersion` in [`RpcError::Serialization`]).
    pub async fn call_method<M: RpcMethod>(
        self,
        ctx: &RequestContext,
        m: M,
    ) -> Result<M::Reply, RpcError> {
        self.call_method_as(ctx, m, M::spec()).await
    }

    /// [`call_method`](Self::call_method) under `spec`: `M`'s declaration placed at
    /// another version by the API that includes it (the conductor's object methods).
    pub(crate) async fn call_method_as<M: RpcMethod>(
        self,
        ctx: &RequestContext,
        m: M,
        spec: &MethodSpec,
    ) -> Result<M::Reply, RpcError> {
        let (version, args) = self.encode(&m, spec)?;
        let mut reply = self.send_call(ctx, M::NAME, version, args).await?;
        if let Some(manifest) = M::reply_manifest() {
            crate::backport::backport_unknown(ctx, &mut reply, manifest).await?;
        }
        M::decode_reply(reply)
    }

    /// Casts the typed method `m`: sent, not waited for.
    pub async fn cast_method<M: RpcMethod>(
        self,
        ctx: &RequestContext,
        m: M,
    ) -> Result<(), RpcError> {
        let (version, args) = self.encode(&m, M::spec())?;
        self.send_cast(ctx, M::NAME, version, args).await
    }

    fn encode<M: RpcMethod>(
        &self,
        m: &M,
        spec: &MethodSpec,
    ) -> Result<(Version, Map<String, Value>), RpcError> {
        let enc = match self.manifest {
            Some(manifest) => Encoder::for_peer(manifest),
            None => Encoder::new(),
        };
        let mut args = m.encode_args(&enc)?;
        let version = spec.version_for(&mut args);
        Ok((version, args))
    }

    /// Calls `method` at `version` and waits for its result: the untyped form of
    /// [`call_method`](Self::call_method), for dynamic callers.
    ///
    /// Fails before sending with [`RpcError::VersionCap`] (above the cap),
    /// [`RpcError::InvalidVersion`] or [`RpcError::ArgumentsNotAnObject`]; after sending
    /// with [`RpcError::Timeout`], a dispatch error from the server
    /// ([`RpcError::UnsupportedVersion`], [`RpcError::MissingArgument`], ...) or
    /// [`RpcError::Remote`] for an error the method raised.
    pub async fn call(
        self,
        ctx: &RequestContext,
        method: &str,
        version: impl IntoVersion,
        args: Value,
    ) -> Result<Value, RpcError> {
        let version = version.into_version()?;
        let args = args_map(method, args)?;
        self.send_call(ctx, method, version, args).await
    }

    /// The call path of typed and untyped calls.
    async fn send_call(
        self,
        ctx: &RequestContext,
        method: &str,
        version: Version,
        args: Map<String, Value>,
    ) -> Result<Value, RpcError> {
        let out = Outgoing {
            target: self.target(),
            request: self.client.request(ctx, method, version, args),
            delivery: Delivery::Call,
            timeout: self.timeout.unwrap_or(self.client.timeout),
        };
        let reply = self
            .client
            .service
            .clone()
            .oneshot(out)
            .await?
            .ok_or_else(|| RpcError::MalformedMessage {
                detail: format!("the client's pipeline gave no reply to call '{method}'"),
            })?;
        reply
            .0
            .map_err(|remote| RpcError::from_remote(remote, method, version))
    }

    /// Casts `method` at `version`: sent, not waited for. The same local checks as
    /// [`call`](Self::call) apply.
    pub async fn cast(
        self,
        ctx: &RequestContext,
        method: &str,
        version: impl IntoVersion,
        args: Value,
    ) -> Result<(), RpcError> {
        let version = version.into_version()?;
        let args = args_map(method, args)?;
        self.send_cast(ctx, method, version, args).await
    }

    async fn send_cast(
        self,
        ctx: &RequestContext,
        method: &str,
        version: Version,
        args: Map<String, Value>,
    ) -> Result<(), RpcError> {
        let target = self.target();
        let delivery = if self.fanout || target.fanout {
            Delivery::Fanout
        } else {
            Delivery::Cast
        };
        let out = Outgoing {
            target,
            request: self.client.request(ctx, method, version, args),
            delivery,
            timeout: self.timeout.unwrap_or(self.client.timeout),
        };
        self.client.service.clone().oneshot(out).await.map(|_| ())
    }

    fn target(&self) -> Arc<Target> {
        match &self.server {
            None => self.client.target.clone(),
            Some(s) => Arc::new((*self.client.target).clone().with_server(s.clone())),
        }
    }
}

#[cfg(test)]
mod tests;
