//! What the tests of this crate share: the test services' settings, Placement as the
//! tests' service user, a compute node of a host of the test's own.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used, dead_code)]

use accel_cyborg17::keystone::{AuthOptions, Session};
use accel_cyborg17_conductor::{Placement, Requests};
use reqwest::Method;
use serde_json::json;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// A setting scripts/test.sh makes.
pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set (scripts/test.sh sets it)"))
}

/// The tests' service user's Keystone session (accel: admin in project `service`).
pub fn session() -> Session {
    Session::new(AuthOptions::new(
        &env("VERSO_TEST_KEYSTONE_URL"),
        "accel",
        "verso-accel",
        "service",
    ))
    .expect("a Keystone session")
}

/// The test Placement.
pub fn placement() -> Placement {
    Placement::new(session(), Some(env("VERSO_TEST_PLACEMENT_URL")))
}

/// Makes the compute node provider named `host` (what nova-compute makes); its UUID.
pub async fn compute_node(placement: &Placement, host: &str) -> String {
    let (status, node) = placement
        .call(
            Method::POST,
            "/resource_providers",
            Some("1.20"),
            Some(&json!({ "name": host })),
        )
        .await
        .expect("Placement answers");
    assert_eq!(status, 200, "{node}");
    node["uuid"]
        .as_str()
        .expect("the compute node's uuid")
        .to_owned()
}

/// Deletes the providers under `root` (children first), and `root` too when `with_root`.
pub async fn delete_tree(placement: &Placement, root: &str, with_root: bool) {
    let (status, tree) = placement
        .call(
            Method::GET,
            &format!("/resource_providers?in_tree={root}"),
            Some("1.14"),
            None,
        )
        .await
        .expect("Placement answers");
    assert_eq!(status, 200, "{tree}");
    for p in tree["resource_providers"]
        .as_array()
        .expect("providers")
        .iter()
        .rev()
    {
        let uuid = p["uuid"].as_str().expect("uuid");
        if uuid != root || with_root {
            let (status, body) = placement
                .call(
                    Method::DELETE,
                    &format!("/resource_providers/{uuid}"),
                    None,
                    None,
                )
                .await
                .expect("Placement answers");
            assert_eq!(status, 204, "delete {uuid}: {body}");
        }
    }
}

/// A bind of request `arq` by JSON patch, as Cyborg's API sends it: `(patch_list,
/// valid_fields)`.
pub fn bind_patch(
    arq: &str,
    host: &str,
    rp: &str,
    instance: &str,
) -> (BTreeMap<String, Value>, BTreeMap<String, Value>) {
    let patch = json!([
        {"path": "/hostname", "op": "add", "value": host},
        {"path": "/device_rp_uuid", "op": "add", "value": rp},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ]);
    let fields = json!({"hostname": host, "device_rp_uuid": rp, "instance_uuid": instance});
    (
        BTreeMap::from([(arq.to_owned(), patch)]),
        BTreeMap::from([(arq.to_owned(), fields)]),
    )
}

/// The request's state, as its object says.
pub async fn state_of(requests: &Requests, uuid: &str) -> String {
    let ext = requests.arq(uuid).await.expect("read");
    let state = ext
        .arq
        .get()
        .and_then(|a| a.state.get().copied())
        .expect("a state");
    format!("{state:?}")
}

/// Reads `lines` until one contains `want` (within a minute); the line.
pub async fn wait_for(lines: &mut Lines<BufReader<ChildStdout>>, want: &str, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, lines.next_line()).await {
            Ok(Ok(Some(line))) if line.contains(want) => return line,
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) => panic!("{what} ended before printing {want:?}"),
            Ok(Err(e)) => panic!("{what}: {e}"),
            Err(_) => panic!("{what} did not print {want:?} within 60 s"),
        }
    }
}

/// Starts `cmd` with its standard output piped, killed when dropped; the child and
/// the output's lines.
pub fn spawn(mut cmd: Command) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the process starts");
    let out = BufReader::new(child.stdout.take().expect("stdout")).lines();
    (child, out)
}

/// A free TCP port on loopback (for a server the test starts).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("addr")
        .port()
}

/// An FPGA programming tool (`[fpga] program_command`) recording the PCI address it was
/// given in `record`; its path, in `dir`.
pub fn recording_tool(dir: &std::path::Path, record: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("program-fpga");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" >> {}\nexit 0\n",
            record.display()
        ),
    )
    .expect("write the tool");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}
