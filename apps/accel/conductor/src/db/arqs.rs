//! Accelerator requests: creation, binding, release, deletion, and the invariants
//! between requests and devices.

use super::profiles::lock_profile;
use super::sql::Sql;
use super::{after_marker, check_binding, check_len, new_uuid, page_limit, read_error};
use super::{rp_uuid, shown};
use super::{ArqRow, Db, DbError, DeviceStatus, Dialect, ListFilter, ARQS, INVENTORY_STATUS};
use crate::lifecycle::ArqState;
use accel_objects::CleanupState;
use std::collections::BTreeMap;
use std::time::Duration;

/// A deployable's id and name (whose [`rp_uuid`] is its resource provider).
#[derive(sqlx::FromRow)]
struct Named {
    id: i64,
    name: String,
}

impl Db {
    /// Creates a profile's accelerator requests as Cyborg does: for each group (or only
    /// `group_id`), one per unit it asks for ([`crate::groups::arq_count`]). By name only,
    /// as [`Db::create_arq`].
    pub async fn create_arqs(
        &self,
        profile: &str,
        group_id: Option<i64>,
        project_id: Option<&str>,
    ) -> Result<Vec<ArqRow>, DbError> {
        let p = self.profile_by_name(profile).await?;
        let groups: Vec<(i64, &BTreeMap<String, String>)> = match group_id {
            None => (0..).zip(p.groups.iter()).collect(),
            Some(g) => {
                let group = usize::try_from(g)
                    .ok()
                    .and_then(|i| p.groups.get(i))
                    .ok_or_else(|| DbError::Invalid {
                        what: "device profile group id",
                        why: format!("profile {} has {} groups", p.name, p.groups.len()),
                    })?;
                vec![(g, group)]
            }
        };
        let mut out = Vec::new();
        for (g, group) in groups {
            for _ in 0..crate::groups::arq_count(group) {
                out.push(self.create_arq(&p.name, g, project_id).await?);
            }
        }
        Ok(out)
    }

