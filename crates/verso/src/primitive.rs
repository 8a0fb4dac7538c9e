//! The OVO primitive: `{"versioned_object.name": .., "versioned_object.namespace": ..,
//! "versioned_object.version": .., "versioned_object.data": {..},
//! "versioned_object.changes": [..]}`.
//!
//! `versioned_object` is the default *serial namespace* (OVO's `OBJ_SERIAL_NAMESPACE`);
//! an object family may set another (OpenStack Cyborg's is `cyborg_object`, Nova's
//! `nova_object`), and every key of its classes' primitives starts with it instead. A
//! class's keys are [`VersionedObject::PRIMITIVE_KEYS`]; a contained object's primitive
//! uses its own class's keys.
//!
//! Encoding follows `VersionedObject.obj_to_primitive` step for step: fields are encoded
//! (contained objects at their own versions, with their own changes), the backport runs
//! when the target differs from the instance version or a manifest is given, and the
//! top-level `changes` are filtered to the fields left in `data` (the changes of
//! contained objects are not: that is OVO's behaviour and Python peers rely on it).
//!
//! (Long on purpose: decode, encode, backport and the manifest are one codec over
//! shared private walkers.)

use crate::error::{Error, Result};
use crate::field::{DecodeContext, PrimitiveData};
use crate::limits::DecodeLimits;
use crate::manifest::{Target, VersionManifest};
use crate::object::VersionedObject;
use crate::sink::{JsonSink, Sink, ValueSink};
use crate::version::Version;
use serde_json::{Map, Value};

pub use crate::schema::{PrimitiveKeys, DEFAULT_SERIAL_NAMESPACE};

/// `versioned_object.name`.
pub const KEY_NAME: &str = PrimitiveKeys::VERSIONED_OBJECT.name();
/// `versioned_object.namespace`.
pub const KEY_NAMESPACE: &str = PrimitiveKeys::VERSIONED_OBJECT.namespace();
/// `versioned_object.version`.
pub const KEY_VERSION: &str = PrimitiveKeys::VERSIONED_OBJECT.version();
/// `versioned_object.data`.
pub const KEY_DATA: &str = PrimitiveKeys::VERSIONED_OBJECT.data();
/// `versioned_object.changes`.
pub const KEY_CHANGES: &str = PrimitiveKeys::VERSIONED_OBJECT.changes();

/// The serial namespace an object primitive of any family is written in, read from its
/// keys: `versioned_object` when it has `versioned_object.name`, else the prefix `P` of
/// a `P.name` key that has a `P.namespace` beside it. `None` for a map that is no
/// primitive. This is how untyped code (a serializer, the newer-object walk of
/// indirection) recognises objects of every family, as OVO's serializer recognises its
/// base class's.
pub fn serial_namespace_of(map: &Map<String, Value>) -> Option<&str> {
    if map.contains_key(KEY_NAME) {
        return Some(DEFAULT_SERIAL_NAMESPACE);
    }
    map.keys().find_map(|k| {
        let prefix = k.strip_suffix(".name").filter(|p| !p.is_empty())?;
        map.contains_key(&format!("{prefix}.namespace"))
            .then_some(prefix)
    })
}

/// The `{serial}.name` value of an object primitive of any serial namespace
/// ([`serial_namespace_of`]); `None` for a map that is no primitive.
pub fn name_of(map: &Map<String, Value>) -> Option<&Value> {
    part_of(map, serial_namespace_of(map)?, "name")
}

/// The value of `{serial}.{part}` in `map` (a key built only for a serial namespace other
/// than the default).
pub(crate) fn part_of<'a>(
    map: &'a Map<String, Value>,
    serial: &str,
    part: &str,
) -> Option<&'a Value> {
    if serial == DEFAULT_SERIAL_NAMESPACE {
        let key = match part {
            "name" => KEY_NAME,
            "namespace" => KEY_NAMESPACE,
            "version" => KEY_VERSION,
            "data" => KEY_DATA,
            "changes" => KEY_CHANGES,
            _ => return map.get(&format!("{serial}.{part}")),
        };
        map.get(key)
    } else {
        map.get(&format!("{serial}.{part}"))
    }
}

