//! The `VersionedObject` trait, object schemas, and change tracking.

use crate::error::{Error, Result};
use crate::field::{locate, DynField, FieldType, PrimitiveData};
use crate::primitive::Target;
use crate::{DecodeLimits, RequestContext, Version, VersionManifest};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt;

/// What a field is: its name, OVO type, nullability, default and history.
#[derive(Debug, Clone)]
pub struct FieldSchema {
    /// The field name (the key in `versioned_object.data`).
    pub name: &'static str,
    /// The OVO type.
    pub ty: FieldType,
    /// Whether `None` is a value.
    pub nullable: bool,
    /// The default, in primitive form (`obj_set_defaults`, and what `null` becomes on a
    /// non-nullable field).
    pub default: Option<Value>,
    /// The object version that added the field; a backport below it drops the field.
    /// `None` means the field has been there since the first version.
    pub since: Option<Version>,
    /// For an object (or list-of-objects) field, OVO's `obj_relationships` entry:
    /// `(my_version, child_version)` pairs, oldest first.
    pub relationships: Vec<(Version, Version)>,
    /// The schema of the contained class, for object fields.
    pub child: Option<fn() -> &'static ObjectSchema>,
}

/// Whether a remotable method is called on the class or on an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodKind {
    /// A class method (`@remotable_classmethod`): the caller passes the context.
    Class,
    /// An instance method (`@remotable`): the context is the one on the object.
    Instance,
}

/// One argument of a remotable method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSchema {
    /// The argument name.
    pub name: &'static str,
    /// Its Rust type, as written in the signature.
    pub ty: &'static str,
}

/// A remotable method of an object, as the registry and fingerprints see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodSchema {
    /// The method name.
    pub name: &'static str,
    /// Class or instance method.
    pub kind: MethodKind,
    /// The arguments after the receiver and context.
    pub args: Vec<ArgSchema>,
    /// The Rust return type, as written.
    pub returns: &'static str,
}

/// Everything verso knows about a class: what the derive declares.
#[derive(Debug, Clone)]
pub struct ObjectSchema {
    /// The object name on the wire.
    pub name: &'static str,
    /// The project namespace (`versioned_object.namespace`).
    pub namespace: &'static str,
    /// The class version.
    pub version: Version,
    /// Whether this is a list object (one `objects` field of a list of objects).
    pub is_list: bool,
    /// Fields in declaration order.
    pub fields: Vec<FieldSchema>,
    /// For list objects, OVO's `child_versions`: `(list_version, member_version)` pairs,
    /// in declaration order.
    pub child_versions: Vec<(Version, Version)>,
    /// Remotable methods, sorted by name.
    pub methods: Vec<MethodSchema>,
    /// Registered for tests only: left out of fingerprint lock files.
    pub test_only: bool,
    /// The class has a custom `make_compatible` hook.
    pub custom_make_compatible: bool,
}

impl ObjectSchema {
    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSchema> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The position of the field called `name` (the index of `VersionedObject::field`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

/// State every object carries besides its fields: the instance version and the
/// request context it was loaded with. Declare one field of this type in the struct.
#[derive(Clone, Default)]
pub struct ObjectMeta {
    /// The version this instance is at, when it is not the class version (an object
    /// decoded from an older primitive keeps that version, as in OVO).
    pub version: Option<Version>,
    /// The context of the request that made this object; instance remotable methods use it.
    pub context: Option<RequestContext>,
}

impl PartialEq for ObjectMeta {
    /// Two objects are equal when their data and versions are; the context is not data.
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
    }
}

impl fmt::Debug for ObjectMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version {
            Some(v) => write!(f, "ObjectMeta(version {v})"),
            None => f.write_str("ObjectMeta"),
        }
    }
}

