//! Cyborg 17's own API service (openstack-cyborg 17.0.0's WSGI application, unchanged)
//! on release N+1's conductor: `accel conductor` on a database Cyborg 17 made, serving
//! Cyborg's conductor API on RabbitMQ (`[cyborg] serve_agents`, the default), with
//! Cyborg's API, no Cyborg conductor anywhere, on the same database and broker. So the
//! control plane moves one service at a time, the conductor before the API.
//!
//! Through Cyborg's API: a host accel's agent reported is listed from the database
//! accel keeps; a profile is made and refused twice (409, Cyborg's
//! `DuplicateDeviceProfileName` rebuilt from accel's answer); a request is made, bound the
//! way Nova binds it (Nova told by accel's conductor), unbound, bound again and deleted
//! by instance; a profile in use is refused (409); then deleted.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON` and `VERSO_TEST_KEYSTONE_URL`
//! (scripts/test.sh sets them; Nova's events go through the test Keystone's `nova` user).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_agent::fixture::{sample_host, write_tree};
use accel_conductor::testing::nova::Nova;
use accel_cyborg17::testing::{peer_script, python};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{cyborg_conductor, eventually, keystone_url, Killed, Vhost};

/// Cyborg's API pipeline without Keystone's middleware: requests carry what
/// keystonemiddleware would set (roles, project, Nova's service token's roles).
const API_PASTE: &str = "[pipeline:main]\npipeline = request_id api_v2\n\n\
    [app:api_v2]\npaste.app_factory = cyborg.api.app:app_factory\n\n\
    [filter:request_id]\npaste.filter_factory = oslo_middleware:RequestId.factory\n";
const PROJECT: &str = "b1d0c3a2e5f44d6e8a7b9c0d1e2f3a4b";

/// Cyborg's API at `base`, called as an administrator with Nova's service token.
struct CyborgApi {
    http: reqwest::Client,
    base: String,
}

