//! Databases for tests (feature `testing`): a fresh SQLite file, a fresh PostgreSQL
//! database on the test cluster (`VERSO_TEST_POSTGRES_URL`, default
//! `postgres://verso:verso@127.0.0.1:55432/verso`, started by `scripts/start-postgres.sh`)
//! and a fresh database on the test MariaDB ([`mysql`]). A missing server fails the test
//! with a message saying how to start it; it never skips.
//! And [`nova`]: the tests' own Nova; [`bound_request`]: an accelerator bound to an
//! instance.

#![allow(clippy::expect_used)]

pub mod nova;

use crate::Db;

/// A request of one `resource_class` accelerator (its profile, named after the class in
/// lower case, made on first use) bound to `instance` on `host`, as Nova's bind leaves
/// it: the request as stored.
pub async fn bound_request(
    db: &Db,
    resource_class: &str,
    host: &str,
    instance: &str,
) -> crate::db::ArqRow {
    let profile = resource_class.to_ascii_lowercase();
    if db.profile_by_name(&profile).await.is_err() {
        db.create_profile(
            &profile,
            vec![[(format!("resources:{resource_class}"), "1".to_owned())]
                .into_iter()
                .collect()],
            None,
        )
        .await
        .expect("the profile");
    }
    let arq = db.create_arq(&profile, 0, None).await.expect("the request");
    db.bind(&arq.uuid, host, instance, None)
        .await
        .expect("bound")
}

