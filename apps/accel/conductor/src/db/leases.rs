//! Leases (migration 7): one holder at a time for a deployment-wide task, by the
//! database's clock.

use super::{Backend, Db, DbError};
use std::time::Duration;

/// Milliseconds since the Unix epoch by the database's clock, as SQL.
pub(crate) fn now_ms(b: Backend) -> &'static str {
    match b {
        Backend::Postgres => "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
        Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
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

    /// Gives lease `name` up if `holder` holds it (a stopping holder lets another take
    /// over at once instead of after the expiry).
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<(), DbError> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
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
        let row: Option<(String,)> = sqlx::query_as(&sql)
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|(h,)| h))
    }
}
