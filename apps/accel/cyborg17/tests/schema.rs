//! Cyborg 17's database schema as this crate declares it (`schema/mysql.sql`,
//! `schema/sqlite.sql`) is the one the pinned openstack-cyborg makes: on MariaDB, a
//! database `cyborg-dbsync upgrade` migrated (how every Cyborg 17 deployment's database
//! was made); on SQLite, one Cyborg's `create_schema` made. Compared through
//! SQLAlchemy's inspector (`python/cyborg_schema.py`): tables, columns with their types,
//! nullability and defaults, keys, indexes, foreign keys with their `ON DELETE`, and the
//! alembic revision.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::testing::{
    cyborg_conductor_schema, cyborg_database_config, cyborg_dbsync_upgrade, cyborg_schema_script,
    mysql_execute,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn schema_file(backend: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schema/{backend}.sql"))
}

fn apply(url: &str, file: &Path) {
    let out = cyborg_schema_script(&["apply", "--url", url, "--file", &file.to_string_lossy()]);
    assert!(out.starts_with("applied "), "{out}");
}

fn compare(reference: &str, candidate: &str) -> Value {
    compare_with(&["--reference", reference, "--candidate", candidate])
}

fn compare_with(args: &[&str]) -> Value {
    let out = cyborg_schema_script(&[&["compare"], args].concat());
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `reference` and `candidate` (made from the declared schema) are the same schema; a
/// copy of the candidate with one column's type changed is told apart, so the
/// comparison can fail.
fn same_schema(reference: &str, candidate: &str, altered: &str, alter: &str) {
    let diff = compare(reference, candidate);
    assert!(diff["facts"].as_u64() > Some(100), "{diff}");
    assert_eq!(
        (&diff["missing"], &diff["extra"]),
        (&json!([]), &json!([])),
        "the declared schema is not Cyborg 17's"
    );
    let changed = compare(reference, altered);
    assert_ne!(
        changed["missing"],
        json!([]),
        "{alter}: not seen: {changed}"
    );
}

#[test]
fn the_declared_schema_is_the_one_cyborg_makes_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = |name: &str| format!("sqlite:///{}", dir.path().join(name).display());
    let config = dir.path().join("cyborg.conf");
    std::fs::write(
        &config,
        cyborg_database_config(&url("cyborg.sqlite"), &dir.path().join("cyborg.log")),
    )
    .expect("write cyborg.conf");
    cyborg_conductor_schema(&config);
    apply(&url("declared.sqlite"), &schema_file("sqlite"));
    // One index less: a fact of Cyborg's schema the altered copy lacks.
    let altered = dir.path().join("altered.sql");
    let alter = "DROP INDEX deployables_device_id_idx;";
    std::fs::write(
        &altered,
        format!(
            "{}\n{alter}\n",
            std::fs::read_to_string(schema_file("sqlite")).expect("read")
        ),
    )
    .expect("write");
    apply(&url("altered.sqlite"), &altered);
    same_schema(
        &url("cyborg.sqlite"),
        &url("declared.sqlite"),
        &url("altered.sqlite"),
        alter,
    );
}

#[test]
fn the_declared_schema_is_the_one_cyborg_dbsync_makes_on_mariadb() {
    let server = std::env::var("VERSO_TEST_MYSQL_URL").unwrap_or_else(|_| {
        panic!("the MariaDB tests need the test server: run scripts/start-mariadb.sh (scripts/test.sh does) or set VERSO_TEST_MYSQL_URL")
    });
    let base = server.trim_end_matches('/');
    let rest = base.strip_prefix("mysql://").expect("a mysql:// URL");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let names = ["ref", "new", "alt"].map(|k| format!("cyborg_test_schema_{k}_{suffix}"));
    for name in &names {
        mysql_execute(
            &server,
            &format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"),
        );
    }
    let url = |name: &str| format!("mysql+pymysql://{rest}/{name}?charset=utf8mb4");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("cyborg.conf");
    std::fs::write(
        &config,
        cyborg_database_config(&url(&names[0]), &dir.path().join("cyborg.log")),
    )
    .expect("write cyborg.conf");
    cyborg_dbsync_upgrade(&config);
    apply(&url(&names[1]), &schema_file("mysql"));
    let altered = dir.path().join("altered.sql");
    let alter = "ALTER TABLE `devices` MODIFY `status` varchar(11) NOT NULL;";
    std::fs::write(
        &altered,
        format!(
            "{}\n{alter}\n",
            std::fs::read_to_string(schema_file("mysql")).expect("read")
        ),
    )
    .expect("write");
    apply(&url(&names[2]), &altered);
    same_schema(&url(&names[0]), &url(&names[1]), &url(&names[2]), alter);
    for name in &names {
        mysql_execute(&server, &format!("DROP DATABASE {name}"));
    }
}

/// PostgreSQL has no Cyborg-made schema to compare with (Cyborg's migrations and models
/// stop at their unnamed `Enum`s there): `schema/postgres.sql` has every table, column,
/// key, index and foreign key of the SQLite schema Cyborg makes, with PostgreSQL's types
/// (`TIMESTAMP` for `DATETIME`, identity ids).
#[test]
fn the_declared_postgresql_schema_is_the_one_cyborg_makes_on_sqlite() {
    let server = std::env::var("VERSO_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!("the PostgreSQL tests need the test cluster: run scripts/start-postgres.sh (scripts/test.sh does) or set VERSO_TEST_POSTGRES_URL")
    });
    let (base, _) = server
        .rsplit_once('/')
        .expect("a postgres:// URL with a database");
    let rest = base
        .strip_prefix("postgres://")
        .or_else(|| base.strip_prefix("postgresql://"))
        .expect("a postgres:// URL");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let name = format!("cyborg_test_schema_{suffix}");
    let psql = |sql: &str| {
        let script = "import sys, psycopg2\n\
                      c = psycopg2.connect(sys.argv[1])\n\
                      c.autocommit = True\n\
                      c.cursor().execute(sys.argv[2])\n";
        let out = std::process::Command::new(accel_cyborg17::testing::python())
            .args(["-c", script, &server, sql])
            .output()
            .expect("the test Python runs");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    psql(&format!("CREATE DATABASE {name}"));
    let pg = format!("postgresql+psycopg2://{rest}/{name}");
    apply(&pg, &schema_file("postgres"));

    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = format!("sqlite:///{}", dir.path().join("cyborg.sqlite").display());
    let config = dir.path().join("cyborg.conf");
    std::fs::write(
        &config,
        cyborg_database_config(&sqlite, &dir.path().join("cyborg.log")),
    )
    .expect("write cyborg.conf");
    cyborg_conductor_schema(&config);
    let diff = compare_with(&["--across", "--reference", &sqlite, "--candidate", &pg]);
    assert!(diff["facts"].as_u64() > Some(100), "{diff}");
    assert_eq!(
        (&diff["missing"], &diff["extra"]),
        (&json!([]), &json!([])),
        "the declared PostgreSQL schema is not Cyborg 17's"
    );
    // Without `--across` only the times' types and the ids' generation differ: the
    // liberties taken are the documented ones, and the comparison sees them.
    let strict = compare(&sqlite, &pg);
    let columns: std::collections::BTreeSet<(&str, &str)> = strict["missing"]
        .as_array()
        .expect("missing")
        .iter()
        .map(|f| (f[0].as_str().unwrap_or(""), f[2].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        columns,
        std::collections::BTreeSet::from([
            ("column", "created_at"),
            ("column", "expire"),
            ("column", "id"),
            ("column", "updated_at"),
        ]),
        "{strict}"
    );
    psql(&format!("DROP DATABASE {name}"));
}
