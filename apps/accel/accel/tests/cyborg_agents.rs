//! `accel conductor` with `[cyborg] serve_agents = true`, as an operator runs it while
//! migrating from Cyborg 17: a real Cyborg agent's report (Cyborg's own report path,
//! `apps/accel/cyborg17/python/cyborg_peer.py send`, on exchange `cyborg`, topic
//! `cyborg-conductor`) lands in the conductor's database, and the host, which sends no
//! heartbeat, counts as release N: `accel upgrade finalize` is refused naming it; and
//! accel's own release N+1 agent on Cyborg's wire, which heartbeats and does not block
//! finalization. Uses `VERSO_TEST_RABBIT_URL` and `VERSO_TEST_PYTHON` (scripts/test.sh
//! sets both).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_conductor::db::ListFilter;
use accel_conductor::Db;
use accel_cyborg17::testing::cyborg_agent_reports;
use std::process::Command;
use std::time::{Duration, Instant};

/// One conductor at a time on the test broker: conductors consume the same queues
/// (`accel-conductor`, `accel-upgrade`) whatever their exchange, so a second one would
/// take some of the other test's calls (this one's is at release N, serving Cyborg's
/// agents, and refuses a release N+1 agent).
static ONE_CONDUCTOR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_agent_reports_into_accel_conductor() {
    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let mut conductor = support::cyborg_conductor(&db_url, true, &[]);

    cyborg_agent_reports("cyborg-conductor", "cyborg-compute-7").await;

    let db = Db::connect(&db_url)
        .await
        .expect("the conductor's database");
    let devices = db
        .devices(&ListFilter {
            host: Some("cyborg-compute-7".into()),
            ..ListFilter::default()
        })
        .await
        .expect("devices");
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert_eq!(devices[0].device_type, "FPGA");

    // The Cyborg host is release N in the fleet record: finalization is refused while
    // it lives, and names it.
    support::finalize_refused_naming("cyborg-compute-7");

    // SIGTERM stops it cleanly.
    let pid = conductor.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = conductor.0.try_wait().expect("wait") {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the conductor did not stop within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Release N to be, Cyborg 17's agent in Rust (`accel-cyborg17-agent`), against accel's
/// N+1 conductor serving Cyborg's agents: its report of a fixture host lands in accel's
/// database, and the host, which sends no heartbeat, counts as release N: finalization
/// is refused naming it, as for Cyborg's own agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborg_17_agent_in_rust_reports_into_accel_conductor_as_release_n() {
    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _conductor = support::cyborg_conductor(&db_url, true, &[]);

    let sysfs = dir.path().join("sys");
    accel_agent::fixture::write_tree(&sysfs, &accel_agent::fixture::sample_host(1))
        .expect("the fixture host");
    let host = "cyborg17-rust-compute-3";
    let conf = dir.path().join("cyborg.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {}\nhost = {host}\n[agent]\nsysfs_root = {}\n",
            accel_cyborg17::testing::rabbit_url(),
            sysfs.display()
        ),
    )
    .expect("write cyborg.conf");
    let config = accel_cyborg17_agent::config::AgentConfig::load(&conf).expect("cyborg.conf");
    let agent = accel_cyborg17_agent::run::start(&config)
        .await
        .expect("the agent starts");
    let first = tokio::time::timeout(Duration::from_secs(60), agent.first_report())
        .await
        .expect("a report within 60 s");
    let accel_cyborg17_agent::run::Reported::Devices(n) = first else {
        panic!("the report failed: {first:?}");
    };

    let db = Db::connect(&db_url)
        .await
        .expect("the conductor's database");
    let devices = db
        .devices(&ListFilter {
            host: Some(host.into()),
            ..ListFilter::default()
        })
        .await
        .expect("devices");
    assert_eq!(devices.len(), n, "{devices:?}");
    support::finalize_refused_naming(host);
    agent.stop().await;
}

/// `accel agent` with `[cyborg] serve_conductor = true` answers a Cyborg 17 conductor's
/// calls on `cyborg-agent` (server = its host): Cyborg's own `AgentAPI` makes a mediated
/// device through the agent's sysfs tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accel_agent_serves_a_cyborg_conductor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _one = ONE_CONDUCTOR.lock().await;
    let _conductor = support::cyborg_conductor(&db_url, false, &[]);
    let sysfs = dir.path().join("sys");
    accel_agent::fixture::write_tree(&sysfs, &accel_agent::fixture::sample_host(1))
        .expect("fixture host");
    let create = sysfs
        .join("class/mdev_bus/0000:3b:00.0/mdev_supported_types/nvidia-35")
        .join("create");
    std::fs::create_dir_all(create.parent().expect("dir")).expect("mdev tree");
    std::fs::write(&create, "").expect("create attribute");
    let host = format!(
        "accel-mdev-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let (_agent, line) = support::accel_agent(
        dir.path(),
        &host,
        &sysfs,
        &[
            // accel's own wire, serving Cyborg's agent API beside it.
            ("ACCEL_CYBORG_REPORT_TO_CYBORG", "false".into()),
            ("ACCEL_CYBORG_SERVE_CONDUCTOR", "true".into()),
        ],
        "serving accel-agent",
    );
    assert!(
        line.contains("Cyborg 17's agent API on cyborg-agent (exchange cyborg)"),
        "{line}"
    );

    let mdev = uuid::Uuid::new_v4().to_string();
    let reply = accel_cyborg17::testing::cyborg_calls_agent(
        &host,
        "create_vgpu_mdev",
        "0000:3b:00.0",
        "nvidia-35",
        &mdev,
    )
    .await;
    assert_eq!(reply, Ok(serde_json::Value::Null));
    assert_eq!(std::fs::read_to_string(&create).expect("create"), mdev);
}

