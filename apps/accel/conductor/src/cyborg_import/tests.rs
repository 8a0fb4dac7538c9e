//! The import's checks and shaping, on Cyborg rows made here (the import of a real
//! Cyborg 17 database is `apps/accel/accel/tests/cyborg_import.rs`).

use super::plan::{self, time, times};
use super::*;
use crate::db::rp_uuid;
use crate::lifecycle::ArqState;

const CPID: &str = r#"{"domain":"0000","bus":"0c","device":"00","function":"0"}"#;

fn device(id: i64, uuid: &str, host: &str) -> CyDevice {
    CyDevice {
        id,
        uuid: uuid.into(),
        r#type: "FPGA".into(),
        vendor: "0xABCD".into(),
        model: "m".into(),
        std_board_info: None,
        vendor_board_info: None,
        hostname: host.into(),
        status: "enabled".into(),
        device_state: None,
        inventory_status: None,
        created_at: Some("2026-12-05 09:01:04.269132".into()),
        updated_at: None,
    }
}

fn deployable(id: i64, device_id: i64, name: &str, parent: Option<i64>) -> CyDeployable {
    CyDeployable {
        id,
        uuid: format!("dep-{id}"),
        parent_id: parent,
        name: name.into(),
        num_accelerators: 1,
        device_id,
        rp_uuid: Some(rp_uuid(name)),
        driver_name: Some("fake".into()),
        bitstream_id: None,
        created_at: None,
        updated_at: None,
    }
}

fn handle(id: i64, deployable_id: i64, function: u8, in_use: bool) -> CyHandle {
    CyHandle {
        id,
        uuid: format!("ah-{id}"),
        deployable_id,
        in_use: Some(i64::from(in_use)),
        attach_type: "PCI".into(),
        attach_info: format!(
            r#"{{"domain":"0000","bus":"0c","device":"0","function":"{function}"}}"#
        ),
        cleanup_state: None,
        cleanup_reason: None,
        created_at: None,
        updated_at: None,
    }
}

fn attribute(uuid: &str, deployable_id: i64, key: &str, value: &str) -> CyAttribute {
    CyAttribute {
        uuid: uuid.into(),
        deployable_id,
        key: key.into(),
        value: value.into(),
        created_at: None,
        updated_at: None,
    }
}

fn profile() -> CyProfile {
    CyProfile {
        id: 7,
        uuid: "dp-1".into(),
        name: "fpga".into(),
        profile_json: r#"{"groups": [{"resources:FPGA": "1"}]}"#.into(),
        description: None,
        created_at: None,
    }
}

fn arq(uuid: &str, state: &str) -> CyArq {
    CyArq {
        uuid: uuid.into(),
        project_id: None,
        state: state.into(),
        device_profile_id: 7,
        device_profile_group_id: 0,
        hostname: None,
        device_rp_uuid: None,
        instance_uuid: None,
        attach_handle_id: None,
        deployable_id: None,
        substate: "Initial".into(),
        created_at: None,
        updated_at: None,
    }
}

/// One host `h1` with one device (id 1), its control path and deployable 10
/// (`h1_dev`) with two free handles.
fn one_device() -> Source {
    Source {
        devices: vec![device(1, "dev-1", "h1")],
        control_paths: vec![CyControlPath {
            device_id: 1,
            uuid: "cp-1".into(),
            cpid_type: "PCI".into(),
            cpid_info: CPID.into(),
            created_at: None,
            updated_at: None,
        }],
        deployables: vec![deployable(10, 1, "h1_dev", None)],
        handles: vec![handle(100, 10, 1, false), handle(101, 10, 2, false)],
        profiles: vec![profile()],
        ..Source::default()
    }
}

fn refused(source: Source) -> (String, String) {
    match plan(source) {
        Err(ImportError::Row { table, uuid, why }) => (format!("{table}/{uuid}"), why),
        other => panic!("expected a refused row, got {other:?}"),
    }
}

#[test]
fn cyborg_urls_become_sqlx_urls() {
    assert_eq!(
        source_url("mysql+pymysql://cyborg:pw@db/cyborg?charset=utf8").as_deref(),
        Some("mysql://cyborg:pw@db/cyborg?charset=utf8")
    );
    assert_eq!(
        source_url("mysql://u@h/c").as_deref(),
        Some("mysql://u@h/c")
    );
    assert_eq!(
        source_url("sqlite:///var/lib/c.db").as_deref(),
        Some("sqlite:///var/lib/c.db")
    );
    // accel's former schema history may be on PostgreSQL (Cyborg 17 never is).
    assert_eq!(
        source_url("postgresql://u@h/c").as_deref(),
        Some("postgres://u@h/c")
    );
    assert_eq!(source_url("mssql://u@h/c"), None);
    assert_eq!(source_url("cyborg.db"), None);
}

