//! `accel-cyborg17-agent` as a compute host runs it, on Cyborg's own `cyborg.conf`: a
//! fixture sysfs tree (a GPU with a vGPU type, an FPGA, NVMe SSDs, a NIC), RabbitMQ on
//! Cyborg's exchange, Cyborg 17's conductor in Rust (`accel-cyborg17-conductor`) with the
//! real Placement and Keystone.
//!
//! Started before the conductor, its report fails and is tried again at the next
//! interval; once the conductor serves, the host's devices are stored, and Cyborg 17's
//! own objects (openstack-cyborg 17.0.0 reading the database) find them with a Placement
//! provider each. Later reports change nothing. Cyborg's own agent client makes a
//! mediated device through it on the fixture tree. SIGTERM stops it.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and
//! `VERSO_TEST_PLACEMENT_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_agent::fixture::{sample_host, write_mdev_type, write_tree};
use accel_cyborg17::testing::{
    cyborg_calls_agent, cyborg_conductor_config, cyborg_inventory, rabbit_url,
};
use accel_cyborg17_conductor::config::Config;
use std::path::Path;
use std::time::Duration;
use support::{compute_node, delete_tree, env, placement, spawn, wait_for};
use tokio::process::Command;

#[path = "../../cyborg17-conductor/tests/support/mod.rs"]
mod support;

const GPU: &str = "0000:3b:00.0";
const MDEV_TYPE: &str = "nvidia-35";

fn write_conductor_config(dir: &Path, host: &str) -> std::path::PathBuf {
    let base = cyborg_conductor_config(
        host,
        &dir.join("cyborg.sqlite"),
        &env("VERSO_TEST_KEYSTONE_URL"),
        "accel",
        "verso-accel",
        &dir.join("cyborg.log"),
    );
    let conf = dir.join("cyborg.conf");
    std::fs::write(
        &conf,
        format!(
            "{base}endpoint_override = {}\n",
            env("VERSO_TEST_PLACEMENT_URL")
        ),
    )
    .expect("write cyborg.conf");
    conf
}

fn write_agent_config(dir: &Path, host: &str, sysfs: &Path) -> std::path::PathBuf {
    let conf = dir.join("cyborg-agent.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {}\nhost = {host}\nrpc_response_timeout = 3\n\n\
             [agent]\nreport_interval = 2\nsysfs_root = {}\n",
            rabbit_url(),
            sysfs.display()
        ),
    )
    .expect("write the agent's cyborg.conf");
    conf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_cyborg_agent_reports_its_host_and_serves_cyborgs_agent_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = dir.path().join("sys");
    write_tree(&sysfs, &sample_host(0)).expect("the fixture host");
    let type_dir = write_mdev_type(&sysfs, GPU, MDEV_TYPE).expect("the vGPU type");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-agent-{suffix}");
    let placement = placement();
    let root = compute_node(&placement, &host).await;

    // The agent first: no conductor answers, so its report fails and is retried.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_accel-cyborg17-agent"));
    cmd.arg("--config-file")
        .arg(write_agent_config(dir.path(), &host, &sysfs))
        .env("RUST_LOG", "error");
    let (mut agent, mut out) = spawn(cmd);
    wait_for(
        &mut out,
        &format!("serving cyborg-agent as {host}"),
        "the agent",
    )
    .await;
    let failed = wait_for(&mut out, "report failed", "the agent").await;
    assert!(failed.contains("report_data"), "{failed}");

    // The conductor starts; the next report is stored.
    let conf = write_conductor_config(dir.path(), &host);
    let conductor = accel_cyborg17_conductor::run::start(&Config::load(&conf).expect("conf"))
        .await
        .expect("the conductor starts");
    let line = wait_for(&mut out, "reported", "the agent").await;
    let n: usize = line
        .trim_start_matches("reported ")
        .trim_end_matches(" devices")
        .parse()
        .expect("a count");
    // The fixture's GPU, NVMe SSD controllers, FPGA and NIC (its bridge and host
    // controller are not accelerators).
    assert_eq!(n, 5, "{line}");
    let stored = cyborg_inventory(&conf, &host);
    let devices = stored.as_array().expect("Cyborg's objects read a list");
    assert_eq!(devices.len(), n, "{stored:#}");
    for d in devices {
        for dep in d["deployables"].as_array().expect("deployables") {
            assert!(dep["rp_uuid"].is_string(), "a provider for {dep}");
        }
    }

    // A later report changes nothing.
    wait_for(&mut out, &format!("reported {n} devices"), "the agent").await;
    assert_eq!(cyborg_inventory(&conf, &host), stored);

    // Cyborg 17's own agent client, as its conductor calls it at a vGPU's bind.
    let mdev = "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b";
    let reply = cyborg_calls_agent(&host, "create_vgpu_mdev", GPU, MDEV_TYPE, mdev).await;
    assert_eq!(reply, Ok(serde_json::Value::Null));
    assert_eq!(
        std::fs::read_to_string(type_dir.join("create")).expect("create"),
        mdev
    );

    // SIGTERM: it stops and says so.
    let pid = agent.id().expect("a pid");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    wait_for(&mut out, "stopped", "the agent").await;
    let status = tokio::time::timeout(Duration::from_secs(30), agent.wait())
        .await
        .expect("the agent exits")
        .expect("its status");
    assert!(status.success(), "{status}");
    conductor.stop().await;
    delete_tree(&placement, &root, true).await;
}
