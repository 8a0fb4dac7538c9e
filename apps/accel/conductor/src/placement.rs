//! Placement: each deployable is a resource provider under its host's compute node
//! provider, with its inventory and traits, so Nova's scheduler finds hosts that offer
//! `resources:FPGA` (or `PGPU`, `CUSTOM_QAT`, ...) and names the provider it chose in
//! the bind (`device_rp_uuid`), which [`Db::bind`] follows.
//!
//! # What is kept in Placement
//!
//! For every deployable of a host, as Cyborg 17's conductor keeps it:
//! - a provider named like the deployable (`<host>_<PCI address>`), UUID [`rp_uuid`] of
//!   that name, whose parent is the provider named like the host (Nova's compute node,
//!   which Nova creates; a host without one is skipped and logged until it has one);
//! - an inventory of one resource class (`FPGA`, `PGPU`, `CUSTOM_QAT`, ...: the
//!   deployable's `rc` attribute), `total` = `max_unit` = its accelerators, all
//!   `reserved` while its device is disabled (Cyborg's device disable), lost or missing;
//! - traits: the values of its `trait*` attributes (`CUSTOM_<TYPE>_<VENDOR>` and
//!   `CUSTOM_<TYPE>_PRODUCT_ID_<MODEL>` from accel's agents, the forms Cyborg's drivers
//!   report); see [`class_and_traits`].
//!
//! Providers under the compute node that a deployable had (their UUID is [`rp_uuid`] of
//! their name, as accel and Cyborg make them) and no deployable has any more are deleted
//! (Nova's own children of the compute node, vGPUs and PCI devices, have other UUIDs and
//! are never touched) (Placement refuses while an instance holds an allocation on one: it is
//! kept and retried).
//!
//! # When
//!
//! A reconciler ([`spawn_reconciler`]) works from the database every `[placement]
//! sync_interval` and brings each host whose providers changed (or whose last sync
//! failed) up to date. Reading the database, not hooking the report path, keeps a
//! report's answer independent of Placement's health and catches every change (reports,
//! device disable and enable, a conductor restart) the same way. Which hosts changed
//! the database itself records (migration 101: triggers mark a host on every write of a
//! column its providers are made of, by any writer), so a pass reads only those hosts
//! ([`Pass::Changed`]); the whole inventory is read after the reconciler takes its lease
//! and every `[placement] full_sync_interval` ([`Pass::Full`]). Every write is
//! idempotent, so several conductors reconciling the same hosts agree (a provider
//! generation conflict is read again and retried).

use crate::db::{
    rp_uuid, ChangeMarks, DbError, DeployableRow, DeviceRow, DeviceStatus, ListFilter,
};
use crate::keystone::{Session, SessionError};
use crate::Db;
use accel_objects::traits::{is_custom_name, resource_class, traits};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The Placement microversion accel speaks: 1.26 (providers with parents, `in_tree`,
/// the provider in a create's answer, and an inventory all reserved).
pub const MICROVERSION: &str = "placement 1.26";

/// A deployable as Placement should hold it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Provider {
    /// The deployable's name (`<host>_<PCI address>`).
    pub name: String,
    /// [`rp_uuid`] of the name.
    pub uuid: String,
    /// Its resource class.
    pub resource_class: String,
    /// Accelerators it offers.
    pub total: i64,
    /// All of them reserved (the device is disabled, lost or missing).
    pub reserved: bool,
    /// Its traits, sorted.
    pub traits: Vec<String>,
}

