//! Release N+1's schema on Cyborg 17's (`Db::sync_on_cyborg17`): an empty database gets
//! Cyborg 17's schema and accel's additions, and the result holds every fact of Cyborg's
//! schema (tables, columns, keys, indexes, foreign keys, the alembic stamp) as
//! SQLAlchemy's inspector reads it, plus only the additions the migration declares; a
//! database of any other schema is refused before anything is written. On SQLite,
//! PostgreSQL and MariaDB.
//!
//! That Cyborg 17's own conductor, and accel's release N (Cyborg 17 in Rust), run on the
//! result as on Cyborg's own schema is shown by
//! `apps/accel/cyborg17-conductor/tests/differential.rs` (`*_on_accels_schema`).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::{addition_versions, DbError};
use accel_conductor::testing as support;
use accel_conductor::Db;
use accel_cyborg17::testing::{cyborg_schema_apply, cyborg_schema_compare};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The columns accel adds to Cyborg's tables, as `table.column`.
const ADDED_COLUMNS: &[&str] = &[
    "devices.inventory_status",
    "deployables.hostname",
    "deployables.control_path_id",
    "deployables.attributes",
    "deployables.enabled",
    "attach_handles.revision",
    "attach_handles.cleanup_state",
    "attach_handles.cleanup_reason",
];

/// accel's own tables.
const ACCEL_TABLES: &[&str] = &[
    "component_versions",
    "fleet_members",
    "host_reports",
    "host_wires",
    "leases",
    "placement_changes",
];

fn schema_file(backend: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../cyborg17/schema/{backend}.sql"))
}

/// `table` of each fact of `kind` in `facts`, or `table.column` for columns.
fn named(facts: &Value, kind: &str) -> BTreeSet<String> {
    facts
        .as_array()
        .expect("a list of facts")
        .iter()
        .filter(|f| f[0] == kind)
        .map(|f| match kind {
            "column" => format!(
                "{}.{}",
                f[1].as_str().expect("table"),
                f[2].as_str().expect("column")
            ),
            _ => f[1].as_str().expect("table").to_owned(),
        })
        .collect()
}

/// Makes release N+1's schema in the empty database at `url` (sqlx's form), checks it is
/// Cyborg's plus the additions against a database of Cyborg's schema alone at
/// `reference` (SQLAlchemy's form; `ours` is the first database in SQLAlchemy's form).
/// `widened` says whether the inspector sees `extended_accelerator_requests.state`
/// widened for accel's `UnbindFailed` (PostgreSQL's VARCHAR(11) holds a value to its
/// length; SQLite's does not, and SQLAlchemy shows MySQL's ENUM without its values, so
/// the MariaDB test reads the column's type itself).
async fn empty_database_gets_cyborgs_schema_and_accels_additions(
    url: &str,
    ours: &str,
    reference: &str,
    backend: &str,
    widened: bool,
) {
    let db = Db::connect(url).await.expect("open");
    assert_eq!(
        db.pending_migrations().await.expect("pending"),
        addition_versions()
    );
    let first = db.sync_on_cyborg17().await.expect("sync");
    assert!(first.made_cyborg_schema, "{first:?}");
    assert_eq!(first.applied, addition_versions());
    // accel made it, empty: the deployment will start at the newest release.
    assert!(!first.at_release_n, "{first:?}");
    assert!(!db.starts_at_release_n().await.expect("reads"));
    let again = db.sync_on_cyborg17().await.expect("sync again");
    assert!(
        !again.made_cyborg_schema && again.applied.is_empty(),
        "{again:?}"
    );
    assert!(db.pending_migrations().await.expect("pending").is_empty());
    db.close().await;

    cyborg_schema_apply(reference, &schema_file(backend));
    let diff = cyborg_schema_compare(&["--reference", reference, "--candidate", ours]);
    let state = BTreeSet::from(["extended_accelerator_requests.state".to_owned()]);
    let missing = &diff["missing"];
    if widened {
        assert_eq!(named(missing, "column"), state, "{diff}");
        assert_eq!(missing.as_array().map(Vec::len), Some(1), "{diff}");
    } else {
        assert_eq!(missing.as_array().map(Vec::len), Some(0), "{diff}");
    }

    let extra = &diff["extra"];
    let mut tables: BTreeSet<String> = ACCEL_TABLES.iter().map(|t| t.to_string()).collect();
    tables.insert("_sqlx_migrations".into());
    if backend == "mysql" {
        // The row a report of a host locks while it applies.
        tables.insert("report_locks".into());
    }
    assert_eq!(named(extra, "table"), tables, "{diff}");
    let mut columns: BTreeSet<String> = ADDED_COLUMNS.iter().map(|c| c.to_string()).collect();
    if widened {
        columns.extend(state);
    }
    let on_cyborgs: BTreeSet<String> = named(extra, "column")
        .into_iter()
        .filter(|c| !tables.iter().any(|t| c.starts_with(&format!("{t}."))))
        .collect();
    assert_eq!(on_cyborgs, columns, "{diff}");
    // The unique keys accel's report diff relies on.
    let unique = named(extra, "unique");
    assert!(
        unique.contains("deployables")
            && unique.contains("attach_handles")
            && unique.contains("attributes"),
        "{diff}"
    );
}

