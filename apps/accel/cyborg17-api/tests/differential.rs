//! `accel-cyborg17-api` against Cyborg 17's own API: both on one `cyborg.conf`, one
//! database in Cyborg's schema (SQLite, and MariaDB with the schema Cyborg's own
//! `cyborg-dbsync` makes) and one conductor (`accel-cyborg17-conductor`, on
//! RabbitMQ, with the real Placement and Keystone and the test's Nova). Cyborg's own
//! agent-side client reports a host (a fake FPGA and an SR-IOV NIC with two virtual
//! functions); then every call is sent to both APIs, and whatever Cyborg's API answers,
//! this one must answer too: the same status, and every field of Cyborg's body with the
//! same value (accel's additions, such as a device's `inventory_status`, may come
//! beside them; links are compared without their host). A write is made through one API
//! and read through both, or made once through each on twin objects whose answers must
//! agree but for their own UUIDs, names and times.
//!
//! The Rust API runs as its binary (`accel-cyborg17-api --config-file cyborg.conf`), so
//! its configuration reading and its stop on SIGTERM are tested too.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL`,
//! `VERSO_TEST_PLACEMENT_URL` and `VERSO_TEST_MYSQL_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing::nova::Nova as TestNova;
use accel_cyborg17::rpc::CONDUCTOR_TOPIC;
use accel_cyborg17::testing::{
    cyborg_agent_reports_as_host, cyborg_conductor_config_on, cyborg_dbsync_upgrade, mysql_execute,
    peer_script, python,
};
use accel_cyborg17_conductor::config::Config;
use accel_cyborg17_conductor::placement::rp_uuid;
use reqwest::Method;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use support::{compute_node, delete_tree, env, free_port, placement, spawn, wait_for};
use tokio::process::Command;

#[path = "../../cyborg17-conductor/tests/support/mod.rs"]
mod support;

/// Cyborg's API pipeline without Keystone's middleware: requests carry what
/// keystonemiddleware would set (roles, project, Nova's service token's roles). The
/// Rust API runs with `[api] auth_strategy = noauth`, which takes the same project
/// header.
const API_PASTE: &str = "[pipeline:main]\npipeline = request_id api_v2\n\n\
    [app:api_v2]\npaste.app_factory = cyborg.api.app:app_factory\n\n\
    [filter:request_id]\npaste.filter_factory = oslo_middleware:RequestId.factory\n";
const PROJECT: &str = "b1d0c3a2e5f44d6e8a7b9c0d1e2f3a4b";
const INSTANCE: &str = "3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b";

/// One of the two APIs.
struct Api {
    name: &'static str,
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call_at("2.3", method, path, body).await
    }

    /// A call at microversion `version`.
    async fn call_at(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-Roles", "admin,member,reader,service")
            .header("X-Project-Id", PROJECT)
            .header("X-User-Id", "operator")
            .header("X-Service-Roles", "service")
            .header("OpenStack-API-Version", format!("accelerator {version}"));
        if let Some(b) = body {
            r = r.json(b);
        }
        let response = r
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        let status = response.status().as_u16();
        let bytes = response.bytes().await.expect("a body");
        // Cyborg's links put `/accelerator` before `/v2` wherever it is served (its
        // `link.build_url`); accel's point where it serves (docs/cyborg-compatibility.md).
        let text = String::from_utf8_lossy(&bytes)
            .replace(&self.base, "")
            .replace("\"/accelerator/", "\"/");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Both APIs.
struct Both {
    cyborg: Api,
    rust: Api,
}

/// Lists (of objects with a `uuid`) in UUID order: Cyborg lists newest first, accel
/// oldest first, and neither order is part of Cyborg's API. A deployable's
/// `attributes_list` text likewise (Cyborg's in the order stored, accel's by key).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(sorted).collect();
            items.sort_by_key(|i| i["uuid"].as_str().unwrap_or_default().to_owned());
            Value::Array(items)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if k == "attributes_list" {
                        attribute_set(v)
                    } else {
                        sorted(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// An `attributes_list` text as the sorted list of its items.
fn attribute_set(text: &Value) -> Value {
    let text = text.as_str().expect("attributes_list is text");
    let mut items: Vec<String> = serde_json::from_str::<Vec<Value>>(text)
        .expect("attributes_list is JSON text of a list")
        .iter()
        .map(Value::to_string)
        .collect();
    items.sort();
    json!(items)
}

/// Where `theirs` (Cyborg's) and `ours` differ: every field of `theirs` must be in
/// `ours` with the same value, lists of the same length.
fn differences(theirs: &Value, ours: &Value, at: &str, out: &mut Vec<String>) {
    match (theirs, ours) {
        (Value::Object(t), Value::Object(o)) => {
            for (k, tv) in t {
                match o.get(k) {
                    Some(ov) => differences(tv, ov, &format!("{at}.{k}"), out),
                    None => out.push(format!("{at}.{k}: Cyborg {tv}, accel has none")),
                }
            }
        }
        (Value::Array(t), Value::Array(o)) if t.len() == o.len() => {
            for (i, (tv, ov)) in t.iter().zip(o).enumerate() {
                differences(tv, ov, &format!("{at}[{i}]"), out);
            }
        }
        _ if theirs == ours => {}
        _ => out.push(format!("{at}: Cyborg {theirs}, accel {ours}")),
    }
}

/// `v` without the fields that name one object rather than describe it.
fn anonymous(v: &Value, names: &[&str]) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !names.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), anonymous(v, names)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| anonymous(i, names)).collect()),
        other => other.clone(),
    }
}

