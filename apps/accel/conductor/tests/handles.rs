//! Attach handles for the driver features, on SQLite and PostgreSQL: managed-mode
//! metadata by compare-and-swap, NVMe cleanup through `cleaning`, exactly-once results.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;

use accel_conductor::db::{Release, ReportedDevice};
use accel_conductor::handles::CleanupResult;
use accel_conductor::{ArqState, Db, DbError};
use std::collections::BTreeMap;

fn ssd(cp: &str) -> ReportedDevice {
    ReportedDevice {
        control_path_id: cp.to_owned(),
        device_type: "SSD".to_owned(),
        vendor: "144d".to_owned(),
        model: "a80a".to_owned(),
        std_board_info: None,
        driver_name: Some("nvme".to_owned()),
        handles: vec![("PCI".to_owned(), format!("{{\"address\": \"{cp}\"}}"))],
        ..Default::default()
    }
}

async fn seed(db: &Db) {
    db.report("h1", &[ssd("0000:5e:00.0")])
        .await
        .expect("report");
    let groups = vec![[("resources:SSD".to_owned(), "1".to_owned())]
        .into_iter()
        .collect::<BTreeMap<_, _>>()];
    db.create_profile("ssd", groups, None)
        .await
        .expect("profile");
}

async fn managed_metadata(db: &Db) {
    seed(db).await;
    let handles = db.host_handles("h1").await.expect("handles");
    assert_eq!(handles.len(), 1);
    let h = &handles[0];
    assert_eq!(
        (
            h.in_use,
            h.cleanup_state.map(|s| s.as_str()),
            h.device_type.as_str()
        ),
        (false, None, "SSD")
    );
    let info = r#"{"address": "0000:5e:00.0", "managed": "no"}"#;
    let updated = db
        .update_handle_info(&h.uuid, h.revision, info)
        .await
        .expect("cas");
    assert_eq!(
        (
            updated.uuid.as_str(),
            updated.revision,
            updated.attach_info.as_str()
        ),
        (h.uuid.as_str(), h.revision + 1, info)
    );
    // The same update retried (its reply was lost) answers the same.
    assert_eq!(
        db.update_handle_info(&h.uuid, h.revision, info)
            .await
            .expect("retry"),
        updated
    );
    // A writer that read the old revision loses, typed.
    let err = db
        .update_handle_info(&h.uuid, h.revision, r#"{"managed": "yes"}"#)
        .await
        .expect_err("stale");
    assert!(
        matches!(err, DbError::StaleHandle { expected, found, .. } if found == expected + 1),
        "{err}"
    );
    // Two writers racing from the same revision: exactly one wins, the row is one of theirs.
    let rev = updated.revision;
    let (a, b) = tokio::join!(
        db.update_handle_info(&h.uuid, rev, r#"{"w": "a"}"#),
        db.update_handle_info(&h.uuid, rev, r#"{"w": "b"}"#)
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|w| **w).count(),
        1,
        "{a:?} {b:?}"
    );
    let now = db.host_handle(&h.uuid).await.expect("handle");
    assert!(now.attach_info == r#"{"w": "a"}"# || now.attach_info == r#"{"w": "b"}"#);
    // An allocated handle cannot change, and the error names the instance.
    let arq = db.create_arq("ssd", 0, None).await.expect("arq");
    db.bind(&arq.uuid, "h1", "inst-7", None)
        .await
        .expect("bind");
    let cur = db.host_handle(&h.uuid).await.expect("handle");
    let err = db
        .update_handle_info(&h.uuid, cur.revision, "{}")
        .await
        .expect_err("in use");
    assert!(
        matches!(&err, DbError::HandleInUse { instance, .. } if instance == "inst-7"),
        "{err}"
    );
}

/// An erase tool's whole output as a failure reason: its first
/// [`MAX_CLEANUP_REASON`](accel_conductor::handles::MAX_CLEANUP_REASON) bytes are kept
/// (a multi-byte character is not cut), and the agent's retry of that same result still
/// answers as landed.
async fn long_failure_reasons_keep_their_start(db: &Db) {
    use accel_conductor::handles::MAX_CLEANUP_REASON;
    seed(db).await;
    let arq = db.create_arq("ssd", 0, None).await.expect("arq");
    db.bind(&arq.uuid, "h1", "inst-1", None)
        .await
        .expect("bind");
    db.unbind_with(&arq.uuid, Release::CleanSsd)
        .await
        .expect("unbind");
    let h = db.cleaning_handles("h1").await.expect("cleaning").remove(0);
    // "é" is two bytes: the cut falls inside the last one and keeps none of it.
    let why = format!(
        "{}é{}",
        "x".repeat(MAX_CLEANUP_REASON - 1),
        "tail ".repeat(2000)
    );
    let failed = CleanupResult::Failed(why.clone());
    let stored = db
        .finish_cleanup(&h.uuid, h.revision, &failed)
        .await
        .expect("failed");
    let kept = stored.cleanup_reason.clone().expect("a reason");
    assert_eq!(kept, "x".repeat(MAX_CLEANUP_REASON - 1));
    assert!(why.starts_with(&kept));
    assert_eq!(
        db.finish_cleanup(&h.uuid, h.revision, &failed)
            .await
            .expect("the retry answers as landed"),
        stored
    );
}

async fn nvme_cleanup(db: &Db) {
    seed(db).await;
    let arq = db.create_arq("ssd", 0, None).await.expect("arq");
    db.bind(&arq.uuid, "h1", "inst-1", None)
        .await
        .expect("bind");
    // Released with cleaning: the SSD waits in `cleaning` and cannot be allocated.
    assert_eq!(
        db.unbind_with(&arq.uuid, Release::CleanSsd)
            .await
            .expect("unbind")
            .state,
        ArqState::Unbound
    );
    let cleaning = db.cleaning_handles("h1").await.expect("cleaning");
    assert_eq!(cleaning.len(), 1);
    let h = cleaning[0].clone();
    let other = db.create_arq("ssd", 0, None).await.expect("arq");
    assert!(matches!(
        db.bind(&other.uuid, "h1", "inst-2", None).await,
        Err(DbError::NoFreeHandle { .. })
    ));
    db.unbind(&other.uuid).await.expect("reset the failed bind");
    // The agent's success lands once; its retry answers the same.
    let done = db
        .finish_cleanup(&h.uuid, h.revision, &CleanupResult::Clean)
        .await
        .expect("clean");
    assert_eq!(done.cleanup_state, None);
    assert_eq!(
        db.finish_cleanup(&h.uuid, h.revision, &CleanupResult::Clean)
            .await
            .expect("retry"),
        done
    );
    // A stale agent's late failure for the same cleanup cannot undo it.
    let err = db
        .finish_cleanup(
            &h.uuid,
            h.revision,
            &CleanupResult::Failed("timeout".into()),
        )
        .await
        .expect_err("stale");
    assert!(matches!(err, DbError::NotCleaning { .. }), "{err}");
    // Available again: the other request binds it.
    assert_eq!(
        db.bind(&other.uuid, "h1", "inst-2", None)
            .await
            .expect("bind")
            .state,
        ArqState::Bound
    );
    // A failed cleanup keeps the device out of the pool for good.
    db.delete_arq_with(&other.uuid, Release::CleanSsd)
        .await
        .expect("delete");
    let h = db.cleaning_handles("h1").await.expect("cleaning").remove(0);
    let failed = db
        .finish_cleanup(
            &h.uuid,
            h.revision,
            &CleanupResult::Failed("nvme format exited 1".into()),
        )
        .await
        .expect("failed");
    assert_eq!(
        (
            failed.cleanup_state.map(|s| s.as_str()),
            failed.cleanup_reason.as_deref()
        ),
        (Some("error"), Some("nvme format exited 1"))
    );
    let third = db.create_arq("ssd", 0, None).await.expect("arq");
    assert!(matches!(
        db.bind(&third.uuid, "h1", "inst-3", None).await,
        Err(DbError::NoFreeHandle { .. })
    ));
    // An operator who puts the device back by hand may leave the failure's reason; the
    // next release still waits for a new claim (no reason: `pending_cleaning`).
    sqlx::query(
        &db.backend()
            .sql("UPDATE attach_handles SET cleanup_state = NULL WHERE uuid = $1"),
    )
    .bind(&h.uuid)
    .execute(db.pool())
    .await
    .expect("the operator's repair");
    db.unbind(&third.uuid).await.expect("reset the failed bind");
    db.bind(&third.uuid, "h1", "inst-3", None)
        .await
        .expect("bind after the repair");
    db.unbind_with(&third.uuid, Release::CleanSsd)
        .await
        .expect("release");
    let again = db.cleaning_handles("h1").await.expect("cleaning").remove(0);
    assert_eq!(again.cleanup_reason, None, "{again:?}");
    assert_eq!(
        accel_conductor::cyborg::device_state([&again]),
        accel_cyborg17::objects::DeviceState::PendingCleaning
    );
    // The operator's command for a failed cleanup: the device is allocatable again, once.
    let device = again.device_uuid.clone();
    db.finish_cleanup(
        &again.uuid,
        again.revision,
        &CleanupResult::Failed("nvme format exited 1".into()),
    )
    .await
    .expect("failed again");
    let cleared = db.clear_failed_cleanup(&device).await.expect("cleared");
    assert_eq!(cleared.len(), 1);
    assert_eq!(
        (
            cleared[0].cleanup_state,
            cleared[0].cleanup_reason.as_deref()
        ),
        (None, None)
    );
    assert!(cleared[0].revision > again.revision);
    assert!(db
        .clear_failed_cleanup(&device)
        .await
        .expect("nothing left")
        .is_empty());
    assert!(matches!(
        db.clear_failed_cleanup("00000000-0000-4000-8000-000000000000")
            .await,
        Err(DbError::NotFound { .. })
    ));
    db.bind(&third.uuid, "h1", "inst-3", None)
        .await
        .expect("allocatable after the operator cleared it");
    // Without cleaning (release N's behaviour) an SSD goes straight back.
    db.report("h2", &[ssd("0000:5f:00.0")])
        .await
        .expect("report");
    let fourth = db.create_arq("ssd", 0, None).await.expect("arq");
    db.bind(&fourth.uuid, "h2", "inst-4", None)
        .await
        .expect("bind");
    db.unbind(&fourth.uuid).await.expect("unbind");
    assert!(db
        .cleaning_handles("h2")
        .await
        .expect("cleaning")
        .is_empty());
}

#[tokio::test]
async fn sqlite_managed_metadata() {
    let (db, _dir) = support::sqlite().await;
    managed_metadata(&db).await;
}

#[tokio::test]
async fn postgres_managed_metadata() {
    managed_metadata(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_managed_metadata() {
    managed_metadata(&support::mysql().await).await;
}

#[tokio::test]
async fn sqlite_nvme_cleanup() {
    let (db, _dir) = support::sqlite().await;
    nvme_cleanup(&db).await;
}

#[tokio::test]
async fn postgres_nvme_cleanup() {
    nvme_cleanup(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_nvme_cleanup() {
    nvme_cleanup(&support::mysql().await).await;
}

#[tokio::test]
async fn sqlite_long_failure_reasons_keep_their_start() {
    let (db, _dir) = support::sqlite().await;
    long_failure_reasons_keep_their_start(&db).await;
}

#[tokio::test]
async fn postgres_long_failure_reasons_keep_their_start() {
    long_failure_reasons_keep_their_start(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_long_failure_reasons_keep_their_start() {
    long_failure_reasons_keep_their_start(&support::mysql().await).await;
}
