//! An unchanged inventory goes by digest (conductor API 1.2, `report_unchanged`) on both
//! databases: the conductor skips the diff only while the host's rows are what its last
//! full report made them. Any other write of a compared column (another writer such as
//! release N's conductor, a report without a digest) makes it ask for the full report,
//! and an agent capped below 1.2 always sends it.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_agent::client::{Reported, Reporter};
use accel_agent::discovery::discover;
use accel_agent::report::driver_devices;
use accel_conductor::db::{Release, ReportedDevice};
use accel_conductor::service::{endpoint, reported, ReleasePolicy};
use accel_conductor::testing as support;
use accel_conductor::Db;
use accel_objects::rpc::{report_digest, ConductorApi, ReportUnchanged};
use accel_objects::DriverDeviceList;
use std::path::Path;
use std::sync::Arc;
use verso::{ObjectList, RequestContext, Version, VersionedObject};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{RpcClient, RpcServer, ServerHandle, Target};

async fn serve(db: &Db) -> (Arc<MemoryTransport>, ServerHandle) {
    let transport = Arc::new(MemoryTransport::new());
    let release: ReleasePolicy = Arc::new(|| Release::Immediate);
    let server = RpcServer::new(transport.clone(), Target::new("accel-conductor"))
        .endpoint(endpoint(
            db.clone(),
            accel_objects::registry(),
            release,
            |ctx| ctx,
        ))
        .expect("endpoint")
        .start()
        .await
        .expect("start");
    (transport, server)
}

fn host2() -> DriverDeviceList {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/sysfs/host2");
    driver_devices(&discover(&root).expect("discover"))
}

fn client(transport: &Arc<MemoryTransport>, cap: Option<Version>) -> RpcClient {
    RpcClient::for_api::<ConductorApi>(transport.clone(), "accel-conductor").with_cap(cap)
}

fn assert_full(r: &Reported, what: &str) {
    assert!(matches!(r, Reported::Full(_)), "{what}: {r:?}");
}

fn assert_unchanged(r: &Reported, n: usize, what: &str) {
    match r {
        Reported::Unchanged(s) => assert_eq!(s.unchanged, n as u64, "{what}"),
        other => panic!("{what}: expected by digest, got {other:?}"),
    }
}

async fn scenario(db: Db) {
    let (transport, server) = serve(&db).await;
    let devices = host2();
    let n = devices.len();
    assert!(n > 1, "the fixture host has several devices");
    let reporter = Reporter::new("host2", client(&transport, None));
    assert!(reporter.sends_digests());

    let first = reporter.report(&devices).await.expect("first report");
    assert_full(&first, "a first report");
    assert_eq!(first.summary().added.len(), n);
    let second = reporter.report(&devices).await.expect("second report");
    assert_unchanged(&second, n, "the same inventory again");

    // A digest the conductor did not store is not taken.
    let ctx = RequestContext::new("req-test");
    let wrong = client(&transport, None)
        .call_method(
            &ctx,
            ReportUnchanged {
                hostname: "host2".into(),
                digest: "v1:0000".into(),
            },
        )
        .await
        .expect("call");
    assert_eq!(wrong, None);
    let right = client(&transport, None)
        .call_method(
            &ctx,
            ReportUnchanged {
                hostname: "host2".into(),
                digest: report_digest(&devices),
            },
        )
        .await
        .expect("call");
    assert_eq!(right.map(|s| s.unchanged), Some(n as u64));
    // Another host's digest is its own.
    let other = client(&transport, None)
        .call_method(
            &ctx,
            ReportUnchanged {
                hostname: "host9".into(),
                digest: report_digest(&devices),
            },
        )
        .await
        .expect("call");
    assert_eq!(other, None);

    // Another writer changes a device (as release N's conductor may during the
    // downgrade window): the digest no longer vouches for the rows.
    sqlx::query("UPDATE devices SET vendor = 'ffff' WHERE hostname = 'host2'")
        .execute(db.pool())
        .await
        .expect("update");
    let after_write = reporter.report(&devices).await.expect("report");
    assert_full(&after_write, "after another writer changed a device");
    assert_eq!(
        after_write.summary().updated.len(),
        n,
        "the diff restores every device"
    );
    assert_unchanged(
        &reporter.report(&devices).await.expect("report"),
        n,
        "after the restoring report",
    );

    // An attach handle removed behind the conductor's back.
    sqlx::query(
        "DELETE FROM attach_handles WHERE id = (SELECT MIN(h.id) FROM attach_handles h \
         JOIN deployables d ON h.deployable_id = d.id WHERE d.hostname = 'host2')",
    )
    .execute(db.pool())
    .await
    .expect("delete");
    let after_delete = reporter.report(&devices).await.expect("report");
    assert_full(&after_delete, "after a handle was deleted");
    assert_eq!(after_delete.summary().updated.len(), 1);
    assert_unchanged(
        &reporter.report(&devices).await.expect("report"),
        n,
        "after the restoring report",
    );

    // A report applied without a digest (a Cyborg 17 agent's path) forgets it.
    let rows: Vec<ReportedDevice> = reported(&devices).expect("rows");
    db.report("host2", &rows)
        .await
        .expect("report without digest");
    assert_full(
        &reporter.report(&devices).await.expect("report"),
        "after a report without a digest",
    );

    // A changed inventory goes in full, and its digest is the one stored next.
    let fewer = DriverDeviceList {
        objects: devices.iter().skip(1).cloned().collect::<Vec<_>>().into(),
        ..devices.clone()
    };
    let changed = reporter.report(&fewer).await.expect("report");
    assert_full(&changed, "a changed inventory");
    assert_eq!(changed.summary().removed.len(), 1);
    assert_unchanged(
        &reporter.report(&fewer).await.expect("report"),
        n - 1,
        "the changed inventory again",
    );

    // Capped below 1.2 (conductors not all upgraded yet), the agent always sends it all.
    let capped = Reporter::new("host2", client(&transport, Some(Version::new(1, 1))));
    assert!(!capped.sends_digests());
    for _ in 0..2 {
        let r = capped.report(&fewer).await.expect("capped report");
        assert_full(&r, "capped at 1.1");
        assert_eq!(r.summary().unchanged, (n - 1) as u64);
    }
    server.stop().await;
}

