//! The import's writes: a checked [`Plan`] into the target in the caller's transaction,
//! Cyborg's columns as Cyborg stored them and accel's additions filled, then accel's
//! version and fleet records as the source held them.

use super::{ImportError, Plan, UpgradeState};
use crate::db::{DbError, Dialect, ARQS, INVENTORY_STATUS};
use accel_objects::AccelVersion;
use std::collections::BTreeMap;
use verso_upgrade::store::PersistedState;
use verso_upgrade::ComponentVersion;

pub(super) async fn write(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    plan: &Plan,
) -> Result<(), ImportError> {
    let q = |e: sqlx::Error| ImportError::Target(DbError::from(e));
    let ts = d.ts();
    // Cyborg's attach handle id -> the target's handle id and its deployable's.
    let mut handle_ids = BTreeMap::new();
    for dev in &plan.devices {
        let (created, updated) = (d.time_text(dev.created_at), d.time_text(dev.updated_at));
        // Cyborg's own columns as Cyborg stored them; accel's inventory state as the
        // source had it (a Cyborg source has none: `available`, as an agent's report
        // would make it).
        let device_id: i64 = sqlx::query_scalar(&d.sql(&format!(
            "INSERT INTO devices (uuid, type, vendor, model, std_board_info, \
             vendor_board_info, hostname, status, device_state, {INVENTORY_STATUS}, \
             created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11{ts}, $12{ts}) \
             RETURNING id"
        )))
        .bind(&dev.uuid)
        .bind(&dev.device_type)
        .bind(&dev.vendor)
        .bind(&dev.model)
        .bind(&dev.std_board_info)
        .bind(&dev.vendor_board_info)
        .bind(&dev.hostname)
        .bind(if dev.maintaining {
            "maintaining"
        } else {
            "enabled"
        })
        .bind(&dev.device_state)
        .bind(dev.inventory_status.as_str())
        .bind(&created)
        .bind(&updated)
        .fetch_one(&mut **tx)
        .await
        .map_err(q)?;
        let cp = &dev.control_path;
        let cpid_id: i64 = sqlx::query_scalar(&d.sql(&format!(
            "INSERT INTO controlpath_ids (uuid, device_id, cpid_type, cpid_info, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5{ts}, $6{ts}) RETURNING id"
        )))
        .bind(&cp.uuid)
        .bind(device_id)
        .bind(&cp.cpid_type)
        .bind(&cp.cpid_info)
        .bind(d.time_text(cp.created_at))
        .bind(d.time_text(cp.updated_at))
        .fetch_one(&mut **tx)
        .await
        .map_err(q)?;
        for dep in &dev.deployables {
            // Every attribute Cyborg holds counts as its agent's last report (Cyborg's own
            // report diff deletes the keys a report drops), so the agent's next report,
            // now to accel, finds them unchanged.
            let reported: BTreeMap<&str, &str> = dep
                .attributes
                .iter()
                .map(|(k, (_, v, _, _))| (k.as_str(), v.as_str()))
                .collect();
            let reported = serde_json::to_string(&reported).map_err(|e| {
                ImportError::row("attributes", &dep.uuid, format!("do not serialize: {e}"))
            })?;
            // The same columns on both schemas: on Cyborg's, `hostname`,
            // `control_path_id` and `attributes` are accel's additions.
            let deployable_id: i64 = sqlx::query_scalar(&d.sql(&format!(
                "INSERT INTO deployables (uuid, name, device_id, hostname, control_path_id, \
                 num_accelerators, driver_name, attributes, rp_uuid, bitstream_id, created_at, \
                 updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11{ts}, $12{ts}) RETURNING id"
            )))
            .bind(&dep.uuid)
            .bind(&dep.name)
            .bind(device_id)
            .bind(&dev.hostname)
            .bind(&dep.control_path_id)
            .bind(dep.num_accelerators)
            .bind(&dep.driver_name)
            .bind(&reported)
            .bind(&dep.rp_uuid)
            .bind(&dep.bitstream_id)
            .bind(d.time_text(dep.created_at))
            .bind(d.time_text(dep.updated_at))
            .fetch_one(&mut **tx)
            .await
            .map_err(q)?;
            for h in &dep.handles {
                // A flag literal: PostgreSQL's `BOOLEAN` takes no integer.
                let in_use = if h.in_use { d.yes() } else { d.no() };
                let id: i64 = sqlx::query_scalar(&d.sql(&format!(
                    "INSERT INTO attach_handles (uuid, deployable_id, cpid_id, in_use, \
                     attach_type, attach_info, cleanup_state, cleanup_reason, created_at, \
                     updated_at) \
                     VALUES ($1, $2, $3, {in_use}, $4, $5, $6, $7, $8{ts}, $9{ts}) RETURNING id"
                )))
                .bind(&h.uuid)
                .bind(deployable_id)
                .bind(cpid_id)
                .bind(&h.attach_type)
                .bind(&h.attach_info)
                .bind(h.cleanup_state.map(|c| c.as_str()))
                .bind(&h.cleanup_reason)
                .bind(d.time_text(h.created_at))
                .bind(d.time_text(h.updated_at))
                .fetch_one(&mut **tx)
                .await
                .map_err(q)?;
                handle_ids.insert(h.cyborg_id, (id, deployable_id));
            }
            for (key, (uuid, value, created_at, updated_at)) in &dep.attributes {
                sqlx::query(&d.sql(&format!(
                    "INSERT INTO attributes (uuid, deployable_id, \"key\", value, created_at, \
                     updated_at) VALUES ($1, $2, $3, $4, $5{ts}, $6{ts})"
                )))
                .bind(uuid)
                .bind(deployable_id)
                .bind(key)
                .bind(value)
                .bind(d.time_text(*created_at))
                .bind(d.time_text(*updated_at))
                .execute(&mut **tx)
                .await
                .map_err(q)?;
            }
        }
    }
    // A profile's name -> the target's profile id (Cyborg's requests name it by id).
    let mut profile_ids = BTreeMap::new();
    for p in &plan.profiles {
        let created = d.time_text(p.created_at);
        let id: i64 = sqlx::query_scalar(&d.sql(&format!(
            "INSERT INTO device_profiles (uuid, name, profile_json, description, \
             created_at) VALUES ($1, $2, $3, $4, $5{ts}) RETURNING id"
        )))
        .bind(&p.uuid)
        .bind(&p.name)
        .bind(&p.profile_json)
        .bind(&p.description)
        .bind(&created)
        .fetch_one(&mut **tx)
        .await
        .map_err(q)?;
        profile_ids.insert(p.name.as_str(), id);
    }
    for a in &plan.arqs {
        let handle = a.handle.and_then(|h| handle_ids.get(&h).copied());
        let (created, updated) = (d.time_text(a.created_at), d.time_text(a.updated_at));
        let profile_id = profile_ids
            .get(a.profile.as_str())
            .copied()
            .ok_or_else(|| {
                ImportError::row(
                    ARQS,
                    &a.uuid,
                    format!("its profile {} was not imported", a.profile),
                )
            })?;
        sqlx::query(&d.sql(&format!(
            "INSERT INTO {ARQS} (uuid, project_id, state, device_profile_id, \
             device_profile_group_id, hostname, device_rp_uuid, instance_uuid, \
             attach_handle_id, deployable_id, substate, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12{ts}, $13{ts})"
        )))
        .bind(&a.uuid)
        .bind(&a.project_id)
        .bind(a.state.as_str())
        .bind(profile_id)
        .bind(a.group_id)
        .bind(&a.hostname)
        .bind(&a.device_rp_uuid)
        .bind(&a.instance_uuid)
        .bind(handle.map(|(h, _)| h))
        .bind(handle.map(|(_, dep)| dep))
        .bind(&a.substate)
        .bind(&created)
        .bind(&updated)
        .execute(&mut **tx)
        .await
        .map_err(q)?;
    }
    write_upgrade_state(tx, d, &plan.upgrade).await
}

