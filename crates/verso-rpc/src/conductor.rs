//! Object indirection over RPC: the conductor's object endpoints and the agent's
//! [`ConductorApi`].
//!
//! A conductor serves three methods with oslo's names and arguments, so a Python agent
//! using oslo.versionedobjects can use a verso conductor. They sit at the version where
//! the application's conductor API added them: 1.1 in oslo.versionedobjects' and Nova's
//! conductor ([`ObjectIndirectionApi`], [`INDIRECTION_VERSION`]), anywhere in another
//! API (its declaration lists [`object_methods_since`]`(version)`, its server registers
//! them with [`add_object_endpoints`] at that version, its agents call them with a
//! [`ConductorApi`] at that version):
//!
//! | method | arguments | reply |
//! |---|---|---|
//! | `object_class_action_versions` | `objname`, `objmethod`, `object_versions`, `args`, `kwargs` | the result, backported to `object_versions` |
//! | `object_action` | `objinst`, `objmethod`, `args`, `kwargs` | `[updates, result]` |
//! | `object_backport_versions` | `objinst`, `object_versions` | `objinst` converted to those versions |
//!
//! An agent's [`ConductorApi`] implements [`verso::IndirectionApi`] with an [`RpcClient`]
//! capped by `[upgrade_levels] conductor`. With a cap below the indirection version every
//! indirection call fails before anything is sent; it never falls back to running the
//! body locally.
//!
//! ```
//! use std::sync::Arc;
//! use verso::{Registry, RequestContext, Version};
//! use verso_rpc::conductor::{add_object_endpoints, object_methods_since, ConductorApi};
//! use verso_rpc::{transport::memory::MemoryTransport, Endpoint, MethodSpec, RpcApi, RpcClient,
//!     RpcServer, Target};
//!
//! /// A conductor API that added object indirection in 2.3.
//! struct Conductor;
//! const INDIRECTION: Version = Version::new(2, 3);
//! impl RpcApi for Conductor {
//!     const NAME: &'static str = "conductor";
//!     const VERSION: Version = Version::new(2, 4);
//!     fn methods() -> Vec<&'static MethodSpec> {
//!         object_methods_since(INDIRECTION) // and the API's own methods
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = Arc::new(MemoryTransport::new());
//! let endpoint = add_object_endpoints(Endpoint::for_api::<Conductor>(), INDIRECTION, Arc::new(Registry::new()), |ctx| ctx);
//! let _server = RpcServer::new(transport.clone(), Target::new("conductor")).endpoint(endpoint)?.start().await?;
//!
//! let client = |cap| RpcClient::for_api::<Conductor>(transport.clone(), "conductor").version_cap(cap);
//! assert!(ConductorApi::new(client(Version::new(2, 3)), INDIRECTION).supports_object_indirection());
//! let pinned = ConductorApi::new(client(Version::new(2, 2)), INDIRECTION);
//! assert!(!pinned.supports_object_indirection());
//! let err = pinned.require_indirection("PCI managed mode").unwrap_err();
//! assert!(err.to_string().contains("[upgrade_levels] conductor to 2.3"));
//! # Ok(()) }
//! ```

use crate::endpoint::{Endpoint, MethodSpec};
use crate::method::{RpcApi, RpcMethod};
use crate::{RemoteError, RpcClient, RpcError};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex, PoisonError};
use verso::indirection::{action_updates, ActionReply, BoxFuture, CallError, IndirectionApi};
use verso::{Registry, RequestContext, Version, VersionManifest};

/// The conductor RPC version oslo.versionedobjects' (and Nova's) conductor API added
/// object indirection in: [`ObjectIndirectionApi`]'s. An application whose conductor API
/// added them elsewhere uses its own version instead (see the [module](self) docs).
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

/// `object_class_action_versions`: runs a class method of `objname` on the conductor
/// and returns its result backported to `object_versions`.
///
/// Declared at [`INDIRECTION_VERSION`]; an API that added it at another version lists
/// [`object_methods_since`] instead of this declaration, and the three methods are
/// served and called at that version.
#[derive(Debug, Clone, PartialEq, crate::RpcMethod)]
#[rpc(name = "object_class_action_versions", since = "1.1", reply = Value)]
pub(crate) struct ObjectClassActionVersions {
    /// The class.
    pub objname: String,
    /// The class method.
    pub objmethod: String,
    /// The versions the caller knows (its manifest).
    #[rpc(arg_type = Dict)]
    pub object_versions: VersionManifest,
    /// Positional arguments.
    #[rpc(nullable, default = None)]
    pub args: Option<Vec<Value>>,
    /// Keyword arguments.
    #[rpc(nullable, default = None)]
    pub kwargs: Option<Map<String, Value>>,
}

