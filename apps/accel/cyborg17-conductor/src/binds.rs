//! Binds and unbinds (`arq_apply_patch`), as Cyborg 17's `ExtARQ.apply_patch` and
//! `ExtARQJobMixin` do them: Cyborg's state matrix, the deployable's first free attach
//! handle, the host's agent for mediated devices, Nova told when binds finish.

use crate::db::{now, DbError};
use crate::fpga::{BITSTREAM_ID, FUNCTION_ID};
use crate::requests::{group_of, ArqRow, RequestError, Requests};
use accel_cyborg17::objects::ArqState;
use serde_json::{json, Value};
use sqlx::Row;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use verso::VersionedEnum;

/// A bind that goes on after `arq_apply_patch` answers (an FPGA being programmed).
type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The deployable a bind goes to.
#[derive(Clone, Debug)]
struct Target {
    id: i64,
    device_id: i64,
    driver_name: String,
    bitstream_id: Option<String>,
}

/// Nova's external events API, where Cyborg's conductor says a bind finished
/// (`accelerator-request-bound`, compute microversion 2.82).
#[derive(Clone, Debug)]
pub struct Nova {
    session: accel_cyborg17::keystone::Session,
    endpoint_override: Option<String>,
}

impl Nova {
    /// Nova at `endpoint_override`, or the catalog's `compute`.
    pub fn new(
        session: accel_cyborg17::keystone::Session,
        endpoint_override: Option<String>,
    ) -> Nova {
        Nova {
            session,
            endpoint_override: endpoint_override.map(|e| e.trim_end_matches('/').to_owned()),
        }
    }

