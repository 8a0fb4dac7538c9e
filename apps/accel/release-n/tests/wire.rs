//! Release N and release N+1 meet only in the wire form: N+1's objects backported to
//! N's manifest load as N's types, N's primitives load into N+1's registry, the classes
//! N shares unchanged have N+1's locked fingerprints, the 1.0 RPC methods are the same
//! declarations, and schema N is N+1's first migration byte for byte.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_release_n::objects as n;
use std::collections::BTreeMap;
use verso::{Target, Version, VersionedObject};

const UUID: &str = "5f3c6a0e-2c43-4b8a-9a59-2f3b2a6f1c11";

fn n1_device() -> accel_objects::Device {
    accel_objects::Device {
        id: 7.into(),
        uuid: UUID.parse::<uuid::Uuid>().expect("uuid").into(),
        r#type: accel_objects::DeviceType::Ssd.into(),
        vendor: "144d".to_owned().into(),
        model: "a808".to_owned().into(),
        std_board_info: Some(r#"{"class": "0x010802"}"#.to_owned()).into(),
        hostname: "host1".to_owned().into(),
        vendor_board_info: None.into(),
        managed_mode: accel_objects::ManagedMode::Managed.into(),
        created_at: None.into(),
        updated_at: None.into(),
        ..accel_objects::Device::blank()
    }
}

fn n1_handle(id: i64) -> accel_objects::AttachHandle {
    accel_objects::AttachHandle {
        id: id.into(),
        uuid: uuid::Uuid::new_v4().into(),
        deployable_id: 3.into(),
        in_use: true.into(),
        attach_type: accel_objects::AttachType::Pci.into(),
        attach_info: accel_objects::attach_info_with_managed(
            r#"{"bus": "5e", "device": "00", "domain": "0000", "function": "1"}"#,
            false,
        )
        .expect("a JSON object")
        .into(),
        device: Some(n1_device()).into(),
        revision: 4.into(),
        cleanup_state: Some("cleaning".to_owned()).into(),
        instance_uuid: Some("inst-1".to_owned()).into(),
        ..accel_objects::AttachHandle::blank()
    }
}

fn n1_deployable() -> accel_objects::Deployable {
    accel_objects::Deployable {
        id: 3.into(),
        uuid: UUID.parse::<uuid::Uuid>().expect("uuid").into(),
        name: "host1_0000:5e:00.0".to_owned().into(),
        device_id: 7.into(),
        num_accelerators: 2.into(),
        driver_name: Some("nvme".to_owned()).into(),
        attributes: BTreeMap::from([("k".to_owned(), "v".to_owned())]).into(),
        enabled: true.into(),
        created_at: None.into(),
        labels: vec!["fast".to_owned()].into(),
        utilization: 0.25.into(),
        control_path_id: Some("0000:5e:00.0".to_owned()).into(),
        ..accel_objects::Deployable::blank()
    }
}

#[test]
fn n_plus_1_objects_backported_to_n_manifest_load_as_n_types() {
    let manifest = n::manifest();
    let list = accel_objects::AttachHandleList {
        objects: vec![n1_handle(1), n1_handle(2)].into(),
        ..accel_objects::AttachHandleList::blank()
    };
    let wire = list
        .to_primitive(Target::Peer(&manifest))
        .expect("backport");
    assert_eq!(wire["versioned_object.version"], "1.1", "{wire}");
    let members = wire["versioned_object.data"]["objects"]
        .as_array()
        .expect("members");
    for m in members {
        assert_eq!(m["versioned_object.version"], "1.2", "{m}");
        let data = &m["versioned_object.data"];
        for gone in ["revision", "cleanup_state", "instance_uuid"] {
            assert!(
                data.get(gone).is_none(),
                "{gone} is not in N's form: {data}"
            );
        }
        assert_eq!(data["device"]["versioned_object.version"], "1.2");
    }
    let bytes = serde_json::to_vec(&wire).expect("bytes");
    let old: n::AttachHandleList = n::registry()
        .from_primitive_slice_as(&bytes)
        .expect("N decodes N+1's backported list");
    let handles = old.objects.get().expect("members");
    assert_eq!(handles.len(), 2);
    let h = &handles[0];
    assert_eq!(h.id.get(), Some(&1));
    assert_eq!(h.in_use.get(), Some(&true));
    let info: serde_json::Value =
        serde_json::from_str(h.attach_info.get().expect("info")).expect("json");
    assert!(
        info.get("managed").is_none(),
        "N never sees the managed key: {info}"
    );
    assert_eq!(info["bus"], "5e");
    let device = h.device.get().cloned().flatten().expect("device");
    assert_eq!(device.r#type.get(), Some(&n::DeviceType::Ssd));
    assert_eq!(device.managed_mode.get(), Some(&n::ManagedMode::Managed));

    // DeployableList 1.0 holds Deployable 1.0: N's list has no child-version rule (OVO's
    // fallback) and N+1's child_versions pin the same, so even with N's manifest naming
    // Deployable 1.1 the members go at 1.0, without control_path_id or the 1.1 fields.
    let deployables = accel_objects::DeployableList {
        objects: vec![n1_deployable()].into(),
        ..accel_objects::DeployableList::blank()
    };
    let wire = deployables
        .to_primitive(Target::Peer(&manifest))
        .expect("backport");
    assert_eq!(wire["versioned_object.version"], "1.0");
    let member = &wire["versioned_object.data"]["objects"][0];
    assert_eq!(member["versioned_object.version"], "1.0", "{member}");
    for gone in ["control_path_id", "labels", "utilization"] {
        assert!(
            member["versioned_object.data"].get(gone).is_none(),
            "{gone}: {member}"
        );
    }
    let old = n::DeployableList::from_primitive(&wire).expect("N decodes");
    let d = &old.objects.get().expect("members")[0];
    assert_eq!(d.version(), Version::new(1, 0));
    assert_eq!(d.driver_name.get(), Some(&Some("nvme".to_owned())));
    assert_eq!(d.num_accelerators.get(), Some(&2));
    // A single Deployable goes at the manifest's 1.1: only control_path_id is dropped.
    let wire = n1_deployable()
        .to_primitive(Target::Peer(&manifest))
        .expect("backport");
    assert_eq!(wire["versioned_object.version"], "1.1");
    let d = n::Deployable::from_primitive(&wire).expect("N decodes");
    assert_eq!(d.labels.get(), Some(&vec!["fast".to_owned()]));
    assert_eq!(d.utilization.get(), Some(&0.25));

    // What N cannot read at all is a typed error, not a panic.
    let own = n1_handle(9)
        .to_primitive(Target::Own)
        .expect("N+1's own version");
    let newer = own["versioned_object.version"].as_str().expect("version");
    let err = n::AttachHandle::from_primitive(&own).expect_err("N+1's version is newer than N's");
    assert!(err.to_string().contains(newer), "{err}");
}

#[test]
fn n_primitives_load_into_n_plus_1_types() {
    let handle = n::AttachHandle {
        id: 5.into(),
        uuid: uuid::Uuid::new_v4().into(),
        deployable_id: 3.into(),
        in_use: false.into(),
        attach_type: n::AttachType::Pci.into(),
        attach_info: r#"{"bus": "3b", "device": "00", "domain": "0000", "function": "2"}"#
            .to_owned()
            .into(),
        device: None.into(),
        ..n::AttachHandle::blank()
    };
    let list = n::AttachHandleList {
        objects: vec![handle].into(),
        ..n::AttachHandleList::blank()
    };
    let wire = list.to_primitive(Target::Own).expect("encode");
    let any = accel_objects::registry()
        .from_primitive(&wire)
        .expect("N+1 decodes N's list");
    let new = any
        .downcast::<accel_objects::AttachHandleList>()
        .map_err(|_| "not an AttachHandleList")
        .expect("class");
    assert_eq!(new.version(), Version::new(1, 1));
    let h = &new.objects.get().expect("members")[0];
    assert_eq!(h.version(), Version::new(1, 2));
    assert_eq!(h.id.get(), Some(&5));
    assert!(
        accel_objects::attach_info_managed(h.attach_info.get().expect("info")),
        "N's form means managed: yes"
    );
    assert!(h.revision.get().is_none(), "N never sent a revision");

    let report = n::DriverDeviceList {
        objects: vec![n::DriverDevice {
            control_path_id: "0000:3b:00.0".to_owned().into(),
            r#type: n::DeviceType::Fpga.into(),
            vendor: "8086".to_owned().into(),
            model: "0b30".to_owned().into(),
            std_board_info: None.into(),
            driver_name: Some("ifpga".to_owned()).into(),
            attach_handles: vec![n::DriverAttachHandle {
                attach_type: n::AttachType::Pci.into(),
                attach_info: "{}".to_owned().into(),
                ..n::DriverAttachHandle::blank()
            }]
            .into(),
            ..n::DriverDevice::blank()
        }]
        .into(),
        ..n::DriverDeviceList::blank()
    };
    let bytes = report.to_primitive_bytes(Target::Own).expect("bytes");
    let new: accel_objects::DriverDeviceList = accel_objects::registry()
        .from_primitive_slice_as(&bytes)
        .expect("N+1 decodes N's report");
    let d = &new.objects.get().expect("members")[0];
    assert_eq!(d.r#type.get(), Some(&accel_objects::DeviceType::Fpga));
    assert_eq!(d.driver_name.get(), Some(&Some("ifpga".to_owned())));
}

/// Fingerprints N+1's lock records (`apps/accel/objects/objects.lock`), by class.
fn n_plus_1_lock() -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../objects/objects.lock"
    ))
    .expect("N+1's lock");
    let lock: toml::Table = text.parse().expect("toml");
    lock["objects"]
        .as_table()
        .expect("objects")
        .iter()
        .map(|(name, o)| {
            let s = |k: &str| o[k].as_str().expect("string").to_owned();
            (name.clone(), (s("version"), s("fingerprint")))
        })
        .collect()
}