/// A deployable's resource class and traits, as Cyborg's conductor takes them: from its
/// attributes (`rc`, and the values of keys starting `trait`), which Cyborg's agents
/// and accel's report; for a deployable without them (a release N agent's), the names
/// Cyborg's drivers would report for its device ([`accel_objects::traits`]). An
/// attribute Placement would refuse (a class or trait that is not standard or
/// `CUSTOM_[A-Z0-9_]+`) is left out and logged, so one odd attribute cannot stop a
/// host's sync.
pub fn class_and_traits(device: &DeviceRow, dep: &DeployableRow) -> (String, Vec<String>) {
    let rc = match dep.attributes.get("rc") {
        Some(rc) if STANDARD_CLASSES.contains(&rc.as_str()) || is_custom_name(rc) => rc.clone(),
        other => {
            if let Some(rc) = other {
                tracing::warn!(deployable = %dep.uuid, rc = %rc, "resource class attribute is not one Placement takes: the device type's class is used");
            }
            resource_class(&device.device_type)
        }
    };
    let mut reported: Vec<String> = Vec::new();
    for (key, value) in dep
        .attributes
        .iter()
        .filter(|(k, _)| k.starts_with("trait"))
    {
        if is_custom_name(value) {
            reported.push(value.clone());
        } else {
            tracing::warn!(deployable = %dep.uuid, key = %key, value = %value, "trait attribute is not a custom trait Placement takes: left out");
        }
    }
    let mut traits = if dep.attributes.keys().any(|k| k.starts_with("trait")) {
        reported
    } else {
        traits(&device.device_type, &device.vendor, &device.model)
    };
    traits.sort();
    traits.dedup();
    (rc, traits)
}

/// The standard resource classes an accelerator's attribute may name (os-resource-classes).
const STANDARD_CLASSES: &[&str] = &["FPGA", "PGPU", "VGPU"];

