//! AttachHandle 1.3's managed mode: written in `attach_info`, removed for peers below
//! 1.3 (who assume `yes`), on the value and the byte path alike.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_objects::{attach_info_managed, attach_info_with_managed, AttachHandle, AttachType};
use verso::{Target, Version, VersionManifest, VersionedObject};

fn handle() -> AttachHandle {
    AttachHandle {
        id: 1.into(),
        uuid: uuid::Uuid::nil().into(),
        deployable_id: 2.into(),
        in_use: false.into(),
        attach_type: AttachType::Pci.into(),
        attach_info: attach_info_with_managed(
            r#"{"bus": "5e", "device": "00", "domain": "0000", "function": "1"}"#,
            false,
        )
        .expect("a JSON object")
        .into(),
        revision: 7.into(),
        cleanup_state: None.into(),
        instance_uuid: None.into(),
        ..AttachHandle::blank()
    }
}

#[test]
fn managed_mode_is_in_attach_info_from_1_3() {
    let h = handle();
    assert!(!attach_info_managed(h.attach_info.get().expect("set")));
    assert!(attach_info_managed(r#"{"bus": "5e"}"#), "absent means yes");
    assert!(
        attach_info_managed("not json"),
        "unreadable means the default"
    );
    let p = h.to_primitive(Target::Own).expect("encode");
    assert_eq!(p["versioned_object.version"], "1.4");
    let info: serde_json::Value = serde_json::from_str(
        p["versioned_object.data"]["attach_info"]
            .as_str()
            .expect("text"),
    )
    .expect("json");
    assert_eq!(info["managed"], "no");
}

#[test]
fn a_1_2_peer_gets_the_old_form() {
    let h = handle();
    let old = h
        .to_primitive(Target::Version(Version::new(1, 2)))
        .expect("backport");
    let data = &old["versioned_object.data"];
    assert_eq!(old["versioned_object.version"], "1.2");
    let info: serde_json::Value =
        serde_json::from_str(data["attach_info"].as_str().expect("text")).expect("json");
    assert!(info.get("managed").is_none(), "{info}");
    assert_eq!(info["bus"], "5e");
    for gone in ["revision", "cleanup_state", "instance_uuid"] {
        assert!(
            data.get(gone).is_none(),
            "{gone} is not a 1.2 field: {data}"
        );
    }
    // The byte path writes the same JSON, and so does a peer's manifest.
    let bytes = h
        .to_primitive_bytes(Target::Version(Version::new(1, 2)))
        .expect("bytes");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&bytes).expect("json"),
        old
    );
    let manifest: VersionManifest = [
        ("AttachHandle".to_owned(), Version::new(1, 2)),
        ("Device".to_owned(), Version::new(1, 2)),
    ]
    .into_iter()
    .collect();
    assert_eq!(h.to_primitive(Target::Peer(&manifest)).expect("peer"), old);
}

#[test]
fn a_mode_never_replaces_an_attach_info_that_is_not_an_address() {
    assert_eq!(attach_info_with_managed("not json", true), None);
    assert_eq!(attach_info_with_managed("[1]", true), None);
    assert_eq!(attach_info_with_managed("", false), None);
    assert_eq!(
        attach_info_with_managed(r#"{"bus":"5e"}"#, false).as_deref(),
        Some(r#"{"bus":"5e","managed":"no"}"#)
    );
}

/// What an agent reads from a handle is there or a typed error naming the field: a
/// handle sent without its attach info, allocation or revision never reads as managed,
/// free or at revision 0.
#[test]
fn a_handles_mode_allocation_and_revision_are_read_never_defaulted() {
    let h = handle();
    assert_eq!(h.managed(), Ok(false));
    assert_eq!(h.is_in_use(), Ok(false));
    assert_eq!(h.current_revision(), Ok(7));
    let blank = AttachHandle::blank();
    for (read, field) in [
        (blank.managed().map(|_| ()), "attach_info"),
        (blank.is_in_use().map(|_| ()), "in_use"),
        (blank.current_revision().map(|_| ()), "revision"),
    ] {
        assert_eq!(
            read,
            Err(verso::Error::UnsetField {
                object: "AttachHandle",
                field
            })
        );
    }
}
