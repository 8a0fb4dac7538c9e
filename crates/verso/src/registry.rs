//! The object registry: resolves a primitive's namespace, name and version to a class.
//!
//! There is no process-global registry: a service builds one at startup (two services,
//! or two tests, in one process each have their own).

use crate::context::RequestContext;
use crate::error::{Error, Result};
use crate::field::{DecodeContext, KnownClasses};
use crate::indirection::{BoxFuture, CallArgs, CallError, MethodOutput, Remotable};
use crate::limits::DecodeLimits;
use crate::manifest::VersionManifest;
use crate::object::{AnyObject, ObjectSchema, VersionedObject};
use crate::primitive::{decode_body, header, not_a_map, Header, PrimitiveKeys};
use crate::version::Version;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

type DecodeFn = fn(&Header<'_>, DecodeContext<'_>) -> Result<Box<dyn AnyObject>>;

type ClassFn = for<'a> fn(
    &'a RequestContext,
    &'a str,
    CallArgs,
) -> BoxFuture<'a, Result<MethodOutput, CallError>>;
/// The object after an instance call, and what the call returned.
type InstanceOutcome = Result<(Box<dyn AnyObject>, MethodOutput), CallError>;
type InstanceFn =
    for<'a> fn(Box<dyn AnyObject>, &'a str, CallArgs) -> BoxFuture<'a, InstanceOutcome>;

#[derive(Clone, Copy)]
struct Entry {
    schema: fn() -> &'static ObjectSchema,
    decode: DecodeFn,
    class_call: Option<ClassFn>,
    instance_call: Option<InstanceFn>,
}

fn instance_as<'a, O: Remotable>(
    obj: Box<dyn AnyObject>,
    method: &'a str,
    args: CallArgs,
) -> BoxFuture<'a, InstanceOutcome> {
    Box::pin(async move {
        let mut o: O = obj.downcast().map_err(|other| CallError::UnknownMethod {
            object: other.obj_schema().name.into(),
            method: method.into(),
        })?;
        let out = o.dispatch_instance(method, args).await?;
        Ok((Box::new(o) as Box<dyn AnyObject>, out))
    })
}

fn decode_as<O: VersionedObject>(
    h: &Header<'_>,
    cx: DecodeContext<'_>,
) -> Result<Box<dyn AnyObject>> {
    Ok(Box::new(decode_body::<O>(h, cx)?))
}

