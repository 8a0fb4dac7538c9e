//! `accel api` behind the real test Keystone (`VERSO_TEST_KEYSTONE_URL`, from
//! `scripts/start-keystone.sh`), configured with the operator guide's own
//! `[keystone_authtoken]` block, and used by the real `openstack` command
//! (python-openstackclient with python-cyborgclient) with password authentication, as
//! an operator would.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use std::process::Command;
use support::{all_in_one_with_keystone, keystone_url, python};

/// `openstack ARGS` as `user` of `project` with a password, the accelerator endpoint
/// overridden to `api` (the catalog's may name another port): its status and output.
fn openstack(api: &str, user: &str, project: &str, args: &[&str]) -> (bool, String) {
    let bin = std::path::Path::new(&python()).with_file_name("openstack");
    let out = Command::new(&bin)
        .env("OS_AUTH_URL", keystone_url())
        .env("OS_AUTH_TYPE", "password")
        .env("OS_IDENTITY_API_VERSION", "3")
        .env("OS_USERNAME", user)
        .env("OS_PASSWORD", format!("verso-{user}"))
        .env("OS_PROJECT_NAME", project)
        .env("OS_USER_DOMAIN_NAME", "Default")
        .env("OS_PROJECT_DOMAIN_NAME", "Default")
        .env("OS_ACCELERATOR_ENDPOINT_OVERRIDE", api)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} runs (scripts/test.sh makes .venv): {e}", bin.display()));
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn accel_with_the_guides_keystone_options_serves_the_openstack_cli() {
    let dir = tempfile::tempdir().expect("dir");
    // The all-in-one (conductor, API and an agent in one process, on the in-process
    // transport), authenticating as `accel api` does when the configuration says so.
    let (_aio, base) = all_in_one_with_keystone(dir.path(), 1);

    // No token: 401 with the Keystone challenge.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (status, challenge) = rt.block_on(async {
        let r = reqwest::get(format!("{base}/v2/device_profiles"))
            .await
            .expect("GET");
        let challenge = r
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (r.status().as_u16(), challenge)
    });
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some(format!("Keystone uri=\"{}\"", keystone_url()).as_str())
    );

    // A member may not create a profile; an administrator does; a reader reads it.
    let create = [
        "accelerator",
        "device",
        "profile",
        "create",
        "cli-gpu",
        "--group",
        "resources:GPU=1",
        "-f",
        "json",
    ];
    let (ok, out) = openstack(&base, "demo-member", "demo", &create);
    assert!(!ok, "a member created a profile: {out}");
    assert!(out.contains("cyborg:device_profile:create"), "{out}");
    let (ok, out) = openstack(&base, "admin", "admin", &create);
    assert!(ok, "{out}");
    let (ok, out) = openstack(
        &base,
        "demo-reader",
        "demo",
        &["accelerator", "device", "profile", "list", "-f", "json"],
    );
    assert!(ok && out.contains("cli-gpu"), "{out}");

    // A member's request is its project's: another project's member does not see it.
    let (ok, out) = openstack(
        &base,
        "demo-member",
        "demo",
        &["accelerator", "arq", "create", "cli-gpu", "-f", "json"],
    );
    assert!(ok, "{out}");
    let arq: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let uuid = arq["uuid"].as_str().expect("uuid");
    let list = ["accelerator", "arq", "list", "-f", "json"];
    let (ok, out) = openstack(&base, "demo-reader", "demo", &list);
    assert!(ok && out.contains(uuid), "{out}");
    let (ok, out) = openstack(&base, "other-member", "other", &list);
    assert!(ok, "{out}");
    assert!(
        !out.contains(uuid),
        "another project sees the request: {out}"
    );

    // Devices are an administrator's to read.
    let devices = ["accelerator", "device", "list", "-f", "json"];
    let (ok, out) = openstack(&base, "demo-member", "demo", &devices);
    assert!(!ok && out.contains("cyborg:device:get_all"), "{out}");
    let (ok, out) = openstack(&base, "admin", "admin", &devices);
    assert!(ok && out.contains("GPU"), "{out}");
}

/// The first ```toml block of the operator guide's Placement section, pointed at the
/// test Keystone (whose catalog has the test Placement) and reconciling every second.
fn placement_config() -> String {
    let guide = include_str!("../../../../docs/operator-guide.md");
    let block = guide
        .split("## Placement")
        .nth(1)
        .and_then(|s| s.split("```toml\n").nth(1))
        .and_then(|b| b.split("```").next())
        .expect("the operator guide's Placement section has a toml block");
    block
        .lines()
        .map(|line| match line.split('=').next().unwrap_or("").trim() {
            "auth_url" => format!("auth_url = \"{}\"", keystone_url()),
            "password" => "password = \"verso-accel\"".to_owned(),
            "sync_interval" => "sync_interval = 1".to_owned(),
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_conductor_keeps_the_deployables_in_placement() {
    use accel_conductor::keystone::{AuthOptions, Session};
    let session = Session::new(AuthOptions::new(
        &keystone_url(),
        "accel",
        "verso-accel",
        "service",
    ))
    .expect("session");
    // The test's own client of Placement (found through the catalog), as Nova's.
    let placement = accel_conductor::placement::Placement::new(session, None);
    let call = |method: reqwest::Method, path: String, body: Option<serde_json::Value>| {
        let placement = placement.clone();
        async move {
            placement
                .call(method, &path, body.as_ref())
                .await
                .expect("Placement answers")
        }
    };
    // host1's compute node, as Nova makes it (kept from an earlier run if there).
    let (_, found) = call(
        reqwest::Method::GET,
        "/resource_providers?name=host1".into(),
        None,
    )
    .await;
    let root = match found["resource_providers"][0]["uuid"].as_str() {
        Some(u) => u.to_owned(),
        None => {
            let (status, made) = call(
                reqwest::Method::POST,
                "/resource_providers".into(),
                Some(serde_json::json!({"name": "host1"})),
            )
            .await;
            assert_eq!(status, 200, "{made}");
            made["uuid"].as_str().expect("uuid").to_owned()
        }
    };
    let dir = tempfile::tempdir().expect("dir");
    let (aio, base) = support::all_in_one_with_keystone_and(dir.path(), 1, &placement_config());

    // The deployables the API shows (as admin) are host1's providers, within a few
    // reconciler passes.
    let admin = {
        let s = Session::new(AuthOptions::new(
            &keystone_url(),
            "admin",
            "verso-admin",
            "admin",
        ))
        .expect("admin");
        s.token(false).await.expect("admin token")
    };
    let deployables: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/v2/deployables?hostname=host1"))
        .header("X-Auth-Token", &admin)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON");
    let mut wanted: Vec<String> = deployables["deployables"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|d| d["rp_uuid"].as_str().map(str::to_owned))
        .collect();
    wanted.sort();
    assert!(!wanted.is_empty(), "{deployables}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let children = loop {
        let (_, tree) = call(
            reqwest::Method::GET,
            format!("/resource_providers?in_tree={root}"),
            None,
        )
        .await;
        let mut children: Vec<String> = tree["resource_providers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["parent_provider_uuid"] == root.as_str())
            .filter_map(|p| p["uuid"].as_str().map(str::to_owned))
            .collect();
        children.sort();
        if children == wanted || std::time::Instant::now() > deadline {
            break children;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert_eq!(children, wanted, "host1's providers in Placement");
    // Clean up (the all-in-one first, so it does not make them again).
    drop(aio);
    for rp in children.iter().chain([&root]) {
        call(
            reqwest::Method::DELETE,
            format!("/resource_providers/{rp}"),
            None,
        )
        .await;
    }
}
