//! Field types and field slots.
//!
//! A field of a versioned object is declared as `Field<T>` where `T` is a
//! [`FieldValue`]: `String`, `i64`, `f64`, `bool`, `Uuid`, [`DateTime`], an enum with
//! `#[derive(VersionedEnum)]`, `BTreeMap<String, V>` (OVO `Dict`), `Vec<V>` (`List`, or
//! `ListOfObjects` when `V` is an object), another versioned object (`Object`), and
//! `Option<V>` for a nullable field.
//!
//! A [`Field`] is *unset* until assigned (as in OVO, an unset field is absent from the
//! primitive and [`Field::get`] returns `None`); assigning marks it changed.
//!
//! (Long on purpose: every field type's codec, OVO's coercions and the Python text
//! forms sit together, so a rule shared by the types, a coercion, a null, a Python
//! repr, is written once and read beside its twins.)

use crate::context::RequestContext;
use crate::error::Error;
use crate::manifest::VersionManifest;
pub use crate::schema::FieldType;
use crate::sink::{JsonSink, Sink, ValueSink};
use crate::version::Version;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// Why a field rejects a value, before it is known which object and field it is: what
/// [`FieldValue`] conversions return. The object-level code that knows the field makes
/// the [`Error`] with [`at`](Self::at).
#[derive(Debug, Clone, thiserror::Error)]
pub enum FieldError {
    /// The value is not one the field takes; the reason is in OVO's words where it has
    /// them (`Field value bogus is invalid`) and names the value.
    #[error("{0}")]
    Invalid(String),
    /// `null` for a non-nullable field without a default.
    #[error("cannot be None")]
    CannotBeNone,
    /// A contained object that failed to decode: its own error, already complete.
    #[error(transparent)]
    Object(Box<Error>),
}

impl FieldError {
    /// The error of field `field` of `object` rejecting the value.
    pub fn at(self, object: &'static str, field: &str) -> Error {
        match self {
            FieldError::Invalid(reason) => Error::InvalidField {
                object,
                field: field.to_owned(),
                reason,
            },
            FieldError::CannotBeNone => Error::InvalidField {
                object,
                field: field.to_owned(),
                reason: format!("Field `{field}' cannot be None"),
            },
            FieldError::Object(e) => *e,
        }
    }
}

impl From<Error> for FieldError {
    /// A contained object's decode error.
    fn from(e: Error) -> Self {
        FieldError::Object(Box::new(e))
    }
}

/// Results of field conversions.
pub type Result<T, E = FieldError> = std::result::Result<T, E>;

/// `(namespace, name)` to the class schema: the classes of a [`Registry`](crate::Registry),
/// which a decode it runs resolves contained objects of other classes against.
pub(crate) type KnownClasses =
    BTreeMap<(&'static str, &'static str), fn() -> &'static crate::schema::ObjectSchema>;

/// What a decode knows besides the primitive, passed down every decode call as serde
/// passes a seed: the classes of the [`Registry`](crate::Registry) running it, if one
/// does. OVO looks a contained object of another class up in its registry before it
/// compares the class with the field's; with a registry's context such an object is
/// `UnsupportedObject` or `IncompatibleObjectVersion`, without one only of the wrong
/// type. [`DecodeContext::NONE`] is the context of a decode no registry runs
/// ([`FieldValue::from_primitive`], `VersionedObject::from_primitive*`).
#[derive(Clone, Copy, Default)]
pub struct DecodeContext<'a> {
    classes: Option<&'a KnownClasses>,
}

impl DecodeContext<'static> {
    /// A decode that no registry runs.
    pub const NONE: DecodeContext<'static> = DecodeContext { classes: None };
}

impl<'a> DecodeContext<'a> {
    /// A decode run by a registry with these classes.
    pub(crate) fn with_classes(classes: &'a KnownClasses) -> Self {
        DecodeContext {
            classes: Some(classes),
        }
    }

