//! `accel db import-cyborg` from accel's own databases, keeping what only accel holds (a
//! device's inventory state and disable, a handle's failed cleanup), UUIDs kept:
//! - the way out for a database of accel's own former schema history (migrations 1-13),
//!   which `Db::migrate` refuses: read as a source and copied into an empty database of
//!   accel's schema (Cyborg 17's with accel's additions), on each backend the history ran
//!   on;
//! - accel's database of today moved to another server (SQLite to PostgreSQL).

#![allow(clippy::expect_used)]

use accel_conductor::cyborg_import::{import, ImportError, Imported};
use accel_conductor::db::{Backend, DeviceStatus};
use accel_conductor::testing as support;
use accel_conductor::{ArqState, Db};
use accel_objects::CleanupState;
use std::collections::BTreeMap;

const GPU: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0001";
const SSD: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0002";
const GPU_HANDLE: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0011";
const SSD_HANDLE: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0012";
const PROFILE: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0021";
const ARQ: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0031";
const INSTANCE: &str = "6f1c63e2-3d7a-4d51-9a3e-4b8f0c0a0041";
const AT: &str = "2026-12-01T10:00:00Z";

/// A database of accel's former history, as its release N+1 left it: a disabled GPU
/// whose handle a bound request holds, missing from the host's last report, and an SSD
/// whose erase failed.
async fn fill_history(db: &Db) {
    support::make_accel_history(db).await;
    let sql = |text: &str| db.backend().sql(text).into_owned();
    let device = sql(
        "INSERT INTO devices (uuid, type, vendor, model, hostname, status, maintaining, \
         created_at, updated_at) VALUES ($1, $2, '0x10de', 'm', 'h1', $3, $4, $5, $6) \
         RETURNING id",
    );
    let deployable = sql(
        "INSERT INTO deployables (uuid, name, device_id, hostname, control_path_id, \
         num_accelerators, driver_name, created_at, updated_at) \
         VALUES ($1, $2, $3, 'h1', $4, 1, 'sysfs', $5, $6) RETURNING id",
    );
    let handle = sql(
        "INSERT INTO attach_handles (uuid, deployable_id, in_use, attach_type, attach_info, \
         cleanup_state, cleanup_reason, created_at, updated_at) \
         VALUES ($1, $2, $3, 'PCI', $4, $5, $6, $7, $8) RETURNING id",
    );
    let mut handles = BTreeMap::new();
    for (uuid, kind, status, maintaining, handle_uuid, bus, in_use, cleanup, reason) in [
        (GPU, "GPU", "missing", 1, GPU_HANDLE, "3b", 1, None, None),
        (
            SSD,
            "SSD",
            "available",
            0,
            SSD_HANDLE,
            "5e",
            0,
            Some("error"),
            Some("nvme format failed"),
        ),
    ] {
        let device: i64 = sqlx::query_scalar(&device)
            .bind(uuid)
            .bind(kind)
            .bind(status)
            .bind(maintaining)
            .bind(AT)
            .bind(AT)
            .fetch_one(db.pool())
            .await
            .expect("a device");
        let dep: i64 = sqlx::query_scalar(&deployable)
            .bind(format!("dep-{bus}"))
            .bind(format!("h1_{bus}"))
            .bind(device)
            .bind(format!("0000:{bus}:00.0"))
            .bind(AT)
            .bind(AT)
            .fetch_one(db.pool())
            .await
            .expect("a deployable");
        let id: i64 = sqlx::query_scalar(&handle)
            .bind(handle_uuid)
            .bind(dep)
            .bind(in_use)
            .bind(format!(
                r#"{{"bus": "{bus}", "device": "00", "domain": "0000", "function": "0"}}"#
            ))
            .bind(cleanup)
            .bind(reason)
            .bind(AT)
            .bind(AT)
            .fetch_one(db.pool())
            .await
            .expect("a handle");
        handles.insert(handle_uuid, id);
    }
    sqlx::query(&sql(
        "INSERT INTO device_profiles (uuid, name, \"groups\", description, created_at) \
         VALUES ($1, 'gpu', '[{\"resources:PGPU\": \"1\"}]', 'one GPU', $2)",
    ))
    .bind(PROFILE)
    .bind(AT)
    .execute(db.pool())
    .await
    .expect("a profile");
    sqlx::query(&sql(
        "INSERT INTO accelerator_requests (uuid, state, device_profile_name, \
         device_profile_group_id, hostname, device_rp_uuid, instance_uuid, project_id, \
         attach_handle_id, created_at, updated_at) \
         VALUES ($1, 'Bound', 'gpu', 0, 'h1', $2, $3, 'p1', $4, $5, $6)",
    ))
    .bind(ARQ)
    .bind(accel_conductor::db::rp_uuid("h1_3b"))
    .bind(INSTANCE)
    .bind(handles[GPU_HANDLE])
    .bind(AT)
    .bind(AT)
    .execute(db.pool())
    .await
    .expect("a request");
}

