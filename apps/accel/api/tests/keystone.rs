//! The API behind a real Keystone (the PyPI `keystone` package that
//! `scripts/start-keystone.sh` serves; `VERSO_TEST_KEYSTONE_URL`): tokens validated and
//! cached, Cyborg's policy per role, project isolation of accelerator requests, service
//! tokens, and Keystone outages as 503.
//!
//! The users are the ones the start script creates: `accel` (the API's service user),
//! `demo-member`, `demo-reader` (project `demo`), `other-member` (project `other`),
//! `nova` (role `service` in project `service`) and `admin`.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_api::{AuthStrategy, Authenticator, KeystoneOptions, Policy};
use reqwest::Method;
use serde_json::{json, Value};
use std::time::Duration;
use support::{assert_error, device, Api};

/// Keystone's v3 URL.
fn keystone_url() -> String {
    std::env::var("VERSO_TEST_KEYSTONE_URL").unwrap_or_else(|_| {
        panic!(
            "the Keystone tests need a Keystone: run scripts/start-keystone.sh (scripts/test.sh does) \
             and set VERSO_TEST_KEYSTONE_URL to the URL it prints"
        )
    })
}

/// A token of `user` (password `verso-<user>`, admin's `verso-admin`) scoped to
/// `project`, and the project's id.
async fn token(user: &str, project: &str) -> (String, String) {
    let body = json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": user, "domain": {"name": "Default"}, "password": format!("verso-{user}"),
        }}},
        "scope": {"project": {"name": project, "domain": {"name": "Default"}}},
    }});
    let url = format!("{}/auth/tokens", keystone_url().trim_end_matches('/'));
    let response = reqwest::Client::new()
        .post(&url)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("Keystone at {url}: {e}"));
    assert_eq!(response.status().as_u16(), 201, "token of {user}");
    let token = response
        .headers()
        .get("x-subject-token")
        .and_then(|v| v.to_str().ok())
        .expect("X-Subject-Token")
        .to_owned();
    let body: Value = response.json().await.expect("token body");
    let project_id = body["token"]["project"]["id"]
        .as_str()
        .expect("project id")
        .to_owned();
    (token, project_id)
}

/// Revokes `token` (as admin).
async fn revoke(token: &str) {
    let (admin, _) = self::token("admin", "admin").await;
    let response = reqwest::Client::new()
        .delete(format!(
            "{}/auth/tokens",
            keystone_url().trim_end_matches('/')
        ))
        .header("X-Auth-Token", admin)
        .header("X-Subject-Token", token)
        .send()
        .await
        .expect("revoke");
    assert_eq!(response.status().as_u16(), 204, "revoked");
}

/// The API's service user, with a cache of `cache` seconds.
fn options(cache: u64) -> KeystoneOptions {
    let mut o = KeystoneOptions::new(&keystone_url(), "accel", "verso-accel", "service");
    o.token_cache_time = Duration::from_secs(cache);
    o.auth.max_retries = 0;
    o
}

async fn api_with(options: KeystoneOptions) -> (Api, tempfile::TempDir) {
    let (db, dir) = support::sqlite().await;
    let auth = Authenticator::new(AuthStrategy::Keystone(Box::new(options)), Policy::default())
        .expect("authenticator");
    (Api::start_authenticated(db, auth).await, dir)
}

/// A request with a token (and optionally a service token).
fn with_token(
    api: &Api,
    method: Method,
    path: &str,
    token: &str,
    service: Option<&str>,
) -> reqwest::RequestBuilder {
    let r = api.request(method, path).header("X-Auth-Token", token);
    match service {
        Some(s) => r.header("X-Service-Token", s),
        None => r,
    }
}

const INSTANCE: &str = "8c8d1c3a-5a4e-4a0e-9a55-3a1f0e6c2b11";

