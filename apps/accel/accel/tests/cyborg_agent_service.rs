//! The real Cyborg 17 agent *service* (`cyborg-agent` of openstack-cyborg 17.0.0: its
//! `AgentManager`, `ResourceTracker` and periodic report, with Cyborg's fake driver)
//! reports to `accel conductor` serving Cyborg's agents over RabbitMQ: the fake FPGA
//! lands in accel's database with what the driver reports, the host counts as release N
//! (finalize is refused naming it), the agent's periodic report of the same inventory
//! changes nothing, and the agent's own RPC server answers on `cyborg-agent` with its
//! host as the server, where accel's conductor will call `fpga_program`. The conductor
//! also keeps Placement: the FPGA becomes a provider under the host's compute node, as
//! Nova's scheduler looks for it.
//!
//! Cyborg's agent will not start without its compute node's resource provider in
//! Placement (nova-compute makes it; here the test does). Uses `VERSO_TEST_RABBIT_URL`,
//! `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and `VERSO_TEST_PLACEMENT_URL`
//! (scripts/test.sh sets them all).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_conductor::db::{rp_uuid, ListFilter};
use accel_conductor::fleet::DbFleetStore;
use accel_conductor::Db;
use accel_cyborg17::testing::{
    cyborg_agent_answers_fpga_program, cyborg_agent_config, CyborgAgentService,
};
use std::time::{Duration, Instant};
use verso_rpc::RpcError;
use verso_upgrade::FleetStore;

