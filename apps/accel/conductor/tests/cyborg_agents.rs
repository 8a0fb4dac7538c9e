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
use accel_cyborg17::testing::{
    cyborg_agent_reports, cyborg_agent_reports_devices, cyborg_transport,
};

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

/// A NIC whose SR-IOV virtual functions Cyborg's driver reports as deployables of
/// their own lands as one device with one deployable per virtual function, each with
/// its own handle, attributes and provider (it was merged into one before); the same
/// report again changes nothing.
async fn a_cyborg_nic_keeps_a_deployable_per_virtual_function(db: Db) {
    let topic = format!("cyborg-conductor-test-{}", uuid::Uuid::new_v4().simple());
    let server = cyborg::serve(cyborg_transport().await, db.clone(), &topic, None)
        .await
        .expect("the Cyborg endpoint listens");
    let host = "cyborg-nic-host";
    let sent = cyborg_agent_reports_devices(&topic, host, true).await;
    let nic = sent
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| &d["cyborg_object.data"])
        .find(|d| d["type"] == "NIC")
        .expect("the NIC was sent");
    let on_host = ListFilter {
        host: Some(host.into()),
        ..ListFilter::default()
    };
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
