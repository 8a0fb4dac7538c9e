//! The conductor keeps resource providers in a real Placement (openstack-placement 16,
//! `VERSO_TEST_PLACEMENT_URL`, behind the test Keystone `VERSO_TEST_KEYSTONE_URL`; both
//! started by scripts/test.sh): one provider per deployable under the host's compute
//! node, its inventory and traits, found by Nova's allocation candidates query, updated
//! on disable and removal, and a bind follows the provider Placement chose.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::{rp_uuid, ReportedDevice};
use accel_conductor::keystone::{AuthOptions, Session};
use accel_conductor::placement::{
    reconcile, reconcile_pass, spawn_reconciler, sweep_gone_hosts, Pass, Placement, PlacementError,
    Schedule, RECONCILER_LEASE,
};
use accel_conductor::Db;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: scripts/test.sh starts the test Keystone and Placement and sets it"
        )
    })
}

fn session() -> Session {
    Session::new(AuthOptions::new(
        &env("VERSO_TEST_KEYSTONE_URL"),
        "accel",
        "verso-accel",
        "service",
    ))
    .expect("session")
}

/// A call to Placement as the test's own client (what Nova does itself).
async fn call(
    p: &Placement,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    p.call(method, path, body.as_ref())
        .await
        .unwrap_or_else(|e| panic!("Placement: {e}"))
}

/// The status Placement answers for one resource provider (200, or 404 once deleted).
async fn provider_status(p: &Placement, uuid: &str) -> u16 {
    call(
        p,
        reqwest::Method::GET,
        &format!("/resource_providers/{uuid}"),
        None,
    )
    .await
    .0
}

/// Deletes what a run made, children first; each must go (204).
async fn delete_providers(p: &Placement, uuids: &[&String]) {
    for rp in uuids {
        let (status, body) = call(
            p,
            reqwest::Method::DELETE,
            &format!("/resource_providers/{rp}"),
            None,
        )
        .await;
        assert_eq!(status, 204, "{body}");
    }
}

/// A host name of this run only (`<prefix>-<8 hex>`) and its compute node's provider,
/// made as Nova makes it.
async fn compute_node(placement: &Placement, prefix: &str) -> (String, String) {
    let host = format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let (status, node) = call(
        placement,
        reqwest::Method::POST,
        "/resource_providers",
        Some(json!({"name": host})),
    )
    .await;
    assert_eq!(status, 200, "{node}");
    (host, node["uuid"].as_str().expect("uuid").to_owned())
}

fn device(cp: &str, kind: &str, vendor: &str, model: &str, handles: usize) -> ReportedDevice {
    accel_conductor::testing::reported_device(cp, kind, vendor, model, handles)
}