/// What Placement should hold for each host: its deployables' providers.
pub fn providers(
    devices: &[DeviceRow],
    deployables: &[DeployableRow],
) -> BTreeMap<String, Vec<Provider>> {
    let by_id: BTreeMap<i64, &DeviceRow> = devices.iter().map(|d| (d.id, d)).collect();
    let mut out: BTreeMap<String, Vec<Provider>> = BTreeMap::new();
    for dep in deployables {
        let Some(device) = by_id.get(&dep.device_id) else {
            continue;
        };
        let (resource_class, traits) = class_and_traits(device, dep);
        out.entry(dep.hostname.clone()).or_default().push(Provider {
            name: dep.name.clone(),
            uuid: rp_uuid(&dep.name),
            resource_class,
            total: dep.num_accelerators,
            reserved: device.maintaining
                || device.status != DeviceStatus::Available
                || !dep.enabled,
            traits,
        });
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

/// Why Placement could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// Keystone or Placement could not be reached, or refused the service user.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The host has no compute node provider (Nova has not registered it).
    #[error("Placement has no resource provider named {0:?} (Nova's compute node); its deployables wait for it")]
    NoComputeNode(String),
    /// Placement refused a call.
    #[error("Placement answered {status} to {what}: {body}")]
    Refused {
        /// The call.
        what: String,
        /// Its status.
        status: u16,
        /// Placement's message.
        body: String,
    },
    /// The database could not be read.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Placement's client, over a service user's session.
#[derive(Clone, Debug)]
pub struct Placement {
    session: Session,
    endpoint_override: Option<String>,
}

impl Placement {
    /// A client; its endpoint is `endpoint_override` or the catalog's `placement`.
    pub fn new(session: Session, endpoint_override: Option<String>) -> Placement {
        Placement {
            session,
            endpoint_override: endpoint_override.map(|e| e.trim_end_matches('/').to_owned()),
        }
    }

    async fn endpoint(&self) -> Result<String, PlacementError> {
        match &self.endpoint_override {
            Some(e) => Ok(e.clone()),
            None => Ok(self.session.endpoint("placement").await?),
        }
    }

    /// Deletes the provider `root` and the providers under it, best effort (a failed
    /// call is skipped): the clean-up of a compute node made for a test or the demo.
    pub async fn delete_tree(&self, root: &str) {
        let Ok((_, tree)) = self
            .call(
                reqwest::Method::GET,
                &format!("/resource_providers?in_tree={root}"),
                None,
            )
            .await
        else {
            return;
        };
        let children = tree["resource_providers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["uuid"].as_str())
            .filter(|u| *u != root);
        for uuid in children.chain([root]) {
            let _ = self
                .call(
                    reqwest::Method::DELETE,
                    &format!("/resource_providers/{uuid}"),
                    None,
                )
                .await;
        }
    }

    /// One call of Placement's API at [`MICROVERSION`] with the service user's token:
    /// its status and JSON body (`Null` when empty). `path` starts with `/`.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), PlacementError> {
        let url = format!("{}{path}", self.endpoint().await?);
        let http = self.session.http();
        let response = self
            .session
            .send(|token| {
                let r = http
                    .request(method.clone(), &url)
                    .header("X-Auth-Token", token)
                    .header("OpenStack-API-Version", MICROVERSION);
                match body {
                    Some(b) => r.json(b),
                    None => r,
                }
            })
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok((status, value))
    }

    /// `call`, refusing any status not in `ok`.
    async fn expect(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        ok: &[u16],
    ) -> Result<Value, PlacementError> {
        let (status, value) = self.call(method.clone(), path, body).await?;
        if ok.contains(&status) {
            Ok(value)
        } else {
            Err(PlacementError::Refused {
                what: format!("{method} {path}"),
                status,
                body: value.to_string(),
            })
        }
    }

    /// The compute node provider of `host`.
    async fn compute_node(&self, host: &str) -> Result<String, PlacementError> {
        let found = self
            .expect(
                reqwest::Method::GET,
                &format!("/resource_providers?name={}", encode(host)),
                None,
                &[200],
            )
            .await?;
        found["resource_providers"][0]["uuid"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| PlacementError::NoComputeNode(host.to_owned()))
    }

    /// Brings `host`'s providers in Placement to `wanted`: creates, updates and deletes.
    /// Returns the names of providers that could not be deleted because an instance
    /// holds an allocation on them.
    pub async fn sync_host(
        &self,
        host: &str,
        wanted: &[Provider],
    ) -> Result<Vec<String>, PlacementError> {
        use reqwest::Method;
        let root = self.compute_node(host).await?;
        let tree = self
            .expect(
                Method::GET,
                &format!("/resource_providers?in_tree={root}"),
                None,
                &[200],
            )
            .await?;
        let children: BTreeMap<String, (String, i64)> = tree["resource_providers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["parent_provider_uuid"] == root.as_str())
            .filter_map(|p| {
                Some((
                    p["uuid"].as_str()?.to_owned(),
                    (p["name"].as_str()?.to_owned(), p["generation"].as_i64()?),
                ))
            })
            .collect();
        for p in wanted {
            if p.resource_class.starts_with("CUSTOM_") {
                self.expect(
                    Method::PUT,
                    &format!("/resource_classes/{}", p.resource_class),
                    None,
                    &[201, 204],
                )
                .await?;
            }
            for t in &p.traits {
                self.expect(Method::PUT, &format!("/traits/{t}"), None, &[201, 204])
                    .await?;
            }
            if !children.contains_key(&p.uuid) {
                let body = json!({"name": p.name, "uuid": p.uuid, "parent_provider_uuid": root});
                let (status, answer) = self
                    .call(Method::POST, "/resource_providers", Some(&body))
                    .await?;
                // 409: made meanwhile by another conductor (same name, same UUID).
                if status != 200 && status != 409 {
                    return Err(PlacementError::Refused {
                        what: format!("POST /resource_providers {}", p.name),
                        status,
                        body: answer.to_string(),
                    });
                }
            }
            self.put_with_generation(&p.uuid, "inventories", |generation| {
                json!({
                    "resource_provider_generation": generation,
                    "inventories": {p.resource_class.clone(): {
                        "total": p.total,
                        "max_unit": p.total.max(1),
                        "reserved": if p.reserved { p.total } else { 0 },
                    }},
                })
            })
            .await?;
            self.put_with_generation(&p.uuid, "traits", |generation| {
                json!({"resource_provider_generation": generation, "traits": p.traits})
            })
            .await?;
        }
        let keep: BTreeSet<&str> = wanted.iter().map(|p| p.uuid.as_str()).collect();
        let mut in_use = Vec::new();
        for (uuid, (name, _)) in &children {
            // Only a deployable's provider, made by accel or Cyborg: its UUID is the one
            // [`rp_uuid`] gives its name. Nova makes children of the compute node too
            // (vGPUs `<host>_pci_0000_84_00_0`, PCI devices in Placement), with UUIDs of
            // their own: never touched, whatever their name.
            if keep.contains(uuid.as_str()) || *uuid != rp_uuid(name) {
                continue;
            }
            let (status, body) = self
                .call(Method::DELETE, &format!("/resource_providers/{uuid}"), None)
                .await?;
            match status {
                204 | 404 => tracing::info!(host, provider = %name, "resource provider deleted"),
                409 => in_use.push(name.clone()),
                _ => {
                    return Err(PlacementError::Refused {
                        what: format!("DELETE /resource_providers/{uuid}"),
                        status,
                        body: body.to_string(),
                    })
                }
            }
        }
        Ok(in_use)
    }

    /// `PUT /resource_providers/{uuid}/{what}` with the provider's current generation,
    /// read again and retried when another writer changed it meanwhile.
    async fn put_with_generation(
        &self,
        uuid: &str,
        what: &str,
        body: impl Fn(i64) -> Value,
    ) -> Result<(), PlacementError> {
        use reqwest::Method;
        let mut last = (0, Value::Null);
        for _ in 0..5 {
            let provider = self
                .expect(
                    Method::GET,
                    &format!("/resource_providers/{uuid}"),
                    None,
                    &[200],
                )
                .await?;
            let generation = provider["generation"].as_i64().unwrap_or(0);
            let (status, answer) = self
                .call(
                    Method::PUT,
                    &format!("/resource_providers/{uuid}/{what}"),
                    Some(&body(generation)),
                )
                .await?;
            if status == 200 {
                return Ok(());
            }
            last = (status, answer);
            if status != 409 {
                break;
            }
        }
        Err(PlacementError::Refused {
            what: format!("PUT /resource_providers/{uuid}/{what}"),
            status: last.0,
            body: last.1.to_string(),
        })
    }
}

/// A query value, percent-encoded.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every host's wanted providers, from the whole inventory: what a full [`reconcile`]
/// pass reads and computes before it compares with what it last pushed.
pub async fn wanted(db: &Db) -> Result<BTreeMap<String, Vec<Provider>>, DbError> {
    let (devices, deployables) = inventory(db).await?;
    Ok(providers(&devices, &deployables))
}

/// The wanted providers of `hosts` only ([`Db::inventory_of_hosts`]): what a
/// [`Pass::Changed`] reads. A host without deployables is absent from the answer.
pub async fn wanted_of<'a>(
    db: &Db,
    hosts: impl IntoIterator<Item = &'a String>,
) -> Result<BTreeMap<String, Vec<Provider>>, DbError> {
    let hosts: Vec<String> = hosts.into_iter().cloned().collect();
    let (devices, deployables) = db.inventory_of_hosts(&hosts).await?;
    Ok(providers(&devices, &deployables))
}

/// Every device and deployable of the database, page by page.
async fn inventory(db: &Db) -> Result<(Vec<DeviceRow>, Vec<DeployableRow>), DbError> {
    const PAGE: u32 = 1000;
    let filter = |marker: Option<String>| ListFilter {
        limit: Some(PAGE),
        marker,
        ..ListFilter::default()
    };
    let mut devices: Vec<DeviceRow> = Vec::new();
    loop {
        let page = db
            .devices(&filter(devices.last().map(|d| d.uuid.clone())))
            .await?;
        let done = page.len() < PAGE as usize;
        devices.extend(page);
        if done {
            break;
        }
    }
    let mut deployables: Vec<DeployableRow> = Vec::new();
    loop {
        let page = db
            .deployables(&filter(deployables.last().map(|d| d.uuid.clone())))
            .await?;
        let done = page.len() < PAGE as usize;
        deployables.extend(page);
        if done {
            break;
        }
    }
    Ok((devices, deployables))
}

/// What a reconciler pass reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The whole inventory: every host is compared with what was last pushed. The
    /// first pass of a reconciler that (re)gains the lease, then every
    /// [`Schedule::full_interval`]: the safety net for a change no trigger marked.
    Full,
    /// Only the hosts the database marked as changed (migration 101's triggers, and
    /// hosts an earlier pass could not sync).
    Changed,
}

/// When the reconciler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Between two passes (`[placement] sync_interval`); also the lease's renewal.
    pub interval: Duration,
    /// Between two [`Pass::Full`] passes (`[placement] full_sync_interval`).
    pub full_interval: Duration,
}