/// The target version and manifest for `obj`, as OVO's two arguments of
/// `obj_to_primitive`.
fn resolve<'a, O: VersionedObject>(
    target: Target<'a>,
    obj: &O,
) -> (Option<Version>, Option<&'a VersionManifest>) {
    match target {
        Target::Own => (None, None),
        Target::Version(v) => (Some(v), None),
        Target::Manifest(m) => (None, Some(m)),
        Target::VersionAndManifest(v, m) => (Some(v), Some(m)),
        Target::Peer(m) => (peer_target(obj, m), Some(m)),
    }
}

/// The primitive of `obj` for `target` (the work of [`VersionedObject::to_primitive`]).
pub(crate) fn to_value<O: VersionedObject>(obj: &O, target: Target<'_>) -> Result<Value> {
    match resolve(target, obj) {
        (None, None) => Ok(encode_own(obj)),
        (version, manifest) => encode(obj, version, manifest),
    }
}

/// The primitive of `obj` for `target` as JSON bytes, written directly (the work of
/// [`VersionedObject::to_primitive_bytes`](crate::VersionedObject::to_primitive_bytes)).
pub(crate) fn to_bytes<O: VersionedObject>(obj: &O, target: Target<'_>) -> Result<Vec<u8>> {
    let (version, manifest) = resolve(target, obj);
    encode_bytes(obj, version, manifest)
}

/// Whether a JSON value looks like an object primitive of any serial namespace (has
/// `versioned_object.name`, or `P.name` and `P.namespace`: [`serial_namespace_of`]),
/// which is how OVO's serializer tells objects from plain values.
pub fn is_primitive(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| serial_namespace_of(m).is_some())
}

/// The `data` of `obj` at its own version, as a map (what a backport edits).
fn data_of<O: VersionedObject>(obj: &O) -> PrimitiveData {
    let mut out = ValueSink::default();
    out.begin_map();
    obj.__encode_fields(&mut out);
    out.end_map();
    match out.finish() {
        Value::Object(data) => data,
        _ => Map::new(),
    }
}

/// The primitive of `obj` labelled `version`, with `data` as its data (after a backport):
/// the changes are those of `what_changed` left in `data`.
fn envelope<O: VersionedObject>(obj: &O, version: &Version, data: PrimitiveData) -> Value {
    let mut changes: Vec<&'static str> = obj
        .what_changed()
        .into_iter()
        .filter(|f| data.contains_key(*f))
        .collect();
    changes.sort_unstable();
    let mut out = ValueSink::default();
    write_header::<O, _>(&mut out, version);
    out.value(Value::Object(data));
    write_changes(&mut out, &O::PRIMITIVE_KEYS, changes.into_iter());
    out.end_map();
    out.finish()
}

/// The primitive at the instance version, to either sink (the encode walk of an object:
/// its `FieldValue::encode`), keys in OVO's order.
pub(crate) fn encode_object<O: VersionedObject, S: Sink>(obj: &O, out: &mut S) {
    write_header::<O, S>(out, &obj.version());
    out.begin_map();
    obj.__encode_fields(out);
    out.end_map();
    let schema = O::schema();
    // As OVO (and `envelope`): only changed fields that are in `data`, i.e. set
    // (`what_changed` restricted to set fields, without looking names up).
    let changed: std::collections::BTreeSet<&'static str> = schema
        .fields
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            let slot = obj.field(*i);
            slot.is_set()
                && (slot.is_changed()
                    || (crate::object::propagates_child_changes(schema, f)
                        && slot.has_child_changes()))
        })
        .map(|(_, f)| f.name)
        .collect();
    write_changes(out, &O::PRIMITIVE_KEYS, changed.into_iter());
    out.end_map();
}

/// Opens the primitive and writes its name, namespace and version, up to the key of its
/// data. The keys are plain: the derive only accepts serial namespaces that need no
/// JSON escaping.
#[inline]
fn write_header<O: VersionedObject, S: Sink>(out: &mut S, version: &Version) {
    out.primitive_header(&O::PRIMITIVE_KEYS, O::NAME, O::NAMESPACE, version);
}

