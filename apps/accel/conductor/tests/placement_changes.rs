//! Placement change marks (migration 8) on SQLite and PostgreSQL: every write of a
//! column a host's providers are made of marks the host, by any writer; a host's marks
//! are deleted only as read, so a mark made after the read survives; on PostgreSQL two
//! writers of one host never wait on each other for a mark.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::ReportedDevice;
use accel_conductor::testing::reported_device;
use accel_conductor::Db;
use std::collections::BTreeSet;
use std::time::Duration;

fn fpga(cp: &str) -> ReportedDevice {
    reported_device(cp, "FPGA", "10ee", "5020", 1)
}

/// The hosts marked now.
async fn marked(db: &Db) -> BTreeSet<String> {
    db.placement_changes(1000)
        .await
        .expect("read marks")
        .into_keys()
        .collect()
}

/// Reads every mark and deletes them as read.
async fn forget_all(db: &Db) {
    for (host, marks) in db.placement_changes(1000).await.expect("read marks") {
        db.forget_placement_changes(&host, &marks)
            .await
            .expect("forget");
    }
}

fn hosts(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|h| (*h).to_owned()).collect()
}

async fn writes_mark_their_host(db: Db) {
    assert!(marked(&db).await.is_empty());
    db.report("h1", &[fpga("0000:3b:00.0"), fpga("0000:3c:00.0")])
        .await
        .expect("report");
    db.report("h2", &[fpga("0000:3b:00.0")])
        .await
        .expect("report");
    assert_eq!(marked(&db).await, hosts(&["h1", "h2"]));
    forget_all(&db).await;
    assert!(marked(&db).await.is_empty(), "forgotten as read");

    // The same report again writes no column a provider is made of: nothing marked.
    db.report("h2", &[fpga("0000:3b:00.0")])
        .await
        .expect("report");
    assert!(marked(&db).await.is_empty(), "an unchanged report marked");

    // A device disabled (an operator, through the API).
    let h2_device = db
        .devices(&Default::default())
        .await
        .expect("devices")
        .into_iter()
        .find(|d| d.hostname == "h2")
        .expect("h2's device");
    db.set_device_maintaining(&h2_device.uuid, true)
        .await
        .expect("disable");
    assert_eq!(marked(&db).await, hosts(&["h2"]));
    forget_all(&db).await;

    // An attribute created (the attributes API): its deployable's host.
    let h1_deployable = db
        .deployables(&Default::default())
        .await
        .expect("deployables")
        .into_iter()
        .find(|d| d.hostname == "h1")
        .expect("h1's deployable");
    db.create_attribute(h1_deployable.id, "trait9", "CUSTOM_NINE")
        .await
        .expect("attribute");
    assert_eq!(marked(&db).await, hosts(&["h1"]));
    forget_all(&db).await;

    // A device gone from its host's report: deleted, and the host marked.
    db.report("h1", &[fpga("0000:3b:00.0")])
        .await
        .expect("report");
    assert_eq!(marked(&db).await, hosts(&["h1"]));

    // Read, then marked again before the marks read are deleted: the host stays marked.
    let read = db.placement_changes(1000).await.expect("read");
    db.set_device_maintaining(&h2_device.uuid, false)
        .await
        .expect("enable");
    db.report("h1", &[]).await.expect("report");
    for (host, marks) in &read {
        db.forget_placement_changes(host, marks)
            .await
            .expect("forget");
    }
    assert_eq!(marked(&db).await, hosts(&["h1", "h2"]));

    // The reconciler's own mark (a host it could not sync) is read like a trigger's.
    forget_all(&db).await;
    db.mark_placement_changed("h3").await.expect("mark");
    db.mark_placement_changed("h3").await.expect("mark again");
    assert_eq!(marked(&db).await, hosts(&["h3"]));
    forget_all(&db).await;
    assert!(marked(&db).await.is_empty());
}

#[tokio::test]
async fn sqlite_writes_mark_their_host() {
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    writes_mark_their_host(db).await;
}

#[tokio::test]
async fn postgres_writes_mark_their_host() {
    writes_mark_their_host(accel_conductor::testing::postgres().await).await;
}

#[tokio::test]
async fn mysql_writes_mark_their_host() {
    writes_mark_their_host(accel_conductor::testing::mysql().await).await;
}

/// PostgreSQL and MySQL: a transaction that marked a host and has not committed holds
/// nothing another writer of the host waits for, its mark is invisible to a reader until
/// it commits, and a reader's delete of what it read leaves it.
async fn marks_never_make_writers_wait_and_late_commits_survive(db: Db) {
    db.report("h1", &[fpga("0000:3b:00.0"), fpga("0000:3c:00.0")])
        .await
        .expect("report");
    forget_all(&db).await;
    let devices = db.devices(&Default::default()).await.expect("devices");
    let (first, second) = (&devices[0].uuid, &devices[1].uuid);

    let mut open = db.pool().begin().await.expect("begin");
    sqlx::query(
        &db.backend()
            .sql("UPDATE devices SET status = 'maintaining' WHERE uuid = $1"),
    )
    .bind(first)
    .execute(&mut *open)
    .await
    .expect("update in the open transaction");
    // Another writer of the same host, while the first has not committed.
    tokio::time::timeout(
        Duration::from_secs(5),
        db.set_device_maintaining(second, true),
    )
    .await
    .expect("a second writer of the host waited for the first's mark")
    .expect("disable");
    let read = db.placement_changes(1000).await.expect("read");
    assert_eq!(
        read.keys().cloned().collect::<BTreeSet<_>>(),
        hosts(&["h1"])
    );
    assert_eq!(
        read["h1"].len(),
        1,
        "only the committed writer's mark is seen"
    );
    open.commit().await.expect("commit");
    db.forget_placement_changes("h1", &read["h1"])
        .await
        .expect("forget");
    assert_eq!(
        marked(&db).await,
        hosts(&["h1"]),
        "the mark committed after the read was deleted unread"
    );
}

#[tokio::test]
async fn postgres_marks_never_make_writers_wait_and_late_commits_survive() {
    marks_never_make_writers_wait_and_late_commits_survive(
        accel_conductor::testing::postgres().await,
    )
    .await;
}

#[tokio::test]
async fn mysql_marks_never_make_writers_wait_and_late_commits_survive() {
    marks_never_make_writers_wait_and_late_commits_survive(accel_conductor::testing::mysql().await)
        .await;
}
