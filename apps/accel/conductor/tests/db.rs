//! The conductor's database on SQLite and on PostgreSQL: report diffing, profiles, the
//! accelerator request lifecycle, binds that race across two conductors.
//!
//! Over 1,000 lines on purpose: each file under `tests/` is a test binary of its own
//! that links the whole crate; the database's table families share these fixtures.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;

use accel_conductor::db::{rp_uuid, Backend, DeviceStatus, ListFilter, ReportedDevice};
use accel_conductor::{ArqState, Db, DbError};
use std::collections::BTreeMap;

fn device(cp: &str, device_type: &str, handles: usize) -> ReportedDevice {
    ReportedDevice {
        driver_name: Some("xclmgmt".to_owned()),
        ..accel_conductor::testing::reported_device(cp, device_type, "10ee", "5020", handles)
    }
}

fn group(rc: &str) -> Vec<BTreeMap<String, String>> {
    vec![[(format!("resources:{rc}"), "1".to_owned())]
        .into_iter()
        .collect()]
}

async fn report_diffing(db: &Db) {
    let first = db
        .report(
            "h1",
            &[
                device("0000:3b:00.0", "FPGA", 1),
                device("0000:3c:00.0", "GPU", 2),
            ],
        )
        .await
        .expect("report");
    assert_eq!(first.added, ["0000:3b:00.0", "0000:3c:00.0"]);
    assert_eq!(
        db.attach_handles(Some("h1")).await.expect("handles").len(),
        3
    );
    // The same report again changes nothing.
    let again = db
        .report(
            "h1",
            &[
                device("0000:3b:00.0", "FPGA", 1),
                device("0000:3c:00.0", "GPU", 2),
            ],
        )
        .await
        .expect("report");
    assert_eq!(
        (again.unchanged, again.added.len(), again.updated.len()),
        (2, 0, 0)
    );
    // A changed driver and a third VF: updated; the device's uuid is kept.
    let before = db
        .devices(&ListFilter {
            host: Some("h1".into()),
            ..Default::default()
        })
        .await
        .expect("devices");
    let mut gpu = device("0000:3c:00.0", "GPU", 3);
    gpu.driver_name = Some("vfio-pci".into());
    let changed = db
        .report("h1", &[device("0000:3b:00.0", "FPGA", 1), gpu.clone()])
        .await
        .expect("report");
    assert_eq!(changed.updated, ["0000:3c:00.0"]);
    let after = db
        .devices(&ListFilter {
            host: Some("h1".into()),
            ..Default::default()
        })
        .await
        .expect("devices");
    assert_eq!(
        before.iter().map(|d| &d.uuid).collect::<Vec<_>>(),
        after.iter().map(|d| &d.uuid).collect::<Vec<_>>()
    );
    // One device and one deployable by UUID; an unknown UUID is NotFound.
    let one = db.device(&after[1].uuid).await.expect("device by uuid");
    assert_eq!(one, after[1]);
    let deps = db
        .deployables(&ListFilter::default())
        .await
        .expect("deployables");
    let dep = db
        .deployable(&deps[0].uuid)
        .await
        .expect("deployable by uuid");
    assert_eq!(dep, deps[0]);
    assert!(matches!(
        db.device("no-such-uuid").await,
        Err(DbError::NotFound { kind: "device", .. })
    ));
    assert!(matches!(
        db.deployable("no-such-uuid").await,
        Err(DbError::NotFound {
            kind: "deployable",
            ..
        })
    ));
    assert_eq!(
        db.attach_handles(Some("h1")).await.expect("handles").len(),
        4
    );
    // Another host's report does not touch h1.
    db.report("h2", &[device("0000:3b:00.0", "FPGA", 1)])
        .await
        .expect("report");
    // The FPGA vanishes while free: deleted with its handles.
    let vanished = db.report("h1", &[gpu.clone()]).await.expect("report");
    assert_eq!(vanished.removed, ["0000:3b:00.0"]);
    assert_eq!(
        db.attach_handles(Some("h1")).await.expect("handles").len(),
        3
    );
    // The GPU vanishes while one of its handles is in use: kept. One report is not
    // believed (it may be spurious, or forged by another broker user): `missing`, still
    // the instance's, and not given to new requests.
    db.create_profile("gpu", group("PGPU"), None)
        .await
        .expect("profile");
    let arq = db.create_arq("gpu", 0, None).await.expect("arq");
    db.bind(&arq.uuid, "h1", "inst-1", None)
        .await
        .expect("bind");
    let first = db.report("h1", &[]).await.expect("report");
    assert_eq!(
        (
            first.unconfirmed.as_slice(),
            first.lost.len(),
            first.removed.len()
        ),
        (["0000:3c:00.0".to_owned()].as_slice(), 0, 0)
    );
    let status = |rows: Vec<accel_conductor::db::DeviceRow>| {
        rows.into_iter().map(|d| d.status).collect::<Vec<_>>()
    };
    let h1 = ListFilter {
        host: Some("h1".into()),
        ..Default::default()
    };
    assert_eq!(
        status(db.devices(&h1).await.expect("devices")),
        [DeviceStatus::Missing]
    );
    let bound = db.arq(&arq.uuid).await.expect("arq");
    assert_eq!(bound.state, ArqState::Bound, "the request keeps its device");
    // The next report confirms it: lost.
    let lost = db.report("h1", &[]).await.expect("report");
    assert_eq!(
        (
            lost.lost.as_slice(),
            lost.unconfirmed.len(),
            lost.removed.len()
        ),
        (["0000:3c:00.0".to_owned()].as_slice(), 0, 0)
    );
    let gpu_row = db
        .devices(&ListFilter {
            host: Some("h1".into()),
            ..Default::default()
        })
        .await
        .expect("devices");
    assert_eq!(gpu_row.len(), 1);
    assert_eq!(gpu_row[0].status, DeviceStatus::Lost);
    // It comes back: available again.
    let back = db.report("h1", &[gpu]).await.expect("report");
    assert_eq!(back.updated, ["0000:3c:00.0"]);
    assert_eq!(
        db.devices(&ListFilter {
            host: Some("h1".into()),
            ..Default::default()
        })
        .await
        .expect("devices")[0]
            .status,
        DeviceStatus::Available
    );
    // A control-path id twice in one report is refused whole.
    let err = db
        .report("h3", &[device("x", "GPU", 1), device("x", "GPU", 1)])
        .await
        .expect_err("duplicate");
    assert!(matches!(err, DbError::Invalid { .. }), "{err}");
    assert!(db
        .devices(&ListFilter {
            host: Some("h3".into()),
            ..Default::default()
        })
        .await
        .expect("devices")
        .is_empty());
}