/// The `changes` entry, when there are any.
fn write_changes<S: Sink>(
    out: &mut S,
    keys: &PrimitiveKeys,
    changes: impl Iterator<Item = &'static str>,
) {
    let mut first = true;
    for c in changes {
        // After the data, then between the names.
        out.next();
        if first {
            out.plain_key(keys.changes);
            out.begin_list(0);
        }
        first = false;
        out.str(c);
    }
    if !first {
        out.end_list();
    }
}

/// Writes `obj` backported to `to` as JSON text in one pass, with the same result as
/// the `Value` path: `top` is the object being encoded (its `changes` are filtered to
/// the fields left), otherwise a contained object (changes as at its own version, as
/// OVO leaves them). A class with a custom `make_compatible` hook goes through the
/// `Value` path, since its hook edits a primitive.
pub(crate) fn write_backported<O: VersionedObject>(
    obj: &O,
    out: &mut Vec<u8>,
    to: &Version,
    manifest: Option<&VersionManifest>,
    top: bool,
) -> Result<()> {
    let schema = O::schema();
    if schema.custom_make_compatible {
        let p = if top {
            encode(obj, Some(*to), manifest)?
        } else {
            let mut p = encode_own(obj);
            backport_object(obj, &mut p, to, manifest)?;
            p
        };
        crate::sink::write_value(out, &p);
        return Ok(());
    }
    JsonSink::append(out, |out| {
        write_backported_text(obj, out, to, manifest, top)
    })
}

/// [`write_backported`] of a class without a custom hook.
fn write_backported_text<O: VersionedObject>(
    obj: &O,
    out: &mut JsonSink,
    to: &Version,
    manifest: Option<&VersionManifest>,
    top: bool,
) -> Result<()> {
    use crate::backport::{lookup, table_for, Rule};
    let schema = O::schema();
    write_header::<O, _>(out, to);
    out.begin_map();
    let mut written = vec![false; schema.fields.len()];
    let mut first = true;
    for (i, f) in schema.fields.iter().enumerate() {
        let slot = obj.field(i);
        if !slot.is_set() {
            continue;
        }
        let child_rule = if f.ty.child_object().is_some() {
            match table_for(schema, f, to, manifest)? {
                None => Some(Rule::Keep),
                Some(t) => Some(lookup(to, &t)),
            }
        } else if f.since.is_some_and(|s| *to < s) {
            continue;
        } else {
            None
        };
        if matches!(child_rule, Some(Rule::Remove)) {
            continue;
        }
        if !first {
            out.next();
        }
        first = false;
        out.key(f.name);
        match child_rule {
            Some(Rule::To(v)) => {
                out.raw(|text| slot.write_backport(text, &v, manifest.filter(|m| !m.is_empty())))?
            }
            _ => out.raw(|text| slot.write_json(text)),
        }
        written[i] = true;
    }
    out.end_map();
    let changed = obj.what_changed();
    let kept = |name: &str| -> bool {
        let i = schema.index_of(name);
        i.is_some_and(|i| {
            if top {
                written[i]
            } else {
                obj.field(i).is_set()
            }
        })
    };
    write_changes(
        out,
        &O::PRIMITIVE_KEYS,
        changed.into_iter().filter(|c| kept(c)),
    );
    out.end_map();
    Ok(())
}

/// `obj_to_primitive(target_version, version_manifest)` as JSON text.
pub(crate) fn encode_bytes<O: VersionedObject>(
    obj: &O,
    target: Option<Version>,
    manifest: Option<&VersionManifest>,
) -> Result<Vec<u8>> {
    let own = obj.version();
    let target = target.unwrap_or(own);
    if target > own {
        return Err(Error::InvalidTargetVersion { version: target });
    }
    // OVO backports when the target differs or the manifest is non-empty; once it
    // does, even an empty manifest puts this level in manifest mode.
    let mut out = Vec::with_capacity(256);
    if !target.same_text(&own) || manifest.is_some_and(|m| !m.is_empty()) {
        write_backported(obj, &mut out, &target, manifest, true)?;
    } else {
        let mut sink = JsonSink::new(out);
        encode_object(obj, &mut sink);
        out = sink.into_bytes();
    }
    Ok(out)
}

