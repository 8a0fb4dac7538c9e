//! The [`tower`] layers the client's and the server's pipelines are built from, usable on
//! their own beside the application's layers.
//!
//! An [`RpcClient`](crate::RpcClient) sends each request through
//!
//! ```text
//! RequestLogLayer -> VersionCheckLayer -> SerializerLayer -> CallTimeoutLayer
//!     -> the application's layers -> TransportService
//! ```
//!
//! and an [`RpcServer`](crate::RpcServer) takes each message only when its pipeline is
//! ready, then runs it through
//!
//! ```text
//! RequestLogLayer -> GlobalConcurrencyLimitLayer -> the application's layers
//!     -> SerializerLayer -> DispatchService
//! ```
//!
//! verso's layers are always there and cost nothing when they have nothing to do: the
//! serializer's passes requests through when the serializer is the identity, the version
//! check when there is neither a cap nor a local version. Without layers of the
//! application's, the pipeline is one concrete type: no boxing per request. A request a
//! layer refuses (over the cap, unauthorized) is answered with that error: on the
//! client it is the caller's, on the server it is the reply.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use verso::Version;
//! use verso_rpc::layer::{CallTimeoutLayer, RequestLogLayer, VersionCheckLayer};
//! use verso_rpc::{transport::memory::MemoryTransport, Outgoing, TransportService};
//! use verso_rpc::tower::{Service, ServiceBuilder};
//!
//! // The client's default pipeline, by hand.
//! let mut pipeline = ServiceBuilder::new()
//!     .layer(RequestLogLayer)
//!     .layer(VersionCheckLayer::new(Some(Version::new(1, 4)), Some(Version::new(1, 2))))
//!     .layer(CallTimeoutLayer)
//!     .service(TransportService::new(Arc::new(MemoryTransport::new())));
//! # let _ = &mut pipeline;
//! ```

use crate::message::{Reply, Request};
use crate::serializer::Serializer;
use crate::{RpcError, Target};
use futures::future::{BoxFuture, Either};
use pin_project_lite::pin_project;
use serde_json::{Map, Value};
use std::future::{ready, Future, Ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::{Layer, Service};
use verso::{RequestContext, Version};

pub use tower::limit::GlobalConcurrencyLimitLayer;

/// How an [`Outgoing`] request is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// A call: one server answers, the caller waits.
    Call,
    /// A cast to one server of the topic (or `target.server`).
    Cast,
    /// A cast to every server of the topic.
    Fanout,
}

/// A request on its way out, as each service of the client's pipeline sees it
/// ([`crate::layer`]): the application's layers get it checked against the cap and
/// serialized.
#[derive(Debug)]
pub struct Outgoing {
    /// Where it goes (shared with the client; `Arc::make_mut` to change it).
    pub target: Arc<Target>,
    /// The request.
    pub request: Request,
    /// Call, cast or fanout.
    pub delivery: Delivery,
    /// How long a call waits for its reply.
    pub timeout: Duration,
}

/// Whether a request at `requested` may be sent by a client whose own API version is
/// `local` under the operator's `cap`: the same major as each, and a minor no newer.
pub(crate) fn check_version(
    local: Option<Version>,
    cap: Option<Version>,
    requested: Version,
) -> Result<(), RpcError> {
    if let Some(local) = local {
        if !local.accepts(&requested) {
            return Err(RpcError::VersionAboveLocal { requested, local });
        }
    }
    if let Some(cap) = cap {
        if !cap.accepts(&requested) {
            return Err(RpcError::VersionCap { requested, cap });
        }
    }
    Ok(())
}

/// Refuses, before anything is sent, a request above the client's own API version
/// ([`RpcError::VersionAboveLocal`]) or above the operator's cap from `[upgrade_levels]`
/// ([`RpcError::VersionCap`]). [`RpcClient::can_send_version`](crate::RpcClient::can_send_version)
/// answers from the same two versions. With neither, every request passes.
#[derive(Debug, Clone, Copy)]
pub struct VersionCheckLayer {
    local: Option<Version>,
    cap: Option<Version>,
}

impl VersionCheckLayer {
    /// Checks against the client's own version `local` and the operator's `cap`.
    pub fn new(local: Option<Version>, cap: Option<Version>) -> Self {
        VersionCheckLayer { local, cap }
    }
}

impl<S> Layer<S> for VersionCheckLayer {
    type Service = VersionCheck<S>;
    fn layer(&self, inner: S) -> VersionCheck<S> {
        VersionCheck {
            inner,
            local: self.local,
            cap: self.cap,
        }
    }
}

/// The service of [`VersionCheckLayer`].
#[derive(Debug, Clone)]
pub struct VersionCheck<S> {
    inner: S,
    local: Option<Version>,
    cap: Option<Version>,
}

