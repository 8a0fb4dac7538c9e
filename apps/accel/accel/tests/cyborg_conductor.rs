//! accel's agent on a host whose control plane is still Cyborg 17 (`[cyborg]
//! report_to_cyborg`): it reports to the real `cyborg-conductor` service of
//! openstack-cyborg 17.0.0 (on SQLite with Cyborg's own schema, real Placement through
//! the real Keystone) over RabbitMQ, with Cyborg's `report_data`. What Cyborg's conductor
//! stores, read back through Cyborg's own objects, is the host's discovery: each
//! device with its control path, one deployable with the attach handles, attributes
//! and driver accel reports, and its Placement provider under the compute node with the
//! resource class and traits of those attributes. A second report changes nothing; a
//! device gone from the host is deleted with its provider; the running agent reports
//! each period and answers Cyborg's agent API; a host Placement does not know is
//! refused by Cyborg's conductor, and the agent says so.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and
//! `VERSO_TEST_PLACEMENT_URL` (scripts/test.sh sets them all).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_agent::fixture::{sample_host, write_tree, FixtureFunction};
use accel_conductor::db::rp_uuid;
use accel_cyborg17::testing::{
    cyborg_agent_answers_fpga_program, cyborg_conductor_config, cyborg_conductor_schema,
    cyborg_inventory, rabbit_url, CyborgService,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use verso::{ObjectList, VersionedEnum};
use verso_rpc::RpcError;

/// The accel configuration of an agent reporting to Cyborg's conductor (on Cyborg's
/// wire, its default, capped at Cyborg 17's conductor API).
fn agent_config(dir: &Path, report_interval: u64) -> std::path::PathBuf {
    let path = dir.join("accel.toml");
    std::fs::write(
        &path,
        format!(
            "[transport]\nurl = \"{}\"\n\n[agent]\nreport_interval = {report_interval}\n\n\
             [cyborg]\nreport_to_cyborg = true\n\n\
             [upgrade_levels]\ncyborg_conductor = \"1.0\"\n",
            rabbit_url()
        ),
    )
    .expect("write accel.toml");
    path
}

/// `accel agent --once` on `root` as `host`.
fn report_once(config: &Path, host: &str, root: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("--config")
        .arg(config)
        .args(["agent", "--once", "--host", host, "--sysfs-root"])
        .arg(root)
        .output()
        .expect("accel agent runs")
}

fn assert_reported(out: &Output, n: usize) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains(&format!("reported {n} devices to Cyborg's conductor")),
        "accel agent --once: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh fixture tree of `functions` at `root` (replacing what was there).
fn host_tree(root: &Path, functions: &[FixtureFunction]) {
    if root.exists() {
        std::fs::remove_dir_all(root).expect("remove the old tree");
    }
    write_tree(root, functions).expect("write the fixture tree");
}

/// What Cyborg's conductor should hold of the host at `root`, from accel's own
/// discovery and report form: per device (in control-path order), the fields of
/// `python/cyborg_conductor.py inventory` that come from the report.
fn expected(host: &str, root: &Path) -> Vec<Value> {
    let found = accel_agent::discovery::discover(root).expect("discovery");
    let report = accel_agent::report::driver_devices(&found);
    let mut out: Vec<Value> = ObjectList::iter(&report)
        .map(|d| {
            let address = d.control_path_id.get().expect("address");
            let name = format!("{host}_{address}");
            let mut handles: Vec<Value> = d
                .attach_handles
                .get()
                .expect("handles")
                .iter()
                .map(|h| {
                    json!({
                        "attach_type": h.attach_type.get().expect("type").as_str(),
                        "attach_info": h.attach_info.get().expect("info"),
                        "in_use": false,
                    })
                })
                .collect();
            handles.sort_by(|a, b| a["attach_info"].as_str().cmp(&b["attach_info"].as_str()));
            json!({
                "type": d.r#type.get().expect("type").as_str(),
                "vendor": d.vendor.get().expect("vendor"),
                "model": d.model.get().expect("model"),
                "std_board_info": d.std_board_info.get().cloned().flatten(),
                "vendor_board_info": null,
                "cpid_type": "PCI",
                "cpid_info": accel_agent::report::pci_attach_info(address).expect("PCI address"),
                "deployables": [{
                    "rp_uuid": rp_uuid(&name),
                    "name": name,
                    "num_accelerators": handles.len(),
                    "driver_name": d.driver_name.get().cloned().flatten(),
                    "attributes": d.attributes.get().expect("attributes"),
                    "handles": handles,
                }],
            })
        })
        .collect();
    out.sort_by(|a, b| a["cpid_info"].as_str().cmp(&b["cpid_info"].as_str()));
    out
}

/// Cyborg's stored inventory without the UUIDs Cyborg made (compared separately).
fn without_uuids(mut inventory: Value) -> Value {
    for d in inventory.as_array_mut().expect("a list") {
        d.as_object_mut().expect("a device").remove("uuid");
        for dep in d["deployables"].as_array_mut().expect("deployables") {
            dep.as_object_mut().expect("a deployable").remove("uuid");
        }
    }
    inventory
}

fn device_uuids(inventory: &Value) -> BTreeMap<String, String> {
    inventory
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| {
            (
                d["cpid_info"].as_str().expect("cpid_info").to_owned(),
                d["uuid"].as_str().expect("a device uuid").to_owned(),
            )
        })
        .collect()
}

