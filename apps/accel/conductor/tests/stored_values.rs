//! What the conductor's database refuses to read, on SQLite and on PostgreSQL: a stored
//! status, state, flag, JSON text or count that does not parse is `DbError::Corrupt`
//! naming its table and column (never a default, never a panic); lists assembled from
//! their filters bind their values on both backends; asking which migrations are
//! applied writes nothing.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;

use accel_conductor::db::{ListFilter, ReportedDevice};
use accel_conductor::{Db, DbError};
use std::collections::BTreeMap;

fn gpu(cp: &str) -> ReportedDevice {
    ReportedDevice {
        control_path_id: cp.to_owned(),
        device_type: "GPU".to_owned(),
        vendor: "10de".to_owned(),
        model: "1eb8".to_owned(),
        handles: vec![("PCI".to_owned(), format!("{{\"address\": \"{cp}\"}}"))],
        attributes: [("rc".to_owned(), "PGPU".to_owned())].into_iter().collect(),
        ..Default::default()
    }
}

fn one_gpu_group() -> Vec<BTreeMap<String, String>> {
    vec![[("resources:PGPU".to_owned(), "1".to_owned())]
        .into_iter()
        .collect()]
}

/// Writes `sql` behind the conductor's back.
async fn damage(db: &Db, sql: &str) {
    sqlx::query(sql).execute(db.pool()).await.expect(sql);
}

/// Writes `sql` behind the conductor's back where the column's type can hold the damage
/// (`true`); some of Cyborg's cannot (MySQL's `ENUM`s, PostgreSQL's `BOOLEAN`), and the
/// database refusing it is checked instead (`false`).
async fn damage_if_it_fits(db: &Db, sql: &str) -> bool {
    match sqlx::query(sql).execute(db.pool()).await {
        Ok(_) => true,
        Err(e) => {
            assert!(
                matches!(e, sqlx::Error::Database(_)),
                "{sql}: not refused by the database: {e}"
            );
            false
        }
    }
}

/// The error is `Corrupt` naming `table` and `column`, and its message shows `shows`
/// (what was found).
fn assert_corrupt<T: std::fmt::Debug>(
    got: Result<T, DbError>,
    table: &str,
    column: &str,
    shows: &str,
) {
    match got {
        Err(DbError::Corrupt {
            table: t,
            column: c,
            why,
        }) => {
            assert_eq!((t, c.as_str()), (table, column), "{why}");
            assert!(why.contains(shows), "{table}.{column}: {why}");
        }
        other => panic!("expected {table}.{column} to be refused as corrupt, got {other:?}"),
    }
}

