//! Objects that arrive at a version this build does not know, backported through the
//! context's indirection API, as oslo.versionedobjects' `VersionedObjectSerializer` does
//! (`_process_object`). The walk and the calls are `verso::indirection::backport_newer`
//! (the remotable wrapper uses it for `object_action` replies); this is its adapter for
//! typed RPC values.
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
use verso::indirection::{backport_newer, holds_newer};
use verso::{RequestContext, VersionManifest};

/// Whether any value of `map` (a call's arguments) holds a newer version.
pub(crate) fn map_holds_newer(
    map: &serde_json::Map<String, Value>,
    manifest: &VersionManifest,
) -> bool {
    map.values().any(|v| holds_newer(v, manifest))
}

/// Backports, through `ctx`'s indirection API, every object in `value` that this build
/// (whose classes `manifest` names) cannot read and that the API's namespace covers.
/// Returns without a call when there is none, the common case: one walk of the value.
pub(crate) async fn backport_unknown(
    ctx: &RequestContext,
    value: &mut Value,
    manifest: &VersionManifest,
) -> Result<(), RpcError> {
    backport_newer(ctx, value, manifest, |name, e| RpcError::Serialization {
        detail: format!("backporting {name} to this build's versions: {e}"),
    })
    .await
}