    /// Creates a request in state `Initial` for one group of the profile named `profile`
    /// (its name, as [`Db::profile`] resolved it).
    pub async fn create_arq(
        &self,
        profile: &str,
        group_id: i64,
        project_id: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        check_len("project id", project_id)?;
        // By name only: callers resolve what the client typed with `profile` first, and
        // a name may be another profile's UUID.
        let p = self.profile_by_name(profile).await?;
        if group_id < 0 || group_id as usize >= p.groups.len() {
            return Err(DbError::Invalid {
                what: "device profile group id",
                why: format!(
                    "{group_id}: profile {} has groups 0..{}",
                    p.name,
                    p.groups.len()
                ),
            });
        }
        let uuid = new_uuid();
        let d = self.dialect();
        let at = d.now();
        let mut tx = self.pool.begin().await?;
        // A profile deleted meanwhile is NotFound here, never an orphan request.
        lock_profile(&mut tx, &p).await?;
        // Cyborg's: the profile by id, and the one substate Cyborg 17 has.
        sqlx::query(&d.sql(&format!("INSERT INTO {ARQS} (uuid, state, device_profile_id, device_profile_group_id, project_id, created_at, updated_at, substate) \
                 VALUES ($1, $2, $3, $4, $5, $6{ts}, $7{ts}, 'Initial')", ts = d.ts())))
            .bind(&uuid)
            .bind(ArqState::Initial.as_str())
            .bind(p.id)
            .bind(group_id)
            .bind(project_id)
            .bind(&at)
            .bind(&at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        self.arq(&uuid).await
    }

    /// One request.
    pub async fn arq(&self, uuid: &str) -> Result<ArqRow, DbError> {
        sqlx::query_as(&self.backend.sql(&format!(
            "{} WHERE r.uuid = $1",
            self.dialect().arq_select()
        )))
        .bind(uuid)
        .fetch_optional(&self.pool)
        .await
        .map_err(read_error("accelerator_requests"))?
        .ok_or_else(|| DbError::NotFound {
            kind: "accelerator request",
            id: shown(uuid),
        })
    }

    /// Requests, optionally of one instance, oldest first.
    pub async fn arqs(&self, instance: Option<&str>) -> Result<Vec<ArqRow>, DbError> {
        self.arqs_page(
            instance,
            &ListFilter {
                limit: Some(u32::MAX),
                ..ListFilter::default()
            },
        )
        .await
    }

    /// A page of requests, optionally of one instance and of one project
    /// (`filter.project`), oldest first: those after the request with UUID
    /// `filter.marker`, at most `filter.limit` (`filter.host` ignored).
    pub async fn arqs_page(
        &self,
        instance: Option<&str>,
        filter: &ListFilter,
    ) -> Result<Vec<ArqRow>, DbError> {
        let mut sql = Sql::new(
            self.backend,
            format!("{} WHERE 1 = 1", self.dialect().arq_select()),
        );
        if let Some(instance) = instance.filter(|i| !i.is_empty()) {
            sql.push(" AND r.instance_uuid = ")
                .bind(instance.to_owned());
        }
        if let Some(project) = filter.project.as_ref().filter(|p| !p.is_empty()) {
            sql.push(" AND r.project_id = ").bind(project.clone());
        }
        after_marker(&mut sql, ARQS, "r", filter);
        sql.push(" ORDER BY r.id LIMIT ").bind(page_limit(filter));
        sql.fetch_all("accelerator_requests", &self.pool).await
    }

    /// Moves a request to `to` from an allowed state, in `tx`; the typed conflict names
    /// the state it was really in.
    async fn transition(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        uuid: &str,
        to: ArqState,
    ) -> Result<(), DbError> {
        let d = self.dialect();
        let mut sql = Sql::new(self.backend, format!("UPDATE {} SET state = ", ARQS));
        sql.bind(to.as_str())
            .push(", updated_at = ")
            .bind(d.now())
            .push(d.ts())
            .push(" WHERE uuid = ")
            .bind(uuid.to_owned())
            .push(" AND state IN ")
            .bind_list(to.allowed_from().iter().map(|s| s.as_str()));
        if sql.execute(&mut **tx).await? == 1 {
            return Ok(());
        }
        #[derive(sqlx::FromRow)]
        struct Current {
            state: ArqState,
        }
        let current: Option<Current> = sqlx::query_as(&d.sql(&format!(
            "SELECT {} FROM {} WHERE uuid = $1",
            d.text_as("state"),
            ARQS
        )))
        .bind(uuid)
        .fetch_optional(&mut **tx)
        .await
        .map_err(read_error("accelerator_requests"))?;
        match current {
            None => Err(DbError::NotFound {
                kind: "accelerator request",
                id: shown(uuid),
            }),
            Some(c) => Err(DbError::InvalidTransition {
                uuid: uuid.to_owned(),
                from: c.state,
                to,
            }),
        }
    }

    /// Binds a request to a free device on `host`: `BindStarted`, then, in a second
    /// transaction, a free attach handle taken atomically and `Bound`, or `BindFailed`
    /// when none is free (returned as [`DbError::NoFreeHandle`]). With
    /// `device_rp_uuid` (Placement's choice, what Nova sends) the handle is one of the
    /// deployable with that resource provider, which must be on `host`
    /// ([`DbError::Invalid`] otherwise, nothing changed); without, one of any deployable
    /// of the profile group's device type. Binding a request already bound to the
    /// same instance returns it unchanged.
    pub async fn bind(
        &self,
        uuid: &str,
        host: &str,
        instance_uuid: &str,
        device_rp_uuid: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        self.bind_for(uuid, host, instance_uuid, device_rp_uuid, None)
            .await
    }

    /// [`Db::bind`] that also records `project_id` as the request's project, as Cyborg
    /// 17's bind does (an administrator's patch, or the binding caller's project; a
    /// request imported without one gets it so); `None` leaves it. Written with the
    /// binding, so a failed bind changes no project either.
    pub async fn bind_for(
        &self,
        uuid: &str,
        host: &str,
        instance_uuid: &str,
        device_rp_uuid: Option<&str>,
        project_id: Option<&str>,
    ) -> Result<ArqRow, DbError> {
        check_binding(host, instance_uuid, device_rp_uuid)?;
        check_len("project_id", project_id)?;
        let current = self.arq(uuid).await?;
        if current.state == ArqState::Bound
            && current.instance_uuid.as_deref() == Some(instance_uuid)
        {
            return Ok(current);
        }
        let profile = self.profile_by_name(&current.device_profile_name).await?;
        let group = profile
            .groups
            .get(current.device_profile_group_id as usize)
            .ok_or_else(|| DbError::Invalid {
                what: "device profile group id",
                why: format!(
                    "profile {} lost group {}",
                    profile.name, current.device_profile_group_id
                ),
            })?;
        // Placement chose the deployable: exactly that one. Otherwise any of the group's
        // device type (which a group accel cannot map refuses).
        let (device_type, deployable, wanted) = match device_rp_uuid {
            Some(rp) => {
                let on_host: Vec<Named> = sqlx::query_as(
                    &self
                        .backend
                        .sql("SELECT id, name FROM deployables WHERE hostname = $1"),
                )
                .bind(host)
                .fetch_all(&self.pool)
                .await
                .map_err(read_error("deployables"))?;
                let found = on_host
                    .into_iter()
                    .filter(|d| rp_uuid(&d.name) == rp)
                    .map(|d| d.id)
                    .next_back();
                let id = found.ok_or_else(|| DbError::Invalid {
                    what: "device_rp_uuid",
                    why: format!(
                        "{} is the resource provider of no deployable of host {}",
                        shown(rp),
                        shown(host)
                    ),
                })?;
                let wanted = format!("device of resource provider {}", shown(rp));
                (String::new(), id, wanted)
            }
            None => {
                let t = crate::groups::device_type(group)?;
                (t.clone(), 0, t)
            }
        };
        // One transaction from `BindStarted` to `Bound` or `BindFailed`: whatever fails
        // in between (the database, the connection, this process) rolls the request
        // back to the state it had, free to bind, unbind or delete again. No bind of
        // this release ever leaves `BindStarted` committed, so no other conductor can
        // find one of its binds in progress and take it for abandoned. The transition
        // is the first statement, a write (see the module docs: SQLite then waits for
        // its write lock here instead of failing when a read would become a write).
        let d = self.dialect();
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::BindStarted)
            .await?;
        sqlx::query(&d.sql(&format!("UPDATE {} SET hostname = $1, instance_uuid = $2, device_rp_uuid = $3, project_id = COALESCE($4, project_id) WHERE uuid = $5", ARQS)))
            .bind(host)
            .bind(instance_uuid)
            .bind(device_rp_uuid)
            .bind(project_id)
            .bind(uuid)
            .execute(&mut *tx)
            .await?;
        let taken = loop {
            let candidate: Option<i64> = sqlx::query_scalar(&d.sql(&format!(
                "SELECT h.id FROM attach_handles h JOIN deployables d ON h.deployable_id = d.id \
                 JOIN devices v ON d.device_id = v.id \
                 WHERE d.hostname = $1 AND (v.type = $2 OR d.id = $3) AND v.{} = $4 AND {} AND d.enabled = 1 AND h.in_use = {} AND h.cleanup_state IS NULL \
                 ORDER BY h.id LIMIT 1",
                INVENTORY_STATUS,
                in_service("v"),
                d.no(),
            )))
            .bind(host)
            .bind(&device_type)
            .bind(deployable)
            .bind(DeviceStatus::Available.as_str())
            .fetch_optional(&mut *tx)
            .await?;
            let Some(id) = candidate else { break None };
            let won = sqlx::query(&d.sql(&format!(
                "UPDATE attach_handles SET in_use = {yes}, revision = revision + 1, updated_at = $1{ts} WHERE id = $2 AND in_use = {no}",
                yes = d.yes(),
                no = d.no(),
                ts = d.ts(),
            )))
                .bind(d.now())
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1;
            if won {
                break Some(id);
            }
            // Another conductor took it between our read and our write: try the next.
        };
        match taken {
            Some(handle) => {
                self.transition(&mut tx, uuid, ArqState::Bound).await?;
                // Cyborg's bind also records the handle's deployable.
                sqlx::query(&d.sql(&format!(
                    "UPDATE {ARQS} SET attach_handle_id = $1, \
                     deployable_id = (SELECT h.deployable_id FROM attach_handles h WHERE h.id = $2) \
                     WHERE uuid = $3"
                )))
                .bind(handle)
                .bind(handle)
                .bind(uuid)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                self.arq(uuid).await
            }
            None => {
                self.transition(&mut tx, uuid, ArqState::BindFailed).await?;
                tx.commit().await?;
                Err(DbError::NoFreeHandle {
                    uuid: uuid.to_owned(),
                    host: shown(host),
                    device_type: wanted,
                })
            }
        }
    }