impl<S> Service<Outgoing> for VersionCheck<S>
where
    S: Service<Outgoing, Error = RpcError>,
{
    type Response = S::Response;
    type Error = RpcError;
    type Future = Either<Ready<Result<S::Response, RpcError>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, out: Outgoing) -> Self::Future {
        match check_version(self.local, self.cap, out.request.version) {
            Ok(()) => Either::Right(self.inner.call(out)),
            Err(e) => Either::Left(ready(Err(e))),
        }
    }
}

/// Bounds a call's wait for its reply by the call's own timeout ([`Outgoing::timeout`]:
/// the client's default, or the one [`Prepared::timeout`](crate::Prepared::timeout) set),
/// failing with [`RpcError::Timeout`]. Casts pass through. Everything inside it counts:
/// the application's layers (a rate limit's wait) and the transport.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallTimeoutLayer;

impl<S> Layer<S> for CallTimeoutLayer {
    type Service = CallTimeout<S>;
    fn layer(&self, inner: S) -> CallTimeout<S> {
        CallTimeout { inner }
    }
}

/// The service of [`CallTimeoutLayer`].
#[derive(Debug, Clone)]
pub struct CallTimeout<S> {
    inner: S,
}

impl<S> Service<Outgoing> for CallTimeout<S>
where
    S: Service<Outgoing, Response = Option<Reply>, Error = RpcError>,
{
    type Response = Option<Reply>;
    type Error = RpcError;
    type Future = Timed<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, out: Outgoing) -> Self::Future {
        let timeout = out.timeout;
        let (timer, what) = (out.delivery == Delivery::Call)
            .then(|| {
                (
                    tokio::time::sleep(timeout),
                    (out.request.method.clone(), out.target.clone()),
                )
            })
            .unzip();
        Timed {
            run: self.inner.call(out),
            timer,
            what,
            timeout,
        }
    }
}

pin_project! {
    /// The future of [`CallTimeout`]: a call's reply within its timeout, or
    /// [`RpcError::Timeout`]; a cast as it goes.
    #[derive(Debug)]
    pub struct Timed<F> {
        #[pin]
        run: F,
        // The call's timer; none for a cast.
        #[pin]
        timer: Option<tokio::time::Sleep>,
        // Method and target, for the error.
        what: Option<(String, Arc<Target>)>,
        timeout: Duration,
    }
}

impl<F> Future for Timed<F>
where
    F: Future<Output = Result<Option<Reply>, RpcError>>,
{
    type Output = Result<Option<Reply>, RpcError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(result) = this.run.poll(cx) {
            return Poll::Ready(result);
        }
        match this.timer.as_pin_mut() {
            Some(timer) => {
                std::task::ready!(timer.poll(cx));
                let (method, topic) = this
                    .what
                    .take()
                    .map(|(m, t)| (m, t.topic.clone()))
                    .unwrap_or_default();
                Poll::Ready(Err(RpcError::Timeout {
                    method,
                    topic,
                    timeout: *this.timeout,
                }))
            }
            None => Poll::Pending,
        }
    }
}

/// Runs a [`Serializer`] over each argument and the result (oslo.messaging's serializer
/// hook): on the client it serializes the arguments of an [`Outgoing`] request and
/// deserializes a call's result; on the server it deserializes the arguments of a
/// [`Request`] and serializes the handler's result.
///
/// On the server it runs before the arguments are checked against the method's
/// declaration, as oslo.messaging's dispatcher deserializes each argument sent before
/// the method is bound; defaults filled in for arguments not sent are not deserialized.
///
/// A serializer that is the identity ([`Serializer::is_identity`], the default
/// [`NoOpSerializer`](crate::NoOpSerializer)) costs nothing: requests pass through.
#[derive(Clone)]
pub struct SerializerLayer(Arc<dyn Serializer>);

impl SerializerLayer {
    /// Runs `serializer`.
    pub fn new(serializer: Arc<dyn Serializer>) -> Self {
        SerializerLayer(serializer)
    }
}

impl std::fmt::Debug for SerializerLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SerializerLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for SerializerLayer {
    type Service = Serialize<S>;
    fn layer(&self, inner: S) -> Serialize<S> {
        Serialize {
            inner,
            serializer: self.0.clone(),
        }
    }
}

/// The service of [`SerializerLayer`].
#[derive(Clone)]
pub struct Serialize<S> {
    inner: S,
    serializer: Arc<dyn Serializer>,
}

impl<S> std::fmt::Debug for Serialize<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serialize").finish_non_exhaustive()
    }
}

/// Each value of `args` through `convert`.
fn convert_args(
    args: Map<String, Value>,
    ctx: &RequestContext,
    convert: impl Fn(&RequestContext, Value) -> Result<Value, RpcError>,
) -> Result<Map<String, Value>, RpcError> {
    args.into_iter()
        .map(|(k, v)| Ok((k, convert(ctx, v)?)))
        .collect()
}

