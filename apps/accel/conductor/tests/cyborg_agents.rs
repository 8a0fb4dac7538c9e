//! A real Cyborg 17 agent's report, sent by Cyborg's own code over RabbitMQ on exchange
//! `cyborg` (`apps/accel/cyborg17/python/cyborg_peer.py send`: Cyborg's fake driver's
//! discovery through Cyborg's `ConductorAPI.report_data`), lands in accel's database
//! through the conductor's Cyborg endpoint, on SQLite and on PostgreSQL; the same report
//! again changes nothing and is recognised by the conductor's digest, which a later
//! write to the host's inventory forgets. A Cyborg agent with the seed spec's object
//! indirection lists its host's devices through the same endpoint (conductor RPC 1.1).
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON` and the PostgreSQL test cluster
//! (scripts/test.sh provides all three).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::ListFilter;
use accel_conductor::db::Release;
use accel_conductor::{cyborg, testing, Db};
use accel_cyborg17::testing::{
    cyborg_agent_cleans, cyborg_agent_lists_devices, cyborg_agent_lists_handles,
    cyborg_agent_reports, cyborg_agent_reports_devices, cyborg_agent_sets_managed,
    cyborg_transport, Again,
};
use accel_objects::{AccelVersion, CleanupState};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use verso_upgrade::Coordinator;

/// The Cyborg endpoint over `db` on a topic of its own (no fleet record): the topic and
/// the server.
async fn served(db: &Db) -> (String, verso_rpc::ServerHandle) {
    let topic = format!("cyborg-conductor-test-{}", uuid::Uuid::new_v4().simple());
    let server = cyborg::serve(cyborg_transport().await, db.clone(), &topic, None)
        .await
        .expect("the Cyborg endpoint listens");
    (topic, server)
}

/// `host`'s rows.
fn on(host: &str) -> ListFilter {
    ListFilter {
        host: Some(host.into()),
        ..ListFilter::default()
    }
}

async fn a_cyborg_agents_report_lands_in(db: Db) {
    let (topic, server) = served(&db).await;
    let host = "cyborg-host-1";

    let sent = cyborg_agent_reports(&topic, host).await;
    let on_host = on(host);
    let devices = db.devices(&on_host).await.expect("devices");
    assert_eq!(devices.len(), 1, "Cyborg's fake driver reports one device");
    let data = &sent[0]["cyborg_object.data"];
    assert_eq!(devices[0].device_type, "FPGA");
    assert_eq!(devices[0].vendor, data["vendor"].as_str().expect("vendor"));
    assert_eq!(devices[0].model, data["model"].as_str().expect("model"));
    assert_eq!(devices[0].hostname, host);
    let sent_handles: Vec<&str> = data["deployable_list"]
        .as_array()
        .expect("deployables")
        .iter()
        .flat_map(|d| {
            d["cyborg_object.data"]["attach_handle_list"]
                .as_array()
                .expect("handles")
        })
        .map(|h| {
            h["cyborg_object.data"]["attach_info"]
                .as_str()
                .expect("info")
        })
        .collect();
    let handles = db.attach_handles(Some(host)).await.expect("handles");
    assert_eq!(
        handles
            .iter()
            .map(|h| h.attach_info.as_str())
            .collect::<Vec<_>>(),
        sent_handles
    );
    assert!(handles
        .iter()
        .all(|h| h.attach_type == "TEST_PCI" && !h.in_use));
    // The board details and the deployable's name as the driver gave them (Cyborg names
    // the Placement provider after the deployable), and its attributes.
    assert_eq!(
        devices[0].vendor_board_info.as_deref(),
        data["vendor_board_info"].as_str()
    );
    let sent_dep = &data["deployable_list"][0]["cyborg_object.data"];
    let deployables = db.deployables(&on_host).await.expect("deployables");
    assert_eq!(deployables.len(), 1);
    assert_eq!(
        deployables[0].name,
        sent_dep["name"].as_str().expect("name")
    );
    assert_eq!(
        deployables[0].rp_uuid,
        accel_conductor::db::rp_uuid(&deployables[0].name)
    );
    let sent_attributes: std::collections::BTreeMap<String, String> = sent_dep["attribute_list"]
        .as_array()
        .expect("attributes")
        .iter()
        .map(|a| {
            let a = &a["cyborg_object.data"];
            (
                a["key"].as_str().expect("key").to_owned(),
                a["value"].as_str().expect("value").to_owned(),
            )
        })
        .collect();
    assert!(!sent_attributes.is_empty());
    assert_eq!(deployables[0].attributes, sent_attributes);

    // The conductor stored its own digest of what it applied.
    let (digest, count) = db
        .report_digest(host)
        .await
        .expect("read the digest")
        .expect("a digest is stored after the report");
    assert!(digest.starts_with("cyborg-v2:"), "{digest}");
    assert_eq!(count, 1);

    // The same report again: nothing changes (recognised by its digest).
    let before = db.devices(&on_host).await.expect("devices");
    cyborg_agent_reports(&topic, host).await;
    assert_eq!(db.devices(&on_host).await.expect("devices"), before);
    assert_eq!(
        db.attach_handles(Some(host)).await.expect("handles").len(),
        sent_handles.len()
    );
    assert_eq!(
        db.report_digest(host)
            .await
            .expect("digest")
            .map(|(d, _)| d),
        Some(digest.clone())
    );

    // An operator deletes a reported attribute: the write forgets the digest, so the
    // next unchanged report is diffed again and restores the key (a report owns the
    // keys it reports), instead of being skipped as unchanged.
    let attributes = db
        .attributes(Some(deployables[0].id), None, &ListFilter::default())
        .await
        .expect("attributes");
    let deleted = attributes.first().expect("a reported attribute");
    db.delete_attribute(&deleted.uuid)
        .await
        .expect("delete an attribute");
    assert_eq!(db.report_digest(host).await.expect("digest"), None);
    cyborg_agent_reports(&topic, host).await;
    let after: Vec<String> = db
        .attributes(Some(deployables[0].id), None, &ListFilter::default())
        .await
        .expect("attributes")
        .into_iter()
        .map(|a| a.key)
        .collect();
    assert!(
        after.contains(&deleted.key),
        "{after:?} lacks {}",
        deleted.key
    );
    assert_eq!(
        db.report_digest(host)
            .await
            .expect("digest")
            .map(|(d, _)| d),
        Some(digest)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cyborg_agents_report_lands_in_sqlite() {
    let (db, _dir) = testing::sqlite().await;
    a_cyborg_agents_report_lands_in(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cyborg_agents_report_lands_in_postgresql() {
    a_cyborg_agents_report_lands_in(testing::postgres().await).await;
}

/// A NIC whose SR-IOV virtual functions Cyborg's driver reports as deployables of
/// their own lands as one device with one deployable per virtual function, each with
/// its own handle, attributes and provider (it was merged into one before); the same
/// report again changes nothing.
async fn a_cyborg_nic_keeps_a_deployable_per_virtual_function(db: Db) {
    let (topic, server) = served(&db).await;
    let host = "cyborg-nic-host";
    let sent = cyborg_agent_reports_devices(&topic, host, true).await;
    let nic = sent
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| &d["cyborg_object.data"])
        .find(|d| d["type"] == "NIC")
        .expect("the NIC was sent");
    let on_host = on(host);
    let devices = db.devices(&on_host).await.expect("devices");
    let mut types: Vec<&str> = devices.iter().map(|d| d.device_type.as_str()).collect();
    types.sort();
    assert_eq!(types, ["FPGA", "NIC"]);
    let nic_row = devices
        .iter()
        .find(|d| d.device_type == "NIC")
        .expect("NIC");
    let deployables: Vec<_> = db
        .deployables(&on_host)
        .await
        .expect("deployables")
        .into_iter()
        .filter(|d| d.device_id == nic_row.id)
        .collect();
    let handles = db.attach_handles(Some(host)).await.expect("handles");
    let mut got: Vec<(String, String, Vec<String>)> = Vec::new();
    for dep in &deployables {
        assert_eq!(dep.control_path_id, "0000:5e:00.0");
        assert_eq!(dep.rp_uuid, accel_conductor::db::rp_uuid(&dep.name));
        let infos = handles
            .iter()
            .filter(|h| h.deployable_id == dep.id)
            .map(|h| h.attach_info.clone())
            .collect();
        let trait0 = dep.attributes.get("trait0").cloned().unwrap_or_default();
        got.push((dep.name.clone(), trait0, infos));
    }
    got.sort();
    let mut want: Vec<(String, String, Vec<String>)> = nic["deployable_list"]
        .as_array()
        .expect("deployables")
        .iter()
        .map(|d| {
            let d = &d["cyborg_object.data"];
            let trait0 = d["attribute_list"]
                .as_array()
                .expect("attributes")
                .iter()
                .map(|a| &a["cyborg_object.data"])
                .find(|a| a["key"] == "trait0")
                .and_then(|a| a["value"].as_str())
                .expect("trait0")
                .to_owned();
            let infos = d["attach_handle_list"]
                .as_array()
                .expect("handles")
                .iter()
                .map(|h| {
                    h["cyborg_object.data"]["attach_info"]
                        .as_str()
                        .expect("info")
                        .to_owned()
                })
                .collect();
            (d["name"].as_str().expect("name").to_owned(), trait0, infos)
        })
        .collect();
    want.sort();
    assert_eq!(want.len(), 2, "two virtual functions were sent");
    assert_eq!(got, want, "one deployable per virtual function, as sent");

    // The same report again: nothing changes.
    let before = db.deployables(&on_host).await.expect("deployables");
    cyborg_agent_reports_devices(&topic, host, true).await;
    assert_eq!(db.deployables(&on_host).await.expect("deployables"), before);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_nic_keeps_a_deployable_per_virtual_function_in_sqlite() {
    let (db, _dir) = testing::sqlite().await;
    a_cyborg_nic_keeps_a_deployable_per_virtual_function(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_nic_keeps_a_deployable_per_virtual_function_in_postgresql() {
    a_cyborg_nic_keeps_a_deployable_per_virtual_function(testing::postgres().await).await;
}

type DeviceSeen = (String, i64, String, String, String, String);

/// Each listed device by UUID: its version, id, type, host, status and state.
fn members_of(members: &Value) -> BTreeMap<String, DeviceSeen> {
    members
        .as_array()
        .expect("a list")
        .iter()
        .map(|m| {
            let d = &m["cyborg_object.data"];
            let text = |k: &str| {
                d[k].as_str()
                    .unwrap_or_else(|| panic!("{k}: {m}"))
                    .to_owned()
            };
            (
                text("uuid"),
                (
                    m["cyborg_object.version"]
                        .as_str()
                        .expect("version")
                        .to_owned(),
                    d["id"].as_i64().expect("id"),
                    text("type"),
                    text("hostname"),
                    text("status"),
                    text("device_state"),
                ),
            )
        })
        .collect()
}

/// The seed spec on Cyborg's topic: a Cyborg agent with oslo.versionedobjects'
/// indirection (`python/cyborg_indirection.py`) calls the spec's
/// `DeviceList.get_by_hostname` and gets its host's devices from accel's database as
/// the spec's `Device` 1.6: ids, UUIDs, types, `status` from the operator's maintenance,
/// `device_state` from the handles (the NIC with a bound virtual function is
/// `allocated`). An agent whose `Device` is Cyborg 17's 1.5 gets the same devices at
/// 1.5, one whose `Device` is 1.4 gets them without `device_state`, each backported in
/// the same reply; another host's list is empty.
async fn a_cyborg_agent_lists_its_devices_through_the_conductor(db: Db) {
    let (topic, server) = served(&db).await;
    let host = "cyborg-indirection-host";
    cyborg_agent_reports_devices(&topic, host, true).await;
    let on_host = on(host);
    let rows = db.devices(&on_host).await.expect("devices");
    let fpga = rows.iter().find(|d| d.device_type == "FPGA").expect("FPGA");
    db.set_device_maintaining(&fpga.uuid, true)
        .await
        .expect("maintenance");
    db.create_profile(
        "vf",
        vec![[("resources:CUSTOM_NIC".to_owned(), "1".to_owned())]
            .into_iter()
            .collect()],
        None,
    )
    .await
    .expect("profile");
    let arq = db.create_arq("vf", 0, None).await.expect("arq");
    let vf2 = accel_conductor::db::rp_uuid(&format!("{host}_nic_vf2"));
    db.bind(&arq.uuid, host, "inst-vf", Some(&vf2))
        .await
        .expect("bound to the second virtual function");

    let (version, members) = cyborg_agent_lists_devices(&topic, host, None).await;
    assert_eq!(version, "1.0");
    let rows = db.devices(&on_host).await.expect("devices");
    let got = members_of(&members);
    let want: BTreeMap<String, DeviceSeen> = rows
        .iter()
        .map(|r| {
            let (status, state) = match r.device_type.as_str() {
                "FPGA" => ("maintaining", "available"),
                _ => ("enabled", "allocated"),
            };
            (
                r.uuid.clone(),
                (
                    "1.6".to_owned(),
                    r.id,
                    r.device_type.clone(),
                    host.to_owned(),
                    status.to_owned(),
                    state.to_owned(),
                ),
            )
        })
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(got, want);

    // Cyborg 17's Device (1.5) in the agent's manifest: the same devices and states,
    // backported (1.6 only added methods).
    let (_, cyborg_17) = cyborg_agent_lists_devices(&topic, host, Some("1.5")).await;
    let as_17: BTreeMap<String, DeviceSeen> = want
        .iter()
        .map(|(uuid, (_, id, ty, host, status, state))| {
            let at = (
                "1.5".to_owned(),
                *id,
                ty.clone(),
                host.clone(),
                status.clone(),
                state.clone(),
            );
            (uuid.clone(), at)
        })
        .collect();
    assert_eq!(members_of(&cyborg_17), as_17);

    // Cyborg 16's Device (1.4) in the agent's manifest: the same devices, backported.
    let (_, old) = cyborg_agent_lists_devices(&topic, host, Some("1.4")).await;
    let old = old.as_array().expect("a list");
    assert_eq!(old.len(), 2);
    for m in old {
        assert_eq!(m["cyborg_object.version"], "1.4", "{m}");
        let data = m["cyborg_object.data"].as_object().expect("data");
        assert!(!data.contains_key("device_state"), "{m}");
        let uuid = data["uuid"].as_str().expect("uuid");
        assert!(want.contains_key(uuid), "{m}");
    }

    let (_, none) = cyborg_agent_lists_devices(&topic, "a-host-with-nothing", None).await;
    assert_eq!(none, serde_json::json!([]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_lists_its_devices_through_the_conductor_in_sqlite() {
    let (db, _dir) = testing::sqlite().await;
    a_cyborg_agent_lists_its_devices_through_the_conductor(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_lists_its_devices_through_the_conductor_in_postgresql() {
    a_cyborg_agent_lists_its_devices_through_the_conductor(testing::postgres().await).await;
}

/// A coordinator over `db`'s version record (a fresh database's is finalized: the
/// driver features' gates are open).
async fn finalized(db: &Db) -> Arc<Coordinator<AccelVersion>> {
    let versions = testing::versions(db).await;
    assert!(versions.is_allowed(AccelVersion::DriverFeatures));
    Arc::new(Coordinator::new(
        versions,
        "agent",
        Duration::from_secs(600),
    ))
}

fn data(primitive: &Value) -> &serde_json::Map<String, Value> {
    primitive["cyborg_object.data"]
        .as_object()
        .unwrap_or_else(|| panic!("a primitive: {primitive}"))
}

fn kind(outcome: &accel_cyborg17::testing::SeedSpecOutcome) -> &str {
    match outcome {
        Ok(p) => panic!("expected an error, got {p}"),
        Err((kind, _)) => kind,
    }
}

/// The PCI managed-mode feature on Cyborg's topic: a Cyborg agent with the seed spec
/// reads its handles (`AttachHandleList.get_by_hostname`) and sets a free handle's
/// managed mode (`AttachHandle` 1.1 `update_managed`): written into the stored attach
/// info with the UUID kept; a second read taken before it is stale (`StaleHandle`,
/// nothing written); an allocated handle is `HandleInUse`; `managed = false` waits for
/// finalization (`NotSupportedBeforeFinalization` from a conductor with no version
/// record, done by one whose release is finalized).
async fn a_cyborg_agent_sets_managed_mode_through_the_conductor(db: Db) {
    let (topic, server) = served(&db).await;
    let host = "cyborg-managed-host";
    cyborg_agent_reports_devices(&topic, host, true).await;

    let (version, listed) = cyborg_agent_lists_handles(&topic, host).await;
    assert_eq!(version, "1.0");
    let stored = db.host_handles(host).await.expect("handles");
    // `cpid_id` is the device's id: the agent finds a device's handles by it.
    let mut got: Vec<(String, String, bool, i64, String)> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| {
            let d = data(p);
            (
                d["uuid"].as_str().expect("uuid").to_owned(),
                d["attach_info"].as_str().expect("info").to_owned(),
                d["in_use"].as_bool().expect("in_use"),
                d["cpid_id"].as_i64().expect("cpid_id"),
                p["cyborg_object.version"]
                    .as_str()
                    .expect("version")
                    .to_owned(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String, bool, i64, String)> = stored
        .iter()
        .map(|h| {
            (
                h.uuid.clone(),
                h.attach_info.clone(),
                h.in_use,
                h.device_id,
                "1.1".to_owned(),
            )
        })
        .collect();
    want.sort();
    assert_eq!(got, want);

    let deployables = db.deployables(&on(host)).await.expect("deployables");
    let vf = |name: &str| {
        let dep = deployables
            .iter()
            .find(|d| d.name == format!("{host}_nic_{name}"))
            .unwrap_or_else(|| panic!("{name} in {deployables:?}"));
        let handle = stored
            .iter()
            .find(|h| h.deployable_id == dep.id)
            .unwrap_or_else(|| panic!("{name}'s handle in {stored:?}"));
        (dep.rp_uuid.clone(), handle.uuid.clone())
    };
    let (_, vf1) = vf("vf1");
    let (vf2_rp, vf2) = vf("vf2");

    // A free handle, read twice: the first read's update lands, the second is stale.
    let outcomes = cyborg_agent_sets_managed(&topic, host, &vf1, true, true).await;
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    let after = outcomes[0].as_ref().expect("the first read's update lands");
    assert_eq!(kind(&outcomes[1]), "StaleHandle", "{outcomes:?}");
    let row = db.host_handle(&vf1).await.expect("handle");
    let info: Value = serde_json::from_str(&row.attach_info).expect("JSON");
    assert_eq!(info["managed"], "yes", "{info}");
    assert_eq!(data(after)["attach_info"], row.attach_info);
    assert_eq!(data(after)["uuid"], vf1);

    // An allocated handle keeps how it is managed.
    db.create_profile(
        "managed-vf",
        vec![[("resources:CUSTOM_NIC".to_owned(), "1".to_owned())]
            .into_iter()
            .collect()],
        None,
    )
    .await
    .expect("profile");
    let arq = db.create_arq("managed-vf", 0, None).await.expect("arq");
    db.bind(&arq.uuid, host, "inst-managed", Some(&vf2_rp))
        .await
        .expect("bound");
    let before = db.host_handle(&vf2).await.expect("handle");
    let outcomes = cyborg_agent_sets_managed(&topic, host, &vf2, true, false).await;
    assert_eq!(kind(&outcomes[0]), "HandleInUse", "{outcomes:?}");
    assert_eq!(db.host_handle(&vf2).await.expect("handle"), before);

    // `managed = false` is a gated feature: refused without a finalized release...
    let before = db.host_handle(&vf1).await.expect("handle");
    let outcomes = cyborg_agent_sets_managed(&topic, host, &vf1, false, false).await;
    assert_eq!(
        kind(&outcomes[0]),
        "NotSupportedBeforeFinalization",
        "{outcomes:?}"
    );
    assert_eq!(db.host_handle(&vf1).await.expect("handle"), before);
    server.stop().await;

    // ...and done by a conductor whose release is finalized.
    let server = cyborg::serve(
        cyborg_transport().await,
        db.clone(),
        &topic,
        Some(finalized(&db).await),
    )
    .await
    .expect("the Cyborg endpoint listens");
    let outcomes = cyborg_agent_sets_managed(&topic, host, &vf1, false, false).await;
    assert!(outcomes[0].is_ok(), "{outcomes:?}");
    let info: Value =
        serde_json::from_str(&db.host_handle(&vf1).await.expect("handle").attach_info)
            .expect("JSON");
    assert_eq!(info["managed"], "no", "{info}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_sets_managed_mode_through_the_conductor_in_sqlite() {
    let (db, _dir) = testing::sqlite().await;
    a_cyborg_agent_sets_managed_mode_through_the_conductor(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_sets_managed_mode_through_the_conductor_in_postgresql() {
    a_cyborg_agent_sets_managed_mode_through_the_conductor(testing::postgres().await).await;
}

/// An NVMe SSD on `host`, bound to an instance and released for cleaning: its
/// `device_state` is `pending_cleaning`. Returns the device's UUID.
async fn ssd_waiting_for_cleanup(db: &Db, host: &str, instance: &str) -> String {
    let ssd = testing::reported_device("0000:3c:00.0", "SSD", "144d", "a80a", 1);
    db.report(host, &[ssd]).await.expect("report");
    let arq = testing::bound_request(db, "SSD", host, instance).await;
    db.unbind_with(&arq.uuid, Release::CleanSsd)
        .await
        .expect("released for cleaning");
    let on_host = on(host);
    db.devices(&on_host).await.expect("devices")[0].uuid.clone()
}

fn state(outcome: &accel_cyborg17::testing::SeedSpecOutcome) -> &str {
    let p = outcome
        .as_ref()
        .unwrap_or_else(|e| panic!("the step failed: {e:?}"));
    assert_eq!(p["cyborg_object.version"], "1.6", "{p}");
    data(p)["device_state"].as_str().expect("device_state")
}

/// The NVMe cleanup feature on Cyborg's lifecycle: a Cyborg agent with the seed spec
/// finds its SSD `pending_cleaning`, claims it (`Device` 1.6 `cleanup_started`: a
/// second runner from the same read loses with `StaleHandle`, a retry of the same call
/// answers the same), records success (`available`, the handle back in the pool) or
/// failure (`error` with the reason, kept out of the pool); a step from the wrong state
/// is `NotCleaning`.
async fn a_cyborg_agent_cleans_a_device_through_the_conductor(db: Db) {
    let (topic, server) = served(&db).await;
    let host = "cyborg-cleanup-host";
    let device = ssd_waiting_for_cleanup(&db, host, "inst-1").await;
    let (_, listed) = cyborg_agent_lists_devices(&topic, host, None).await;
    assert_eq!(data(&listed[0])["device_state"], "pending_cleaning");

    // Two runners read it waiting: the first claims it, the other loses.
    let outcomes = cyborg_agent_cleans(&topic, host, &device, "started", "", Again::Other).await;
    assert_eq!(state(&outcomes[0]), "cleaning");
    assert_eq!(kind(&outcomes[1]), "StaleHandle", "{outcomes:?}");
    // Succeeding is not a start.
    let outcomes = cyborg_agent_cleans(&topic, host, &device, "started", "", Again::No).await;
    assert_eq!(kind(&outcomes[0]), "NotCleaning", "{outcomes:?}");
    let outcomes = cyborg_agent_cleans(&topic, host, &device, "succeeded", "", Again::No).await;
    assert_eq!(state(&outcomes[0]), "available");
    let handles = db.host_handles(host).await.expect("handles");
    assert_eq!(
        (handles[0].cleanup_state, handles[0].in_use),
        (None, false),
        "{handles:?}"
    );

    // Again, retried after a lost reply, and failed.
    ssd_waiting_for_cleanup(&db, host, "inst-2").await;
    let outcomes = cyborg_agent_cleans(&topic, host, &device, "started", "", Again::Retry).await;
    assert_eq!(state(&outcomes[0]), "cleaning");
    assert_eq!(
        state(&outcomes[1]),
        "cleaning",
        "the retry answers the same"
    );
    let outcomes =
        cyborg_agent_cleans(&topic, host, &device, "failed", "erase failed", Again::No).await;
    assert_eq!(state(&outcomes[0]), "error");
    let handles = db.host_handles(host).await.expect("handles");
    assert_eq!(handles[0].cleanup_state, Some(CleanupState::Error));
    assert_eq!(handles[0].cleanup_reason.as_deref(), Some("erase failed"));
    let outcomes = cyborg_agent_cleans(&topic, host, &device, "succeeded", "", Again::No).await;
    assert_eq!(kind(&outcomes[0]), "NotCleaning", "{outcomes:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_cleans_a_device_through_the_conductor_in_sqlite() {
    let (db, _dir) = testing::sqlite().await;
    a_cyborg_agent_cleans_a_device_through_the_conductor(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_cleans_a_device_through_the_conductor_in_postgresql() {
    a_cyborg_agent_cleans_a_device_through_the_conductor(testing::postgres().await).await;
}