    /// Releases a request's device: `Unbound`, the handle free again at once. Idempotent:
    /// an unbound request is returned as it is.
    pub async fn unbind(&self, uuid: &str) -> Result<ArqRow, DbError> {
        self.unbind_with(uuid, Release::Immediate).await
    }

    /// [`Db::unbind`] with the release policy: with [`Release::CleanSsd`] an NVMe SSD's
    /// handle goes to `cleaning` instead of back to the pool.
    pub async fn unbind_with(&self, uuid: &str, release: Release) -> Result<ArqRow, DbError> {
        let current = self.arq(uuid).await?;
        if current.state == ArqState::Unbound {
            return Ok(current);
        }
        let d = self.dialect();
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::Unbound).await?;
        release_handle(&mut tx, d, uuid, release).await?;
        // As Cyborg's unbind: the request belongs to no host, instance or provider any
        // more (a failed bind keeps them, for Nova to read it by instance).
        sqlx::query(&d.sql(&format!(
            "UPDATE {} SET hostname = NULL, instance_uuid = NULL, \
             device_rp_uuid = NULL WHERE uuid = $1",
            ARQS
        )))
        .bind(uuid)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.arq(uuid).await
    }

    /// Marks a bound request's unbind as failed (`UnbindFailed`), keeping its host,
    /// instance and handle: what Cyborg's unbind leaves when the host could not give the
    /// device back (its mediated device not removed). An unbind or delete retries.
    pub async fn unbind_failed(&self, uuid: &str) -> Result<ArqRow, DbError> {
        let mut tx = self.pool.begin().await?;
        self.transition(&mut tx, uuid, ArqState::UnbindFailed)
            .await?;
        tx.commit().await?;
        self.arq(uuid).await
    }

    /// Deletes a request (releasing its device at once). Idempotent: deleting a missing
    /// request is `Ok(false)`.
    pub async fn delete_arq(&self, uuid: &str) -> Result<bool, DbError> {
        self.delete_arq_with(uuid, Release::Immediate).await
    }

    /// [`Db::delete_arq`] with the release policy.
    pub async fn delete_arq_with(&self, uuid: &str, release: Release) -> Result<bool, DbError> {
        let mut tx = self.pool.begin().await?;
        match self.transition(&mut tx, uuid, ArqState::Deleting).await {
            Ok(()) => {}
            Err(DbError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e),
        }
        let d = self.dialect();
        release_handle(&mut tx, d, uuid, release).await?;
        sqlx::query(&d.sql(&format!("DELETE FROM {} WHERE uuid = $1", ARQS)))
            .bind(uuid)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes every request of an instance; returns how many.
    pub async fn delete_arqs_of_instance(&self, instance_uuid: &str) -> Result<usize, DbError> {
        let mut n = 0;
        for arq in self.arqs(Some(instance_uuid)).await? {
            if self.delete_arq(&arq.uuid).await? {
                n += 1;
            }
        }
        Ok(n)
    }

    /// What breaks the database's invariants between requests and devices, in words
    /// (empty: consistent): a handle held by two requests, a request on a free handle,
    /// a `Bound` request without a handle, an in-use handle no request holds, a request
    /// whose profile is gone, a request in a transient state (`BindStarted`,
    /// `Deleting`) for longer than `lease`. The fault campaign (`accel chaos`) checks it
    /// continuously; an operator can run it on a live database.
    pub async fn consistency_violations(&self, lease: Duration) -> Result<Vec<String>, DbError> {
        let d = self.dialect();
        let (arqs, yes, no) = (ARQS, d.yes(), d.no());
        let cutoff =
            d.time_text(chrono::Utc::now() - chrono::Duration::from_std(lease).unwrap_or_default());
        let bound = {
            let mut sql = Sql::new(
                self.backend,
                format!("SELECT uuid AS what FROM {arqs} WHERE state = "),
            );
            sql.bind(ArqState::Bound.as_str())
                .push(" AND attach_handle_id IS NULL");
            sql
        };
        let stuck = {
            let mut sql = Sql::new(
                self.backend,
                format!("SELECT uuid AS what FROM {arqs} WHERE state IN "),
            );
            sql.bind_list([ArqState::BindStarted.as_str(), ArqState::Deleting.as_str()])
                .push(" AND updated_at < ")
                .bind(cutoff)
                .push(d.ts());
            sql
        };
        let checks: [(&str, Sql); 6] = [
            (
                "handle held by more than one request",
                Sql::new(self.backend, format!(
                    "SELECT h.uuid AS what FROM {arqs} r \
                     JOIN attach_handles h ON r.attach_handle_id = h.id \
                     GROUP BY h.uuid HAVING COUNT(*) > 1",
                )),
            ),
            (
                "request holding a free handle",
                Sql::new(self.backend, format!(
                    "SELECT r.uuid AS what FROM {arqs} r \
                     JOIN attach_handles h ON r.attach_handle_id = h.id WHERE h.in_use = {no}",
                )),
            ),
            ("Bound request without a handle", bound),
            (
                "in-use handle no request holds",
                Sql::new(self.backend, format!(
                    "SELECT h.uuid AS what FROM attach_handles h WHERE h.in_use = {yes} AND NOT EXISTS \
                     (SELECT 1 FROM {arqs} r WHERE r.attach_handle_id = h.id)",
                )),
            ),
            (
                "request whose profile is gone",
                Sql::new(self.backend, format!("SELECT r.uuid AS what FROM {arqs} r WHERE NOT EXISTS \
                     (SELECT 1 FROM device_profiles p WHERE p.id = r.device_profile_id)")),
            ),
            ("request stuck in a transient state past its lease", stuck),
        ];
        #[derive(sqlx::FromRow)]
        struct Violation {
            what: String,
        }
        let mut found = Vec::new();
        for (what, sql) in checks {
            for v in sql
                .fetch_all::<Violation, _>("accelerator_requests", &self.pool)
                .await?
            {
                found.push(format!("{what}: {}", v.what));
            }
        }
        Ok(found)
    }

    /// How long a request may stay in `BindStarted` before a starting conductor takes it
    /// for abandoned ([`Db::recover_interrupted_binds`]); release N's two-step bind
    /// finishes in well under a second.
    pub const INTERRUPTED_BIND_LEASE: Duration = Duration::from_secs(120);

    /// At conductor start: requests in `BindStarted` for longer than `lease` become
    /// `BindFailed` (they hold no device: a bind takes its device and leaves
    /// `BindStarted` in one transaction). This release never commits `BindStarted`, so
    /// what is found was left by release N's two-step bind (beside this release during
    /// a rolling upgrade) or by its crash; a younger one may be a bind still running on
    /// a release N conductor and is left to it.
    pub async fn recover_interrupted_binds(&self, lease: Duration) -> Result<u64, DbError> {
        let d = self.dialect();
        // The epoch for a lease longer than the clock goes back (MIN_UTC does not fit
        // a SQL time).
        let cutoff = d.time_text(
            chrono::Duration::from_std(lease)
                .ok()
                .and_then(|lease| chrono::Utc::now().checked_sub_signed(lease))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH),
        );
        let n = sqlx::query(&d.sql(&format!(
            "UPDATE {} SET state = $1, updated_at = $2{ts} WHERE state = $3 AND updated_at < $4{ts}",
            ARQS,
            ts = d.ts()
        )))
        .bind(ArqState::BindFailed.as_str())
        .bind(d.now())
        .bind(ArqState::BindStarted.as_str())
        .bind(cutoff)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n)
    }
}