/// A versioned object. Implement it with `#[derive(VersionedObject)]`; the derive
/// provides the required items and the provided methods do the work.
///
/// ```
/// use verso::{Field, ObjectMeta, VersionedObject};
///
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.1")]
/// pub struct Widget {
///     pub id: Field<i64>,
///     #[verso(since = "1.1", default = "blue")]
///     pub colour: Field<String>,
///     pub meta: ObjectMeta,
/// }
///
/// let mut w = Widget::blank();
/// w.id.set(7);
/// w.colour.set("red".into());
/// let old = w.to_primitive(verso::Target::Version("1.0".parse()?))?;
/// assert_eq!(old["versioned_object.data"], serde_json::json!({"id": 7}));
/// let back = Widget::from_primitive(&old)?;
/// assert_eq!(back.version().to_string(), "1.0");
/// assert_eq!(back.colour.get(), None); // unset: 1.0 had no colour
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait VersionedObject: Clone + fmt::Debug + PartialEq + Send + Sync + 'static {
    /// The object name on the wire.
    const NAME: &'static str;
    /// The project namespace.
    const NAMESPACE: &'static str;
    /// The class version.
    const VERSION: Version;

    /// The class schema (built once).
    fn schema() -> &'static ObjectSchema;
    /// An instance with every field unset, at the class version.
    fn blank() -> Self;
    /// The instance state.
    fn meta(&self) -> &ObjectMeta;
    /// The instance state, mutably.
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    /// The field at `index` in schema order.
    fn field(&self, index: usize) -> &dyn DynField;
    /// The field at `index` in schema order, mutably.
    fn field_mut(&mut self, index: usize) -> &mut dyn DynField;

    /// The index of the field called `name` in schema order. The derive generates a
    /// `match` on the names; not part of the public API.
    #[doc(hidden)]
    fn __field_index(name: &str) -> Option<usize> {
        Self::schema().index_of(name)
    }

    /// Reads the next value of `map` (a JSON parser's) into the field at `index`, marking
    /// it changed: the byte path's field dispatch, generated by the derive to read each
    /// field's type straight from the parser. The outer error is the parser's, the inner
    /// one the field's. Not part of the public API.
    #[doc(hidden)]
    fn __read_field<'de, A: serde::de::MapAccess<'de>>(
        &mut self,
        index: usize,
        map: &mut A,
    ) -> std::result::Result<Result<()>, A::Error> {
        let value: Value = map.next_value()?;
        let default = Self::schema().fields.get(index).and_then(|f| f.default.as_ref());
        Ok(self.field_mut(index).set_from_owned(value, default))
    }

    /// Appends the set fields as the members of `versioned_object.data` (`"name":value`,
    /// comma-separated, in schema order): the byte path's field writer, generated by
    /// the derive without dynamic dispatch. Not part of the public API.
    #[doc(hidden)]
    fn __write_fields(&self, out: &mut Vec<u8>) {
        let mut first = true;
        for (i, f) in Self::schema().fields.iter().enumerate() {
            let slot = self.field(i);
            if !slot.is_set() {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            crate::field::write_str(out, f.name);
            out.push(b':');
            slot.write_json(out);
        }
    }

    /// OVO's `obj_make_compatible`: make `data` (this object's `versioned_object.data`,
    /// already encoded) fit `target`. The default, [`crate::default_make_compatible`],
    /// backports object fields by their relationship rules or the manifest and drops
    /// fields added after `target`. Override it with `#[verso(make_compatible = path)]`;
    /// the override usually calls the default too.
    fn make_compatible(
        &self,
        data: &mut PrimitiveData,
        target: &Version,
        manifest: Option<&VersionManifest>,
    ) -> Result<()> {
        crate::manifest::default_make_compatible(self, data, target, manifest)
    }

    /// The instance version: the class version, or the version it was decoded at.
    fn version(&self) -> Version {
        self.meta().version.unwrap_or(Self::VERSION)
    }

    /// The context stored on the object, if any.
    fn context(&self) -> Option<&RequestContext> {
        self.meta().context.as_ref()
    }

    /// Whether the named field is set (`obj_attr_is_set`).
    fn is_set(&self, name: &str) -> Result<bool> {
        let i = Self::schema()
            .index_of(name)
            .ok_or_else(|| unknown::<Self>(name))?;
        Ok(self.field(i).is_set())
    }

    /// OVO's `obj_what_changed`: fields assigned since the last reset, plus object fields
    /// whose object reports changes (for list objects: `objects` when a member does).
    fn what_changed(&self) -> BTreeSet<&'static str> {
        let schema = Self::schema();
        schema
            .fields
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                let slot = self.field(*i);
                slot.is_changed()
                    || (propagates_child_changes(schema, f) && slot.has_child_changes())
            })
            .map(|(_, f)| f.name)
            .collect()
    }

    /// Forgets every change of this object (not of contained objects).
    fn reset_changes(&mut self) {
        let n = Self::schema().fields.len();
        (0..n).for_each(|i| self.field_mut(i).set_changed(false));
    }

    /// OVO's `obj_reset_changes(fields, recursive)`: forgets the changes of the named
    /// fields (all when `fields` is empty); with `recursive`, contained objects of the
    /// changed fields among them are reset completely.
    fn reset_changes_of(&mut self, fields: &[&str], recursive: bool) {
        let schema = Self::schema();
        if recursive {
            let changed = self.what_changed();
            for (i, f) in schema.fields.iter().enumerate() {
                let wanted = fields.is_empty() || fields.contains(&f.name);
                if wanted && changed.contains(f.name) && f.ty.child_object().is_some() {
                    self.field_mut(i).reset_children();
                }
            }
        }
        for (i, f) in schema.fields.iter().enumerate() {
            if fields.is_empty() || fields.contains(&f.name) {
                self.field_mut(i).set_changed(false);
            }
        }
    }

    /// OVO's `obj_set_defaults`: every *unset* field with a default gets it (and is marked
    /// changed); a non-empty `fields` names the fields, each of which must have a default.
    fn set_defaults(&mut self, fields: &[&str]) -> Result<()> {
        let schema = Self::schema();
        for name in fields {
            let f = schema.field(name).ok_or_else(|| unknown::<Self>(name))?;
            if f.default.is_none() {
                return Err(Error::NoDefault {
                    object: Self::NAME,
                    field: (*name).to_owned(),
                });
            }
        }
        for (i, f) in schema.fields.iter().enumerate() {
            let wanted = fields.is_empty() || fields.contains(&f.name);
            if let (true, Some(default)) = (wanted, &f.default) {
                if !self.field(i).is_set() {
                    self.field_mut(i)
                        .set_from_primitive(default, None)
                        .map_err(|e| locate(e, Self::NAME, f.name))?;
                }
            }
        }
        Ok(())
    }

    /// Assigns a field from its primitive form, as OVO's `setattr` with coercion does
    /// (marks it changed; `null` on a non-nullable field takes the default or fails).
    fn set_field_primitive(&mut self, name: &str, value: &Value) -> Result<()> {
        let schema = Self::schema();
        let i = schema.index_of(name).ok_or_else(|| unknown::<Self>(name))?;
        let f = &schema.fields[i];
        self.field_mut(i)
            .set_from_primitive(value, f.default.as_ref())
            .map_err(|e| locate(e, Self::NAME, name))
    }

    /// The primitive for `target`: at the instance version ([`Target::Own`]), backported
    /// to a version, with contained objects backported to a manifest, or for a peer's
    /// manifest ([`Target::Peer`]). OVO's `obj_to_primitive`. A target version newer
    /// than the instance is [`Error::InvalidTargetVersion`].
    fn to_primitive(&self, target: Target<'_>) -> Result<Value> {
        crate::primitive::to_value(self, target)
    }

    /// [`to_primitive`](Self::to_primitive) as JSON bytes, written in one pass without
    /// an intermediate `serde_json::Value` (the same JSON; the hot path of every call).
    fn to_primitive_bytes(&self, target: Target<'_>) -> Result<Vec<u8>> {
        crate::primitive::to_bytes(self, target)
    }

    /// Decodes JSON bytes of a primitive of this class; the same rules and errors as
    /// [`from_primitive`](Self::from_primitive), without building the whole document as
    /// a `serde_json::Value` first.
    /// The whole text is first checked against the default [`DecodeLimits`].
    fn from_primitive_slice(bytes: &[u8]) -> Result<Self> {
        Self::from_primitive_slice_limited(bytes, &DecodeLimits::default())
    }

    /// [`from_primitive_slice`](Self::from_primitive_slice) with other limits.
    fn from_primitive_slice_limited(bytes: &[u8], limits: &DecodeLimits) -> Result<Self> {
        limits.check_json(bytes)?;
        crate::primitive::decode_slice(bytes)
    }

    /// Decodes a primitive of this class (any older or equal minor of the same major).
    /// The whole primitive is first checked against the default [`DecodeLimits`].
    fn from_primitive(primitive: &Value) -> Result<Self> {
        Self::from_primitive_limited(primitive, &DecodeLimits::default())
    }

    /// [`from_primitive`](Self::from_primitive) with other limits.
    fn from_primitive_limited(primitive: &Value, limits: &DecodeLimits) -> Result<Self> {
        limits.check_value(primitive)?;
        crate::primitive::decode(primitive)
    }

    /// OVO's `obj_tree_get_versions`: this class and every class it can contain, at
    /// this side's versions.
    fn manifest() -> VersionManifest {
        VersionManifest::for_schema(Self::schema())
    }

    /// A JSON description: class, instance version, set fields (DateTimes in Python's
    /// `isoformat()`), sorted unset fields and sorted `what_changed`.
    fn describe(&self) -> Value {
        let schema = Self::schema();
        let mut fields = serde_json::Map::new();
        let mut unset = Vec::new();
        for (i, f) in schema.fields.iter().enumerate() {
            match self.field(i).describe() {
                Some(v) => {
                    fields.insert(f.name.to_owned(), v);
                }
                None => unset.push(f.name),
            }
        }
        unset.sort_unstable();
        serde_json::json!({
            "class": Self::NAME,
            "version": self.version().to_string(),
            "fields": fields,
            "unset": unset,
            "what_changed": self.what_changed().into_iter().collect::<Vec<_>>(),
        })
    }
}