const IDENTITY: &[&str] = &[
    "uuid",
    "name",
    "key",
    "created_at",
    "updated_at",
    "links",
    "device_profile_name",
];

impl Both {
    /// The call to both; both answers must agree. Cyborg's answer.
    async fn same(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let (cs, cb) = self.cyborg.call(method.clone(), path, body.as_ref()).await;
        let (rs, rb) = self.rust.call(method.clone(), path, body.as_ref()).await;
        assert_eq!(cs, rs, "{method} {path}: Cyborg {cs} {cb}, accel {rs} {rb}");
        if cs < 400 {
            let mut out = Vec::new();
            differences(&sorted(&cb), &sorted(&rb), "", &mut out);
            assert!(out.is_empty(), "{method} {path}:\n{}", out.join("\n"));
        }
        (cs, cb)
    }

    /// A call both refuse, changing nothing: the same status, but where Cyborg 17
    /// answers a client's mistake with 500 (an exception its API does not map), accel
    /// answers 400 (docs/cyborg-compatibility.md).
    async fn refused(&self, method: Method, path: &str, body: Option<Value>) {
        let (cs, cb) = self.cyborg.call(method.clone(), path, body.as_ref()).await;
        let (rs, rb) = self.rust.call(method.clone(), path, body.as_ref()).await;
        assert!(cs >= 400, "{method} {path}: Cyborg took it: {cs} {cb}");
        let client_mistake = cs == 500 && rs == 400 && cb.to_string().contains("Server");
        assert!(
            cs == rs || client_mistake,
            "{method} {path}: Cyborg {cs} {cb}, accel {rs} {rb}"
        );
    }

    /// A read through both at microversion `version`.
    async fn read_at(&self, version: &str, path: &str) -> Value {
        let (cs, cb) = self.cyborg.call_at(version, Method::GET, path, None).await;
        let (rs, rb) = self.rust.call_at(version, Method::GET, path, None).await;
        assert_eq!(
            cs, rs,
            "GET {path} at {version}: Cyborg {cs} {cb}, accel {rs} {rb}"
        );
        if cs < 400 {
            let mut out = Vec::new();
            differences(&sorted(&cb), &sorted(&rb), "", &mut out);
            assert!(
                out.is_empty(),
                "GET {path} at {version}:\n{}",
                out.join("\n")
            );
        }
        cb
    }