/// accel's version record in `db`, as JSON.
async fn record(db: &Db) -> Option<Value> {
    use verso_upgrade::store::VersionStore;
    accel_conductor::DbVersionStore::new(db.clone(), "accel")
        .load()
        .await
        .expect("the version record reads")
        .map(|r| serde_json::to_value(r).expect("json"))
}

/// The row a Cyborg deployment's API would have written: a device profile.
const CYBORG_PROFILE: &str = "INSERT INTO device_profiles (uuid, name, profile_json, created_at) \
     VALUES ('9a5e3e8b-0d4c-4a53-9a8e-2f0c1e7a6b11', 'migrated', '{\"groups\": []}', \
     '2026-12-07 05:00:00')";

/// A conductor on `db` with its default options, and its apparent version.
async fn started_at(db: &Db) -> accel_objects::AccelVersion {
    let transport: std::sync::Arc<dyn verso_rpc::transport::Transport> =
        std::sync::Arc::new(verso_rpc::transport::memory::MemoryTransport::new());
    let running = accel_conductor::runtime::start_with(
        db.clone(),
        transport,
        None,
        accel_conductor::runtime::StartOptions::default(),
    )
    .await
    .expect("the conductor starts");
    let apparent = running.versions.apparent();
    running.stop().await;
    apparent
}

/// A database of a Cyborg deployment (Cyborg 17's schema, as `cyborg-dbsync` leaves it,
/// with Cyborg's rows), taken in place, is at release N: `db sync` says so and a
/// conductor started on it, whatever its options, opens it at release N (its record
/// written then, so the database no longer says release N by its rows); a Cyborg
/// database without rows has nothing to migrate and starts at the newest release, as a
/// database accel made does.
async fn a_database_cyborg_made_starts_at_release_n(url: &str, sqlalchemy: &str, backend: &str) {
    cyborg_schema_apply(sqlalchemy, &schema_file(backend));
    let db = Db::connect(url).await.expect("open");
    sqlx::query(CYBORG_PROFILE)
        .execute(db.pool())
        .await
        .expect("a Cyborg row");
    let taken = db.sync_on_cyborg17().await.expect("taken in place");
    assert!(!taken.made_cyborg_schema && taken.at_release_n, "{taken:?}");
    assert_eq!(record(&db).await, None, "db sync writes no version record");
    assert_eq!(started_at(&db).await, accel_objects::AccelVersion::Initial);
    assert_eq!(
        record(&db).await,
        Some(serde_json::json!({"format": 1, "component": "accel", "apparent": 1}))
    );
    let again = db.sync_on_cyborg17().await.expect("sync again");
    assert!(!again.at_release_n, "{again:?}");
    assert_eq!(started_at(&db).await, accel_objects::AccelVersion::Initial);
    db.close().await;
}

