//! Remotable methods and object indirection.
//!
//! A method marked `#[remotable]` in a `#[verso::remotable]` impl block runs its body
//! locally, unless the request context carries an [`IndirectionApi`] for the object's
//! namespace: then the call is delegated (an agent asks the conductor, which owns the
//! database, to run it). Class methods send the object name, the method, the caller's
//! [`VersionManifest`] and the arguments (`object_class_action_versions`); instance
//! methods send the object's primitive (`object_action`) and apply the changed fields
//! that come back, change tracking included.
//!
//! The indirection API is attached to contexts by the service at startup
//! ([`RequestContext::with_indirection`]); there is no process-global, so a test with and
//! a test without indirection run side by side.
//!
//! ```
//! use verso::indirection::CallError;
//! use verso::{Field, ObjectMeta, RequestContext, VersionedObject};
//!
//! #[derive(VersionedObject, Clone, Debug, PartialEq)]
//! #[verso(namespace = "demo", version = "1.0", remotable)]
//! pub struct Counter { pub value: Field<i64>, pub meta: ObjectMeta }
//!
//! #[verso::remotable]
//! impl Counter {
//!     /// A class method: the caller passes the context.
//!     #[remotable]
//!     pub async fn starting_at(ctx: &RequestContext, value: i64) -> Result<Counter, CallError> {
//!         let _ = ctx;
//!         Ok(Counter { value: value.into(), ..Counter::blank() })
//!     }
//!
//!     /// An instance method: the context is the one stored on the object.
//!     #[remotable]
//!     pub async fn add(&mut self, n: i64) -> Result<i64, CallError> {
//!         let v = self.value.get().copied().unwrap_or(0) + n;
//!         self.value.set(v);
//!         Ok(v)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), CallError> {
//! let ctx = RequestContext::new("req-1"); // no indirection: bodies run here
//! let mut c = Counter::starting_at(&ctx, 40).await?;
//! c.meta.context = Some(Box::new(ctx));
//! assert_eq!(c.add(2).await?, 42);
//! # Ok(()) }
//! ```

