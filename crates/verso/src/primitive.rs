//! The OVO primitive: `{"versioned_object.name": .., "versioned_object.namespace": ..,
//! "versioned_object.version": .., "versioned_object.data": {..},
//! "versioned_object.changes": [..]}`.
//!
//! Encoding follows `VersionedObject.obj_to_primitive` step for step: fields are encoded
//! (contained objects at their own versions, with their own changes), the backport runs
//! when the target differs from the instance version or a manifest is given, and the
//! top-level `changes` are filtered to the fields left in `data` (the changes of
//! contained objects are not: that is OVO's behaviour and Python peers rely on it).

use crate::error::{Error, Result};
use crate::field::PrimitiveData;
use crate::{Version, VersionManifest, VersionedObject};
use serde_json::{Map, Value};

/// `versioned_object.name`.
pub const KEY_NAME: &str = "versioned_object.name";
/// `versioned_object.namespace`.
pub const KEY_NAMESPACE: &str = "versioned_object.namespace";
/// `versioned_object.version`.
pub const KEY_VERSION: &str = "versioned_object.version";
/// `versioned_object.data`.
pub const KEY_DATA: &str = "versioned_object.data";
/// `versioned_object.changes`.
pub const KEY_CHANGES: &str = "versioned_object.changes";

/// Whether a JSON value looks like an object primitive (has `versioned_object.name`),
/// which is how OVO's serializer tells objects from plain values.
pub fn is_primitive(value: &Value) -> bool {
    value.get(KEY_NAME).is_some()
}

fn data_of<O: VersionedObject>(obj: &O) -> PrimitiveData {
    let mut data = Map::new();
    for (i, f) in O::schema().fields.iter().enumerate() {
        if let Some(v) = obj.field(i).to_primitive() {
            data.insert(f.name.to_owned(), v);
        }
    }
    data
}

fn envelope<O: VersionedObject>(obj: &O, version: &Version, data: PrimitiveData) -> Value {
    let mut changes: Vec<&str> = obj
        .what_changed()
        .into_iter()
        .filter(|f| data.contains_key(*f))
        .collect();
    changes.sort_unstable();
    let mut p = Map::new();
    p.insert(KEY_NAME.into(), Value::String(O::NAME.into()));
    p.insert(KEY_NAMESPACE.into(), Value::String(O::NAMESPACE.into()));
    p.insert(KEY_VERSION.into(), Value::String(version.to_string()));
    p.insert(KEY_DATA.into(), Value::Object(data));
    if !changes.is_empty() {
        p.insert(
            KEY_CHANGES.into(),
            Value::Array(
                changes
                    .into_iter()
                    .map(|c| Value::String(c.into()))
                    .collect(),
            ),
        );
    }
    Value::Object(p)
}

/// The primitive at the instance version, with no backport.
pub(crate) fn encode_own<O: VersionedObject>(obj: &O) -> Value {
    envelope(obj, &obj.version(), data_of(obj))
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
    // OVO treats an empty manifest like none (`or version_manifest` is falsy for {}).
    let manifest = manifest.filter(|m| !m.is_empty());
    let mut data = data_of(obj);
    if target != own || manifest.is_some() {
        obj.make_compatible(&mut data, &target, manifest)?;
    }
    Ok(envelope(obj, &target, data))
}

fn required<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a Value> {
    map.get(key)
        .ok_or_else(|| Error::MissingKey { key: key.into() })
}

fn required_str<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str> {
    required(map, key)?
        .as_str()
        .ok_or_else(|| Error::Malformed {
            what: format!("'{key}' is not a string"),
        })
}

/// The namespace, name and version of a primitive, read in OVO's order (a missing
/// `namespace` is reported before a missing `name`).
pub(crate) struct Header<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub version: &'a str,
    pub map: &'a Map<String, Value>,
}

pub(crate) fn header(primitive: &Value) -> Result<Header<'_>> {
    let map = primitive.as_object().ok_or_else(|| Error::Malformed {
        what: "an object primitive must be a JSON object".into(),
    })?;
    Ok(Header {
        namespace: required_str(map, KEY_NAMESPACE)?,
        name: required_str(map, KEY_NAME)?,
        version: required_str(map, KEY_VERSION)?,
        map,
    })
}

impl Header<'_> {
    pub(crate) fn unsupported_namespace(&self) -> Error {
        Error::UnsupportedObject {
            objtype: format!("{}.{}", self.namespace, self.name),
        }
    }
}

/// Decodes a primitive into `O`, whose name the caller has already matched.
pub(crate) fn decode_body<O: VersionedObject>(h: &Header<'_>) -> Result<O> {
    let version: Version = h.version.parse()?;
    if !O::VERSION.accepts(&version) {
        return Err(Error::IncompatibleObjectVersion {
            name: O::NAME.into(),
            version,
            supported: O::VERSION,
        });
    }
    let data = required(h.map, KEY_DATA)?
        .as_object()
        .ok_or_else(|| Error::Malformed {
            what: format!("'{KEY_DATA}' is not an object"),
        })?;
    let mut obj = O::blank();
    obj.meta_mut().version = (version != O::VERSION).then_some(version);
    let schema = O::schema();
    for f in &schema.fields {
        if let Some(v) = data.get(f.name) {
            obj.set_field_primitive(f.name, v)?;
        }
    }
    obj.reset_changes();
    if let Some(changes) = h.map.get(KEY_CHANGES) {
        let changes = changes.as_array().ok_or_else(|| Error::Malformed {
            what: format!("'{KEY_CHANGES}' is not a list"),
        })?;
        for c in changes.iter().filter_map(Value::as_str) {
            if let Some(i) = schema.fields.iter().position(|f| f.name == c) {
                obj.field_mut(i).set_changed(true);
            }
        }
    }
    Ok(obj)
}

/// Decodes a primitive that must be of class `O`.
pub(crate) fn decode<O: VersionedObject>(primitive: &Value) -> Result<O> {
    let h = header(primitive)?;
    if h.namespace != O::NAMESPACE {
        return Err(h.unsupported_namespace());
    }
    if h.name != O::NAME {
        return Err(Error::WrongObjectType {
            expected: O::NAME,
            found: h.name.into(),
        });
    }
    decode_body(&h)
}