/// `text` as RFC 3339, to the second.
fn at(text: &str) -> plan::Time {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .expect("a time")
}

#[test]
fn cyborg_times_are_read_to_the_second() {
    assert_eq!(
        time("2026-12-05T09:01:04Z"),
        Some(at("2026-12-05T09:01:04Z")),
        "accel's former history's form"
    );
    assert_eq!(
        time("2026-12-05 09:01:04.269132"),
        Some(at("2026-12-05T09:01:04Z"))
    );
    assert_eq!(
        time("2026-12-05 09:01:04"),
        Some(at("2026-12-05T09:01:04Z"))
    );
    assert_eq!(time("yesterday"), None);
    let (created, updated) =
        times("devices", "d", Some("2026-12-05 09:01:04"), None).expect("times");
    assert_eq!(
        (created, updated),
        (at("2026-12-05T09:01:04Z"), at("2026-12-05T09:01:04Z"))
    );
    let e = times("devices", "d", Some("05/12/2026"), None).expect_err("refused");
    assert!(
        e.to_string().contains("devices row d") && e.to_string().contains("05/12/2026"),
        "{e}"
    );
}

#[test]
fn a_device_becomes_one_deployable_keyed_by_its_pci_address() {
    let plan = plan(one_device()).expect("plan");
    assert_eq!(plan.devices.len(), 1);
    let d = &plan.devices[0];
    assert_eq!(
        (d.uuid.as_str(), d.hostname.as_str(), d.maintaining),
        ("dev-1", "h1", false)
    );
    assert_eq!(d.created_at, at("2026-12-05T09:01:04Z"));
    assert_eq!(d.deployables.len(), 1);
    assert_eq!(d.deployables[0].control_path_id, "0000:0c:00.0");
    assert_eq!(d.deployables[0].uuid, "dep-10");
    let handles: Vec<&str> = d.deployables[0]
        .handles
        .iter()
        .map(|h| h.uuid.as_str())
        .collect();
    assert_eq!(handles, ["ah-100", "ah-101"]);
    assert!(plan.notes.is_empty(), "{:?}", plan.notes);
    assert_eq!(plan.profiles[0].groups, r#"[{"resources:FPGA":"1"}]"#);
}

#[test]
fn every_deployable_of_a_device_is_kept_with_its_handles_and_attributes() {
    let mut source = one_device();
    // A child deployable listed first by id comes after the root one.
    source.deployables = vec![
        deployable(9, 1, "h1_vf", Some(10)),
        deployable(10, 1, "h1_dev", None),
    ];
    source.handles = vec![handle(100, 10, 1, false), handle(101, 9, 2, false)];
    source.attributes = vec![
        attribute("at-1", 10, "rc", "FPGA"),
        attribute("at-2", 9, "rc", "CUSTOM_VF"),
        attribute("at-3", 9, "trait0", "CUSTOM_X"),
    ];
    let plan = plan(source).expect("plan");
    let deps = &plan.devices[0].deployables;
    let shape: Vec<(&str, &str, &str, usize, i64)> = deps
        .iter()
        .map(|d| {
            (
                d.uuid.as_str(),
                d.name.as_str(),
                d.control_path_id.as_str(),
                d.handles.len(),
                d.num_accelerators,
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("dep-10", "h1_dev", "0000:0c:00.0", 1, 1),
            ("dep-9", "h1_vf", "0000:0c:00.0", 1, 1)
        ]
    );
    assert_eq!(deps[0].handles[0].uuid, "ah-100");
    assert_eq!(deps[1].handles[0].uuid, "ah-101");
    assert_eq!(deps[0].attributes["rc"].1, "FPGA");
    assert_eq!(deps[1].attributes["rc"].1, "CUSTOM_VF");
    assert_eq!(deps[1].attributes["trait0"].1, "CUSTOM_X");
    assert!(plan.notes.is_empty(), "{:?}", plan.notes);
    let summary = plan.summary();
    assert_eq!(
        (
            summary.devices,
            summary.deployables,
            summary.attach_handles,
            summary.attributes
        ),
        (1, 2, 2, 3)
    );
}

#[test]
fn a_request_bound_to_a_further_deployable_is_kept() {
    let mut source = one_device();
    source
        .deployables
        .push(deployable(11, 1, "h1_vf", Some(10)));
    source.handles.push(handle(102, 11, 3, true));
    let mut bound = arq("arq-1", "Bound");
    bound.hostname = Some("h1".into());
    bound.device_rp_uuid = Some(rp_uuid("h1_vf"));
    bound.attach_handle_id = Some(102);
    bound.deployable_id = Some(11);
    source.arqs.push(bound);
    let plan = plan(source).expect("plan");
    assert_eq!(plan.arqs.len(), 1);
    assert_eq!(plan.arqs[0].handle, Some(102));
    assert_eq!(plan.devices[0].deployables[1].uuid, "dep-11");
}

#[test]
fn two_deployables_of_one_name_on_a_device_refuse_the_import() {
    let mut source = one_device();
    source
        .deployables
        .push(deployable(11, 1, "h1_dev", Some(10)));
    let (row, why) = refused(source);
    assert_eq!(row, "deployables/dep-11");
    assert!(why.contains("second deployable named"), "{why}");
}

#[test]
fn a_bound_request_keeps_its_handle_provider_and_host() {
    let mut source = one_device();
    source.handles[1].in_use = Some(1);
    let mut bound = arq("arq-1", "Bound");
    bound.hostname = Some("h1".into());
    bound.device_rp_uuid = Some(rp_uuid("h1_dev"));
    bound.instance_uuid = Some("inst".into());
    bound.attach_handle_id = Some(101);
    bound.deployable_id = Some(10);
    source.arqs = vec![bound, arq("arq-2", "Initial")];
    let plan = plan(source).expect("plan");
    assert_eq!(plan.arqs[0].state, ArqState::Bound);
    assert_eq!(plan.arqs[0].handle, Some(101));
    assert_eq!(plan.arqs[0].profile, "fpga");
    assert_eq!(plan.arqs[1].state, ArqState::Initial);
    assert!(plan.notes.is_empty(), "{:?}", plan.notes);
}

#[test]
fn inconsistent_requests_are_refused_by_name() {
    // Bound without a handle.
    let mut source = one_device();
    source.arqs.push(arq("arq-1", "Bound"));
    assert_eq!(refused(source).0, "extended_accelerator_requests/arq-1");
    // Holding a handle Cyborg has not marked in use.
    let mut source = one_device();
    let mut r = arq("arq-2", "Bound");
    r.attach_handle_id = Some(100);
    source.arqs.push(r);
    assert!(refused(source).1.contains("ah-100"));
    // Bound on a provider that is no deployable's.
    let mut source = one_device();
    source.handles[0].in_use = Some(1);
    let mut r = arq("arq-3", "Bound");
    r.attach_handle_id = Some(100);
    r.device_rp_uuid = Some("2b9b3c3e-0000-4000-8000-000000000000".into());
    source.arqs.push(r);
    assert!(refused(source).1.contains("no deployable's"));
    // A state Cyborg does not have, a profile that does not exist, a group past the end.
    let mut source = one_device();
    source.arqs.push(arq("arq-4", "Bogus"));
    assert!(refused(source).1.contains("Bogus"));
    let mut source = one_device();
    let mut r = arq("arq-5", "Initial");
    r.device_profile_id = 8;
    source.arqs.push(r);
    assert!(refused(source).1.contains("profile id 8"));
    let mut source = one_device();
    let mut r = arq("arq-6", "Initial");
    r.device_profile_group_id = 1;
    source.arqs.push(r);
    assert!(refused(source).1.contains("group 1"));
}

#[test]
fn devices_accel_cannot_hold_are_refused_by_name() {
    let mut source = one_device();
    source.devices[0].r#type = "MDEV".into();
    let (row, why) = refused(source);
    assert_eq!(row, "devices/dev-1");
    assert!(why.contains("MDEV"), "{why}");

    let mut source = one_device();
    source.control_paths[0].cpid_info = "{\"slot\": \"x\"}".into();
    assert_eq!(refused(source).0, "controlpath_ids/cp-1");

    let mut source = one_device();
    source.control_paths.clear();
    assert!(refused(source).1.contains("no control path"));

    let mut source = one_device();
    source.devices[0].status = "retired".into();
    assert!(refused(source).1.contains("retired"));

    let mut source = one_device();
    source.handles.push(handle(102, 99, 5, false));
    assert!(refused(source).1.contains("deployable id 99"));
}

#[test]
fn maintenance_and_profiles_follow_cyborg() {
    let mut source = one_device();
    source.devices[0].status = "maintaining".into();
    assert!(plan(source).expect("plan").devices[0].maintaining);

    // Cyborg's own checks on profiles hold here too.
    let mut source = one_device();
    source.profiles[0].profile_json =
        r#"{"groups": [{"trait:HW_X": "required", "resources:FPGA": "1"}]}"#.into();
    assert_eq!(refused(source).0, "device_profiles/dp-1");
    let mut source = one_device();
    source.profiles[0].profile_json = "[]".into();
    assert!(refused(source).1.contains("profile_json"));
}