/// A device as a report has it, at PCI address `cp`, of `kind` from `vendor` with
/// `model`, with `handles` PCI attach handles (`{"address": cp, "vf": i}`).
pub fn reported_device(
    cp: &str,
    kind: &str,
    vendor: &str,
    model: &str,
    handles: usize,
) -> crate::db::ReportedDevice {
    crate::db::ReportedDevice {
        control_path_id: cp.to_owned(),
        device_type: kind.to_owned(),
        vendor: vendor.to_owned(),
        model: model.to_owned(),
        handles: (0..handles)
            .map(|i| {
                (
                    "PCI".to_owned(),
                    format!("{{\"address\": \"{cp}\", \"vf\": {i}}}"),
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// An SR-IOV NIC (`0000:5e:00.0`, Intel 1592) on `host` as Cyborg's Intel NIC driver
/// reports it: one deployable per virtual function `n` of `vfs`, named
/// `<host>_nic_vf<n>`, driver `ice`, one `PCI` handle (`0000:5e:00.<n>`), `rc`
/// `CUSTOM_NIC` and `trait0` `CUSTOM_PHYSNET_NET<n>`.
pub fn reported_nic(host: &str, vfs: &[u8]) -> crate::db::ReportedDevice {
    let vf = |n: u8| crate::db::ReportedDeployable {
        name: format!("{host}_nic_vf{n}"),
        driver_name: Some("ice".into()),
        handles: vec![("PCI".into(), format!("{{\"address\": \"0000:5e:00.{n}\"}}"))],
        attributes: [
            ("rc".to_owned(), "CUSTOM_NIC".to_owned()),
            ("trait0".to_owned(), format!("CUSTOM_PHYSNET_NET{n}")),
        ]
        .into_iter()
        .collect(),
    };
    reported_device("0000:5e:00.0", "NIC", "8086", "1592", 0)
        .with_deployables(vfs.iter().map(|n| vf(*n)).collect())
}

/// The test cluster's URL.
pub fn postgres_url() -> String {
    std::env::var("VERSO_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://verso:verso@127.0.0.1:55432/verso".into())
}

/// Makes accel's schema (Cyborg 17's with accel's additions, [`Db::migrate`]) in `db`.
pub async fn make_schema(db: &Db) {
    db.migrate().await.expect("accel's schema on Cyborg 17's");
}

/// Makes accel's own former schema history (sqlx migrations 1-13, which accel ran before
/// its release N became Cyborg 17 and no longer does) in the empty database `db`, as a
/// database made by such a release holds it: for the tests of [`Db::migrate`]'s refusal
/// and of `accel db import-cyborg` reading it. The migrations are kept, as they were
/// released, in `tests/fixtures/accel-history/{sqlite,postgres,mysql}`.
pub async fn make_accel_history(db: &Db) {
    use crate::db::Backend;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/accel-history")
        .join(match db.backend() {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
        });
    let history = sqlx::migrate::Migrator::new(dir)
        .await
        .expect("accel's former history");
    let mut conn = db.pool().acquire().await.expect("a connection");
    // Migrations 10 and 12 rebuild tables on SQLite, which SQLite's procedure does with
    // foreign keys off (as that release ran them).
    if db.backend() == Backend::Sqlite {
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut *conn)
            .await
            .expect("foreign keys off");
    }
    history.run(&mut *conn).await.expect("migrations 1-13");
    if db.backend() == Backend::Sqlite {
        sqlx::query("PRAGMA foreign_keys = ON")
            .execute(&mut *conn)
            .await
            .expect("foreign keys on");
    }
}

/// A migrated database in a new SQLite file (the directory lives as long as the guard).
pub async fn sqlite() -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::connect(&sqlite_url(&dir)).await.expect("open sqlite");
    make_schema(&db).await;
    (db, dir)
}

/// The URL of the SQLite file [`sqlite`] made in `dir` (for a second conductor on it).
pub fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("accel.db").display())
}

/// The URL of a new, empty PostgreSQL database on the test cluster.
pub async fn postgres_database() -> String {
    new_database(
        &postgres_url(),
        "the PostgreSQL tests need the test cluster: run scripts/start-postgres.sh (scripts/test.sh does) or set VERSO_TEST_POSTGRES_URL",
    )
    .await
}

/// A new database `accel_test_<uuid>` on the server `server` reaches; its URL.
/// `missing` says how to start the server when it cannot be reached.
async fn new_database(server: &str, missing: &str) -> String {
    let name = format!("accel_test_{}", uuid::Uuid::new_v4().simple());
    Db::create_database(server, &name)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{missing}"))
}

/// A migrated database in a new PostgreSQL database.
pub async fn postgres() -> Db {
    let db = Db::connect(&postgres_database().await)
        .await
        .expect("open postgres");
    make_schema(&db).await;
    db
}

/// The test MariaDB server's URL (`VERSO_TEST_MYSQL_URL`, default
/// `mysql://verso:verso@127.0.0.1:55306/`, started by `scripts/start-mariadb.sh`).
pub fn mysql_url() -> String {
    std::env::var("VERSO_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://verso:verso@127.0.0.1:55306/".into())
}

/// The URL of a new, empty database on the test MariaDB server.
pub async fn mysql_database() -> String {
    new_database(
        &mysql_url(),
        "the MySQL tests need the test MariaDB: run scripts/start-mariadb.sh (scripts/test.sh does) or set VERSO_TEST_MYSQL_URL",
    )
    .await
}

/// A migrated database in a new database on the test MariaDB server.
pub async fn mysql() -> Db {
    let db = Db::connect(&mysql_database().await)
        .await
        .expect("open mysql");
    make_schema(&db).await;
    db
}

/// Every deployable's stored provider as `(name, uuid, rp_uuid)`, by name: Cyborg's
/// `rp_uuid` column, which [`DeployableRow::rp_uuid`] does not read (it is
/// the name's, computed).
///
/// [`DeployableRow::rp_uuid`]: crate::db::DeployableRow::rp_uuid
pub async fn stored_providers(db: &Db) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as("SELECT name, uuid, rp_uuid FROM deployables ORDER BY name")
        .fetch_all(db.pool())
        .await
        .expect("the deployables' stored providers")
}

/// The conductor's component versions over `db`'s version record, as a conductor opens
/// them (a record not there yet starts at the newest release, finalized).
pub async fn versions(db: &Db) -> verso_upgrade::VersionManager<accel_objects::AccelVersion> {
    use verso_upgrade::ComponentVersion;
    verso_upgrade::VersionManager::builder_tx(crate::DbVersionStore::new(
        db.clone(),
        accel_objects::AccelVersion::COMPONENT,
    ))
    .open()
    .await
    .expect("the version record opens")
}