#[test]
fn fingerprints_equal_n_plus_1_lock_where_it_records_them() {
    let lock = n_plus_1_lock();
    let registry = n::registry();
    for schema in registry.schemas() {
        assert!(
            lock.contains_key(schema.name),
            "N+1 still has {}",
            schema.name
        );
    }
    // N+1's lock records only its current versions (it keeps no history). Its first
    // commit (45dd559, before AttachHandle 1.3) recorded AttachHandle 1.2.
    let history = BTreeMap::from([("AttachHandle", "1.2-a0c80ee60a72866537b8042a6c6450b4")]);
    let mut unrecorded = Vec::new();
    for schema in registry.schemas() {
        let fp = verso::fingerprint::fingerprint(schema);
        let (version, locked_fp) = &lock[schema.name];
        let locked_version: Version = version.parse().expect("version");
        if locked_version == schema.version {
            assert_eq!(&fp, locked_fp, "{} {}", schema.name, schema.version);
            continue;
        }
        assert!(
            locked_version > schema.version,
            "{}: N+1 locks {locked_version}, older than N's {}",
            schema.name,
            schema.version
        );
        match history.get(schema.name) {
            Some(old) => assert_eq!(fp, *old, "{} {}", schema.name, schema.version),
            None => unrecorded.push(schema.name),
        }
    }
    // The golden-vector versions accel never locked (examples/cyborg-model locks them
    // with its remotable methods, which the fingerprint includes).
    for never in ["AttachHandleList", "Deployable", "DeployableList"] {
        assert!(unrecorded.contains(&never), "{never}: {unrecorded:?}");
    }
}