/// `accel db import-cyborg SOURCE` into `target`.
async fn imported_into_fresh(source_url: &str, target: &Db) -> Imported {
    import(source_url, target, false).await.expect("imported")
}

async fn history_is_imported(source_url: &str, target: Db) {
    let source = Db::connect(source_url).await.expect("the old database");
    fill_history(&source).await;
    source.close().await;

    let done = imported_into_fresh(source_url, &target).await;
    let Imported::Done(summary) = done else {
        panic!("not imported: {done:?}")
    };
    assert_eq!(
        (
            summary.devices,
            summary.attach_handles,
            summary.device_profiles,
            summary.accelerator_requests
        ),
        (2, 2, 1, 1),
        "{summary:?}"
    );
    let gpu = target.device(GPU).await.expect("the GPU");
    assert_eq!((gpu.status, gpu.maintaining), (DeviceStatus::Missing, true));
    let ssd = target.device(SSD).await.expect("the SSD");
    assert_eq!(
        (ssd.status, ssd.maintaining),
        (DeviceStatus::Available, false)
    );
    let handles: BTreeMap<String, _> = target
        .host_handles("h1")
        .await
        .expect("handles")
        .into_iter()
        .map(|h| (h.uuid.clone(), h))
        .collect();
    assert!(handles[GPU_HANDLE].in_use);
    assert_eq!(handles[GPU_HANDLE].cleanup_state, None);
    assert_eq!(
        (
            handles[SSD_HANDLE].cleanup_state,
            handles[SSD_HANDLE].cleanup_reason.as_deref()
        ),
        (Some(CleanupState::Error), Some("nvme format failed"))
    );
    let arq = target.arq(ARQ).await.expect("the request");
    assert_eq!(arq.state, ArqState::Bound);
    assert_eq!(arq.device_profile_name, "gpu");
    assert_eq!(arq.instance_uuid.as_deref(), Some(INSTANCE));
    assert_eq!(arq.attach_handle_uuid.as_deref(), Some(GPU_HANDLE));
    let profile = target.profile(PROFILE).await.expect("the profile");
    assert_eq!(
        profile.groups,
        [BTreeMap::from([(
            "resources:PGPU".to_owned(),
            "1".to_owned()
        )])]
    );
    assert!(
        target.migrate().await.expect("accel's schema").is_empty(),
        "the target holds accel's schema whole"
    );
    assert!(matches!(
        imported_into_fresh(source_url, &target).await,
        Imported::Already(_)
    ));
    target.close().await;
}

#[tokio::test]
async fn sqlite_accel_history_is_imported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = format!("sqlite://{}", dir.path().join("old.db").display());
    let target = Db::connect(&format!("sqlite://{}", dir.path().join("new.db").display()))
        .await
        .expect("the new database");
    history_is_imported(&source, target).await;
}

#[tokio::test]
async fn postgres_accel_history_is_imported() {
    let source = support::postgres_database().await;
    let target = Db::connect(&support::postgres_database().await)
        .await
        .expect("the new database");
    history_is_imported(&source, target).await;
}

#[tokio::test]
async fn mysql_accel_history_is_imported() {
    let source = support::mysql_database().await;
    let target = Db::connect(&support::mysql_database().await)
        .await
        .expect("the new database");
    assert_eq!(target.backend(), Backend::Mysql);
    history_is_imported(&source, target).await;
}

/// A database of that history not at its last migration is refused, naming it.
#[tokio::test]
async fn an_older_accel_history_is_refused_naming_its_migration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = format!("sqlite://{}", dir.path().join("old.db").display());
    let db = Db::connect(&source).await.expect("the old database");
    support::make_accel_history(&db).await;
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version > 11")
        .execute(db.pool())
        .await
        .expect("as if migrated to 11 only");
    db.close().await;
    let target = Db::connect(&format!("sqlite://{}", dir.path().join("new.db").display()))
        .await
        .expect("the new database");
    let refused = import(&source, &target, false).await;
    assert!(
        matches!(refused, Err(ImportError::AccelHistoryBehind { found: 11 })),
        "{refused:?}"
    );
    assert!(target
        .devices(&Default::default())
        .await
        .map_or(true, |d| d.is_empty()));
}

