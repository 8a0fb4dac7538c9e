//! SQL assembled from a list's filters, with its arguments; and each backend's form of
//! the numbered placeholders every query is written with.

use super::{Backend, DbError};
use sqlx::any::{Any, AnyArguments, AnyRow};
use sqlx::error::BoxDynError;
use sqlx::{Arguments, Encode, Type};
use std::borrow::Cow;
use std::fmt::Write;

impl Backend {
    /// `text`, written with numbered placeholders (`$1`, `$2`, ... in that order, each
    /// once), in the form this backend reads: as written for PostgreSQL and SQLite, each
    /// `$N` a `?` for MySQL/MariaDB, which has only positional placeholders. Text inside
    /// quotes is left alone. A query whose placeholders are not `$1..$n` in order is left
    /// as written, so MySQL refuses it with a syntax error instead of binding values to
    /// the wrong places (the conductor's queries are checked for that order by
    /// `placeholders_of_every_query_are_in_order`).
    pub fn sql(self, text: &str) -> Cow<'_, str> {
        if self != Backend::Mysql {
            return Cow::Borrowed(text);
        }
        mysql_placeholders(text).map_or(Cow::Borrowed(text), Cow::Owned)
    }
}

impl Backend {
    /// The clause after an `INSERT` that replaces `columns` of the row whose unique
    /// `key` the insert collides with: PostgreSQL's and SQLite's `ON CONFLICT ... DO
    /// UPDATE`, MySQL's `ON DUPLICATE KEY UPDATE` (which names no key: any unique one).
    pub(crate) fn replace_on_conflict(self, key: &str, columns: &[&str]) -> String {
        match self {
            Backend::Sqlite | Backend::Postgres => {
                let set: Vec<String> = columns
                    .iter()
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect();
                format!("ON CONFLICT ({key}) DO UPDATE SET {}", set.join(", "))
            }
            Backend::Mysql => {
                let set: Vec<String> = columns
                    .iter()
                    .map(|c| format!("{c} = VALUES({c})"))
                    .collect();
                format!("ON DUPLICATE KEY UPDATE {}", set.join(", "))
            }
        }
    }
}

/// The placeholders `$N` of `text` outside quotes, in order.
fn placeholders(text: &str) -> Vec<(std::ops::Range<usize>, Option<usize>)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut quote = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'\'' || b == b'"' || b == b'`' => quote = Some(b),
            None if b == b'$' => {
                let end = bytes[i + 1..]
                    .iter()
                    .position(|c| !c.is_ascii_digit())
                    .map_or(bytes.len(), |n| i + 1 + n);
                if end > i + 1 {
                    out.push((i..end, text[i + 1..end].parse().ok()));
                    i = end;
                    continue;
                }
            }
            None => {}
        }
        i += 1;
    }
    out
}