/// Marks one pass reads at most (the rest wait for the next pass).
const MARKS_PER_PASS: u32 = 10_000;

/// A changed-hosts pass reads the whole inventory instead of the changed hosts' rows when
/// more hosts changed than one in this many of those it keeps: read by hostname, a
/// host's rows cost 1-1.5 times its share of a full read (`cargo bench -p
/// accel-conductor --bench reconcile`: 67 against 65 µs per host on SQLite, 44 against
/// 30 µs on PostgreSQL, a tenth of 1,000 hosts changed).
const HOST_READS_PER_FULL_READ: usize = 2;

/// One full pass of the reconciler: [`reconcile_pass`] with [`Pass::Full`].
pub async fn reconcile(
    db: &Db,
    placement: &Placement,
    synced: &mut BTreeMap<String, Vec<Provider>>,
) -> Result<(usize, usize), DbError> {
    reconcile_pass(db, placement, synced, Pass::Full).await
}

/// One pass of the reconciler: each host of the pass whose wanted providers differ from
/// what the last successful sync of it left (`synced`) is brought up to date; hosts
/// that are gone are emptied. The hosts' change marks, read before the inventory, are
/// deleted once a host is up to date; a host that could not be (Placement failed, or
/// an instance's allocation keeps a provider) keeps them, or is marked, so the next
/// pass, of either kind, tries it again. Returns how many hosts were synced and how
/// many failed.
pub async fn reconcile_pass(
    db: &Db,
    placement: &Placement,
    synced: &mut BTreeMap<String, Vec<Provider>>,
    pass: Pass,
) -> Result<(usize, usize), DbError> {
    let changes = db.placement_changes(MARKS_PER_PASS).await?;
    let hosts: BTreeSet<String>;
    let mut wanted = match pass {
        Pass::Full => {
            let wanted = wanted(db).await?;
            hosts = wanted
                .keys()
                .chain(synced.keys())
                .chain(changes.keys())
                .cloned()
                .collect();
            wanted
        }
        Pass::Changed => {
            hosts = changes.keys().cloned().collect();
            if hosts.is_empty() {
                return Ok((0, 0));
            }
            if hosts.len().saturating_mul(HOST_READS_PER_FULL_READ) > synced.len().max(1) {
                wanted(db).await?
            } else {
                wanted_of(db, &hosts).await?
            }
        }
    };
    let (mut done, mut failed) = (0, 0);
    let no_marks = ChangeMarks::default();
    for host in hosts {
        let providers = wanted.remove(&host).unwrap_or_default();
        let marks = changes.get(&host).unwrap_or(&no_marks);
        if synced.get(&host).map_or(&[][..], Vec::as_slice) == providers.as_slice() {
            db.forget_placement_changes(&host, marks).await?;
            continue;
        }
        let settled = match placement.sync_host(&host, &providers).await {
            Ok(in_use) => {
                done += 1;
                let made: Vec<(&str, &str)> = providers
                    .iter()
                    .map(|p| (p.name.as_str(), p.uuid.as_str()))
                    .collect();
                db.record_providers(&host, &made).await?;
                if in_use.is_empty() {
                    tracing::info!(host = %host, providers = providers.len(), "Placement up to date");
                    true
                } else {
                    tracing::warn!(host = %host, ?in_use, "resource providers kept: instances hold allocations on them");
                    false
                }
            }
            Err(e) => {
                failed += 1;
                tracing::warn!(host = %host, error = %e, "Placement not updated; retried next pass");
                false
            }
        };
        if settled {
            db.forget_placement_changes(&host, marks).await?;
            if providers.is_empty() {
                synced.remove(&host);
            } else {
                synced.insert(host, providers);
            }
        } else if marks.is_empty() {
            // Not recorded as synced, and marked: the next pass tries it again.
            db.mark_placement_changed(&host).await?;
        }
    }
    Ok((done, failed))
}