use crate::context::RequestContext;
use crate::error::Error;
use crate::field::{FieldError, FieldValue};
use crate::manifest::{Target, VersionManifest};
use crate::object::{AnyObject, MethodSchema, VersionedObject};
use crate::primitive::{part_of, serial_namespace_of};
use crate::version::Version;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed, sendable future (the trait objects here cannot use `async fn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What an indirection call returns for an instance method: the changed fields (each a
/// primitive, plus `obj_what_changed`: the list of changed names) and the result.
pub type ActionReply = (Map<String, Value>, Value);

/// Where delegated calls go: OVO's `VersionedObjectIndirectionAPI`. verso-rpc's
/// `ConductorApi` implements it over RPC (conductor RPC 1.1).
pub trait IndirectionApi: Send + Sync + 'static {
    /// Runs a class method on the conductor; the result comes back backported to
    /// `object_versions`.
    fn object_class_action_versions<'a>(
        &'a self,
        ctx: &'a RequestContext,
        objname: &'a str,
        objmethod: &'a str,
        object_versions: &'a VersionManifest,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> BoxFuture<'a, Result<Value, CallError>>;

    /// Runs an instance method on the conductor on `objinst` (a primitive).
    fn object_action<'a>(
        &'a self,
        ctx: &'a RequestContext,
        objinst: Value,
        objmethod: &'a str,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ActionReply, CallError>>;

    /// Asks the conductor to convert `objinst` (nested objects included) to the versions
    /// in `object_versions`.
    fn object_backport_versions<'a>(
        &'a self,
        ctx: &'a RequestContext,
        objinst: Value,
        object_versions: &'a VersionManifest,
    ) -> BoxFuture<'a, Result<Value, CallError>>;
}

/// The indirection APIs of a context, by object namespace (the "object family").
#[derive(Clone, Default)]
pub struct Indirection(BTreeMap<String, Arc<dyn IndirectionApi>>);

impl RequestContext {
    /// Delegates remotable calls of objects in `namespace` to `api` for requests made
    /// with this context (an agent's contexts carry it; a conductor's do not).
    pub fn with_indirection(mut self, namespace: &str, api: Arc<dyn IndirectionApi>) -> Self {
        let mut ind = self.extension::<Indirection>().cloned().unwrap_or_default();
        ind.0.insert(namespace.to_owned(), api);
        self.extensions.insert(ind);
        self
    }

    /// The indirection API for objects of `namespace`, if this context has one.
    pub fn indirection(&self, namespace: &str) -> Option<&Arc<dyn IndirectionApi>> {
        self.extension::<Indirection>()?.0.get(namespace)
    }
}

/// Why a remotable call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The method body failed (here, or on the conductor). `kind` names the error as the
    /// body raised it (`DeviceNotFound`, `Forbidden`); match on it.
    #[error("{kind}: {message}")]
    Method {
        /// The error's kind (on the wire: the exception class name).
        kind: String,
        /// The human-readable message.
        message: String,
        /// Structured details.
        fields: Map<String, Value>,
    },
    /// An object could not be encoded, decoded or backported.
    #[error(transparent)]
    Object(#[from] Error),
    /// An instance method was called on an object with no context (OVO's
    /// `OrphanedObjectError`): set `meta.context` first.
    #[error("cannot call {method} on an orphaned {object} object (it has no context)")]
    Orphaned {
        /// Object name.
        object: &'static str,
        /// Method name.
        method: String,
    },
    /// The object has no remotable method of that name.
    #[error("{object} has no remotable method {method}")]
    UnknownMethod {
        /// Object name.
        object: String,
        /// Method name.
        method: String,
    },
    /// The arguments do not fit the method's signature.
    #[error("bad arguments for {object}.{method}: {reason}")]
    BadArguments {
        /// Object name.
        object: &'static str,
        /// Method name.
        method: String,
        /// What is wrong.
        reason: String,
    },
    /// The indirection API could not deliver the call (version cap, timeout, transport).
    /// The source is the transport layer's own typed error; downcast it to match.
    #[error("object indirection failed: {0}")]
    Indirection(Arc<dyn std::error::Error + Send + Sync>),
}

impl CallError {
    /// A method error of `kind`.
    pub fn method(kind: impl Into<String>, message: impl Into<String>) -> Self {
        CallError::Method {
            kind: kind.into(),
            message: message.into(),
            fields: Map::new(),
        }
    }

    /// The error's kind as a Python peer names it (the exception class).
    pub fn kind(&self) -> &str {
        match self {
            CallError::Method { kind, .. } => kind,
            CallError::Object(e) => e.ovo_exception(),
            CallError::Orphaned { .. } => "OrphanedObjectError",
            CallError::UnknownMethod { .. } => "AttributeError",
            CallError::BadArguments { .. } => "TypeError",
            CallError::Indirection(_) => "IndirectionError",
        }
    }
}

/// What a method body returned, as the conductor needs it: objects are kept as objects
/// so they can be backported to the caller's manifest.
#[derive(Debug)]
pub enum MethodOutput {
    /// An object (or list object).
    Object(Box<dyn AnyObject>),
    /// Any other value, in primitive form.
    Value(Value),
}

impl MethodOutput {
    /// The primitive for a caller that knows `manifest` (objects backported).
    pub fn to_primitive_for_peer(
        &self,
        manifest: Option<&VersionManifest>,
    ) -> Result<Value, Error> {
        match self {
            MethodOutput::Value(v) => Ok(v.clone()),
            MethodOutput::Object(o) => match manifest {
                Some(m) => o.obj_to_primitive(Target::Peer(m)),
                None => o.obj_to_primitive(Target::Own),
            },
        }
    }
}

/// A value that can be an argument or result of a remotable method: every field value
/// (scalars, enums, objects, lists) and `()`.
pub trait RemoteValue: Sized + Send + 'static {
    /// The primitive form.
    fn to_remote(&self) -> Value;
    /// Reads the primitive form; the caller names the argument or result it was.
    fn from_remote(value: &Value) -> Result<Self, FieldError>;
    /// Stores the context on returned objects.
    fn attach_context(&mut self, ctx: &RequestContext);
    /// As the conductor keeps it.
    fn into_output(self) -> MethodOutput;
    /// The manifest of the objects this type holds (OVO's `obj_tree_get_versions` of
    /// its class), or `None` when it holds none: what a caller backports a newer reply
    /// to.
    fn manifest() -> Option<VersionManifest>;
}

/// `RemoteValue` for field values that travel as plain primitives (everything but an
/// object itself; objects implement it through the derive).
macro_rules! remote_by_value {
    ($([$($generics:tt)*] $t:ty),* $(,)?) => {$(
        impl<$($generics)*> RemoteValue for $t {
            fn to_remote(&self) -> Value {
                FieldValue::to_primitive(self)
            }
            fn from_remote(value: &Value) -> Result<Self, FieldError> {
                <$t as FieldValue>::from_primitive(value)
            }
            fn attach_context(&mut self, ctx: &RequestContext) {
                FieldValue::attach_context(self, ctx);
            }
            fn into_output(self) -> MethodOutput {
                MethodOutput::Value(FieldValue::to_primitive(&self))
            }
            fn manifest() -> Option<VersionManifest> {
                <$t as FieldValue>::child_schema().map(|schema| VersionManifest::for_schema(schema()))
            }
        }
    )*};
}

remote_by_value!(
    [] String,
    [] i64,
    [] f64,
    [] bool,
    [] uuid::Uuid,
    [] crate::datetime::DateTime,
    [T: FieldValue] Option<T>,
    [T: FieldValue] Vec<T>,
    [V: FieldValue] BTreeMap<String, V>,
);

/// `RemoteValue` of a versioned enum (the derive's).
pub(crate) fn enum_into_output<E: FieldValue>(value: E) -> MethodOutput {
    MethodOutput::Value(value.to_primitive())
}

/// `RemoteValue` of an object (the derive's): kept as an object, so the conductor can
/// backport it to the caller's manifest.
pub(crate) fn object_into_output<O: VersionedObject>(obj: O) -> MethodOutput {
    MethodOutput::Object(Box::new(obj))
}

impl RemoteValue for () {
    fn to_remote(&self) -> Value {
        Value::Null
    }
    fn from_remote(_: &Value) -> Result<Self, FieldError> {
        Ok(())
    }
    fn attach_context(&mut self, _: &RequestContext) {}
    fn into_output(self) -> MethodOutput {
        MethodOutput::Value(Value::Null)
    }
    fn manifest() -> Option<VersionManifest> {
        None
    }
}

/// The arguments of a dispatched call, positional first, then by name (Python's rules).
#[derive(Debug)]
pub struct CallArgs {
    object: &'static str,
    method: String,
    positional: Vec<Option<Value>>,
    keyword: Map<String, Value>,
}

impl CallArgs {
    /// Arguments for `object.method`.
    pub fn new(
        object: &'static str,
        method: &str,
        positional: Vec<Value>,
        keyword: Map<String, Value>,
    ) -> Self {
        CallArgs {
            object,
            method: method.to_owned(),
            positional: positional.into_iter().map(Some).collect(),
            keyword,
        }
    }

    fn bad(&self, reason: String) -> CallError {
        CallError::BadArguments {
            object: self.object,
            method: self.method.clone(),
            reason,
        }
    }

    /// The argument at `index`, or named `name`.
    pub fn take<T: RemoteValue>(&mut self, index: usize, name: &str) -> Result<T, CallError> {
        let by_position = self.positional.get_mut(index).and_then(Option::take);
        let by_name = self.keyword.remove(name);
        let value = match (by_position, by_name) {
            (Some(_), Some(_)) => {
                return Err(self.bad(format!("got multiple values for argument '{name}'")))
            }
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => return Err(self.bad(format!("missing required argument '{name}'"))),
        };
        T::from_remote(&value).map_err(|e| self.bad(format!("argument '{name}': {e}")))
    }

    /// Fails if any argument was not taken.
    pub fn finish(self) -> Result<(), CallError> {
        if self.positional.iter().any(Option::is_some) {
            return Err(self.bad(format!(
                "takes {} positional arguments but more were given",
                self.positional.iter().filter(|p| p.is_none()).count()
            )));
        }
        if let Some(k) = self.keyword.keys().next() {
            return Err(self.bad(format!("got an unexpected keyword argument '{k}'")));
        }
        Ok(())
    }
}

/// An object with remotable methods; implemented by `#[verso::remotable]`.
pub trait Remotable: VersionedObject {
    /// The remotable methods.
    fn remotable_methods() -> Vec<MethodSchema>;

    /// Runs the local body of class method `method`.
    fn dispatch_class<'a>(
        ctx: &'a RequestContext,
        method: &'a str,
        args: CallArgs,
    ) -> BoxFuture<'a, Result<MethodOutput, CallError>>;

    /// Runs the local body of instance method `method` on `self`.
    fn dispatch_instance<'a>(
        &'a mut self,
        method: &'a str,
        args: CallArgs,
    ) -> BoxFuture<'a, Result<MethodOutput, CallError>>;
}