/// The providers in the compute node `root`'s tree, by name: (inventory, traits).
async fn providers(
    placement: &accel_conductor::placement::Placement,
    root: &str,
) -> BTreeMap<String, (Value, Vec<String>)> {
    let get = |path: String| async move {
        let (status, body) = placement
            .call(reqwest::Method::GET, &path, None)
            .await
            .expect("Placement answers");
        assert_eq!(status, 200, "{path}: {body}");
        body
    };
    let tree = get(format!("/resource_providers?in_tree={root}")).await;
    let mut out = BTreeMap::new();
    for p in tree["resource_providers"].as_array().expect("providers") {
        let uuid = p["uuid"].as_str().expect("uuid");
        if uuid == root {
            continue;
        }
        let inventories = get(format!("/resource_providers/{uuid}/inventories")).await;
        let traits = get(format!("/resource_providers/{uuid}/traits")).await;
        let mut traits: Vec<String> = traits["traits"]
            .as_array()
            .expect("traits")
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        traits.sort();
        out.insert(
            p["name"].as_str().expect("name").to_owned(),
            (inventories["inventories"].clone(), traits),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accel_agent_reports_to_the_real_cyborg_conductor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("accel-on-cyborg-{suffix}");
    let placement = support::placement();
    let node = support::ComputeNode::create(&placement, &host).await;

    // Cyborg 17's conductor service, on a database with Cyborg's schema.
    let cyborg_conf = dir.path().join("cyborg.conf");
    let log = dir.path().join("cyborg-conductor.log");
    std::fs::write(
        &cyborg_conf,
        cyborg_conductor_config(
            &format!("cyborg-conductor-{suffix}"),
            &dir.path().join("cyborg.sqlite"),
            &support::env("VERSO_TEST_KEYSTONE_URL"),
            "accel",
            "verso-accel",
            &log,
        ),
    )
    .expect("write cyborg.conf");
    cyborg_conductor_schema(&cyborg_conf);
    let mut conductor = CyborgService::start_conductor(&cyborg_conf, &log);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !conductor.serving() {
        if let Some(status) = conductor.exited() {
            panic!(
                "cyborg-conductor ended ({status}):\n{}",
                conductor.log_tail()
            );
        }
        assert!(
            Instant::now() < deadline,
            "cyborg-conductor not serving within 60 s:\n{}",
            conductor.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Sample host 1: a GPU with a VF, two NVMe SSDs, a QAT card with 2 VFs, a NIC.
    let root = dir.path().join("sys");
    host_tree(&root, &sample_host(1));
    let config = agent_config(dir.path(), 1);
    let want = expected(&host, &root);
    assert_eq!(want.len(), 5, "{want:#?}");
    assert_reported(&report_once(&config, &host, &root), want.len());
    let stored = cyborg_inventory(&cyborg_conf, &host);
    assert_eq!(
        without_uuids(stored.clone()),
        Value::Array(want.clone()),
        "Cyborg's conductor stored another inventory:\n{}",
        conductor.log_tail()
    );
    let uuids = device_uuids(&stored);

    // Cyborg's conductor made each deployable's provider under the compute node, with
    // the class and traits of its attributes and one unit per attach handle.
    let found = providers(&placement, &node.uuid).await;
    assert_eq!(found.len(), want.len(), "{found:#?}");
    for device in &want {
        let dep = &device["deployables"][0];
        let name = dep["name"].as_str().expect("name");
        let (inventory, traits) = found
            .get(name)
            .unwrap_or_else(|| panic!("no provider {name}: {found:#?}"));
        let attrs = dep["attributes"].as_object().expect("attributes");
        let rc = attrs["rc"].as_str().expect("rc");
        assert_eq!(
            inventory[rc]["total"], dep["num_accelerators"],
            "{name}: {inventory}"
        );
        let mut want_traits: Vec<String> = attrs
            .iter()
            .filter(|(k, _)| k.starts_with("trait"))
            .filter_map(|(_, v)| v.as_str().map(str::to_owned))
            .collect();
        want_traits.sort();
        assert_eq!(traits, &want_traits, "{name}");
    }

    // The same inventory again: Cyborg's diff keeps every device as it is.
    assert_reported(&report_once(&config, &host, &root), want.len());
    let again = cyborg_inventory(&cyborg_conf, &host);
    assert_eq!(device_uuids(&again), uuids);
    assert_eq!(without_uuids(again), Value::Array(want));

    // The NIC is taken out of the host: the running agent's next period reports it gone,
    // and Cyborg's conductor deletes the device and its provider.
    let mut agent = support::Killed(
        Command::new(env!("CARGO_BIN_EXE_accel"))
            .arg("--config")
            .arg(&config)
            .args(["agent", "--host", &host, "--sysfs-root"])
            .arg(&root)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("accel agent starts"),
    );
    support::ready(
        &mut agent.0,
        &format!("agent {host}: reporting to Cyborg's conductor"),
    );
    let without_nic: Vec<FixtureFunction> = sample_host(1)
        .into_iter()
        .filter(|f| f.address != "0000:40:00.0")
        .collect();
    host_tree(&root, &without_nic);
    let want = expected(&host, &root);
    assert_eq!(want.len(), 4, "{want:#?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = without_uuids(cyborg_inventory(&cyborg_conf, &host));
        if now == Value::Array(want.clone()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the NIC is still in Cyborg's database after 30 s: {now:#}\n{}",
            conductor.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let gone = format!("{host}_0000:40:00.0");
    let deadline = Instant::now() + Duration::from_secs(30);
    while providers(&placement, &node.uuid).await.contains_key(&gone) {
        assert!(
            Instant::now() < deadline,
            "provider {gone} still in Placement"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // The running agent serves Cyborg's agent API for that conductor: Cyborg's own
    // `fpga_program` check answers (a bitstream that is no UUID).
    match cyborg_agent_answers_fpga_program(&host).await {
        Err(RpcError::Remote(e)) => assert_eq!(e.kind, "InvalidUUID", "{e:?}"),
        other => panic!("fpga_program: {other:?}"),
    }

    // A host Placement has no compute node for: Cyborg's conductor refuses the report
    // (`PlacementResourceProviderNotFound`), and the agent fails naming it.
    let unknown = format!("accel-on-cyborg-unknown-{suffix}");
    let out = report_once(&config, &unknown, &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("PlacementResourceProviderNotFound"),
        "{stderr}"
    );
    assert_eq!(cyborg_inventory(&cyborg_conf, &unknown), json!([]));
}