async fn unparseable_values_are_refused(db: &Db) {
    db.report_with_digest("h1", &[gpu("0000:3b:00.0")], Some("v2:x"))
        .await
        .expect("report");
    // First: any later write of the host's devices makes the database forget the digest.
    damage(db, "UPDATE host_reports SET devices = -1").await;
    assert_corrupt(
        db.report_digest("h1").await,
        "host_reports",
        "devices",
        "-1",
    );
    db.create_profile("gpu", one_gpu_group(), None)
        .await
        .expect("profile");
    let arq = db.create_arq("gpu", 0, None).await.expect("arq");
    let device = db
        .devices(&ListFilter::default())
        .await
        .expect("devices")
        .remove(0);
    let handle = db.host_handles("h1").await.expect("handles").remove(0);

    let d = db.dialect();
    damage(db, "UPDATE devices SET inventory_status = 'gone'").await;
    assert_corrupt(
        db.devices(&ListFilter::default()).await,
        "devices",
        "status",
        "\"gone\"",
    );
    assert_corrupt(
        db.device(&device.uuid).await,
        "devices",
        "status",
        "\"gone\"",
    );
    // The report diff reads it too, and changes nothing it cannot read.
    assert_corrupt(
        db.report("h1", &[gpu("0000:3b:00.0")]).await,
        "devices",
        "status",
        "\"gone\"",
    );
    // The operator's disable: Cyborg's `status`.
    if damage_if_it_fits(
        db,
        "UPDATE devices SET inventory_status = 'available', status = 'gone'",
    )
    .await
    {
        assert_corrupt(
            db.device(&device.uuid).await,
            "devices",
            "maintaining",
            "\"gone\"",
        );
    }
    damage(db, "UPDATE devices SET inventory_status = 'available'").await;
    damage(db, "UPDATE devices SET status = 'enabled'").await;
    db.device(&device.uuid).await.expect("repaired device");

    damage(db, "UPDATE deployables SET enabled = 2").await;
    assert_corrupt(
        db.deployables(&ListFilter::default()).await,
        "deployables",
        "enabled",
        "2",
    );
    damage(db, "UPDATE deployables SET enabled = 1").await;

    if damage_if_it_fits(db, "UPDATE attach_handles SET in_use = 5").await {
        assert_corrupt(
            db.attach_handles(None).await,
            "attach_handles",
            "in_use",
            "5",
        );
    }
    damage(
        db,
        &format!("UPDATE attach_handles SET in_use = {}", d.no()),
    )
    .await;
    damage(db, "UPDATE attach_handles SET cleanup_state = 'dusty'").await;
    assert_corrupt(
        db.host_handles("h1").await,
        "attach_handles",
        "cleanup_state",
        "\"dusty\"",
    );
    assert_corrupt(
        db.host_handle(&handle.uuid).await,
        "attach_handles",
        "cleanup_state",
        "\"dusty\"",
    );
    damage(db, "UPDATE attach_handles SET cleanup_state = NULL").await;
    assert_eq!(
        db.host_handle(&handle.uuid)
            .await
            .expect("repaired handle")
            .cleanup_state,
        None
    );

    damage(db, "UPDATE device_profiles SET profile_json = 'not json'").await;
    assert_corrupt(
        db.profile("gpu").await,
        "device_profiles",
        "groups",
        "line 1",
    );
    assert_corrupt(db.profiles().await, "device_profiles", "groups", "line 1");
    damage(
        db,
        r#"UPDATE device_profiles SET profile_json = '{"groups": [{"resources:PGPU": "1"}]}'"#,
    )
    .await;

    if !damage_if_it_fits(
        db,
        "UPDATE extended_accelerator_requests SET state = 'Flying'",
    )
    .await
    {
        return;
    }
    assert_corrupt(
        db.arq(&arq.uuid).await,
        "accelerator_requests",
        "state",
        "\"Flying\"",
    );
    assert_corrupt(
        db.arqs(None).await,
        "accelerator_requests",
        "state",
        "\"Flying\"",
    );
    // A transition that finds it there cannot say where it was: refused the same way.
    assert_corrupt(
        db.unbind(&arq.uuid).await,
        "accelerator_requests",
        "state",
        "\"Flying\"",
    );
}

#[tokio::test]
async fn sqlite_refuses_unparseable_stored_values() {
    let (db, _dir) = support::sqlite().await;
    unparseable_values_are_refused(&db).await;
}