/// Cyborg's schema without rows: nothing to migrate, the newest release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_database_without_rows_starts_at_the_newest_release() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cyborg.db");
    cyborg_schema_apply(
        &format!("sqlite:///{}", path.display()),
        &schema_file("sqlite"),
    );
    let db = Db::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open");
    let taken = db.sync_on_cyborg17().await.expect("taken in place");
    assert!(
        !taken.made_cyborg_schema && !taken.at_release_n,
        "{taken:?}"
    );
    assert_eq!(
        started_at(&db).await,
        <accel_objects::AccelVersion as verso_upgrade::ComponentVersion>::software()
    );
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_database_cyborg_made_starts_at_release_n() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cyborg.db");
    a_database_cyborg_made_starts_at_release_n(
        &format!("sqlite://{}", path.display()),
        &format!("sqlite:///{}", path.display()),
        "sqlite",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_database_cyborg_made_starts_at_release_n() {
    let url = support::postgres_database().await;
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .expect("a postgres:// URL");
    a_database_cyborg_made_starts_at_release_n(
        &url,
        &format!("postgresql+psycopg2://{rest}"),
        "postgres",
    )
    .await;
}

/// A handle connected while the database was empty, whose schema another process (here
/// Cyborg's own, stood in for by a second handle) made since: `migrate` reads the
/// database, not what it was at connect, and takes Cyborg's schema in place.
#[tokio::test]
async fn a_handle_connected_before_cyborgs_schema_was_made_takes_it_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let early = Db::connect(&url).await.expect("open the empty database");
    let other = Db::connect(&url).await.expect("open it again");
    assert_eq!(
        other.migrate().await.expect("the schema made"),
        addition_versions()
    );
    assert!(early.migrate().await.expect("taken in place").is_empty());
    assert!(tables(&url).await.contains("extended_accelerator_requests"));
    assert!(!tables(&url).await.contains("accelerator_requests"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_sqlite_database_gets_cyborgs_schema_and_accels_additions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ours = dir.path().join("accel.db");
    empty_database_gets_cyborgs_schema_and_accels_additions(
        &format!("sqlite://{}", ours.display()),
        &format!("sqlite:///{}", ours.display()),
        &format!("sqlite:///{}", dir.path().join("cyborg.db").display()),
        "sqlite",
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_postgresql_database_gets_cyborgs_schema_and_accels_additions() {
    let sqlalchemy = |url: &str| {
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .expect("a postgres:// URL");
        format!("postgresql+psycopg2://{rest}")
    };
    let ours = support::postgres_database().await;
    let reference = support::postgres_database().await;
    empty_database_gets_cyborgs_schema_and_accels_additions(
        &ours,
        &sqlalchemy(&ours),
        &sqlalchemy(&reference),
        "postgres",
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_mariadb_database_gets_cyborgs_schema_and_accels_additions() {
    let sqlalchemy = |url: &str| {
        let rest = url.strip_prefix("mysql://").expect("a mysql:// URL");
        format!("mysql+pymysql://{rest}?charset=utf8mb4")
    };
    let ours = support::mysql_database().await;
    let reference = support::mysql_database().await;
    empty_database_gets_cyborgs_schema_and_accels_additions(
        &ours,
        &sqlalchemy(&ours),
        &sqlalchemy(&reference),
        "mysql",
        false,
    )
    .await;
    let db = Db::connect(&ours).await.expect("open");
    let state: String = sqlx::query_scalar(
        "SELECT CAST(column_type AS CHAR(255)) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'extended_accelerator_requests' \
         AND column_name = 'state'",
    )
    .fetch_one(db.pool())
    .await
    .expect("the state column's type");
    assert_eq!(
        state,
        "enum('Initial','BindStarted','Bound','Unbound','BindFailed','Deleting','UnbindFailed')"
    );
}

/// The tables of the SQLite database at `url`.
async fn tables(url: &str) -> BTreeSet<String> {
    let db = Db::connect(url).await.expect("open");
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .fetch_all(db.pool())
    .await
    .expect("tables");
    db.close().await;
    names.into_iter().collect()
}

/// Why `sync_on_cyborg17` refuses the database at `url` (it must).
async fn refusal(url: &str) -> DbError {
    let db = Db::connect(url).await.expect("open");
    let err = db.sync_on_cyborg17().await.expect_err("refused");
    db.close().await;
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_of_other_schemas_are_refused_and_left_as_they_were() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = |name: &str| format!("sqlite://{}", dir.path().join(name).display());

    // accel's own former history (migrations 1-13).
    let old_url = url("accel.db");
    let old = Db::connect(&old_url).await.expect("open");
    accel_conductor::testing::make_accel_history(&old).await;
    old.close().await;
    let before = tables(&old_url).await;
    let why = refusal(&old_url).await;
    assert!(matches!(why, DbError::AccelHistory { .. }), "{why:?}");
    assert!(why.to_string().contains("accel db import-cyborg"), "{why}");
    assert_eq!(tables(&old_url).await, before);

    // Cyborg's schema at another alembic revision: nothing of accel's is added.
    let stale = url("stale.db");
    let db = Db::connect(&stale).await.expect("open");
    sqlx::raw_sql(accel_cyborg17::schema::SQLITE)
        .execute(db.pool())
        .await
        .expect("Cyborg's schema");
    sqlx::query("UPDATE alembic_version SET version_num = 'a35b4295a0e5'")
        .execute(db.pool())
        .await
        .expect("another revision");
    db.close().await;
    let before = tables(&stale).await;
    let why = refusal(&stale).await;
    assert!(matches!(why, DbError::CyborgDatabase { .. }), "{why:?}");
    let why = why.to_string();
    assert!(why.contains("alembic revision a35b4295a0e5"), "{why}");
    assert!(why.contains("cyborg-dbsync upgrade"), "{why}");
    assert_eq!(tables(&stale).await, before);
    assert!(!before.contains("_sqlx_migrations"));

    // Tables of something else.
    let other = url("other.db");
    let db = Db::connect(&other).await.expect("open");
    sqlx::query("CREATE TABLE ledger (id INTEGER PRIMARY KEY)")
        .execute(db.pool())
        .await
        .expect("a table");
    db.close().await;
    let why = refusal(&other).await;
    assert!(matches!(why, DbError::NotOnCyborg17 { .. }), "{why:?}");
    assert!(
        why.to_string()
            .contains("tables of neither Cyborg nor accel"),
        "{why}"
    );
    assert_eq!(tables(&other).await, BTreeSet::from(["ledger".to_owned()]));
}