/// The classes one service knows.
///
/// ```
/// use verso::{Field, ObjectMeta, Registry, VersionedObject};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.0")]
/// pub struct Widget { pub id: Field<i64>, pub meta: ObjectMeta }
///
/// let mut registry = Registry::new();
/// registry.register::<Widget>();
/// let prim = Widget { id: 3.into(), ..Widget::blank() }.to_primitive(verso::Target::Own)?;
/// let any = registry.from_primitive(&prim)?;
/// assert_eq!(any.obj_schema().name, "Widget");
/// let w: Widget = any.downcast().expect("a Widget");
/// assert_eq!(w.id.get(), Some(&3));
/// # Ok::<(), verso::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    entries: BTreeMap<&'static str, Entry>,
    namespaces: BTreeSet<&'static str>,
    /// The primitive keys of the registered classes' serial namespaces, in the order
    /// they were first registered (usually one).
    serial_keys: Vec<PrimitiveKeys>,
    /// The same classes by namespace and name: the context of the decodes this
    /// registry runs, which borrow it.
    known: KnownClasses,
    limits: DecodeLimits,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every primitive [`from_primitive`](Self::from_primitive) decodes against
    /// `limits` instead of [`DecodeLimits::default`].
    pub fn set_limits(&mut self, limits: DecodeLimits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// The limits [`from_primitive`](Self::from_primitive) checks.
    pub fn limits(&self) -> DecodeLimits {
        self.limits
    }

    /// Adds a class. Register every class a peer may send at the top level.
    /// Registering a newer build of the same name replaces the older one.
    pub fn register<O: VersionedObject>(&mut self) -> &mut Self {
        self.entries.insert(
            O::NAME,
            Entry {
                schema: O::schema,
                decode: decode_as::<O>,
                class_call: None,
                instance_call: None,
            },
        );
        self.add_names::<O>();
        self
    }

    /// Adds a class with remotable methods, so [`call_class`](Self::call_class) and
    /// [`call_instance`](Self::call_instance) can run them (what a conductor registers).
    pub fn register_remotable<O: Remotable>(&mut self) -> &mut Self {
        self.entries.insert(
            O::NAME,
            Entry {
                schema: O::schema,
                decode: decode_as::<O>,
                class_call: Some(O::dispatch_class),
                instance_call: Some(instance_as::<O>),
            },
        );
        self.add_names::<O>();
        self
    }

    fn add_names<O: VersionedObject>(&mut self) {
        self.namespaces.insert(O::NAMESPACE);
        if !self.serial_keys.contains(&O::PRIMITIVE_KEYS) {
            self.serial_keys.push(O::PRIMITIVE_KEYS);
        }
        self.known.insert((O::NAMESPACE, O::NAME), O::schema);
    }

    /// The serial namespaces of the registered classes, in the order they were first
    /// registered.
    pub fn serial_namespaces(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.serial_keys.iter().map(PrimitiveKeys::serial_namespace)
    }

    /// The keys a primitive of any registered class is read with: those of the first
    /// registered serial namespace that the primitive uses a key of, else those of the
    /// first registered (OVO's serializer reads its base class's; a registry may hold
    /// several families), so that a primitive of an unknown serial namespace is
    /// `MissingKey` naming the key it lacks.
    fn keys_for(&self, map: &Map<String, Value>) -> PrimitiveKeys {
        self.serial_keys
            .iter()
            .find(|k| k.used_by(map))
            .or_else(|| self.serial_keys.first())
            .copied()
            .unwrap_or_default()
    }

    fn remotable_entry(&self, objname: &str, method: &str) -> Result<&Entry, CallError> {
        let entry = self
            .entries
            .get(objname)
            .ok_or_else(|| Error::UnsupportedObject {
                objtype: objname.into(),
            })?;
        let schema = (entry.schema)();
        if entry.class_call.is_none() || !schema.methods.iter().any(|m| m.name == method) {
            return Err(CallError::UnknownMethod {
                object: objname.into(),
                method: method.into(),
            });
        }
        Ok(entry)
    }

    /// Runs class method `objname.method` locally (the conductor side of
    /// `object_class_action_versions`). `caller_version` is the caller's version of the
    /// class; a caller newer than this side gets `IncompatibleObjectVersion`.
    pub async fn call_class(
        &self,
        ctx: &RequestContext,
        objname: &str,
        method: &str,
        caller_version: Option<Version>,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> Result<MethodOutput, CallError> {
        let entry = self.remotable_entry(objname, method)?;
        let schema = (entry.schema)();
        if let Some(v) = caller_version {
            if !schema.version.accepts(&v) {
                return Err(Error::IncompatibleObjectVersion {
                    name: objname.into(),
                    version: v,
                    supported: schema.version,
                }
                .into());
            }
        }
        let kind = schema
            .methods
            .iter()
            .find(|m| m.name == method)
            .map(|m| m.kind);
        if kind != Some(crate::schema::MethodKind::Class) {
            return Err(CallError::UnknownMethod {
                object: objname.into(),
                method: method.into(),
            });
        }
        let call = entry.class_call.ok_or_else(|| CallError::UnknownMethod {
            object: objname.into(),
            method: method.into(),
        })?;
        call(
            ctx,
            method,
            CallArgs::new(schema.name, method, args, kwargs),
        )
        .await
    }

    /// Decodes `objinst` (with `ctx` attached) and runs its instance method `method`
    /// locally (the conductor side of `object_action`). Returns the object before and
    /// after the call, and the result.
    pub async fn call_instance(
        &self,
        ctx: &RequestContext,
        objinst: &Value,
        method: &str,
        args: Vec<Value>,
        kwargs: Map<String, Value>,
    ) -> Result<(Box<dyn AnyObject>, Box<dyn AnyObject>, MethodOutput), CallError> {
        let mut obj = self.from_primitive(objinst)?;
        obj.obj_set_context(Some(ctx.clone()));
        let schema = obj.obj_schema();
        let entry = self.remotable_entry(schema.name, method)?;
        if schema
            .methods
            .iter()
            .find(|m| m.name == method)
            .map(|m| m.kind)
            != Some(crate::schema::MethodKind::Instance)
        {
            return Err(CallError::UnknownMethod {
                object: schema.name.into(),
                method: method.into(),
            });
        }
        let before = self.from_primitive(objinst)?;
        let call = entry
            .instance_call
            .ok_or_else(|| CallError::UnknownMethod {
                object: schema.name.into(),
                method: method.into(),
            })?;
        let (after, out) = call(
            obj,
            method,
            CallArgs::new(schema.name, method, args, kwargs),
        )
        .await?;
        Ok((before, after, out))
    }

    /// The schema of the class called `name`.
    pub fn schema(&self, name: &str) -> Option<&'static ObjectSchema> {
        self.entries.get(name).map(|e| (e.schema)())
    }

    /// Every registered schema, in name order.
    pub fn schemas(&self) -> impl Iterator<Item = &'static ObjectSchema> + '_ {
        self.entries.values().map(|e| (e.schema)())
    }

    /// The manifest of the class called `name` (`obj_tree_get_versions`).
    pub fn manifest(&self, name: &str) -> Option<VersionManifest> {
        self.schema(name).map(VersionManifest::for_schema)
    }

    /// Decodes a primitive of any registered class (`obj_from_primitive`): its keys in
    /// the serial namespace of a registered class (`versioned_object.*`,
    /// `cyborg_object.*`), the namespace one of the registered classes', the name
    /// registered in that serial namespace, and the version an older or equal minor of
    /// the same major. A primitive in no registered serial namespace is
    /// [`Error::MissingKey`] naming the first key it lacks. The whole primitive is first
    /// checked against the registry's [`limits`](Self::set_limits): one over them is
    /// refused ([`Error::Limit`]) before any of it is decoded.
    pub fn from_primitive(&self, primitive: &Value) -> Result<Box<dyn AnyObject>> {
        self.limits.check_value(primitive)?;
        let keys = self.keys_for(primitive.as_object().ok_or_else(not_a_map)?);
        let h = header(primitive, keys, &|ns| self.namespaces.contains(ns))?;
        if !self.namespaces.contains(h.namespace) {
            return Err(h.unsupported_namespace());
        }
        let entry = self
            .entries
            .get(h.name)
            .ok_or_else(|| Error::UnsupportedObject {
                objtype: h.name.to_owned(),
            })?;
        let schema = (entry.schema)();
        if schema.namespace != h.namespace {
            return Err(h.unsupported_namespace());
        }
        if schema.primitive_keys != h.keys {
            // As OVO: the class found reads its data under its own serial namespace.
            return Err(Error::MissingKey {
                key: schema.primitive_keys.data().into(),
            });
        }
        (entry.decode)(&h, DecodeContext::with_classes(&self.known))
    }

    /// Decodes JSON bytes of a primitive that must be of class `O`
    /// ([`VersionedObject::from_primitive_slice`]) with this registry's limits, and with
    /// its classes as the ones a contained object of another class is looked up in (as
    /// OVO's registry is): such an object is then `UnsupportedObject` or
    /// `IncompatibleObjectVersion` rather than only of the wrong type.
    pub fn from_primitive_slice_as<O: VersionedObject>(&self, bytes: &[u8]) -> Result<O> {
        crate::primitive::from_slice_limited(
            bytes,
            &self.limits,
            DecodeContext::with_classes(&self.known),
        )
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(
                self.schemas()
                    .map(|s| format!("{}.{} {}", s.namespace, s.name, s.version)),
            )
            .finish()
    }
}