#[tokio::test]
async fn postgres_refuses_unparseable_stored_values() {
    unparseable_values_are_refused(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_refuses_unparseable_stored_values() {
    unparseable_values_are_refused(&support::mysql().await).await;
}

/// Every filter of the lists at once, so each binds several values in one statement.
async fn filters_combine(db: &Db) {
    db.report("h1", &[gpu("0000:3b:00.0"), gpu("0000:3c:00.0")])
        .await
        .expect("report h1");
    db.report("h2", &[gpu("0000:3b:00.0")])
        .await
        .expect("report h2");
    let h1 = ListFilter {
        host: Some("h1".into()),
        ..Default::default()
    };
    let devices = db.devices(&h1).await.expect("devices of h1");
    assert_eq!(devices.len(), 2);
    let after_first = ListFilter {
        host: Some("h1".into()),
        marker: Some(devices[0].uuid.clone()),
        limit: Some(5),
        ..Default::default()
    };
    let rest = db.devices(&after_first).await.expect("page");
    assert_eq!(
        rest.iter().map(|d| &d.uuid).collect::<Vec<_>>(),
        [&devices[1].uuid]
    );
    let deployables = db.deployables(&h1).await.expect("deployables");
    assert_eq!(deployables.len(), 2);
    assert_eq!(deployables[0].attributes["rc"], "PGPU");
    let rc = db
        .attributes(
            Some(deployables[1].id),
            Some("rc"),
            &ListFilter {
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("attributes");
    assert_eq!(
        rc.iter()
            .map(|a| (a.deployable_id, a.value.as_str()))
            .collect::<Vec<_>>(),
        [(deployables[1].id, "PGPU")]
    );
    assert_eq!(db.attach_handles(Some("h2")).await.expect("h2").len(), 1);

    db.create_profile("gpu", one_gpu_group(), None)
        .await
        .expect("profile");
    let a = db.create_arq("gpu", 0, Some("p1")).await.expect("a");
    let b = db.create_arq("gpu", 0, Some("p1")).await.expect("b");
    db.create_arq("gpu", 0, Some("p2")).await.expect("c");
    let page = db
        .arqs_page(
            None,
            &ListFilter {
                project: Some("p1".into()),
                marker: Some(a.uuid.clone()),
                limit: Some(10),
                ..Default::default()
            },
        )
        .await
        .expect("arqs of p1 after a");
    assert_eq!(page.iter().map(|r| &r.uuid).collect::<Vec<_>>(), [&b.uuid]);
    let bound = db
        .bind(&a.uuid, "h1", "11111111-2222-3333-4444-555555555555", None)
        .await
        .expect("bind");
    let of_instance = db
        .arqs_page(
            bound.instance_uuid.as_deref(),
            &ListFilter {
                project: Some("p1".into()),
                ..Default::default()
            },
        )
        .await
        .expect("arqs of the instance");
    assert_eq!(
        of_instance.iter().map(|r| &r.uuid).collect::<Vec<_>>(),
        [&a.uuid]
    );
}

#[tokio::test]
async fn sqlite_filters_combine() {
    let (db, _dir) = support::sqlite().await;
    filters_combine(&db).await;
}

#[tokio::test]
async fn postgres_filters_combine() {
    filters_combine(&support::postgres().await).await;
}

#[tokio::test]
async fn mysql_filters_combine() {
    filters_combine(&support::mysql().await).await;
}

/// `accel api` and `accel upgrade check` ask which migrations are pending on a database
/// they must not change: asking creates nothing, not even sqlx's own table.
async fn asking_for_pending_migrations_writes_nothing(url: &str) {
    let db = Db::connect(url).await.expect("open");
    // An empty database: Cyborg 17's schema and accel's additions are what it would get.
    assert_eq!(db.pending_migrations().await.expect("pending"), [101, 102]);
    let schema = match db.backend() {
        accel_conductor::db::Backend::Mysql => "DATABASE()",
        _ => "current_schema()",
    };
    let tables: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = {schema}"
    ))
    .fetch_one(db.pool())
    .await
    .expect("tables");
    assert_eq!(tables, 0);
    assert_eq!(db.migrate().await.expect("migrate"), [101, 102]);
    assert!(db.pending_migrations().await.expect("pending").is_empty());
}

#[tokio::test]
async fn asking_for_pending_migrations_writes_nothing_on_postgres() {
    asking_for_pending_migrations_writes_nothing(&support::postgres_database().await).await;
}

#[tokio::test]
async fn asking_for_pending_migrations_writes_nothing_on_mysql() {
    asking_for_pending_migrations_writes_nothing(&support::mysql_database().await).await;
}
