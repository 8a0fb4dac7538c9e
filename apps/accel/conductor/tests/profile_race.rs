//! A device profile deleted while a request is created from it (issue 28, item 3):
//! either the request is made and the delete refused (`ProfileInUse`), or the profile
//! is gone and the creation refused (`NotFound`); never a request whose profile no
//! longer exists. Raced many times on SQLite and on PostgreSQL.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;
use accel_conductor::{Db, DbError};
use std::collections::BTreeMap;

const RACES: usize = 60;

async fn orphans(db: &Db) -> i64 {
    let sql = "SELECT COUNT(*) FROM extended_accelerator_requests r WHERE NOT EXISTS \
               (SELECT 1 FROM device_profiles p WHERE p.id = r.device_profile_id)";
    let row: (i64,) = sqlx::query_as(sql)
        .fetch_one(db.pool())
        .await
        .expect("count");
    row.0
}

async fn no_request_outlives_its_profile(db: Db) {
    let group: BTreeMap<String, String> = [("resources:FPGA".to_owned(), "1".to_owned())]
        .into_iter()
        .collect();
    let (mut created, mut deleted) = (0, 0);
    for i in 0..RACES {
        let name = format!("race-{i}");
        db.create_profile(&name, vec![group.clone()], None)
            .await
            .expect("profile");
        let (a, b) = (db.clone(), db.clone());
        let (n1, n2) = (name.clone(), name.clone());
        let create = tokio::spawn(async move { a.create_arq(&n1, 0, None).await });
        let delete = tokio::spawn(async move { b.delete_profile(&n2).await });
        let (create, delete) = (create.await.expect("task"), delete.await.expect("task"));
        match (&create, &delete) {
            (Ok(_), Err(DbError::ProfileInUse(_))) => created += 1,
            (Err(DbError::NotFound { .. }), Ok(())) => deleted += 1,
            other => panic!("race {i}: {other:?}"),
        }
        assert_eq!(
            orphans(&db).await,
            0,
            "race {i}: a request outlived its profile"
        );
    }
    // Which won varies with scheduling; the invariant above holds either way.
    println!("{created} created first, {deleted} deleted first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_no_request_outlives_its_profile() {
    let (db, _dir) = support::sqlite().await;
    no_request_outlives_its_profile(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_no_request_outlives_its_profile() {
    no_request_outlives_its_profile(support::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_no_request_outlives_its_profile() {
    no_request_outlives_its_profile(support::mysql().await).await;
}