impl CyborgApi {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
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

/// Cyborg's API on `database` (SQLite) and the broker at `transport_url`, listening on
/// `port`, once it says so.
fn cyborg_api(dir: &Path, database: &Path, transport_url: &str, port: u16) -> Killed {
    let paste = dir.join("api-paste.ini");
    std::fs::write(&paste, API_PASTE).expect("write api-paste.ini");
    let conf = dir.join("cyborg.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = {transport_url}\nhost = cyborg-api\nlog_file = {log}\n\n\
             [database]\nconnection = sqlite:///{db}\n\n[api]\napi_paste_config = {paste}\n",
            log = dir.join("cyborg-api.log").display(),
            db = database.display(),
            paste = paste.display(),
        ),
    )
    .expect("write cyborg.conf");
    let mut child = Command::new(python())
        .arg(peer_script().with_file_name("cyborg_api.py"))
        .arg("--config")
        .arg(&conf)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("Cyborg's API starts");
    let stdout = child.stdout.take().expect("piped");
    let api = Killed(child);
    let first = BufReader::new(stdout).lines().next();
    assert!(
        matches!(&first, Some(Ok(l)) if l.starts_with("serving on")),
        "Cyborg's API did not start: {first:?}\n{}",
        std::fs::read_to_string(dir.join("cyborg-api.log")).unwrap_or_default()
    );
    api
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

#[test]
fn cyborgs_own_api_runs_on_accels_conductor() {
    let dir = tempfile::tempdir().expect("dir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let vhost = Vhost::new();
    let database = dir.path().join("cyborg.sqlite");
    let db_url = format!("sqlite://{}", database.display());
    let instance = uuid::Uuid::new_v4().to_string();
    let nova = rt.block_on(Nova::builder().server(&instance, "vm").start());

    // accel's conductor on a database Cyborg 17 made, telling Nova.
    let _conductor = cyborg_conductor(
        &db_url,
        true,
        &[
            ("ACCEL_TRANSPORT_URL", vhost.url.clone()),
            ("ACCEL_NOVA_AUTH_URL", keystone_url()),
            ("ACCEL_NOVA_USERNAME", "nova".to_owned()),
            ("ACCEL_NOVA_PASSWORD", "verso-nova".to_owned()),
            ("ACCEL_NOVA_PROJECT_NAME", "service".to_owned()),
            ("ACCEL_NOVA_ENDPOINT_OVERRIDE", nova.url().to_owned()),
        ],
    );

    // A host's inventory, reported by accel's agent on Cyborg's wire.
    let host = format!(
        "cyborg-api-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let root = dir.path().join("sysfs");
    write_tree(&root, &sample_host(0)).expect("the fixture host");
    let out = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["agent", "--once", "--host", &host, "--sysfs-root"])
        .arg(&root)
        .env("ACCEL_TRANSPORT_URL", &vhost.url)
        .env("ACCEL_AGENT_STATE_DIR", dir.path().join("state"))
        .output()
        .expect("accel agent runs");
    assert!(
        out.status.success(),
        "accel agent --once: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let port = free_port();
    let _api = cyborg_api(dir.path(), &database, &vhost.url, port);
    let api = CyborgApi {
        http: reqwest::Client::new(),
        base: format!("http://127.0.0.1:{port}"),
    };
    let call = |method: reqwest::Method, path: &str, body: Option<Value>| {
        rt.block_on(api.call(method, path, body))
    };
    use reqwest::Method;

    // The devices accel keeps, read by Cyborg's API from the database.
    let (status, devices) = call(Method::GET, &format!("/v2/devices?hostname={host}"), None);
    assert_eq!(status, 200, "{devices}");
    assert!(
        devices["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .any(|d| d["type"] == "GPU"),
        "no GPU listed: {devices}"
    );
    // The GPU's deployable (accel names each after its host and PCI address), whose
    // provider Placement would have given Nova.
    let (status, deployables) = call(Method::GET, "/v2/deployables", None);
    assert_eq!(status, 200, "{deployables}");
    let deployable = deployables["deployables"]
        .as_array()
        .expect("deployables")
        .iter()
        .find(|d| {
            d["name"].as_str().is_some_and(|n| n.starts_with(&host)) && d["driver_name"] == "nvidia"
        })
        .unwrap_or_else(|| panic!("no deployable of the GPU in {deployables}"))
        .clone();
    let rp = accel_conductor::db::rp_uuid(deployable["name"].as_str().expect("a name"));

    // A profile, through accel's conductor (no other conductor serves Cyborg's topic).
    let profile = format!("gpu-{}", &host[11..]);
    let body = json!([{"name": profile, "groups": [{"resources:PGPU": "1"}]}]);
    let (status, made) = call(Method::POST, "/v2/device_profiles", Some(body.clone()));
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["name"], profile.as_str());
    assert_eq!(made["groups"], json!([{"resources:PGPU": "1"}]));
    let (status, again) = call(Method::POST, "/v2/device_profiles", Some(body));
    assert_eq!(status, 409, "a second profile of the name: {again}");
    assert!(again.to_string().contains(&profile), "{again}");
    let stored = rt.block_on(async {
        let db = accel_conductor::Db::connect(&db_url)
            .await
            .expect("the database");
        let p = db.profile_by_name(&profile).await.expect("stored by accel");
        db.close().await;
        p
    });
    assert_eq!(Some(stored.uuid.as_str()), made["uuid"].as_str());

    // A request, bound as Nova binds it: host, the GPU's provider, the instance.
    let (status, made) = call(
        Method::POST,
        "/v2/accelerator_requests",
        Some(json!({"device_profile_name": profile})),
    );
    assert_eq!(status, 201, "{made}");
    let arq = made["arqs"][0]["uuid"]
        .as_str()
        .expect("a request")
        .to_owned();
    assert_eq!(made["arqs"][0]["state"], "Initial", "{made}");
    assert_eq!(made["arqs"][0]["device_profile_group_id"], 0, "{made}");
    let bind = json!({ arq.clone(): [
        {"path": "/hostname", "op": "add", "value": host},
        {"path": "/device_rp_uuid", "op": "add", "value": rp},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ]});
    let (status, body) = call(
        Method::PATCH,
        "/v2/accelerator_requests",
        Some(bind.clone()),
    );
    assert_eq!(status, 202, "{body}");
    let (status, bound) = call(
        Method::GET,
        &format!("/v2/accelerator_requests/{arq}"),
        None,
    );
    assert_eq!(status, 200, "{bound}");
    assert_eq!(bound["state"], "Bound", "{bound}");
    assert_eq!(bound["hostname"], host.as_str());
    assert_eq!(bound["device_rp_uuid"], rp.as_str());
    assert_eq!(bound["attach_handle_type"], "PCI", "{bound}");
    let told = rt.block_on(eventually(
        Duration::from_secs(30),
        "Nova told",
        String::new,
        || async {
            let told = nova.of(&instance);
            (!told.is_empty()).then_some(told)
        },
    ));
    assert_eq!(
        told[0].body["events"],
        json!([{"name": "accelerator-request-bound", "server_uuid": instance, "tag": arq,
            "status": "completed"}])
    );

    // Unbound as Nova unbinds it: the device free, the request kept.
    let unbind = json!({ arq.clone(): [
        {"path": "/hostname", "op": "remove"},
        {"path": "/device_rp_uuid", "op": "remove"},
        {"path": "/instance_uuid", "op": "remove"},
    ]});
    let (status, body) = call(Method::PATCH, "/v2/accelerator_requests", Some(unbind));
    assert_eq!(status, 202, "{body}");
    let (_, unbound) = call(
        Method::GET,
        &format!("/v2/accelerator_requests/{arq}"),
        None,
    );
    assert_eq!(unbound["state"], "Unbound", "{unbound}");
    assert_eq!(unbound["hostname"], Value::Null, "{unbound}");

    // A profile a request uses is not deleted (Cyborg's `Conflict`).
    let (status, body) = call(
        Method::DELETE,
        &format!("/v2/device_profiles/{profile}"),
        None,
    );
    assert_eq!(status, 409, "{body}");

    // Bound again (the device was given back), then deleted by instance: Cyborg 17's API
    // deletes requests in the database itself, which accel's conductor then reads.
    let (status, body) = call(Method::PATCH, "/v2/accelerator_requests", Some(bind));
    assert_eq!(status, 202, "{body}");
    let (_, bound) = call(
        Method::GET,
        &format!("/v2/accelerator_requests/{arq}"),
        None,
    );
    assert_eq!(bound["state"], "Bound", "bound again: {bound}");
    let (status, body) = call(
        Method::DELETE,
        &format!("/v2/accelerator_requests?instance={instance}"),
        None,
    );
    assert_eq!(status, 204, "{body}");
    let (status, body) = call(
        Method::DELETE,
        &format!("/v2/device_profiles/{profile}"),
        None,
    );
    assert_eq!(status, 204, "{body}");
    let (status, body) = call(
        Method::GET,
        &format!("/v2/device_profiles/{}", stored.uuid),
        None,
    );
    assert_eq!(status, 404, "the profile is still there: {body}");
}