    /// Cyborg's `NovaAPI.notify_binding`: one event per request; 200 is taken, and so is
    /// a 207 whose every event is 422 (the instance has no host yet: Nova's compute finds
    /// the bound requests itself).
    async fn notify_binding(
        &self,
        instance: &str,
        statuses: &[(String, &'static str)],
    ) -> Result<(), RequestError> {
        let endpoint = match &self.endpoint_override {
            Some(e) => e.clone(),
            None => self
                .session
                .endpoint("compute")
                .await
                .map_err(|e| RequestError::Nova(e.to_string()))?,
        };
        let events: Vec<Value> = statuses
            .iter()
            .map(|(uuid, status)| {
                serde_json::json!({
                    "name": "accelerator-request-bound",
                    "server_uuid": instance,
                    "tag": uuid,
                    "status": status,
                })
            })
            .collect();
        let body = serde_json::json!({ "events": events });
        let url = format!("{endpoint}/os-server-external-events");
        let http = self.session.http();
        let response = self
            .session
            .send(|token| {
                http.post(&url)
                    .header("X-Auth-Token", token)
                    .header("OpenStack-API-Version", "compute 2.82")
                    .header("X-OpenStack-Nova-API-Version", "2.82")
                    .json(&body)
            })
            .await
            .map_err(|e| RequestError::Nova(e.to_string()))?;
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            200 => Ok(()),
            207 => {
                let codes: std::collections::BTreeSet<i64> = answer["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e["code"].as_i64())
                    .collect();
                if codes.len() == 1 && codes.contains(&422) {
                    Ok(())
                } else {
                    Err(RequestError::Nova(format!(
                        "event codes {codes:?} for instance {instance}"
                    )))
                }
            }
            other => Err(RequestError::Nova(format!("HTTP {other}: {answer}"))),
        }
    }
}

/// Where a bind puts a request (Cyborg's `valid_fields` of one request).
#[derive(Clone, Debug, Default)]
struct Binding {
    hostname: Option<String>,
    device_rp_uuid: Option<String>,
    instance_uuid: Option<String>,
    project_id: Option<String>,
}

impl Requests {
    /// The states a request may be moved into `to` from (Cyborg's
    /// `ARQ_STATES_TRANSFORM_MATRIX`).
    fn from_states(to: ArqState) -> Vec<&'static str> {
        use ArqState::*;
        let from: &[ArqState] = match to {
            Initial | UnbindFailed => &[],
            BindStarted => &[Initial, Unbound],
            Bound => &[BindStarted],
            Unbound => &[Initial, BindStarted, Bound, BindFailed],
            BindFailed => &[BindStarted, Bound],
            Deleting => &[Initial, BindStarted, Bound, Unbound, BindFailed],
        };
        from.iter().map(ArqState::as_str).collect()
    }

    /// Cyborg's `update_check_state`: moves the request to `to` (with `sets`, column and
    /// value) if its state is one `to` is reached from, then checks it is there.
    async fn move_to(
        &self,
        row: &ArqRow,
        to: ArqState,
        sets: &[(&str, Option<String>)],
    ) -> Result<(), RequestError> {
        if row.state == to.as_str() {
            return Ok(());
        }
        let from = Self::from_states(to);
        let mut assignments: Vec<String> = sets.iter().map(|(c, _)| format!("{c} = ?")).collect();
        assignments.push("state = ?".into());
        assignments.push("updated_at = ?".into());
        let placeholders = vec!["?"; from.len().max(1)].join(", ");
        let sql = format!(
            "UPDATE extended_accelerator_requests SET {} WHERE id = ? AND state IN ({placeholders})",
            assignments.join(", ")
        );
        let mut q = sqlx::query(&sql);
        for (_, v) in sets {
            q = q.bind(v.clone());
        }
        q = q.bind(to.as_str()).bind(now()).bind(row.id);
        if from.is_empty() {
            q = q.bind("");
        }
        for s in &from {
            q = q.bind(*s);
        }
        q.execute(self.store.pool()).await?;
        let state = self
            .arq_rows("uuid", &row.uuid)
            .await?
            .into_iter()
            .next()
            .map(|r| r.state)
            .unwrap_or_default();
        if state != to.as_str() {
            return Err(RequestError::BadState {
                state,
                uuid: row.uuid.clone(),
                expected: vec![to.as_str()],
            });
        }
        Ok(())
    }

    /// `arq_apply_patch` (Cyborg's `ExtARQ.apply_patch`): per request, a patch whose
    /// first operation is `add` binds it to the deployable whose provider is its
    /// `device_rp_uuid` in `valid_fields` (one free attach handle taken, a mediated device
    /// made on the host for an `MDEV` handle), any other unbinds it; then Nova is told
    /// the binds finished (`accelerator-request-bound`). `project` is the caller's
    /// project, for a bind whose fields name none. A request that is neither `Initial`
    /// nor `Unbound` is not bound (`ARQBadState`); a failed bind leaves it `BindFailed`
    /// and stops there, as Cyborg's does.
    pub async fn apply_patch(
        &self,
        patch_list: &BTreeMap<String, Value>,
        valid_fields: &BTreeMap<String, Value>,
        project: Option<&str>,
    ) -> Result<(), RequestError> {
        let mut binds: Vec<String> = Vec::new();
        let mut jobs: Vec<Job> = Vec::new();
        let mut instance = None;
        for (uuid, patch) in patch_list {
            let row = self.one_arq(uuid).await?;
            if patch[0]["op"] == "add" {
                let fields = valid_fields.get(uuid).cloned().unwrap_or(Value::Null);
                let field = |k: &str| fields[k].as_str().map(str::to_owned);
                let binding = Binding {
                    hostname: field("hostname"),
                    device_rp_uuid: field("device_rp_uuid"),
                    instance_uuid: field("instance_uuid"),
                    project_id: field("project_id").or_else(|| project.map(str::to_owned)),
                };
                if let Some(job) = self.bind(&row, &binding).await? {
                    jobs.push(job);
                }
                if instance.is_none() {
                    instance = binding.instance_uuid.clone();
                }
                binds.push(uuid.clone());
            } else {
                self.unbind(&row).await?;
            }
        }
        if binds.is_empty() {
            return Ok(());
        }
        let instance = instance.unwrap_or_default();
        let Some(nova) = self.nova.clone() else {
            // Without Nova (an all-in-one) nobody waits for the event; the jobs run on.
            for job in jobs {
                tokio::spawn(job);
            }
            return Ok(());
        };
        if jobs.is_empty() {
            let statuses = self.bind_statuses(&binds).await?;
            return nova.notify_binding(&instance, &statuses).await;
        }
        // Cyborg's master job: Nova hears of the patch's binds once every job ended.
        let this = self.clone();
        tokio::spawn(async move {
            for job in jobs {
                job.await;
            }
            let told = match this.bind_statuses(&binds).await {
                Ok(statuses) => nova.notify_binding(&instance, &statuses).await,
                Err(e) => Err(e),
            };
            if let Err(e) = told {
                tracing::warn!(%instance, error = %e, "Nova was not told how the binds ended");
            }
        });
        Ok(())
    }

    /// Each request's bind status for Nova: `completed` when Bound, else `failed`.
    async fn bind_statuses(
        &self,
        uuids: &[String],
    ) -> Result<Vec<(String, &'static str)>, RequestError> {
        let mut out = Vec::with_capacity(uuids.len());
        for uuid in uuids {
            let state = self.one_arq(uuid).await?.state;
            let status = if state == ArqState::Bound.as_str() {
                "completed"
            } else {
                "failed"
            };
            out.push((uuid.clone(), status));
        }
        Ok(out)
    }

    /// The control path of device `device_id` as Cyborg's agent API takes it
    /// (`fpga_program`'s `controlpath_id`): the row's fields, its `cpid_info` decoded.
    pub async fn control_path(&self, device_id: i64) -> Result<Value, RequestError> {
        let d = self.d();
        let sql = format!(
            "SELECT {}, {}, {}, {}, {}, {}, {} FROM controlpath_ids WHERE device_id = ?",
            d.int("id"),
            d.text("uuid"),
            d.int("device_id"),
            d.text("cpid_type"),
            d.text("cpid_info"),
            d.time("created_at"),
            d.time("updated_at"),
        );
        let rows = sqlx::query(&sql)
            .bind(device_id)
            .fetch_all(self.store.pool())
            .await?;
        let [row] = &rows[..] else {
            return Err(RequestError::ExpectedOne {
                what: "controlpath_id",
                count: rows.len(),
            });
        };
        let text = |i| crate::db::text(row, i);
        let info = text(4)?.unwrap_or_default();
        Ok(json!({
            "id": row.try_get::<i64, _>(0).map_err(DbError::from)?,
            "uuid": text(1)?,
            "device_id": row.try_get::<i64, _>(2).map_err(DbError::from)?,
            "cpid_type": text(3)?,
            "cpid_info": serde_json::from_str::<Value>(&info).unwrap_or(Value::String(info)),
            "created_at": text(5)?,
            "updated_at": text(6)?,
        }))
    }

    pub(crate) async fn one_arq(&self, uuid: &str) -> Result<ArqRow, RequestError> {
        self.arq_rows("uuid", uuid)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| RequestError::NotFound {
                resource: "ExtArq",
                msg: format!("with uuid={uuid}"),
            })
    }

