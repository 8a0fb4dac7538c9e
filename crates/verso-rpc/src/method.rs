//! Typed RPC methods and APIs: a method is declared once, as a type.
//!
//! A [`RpcMethod`] is its argument struct: the type names the method, the version that
//! introduced it, each argument (with the version that added it and, for an optional
//! one, its default) and the reply type. `#[derive(RpcMethod)]` writes the impl; the
//! work (the version a call is sent at, argument encoding, the server's checks) is here.
//! The client calls it with a value and gets a typed reply
//! ([`RpcClient::call_method`](crate::RpcClient::call_method)); the server's endpoint is
//! built from the same declarations ([`Endpoint::handle`](crate::Endpoint::handle)), so
//! client and server cannot disagree on a name, a version or an argument.
//!
//! An [`RpcApi`] names an API independently of its topic: its name (`conductor`), its
//! newest version, and its methods. The lock file's `[rpc.*]` tables are built from it.
//!
//! Argument and reply types are encoded as verso fields when they are one (strings,
//! integers, UUIDs, date-times, enums, objects, lists and dicts of them, `Option` for
//! nullable): an object travels as its primitive, backported for the peer's manifest when
//! the caller names one ([`Prepared::peer_manifest`](crate::Prepared::peer_manifest)),
//! exactly as the conductor's object endpoints reply. On the receiving side an object at
//! a newer minor than this build knows is backported through the context's indirection
//! API before it is decoded, as oslo.versionedobjects' serializer does (a reply on the
//! client, arguments on the server; see `RpcClient::call_method`). Any other type goes
//! through serde (`serde_json::Value`, a `VersionManifest`, plain serde structs).
//!
//! ```
//! use std::sync::Arc;
//! use verso::{RequestContext, Version};
//! use verso_rpc::{transport::memory::MemoryTransport, Endpoint, RpcApi, RpcClient,
//!     RpcError, RpcMethod, RpcServer, Target};
//!
//! /// Reports a host's devices; 1.1 added `verbose`.
//! #[derive(RpcMethod, Debug)]
//! #[rpc(name = "report_data", since = "1.0", reply = String)]
//! struct ReportData {
//!     hostname: String,
//!     #[rpc(since = "1.1", default = false)]
//!     verbose: bool,
//! }
//!
//! /// The conductor's API, declared once.
//! struct Conductor;
//! impl RpcApi for Conductor {
//!     const NAME: &'static str = "conductor";
//!     const VERSION: Version = Version::new(1, 1);
//!     fn methods() -> Vec<&'static verso_rpc::MethodSpec> {
//!         vec![ReportData::spec()]
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), RpcError> {
//! let transport = Arc::new(MemoryTransport::new());
//! let endpoint = Endpoint::for_api::<Conductor>()
//!     .handle(|_ctx, r: ReportData| async move { Ok(format!("{} verbose={}", r.hostname, r.verbose)) });
//! let server = RpcServer::new(transport.clone(), Target::new("conductor")).endpoint(endpoint)?.start().await?;
//!
//! let ctx = RequestContext::new("req-1");
//! let pinned = RpcClient::for_api::<Conductor>(transport.clone(), "conductor").version_cap(Version::new(1, 0));
//! // At its default, `verbose` is not needed: the call goes out at 1.0.
//! let reply = pinned.call_method(&ctx, ReportData { hostname: "h1".into(), verbose: false }).await?;
//! assert_eq!(reply, "h1 verbose=false");
//! // Set, it needs 1.1, which the cap refuses before anything is sent.
//! let err = pinned.call_method(&ctx, ReportData { hostname: "h1".into(), verbose: true }).await.unwrap_err();
//! assert!(matches!(err, RpcError::VersionCap { .. }));
//! assert!(!pinned.can_send_version(ReportData::spec().arg_version("verbose").unwrap()));
//! server.stop().await;
//! # Ok(()) }
//! ```

use crate::spec::{ArgSpec, ArgType, EndpointSpec, MethodSpec};
use crate::{RemoteError, RpcError};
use serde_json::{Map, Value};
use verso::{Version, VersionManifest};

/// One RPC method, declared as its argument struct. Write it with
/// `#[derive(RpcMethod)]` (see the [module](self) documentation).
pub trait RpcMethod: Sized + Send + 'static {
    /// The method's name on the wire.
    const NAME: &'static str;
    /// The API version that introduced the method.
    const SINCE: Version;
    /// What the method returns.
    type Reply: Send + 'static;

    /// The declaration: name, version, arguments (built once).
    fn spec() -> &'static MethodSpec;

    /// Every argument's wire value, by name.
    fn encode_args(&self, enc: &Encoder<'_>) -> Result<Map<String, Value>, RpcError>;

    /// The arguments from a request the server has checked against [`spec`](Self::spec)
    /// (defaults filled in).
    // Handlers fail with the wire form itself; it is the cold path, so no boxing.
    #[allow(clippy::result_large_err)]
    fn decode_args(args: Map<String, Value>) -> Result<Self, RemoteError>;

    /// The reply's wire value.
    fn encode_reply(reply: &Self::Reply, enc: &Encoder<'_>) -> Result<Value, RpcError>;

    /// The reply from its wire value.
    fn decode_reply(value: Value) -> Result<Self::Reply, RpcError>;

    /// When an argument holds objects: this build's manifest of them (the argument types'
    /// object trees), which arguments at newer versions are backported to on the server.
    /// `None` (the default) for arguments without objects.
    fn args_manifest() -> Option<&'static VersionManifest> {
        None
    }

    /// When the reply holds objects: this build's manifest of them (the reply type's
    /// object tree, OVO's `obj_tree_get_versions`), which a reply at newer versions is
    /// backported to. `None` (the default) for replies without objects.
    fn reply_manifest() -> Option<&'static VersionManifest> {
        None
    }
}

