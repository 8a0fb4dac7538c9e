//! Endpoints: a namespace and version, and methods declared with their arguments.
//!
//! A method is declared with a [`MethodSpec`] (its name, the version that added it, and
//! each [`ArgSpec`]: name, [`ArgType`], required or optional with a default, and the
//! version that added it) plus an async handler. The declarations are plain data
//! ([`EndpointSpec`] is `Serialize`), so a tool can list every method and argument of an
//! RPC API, e.g. for a lock file.
//!
//! The rules every rolling upgrade relies on are checked when the endpoint is registered
//! ([`Endpoint::validate`]): an argument added after its method must be optional, and a
//! default must match its argument's type.

use crate::method::{Encoder, RpcApi, RpcMethod};
use crate::spec::expected;
pub use crate::spec::{ArgSpec, ArgType, EndpointSpec, MethodSpec, Requirement};
use crate::{RemoteError, RpcError};
use futures::future::{BoxFuture, Either};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use verso::{RequestContext, Version};

/// The arguments a handler receives, already checked and with defaults filled.
///
/// ```
/// use serde_json::json;
/// use verso_rpc::Args;
/// let args = Args::from(json!({"n": 2, "name": "x"}).as_object().cloned().unwrap_or_default());
/// assert_eq!(args.get::<u32>("n")?, 2);
/// // A typed error, not a panic:
/// assert_eq!(args.get::<u32>("name").map_err(|e| e.kind), Err("InvalidArgument".into()));
/// # Ok::<(), verso_rpc::RemoteError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args(Map<String, Value>);

impl Args {
    /// The argument `name` decoded as `T`; an error the caller sees if it does not decode.
    // Handlers fail with the wire form itself; it is the cold path, so no boxing.
    #[allow(clippy::result_large_err)]
    pub fn get<T: DeserializeOwned>(&self, name: &str) -> Result<T, RemoteError> {
        let v = self.0.get(name).cloned().unwrap_or(Value::Null);
        serde_json::from_value(v).map_err(|e| {
            RemoteError::new(
                "InvalidArgument",
                crate::error::VERSO_DISPATCHER,
                format!("argument '{name}': {e}"),
            )
            .with_field("argument", name)
        })
    }

    /// The raw value of argument `name`.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// All arguments.
    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }
}

impl From<Map<String, Value>> for Args {
    fn from(m: Map<String, Value>) -> Self {
        Args(m)
    }
}

/// What a handler returns: the result, or an error for the caller.
pub type HandlerResult = Result<Value, RemoteError>;

/// An endpoint method's body. Implemented for every
/// `Fn(RequestContext, Args) -> impl Future<Output = HandlerResult>`.
pub trait Handler: Send + Sync + 'static {
    /// Runs the method.
    fn call(&self, ctx: RequestContext, args: Args) -> BoxFuture<'static, HandlerResult>;
}

impl<F, Fut> Handler for F
where
    F: Fn(RequestContext, Args) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    fn call(&self, ctx: RequestContext, args: Args) -> BoxFuture<'static, HandlerResult> {
        Box::pin(self(ctx, args))
    }
}

pub(crate) struct Method {
    pub(crate) spec: MethodSpec,
    pub(crate) handler: Arc<dyn Handler>,
}

/// An endpoint: a namespace, a version, and methods with their handlers.
///
/// ```
/// use serde_json::json;
/// use verso::Version;
/// use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec};
///
/// let ep = Endpoint::new(Version::new(1, 1))
///     .method(
///         MethodSpec::new("ping", Version::new(1, 0))
///             .arg(ArgSpec::required("arg", ArgType::Any))
///             .arg(ArgSpec::optional("loud", ArgType::Bool, false).since(Version::new(1, 1))),
///         |_ctx, args: Args| async move {
///             Ok(json!({"arg": args.value("arg"), "loud": args.get::<bool>("loud")?}))
///         },
///     );
/// assert!(ep.validate().is_ok());
/// assert_eq!(ep.spec().methods[0].name, "ping");
/// ```
pub struct Endpoint {
    namespace: Option<String>,
    version: Version,
    methods: Vec<Method>,
    index: HashMap<String, usize>,
    /// For an endpoint of a declared API: its name and its methods' declarations.
    declared: Option<(&'static str, Vec<&'static MethodSpec>)>,
}