async fn lifecycle_and_binding(db: &Db) {
    db.report("h1", &[device("0000:3b:00.0", "FPGA", 1)])
        .await
        .expect("report");
    db.create_profile("fpga", group("FPGA"), Some("one FPGA".into()))
        .await
        .expect("profile");
    let err = db
        .create_profile("fpga", group("FPGA"), None)
        .await
        .expect_err("duplicate");
    assert!(matches!(err, DbError::Duplicate { .. }), "{err}");
    let a = db.create_arq("fpga", 0, Some("proj")).await.expect("arq");
    assert_eq!(a.state, ArqState::Initial);
    // Bound by its deployable's resource provider, as Nova binds.
    let rp = rp_uuid("h1_0000:3b:00.0");
    let bound = db
        .bind(&a.uuid, "h1", "inst-1", Some(&rp))
        .await
        .expect("bind");
    assert_eq!(bound.state, ArqState::Bound);
    assert_eq!(bound.attach_handle_type.as_deref(), Some("PCI"));
    // Binding it again for the same instance is idempotent.
    assert_eq!(
        db.bind(&a.uuid, "h1", "inst-1", Some(&rp))
            .await
            .expect("again"),
        bound
    );
    // A second request finds no free FPGA: BindFailed, typed.
    let b = db.create_arq("fpga", 0, None).await.expect("arq");
    let err = db
        .bind(&b.uuid, "h1", "inst-2", None)
        .await
        .expect_err("no device");
    assert!(matches!(err, DbError::NoFreeHandle { .. }), "{err}");
    assert_eq!(
        db.arq(&b.uuid).await.expect("arq").state,
        ArqState::BindFailed
    );
    // The profile is in use.
    assert!(matches!(
        db.delete_profile("fpga").await,
        Err(DbError::ProfileInUse(_))
    ));
    // Unbind frees the handle and forgets host, instance and provider (as Cyborg), twice
    // is fine; then the other request binds.
    let unbound = db.unbind(&a.uuid).await.expect("unbind");
    assert_eq!(unbound.state, ArqState::Unbound);
    assert_eq!(
        (
            unbound.hostname,
            unbound.instance_uuid,
            unbound.device_rp_uuid,
            unbound.attach_handle_uuid
        ),
        (None, None, None, None)
    );
    assert_eq!(
        db.unbind(&a.uuid).await.expect("unbind again").state,
        ArqState::Unbound
    );
    let err = db
        .bind(&b.uuid, "h1", "inst-2", None)
        .await
        .expect_err("BindFailed cannot bind");
    assert!(
        matches!(
            err,
            DbError::InvalidTransition {
                from: ArqState::BindFailed,
                to: ArqState::BindStarted,
                ..
            }
        ),
        "{err}"
    );
    db.unbind(&b.uuid).await.expect("unbind failed bind");
    assert_eq!(
        db.bind(&b.uuid, "h1", "inst-2", None)
            .await
            .expect("rebind")
            .state,
        ArqState::Bound
    );
    // Delete by instance, idempotent; then the profile can go.
    assert_eq!(
        db.delete_arqs_of_instance("inst-2").await.expect("delete"),
        1
    );
    assert!(db.delete_arq(&a.uuid).await.expect("delete"));
    assert!(!db.delete_arq(&a.uuid).await.expect("delete again"));
    assert!(db
        .attach_handles(Some("h1"))
        .await
        .expect("handles")
        .iter()
        .all(|h| !h.in_use));
    db.delete_profile("fpga").await.expect("delete profile");
    assert!(db.profiles().await.expect("profiles").is_empty());
}

async fn racing_conductors(a: &Db, b: &Db) {
    a.report("h1", &[device("0000:3b:00.0", "FPGA", 1)])
        .await
        .expect("report");
    a.create_profile("fpga", group("FPGA"), None)
        .await
        .expect("profile");
    // Two requests race for the one handle through two conductors: exactly one binds.
    for round in 0..5 {
        let r1 = a.create_arq("fpga", 0, None).await.expect("arq");
        let r2 = b.create_arq("fpga", 0, None).await.expect("arq");
        let (x, y) = tokio::join!(
            a.bind(&r1.uuid, "h1", "i1", None),
            b.bind(&r2.uuid, "h1", "i2", None)
        );
        let wins = [x.is_ok(), y.is_ok()].iter().filter(|w| **w).count();
        assert_eq!(wins, 1, "round {round}: {x:?} {y:?}");
        for loser in [x, y].into_iter().filter_map(Result::err) {
            assert!(matches!(loser, DbError::NoFreeHandle { .. }), "{loser}");
        }
        assert_eq!(
            a.attach_handles(Some("h1"))
                .await
                .expect("handles")
                .iter()
                .filter(|h| h.in_use)
                .count(),
            1
        );
        a.delete_arq(&r1.uuid).await.expect("delete");
        b.delete_arq(&r2.uuid).await.expect("delete");
    }
    // Two conductors race to bind the same request: one moves it, the other gets the
    // typed conflict naming the state it found.
    for round in 0..5 {
        let r = a.create_arq("fpga", 0, None).await.expect("arq");
        let (x, y) = tokio::join!(
            a.bind(&r.uuid, "h1", "i1", None),
            b.bind(&r.uuid, "h1", "i9", None)
        );
        let ok = [&x, &y].iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "round {round}: {x:?} {y:?}");
        let loser = [x, y].into_iter().find_map(Result::err).expect("one loser");
        assert!(
            matches!(loser, DbError::InvalidTransition { .. }),
            "round {round}: {loser}"
        );
        a.delete_arq(&r.uuid).await.expect("delete");
    }
}