/// `object_action`: runs an instance method on the conductor; replies
/// `[updates, result]`.
#[derive(Debug, Clone, PartialEq, crate::RpcMethod)]
#[rpc(name = "object_action", since = "1.1", reply = Value)]
pub(crate) struct ObjectAction {
    /// The object's primitive.
    pub objinst: Value,
    /// The instance method.
    pub objmethod: String,
    /// Positional arguments.
    #[rpc(nullable, default = None)]
    pub args: Option<Vec<Value>>,
    /// Keyword arguments.
    #[rpc(nullable, default = None)]
    pub kwargs: Option<Map<String, Value>>,
}

/// `object_backport_versions`: `objinst` converted to the versions of `object_versions`.
#[derive(Debug, Clone, PartialEq, crate::RpcMethod)]
#[rpc(name = "object_backport_versions", since = "1.1", reply = Value)]
pub(crate) struct ObjectBackportVersions {
    /// The object's primitive.
    pub objinst: Value,
    /// The versions the caller knows.
    #[rpc(arg_type = Dict)]
    pub object_versions: VersionManifest,
}

/// The conductor's object-indirection API as oslo.versionedobjects has it (`conductor`,
/// 1.1): the three methods in the table of the [module](self) documentation. A conductor
/// with methods of its own declares an API of its own that lists these three too, at its
/// own version ([`object_methods_since`]).
#[derive(Debug, Clone, Copy)]
pub struct ObjectIndirectionApi;

impl RpcApi for ObjectIndirectionApi {
    const NAME: &'static str = "conductor";
    const VERSION: Version = INDIRECTION_VERSION;

    fn methods() -> Vec<&'static MethodSpec> {
        object_methods_since(INDIRECTION_VERSION)
    }
}

/// The declarations of the three object-indirection methods, added to their API at
/// `version` (their arguments all came with them). An API's
/// [`methods`](RpcApi::methods) lists them, so the lock file records them at that
/// version.
pub fn object_methods_since(version: Version) -> Vec<&'static MethodSpec> {
    object_specs(version).iter().collect()
}

/// The three declarations at `version`, built once per version a process uses (an
/// application uses one) and kept, as a derived method's `spec()` keeps its own.
fn object_specs(version: Version) -> &'static [MethodSpec; 3] {
    static BUILT: Mutex<Vec<&'static [MethodSpec; 3]>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(specs) = built.iter().find(|s| s[0].since == version) {
        return specs;
    }
    let at = |spec: &MethodSpec| MethodSpec {
        since: version,
        ..spec.clone()
    };
    let specs: &'static [MethodSpec; 3] = Box::leak(Box::new([
        at(ObjectClassActionVersions::spec()),
        at(ObjectAction::spec()),
        at(ObjectBackportVersions::spec()),
    ]));
    built.push(specs);
    specs
}

/// The version API `A` declares the object-indirection methods at, if it declares them
/// (with [`object_methods_since`]).
pub fn indirection_version<A: RpcApi>() -> Option<Version> {
    A::methods()
        .into_iter()
        .find(|m| m.name == ObjectClassActionVersions::NAME)
        .map(|m| m.since)
}

/// Adds the three object-indirection methods, served at `version` (where the conductor
/// API declares them: [`object_methods_since`]`(version)`), to a conductor endpoint,
/// which keeps its other methods. `prepare` turns each incoming context into the one the
/// method bodies run with (attach the database here). An endpoint of a declared API
/// ([`Endpoint::for_api`]) refuses, when the server registers it, a `version` other than
/// the declaration's.
pub fn add_object_endpoints(
    endpoint: Endpoint,
    version: Version,
    registry: Arc<Registry>,
    prepare: impl Fn(RequestContext) -> RequestContext + Send + Sync + 'static,
) -> Endpoint {
    let [class_action, action, backport] = object_specs(version);
    endpoint
        .with_state((registry, Arc::new(prepare)))
        .handle_as(
            class_action,
            move |(reg, prep), ctx: RequestContext, m: ObjectClassActionVersions| async move {
                let ctx = prep(ctx);
                let out = reg
                    .call_class(
                        &ctx,
                        &m.objname,
                        &m.objmethod,
                        m.object_versions.get(&m.objname),
                        m.args.unwrap_or_default(),
                        m.kwargs.unwrap_or_default(),
                    )
                    .await
                    .map_err(to_remote)?;
                out.to_primitive_for_peer(Some(&m.object_versions))
                    .map_err(|e| to_remote(e.into()))
            },
        )
        .handle_as(
            action,
            move |(reg, prep), ctx: RequestContext, m: ObjectAction| async move {
                let ctx = prep(ctx);
                let (before, after, out) = reg
                    .call_instance(
                        &ctx,
                        &m.objinst,
                        &m.objmethod,
                        m.args.unwrap_or_default(),
                        m.kwargs.unwrap_or_default(),
                    )
                    .await
                    .map_err(to_remote)?;
                let updates = action_updates(before.as_ref(), after.as_ref())
                    .map_err(|e| to_remote(e.into()))?;
                let result = out
                    .to_primitive_for_peer(None)
                    .map_err(|e| to_remote(e.into()))?;
                Ok(json!([updates, result]))
            },
        )
        .handle_as(
            backport,
            move |(reg, _), _ctx: RequestContext, m: ObjectBackportVersions| async move {
                let obj = reg
                    .from_primitive(&m.objinst)
                    .map_err(|e| to_remote(e.into()))?;
                obj.obj_to_primitive(verso::Target::Peer(&m.object_versions))
                    .map_err(|e| to_remote(e.into()))
            },
        )
        .into_endpoint()
}

