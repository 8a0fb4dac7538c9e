//! Release N's database schema: migration 1 of the conductor's migrations, and nothing
//! after it.
//!
//! The migrator is built from the conductor's own files
//! (`apps/accel/conductor/migrations/{sqlite,postgres}/0001_initial.sql`, included at
//! compile time), never from a copy: the SQL, hence sqlx's checksum, is the one release
//! N+1's migrator has for version 1, so release N+1 accepts the history release N
//! wrote and applies only its own migrations on top.

use sqlx::migrate::{Migration, MigrationType, Migrator};
use std::borrow::Cow;

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite://path` (created if missing).
    Sqlite,
    /// `postgres://user:pass@host/db`.
    Postgres,
}

impl Backend {
    /// The backend of a database URL, if it names a supported one.
    pub fn of_url(url: &str) -> Option<Backend> {
        if url.starts_with("sqlite:") {
            Some(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Backend::Postgres)
        } else {
            None
        }
    }
}

/// The newest migration release N knows (and applies).
pub const SCHEMA_VERSION: i64 = 1;

const SQLITE_0001: &str = include_str!("../../conductor/migrations/sqlite/0001_initial.sql");
const POSTGRES_0001: &str = include_str!("../../conductor/migrations/postgres/0001_initial.sql");

/// Release N's migrator for `backend`: migration 1 (`initial`) only.
pub fn migrator(backend: Backend) -> Migrator {
    let sql = match backend {
        Backend::Sqlite => SQLITE_0001,
        Backend::Postgres => POSTGRES_0001,
    };
    Migrator {
        migrations: Cow::Owned(vec![Migration::new(
            SCHEMA_VERSION,
            Cow::Borrowed("initial"),
            MigrationType::Simple,
            Cow::Borrowed(sql),
            false,
        )]),
        ..Migrator::DEFAULT
    }
}