/// The hosts the fleet record knows (every host whose agent ever heartbeat or reported)
/// that have no deployable now and no sync of this reconciler behind them: their
/// compute nodes' providers made by accel or Cyborg are deleted ([`Placement::sync_host`]
/// with none wanted). Run once after a conductor starts, this empties the providers of
/// hosts whose devices went (or that were removed) while no conductor was running;
/// later, [`reconcile`] follows every host it synced. A host Nova never registered is
/// skipped. Returns how many hosts were emptied.
pub async fn sweep_gone_hosts(
    db: &Db,
    placement: &Placement,
    synced: &BTreeMap<String, Vec<Provider>>,
) -> Result<usize, DbError> {
    let hosts: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT f.host FROM fleet_members f \
         WHERE NOT EXISTS (SELECT 1 FROM deployables d WHERE d.hostname = f.host)",
    )
    .fetch_all(db.pool())
    .await?;
    let mut emptied = 0;
    for host in hosts {
        if host.is_empty() || synced.contains_key(&host) {
            continue;
        }
        match placement.sync_host(&host, &[]).await {
            Ok(in_use) if in_use.is_empty() => emptied += 1,
            Ok(in_use) => {
                tracing::warn!(host = %host, ?in_use, "resource providers of a host without devices kept: instances hold allocations on them")
            }
            Err(PlacementError::NoComputeNode(_)) => {}
            Err(e) => {
                tracing::warn!(host = %host, error = %e, "providers of a host without devices not checked")
            }
        }
    }
    Ok(emptied)
}

