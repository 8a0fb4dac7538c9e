//! [`Store`] on SQLite: Cyborg's schema made once and recognised after, other databases
//! refused, a device's rows written and read back as Cyborg's report diff reads a host,
//! and deleted children first.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::testing::{cyborg_dbsync_upgrade, mysql_execute, write_cyborg_database_config};
use accel_cyborg17_conductor::config::sqlx_url;
use accel_cyborg17_conductor::db::{DbError, NewDeployable, NewDevice};
use accel_cyborg17_conductor::Store;

async fn store(dir: &tempfile::TempDir, name: &str) -> Store {
    Store::connect(&format!("sqlite://{}", dir.path().join(name).display()))
        .await
        .expect("connect")
}

#[tokio::test]
async fn the_schema_is_made_once_and_foreign_databases_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, "c.sqlite").await;
    assert!(
        s.sync().await.expect("first sync"),
        "an empty database gets the schema"
    );
    assert!(
        !s.sync().await.expect("second sync"),
        "Cyborg 17's database is kept"
    );
    let version: String = sqlx::query_scalar("SELECT version_num FROM alembic_version")
        .fetch_one(s.pool())
        .await
        .expect("stamped");
    assert_eq!(version, accel_cyborg17::schema::ALEMBIC_HEAD);

    let other = store(&dir, "other.sqlite").await;
    sqlx::query("CREATE TABLE _sqlx_migrations (version BIGINT)")
        .execute(other.pool())
        .await
        .expect("a table");
    match other.sync().await {
        Err(DbError::NotCyborg17 { found, hint, .. }) => {
            assert_eq!(found, "none");
            assert!(hint.contains("accel's own database"), "{hint}");
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_device_is_stored_read_and_deleted_as_cyborg_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = store(&dir, "c.sqlite").await;
    s.sync().await.expect("sync");
    let device = NewDevice {
        r#type: "FPGA",
        vendor: "8086",
        model: "0b30",
        std_board_info: Some("{}"),
        vendor_board_info: None,
        device_state: "available",
        cpid_type: "PCI",
        cpid_info: "{\"bus\": \"3d\"}",
    };
    let deployables = [NewDeployable {
        name: "h1_fpga",
        num_accelerators: 2,
        driver_name: Some("intel"),
        attributes: vec![("rc", "FPGA"), ("trait0", "CUSTOM_X")],
        handles: vec![("PCI", "a", false), ("PCI", "b", true)],
    }];
    let (device_id, cpid_id) = s
        .create_device("h1", &device, &deployables)
        .await
        .expect("create");
    let host = s.host_devices("h1").await.expect("read");
    assert_eq!(host.len(), 1);
    let d = &host[0];
    assert_eq!((d.id, d.cpid.id), (device_id, cpid_id));
    assert_eq!(
        (d.r#type.as_str(), d.vendor.as_str(), d.model.as_str()),
        ("FPGA", "8086", "0b30")
    );
    assert_eq!(d.cpid.cpid_info, "{\"bus\": \"3d\"}");
    assert_eq!(d.deployables.len(), 1);
    let dep = &d.deployables[0];
    assert_eq!((dep.name.as_str(), dep.num_accelerators), ("h1_fpga", 2));
    assert_eq!(
        dep.attributes,
        vec![
            ("rc".to_owned(), "FPGA".to_owned()),
            ("trait0".to_owned(), "CUSTOM_X".to_owned())
        ]
    );
    let mut infos: Vec<&str> = dep.handles.iter().map(|h| h.attach_info.as_str()).collect();
    infos.sort();
    assert_eq!(infos, ["a", "b"]);
    assert!(s.host_devices("h2").await.expect("read").is_empty());

    s.destroy_device(
        "h1",
        &d.cpid.cpid_info,
        &[("h1_fpga".to_owned(), vec!["a".to_owned(), "b".to_owned()])],
    )
    .await
    .expect("destroy");
    for table in [
        "devices",
        "controlpath_ids",
        "deployables",
        "attributes",
        "attach_handles",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(s.pool())
            .await
            .expect("count");
        assert_eq!(n, 0, "{table}");
    }
}

/// On MariaDB, through the URL a `cyborg.conf` has (`mysql+pymysql://...?charset=utf8`):
/// an empty database gets the schema once; a database Cyborg's own `cyborg-dbsync
/// upgrade` made is taken as it is; one at an older Cyborg revision is refused, unchanged.
#[tokio::test]
async fn mariadb_databases_made_by_cyborg_are_taken_and_older_ones_refused() {
    let server = std::env::var("VERSO_TEST_MYSQL_URL")
        .expect("VERSO_TEST_MYSQL_URL (scripts/test.sh sets it)");
    let rest = server
        .trim_start_matches("mysql://")
        .trim_end_matches('/')
        .to_owned();
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let dir = tempfile::tempdir().expect("tempdir");
    let names = ["empty", "dbsync"].map(|k| format!("cyborg_test_store_{k}_{suffix}"));
    for name in &names {
        mysql_execute(
            &server,
            &format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"),
        );
    }
    let url = |name: &str| format!("mysql+pymysql://{rest}/{name}?charset=utf8");

    let empty = Store::connect(&sqlx_url(&url(&names[0])).expect("a MySQL URL"))
        .await
        .expect("connect");
    assert!(empty.sync().await.expect("first sync"));
    assert!(!empty.sync().await.expect("second sync"));

    let conf = write_cyborg_database_config(dir.path(), &url(&names[1]));
    cyborg_dbsync_upgrade(&conf);
    let made = Store::connect(&sqlx_url(&url(&names[1])).expect("a MySQL URL"))
        .await
        .expect("connect");
    assert!(!made
        .sync()
        .await
        .expect("Cyborg's own database is Cyborg 17's"));
    assert!(made.host_devices("nowhere").await.expect("read").is_empty());

    sqlx::query("UPDATE alembic_version SET version_num = 'c6492ea0ec0a'")
        .execute(made.pool())
        .await
        .expect("an older revision");
    match made.sync().await {
        Err(DbError::NotCyborg17 { found, .. }) => assert_eq!(found, "c6492ea0ec0a"),
        other => panic!("not refused: {other:?}"),
    }
    for name in &names {
        mysql_execute(&server, &format!("DROP DATABASE {name}"));
    }
}
