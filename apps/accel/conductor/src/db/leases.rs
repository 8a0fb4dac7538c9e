//! Leases (migration 101): one holder at a time for a deployment-wide task, by the
//! database's clock.

use super::{Backend, Db, DbError};
use std::time::Duration;

/// Milliseconds since the Unix epoch by the database's clock, as SQL.
pub(crate) fn now_ms(b: Backend) -> &'static str {
    match b {
        Backend::Postgres => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
        Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        // SYSDATE, not NOW: the time the function runs, as clock_timestamp() (NOW is
        // the statement's start).
        Backend::Mysql => "CAST(UNIX_TIMESTAMP(SYSDATE(3)) * 1000 AS SIGNED)",
    }
}

impl Db {
    /// Takes or renews lease `name` for `holder` until `ttl` from now: `true` if
    /// `holder` holds it now (it was free, expired, or already `holder`'s), `false` if
    /// another holder's lease runs. One statement, so two takers never both win.
    pub async fn take_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, DbError> {
        let now = now_ms(self.backend());
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        if self.backend == Backend::Mysql {
            return self.take_lease_mysql(name, holder, ttl_ms).await;
        }
        let sql = format!(
            "INSERT INTO leases (name, holder, expires_ms) VALUES ($1, $2, {now} + $3) \
             ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms \
             WHERE leases.holder = excluded.holder OR leases.expires_ms < {now}"
        );
        let done = sqlx::query(&sql)
            .bind(name)
            .bind(holder)
            .bind(ttl_ms)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// [`Db::take_lease`] on MySQL, which has no conditional upsert: an update where the
    /// lease is `holder`'s or has expired (each statement alone is atomic, and a row
    /// lock orders two takers' updates: the second sees the first's expiry), else an
    /// insert, which a lease row that exists refuses.
    async fn take_lease_mysql(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<bool, DbError> {
        let now = now_ms(Backend::Mysql);
        let renewed = sqlx::query(&self.backend.sql(&format!(
            "UPDATE leases SET holder = $1, expires_ms = {now} + $2 \
             WHERE name = $3 AND (holder = $4 OR expires_ms < {now})"
        )))
        .bind(holder)
        .bind(ttl_ms)
        .bind(name)
        .bind(holder)
        .execute(self.pool())
        .await?;
        if renewed.rows_affected() == 1 {
            return Ok(true);
        }
        let taken = sqlx::query(&self.backend.sql(&format!(
            "INSERT INTO leases (name, holder, expires_ms) VALUES ($1, $2, {now} + $3)"
        )))
        .bind(name)
        .bind(holder)
        .bind(ttl_ms)
        .execute(self.pool())
        .await;
        match taken {
            Ok(_) => Ok(true),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Gives lease `name` up if `holder` holds it (a stopping holder lets another take
    /// over at once instead of after the expiry).
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<(), DbError> {
        sqlx::query(
            &self
                .backend
                .sql("DELETE FROM leases WHERE name = $1 AND holder = $2"),
        )
        .bind(name)
        .bind(holder)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Who holds lease `name`, if its lease runs.
    pub async fn lease_holder(&self, name: &str) -> Result<Option<String>, DbError> {
        let sql = format!(
            "SELECT holder FROM leases WHERE name = $1 AND expires_ms >= {}",
            now_ms(self.backend())
        );
        let row: Option<(String,)> = sqlx::query_as(&self.backend.sql(&sql))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|(h,)| h))
    }
}