/// The lease ([`Db::take_lease`]) the reconciler runs under: of several conductors on
/// one database, one keeps Placement at a time.
pub const RECONCILER_LEASE: &str = "placement-reconciler";

/// Runs a [`reconcile_pass`] every `schedule.interval` until the task is aborted, while
/// `holder` (this conductor's id) holds [`RECONCILER_LEASE`]: a [`Pass::Full`] first and
/// every `schedule.full_interval`, a [`Pass::Changed`] otherwise. The lease lasts three
/// intervals and is renewed every interval, during a pass too (a pass over many hosts,
/// or against a slow Placement, may take longer than the lease); a pass whose lease is
/// lost midway is abandoned, so two conductors never reconcile at once for longer than
/// one interval. When the holder stops, another conductor's reconciler takes over
/// within three intervals; one that (re)gains the lease forgets what it last pushed and
/// reconciles every host afresh, since another holder may have changed Placement
/// meanwhile.
pub fn spawn_reconciler(
    db: Db,
    placement: Placement,
    schedule: Schedule,
    holder: String,
) -> tokio::task::JoinHandle<()> {
    let interval = schedule.interval;
    tokio::spawn(async move {
        let mut synced = BTreeMap::new();
        let mut swept = false;
        let mut held = false;
        let mut last_full: Option<tokio::time::Instant> = None;
        let ttl = interval.saturating_mul(3);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match db.take_lease(RECONCILER_LEASE, &holder, ttl).await {
                Ok(true) if !held => {
                    tracing::info!(%holder, "this conductor keeps Placement (reconciler lease taken)");
                    held = true;
                    synced.clear();
                    swept = false;
                    last_full = None;
                }
                Ok(true) => {}
                Ok(false) => {
                    if held {
                        tracing::warn!(%holder, "reconciler lease lost: another conductor keeps Placement");
                    }
                    held = false;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reconciler lease not renewed (database); retried next pass");
                    held = false;
                    continue;
                }
            }
            let started = tokio::time::Instant::now();
            let kind = match last_full {
                Some(at) if started.duration_since(at) < schedule.full_interval => Pass::Changed,
                _ => Pass::Full,
            };
            let pass = async {
                if let Err(e) = reconcile_pass(&db, &placement, &mut synced, kind).await {
                    tracing::warn!(error = %e, "Placement reconciler cannot read the database; retried next pass");
                    return;
                }
                if kind == Pass::Full {
                    last_full = Some(started);
                }
                if !swept {
                    match sweep_gone_hosts(&db, &placement, &synced).await {
                        Ok(n) => {
                            swept = true;
                            if n > 0 {
                                tracing::info!(
                                    hosts = n,
                                    "providers of hosts without devices deleted"
                                );
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "hosts without devices not swept; tried next pass")
                        }
                    }
                }
            };
            // Renewed while the pass runs; lost (or unreadable), the pass is dropped.
            let renew = async {
                loop {
                    tokio::time::sleep(interval).await;
                    if !db
                        .take_lease(RECONCILER_LEASE, &holder, ttl)
                        .await
                        .unwrap_or(false)
                    {
                        return;
                    }
                }
            };
            tokio::select! {
                () = pass => {}
                () = renew => {
                    tracing::warn!(%holder, "reconciler lease lost during a pass: the pass is abandoned");
                    held = false;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(id: i64, kind: &str, vendor: &str, model: &str) -> DeviceRow {
        DeviceRow {
            id,
            uuid: format!("d{id}"),
            device_type: kind.into(),
            vendor: vendor.into(),
            model: model.into(),
            std_board_info: None,
            hostname: "h1".into(),
            vendor_board_info: None,
            status: DeviceStatus::Available,
            maintaining: false,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    fn deployable(attributes: &[(&str, &str)]) -> DeployableRow {
        DeployableRow {
            id: 1,
            uuid: "dep1".into(),
            name: "h1_0000:3b:00.0".into(),
            device_id: 1,
            hostname: "h1".into(),
            control_path_id: "0000:3b:00.0".into(),
            num_accelerators: 1,
            driver_name: None,
            enabled: true,
            rp_uuid: String::new(),
            attributes: attributes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            bitstream_id: None,
            created_at: String::new(),
            updated_at: String::new(),
        }
    }

    #[test]
    fn classes_and_traits_come_from_the_attributes() {
        let fpga = device(1, "FPGA", "10ee", "5020");
        // None reported (a release N agent): the names Cyborg's drivers would report.
        assert_eq!(
            class_and_traits(&fpga, &deployable(&[])),
            (
                "FPGA".to_owned(),
                vec![
                    "CUSTOM_FPGA_PRODUCT_ID_5020".to_owned(),
                    "CUSTOM_FPGA_XILINX".to_owned()
                ]
            )
        );
        // A Cyborg agent's (its fake driver's): taken as they are.
        assert_eq!(
            class_and_traits(
                &fpga,
                &deployable(&[("rc", "CUSTOM_FAKE"), ("traits1", "CUSTOM_FAKE_DEVICE")])
            ),
            (
                "CUSTOM_FAKE".to_owned(),
                vec!["CUSTOM_FAKE_DEVICE".to_owned()]
            )
        );
        // What Placement would refuse is left out; a bad class falls back.
        assert_eq!(
            class_and_traits(
                &fpga,
                &deployable(&[
                    ("rc", "fpga!"),
                    ("trait0", "not a trait"),
                    ("trait1", "CUSTOM_OK")
                ])
            ),
            ("FPGA".to_owned(), vec!["CUSTOM_OK".to_owned()])
        );
        assert_eq!(encode("h 1/é"), "h%201%2F%C3%A9");
    }
}
