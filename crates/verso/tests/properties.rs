//! Property tests: random objects survive the primitive round trip, and a backport never
//! leaves a field the target version does not have.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use cyborg_model::{AttachHandle, AttachType, Deployable, Device, DeviceType, ManagedMode};
use proptest::prelude::*;
use verso::{DateTime, Field, Version, VersionedObject};

fn field<T: std::fmt::Debug + Clone + 'static>(
    value: impl Strategy<Value = T>,
) -> impl Strategy<Value = Field<T>> {
    prop_oneof![
        1 => Just(Field::unset()),
        4 => (value, any::<bool>()).prop_map(|(v, changed)| {
            let mut f = Field::new(v);
            f.set_changed(changed);
            f
        }),
    ]
}

fn datetime() -> impl Strategy<Value = DateTime> {
    // Whole seconds: the wire form has no fraction (OVO drops it).
    (
        0i64..4_000_000_000,
        prop_oneof![Just(None), (-720i32..=840).prop_map(|m| Some(m * 60))],
    )
        .prop_map(|(secs, offset)| {
            let utc = chrono::DateTime::from_timestamp(secs, 0).expect("in range");
            match offset.and_then(chrono::FixedOffset::east_opt) {
                Some(tz) => DateTime::from_fixed(utc.with_timezone(&tz)),
                None => utc.into(),
            }
        })
}

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

