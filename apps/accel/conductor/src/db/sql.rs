//! SQL assembled from a list's filters, with its arguments.

use super::DbError;
use sqlx::any::{Any, AnyArguments, AnyRow};
use sqlx::error::BoxDynError;
use sqlx::{Arguments, Encode, Type};
use std::fmt::Write;

/// SQL text and its arguments, built together: each bound value appends the next
/// numbered placeholder (`$1`, `$2`, ...), which PostgreSQL and SQLite both take.
/// sqlx's `QueryBuilder` does this job, but under the Any driver it writes `?`, which
/// PostgreSQL refuses (sqlx issue #3000, open in 0.8); this is the same idea with the
/// placeholders both backends read.
pub(super) struct Sql {
    text: String,
    args: AnyArguments<'static>,
    count: usize,
    /// The first value that did not encode, reported by [`Sql::build`].
    failed: Option<BoxDynError>,
}

impl Sql {
    /// Starts with `text`.
    pub(super) fn new(text: impl Into<String>) -> Sql {
        Sql {
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
            None => Ok((self.text, self.args)),
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
