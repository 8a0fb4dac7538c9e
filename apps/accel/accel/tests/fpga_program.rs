//! Cyborg's `PATCH /v2/deployables/{uuid}/program` through accel end to end: the API
//! (policy `cyborg:deployable:program`), the conductor (RPC 1.5 `program_deployable`:
//! an FPGA only, the agent cap checked), the host's agent (RPC 1.2 `program_fpga`: an
//! FPGA it reported), the bitstream downloaded from a real Glance 33 (found in the real
//! Keystone's catalog) and checked against Glance's sha512, and the operator's tool run
//! with the card's PCI address and the file. An `accel all-in-one` (two fixture hosts;
//! host 2 has a Xilinx FPGA) serves it.
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

/// `accel all-in-one` with two hosts, the FPGA tool `tool` and the agent cap `agent_cap`;
/// the API's URL.
fn all_in_one(dir: &Path, tool: &Path, agent_cap: &str) -> (support::Killed, String) {
    let sets = [
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
            dir.join(format!("accel-{agent_cap}.db")).display()
        ),
    ];
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

    let (_aio, api) = all_in_one(dir.path(), &tool, "1.2");
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

    // While agents may run an older release (the agent cap below 1.2), nothing is sent.
    let (_aio, api) = all_in_one(dir.path(), &tool, "1.1");
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
