//! Object indirection over RPC: the conductor's object endpoints and the agent's
//! [`ConductorApi`].
//!
//! The conductor serves three methods at conductor RPC version 1.1, with oslo's names and
//! arguments, so a Python agent using oslo.versionedobjects can use a verso conductor:
//!
//! | method | arguments | reply |
//! |---|---|---|
//! | `object_class_action_versions` | `objname`, `objmethod`, `object_versions`, `args`, `kwargs` | the result, backported to `object_versions` |
//! | `object_action` | `objinst`, `objmethod`, `args`, `kwargs` | `[updates, result]` |
//! | `object_backport_versions` | `objinst`, `object_versions` | `objinst` converted to those versions |
//!
//! An agent's [`ConductorApi`] implements [`verso::IndirectionApi`] with an [`RpcClient`]
//! capped by `[upgrade_levels] conductor`. With a cap below 1.1 every indirection call
//! fails before anything is sent; it never falls back to running the body locally.
//!
//! ```
//! use std::sync::Arc;
//! use verso::{Registry, RequestContext, Version};
//! use verso_rpc::conductor::{add_object_endpoints, ConductorApi};
//! use verso_rpc::{transport::memory::MemoryTransport, Endpoint, RpcClient, RpcServer, Target};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = Arc::new(MemoryTransport::new());
//! let endpoint = add_object_endpoints(Endpoint::new(Version::new(1, 1)), Arc::new(Registry::new()), |ctx| ctx);
//! let _server = RpcServer::new(transport.clone(), Target::new("conductor")).endpoint(endpoint)?.start().await?;
//!
//! let pinned = ConductorApi::new(RpcClient::new(transport.clone(), Target::new("conductor")).version_cap(Version::new(1, 0)));
//! assert!(!pinned.supports_object_indirection());
//! let err = pinned.require_indirection("PCI managed mode").unwrap_err();
//! assert!(err.to_string().contains("[upgrade_levels] conductor"));
//! # Ok(()) }
//! ```

use crate::endpoint::{ArgSpec, ArgType, Args, Endpoint, MethodSpec};
use crate::{RemoteError, RpcClient, RpcError};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use verso::indirection::{action_updates, ActionReply, BoxFuture, CallError, IndirectionApi};
use verso::{Registry, RequestContext, Version, VersionManifest};

/// The conductor RPC version that added object indirection.
pub const INDIRECTION_VERSION: Version = Version::new(1, 1);

/// The Python module oslo.versionedobjects raises its exceptions from.
const OVO_MODULE: &str = "oslo_versionedobjects.exception";

/// A call error as a remote error a Python peer understands.
fn to_remote(err: CallError) -> RemoteError {
    match err {
        CallError::Method {
            kind,
            message,
            fields,
        } => RemoteError::new(kind, "verso.remote", message).with_fields(fields),
        CallError::Object(e) => RemoteError::new(e.ovo_exception(), OVO_MODULE, e.to_string()),
        other => RemoteError::new(other.kind(), OVO_MODULE, other.to_string()),
    }
}

/// A remote error (or a failure to deliver) as a call error.
fn from_rpc(err: RpcError) -> CallError {
    match err {
        RpcError::Remote(remote) => CallError::Method {
            kind: remote.kind,
            message: remote.message,
            fields: remote.fields,
        },
        other => CallError::Indirection(Arc::new(other)),
    }
}

fn bad_request(what: &str, e: impl std::fmt::Display) -> RemoteError {
    RemoteError::new("ValueError", "builtins", format!("{what}: {e}"))
}

// Handlers return RemoteError by value (the Handler signature), so do their helpers.
#[allow(clippy::result_large_err)]
fn manifest_arg(args: &Args, name: &str) -> Result<VersionManifest, RemoteError> {
    serde_json::from_value(args.value(name).cloned().unwrap_or_default())
        .map_err(|e| bad_request(name, e))
}