    /// The class `(namespace, name)` among the decoding registry's classes, and whether
    /// that registry has any class of `namespace`.
    pub(crate) fn class(
        self,
        namespace: &str,
        name: &str,
    ) -> (Option<fn() -> &'static crate::schema::ObjectSchema>, bool) {
        match self.classes {
            Some(k) => (
                k.get(&(namespace, name)).copied(),
                k.keys().any(|(ns, _)| *ns == namespace),
            ),
            None => (None, false),
        }
    }
}

impl fmt::Debug for DecodeContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodeContext")
            .field("classes", &self.classes.map(BTreeMap::len))
            .finish()
    }
}

/// A Rust type that can be the value of an object field.
///
/// Scalars convert to and from their OVO primitive; objects and lists of objects also
/// take part in change tracking and backports, through the methods with defaults.
pub trait FieldValue: Clone + fmt::Debug + PartialEq + Send + Sync + 'static {
    /// The OVO type of the field.
    fn field_type() -> FieldType;
    /// Whether `None` is a value (true only for `Option<T>`).
    fn nullable() -> bool {
        false
    }
    /// The schema of the object this field holds, if it holds objects.
    fn child_schema() -> Option<fn() -> &'static crate::schema::ObjectSchema> {
        None
    }
    /// Writes the primitive (JSON) form, as OVO's `field.to_primitive`, to `out`: the one
    /// encode walk, whose two sinks make a `Value` ([`to_primitive`](Self::to_primitive))
    /// or JSON text ([`write_json`](Self::write_json)).
    fn encode<S: Sink>(&self, out: &mut S);
    /// The primitive (JSON) form, as OVO's `field.to_primitive`.
    fn to_primitive(&self) -> Value {
        let mut out = ValueSink::default();
        self.encode(&mut out);
        out.finish()
    }
    /// Reads the primitive form in a decode with context `cx` (which contained objects
    /// pass on to theirs); `Err(reason)` when the field rejects it. `null` only reaches
    /// this for nullable fields.
    fn from_primitive_in(value: &Value, cx: DecodeContext<'_>) -> Result<Self>;
    /// [`from_primitive_in`](Self::from_primitive_in) from an owned value (saves a copy
    /// for strings).
    fn from_primitive_owned_in(value: Value, cx: DecodeContext<'_>) -> Result<Self> {
        Self::from_primitive_in(&value, cx)
    }
    /// Reads the primitive form in a decode no registry runs ([`DecodeContext::NONE`]).
    fn from_primitive(value: &Value) -> Result<Self> {
        Self::from_primitive_in(value, DecodeContext::NONE)
    }
    /// [`from_primitive`](Self::from_primitive) from an owned value.
    fn from_primitive_owned(value: Value) -> Result<Self> {
        Self::from_primitive_owned_in(value, DecodeContext::NONE)
    }
    /// Reads a primitive that is a JSON string, without building a `Value` (the fast path
    /// of [`VersionedObject::from_primitive_slice`](crate::VersionedObject::from_primitive_slice)).
    /// A string or an integer never holds an object, so these two need no context.
    fn from_json_str(s: &str) -> Result<Self> {
        Self::from_primitive_owned(Value::String(s.to_owned()))
    }
    /// Reads a primitive that is a JSON integer (the byte path's fast path).
    fn from_json_i64(v: i64) -> Result<Self> {
        Self::from_primitive_owned(Value::from(v))
    }
    /// Reads a primitive that is a JSON list straight from the parser (the byte path):
    /// the outer error is the parser's, the inner one the field's. By default the list
    /// is read into a `Value` first.
    fn from_json_seq<'de, A: serde::de::SeqAccess<'de>>(
        seq: A,
        cx: DecodeContext<'_>,
    ) -> std::result::Result<Result<Self>, A::Error> {
        let v = <Value as serde::Deserialize>::deserialize(
            serde::de::value::SeqAccessDeserializer::new(seq),
        )?;
        Ok(Self::from_primitive_owned_in(v, cx))
    }
    /// Reads a primitive that is a JSON object straight from the parser (the byte path);
    /// objects decode their primitive without building a `Value`. By default the object
    /// is read into a `Value` first.
    fn from_json_map<'de, A: serde::de::MapAccess<'de>>(
        map: A,
        cx: DecodeContext<'_>,
    ) -> std::result::Result<Result<Self>, A::Error> {
        let v = <Value as serde::Deserialize>::deserialize(
            serde::de::value::MapAccessDeserializer::new(map),
        )?;
        Ok(Self::from_primitive_owned_in(v, cx))
    }
    /// Reads a list member that is a JSON object straight from the parser and appends it
    /// to `into` (the byte path of a `Vec` of this type); objects are decoded in place,
    /// in the list's memory. The outer error is the parser's, the inner one the
    /// member's. Not part of the public API.
    #[doc(hidden)]
    fn __push_json_map<'de, A: serde::de::MapAccess<'de>>(
        into: &mut Vec<Self>,
        map: A,
        cx: DecodeContext<'_>,
    ) -> std::result::Result<Result<()>, A::Error> {
        Ok(Self::from_json_map(map, cx)?.map(|v| into.push(v)))
    }
    /// Appends the primitive as JSON text to `out`, without building a `Value` first
    /// (the fast path of [`VersionedObject::to_primitive_bytes`](crate::VersionedObject::to_primitive_bytes)).
    #[inline]
    fn write_json(&self, out: &mut Vec<u8>) {
        JsonSink::append(out, |sink| self.encode(sink));
    }
    /// Appends the contained object(s) backported to `to` as JSON text (what
    /// [`backport`](Self::backport) does to a primitive, written directly).
    fn write_backport(
        &self,
        out: &mut Vec<u8>,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        let _ = (to, manifest);
        self.write_json(out);
        Ok(())
    }
    /// A JSON view for people and tests: like the primitive, but DateTimes in Python's
    /// `isoformat()` and objects as descriptions.
    fn describe(&self) -> Value {
        self.to_primitive()
    }
    /// Whether a contained object reports changes.
    fn has_changes(&self) -> bool {
        false
    }
    /// Resets the changes of contained objects, recursively.
    fn reset_changes_recursive(&mut self) {}
    /// Backports the contained object(s), whose primitive is `primitive`, to `to`.
    fn backport(
        &self,
        primitive: &mut Value,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        let _ = (primitive, to, manifest);
        Ok(())
    }
    /// Stores the request context on contained objects.
    fn attach_context(&mut self, ctx: &RequestContext) {
        let _ = ctx;
    }
}

