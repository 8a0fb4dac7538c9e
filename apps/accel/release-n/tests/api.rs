//! Release N's REST API (the demo's step 1): accel-api's handlers over release N's
//! database, microversion 2.0 only, checked against what the database says.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use accel_release_n::{api, conductor};
use serde_json::{json, Value};
use support::*;
use verso_upgrade::ComponentVersion;

struct Http {
    base: String,
    client: reqwest::Client,
}

impl Http {
    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value, Option<String>) {
        let resp = req.send().await.expect("http");
        let status = resp.status().as_u16();
        let version = resp
            .headers()
            .get("openstack-api-version")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("json")
        };
        (status, body, version)
    }

    fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }
}

async fn release_n_api(url: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = memory();
    // The API does not create the schema: release N's conductor does.
    let err = api::start(url, "127.0.0.1:0")
        .await
        .expect_err("no schema yet");
    assert!(matches!(err, api::ApiStartError::NoSchema), "{err:?}");
    let running = conductor::start(url, t.clone()).await.expect("conductor");
    let agent = n_agent(dir.path(), 1, t.clone()).await;
    agent.report_now().await.expect("report");
    let served = api::start(url, "127.0.0.1:0").await.expect("api");
    let http = Http {
        base: served.url(),
        client: reqwest::Client::new(),
    };
    use reqwest::Method;

    let (status, root, _) = http.send(http.req(Method::GET, "/")).await;
    assert_eq!(status, 200);
    assert_eq!(root["default_version"]["max_version"], "2.0", "{root}");
    let (status, devices, version) = http
        .send(
            http.req(Method::GET, "/v2/devices?hostname=host1")
                .header("OpenStack-API-Version", "accelerator latest"),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(version.as_deref(), Some("accelerator 2.0"));
    let devices = devices["devices"].as_array().cloned().expect("devices");
    assert_eq!(devices.len() as u64, HOST1_DEVICES);
    assert!(
        devices.iter().all(|d| d.get("status").is_none()),
        "2.0 has no status"
    );
    let (status, refused, _) = http
        .send(
            http.req(Method::GET, "/v2/devices")
                .header("OpenStack-API-Version", "accelerator 2.1"),
        )
        .await;
    assert_eq!(status, 406, "{refused}");
    assert!(refused.to_string().contains("2.0 to 2.0"), "{refused}");
    let (status, ssds, _) = http
        .send(http.req(Method::GET, "/v2/deployables?hostname=host1&type=SSD"))
        .await;
    assert_eq!(status, 200, "{ssds}");
    assert_eq!(
        ssds["deployables"].as_array().map(Vec::len),
        Some(2),
        "{ssds}"
    );

    // Profiles and requests; a bind, as the demo's first step does.
    let (status, created, _) = http
        .send(
            http.req(Method::POST, "/v2/device_profiles")
                .json(&json!([{"name": "nic", "groups": [{"resources:NIC": "1"}]}])),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, created, _) = http
        .send(
            http.req(Method::POST, "/v2/accelerator_requests")
                .json(&json!({"device_profile_name": "nic"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let arq = created["arqs"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let ops = json!([
        {"path": "/hostname", "op": "add", "value": "host1"},
        {"path": "/device_rp_uuid", "op": "add", "value": "5b2c3f0e-0000-4000-8000-000000000001"},
        {"path": "/instance_uuid", "op": "add", "value": "6a3c2f4e-1b7d-4e8a-9c5f-0d2e4b6a8c11"},
    ]);
    let (status, body, _) = http
        .send(
            http.req(Method::PATCH, "/v2/accelerator_requests")
                .json(&json!({&arq: ops})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, got, _) = http
        .send(http.req(Method::GET, &format!("/v2/accelerator_requests/{arq}")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(got["state"], "Bound", "{got}");
    // The database agrees: one handle of the NIC is in use, bound to this request.
    let db = running.db();
    let row = db.arq(&arq).await.expect("arq");
    assert_eq!(row.state.as_str(), "Bound");
    let in_use: Vec<_> = db
        .attach_handles(Some("host1"))
        .await
        .expect("handles")
        .into_iter()
        .filter(|h| h.in_use)
        .collect();
    assert_eq!(in_use.len(), 1);
    assert_eq!(
        Some(in_use[0].uuid.as_str()),
        row.attach_handle_uuid.as_deref()
    );
    assert_eq!(got["attach_handle_uuid"], in_use[0].uuid.as_str());
    let (status, missing, _) = http
        .send(http.req(Method::GET, "/v2/devices?marker=nope"))
        .await;
    assert_eq!(status, 400, "{missing}");

    served.stop().await;
    agent.stop().await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_api_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    release_n_api(&sqlite_url(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_api_on_postgres() {
    release_n_api(&accel_conductor::testing::postgres_database().await).await;
}

/// Release N's API in the downgrade window: on a database release N+1 migrated and did
/// not finalize it starts and serves (list, bind, unbind); once N+1 finalized it refuses.
async fn release_n_api_in_the_downgrade_window(url: &str) {
    use reqwest::Method;
    let dir = tempfile::tempdir().expect("tempdir");
    let t = memory();
    let running = conductor::start(url, t.clone()).await.expect("release N");
    let agent = n_agent(dir.path(), 1, t.clone()).await;
    agent.report_now().await.expect("report");
    agent.stop().await;
    running.stop().await;
    let new = accel_conductor::Db::connect(url).await.expect("open");
    assert_eq!(
        new.migrate().await.expect("N+1 migrates"),
        vec![2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );

    let served = api::start(url, "127.0.0.1:0")
        .await
        .expect("release N's API starts on N+1's schema before finalization");
    let http = Http {
        base: served.url(),
        client: reqwest::Client::new(),
    };
    let (status, devices, version) = http
        .send(http.req(Method::GET, "/v2/devices?hostname=host1"))
        .await;
    assert_eq!(status, 200, "{devices}");
    assert_eq!(version.as_deref(), Some("accelerator 2.0"));
    assert_eq!(
        devices["devices"].as_array().map(Vec::len),
        Some(HOST1_DEVICES as usize)
    );
    let (status, created, _) = http
        .send(
            http.req(Method::POST, "/v2/device_profiles")
                .json(&json!([{"name": "nic", "groups": [{"resources:NIC": "1"}]}])),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, created, _) = http
        .send(
            http.req(Method::POST, "/v2/accelerator_requests")
                .json(&json!({"device_profile_name": "nic"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let arq = created["arqs"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let bind = json!([
        {"path": "/hostname", "op": "add", "value": "host1"},
        {"path": "/device_rp_uuid", "op": "add", "value": "5b2c3f0e-0000-4000-8000-000000000001"},
        {"path": "/instance_uuid", "op": "add", "value": "6a3c2f4e-1b7d-4e8a-9c5f-0d2e4b6a8c11"},
    ]);
    let (status, body, _) = http
        .send(
            http.req(Method::PATCH, "/v2/accelerator_requests")
                .json(&json!({&arq: bind})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    // N+1 reads the handle release N took: in use, its added columns at their defaults.
    let taken: Vec<_> = new
        .attach_handles(Some("host1"))
        .await
        .expect("N+1 reads the handles")
        .into_iter()
        .filter(|h| h.in_use)
        .collect();
    assert_eq!(taken.len(), 1);
    assert_eq!(new.arq(&arq).await.expect("arq").state.as_str(), "Bound");
    let (status, body, _) = http
        .send(
            http.req(Method::PATCH, "/v2/accelerator_requests")
                .json(&json!({&arq: [{"path": "/hostname", "op": "remove"}]})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, got, _) = http
        .send(http.req(Method::GET, &format!("/v2/accelerator_requests/{arq}")))
        .await;
    assert_eq!(status, 200);
    assert_eq!(got["state"], "Unbound", "{got}");
    assert!(new
        .attach_handles(Some("host1"))
        .await
        .expect("handles")
        .iter()
        .all(|h| !h.in_use));
    served.stop().await;

    let versions = verso_upgrade::VersionManager::<accel_objects::AccelVersion>::open(
        accel_conductor::DbVersionStore::new(new.clone(), accel_objects::AccelVersion::COMPONENT),
    )
    .await
    .expect("N+1 versions");
    versions.finalize().await.expect("N+1 finalizes");
    new.close().await;
    let err = api::start(url, "127.0.0.1:0")
        .await
        .expect_err("finalized by N+1");
    assert!(
        matches!(
            err,
            api::ApiStartError::Database(conductor::StartError::FinalizedByNewer {
                apparent: 2,
                software: 1,
                ..
            })
        ),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_api_in_the_downgrade_window_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    release_n_api_in_the_downgrade_window(&sqlite_url(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_n_api_in_the_downgrade_window_on_postgres() {
    release_n_api_in_the_downgrade_window(&accel_conductor::testing::postgres_database().await)
        .await;
}