impl Endpoint {
    /// An endpoint without a namespace serving `version`.
    pub fn new(version: Version) -> Self {
        Endpoint {
            namespace: None,
            version,
            methods: Vec::new(),
            index: HashMap::new(),
            declared: None,
        }
    }

    /// The endpoint of a declared API: its version and namespace, and the rule that it
    /// serves exactly the API's methods ([`validate`](Self::validate) refuses a method
    /// missing or one the API does not declare). Add each with [`handle`](Self::handle).
    pub fn for_api<A: RpcApi>() -> Self {
        let mut ep = Endpoint::new(A::VERSION);
        ep.namespace = A::NAMESPACE.map(str::to_owned);
        ep.declared = Some((A::NAME, A::methods()));
        ep
    }

    /// Adds the typed method `M`: the declaration is `M::spec()`, and `handler` gets the
    /// decoded arguments and returns `M`'s reply, which is encoded for the wire.
    ///
    /// ```
    /// use verso::Version;
    /// use verso_rpc::{Endpoint, RpcMethod};
    ///
    /// #[derive(RpcMethod)]
    /// #[rpc(since = "1.0", reply = i64)]
    /// struct Add { a: i64, #[rpc(default = 0i64)] b: i64 }
    ///
    /// let ep = Endpoint::new(Version::new(1, 0)).handle(|_ctx, x: Add| async move { Ok(x.a + x.b) });
    /// assert!(ep.validate().is_ok());
    /// assert_eq!(ep.spec().methods[0].name, "add");
    /// ```
    pub fn handle<M, F, Fut>(self, handler: F) -> Self
    where
        M: RpcMethod,
        F: Fn(RequestContext, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Reply, RemoteError>> + Send + 'static,
    {
        self.handle_as(M::spec(), handler)
    }

    /// Shares `state` with the handlers added next: [`WithState::handle`] passes each call
    /// its own clone (an `Arc`, a database pool, a small struct of them), so no handler
    /// clones anything by hand. [`WithState::into_endpoint`] (or `Endpoint::from`) ends
    /// in this endpoint, with every method added.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicI64, Ordering};
    /// use std::sync::Arc;
    /// use verso::Version;
    /// use verso_rpc::{Endpoint, RpcMethod};
    ///
    /// #[derive(RpcMethod)]
    /// #[rpc(since = "1.0", reply = i64)]
    /// struct Add { n: i64 }
    ///
    /// #[derive(RpcMethod)]
    /// #[rpc(since = "1.0", reply = i64)]
    /// struct Total {}
    ///
    /// let ep = Endpoint::new(Version::new(1, 0))
    ///     .with_state(Arc::new(AtomicI64::new(0)))
    ///     .handle(|sum: Arc<AtomicI64>, _ctx, m: Add| async move {
    ///         Ok(sum.fetch_add(m.n, Ordering::Relaxed) + m.n)
    ///     })
    ///     .handle(|sum: Arc<AtomicI64>, _ctx, _: Total| async move { Ok(sum.load(Ordering::Relaxed)) })
    ///     .into_endpoint();
    /// assert!(ep.validate().is_ok());
    /// ```
    pub fn with_state<S>(self, state: S) -> WithState<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        WithState {
            endpoint: self,
            state,
        }
    }