fn invalid(reason: impl Into<String>) -> FieldError {
    FieldError::Invalid(reason.into())
}

fn type_error(expected: &str, value: &Value) -> FieldError {
    invalid(format!("A {expected} is required, not {value}"))
}

mod values;
pub use values::python_float_repr;

/// Reads a [`VersionedEnum`] from its wire text; used by the derive, through
/// `__private`.
pub(crate) fn enum_from_str<E: VersionedEnum>(s: &str) -> Result<E> {
    E::from_str(s).ok_or_else(|| invalid(format!("Field value {s} is invalid")))
}

/// A field enum: a Rust enum whose variants are an OVO `Enum` field's valid values.
/// Implemented by `#[derive(VersionedEnum)]`.
pub trait VersionedEnum: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// The valid values, in declaration order.
    const VALUES: &'static [&'static str];
    /// The wire text of this value.
    fn as_str(&self) -> &'static str;
    /// The value for a wire text.
    fn from_str(s: &str) -> Option<Self>;
}

/// Implements [`FieldValue`] for a [`VersionedEnum`]; used by the derive, through
/// `__private`.
pub(crate) fn enum_from_primitive<E: VersionedEnum>(value: &Value) -> Result<E> {
    match value {
        Value::String(s) => {
            E::from_str(s).ok_or_else(|| invalid(format!("Field value {s} is invalid")))
        }
        other => Err(invalid(format!("Field value {other} is invalid"))),
    }
}

