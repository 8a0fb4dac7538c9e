//! Placement changes (migration 101): the hosts whose Placement-relevant rows changed
//! since the reconciler last brought them up to date. The database's triggers write
//! the marks; the reconciler reads them, syncs those hosts, and deletes exactly the
//! marks it read ([`Db::forget_placement_changes`]), so a mark made meanwhile stays.

use super::sql::Sql;
use super::{Backend, Db, DbError};
use std::collections::BTreeMap;

/// One host's marks as read: what [`Db::forget_placement_changes`] deletes once the
/// host is up to date.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeMarks(Vec<i64>);

impl ChangeMarks {
    /// How many marks were read (PostgreSQL keeps one per writing transaction, MySQL
    /// one per row written, SQLite one per host).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none were read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Db {
    /// The hosts marked as changed, oldest marks first, reading at most `limit` marks
    /// (the rest are read by a later pass).
    pub async fn placement_changes(
        &self,
        limit: u32,
    ) -> Result<BTreeMap<String, ChangeMarks>, DbError> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            &self
                .backend
                .sql("SELECT hostname, seq FROM placement_changes ORDER BY seq LIMIT $1"),
        )
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        let mut hosts: BTreeMap<String, ChangeMarks> = BTreeMap::new();
        for (host, seq) in rows {
            hosts.entry(host).or_default().0.push(seq);
        }
        Ok(hosts)
    }

    /// Deletes `host`'s marks that were read as `marks`; a mark the host got after
    /// they were read stays (on SQLite a new mark raises the host's seq, on PostgreSQL
    /// and MySQL it is a row of its own).
    pub async fn forget_placement_changes(
        &self,
        host: &str,
        marks: &ChangeMarks,
    ) -> Result<(), DbError> {
        if marks.is_empty() {
            return Ok(());
        }
        let mut sql = Sql::new(
            self.backend,
            "DELETE FROM placement_changes WHERE hostname = ",
        );
        sql.bind(host.to_owned()).push(" AND seq IN ");
        sql.bind_list(marks.0.clone());
        sql.execute(self.pool()).await?;
        Ok(())
    }

    /// Records the providers Placement now holds for `host`'s deployables, each as
    /// `(deployable name, provider UUID)`, in the deployables' `rp_uuid` (Cyborg's
    /// column, which Cyborg's conductor writes once it made the provider).
    /// Only rows that differ are written, so a host synced again with the same providers
    /// writes nothing; no trigger watches `rp_uuid`, so this marks nothing changed.
    pub async fn record_providers(
        &self,
        host: &str,
        providers: &[(&str, &str)],
    ) -> Result<(), DbError> {
        let mut tx = self.pool.begin().await?;
        for (name, uuid) in providers {
            sqlx::query(&self.backend.sql(
                "UPDATE deployables SET rp_uuid = $1 \
                 WHERE hostname = $2 AND name = $3 AND (rp_uuid IS NULL OR rp_uuid <> $4)",
            ))
            .bind(*uuid)
            .bind(host)
            .bind(*name)
            .bind(*uuid)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Marks `host` as changed, as the triggers do: the reconciler's way to have a host
    /// it could not sync tried again by the next pass.
    pub async fn mark_placement_changed(&self, host: &str) -> Result<(), DbError> {
        let sql = match self.backend() {
            Backend::Sqlite => {
                "INSERT INTO placement_changes (hostname, seq) \
                 VALUES ($1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM placement_changes)) \
                 ON CONFLICT (hostname) DO UPDATE SET seq = excluded.seq"
            }
            Backend::Postgres => {
                "INSERT INTO placement_changes (hostname) VALUES ($1) ON CONFLICT DO NOTHING"
            }
            Backend::Mysql => "INSERT INTO placement_changes (hostname) VALUES ($1)",
        };
        sqlx::query(&self.backend.sql(sql))
            .bind(host)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