    /// Starts binding `row` as `binding` says; a bind that needs its FPGA programmed
    /// first goes on as the returned job.
    async fn bind(&self, row: &ArqRow, binding: &Binding) -> Result<Option<Job>, RequestError> {
        let expected = Self::from_states(ArqState::BindStarted);
        if !expected.contains(&row.state.as_str()) {
            return Err(RequestError::BadState {
                state: row.state.clone(),
                uuid: row.uuid.clone(),
                expected,
            });
        }
        let profile = self.profile(row.device_profile_id).await?;
        let group = group_of(&profile, row.device_profile_group_id).unwrap_or_default();
        let bitstream = group.get(BITSTREAM_ID).cloned().flatten();
        let function = group.get(FUNCTION_ID).cloned().flatten();
        if (bitstream.is_some() || function.is_some()) && self.programming.is_none() {
            return Err(RequestError::Programming {
                uuid: row.uuid.clone(),
                reason: "its profile asks for an FPGA bitstream and this conductor has no Glance"
                    .into(),
            });
        }
        self.move_to(
            row,
            ArqState::BindStarted,
            &[
                ("hostname", binding.hostname.clone()),
                ("device_rp_uuid", binding.device_rp_uuid.clone()),
                ("instance_uuid", binding.instance_uuid.clone()),
                ("project_id", binding.project_id.clone()),
            ],
        )
        .await?;
        let started = self.one_arq(&row.uuid).await?;
        let rp = binding.device_rp_uuid.clone().unwrap_or_default();
        let target = self.target(&rp).await?;
        let host = binding.hostname.clone().unwrap_or_default();
        if bitstream.is_some() && function.is_some() {
            self.move_to(&started, ArqState::BindFailed, &[]).await?;
            return Err(RequestError::Programming {
                uuid: row.uuid.clone(),
                reason: format!("its profile group sets both {BITSTREAM_ID} and {FUNCTION_ID}; only one may be set"),
            });
        }
        let programmed = bitstream.is_some() && target.bitstream_id == bitstream;
        if (bitstream.is_none() && function.is_none()) || programmed {
            self.complete(&started, target.id, &host).await?;
            return Ok(None);
        }
        let this = self.clone();
        Ok(Some(Box::pin(async move {
            let uuid = started.uuid.clone();
            let bound = match this
                .program(
                    &target,
                    &host,
                    &rp,
                    bitstream.as_deref(),
                    function.as_deref(),
                )
                .await
            {
                Ok(()) => this.complete(&started, target.id, &host).await,
                Err(e) => match this.move_to(&started, ArqState::BindFailed, &[]).await {
                    Ok(()) => Err(e),
                    Err(moved) => Err(moved),
                },
            };
            if let Err(e) = bound {
                tracing::warn!(arq = %uuid, error = %e, "the bind job failed");
            }
        })))
    }