/// Appends a contained object backported to `to`.
pub(crate) fn write_backported_child<O: VersionedObject>(
    obj: &O,
    out: &mut Vec<u8>,
    to: &Version,
    manifest: Option<&VersionManifest>,
) -> Result<()> {
    write_backported(obj, out, to, manifest, false)
}

/// The primitive at the instance version, with no backport (infallible).
pub(crate) fn encode_own<O: VersionedObject>(obj: &O) -> Value {
    let mut out = ValueSink::default();
    encode_object(obj, &mut out);
    out.finish()
}

/// The version a peer with `manifest` gets `obj` at: the manifest's version of its class
/// when that is older than the instance, otherwise the instance version (never newer).
pub(crate) fn peer_target<O: VersionedObject>(
    obj: &O,
    manifest: &VersionManifest,
) -> Option<Version> {
    manifest.get(O::NAME).filter(|v| *v < obj.version())
}

/// `obj_to_primitive(target_version, version_manifest)`.
pub(crate) fn encode<O: VersionedObject>(
    obj: &O,
    target: Option<Version>,
    manifest: Option<&VersionManifest>,
) -> Result<Value> {
    let own = obj.version();
    let target = target.unwrap_or(own);
    if target > own {
        return Err(Error::InvalidTargetVersion { version: target });
    }
    // OVO backports when the target differs or the manifest is non-empty
    // (`or version_manifest` is falsy for {}); once it does, even an empty manifest puts
    // this level in manifest mode (`_obj_relationship_for` tests `is None`). Contained
    // objects get no manifest for an empty one (`_do_subobject_backport`'s `or None`).
    let mut data = data_of(obj);
    if !target.same_text(&own) || manifest.is_some_and(|m| !m.is_empty()) {
        obj.make_compatible(&mut data, &target, manifest)?;
    }
    Ok(envelope(obj, &target, data))
}

fn required<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a Value> {
    map.get(key)
        .ok_or_else(|| Error::MissingKey { key: key.into() })
}

/// The namespace, name and version of a primitive, read in OVO's order (a missing
/// `namespace` is reported before a missing `name`), under the keys of one serial
/// namespace.
pub(crate) struct Header<'a> {
    pub keys: PrimitiveKeys,
    pub namespace: &'a str,
    pub name: &'a str,
    /// Not yet required to be a string: OVO looks the name up first.
    version: &'a Value,
    pub map: &'a Map<String, Value>,
}

/// The header of `primitive` under `keys`. `known_namespace` says whether a namespace is
/// one this side decodes, which OVO checks before it looks at the name.
pub(crate) fn header<'a>(
    primitive: &'a Value,
    keys: PrimitiveKeys,
    known_namespace: &dyn Fn(&str) -> bool,
) -> Result<Header<'a>> {
    let map = primitive.as_object().ok_or_else(not_a_map)?;
    let namespace = required(map, keys.namespace)?;
    let name = required(map, keys.name)?;
    let version = required(map, keys.version)?;
    match (namespace.as_str(), name.as_str()) {
        (Some(namespace), Some(name)) => Ok(Header {
            keys,
            namespace,
            name,
            version,
            map,
        }),
        _ => Err(non_string_header(
            &keys,
            namespace.as_str(),
            name.as_str(),
            name.is_array() || name.is_object(),
            known_namespace,
        )),
    }
}

pub(crate) fn not_a_map() -> Error {
    Error::Malformed {
        what: "an object primitive must be a JSON object".into(),
    }
}

/// The error for a namespace or name that is not a JSON string, as OVO fails: a
/// namespace of any other type is not `cyborg` (UnsupportedObjectError); then a scalar
/// name is no registered class (UnsupportedObjectError) and a list or dict name cannot
/// even be looked up (a TypeError there; verso's refused values are ValueErrors).
fn non_string_header(
    keys: &PrimitiveKeys,
    namespace: Option<&str>,
    name: Option<&str>,
    name_is_container: bool,
    known_namespace: &dyn Fn(&str) -> bool,
) -> Error {
    match namespace {
        None => Error::UnsupportedObject {
            objtype: "a namespace that is not a string".into(),
        },
        Some(ns) if !known_namespace(ns) => Error::UnsupportedObject {
            objtype: format!("{ns}.{}", name.unwrap_or("<not a string>")),
        },
        Some(_) if name_is_container => Error::Malformed {
            what: format!("'{}' is a list or an object", keys.name),
        },
        Some(_) => Error::UnsupportedObject {
            objtype: "a name that is not a string".into(),
        },
    }
}

