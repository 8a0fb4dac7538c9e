//! Cyborg 17's database schema as this crate declares it (`schema/mysql.sql`,
//! `schema/sqlite.sql`, `schema/postgres.sql`) is the one the pinned openstack-cyborg
//! makes: on MariaDB, a database `cyborg-dbsync upgrade` migrated (how every Cyborg 17
//! deployment's database was made); on SQLite, one Cyborg's `create_schema` made; on
//! PostgreSQL, where Cyborg makes none, the SQLite one in PostgreSQL's types. Compared
//! through SQLAlchemy's inspector (`python/cyborg_schema.py`): tables, columns with their
//! types, nullability and defaults, keys, indexes, foreign keys with their `ON DELETE`,
//! and the alembic revision.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::testing::{
    cyborg_conductor_schema, cyborg_dbsync_upgrade, cyborg_schema_apply, cyborg_schema_compare,
    mysql_execute, postgres_execute, write_cyborg_database_config,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn schema_file(backend: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("schema/{backend}.sql"))
}

/// `schema/<backend>.sql` with the statement `alter` after it, written in `dir`.
fn altered_schema(dir: &Path, backend: &str, alter: &str) -> PathBuf {
    let declared = std::fs::read_to_string(schema_file(backend)).expect("read the schema");
    let path = dir.join("altered.sql");
    std::fs::write(&path, format!("{declared}\n{alter}\n")).expect("write");
    path
}

fn compare(reference: &str, candidate: &str) -> Value {
    cyborg_schema_compare(&["--reference", reference, "--candidate", candidate])
}

/// `reference` and `candidate` (made from the declared schema) are the same schema; a
/// copy of the candidate altered by `alter` is told apart, so the comparison can fail.
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
    cyborg_conductor_schema(&write_cyborg_database_config(
        dir.path(),
        &url("cyborg.sqlite"),
    ));
    cyborg_schema_apply(&url("declared.sqlite"), &schema_file("sqlite"));
    // One index less: a fact of Cyborg's schema the altered copy lacks.
    let alter = "DROP INDEX deployables_device_id_idx;";
    cyborg_schema_apply(
        &url("altered.sqlite"),
        &altered_schema(dir.path(), "sqlite", alter),
    );
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
    cyborg_dbsync_upgrade(&write_cyborg_database_config(dir.path(), &url(&names[0])));
    cyborg_schema_apply(&url(&names[1]), &schema_file("mysql"));
    let alter = "ALTER TABLE `devices` MODIFY `status` varchar(11) NOT NULL;";
    cyborg_schema_apply(&url(&names[2]), &altered_schema(dir.path(), "mysql", alter));
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
    postgres_execute(&server, &format!("CREATE DATABASE {name}"));
    let pg = format!("postgresql+psycopg2://{rest}/{name}");
    cyborg_schema_apply(&pg, &schema_file("postgres"));

    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite = format!("sqlite:///{}", dir.path().join("cyborg.sqlite").display());
    cyborg_conductor_schema(&write_cyborg_database_config(dir.path(), &sqlite));
    let diff = cyborg_schema_compare(&["--across", "--reference", &sqlite, "--candidate", &pg]);
    assert!(diff["facts"].as_u64() > Some(100), "{diff}");
    assert_eq!(
        (&diff["missing"], &diff["extra"]),
        (&json!([]), &json!([])),
        "the declared PostgreSQL schema is not Cyborg 17's"
    );
    // Without `--across` only the times' types and the ids' generation differ: the
    // liberties taken are the documented ones, and the comparison sees them.
    let strict = compare(&sqlite, &pg);
    let columns: BTreeSet<(&str, &str)> = strict["missing"]
        .as_array()
        .expect("missing")
        .iter()
        .map(|f| (f[0].as_str().unwrap_or(""), f[2].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        columns,
        BTreeSet::from([
            ("column", "created_at"),
            ("column", "expire"),
            ("column", "id"),
            ("column", "updated_at"),
        ]),
        "{strict}"
    );
    postgres_execute(&server, &format!("DROP DATABASE {name}"));
}
