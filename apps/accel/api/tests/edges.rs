//! The API's edges over real HTTP on real databases: limits checked before any work,
//! paging, the profile lookup rule, input checks, outages as 503, server timeouts on
//! raw TCP connections, and TLS.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_api::{Limits, ServeOptions};
use accel_conductor::db::ReportedDevice;
use reqwest::Method;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::{assert_error, Api};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn device(cp: &str, device_type: &str) -> ReportedDevice {
    ReportedDevice {
        control_path_id: cp.to_owned(),
        device_type: device_type.to_owned(),
        vendor: "10ee".to_owned(),
        model: "5020".to_owned(),
        std_board_info: None,
        driver_name: None,
        handles: vec![("PCI".to_owned(), format!("{{\"address\": \"{cp}\"}}"))],
        ..Default::default()
    }
}

async fn post(api: &Api, path: &str, body: Value) -> (u16, Value) {
    api.send(api.request(Method::POST, path).json(&body)).await
}

fn bind_ops(host: &str, instance: &str) -> Value {
    json!([
        {"path": "/hostname", "op": "add", "value": host},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ])
}

async fn patch(api: &Api, body: Value) -> (u16, Value) {
    api.send(
        api.request(Method::PATCH, "/v2/accelerator_requests")
            .json(&body),
    )
    .await
}

fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_owned()
}

const INSTANCE: &str = "3f0c7a52-8d1e-4b6a-9e2f-5c4d3b2a1f00";

// ---- a profile whose name is another profile's UUID ---------------------------------

/// Profile A asks for an FPGA; profile B is named with A's UUID and asks for a GPU. Get,
/// delete and request creation by that text all reach A (the UUID), on every backend and
/// path; B is reached by its own UUID, and by its name once A is gone; a request made
/// from B binds B's GPU.
async fn confusing_profiles(api: &Api) {
    api.db
        .report(
            "h1",
            &[
                device("0000:3b:00.0", "FPGA"),
                device("0000:3c:00.0", "GPU"),
            ],
        )
        .await
        .expect("report");
    let (status, a) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "fpga", "groups": [{"resources:FPGA": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201, "{a}");
    let a_uuid = text(&a["uuid"]);
    let (status, b) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": a_uuid, "groups": [{"resources:PGPU": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["name"], a_uuid.as_str(), "the answer is the new profile");
    let b_uuid = text(&b["uuid"]);
    assert_ne!(b_uuid, a_uuid);

    // GET by the text: A.
    let (status, got) = api.get(&format!("/v2/device_profiles/{a_uuid}")).await;
    assert_eq!(status, 200);
    assert_eq!(got["device_profile"]["name"], "fpga", "{got}");
    // Its upper-case spelling is the same UUID.
    let (_, got) = api
        .get(&format!("/v2/device_profiles/{}", a_uuid.to_uppercase()))
        .await;
    assert_eq!(got["device_profile"]["name"], "fpga", "{got}");
    let (_, got) = api.get(&format!("/v2/device_profiles/{b_uuid}")).await;
    assert_eq!(got["device_profile"]["name"], a_uuid.as_str(), "{got}");

    // Request creation by the text: from A (an FPGA request).
    let (status, from_text) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": a_uuid}),
    )
    .await;
    assert_eq!(status, 201, "{from_text}");
    assert_eq!(from_text["arqs"][0]["device_profile_name"], "fpga");
    // From B by its UUID: B's name is recorded, and the bind takes B's GPU.
    let (status, from_b) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": b_uuid}),
    )
    .await;
    assert_eq!(status, 201, "{from_b}");
    let b_arq = text(&from_b["arqs"][0]["uuid"]);
    assert_eq!(from_b["arqs"][0]["device_profile_name"], a_uuid.as_str());
    let (status, body) = patch(api, json!({&b_arq: bind_ops("h1", INSTANCE)})).await;
    assert_eq!(status, 202, "{body}");
    let (_, bound) = api.get(&format!("/v2/accelerator_requests/{b_arq}")).await;
    assert_eq!(
        bound["attach_handle_info"]["address"], "0000:3c:00.0",
        "B's request binds the GPU: {bound}"
    );

    // DELETE by the text: A (once its request is gone); B stays.
    let a_arq = text(&from_text["arqs"][0]["uuid"]);
    let (status, _) = api
        .send(api.request(
            Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={a_arq}"),
        ))
        .await;
    assert_eq!(status, 204);
    let (status, body) = api
        .send(api.request(Method::DELETE, &format!("/v2/device_profiles/{a_uuid}")))
        .await;
    assert_eq!(status, 204, "{body}");
    assert_error(&api.get("/v2/device_profiles/fpga").await, 404, "NotFound");
    let (status, got) = api.get(&format!("/v2/device_profiles/{b_uuid}")).await;
    assert_eq!(status, 200, "B is still there");
    // With no profile of that UUID left, the text is B's name.
    let (_, got_by_name) = api.get(&format!("/v2/device_profiles/{a_uuid}")).await;
    assert_eq!(
        got_by_name["device_profile"]["uuid"],
        got["device_profile"]["uuid"]
    );
}