#[tokio::test]
async fn tokens_roles_and_projects() {
    let (api, _dir) = api_with(options(300)).await;
    api.db
        .report("h1", &[device("0000:3b:00.0", "GPU", 1)])
        .await
        .expect("report");
    let (admin, _) = token("admin", "admin").await;
    let (member, demo) = token("demo-member", "demo").await;
    let (reader, _) = token("demo-reader", "demo").await;
    let (other, other_project) = token("other-member", "other").await;
    let (nova, _) = token("nova", "service").await;

    // Version discovery is public; everything else needs a token Keystone knows.
    for path in ["/", "/v2"] {
        let (status, _) = api.send(api.request(Method::GET, path)).await;
        assert_eq!(status, 200, "{path}");
    }
    let response = api
        .request(Method::GET, "/v2/device_profiles")
        .send()
        .await
        .expect("send");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let got = support::read(response).await;
    assert_error(&got, 401, "Unauthorized");
    assert!(
        challenge
            .as_deref()
            .is_some_and(|c| c.starts_with("Keystone uri=")),
        "{challenge:?}"
    );
    let got = api
        .send(with_token(
            &api,
            Method::GET,
            "/v2/device_profiles",
            "not-a-token",
            None,
        ))
        .await;
    assert_error(&got, 401, "Unauthorized");

    // Cyborg's rules: profiles are created by admins only, read by project readers;
    // devices are an admin's (or a project manager's) to read.
    let profile = json!({"name": "gpu", "groups": [{"resources:GPU": "1"}]});
    for t in [&member, &reader] {
        let got = api
            .send(with_token(&api, Method::POST, "/v2/device_profiles", t, None).json(&profile))
            .await;
        let message = assert_error(&got, 403, "Forbidden");
        assert!(
            message.contains("cyborg:device_profile:create"),
            "{message}"
        );
    }
    let (status, _) = api
        .send(with_token(&api, Method::POST, "/v2/device_profiles", &admin, None).json(&profile))
        .await;
    assert_eq!(status, 201);
    let (status, body) = api
        .send(with_token(
            &api,
            Method::GET,
            "/v2/device_profiles?name=gpu",
            &reader,
            None,
        ))
        .await;
    assert_eq!(
        (status, body["device_profiles"].as_array().map(Vec::len)),
        (200, Some(1))
    );
    let got = api
        .send(with_token(&api, Method::GET, "/v2/devices", &member, None))
        .await;
    assert_error(&got, 403, "Forbidden");
    let (status, body) = api
        .send(with_token(&api, Method::GET, "/v2/devices", &admin, None))
        .await;
    assert_eq!(
        (status, body["devices"].as_array().map(Vec::len)),
        (200, Some(1))
    );

    // A member creates requests in its token's project; the header a client sends
    // about itself is ignored. A reader may not create.
    let create = json!({"device_profile_name": "gpu"});
    let got = api
        .send(
            with_token(
                &api,
                Method::POST,
                "/v2/accelerator_requests",
                &reader,
                None,
            )
            .json(&create),
        )
        .await;
    assert_error(&got, 403, "Forbidden");
    let (status, body) = api
        .send(
            with_token(
                &api,
                Method::POST,
                "/v2/accelerator_requests",
                &member,
                None,
            )
            .header("X-Project-Id", &other_project)
            .json(&create),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let arq = body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(body["arqs"][0]["project_id"], demo.as_str());

    // Another project's member neither sees nor deletes it: 404 as if absent.
    let (status, body) = api
        .send(with_token(
            &api,
            Method::GET,
            "/v2/accelerator_requests",
            &other,
            None,
        ))
        .await;
    assert_eq!(
        (status, body["arqs"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    let one = format!("/v2/accelerator_requests/{arq}");
    let got = api
        .send(with_token(&api, Method::GET, &one, &other, None))
        .await;
    assert_error(&got, 404, "NotFound");
    let bind = json!({arq.clone(): [
        {"path": "/hostname", "op": "add", "value": "h1"},
        {"path": "/instance_uuid", "op": "add", "value": INSTANCE},
    ]});
    let patch = |token: &str, service: Option<&str>| {
        with_token(
            &api,
            Method::PATCH,
            "/v2/accelerator_requests",
            token,
            service,
        )
        .json(&bind)
    };
    // As Cyborg 17, binding is Nova's on a user's behalf: without a service token it is
    // refused before anything else is looked at; with Nova's, another project's request
    // is still not there.
    let got = api.send(patch(&other, None)).await;
    let message = assert_error(&got, 403, "Forbidden");
    assert!(message.contains("requires a service token"), "{message}");
    let got = api.send(patch(&other, Some(&nova))).await;
    assert_error(&got, 404, "NotFound");
    let got = api
        .send(with_token(
            &api,
            Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={arq}"),
            &other,
            None,
        ))
        .await;
    assert_error(&got, 404, "NotFound");
    let (status, body) = api
        .send(with_token(&api, Method::GET, &one, &reader, None))
        .await;
    assert_eq!((status, body["state"].as_str()), (200, Some("Initial")));

    // Neither the owner's token nor Nova's alone (a user token, whatever its roles)
    // binds; the owner's with Nova's as the service token does, as Nova sends them.
    for alone in [&member, &nova] {
        let got = api.send(patch(alone, None)).await;
        assert_error(&got, 403, "Forbidden");
    }
    // Naming the project (microversion 2.1) is an administrator's: Nova acting for a
    // member may not.
    let with_project = json!({arq.clone(): [
        {"path": "/hostname", "op": "add", "value": "h1"},
        {"path": "/instance_uuid", "op": "add", "value": INSTANCE},
        {"path": "/project_id", "op": "add", "value": other_project},
    ]});
    let got = api
        .send(
            with_token(
                &api,
                Method::PATCH,
                "/v2/accelerator_requests",
                &member,
                Some(&nova),
            )
            .header("OpenStack-API-Version", "accelerator 2.1")
            .json(&with_project),
        )
        .await;
    let message = assert_error(&got, 403, "Forbidden");
    assert!(message.contains("cyborg:arq:update"), "{message}");
    let (status, body) = api.send(patch(&member, Some(&nova))).await;
    assert_eq!(status, 202, "{body}");
    let (status, body) = api
        .send(with_token(
            &api,
            Method::GET,
            &format!("/v2/accelerator_requests?instance={INSTANCE}&bind_state=resolved"),
            &member,
            None,
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["arqs"][0]["state"], "Bound");
    assert_eq!(
        body["arqs"][0]["project_id"],
        demo.as_str(),
        "the binding caller's"
    );

    // A bound request is Nova's to delete: the owner's delete by UUID is refused.
    let got = api
        .send(with_token(
            &api,
            Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={arq}"),
            &member,
            None,
        ))
        .await;
    let message = assert_error(&got, 403, "Forbidden");
    assert!(
        message.contains(&format!("is bound to instance {INSTANCE}")),
        "{message}"
    );

    // Deleting by instance needs Nova's token too; Nova acting for another project's
    // member leaves the request; for its own project's member, deletes it.
    let by_instance = format!("/v2/accelerator_requests?instance={INSTANCE}");
    let delete = |token: &str, service: Option<&str>| {
        with_token(&api, Method::DELETE, &by_instance, token, service)
    };
    let got = api.send(delete(&member, None)).await;
    assert_error(&got, 403, "Forbidden");
    let (status, _) = api.send(delete(&other, Some(&nova))).await;
    assert_eq!(status, 204);
    let (status, _) = api
        .send(with_token(&api, Method::GET, &one, &member, None))
        .await;
    assert_eq!(status, 200, "still there");
    let (status, _) = api.send(delete(&member, Some(&nova))).await;
    assert_eq!(status, 204);
    let got = api
        .send(with_token(&api, Method::GET, &one, &member, None))
        .await;
    assert_error(&got, 404, "NotFound");
}

#[tokio::test]
async fn validations_are_cached_until_the_cache_time() {
    let (api, _dir) = api_with(options(2)).await;
    let (member, _) = token("demo-member", "demo").await;
    let path = "/v2/device_profiles";
    let (status, _) = api
        .send(with_token(&api, Method::GET, path, &member, None))
        .await;
    assert_eq!(status, 200);
    revoke(&member).await;
    // Kept: the next call does not ask Keystone.
    let (status, _) = api
        .send(with_token(&api, Method::GET, path, &member, None))
        .await;
    assert_eq!(status, 200, "the cached validation is used");
    // Then asked again, and refused.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _) = api
            .send(with_token(&api, Method::GET, path, &member, None))
            .await;
        if status == 401 {
            break;
        }
        assert_eq!(status, 200);
        assert!(
            tokio::time::Instant::now() < deadline,
            "a revoked token was still accepted 20 s on with a 2 s cache"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn service_tokens() {
    let mut o = options(300);
    o.service_token_roles_required = true;
    let (api, _dir) = api_with(o).await;
    let (member, _) = token("demo-member", "demo").await;
    let (nova, _) = token("nova", "service").await;
    let path = "/v2/accelerator_requests";
    // A valid service token with the service role rides along.
    let (status, _) = api
        .send(with_token(&api, Method::GET, path, &member, Some(&nova)))
        .await;
    assert_eq!(status, 200);
    // An invalid one is refused, and so is one without the role when it is required.
    let got = api
        .send(with_token(&api, Method::GET, path, &member, Some("bogus")))
        .await;
    assert_error(&got, 401, "Unauthorized");
    let got = api
        .send(with_token(&api, Method::GET, path, &member, Some(&member)))
        .await;
    let message = assert_error(&got, 401, "Unauthorized");
    assert!(message.contains("service_token_roles"), "{message}");
}

#[tokio::test]
async fn keystone_out_of_reach_is_503() {
    // Nothing listens on port 9 of loopback.
    let mut unreachable = options(300);
    unreachable.auth.auth_url = "http://127.0.0.1:9/v3".into();
    let (api, _dir) = api_with(unreachable).await;
    let got = api
        .send(with_token(
            &api,
            Method::GET,
            "/v2/device_profiles",
            "any",
            None,
        ))
        .await;
    assert_error(&got, 503, "ServiceUnavailable");
    // The service user refused: also 503 (the API's configuration, not the caller's
    // token, is wrong), and the log says so.
    let mut wrong = options(300);
    wrong.auth.password = "not-the-password".into();
    let (api, _dir) = api_with(wrong).await;
    let (member, _) = token("demo-member", "demo").await;
    let got = api
        .send(with_token(
            &api,
            Method::GET,
            "/v2/device_profiles",
            &member,
            None,
        ))
        .await;
    let message = assert_error(&got, 503, "ServiceUnavailable");
    assert!(message.contains("keystone_authtoken"), "{message}");
}