/// A host whose report drops a device a request holds keeps no digest: its next
/// (identical) report is diffed, confirming the loss, and the one after the release
/// deletes the device. With the digest kept, both would be skipped and the released
/// device would stay, lost, for as long as the host's inventory did not change.
async fn held_devices_are_never_skipped(db: Db) {
    let a = support::reported_device("0000:5e:00.0", "GPU", "0x10de", "0x1db4", 1);
    let b = support::reported_device("0000:5f:00.0", "GPU", "0x10de", "0x1db4", 1);
    db.report_with_digest("h1", &[a.clone(), b.clone()], Some("d-ab"))
        .await
        .expect("first report");
    db.create_profile(
        "gpu",
        vec![[("resources:GPU".to_owned(), "1".to_owned())].into()],
        None,
    )
    .await
    .expect("profile");
    let arq = db.create_arq("gpu", 0, None).await.expect("request");
    let bound = db
        .bind(&arq.uuid, "h1", "inst-1", None)
        .await
        .expect("bind");
    let handle = bound.attach_handle_uuid.expect("bound to a handle");
    let handles = db.attach_handles(Some("h1")).await.expect("handles");
    let dep = handles
        .iter()
        .find(|h| h.uuid == handle)
        .expect("the handle")
        .deployable_id;
    let held_cp = db
        .deployables(&Default::default())
        .await
        .expect("deployables")
        .into_iter()
        .find(|d| d.id == dep)
        .map(|d| d.control_path_id);
    let held_cp = held_cp.expect("the bound device");
    let kept = if held_cp == a.control_path_id { &b } else { &a };

    let out = db
        .report_with_digest("h1", std::slice::from_ref(kept), Some("d-kept"))
        .await
        .expect("the held device dropped");
    assert_eq!(out.unconfirmed, vec![held_cp.clone()]);
    assert_eq!(db.report_digest("h1").await.expect("digest"), None);
    let out = db
        .report_with_digest("h1", std::slice::from_ref(kept), Some("d-kept"))
        .await
        .expect("again");
    assert_eq!(
        out.lost,
        vec![held_cp.clone()],
        "the loss is confirmed, not skipped"
    );
    assert_eq!(db.report_digest("h1").await.expect("digest"), None);

    db.delete_arq(&arq.uuid).await.expect("release");
    let out = db
        .report_with_digest("h1", std::slice::from_ref(kept), Some("d-kept"))
        .await
        .expect("after the release");
    assert_eq!(
        out.removed,
        vec![held_cp],
        "the released lost device is deleted"
    );
    assert_eq!(
        db.report_digest("h1").await.expect("digest"),
        Some(("d-kept".to_owned(), 1)),
        "the host's rows are its report again: the digest is kept"
    );
}

#[tokio::test]
async fn held_devices_are_never_skipped_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    held_devices_are_never_skipped(db).await;
}

#[tokio::test]
async fn held_devices_are_never_skipped_on_postgres() {
    held_devices_are_never_skipped(support::postgres().await).await;
}

#[tokio::test]
async fn held_devices_are_never_skipped_on_mysql() {
    held_devices_are_never_skipped(support::mysql().await).await;
}

#[tokio::test]
async fn unchanged_reports_go_by_digest_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    scenario(db).await;
}

#[tokio::test]
async fn unchanged_reports_go_by_digest_on_postgres() {
    scenario(support::postgres().await).await;
}

#[tokio::test]
async fn unchanged_reports_go_by_digest_on_mysql() {
    scenario(support::mysql().await).await;
}

#[test]
fn the_digest_is_of_the_inventory_not_its_order_or_metadata() {
    let devices = host2();
    let mut reversed: Vec<_> = devices.iter().cloned().collect();
    reversed.reverse();
    let reversed = DriverDeviceList {
        objects: reversed.into(),
        ..DriverDeviceList::blank()
    };
    assert_eq!(report_digest(&devices), report_digest(&reversed));
    let mut changed: Vec<_> = devices.iter().cloned().collect();
    changed[0].model = "other".to_owned().into();
    let changed = DriverDeviceList {
        objects: changed.into(),
        ..DriverDeviceList::blank()
    };
    assert_ne!(report_digest(&devices), report_digest(&changed));
}
