//! Cyborg 17's own objects read accel's database: the tables accel's schema shares with
//! Cyborg's so far (docs/cyborg-compatibility.md, "Cyborg 17's schema against accel's":
//! control paths, deployables with their attributes, attach handles, device profiles,
//! accelerator requests; migrations 11 to 13) hold, as the pinned openstack-cyborg's
//! `ControlpathID`, `Deployable`, `Attribute`, `AttachHandle`, `DeviceProfile` and
//! `ExtARQ` read them through its SQLAlchemy models, exactly what accel wrote. On SQLite and on MariaDB, the server a
//! Cyborg deployment's database is on.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::{ListFilter, ReportedDevice};
use accel_conductor::testing as support;
use accel_conductor::Db;
use accel_cyborg17::testing::{cyborg_read, write_cyborg_database_config};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How Cyborg's `ExtARQ` names the deployable of a request that has none.
const NO_DEPLOYABLE: &str = "00000000-0000-0000-0000-000000000000";

/// What accel holds of the shared tables, in the shape `cyborg_read` prints.
async fn accel_rows(db: &Db) -> Value {
    let all = ListFilter::default();
    let by_uuid = |mut rows: Vec<Value>| {
        rows.sort_by(|a, b| a["uuid"].as_str().cmp(&b["uuid"].as_str()));
        Value::Array(rows)
    };
    let paths = db.control_paths(None).await.expect("control paths");
    let deployables = db.deployables(&all).await.expect("deployables");
    let stored_rp: BTreeMap<String, Option<String>> = support::stored_providers(db)
        .await
        .into_iter()
        .map(|(_, uuid, rp)| (uuid, rp))
        .collect();
    let handles = db.attach_handles(None).await.expect("handles");
    let profiles = db.profiles().await.expect("profiles");
    json!({
        "control_paths": by_uuid(paths.iter().map(|c| json!({
            "uuid": c.uuid,
            "device_id": c.device_id,
            "cpid_type": c.cpid_type,
            "cpid_info": c.cpid_info,
        })).collect()),
        "deployables": by_uuid(deployables.iter().map(|d| json!({
            "uuid": d.uuid,
            "name": d.name,
            "device_id": d.device_id,
            "num_accelerators": d.num_accelerators,
            "driver_name": d.driver_name,
            "rp_uuid": stored_rp[&d.uuid],
            "parent_id": null,
            "root_id": null,
            "bitstream_id": null,
            "attributes": d.attributes,
        })).collect()),
        "handles": by_uuid(handles.iter().map(|h| json!({
            "uuid": h.uuid,
            "deployable_uuid": deployables.iter().find(|d| d.id == h.deployable_id).map(|d| &d.uuid),
            "cpid_uuid": paths.iter().find(|c| Some(c.id) == h.cpid_id).map(|c| &c.uuid),
            "in_use": h.in_use,
            "attach_type": h.attach_type,
            "attach_info": h.attach_info,
        })).collect()),
        "profiles": by_uuid(profiles.iter().map(|p| json!({
            "uuid": p.uuid,
            "name": p.name,
            "groups": p.groups,
            "description": p.description,
        })).collect()),
        "arqs": by_uuid(db.arqs(None).await.expect("requests").iter().map(|r| {
            let handle = handles
                .iter()
                .find(|h| Some(&h.uuid) == r.attach_handle_uuid.as_ref());
            let profile = profiles
                .iter()
                .find(|p| p.name == r.device_profile_name)
                .expect("the request's profile");
            json!({
                "uuid": r.uuid,
                "state": r.state.as_str(),
                "device_profile_name": r.device_profile_name,
                "device_profile_group_id": r.device_profile_group_id,
                "device_profile_group": profile.groups[r.device_profile_group_id as usize],
                "hostname": r.hostname,
                "device_rp_uuid": r.device_rp_uuid,
                "instance_uuid": r.instance_uuid,
                "project_id": r.project_id,
                "attach_handle_uuid": r.attach_handle_uuid,
                "substate": "Initial",
                // Cyborg's `ExtARQ` shows a request without a deployable with the nil
                // UUID (`_fill_obj_extarq_fields`).
                "deployable_uuid": handle
                    .and_then(|h| deployables.iter().find(|d| d.id == h.deployable_id))
                    .map_or(NO_DEPLOYABLE, |d| d.uuid.as_str()),
            })
        }).collect()),
    })
}

/// accel writes an FPGA and an SR-IOV NIC (a deployable per virtual function, with
/// attributes), a provider recorded for one virtual function, a bound handle and a
/// profile; Cyborg's objects read back the same rows from `connection` (SQLAlchemy's
/// URL of `db`).
async fn cyborg_reads_accels_rows(db: &Db, connection: &str) {
    let fpga = ReportedDevice {
        driver_name: Some("xclmgmt".to_owned()),
        ..support::reported_device("0000:3b:00.0", "FPGA", "10ee", "5020", 2)
    };
    db.report("h1", &[fpga, support::reported_nic("h1", &[1, 2])])
        .await
        .expect("report");
    let vf1 = "h1_nic_vf1";
    db.record_providers("h1", &[(vf1, &accel_conductor::db::rp_uuid(vf1))])
        .await
        .expect("provider");
    let groups = vec![BTreeMap::from([
        ("resources:FPGA".to_owned(), "1".to_owned()),
        ("trait:CUSTOM_FPGA_XILINX".to_owned(), "required".to_owned()),
    ])];
    db.create_profile("fpga", groups, Some("one FPGA".to_owned()))
        .await
        .expect("profile");
    let arq = db.create_arq("fpga", 0, None).await.expect("request");
    db.bind(&arq.uuid, "h1", "instance-1", None)
        .await
        .expect("bind");
    db.create_arq("fpga", 0, Some("project-1"))
        .await
        .expect("an unbound request");

    let dir = tempfile::tempdir().expect("tempdir");
    let read = cyborg_read(&write_cyborg_database_config(dir.path(), connection));
    let want = accel_rows(db).await;
    // The test means something: both devices' paths, every deployable, and a handle in
    // use were read.
    assert_eq!(want["control_paths"].as_array().map(Vec::len), Some(2));
    assert_eq!(want["deployables"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        want["handles"]
            .as_array()
            .expect("handles")
            .iter()
            .filter(|h| h["in_use"] == true)
            .count(),
        1
    );
    assert_eq!(want["arqs"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        read, want,
        "Cyborg's objects read other rows than accel wrote"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborgs_objects_read_accels_sqlite_database() {
    let (db, dir) = support::sqlite().await;
    let url = support::sqlite_url(&dir);
    let file = url.strip_prefix("sqlite://").expect("a sqlite:// URL");
    cyborg_reads_accels_rows(&db, &format!("sqlite:///{file}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborgs_objects_read_accels_mariadb_database() {
    let url = support::mysql_database().await;
    let db = Db::connect(&url).await.expect("open");
    support::make_schema(&db).await;
    let rest = url.strip_prefix("mysql://").expect("a mysql:// URL");
    cyborg_reads_accels_rows(&db, &format!("mysql+pymysql://{rest}?charset=utf8mb4")).await;
}
