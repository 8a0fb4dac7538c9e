//! Cyborg 17's database schema as SQL, one script per backend (the files of
//! `apps/accel/cyborg17/schema/`), each ending stamped with Cyborg's alembic head
//! [`ALEMBIC_HEAD`]: what a database looks like after `cyborg-dbsync upgrade` (MariaDB)
//! or Cyborg's `create_schema` (SQLite). `tests/schema.rs` checks each against what
//! Cyborg's own code makes.

/// The alembic revision of Cyborg 17's schema (`alembic_version.version_num`).
pub const ALEMBIC_HEAD: &str = "b47c8f2d1e3a";

/// The schema on MySQL/MariaDB (exactly what `cyborg-dbsync upgrade` makes).
pub const MYSQL: &str = include_str!("../schema/mysql.sql");

/// The schema on SQLite (what Cyborg's `create_schema` makes).
pub const SQLITE: &str = include_str!("../schema/sqlite.sql");

/// The schema on PostgreSQL (the SQLite one in PostgreSQL's types; Cyborg itself never
/// made a PostgreSQL schema).
pub const POSTGRES: &str = include_str!("../schema/postgres.sql");