// Handlers return RemoteError by value (the Handler signature), so do their helpers.
#[allow(clippy::result_large_err)]
fn list_arg(args: &Args) -> Result<(Vec<Value>, Map<String, Value>), RemoteError> {
    let positional = match args.value("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(other) => return Err(bad_request("args", format!("expected a list, got {other}"))),
    };
    let keyword = match args.value("kwargs") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(bad_request(
                "kwargs",
                format!("expected an object, got {other}"),
            ))
        }
    };
    Ok((positional, keyword))
}

// Handlers return RemoteError by value (the Handler signature), so do their helpers.
#[allow(clippy::result_large_err)]
fn str_arg<'a>(args: &'a Args, name: &str) -> Result<&'a str, RemoteError> {
    args.value(name)
        .and_then(Value::as_str)
        .ok_or_else(|| bad_request(name, "expected a string"))
}

/// Adds the three object-indirection methods (at [`INDIRECTION_VERSION`]) to a conductor
/// endpoint, which keeps its other methods. `prepare` turns each incoming context into
/// the one the method bodies run with (attach the database here).
pub fn add_object_endpoints(
    endpoint: Endpoint,
    registry: Arc<Registry>,
    prepare: impl Fn(RequestContext) -> RequestContext + Send + Sync + 'static,
) -> Endpoint {
    let prepare = Arc::new(prepare);
    let any = |name: &str| ArgSpec::required(name, ArgType::Any);
    let optional_list = |name: &str| ArgSpec::optional(name, ArgType::Any, Value::Null).nullable();

    let (reg, prep) = (registry.clone(), prepare.clone());
    let endpoint = endpoint.method(
        MethodSpec::new("object_class_action_versions", INDIRECTION_VERSION)
            .arg(ArgSpec::required("objname", ArgType::String))
            .arg(ArgSpec::required("objmethod", ArgType::String))
            .arg(ArgSpec::required("object_versions", ArgType::Dict))
            .arg(optional_list("args"))
            .arg(optional_list("kwargs")),
        move |ctx: RequestContext, args: Args| {
            let (reg, prep) = (reg.clone(), prep.clone());
            async move {
                let objname = str_arg(&args, "objname")?;
                let objmethod = str_arg(&args, "objmethod")?;
                let manifest = manifest_arg(&args, "object_versions")?;
                let (positional, keyword) = list_arg(&args)?;
                let ctx = prep(ctx);
                let out = reg
                    .call_class(
                        &ctx,
                        objname,
                        objmethod,
                        manifest.get(objname),
                        positional,
                        keyword,
                    )
                    .await
                    .map_err(to_remote)?;
                out.to_primitive_for_peer(Some(&manifest))
                    .map_err(|e| to_remote(e.into()))
            }
        },
    );

    let (reg, prep) = (registry.clone(), prepare.clone());
    let endpoint = endpoint.method(
        MethodSpec::new("object_action", INDIRECTION_VERSION)
            .arg(any("objinst"))
            .arg(ArgSpec::required("objmethod", ArgType::String))
            .arg(optional_list("args"))
            .arg(optional_list("kwargs")),
        move |ctx: RequestContext, args: Args| {
            let (reg, prep) = (reg.clone(), prep.clone());
            async move {
                let objinst = args.value("objinst").cloned().unwrap_or_default();
                let objmethod = str_arg(&args, "objmethod")?;
                let (positional, keyword) = list_arg(&args)?;
                let ctx = prep(ctx);
                let (before, after, out) = reg
                    .call_instance(&ctx, &objinst, objmethod, positional, keyword)
                    .await
                    .map_err(to_remote)?;
                let updates = action_updates(before.as_ref(), after.as_ref())
                    .map_err(|e| to_remote(e.into()))?;
                let result = out
                    .to_primitive_for_peer(None)
                    .map_err(|e| to_remote(e.into()))?;
                Ok(json!([updates, result]))
            }
        },
    );

    endpoint.method(
        MethodSpec::new("object_backport_versions", INDIRECTION_VERSION)
            .arg(any("objinst"))
            .arg(ArgSpec::required("object_versions", ArgType::Dict)),
        move |_ctx: RequestContext, args: Args| {
            let reg = registry.clone();
            async move {
                let objinst = args.value("objinst").cloned().unwrap_or_default();
                let manifest = manifest_arg(&args, "object_versions")?;
                let obj = reg
                    .from_primitive(&objinst)
                    .map_err(|e| to_remote(e.into()))?;
                obj.obj_to_primitive(verso::Target::Peer(&manifest))
                    .map_err(|e| to_remote(e.into()))
            }
        },
    )
}