/// One field of an object: unset, or set to a value; and whether it changed.
///
/// ```
/// use verso::Field;
/// let mut f: Field<String> = Field::unset();
/// assert_eq!(f.get(), None);
/// f.set("host1".to_string());
/// assert_eq!(f.get().map(String::as_str), Some("host1"));
/// assert!(f.is_changed());
/// ```
#[derive(Clone, PartialEq)]
pub struct Field<T> {
    value: Option<T>,
    changed: bool,
}

impl<T> Field<T> {
    /// An unset field.
    pub const fn unset() -> Self {
        Field {
            value: None,
            changed: false,
        }
    }

    /// A field set to `value` and marked changed (as after OVO's constructor).
    pub fn new(value: T) -> Self {
        Field {
            value: Some(value),
            changed: true,
        }
    }

    /// The value, or `None` while the field is unset.
    pub fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// The value, or [`Error::UnsetField`] naming field `field` of `object` while the
    /// field is unset: for code that must refuse an object lacking a field rather
    /// than read a default in its place (OVO raises when an unset field is read).
    ///
    /// ```
    /// use verso::{Error, Field};
    /// let vendor: Field<String> = Field::unset();
    /// assert_eq!(
    ///     vendor.require("Device", "vendor"),
    ///     Err(Error::UnsetField { object: "Device", field: "vendor" })
    /// );
    /// assert_eq!(Field::new(7).require("Device", "id"), Ok(&7));
    /// ```
    pub fn require(
        &self,
        object: &'static str,
        field: &'static str,
    ) -> std::result::Result<&T, Error> {
        self.value
            .as_ref()
            .ok_or(Error::UnsetField { object, field })
    }

    /// Mutable access to the value; marks the field changed (even if nothing is written).
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if self.value.is_some() {
            self.changed = true;
        }
        self.value.as_mut()
    }

    /// Assigns and marks the field changed, even when the value is equal (as OVO does).
    pub fn set(&mut self, value: T) {
        self.value = Some(value);
        self.changed = true;
    }

    /// Makes the field unset again (OVO's `delattr`) and forgets its change.
    pub fn clear(&mut self) {
        self.value = None;
        self.changed = false;
    }

    /// Whether the field has a value.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }

    /// Whether the field itself was assigned since the last reset (contained objects'
    /// own changes are reported by the object's `what_changed`).
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// Sets or clears the changed mark without touching the value.
    pub fn set_changed(&mut self, changed: bool) {
        self.changed = changed;
    }

    /// The value, leaving the field unset.
    pub fn take(&mut self) -> Option<T> {
        self.changed = false;
        self.value.take()
    }
}

impl<T> Default for Field<T> {
    fn default() -> Self {
        Field::unset()
    }
}

impl<T> From<T> for Field<T> {
    fn from(value: T) -> Self {
        Field::new(value)
    }
}

impl From<&str> for Field<String> {
    fn from(value: &str) -> Self {
        Field::new(value.to_owned())
    }
}

impl<T: fmt::Debug> fmt::Debug for Field<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            None => f.write_str("<unset>"),
            Some(v) if self.changed => write!(f, "{v:?} (changed)"),
            Some(v) => v.fmt(f),
        }
    }
}