/// accel's version record and fleet record as the source held them. A version record
/// the target already holds must be the same (the target's own conductor may have made
/// one: an import then changes nothing of it); a differing one is refused. Fleet rows
/// the target has already are kept. From a Cyborg 17 source (`at_release_n`), nothing
/// is written, and a target whose record is past release N or finalizing is refused.
async fn write_upgrade_state(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    d: Dialect,
    upgrade: &UpgradeState,
) -> Result<(), ImportError> {
    let q = |e: sqlx::Error| ImportError::Target(DbError::from(e));
    if upgrade.at_release_n {
        let held: Option<String> = sqlx::query_scalar(
            &d.sql("SELECT record FROM component_versions WHERE component = $1"),
        )
        .bind(AccelVersion::COMPONENT)
        .fetch_optional(&mut **tx)
        .await
        .map_err(q)?;
        if let Some(held) = held {
            let state: PersistedState =
                serde_json::from_str(&held).map_err(|e| DbError::Corrupt {
                    table: "component_versions",
                    column: "record".into(),
                    why: e.to_string(),
                })?;
            // At release N and not finalizing, or the hosts would be refused.
            if state.apparent > AccelVersion::Initial.number() || state.finalizing.is_some() {
                return Err(ImportError::TargetPastReleaseN {
                    apparent: state.apparent,
                    finalizing: state.finalizing.is_some(),
                });
            }
        }
    }
    for v in &upgrade.versions {
        let held: Option<String> = sqlx::query_scalar(
            &d.sql("SELECT record FROM component_versions WHERE component = $1"),
        )
        .bind(&v.component)
        .fetch_optional(&mut **tx)
        .await
        .map_err(q)?;
        match held {
            Some(held) if held == v.record => {}
            Some(_) => {
                return Err(ImportError::TargetNotEmpty {
                    what: "version record of component",
                    uuid: v.component.clone(),
                })
            }
            None => {
                sqlx::query(&d.sql(
                    "INSERT INTO component_versions (component, record, updated_at) \
                     VALUES ($1, $2, $3)",
                ))
                .bind(&v.component)
                .bind(&v.record)
                .bind(&v.updated_at)
                .execute(&mut **tx)
                .await
                .map_err(q)?;
            }
        }
    }
    for f in &upgrade.fleet {
        let held: i64 = sqlx::query_scalar(
            &d.sql("SELECT COUNT(*) FROM fleet_members WHERE component = $1 AND member_id = $2"),
        )
        .bind(&f.component)
        .bind(&f.member_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(q)?;
        if held > 0 {
            continue;
        }
        sqlx::query(&d.sql(
            "INSERT INTO fleet_members (component, member_id, host, software, apparent, \
             heard_by, heartbeats, last_seen_ms, run_started_ms, run_seq) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        ))
        .bind(&f.component)
        .bind(&f.member_id)
        .bind(&f.host)
        .bind(f.software)
        .bind(f.apparent)
        .bind(&f.heard_by)
        .bind(f.heartbeats)
        .bind(f.last_seen_ms)
        .bind(f.run_started_ms)
        .bind(f.run_seq)
        .execute(&mut **tx)
        .await
        .map_err(q)?;
    }
    Ok(())
}