/// The test NIC on `h1` (`testing::reported_nic`): one deployable per virtual function.
fn nic(vfs: &[u8]) -> ReportedDevice {
    support::reported_nic("h1", vfs)
}

/// The host's deployables: (name, handles, attributes), by name.
async fn deployables_of(db: &Db, host: &str) -> Vec<(String, usize, Vec<(String, String)>)> {
    let deps = db
        .deployables(&ListFilter {
            host: Some(host.into()),
            ..Default::default()
        })
        .await
        .expect("deployables");
    let handles = db.attach_handles(Some(host)).await.expect("handles");
    let attributes = db
        .attributes(None, None, &ListFilter::default())
        .await
        .expect("attributes");
    let mut out: Vec<_> = deps
        .iter()
        .map(|d| {
            let mut attrs: Vec<(String, String)> = attributes
                .iter()
                .filter(|a| a.deployable_id == d.id)
                .map(|a| (a.key.clone(), a.value.clone()))
                .collect();
            attrs.sort();
            (
                d.name.clone(),
                handles.iter().filter(|h| h.deployable_id == d.id).count(),
                attrs,
            )
        })
        .collect();
    out.sort();
    out
}

/// A device with several deployables (a Cyborg agent's NIC, one per virtual function):
/// each is its own row with its own handles, attributes and provider; the report diff
/// pairs them by name, keeps their UUIDs, adds and removes single ones, and keeps one
/// whose handle is in use (the device is then missing, as for a lost handle).
async fn several_deployables_per_device(db: &Db) {
    let first = db.report("h1", &[nic(&[1, 2, 3])]).await.expect("report");
    assert_eq!(first.added, ["0000:5e:00.0"]);
    let deps = deployables_of(db, "h1").await;
    assert_eq!(
        deps.iter().map(|d| (d.0.as_str(), d.1)).collect::<Vec<_>>(),
        [("h1_nic_vf1", 1), ("h1_nic_vf2", 1), ("h1_nic_vf3", 1)]
    );
    assert_eq!(
        deps[1].2,
        [
            ("rc".to_owned(), "CUSTOM_NIC".to_owned()),
            ("trait0".to_owned(), "CUSTOM_PHYSNET_NET2".to_owned())
        ]
    );
    let devices = db.devices(&ListFilter::default()).await.expect("devices");
    assert_eq!(devices.len(), 1, "one device");
    let uuids = |rows: &[accel_conductor::db::DeployableRow]| {
        let mut v: Vec<(String, String)> = rows
            .iter()
            .map(|d| (d.name.clone(), d.uuid.clone()))
            .collect();
        v.sort();
        v
    };
    let all = ListFilter::default();
    let before = uuids(&db.deployables(&all).await.expect("deployables"));
    // Unchanged, whichever order the driver lists its deployables in.
    let again = db.report("h1", &[nic(&[3, 1, 2])]).await.expect("report");
    assert_eq!((again.unchanged, again.updated.len()), (1, 0), "{again:?}");
    assert_eq!(
        uuids(&db.deployables(&all).await.expect("deployables")),
        before
    );

    // Bind a request to the second virtual function's provider, as Nova does.
    db.create_profile("vf", group("CUSTOM_NIC"), None)
        .await
        .expect("profile");
    let arq = db.create_arq("vf", 0, None).await.expect("arq");
    let bound = db
        .bind(&arq.uuid, "h1", "inst-vf", Some(&rp_uuid("h1_nic_vf2")))
        .await
        .expect("bind to vf2");
    let vf2 = db
        .deployables(&all)
        .await
        .expect("deployables")
        .into_iter()
        .find(|d| d.name == "h1_nic_vf2")
        .expect("vf2");
    let vf2_handles: Vec<String> = db
        .attach_handles(Some("h1"))
        .await
        .expect("handles")
        .into_iter()
        .filter(|h| h.deployable_id == vf2.id)
        .map(|h| h.uuid)
        .collect();
    assert_eq!(bound.attach_handle_uuid.as_ref(), vf2_handles.first());

    // The third one goes (free): removed alone, the others keep their UUIDs.
    let fewer = db.report("h1", &[nic(&[1, 2])]).await.expect("report");
    assert_eq!(fewer.updated, ["0000:5e:00.0"]);
    let left = uuids(&db.deployables(&all).await.expect("deployables"));
    assert_eq!(left, before[..2]);
    // The bound one goes: kept, and the device is missing until confirmed.
    let dropped = db.report("h1", &[nic(&[1])]).await.expect("report");
    assert_eq!(dropped.unconfirmed, ["0000:5e:00.0"], "{dropped:?}");
    assert_eq!(
        uuids(&db.deployables(&all).await.expect("deployables")),
        left
    );
    let device = db.devices(&all).await.expect("devices").remove(0);
    assert_eq!(device.status, DeviceStatus::Missing);
    // It comes back: available again, a new one is added beside it.
    let back = db.report("h1", &[nic(&[1, 2, 4])]).await.expect("report");
    assert_eq!(back.updated, ["0000:5e:00.0"], "{back:?}");
    assert_eq!(
        deployables_of(db, "h1")
            .await
            .iter()
            .map(|d| d.0.as_str())
            .collect::<Vec<_>>(),
        ["h1_nic_vf1", "h1_nic_vf2", "h1_nic_vf4"]
    );
    assert_eq!(
        db.devices(&all).await.expect("devices")[0].status,
        DeviceStatus::Available
    );
    // Two deployables of one name in a device are refused, nothing written.
    let mut twice = nic(&[1, 2]);
    twice.more_deployables[0].name = "h1_nic_vf1".into();
    let err = db.report("h1", &[twice]).await.expect_err("refused");
    assert!(matches!(err, DbError::Invalid { .. }), "{err}");
    assert_eq!(deployables_of(db, "h1").await.len(), 3);
    // The whole device goes once its request is released: every deployable with it.
    db.unbind(&arq.uuid).await.expect("unbind");
    let gone = db.report("h1", &[]).await.expect("report");
    assert_eq!(gone.removed, ["0000:5e:00.0"]);
    assert!(db.deployables(&all).await.expect("deployables").is_empty());
    assert!(db.attach_handles(None).await.expect("handles").is_empty());
}