/// An RPC API, independent of the topic it is served on: its name, its newest version,
/// its namespace and its methods. `verso objects update-lock` records it as
/// `[rpc.NAME]`.
pub trait RpcApi: 'static {
    /// The API's name (`conductor`); the lock file's `[rpc.NAME]`.
    const NAME: &'static str;
    /// The newest version this build serves and may send.
    const VERSION: Version;
    /// The endpoint namespace, if any.
    const NAMESPACE: Option<&'static str> = None;

    /// The declarations of its methods (`M::spec()` for each).
    fn methods() -> Vec<&'static MethodSpec>;

    /// The API as plain data (what the lock file records).
    fn spec() -> EndpointSpec {
        EndpointSpec {
            namespace: Self::NAMESPACE.map(str::to_owned),
            version: Self::VERSION,
            methods: Self::methods().into_iter().cloned().collect(),
        }
    }
}

/// How values are encoded for the peer: with its object manifest when known, so objects
/// are backported to the versions it has.
#[derive(Debug, Clone, Copy, Default)]
pub struct Encoder<'a> {
    manifest: Option<&'a VersionManifest>,
}

impl<'a> Encoder<'a> {
    /// Objects at this build's versions.
    pub fn new() -> Self {
        Encoder { manifest: None }
    }

    /// Objects backported to the versions `manifest` names.
    pub(crate) fn for_peer(manifest: &'a VersionManifest) -> Self {
        Encoder {
            manifest: Some(manifest),
        }
    }

    /// The peer's manifest, if known.
    pub fn manifest(&self) -> Option<&'a VersionManifest> {
        self.manifest
    }
}

/// What the derive calls; not a stable API.
#[doc(hidden)]
pub mod __private {
    use super::*;
    use std::marker::PhantomData;
    use verso::FieldType;
    use verso::FieldValue;

    pub use serde_json::{Map, Value};
    pub use verso::{Version, VersionManifest};

    /// Stands for a field type `T`; method resolution on `&&Tag<T>` picks the verso
    /// field encoding when `T` is a field type, else serde's.
    pub struct Tag<T>(PhantomData<fn() -> T>);

    impl<T> Tag<T> {
        /// The tag.
        pub const fn new() -> Self {
            Tag(PhantomData)
        }
    }

    impl<T> Default for Tag<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    /// Encoding of a verso field type (objects included).
    pub trait ViaField<T> {
        /// The argument type and whether it takes null.
        fn arg_type(&self) -> (ArgType, bool);
        /// The wire value.
        fn encode(&self, value: &T, enc: &Encoder<'_>) -> Result<Value, String>;
        /// From the wire value.
        fn decode(&self, value: Value) -> Result<T, String>;
        /// The manifest of the objects `T` holds, if it holds objects.
        fn manifest(&self) -> Option<VersionManifest>;
    }

    /// Encoding of any other serde type.
    pub trait ViaSerde<T> {
        /// The argument type and whether it takes null.
        fn arg_type(&self) -> (ArgType, bool);
        /// The wire value.
        fn encode(&self, value: &T, enc: &Encoder<'_>) -> Result<Value, String>;
        /// From the wire value.
        fn decode(&self, value: Value) -> Result<T, String>;
        /// No objects: `None`.
        fn manifest(&self) -> Option<VersionManifest> {
            None
        }
    }