/// The agent's view of the conductor's object API: the three methods at the version
/// the conductor API declares them.
#[derive(Clone)]
pub struct ConductorApi {
    client: RpcClient,
    /// The three declarations at the version they are called at.
    specs: &'static [MethodSpec; 3],
    /// The `[upgrade_levels]` option that caps `client`.
    cap_option: String,
}

/// A feature that needs object indirection was enabled with a conductor cap too low
/// to provide it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{feature} needs object indirection (conductor RPC {required}), but [upgrade_levels] {option} is {configured}: \
     raise [upgrade_levels] {option} to {required} once every conductor runs a release that serves it, or disable {feature}"
)]
pub struct IndirectionUnavailable {
    /// The feature that needs it.
    pub feature: String,
    /// The `[upgrade_levels]` option that caps the conductor's API (`conductor` unless
    /// [`ConductorApi::cap_option`] says otherwise).
    pub option: String,
    /// The RPC version indirection needs.
    pub required: Version,
    /// The configured cap (`none` when uncapped is impossible here, so always a version).
    pub configured: String,
}

impl ConductorApi {
    /// An API over `client`, whose target is the conductor's topic and whose cap is
    /// `[upgrade_levels] conductor`, calling the object methods at `version`: where the
    /// conductor API declares them ([`INDIRECTION_VERSION`] for oslo's;
    /// [`indirection_version`] reads it from a declaration).
    pub fn new(client: RpcClient, version: Version) -> Self {
        ConductorApi {
            client,
            specs: object_specs(version),
            cap_option: "conductor".into(),
        }
    }

    /// Names the `[upgrade_levels]` option that caps the client, for the refusal
    /// [`ConductorApi::require_indirection`] gives (a service calling a second
    /// conductor API under an option of its own).
    pub fn cap_option(mut self, option: impl Into<String>) -> Self {
        self.cap_option = option.into();
        self
    }

    /// The client underneath.
    pub fn client(&self) -> &RpcClient {
        &self.client
    }

    /// The conductor API version the object methods are called at.
    pub fn version(&self) -> Version {
        self.specs[0].since
    }

    /// Whether the cap allows object indirection (the conductor API's version that
    /// added it). Sends nothing.
    pub fn supports_object_indirection(&self) -> bool {
        self.client.can_send_version(self.version())
    }

    /// Startup validation for a feature that needs indirection: a configuration error
    /// naming the feature, the required version, the configured cap and the option.
    pub fn require_indirection(&self, feature: &str) -> Result<(), IndirectionUnavailable> {
        if self.supports_object_indirection() {
            return Ok(());
        }
        Err(IndirectionUnavailable {
            feature: feature.to_owned(),
            option: self.cap_option.clone(),
            required: self.version(),
            configured: self
                .client
                .cap()
                .map_or_else(|| "unset".into(), |v| v.to_string()),
        })
    }

    async fn call<M: RpcMethod>(&self, ctx: &RequestContext, m: M) -> Result<M::Reply, CallError> {
        let spec = self
            .specs
            .iter()
            .find(|s| s.name == M::NAME)
            .unwrap_or(M::spec());
        self.client
            .prepare()
            .call_method_as(ctx, m, spec)
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
            let m = ObjectClassActionVersions {
                objname: objname.to_owned(),
                objmethod: objmethod.to_owned(),
                object_versions: object_versions.clone(),
                args: Some(args),
                kwargs: Some(kwargs),
            };
            self.call(ctx, m).await
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
            let m = ObjectAction {
                objinst,
                objmethod: objmethod.to_owned(),
                args: Some(args),
                kwargs: Some(kwargs),
            };
            let reply = self.call(ctx, m).await?;
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
            let m = ObjectBackportVersions {
                objinst,
                object_versions: object_versions.clone(),
            };
            self.call(ctx, m).await
        })
    }
}

fn malformed_reply(what: &str) -> CallError {
    CallError::Indirection(Arc::new(RpcError::MalformedMessage {
        detail: format!("object_action reply is not [updates, result]: {what}"),
    }))
}
