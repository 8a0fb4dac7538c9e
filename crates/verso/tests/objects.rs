//! Behaviour of the public object API beyond the golden vectors: typed access, custom
//! backport hooks, list objects, registries side by side, and typed errors.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use cyborg_model::{
    AttachHandle, AttachHandleList, AttachType, Device, DeviceList, DeviceType, ManagedMode,
};
use serde_json::json;
use verso::{
    Error, Field, ObjectList, ObjectMeta, PrimitiveData, Registry, Version, VersionManifest,
    VersionedObject,
};

fn v(s: &str) -> Version {
    s.parse().expect("valid version")
}

fn device(id: i64) -> Device {
    Device {
        id: id.into(),
        uuid: uuid::Uuid::from_u128(id as u128).into(),
        r#type: DeviceType::Gpu.into(),
        vendor: "10de".into(),
        model: "A100".into(),
        std_board_info: Field::new(None),
        hostname: "host1".into(),
        vendor_board_info: Field::new(Some("sxm4".into())),
        managed_mode: ManagedMode::Managed.into(),
        created_at: Field::new(Some("2024-03-01T12:34:56Z".parse().expect("date"))),
        updated_at: Field::new(None),
        ..Device::blank()
    }
}

#[test]
fn unset_fields_read_as_none_and_never_default() {
    let d = Device::blank();
    assert_eq!(d.managed_mode.get(), None);
    assert!(!d.is_set("managed_mode").expect("known field"));
    assert!(matches!(d.is_set("nope"), Err(Error::UnknownField { .. })));
    let p = d
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    assert_eq!(p["versioned_object.data"], json!({}));
    assert!(p.get("versioned_object.changes").is_none());
}

#[test]
fn assignment_tracks_changes_and_reset_clears_them() {
    let mut d = device(1);
    assert!(d.what_changed().contains("hostname"));
    d.reset_changes();
    assert!(d.what_changed().is_empty());
    d.hostname.set("host1".into()); // equal value still counts, as in OVO
    assert_eq!(
        d.what_changed().into_iter().collect::<Vec<_>>(),
        ["hostname"]
    );
}

#[test]
fn nested_changes_propagate_and_recursive_reset_clears_them() {
    let mut child = device(1);
    child.reset_changes();
    child.model.set("H100".into());
    let mut h = AttachHandle {
        device: Field::new(Some(child)),
        ..AttachHandle::blank()
    };
    h.reset_changes();
    assert_eq!(h.what_changed().into_iter().collect::<Vec<_>>(), ["device"]);
    h.reset_changes_of(&[], true);
    assert!(h.what_changed().is_empty());
}

#[test]
fn decoded_object_keeps_its_version_and_refuses_newer_targets() {
    let old = device(1)
        .to_primitive(verso::Target::Version(v("1.0")))
        .expect("backport");
    let d = Device::from_primitive(&old).expect("decode 1.0");
    assert_eq!(d.version(), v("1.0"));
    assert_eq!(d.vendor_board_info.get(), None);
    assert!(matches!(
        d.to_primitive(verso::Target::Version(v("1.1"))),
        Err(Error::InvalidTargetVersion { .. })
    ));
}

#[test]
fn decode_errors_are_typed() {
    let mut p = device(1)
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    p["versioned_object.version"] = json!("1.3");
    assert!(
        matches!(Device::from_primitive(&p), Err(Error::IncompatibleObjectVersion { supported, .. }) if supported == v("1.2"))
    );
    p["versioned_object.version"] = json!("2.0");
    assert!(matches!(
        Device::from_primitive(&p),
        Err(Error::IncompatibleObjectVersion { .. })
    ));
    p["versioned_object.version"] = json!("1.x");
    assert!(matches!(Device::from_primitive(&p), Err(Error::Version(_))));
    p["versioned_object.version"] = json!("1.2");
    p["versioned_object.namespace"] = json!("nova");
    assert!(
        matches!(Device::from_primitive(&p), Err(Error::UnsupportedObject { objtype }) if objtype == "nova.Device")
    );
    assert!(matches!(
        Device::from_primitive(&json!([1, 2])),
        Err(Error::Malformed { .. })
    ));
    assert!(matches!(
        Device::from_primitive(&json!({"versioned_object.name": "Device"})),
        Err(Error::MissingKey { .. })
    ));
    let h = AttachHandle::blank()
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    assert!(matches!(
        Device::from_primitive(&h),
        Err(Error::WrongObjectType { .. })
    ));
}

