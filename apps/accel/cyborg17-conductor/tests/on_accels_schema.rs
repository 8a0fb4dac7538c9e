//! Release N's queries on release N+1's schema: the database contract between the two.
//! A database accel made (`Db::migrate` on an empty database: Cyborg 17's schema and
//! accel's additions, what `accel db sync` makes) is one release N, Cyborg 17 in Rust,
//! keeps working on until finalization. Its store takes the database as its own (no
//! schema made), writes a device accel then reads whole (accel's columns filled by the
//! additions' defaults and triggers: the deployable's host and PCI address), reads a
//! device accel's report wrote as Cyborg's report diff reads a host, and deletes it
//! (children first, through accel's triggers), accel seeing it gone. On SQLite and on
//! MariaDB, the two backends Cyborg 17 runs on.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::ListFilter;
use accel_conductor::testing::{mysql_database, reported_device};
use accel_conductor::Db;
use accel_cyborg17_conductor::db::{NewDeployable, NewDevice};
use accel_cyborg17_conductor::Store;

fn on(host: &str) -> ListFilter {
    ListFilter {
        host: Some(host.into()),
        ..ListFilter::default()
    }
}

async fn release_n_on_accels_schema(url: &str) {
    let db = Db::connect(url).await.expect("accel's connection");
    assert!(
        db.sync_on_cyborg17()
            .await
            .expect("accel db sync on an empty database")
            .made_cyborg_schema
    );
    let n = Store::connect(url).await.expect("release N's connection");
    assert!(
        !n.sync().await.expect("release N checks the database"),
        "release N takes accel's database as Cyborg 17's, making nothing"
    );

    // Release N writes a device, as its report diff does for an agent's new device.
    let cpid_info =
        r#"{"domain": "0000", "bus": "3d", "device": "00", "function": "0"}"#.to_owned();
    let device = NewDevice {
        r#type: "FPGA",
        vendor: "8086",
        model: "0b30",
        std_board_info: Some("{}"),
        vendor_board_info: None,
        device_state: "available",
        cpid_type: "PCI",
        cpid_info: &cpid_info,
    };
    let deployables = [NewDeployable {
        name: "n-host_fpga",
        num_accelerators: 2,
        driver_name: Some("intel"),
        attributes: vec![("rc", "FPGA"), ("trait0", "CUSTOM_FPGA_INTEL")],
        handles: vec![
            ("PCI", r#"{"bus": "3d"}"#, false),
            ("PCI", r#"{"bus": "3e"}"#, true),
        ],
    }];
    n.create_device("n-host", &device, &deployables)
        .await
        .expect("release N stores a device on accel's schema");
    let devices = db
        .devices(&on("n-host"))
        .await
        .expect("accel reads devices");
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert_eq!(
        (devices[0].device_type.as_str(), devices[0].vendor.as_str()),
        ("FPGA", "8086")
    );
    assert!(!devices[0].maintaining);
    let deps = db
        .deployables(&on("n-host"))
        .await
        .expect("accel reads deployables");
    assert_eq!(deps.len(), 1, "{deps:?}");
    // Accel's columns, which release N does not name, filled from what it wrote.
    assert_eq!(
        (deps[0].hostname.as_str(), deps[0].control_path_id.as_str()),
        ("n-host", "0000:3d:00.0")
    );
    assert!(deps[0].enabled);
    let handles = db
        .attach_handles(Some("n-host"))
        .await
        .expect("accel reads handles");
    assert_eq!(handles.len(), 2, "{handles:?}");
    assert_eq!(handles.iter().filter(|h| h.in_use).count(), 1);

    // Accel's report of a host, read by release N as its report diff reads a host.
    let gpu = reported_device("0000:5e:00.0", "GPU", "10de", "1eb8", 2);
    db.report("next-host", &[gpu])
        .await
        .expect("accel's report");
    let read = n
        .host_devices("next-host")
        .await
        .expect("release N reads accel's rows");
    assert_eq!(read.len(), 1, "{read:?}");
    let d = &read[0];
    assert_eq!((d.r#type.as_str(), d.vendor.as_str()), ("GPU", "10de"));
    let cpid: serde_json::Value =
        serde_json::from_str(&d.cpid.cpid_info).expect("Cyborg's cpid_info JSON");
    assert_eq!(
        (&cpid["bus"], &cpid["device"], &cpid["function"]),
        (&"5e".into(), &"00".into(), &"0".into()),
        "{cpid}"
    );
    assert_eq!(d.deployables.len(), 1, "{d:?}");
    assert_eq!(d.deployables[0].handles.len(), 2, "{d:?}");

    // Release N deletes it, children first, through accel's triggers; accel sees it gone.
    let children: Vec<(String, Vec<String>)> = d
        .deployables
        .iter()
        .map(|dep| {
            let infos = dep.handles.iter().map(|h| h.attach_info.clone()).collect();
            (dep.name.clone(), infos)
        })
        .collect();
    n.destroy_device("next-host", &d.cpid.cpid_info, &children)
        .await
        .expect("release N deletes a device accel's report made");
    assert!(db
        .devices(&on("next-host"))
        .await
        .expect("accel reads devices")
        .is_empty());
    assert!(db
        .attach_handles(Some("next-host"))
        .await
        .expect("accel reads handles")
        .is_empty());
    // And the device release N made is untouched.
    assert_eq!(db.devices(&on("n-host")).await.expect("devices").len(), 1);
    n.pool().close().await;
    db.close().await;
}

#[tokio::test]
async fn release_n_runs_on_accels_sqlite_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    release_n_on_accels_schema(&format!(
        "sqlite://{}",
        dir.path().join("accel.db").display()
    ))
    .await;
}

#[tokio::test]
async fn release_n_runs_on_accels_mariadb_schema() {
    release_n_on_accels_schema(&mysql_database().await).await;
}