#[tokio::test]
async fn deployables_are_resource_providers_nova_can_schedule_on() {
    let placement = Placement::new(session(), Some(env("VERSO_TEST_PLACEMENT_URL")));
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    let (host, root) = compute_node(&placement, "placement").await;
    let fpga = device("0000:3b:00.0", "FPGA", "10ee", "5020", 1);
    let gpu = device("0000:3c:00.0", "GPU", "10de", "1eb8", 2);
    db.report(&host, &[fpga.clone(), gpu.clone()])
        .await
        .expect("report");

    let mut synced = BTreeMap::new();
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (1, 0)
    );
    let fpga_rp = rp_uuid(&format!("{host}_0000:3b:00.0"));
    let gpu_rp = rp_uuid(&format!("{host}_0000:3c:00.0"));
    let (_, tree) = call(
        &placement,
        reqwest::Method::GET,
        &format!("/resource_providers?in_tree={root}"),
        None,
    )
    .await;
    let mut children: Vec<(String, String)> = tree["resource_providers"]
        .as_array()
        .expect("list")
        .iter()
        .filter(|p| p["parent_provider_uuid"] == root.as_str())
        .map(|p| {
            (
                p["uuid"].as_str().unwrap_or("").to_owned(),
                p["name"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    children.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        children,
        [
            (fpga_rp.clone(), format!("{host}_0000:3b:00.0")),
            (gpu_rp.clone(), format!("{host}_0000:3c:00.0"))
        ]
    );
    let (_, inv) = call(
        &placement,
        reqwest::Method::GET,
        &format!("/resource_providers/{gpu_rp}/inventories"),
        None,
    )
    .await;
    assert_eq!(inv["inventories"]["PGPU"]["total"], 2, "{inv}");
    assert_eq!(inv["inventories"]["PGPU"]["reserved"], 0, "{inv}");
    let (_, traits) = call(
        &placement,
        reqwest::Method::GET,
        &format!("/resource_providers/{fpga_rp}/traits"),
        None,
    )
    .await;
    let mut names: Vec<&str> = traits["traits"]
        .as_array()
        .expect("traits")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["CUSTOM_FPGA_PRODUCT_ID_5020", "CUSTOM_FPGA_XILINX"]);

    // What Nova's scheduler asks for a flavor with resources:FPGA=1 and the Xilinx
    // trait: this host's FPGA provider is a candidate.
    let (status, candidates) = call(
        &placement,
        reqwest::Method::GET,
        "/allocation_candidates?resources=FPGA:1&required=CUSTOM_FPGA_XILINX",
        None,
    )
    .await;
    assert_eq!(status, 200, "{candidates}");
    assert!(
        candidates["provider_summaries"].get(&fpga_rp).is_some(),
        "{candidates}"
    );

    // Unchanged: nothing to do. A bind naming Placement's choice takes that device.
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (0, 0)
    );
    let profile = db
        .create_profile(
            "xilinx",
            vec![BTreeMap::from([(
                "resources:FPGA".to_owned(),
                "1".to_owned(),
            )])],
            None,
        )
        .await
        .expect("profile");
    let arq = db
        .create_arqs(&profile.name, None, None)
        .await
        .expect("arq")
        .remove(0);
    let bound = db
        .bind(
            &arq.uuid,
            &host,
            "8c8d1c3a-5a4e-4a0e-9a55-3a1f0e6c2b11",
            Some(&fpga_rp),
        )
        .await
        .expect("bind");
    assert_eq!(bound.device_rp_uuid.as_deref(), Some(fpga_rp.as_str()));
    assert!(
        bound
            .attach_handle_info
            .as_deref()
            .unwrap_or("")
            .contains("0000:3b:00.0"),
        "{bound:?}"
    );

    // The GPU disabled: all of it reserved, so Nova schedules nothing on it.
    let (_, devices) = (0, db.devices(&Default::default()).await.expect("devices"));
    let gpu_device = devices
        .iter()
        .find(|d| d.hostname == host && d.device_type == "GPU")
        .expect("gpu");
    db.set_device_maintaining(&gpu_device.uuid, true)
        .await
        .expect("disable");
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (1, 0)
    );
    let (_, inv) = call(
        &placement,
        reqwest::Method::GET,
        &format!("/resource_providers/{gpu_rp}/inventories"),
        None,
    )
    .await;
    assert_eq!(inv["inventories"]["PGPU"]["reserved"], 2, "{inv}");

    // Nova's own child of the compute node (a vGPU provider, named as libvirt names
    // them, with a UUID of Nova's): never touched by accel.
    let nova_child = uuid::Uuid::new_v4().to_string();
    let (status, body) = call(
        &placement,
        reqwest::Method::POST,
        "/resource_providers",
        Some(json!({
            "name": format!("{host}_pci_0000_84_00_0"),
            "uuid": nova_child,
            "parent_provider_uuid": root,
        })),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The GPU gone from the host's report: its provider is deleted, Nova's is not.
    db.report(&host, &[fpga]).await.expect("report");
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (1, 0)
    );
    assert_eq!(provider_status(&placement, &gpu_rp).await, 404);
    assert_eq!(
        provider_status(&placement, &nova_child).await,
        200,
        "Nova's provider is kept"
    );

    // A host Nova has not registered: its providers wait, and the pass says it failed.
    let stranger = format!("{host}-unknown");
    db.report(
        &stranger,
        &[device("0000:70:00.0", "QAT", "8086", "37c8", 1)],
    )
    .await
    .expect("report");
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (0, 1)
    );
    let missing = placement
        .sync_host(&stranger, &[])
        .await
        .expect_err("no compute node");
    assert!(matches!(missing, PlacementError::NoComputeNode(h) if h == stranger));

    // Clean up what this run made (the FPGA's provider holds no allocation).
    delete_providers(&placement, &[&fpga_rp, &nova_child, &root]).await;
}