fn version_not_a_string(keys: &PrimitiveKeys) -> Error {
    Error::Malformed {
        what: format!("'{}' is not a string", keys.version),
    }
}

impl Header<'_> {
    /// The version text.
    pub(crate) fn version(&self) -> Result<&str> {
        self.version
            .as_str()
            .ok_or_else(|| version_not_a_string(&self.keys))
    }

    pub(crate) fn unsupported_namespace(&self) -> Error {
        Error::UnsupportedObject {
            objtype: format!("{}.{}", self.namespace, self.name),
        }
    }
}

/// Decodes a primitive into `O`, whose name the caller has already matched, in a decode
/// with context `cx`.
pub(crate) fn decode_body<O: VersionedObject>(h: &Header<'_>, cx: DecodeContext<'_>) -> Result<O> {
    let keys = &h.keys;
    let version = check_version::<O>(h.version()?)?;
    let data = required(h.map, keys.data)?
        .as_object()
        .ok_or_else(|| Error::Malformed {
            what: format!("'{}' is not an object", keys.data),
        })?;
    let mut obj = O::blank();
    let schema = O::schema();
    for (i, f) in schema.fields.iter().enumerate() {
        if let Some(v) = data.get(f.name) {
            crate::object::set_field_at(&mut obj, i, v, cx)?;
        }
    }
    let changes = match h.map.get(keys.changes) {
        None => &[][..],
        Some(c) => c.as_array().ok_or_else(|| Error::Malformed {
            what: format!("'{}' is not a list", keys.changes),
        })?,
    };
    let changed = changes
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|c| schema.index_of(c));
    finish(&mut obj, version, changed);
    Ok(obj)
}

/// A typed decode's class checks, in OVO's order: the namespace, then the name. A
/// primitive of another class fails as OVO's would: an unregistered name is
/// `UnsupportedObjectError`, a registered one at a version this side cannot read
/// `IncompatibleObjectVersion`, one without data `KeyError`, any other a wrong type.
/// "Registered" means by the [`Registry`](crate::Registry) running the decode (`cx`);
/// without one, or when it has no class of the namespace, another name is only a wrong
/// type.
fn check_class<O: VersionedObject>(
    namespace: &str,
    name: &str,
    version: Option<&str>,
    has_data: bool,
    cx: DecodeContext<'_>,
) -> Result<()> {
    if namespace != O::NAMESPACE {
        return Err(Error::UnsupportedObject {
            objtype: format!("{namespace}.{name}"),
        });
    }
    if name != O::NAME {
        let wrong_type = || Error::WrongObjectType {
            expected: O::NAME,
            found: name.into(),
        };
        let (other, namespace_known) = cx.class(namespace, name);
        let Some(other) = other else {
            // With no registry for the namespace there is nothing to resolve the name
            // against: only the type is known to be wrong.
            return Err(if namespace_known {
                Error::UnsupportedObject {
                    objtype: name.into(),
                }
            } else {
                wrong_type()
            });
        };
        let other = other();
        let text = version.ok_or_else(|| version_not_a_string(&O::PRIMITIVE_KEYS))?;
        let version: Version = text.parse()?;
        if !version.same_text(&other.version) && !other.version.accepts(&version) {
            return Err(Error::IncompatibleObjectVersion {
                name: other.name.into(),
                version,
                supported: other.version,
            });
        }
        if !has_data {
            return Err(Error::MissingKey {
                key: O::PRIMITIVE_KEYS.data.into(),
            });
        }
        return Err(wrong_type());
    }
    Ok(())
}

