//! `accel api` behind the real test Keystone (`VERSO_TEST_KEYSTONE_URL`, from
//! `scripts/start-keystone.sh`), configured with the operator guide's own
//! `[keystone_authtoken]` block, and used by the real `openstack` command
//! (python-openstackclient with python-cyborgclient) with password authentication, as
//! an operator would.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_conductor::testing::nova::Nova;
use std::process::Command;
use support::{all_in_one_with_keystone_and, keystone_url, python};

/// `openstack ARGS` as `user` of `project` with a password, the accelerator endpoint
/// overridden to `api` (the catalog's may name another port): its status and output.
fn openstack(api: &str, user: &str, project: &str, args: &[&str]) -> (bool, String) {
    openstack_in(None, api, user, project, args)
}

/// [`openstack`] with the other services' endpoints taken from `region` of the catalog.
fn openstack_in(
    region: Option<&str>,
    api: &str,
    user: &str,
    project: &str,
    args: &[&str],
) -> (bool, String) {
    let bin = std::path::Path::new(&python()).with_file_name("openstack");
    let mut command = Command::new(&bin);
    if let Some(region) = region {
        command.env("OS_REGION_NAME", region);
    }
    let out = command
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
    // The test's own Nova, with one server, in a region of the catalog of its own: the
    // CLI looks the server up there, and the conductor sends Nova's events there
    // (`[nova]` with the operator guide's keys, no endpoint override).
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = uuid::Uuid::new_v4().to_string();
    let nova = rt.block_on(Nova::builder().server(&server, "accel-vm").start());
    let admin = session("admin", "admin");
    let catalog = rt
        .block_on(accel_keystone::testing::Catalog::add(
            &admin,
            "compute",
            nova.url(),
        ))
        .expect("the test Keystone takes the catalog entry");
    let region = catalog.region().to_owned();
    let nova_config = format!(
        "[nova]\nauth_url = \"{}\"\nusername = \"nova\"\npassword = \"verso-nova\"\n\
         project_name = \"service\"\nregion_name = \"{region}\"\n",
        keystone_url()
    );
    // The all-in-one (conductor, API and an agent in one process, on the in-process
    // transport), authenticating as `accel api` does when the configuration says so.
    let (_aio, base) = all_in_one_with_keystone_and(dir.path(), 1, &nova_config);

    // No token: 401 with the Keystone challenge.
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

    // `openstack accelerator arq bind` finds the server by name in Nova, then asks
    // accel to bind the member's request to the deployable Placement would offer
    // (host1's GPU, resource class PGPU, by its resource provider): refused, as Cyborg 17
    // refuses a bind without Nova's service token.
    let admin_token = rt.block_on(admin.token(false)).expect("admin token");
    let rp = rt.block_on(gpu_provider(&admin_token, &base, "host1"));
    let (ok, out) = openstack_in(
        Some(&region),
        &base,
        "demo-member",
        "demo",
        &["accelerator", "arq", "bind", uuid, "host1", "accel-vm", &rp],
    );
    assert!(!ok, "a user bound a request: {out}");
    assert!(out.contains("requires a service token"), "{out}");

    // Nova binds it (the owner's token, its own as the service token), and is told
    // through the catalog that the request is bound; the CLI shows it bound.
    let as_user = |user: &str, project: &str| {
        rt.block_on(session(user, project).token(false))
            .expect("token")
    };
    let (member, nova_token) = (as_user("demo-member", "demo"), as_user("nova", "service"));
    let nova_patch = |ops: serde_json::Value| {
        let status = rt.block_on(async {
            reqwest::Client::new()
                .patch(format!("{base}/v2/accelerator_requests"))
                .header("X-Auth-Token", &member)
                .header("X-Service-Token", &nova_token)
                .json(&serde_json::json!({ uuid: ops }))
                .send()
                .await
                .expect("PATCH")
                .status()
        });
        assert_eq!(status, 202);
    };
    nova_patch(serde_json::json!([
        {"path": "/hostname", "op": "add", "value": "host1"},
        {"path": "/instance_uuid", "op": "add", "value": server},
        {"path": "/device_rp_uuid", "op": "add", "value": rp},
    ]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while nova.received().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let events = nova.received();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].microversion.as_deref(), Some("compute 2.82"));
    assert_eq!(
        events[0].body,
        serde_json::json!({"events": [{
            "name": "accelerator-request-bound",
            "server_uuid": server,
            "tag": uuid,
            "status": "completed",
        }]})
    );
    let show = ["accelerator", "arq", "show", uuid, "-f", "json"];
    let shown = |out: &str| -> serde_json::Value {
        serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let (ok, out) = openstack(&base, "demo-member", "demo", &show);
    assert!(ok, "{out}");
    let bound = shown(&out);
    assert_eq!(bound["state"], "Bound", "{bound}");
    assert_eq!(bound["device_rp_uuid"], rp.as_str(), "{bound}");
    assert_eq!(bound["instance_uuid"], server.as_str(), "{bound}");
    assert_eq!(bound["attach_handle_type"], "PCI", "{bound}");

    // The member can neither unbind nor delete it; Nova unbinds it, then the member
    // deletes it.
    let unbind = ["accelerator", "arq", "unbind", uuid];
    let (ok, out) = openstack(&base, "demo-member", "demo", &unbind);
    assert!(!ok && out.contains("requires a service token"), "{out}");
    let delete = ["accelerator", "arq", "delete", uuid];
    let (ok, out) = openstack(&base, "demo-member", "demo", &delete);
    assert!(!ok && out.contains("is bound to instance"), "{out}");
    nova_patch(serde_json::json!([
        {"path": "/hostname", "op": "remove"},
        {"path": "/instance_uuid", "op": "remove"},
        {"path": "/device_rp_uuid", "op": "remove"},
    ]));
    let (ok, out) = openstack(&base, "demo-member", "demo", &show);
    assert!(ok, "{out}");
    let unbound = shown(&out);
    assert_eq!(unbound["state"], "Unbound", "{unbound}");
    assert_eq!(
        unbound["instance_uuid"],
        serde_json::Value::Null,
        "{unbound}"
    );
    let (ok, out) = openstack(&base, "demo-member", "demo", &delete);
    assert!(ok, "{out}");

    // Devices are an administrator's to read.
    let devices = ["accelerator", "device", "list", "-f", "json"];
    let (ok, out) = openstack(&base, "demo-member", "demo", &devices);
    assert!(!ok && out.contains("cyborg:device:get_all"), "{out}");
    let (ok, out) = openstack(&base, "admin", "admin", &devices);
    assert!(ok && out.contains("GPU"), "{out}");
}

/// A Keystone session of test user `user` (password `verso-<user>`) in `project`.
fn session(user: &str, project: &str) -> accel_conductor::keystone::Session {
    accel_conductor::keystone::Session::new(accel_conductor::keystone::AuthOptions::new(
        &keystone_url(),
        user,
        &format!("verso-{user}"),
        project,
    ))
    .expect("session")
}

/// `GET /v2/deployables?hostname=HOST` with `token`: the API's answer.
async fn deployables_of(token: &str, base: &str, host: &str) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("{base}/v2/deployables?hostname={host}"))
        .header("X-Auth-Token", token)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON")
}

/// The resource provider of a GPU deployable of `host`, as the administrator reads the
/// API (`attributes_list` is Cyborg's JSON text of one-key objects, `rc` among them).
async fn gpu_provider(token: &str, base: &str, host: &str) -> String {
    let listed = deployables_of(token, base, host).await;
    listed["deployables"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| {
            let attributes: serde_json::Value = d["attributes_list"]
                .as_str()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or_default();
            attributes
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| a["rc"] == "PGPU")
        })
        .and_then(|d| d["rp_uuid"].as_str())
        .unwrap_or_else(|| panic!("{host} has a GPU deployable: {listed}"))
        .to_owned()
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
    // The test's own client of Placement (found through the catalog), as Nova's.
    let placement = accel_conductor::placement::Placement::new(session("accel", "service"), None);
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
    let admin = session("admin", "admin")
        .token(false)
        .await
        .expect("admin token");
    let deployables = deployables_of(&admin, &base, "host1").await;
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