/// A NIC whose SR-IOV virtual functions are deployables of their own (Cyborg's Intel
/// NIC driver reports them so): one provider per virtual function under the compute
/// node, each with its own class and physical network trait, so Nova's scheduler can
/// pick the function on the network a port needs; one removed from the report loses
/// its provider while the others stay.
#[tokio::test]
async fn each_deployable_of_a_device_is_its_own_provider() {
    let placement = Placement::new(session(), Some(env("VERSO_TEST_PLACEMENT_URL")));
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    let (host, root) = compute_node(&placement, "placement-vfs").await;
    let nic = |vfs: &[u8]| accel_conductor::testing::reported_nic(&host, vfs);
    db.report(&host, &[nic(&[1, 2])]).await.expect("report");
    let (vf1_name, vf2_name) = (format!("{host}_nic_vf1"), format!("{host}_nic_vf2"));
    // Cyborg's `rp_uuid` column is null until Placement has the provider.
    assert_eq!(
        stored_providers(&db).await,
        [(vf1_name.clone(), None), (vf2_name.clone(), None)]
    );
    let mut synced = BTreeMap::new();
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (1, 0)
    );
    let vf1 = rp_uuid(&vf1_name);
    let vf2 = rp_uuid(&vf2_name);
    assert_eq!(
        stored_providers(&db).await,
        [
            (vf1_name, Some(vf1.clone())),
            (vf2_name.clone(), Some(vf2.clone()))
        ]
    );
    for (rp, net) in [(&vf1, "CUSTOM_PHYSNET_NET1"), (&vf2, "CUSTOM_PHYSNET_NET2")] {
        let (status, provider) = call(
            &placement,
            reqwest::Method::GET,
            &format!("/resource_providers/{rp}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{provider}");
        assert_eq!(provider["parent_provider_uuid"], root.as_str());
        assert_eq!(inventory_of(&placement, rp, "CUSTOM_NIC").await, (1, 0));
        let (_, traits) = call(
            &placement,
            reqwest::Method::GET,
            &format!("/resource_providers/{rp}/traits"),
            None,
        )
        .await;
        assert_eq!(traits["traits"], json!([net]), "{traits}");
    }
    // Nova asks for a virtual function on the second network: only vf2 is a candidate.
    let (status, candidates) = call(
        &placement,
        reqwest::Method::GET,
        "/allocation_candidates?resources=CUSTOM_NIC:1&required=CUSTOM_PHYSNET_NET2",
        None,
    )
    .await;
    assert_eq!(status, 200, "{candidates}");
    let summaries = candidates["provider_summaries"]
        .as_object()
        .expect("summaries");
    assert!(summaries.contains_key(&vf2), "{candidates}");
    assert!(!summaries.contains_key(&vf1), "{candidates}");

    // The first virtual function gone: its provider goes, the second's stays.
    db.report(&host, &[nic(&[2])]).await.expect("report");
    assert_eq!(
        reconcile(&db, &placement, &mut synced).await.expect("pass"),
        (1, 0)
    );
    assert_eq!(provider_status(&placement, &vf1).await, 404);
    assert_eq!(provider_status(&placement, &vf2).await, 200);
    assert_eq!(stored_providers(&db).await, [(vf2_name, Some(vf2.clone()))]);
    delete_providers(&placement, &[&vf2, &root]).await;
}

/// Every deployable's name and stored `rp_uuid` (Cyborg's column), by name.
async fn stored_providers(db: &Db) -> Vec<(String, Option<String>)> {
    accel_conductor::testing::stored_providers(db)
        .await
        .into_iter()
        .map(|(name, _, rp)| (name, rp))
        .collect()
}

