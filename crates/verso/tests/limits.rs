//! Hostile primitives: nesting and list lengths over the decode limits are typed errors
//! on the value path and the byte path, never a stack overflow, and the real model fits
//! well inside the defaults.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use cyborg_model::{AttachHandle, AttachHandleList, AttachType, Device, DeviceList};
use serde_json::{json, Value};
use verso::{DecodeLimits, Error, Field, LimitError, ObjectList, VersionedObject};

fn device(id: i64) -> Device {
    Device {
        id: id.into(),
        uuid: uuid::Uuid::from_u128(id as u128).into(),
        hostname: "host1".into(),
        ..Device::blank()
    }
}

/// The deepest nesting of lists and objects (a container at the top is depth 1).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// `[[[...1...]]]`, `levels` deep, as text.
fn nested_text(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// A Device primitive whose `hostname` holds `inner` (JSON text) instead of a string.
fn device_with_hostname(inner: &str) -> Vec<u8> {
    let p = device(1)
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    let text = serde_json::to_string(&p).expect("json");
    text.replacen("\"host1\"", inner, 1).into_bytes()
}

/// Takes a deep Value apart without recursion (its derived drop would recurse).
fn drop_deep(mut v: Value) {
    let mut stack = Vec::new();
    loop {
        match v {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => stack.extend(m.into_iter().map(|(_, v)| v)),
            _ => {}
        }
        match stack.pop() {
            Some(next) => v = next,
            None => return,
        }
    }
}

#[test]
fn a_hundred_thousand_nested_lists_are_refused_on_the_byte_path() {
    let bytes = device_with_hostname(&nested_text(100_000));
    assert_eq!(
        Device::from_primitive_slice(&bytes),
        Err(Error::Limit(LimitError::TooDeep { limit: 32 }))
    );
    // Without verso's limit, serde_json's own recursion limit (128) still stops it: a
    // typed error, not a stack overflow.
    match Device::from_primitive_slice_limited(&bytes, &DecodeLimits::UNLIMITED) {
        Err(Error::Malformed { what }) => assert!(what.contains("recursion"), "{what}"),
        other => panic!("expected a malformed primitive, got {other:?}"),
    }
    // Objects nested as deep.
    let objects = format!("{}1{}", "{\"a\":".repeat(100_000), "}".repeat(100_000));
    assert_eq!(
        Device::from_primitive_slice(&device_with_hostname(&objects)),
        Err(Error::Limit(LimitError::TooDeep { limit: 32 }))
    );
}

#[test]
fn a_hundred_thousand_nested_lists_are_refused_on_the_value_path() {
    let mut p = device(1)
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    let mut deep = json!(1);
    for _ in 0..100_000 {
        deep = Value::Array(vec![deep]);
    }
    p["versioned_object.data"]["hostname"] = deep;
    let registry = cyborg_model::registry();
    assert_eq!(
        registry.from_primitive(&p).map(drop),
        Err(Error::Limit(LimitError::TooDeep { limit: 32 }))
    );
    assert_eq!(
        Device::from_primitive(&p),
        Err(Error::Limit(LimitError::TooDeep { limit: 32 }))
    );
    drop_deep(p);
}

#[test]
fn lists_over_the_member_limit_are_refused_whole_on_both_paths() {
    let limits = DecodeLimits {
        max_members: 5,
        ..DecodeLimits::default()
    };
    // A primitive has 5 keys: the limit counts them too.
    let list = |n: i64| DeviceList::from_objects((1..=n).map(device).collect());
    let ok = list(5);
    assert_eq!(
        DeviceList::from_primitive_limited(
            &ok.to_primitive(verso::Target::Own)
                .expect("encodes at its own version"),
            &limits
        )
        .expect("5 members"),
        ok
    );
    assert_eq!(
        DeviceList::from_primitive_slice_limited(
            &ok.to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version"),
            &limits
        )
        .expect("5 members"),
        ok
    );
    let long = list(6);
    let refused = Err(Error::Limit(LimitError::TooManyMembers { limit: 5 }));
    assert_eq!(
        DeviceList::from_primitive_limited(
            &long
                .to_primitive(verso::Target::Own)
                .expect("encodes at its own version"),
            &limits
        ),
        refused
    );
    assert_eq!(
        DeviceList::from_primitive_slice_limited(
            &long
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version"),
            &limits
        ),
        refused
    );
    let mut registry = cyborg_model::registry();
    registry.set_limits(limits);
    assert_eq!(registry.limits(), limits);
    assert_eq!(
        registry
            .from_primitive(
                &long
                    .to_primitive(verso::Target::Own)
                    .expect("encodes at its own version")
            )
            .map(drop),
        Err(Error::Limit(LimitError::TooManyMembers { limit: 5 }))
    );
}

#[test]
fn the_default_member_limit_is_a_hundred_thousand() {
    // A list of 100,001 nulls is cheap to build and to check (nothing is decoded).
    let mut p = DeviceList::from_objects(vec![])
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    p["versioned_object.data"]["objects"] = Value::Array(vec![Value::Null; 100_001]);
    let refused = Err(Error::Limit(LimitError::TooManyMembers { limit: 100_000 }));
    assert_eq!(DeviceList::from_primitive(&p), refused);
    assert_eq!(
        DeviceList::from_primitive_slice(&serde_json::to_vec(&p).expect("json")),
        refused
    );
    // At the limit the check passes and the members are decoded (and refused as nulls).
    p["versioned_object.data"]["objects"] = Value::Array(vec![Value::Null; 100_000]);
    assert!(!matches!(
        DeviceList::from_primitive(&p),
        Err(Error::Limit(_)) | Ok(_)
    ));
}

#[test]
fn the_deepest_primitive_of_the_model_is_far_inside_the_default_depth() {
    let handle = |id: i64| AttachHandle {
        id: id.into(),
        attach_type: AttachType::Pci.into(),
        device: Field::new(Some(device(id))),
        ..AttachHandle::blank()
    };
    let list = AttachHandleList::from_objects(vec![handle(1), handle(2)]);
    let p = list
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    // list -> data -> objects -> handle -> data -> device -> data
    assert_eq!(depth(&p), 7);
    assert_eq!(AttachHandleList::from_primitive(&p).expect("decodes"), list);
    assert_eq!(
        AttachHandleList::from_primitive_slice(
            &list
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version")
        )
        .expect("decodes"),
        list
    );
    // Exactly at a tight limit is fine, one level less is refused.
    let exact = DecodeLimits {
        max_depth: 7,
        ..DecodeLimits::default()
    };
    assert!(AttachHandleList::from_primitive_limited(&p, &exact).is_ok());
    let tight = DecodeLimits {
        max_depth: 6,
        ..DecodeLimits::default()
    };
    assert_eq!(
        AttachHandleList::from_primitive_slice_limited(
            &list
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version"),
            &tight
        ),
        Err(Error::Limit(LimitError::TooDeep { limit: 6 }))
    );
}