// ---- limits and paging ----------------------------------------------------------------

const SMALL: Limits = Limits {
    max_page_size: 3,
    max_groups_per_profile: 3,
    max_arqs_per_request: 2,
};

/// Too many groups, or too many requests from one POST: 400 before anything is created.
async fn work_limits(api: &Api) {
    let groups = |n: usize| vec![json!({"resources:FPGA": "1"}); n];
    let got = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "big", "groups": groups(4)}]),
    )
    .await;
    let message = assert_error(&got, 400, "BadRequest");
    assert!(message.contains("max_groups_per_profile"), "{message}");
    let (_, none) = api.get("/v2/device_profiles").await;
    assert_eq!(none["device_profiles"], json!([]));

    let (status, _) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "three", "groups": groups(3)}]),
    )
    .await;
    assert_eq!(status, 201);
    let got = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "three"}),
    )
    .await;
    let message = assert_error(&got, 400, "BadRequest");
    assert!(message.contains("max_arqs_per_request"), "{message}");
    let (_, none) = api.get("/v2/accelerator_requests").await;
    assert_eq!(none["arqs"], json!([]), "nothing was created");
    // One named group is one request: allowed.
    let (status, one) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "three", "device_profile_group_id": 2}),
    )
    .await;
    assert_eq!(status, 201, "{one}");
}

/// Every row of a list, page by page through `next`; returns the pages' sizes and the
/// rows' `key`s.
async fn pages(api: &Api, first: &str, collection: &str, key: &str) -> (Vec<usize>, Vec<String>) {
    let (mut sizes, mut keys) = (Vec::new(), Vec::new());
    let mut url = format!("{}{first}", api.base);
    loop {
        let (status, body) = api.send(api.request_url(Method::GET, &url)).await;
        assert_eq!(status, 200, "{url}: {body}");
        let rows = body[collection].as_array().cloned().unwrap_or_default();
        sizes.push(rows.len());
        keys.extend(rows.iter().map(|r| text(&r[key])));
        match body.get("next") {
            Some(next) => url = text(next),
            None => return (sizes, keys),
        }
        assert!(sizes.len() < 20, "paging does not end");
    }
}

async fn paging(api: &Api) {
    for name in ["e", "b", "d", "a", "c"] {
        let (status, _) = post(
            api,
            "/v2/device_profiles",
            json!([{"name": name, "groups": [{"resources:FPGA": "1"}]}]),
        )
        .await;
        assert_eq!(status, 201);
    }
    let (sizes, names) = pages(api, "/v2/device_profiles", "device_profiles", "name").await;
    assert_eq!(sizes, [3, 2]);
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    let (sizes, _) = pages(
        api,
        "/v2/device_profiles?limit=2",
        "device_profiles",
        "name",
    )
    .await;
    assert_eq!(sizes, [2, 2, 1]);

    let mut created = Vec::new();
    for _ in 0..7 {
        let (status, body) = post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": "a"}),
        )
        .await;
        assert_eq!(status, 201);
        created.push(text(&body["arqs"][0]["uuid"]));
    }
    let (sizes, uuids) = pages(api, "/v2/accelerator_requests", "arqs", "uuid").await;
    assert_eq!(sizes, [3, 3, 1]);
    assert_eq!(uuids, created, "oldest first, each once");
    // A filter is kept across pages (no request is bound to this instance).
    let (sizes, _) = pages(
        api,
        &format!("/v2/accelerator_requests?instance={INSTANCE}"),
        "arqs",
        "uuid",
    )
    .await;
    assert_eq!(sizes, [0]);

    // Over the maximum, not a number, or a marker that names nothing: 400.
    for q in [
        "/v2/device_profiles?limit=4",
        "/v2/accelerator_requests?limit=0",
        "/v2/devices?limit=x",
        "/v2/device_profiles?marker=00000000-0000-4000-8000-000000000000",
        "/v2/accelerator_requests?marker=nope",
    ] {
        assert_error(&api.get(q).await, 400, "BadRequest");
    }
}

