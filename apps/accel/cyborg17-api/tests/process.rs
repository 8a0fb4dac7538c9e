//! `accel-cyborg17-api` as a deployment runs it, with Cyborg's own `[keystone_authtoken]`
//! (the real Keystone): a caller with a token from Keystone is served, one without is
//! told where to get one (401 with `WWW-Authenticate`), one with a made-up token is
//! refused; version discovery needs none. A database that is not at Cyborg 17's
//! revision is refused before anything is served (exit status 2), and an empty one too:
//! making the schema is the conductor's.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_KEYSTONE_URL` and `VERSO_TEST_PLACEMENT_URL`
//! (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::testing::cyborg_conductor_config;
use accel_cyborg17_conductor::db::Store;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{env, free_port, session, spawn, wait_for};
use tokio::process::Command;

#[path = "../../cyborg17-conductor/tests/support/mod.rs"]
mod support;

fn write_config(dir: &Path, database: &Path, port: u16) -> PathBuf {
    let keystone = env("VERSO_TEST_KEYSTONE_URL");
    let base = cyborg_conductor_config(
        "cyborg17-api-process",
        database,
        &keystone,
        "accel",
        "verso-accel",
        &dir.join("cyborg.log"),
    );
    let conf = dir.join("cyborg.conf");
    std::fs::write(
        &conf,
        format!(
            "{base}endpoint_override = {placement}\n\n\
             [api]\nhost_ip = 127.0.0.1\nport = {port}\n\n\
             [keystone_authtoken]\nauth_type = password\nauth_url = {keystone}\n\
             username = accel\npassword = verso-accel\nproject_name = service\n\
             user_domain_name = Default\nproject_domain_name = Default\n\
             www_authenticate_uri = {keystone}\n",
            placement = env("VERSO_TEST_PLACEMENT_URL"),
        ),
    )
    .expect("write cyborg.conf");
    conf
}

/// The binary on `conf` until it exits (it must, within 30 s): its status and output.
async fn refused(conf: &Path) -> (Option<i32>, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(env!("CARGO_BIN_EXE_accel-cyborg17-api"))
            .arg("--config-file")
            .arg(conf)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("it exits")
    .expect("it runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystone_tokens_are_checked_and_only_cyborgs_schema_is_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let database = dir.path().join("cyborg.sqlite");
    let port = free_port();
    let conf = write_config(dir.path(), &database, port);

    // An empty database: refused, left empty.
    std::fs::File::create(&database).expect("an empty file");
    let (code, err) = refused(&conf).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("alembic revision none"), "{err}");
    assert!(
        err.contains("Cyborg 17's conductor makes the schema"),
        "{err}"
    );

    // Cyborg 17's schema (as its conductor makes it): served.
    let store = Store::connect(&format!("sqlite://{}", database.display()))
        .await
        .expect("the database");
    assert!(store.sync().await.expect("Cyborg's schema"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_accel-cyborg17-api"));
    cmd.arg("--config-file").arg(&conf).env("RUST_LOG", "warn");
    let (_api, mut out) = spawn(cmd);
    wait_for(&mut out, "serving Cyborg's v2 API", "accel-cyborg17-api").await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();

    let discovery = http.get(format!("{base}/")).send().await.expect("answers");
    assert_eq!(discovery.status().as_u16(), 200);
    let anonymous = http
        .get(format!("{base}/v2/devices"))
        .send()
        .await
        .expect("answers");
    assert_eq!(anonymous.status().as_u16(), 401);
    let challenge = anonymous
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(challenge.starts_with("Keystone uri="), "{challenge}");
    let forged = http
        .get(format!("{base}/v2/devices"))
        .header("X-Auth-Token", "gAAAAAnot-a-token")
        .send()
        .await
        .expect("answers");
    assert_eq!(forged.status().as_u16(), 401);
    let token = session().token(false).await.expect("a token");
    let listed = http
        .get(format!("{base}/v2/devices"))
        .header("X-Auth-Token", &token)
        .send()
        .await
        .expect("answers");
    assert_eq!(listed.status().as_u16(), 200);
    let body: serde_json::Value = listed.json().await.expect("JSON");
    assert_eq!(body, serde_json::json!({"devices": []}));

    // A database at another revision: refused, named.
    sqlx::query("UPDATE alembic_version SET version_num = 'c1b2a3d4e5f6'")
        .execute(store.pool())
        .await
        .expect("restamp");
    let other = write_config(dir.path(), &database, free_port());
    let (code, err) = refused(&other).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("alembic revision c1b2a3d4e5f6"), "{err}");
}