/// Runs `accel` with `args` on the test broker; exit code and standard output.
fn accel_on_broker(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(args)
        .env("ACCEL_TRANSPORT_URL", accel_cyborg17::testing::rabbit_url())
        .output()
        .expect("accel runs");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// accel's release N+1 agent on Cyborg's wire (`[cyborg] report_to_cyborg` with
/// `[upgrade_levels] cyborg_conductor = "1.1"`) and `accel conductor` serving Cyborg's
/// agents (`[upgrade_levels] cyborg_agent = "1.1"`), as processes over RabbitMQ: the
/// host's devices land through Cyborg's `report_data`, the agent heartbeats on accel's
/// upgrade API (status shows it at release N+1's software), finalization completes
/// with it (a Cyborg 17 host would block it), and an SSD released for cleaning is
/// erased through the seed spec's `Device` methods and back in the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accel_n_plus_1_agent_on_cyborgs_wire() {
    use std::os::unix::fs::PermissionsExt;

    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _conductor = support::cyborg_conductor(
        &db_url,
        true,
        &[("ACCEL_UPGRADE_LEVELS_CYBORG_AGENT", "1.1".into())],
    );
    let host = format!(
        "accel-wire-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let erased = dir.path().join("erased.log");
    let erase = dir.path().join("erase.sh");
    std::fs::write(
        &erase,
        format!("#!/bin/sh\necho \"$1\" >> {}\n", erased.display()),
    )
    .expect("erase script");
    std::fs::set_permissions(&erase, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/sysfs/host2");
    let (_agent, line) = support::accel_agent(
        dir.path(),
        &host,
        &fixture,
        &[
            ("ACCEL_CYBORG_REPORT_TO_CYBORG", "true".into()),
            ("ACCEL_UPGRADE_LEVELS_CYBORG_CONDUCTOR", "1.1".into()),
            ("ACCEL_AGENT_REPORT_INTERVAL", "1".into()),
            ("ACCEL_AGENT_SCAN_INTERVAL", "3600".into()),
            ("ACCEL_NVME_CLEANUP_COMMAND", erase.display().to_string()),
        ],
        "serving cyborg-agent",
    );
    assert!(line.ends_with("release N+1 on Cyborg's wire"), "{line}");
    assert!(
        line.contains("cyborg-conductor") && line.contains("cyborg-agent"),
        "{line}"
    );
    // A Cyborg conductor with the NVMe feature, in Cyborg's own Python (its agent client
    // at 1.1 over oslo.messaging), reaches it: `cleanup_device` of a device it does not
    // have is Cyborg's `NotFound`.
    let nothing = uuid::Uuid::new_v4().to_string();
    let refused =
        accel_cyborg17::testing::cyborg_calls_agent(&host, "cleanup_device", "", "", &nothing)
            .await
            .expect_err("no such device");
    assert_eq!(refused.0, "cyborg.common.exception.NotFound", "{refused:?}");
    assert!(refused.1.contains(&nothing), "{refused:?}");

    let db = Db::connect(&db_url)
        .await
        .expect("the conductor's database");
    let on_host = ListFilter {
        host: Some(host.clone()),
        ..ListFilter::default()
    };
    // Reported before it served: every physical function it discovers.
    let found = accel_agent::discovery::discover(&fixture).expect("discovery");
    let functions = found.devices.iter().filter(|f| f.physfn.is_none()).count();
    let devices = db.devices(&on_host).await.expect("devices");
    assert_eq!(devices.len(), functions, "{devices:?}");
    assert_eq!(
        devices.iter().filter(|d| d.device_type == "SSD").count(),
        2,
        "{devices:?}"
    );

    // It heartbeats: the fleet record has its software (release N+1's, 2), not the
    // release N a Cyborg 17 host is assumed to run.
    let (code, out) = accel_on_broker(&["upgrade", "status", "--json"]);
    assert_eq!(code, Some(0), "{out}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("json");
    let me = status["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .find(|c| c["host"] == host.as_str())
        .unwrap_or_else(|| panic!("{host} in {status:#}"))
        .clone();
    assert_eq!(
        (&me["software"], &me["heartbeats"], &me["live"]),
        (&2.into(), &true.into(), &true.into()),
        "{me:#}"
    );
    // So finalization completes with it.
    let (code, out) = accel_on_broker(&["upgrade", "finalize", "--wait", "--timeout", "60"]);
    assert_eq!(code, Some(0), "{out}");

    // An SSD released for cleaning: the conductor's cast (cyborg_agent 1.1; the
    // agent's scan runs hourly here) starts it; it is erased and back in the pool.
    let arq = accel_conductor::testing::bound_request(&db, "SSD", &host, "vm-1").await;
    let handle = db
        .host_handles(&host)
        .await
        .expect("handles")
        .into_iter()
        .find(|h| h.in_use)
        .expect("the bound handle");
    // Released through the conductor (finalized: NVMe cleanup is on) on accel's
    // exchange, as the API does.
    let accel = verso_rpc::transport::transport_from_url(
        &accel_cyborg17::testing::rabbit_url(),
        Some("accel"),
    )
    .await
    .expect("the broker");
    verso_rpc::RpcClient::for_api::<accel_objects::rpc::ConductorApi>(
        accel.clone(),
        accel_objects::rpc::CONDUCTOR_TOPIC,
    )
    .call_method(
        &verso::RequestContext::new("req-unbind"),
        accel_objects::rpc::UnbindArq {
            uuid: arq.uuid.clone(),
        },
    )
    .await
    .expect("unbound");
    accel.close().await;
    let cleaned = support::eventually(
        Duration::from_secs(30),
        "the device erased",
        String::new,
        || {
            let db = db.clone();
            let uuid = handle.uuid.clone();
            async move {
                let h = db.host_handle(&uuid).await.expect("handle");
                (h.cleanup_state.is_none() && !h.in_use).then_some(h)
            }
        },
    )
    .await;
    assert_eq!(
        cleaned.revision,
        handle.revision + 3,
        "released, started, succeeded"
    );
    let paths = std::fs::read_to_string(&erased).expect("erase log");
    assert!(
        !paths.is_empty() && paths.lines().all(|p| p.starts_with("/dev/nvme")),
        "{paths}"
    );
}

/// FPGA programming through accel's API reaches a host whose agent serves only
/// Cyborg's agent API (here accel's agent reporting as a Cyborg 17 agent does:
/// `[upgrade_levels] cyborg_conductor = "1.0"`, no heartbeat): the conductor, knowing the host only from
/// Cyborg's reports, calls Cyborg's `fpga_program` (control path, Glance image, driver)
/// on `cyborg-agent`, which downloads the bitstream from the real Glance and runs the
/// operator's tool on the card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accels_api_programs_an_fpga_through_cyborgs_agent_api() {
    use sha2::{Digest, Sha256};

    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (tool, record) = support::fpga_tool(dir.path());
    let keystone = support::env("VERSO_TEST_KEYSTONE_URL");
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 241) as u8).collect();
    let image = support::bitstream(&data).await;

    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let _conductor = support::cyborg_conductor(&db_url, true, &[]);
    let mut api = Command::new(env!("CARGO_BIN_EXE_accel"))
        .arg("api")
        .env("ACCEL_TRANSPORT_URL", accel_cyborg17::testing::rabbit_url())
        .env("ACCEL_DATABASE_URL", &db_url)
        .env("ACCEL_API_LISTEN", "127.0.0.1:0")
        .env("ACCEL_API_AUTH_STRATEGY", "noauth")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("accel api starts");
    let url = support::ready(&mut api, "api: listening on ")
        .trim_start_matches("api: listening on ")
        .trim()
        .to_owned();
    let _api = support::Killed(api);

    let host = format!(
        "accel-fpga-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent/tests/fixtures/sysfs/host2");
    let (_agent, _) = support::accel_agent(
        dir.path(),
        &host,
        &fixture,
        &[
            ("ACCEL_CYBORG_REPORT_TO_CYBORG", "true".into()),
            ("ACCEL_UPGRADE_LEVELS_CYBORG_CONDUCTOR", "1.0".into()),
            ("ACCEL_FPGA_PROGRAM_COMMAND", tool.display().to_string()),
            ("ACCEL_GLANCE_AUTH_URL", keystone.clone()),
            ("ACCEL_GLANCE_USERNAME", "accel".into()),
            ("ACCEL_GLANCE_PASSWORD", "verso-accel".into()),
            ("ACCEL_GLANCE_PROJECT_NAME", "service".into()),
        ],
        "reporting to Cyborg's conductor",
    );
    let fpga = "0000:3d:00.0";
    let name = format!("{host}_{fpga}");
    let deployable = support::eventually(
        Duration::from_secs(60),
        "the FPGA's deployable in accel's API",
        String::new,
        || {
            let (url, name) = (url.clone(), name.clone());
            async move {
                let list: serde_json::Value = reqwest::get(format!("{url}/v2/deployables"))
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                list["deployables"]
                    .as_array()?
                    .iter()
                    .find(|d| d["name"] == name.as_str())
                    .and_then(|d| d["uuid"].as_str())
                    .map(str::to_owned)
            }
        },
    )
    .await;

    let response = reqwest::Client::new()
        .patch(format!("{url}/v2/deployables/{deployable}/program"))
        .json(&serde_json::json!([
            {"path": "/bitstream_id", "op": "replace", "value": [{"image_uuid": image}]}
        ]))
        .send()
        .await
        .expect("PATCH");
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        format!("{fpga} {:x}\n", Sha256::digest(&data))
    );
}
