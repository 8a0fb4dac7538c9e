//! This conductor on RabbitMQ, reached by Cyborg 17's own RPC client: a report sent by
//! Cyborg's `ConductorAPI.report_data` (`python/cyborg_peer.py send`, the pinned
//! package's agent-side client with Cyborg's fake driver and an SR-IOV NIC) is stored as
//! Cyborg's conductor stores it and offered in Placement, and a report of a host
//! Placement does not know is refused with Cyborg's own exception, nothing stored.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and
//! `VERSO_TEST_PLACEMENT_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::rpc::ReportData;
use accel_cyborg17::testing::{
    cyborg_agent_reports_as_host, cyborg_inventory, cyborg_transport, write_cyborg_database_config,
};
use accel_cyborg17_conductor::{service, Conductor, Reports, Requests, Store};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;
use support::{compute_node, delete_tree, placement};
use verso::{RequestContext, VersionedObject};
use verso_rpc::{RpcClient, RpcError, Target};

mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborgs_own_client_reports_over_rabbitmq() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-wire-{suffix}");
    // A topic of this test's own: other tests' conductors serve Cyborg's.
    let topic = format!("cyborg-conductor-{suffix}");
    let placement = placement();
    let root = compute_node(&placement, &host).await;

    let db = dir.path().join("cyborg.sqlite");
    let store = Store::connect(&format!("sqlite://{}", db.display()))
        .await
        .expect("connect");
    store.sync().await.expect("sync");
    let conf = write_cyborg_database_config(dir.path(), &format!("sqlite:///{}", db.display()));
    let conductor = Conductor {
        reports: Reports::new(store.clone(), placement.clone()),
        requests: Requests::new(store, None),
    };
    let server = service::serve(cyborg_transport().await, conductor, &topic)
        .await
        .expect("serving");

    let sent = cyborg_agent_reports_as_host(&topic, &host).await;
    assert_eq!(sent.as_array().expect("a list").len(), 2, "{sent}");
    let stored = cyborg_inventory(&conf, &host);
    let stored = stored.as_array().expect("devices");
    assert_eq!(stored.len(), 2, "{stored:?}");
    let mut names: Vec<&str> = stored
        .iter()
        .flat_map(|d| d["deployables"].as_array().expect("deployables"))
        .map(|d| d["name"].as_str().expect("name"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("{host}_FakeDevice"),
            format!("{host}_nic_vf1"),
            format!("{host}_nic_vf2")
        ]
    );
    let (_, tree) = placement
        .call(
            Method::GET,
            &format!("/resource_providers?in_tree={root}"),
            Some("1.14"),
            None,
        )
        .await
        .expect("Placement answers");
    assert_eq!(
        tree["resource_providers"]
            .as_array()
            .expect("providers")
            .len(),
        4,
        "{tree}"
    );

    // A host Placement has no compute node for: Cyborg's exception, nothing stored.
    let stranger = format!("cyborg17-nowhere-{suffix}");
    let devices = sent
        .as_array()
        .expect("a list")
        .iter()
        .map(|p| accel_cyborg17::objects::DriverDevice::from_primitive(p).expect("decodes"))
        .collect();
    let err = RpcClient::new(cyborg_transport().await, Target::new(&topic))
        .timeout(Duration::from_secs(30))
        .call_method(
            &RequestContext::new("req-stranger"),
            ReportData {
                hostname: stranger.clone(),
                driver_device_list: devices,
            },
        )
        .await
        .expect_err("refused");
    let RpcError::Remote(remote) = &err else {
        panic!("not a remote error: {err:?}");
    };
    assert_eq!(remote.kind, "PlacementResourceProviderNotFound");
    assert_eq!(remote.module, "cyborg.common.exception");
    assert!(remote.message.contains(&stranger), "{}", remote.message);
    assert_eq!(cyborg_inventory(&conf, &stranger), json!([]));

    server.stop().await;
    delete_tree(&placement, &root, true).await;
}
