//! Release N as Cyborg 17, its three services in Rust in one process on the in-process
//! transport (no broker): `accel-cyborg17-conductor`, `accel-cyborg17-agent` on a fixture
//! host and `accel-cyborg17-api`, started with `start_with` on one `MemoryTransport`, with
//! the real Placement and Keystone and the test's Nova. The agent's report is stored and
//! listed by the API; a profile and a request made through the API bind the host's FPGA
//! as Nova binds (Nova told), unbind, and are deleted; the FPGA is programmed through the
//! API (the agent takes the bitstream from the real Glance and runs a recording tool).
//! What an embedded deployment (the all-in-one, the demo) of release N needs from the
//! three.
//!
//! Uses `VERSO_TEST_KEYSTONE_URL`, `VERSO_TEST_PLACEMENT_URL` and `VERSO_TEST_GLANCE_URL`
//! (scripts/test.sh sets them); no RabbitMQ.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_agent::fixture::{sample_host, write_tree};
use accel_conductor::testing::nova::Nova as TestNova;
use accel_cyborg17::testing::cyborg_conductor_config_on;
use accel_cyborg17::testing::glance_image;
use accel_cyborg17_agent::run::Reported;
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use support::{compute_node, delete_tree, env, free_port, placement, recording_tool, session};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;

#[path = "../../cyborg17-conductor/tests/support/mod.rs"]
mod support;

const INSTANCE: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
/// The fixture host's FPGA (`sample_host(0)`).
const FPGA: &str = "0000:3d:00.0";