/// Applies an `object_action` reply to the caller's object: each changed field is
/// assigned, then the changed set becomes exactly `obj_what_changed` (as OVO's
/// `remotable` wrapper does).
pub fn apply_updates<O: VersionedObject>(
    obj: &mut O,
    updates: &Map<String, Value>,
) -> Result<(), Error> {
    let schema = O::schema();
    for (name, value) in updates {
        if schema.field(name).is_some() {
            obj.set_field_primitive(name, value)?;
        }
    }
    obj.reset_changes();
    if let Some(changed) = updates.get("obj_what_changed").and_then(Value::as_array) {
        for name in changed.iter().filter_map(Value::as_str) {
            if let Some(i) = schema.index_of(name) {
                obj.field_mut(i).set_changed(true);
            }
        }
    }
    Ok(())
}

/// The `updates` of an `object_action` reply: every field set after the call that was
/// unset before or whose primitive differs, plus `obj_what_changed` (Nova's conductor).
pub fn action_updates(
    before: &dyn AnyObject,
    after: &dyn AnyObject,
) -> Result<Map<String, Value>, Error> {
    let data = |o: &dyn AnyObject| -> Result<Map<String, Value>, Error> {
        let mut p = o.obj_to_primitive(Target::Own)?;
        let data_key = o.obj_schema().primitive_keys.data();
        Ok(match p.get_mut(data_key).map(Value::take) {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        })
    };
    let old = data(before)?;
    let mut updates: Map<String, Value> = data(after)?
        .into_iter()
        .filter(|(k, v)| old.get(k) != Some(v))
        .collect();
    updates.insert(
        "obj_what_changed".into(),
        Value::Array(
            after
                .obj_what_changed()
                .into_iter()
                .map(|n| Value::String(n.into()))
                .collect(),
        ),
    );
    Ok(updates)
}