/// What happens to a device when its request releases it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Back to the pool at once (release N's behaviour, and every device but SSDs).
    Immediate,
    /// An NVMe SSD goes to `cleaning` and is not allocatable until its agent reports the
    /// erase done; other devices go back at once. A reason left from an earlier cleanup
    /// is cleared: the handle waits for a new claim.
    CleanSsd,
}

async fn release_handle(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    uuid: &str,
    release: Release,
) -> Result<(), DbError> {
    sqlx::query(&d.sql(&format!(
        "UPDATE attach_handles SET in_use = {no}, updated_at = $1{ts}, revision = revision + 1, \
         cleanup_state = CASE WHEN $2 = 1 AND deployable_id IN \
           (SELECT d.id FROM deployables d JOIN devices v ON d.device_id = v.id WHERE v.type = 'SSD') \
           THEN $3 ELSE cleanup_state END, \
         cleanup_reason = CASE WHEN $4 = 1 AND deployable_id IN \
           (SELECT d.id FROM deployables d JOIN devices v ON d.device_id = v.id WHERE v.type = 'SSD') \
           THEN NULL ELSE cleanup_reason END \
         WHERE id = (SELECT attach_handle_id FROM {arqs} WHERE uuid = $5)",
        no = d.no(),
        ts = d.ts(),
        arqs = ARQS,
    )))
    .bind(d.now())
    .bind(i64::from(release == Release::CleanSsd))
    .bind(CleanupState::Cleaning.as_str())
    .bind(i64::from(release == Release::CleanSsd))
    .bind(uuid)
    .execute(&mut **tx)
    .await?;
    // Cyborg's request also names the handle's deployable.
    sqlx::query(&d.sql(&format!(
        "UPDATE {ARQS} SET attach_handle_id = NULL, deployable_id = NULL WHERE uuid = $1"
    )))
    .bind(uuid)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The condition that the devices aliased `alias` are in service (not taken out by an
/// operator's disable): Cyborg's `status`.
fn in_service(alias: &str) -> String {
    format!("{alias}.status = 'enabled'")
}