/// A field slot seen without its type: what the object machinery needs of each field.
/// Implemented for every `Field<T: FieldValue>`; objects expose their fields as
/// `&dyn DynField` in schema order.
pub trait DynField {
    /// Whether the field has a value.
    fn is_set(&self) -> bool;
    /// Whether the field itself was assigned since the last reset.
    fn is_changed(&self) -> bool;
    /// Sets the changed mark.
    fn set_changed(&mut self, changed: bool);
    /// The primitive of the value, if set.
    fn to_primitive(&self) -> Option<Value>;
    /// The description of the value, if set.
    fn describe(&self) -> Option<Value>;
    /// Appends the primitive as JSON text (call only when set).
    fn write_json(&self, out: &mut Vec<u8>);
    /// Appends contained objects backported to `to` (call only when set).
    fn write_backport(
        &self,
        out: &mut Vec<u8>,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()>;
    /// Assigns from a primitive (marks changed) in a decode with context `cx`.
    /// `default` is the field's default in primitive form, which a `null` takes on a
    /// non-nullable field (OVO's coerce).
    fn set_from_primitive(
        &mut self,
        value: &Value,
        default: Option<&Value>,
        cx: DecodeContext<'_>,
    ) -> Result<()>;
    /// [`set_from_primitive`](Self::set_from_primitive) from an owned value.
    fn set_from_owned(
        &mut self,
        value: Value,
        default: Option<&Value>,
        cx: DecodeContext<'_>,
    ) -> Result<()>;
    /// Assigns from a primitive that is a JSON string.
    fn set_from_str(&mut self, value: &str) -> Result<()>;
    /// Whether a contained object reports changes.
    fn has_child_changes(&self) -> bool;
    /// Resets contained objects' changes, recursively.
    fn reset_children(&mut self);
    /// Backports contained objects in `primitive` to `to`.
    fn backport_children(
        &self,
        primitive: &mut Value,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()>;
    /// Stores the request context on contained objects.
    fn attach_context(&mut self, ctx: &RequestContext);
    /// Makes the field unset.
    fn clear(&mut self);
}

impl<T: FieldValue> DynField for Field<T> {
    fn is_set(&self) -> bool {
        self.value.is_some()
    }
    fn is_changed(&self) -> bool {
        self.changed
    }
    fn set_changed(&mut self, changed: bool) {
        self.changed = changed;
    }
    fn to_primitive(&self) -> Option<Value> {
        self.value.as_ref().map(T::to_primitive)
    }
    fn describe(&self) -> Option<Value> {
        self.value.as_ref().map(T::describe)
    }
    fn write_json(&self, out: &mut Vec<u8>) {
        if let Some(v) = &self.value {
            v.write_json(out);
        }
    }
    fn write_backport(
        &self,
        out: &mut Vec<u8>,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        match &self.value {
            Some(v) => v.write_backport(out, to, manifest),
            None => Ok(()),
        }
    }
    fn set_from_primitive(
        &mut self,
        value: &Value,
        default: Option<&Value>,
        cx: DecodeContext<'_>,
    ) -> Result<()> {
        self.set_from_owned(value.clone(), default, cx)
    }
    fn set_from_owned(
        &mut self,
        value: Value,
        default: Option<&Value>,
        cx: DecodeContext<'_>,
    ) -> Result<()> {
        let v = if value.is_null() && !T::nullable() {
            match default {
                Some(d) => T::from_primitive_in(d, cx)?,
                None => return Err(FieldError::CannotBeNone),
            }
        } else {
            T::from_primitive_owned_in(value, cx)?
        };
        self.set(v);
        Ok(())
    }
    fn set_from_str(&mut self, value: &str) -> Result<()> {
        self.set(T::from_json_str(value)?);
        Ok(())
    }
    fn has_child_changes(&self) -> bool {
        self.value.as_ref().is_some_and(T::has_changes)
    }
    fn reset_children(&mut self) {
        if let Some(v) = &mut self.value {
            v.reset_changes_recursive();
        }
    }
    fn backport_children(
        &self,
        primitive: &mut Value,
        to: &Version,
        manifest: Option<&VersionManifest>,
    ) -> crate::error::Result<()> {
        match &self.value {
            Some(v) => v.backport(primitive, to, manifest),
            None => Ok(()),
        }
    }
    fn attach_context(&mut self, ctx: &RequestContext) {
        if let Some(v) = &mut self.value {
            v.attach_context(ctx);
        }
    }
    fn clear(&mut self) {
        Field::clear(self);
    }
}

/// Reads one JSON value of type `T` straight from the parser (the byte path), with the
/// same results as `T::from_primitive` of the same JSON. The outer error is the
/// parser's; the inner one is the value's, which the decoder reports in OVO's order.
pub(crate) struct JsonSeed<'a, T> {
    /// `Some(default)` for a field's value, where `null` on a non-nullable field takes
    /// the default or fails; `None` for a list member.
    field: Option<Option<&'a Value>>,
    cx: DecodeContext<'a>,
    ty: std::marker::PhantomData<fn() -> T>,
}

impl<'a, T: FieldValue> JsonSeed<'a, T> {
    /// For a list member.
    pub fn member(cx: DecodeContext<'a>) -> Self {
        JsonSeed {
            field: None,
            cx,
            ty: std::marker::PhantomData,
        }
    }