#[test]
fn byte_decoder_reports_the_same_errors() {
    let good = device(1)
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    let cases = [
        ("versioned_object.version", json!("1.3")),
        ("versioned_object.version", json!("1.x")),
        ("versioned_object.namespace", json!("nova")),
        ("versioned_object.name", json!("AttachHandle")),
    ];
    for (key, value) in cases {
        let mut p = good.clone();
        p[key] = value;
        let bytes = serde_json::to_vec(&p).expect("json");
        let by_value = Device::from_primitive(&p).expect_err("bad");
        let by_bytes = Device::from_primitive_slice(&bytes).expect_err("bad");
        assert_eq!(by_value.ovo_exception(), by_bytes.ovo_exception(), "{key}");
    }
    let mut p = good.clone();
    p["versioned_object.data"]["hostname"] = json!(null);
    let e = Device::from_primitive_slice(&serde_json::to_vec(&p).expect("json"))
        .expect_err("null hostname");
    assert_eq!(
        e.to_string(),
        "Device.hostname: Field `hostname' cannot be None"
    );
    let mut p = good;
    p.as_object_mut()
        .expect("object")
        .remove("versioned_object.namespace");
    let e =
        Device::from_primitive_slice(&serde_json::to_vec(&p).expect("json")).expect_err("missing");
    assert!(matches!(e, Error::MissingKey { .. }));
    assert!(matches!(
        Device::from_primitive_slice(b"{not json"),
        Err(Error::Malformed { .. })
    ));
}

#[test]
fn list_members_decoded_from_bytes_in_place_report_the_first_bad_one() {
    // Short lists, and long ones read in blocks of 256 (full, and with a rest).
    for n in [4, 256, 257, 512, 600] {
        let good = DeviceList::from_objects((1..=n).map(device).collect());
        let p = good.to_primitive(verso::Target::Own).expect("encodes");
        let bytes = serde_json::to_vec(&p).expect("json");
        let back = DeviceList::from_primitive_slice(&bytes).expect("decodes");
        assert_eq!(back, DeviceList::from_primitive(&p).expect("decodes"));
        assert_eq!(back.describe(), good.describe(), "{n}");
    }
    let good = DeviceList::from_objects((1..=600).map(device).collect());
    let p = good.to_primitive(verso::Target::Own).expect("encodes");
    // Two bad members: the first one's error is the list's, whichever path decodes it,
    // and a list after it still has to be well-formed JSON.
    let mut bad = p.clone();
    let objects = &mut bad["versioned_object.data"]["objects"];
    objects[1]["versioned_object.data"]["hostname"] = json!(null);
    objects[2]["versioned_object.data"]["uuid"] = json!("not a uuid");
    let text = serde_json::to_vec(&bad).expect("json");
    let by_bytes = DeviceList::from_primitive_slice(&text).expect_err("bad member");
    let by_value = DeviceList::from_primitive(&bad).expect_err("bad member");
    assert_eq!(by_bytes.to_string(), by_value.to_string());
    assert_eq!(
        by_bytes.to_string(),
        "Device.hostname: Field `hostname' cannot be None"
    );
    // A bad member in a later block.
    let mut late = p.clone();
    late["versioned_object.data"]["objects"][300]["versioned_object.data"]["uuid"] =
        json!("not a uuid");
    let by_bytes = DeviceList::from_primitive_slice(&serde_json::to_vec(&late).expect("json"))
        .expect_err("bad member");
    let by_value = DeviceList::from_primitive(&late).expect_err("bad member");
    assert_eq!(by_bytes.to_string(), by_value.to_string());
    assert!(by_bytes.to_string().contains("not a uuid"), "{by_bytes}");
    let mut cut = text.clone();
    cut.truncate(text.len() - 40);
    assert!(matches!(
        DeviceList::from_primitive_slice(&cut),
        Err(Error::Malformed { .. })
    ));
}

#[test]
fn list_objects_iterate_like_a_vec_and_backport_members() {
    let list = DeviceList::from_objects(vec![device(1), device(2)]);
    assert_eq!(list.len(), 2);
    assert_eq!((&list).into_iter().count(), 2);
    assert_eq!(list[1].id.get(), Some(&2));
    let p = list
        .to_primitive(verso::Target::Version(v("1.0")))
        .expect("backport");
    for member in p["versioned_object.data"]["objects"]
        .as_array()
        .expect("members")
    {
        assert_eq!(member["versioned_object.version"], "1.0");
        assert!(member["versioned_object.data"]
            .get("vendor_board_info")
            .is_none());
    }
}