/// accel's own database (Cyborg 17's schema with accel's additions) moved from SQLite to
/// PostgreSQL: the import reads accel's additions too, so a lost device, a disabled one
/// and a failed erase arrive as they were (a Cyborg 17 source has none of them), and so
/// do the version record (finalized or not) and the fleet record (an agent on older
/// software still blocks a finalize); a target whose version record says otherwise is
/// refused.
async fn accels_database_moves_with_what_only_accel_holds(source_url: &str, target_url: &str) {
    let source_url = source_url.to_owned();
    let source = Db::connect(&source_url).await.expect("accel's database");
    source.migrate().await.expect("accel's schema");
    source
        .report(
            "h1",
            &[
                support::reported_device("0000:3b:00.0", "GPU", "10de", "1eb8", 1),
                support::reported_device("0000:5e:00.0", "SSD", "8086", "0a54", 1),
            ],
        )
        .await
        .expect("a report");
    let devices = source.devices(&Default::default()).await.expect("devices");
    let handles = source.host_handles("h1").await.expect("handles");
    let of = |kind: &str| {
        let h = handles
            .iter()
            .find(|h| h.device_type == kind)
            .expect("a handle");
        (h.device_uuid.clone(), h.uuid.clone())
    };
    let ((gpu, _), (ssd, ssd_handle)) = (of("GPU"), of("SSD"));
    assert_eq!(devices.len(), 2);
    source
        .set_device_maintaining(&gpu, true)
        .await
        .expect("disabled");
    for (sql, arg) in [
        (
            "UPDATE devices SET inventory_status = 'lost' WHERE uuid = $1",
            gpu.as_str(),
        ),
        (
            "UPDATE attach_handles SET cleanup_state = 'error', \
             cleanup_reason = 'nvme format failed' WHERE uuid = $1",
            ssd_handle.as_str(),
        ),
    ] {
        sqlx::query(sql)
            .bind(arg)
            .execute(source.pool())
            .await
            .expect("as accel left it");
    }
    // The version record as accel's conductor keeps it (JSON text, copied as it is) and
    // an agent heard on release N.
    let record = r#"{"software":2,"apparent":1,"state":"pre_finalized"}"#;
    sqlx::query(
        "INSERT INTO component_versions (component, record, updated_at) VALUES ('accel', $1, $2)",
    )
    .bind(record)
    .bind(AT)
    .execute(source.pool())
    .await
    .expect("a version record");
    sqlx::query(
        "INSERT INTO fleet_members (component, member_id, host, software, apparent, heard_by, \
         heartbeats, last_seen_ms) VALUES ('accel', 'agent@h2', 'h2', 1, 1, 'c1', 1, 1765000000000)",
    )
    .execute(source.pool())
    .await
    .expect("a fleet member");
    source.close().await;

    let other = Db::connect(&support::postgres_database().await)
        .await
        .expect("a database with another record");
    other.migrate().await.expect("accel's schema");
    sqlx::query(
        "INSERT INTO component_versions (component, record, updated_at) VALUES ('accel', $1, $2)",
    )
    .bind(r#"{"software":2,"apparent":2,"state":"finalized"}"#)
    .bind(AT)
    .execute(other.pool())
    .await
    .expect("another record");
    let refused = import(&source_url, &other, false).await;
    assert!(
        matches!(&refused, Err(ImportError::TargetNotEmpty { uuid, .. }) if uuid == "accel"),
        "{refused:?}"
    );
    assert!(other
        .devices(&Default::default())
        .await
        .expect("devices")
        .is_empty());
    other.close().await;

    let target = Db::connect(target_url).await.expect("the new database");
    let done = imported_into_fresh(&source_url, &target).await;
    assert!(matches!(done, Imported::Done(_)), "{done:?}");
    let moved = target.device(&gpu).await.expect("the GPU");
    assert_eq!(
        (moved.status, moved.maintaining),
        (DeviceStatus::Lost, true)
    );
    let moved = target.device(&ssd).await.expect("the SSD");
    assert_eq!(
        (moved.status, moved.maintaining),
        (DeviceStatus::Available, false)
    );
    let handle = target
        .host_handles("h1")
        .await
        .expect("handles")
        .into_iter()
        .find(|h| h.uuid == ssd_handle)
        .expect("the SSD's handle");
    assert_eq!(
        (handle.cleanup_state, handle.cleanup_reason.as_deref()),
        (Some(CleanupState::Error), Some("nvme format failed"))
    );
    let moved: String =
        sqlx::query_scalar("SELECT record FROM component_versions WHERE component = 'accel'")
            .fetch_one(target.pool())
            .await
            .expect("the version record");
    assert_eq!(moved, record);
    let fleet: Vec<(String, i64, i64)> =
        sqlx::query_as("SELECT member_id, software, last_seen_ms FROM fleet_members")
            .fetch_all(target.pool())
            .await
            .expect("the fleet record");
    assert_eq!(fleet, [("agent@h2".to_owned(), 1, 1_765_000_000_000)]);
    assert!(matches!(
        imported_into_fresh(&source_url, &target).await,
        Imported::Already(_)
    ));
    target.close().await;
}

#[tokio::test]
async fn accels_sqlite_database_moves_to_postgresql() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = format!("sqlite://{}", dir.path().join("accel.db").display());
    accels_database_moves_with_what_only_accel_holds(&source, &support::postgres_database().await)
        .await;
}

/// Cyborg's flags are PostgreSQL `BOOLEAN`s there, which the import reads as integers.
#[tokio::test]
async fn accels_postgresql_database_moves_to_mariadb() {
    accels_database_moves_with_what_only_accel_holds(
        &support::postgres_database().await,
        &support::mysql_database().await,
    )
    .await;
}
