//! Leases (migration 7) on SQLite and PostgreSQL: one holder at a time, renewed by its
//! holder, free again when released or expired, by the database's clock.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::Db;
use std::time::{Duration, Instant};

const MINUTE: Duration = Duration::from_secs(60);

async fn one_holder_at_a_time(db: Db) {
    assert_eq!(db.lease_holder("task").await.expect("read"), None);
    assert!(db.take_lease("task", "a", MINUTE).await.expect("take"));
    assert!(!db.take_lease("task", "b", MINUTE).await.expect("refused"));
    assert!(db.take_lease("task", "a", MINUTE).await.expect("renew"));
    assert_eq!(
        db.lease_holder("task").await.expect("read").as_deref(),
        Some("a")
    );
    // Another lease is another name.
    assert!(db.take_lease("other", "b", MINUTE).await.expect("take"));

    // Released by a: b takes it at once; a stranger's release changes nothing.
    db.release_lease("task", "c").await.expect("release");
    assert!(!db.take_lease("task", "b", MINUTE).await.expect("still a's"));
    db.release_lease("task", "a").await.expect("release");
    assert!(db.take_lease("task", "b", MINUTE).await.expect("free"));

    // Expired: b renewed for no time, so a takes it as soon as the database's clock
    // has moved past it.
    assert!(db
        .take_lease("task", "b", Duration::ZERO)
        .await
        .expect("renew"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !db.take_lease("task", "a", MINUTE).await.expect("take") {
        assert!(Instant::now() < deadline, "an expired lease was never free");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        db.lease_holder("task").await.expect("read").as_deref(),
        Some("a")
    );
}

#[tokio::test]
async fn leases_on_sqlite() {
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    one_holder_at_a_time(db).await;
}

#[tokio::test]
async fn leases_on_postgres() {
    one_holder_at_a_time(accel_conductor::testing::postgres().await).await;
}

#[tokio::test]
async fn leases_on_mysql() {
    one_holder_at_a_time(accel_conductor::testing::mysql().await).await;
}

/// Four takers of one free lease at once, twenty times: exactly one wins each time.
async fn takers_at_once_never_both_win(db: Db) {
    for round in 0..20 {
        let name = format!("race-{round}");
        let takers = (0..4).map(|i| {
            let db = db.clone();
            let name = name.clone();
            tokio::spawn(async move { db.take_lease(&name, &format!("t{i}"), MINUTE).await })
        });
        let mut won = 0;
        for t in takers {
            if t.await.expect("task").expect("take") {
                won += 1;
            }
        }
        assert_eq!(won, 1, "round {round}");
    }
}

#[tokio::test]
async fn two_takers_at_once_never_both_win() {
    takers_at_once_never_both_win(accel_conductor::testing::postgres().await).await;
}

#[tokio::test]
async fn two_takers_at_once_never_both_win_on_mysql() {
    takers_at_once_never_both_win(accel_conductor::testing::mysql().await).await;
}
