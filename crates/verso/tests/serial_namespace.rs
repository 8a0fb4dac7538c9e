//! A family's serial namespace (OVO's `OBJ_SERIAL_NAMESPACE`) beyond the golden vectors:
//! declared once, honoured by both codec paths, the registry (one family or several),
//! indirection's newer-object walk and the contract; `versioned_object` stays the
//! default.

#[path = "support/cyborg_object_model.rs"]
mod cyborg_object_model;

use cyborg_object_model::{AttachHandle, CyborgObject, Device, DeviceList};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use verso::fingerprint::{assess, changes, ContractChange, ObjectContract};
use verso::indirection::{backport_newer, holds_newer, ActionReply, BoxFuture, CallError};
use verso::{
    Error, Field, IndirectionApi, ObjectFamily, ObjectList, Registry, RequestContext, Target,
    Version, VersionManifest, VersionedObject,
};

fn device(id: i64) -> Device {
    Device {
        id: id.into(),
        hostname: "host1".into(),
        vendor_board_info: Field::new(Some("sxm4".into())),
        managed_mode: cyborg_model::ManagedMode::Managed.into(),
        ..Device::blank()
    }
}

#[test]
fn the_family_declares_both_namespaces_once() {
    assert_eq!(CyborgObject::NAMESPACE, "cyborg");
    assert_eq!(CyborgObject::SERIAL_NAMESPACE, "cyborg_object");
    for schema in cyborg_object_model::registry().schemas() {
        assert_eq!(schema.namespace, "cyborg", "{}", schema.name);
        assert_eq!(
            schema.serial_namespace(),
            "cyborg_object",
            "{}",
            schema.name
        );
    }
    assert_eq!(Device::PRIMITIVE_KEYS, CyborgObject::PRIMITIVE_KEYS);
    assert_eq!(
        cyborg_model::Device::SERIAL_NAMESPACE,
        "versioned_object",
        "the default"
    );
}

#[test]
fn both_codec_paths_write_every_level_in_the_family_keys() {
    let handle = AttachHandle {
        id: 7.into(),
        device: Field::new(Some(device(1))),
        ..AttachHandle::blank()
    };
    let list = cyborg_object_model::AttachHandleList::from_objects(vec![handle]);
    let mut peer = VersionManifest::new();
    peer.insert("AttachHandle", Version::new(1, 1))
        .insert("Device", Version::new(1, 1));
    for target in [
        Target::Own,
        Target::Peer(&peer),
        Target::Version(Version::new(1, 0)),
    ] {
        let value = list.to_primitive(target).expect("encodes");
        let bytes = list.to_primitive_bytes(target).expect("encodes");
        let from_bytes: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(value, from_bytes, "{target:?}");
        let text = String::from_utf8(bytes).expect("UTF-8");
        assert!(!text.contains("versioned_object"), "{text}");
        let member = &value["cyborg_object.data"]["objects"][0];
        assert_eq!(member["cyborg_object.name"], "AttachHandle");
        assert_eq!(
            member["cyborg_object.data"]["device"]["cyborg_object.name"],
            "Device"
        );
        let back = cyborg_object_model::AttachHandleList::from_primitive_slice(text.as_bytes())
            .expect("decodes");
        let again = cyborg_object_model::AttachHandleList::from_primitive(&value).expect("decodes");
        assert_eq!(back, again);
    }
}

#[test]
fn a_typed_decode_names_the_family_key_it_lacks() {
    // The same Device in the default family's keys.
    let other = cyborg_model::Device {
        id: 1.into(),
        ..cyborg_model::Device::blank()
    }
    .to_primitive(Target::Own)
    .expect("encodes");
    let missing = |e: Error| match e {
        Error::MissingKey { key } => key,
        other => panic!("expected MissingKey, got {other:?}"),
    };
    assert_eq!(
        missing(Device::from_primitive(&other).expect_err("other keys")),
        "cyborg_object.namespace"
    );
    let bytes = serde_json::to_vec(&other).expect("JSON");
    assert_eq!(
        missing(Device::from_primitive_slice(&bytes).expect_err("other keys")),
        "cyborg_object.namespace"
    );
    // And the other way round.
    let ours = device(1).to_primitive(Target::Own).expect("encodes");
    assert_eq!(
        missing(cyborg_model::Device::from_primitive(&ours).expect_err("family keys")),
        "versioned_object.namespace"
    );
}

