//! Objects that arrive at a version this build does not know, backported through the
//! context's indirection API, as oslo.versionedobjects' `VersionedObjectSerializer` does
//! (`_process_object`: on `IncompatibleObjectVersion` it calls
//! `indirection_api.object_backport_versions(context, objprim,
//! obj_tree_get_versions(objname))` and uses what comes back).
//!
//! A typed reply (on the client) and a typed method's arguments (on the server) are
//! looked at before they are decoded: each object in them (the value itself, or each
//! member of a list or dict, as OVO's serializer walks an entity) whose
//! class, or a class of an object inside it, comes at a newer minor of the major this
//! build knows is sent to the conductor with this build's manifest of the declared types
//! (the reply type, or the method's argument types), and replaced by the conductor's
//! answer. Another major, an unknown class or a context
//! without indirection for the object's namespace leaves the value as it came, and the
//! decode fails as it would have.

use crate::RpcError;
use serde_json::Value;
use std::sync::Arc;
use verso::primitive::{KEY_DATA, KEY_NAME, KEY_NAMESPACE, KEY_VERSION};
use verso::{IndirectionApi, RequestContext, Version, VersionManifest};

/// Whether `obj` (an object primitive) or an object inside it is at a newer minor, of
/// the same major, than `manifest` names for its class. The `.patch` part is ignored, as
/// OVO accepts it without a backport.
fn holds_newer(obj: &serde_json::Map<String, Value>, manifest: &VersionManifest) -> bool {
    let newer = obj
        .get(KEY_NAME)
        .and_then(Value::as_str)
        .and_then(|name| manifest.get(name))
        .zip(
            obj.get(KEY_VERSION)
                .and_then(Value::as_str)
                .and_then(|v| v.parse::<Version>().ok()),
        )
        .is_some_and(|(known, sent)| sent.major() == known.major() && sent.minor() > known.minor());
    newer || obj.get(KEY_DATA).is_some_and(|d| inside_newer(d, manifest))
}

/// Whether any object in `value` (at any depth) holds a newer version.
fn inside_newer(value: &Value, manifest: &VersionManifest) -> bool {
    match value {
        Value::Object(m) if m.contains_key(KEY_NAME) => holds_newer(m, manifest),
        Value::Object(m) => m.values().any(|v| inside_newer(v, manifest)),
        Value::Array(a) => a.iter().any(|v| inside_newer(v, manifest)),
        _ => false,
    }
}

/// Whether any value of `map` (a call's arguments) holds a newer version.
pub(crate) fn map_holds_newer(
    map: &serde_json::Map<String, Value>,
    manifest: &VersionManifest,
) -> bool {
    map.values().any(|v| inside_newer(v, manifest))
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
    let is_object = value.as_object().is_some_and(|m| m.contains_key(KEY_NAME));
    if is_object {
        let api = value
            .as_object()
            .filter(|m| holds_newer(m, manifest))
            .and_then(|m| m.get(KEY_NAMESPACE))
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

/// Backports, through `ctx`'s indirection API, every object in `value` that this build
/// (whose classes `manifest` names) cannot read and that the API's namespace covers.
/// Returns without a call when there is none, the common case: one walk of the value.
pub(crate) async fn backport_unknown(
    ctx: &RequestContext,
    value: &mut Value,
    manifest: &VersionManifest,
) -> Result<(), RpcError> {
    if manifest.is_empty() || !inside_newer(value, manifest) {
        return Ok(());
    }
    let mut found = Vec::new();
    entities(ctx, value, manifest, &mut found);
    for (slot, api) in found {
        let objprim = std::mem::take(slot);
        let name = objprim
            .get(KEY_NAME)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        tracing::debug!(object = %name, "backporting an object of a newer version through indirection");
        *slot = api
            .object_backport_versions(ctx, objprim, manifest)
            .await
            .map_err(|e| RpcError::Serialization {
                detail: format!("backporting {name} to this build's versions: {e}"),
            })?;
    }
    Ok(())
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
        let newer = |v: &Value| inside_newer(v, &m);
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