    /// A read through both.
    async fn read(&self, path: &str) -> Value {
        let (status, body) = self.same(Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// `cyborg_body` to Cyborg's API and `rust_body` to accel's, each making its own
    /// object: the answers must agree but for the objects' own names. Both answers.
    async fn twins(
        &self,
        method: Method,
        path: &str,
        cyborg_body: Value,
        rust_body: Value,
    ) -> ((u16, Value), (u16, Value)) {
        let c = self
            .cyborg
            .call(method.clone(), path, Some(&cyborg_body))
            .await;
        let r = self.rust.call(method.clone(), path, Some(&rust_body)).await;
        assert_eq!(c.0, r.0, "{method} {path}: Cyborg {c:?}, accel {r:?}");
        let mut out = Vec::new();
        differences(
            &anonymous(&c.1, IDENTITY),
            &anonymous(&r.1, IDENTITY),
            "",
            &mut out,
        );
        assert!(out.is_empty(), "{method} {path}:\n{}", out.join("\n"));
        (c, r)
    }
}

fn write_config(
    dir: &Path,
    host: &str,
    connection: &str,
    nova: &str,
    paste: &Path,
    rust_port: u16,
) -> std::path::PathBuf {
    let keystone = env("VERSO_TEST_KEYSTONE_URL");
    let conf = dir.join("cyborg.conf");
    let base = cyborg_conductor_config_on(
        host,
        connection,
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
             [api]\napi_paste_config = {paste}\nauth_strategy = noauth\n\
             host_ip = 127.0.0.1\nport = {rust_port}\n",
            placement = env("VERSO_TEST_PLACEMENT_URL"),
            paste = paste.display(),
        ),
    )
    .expect("write cyborg.conf");
    conf
}

fn uuids(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|i| i["uuid"].as_str().expect("a uuid").to_owned())
        .collect()
}

/// `(total, reserved)` of `rp`'s inventory of `rc`.
async fn inventory(
    placement: &accel_cyborg17_conductor::Placement,
    rp: &str,
    rc: &str,
) -> (i64, i64) {
    let (status, body) = placement
        .call(
            Method::GET,
            &format!("/resource_providers/{rp}/inventories/{rc}"),
            None,
            None,
        )
        .await
        .expect("Placement answers");
    assert_eq!(status, 200, "{body}");
    (
        body["total"].as_i64().expect("total"),
        body["reserved"].as_i64().expect("reserved"),
    )
}

/// One conductor on the test broker at a time: both tests serve `cyborg-conductor`.
static ONE_CONDUCTOR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_rust_api_answers_as_cyborgs_own() {
    the_rust_api_answers_as_cyborgs_own(false).await;
}

/// On MariaDB, Cyborg's production database, its schema made by Cyborg's own
/// `cyborg-dbsync upgrade`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_the_rust_api_answers_as_cyborgs_own() {
    the_rust_api_answers_as_cyborgs_own(true).await;
}