    /// The one deployable whose provider is `rp`.
    async fn target(&self, rp: &str) -> Result<Target, RequestError> {
        let d = self.d();
        let sql = format!(
            "SELECT {}, {}, {}, {} FROM deployables WHERE rp_uuid = ?",
            d.int("id"),
            d.int("device_id"),
            d.text("driver_name"),
            d.text("bitstream_id")
        );
        let rows = sqlx::query(&sql)
            .bind(rp)
            .fetch_all(self.store.pool())
            .await?;
        let [row] = &rows[..] else {
            return Err(RequestError::NotFound {
                resource: "Deployable",
                msg: format!("with resource provider uuid={rp}"),
            });
        };
        Ok(Target {
            id: row.try_get(0).map_err(DbError::from)?,
            device_id: row.try_get(1).map_err(DbError::from)?,
            driver_name: crate::db::text(row, 2)?.unwrap_or_default(),
            bitstream_id: crate::db::text(row, 3)?,
        })
    }

    /// Cyborg's `bind` after the checks: a handle taken and the request Bound, or
    /// `BindFailed`.
    async fn complete(
        &self,
        started: &ArqRow,
        dep_id: i64,
        host: &str,
    ) -> Result<(), RequestError> {
        match self.allocate(dep_id, host).await {
            Ok(handle_id) => {
                sqlx::query(
                    "UPDATE extended_accelerator_requests SET attach_handle_id = ?, \
                     deployable_id = ?, updated_at = ? WHERE id = ?",
                )
                .bind(handle_id)
                .bind(dep_id)
                .bind(now())
                .bind(started.id)
                .execute(self.store.pool())
                .await?;
                self.move_to(started, ArqState::Bound, &[]).await
            }
            Err(e) => {
                self.move_to(started, ArqState::BindFailed, &[]).await?;
                Err(e)
            }
        }
    }