impl<S> Service<Outgoing> for Serialize<S>
where
    S: Service<Outgoing, Response = Option<Reply>, Error = RpcError>,
    S::Future: Send + 'static,
{
    type Response = Option<Reply>;
    type Error = RpcError;
    type Future = Either<S::Future, BoxFuture<'static, Result<Option<Reply>, RpcError>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut out: Outgoing) -> Self::Future {
        if self.serializer.is_identity() {
            return Either::Left(self.inner.call(out));
        }
        let ser = self.serializer.clone();
        let ctx = out.request.context.clone();
        let args = std::mem::take(&mut out.request.args);
        match convert_args(args, &ctx, |c, v| ser.serialize_entity(c, v)) {
            Ok(args) => out.request.args = args,
            Err(e) => return Either::Right(Box::pin(ready(Err(e)))),
        }
        let run = self.inner.call(out);
        Either::Right(Box::pin(async move {
            match run.await? {
                Some(Reply(Ok(result))) => {
                    Ok(Some(Reply(Ok(ser.deserialize_entity(&ctx, result)?))))
                }
                other => Ok(other),
            }
        }))
    }
}

impl<S> Service<Request> for Serialize<S>
where
    S: Service<Request, Response = Value, Error = RpcError>,
    S::Future: Send + 'static,
{
    type Response = Value;
    type Error = RpcError;
    type Future = Either<S::Future, BoxFuture<'static, Result<Value, RpcError>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        if self.serializer.is_identity() {
            return Either::Left(self.inner.call(request));
        }
        let ser = self.serializer.clone();
        let ctx = request.context.clone();
        let args = std::mem::take(&mut request.args);
        match convert_args(args, &ctx, |c, v| ser.deserialize_entity(c, v)) {
            Ok(args) => request.args = args,
            Err(e) => return Either::Right(Box::pin(ready(Err(e)))),
        }
        let run = self.inner.call(request);
        Either::Right(Box::pin(
            async move { ser.serialize_entity(&ctx, run.await?) },
        ))
    }
}

/// Logs requests with their request id: on the server each request at debug and each
/// failure once at warn; on the client each request, and each failure (refused by the
/// cap, timed out, raised by the server), at debug: the caller has the error.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestLogLayer;

impl<S> Layer<S> for RequestLogLayer {
    type Service = RequestLog<S>;
    fn layer(&self, inner: S) -> RequestLog<S> {
        RequestLog { inner }
    }
}

/// The service of [`RequestLogLayer`].
#[derive(Debug, Clone)]
pub struct RequestLog<S> {
    inner: S,
}

pin_project! {
    /// The future of [`RequestLog`]: a failure is logged once, with what it was about.
    #[derive(Debug)]
    pub struct Logged<F> {
        #[pin]
        run: F,
        // Request id and method, kept only when the failure's level is enabled.
        who: Option<Box<(String, String)>>,
        server: bool,
    }
}

impl<F, T> Future for Logged<F>
where
    F: Future<Output = Result<T, RpcError>>,
{
    type Output = Result<T, RpcError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = std::task::ready!(this.run.poll(cx));
        if let (Err(e), Some(who)) = (&result, this.who.take()) {
            let (request_id, method) = &*who;
            if *this.server {
                tracing::warn!(request_id = %request_id, method = %method, error = %e,
                    "RPC request failed");
            } else {
                tracing::debug!(request_id = %request_id, method = %method, error = %e,
                    "RPC request failed");
            }
        }
        Poll::Ready(result)
    }
}

impl<S> Service<Request> for RequestLog<S>
where
    S: Service<Request, Error = RpcError>,
{
    type Response = S::Response;
    type Error = RpcError;
    type Future = Logged<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, r: Request) -> Self::Future {
        tracing::debug!(request_id = %r.context.request_id, method = %r.method,
            version = %r.version, namespace = ?r.namespace, "RPC request");
        let who = tracing::enabled!(tracing::Level::WARN)
            .then(|| Box::new((r.context.request_id.clone(), r.method.clone())));
        Logged {
            run: self.inner.call(r),
            who,
            server: true,
        }
    }
}

impl<S> Service<Outgoing> for RequestLog<S>
where
    S: Service<Outgoing, Error = RpcError>,
{
    type Response = S::Response;
    type Error = RpcError;
    type Future = Logged<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, out: Outgoing) -> Self::Future {
        let who = tracing::enabled!(tracing::Level::DEBUG).then(|| {
            let r = &out.request;
            tracing::debug!(request_id = %r.context.request_id, method = %r.method,
                version = %r.version, topic = %out.target.topic, delivery = ?out.delivery,
                "RPC request");
            Box::new((r.context.request_id.clone(), r.method.clone()))
        });
        Logged {
            run: self.inner.call(out),
            who,
            server: false,
        }
    }
}