// ---- input checks ---------------------------------------------------------------------

async fn input_checks(api: &Api) {
    api.db
        .report("h1", &[device("0000:3b:00.0", "FPGA")])
        .await
        .expect("report");
    let (status, _) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "fpga", "groups": [{"resources:FPGA": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201);
    let (_, created) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "fpga"}),
    )
    .await;
    let arq = text(&created["arqs"][0]["uuid"]);

    let long = |n: usize| "x".repeat(n);
    let one_mb = long(1024 * 1024);
    // Each refusal is a 400 whose message does not repeat the text.
    let refused = [
        patch(api, json!({&arq: bind_ops("h1", "not-a-uuid")})).await,
        patch(api, json!({&arq: bind_ops("h1", &long(3000))})).await,
        patch(api, json!({&arq: bind_ops(&one_mb, INSTANCE)})).await,
        api.get("/v2/accelerator_requests?instance=not-a-uuid").await,
        api.send(api.request(Method::DELETE, "/v2/accelerator_requests?instance=not-a-uuid"))
            .await,
        post(
            api,
            "/v2/device_profiles",
            json!([{"name": long(256), "groups": [{"resources:FPGA": "1"}]}]),
        )
        .await,
        post(
            api,
            "/v2/device_profiles",
            json!([{"name": "d", "description": long(5000), "groups": [{"resources:FPGA": "1"}]}]),
        )
        .await,
        post(
            api,
            "/v2/device_profiles",
            json!([{"name": "g", "groups": [{"resources:FPGA": "1", format!("trait:{}", long(300)): "required"}]}]),
        )
        .await,
        post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": long(4000)}),
        )
        .await,
        api.send(
            api.request(Method::POST, "/v2/accelerator_requests")
                .header("X-Project-Id", long(300))
                .json(&json!({"device_profile_name": "fpga"})),
        )
        .await,
        api.send(api.request(
            Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={arq},{}", long(300)),
        ))
        .await,
        api.get(&format!("/v2/devices/{}", long(3000))).await,
        api.get(&format!("/v2/devices?hostname={}", long(3000))).await,
    ];
    for got in &refused {
        let message = assert_error(got, 400, "BadRequest");
        assert!(
            message.len() < 300,
            "the text is not echoed: {} bytes",
            message.len()
        );
    }
    // Nothing was bound or created by them.
    let (_, still) = api.get(&format!("/v2/accelerator_requests/{arq}")).await;
    assert_eq!(still["state"], "Initial");
    let (_, arqs) = api.get("/v2/accelerator_requests").await;
    assert_eq!(arqs["arqs"].as_array().map(Vec::len), Some(1));
    // A list of many UUIDs is longer than one text may be, each item is not: taken
    // (404: none of them exists).
    let many: Vec<String> = (0..20)
        .map(|i| format!("00000000-0000-4000-8000-{i:012}"))
        .collect();
    let got = api
        .send(api.request(
            Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={}", many.join(",")),
        ))
        .await;
    assert_error(&got, 404, "NotFound");
    // 255 bytes is fine; a UUID instance binds.
    let (status, body) = patch(api, json!({&arq: bind_ops("h1", INSTANCE)})).await;
    assert_eq!(status, 202, "{body}");
    let (status, _) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": long(255), "groups": [{"resources:FPGA": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201);
}