/// A host whose devices went while no conductor ran: the fleet record still knows it,
/// the database has no deployable of it, and the first pass after a start
/// (`sweep_gone_hosts`) deletes the providers accel made under its compute node, not
/// Nova's own.
#[tokio::test]
async fn a_host_emptied_while_no_conductor_ran_loses_its_providers() {
    let placement = Placement::new(session(), Some(env("VERSO_TEST_PLACEMENT_URL")));
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    let (host, root) = compute_node(&placement, "placement-gone").await;
    // What an earlier conductor made for the host's FPGA, and a child of Nova's.
    let ours_name = format!("{host}_0000:3b:00.0");
    let ours = rp_uuid(&ours_name);
    let novas = uuid::Uuid::new_v4().to_string();
    for (name, uuid) in [
        (ours_name.clone(), ours.clone()),
        (format!("{host}_pci_0000_84_00_0"), novas.clone()),
    ] {
        let (status, body) = call(
            &placement,
            reqwest::Method::POST,
            "/resource_providers",
            Some(json!({"name": name, "uuid": uuid, "parent_provider_uuid": root})),
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    // The fleet record knows the host (its agent reported once); no device is left.
    sqlx::query(
        "INSERT INTO fleet_members (component, member_id, host, software, apparent, heard_by, heartbeats, last_seen_ms) \
         VALUES ('accel-agent', $1, $2, 2, 2, 'c1', 1, 0)",
    )
    .bind(format!("accel-agent.{host}"))
    .bind(&host)
    .execute(db.pool())
    .await
    .expect("fleet member");

    let mut synced = BTreeMap::new();
    reconcile(&db, &placement, &mut synced).await.expect("pass");
    assert_eq!(
        provider_status(&placement, &ours).await,
        200,
        "a pass alone does not know the host"
    );
    assert_eq!(
        sweep_gone_hosts(&db, &placement, &synced)
            .await
            .expect("sweep"),
        1
    );
    assert_eq!(
        provider_status(&placement, &ours).await,
        404,
        "accel's provider deleted"
    );
    assert_eq!(
        provider_status(&placement, &novas).await,
        200,
        "Nova's kept"
    );

    delete_providers(&placement, &[&novas, &root]).await;
}

/// Two conductors on one database: the reconciler holding the lease keeps Placement, the
/// other does nothing; when the holder stops, the other takes over within three
/// intervals. The first holder here cannot reach Placement at all, so a provider that
/// appears is the second's work.
#[tokio::test]
async fn one_conductor_of_several_keeps_placement() {
    let placement = Placement::new(session(), Some(env("VERSO_TEST_PLACEMENT_URL")));
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    let (host, root) = compute_node(&placement, "placement-lease").await;
    db.report(&host, &[device("0000:3b:00.0", "FPGA", "10ee", "5020", 1)])
        .await
        .expect("report");
    let fpga_rp = rp_uuid(&format!("{host}_0000:3b:00.0"));
    let interval = Duration::from_millis(300);
    let schedule = Schedule {
        interval,
        full_interval: interval * 10,
    };

    let holder = || async {
        db.lease_holder(RECONCILER_LEASE)
            .await
            .expect("read")
            .unwrap_or_default()
    };
    let nowhere = Placement::new(session(), Some("http://127.0.0.1:1".to_owned()));
    let first = spawn_reconciler(db.clone(), nowhere, schedule, "conductor-1".into());
    let deadline = Instant::now() + Duration::from_secs(10);
    while holder().await != "conductor-1" {
        assert!(
            Instant::now() < deadline,
            "the first reconciler never took the lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = spawn_reconciler(
        db.clone(),
        placement.clone(),
        schedule,
        "conductor-2".into(),
    );
    // Five of the second's passes: it keeps out of Placement while the first holds.
    let until = Instant::now() + interval * 5;
    while Instant::now() < until {
        assert_eq!(
            provider_status(&placement, &fpga_rp).await,
            404,
            "the non-holder reconciled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(holder().await, "conductor-1");

    first.abort();
    let deadline = Instant::now() + Duration::from_secs(15);
    while provider_status(&placement, &fpga_rp).await != 200 {
        assert!(
            Instant::now() < deadline,
            "the second reconciler never took over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(holder().await, "conductor-2");
    second.abort();
    delete_providers(&placement, &[&fpga_rp, &root]).await;
}

/// The status of one provider's inventory of `class`: its total and reserved.
async fn inventory_of(p: &Placement, rp: &str, class: &str) -> (i64, i64) {
    let (status, inv) = call(
        p,
        reqwest::Method::GET,
        &format!("/resource_providers/{rp}/inventories"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{inv}");
    let of = &inv["inventories"][class];
    (
        of["total"].as_i64().expect("total"),
        of["reserved"].as_i64().expect("reserved"),
    )
}

/// A changed-hosts pass follows the database's marks: a device disabled reaches
/// Placement without a full pass, a change nobody marked waits for the next full pass,
/// and a host a pass could not sync is tried again by the next changed-hosts pass.
async fn changed_passes_follow_the_marks(db: Db) {
    let placement = Placement::new(session(), Some(env("VERSO_TEST_PLACEMENT_URL")));
    let (a, root_a) = compute_node(&placement, "changes-a").await;
    let (b, root_b) = compute_node(&placement, "changes-b").await;
    db.report(&a, &[device("0000:3b:00.0", "FPGA", "10ee", "5020", 1)])
        .await
        .expect("report");
    db.report(&b, &[device("0000:3c:00.0", "GPU", "10de", "1eb8", 2)])
        .await
        .expect("report");
    let a_rp = rp_uuid(&format!("{a}_0000:3b:00.0"));
    let b_rp = rp_uuid(&format!("{b}_0000:3c:00.0"));

    // The first pass reads everything and leaves no mark behind; with no mark, a
    // changed-hosts pass has nothing to do.
    let mut synced = BTreeMap::new();
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Full)
            .await
            .expect("pass"),
        (2, 0)
    );
    assert!(db.placement_changes(100).await.expect("marks").is_empty());
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Changed)
            .await
            .expect("pass"),
        (0, 0)
    );

    // A's FPGA disabled: marked, and the next changed-hosts pass reserves it.
    let a_device = db
        .devices(&Default::default())
        .await
        .expect("devices")
        .into_iter()
        .find(|d| d.hostname == a)
        .expect("a's device");
    db.set_device_maintaining(&a_device.uuid, true)
        .await
        .expect("disable");
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Changed)
            .await
            .expect("pass"),
        (1, 0)
    );
    assert_eq!(inventory_of(&placement, &a_rp, "FPGA").await, (1, 1));

    // B's GPU gone, and its marks lost (as a change no trigger saw would be): a
    // changed-hosts pass does not see it, the next full pass deletes the provider.
    db.report(&b, &[]).await.expect("report");
    for (host, marks) in db.placement_changes(100).await.expect("marks") {
        db.forget_placement_changes(&host, &marks)
            .await
            .expect("forget");
    }
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Changed)
            .await
            .expect("pass"),
        (0, 0)
    );
    assert_eq!(provider_status(&placement, &b_rp).await, 200);
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Full)
            .await
            .expect("pass"),
        (1, 0)
    );
    assert_eq!(provider_status(&placement, &b_rp).await, 404);

    // A host Nova has not registered yet: the full pass fails it and marks it; once
    // Nova registers it, a changed-hosts pass makes its provider.
    let c = format!("{a}-late");
    db.report(&c, &[device("0000:70:00.0", "QAT", "8086", "37c8", 1)])
        .await
        .expect("report");
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Full)
            .await
            .expect("pass"),
        (0, 1)
    );
    assert!(db
        .placement_changes(100)
        .await
        .expect("marks")
        .contains_key(&c));
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Changed)
            .await
            .expect("pass"),
        (0, 1),
        "retried while Nova has not registered it"
    );
    let (status, node) = call(
        &placement,
        reqwest::Method::POST,
        "/resource_providers",
        Some(json!({"name": c})),
    )
    .await;
    assert_eq!(status, 200, "{node}");
    let root_c = node["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(
        reconcile_pass(&db, &placement, &mut synced, Pass::Changed)
            .await
            .expect("pass"),
        (1, 0)
    );
    let c_rp = rp_uuid(&format!("{c}_0000:70:00.0"));
    assert_eq!(inventory_of(&placement, &c_rp, "CUSTOM_QAT").await, (1, 0));

    delete_providers(&placement, &[&a_rp, &c_rp, &root_a, &root_b, &root_c]).await;
}

#[tokio::test]
async fn sqlite_changed_passes_follow_the_marks() {
    let (db, _dir) = accel_conductor::testing::sqlite().await;
    changed_passes_follow_the_marks(db).await;
}

#[tokio::test]
async fn postgres_changed_passes_follow_the_marks() {
    changed_passes_follow_the_marks(accel_conductor::testing::postgres().await).await;
}