    /// [`handle`](Self::handle) under `spec`, `M`'s declaration placed at another version
    /// by the API that includes it (the conductor's object methods).
    pub(crate) fn handle_as<M, F, Fut>(self, spec: &MethodSpec, handler: F) -> Self
    where
        M: RpcMethod,
        F: Fn(RequestContext, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Reply, RemoteError>> + Send + 'static,
    {
        // Handlers fail with the wire form itself; it is the cold path, so no boxing.
        #[allow(clippy::result_large_err)]
        fn encode<M: RpcMethod>(reply: Result<M::Reply, RemoteError>) -> HandlerResult {
            M::encode_reply(&reply?, &Encoder::new()).map_err(|e| e.to_remote())
        }
        let handler = Arc::new(handler);
        self.method(spec.clone(), move |ctx: RequestContext, args: Args| {
            let args = args.into_map();
            match M::args_manifest().filter(|m| crate::backport::map_holds_newer(&args, m)) {
                None => {
                    let started = M::decode_args(args).map(|m| handler(ctx, m));
                    Either::Left(async move { encode::<M>(started?.await) })
                }
                // An object newer than this build knows: backported through the
                // context's indirection API first, as oslo.versionedobjects' serializer
                // does for a server's arguments.
                Some(manifest) => {
                    let handler = handler.clone();
                    Either::Right(async move {
                        let mut args = Value::Object(args);
                        crate::backport::backport_unknown(&ctx, &mut args, manifest)
                            .await
                            .map_err(|e| e.to_remote())?;
                        let args = match args {
                            Value::Object(args) => args,
                            _ => Map::new(),
                        };
                        let m = M::decode_args(args)?;
                        encode::<M>(handler(ctx, m).await)
                    })
                }
            }
        })
    }

    /// Puts the endpoint in a namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Adds a method. Rules are checked by [`validate`](Self::validate), which the server
    /// runs on registration.
    pub fn method(mut self, spec: MethodSpec, handler: impl Handler) -> Self {
        self.index
            .entry(spec.name.clone())
            .or_insert(self.methods.len());
        self.methods.push(Method {
            spec,
            handler: Arc::new(handler),
        });
        self
    }

    /// The endpoint's namespace.
    pub fn namespace_name(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The version the endpoint serves.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The declaration, as data.
    pub fn spec(&self) -> EndpointSpec {
        EndpointSpec {
            namespace: self.namespace.clone(),
            version: self.version,
            methods: self.methods.iter().map(|m| m.spec.clone()).collect(),
        }
    }

    /// Checks the declaration: method names unique and not added after the endpoint's
    /// version; argument names unique; an argument added after its method is optional
    /// (an older client does not send it); defaults match their types.
    pub fn validate(&self) -> Result<(), RpcError> {
        let bad = |detail: String| Err(RpcError::InvalidEndpoint { detail });
        if let Some((api, declared)) = &self.declared {
            for m in &self.methods {
                match declared.iter().find(|d| d.name == m.spec.name) {
                    None => {
                        return bad(format!(
                            "method '{}' is not declared by RPC API '{api}'",
                            m.spec.name
                        ))
                    }
                    Some(d) if **d != m.spec => {
                        let how = if d.since != m.spec.since {
                            format!(
                                "as added in {}, but RPC API '{api}' declares it added in {}",
                                m.spec.since, d.since
                            )
                        } else {
                            format!("with other arguments than RPC API '{api}' declares")
                        };
                        return bad(format!("method '{}' is served {how}", m.spec.name));
                    }
                    Some(_) => {}
                }
            }
            if let Some(d) = declared.iter().find(|d| !self.index.contains_key(&d.name)) {
                return bad(format!(
                    "method '{}' of RPC API '{api}' has no handler",
                    d.name
                ));
            }
        }
        for (i, m) in self.methods.iter().enumerate() {
            let spec = &m.spec;
            if self.index.get(&spec.name) != Some(&i) {
                return bad(format!("method '{}' is declared twice", spec.name));
            }
            if !self.version.accepts(&spec.since) {
                return bad(format!(
                    "method '{}' is added in {}, which endpoint version {} does not serve",
                    spec.name, spec.since, self.version
                ));
            }
            for (j, a) in spec.args.iter().enumerate() {
                if spec.args[..j].iter().any(|b| b.name == a.name) {
                    return bad(format!(
                        "argument '{}' of '{}' is declared twice",
                        a.name, spec.name
                    ));
                }
                let since = spec.arg_since(a);
                if !self.version.accepts(&since) {
                    return bad(format!(
                        "argument '{}' of '{}' is added in {since}, which endpoint version {} does not serve",
                        a.name, spec.name, self.version
                    ));
                }
                match &a.requirement {
                    Requirement::Required if since > spec.since => {
                        return bad(format!(
                            "argument '{}' of '{}' was added in {since}, after the method ({}): \
                             it must be optional with a default, so older clients keep working",
                            a.name, spec.name, spec.since
                        ));
                    }
                    Requirement::Optional { default } if !a.accepts(default) => {
                        return bad(format!(
                            "default {default} of argument '{}' of '{}' is not {}",
                            a.name,
                            spec.name,
                            expected(a)
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    pub(crate) fn find(&self, method: &str) -> Option<&Method> {
        self.index.get(method).and_then(|&i| self.methods.get(i))
    }
}

/// An [`Endpoint`] being built whose handlers share a state `S`
/// ([`Endpoint::with_state`]).
pub struct WithState<S> {
    endpoint: Endpoint,
    state: S,
}

impl<S: Clone + Send + Sync + 'static> WithState<S> {
    /// [`Endpoint::handle`], the handler getting a clone of the state first.
    pub fn handle<M, F, Fut>(self, handler: F) -> Self
    where
        M: RpcMethod,
        F: Fn(S, RequestContext, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Reply, RemoteError>> + Send + 'static,
    {
        self.handle_as(M::spec(), handler)
    }

    /// [`Endpoint::handle_as`] with the state.
    pub(crate) fn handle_as<M, F, Fut>(self, spec: &MethodSpec, handler: F) -> Self
    where
        M: RpcMethod,
        F: Fn(S, RequestContext, M) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Reply, RemoteError>> + Send + 'static,
    {
        let state = self.state.clone();
        WithState {
            endpoint: self
                .endpoint
                .handle_as(spec, move |ctx, m: M| handler(state.clone(), ctx, m)),
            state: self.state,
        }
    }

    /// The endpoint, with every method added; the state lives on in its handlers.
    pub fn into_endpoint(self) -> Endpoint {
        self.endpoint
    }
}

impl<S> From<WithState<S>> for Endpoint {
    fn from(w: WithState<S>) -> Self {
        w.endpoint
    }
}

impl<S> fmt::Debug for WithState<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WithState").field(&self.endpoint).finish()
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("namespace", &self.namespace)
            .field("version", &self.version)
            .field(
                "methods",
                &self
                    .methods
                    .iter()
                    .map(|m| &m.spec.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(major: u32, minor: u32) -> Version {
        Version::new(major, minor)
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("object")
    }

    fn spec() -> MethodSpec {
        MethodSpec::new("update", v(1, 0))
            .arg(ArgSpec::required("id", ArgType::Int))
            .arg(ArgSpec::optional("note", ArgType::String, "").nullable())
            .arg(ArgSpec::optional("force", ArgType::Bool, false).since(v(1, 2)))
    }

    #[test]
    fn missing_optional_is_filled_with_default() {
        let args = spec()
            .check_args(v(1, 0), obj(json!({"id": 1})))
            .expect("ok");
        assert_eq!(args["note"], "");
        assert_eq!(args["force"], false);
    }

    #[test]
    fn missing_required_unknown_and_wrong_type_are_typed() {
        let s = spec();
        assert!(matches!(
            s.check_args(v(1, 2), obj(json!({}))),
            Err(RpcError::MissingArgument { argument, .. }) if argument == "id"
        ));
        assert!(matches!(
            s.check_args(v(1, 2), obj(json!({"id": 1, "colour": "red"}))),
            Err(RpcError::UnknownArgument { argument, .. }) if argument == "colour"
        ));
        assert!(matches!(
            s.check_args(v(1, 2), obj(json!({"id": "1"}))),
            Err(RpcError::InvalidArgument { argument, found, .. }) if argument == "id" && found == "string"
        ));
        assert!(s
            .check_args(v(1, 2), obj(json!({"id": 1, "note": null})))
            .is_ok());
    }

    #[test]
    fn argument_newer_than_the_call_version_is_refused() {
        let s = spec();
        assert!(matches!(
            s.check_args(v(1, 1), obj(json!({"id": 1, "force": true}))),
            Err(RpcError::ArgumentNotInVersion { argument, since, requested, .. })
                if argument == "force" && since == v(1, 2) && requested == v(1, 1)
        ));
        assert!(s
            .check_args(v(1, 2), obj(json!({"id": 1, "force": true})))
            .is_ok());
    }

    fn noop(_: RequestContext, _: Args) -> futures::future::Ready<HandlerResult> {
        futures::future::ready(Ok(Value::Null))
    }

    #[test]
    fn validate_enforces_the_upgrade_rules() {
        let later_required = Endpoint::new(v(1, 2)).method(
            MethodSpec::new("m", v(1, 0)).arg(ArgSpec::required("x", ArgType::Int).since(v(1, 1))),
            noop,
        );
        let err = later_required.validate().expect_err("refused");
        assert!(err.to_string().contains("must be optional"), "{err}");

        let bad_default = Endpoint::new(v(1, 0)).method(
            MethodSpec::new("m", v(1, 0)).arg(ArgSpec::optional("x", ArgType::Int, "no")),
            noop,
        );
        let err = bad_default.validate().expect_err("refused");
        assert!(matches!(err, RpcError::InvalidEndpoint { .. }), "{err:?}");

        let dup = Endpoint::new(v(1, 0))
            .method(MethodSpec::new("m", v(1, 0)), noop)
            .method(MethodSpec::new("m", v(1, 0)), noop);
        let err = dup.validate().expect_err("refused");
        assert!(matches!(err, RpcError::InvalidEndpoint { .. }), "{err:?}");

        let too_new = Endpoint::new(v(1, 0)).method(MethodSpec::new("m", v(1, 1)), noop);
        let err = too_new.validate().expect_err("refused");
        assert!(matches!(err, RpcError::InvalidEndpoint { .. }), "{err:?}");

        let ok = Endpoint::new(v(1, 2)).method(spec(), noop);
        assert!(ok.validate().is_ok());
    }

    #[derive(crate::RpcMethod)]
    #[rpc(since = "1.0", reply = u64)]
    struct Bump {
        by: u64,
    }

    #[derive(crate::RpcMethod)]
    #[rpc(since = "1.0", reply = String)]
    struct Whoami {}

    #[tokio::test]
    async fn handlers_with_state_share_one_state() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let count = Arc::new(AtomicU64::new(0));
        let ep = Endpoint::new(v(1, 0))
            .with_state((count.clone(), "conductor-1"))
            .handle(|(n, _), _ctx, m: Bump| async move {
                Ok(n.fetch_add(m.by, Ordering::SeqCst) + m.by)
            })
            .handle(|(_, name), ctx: RequestContext, _: Whoami| async move {
                Ok(format!("{name} for {}", ctx.request_id))
            })
            .into_endpoint();
        assert!(ep.validate().is_ok());
        let call = |method: &str, args: Value| {
            let handler = ep.find(method).expect("served").handler.clone();
            async move {
                handler
                    .call(RequestContext::new("req-1"), Args::from(obj(args)))
                    .await
            }
        };
        assert_eq!(
            call("bump", json!({"by": 2})).await.expect("first"),
            json!(2)
        );
        // The second call sees what the first did: one state, shared, not a copy per call.
        assert_eq!(
            call("bump", json!({"by": 3})).await.expect("second"),
            json!(5)
        );
        assert_eq!(count.load(Ordering::SeqCst), 5);
        assert_eq!(
            call("whoami", json!({})).await.expect("whoami"),
            json!("conductor-1 for req-1")
        );
    }

    #[test]
    fn spec_serializes_for_listing() {
        let ep = Endpoint::new(v(1, 2))
            .namespace("conductor")
            .method(spec(), noop);
        let listed = serde_json::to_value(ep.spec()).expect("serializes");
        assert_eq!(listed["version"], "1.2");
        assert_eq!(listed["methods"][0]["args"][2]["since"], "1.2");
        assert_eq!(
            listed["methods"][0]["args"][1]["requirement"],
            json!({"kind": "optional", "default": ""})
        );
        let back: EndpointSpec = serde_json::from_value(listed).expect("deserializes");
        assert_eq!(back, ep.spec());
    }

    #[test]
    fn object_type_needs_a_primitive() {
        assert!(ArgType::Object.matches(&json!({"versioned_object.name": "Device"})));
        assert!(ArgType::Object.matches(
            &json!({"cyborg_object.name": "Device", "cyborg_object.namespace": "cyborg"})
        ));
        assert!(!ArgType::Object.matches(&json!({"cyborg_object.name": "Device"})));
        assert!(!ArgType::Object.matches(&json!({"name": "Device"})));
        assert!(ArgType::Float.matches(&json!(1)));
        assert!(!ArgType::Int.matches(&json!(1.5)));
    }
}
