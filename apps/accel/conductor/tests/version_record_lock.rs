//! The version record of a database that has none is made under the version-record lock
//! (`Db::lock_version_record`), which `accel db import-cyborg` holds while it writes
//! Cyborg's rows: a conductor starting meanwhile waits, and then starts at release N
//! because the import's rows are there, instead of deciding on the empty database under
//! them and opening a Cyborg deployment at the newest release (its Cyborg 17 agents
//! would be refused as older). On SQLite, PostgreSQL and MariaDB, each with two handles
//! as two processes would have.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;
use accel_conductor::{Db, DbVersionStore};
use accel_objects::AccelVersion;
use std::time::Duration;
use verso_upgrade::store::VersionStore;
use verso_upgrade::ComponentVersion;

/// `importing` holds the lock and writes a Cyborg device profile; `starting` makes the
/// record meanwhile.
async fn a_start_waits_for_the_import(importing: Db, starting: Db) {
    let mut tx = importing.pool().begin().await.expect("begin");
    importing
        .lock_version_record(&mut tx)
        .await
        .expect("the lock");
    let ts = importing.dialect().ts();
    sqlx::query(&importing.backend().sql(&format!(
        "INSERT INTO device_profiles (uuid, name, profile_json, created_at) \
         VALUES ($1, $2, $3, $4{ts})"
    )))
    .bind(uuid::Uuid::new_v4().to_string())
    .bind("imported")
    .bind(r#"{"groups": [{"resources:FPGA": "1"}]}"#)
    .bind("2026-12-07 10:00:00")
    .execute(&mut *tx)
    .await
    .expect("the import's row");
    let opening =
        tokio::spawn(async move { DbVersionStore::creating(starting, None).load().await });
    // Time for a start that did not wait to decide on the empty database.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !opening.is_finished(),
        "the record was made while the import held the lock"
    );
    tx.commit().await.expect("the import commits");
    let record = opening
        .await
        .expect("the start's task")
        .expect("the record read")
        .expect("and made");
    assert_eq!(
        record.apparent,
        AccelVersion::Initial.number(),
        "a Cyborg deployment's record starts at release N"
    );
    // Made once: the next load reads it.
    let again = DbVersionStore::creating(importing, None)
        .load()
        .await
        .expect("read")
        .expect("there");
    assert_eq!(again, record);
}

/// Without Cyborg's rows (and no import) a fresh record starts at the newest release.
async fn an_empty_database_starts_at_the_newest(db: Db) {
    let record = DbVersionStore::creating(db, None)
        .load()
        .await
        .expect("read")
        .expect("made");
    assert_eq!(record.apparent, AccelVersion::software().number());
}

async fn two_handles(url: &str) -> (Db, Db) {
    let first = Db::connect(url).await.expect("open");
    first.migrate().await.expect("migrate");
    let second = Db::connect(url).await.expect("open again");
    (first, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = two_handles(&support::sqlite_url(&dir)).await;
    a_start_waits_for_the_import(a, b).await;
    let (empty, _dir) = support::sqlite().await;
    an_empty_database_starts_at_the_newest(empty).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql() {
    let (a, b) = two_handles(&support::postgres_database().await).await;
    a_start_waits_for_the_import(a, b).await;
    an_empty_database_starts_at_the_newest(support::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb() {
    let (a, b) = two_handles(&support::mysql_database().await).await;
    a_start_waits_for_the_import(a, b).await;
    an_empty_database_starts_at_the_newest(support::mysql().await).await;
}