async fn call(base: &str, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .header("X-Project-Id", "c0ffee00c0ffee00c0ffee00c0ffee00")
        .header("OpenStack-API-Version", "accelerator 2.3");
    if let Some(b) = body {
        r = r.json(&b);
    }
    let response = r.send().await.expect("the API answers");
    let status = response.status().as_u16();
    let bytes = response.bytes().await.expect("a body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The three services started from `conf` on one in-process transport, the agent's
/// first report made (the fixture host's five devices); the API's base URL.
async fn start_three(
    conf: &std::path::Path,
) -> (
    accel_cyborg17_conductor::run::Running,
    accel_cyborg17_agent::run::Running,
    accel_cyborg17_api::run::Running,
    String,
) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = accel_cyborg17_conductor::run::start_with(
        &accel_cyborg17_conductor::config::Config::load(conf).expect("the conductor's file"),
        transport.clone(),
    )
    .await
    .expect("the conductor starts");
    assert!(
        conductor.schema_made,
        "an empty database gets Cyborg 17's schema"
    );
    let agent = accel_cyborg17_agent::run::start_with(
        &accel_cyborg17_agent::config::AgentConfig::load(conf).expect("the agent's file"),
        transport.clone(),
    )
    .await
    .expect("the agent starts");
    let first = tokio::time::timeout(Duration::from_secs(60), agent.first_report())
        .await
        .expect("a report within 60 s");
    assert_eq!(first, Reported::Devices(5));
    let api = accel_cyborg17_api::run::start_with(
        &accel_cyborg17_api::config::ApiConfig::load(conf).expect("the API's file"),
        transport,
    )
    .await
    .expect("the API starts");
    let base = format!("http://{}", api.addr);
    (conductor, agent, api, base)
}

/// The resource class of a deployable as the API shows it (its `rc` attribute).
fn resource_class(deployable: &Value) -> String {
    let attributes: Vec<Value> =
        serde_json::from_str(deployable["attributes_list"].as_str().expect("text")).expect("JSON");
    attributes
        .iter()
        .find_map(|a| a["rc"].as_str())
        .expect("a resource class")
        .to_owned()
}

/// A profile `name` of one accelerator of resource class `rc`, and a request of it;
/// the request's UUID.
async fn profile_and_request(base: &str, name: &str, rc: &str) -> String {
    let (status, body) = call(
        base,
        Method::POST,
        "/v2/device_profiles",
        Some(json!([{"name": name, "groups": [{format!("resources:{rc}"): "1"}]}])),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        base,
        Method::POST,
        "/v2/accelerator_requests",
        Some(json!({"device_profile_name": name})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["arqs"][0]["uuid"]
        .as_str()
        .expect("a request")
        .to_owned()
}

/// Binds request `arq` on `host` to the deployable whose provider is `rp`, as Nova
/// binds; the request as the API then shows it.
async fn bind(base: &str, arq: &str, host: &str, rp: &str) -> Value {
    let (status, body) = call(
        base,
        Method::PATCH,
        "/v2/accelerator_requests",
        Some(json!({ arq: [
            {"path": "/hostname", "op": "add", "value": host},
            {"path": "/device_rp_uuid", "op": "add", "value": rp},
            {"path": "/instance_uuid", "op": "add", "value": INSTANCE},
        ]})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    call(
        base,
        Method::GET,
        &format!("/v2/accelerator_requests/{arq}"),
        None,
    )
    .await
    .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_as_cyborg_17_runs_in_one_process_on_the_in_process_transport() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-embedded-{suffix}");
    let placement = placement();
    let root = compute_node(&placement, &host).await;
    let nova = TestNova::builder().server(INSTANCE, "vm").start().await;
    let keystone = env("VERSO_TEST_KEYSTONE_URL");
    let port = free_port();
    let sysfs = dir.path().join("sys");
    write_tree(&sysfs, &sample_host(0)).expect("the fixture host");
    let record = dir.path().join("programmed");

    // One cyborg.conf, as an all-in-one host has; its transport_url is not used.
    let conf = dir.path().join("cyborg.conf");
    let base = cyborg_conductor_config_on(
        &host,
        &format!("sqlite:///{}", dir.path().join("cyborg.sqlite").display()),
        &keystone,
        "accel",
        "verso-accel",
        &dir.path().join("cyborg.log"),
    );
    std::fs::write(
        &conf,
        format!(
            "{base}endpoint_override = {placement}\n\n\
             [nova]\nauth_type = password\nauth_url = {keystone}\nusername = accel\n\
             password = verso-accel\nproject_name = service\nuser_domain_name = Default\n\
             project_domain_name = Default\nendpoint_override = {nova}\n\n\
             [api]\nauth_strategy = noauth\nhost_ip = 127.0.0.1\nport = {port}\n\n\
             [agent]\nsysfs_root = {sysfs}\n\n\
             [fpga]\nprogram_command = {tool}\nwork_dir = {work}\n\n\
             [glance]\nauth_type = password\nauth_url = {keystone}\nusername = accel\n\
             password = verso-accel\nproject_name = service\nuser_domain_name = Default\n\
             project_domain_name = Default\nendpoint_override = {glance}\n",
            placement = env("VERSO_TEST_PLACEMENT_URL"),
            nova = nova.url(),
            sysfs = sysfs.display(),
            tool = recording_tool(dir.path(), &record).display(),
            work = dir.path().display(),
            glance = env("VERSO_TEST_GLANCE_URL"),
        ),
    )
    .expect("write cyborg.conf");

    let (conductor, agent, api, base) = start_three(&conf).await;

    // The agent's devices through the API; the FPGA's deployable and its provider.
    let (status, devices) = call(
        &base,
        Method::GET,
        &format!("/v2/devices?hostname={host}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{devices}");
    assert_eq!(
        devices["devices"].as_array().map(Vec::len),
        Some(5),
        "{devices}"
    );
    let (_, deployables) = call(&base, Method::GET, "/v2/deployables", None).await;
    let fpga = deployables["deployables"]
        .as_array()
        .expect("deployables")
        .iter()
        .find(|d| d["name"] == format!("{host}_{FPGA}"))
        .expect("the FPGA's deployable")
        .clone();
    let rp = fpga["rp_uuid"].as_str().expect("its provider").to_owned();
    let rc = resource_class(&fpga);

    // A profile and a request; bound as Nova binds, Nova told; unbound; deleted.
    let profile = format!("fpga-embedded-{suffix}");
    let arq = profile_and_request(&base, &profile, &rc).await;
    let bound = bind(&base, &arq, &host, &rp).await;
    assert_eq!(bound["state"], "Bound", "{bound}");
    assert_eq!(bound["attach_handle_type"], "PCI", "{bound}");
    assert_eq!(bound["attach_handle_info"]["bus"], "3d", "{bound}");
    let told = nova.of(INSTANCE);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].body["events"][0]["status"], "completed");
    let (status, body) = call(
        &base,
        Method::PATCH,
        "/v2/accelerator_requests",
        Some(json!({ arq.clone(): [
            {"path": "/hostname", "op": "remove"},
            {"path": "/device_rp_uuid", "op": "remove"},
            {"path": "/instance_uuid", "op": "remove"},
        ]})),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (_, unbound) = call(
        &base,
        Method::GET,
        &format!("/v2/accelerator_requests/{arq}"),
        None,
    )
    .await;
    assert_eq!(unbound["state"], "Unbound", "{unbound}");
    let (status, _) = call(
        &base,
        Method::DELETE,
        &format!("/v2/accelerator_requests?arqs={arq}"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = call(
        &base,
        Method::DELETE,
        &format!("/v2/device_profiles/{profile}"),
        None,
    )
    .await;
    assert_eq!(status, 204);

    // The FPGA programmed through the API (Cyborg's `PATCH .../program`): the host's agent
    // downloads the bitstream from Glance and runs the operator's tool on the FPGA.
    let bitstream: Vec<u8> = (0..2048u32).map(|i| (i * 7) as u8).collect();
    let image = glance_image(&session(), &env("VERSO_TEST_GLANCE_URL"), Some(&bitstream))
        .await
        .expect("a bitstream image");
    let (status, body) = call(
        &base,
        Method::PATCH,
        &format!(
            "/v2/deployables/{}/program",
            fpga["uuid"].as_str().expect("uuid")
        ),
        Some(json!([{"path": "/bitstream_id", "op": "replace", "value": [{"image_uuid": image}]}])),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["uuid"], fpga["uuid"]);
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        FPGA
    );

    api.stop().await.expect("the API stops");
    agent.stop().await;
    conductor.stop().await;
    delete_tree(&placement, &root, true).await;
}

/// Release N as an all-in-one without OpenStack (what `accel demo` runs): no `[placement]`
/// or `[nova]` service user in the file. The agent's report is stored and each deployable
/// named the provider Cyborg would make for it, but no provider is made; a bind through
/// the API to that provider binds, with no Nova to tell; the operator's disable, which
/// is Placement's reserved inventory, is refused naming `[placement]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_as_cyborg_17_runs_without_placement_and_nova() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-alone-{suffix}");
    let port = free_port();
    let sysfs = dir.path().join("sys");
    write_tree(&sysfs, &sample_host(0)).expect("the fixture host");
    let conf = dir.path().join("cyborg.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = rabbit://unused:unused@127.0.0.1:1/\nhost = {host}\n\n\
             [database]\nconnection = sqlite:///{db}\n\n\
             [api]\nauth_strategy = noauth\nhost_ip = 127.0.0.1\nport = {port}\n\n\
             [agent]\nsysfs_root = {sysfs}\n",
            db = dir.path().join("cyborg.sqlite").display(),
            sysfs = sysfs.display(),
        ),
    )
    .expect("write cyborg.conf");
    let config = accel_cyborg17_conductor::config::Config::load(&conf).expect("the file");
    assert_eq!(
        config.without_openstack().len(),
        2,
        "{:?}",
        config.without_openstack()
    );

    let (conductor, agent, api, base) = start_three(&conf).await;

    // Every deployable named its provider's name-based UUID, none made in Placement.
    let (_, deployables) = call(&base, Method::GET, "/v2/deployables", None).await;
    let deployables = deployables["deployables"]
        .as_array()
        .expect("deployables")
        .clone();
    assert_eq!(deployables.len(), 5, "{deployables:?}");
    let placement = placement();
    for d in &deployables {
        let name = d["name"].as_str().expect("a name");
        let rp = d["rp_uuid"].as_str().expect("a provider named");
        assert_eq!(rp, accel_cyborg17_conductor::placement::rp_uuid(name));
        let (status, _) = placement
            .call(
                Method::GET,
                &format!("/resource_providers/{rp}"),
                None,
                None,
            )
            .await
            .expect("Placement answers");
        assert_eq!(status, 404, "{name}'s provider was made in Placement");
    }
    let fpga = deployables
        .iter()
        .find(|d| d["name"] == format!("{host}_{FPGA}"))
        .expect("the FPGA's deployable");
    let rp = fpga["rp_uuid"].as_str().expect("its provider").to_owned();
    let rc = resource_class(fpga);

    let profile = format!("fpga-alone-{suffix}");
    let arq = profile_and_request(&base, &profile, &rc).await;
    let bound = bind(&base, &arq, &host, &rp).await;
    assert_eq!(bound["state"], "Bound", "{bound}");
    assert_eq!(bound["attach_handle_info"]["bus"], "3d", "{bound}");

    let (_, devices) = call(&base, Method::GET, "/v2/devices?type=FPGA", None).await;
    let uuid = devices["devices"][0]["uuid"]
        .as_str()
        .expect("the host's FPGA")
        .to_owned();
    let (status, body) = call(
        &base,
        Method::POST,
        &format!("/v2/devices/{uuid}/disable"),
        None,
    )
    .await;
    assert_eq!(status, 405, "{body}");
    assert!(body.to_string().contains("[placement]"), "{body}");

    api.stop().await.expect("the API stops");
    agent.stop().await;
    conductor.stop().await;
}
