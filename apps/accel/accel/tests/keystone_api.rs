//! `accel api` behind the real test Keystone (`VERSO_TEST_KEYSTONE_URL`, from
//! `scripts/start-keystone.sh`), configured with the operator guide's own
//! `[keystone_authtoken]` block, and used by the real `openstack` command
//! (python-openstackclient with python-cyborgclient) with password authentication, as
//! an operator would.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use support::Killed;

fn keystone_url() -> String {
    std::env::var("VERSO_TEST_KEYSTONE_URL").unwrap_or_else(|_| {
        panic!(
            "this test needs the test Keystone: run scripts/start-keystone.sh (scripts/test.sh does) \
             and set VERSO_TEST_KEYSTONE_URL"
        )
    })
}

fn python() -> String {
    std::env::var("VERSO_TEST_PYTHON").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../../.venv/bin/python").to_owned()
    })
}

/// The first ```toml block after the operator guide's authentication heading.
fn guide_block() -> String {
    let guide = include_str!("../../../../docs/operator-guide.md");
    let section = guide
        .split("## Authentication, policy and projects")
        .nth(1)
        .expect("the operator guide has the authentication section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a toml block in it");
    block.to_owned()
}

/// The guide's block, pointed at the test Keystone with the test service user.
fn auth_config() -> String {
    let mut out = String::new();
    for line in guide_block().lines() {
        let key = line.split('=').next().unwrap_or("").trim();
        let line = match key {
            "auth_url" => format!("auth_url = \"{}\"", keystone_url()),
            "www_authenticate_uri" => format!("www_authenticate_uri = \"{}\"", keystone_url()),
            "password" => "password = \"verso-accel\"".to_owned(),
            _ => line.to_owned(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn accel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_accel"))
}

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
    let config = dir.path().join("accel.toml");
    // The all-in-one (conductor, API and an agent in one process, on the in-process
    // transport), authenticating as `accel api` does when the configuration says so.
    std::fs::write(
        &config,
        format!(
            "[database]\nurl = \"sqlite://{}\"\n\n[api]\nlisten = \"127.0.0.1:0\"\n{}",
            dir.path().join("accel.db").display(),
            // The guide's block starts with its own [api] table: merge the two.
            auth_config().replacen("[api]\n", "", 1)
        ),
    )
    .expect("write config");
    let config = config.display().to_string();
    let mut aio = Killed(
        accel()
            .args(["--config", &config, "all-in-one", "--agents", "1"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("all-in-one starts"),
    );
    let stdout = aio.0.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("the all-in-one says where the API listens")
            .expect("text");
        if let Some(url) = line.strip_prefix("api: listening on ") {
            break url.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});

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