    fn arg_type_of(ft: &FieldType) -> ArgType {
        match ft {
            FieldType::String | FieldType::Uuid | FieldType::DateTime | FieldType::Enum(_) => {
                ArgType::String
            }
            FieldType::Integer => ArgType::Int,
            FieldType::Float => ArgType::Float,
            FieldType::Boolean => ArgType::Bool,
            FieldType::Dict(_) => ArgType::Dict,
            FieldType::List(_) | FieldType::ListOfObjects(_) => ArgType::List,
            FieldType::Object(_) => ArgType::Object,
        }
    }

    impl<T: FieldValue> ViaField<T> for &Tag<T> {
        fn arg_type(&self) -> (ArgType, bool) {
            (arg_type_of(&T::field_type()), T::nullable())
        }
        fn encode(&self, value: &T, enc: &Encoder<'_>) -> Result<Value, String> {
            let mut primitive = value.to_primitive();
            if let (Some(manifest), Some(schema)) = (enc.manifest, T::child_schema()) {
                let schema = schema();
                let to = manifest.get(schema.name).unwrap_or(schema.version);
                value
                    .backport(&mut primitive, &to, Some(manifest))
                    .map_err(|e| e.to_string())?;
            }
            Ok(primitive)
        }
        fn decode(&self, value: Value) -> Result<T, String> {
            if value.is_null() && !T::nullable() {
                return Err("null is not allowed".into());
            }
            T::from_primitive_owned(value).map_err(|e| e.to_string())
        }
        fn manifest(&self) -> Option<VersionManifest> {
            T::child_schema().map(|schema| VersionManifest::for_schema(schema()))
        }
    }

    impl<T: serde::Serialize + serde::de::DeserializeOwned> ViaSerde<T> for Tag<T> {
        fn arg_type(&self) -> (ArgType, bool) {
            (ArgType::Any, false)
        }
        fn encode(&self, value: &T, _: &Encoder<'_>) -> Result<Value, String> {
            serde_json::to_value(value).map_err(|e| e.to_string())
        }
        fn decode(&self, value: Value) -> Result<T, String> {
            serde_json::from_value(value).map_err(|e| e.to_string())
        }
    }

    /// One argument's declaration. `ty` and `nullable` are what the field type says
    /// unless the declaration overrides them.
    pub fn arg_spec(
        name: &str,
        inferred: (ArgType, bool),
        ty: Option<ArgType>,
        nullable: bool,
        since: Option<Version>,
        default: Option<Result<Value, String>>,
    ) -> ArgSpec {
        let ty = ty.unwrap_or(inferred.0);
        let mut spec = match default {
            None => ArgSpec::required(name, ty),
            // A default that does not encode is declared as null, which the endpoint's
            // validation then refuses with the argument's name.
            Some(d) => ArgSpec::optional(name, ty, d.unwrap_or(Value::Null)),
        };
        if nullable || inferred.1 {
            spec = spec.nullable();
        }
        if let Some(since) = since {
            spec = spec.since(since);
        }
        spec
    }

    /// The manifests of several types as one (`None` when none holds objects).
    pub fn merge_manifests<const N: usize>(
        manifests: [Option<VersionManifest>; N],
    ) -> Option<VersionManifest> {
        manifests.into_iter().flatten().reduce(|mut all, m| {
            for (name, version) in m.iter() {
                all.insert(name, version);
            }
            all
        })
    }

    /// An argument the server could not decode, as oslo's `ValueError`.
    pub fn bad_argument(name: &str, reason: String) -> RemoteError {
        RemoteError::new("ValueError", "builtins", format!("{name}: {reason}"))
    }

    /// An encoding failure on this side.
    pub fn not_encoded(what: &str, reason: String) -> RpcError {
        RpcError::Serialization {
            detail: format!("{what}: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(major: u32, minor: u32) -> Version {
        Version::new(major, minor)
    }

    #[test]
    fn version_for_rises_only_for_arguments_off_their_default() {
        let spec = MethodSpec::new("update", v(1, 0))
            .arg(ArgSpec::required("id", ArgType::Int))
            .arg(ArgSpec::optional("force", ArgType::Bool, false).since(v(1, 2)))
            .arg(ArgSpec::optional("note", ArgType::String, "").since(v(1, 1)));
        let mut args = json!({"id": 1, "force": false, "note": ""})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(spec.version_for(&mut args), v(1, 0));
        assert_eq!(Value::Object(args), json!({"id": 1}));
        let mut args = json!({"id": 1, "force": false, "note": "x"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(spec.version_for(&mut args), v(1, 1));
        assert_eq!(Value::Object(args), json!({"id": 1, "note": "x"}));
        let mut args = json!({"id": 1, "force": true, "note": ""})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(spec.version_for(&mut args), v(1, 2));
        assert_eq!(
            Value::Object(args),
            json!({"id": 1, "force": true, "note": ""})
        );
    }
}
