//! [`RpcClient`]: calls and casts to a [`Target`], under the operator's version cap.
//!
//! The cap is an upper limit, not the version every call is sent at: each call names the
//! version it needs, and one above the cap fails with [`RpcError::VersionCap`] before
//! anything is sent. There is no relabelling and no fallback; a caller that wants to
//! keep working with older servers asks [`RpcClient::can_send_version`] (answered from the
//! local cap alone) and builds the older form itself.

use crate::message::{json_type, Message, Reply, Request};
use crate::serializer::{NoOpSerializer, Serializer};
use crate::transport::Transport;
use crate::{RpcError, Target};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use verso::{RequestContext, Version};

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
    target: Target,
    cap: Option<Version>,
    timeout: Duration,
    serializer: Arc<dyn Serializer>,
}

impl RpcClient {
    /// A client for `target` over `transport`: no cap, [`DEFAULT_TIMEOUT`], no-op serializer.
    pub fn new(transport: Arc<dyn Transport>, target: Target) -> Self {
        RpcClient {
            transport,
            target,
            cap: None,
            timeout: DEFAULT_TIMEOUT,
            serializer: Arc::new(NoOpSerializer),
        }
    }

    /// Sets the version cap (from `[upgrade_levels]`): calls above it are refused locally.
    pub fn version_cap(mut self, cap: Version) -> Self {
        self.cap = Some(cap);
        self
    }

    /// Sets the default call timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the serializer hook for arguments and results.
    pub fn serializer(mut self, serializer: Arc<dyn Serializer>) -> Self {
        self.serializer = serializer;
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
            .is_ok_and(|v| self.check_version(v).is_ok())
    }

    /// Options for the next call or cast (server, fanout, timeout), oslo's `prepare()`.
    pub fn prepare(&self) -> Prepared<'_> {
        Prepared {
            client: self,
            server: None,
            fanout: false,
            timeout: None,
        }
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

    fn check_version(&self, requested: Version) -> Result<(), RpcError> {
        if let Some(local) = self.target.version {
            if !local.accepts(&requested) {
                return Err(RpcError::VersionAboveLocal { requested, local });
            }
        }
        if let Some(cap) = self.cap {
            if !cap.accepts(&requested) {
                return Err(RpcError::VersionCap { requested, cap });
            }
        }
        Ok(())
    }

    /// Checks everything that can be checked locally and builds the message dict.
    fn request(
        &self,
        ctx: &RequestContext,
        method: &str,
        version: Version,
        args: Value,
    ) -> Result<Message, RpcError> {
        self.check_version(version).inspect_err(|e| {
            tracing::debug!(method, %version, error = %e, "call refused before sending");
        })?;
        let args = match args {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return Err(RpcError::ArgumentsNotAnObject {
                    method: method.to_owned(),
                    found: json_type(&other),
                })
            }
        };
        let args = args
            .into_iter()
            .map(|(k, v)| Ok((k, self.serializer.serialize_entity(ctx, v)?)))
            .collect::<Result<Map<_, _>, RpcError>>()?;
        Ok(Request {
            method: method.to_owned(),
            args,
            version,
            namespace: self.target.namespace.clone(),
            context: ctx.clone(),
        }
        .into_message())
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
}

impl Prepared<'_> {
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

    /// Calls `method` at `version` and waits for its result.
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
        let message = self.client.request(ctx, method, version, args)?;
        let target = self.target();
        let timeout = self.timeout.unwrap_or(self.client.timeout);
        let reply = tokio::time::timeout(
            timeout,
            self.client.transport.call(&target, message, timeout),
        )
        .await
        .map_err(|_| RpcError::Timeout {
            method: method.to_owned(),
            topic: target.topic.clone(),
            timeout,
        })??;
        match Reply::from_message(reply)?.0 {
            Ok(result) => self.client.serializer.deserialize_entity(ctx, result),
            Err(remote) => Err(RpcError::from_remote(remote, method, version)),
        }
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
        let message = self.client.request(ctx, method, version, args)?;
        let target = self.target();
        if self.fanout || target.fanout {
            self.client.transport.fanout(&target, message).await
        } else {
            self.client.transport.cast(&target, message).await
        }
    }

    fn target(&self) -> Cow<'_, Target> {
        match &self.server {
            None => Cow::Borrowed(&self.client.target),
            Some(s) => Cow::Owned(self.client.target.clone().with_server(s.clone())),
        }
    }
}
