//! A bind is one transaction (issue 28, items 1 and 2): a database failure between its
//! steps leaves the request as it was, free to bind again, never stuck in
//! `BindStarted`; and a starting conductor takes only a `BindStarted` request older
//! than the lease for abandoned, never a bind that may still be running elsewhere. The
//! failure is the database's own: a trigger that aborts the device's allocation.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::ReportedDevice;
use accel_conductor::testing as support;
use accel_conductor::{ArqState, Db, DbError};
use std::collections::BTreeMap;

/// SQLite: the allocation of any handle aborts.
const SQLITE_FAULT: &[&str] = &[
    "CREATE TRIGGER inject_fault BEFORE UPDATE OF in_use ON attach_handles \
     BEGIN SELECT RAISE(ABORT, 'injected fault'); END",
];
const SQLITE_HEAL: &str = "DROP TRIGGER inject_fault";

/// PostgreSQL: the same, through a trigger function.
const POSTGRES_FAULT: &[&str] = &[
    "CREATE FUNCTION inject_fault() RETURNS trigger AS $$ \
     BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql",
    "CREATE TRIGGER inject_fault BEFORE UPDATE OF in_use ON attach_handles \
     FOR EACH ROW EXECUTE FUNCTION inject_fault()",
];
const POSTGRES_HEAL: &str = "DROP TRIGGER inject_fault ON attach_handles";

async fn exec(db: &Db, sql: &str) {
    sqlx::query(sql)
        .execute(db.pool())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A host with one free FPGA handle, a profile for it and one request; the request.
async fn one_request(db: &Db) -> String {
    let fpga = ReportedDevice {
        control_path_id: "0000:5e:00.0".into(),
        device_type: "FPGA".into(),
        vendor: "10ee".into(),
        model: "5020".into(),
        std_board_info: None,
        driver_name: None,
        handles: vec![("PCI".into(), r#"{"address": "0000:5e:00.1"}"#.into())],
        ..Default::default()
    };
    db.report("h1", &[fpga]).await.expect("report");
    let group: BTreeMap<String, String> = [("resources:FPGA".to_owned(), "1".to_owned())]
        .into_iter()
        .collect();
    db.create_profile("fpga", vec![group], None)
        .await
        .expect("profile");
    db.create_arq("fpga", 0, None).await.expect("request").uuid
}

async fn a_failed_bind_leaves_the_request_as_it_was(db: Db, fault: &[&str], heal: &str) {
    let arq = one_request(&db).await;
    for sql in fault {
        exec(&db, sql).await;
    }
    let e = db
        .bind(&arq, "h1", "8d7e0a52-3f6b-4f0e-9a1c-2b3c4d5e6f70", None)
        .await
        .expect_err("the allocation aborts");
    assert!(e.to_string().contains("injected fault"), "{e}");
    let row = db.arq(&arq).await.expect("request");
    assert_eq!(row.state, ArqState::Initial, "rolled back, not stuck");
    assert_eq!(row.hostname, None, "nothing of the bind was kept");
    assert!(db
        .attach_handles(Some("h1"))
        .await
        .expect("handles")
        .iter()
        .all(|h| !h.in_use));

    // The database is well again: the same request binds, with no restart.
    exec(&db, heal).await;
    let bound = db
        .bind(&arq, "h1", "8d7e0a52-3f6b-4f0e-9a1c-2b3c4d5e6f70", None)
        .await
        .expect("binds");
    assert_eq!(bound.state, ArqState::Bound);
}

async fn only_an_expired_bind_is_recovered(db: Db) {
    let arq = one_request(&db).await;
    // A bind in its first step on another conductor (release N's two-step bind): fresh.
    let d = db.dialect();
    let started = |at: chrono::DateTime<chrono::Utc>| {
        format!(
            "UPDATE {} SET state = 'BindStarted', updated_at = '{}'{}",
            accel_conductor::db::ARQS,
            d.time_text(at),
            d.ts()
        )
    };
    exec(&db, &started(chrono::Utc::now())).await;
    assert_eq!(
        db.recover_interrupted_binds(Db::INTERRUPTED_BIND_LEASE)
            .await
            .expect("recover"),
        0
    );
    assert_eq!(
        db.arq(&arq).await.expect("request").state,
        ArqState::BindStarted,
        "a bind that may still run is left to its conductor"
    );
    // Abandoned long ago: recovered.
    let long_ago = chrono::DateTime::parse_from_rfc3339("2000-01-01T00:00:00Z")
        .expect("a time")
        .with_timezone(&chrono::Utc);
    exec(&db, &started(long_ago)).await;
    assert_eq!(
        db.recover_interrupted_binds(Db::INTERRUPTED_BIND_LEASE)
            .await
            .expect("recover"),
        1
    );
    assert_eq!(
        db.arq(&arq).await.expect("request").state,
        ArqState::BindFailed
    );
    assert!(matches!(
        db.bind(&arq, "h1", "8d7e0a52-3f6b-4f0e-9a1c-2b3c4d5e6f70", None)
            .await,
        Err(DbError::InvalidTransition { .. })
    ));
}

#[tokio::test]
async fn sqlite_a_failed_bind_leaves_the_request_as_it_was() {
    let (db, _dir) = support::sqlite().await;
    a_failed_bind_leaves_the_request_as_it_was(db, SQLITE_FAULT, SQLITE_HEAL).await;
}

#[tokio::test]
async fn postgres_a_failed_bind_leaves_the_request_as_it_was() {
    a_failed_bind_leaves_the_request_as_it_was(
        support::postgres().await,
        POSTGRES_FAULT,
        POSTGRES_HEAL,
    )
    .await;
}

#[tokio::test]
async fn sqlite_only_an_expired_bind_is_recovered() {
    let (db, _dir) = support::sqlite().await;
    only_an_expired_bind_is_recovered(db).await;
}

#[tokio::test]
async fn postgres_only_an_expired_bind_is_recovered() {
    only_an_expired_bind_is_recovered(support::postgres().await).await;
}