/// Sets `ctx` on an object (and on contained objects), as OVO's deserializer does.
pub(crate) fn attach_context<O: VersionedObject>(obj: &mut O, ctx: &RequestContext) {
    obj.meta_mut().context = Some(Box::new(ctx.clone()));
    for i in 0..O::schema().fields.len() {
        obj.field_mut(i).attach_context(ctx);
    }
}

/// Decodes a delegated call's result and gives it the caller's context.
pub(crate) fn decode_result<T: RemoteValue>(
    value: &Value,
    ctx: &RequestContext,
) -> Result<T, CallError> {
    let mut v = T::from_remote(value).map_err(|e| match e {
        FieldError::Object(e) => CallError::Object(*e),
        other => CallError::Object(Error::Malformed {
            what: format!("the result of a remote call: {other}"),
        }),
    })?;
    v.attach_context(ctx);
    Ok(v)
}

// Objects that arrive at a version this build does not know, backported through the
// context's indirection API, as oslo.versionedobjects' `VersionedObjectSerializer` does
// (`_process_object`: on `IncompatibleObjectVersion` it calls
// `indirection_api.object_backport_versions(context, objprim,
// obj_tree_get_versions(objname))` and uses what comes back). The remotable wrapper
// uses it for an `object_action` reply; verso-rpc for typed replies and arguments.

/// Whether `obj` (an object primitive in serial namespace `serial`) or an object inside
/// it is at a newer minor, of the same major, than `manifest` names for its class. The
/// `.patch` part is ignored, as OVO accepts it without a backport.
fn object_holds_newer(obj: &Map<String, Value>, serial: &str, manifest: &VersionManifest) -> bool {
    let newer = part_of(obj, serial, "name")
        .and_then(Value::as_str)
        .and_then(|name| manifest.get(name))
        .zip(
            part_of(obj, serial, "version")
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<Version>().ok()),
        )
        .is_some_and(|(known, sent)| sent.major() == known.major() && sent.minor() > known.minor());
    newer || part_of(obj, serial, "data").is_some_and(|d| holds_newer(d, manifest))
}

/// Whether any object in `value` (at any depth) is at a newer minor of the same major
/// than `manifest` names for its class: whether [`backport_newer`] has anything to do.
/// Objects of every serial namespace are recognised by their keys
/// ([`serial_namespace_of`](crate::primitive::serial_namespace_of)): `versioned_object.*`
/// and a family's own, such as `cyborg_object.*`.
pub fn holds_newer(value: &Value, manifest: &VersionManifest) -> bool {
    match value {
        Value::Object(m) => match serial_namespace_of(m) {
            Some(serial) => object_holds_newer(m, serial, manifest),
            None => m.values().any(|v| holds_newer(v, manifest)),
        },
        Value::Array(a) => a.iter().any(|v| holds_newer(v, manifest)),
        _ => false,
    }
}