/// The primitive's version, if this build of `O` can read it.
fn check_version<O: VersionedObject>(text: &str) -> Result<Version> {
    let version: Version = text.parse()?;
    if !O::VERSION.accepts(&version) {
        return Err(Error::IncompatibleObjectVersion {
            name: O::NAME.into(),
            version,
            supported: O::VERSION,
        });
    }
    Ok(version)
}

/// Gives a decoded object its instance version and exactly the changed fields the
/// primitive named (by field index).
fn finish<O: VersionedObject>(
    obj: &mut O,
    version: Version,
    changed: impl IntoIterator<Item = usize>,
) {
    // Kept unless it is the class version's very text ("1.2.0" and "1.02" are kept).
    obj.meta_mut().version = (!version.same_text(&O::VERSION)).then_some(version);
    obj.reset_changes();
    for i in changed {
        obj.field_mut(i).set_changed(true);
    }
}

/// Decodes a primitive that must be of class `O`, in a decode with context `cx`.
pub(crate) fn decode<O: VersionedObject>(primitive: &Value, cx: DecodeContext<'_>) -> Result<O> {
    let h = header(primitive, O::PRIMITIVE_KEYS, &|ns| ns == O::NAMESPACE)?;
    check_class::<O>(
        h.namespace,
        h.name,
        h.version.as_str(),
        h.map.contains_key(O::PRIMITIVE_KEYS.data),
        cx,
    )?;
    decode_body(&h, cx)
}

/// A header value or a `changes` entry: its text when it is a JSON string, `None` for
/// any other JSON value (`container` tells a list or object), which the header checks
/// then report as OVO would and `changes` ignores as OVO does.
struct MaybeStr<'de>(Option<std::borrow::Cow<'de, str>>, bool);

impl<'de> serde::Deserialize<'de> for MaybeStr<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a header value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(Some(std::borrow::Cow::Borrowed(v)), false))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(Some(std::borrow::Cow::Owned(v.to_owned())), false))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(Some(std::borrow::Cow::Owned(v)), false))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(None, false))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(None, false))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(None, false))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(None, false))
            }
            fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(None, false))
            }
            fn visit_none<E>(self) -> std::result::Result<Self::Value, E> {
                Ok(MaybeStr(None, false))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None, true))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(MaybeStr(None, true))
            }
        }
        d.deserialize_any(V)
    }
}

/// A key of a JSON object, borrowed from the input when it has no escapes (serde's own
/// `Cow<str>` always copies: one allocation per key of every decode).
struct Key<'de>(std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// What the streaming decoder collects before the header checks run (the fields go
/// straight into the object being decoded).
struct Collected<'de> {
    namespace: Option<MaybeStr<'de>>,
    name: Option<MaybeStr<'de>>,
    version: Option<MaybeStr<'de>>,
    has_data: bool,
    /// Whether `<serial>.data` is a JSON object.
    data_is_object: bool,
    /// Whether `<serial>.changes` (when present) is a list.
    changes_is_list: bool,
    /// Indexes of the fields named in `<serial>.changes`.
    changes: Vec<usize>,
    /// The first field error, reported only after the header checks (OVO's order).
    field_error: Option<Error>,
}

/// Visitor methods for the JSON values a seed does not take: they are read and
/// `Ok(false)` says the value had the wrong shape, which the decoder reports only where
/// OVO's order of checks would (after the header, the data, the fields).
macro_rules! scalars_are_the_wrong_shape {
    () => {
        fn visit_bool<E>(self, _: bool) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_unit<E>(self) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_none<E>(self) -> std::result::Result<bool, E> {
            Ok(false)
        }
    };
}

/// Reads `<serial>.data` into the object; `Ok(false)` when it is not an object.
struct DataSeed<'a, 'c, O>(&'a mut O, &'a mut Option<Error>, DecodeContext<'c>);

impl<'de, O: VersionedObject> serde::de::DeserializeSeed<'de> for DataSeed<'_, '_, O> {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, O: VersionedObject> serde::de::Visitor<'de> for DataSeed<'_, '_, O> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the data object of a primitive")
    }
    scalars_are_the_wrong_shape!();
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<bool, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<bool, A::Error> {
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let Some(i) = O::__field_index(&key.0) else {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            };
            let result = self.0.__read_field(i, &mut map, self.2)?;
            if let (Err(e), None) = (result, &self.1) {
                *self.1 = Some(e);
            }
        }
        Ok(true)
    }
}