    /// For the value of a field whose default (in primitive form) is `default`.
    pub fn field(default: Option<&'a Value>, cx: DecodeContext<'a>) -> Self {
        JsonSeed {
            field: Some(default),
            cx,
            ty: std::marker::PhantomData,
        }
    }
}

impl<'de, T: FieldValue> serde::de::DeserializeSeed<'de> for JsonSeed<'_, T> {
    type Value = Result<T>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Result<T>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: FieldValue> serde::de::Visitor<'de> for JsonSeed<'_, T> {
    type Value = Result<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field value")
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Result<T>, E> {
        Ok(T::from_json_str(v))
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Result<T>, E> {
        Ok(T::from_primitive_owned_in(Value::Bool(v), self.cx))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Result<T>, E> {
        Ok(T::from_json_i64(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Result<T>, E> {
        Ok(match i64::try_from(v) {
            Ok(v) => T::from_json_i64(v),
            Err(_) => T::from_primitive_owned_in(Value::from(v), self.cx),
        })
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Result<T>, E> {
        Ok(T::from_primitive_owned_in(Value::from(v), self.cx))
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Result<T>, E> {
        Ok(match self.field {
            Some(default) if !T::nullable() => match default {
                Some(d) => T::from_primitive_in(d, self.cx),
                None => Err(FieldError::CannotBeNone),
            },
            _ => T::from_primitive_owned_in(Value::Null, self.cx),
        })
    }
    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Result<T>, E> {
        self.visit_unit()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        seq: A,
    ) -> std::result::Result<Result<T>, A::Error> {
        T::from_json_seq(seq, self.cx)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        map: A,
    ) -> std::result::Result<Result<T>, A::Error> {
        T::from_json_map(map, self.cx)
    }
}

/// The members of a list read before it is read in blocks of this many
/// (`Vec::from_json_seq`).
const BLOCK: usize = 256;

/// Reads one list member straight from the parser and appends it to the list, as
/// [`JsonSeed::member`] reads it; a JSON object goes to
/// [`FieldValue::__push_json_map`], which decodes an object member in place.
struct MemberSeed<'a, 'c, T>(&'a mut Vec<T>, DecodeContext<'c>);

impl<T> MemberSeed<'_, '_, T> {
    fn push<E>(self, value: Result<T>) -> std::result::Result<Result<()>, E> {
        Ok(value.map(|v| self.0.push(v)))
    }
}

impl<'de, T: FieldValue> serde::de::DeserializeSeed<'de> for MemberSeed<'_, '_, T> {
    type Value = Result<()>;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<Result<()>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: FieldValue> serde::de::Visitor<'de> for MemberSeed<'_, '_, T> {
    type Value = Result<()>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list member")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Result<()>, E> {
        let value = serde::de::Visitor::<'de>::visit_str(JsonSeed::<T>::member(self.1), v)?;
        self.push(value)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<Result<()>, E> {
        let value = serde::de::Visitor::<'de>::visit_bool(JsonSeed::<T>::member(self.1), v)?;
        self.push(value)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Result<()>, E> {
        let value = serde::de::Visitor::<'de>::visit_i64(JsonSeed::<T>::member(self.1), v)?;
        self.push(value)
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Result<()>, E> {
        let value = serde::de::Visitor::<'de>::visit_u64(JsonSeed::<T>::member(self.1), v)?;
        self.push(value)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Result<()>, E> {
        let value = serde::de::Visitor::<'de>::visit_f64(JsonSeed::<T>::member(self.1), v)?;
        self.push(value)
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Result<()>, E> {
        let value = serde::de::Visitor::<'de>::visit_unit(JsonSeed::<T>::member(self.1))?;
        self.push(value)
    }
    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Result<()>, E> {
        self.visit_unit()
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        seq: A,
    ) -> std::result::Result<Result<()>, A::Error> {
        let value = T::from_json_seq(seq, self.1)?;
        self.push(value)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        map: A,
    ) -> std::result::Result<Result<()>, A::Error> {
        T::__push_json_map(self.0, map, self.1)
    }
}

/// Reads the next map value into `field` (marking it changed); used by the derive's
/// field dispatch of the byte path (through `__private`). A value the field rejects is
/// an error of field `name` of `object`.
pub(crate) fn read_field<'de, T: FieldValue, A: serde::de::MapAccess<'de>>(
    field: &mut Field<T>,
    default: Option<&Value>,
    (object, name): (&'static str, &'static str),
    map: &mut A,
    cx: DecodeContext<'_>,
) -> std::result::Result<crate::error::Result<()>, A::Error> {
    Ok(
        match map.next_value_seed(JsonSeed::<T>::field(default, cx))? {
            Ok(v) => {
                field.set(v);
                Ok(())
            }
            Err(e) => Err(e.at(object, name)),
        },
    )
}

/// The primitive of a default value, for schemas; used by the derive, through
/// `__private`.
pub(crate) fn default_primitive<T: FieldValue>(value: T) -> Value {
    value.to_primitive()
}

/// Renders a primitive as Python's `str()` would render the value (for fingerprints):
/// `True`, `0.0`, `{}`, `[]`, `unmanaged`.
pub fn python_str(value: &Value) -> String {
    fn repr(v: &Value) -> String {
        match v {
            Value::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
            other => python_str(other),
        }
    }
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(repr).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("'{k}': {}", repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A data map from a primitive, for hooks that work on `versioned_object.data`.
pub type PrimitiveData = Map<String, Value>;

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    /// The reason a field gave for refusing a value (fails on a value it took, or on
    /// another kind of error).
    fn refusal<T: std::fmt::Debug>(decoded: Result<T>) -> String {
        match decoded {
            Err(FieldError::Invalid(reason)) => reason,
            other => panic!("expected a refused value, got {other:?}"),
        }
    }

    #[test]
    fn coercions_follow_ovo() {
        assert_eq!(
            String::from_primitive(&Value::from(5)).ok(),
            Some("5".to_string())
        );
        assert_eq!(i64::from_primitive(&Value::from("7")).ok(), Some(7));
        assert!(refusal(i64::from_primitive(&Value::from("seven"))).contains("seven"));
        assert!(refusal(bool::from_primitive(&Value::from("yes"))).contains("yes"));
        assert!(refusal(Uuid::from_primitive(&Value::from("nope"))).contains("nope"));
    }

    #[test]
    fn strings_from_numbers_are_python_text() {
        for (f, text) in [
            (1e-07, "1e-07"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.0, "-0.0"),
            (2.0, "2.0"),
            (123456.789, "123456.789"),
            (5e-324, "5e-324"),
            (1e300, "1e+300"),
            (0.1, "0.1"),
        ] {
            assert_eq!(python_float_repr(f), text, "{f:e}");
        }
        assert_eq!(
            String::from_primitive(&serde_json::json!(1e-07))
                .ok()
                .as_deref(),
            Some("1e-07")
        );
        assert_eq!(
            String::from_primitive(&serde_json::json!(u64::MAX)).ok(),
            Some(u64::MAX.to_string())
        );
        // 2**70 arrives as a float: its integer text is unknowable, so it is refused.
        let huge: Value = serde_json::from_str("1180591620717411303424").expect("json");
        assert!(refusal(String::from_primitive(&huge)).contains("beyond the 64-bit integer range"));
    }

    #[test]
    fn uuids_only_in_canonical_form_and_floats_only_finite() {
        let ok = "5d5a3e0b-6b2f-4b9a-9d0c-6d3f2c1b0a01";
        assert!(Uuid::from_primitive(&Value::from(ok)).is_ok());
        for other in [
            "5D5A3E0B-6B2F-4B9A-9D0C-6D3F2C1B0A01",
            "5d5a3e0b6b2f4b9a9d0c6d3f2c1b0a01",
            "{5d5a3e0b-6b2f-4b9a-9d0c-6d3f2c1b0a01}",
            "urn:uuid:5d5a3e0b-6b2f-4b9a-9d0c-6d3f2c1b0a01",
        ] {
            let err = Uuid::from_primitive(&Value::from(other)).expect_err(other);
            assert!(err.to_string().contains(other), "{err}");
        }
        for word in ["nan", "inf", "-Infinity"] {
            assert!(
                refusal(f64::from_primitive(&Value::from(word))).contains(word),
                "{word}"
            );
        }
    }

    #[test]
    fn null_takes_default_or_fails() {
        let mut f: Field<String> = Field::unset();
        let err = f
            .set_from_primitive(&Value::Null, None, DecodeContext::NONE)
            .expect_err("no default");
        assert_eq!(
            err.at("Device", "hostname").to_string(),
            "Device.hostname: Field `hostname' cannot be None"
        );
        f.set_from_primitive(&Value::Null, Some(&Value::from("d")), DecodeContext::NONE)
            .expect("default applies");
        assert_eq!(f.get().map(String::as_str), Some("d"));
        let mut n: Field<Option<String>> = Field::unset();
        n.set_from_primitive(&Value::Null, None, DecodeContext::NONE)
            .expect("nullable");
        assert_eq!(n.get(), Some(&None));
    }

    #[test]
    fn require_names_the_object_and_field_of_an_unset_one() {
        let mut f: Field<String> = Field::unset();
        let err = f.require("Device", "vendor").expect_err("unset");
        assert_eq!(
            err,
            Error::UnsetField {
                object: "Device",
                field: "vendor"
            }
        );
        assert_eq!(err.to_string(), "Device.vendor is unset");
        assert_eq!(err.ovo_exception(), "NotImplementedError");
        f.set("acme".into());
        assert_eq!(
            f.require("Device", "vendor").map(String::as_str),
            Ok("acme")
        );
        // Null is a value of a nullable field, not an unset one.
        let n: Field<Option<String>> = Field::new(None);
        assert_eq!(n.require("Device", "model"), Ok(&None));
        f.clear();
        assert_eq!(
            f.require("Device", "vendor").map_err(|e| e.to_string()),
            Err("Device.vendor is unset".to_owned())
        );
    }

    #[test]
    fn python_str_matches_python() {
        assert_eq!(python_str(&Value::from(0.0)), "0.0");
        assert_eq!(python_str(&Value::from(true)), "True");
        assert_eq!(python_str(&serde_json::json!({})), "{}");
        assert_eq!(python_str(&serde_json::json!([])), "[]");
        assert_eq!(python_str(&Value::from("unmanaged")), "unmanaged");
        assert_eq!(python_str(&serde_json::json!(["a", 1])), "['a', 1]");
    }
}