async fn the_rust_api_answers_as_cyborgs_own(mariadb: bool) {
    let _one = ONE_CONDUCTOR.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let server = env("VERSO_TEST_MYSQL_URL");
    let database = format!("cyborg_test_api_{suffix}");
    let connection = if mariadb {
        mysql_execute(
            &server,
            &format!("CREATE DATABASE {database} CHARACTER SET utf8mb4"),
        );
        let rest = server.trim_start_matches("mysql://").trim_end_matches('/');
        format!("mysql+pymysql://{rest}/{database}?charset=utf8mb4")
    } else {
        format!("sqlite:///{}", dir.path().join("cyborg.sqlite").display())
    };
    let host = format!("cyborg17-api-{suffix}");
    let placement = placement();
    let root = compute_node(&placement, &host).await;
    let nova = TestNova::builder().server(INSTANCE, "vm").start().await;
    let paste = dir.path().join("api-paste.ini");
    std::fs::write(&paste, API_PASTE).expect("write api-paste.ini");
    let rust_port = free_port();
    let conf = write_config(
        dir.path(),
        &host,
        &connection,
        nova.url(),
        &paste,
        rust_port,
    );
    if mariadb {
        cyborg_dbsync_upgrade(&conf);
    }

    // The conductor (in this process), on an empty database; a host reports to it
    // through Cyborg's own agent-side client.
    let config = Config::load(&conf).expect("cyborg.conf");
    let conductor = accel_cyborg17_conductor::run::start(&config)
        .await
        .expect("the conductor starts");
    cyborg_agent_reports_as_host(CONDUCTOR_TOPIC, &host).await;

    // Cyborg's own API and this crate's binary, on the same file.
    let cyborg_port = free_port();
    let mut cmd = Command::new(python());
    cmd.arg(peer_script().with_file_name("cyborg_api.py"))
        .arg("--config")
        .arg(&conf)
        .args(["--listen", &format!("127.0.0.1:{cyborg_port}")]);
    let (_cyborg_api, mut cyborg_out) = spawn(cmd);
    wait_for(&mut cyborg_out, "serving on", "Cyborg's API").await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_accel-cyborg17-api"));
    cmd.arg("--config-file").arg(&conf).env("RUST_LOG", "warn");
    let (mut rust_api, mut rust_out) = spawn(cmd);
    wait_for(
        &mut rust_out,
        "serving Cyborg's v2 API",
        "accel-cyborg17-api",
    )
    .await;
    let both = Both {
        cyborg: Api {
            name: "Cyborg's API",
            http: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{cyborg_port}"),
        },
        rust: Api {
            name: "accel-cyborg17-api",
            http: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{rust_port}"),
        },
    };

    // The inventory: lists, filters, each device, deployable and attribute, and one
    // that is not there.
    let devices = both.read("/v2/devices").await;
    assert_eq!(
        devices["devices"].as_array().map(Vec::len),
        Some(2),
        "{devices}"
    );
    both.read(&format!("/v2/devices?hostname={host}")).await;
    let fpgas = both.read("/v2/devices?type=FPGA").await;
    for uuid in uuids(&devices["devices"]) {
        both.read(&format!("/v2/devices/{uuid}")).await;
    }
    let deployables = both.read("/v2/deployables").await;
    assert_eq!(deployables["deployables"].as_array().map(Vec::len), Some(3));
    for uuid in uuids(&deployables["deployables"]) {
        both.read(&format!("/v2/deployables/{uuid}")).await;
    }
    let attributes = both.read("/v2/attributes").await;
    for uuid in uuids(&attributes["attributes"]) {
        both.read(&format!("/v2/attributes/{uuid}")).await;
    }
    let missing = uuid::Uuid::new_v4();
    for path in [
        "devices",
        "deployables",
        "attributes",
        "accelerator_requests",
        "device_profiles",
    ] {
        both.same(Method::GET, &format!("/v2/{path}/{missing}"), None)
            .await;
    }

    // Version discovery; the root's `description` names the service (accel's own text).
    let undescribed = |mut v: Value| {
        v.as_object_mut().map(|m| m.remove("description"));
        v
    };
    let (cs, cb) = both.cyborg.call(Method::GET, "/", None).await;
    let (rs, rb) = both.rust.call(Method::GET, "/", None).await;
    let mut out = Vec::new();
    differences(&undescribed(cb), &undescribed(rb), "", &mut out);
    assert!(
        cs == 200 && rs == 200 && out.is_empty(),
        "GET /:\n{}",
        out.join("\n")
    );
    both.read("/v2").await;

    // Microversions: 2.0 shows no device status; a profile by name needs 2.2.
    let old = both.read_at("2.0", "/v2/devices").await;
    assert!(old["devices"][0].get("status").is_none(), "{old}");

    // Device profiles: one made through each API, read through both; a duplicate name
    // and a bad group key refused by both.
    let groups = json!([{"resources:FPGA": "1", "trait:CUSTOM_FAKE_DEVICE": "required"}]);
    let (cp, rp) = (format!("fpga-c-{suffix}"), format!("fpga-r-{suffix}"));
    let ((status, _), _) = both
        .twins(
            Method::POST,
            "/v2/device_profiles",
            json!([{"name": cp, "groups": groups, "description": "twin"}]),
            json!([{"name": rp, "groups": groups, "description": "twin"}]),
        )
        .await;
    assert_eq!(status, 201);
    both.read("/v2/device_profiles").await;
    both.read(&format!("/v2/device_profiles?name={cp},{rp}"))
        .await;
    let profile = both.read(&format!("/v2/device_profiles/{cp}")).await;
    let profile_uuid = profile["device_profile"]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    both.read(&format!("/v2/device_profiles/{profile_uuid}"))
        .await;
    let (status, _) = both
        .same(
            Method::POST,
            "/v2/device_profiles",
            Some(json!([{"name": cp, "groups": groups}])),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = both
        .same(
            Method::POST,
            "/v2/device_profiles",
            Some(json!([{"name": format!("bad-{suffix}"), "groups": [{"cpu:x": "1"}]}])),
        )
        .await;
    assert_eq!(status, 400);

    // Accelerator requests: one made through each API (the profile asks for one FPGA),
    // then read through both.
    let ((status, c_arqs), (_, r_arqs)) = both
        .twins(
            Method::POST,
            "/v2/accelerator_requests",
            json!({"device_profile_name": cp}),
            json!({"device_profile_name": rp}),
        )
        .await;
    assert_eq!(status, 201, "{c_arqs}");
    let c_arq = uuids(&c_arqs["arqs"]).remove(0);
    let r_arq = uuids(&r_arqs["arqs"]).remove(0);
    both.read("/v2/accelerator_requests").await;
    both.read(&format!("/v2/accelerator_requests/{c_arq}"))
        .await;
    both.read(&format!("/v2/accelerator_requests/{r_arq}"))
        .await;

    // Refused alike: a request of an unknown profile or of none, a bind of an unknown
    // request, a delete naming neither requests nor an instance.
    for (method, path, body) in [
        (Method::POST, "/v2/accelerator_requests", Some(json!({}))),
        (
            Method::POST,
            "/v2/accelerator_requests",
            Some(json!({"device_profile_name": format!("none-{suffix}")})),
        ),
        (
            Method::PATCH,
            "/v2/accelerator_requests",
            Some(json!({missing.to_string(): [
            {"path": "/hostname", "op": "add", "value": host}]})),
        ),
        (Method::DELETE, "/v2/accelerator_requests", None),
    ] {
        both.refused(method, path, body).await;
    }

    // Bound as Nova binds, through Cyborg's API; read through both; unbound through
    // accel's; bound again through accel's, read through both.
    let fpga_rp = rp_uuid(&format!("{host}_FakeDevice"));
    let bind = |arq: &str| {
        json!({ arq: [
            {"path": "/hostname", "op": "add", "value": host},
            {"path": "/device_rp_uuid", "op": "add", "value": fpga_rp},
            {"path": "/instance_uuid", "op": "add", "value": INSTANCE},
        ]})
    };
    let unbind = |arq: &str| {
        json!({ arq: [
            {"path": "/hostname", "op": "remove"},
            {"path": "/device_rp_uuid", "op": "remove"},
            {"path": "/instance_uuid", "op": "remove"},
        ]})
    };
    let (status, body) = both
        .cyborg
        .call(
            Method::PATCH,
            "/v2/accelerator_requests",
            Some(&bind(&c_arq)),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let bound = both
        .read(&format!("/v2/accelerator_requests/{c_arq}"))
        .await;
    assert_eq!(bound["state"], "Bound", "{bound}");
    both.read(&format!("/v2/accelerator_requests?instance={INSTANCE}"))
        .await;
    both.read(&format!(
        "/v2/accelerator_requests?instance={INSTANCE}&bind_state=resolved"
    ))
    .await;
    let (status, body) = both
        .rust
        .call(
            Method::PATCH,
            "/v2/accelerator_requests",
            Some(&unbind(&c_arq)),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let unbound = both
        .read(&format!("/v2/accelerator_requests/{c_arq}"))
        .await;
    assert_eq!(unbound["state"], "Unbound", "{unbound}");
    let (status, body) = both
        .rust
        .call(
            Method::PATCH,
            "/v2/accelerator_requests",
            Some(&bind(&r_arq)),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let bound = both
        .read(&format!("/v2/accelerator_requests/{r_arq}"))
        .await;
    assert_eq!(bound["state"], "Bound", "{bound}");
    assert_eq!(nova.of(INSTANCE).len(), 2, "Nova is told of each bind");
    both.read("/v2/accelerator_requests").await;

    // Device disable and enable (2.3) through accel's API: the status read through
    // both, the FPGA's inventory in Placement all reserved, then none.
    let fpga = uuids(&fpgas["devices"]).remove(0);
    let maintenance = |api: &'static str, action: &'static str| {
        let both = &both;
        let fpga = fpga.clone();
        async move {
            let api = if api == "cyborg" {
                &both.cyborg
            } else {
                &both.rust
            };
            let (status, body) = api
                .call(Method::POST, &format!("/v2/devices/{fpga}/{action}"), None)
                .await;
            assert_eq!(status, 204, "{} {action}: {body}", api.name);
            both.read(&format!("/v2/devices/{fpga}")).await["status"].clone()
        }
    };
    let (total, reserved) = inventory(&placement, &fpga_rp, "FPGA").await;
    assert!(total > 0 && reserved == 0, "{total} {reserved}");
    assert_eq!(maintenance("rust", "disable").await, "maintaining");
    assert_eq!(
        inventory(&placement, &fpga_rp, "FPGA").await,
        (total, total)
    );
    assert_eq!(maintenance("rust", "enable").await, "enabled");
    assert_eq!(inventory(&placement, &fpga_rp, "FPGA").await, (total, 0));
    // Through Cyborg's: the same status (its Placement update is not compared: Cyborg 17
    // reserves the inventory of the deployable whose id is the device's id, whichever
    // device that deployable belongs to).
    assert_eq!(maintenance("cyborg", "disable").await, "maintaining");
    assert_eq!(maintenance("cyborg", "enable").await, "enabled");

    // Attributes of a deployable: one made through each API (twins), read through
    // both, each deleted through the other API.
    let rc = both.read("/v2/attributes?key=rc").await;
    let dep_id = rc["attributes"][0]["deployable_id"]
        .as_i64()
        .expect("a deployable id");
    let ((status, c_attr), (_, r_attr)) = both
        .twins(
            Method::POST,
            "/v2/attributes",
            json!({"deployable_id": dep_id, "key": "trait8", "value": "CUSTOM_TWIN"}),
            json!({"deployable_id": dep_id, "key": "trait9", "value": "CUSTOM_TWIN"}),
        )
        .await;
    assert_eq!(status, 201, "{c_attr}");
    both.read(&format!("/v2/attributes?deployable_id={dep_id}"))
        .await;
    both.read("/v2/deployables").await;
    for (attr, via) in [(&r_attr, &both.cyborg), (&c_attr, &both.rust)] {
        let uuid = attr["uuid"].as_str().expect("uuid");
        both.read(&format!("/v2/attributes/{uuid}")).await;
        let (status, body) = via
            .call(Method::DELETE, &format!("/v2/attributes/{uuid}"), None)
            .await;
        assert_eq!(status, 204, "{} {body}", via.name);
        both.refused(Method::GET, &format!("/v2/attributes/{uuid}"), None)
            .await;
    }
    both.read("/v2/attributes").await;

    // Deletes: the requests by UUID through Cyborg's API and by instance through accel's,
    // the profiles one through each; what is left read through both.
    let (status, body) = both
        .cyborg
        .call(
            Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={c_arq}"),
            None,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = both
        .rust
        .call(
            Method::DELETE,
            &format!("/v2/accelerator_requests?instance={INSTANCE}"),
            None,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let left = both.read("/v2/accelerator_requests").await;
    assert_eq!(left["arqs"], json!([]), "{left}");
    let (status, body) = both
        .rust
        .call(Method::DELETE, &format!("/v2/device_profiles/{cp}"), None)
        .await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = both
        .cyborg
        .call(Method::DELETE, &format!("/v2/device_profiles/{rp}"), None)
        .await;
    assert_eq!(status, 204, "{body}");
    let left = both.read("/v2/device_profiles").await;
    assert_eq!(left["device_profiles"], json!([]), "{left}");
    both.read("/v2/devices").await;

    // SIGTERM: accel's API stops and says so.
    let pid = rust_api.id().expect("a pid");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    wait_for(&mut rust_out, "stopped", "accel-cyborg17-api").await;
    let status = tokio::time::timeout(Duration::from_secs(30), rust_api.wait())
        .await
        .expect("accel-cyborg17-api exits")
        .expect("its status");
    assert!(status.success(), "{status}");
    conductor.stop().await;
    delete_tree(&placement, &root, true).await;
    if mariadb {
        mysql_execute(&server, &format!("DROP DATABASE {database}"));
    }
}