/// Reads `<serial>.changes` into field indexes without allocating the names;
/// `Ok(false)` when it is not a list.
struct ChangesSeed<'a, O>(&'a mut Vec<usize>, std::marker::PhantomData<O>);

impl<'de, O: VersionedObject> serde::de::DeserializeSeed<'de> for ChangesSeed<'_, O> {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, O: VersionedObject> serde::de::Visitor<'de> for ChangesSeed<'_, O> {
    type Value = bool;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of field names")
    }
    scalars_are_the_wrong_shape!();
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<bool, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(false)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<bool, A::Error> {
        // Entries that are not field names, strings or not, are ignored (as OVO does).
        while let Some(name) = seq.next_element::<MaybeStr<'de>>()? {
            if let Some(i) = name.0.as_deref().and_then(O::__field_index) {
                self.0.push(i);
            }
        }
        Ok(true)
    }
}

/// Reads an object primitive, its fields into the object it holds (a blank one, where
/// it will stay: a list member is decoded in the list's own memory, not built aside and
/// moved in), in a decode with context `.1`.
struct EnvelopeVisitor<'a, 'c, O>(&'a mut O, DecodeContext<'c>);

impl<'de, O: VersionedObject> serde::de::Visitor<'de> for EnvelopeVisitor<'_, '_, O> {
    type Value = Collected<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object primitive")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Collected<'de>, A::Error> {
        let mut c = Collected {
            namespace: None,
            name: None,
            version: None,
            has_data: false,
            data_is_object: true,
            changes: Vec::new(),
            changes_is_list: true,
            field_error: None,
        };
        let keys = &O::PRIMITIVE_KEYS;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let key = key.0.as_ref();
            if key == keys.name {
                c.name = Some(map.next_value()?);
            } else if key == keys.namespace {
                c.namespace = Some(map.next_value()?);
            } else if key == keys.version {
                c.version = Some(map.next_value()?);
            } else if key == keys.changes {
                c.changes.clear();
                c.changes_is_list = map
                    .next_value_seed(ChangesSeed::<O>(&mut c.changes, std::marker::PhantomData))?;
            } else if key == keys.data {
                c.data_is_object =
                    map.next_value_seed(DataSeed(&mut *self.0, &mut c.field_error, self.1))?;
                c.has_data = true;
            } else {
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(c)
    }
}

pub(crate) fn decode_slice<O: VersionedObject>(bytes: &[u8], cx: DecodeContext<'_>) -> Result<O> {
    use serde::Deserializer;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut obj = O::blank();
    let c = de
        .deserialize_map(EnvelopeVisitor(&mut obj, cx))
        .and_then(|c| de.end().map(|()| c))
        .map_err(|e| Error::Malformed {
            what: e.to_string(),
        })?;
    finish_collected(c, &mut obj, cx)?;
    Ok(obj)
}

/// Decodes a contained object's primitive straight from the parser (the byte path of a
/// field); the same checks and errors as a top-level decode.
pub(crate) fn decode_map<'de, O: VersionedObject, A: serde::de::MapAccess<'de>>(
    map: A,
    cx: DecodeContext<'_>,
) -> std::result::Result<Result<O>, A::Error> {
    let mut obj = O::blank();
    Ok(decode_map_into(&mut obj, map, cx)?.map(|()| obj))
}

/// Decodes a list member's primitive straight from the parser into a blank object
/// appended to `into` (the byte path of a list of objects): the member is written once,
/// where it stays. On an error the list is refused whole, so the member is left as it is.
pub(crate) fn push_decoded_map<'de, O: VersionedObject, A: serde::de::MapAccess<'de>>(
    into: &mut Vec<O>,
    map: A,
    cx: DecodeContext<'_>,
) -> std::result::Result<Result<()>, A::Error> {
    into.push(O::blank());
    match into.last_mut() {
        Some(obj) => decode_map_into(obj, map, cx),
        None => unreachable!("pushed just above"),
    }
}