/// `text` with `$1..$n` as `?`, or `None` when its placeholders are not exactly
/// `$1..$n` in order (or it has none).
fn mysql_placeholders(text: &str) -> Option<String> {
    let found = placeholders(text);
    if found.is_empty()
        || found
            .iter()
            .enumerate()
            .any(|(k, (_, n))| *n != Some(k + 1))
    {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, _) in found {
        out.push_str(&text[at..range.start]);
        out.push('?');
        at = range.end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// SQL text and its arguments, built together: each bound value appends the next
/// numbered placeholder (`$1`, `$2`, ...), which PostgreSQL and SQLite both take (and
/// [`Backend::sql`] turns into MySQL's `?`).
/// sqlx's `QueryBuilder` does this job, but under the Any driver it writes `?`, which
/// PostgreSQL refuses (sqlx issue #3000, open in 0.8); this is the same idea with the
/// placeholders both backends read.
pub(super) struct Sql {
    backend: Backend,
    text: String,
    args: AnyArguments<'static>,
    count: usize,
    /// The first value that did not encode, reported by [`Sql::build`].
    failed: Option<BoxDynError>,
}

impl Sql {
    /// Starts with `text`, for `backend`.
    pub(super) fn new(backend: Backend, text: impl Into<String>) -> Sql {
        Sql {
            backend,
            text: text.into(),
            args: AnyArguments::default(),
            count: 0,
            failed: None,
        }
    }

    /// Appends SQL text (never a value: values are bound).
    pub(super) fn push(&mut self, text: &str) -> &mut Sql {
        self.text.push_str(text);
        self
    }

    /// Appends the next placeholder and binds `value` to it.
    pub(super) fn bind<T>(&mut self, value: T) -> &mut Sql
    where
        T: 'static + Encode<'static, Any> + Type<Any>,
    {
        if let Err(e) = self.args.add(value) {
            self.failed.get_or_insert(e);
        }
        self.count += 1;
        // Writing to a String cannot fail.
        let _ = write!(self.text, "${}", self.count);
        self
    }

    /// Appends `(p1, p2, ...)`, each bound to one of `values`; `(NULL)` when there are
    /// none (`x IN (NULL)` holds for no row, as an empty list would).
    pub(super) fn bind_list<T>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Sql
    where
        T: 'static + Encode<'static, Any> + Type<Any>,
    {
        self.push("(");
        let mut none = true;
        for v in values {
            if !none {
                self.push(", ");
            }
            self.bind(v);
            none = false;
        }
        if none {
            self.push("NULL");
        }
        self.push(")")
    }

    /// The text and its arguments, or the first value that did not encode.
    pub(super) fn build(self) -> Result<(String, AnyArguments<'static>), DbError> {
        match self.failed {
            Some(e) => Err(DbError::Query(sqlx::Error::Encode(e))),
            None => {
                let text = match self.backend.sql(&self.text) {
                    Cow::Owned(text) => text,
                    Cow::Borrowed(_) => self.text,
                };
                Ok((text, self.args))
            }
        }
    }

    /// Runs it as a query of `table`'s rows; a stored value that does not decode is
    /// [`DbError::Corrupt`].
    pub(super) async fn fetch_all<'c, T, E>(
        self,
        table: &'static str,
        e: E,
    ) -> Result<Vec<T>, DbError>
    where
        T: for<'r> sqlx::FromRow<'r, AnyRow> + Send + Unpin,
        E: sqlx::Executor<'c, Database = Any>,
    {
        let (text, args) = self.build()?;
        sqlx::query_as_with::<_, T, _>(&text, args)
            .fetch_all(e)
            .await
            .map_err(super::read_error(table))
    }

    /// Runs it as a write; the number of rows it changed.
    pub(super) async fn execute<'c, E>(self, e: E) -> Result<u64, DbError>
    where
        E: sqlx::Executor<'c, Database = Any>,
    {
        let (text, args) = self.build()?;
        Ok(sqlx::query_with(&text, args)
            .execute(e)
            .await?
            .rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_takes_question_marks_in_order_and_leaves_quotes_alone() {
        let q = "SELECT '$1', \"$2\" FROM t WHERE a = $1 AND b = $2 LIMIT $3";
        assert_eq!(
            Backend::Mysql.sql(q),
            "SELECT '$1', \"$2\" FROM t WHERE a = ? AND b = ? LIMIT ?"
        );
        assert_eq!(Backend::Postgres.sql(q), q);
        assert_eq!(Backend::Sqlite.sql(q), q);
        // Out of order, repeated, or none: as written (MySQL then refuses it).
        for q in ["a = $2 AND b = $1", "a = $1 OR b = $1", "SELECT 1", "x = $"] {
            assert_eq!(Backend::Mysql.sql(q), q);
        }
        assert_eq!(
            Backend::Mysql.sql("$1,$2,$3,$4,$5,$6,$7,$8,$9,$10"),
            "?,?,?,?,?,?,?,?,?,?"
        );
    }

    /// Every query of the conductor is written with `$1..$n` in order, each once, so
    /// [`Backend::sql`] can give MySQL its `?`s: read from the sources, so a query on a
    /// path no MySQL test takes is checked too.
    #[test]
    fn placeholders_of_every_query_are_in_order() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut checked = 0;
        let mut bad = Vec::new();
        let mut stack = vec![src];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("the sources") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                // This file's own tests hold placeholders out of order on purpose.
                if path.extension().is_none_or(|e| e != "rs") || path.ends_with("db/sql.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("a source");
                for literal in string_literals(&text) {
                    // A query has `$1`; a piece of one without it (a condition a query
                    // is made with, as the fleet record's rule) is checked where the
                    // query runs on MySQL, by the MySQL tests.
                    if !placeholders(&literal).iter().any(|(_, n)| *n == Some(1)) {
                        continue;
                    }
                    checked += 1;
                    if mysql_placeholders(&literal).is_none() {
                        bad.push(format!("{}: {literal}", path.display()));
                    }
                }
            }
        }
        assert!(checked > 50, "only {checked} queries found");
        assert!(
            bad.is_empty(),
            "placeholders not $1..$n in order:\n{}",
            bad.join("\n")
        );
    }

    /// The contents of the plain string literals of Rust source `text` (a `\` line
    /// continuation joins its lines, as the compiler does); comments and char literals
    /// are skipped.
    fn string_literals(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '/' if chars.peek() == Some(&'/') => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                // A char literal ('"', '\'', '\\') or a lifetime ('a).
                '\'' => {
                    let ahead: Vec<char> = chars.clone().take(3).collect();
                    let skip = match ahead.as_slice() {
                        ['\\', _, '\'', ..] => 3,
                        [_, '\'', ..] => 2,
                        _ => 0,
                    };
                    for _ in 0..skip {
                        chars.next();
                    }
                }
                '"' => {
                    let mut lit = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => break,
                            '\\' => match chars.next() {
                                Some('\n') => {
                                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                                        chars.next();
                                    }
                                }
                                Some(e) => {
                                    lit.push('\\');
                                    lit.push(e);
                                }
                                None => {}
                            },
                            c => lit.push(c),
                        }
                    }
                    out.push(lit);
                }
                _ => {}
            }
        }
        out
    }
}
