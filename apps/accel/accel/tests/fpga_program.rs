//! Cyborg's `PATCH /v2/deployables/{uuid}/program` through accel end to end: the API
//! (policy `cyborg:deployable:program`), the conductor (RPC 1.5 `program_deployable`:
//! an FPGA only), the host's agent on the wire it reports on (Cyborg's agent API 1.0
//! `fpga_program` on Cyborg's wire, the default; accel's agent API 1.2 `program_fpga`,
//! under `[upgrade_levels] agent`, on accel's), the bitstream downloaded from a real
//! Glance 33 (found in the real Keystone's catalog) and checked against Glance's sha512,
//! and the operator's tool run with the card's PCI address and the file. An `accel
//! all-in-one` (two fixture hosts; host 2 has a Xilinx FPGA) serves it.
//!
//! Uses `VERSO_TEST_KEYSTONE_URL` and `VERSO_TEST_GLANCE_URL` (scripts/test.sh starts the
//! services and sets them).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// Host 2's FPGA in `accel_agent::fixture::sample_host(2)`.
const FPGA: &str = "0000:3d:00.0";

/// `accel all-in-one` with two hosts, the FPGA tool `tool`, the agent cap `agent_cap`
/// and the settings `extra` (`section.key=value`), on a database of its own; the API's
/// URL.
fn all_in_one(
    dir: &Path,
    tool: &Path,
    agent_cap: &str,
    extra: &[&str],
) -> (support::Killed, String) {
    let mut sets = vec![
        "api.listen=127.0.0.1:0".to_owned(),
        format!("fpga.program_command={}", tool.display()),
        format!(
            "glance.auth_url={}",
            support::env("VERSO_TEST_KEYSTONE_URL")
        ),
        "glance.username=accel".to_owned(),
        "glance.password=verso-accel".to_owned(),
        "glance.project_name=service".to_owned(),
        format!("upgrade_levels.agent={agent_cap}"),
        format!(
            "database.url=sqlite://{}",
            dir.join(format!("accel-{}.db", uuid::Uuid::new_v4()))
                .display()
        ),
    ];
    sets.extend(extra.iter().map(|s| (*s).to_owned()));
    let mut args = vec!["all-in-one".to_owned(), "--agents".into(), "2".into()];
    for set in sets {
        args.extend(["--set".to_owned(), set]);
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(&args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("accel starts");
    let stdout = child.stdout.take().expect("stdout");
    let child = support::Killed(child);
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let url = lines
        .find_map(|l| l.strip_prefix("api: listening on ").map(str::to_owned))
        .expect("the API's address");
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

fn program_body(image: &str) -> Value {
    json!([{"path": "/bitstream_id", "op": "replace", "value": [{"image_uuid": image}]}])
}

async fn deployable_at(api: &str, name: &str) -> String {
    let list: Value = reqwest::get(format!("{api}/v2/deployables"))
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON");
    list["deployables"]
        .as_array()
        .expect("deployables")
        .iter()
        .find(|d| d["name"] == name)
        .and_then(|d| d["uuid"].as_str())
        .unwrap_or_else(|| panic!("no deployable {name}: {list}"))
        .to_owned()
}

async fn patch(api: &str, uuid: &str, body: &Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .patch(format!("{api}/v2/deployables/{uuid}/program"))
        .json(body)
        .send()
        .await
        .expect("PATCH");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_programs_an_fpga_with_a_bitstream_from_glance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (tool, record) = support::fpga_tool(dir.path());
    let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    let image = support::bitstream(&data).await;

    let (first, api) = all_in_one(dir.path(), &tool, "1.2", &[]);
    let fpga = deployable_at(&api, &format!("host2_{FPGA}")).await;
    let (status, body) = patch(&api, &fpga, &program_body(&image)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["uuid"], fpga.as_str());
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        format!("{FPGA} {:x}\n", Sha256::digest(&data))
    );

    // Not an FPGA, a body that is not Cyborg's, a bitstream Glance does not have.
    std::fs::remove_file(&record).expect("reset");
    let gpu = deployable_at(&api, "host2_0000:3b:00.0").await;
    let (status, body) = patch(&api, &gpu, &program_body(&image)).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not an FPGA")),
        "{body}"
    );
    let (status, body) = patch(&api, &fpga, &json!({"image_uuid": image})).await;
    assert_eq!(status, 400, "{body}");
    let missing = uuid::Uuid::new_v4().to_string();
    let (status, body) = patch(&api, &fpga, &program_body(&missing)).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["type"], "FPGAProgramError", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not found in Glance")),
        "{body}"
    );
    let (status, _) = patch(
        &api,
        &uuid::Uuid::new_v4().to_string(),
        &program_body(&image),
    )
    .await;
    assert_eq!(status, 404);
    assert!(!record.exists(), "the tool ran for a refused request");

    // While agents may run an older release (accel's agent cap below 1.2): a host on
    // Cyborg's wire is programmed through Cyborg's `fpga_program` (its agent API 1.0,
    // which every release serves; the conductor recorded the wire from its reports)...
    drop(first);
    let (cyborg_wire, api) = all_in_one(dir.path(), &tool, "1.1", &[]);
    let fpga = deployable_at(&api, &format!("host2_{FPGA}")).await;
    let (status, body) = patch(&api, &fpga, &program_body(&image)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        format!("{FPGA} {:x}\n", Sha256::digest(&data))
    );
    std::fs::remove_file(&record).expect("reset");
    drop(cyborg_wire);
    // ... and to one on accel's wire nothing is sent: accel's `program_fpga` is 1.2.
    let (_aio, api) = all_in_one(dir.path(), &tool, "1.1", &["cyborg.report_to_cyborg=false"]);
    let fpga = deployable_at(&api, &format!("host2_{FPGA}")).await;
    let (status, body) = patch(&api, &fpga, &program_body(&image)).await;
    assert_eq!(status, 500, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("[upgrade_levels] agent")),
        "{body}"
    );
    assert!(!record.exists(), "the tool ran above the cap");
}