/// The entities of `value` to backport, each with the indirection API of its namespace:
/// `value` itself if it is an object primitive, else the members of a list or dict,
/// recursively (OVO's `deserialize_entity`).
fn entities<'v, 'c>(
    ctx: &'c RequestContext,
    value: &'v mut Value,
    manifest: &VersionManifest,
    out: &mut Vec<(&'v mut Value, &'c Arc<dyn IndirectionApi>)>,
) {
    let object = value
        .as_object()
        .and_then(|m| serial_namespace_of(m).map(|serial| (m, serial)));
    if let Some((m, serial)) = object {
        let api = Some(m)
            .filter(|m| object_holds_newer(m, serial, manifest))
            .and_then(|m| part_of(m, serial, "namespace"))
            .and_then(Value::as_str)
            .and_then(|ns| ctx.indirection(ns));
        if let Some(api) = api {
            out.push((value, api));
        }
        return;
    }
    match value {
        Value::Array(a) => a.iter_mut().for_each(|v| entities(ctx, v, manifest, out)),
        Value::Object(m) => m.values_mut().for_each(|v| entities(ctx, v, manifest, out)),
        _ => {}
    }
}

/// Backports, through `ctx`'s indirection API (`object_backport_versions` with
/// `manifest`), every object in `value` that this build, whose classes `manifest` names,
/// cannot read: the value itself if it is an object, else each object member of a list
/// or dict, at any depth, whose class or a class inside it is at a newer minor of a
/// known major. Each is replaced by the conductor's answer. Another major, an unknown
/// class or a context without indirection for the object's namespace leaves the value
/// as it came (its decode then fails as it would have).
///
/// Returns without a call when nothing is newer, the common case: one walk of the value.
/// A failed backport is `on_error(object name, the API's error)`.
pub async fn backport_newer<E>(
    ctx: &RequestContext,
    value: &mut Value,
    manifest: &VersionManifest,
    on_error: impl Fn(&str, CallError) -> E,
) -> Result<(), E> {
    if manifest.is_empty() || !holds_newer(value, manifest) {
        return Ok(());
    }
    let mut found = Vec::new();
    entities(ctx, value, manifest, &mut found);
    for (slot, api) in found {
        let objprim = std::mem::take(slot);
        let name = objprim
            .as_object()
            .and_then(|m| part_of(m, serial_namespace_of(m)?, "name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        *slot = api
            .object_backport_versions(ctx, objprim, manifest)
            .await
            .map_err(|e| on_error(&name, e))?;
    }
    Ok(())
}

/// [`backport_newer`] of an `object_action` reply's `updates` (each changed field's
/// primitive), the API's error as it came.
pub(crate) async fn backport_updates(
    ctx: &RequestContext,
    updates: &mut Map<String, Value>,
    manifest: &VersionManifest,
) -> Result<(), CallError> {
    if !updates.values().any(|v| holds_newer(v, manifest)) {
        return Ok(());
    }
    let mut value = Value::Object(std::mem::take(updates));
    let done = backport_newer(ctx, &mut value, manifest, |_, e| e).await;
    if let Value::Object(m) = value {
        *updates = m;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest() -> VersionManifest {
        let mut m = VersionManifest::new();
        m.insert("Handle", Version::new(1, 2))
            .insert("Device", Version::new(1, 1));
        m
    }

    fn obj(name: &str, version: &str, data: Value) -> Value {
        json!({"versioned_object.name": name, "versioned_object.namespace": "ns",
               "versioned_object.version": version, "versioned_object.data": data})
    }

    #[test]
    fn only_newer_minors_of_known_classes_count() {
        let m = manifest();
        let newer = |v: &Value| holds_newer(v, &m);
        assert!(!newer(&obj("Handle", "1.2", json!({}))));
        assert!(!newer(&obj("Handle", "1.1", json!({}))));
        assert!(
            !newer(&obj("Handle", "1.2.7", json!({}))),
            "a .patch is read as it is"
        );
        assert!(newer(&obj("Handle", "1.3", json!({}))));
        assert!(
            !newer(&obj("Handle", "2.0", json!({}))),
            "another major: no backport"
        );
        assert!(
            !newer(&obj("Other", "9.9", json!({}))),
            "an unknown class: no backport"
        );
        let nested = obj(
            "Handle",
            "1.2",
            json!({"device": obj("Device", "1.4", json!({}))}),
        );
        assert!(newer(&nested));
        assert!(newer(&json!([obj("Handle", "1.2", json!({})), nested])));
        assert!(newer(
            &json!({"a": {"b": [obj("Device", "1.2", json!({}))]}})
        ));
        assert!(!newer(&json!({"versioned_object.version": "1.9"})));
    }
}