/// In OVO only an `Object` field, or the `objects` of a list object, reports its
/// children's changes as its own (a `ListOfObjects` field of a plain object does not).
pub(crate) fn propagates_child_changes(schema: &ObjectSchema, f: &FieldSchema) -> bool {
    matches!(f.ty, FieldType::Object(_)) || (schema.is_list && f.name == "objects")
}

/// Whether [`VersionedObject::what_changed`] is not empty, without building the set
/// (asked of every contained object and list member on each encode). Used by the derive.
#[doc(hidden)]
pub fn has_changes<O: VersionedObject>(obj: &O) -> bool {
    let schema = O::schema();
    schema.fields.iter().enumerate().any(|(i, f)| {
        let slot = obj.field(i);
        slot.is_changed() || (propagates_child_changes(schema, f) && slot.has_child_changes())
    })
}

fn unknown<O: VersionedObject>(name: &str) -> Error {
    Error::UnknownField {
        object: O::NAME,
        field: name.to_owned(),
    }
}

/// Decodes a contained object (a field or list member): the entry point that decoded its
/// parent has checked the limits of the whole document already. Used by the derive.
#[doc(hidden)]
pub fn decode_contained<O: VersionedObject>(primitive: &Value) -> Result<O> {
    crate::primitive::decode(primitive)
}
