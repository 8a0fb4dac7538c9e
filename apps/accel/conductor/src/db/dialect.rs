//! What a query's text depends on: the backend (placeholders, upserts, and how each
//! reads and writes Cyborg 17's column types).
//!
//! accel's database is Cyborg 17's schema plus accel's additions, and Cyborg's columns
//! have types sqlx's Any driver does not all read or write as plain text and integers:
//! times are `DATETIME` (SQLite, MySQL) or `TIMESTAMP` (PostgreSQL), flags `BOOLEAN`
//! (PostgreSQL's a type of its own), and MySQL's `ENUM` and `TEXT` columns arrive as
//! bytes. So a query names such a column through these helpers. Times are
//! written in Cyborg's form (`YYYY-MM-DD HH:MM:SS.ffffff`, UTC without a zone, as
//! oslo.db writes them) and read in Python's `isoformat()` of the aware time
//! (`2026-12-06T12:00:01.250000+00:00`), what Cyborg 17's API shows and an RFC 3339
//! parser reads.

use super::Backend;
use std::borrow::Cow;

/// How queries are written for a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    /// The database.
    pub backend: Backend,
}

impl Dialect {
    /// `text` with this backend's placeholders ([`Backend::sql`]).
    pub fn sql(self, text: &str) -> Cow<'_, str> {
        self.backend.sql(text)
    }

    /// The stored form of the time `t`. Cyborg's MySQL `DATETIME` holds whole seconds
    /// (it would round a fraction), so there the fraction is left out, and a time reads
    /// back as written.
    pub fn time_text(self, t: chrono::DateTime<chrono::Utc>) -> String {
        match self.backend {
            Backend::Mysql => t.naive_utc().format("%Y-%m-%d %H:%M:%S").to_string(),
            Backend::Sqlite | Backend::Postgres => {
                t.naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string()
            }
        }
    }

    /// The time stored as `stored` (written by [`Dialect::now`] or
    /// [`Dialect::time_text`]) as a query reads it ([`Dialect::time`]).
    pub fn shown_time(self, stored: &str) -> String {
        let iso = format!("{}+00:00", stored.replacen(' ', "T", 1));
        iso.replacen(".000000+", "+", 1)
    }

    /// Now, in the stored form.
    pub fn now(self) -> String {
        self.time_text(chrono::Utc::now())
    }

    /// What follows the placeholder of a time written or compared (`updated_at =
    /// $7{ts}`): PostgreSQL's `TIMESTAMP` takes no text argument without a cast. (The
    /// placeholder stays in the query's literal, so every literal keeps its `$1..$n` in
    /// order.)
    pub fn ts(self) -> &'static str {
        match self.backend {
            Backend::Postgres => "::timestamp",
            Backend::Sqlite | Backend::Mysql => "",
        }
    }

    /// The time column `col` read as text (`''` when unset: Cyborg's times may be null).
    pub fn time(self, col: &str) -> String {
        // Python's isoformat() leaves out a zero fraction.
        let iso = match self.backend {
            Backend::Sqlite => format!("replace(CAST({col} AS TEXT), ' ', 'T') || '+00:00'"),
            Backend::Postgres => {
                format!("to_char({col}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')")
            }
            Backend::Mysql => format!("DATE_FORMAT({col}, '%Y-%m-%dT%H:%i:%s.%f+00:00')"),
        };
        format!("COALESCE(REPLACE({iso}, '.000000+', '+'), '')")
    }

    /// The time column `col` read as text, `AS` itself.
    pub fn time_as(self, col: &str) -> String {
        aliased(col, self.time(col))
    }

    /// The flag column `col` read as 0 or 1.
    pub fn flag(self, col: &str) -> String {
        match self.backend {
            Backend::Mysql => format!("CAST(COALESCE({col}, 0) AS SIGNED)"),
            Backend::Postgres => format!("CAST(COALESCE({col}, FALSE) AS INTEGER)"),
            Backend::Sqlite => format!("CAST(COALESCE({col}, 0) AS INTEGER)"),
        }
    }

    /// The flag column `col` read as 0 or 1, `AS` itself.
    pub fn flag_as(self, col: &str) -> String {
        aliased(col, self.flag(col))
    }

    /// The literal a flag column is set to or compared with (`in_use = {yes}`):
    /// PostgreSQL's `BOOLEAN` compares with no integer.
    pub fn yes(self) -> &'static str {
        "TRUE"
    }

    /// See [`Dialect::yes`].
    pub fn no(self) -> &'static str {
        "FALSE"
    }

    /// The `ENUM` column `col` of Cyborg's (a device or handle type, a request state)
    /// read as text: the Any driver reads no MySQL `ENUM`. Cast to a `VARCHAR` short
    /// enough to stay one when MariaDB sorts through a temporary table (longer ones
    /// become `BLOB`s there, which the driver hands over as bytes). Cyborg's `TEXT`
    /// columns need no cast: their rows read bytes as text (`rows::Text`).
    pub fn text(self, col: &str) -> String {
        match self.backend {
            Backend::Mysql => format!("CAST({col} AS CHAR(255))"),
            Backend::Sqlite | Backend::Postgres => col.to_owned(),
        }
    }

    /// The `ENUM` column `col` read as text, `AS` itself.
    pub fn text_as(self, col: &str) -> String {
        aliased(col, self.text(col))
    }
}

/// `expr`, the column `col` (`t.name`) read through a helper above, named as the column
/// again; the column itself where the helper left it as it is.
fn aliased(col: &str, expr: String) -> String {
    if expr == col {
        return expr;
    }
    let name = col.rsplit('.').next().unwrap_or(col);
    format!("{expr} AS {name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_oslo_db_writes_them() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-12-06T12:00:01.25Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .ok();
        let Some(t) = t else { panic!("a time") };
        let sqlite = Dialect {
            backend: Backend::Sqlite,
        };
        let mysql = Dialect {
            backend: Backend::Mysql,
        };
        assert_eq!(sqlite.time_text(t), "2026-12-06 12:00:01.250000");
        assert_eq!(mysql.time_text(t), "2026-12-06 12:00:01");
        assert_eq!(
            sqlite.shown_time("2026-12-06 12:00:01.000000"),
            "2026-12-06T12:00:01+00:00"
        );
    }
}
