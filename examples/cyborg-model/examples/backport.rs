//! The quick-start job: build cyborg objects, backport them for an older peer with a
//! version manifest, and print the primitives a Python oslo.versionedobjects peer reads.
//!
//! `cargo run -p cyborg-model --example backport [-- DeviceList=1.1 Device=1.1 ...]`
//! (without arguments the peer is a Cyborg agent from before `managed_mode`: every
//! class at the version before its newest).

use cyborg_model::{AttachHandle, AttachHandleList, AttachType, Device, DeviceType, ManagedMode};
use std::process::ExitCode;
use verso::{Field, ObjectList, Version, VersionManifest, VersionedObject};

fn device(id: i64, mode: ManagedMode) -> Device {
    Device {
        id: id.into(),
        uuid: uuid::Uuid::from_u128(0x5d5a_3e0b_6b2f_4b9a_9d0c_6d3f_2c1b_0a00 + id as u128).into(),
        r#type: DeviceType::Gpu.into(),
        vendor: "10de".into(),
        model: "A100".into(),
        std_board_info: Field::new(None),
        hostname: "host1".into(),
        vendor_board_info: Field::new(Some("sxm4".into())),
        managed_mode: mode.into(),
        created_at: Field::new(Some(verso::DateTime::now())),
        updated_at: Field::new(None),
        ..Device::blank()
    }
}

fn main() -> ExitCode {
    let mut manifest = VersionManifest::new();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        manifest
            .insert("AttachHandleList", Version::new(1, 0))
            .insert("AttachHandle", Version::new(1, 1))
            .insert("Device", Version::new(1, 1));
    }
    for arg in &args {
        let parsed = arg
            .split_once('=')
            .map(|(name, v)| (name, v.parse::<Version>()));
        match parsed {
            Some((name, Ok(v))) => {
                manifest.insert(name, v);
            }
            Some((_, Err(e))) => {
                eprintln!("error: {arg}: {e}");
                return ExitCode::FAILURE;
            }
            None => {
                eprintln!("error: {arg}: expected NAME=VERSION, e.g. Device=1.1");
                return ExitCode::FAILURE;
            }
        }
    }
    let handles = AttachHandleList::from_objects(
        (1..=2)
            .map(|id| AttachHandle {
                id: id.into(),
                uuid: uuid::Uuid::from_u128(0xa7c1_f0de_0000_4000_8000_0000_0000_0000 + id as u128)
                    .into(),
                deployable_id: 1.into(),
                in_use: false.into(),
                attach_type: AttachType::Pci.into(),
                attach_info: r#"{"bus": "af", "device": "00", "function": "0"}"#.into(),
                device: Field::new(Some(device(id, ManagedMode::Managed))),
                ..AttachHandle::blank()
            })
            .collect(),
    );
    println!("# this side: {:?}", AttachHandleList::manifest());
    println!("# peer:      {manifest:?}");
    println!(
        "# {} at {} (own version):",
        AttachHandleList::NAME,
        handles.version()
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&handles.to_primitive()).unwrap_or_default()
    );
    match handles.to_primitive_for_peer(&manifest) {
        Ok(p) => {
            println!("# backported for the peer, in one pass:");
            println!("{}", serde_json::to_string_pretty(&p).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot backport for this peer: {e}");
            ExitCode::FAILURE
        }
    }
}
