//! A real Cyborg 17 agent's report, sent by Cyborg's own code over RabbitMQ on exchange
//! `cyborg` (`apps/accel/cyborg17/python/cyborg_peer.py send`: Cyborg's fake driver's
//! discovery through Cyborg's `ConductorAPI.report_data`), lands in accel's database
//! through the conductor's Cyborg endpoint, on SQLite and on PostgreSQL; the same report
//! again changes nothing and is recognised by the conductor's digest, which a later
//! write to the host's inventory forgets.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON` and the PostgreSQL test cluster
//! (scripts/test.sh provides all three).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::ListFilter;
use accel_conductor::{cyborg, testing, Db};
use accel_cyborg17::testing::{cyborg_agent_reports, cyborg_transport};

async fn a_cyborg_agents_report_lands_in(db: Db) {
    let topic = format!("cyborg-conductor-test-{}", uuid::Uuid::new_v4().simple());
    let server = cyborg::serve(cyborg_transport().await, db.clone(), &topic, None)
        .await
        .expect("the Cyborg endpoint listens");
    let host = "cyborg-host-1";

    let sent = cyborg_agent_reports(&topic, host).await;
    let on_host = ListFilter {
        host: Some(host.into()),
        ..ListFilter::default()
    };
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
    assert!(digest.starts_with("cyborg-v1:"), "{digest}");
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
