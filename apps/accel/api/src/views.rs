//! The JSON shapes of responses (Cyborg's v2 field names), per microversion.

use crate::microversion::{self, ApiVersion};
use crate::service::{ArqRow, AttributeRow, DeployableRow, DeviceProfileRow, DeviceRow};
use serde_json::{json, Map, Value};

fn links(base: &str, collection: &str, uuid: &str) -> Value {
    json!([{"href": format!("{base}/v2/{collection}/{uuid}"), "rel": "self"}])
}

/// The v2 version document, for a router serving up to `max`.
pub fn v2(base: &str, max: ApiVersion) -> Value {
    json!({
        "id": "v2.0",
        "status": "CURRENT",
        "min_version": microversion::MIN.to_string(),
        "max_version": max.to_string(),
        "links": [{"href": format!("{base}/v2/"), "rel": "self"}],
        "media_types": [{
            "base": "application/json",
            "type": "application/vnd.openstack.accelerator-v2+json",
        }],
    })
}

/// The root document: the versions there are. Each is named as Cyborg 17's root names
/// it (`v2`, its link without the trailing slash), where the `/v2` document says `v2.0`.
pub fn root(base: &str, max: ApiVersion) -> Value {
    let mut version = v2(base, max);
    version["id"] = json!("v2");
    version["links"] = json!([{"href": format!("{base}/v2"), "rel": "self"}]);
    json!({
        "name": "OpenStack Cyborg API",
        "description": "accel: accelerator management in the model of OpenStack Cyborg",
        "versions": [version],
        "default_version": version,
    })
}

/// A device; `status` (Cyborg's: `enabled` / `maintaining`) and `inventory_status`
/// (accel's: `available` / `missing` / `lost`) from 2.3 on.
pub fn device(d: &DeviceRow, version: ApiVersion, base: &str) -> Value {
    let mut v = json!({
        "uuid": d.uuid,
        "type": d.device_type,
        "vendor": d.vendor,
        "model": d.model,
        "std_board_info": d.std_board_info,
        "vendor_board_info": d.vendor_board_info,
        "hostname": d.hostname,
        "created_at": time(&d.created_at),
        "updated_at": time(&d.updated_at),
        "links": links(base, "devices", &d.uuid),
    });
    if version.at_least(microversion::DEVICE_STATUS) {
        if let Some(map) = v.as_object_mut() {
            let status = if d.maintaining {
                "maintaining"
            } else {
                "enabled"
            };
            map.insert("status".into(), Value::String(status.to_owned()));
            map.insert(
                "inventory_status".into(),
                Value::String(d.status.as_str().into()),
            );
        }
    }
    v
}

/// A deployable; `attributes_list` is Cyborg's: JSON text of a list of one-key objects
/// in Python's `json.dumps` form, `"[{\"rc\": \"FPGA\"}, ...]"` (by key: Cyborg lists
/// them in the order they were stored). accel keeps no deployable trees, so `parent_id`
/// and `root_id` are null; `bitstream_id` is the bitstream a bind last programmed it
/// with, if any. Links: `self` and, as Cyborg, an unversioned `bookmark`.
pub fn deployable(d: &DeployableRow, base: &str) -> Value {
    let attributes: Vec<String> = d
        .attributes
        .iter()
        .map(|(k, v)| format!("{{{}: {}}}", python_str(k), python_str(v)))
        .collect();
    json!({
        "uuid": d.uuid,
        "name": d.name,
        "num_accelerators": d.num_accelerators,
        "device_id": d.device_id,
        "driver_name": d.driver_name,
        "hostname": d.hostname,
        "rp_uuid": d.rp_uuid,
        "parent_id": null,
        "root_id": null,
        "bitstream_id": d.bitstream_id,
        "attributes_list": format!("[{}]", attributes.join(", ")),
        "created_at": time(&d.created_at),
        "updated_at": time(&d.updated_at),
        "links": [
            {"href": format!("{base}/v2/deployables/{}", d.uuid), "rel": "self"},
            {"href": format!("{base}/deployables/{}", d.uuid), "rel": "bookmark"},
        ],
    })
}

/// An attribute of a deployable, as Cyborg shows it.
pub fn attribute(a: &AttributeRow, base: &str) -> Value {
    json!({
        "uuid": a.uuid,
        "deployable_id": a.deployable_id,
        "key": a.key,
        "value": a.value,
        "created_at": time(&a.created_at),
        "updated_at": time(&a.updated_at),
        "links": links(base, "attributes", &a.uuid),
    })
}

/// `s` as Python's `json.dumps` writes a string (`ensure_ascii`: every character
/// outside ASCII as `\\uXXXX`, UTF-16 pairs beyond the first plane).
fn python_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in Value::String(s.to_owned()).to_string().chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// A stored time, or null where the row has none (rows release N wrote, and a Cyborg
/// row never updated).
fn time(t: &str) -> Value {
    if t.is_empty() {
        Value::Null
    } else {
        Value::String(t.to_owned())
    }
}

/// A device profile.
pub fn profile(p: &DeviceProfileRow, base: &str) -> Value {
    json!({
        "uuid": p.uuid,
        "name": p.name,
        "groups": p.groups,
        "description": p.description,
        "created_at": p.created_at,
        // No API changes a profile (Cyborg 17's neither), so none was ever updated.
        "updated_at": null,
        "links": links(base, "device_profiles", &p.uuid),
    })
}

/// One device profile as Cyborg 17's `GET /v2/device_profiles/{uuid_or_name}` shows it:
/// its times as Python's `str()` of them (`2026-12-06 12:00:00.123456+00:00`, and
/// `"None"` for the unset `updated_at`), not as the lists show them.
pub fn profile_one(p: &DeviceProfileRow, base: &str) -> Value {
    let mut v = profile(p, base);
    v["created_at"] = Value::String(p.created_at.replacen('T', " ", 1));
    v["updated_at"] = Value::String("None".into());
    v
}

/// An accelerator request; `attach_handle_info` is the handle's JSON object when bound.
pub fn arq(a: &ArqRow, base: &str) -> Value {
    // Cyborg shows an unbound request's handle info as `{}` and its type as `""`, not
    // null (its `ExtARQ._fill_obj_extarq_fields`).
    let info = a.attach_handle_info.as_ref().map_or_else(
        || Value::Object(Map::new()),
        |text| {
            serde_json::from_str::<Map<String, Value>>(text)
                .map(Value::Object)
                .unwrap_or_else(|_| Value::String(text.clone()))
        },
    );
    json!({
        "uuid": a.uuid,
        "state": a.state.as_str(),
        "device_profile_name": a.device_profile_name,
        "device_profile_group_id": a.device_profile_group_id,
        "hostname": a.hostname,
        "device_rp_uuid": a.device_rp_uuid,
        "instance_uuid": a.instance_uuid,
        "project_id": a.project_id,
        "attach_handle_uuid": a.attach_handle_uuid,
        "attach_handle_type": a.attach_handle_type.as_deref().unwrap_or_default(),
        "attach_handle_info": info,
        "created_at": a.created_at,
        "updated_at": a.updated_at,
        "links": links(base, "accelerator_requests", &a.uuid),
    })
}