/// `method path` on the API with `body`: the status and the JSON answered.
async fn call(api: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{api}{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the API answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A profile of one FPGA group with `extra` keys, and one request of it: its UUID.
async fn request_of(api: &str, name: &str, extra: &[(&str, &str)]) -> String {
    let mut group = json!({"resources:FPGA": "1"});
    for (k, v) in extra {
        group[*k] = json!(v);
    }
    let (status, body) = call(
        api,
        reqwest::Method::POST,
        "/v2/device_profiles",
        Some(json!([{"name": name, "groups": [group]}])),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = call(
        api,
        reqwest::Method::POST,
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

/// Binds `arq` to host 2's FPGA for a new instance as Nova does; the status.
async fn bind(api: &str, arq: &str) -> (u16, Value) {
    bind_for(api, arq, &uuid::Uuid::new_v4().to_string()).await
}

/// Binds `arq` to host 2's FPGA for `instance`; the status.
async fn bind_for(api: &str, arq: &str, instance: &str) -> (u16, Value) {
    let rp = accel_conductor::db::rp_uuid(&format!("host2_{FPGA}"));
    let patch = json!({ arq: [
        {"path": "/hostname", "op": "add", "value": "host2"},
        {"path": "/device_rp_uuid", "op": "add", "value": rp},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ]});
    call(
        api,
        reqwest::Method::PATCH,
        "/v2/accelerator_requests",
        Some(patch),
    )
    .await
}

async fn unbind(api: &str, arq: &str) {
    let patch = json!({ arq: [
        {"path": "/hostname", "op": "remove"},
        {"path": "/device_rp_uuid", "op": "remove"},
        {"path": "/instance_uuid", "op": "remove"},
    ]});
    let (status, body) = call(
        api,
        reqwest::Method::PATCH,
        "/v2/accelerator_requests",
        Some(patch),
    )
    .await;
    assert_eq!(status, 202, "{body}");
}

async fn state_of(api: &str, arq: &str) -> Value {
    let (status, body) = call(
        api,
        reqwest::Method::GET,
        &format!("/v2/accelerator_requests/{arq}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["state"].clone()
}

/// The function trait attribute (only host 2's FPGA can have one), if any.
async fn function_attribute(api: &str) -> Option<String> {
    let (status, body) = call(api, reqwest::Method::GET, "/v2/attributes", None).await;
    assert_eq!(status, 200, "{body}");
    body["attributes"]
        .as_array()
        .expect("attributes")
        .iter()
        .find(|a| a["key"] == "trait_fpga_function")
        .and_then(|a| a["value"].as_str())
        .map(str::to_owned)
}

/// Cyborg 17's `FPGAExtARQ`: a bind whose profile group names a bitstream or a function
/// programs the FPGA first (Glance's image, the host's agent, the operator's tool), the
/// deployable keeps the bitstream and its function's trait; a deployable that holds the
/// bitstream is not programmed again; a group naming both, or an image Glance does not
/// have, binds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_programs_the_fpga_its_profile_group_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (tool, record) = support::fpga_tool(dir.path());
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
    let function = format!("fn-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let image = accel_keystone::testing::glance_image_with(
        &support::service_session(),
        &support::env("VERSO_TEST_GLANCE_URL"),
        Some(&data),
        &[("accel:function_id", &function)],
    )
    .await
    .expect("an image in Glance");
    let (_aio, api) = all_in_one(dir.path(), &tool, "1.2", &[]);
    assert_eq!(function_attribute(&api).await, None);
    let fpga = deployable_at(&api, &format!("host2_{FPGA}")).await;
    let bitstream_shown = |api: String, fpga: String| async move {
        let (status, one) = call(
            &api,
            reqwest::Method::GET,
            &format!("/v2/deployables/{fpga}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{one}");
        let (_, all) = call(&api, reqwest::Method::GET, "/v2/deployables", None).await;
        let listed = all["deployables"]
            .as_array()
            .expect("deployables")
            .iter()
            .find(|d| d["uuid"] == fpga.as_str())
            .expect("listed")["bitstream_id"]
            .clone();
        assert_eq!(one["bitstream_id"], listed, "one and the list agree");
        listed
    };
    assert_eq!(
        bitstream_shown(api.clone(), fpga.clone()).await,
        Value::Null
    );
    let trait_name = format!(
        "CUSTOM_FPGA_FUNCTION_ID_XCLMGMT_{}",
        function.to_uppercase().replace('-', "_")
    );
    let programmed = format!("{FPGA} {:x}\n", Sha256::digest(&data));

    // By bitstream: programmed, then bound.
    let by_bitstream = request_of(&api, "fpga-bitstream", &[("accel:bitstream_id", &image)]).await;
    let (status, body) = bind(&api, &by_bitstream).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(state_of(&api, &by_bitstream).await, "Bound");
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        programmed
    );
    assert_eq!(
        function_attribute(&api).await.as_deref(),
        Some(trait_name.as_str())
    );
    // The API shows the bitstream it holds, as Cyborg's does.
    assert_eq!(
        bitstream_shown(api.clone(), fpga.clone()).await,
        Value::String(image.clone())
    );

    // Bound again: the FPGA holds the bitstream, so it is not programmed again.
    unbind(&api, &by_bitstream).await;
    std::fs::remove_file(&record).expect("reset");
    let (status, body) = bind(&api, &by_bitstream).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(state_of(&api, &by_bitstream).await, "Bound");
    assert!(
        !record.exists(),
        "programmed again with the bitstream it holds"
    );
    unbind(&api, &by_bitstream).await;

    // By function: the one image of that function, programmed (a function is always
    // programmed, as Cyborg 17 does).
    let by_function = request_of(&api, "fpga-function", &[("accel:function_id", &function)]).await;
    let instance = uuid::Uuid::new_v4().to_string();
    let (status, body) = bind_for(&api, &by_function, &instance).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(state_of(&api, &by_function).await, "Bound");
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        programmed
    );
    // The same bind again (Nova retrying): nothing changes, the FPGA in use is not
    // programmed again.
    std::fs::remove_file(&record).expect("reset");
    let (status, body) = bind_for(&api, &by_function, &instance).await;
    assert_eq!(status, 202, "{body}");
    assert!(
        !record.exists(),
        "a repeated bind programmed the FPGA again"
    );
    unbind(&api, &by_function).await;

    // A bitstream Glance does not have: nothing programmed, the request released.
    let missing = uuid::Uuid::new_v4().to_string();
    let by_missing = request_of(&api, "fpga-missing", &[("accel:bitstream_id", &missing)]).await;
    let (status, body) = bind(&api, &by_missing).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.to_string().contains("not found in Glance"), "{body}");
    assert_eq!(state_of(&api, &by_missing).await, "Unbound");
    assert!(!record.exists(), "the tool ran for a missing bitstream");
    // The device was given back: another request binds it.
    let (status, body) = bind(&api, &by_function).await;
    assert_eq!(status, 202, "the FPGA was not given back: {body}");
    unbind(&api, &by_function).await;

    // A group naming both: refused before anything changes.
    let both = request_of(
        &api,
        "fpga-both",
        &[
            ("accel:bitstream_id", &image),
            ("accel:function_id", &function),
        ],
    )
    .await;
    let (status, body) = bind(&api, &both).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("only one may be set"), "{body}");
    assert_eq!(state_of(&api, &both).await, "Initial");
}