/// Decodes a primitive from the parser into `obj`, which is blank.
fn decode_map_into<'de, O: VersionedObject, A: serde::de::MapAccess<'de>>(
    obj: &mut O,
    map: A,
    cx: DecodeContext<'_>,
) -> std::result::Result<Result<()>, A::Error> {
    use serde::de::Visitor;
    let c = EnvelopeVisitor(&mut *obj, cx).visit_map(map)?;
    Ok(finish_collected(c, obj, cx))
}

/// The header checks, then the shapes and field errors in the order decode_body (and
/// OVO) meets them; then `obj` (whose fields are read) gets its version and changes.
fn finish_collected<O: VersionedObject>(
    c: Collected<'_>,
    obj: &mut O,
    cx: DecodeContext<'_>,
) -> Result<()> {
    let keys = &O::PRIMITIVE_KEYS;
    let missing = |key: &str| Error::MissingKey { key: key.into() };
    let namespace = c.namespace.ok_or_else(|| missing(keys.namespace))?;
    let name = c.name.ok_or_else(|| missing(keys.name))?;
    let version_text = c.version.ok_or_else(|| missing(keys.version))?;
    let (Some(namespace), Some(name)) = (&namespace.0, &name.0) else {
        return Err(non_string_header(
            keys,
            namespace.0.as_deref(),
            name.0.as_deref(),
            name.1,
            &|ns| ns == O::NAMESPACE,
        ));
    };
    check_class::<O>(namespace, name, version_text.0.as_deref(), c.has_data, cx)?;
    let version = check_version::<O>(
        version_text
            .0
            .as_deref()
            .ok_or_else(|| version_not_a_string(keys))?,
    )?;
    if !c.has_data {
        return Err(missing(keys.data));
    }
    // Shapes and field errors in the order decode_body (and OVO) meets them.
    if !c.data_is_object {
        return Err(Error::Malformed {
            what: format!("'{}' is not an object", keys.data),
        });
    }
    if let Some(e) = c.field_error {
        return Err(e);
    }
    if !c.changes_is_list {
        return Err(Error::Malformed {
            what: format!("'{}' is not a list", keys.changes),
        });
    }
    finish(obj, version, c.changes);
    Ok(())
}

/// Backports one contained object whose primitive is `primitive` to `to`, and labels
/// it `to` (OVO's `_do_subobject_backport`). Used by the derive's `FieldValue` impl, through `__private`.
pub(crate) fn backport_object<O: VersionedObject>(
    obj: &O,
    primitive: &mut Value,
    to: &Version,
    manifest: Option<&VersionManifest>,
) -> Result<()> {
    let Some(map) = primitive.as_object_mut() else {
        return Ok(());
    };
    let keys = &O::PRIMITIVE_KEYS;
    if let Some(Value::Object(data)) = map.get_mut(keys.data) {
        obj.make_compatible(data, to, manifest)?;
    }
    map.insert(keys.version.into(), Value::String(to.to_string()));
    Ok(())
}

/// [`VersionedObject::from_primitive_limited`]: the limits of the whole document, then
/// the decode (no registry runs it).
pub(crate) fn from_value_limited<O: VersionedObject>(
    primitive: &Value,
    limits: &DecodeLimits,
) -> Result<O> {
    limits.check_value(primitive)?;
    decode(primitive, DecodeContext::NONE)
}

/// [`VersionedObject::from_primitive_slice_limited`] (with `DecodeContext::NONE`) and
/// [`Registry::from_primitive_slice_as`](crate::Registry::from_primitive_slice_as):
/// the limits of the whole text, then the streaming decode.
pub(crate) fn from_slice_limited<O: VersionedObject>(
    bytes: &[u8],
    limits: &DecodeLimits,
    cx: DecodeContext<'_>,
) -> Result<O> {
    limits.check_json(bytes)?;
    decode_slice(bytes, cx)
}

/// Decodes a contained object (a field or list member): the entry point that decoded its
/// parent has checked the limits of the whole document already.
pub(crate) fn decode_contained<O: VersionedObject>(
    primitive: &Value,
    cx: DecodeContext<'_>,
) -> Result<O> {
    decode(primitive, cx)
}
