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
//! And a host's migration with one of Cyborg's real drivers: its NVIDIA GPU driver on a
//! fixture host's `lspci`, then accel's agent on the same hardware, an instance's GPU
//! kept bound across the swap.
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

/// One conductor at a time on the test broker: two serving Cyborg's agents would share
/// `cyborg-conductor`, and each would get some of the other test's reports.
static ONE_CONDUCTOR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _one = ONE_CONDUCTOR.lock().await;
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

/// `lspci -nn -D` of the sysfs tree at `sysfs` (every function of `bus/pci/devices`,
/// named by its class as lspci names the classes the fixtures have), as an executable
/// `lspci` in `bin`: what Cyborg's drivers read on a host with that hardware.
fn fake_lspci(sysfs: &std::path::Path, bin: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let read = |path: std::path::PathBuf| {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).expect("hexadecimal")
    };
    let mut lines = Vec::new();
    let mut functions: Vec<_> = std::fs::read_dir(sysfs.join("bus/pci/devices"))
        .expect("the fixture's PCI functions")
        .map(|e| e.expect("entry").path())
        .collect();
    functions.sort();
    for f in functions {
        let address = f.file_name().expect("name").to_string_lossy().into_owned();
        let class = read(f.join("class")) >> 8;
        let name = match class {
            0x0300 => "VGA compatible controller",
            0x0302 => "3D controller",
            0x0108 => "Non-Volatile memory controller",
            0x0200 => "Ethernet controller",
            0x0600 => "Host bridge",
            0x0601 => "ISA bridge",
            0x0b40 => "Co-processor",
            0x1200 => "Processing accelerators",
            _ => "Unclassified device",
        };
        lines.push(format!(
            "echo '{address} {name} [{class:04x}]: Vendor Device [{:04x}:{:04x}] (rev a1)'",
            read(f.join("vendor")),
            read(f.join("device")),
        ));
    }
    std::fs::create_dir_all(bin).expect("bin");
    let lspci = bin.join("lspci");
    std::fs::write(&lspci, format!("#!/bin/sh\n{}\n", lines.join("\n"))).expect("lspci");
    std::fs::set_permissions(&lspci, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The migration of one host, with Cyborg's real driver: the host's GPU is reported by
/// Cyborg 17's agent service with its NVIDIA driver (`nvidia_gpu_driver`, reading the
/// host's `lspci`) to `accel conductor`, an instance is bound to it, and the host's
/// agent is replaced by `accel agent` discovering the same hardware (the sysfs tree
/// `lspci` was made from). The GPU is the same device afterwards (UUID, deployable,
/// attach handle), still bound to the instance, and the host's other devices appear
/// beside it: both agents key a device by its PCI address, whatever else they say of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_moves_from_cyborgs_gpu_driver_to_accels_agent_keeping_its_bound_gpu() {
    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let host = format!(
        "cyborg-gpu-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let placement = support::placement();
    let _node = support::ComputeNode::create(&placement, &host).await;
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _conductor = support::cyborg_conductor(&db_url, true, &[]);
    let db = Db::connect(&db_url)
        .await
        .expect("the conductor's database");
    let on_host = ListFilter {
        host: Some(host.clone()),
        ..ListFilter::default()
    };

    // The host's hardware: a GPU without virtual functions, two NVMe SSDs, a QAT, a NIC.
    let sysfs = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/sysfs/host3");
    let bin = dir.path().join("bin");
    fake_lspci(&sysfs, &bin);

    let config = dir.path().join("cyborg.conf");
    let log = dir.path().join("cyborg-agent.log");
    std::fs::write(
        &config,
        accel_cyborg17::testing::cyborg_agent_config_with(
            &host,
            &support::env("VERSO_TEST_KEYSTONE_URL"),
            "accel",
            "verso-accel",
            &log,
            "nvidia_gpu_driver",
        ),
    )
    .expect("write cyborg.conf");
    let mut cyborg = CyborgAgentService::start_with_path(&config, &log, &bin);
    let devices = support::eventually(
        Duration::from_secs(90),
        "the GPU reported by Cyborg's agent",
        || cyborg.log_tail(),
        || {
            let db = db.clone();
            let on_host = on_host.clone();
            async move {
                let d = db.devices(&on_host).await.expect("devices");
                (!d.is_empty()).then_some(d)
            }
        },
    )
    .await;
    assert!(cyborg.exited().is_none(), "{}", cyborg.log_tail());
    // What Cyborg's NVIDIA driver reports of it.
    assert_eq!(devices.len(), 1, "{devices:?}");
    let gpu = devices[0].clone();
    assert_eq!(
        (gpu.device_type.as_str(), gpu.vendor.as_str()),
        ("GPU", "10de")
    );
    let deployables = db.deployables(&on_host).await.expect("deployables");
    assert_eq!(deployables.len(), 1, "{deployables:?}");
    let deployable = deployables[0].clone();
    assert_eq!(deployable.control_path_id, "0000:3b:00.0");
    assert_eq!(deployable.name, format!("{host}_0000:3b:00.0"));
    assert_eq!(deployable.driver_name.as_deref(), Some("NVIDIA"));
    assert_eq!(
        deployable.attributes.get("rc").map(String::as_str),
        Some("PGPU")
    );

    // An instance holds it.
    let arq = accel_conductor::testing::bound_request(&db, "PGPU", &host, "vm-gpu").await;
    let handle = arq.attach_handle_uuid.clone().expect("a handle");

    // The host's agent is replaced: Cyborg's stops, accel's starts on the same hardware.
    drop(cyborg);
    let (_agent, line) = support::accel_agent(dir.path(), &host, &sysfs, &[], "serving");
    assert!(line.contains("accel-agent"), "{line}");
    let agent_log = dir.path().join("agent.log");
    let functions = accel_agent::discovery::discover(&sysfs)
        .expect("discovery")
        .devices
        .iter()
        .filter(|f| f.physfn.is_none())
        .count();
    let devices = support::eventually(
        Duration::from_secs(60),
        "accel's agent's report",
        || std::fs::read_to_string(&agent_log).unwrap_or_default(),
        || {
            let db = db.clone();
            let on_host = on_host.clone();
            async move {
                let d = db.devices(&on_host).await.expect("devices");
                (d.len() == functions).then_some(d)
            }
        },
    )
    .await;

    // The same GPU, still the instance's.
    let after = devices
        .iter()
        .find(|d| d.device_type == "GPU")
        .unwrap_or_else(|| panic!("no GPU in {devices:?}"));
    assert_eq!(after.uuid, gpu.uuid, "{devices:?}");
    let deployables = db.deployables(&on_host).await.expect("deployables");
    let kept = deployables
        .iter()
        .find(|d| d.control_path_id == "0000:3b:00.0")
        .unwrap_or_else(|| panic!("no deployable of the GPU in {deployables:?}"));
    assert_eq!(kept.uuid, deployable.uuid);
    let arq = db.arq(&arq.uuid).await.expect("the request");
    assert_eq!(
        (arq.state.as_str(), arq.attach_handle_uuid.as_deref()),
        ("Bound", Some(handle.as_str())),
        "{arq:?}"
    );
    let h = db
        .attach_handles(Some(&host))
        .await
        .expect("handles")
        .into_iter()
        .find(|h| h.uuid == handle)
        .expect("the bound handle is kept");
    assert!(h.in_use, "{h:?}");
}
