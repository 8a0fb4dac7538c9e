//! `accel-cyborg17-conductor` as a deployment runs it: one `cyborg.conf` (Cyborg 17's own
//! configuration file) for it and for Cyborg 17's own API service (the pinned package's
//! WSGI application), an empty SQLite database it makes Cyborg's schema in, RabbitMQ on
//! Cyborg's topic and exchange, the real Placement and Keystone, and the test's Nova.
//! Cyborg's agent-side client reports a host; Cyborg's API, unchanged, then lists the
//! devices, makes a profile and a request, binds it the way Nova does (Nova is told),
//! deletes them; the conductor stops on SIGTERM.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and
//! `VERSO_TEST_PLACEMENT_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing::nova::Nova as TestNova;
use accel_cyborg17::rpc::CONDUCTOR_TOPIC;
use accel_cyborg17::testing::{
    cyborg_agent_reports_as_host, cyborg_conductor_config, peer_script, python,
};
use accel_cyborg17_conductor::placement::rp_uuid;
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use support::{compute_node, delete_tree, env, free_port, placement, spawn, wait_for};
use tokio::process::Command;

mod support;

/// Cyborg's API pipeline without Keystone's middleware: requests carry what
/// keystonemiddleware would set (roles, project, Nova's service token's roles).
const API_PASTE: &str = "[pipeline:main]\npipeline = request_id api_v2\n\n\
    [app:api_v2]\npaste.app_factory = cyborg.api.app:app_factory\n\n\
    [filter:request_id]\npaste.filter_factory = oslo_middleware:RequestId.factory\n";
const PROJECT: &str = "b1d0c3a2e5f44d6e8a7b9c0d1e2f3a4b";

struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-Roles", "admin,member,reader,service")
            .header("X-Project-Id", PROJECT)
            .header("X-User-Id", "operator")
            .header("X-Service-Roles", "service")
            .header("OpenStack-API-Version", "accelerator 2.3");
        if let Some(b) = body {
            r = r.json(&b);
        }
        let response = r.send().await.expect("Cyborg's API answers");
        let status = response.status().as_u16();
        let bytes = response.bytes().await.expect("a body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

fn write_config(dir: &Path, host: &str, nova: &str, paste: &Path) -> std::path::PathBuf {
    let keystone = env("VERSO_TEST_KEYSTONE_URL");
    let conf = dir.join("cyborg.conf");
    let base = cyborg_conductor_config(
        host,
        &dir.join("cyborg.sqlite"),
        &keystone,
        "accel",
        "verso-accel",
        &dir.join("cyborg.log"),
    );
    std::fs::write(
        &conf,
        format!(
            "{base}endpoint_override = {placement}\n\n\
             [nova]\nauth_type = password\nauth_url = {keystone}\nusername = accel\n\
             password = verso-accel\nproject_name = service\nuser_domain_name = Default\n\
             project_domain_name = Default\nendpoint_override = {nova}\n\n\
             [api]\napi_paste_config = {paste}\n",
            placement = env("VERSO_TEST_PLACEMENT_URL"),
            paste = paste.display(),
        ),
    )
    .expect("write cyborg.conf");
    conf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborgs_own_api_runs_on_the_rust_conductor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-process-{suffix}");
    let instance = "3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b";
    let placement = placement();
    let root = compute_node(&placement, &host).await;
    let nova = TestNova::builder().server(instance, "vm").start().await;
    let paste = dir.path().join("api-paste.ini");
    std::fs::write(&paste, API_PASTE).expect("write api-paste.ini");
    let conf = write_config(dir.path(), &host, nova.url(), &paste);

    // The conductor, on an empty database.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_accel-cyborg17-conductor"));
    cmd.arg("--config-file").arg(&conf).env("RUST_LOG", "warn");
    let (mut conductor, mut out) = spawn(cmd);
    wait_for(&mut out, "made Cyborg 17's schema", "the conductor").await;
    wait_for(&mut out, "serving cyborg-conductor", "the conductor").await;

    // A host reports through Cyborg's own agent-side client, on Cyborg's topic.
    cyborg_agent_reports_as_host(CONDUCTOR_TOPIC, &host).await;

    // Cyborg's own API on the same file.
    let port = free_port();
    let mut cmd = Command::new(python());
    cmd.arg(peer_script().with_file_name("cyborg_api.py"))
        .arg("--config")
        .arg(&conf)
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    let (_api_process, mut api_out) = spawn(cmd);
    wait_for(&mut api_out, "serving on", "Cyborg's API").await;
    let api = Api {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{port}"),
    };

    let (status, devices) = api
        .call(Method::GET, &format!("/v2/devices?hostname={host}"), None)
        .await;
    assert_eq!(status, 200, "{devices}");
    let mut types: Vec<&str> = devices["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|d| d["type"].as_str().expect("type"))
        .collect();
    types.sort();
    assert_eq!(types, ["FPGA", "NIC"]);

    let (status, body) = api
        .call(
            Method::POST,
            "/v2/device_profiles",
            Some(json!([{"name": format!("fpga-{suffix}"),
                "groups": [{"resources:FPGA": "1", "trait:CUSTOM_FAKE_DEVICE": "required"}]}])),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api
        .call(
            Method::POST,
            "/v2/accelerator_requests",
            Some(json!({"device_profile_name": format!("fpga-{suffix}")})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let arq = body["arqs"][0]["uuid"]
        .as_str()
        .expect("a request")
        .to_owned();
    assert_eq!(body["arqs"][0]["state"], "Initial");

    // Bound as Nova binds: host, the FPGA's provider, the instance.
    let rp = rp_uuid(&format!("{host}_FakeDevice"));
    let patch = json!({ arq.clone(): [
        {"path": "/hostname", "op": "add", "value": host},
        {"path": "/device_rp_uuid", "op": "add", "value": rp},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ]});
    let (status, body) = api
        .call(Method::PATCH, "/v2/accelerator_requests", Some(patch))
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = api
        .call(
            Method::GET,
            &format!("/v2/accelerator_requests/{arq}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "Bound", "{body}");
    assert_eq!(body["device_rp_uuid"], rp.as_str());
    assert_eq!(body["attach_handle_type"], "TEST_PCI");
    let told = nova.of(instance);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        told[0].body["events"],
        json!([{"name": "accelerator-request-bound", "server_uuid": instance, "tag": arq,
            "status": "completed"}])
    );

    // Deleted by instance (Cyborg 17's API deletes directly), then the profile (through
    // the conductor).
    let (status, body) = api
        .call(
            Method::DELETE,
            &format!("/v2/accelerator_requests?instance={instance}"),
            None,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = api
        .call(
            Method::DELETE,
            &format!("/v2/device_profiles/fpga-{suffix}"),
            None,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (_, body) = api.call(Method::GET, "/v2/device_profiles", None).await;
    assert!(
        !body.to_string().contains(&format!("fpga-{suffix}")),
        "the profile is still listed: {body}"
    );

    // SIGTERM: the conductor stops and says so.
    let pid = conductor.id().expect("a pid");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    wait_for(&mut out, "stopped", "the conductor").await;
    let status = tokio::time::timeout(Duration::from_secs(30), conductor.wait())
        .await
        .expect("the conductor exits")
        .expect("its status");
    assert!(status.success(), "{status}");

    delete_tree(&placement, &root, true).await;
}