macro_rules! on_each {
    ($($name:ident: $limits:expr),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (db, _dir) = crate::support::sqlite().await;
                    let api = crate::Api::start_with(db, $limits, accel_api::ServeOptions::default()).await;
                    crate::$name(&api).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = crate::support::postgres().await;
                    let api = crate::Api::start_with(db, $limits, accel_api::ServeOptions::default()).await;
                    crate::$name(&api).await;
                }
            )*
        }
        mod through_conductor {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = crate::support::postgres().await;
                    let api = crate::Api::start_through_conductor_with(db, $limits).await;
                    crate::$name(&api).await;
                }
            )*
        }
    };
}

on_each!(
    confusing_profiles: accel_api::Limits::default(),
    work_limits: crate::SMALL,
    paging: crate::SMALL,
    input_checks: accel_api::Limits::default(),
);

// ---- outages --------------------------------------------------------------------------

/// Drops the database under a running API (closing its connections): every answer is
/// then 503, reads and writes, directly and through the conductor.
async fn outage(through_conductor: bool) {
    let url = accel_conductor::testing::postgres_database().await;
    let db = accel_conductor::Db::connect(&url).await.expect("connect");
    accel_conductor::testing::make_schema(&db).await;
    let api = if through_conductor {
        Api::start_through_conductor(db).await
    } else {
        Api::start(db).await
    };
    let (status, _) = post(
        &api,
        "/v2/device_profiles",
        json!([{"name": "fpga", "groups": [{"resources:FPGA": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201);

    let admin = accel_conductor::Db::connect(&accel_conductor::testing::postgres_url())
        .await
        .expect("admin");
    let name = url.rsplit('/').next().unwrap_or_default();
    // FORCE ends the API's connections; it is refused while an autovacuum worker (a
    // superuser's backend) happens to be in the new database, so try again until the
    // worker is done.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(admin.pool())
            .await
        {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("drop the database, again: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("drop the database: {e}"),
        }
    }
    admin.close().await;

    let started = Instant::now();
    for got in [
        api.get("/v2/devices").await,
        api.get("/v2/device_profiles/fpga").await,
        api.get("/v2/accelerator_requests").await,
    ] {
        let message = assert_error(&got, 503, "ServiceUnavailable");
        assert!(message.contains("retry"), "{message}");
    }
    // A write cannot tell a database that went away before it from one that went away
    // after its commit, so its outcome is unknown, through the conductor or not. Creating
    // requests first reads the profile (to count the requests it makes), and that read
    // failing means nothing was done: a plain 503.
    let arq_kind = "ServiceUnavailable";
    for (got, kind) in [
        (
            post(
                &api,
                "/v2/device_profiles",
                json!([{"name": "gpu", "groups": [{"resources:PGPU": "1"}]}]),
            )
            .await,
            "OutcomeUnknown",
        ),
        (
            post(
                &api,
                "/v2/accelerator_requests",
                json!({"device_profile_name": "fpga", "device_profile_group_id": 0}),
            )
            .await,
            arq_kind,
        ),
    ] {
        let message = assert_error(&got, 503, kind);
        assert!(message.contains("retry"), "{message}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "an outage is told at once, not after the pool's wait: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn postgres_outage_is_503() {
    outage(false).await;
}

#[tokio::test]
async fn postgres_outage_through_the_conductor_is_503() {
    outage(true).await;
}

// ---- server timeouts ------------------------------------------------------------------

const BOUND: Duration = Duration::from_secs(1);
/// The request timeout: longer than the body's, so a stalled body meets its own first.
const REQUEST: Duration = Duration::from_secs(2);
/// What the tests allow beyond a bound before calling a connection left open.
const SLACK: Duration = Duration::from_secs(3);

fn timeouts() -> ServeOptions {
    ServeOptions {
        header_read_timeout: BOUND,
        body_read_timeout: BOUND,
        request_timeout: REQUEST,
        ..ServeOptions::default()
    }
}

/// Reads until the server closes the connection; what it sent, and how long that took.
/// Fails if it is still open after `limit`.
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the connection is still open after {limit:?}; received {:?}",
        String::from_utf8_lossy(&got)
    );
    (
        String::from_utf8_lossy(&got).into_owned(),
        started.elapsed(),
    )
}

async fn api_with_timeouts() -> (Api, tempfile::TempDir) {
    let (db, dir) = support::sqlite().await;
    (
        Api::start_with(db, Limits::default(), timeouts()).await,
        dir,
    )
}

#[tokio::test]
async fn half_sent_headers_are_closed() {
    let (api, _dir) = api_with_timeouts().await;
    let mut stream = TcpStream::connect(api.addr).await.expect("connect");
    stream
        .write_all(b"GET /v2 HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .expect("write");
    let (_, took) = until_closed(&mut stream, BOUND + SLACK).await;
    assert!(took >= BOUND - Duration::from_millis(100), "{took:?}");
}

#[tokio::test]
async fn silent_connections_are_closed() {
    let (api, _dir) = api_with_timeouts().await;
    let mut stream = TcpStream::connect(api.addr).await.expect("connect");
    until_closed(&mut stream, BOUND + SLACK).await;
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let (api, _dir) = api_with_timeouts().await;
    let mut stream = TcpStream::connect(api.addr).await.expect("connect");
    stream
        .write_all(b"GET /v2 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut stream, BOUND + SLACK).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn stalled_bodies_are_closed() {
    let (api, _dir) = api_with_timeouts().await;
    let mut stream = TcpStream::connect(api.addr).await.expect("connect");
    stream
        .write_all(
            b"POST /v2/device_profiles HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[{\"name\":",
        )
        .await
        .expect("write");
    let (answer, _) = until_closed(&mut stream, BOUND + SLACK).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("RequestTimeout"), "{answer}");
}

/// A request that waits on the database (SQLite's write lock, held by another
/// transaction) is answered 503 at the request timeout.
#[tokio::test]
async fn slow_requests_get_503_at_the_request_timeout() {
    let (api, _dir) = api_with_timeouts().await;
    let (status, _) = post(
        &api,
        "/v2/device_profiles",
        json!([{"name": "fpga", "groups": [{"resources:FPGA": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201);
    let mut lock = api.db.pool().begin().await.expect("begin");
    sqlx::query("UPDATE device_profiles SET description = 'locked'")
        .execute(&mut *lock)
        .await
        .expect("take the write lock");
    let started = Instant::now();
    let got = post(
        &api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "fpga"}),
    )
    .await;
    let message = assert_error(&got, 503, "OutcomeUnknown");
    assert!(message.contains("outcome is unknown"), "{message}");
    let took = started.elapsed();
    assert!(
        took >= REQUEST - Duration::from_millis(100) && took < REQUEST + SLACK,
        "{took:?}"
    );
    lock.rollback().await.expect("rollback");
}

// ---- TLS ------------------------------------------------------------------------------

#[tokio::test]
async fn the_api_speaks_https_with_a_configured_certificate() {
    let dir = support::tls_dir();
    let tls = accel_api::server::tls_config(&dir.join("server.pem"), &dir.join("server-key.pem"))
        .expect("the test certificate and key");
    let (db, _dir) = support::sqlite().await;
    let api = Api::start_with(
        db,
        Limits::default(),
        ServeOptions {
            tls: Some(tls),
            ..ServeOptions::default()
        },
    )
    .await;
    assert!(api.base.starts_with("https://"));
    let (status, body) = api.get("/v2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"]["id"], "v2.0");
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::Client::new()
        .get(format!("http://{}/v2", api.addr))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    // Missing or mismatched files are typed errors naming the option.
    let missing = accel_api::server::tls_config(&dir.join("nope.pem"), &dir.join("server-key.pem"))
        .expect_err("missing");
    assert!(missing.to_string().contains("tls_cert_file"), "{missing}");
    let mismatched =
        accel_api::server::tls_config(&dir.join("server.pem"), &dir.join("client-key.pem"));
    // rustls refuses a key that is not the certificate's.
    assert!(
        matches!(mismatched, Err(accel_api::server::TlsError::Config(_))),
        "{mismatched:?}"
    );
}