prop_compose! {
    fn device()(
        id in field(any::<i64>()),
        uuid in field(any::<u128>().prop_map(uuid::Uuid::from_u128)),
        ty in field(prop_oneof![Just(DeviceType::Gpu), Just(DeviceType::Fpga), Just(DeviceType::Ssd)]),
        vendor in field(text()),
        model in field(text()),
        std_board_info in field(proptest::option::of(text())),
        hostname in field(text()),
        vendor_board_info in field(proptest::option::of(text())),
        managed_mode in field(prop_oneof![Just(ManagedMode::Managed), Just(ManagedMode::Unmanaged)]),
        created_at in field(proptest::option::of(datetime())),
        updated_at in field(proptest::option::of(datetime())),
    ) -> Device {
        Device { id, uuid, r#type: ty, vendor, model, std_board_info, hostname, vendor_board_info, managed_mode, created_at, updated_at, ..Device::blank() }
    }
}

prop_compose! {
    fn deployable()(
        id in field(any::<i64>()),
        name in field(text()),
        attributes in field(proptest::collection::btree_map(text(), text(), 0..4)),
        enabled in field(any::<bool>()),
        labels in field(proptest::collection::vec(text(), 0..4)),
        utilization in field(-1e9f64..1e9),
    ) -> Deployable {
        Deployable { id, name, attributes, enabled, labels, utilization, ..Deployable::blank() }
    }
}

prop_compose! {
    fn attach_handle()(
        id in field(any::<i64>()),
        in_use in field(any::<bool>()),
        attach_type in field(Just(AttachType::Mdev)),
        device in field(proptest::option::of(device())),
    ) -> AttachHandle {
        AttachHandle { id, in_use, attach_type, device, ..AttachHandle::blank() }
    }
}

fn versions() -> impl Strategy<Value = Version> {
    prop_oneof![
        Just(Version::new(1, 0)),
        Just(Version::new(1, 1)),
        Just(Version::new(1, 2))
    ]
}

/// With a manifest, OVO keeps an object field even below its `since` (the manifest
/// wins over the relationship table; vector `attach_handle_target_1_0_manifest`), so
/// `scalars_only` leaves object fields to the manifest checks.
fn assert_no_newer_fields<O: VersionedObject>(obj: &O, target: Version, scalars_only: bool) {
    for f in &O::schema().fields {
        if scalars_only && f.ty.child_object().is_some() {
            continue;
        }
        if f.since.is_some_and(|s| target < s) {
            assert!(
                !obj.is_set(f.name).expect("known field"),
                "{} {} is set at {target}",
                O::NAME,
                f.name
            );
        }
    }
}

proptest! {
    #[test]
    fn device_round_trips(d in device()) {
        let back = Device::from_primitive(&d.to_primitive(verso::Target::Own).expect("encodes at its own version")).expect("decodes");
        prop_assert_eq!(back, d);
    }

    #[test]
    fn byte_paths_match_the_value_paths(h in attach_handle(), d in deployable()) {
        let bytes = h.to_primitive_bytes(verso::Target::Own).expect("encodes at its own version");
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
        prop_assert_eq!(&parsed, &h.to_primitive(verso::Target::Own).expect("encodes at its own version"));
        prop_assert_eq!(AttachHandle::from_primitive_slice(&bytes).expect("decodes").describe(), h.describe());
        let bytes = d.to_primitive_bytes(verso::Target::Own).expect("encodes at its own version");
        prop_assert_eq!(Deployable::from_primitive_slice(&bytes).expect("decodes"), d);
    }

    #[test]
    fn byte_backport_matches_the_value_backport(h in attach_handle(), target in versions(), dev in versions(), with_device in any::<bool>()) {
        let mut m = AttachHandle::manifest();
        m.insert("AttachHandle", target);
        if with_device {
            m.insert("Device", dev);
        } else {
            m = [("AttachHandle".to_string(), target)].into_iter().collect();
        }
        let by_value = h.to_primitive(verso::Target::Peer(&m)).expect("backports");
        let bytes = h.to_primitive_bytes(verso::Target::Peer(&m)).expect("backports");
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
        prop_assert_eq!(parsed, by_value);
    }

    #[test]
    fn deployable_round_trips(d in deployable()) {
        let back = Deployable::from_primitive(&d.to_primitive(verso::Target::Own).expect("encodes at its own version")).expect("decodes");
        prop_assert_eq!(back, d);
    }

    #[test]
    fn attach_handle_round_trips(h in attach_handle()) {
        // Compared as OVO sees objects (data, version, what_changed): a parent whose own
        // `device` mark is clear but whose child has changes reports `device` changed on
        // the wire, so the decoded parent has the mark set.
        let bytes = serde_json::to_vec(&h.to_primitive(verso::Target::Own).expect("encodes at its own version")).expect("serializes");
        let back = AttachHandle::from_primitive(&serde_json::from_slice(&bytes).expect("parses")).expect("decodes");
        prop_assert_eq!(back.describe(), h.describe());
    }

    #[test]
    fn device_backport_has_only_target_fields(d in device(), target in versions()) {
        let back = Device::from_primitive(&d.to_primitive(verso::Target::Version(target)).expect("backports")).expect("decodes");
        prop_assert_eq!(back.version(), target);
        assert_no_newer_fields(&back, target, false);
    }

    #[test]
    fn attach_handle_backport_follows_relationships(h in attach_handle(), target in versions()) {
        let back = AttachHandle::from_primitive(&h.to_primitive(verso::Target::Version(target)).expect("backports")).expect("decodes");
        assert_no_newer_fields(&back, target, false);
        if let Some(Some(d)) = back.device.get() {
            prop_assert_eq!(d.version(), target);
            assert_no_newer_fields(d, target, false);
        }
    }

    #[test]
    fn deployable_backport_has_only_target_fields(d in deployable(), target in prop_oneof![Just(Version::new(1, 0)), Just(Version::new(1, 1))]) {
        let back = Deployable::from_primitive(&d.to_primitive(verso::Target::Version(target)).expect("backports")).expect("decodes");
        assert_no_newer_fields(&back, target, false);
    }

    #[test]
    fn attach_handle_manifest_backport_has_only_manifest_fields(h in attach_handle(), target in versions(), dev in versions()) {
        let mut m = AttachHandle::manifest();
        m.insert("AttachHandle", target).insert("Device", dev);
        let back = AttachHandle::from_primitive(&h.to_primitive(verso::Target::Peer(&m)).expect("backports")).expect("decodes");
        assert_no_newer_fields(&back, target, true);
        if let Some(Some(d)) = back.device.get() {
            prop_assert_eq!(d.version(), dev);
            assert_no_newer_fields(d, dev, false);
        }
    }
}