/// The agent's view of the conductor's object API.
#[derive(Clone)]
pub struct ConductorApi {
    client: RpcClient,
}

/// A feature that needs object indirection was enabled with a conductor cap too low
/// to provide it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{feature} needs object indirection (conductor RPC {required}), but [upgrade_levels] conductor is {configured}: \
     raise [upgrade_levels] conductor to {required} once every conductor runs a release that serves it, or disable {feature}"
)]
pub struct IndirectionUnavailable {
    /// The feature that needs it.
    pub feature: String,
    /// The RPC version indirection needs.
    pub required: Version,
    /// The configured cap (`none` when uncapped is impossible here, so always a version).
    pub configured: String,
}

impl ConductorApi {
    /// An API over `client`, whose target is the conductor's topic and whose cap is
    /// `[upgrade_levels] conductor`.
    pub fn new(client: RpcClient) -> Self {
        ConductorApi { client }
    }

    /// The client underneath.
    pub fn client(&self) -> &RpcClient {
        &self.client
    }

    /// Whether the cap allows object indirection (conductor RPC 1.1). Sends nothing.
    pub fn supports_object_indirection(&self) -> bool {
        self.client.can_send_version(INDIRECTION_VERSION)
    }

    /// Startup validation for a feature that needs indirection: a configuration error
    /// naming the feature, the required version, the configured cap and the option.
    pub fn require_indirection(&self, feature: &str) -> Result<(), IndirectionUnavailable> {
        if self.supports_object_indirection() {
            return Ok(());
        }
        Err(IndirectionUnavailable {
            feature: feature.to_owned(),
            required: INDIRECTION_VERSION,
            configured: self
                .client
                .cap()
                .map_or_else(|| "unset".into(), |v| v.to_string()),
        })
    }

    async fn call(
        &self,
        ctx: &RequestContext,
        method: &str,
        args: Value,
    ) -> Result<Value, CallError> {
        self.client
            .call(ctx, method, INDIRECTION_VERSION, args)
            .await
            .map_err(from_rpc)
    }
}

impl IndirectionApi for ConductorApi {
    fn object_class_action_versions<'a>(
        &'a self,
        ctx: &'a RequestContext,
        objname: &'a str,
        objmethod: &'a str,
        object_versions: &'a VersionManifest,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            let body = json!({
                "objname": objname,
                "objmethod": objmethod,
                "object_versions": object_versions,
                "args": args,
                "kwargs": kwargs,
            });
            self.call(ctx, "object_class_action_versions", body).await
        })
    }

    fn object_action<'a>(
        &'a self,
        ctx: &'a RequestContext,
        objinst: Value,
        objmethod: &'a str,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ActionReply, CallError>> {
        Box::pin(async move {
            let body =
                json!({"objinst": objinst, "objmethod": objmethod, "args": args, "kwargs": kwargs});
            let reply = self.call(ctx, "object_action", body).await?;
            match reply {
                Value::Array(mut pair) if pair.len() == 2 => {
                    let result = pair.pop().unwrap_or_default();
                    match pair.pop() {
                        Some(Value::Object(updates)) => Ok((updates, result)),
                        other => Err(malformed_reply(&format!("updates {other:?}"))),
                    }
                }
                other => Err(malformed_reply(&other.to_string())),
            }
        })
    }

    fn object_backport_versions<'a>(
        &'a self,
        ctx: &'a RequestContext,
        objinst: Value,
        object_versions: &'a VersionManifest,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            let body = json!({"objinst": objinst, "object_versions": object_versions});
            self.call(ctx, "object_backport_versions", body).await
        })
    }
}

fn malformed_reply(what: &str) -> CallError {
    CallError::Indirection(Arc::new(RpcError::MalformedMessage {
        detail: format!("object_action reply is not [updates, result]: {what}"),
    }))
}