#[tokio::test]
async fn sqlite_several_deployables_per_device() {
    let (db, _dir) = support::sqlite().await;
    several_deployables_per_device(&db).await;
}

#[tokio::test]
async fn postgres_several_deployables_per_device() {
    several_deployables_per_device(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_several_deployables_per_device() {
    several_deployables_per_device(&support::mysql().await).await;
}

#[tokio::test]
async fn sqlite_report_diffing() {
    let (db, _dir) = support::sqlite().await;
    report_diffing(&db).await;
}

#[tokio::test]
async fn postgres_report_diffing() {
    report_diffing(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_report_diffing() {
    report_diffing(&support::mysql().await).await;
}

#[tokio::test]
async fn sqlite_lifecycle_and_binding() {
    let (db, _dir) = support::sqlite().await;
    lifecycle_and_binding(&db).await;
}

#[tokio::test]
async fn postgres_lifecycle_and_binding() {
    lifecycle_and_binding(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_lifecycle_and_binding() {
    lifecycle_and_binding(&support::mysql().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conductors_on_one_postgres_race_for_handles() {
    let url = support::postgres_database().await;
    let a = Db::connect(&url).await.expect("conductor a");
    support::make_schema(&a).await;
    let b = Db::connect(&url).await.expect("conductor b");
    racing_conductors(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conductors_on_one_mysql_race_for_handles() {
    let url = support::mysql_database().await;
    let a = Db::connect(&url).await.expect("conductor a");
    support::make_schema(&a).await;
    let b = Db::connect(&url).await.expect("conductor b");
    racing_conductors(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conductors_on_one_sqlite_file_race_for_handles() {
    let (a, dir) = support::sqlite().await;
    let b = Db::connect(&support::sqlite_url(&dir))
        .await
        .expect("conductor b");
    racing_conductors(&a, &b).await;
}

/// A database of accel's own former schema history (migrations 1-13) is refused by
/// `migrate` (every service's start, `accel db sync`) with the way out, and nothing is
/// written to it.
async fn accel_history_is_refused_unwritten(db: &Db) {
    support::make_accel_history(db).await;
    let before = db.applied_migrations().await.expect("applied");
    assert_eq!(before, (1..=13).collect());
    let refused = db.migrate().await;
    match &refused {
        Err(e @ DbError::AccelHistory { applied }) => {
            assert_eq!(applied, &(1..=13).collect::<Vec<i64>>());
            assert!(e.to_string().contains("accel db import-cyborg"), "{e}");
        }
        other => panic!("not refused as accel's former history: {other:?}"),
    }
    assert_eq!(db.applied_migrations().await.expect("applied"), before);
    let tables: i64 = sqlx::query_scalar(&db.backend().sql(match db.backend() {
        Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE name = $1",
        Backend::Postgres => {
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = $1 \
             AND table_schema = current_schema()"
        }
        Backend::Mysql => {
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = $1 \
             AND table_schema = DATABASE()"
        }
    }))
    .bind("alembic_version")
    .fetch_one(db.pool())
    .await
    .expect("tables");
    assert_eq!(tables, 0, "Cyborg's schema was begun on it");
}

#[tokio::test]
async fn sqlite_accel_history_is_refused_unwritten() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("old.db").display()))
        .await
        .expect("open");
    accel_history_is_refused_unwritten(&db).await;
}

#[tokio::test]
async fn postgres_accel_history_is_refused_unwritten() {
    let db = Db::connect(&support::postgres_database().await)
        .await
        .expect("open");
    accel_history_is_refused_unwritten(&db).await;
}

#[tokio::test]
async fn mysql_accel_history_is_refused_unwritten() {
    let db = Db::connect(&support::mysql_database().await)
        .await
        .expect("open");
    accel_history_is_refused_unwritten(&db).await;
}

#[tokio::test]
async fn migrations_are_reported_and_applied_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&format!("sqlite://{}", dir.path().join("new.db").display()))
        .await
        .expect("open");
    // An empty database gets Cyborg 17's schema and accel's additions to it.
    assert_eq!(db.pending_migrations().await.expect("pending"), [101, 102]);
    assert_eq!(db.migrate().await.expect("migrate"), [101, 102]);
    assert!(db.pending_migrations().await.expect("pending").is_empty());
    assert!(db.migrate().await.expect("again").is_empty());
    let err = Db::connect("mssql://x@y/z").await.expect_err("unsupported");
    assert!(matches!(err, DbError::UnsupportedUrl(_)), "{err}");
    for scheme in ["sqlite://", "postgres://", "mysql://"] {
        assert!(err.to_string().contains(scheme), "{err}");
    }
    let err = Db::connect_within(
        "postgres://verso:secret@127.0.0.1:1/none",
        std::time::Duration::from_secs(1),
    )
    .await
    .expect_err("unreachable");
    assert!(
        err.to_string().contains("***") && !err.to_string().contains("secret"),
        "{err}"
    );
}

/// Several reports of one host at once, each adding devices the host did not have (the
/// agent's periodic report racing a `report_now`, or two conductors taking the same
/// host's reports): all succeed, and the host ends with exactly one row per device.
async fn concurrent_reports_of_one_host(db: &Db) {
    // Round one: the host has no rows yet (nothing for a row lock to hold); round two:
    // it has some, and the reports add one more device.
    let first: Vec<ReportedDevice> = vec![
        device("0000:01:00.0", "GPU", 1),
        device("0000:3b:00.0", "FPGA", 2),
        device("0000:3c:00.0", "NIC", 3),
    ];
    let mut second = first.clone();
    second.push(device("0000:5e:00.0", "SSD", 1));
    for (full, new) in [
        (
            &first,
            &["0000:01:00.0", "0000:3b:00.0", "0000:3c:00.0"][..],
        ),
        (&second, &["0000:5e:00.0"][..]),
    ] {
        let racers: Vec<_> = (0..8)
            .map(|_| {
                let (db, full) = (db.clone(), full.clone());
                tokio::spawn(async move { db.report("h1", &full).await })
            })
            .collect();
        let mut added = Vec::new();
        for r in racers {
            let outcome = r.await.expect("task").expect("every report succeeds");
            assert!(
                outcome.removed.is_empty() && outcome.lost.is_empty(),
                "{outcome:?}"
            );
            added.extend(outcome.added);
        }
        // Each new device was added by exactly one report; the others found it.
        added.sort();
        assert_eq!(added, new);
        let deployables = db
            .deployables(&ListFilter {
                host: Some("h1".into()),
                ..ListFilter::default()
            })
            .await
            .expect("deployables");
        let mut cps: Vec<&str> = deployables
            .iter()
            .map(|d| d.control_path_id.as_str())
            .collect();
        cps.sort_unstable();
        let want: Vec<&str> = full.iter().map(|d| d.control_path_id.as_str()).collect();
        assert_eq!(cps, want);
        assert_eq!(
            db.devices(&ListFilter::default())
                .await
                .expect("devices")
                .len(),
            full.len()
        );
        assert_eq!(
            db.attach_handles(Some("h1")).await.expect("handles").len(),
            full.iter().map(|d| d.handles.len()).sum::<usize>()
        );
        // And the next report finds everything as it is.
        let again = db.report("h1", full).await.expect("report");
        assert!(
            again.added.is_empty() && again.updated.is_empty(),
            "{again:?}"
        );
        assert_eq!(again.unchanged, full.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reports_of_one_host_on_postgres() {
    let db = support::postgres().await;
    concurrent_reports_of_one_host(&db).await;
    // Across two conductors (two pools) too.
    let other = Db::connect(&support::postgres_database().await)
        .await
        .expect("open");
    support::make_schema(&other).await;
    concurrent_reports_of_one_host(&other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reports_of_one_host_on_mysql() {
    let db = support::mysql().await;
    concurrent_reports_of_one_host(&db).await;
    // Across two conductors (two pools) too.
    let other = Db::connect(&support::mysql_database().await)
        .await
        .expect("open");
    support::make_schema(&other).await;
    concurrent_reports_of_one_host(&other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reports_of_one_host_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    concurrent_reports_of_one_host(&db).await;
}

/// Reports of many hosts at once, each adding, then changing, then dropping devices with
/// handles and attributes: every one succeeds, none waits on another host's rows. (On
/// MySQL a trigger that forgot a host's report digest with `DELETE ... WHERE hostname IN
/// (SELECT ...)` scanned and locked every host's digest row, and such reports deadlocked.)
async fn reports_of_many_hosts_at_once(db: &Db) {
    const HOSTS: usize = 24;
    let inventory = |round: usize| -> Vec<ReportedDevice> {
        let mut devices: Vec<ReportedDevice> = (0..3)
            .map(|i| {
                let mut d = device(&format!("0000:{:02x}:00.0", 0x10 + i), "GPU", 2 + round % 2);
                d.attributes = [("rc".to_owned(), format!("CUSTOM_GPU_{round}"))].into();
                d
            })
            .collect();
        devices.truncate(3 - round / 2);
        devices
    };
    for round in 0..3 {
        // Two reports of each host, so digests are written and forgotten as hosts race.
        let racers: Vec<_> = (0..HOSTS * 2)
            .map(|i| {
                let (db, devices) = (db.clone(), inventory(round));
                let host = format!("many-{}", i % HOSTS);
                let digest = format!("round-{round}");
                tokio::spawn(
                    async move { db.report_with_digest(&host, &devices, Some(&digest)).await },
                )
            })
            .collect();
        for r in racers {
            r.await
                .expect("task")
                .unwrap_or_else(|e| panic!("round {round}: every report succeeds: {e}"));
        }
    }
    for i in 0..HOSTS {
        let host = format!("many-{i}");
        let handles = db.attach_handles(Some(&host)).await.expect("handles");
        assert_eq!(
            handles.len(),
            2 * 2,
            "{host}: the last round's two devices of two handles"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_of_many_hosts_at_once_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    reports_of_many_hosts_at_once(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_of_many_hosts_at_once_on_postgres() {
    reports_of_many_hosts_at_once(&support::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_of_many_hosts_at_once_on_mysql() {
    reports_of_many_hosts_at_once(&support::mysql().await).await;
}

/// `sqlite::memory:` is one database however many tasks use the pool at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_sqlite_is_one_database() {
    for url in ["sqlite::memory:", "sqlite::memory:?cache=private"] {
        let db = Db::connect(url).await.expect("open in memory");
        assert_eq!(
            db.migrate().await.expect("migrate"),
            vec![101, 102],
            "{url}"
        );
        let readers: Vec<_> = (0..8)
            .map(|i| {
                let db = db.clone();
                tokio::spawn(async move {
                    db.report(&format!("h{i}"), &[device("0000:3b:00.0", "FPGA", 1)])
                        .await
                        .expect("report on the migrated schema");
                    db.devices(&ListFilter::default())
                        .await
                        .expect("devices")
                        .len()
                })
            })
            .collect();
        for r in readers {
            assert!(r.await.expect("task") >= 1);
        }
        assert_eq!(
            db.devices(&ListFilter::default())
                .await
                .expect("devices")
                .len(),
            8,
            "{url}: every task wrote to the same database"
        );
        assert!(db.pending_migrations().await.expect("pending").is_empty());
        db.close().await;
    }
}

/// `consistency_violations` is empty on a database accel's own operations left, and names
/// each broken invariant once the rows disagree.
async fn consistency(db: &Db) {
    db.report("h1", &[device("0000:3b:00.0", "FPGA", 2)])
        .await
        .expect("report");
    db.create_profile("fpga", group("FPGA"), None)
        .await
        .expect("profile");
    let arq = db.create_arq("fpga", 0, None).await.expect("arq");
    db.bind(
        &arq.uuid,
        "h1",
        "6f1b3d36-3c2e-4a8e-9d59-3f0f1f6b2a11",
        None,
    )
    .await
    .expect("bind");
    let lease = std::time::Duration::from_secs(120);
    assert_eq!(
        db.consistency_violations(lease).await.expect("check"),
        Vec::<String>::new()
    );
    // The bound request's handle freed behind its back.
    let d = db.dialect();
    sqlx::query(&format!(
        "UPDATE attach_handles SET in_use = {} WHERE in_use = {}",
        d.no(),
        d.yes()
    ))
    .execute(db.pool())
    .await
    .expect("corrupt");
    let found = db.consistency_violations(lease).await.expect("check");
    assert_eq!(
        found,
        [format!("request holding a free handle: {}", arq.uuid)],
        "{found:?}"
    );
    // Now a free handle in use without a request, and the request left without one.
    sqlx::query(&format!(
        "UPDATE {} SET attach_handle_id = NULL",
        accel_conductor::db::ARQS
    ))
    .execute(db.pool())
    .await
    .expect("corrupt");
    sqlx::query(&format!("UPDATE attach_handles SET in_use = {}", d.yes()))
        .execute(db.pool())
        .await
        .expect("corrupt");
    let found = db.consistency_violations(lease).await.expect("check");
    assert!(
        found
            .iter()
            .any(|f| f.starts_with("Bound request without a handle"))
            && found
                .iter()
                .filter(|f| f.starts_with("in-use handle no request holds"))
                .count()
                == 2,
        "{found:?}"
    );
    // A request stuck in BindStarted: past a lease of zero, not past 120 s.
    sqlx::query(&format!(
        "UPDATE {} SET state = 'BindStarted'",
        accel_conductor::db::ARQS
    ))
    .execute(db.pool())
    .await
    .expect("corrupt");
    let stuck = |found: Vec<String>| {
        found
            .iter()
            .any(|f| f.starts_with("request stuck in a transient state"))
    };
    assert!(!stuck(
        db.consistency_violations(lease).await.expect("check")
    ));
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(stuck(
        db.consistency_violations(std::time::Duration::ZERO)
            .await
            .expect("check")
    ));
}

#[tokio::test]
async fn sqlite_consistency() {
    let (db, _dir) = support::sqlite().await;
    consistency(&db).await;
}

#[tokio::test]
async fn postgres_consistency() {
    consistency(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_consistency() {
    consistency(&support::mysql().await).await;
}

fn with_attributes(mut d: ReportedDevice, pairs: &[(&str, &str)]) -> ReportedDevice {
    d.attributes = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    d
}

fn keys(rows: &[accel_conductor::db::AttributeRow]) -> Vec<(String, String)> {
    let mut k: Vec<_> = rows
        .iter()
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    k.sort();
    k
}

/// Reported attributes follow the reports; attributes created through the API that no
/// report names stay; a reported key an operator deleted comes back with the next
/// report (the delete forgot the host's digest); a vanished device takes its attributes.
async fn attributes_follow_reports(db: &Db) {
    let fpga = |pairs: &[(&str, &str)]| with_attributes(device("0000:3b:00.0", "FPGA", 1), pairs);
    db.report_with_digest(
        "h1",
        &[fpga(&[("rc", "FPGA"), ("trait0", "CUSTOM_FPGA_XILINX")])],
        Some("d1"),
    )
    .await
    .expect("report");
    let dep = db
        .deployables(&ListFilter::default())
        .await
        .expect("deployables")
        .remove(0);
    let all = db
        .attributes(Some(dep.id), None, &ListFilter::default())
        .await
        .expect("attributes");
    assert_eq!(
        keys(&all),
        [
            ("rc".to_owned(), "FPGA".to_owned()),
            ("trait0".to_owned(), "CUSTOM_FPGA_XILINX".to_owned())
        ]
    );
    // The deployable shows them.
    let shown = db.deployable(&dep.uuid).await.expect("deployable");
    assert_eq!(shown.attributes.get("rc").map(String::as_str), Some("FPGA"));
    assert!(!shown.created_at.is_empty());

    // An operator's key, and a duplicate of it refused.
    let own = db
        .create_attribute(dep.id, "owner", "team-a")
        .await
        .expect("create");
    assert!(matches!(
        db.create_attribute(dep.id, "owner", "team-b").await,
        Err(DbError::Duplicate { .. })
    ));
    assert!(matches!(
        db.create_attribute(dep.id + 1000, "owner", "x").await,
        Err(DbError::NotFound {
            kind: "deployable",
            ..
        })
    ));
    assert_eq!(db.attribute(&own.uuid).await.expect("one"), own);
    // Creating forgot the digest: the next report is diffed again.
    assert_eq!(db.report_digest("h1").await.expect("digest"), None);

    // The next report drops trait0, changes rc and keeps the operator's key.
    let out = db
        .report_with_digest(
            "h1",
            &[fpga(&[("rc", "PGPU"), ("trait1", "CUSTOM_X")])],
            Some("d2"),
        )
        .await
        .expect("report");
    assert_eq!(out.updated, ["0000:3b:00.0"]);
    let all = db
        .attributes(None, None, &ListFilter::default())
        .await
        .expect("attributes");
    assert_eq!(
        keys(&all),
        [
            ("owner".to_owned(), "team-a".to_owned()),
            ("rc".to_owned(), "PGPU".to_owned()),
            ("trait1".to_owned(), "CUSTOM_X".to_owned())
        ]
    );
    // The same report again changes nothing.
    let again = db
        .report("h1", &[fpga(&[("rc", "PGPU"), ("trait1", "CUSTOM_X")])])
        .await
        .expect("report");
    assert_eq!((again.updated.len(), again.unchanged), (0, 1));

    // A reported key deleted by an operator comes back with the next report.
    let rc = db
        .attributes(None, Some("rc"), &ListFilter::default())
        .await
        .expect("by key")
        .remove(0);
    db.delete_attribute(&rc.uuid).await.expect("delete");
    assert!(matches!(
        db.delete_attribute(&rc.uuid).await,
        Err(DbError::NotFound {
            kind: "attribute",
            ..
        })
    ));
    assert!(matches!(
        db.attribute(&rc.uuid).await,
        Err(DbError::NotFound { .. })
    ));
    let back = db
        .report("h1", &[fpga(&[("rc", "PGPU"), ("trait1", "CUSTOM_X")])])
        .await
        .expect("report");
    assert_eq!(back.updated, ["0000:3b:00.0"]);
    assert_eq!(
        db.attributes(None, Some("rc"), &ListFilter::default())
            .await
            .expect("by key")
            .len(),
        1
    );

    // Paging by marker.
    let first = db
        .attributes(
            None,
            None,
            &ListFilter {
                limit: Some(2),
                ..ListFilter::default()
            },
        )
        .await
        .expect("page 1");
    let rest = db
        .attributes(
            None,
            None,
            &ListFilter {
                marker: Some(first[1].uuid.clone()),
                ..ListFilter::default()
            },
        )
        .await
        .expect("page 2");
    assert_eq!((first.len(), rest.len()), (2, 1));

    // A driver that names its deployable (a Cyborg agent's) renames it, and its board
    // details are kept; a report without a name gives it accel's name back.
    let named = ReportedDevice {
        deployable_name: Some("h1_FakeDevice".into()),
        vendor_board_info: Some("fake_vendor_info".into()),
        ..fpga(&[("rc", "PGPU"), ("trait1", "CUSTOM_X")])
    };
    let out = db.report("h1", &[named]).await.expect("report");
    assert_eq!(out.updated, ["0000:3b:00.0"]);
    let renamed = db.deployable(&dep.uuid).await.expect("deployable");
    assert_eq!(renamed.name, "h1_FakeDevice");
    assert_eq!(renamed.rp_uuid, rp_uuid("h1_FakeDevice"));
    let devices = db.devices(&ListFilter::default()).await.expect("devices");
    assert_eq!(
        devices[0].vendor_board_info.as_deref(),
        Some("fake_vendor_info")
    );
    db.report("h1", &[fpga(&[("rc", "PGPU"), ("trait1", "CUSTOM_X")])])
        .await
        .expect("report");
    assert_eq!(
        db.deployable(&dep.uuid).await.expect("deployable").name,
        "h1_0000:3b:00.0"
    );

    // The device vanishes: its attributes go with it.
    db.report("h1", &[]).await.expect("empty report");
    assert!(db
        .attributes(None, None, &ListFilter::default())
        .await
        .expect("attributes")
        .is_empty());
}

#[tokio::test]
async fn sqlite_attributes_follow_reports() {
    let (db, _dir) = support::sqlite().await;
    attributes_follow_reports(&db).await;
}

#[tokio::test]
async fn postgres_attributes_follow_reports() {
    attributes_follow_reports(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_attributes_follow_reports() {
    attributes_follow_reports(&support::mysql().await).await;
}

/// Cyborg's control path rows: one per device, written with the device, with `cpid_info`
/// in the text Cyborg's drivers write (`pci_str_to_json`: keys sorted, Python's
/// separators); every handle of the device points at it, new ones included; it goes
/// with its device. A device whose control path is not a PCI address is refused (Cyborg
/// has only `PCI`, and its `attach_handles.cpid_id` is NOT NULL).
async fn control_paths_are_cyborgs(db: &Db) {
    let cyborg_text = |domain: &str, bus: &str, device: &str, function: &str| {
        format!(
            "{{\"bus\": \"{bus}\", \"device\": \"{device}\", \"domain\": \"{domain}\", \"function\": \"{function}\"}}"
        )
    };
    // A report with a device whose control path is no PCI address is refused whole.
    let refused = db.report("h1", &[device("slot-7", "GPU", 1)]).await;
    assert!(
        matches!(&refused, Err(DbError::Invalid { why, .. }) if why.contains("slot-7")),
        "{refused:?}"
    );
    assert!(db
        .devices(&ListFilter::default())
        .await
        .expect("devices")
        .is_empty());
    let first = vec![device("0000:3b:00.0", "FPGA", 2), nic(&[1, 2])];
    db.report("h1", &first).await.expect("report");
    let devices = db.devices(&ListFilter::default()).await.expect("devices");
    let deployables = db
        .deployables(&ListFilter::default())
        .await
        .expect("deployables");
    let device_of = |cp: &str| {
        deployables
            .iter()
            .find(|d| d.control_path_id == cp)
            .map(|d| d.device_id)
            .expect("device")
    };
    let (fpga, card) = (device_of("0000:3b:00.0"), device_of("0000:5e:00.0"));
    assert_eq!(devices.len(), 2);
    let paths = db.control_paths(Some("h1")).await.expect("control paths");
    let info: BTreeMap<i64, (&str, &str)> = paths
        .iter()
        .map(|c| (c.device_id, (c.cpid_type.as_str(), c.cpid_info.as_str())))
        .collect();
    assert_eq!(
        info,
        BTreeMap::from([
            (fpga, ("PCI", cyborg_text("0000", "3b", "00", "0").as_str())),
            (card, ("PCI", cyborg_text("0000", "5e", "00", "0").as_str())),
        ])
    );
    for c in &paths {
        uuid::Uuid::parse_str(&c.uuid).expect("a UUID");
    }
    let path_of = |device: i64| paths.iter().find(|c| c.device_id == device).map(|c| c.id);
    let dep_device: BTreeMap<i64, i64> = deployables.iter().map(|d| (d.id, d.device_id)).collect();
    let check_handles = |handles: &[accel_conductor::db::AttachHandleRow]| {
        for h in handles {
            assert_eq!(
                h.cpid_id,
                path_of(dep_device[&h.deployable_id]),
                "handle {} of deployable {}",
                h.uuid,
                h.deployable_id
            );
        }
    };
    let handles = db.attach_handles(Some("h1")).await.expect("handles");
    assert_eq!(handles.len(), 4);
    check_handles(&handles);
    assert!(handles.iter().all(|h| h.cpid_id.is_some()), "{handles:?}");

    // The NIC gains a virtual function and the FPGA goes: the new VF's handle points at
    // the NIC's control path, which keeps its UUID; the FPGA's goes with it.
    let before = paths.clone();
    db.report("h1", &[nic(&[1, 2, 3])]).await.expect("report");
    let after = db.control_paths(Some("h1")).await.expect("control paths");
    assert_eq!(
        after,
        before
            .into_iter()
            .filter(|c| c.device_id != fpga)
            .collect::<Vec<_>>()
    );
    let deployables = db
        .deployables(&ListFilter::default())
        .await
        .expect("deployables");
    let dep_device: BTreeMap<i64, i64> = deployables.iter().map(|d| (d.id, d.device_id)).collect();
    let handles = db.attach_handles(Some("h1")).await.expect("handles");
    assert_eq!(handles.len(), 3);
    for h in &handles {
        let device = dep_device[&h.deployable_id];
        assert_eq!(h.cpid_id, (device == card).then(|| after[0].id));
    }
    db.report("h1", &[]).await.expect("report");
    assert!(db.control_paths(None).await.expect("paths").is_empty());
}

#[tokio::test]
async fn sqlite_control_paths_are_cyborgs() {
    let (db, _dir) = support::sqlite().await;
    control_paths_are_cyborgs(&db).await;
}

#[tokio::test]
async fn postgres_control_paths_are_cyborgs() {
    control_paths_are_cyborgs(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_control_paths_are_cyborgs() {
    control_paths_are_cyborgs(&support::mysql().await).await;
}

/// A profile's stored `profile_json` (Cyborg's column), parsed.
async fn stored_profile_json(db: &Db, name: &str) -> serde_json::Value {
    // MySQL's TEXT reaches the Any driver as bytes; a VARCHAR cast reads as text.
    let column = match db.backend() {
        Backend::Mysql => "CAST(profile_json AS CHAR(4096))",
        Backend::Sqlite | Backend::Postgres => "profile_json",
    };
    let text: String = sqlx::query_scalar(&db.backend().sql(&format!(
        "SELECT {column} FROM device_profiles WHERE name = $1"
    )))
    .bind(name)
    .fetch_one(db.pool())
    .await
    .expect("profile_json");
    serde_json::from_str(&text).expect("JSON")
}

/// Device profiles in Cyborg's form: accel's writes get Cyborg's `profile_json`
/// (`{"groups": [...]}`), accel reads a Cyborg writer's insert, and a row without
/// groups is refused.
async fn profiles_have_cyborgs_form(db: &Db) {
    let groups = vec![
        BTreeMap::from([
            ("resources:FPGA".to_owned(), "1".to_owned()),
            ("trait:CUSTOM_FPGA_XILINX".to_owned(), "required".to_owned()),
        ]),
        BTreeMap::from([("resources:PGPU".to_owned(), "2".to_owned())]),
    ];
    db.create_profile("two", groups.clone(), Some("two groups".to_owned()))
        .await
        .expect("profile");
    assert_eq!(
        stored_profile_json(db, "two").await,
        serde_json::json!({ "groups": groups })
    );
    // As Cyborg 17's `DeviceProfile.create` writes one (`jsonutils.dumps`), with a
    // time in the schema's form.
    let d = db.dialect();
    sqlx::query(&db.backend().sql(&format!(
        "INSERT INTO device_profiles (uuid, name, profile_json, description, created_at) \
         VALUES ($1, $2, $3, $4, $5{})",
        d.ts()
    )))
    .bind(uuid::Uuid::new_v4().to_string())
    .bind("from-cyborg")
    .bind(r#"{"groups": [{"resources:FPGA": "1", "trait:CUSTOM_FPGA_INTEL": "required"}]}"#)
    .bind("written by Cyborg")
    .bind(d.now())
    .execute(db.pool())
    .await
    .expect("Cyborg's insert");
    let cyborgs = db.profile("from-cyborg").await.expect("read by accel");
    assert_eq!(
        cyborgs.groups,
        [BTreeMap::from([
            ("resources:FPGA".to_owned(), "1".to_owned()),
            ("trait:CUSTOM_FPGA_INTEL".to_owned(), "required".to_owned()),
        ])]
    );
    let neither = sqlx::query(&db.backend().sql(&format!(
        "INSERT INTO device_profiles (uuid, name, description, created_at) VALUES ($1, $2, $3, $4{})",
        d.ts()
    )))
    .bind(uuid::Uuid::new_v4().to_string())
    .bind("empty")
    .bind("no groups in either form")
    .bind(d.now())
    .execute(db.pool())
    .await;
    assert!(neither.is_err(), "a profile without groups was stored");
    assert!(matches!(
        db.profile("empty").await,
        Err(DbError::NotFound { .. })
    ));
}

#[tokio::test]
async fn sqlite_profiles_have_cyborgs_form() {
    let (db, _dir) = support::sqlite().await;
    profiles_have_cyborgs_form(&db).await;
}

#[tokio::test]
async fn postgres_profiles_have_cyborgs_form() {
    profiles_have_cyborgs_form(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_profiles_have_cyborgs_form() {
    profiles_have_cyborgs_form(&support::mysql().await).await;
}