    /// Programs the target's FPGA with the bitstream (or the function's image), gives
    /// its provider the function's trait and records the bitstream on the deployable.
    async fn program(
        &self,
        target: &Target,
        host: &str,
        rp: &str,
        bitstream: Option<&str>,
        function: Option<&str>,
    ) -> Result<(), RequestError> {
        let programming = self
            .programming
            .as_ref()
            .ok_or_else(|| RequestError::Glance("this conductor has no Glance".into()))?;
        let image = match (bitstream, function) {
            (Some(id), _) => {
                programming
                    .glance
                    .image(id)
                    .await?
                    .ok_or_else(|| RequestError::NotFound {
                        resource: "Image",
                        msg: format!("bitstream {id} in Glance"),
                    })?
            }
            (None, Some(f)) => programming.glance.image_of_function(f).await?,
            (None, None) => return Ok(()),
        };
        let image_id = image["id"]
            .as_str()
            .ok_or_else(|| RequestError::Glance(format!("an image without an id: {image}")))?
            .to_owned();
        let controlpath = self.control_path(target.device_id).await?;
        let agents = self.agents.as_ref().ok_or_else(|| RequestError::Agent {
            host: host.to_owned(),
            handle: image_id.clone(),
            reason: "this conductor reaches no agents".into(),
        })?;
        let answer = agents
            .fpga_program(host, controlpath, &image_id, &target.driver_name)
            .await?;
        if answer != Value::Bool(true) {
            return Err(RequestError::Agent {
                host: host.to_owned(),
                handle: image_id,
                reason: format!("the agent's programming answered {answer}"),
            });
        }
        let function = function
            .map(str::to_owned)
            .or_else(|| image[FUNCTION_ID].as_str().map(str::to_owned));
        if let Some(f) = function {
            programming
                .function_traits(rp, &target.driver_name, &f)
                .await?;
        }
        sqlx::query("UPDATE deployables SET bitstream_id = ?, updated_at = ? WHERE id = ?")
            .bind(&image_id)
            .bind(now())
            .bind(target.id)
            .execute(self.store.pool())
            .await?;
        Ok(())
    }

    /// Cyborg's `AttachHandle.allocate` (the deployable's first free handle marked in
    /// use) and, for an `MDEV` handle, its mediated device made on `host`; a handle whose
    /// device could not be made is freed again (Cyborg leaves it in use).
    async fn allocate(&self, deployable_id: i64, host: &str) -> Result<i64, RequestError> {
        let d = self.d();
        let sql = format!(
            "SELECT {}, {}, {}, {} FROM attach_handles WHERE deployable_id = ? AND in_use = 0 \
             ORDER BY id LIMIT 1",
            d.int("id"),
            d.text("uuid"),
            d.text("attach_type"),
            d.text("attach_info")
        );
        loop {
            let row = sqlx::query(&sql)
                .bind(deployable_id)
                .fetch_optional(self.store.pool())
                .await?
                .ok_or_else(|| RequestError::NotFound {
                    resource: "AttachHandle",
                    msg: format!("Matching deployable_id {deployable_id}"),
                })?;
            let id: i64 = row.try_get(0).map_err(DbError::from)?;
            let text = |i| crate::db::text(&row, i).map(Option::unwrap_or_default);
            let (uuid, attach_type, attach_info) = (text(1)?, text(2)?, text(3)?);
            let taken = sqlx::query(
                "UPDATE attach_handles SET in_use = 1, updated_at = ? WHERE id = ? AND in_use = 0",
            )
            .bind(now())
            .bind(id)
            .execute(self.store.pool())
            .await?;
            if taken.rows_affected() != 1 {
                // Another bind took it first: the next free one.
                continue;
            }
            if attach_type == "MDEV" {
                let made = match &self.agents {
                    Some(agents) => agents.mdev(true, host, &attach_info, &uuid).await,
                    None => Err(RequestError::Agent {
                        host: host.to_owned(),
                        handle: uuid.clone(),
                        reason: "this conductor reaches no agents".into(),
                    }),
                };
                if let Err(e) = made {
                    sqlx::query(
                        "UPDATE attach_handles SET in_use = 0, updated_at = ? WHERE id = ?",
                    )
                    .bind(now())
                    .bind(id)
                    .execute(self.store.pool())
                    .await?;
                    return Err(e);
                }
            }
            return Ok(id);
        }
    }
}