#[test]
fn manifest_backports_every_level_in_one_call() {
    let handle = |id: i64| AttachHandle {
        id: id.into(),
        attach_type: AttachType::Pci.into(),
        device: Field::new(Some(device(id))),
        ..AttachHandle::blank()
    };
    let list = AttachHandleList::from_objects(vec![handle(1), handle(2)]);
    let mut m = VersionManifest::new();
    m.insert("AttachHandleList", v("1.1"))
        .insert("AttachHandle", v("1.1"))
        .insert("Device", v("1.0"));
    let p = list
        .to_primitive(verso::Target::Manifest(&m))
        .expect("backport");
    for member in p["versioned_object.data"]["objects"]
        .as_array()
        .expect("members")
    {
        assert_eq!(member["versioned_object.version"], "1.1");
        let dev = &member["versioned_object.data"]["device"];
        assert_eq!(dev["versioned_object.version"], "1.0");
        assert!(dev["versioned_object.data"].get("managed_mode").is_none());
    }
    assert_eq!(AttachHandleList::manifest().get("Device"), Some(v("1.2")));
}

#[test]
fn peer_primitive_uses_the_manifest_version_of_the_top_object() {
    let mut m = DeviceList::manifest();
    m.insert("DeviceList", v("1.1")).insert("Device", v("1.1"));
    let p = DeviceList::from_objects(vec![device(1)])
        .to_primitive(verso::Target::Peer(&m))
        .expect("backport");
    assert_eq!(p["versioned_object.version"], "1.1");
    assert_eq!(
        p["versioned_object.data"]["objects"][0]["versioned_object.version"],
        "1.1"
    );
}

/// A custom hook: 1.1 renamed `label` (1.0) to `name`; old peers get `label` back.
fn widget_compat(
    w: &Widget,
    data: &mut PrimitiveData,
    target: &Version,
    manifest: Option<&VersionManifest>,
) -> verso::Result<()> {
    verso::default_make_compatible(w, data, target, manifest)?;
    if *target < Version::new(1, 1) {
        if let Some(name) = data.remove("name") {
            data.insert("label".into(), name);
        }
    }
    Ok(())
}

#[derive(verso::VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "test", version = "1.1", make_compatible = widget_compat, test_only)]
struct Widget {
    name: Field<String>,
    #[verso(since = "1.1", default = 3)]
    size: Field<i64>,
    meta: ObjectMeta,
}

#[test]
fn custom_make_compatible_hook_runs_with_the_default_rules() {
    let w = Widget {
        name: "w".into(),
        size: 5.into(),
        ..Widget::blank()
    };
    let p = w
        .to_primitive(verso::Target::Version(v("1.0")))
        .expect("backport");
    assert_eq!(p["versioned_object.data"], json!({"label": "w"}));
    assert!(Widget::schema().custom_make_compatible);
    assert!(Widget::schema().test_only);
}

#[test]
fn set_defaults_fills_only_unset_fields() {
    let mut w = Widget {
        name: "w".into(),
        ..Widget::blank()
    };
    w.set_defaults(&[]).expect("defaults");
    assert_eq!(w.size.get(), Some(&3));
    assert!(matches!(
        w.set_defaults(&["name"]),
        Err(Error::NoDefault { .. })
    ));
}

#[test]
fn registries_are_independent() {
    let mut a = Registry::new();
    a.register::<Widget>();
    let b = cyborg_model::registry();
    let p = Widget {
        name: "w".into(),
        ..Widget::blank()
    }
    .to_primitive(verso::Target::Own)
    .expect("encodes at its own version");
    assert!(a.from_primitive(&p).is_ok());
    assert!(matches!(
        b.from_primitive(&p),
        Err(Error::UnsupportedObject { .. })
    ));
    let d = device(1)
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    assert!(matches!(
        a.from_primitive(&d),
        Err(Error::UnsupportedObject { .. })
    ));
    assert!(b
        .from_primitive(&d)
        .expect("decodes")
        .downcast::<Device>()
        .is_ok());
}