/// How long ago, by the database's clock, the conductor last heard of `host` as a
/// Cyborg agent (its fleet record), if ever.
async fn heard_of(db: &Db, host: &str) -> Option<Duration> {
    DbFleetStore::new(db.clone(), "accel")
        .members()
        .await
        .expect("the fleet record")
        .into_iter()
        .find(|m| m.host == host && !m.heartbeats)
        .map(|m| m.age)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_cyborg_agent_service_reports_into_accel_conductor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = format!(
        "cyborg-svc-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    // The compute node's provider, as nova-compute makes it.
    let placement = support::placement();
    let node = support::ComputeNode::create(&placement, &host).await;

    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _conductor = support::cyborg_conductor(
        &db_url,
        true,
        &[
            (
                "ACCEL_PLACEMENT_AUTH_URL",
                support::env("VERSO_TEST_KEYSTONE_URL"),
            ),
            ("ACCEL_PLACEMENT_USERNAME", "accel".into()),
            ("ACCEL_PLACEMENT_PASSWORD", "verso-accel".into()),
            ("ACCEL_PLACEMENT_PROJECT_NAME", "service".into()),
            (
                "ACCEL_PLACEMENT_ENDPOINT_OVERRIDE",
                support::env("VERSO_TEST_PLACEMENT_URL"),
            ),
            ("ACCEL_PLACEMENT_SYNC_INTERVAL", "1".into()),
        ],
    );
    let db = Db::connect(&db_url)
        .await
        .expect("the conductor's database");

    let config = dir.path().join("cyborg.conf");
    let log = dir.path().join("cyborg-agent.log");
    std::fs::write(
        &config,
        cyborg_agent_config(
            &host,
            &support::env("VERSO_TEST_KEYSTONE_URL"),
            "accel",
            "verso-accel",
            &log,
        ),
    )
    .expect("write cyborg.conf");
    let mut agent = CyborgAgentService::start(&config, &log);

    // Its first report runs as soon as its service is up.
    let on_host = ListFilter {
        host: Some(host.clone()),
        ..ListFilter::default()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    let devices = loop {
        let devices = db.devices(&on_host).await.expect("devices");
        if !devices.is_empty() {
            break devices;
        }
        if let Some(status) = agent.exited() {
            panic!("cyborg-agent ended ({status}):\n{}", agent.log_tail());
        }
        assert!(
            Instant::now() < deadline,
            "no device of {host} within 90 s; the agent's log:\n{}",
            agent.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let first_seen = Instant::now();
    let first_age = heard_of(&db, &host)
        .await
        .expect("the report recorded the host in the fleet record");

    // What Cyborg's fake driver reports (cyborg/accelerator/drivers/fake.py).
    assert_eq!(devices.len(), 1, "{devices:?}");
    let device = &devices[0];
    assert_eq!(device.device_type, "FPGA");
    assert_eq!(device.vendor, "0xABCD");
    assert_eq!(device.model, "miss model info");
    assert_eq!(device.hostname, host);
    assert_eq!(
        device.vendor_board_info.as_deref(),
        Some("fake_vendor_info")
    );
    let board: serde_json::Value =
        serde_json::from_str(device.std_board_info.as_deref().expect("std_board_info"))
            .expect("JSON");
    assert_eq!(
        board,
        serde_json::json!({"device_id": "0xabcd", "class": "Fake class"})
    );
    let deployables = db.deployables(&on_host).await.expect("deployables");
    assert_eq!(deployables.len(), 1, "{deployables:?}");
    assert_eq!(deployables[0].control_path_id, "0000:0c:00.0");
    assert_eq!(deployables[0].driver_name.as_deref(), Some("fake"));
    assert_eq!(deployables[0].num_accelerators, 16);
    assert_eq!(
        deployables[0].attributes.get("traits1").map(String::as_str),
        Some("CUSTOM_FAKE_DEVICE")
    );
    let handles = db.attach_handles(Some(&host)).await.expect("handles");
    assert_eq!(handles.len(), 16, "{handles:?}");
    assert!(handles
        .iter()
        .all(|h| h.attach_type == "TEST_PCI" && !h.in_use));
    // Functions 1..=16 of bus 0c (function 0 is the control path).
    let first: serde_json::Value =
        serde_json::from_str(&handles[0].attach_info).expect("attach_info is JSON");
    assert_eq!(
        first,
        serde_json::json!({"domain": "0000", "bus": "0c", "device": "0", "function": "1"})
    );

    // The conductor keeps it in Placement: a provider under the compute node, named and
    // identified as Cyborg's conductor names it (after the driver's deployable,
    // `<host>_FakeDevice`), with the driver's class and trait.
    let rp_name = format!("{host}_FakeDevice");
    assert_eq!(deployables[0].name, rp_name);
    let rp = rp_uuid(&rp_name);
    assert_eq!(deployables[0].rp_uuid, rp);
    let deadline = Instant::now() + Duration::from_secs(60);
    let provider = loop {
        let (_, tree) = placement
            .call(
                reqwest::Method::GET,
                &format!("/resource_providers?in_tree={}", node.uuid),
                None,
            )
            .await
            .expect("Placement answers");
        let found = tree["resource_providers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["uuid"] == rp.as_str())
            .cloned();
        if let Some(p) = found {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "no provider {rp_name} under {host}'s compute node within 60 s: {tree}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(provider["name"], rp_name.as_str());
    assert_eq!(provider["parent_provider_uuid"], node.uuid.as_str());
    // Inventory and traits are written after the provider: poll for them.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, inventories) = placement
            .call(
                reqwest::Method::GET,
                &format!("/resource_providers/{rp}/inventories"),
                None,
            )
            .await
            .expect("Placement answers");
        let (_, traits) = placement
            .call(
                reqwest::Method::GET,
                &format!("/resource_providers/{rp}/traits"),
                None,
            )
            .await
            .expect("Placement answers");
        let has_trait = traits["traits"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "CUSTOM_FAKE_DEVICE"));
        if inventories["inventories"]["FPGA"]["total"] == 16 && has_trait {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{rp_name} has not 16 FPGA and CUSTOM_FAKE_DEVICE within 30 s: {inventories} {traits}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The Cyborg host is release N: finalization is refused while it lives, naming it.
    support::finalize_refused_naming(&host);

    // The agent's RPC server is up on `cyborg-agent`, server = its host: Cyborg's own
    // AgentManager refuses a bitstream that is no UUID.
    match cyborg_agent_answers_fpga_program(&host).await {
        Err(RpcError::Remote(e)) => assert_eq!(e.kind, "InvalidUUID", "{e:?}"),
        other => panic!("the agent did not answer as Cyborg's AgentManager: {other:?}"),
    }

    // Its periodic task reports the same inventory again (every 60 s: the task has
    // Cyborg 17's default spacing, which no option changes): nothing changes.
    let deadline = Instant::now() + Duration::from_secs(100);
    loop {
        let age = heard_of(&db, &host).await.expect("still recorded");
        // The last report is later than the first by more than a second.
        if first_seen.elapsed() + first_age > age + Duration::from_secs(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no second report from {host} within 100 s; the agent's log:\n{}",
            agent.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(db.devices(&on_host).await.expect("devices"), devices);
    assert_eq!(
        db.attach_handles(Some(&host)).await.expect("handles"),
        handles
    );
}