#[test]
fn a_registry_of_one_family_refuses_other_keys_naming_the_key() {
    let reg = cyborg_object_model::registry();
    assert_eq!(
        reg.serial_namespaces().collect::<Vec<_>>(),
        ["cyborg_object"]
    );
    let p = json!({"nova_object.name": "Device", "nova_object.namespace": "cyborg",
                   "nova_object.version": "1.2", "nova_object.data": {}});
    match reg.from_primitive(&p) {
        Err(Error::MissingKey { key }) => assert_eq!(key, "cyborg_object.namespace"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
    let ours = device(3).to_primitive(Target::Own).expect("encodes");
    let any = reg.from_primitive(&ours).expect("decodes");
    assert_eq!(any.downcast_ref::<Device>(), Some(&device(3)));
}

#[test]
fn a_registry_of_two_families_reads_each_in_its_own_keys() {
    let mut reg = Registry::new();
    reg.register::<cyborg_model::Deployable>()
        .register::<Device>()
        .register::<DeviceList>();
    assert_eq!(
        reg.serial_namespaces().collect::<Vec<_>>(),
        ["versioned_object", "cyborg_object"]
    );
    let list = DeviceList::from_objects(vec![device(1), device(2)]);
    let p = list.to_primitive(Target::Own).expect("encodes");
    let back = reg.from_primitive(&p).expect("decodes");
    assert_eq!(back.downcast_ref::<DeviceList>(), Some(&list));

    let dep = cyborg_model::Deployable {
        id: 5.into(),
        ..cyborg_model::Deployable::blank()
    };
    let p = dep.to_primitive(Target::Own).expect("encodes");
    let back = reg.from_primitive(&p).expect("decodes");
    assert_eq!(back.downcast_ref::<cyborg_model::Deployable>(), Some(&dep));

    // A Device (registered in cyborg_object) sent in the default keys: the class found
    // reads its data under its own keys, as OVO's does.
    let p = cyborg_model::Device {
        id: 1.into(),
        ..cyborg_model::Device::blank()
    }
    .to_primitive(Target::Own)
    .expect("encodes");
    match reg.from_primitive(&p) {
        Err(Error::MissingKey { key }) => assert_eq!(key, "cyborg_object.data"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
    // No key of either family: the first registered family's first key.
    match reg.from_primitive(&json!({"name": "Device"})) {
        Err(Error::MissingKey { key }) => assert_eq!(key, "versioned_object.namespace"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

#[test]
fn newer_objects_are_found_in_the_family_keys() {
    let mut known = VersionManifest::new();
    known
        .insert("AttachHandle", Version::new(1, 1))
        .insert("Device", Version::new(1, 1));
    let handle = AttachHandle {
        id: 7.into(),
        device: Field::new(Some(device(1))),
        ..AttachHandle::blank()
    };
    let mut p = handle.to_primitive(Target::Own).expect("encodes");
    assert!(
        holds_newer(&p, &known),
        "AttachHandle 1.2 is newer than 1.1"
    );
    let older = handle.to_primitive(Target::Peer(&known)).expect("encodes");
    assert!(!holds_newer(&older, &known));
    // Only the contained Device is newer.
    p["cyborg_object.version"] = json!("1.1");
    assert!(holds_newer(&json!({"a": [p]}), &known));
    assert!(
        !holds_newer(
            &json!({"cyborg_object.name": "Device", "cyborg_object.version": "1.9"}),
            &known
        ),
        "without a namespace key it is no primitive"
    );
}

/// An indirection API that answers `object_backport_versions` by encoding the class for
/// the manifest, as a conductor does, and records the calls.
#[derive(Default)]
struct Backporter(Mutex<Vec<String>>);

impl IndirectionApi for Backporter {
    fn object_class_action_versions<'a>(
        &'a self,
        _: &'a RequestContext,
        _: &'a str,
        _: &'a str,
        _: &'a VersionManifest,
        _: Vec<Value>,
        _: serde_json::Map<String, Value>,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async { Err(CallError::method("NotHere", "not used")) })
    }
    fn object_action<'a>(
        &'a self,
        _: &'a RequestContext,
        _: Value,
        _: &'a str,
        _: Vec<Value>,
        _: serde_json::Map<String, Value>,
    ) -> BoxFuture<'a, Result<ActionReply, CallError>> {
        Box::pin(async { Err(CallError::method("NotHere", "not used")) })
    }
    fn object_backport_versions<'a>(
        &'a self,
        _: &'a RequestContext,
        objinst: Value,
        object_versions: &'a VersionManifest,
    ) -> BoxFuture<'a, Result<Value, CallError>> {
        Box::pin(async move {
            let obj = cyborg_object_model::registry().from_primitive(&objinst)?;
            if let Ok(mut calls) = self.0.lock() {
                calls.push(obj.obj_schema().name.to_owned());
            }
            Ok(obj.obj_to_primitive(Target::Peer(object_versions))?)
        })
    }
}

#[tokio::test]
async fn backport_newer_backports_family_objects_through_their_namespace() {
    let api = Arc::new(Backporter::default());
    let ctx = RequestContext::new("req-1").with_indirection("cyborg", api.clone());
    let mut known = VersionManifest::new();
    known.insert("Device", Version::new(1, 1));
    let mut value = json!({"devices": [device(1).to_primitive(Target::Own).expect("encodes")]});
    backport_newer(&ctx, &mut value, &known, |_, e| e)
        .await
        .expect("backported");
    let sent = &value["devices"][0];
    assert_eq!(sent["cyborg_object.version"], "1.1");
    assert!(sent["cyborg_object.data"].get("managed_mode").is_none());
    assert_eq!(
        api.0.lock().map(|c| c.clone()).unwrap_or_default(),
        ["Device"]
    );
    let back = Device::from_primitive(sent).expect("this build reads it");
    assert_eq!(back.version(), Version::new(1, 1));
}

#[test]
fn the_contract_records_a_serial_namespace_and_a_change_of_it_needs_a_major_bump() {
    let ours = ObjectContract::from_schema(Device::schema());
    assert_eq!(ours.serial_namespace, "cyborg_object");
    let default = ObjectContract::from_schema(cyborg_model::Device::schema());
    assert_eq!(default.serial_namespace, "versioned_object");
    // OVO's fingerprint does not include the serial namespace: OVO 3.12.0 gives the
    // fuzzer's model these fingerprints with OBJ_SERIAL_NAMESPACE 'versioned_object' and
    // 'cyborg_object' alike (ObjectVersionChecker.get_hashes() on ovo_fuzz.CLASSES, before
    // and after set_serial_namespace("cyborg_object")). Classes without Enum fields and
    // remotable methods: the fuzzer's Enums list their values where this model's
    // fingerprint text has a tuple.
    let fp = |s: &verso::ObjectSchema| verso::fingerprint::fingerprint(s);
    assert_eq!(
        fp(cyborg_object_model::Deployable::schema()),
        "1.1-f6a7857dd723b1ed35a29ed9856d586b"
    );
    assert_eq!(
        fp(cyborg_object_model::DeployableList::schema()),
        "1.0-15ecf022a68ddbb8c2a6739cfc9f8f5e"
    );
    assert_eq!(
        fp(DeviceList::schema()),
        "1.2-8a192f0bd8ea5ac8953dbded23da1eb6"
    );
    let mut moved = ours.clone();
    moved.serial_namespace = "versioned_object".into();
    assert_eq!(
        changes(&moved, &ours),
        [ContractChange::SerialNamespace {
            old: "versioned_object".into(),
            new: "cyborg_object".into(),
        }]
    );
    let a = assess(&moved, &ours);
    assert!(!a.unchanged());
    assert_eq!(a.required, verso::fingerprint::Bump::Major);
}