#[test]
fn conductor_1_0_and_agent_1_0_are_n_plus_1_declarations() {
    use verso_rpc::RpcApi;
    let n = accel_release_n::rpc::ConductorApi::spec();
    assert_eq!(n.version, Version::new(1, 0));
    assert_eq!(n.namespace, None);
    let new = accel_objects::rpc::ConductorApi::spec();
    // N+1's methods as they were at 1.0: arguments added later (bind_arq's project_id,
    // 1.6) are left out of what a 1.0 caller sends.
    let new_1_0: Vec<_> = new
        .methods
        .iter()
        .filter(|m| m.since == Version::new(1, 0))
        .map(|m| {
            let mut m = m.clone();
            m.args
                .retain(|a| a.since.is_none_or(|s| s <= Version::new(1, 0)));
            m
        })
        .collect();
    assert_eq!(n.methods, new_1_0, "same names, arguments and defaults");
    assert_eq!(new.namespace, n.namespace);
    let agent = accel_release_n::rpc::AgentApi::spec();
    assert_eq!(agent.version, Version::new(1, 0));
    let names: Vec<&str> = agent.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["report_now"]);
    assert!(agent.methods[0].args.is_empty());
}

#[test]
fn schema_n_is_n_plus_1_first_migration() {
    use accel_release_n::schema::{migrator, Backend};
    let pairs = [
        (
            Backend::Sqlite,
            sqlx::migrate!("../conductor/migrations/sqlite"),
        ),
        (
            Backend::Postgres,
            sqlx::migrate!("../conductor/migrations/postgres"),
        ),
    ];
    for (backend, n_plus_1) in pairs {
        let n = migrator(backend);
        let ours: Vec<_> = n.iter().collect();
        assert_eq!(ours.len(), 1, "{backend:?}: release N has migration 1 only");
        let first = n_plus_1.iter().next().expect("N+1 has migrations");
        assert_eq!(ours[0].version, first.version);
        assert_eq!(ours[0].description, first.description);
        assert_eq!(ours[0].checksum, first.checksum, "{backend:?}: same SQL");
        assert!(n_plus_1.iter().count() > 1, "N+1 adds migrations after N");
    }
}

#[test]
fn release_n_contracts_match_its_own_lock() {
    let app = verso_cli::Application::new("accel-release-n", n::registry())
        .api::<accel_release_n::rpc::ConductorApi>()
        .api::<accel_release_n::rpc::AgentApi>()
        .default_lock(concat!(env!("CARGO_MANIFEST_DIR"), "/objects.lock"));
    let mut out = Vec::new();
    let ok = verso_cli::execute(Some(&app), ["verso", "objects", "check"], &mut out).expect("runs");
    assert!(ok, "{}", String::from_utf8_lossy(&out));
}

#[test]
fn release_n_lint_findings_are_the_gaps_n_plus_1_fixed() {
    // Release N shipped the golden vectors' lists: N+1 bumped DeployableList to 1.1 and
    // AttachHandleList to 1.2 to give them child_versions. The lint sees exactly those.
    let app = verso_cli::Application::new("accel-release-n", n::registry());
    let mut out = Vec::new();
    let ok = verso_cli::execute(Some(&app), ["verso", "objects", "lint"], &mut out).expect("runs");
    let text = String::from_utf8_lossy(&out);
    assert!(!ok, "{text}");
    assert!(text.contains("2 finding(s)"), "{text}");
    assert!(
        text.contains("AttachHandleList.objects [list-no-child-versions]"),
        "{text}"
    );
    assert!(
        text.contains("DeployableList.objects [list-no-child-rule]"),
        "{text}"
    );
}
