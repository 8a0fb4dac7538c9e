//! The accel API over real HTTP (an ephemeral loopback port, reqwest with rustls) on a
//! fresh SQLite file and a fresh PostgreSQL database per test. One test binary in two
//! files (`cyborg_forms.rs`: Cyborg's own forms and `/v2/attributes`), since each binary
//! links the whole service.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

mod cyborg_forms;
#[path = "../support/mod.rs"]
mod support;

use cyborg_forms::{attributes, cyborg_forms};

use reqwest::Method;
use serde_json::{json, Value};
use support::{assert_error, device, Api};

const HEADER: &str = "OpenStack-API-Version";

/// h1: an FPGA with one handle, two GPUs; h2: a GPU and a QAT.
async fn seed(api: &Api) {
    api.db
        .report(
            "h1",
            &[
                device("0000:3b:00.0", "FPGA", 1),
                device("0000:3c:00.0", "GPU", 1),
                device("0000:3d:00.0", "GPU", 1),
            ],
        )
        .await
        .expect("report h1");
    api.db
        .report(
            "h2",
            &[
                device("0000:5e:00.0", "GPU", 1),
                device("0000:5f:00.0", "QAT", 1),
            ],
        )
        .await
        .expect("report h2");
}

fn uuids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|x| x["uuid"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

async fn versions(api: &Api) {
    let response = api.request(Method::GET, "/").send().await.expect("GET /");
    assert_eq!(header(&response, HEADER), "accelerator 2.0");
    assert!(header(&response, "Vary").contains("OpenStack-API-Version"));
    let (status, body) = support::read(response).await;
    assert_eq!(status, 200);
    let v2 = &body["versions"][0];
    assert_eq!(
        (
            v2["id"].as_str(),
            v2["min_version"].as_str(),
            v2["max_version"].as_str(),
            v2["status"].as_str()
        ),
        (Some("v2"), Some("2.0"), Some("2.3"), Some("CURRENT"))
    );
    assert_eq!(body["default_version"], *v2);
    let (status, body) = api.get("/v2").await;
    assert_eq!(status, 200);
    assert_eq!(body["version"]["max_version"], "2.3");
    assert_eq!(body["version"]["min_version"], "2.0");
}

async fn microversions(api: &Api) {
    seed(api).await;
    let at = |v: &str| {
        api.request(Method::GET, "/v2/devices")
            .header(HEADER, v)
            .send()
    };
    // No header: 2.0, without the device status.
    let response = api
        .request(Method::GET, "/v2/devices")
        .send()
        .await
        .expect("send");
    assert_eq!(header(&response, HEADER), "accelerator 2.0");
    let (_, body) = support::read(response).await;
    assert!(body["devices"][0].get("status").is_none(), "{body}");
    assert!(body["devices"][0]["uuid"].is_string());
    // 2.1 and 2.2 (Cyborg's ARQ project and profile by name) are served, without it.
    for v in ["2.1", "2.2"] {
        let response = at(&format!("accelerator {v}")).await.expect("send");
        assert_eq!(header(&response, HEADER), format!("accelerator {v}"));
        let (_, body) = support::read(response).await;
        assert!(body["devices"][0].get("status").is_none(), "{v}: {body}");
    }
    // 2.3 adds it: Cyborg's `status`, and accel's `inventory_status`.
    let response = at("accelerator 2.3").await.expect("send");
    assert_eq!(header(&response, HEADER), "accelerator 2.3");
    assert!(header(&response, "Vary").contains("OpenStack-API-Version"));
    let (_, body) = support::read(response).await;
    assert_eq!(body["devices"][0]["status"], "enabled");
    assert_eq!(body["devices"][0]["inventory_status"], "available");
    // 2.0 explicitly, and another service's entry alone: 2.0.
    for v in ["accelerator 2.0", "compute 2.60"] {
        let response = at(v).await.expect("send");
        assert_eq!(header(&response, HEADER), "accelerator 2.0", "{v}");
    }
    // latest: the maximum.
    let response = at("accelerator latest").await.expect("send");
    assert_eq!(header(&response, HEADER), "accelerator 2.3");
    // Unsupported and malformed: 406 naming the range.
    for v in [
        "accelerator 2.9",
        "accelerator 3.0",
        "accelerator banana",
        "accelerator",
        "accelerator 2.1.0",
    ] {
        let response = at(v).await.expect("send");
        assert!(header(&response, "Vary").contains("OpenStack-API-Version"));
        let got = support::read(response).await;
        let message = assert_error(&got, 406, "NotAcceptable");
        assert!(message.contains("2.0 to 2.3"), "{v}: {message}");
    }
}

async fn devices_and_deployables(api: &Api) {
    seed(api).await;
    let (status, body) = api.get("/v2/devices").await;
    assert_eq!(status, 200);
    assert_eq!(body["devices"].as_array().map(Vec::len), Some(5));
    assert!(
        body.get("next").is_none(),
        "a page that is not full has no next: {body}"
    );
    let d = &body["devices"][0];
    for field in [
        "uuid",
        "type",
        "vendor",
        "model",
        "hostname",
        "created_at",
        "links",
    ] {
        assert!(d.get(field).is_some(), "{field} in {d}");
    }
    // Host filter.
    let (_, h1) = api.get("/v2/devices?hostname=h1").await;
    assert_eq!(h1["devices"].as_array().map(Vec::len), Some(3));
    assert!(h1["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|d| d["hostname"] == "h1"));
    // Type filter, with and without a host.
    let (_, gpus) = api.get("/v2/devices?type=GPU").await;
    assert_eq!(gpus["devices"].as_array().map(Vec::len), Some(3));
    let (_, gpus_h1) = api.get("/v2/devices?type=GPU&hostname=h1").await;
    assert_eq!(gpus_h1["devices"].as_array().map(Vec::len), Some(2));
    // Pagination: full pages carry next; following it gives the rest, in order.
    let (_, page1) = api.get("/v2/devices?hostname=h1&limit=2").await;
    assert_eq!(page1["devices"].as_array().map(Vec::len), Some(2));
    let next = page1["next"]
        .as_str()
        .unwrap_or_else(|| panic!("next in {page1}"))
        .to_owned();
    assert!(next.starts_with(&api.base), "{next}");
    assert!(
        next.contains("hostname=h1") && next.contains("limit=2") && next.contains("marker="),
        "{next}"
    );
    let (status, page2) = api.get(&next[api.base.len()..]).await;
    assert_eq!(status, 200);
    assert_eq!(page2["devices"].as_array().map(Vec::len), Some(1));
    assert!(page2.get("next").is_none(), "{page2}");
    let mut paged = uuids(&page1["devices"]);
    paged.extend(uuids(&page2["devices"]));
    assert_eq!(paged, uuids(&h1["devices"]));
    // A type filter pages too: GPUs one at a time.
    let (_, g1) = api.get("/v2/devices?type=GPU&limit=1").await;
    let next = g1["next"].as_str().unwrap_or_default().to_owned();
    let (_, g2) = api.get(&next[api.base.len()..]).await;
    assert_eq!(g2["devices"][0]["type"], "GPU");
    assert_ne!(g1["devices"][0]["uuid"], g2["devices"][0]["uuid"]);
    // One device; an unknown one is a JSON 404.
    let first = uuids(&body["devices"])[0].clone();
    let (status, one) = api.get(&format!("/v2/devices/{first}")).await;
    assert_eq!(status, 200);
    assert_eq!(one["uuid"], first.as_str());
    assert_error(
        &api.get("/v2/devices/00000000-0000-0000-0000-000000000000")
            .await,
        404,
        "NotFound",
    );
    // Bad paging input: 400.
    for q in [
        "limit=0",
        "limit=abc",
        "limit=-1",
        "limit=1001",
        "marker=no-such-device",
    ] {
        assert_error(
            &api.get(&format!("/v2/devices?{q}")).await,
            400,
            "BadRequest",
        );
    }

    // Deployables: one per device, same filters.
    let (status, deps) = api.get("/v2/deployables").await;
    assert_eq!(status, 200);
    assert_eq!(deps["deployables"].as_array().map(Vec::len), Some(5));
    let (_, deps_h2) = api.get("/v2/deployables?hostname=h2").await;
    assert_eq!(deps_h2["deployables"].as_array().map(Vec::len), Some(2));
    let (_, qat) = api.get("/v2/deployables?type=QAT").await;
    assert_eq!(qat["deployables"].as_array().map(Vec::len), Some(1));
    assert_eq!(qat["deployables"][0]["hostname"], "h2");
    let (_, dpage) = api.get("/v2/deployables?limit=3").await;
    assert!(dpage["next"].is_string(), "{dpage}");
    let dep = uuids(&deps["deployables"])[0].clone();
    let (status, one) = api.get(&format!("/v2/deployables/{dep}")).await;
    assert_eq!((status, one["uuid"].as_str()), (200, Some(dep.as_str())));
    assert_error(&api.get("/v2/deployables/nope").await, 404, "NotFound");
    assert_error(&api.get("/v2/deployables?limit=x").await, 400, "BadRequest");
}

async fn post(api: &Api, path: &str, body: Value) -> (u16, Value) {
    api.send(api.request(Method::POST, path).json(&body)).await
}

async fn patch(api: &Api, body: Value) -> (u16, Value) {
    api.send(
        api.request(Method::PATCH, "/v2/accelerator_requests")
            .json(&body),
    )
    .await
}

async fn delete(api: &Api, path: &str) -> (u16, Value) {
    api.send(api.request(Method::DELETE, path)).await
}

/// Instance `n`'s UUID.
fn instance(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// A bind without a resource provider (any free device of the group's type).
fn bind_ops(host: &str, instance: &str) -> Value {
    json!([
        {"path": "/hostname", "op": "add", "value": host},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ])
}

/// A bind as Nova sends it, with Placement's resource provider.
fn bind_ops_rp(host: &str, instance: &str, rp: &str) -> Value {
    json!([
        {"path": "/hostname", "op": "add", "value": host},
        {"path": "/device_rp_uuid", "op": "add", "value": rp},
        {"path": "/instance_uuid", "op": "add", "value": instance},
    ])
}

/// Profile `g` (one PGPU) and `n` requests of it, made without a project; their UUIDs.
async fn gpu_requests(api: &Api, n: usize) -> Vec<String> {
    let (status, body) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "g", "groups": [{"resources:PGPU": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let mut arqs = Vec::new();
    for _ in 0..n {
        let (status, body) = post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": "g"}),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["arqs"][0]["project_id"], Value::Null, "{body}");
        arqs.push(body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned());
    }
    arqs
}

/// The resource provider of the deployable at PCI address `cp` on `host`.
async fn rp_of(api: &Api, host: &str, cp: &str) -> String {
    let (_, body) = api.get(&format!("/v2/deployables?hostname={host}")).await;
    let name = format!("{host}_{cp}");
    let found = body["deployables"]
        .as_array()
        .expect("list")
        .iter()
        .find(|d| d["name"] == name.as_str())
        .unwrap_or_else(|| panic!("no deployable {name} in {body}"));
    found["rp_uuid"].as_str().expect("rp_uuid").to_owned()
}

fn unbind_ops() -> Value {
    json!([
        {"path": "/hostname", "op": "remove"},
        {"path": "/device_rp_uuid", "op": "remove"},
        {"path": "/instance_uuid", "op": "remove"},
    ])
}

async fn profiles(api: &Api) {
    let (status, created) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "fpga", "groups": [{"resources:FPGA": "1", "trait:CUSTOM_FPGA_XILINX": "required"}], "description": "one FPGA"}]),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "fpga");
    assert_eq!(created["groups"][0]["resources:FPGA"], "1");
    assert_eq!(created["description"], "one FPGA");
    let uuid = created["uuid"].as_str().unwrap_or_default().to_owned();
    // A bare object is taken too.
    let (status, _) = post(
        api,
        "/v2/device_profiles",
        json!({"name": "gpu", "groups": [{"resources:PGPU": "1"}]}),
    )
    .await;
    assert_eq!(status, 201);
    let (status, list) = api.get("/v2/device_profiles").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = list["device_profiles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["fpga", "gpu"]);
    for key in ["fpga", uuid.as_str()] {
        let (status, one) = api.get(&format!("/v2/device_profiles/{key}")).await;
        assert_eq!(status, 200);
        assert_eq!(one["device_profile"]["uuid"], uuid.as_str());
    }
    assert_error(&api.get("/v2/device_profiles/nope").await, 404, "NotFound");
    // Duplicate name: 409.
    let dup = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "fpga", "groups": [{"resources:FPGA": "1"}]}]),
    )
    .await;
    assert_error(&dup, 409, "Duplicate");
    // Bad input: 400.
    for bad in [
        json!([{"name": "x", "groups": [{"resources:DISK": "1"}]}]),
        json!([{"name": "x", "groups": []}]),
        json!([{"name": "", "groups": [{"resources:FPGA": "1"}]}]),
        json!([{"groups": [{"resources:FPGA": "1"}]}]),
        json!([{"name": "x", "groups": [{"resources:FPGA": 1}]}]),
        json!([{"name": "x", "groups": [{"resources:FPGA": "1"}], "colour": "red"}]),
        json!([]),
        json!([{"name": "a", "groups": [{"resources:FPGA": "1"}]}, {"name": "b", "groups": [{"resources:FPGA": "1"}]}]),
        json!("fpga"),
    ] {
        assert_error(
            &post(api, "/v2/device_profiles", bad.clone()).await,
            400,
            "BadRequest",
        );
    }
    let not_json = api
        .send(
            api.request(Method::POST, "/v2/device_profiles")
                .header("content-type", "application/json")
                .body("[{\"name\": "),
        )
        .await;
    assert_error(&not_json, 400, "BadRequest");
    // In use: 409, then deletable once its requests are gone.
    let (status, arqs) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "fpga"}),
    )
    .await;
    assert_eq!(status, 201, "{arqs}");
    assert_error(
        &delete(api, "/v2/device_profiles/fpga").await,
        409,
        "ProfileInUse",
    );
    // As Cyborg: a group requiring CUSTOM_FPGA_XILINX is two requests (both functions).
    let made = uuids(&arqs["arqs"]);
    assert_eq!(made.len(), 2, "{arqs}");
    assert_eq!(
        delete(
            api,
            &format!("/v2/accelerator_requests?arqs={}", made.join(","))
        )
        .await
        .0,
        204
    );
    assert_eq!(
        delete(api, &format!("/v2/device_profiles/{uuid}")).await.0,
        204
    );
    assert_error(&api.get("/v2/device_profiles/fpga").await, 404, "NotFound");
    assert_error(
        &delete(api, "/v2/device_profiles/fpga").await,
        404,
        "NotFound",
    );
    assert_eq!(delete(api, "/v2/device_profiles/gpu").await.0, 204);
}

async fn accelerator_requests(api: &Api) {
    seed(api).await;
    let (status, _) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "fpga-and-gpu", "groups": [{"resources:FPGA": "1"}, {"resources:PGPU": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201);
    // One request per group.
    let (status, created) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "fpga-and-gpu"}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let arqs = created["arqs"].as_array().cloned().unwrap_or_default();
    assert_eq!(arqs.len(), 2);
    assert_eq!(
        arqs.iter()
            .map(|a| (a["device_profile_group_id"].as_i64(), a["state"].as_str()))
            .collect::<Vec<_>>(),
        [(Some(0), Some("Initial")), (Some(1), Some("Initial"))]
    );
    let (fpga, gpu) = (
        arqs[0]["uuid"].as_str().unwrap_or_default().to_owned(),
        arqs[1]["uuid"].as_str().unwrap_or_default().to_owned(),
    );
    assert!(arqs[0]["project_id"].is_null());
    // Only the given group; the project from X-Project-Id.
    let (status, only) = api
        .send(
            api.request(Method::POST, "/v2/accelerator_requests")
                .header("X-Project-Id", "p1")
                .json(
                    &json!({"device_profile_name": "fpga-and-gpu", "device_profile_group_id": 0}),
                ),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(only["arqs"].as_array().map(Vec::len), Some(1));
    assert_eq!(only["arqs"][0]["project_id"], "p1");
    let second_fpga = only["arqs"][0]["uuid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_error(
        &post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": "nope"}),
        )
        .await,
        404,
        "NotFound",
    );
    assert_error(
        &post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": "fpga-and-gpu", "device_profile_group_id": 5}),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_error(
        &post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile": "x"}),
        )
        .await,
        400,
        "BadRequest",
    );

    // Bind both of instance i1 on h1: 202, then Bound with an attach handle.
    let fpga_rp = rp_of(api, "h1", "0000:3b:00.0").await;
    let (status, body) = patch(
        api,
        json!({&fpga: bind_ops_rp("h1", &instance(1), &fpga_rp), &gpu: bind_ops("h1", &instance(1))}),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let (status, bound) = api.get(&format!("/v2/accelerator_requests/{fpga}")).await;
    assert_eq!(status, 200);
    assert_eq!(bound["state"], "Bound", "{bound}");
    assert_eq!(bound["hostname"], "h1");
    assert_eq!(bound["instance_uuid"], instance(1));
    assert_eq!(bound["device_rp_uuid"], fpga_rp.as_str());
    assert_eq!(bound["attach_handle_type"], "PCI");
    assert_eq!(bound["attach_handle_info"]["address"], "0000:3b:00.0");
    // Timestamps, as Cyborg's ARQs have: the bind changed it after its creation. In UTC:
    // RFC 3339's `Z` on accel's own schema, Python's `isoformat()` (`+00:00`, what
    // Cyborg 17's API shows) on Cyborg's.
    let created = bound["created_at"].as_str().expect("created_at");
    let updated = bound["updated_at"].as_str().expect("updated_at");
    assert!(
        (created.ends_with('Z') || created.ends_with("+00:00")) && updated >= created,
        "{bound}"
    );
    let (_, of_i1) = api
        .get(&format!(
            "/v2/accelerator_requests?instance={}",
            instance(1)
        ))
        .await;
    assert_eq!(uuids(&of_i1["arqs"]).len(), 2);
    let (_, all) = api.get("/v2/accelerator_requests").await;
    assert_eq!(uuids(&all["arqs"]).len(), 3);
    // Binding again to the same instance changes nothing.
    assert_eq!(
        patch(api, json!({&fpga: bind_ops("h1", &instance(1))}))
            .await
            .0,
        202
    );
    // To another instance while bound: 409.
    assert_error(
        &patch(api, json!({&fpga: bind_ops("h1", &instance(9))})).await,
        409,
        "InvalidTransition",
    );

    // The second FPGA request: h1's one FPGA is taken: 409, and the request is BindFailed.
    let message = assert_error(
        &patch(api, json!({&second_fpga: bind_ops("h1", &instance(2))})).await,
        409,
        "NoFreeHandle",
    );
    assert!(
        message.contains("FPGA") && message.contains("h1"),
        "{message}"
    );
    let (_, failed) = api
        .get(&format!("/v2/accelerator_requests/{second_fpga}"))
        .await;
    assert_eq!(failed["state"], "BindFailed");

    // Unbind the first: Unbound, the FPGA free again; then the second binds.
    assert_eq!(patch(api, json!({&fpga: unbind_ops()})).await.0, 202);
    let (_, unbound) = api.get(&format!("/v2/accelerator_requests/{fpga}")).await;
    assert_eq!(unbound["state"], "Unbound");
    // As Cyborg 17's: an unbound request's handle type is "" and its info {}.
    assert_eq!(unbound["attach_handle_type"], "", "{unbound}");
    assert_eq!(unbound["attach_handle_info"], json!({}), "{unbound}");
    assert_eq!(
        patch(api, json!({&fpga: unbind_ops()})).await.0,
        202,
        "unbind is idempotent"
    );
    assert_eq!(patch(api, json!({&second_fpga: unbind_ops()})).await.0, 202);
    assert_eq!(
        patch(api, json!({&second_fpga: bind_ops("h1", &instance(2))}))
            .await
            .0,
        202
    );
    let (_, rebound) = api
        .get(&format!("/v2/accelerator_requests/{second_fpga}"))
        .await;
    assert_eq!(rebound["state"], "Bound");

    // Malformed patches: 400, and nothing applied.
    let target = fpga.as_str();
    for bad in [
        json!({target: [{"path": "/colour", "op": "add", "value": "red"}]}),
        json!({target: [{"path": "/hostname", "op": "replace", "value": "h1"}]}),
        json!({target: [{"path": "/hostname", "op": "add", "value": "h1"}]}),
        json!({target: [{"path": "/hostname", "op": "add", "value": 7}, {"path": "/instance_uuid", "op": "add", "value": instance(1)}]}),
        json!({target: bind_ops("h1", &instance(1)), "other": [{"path": "/nope", "op": "add"}]}),
        json!({target: []}),
        json!({target: "bind"}),
        json!({}),
        json!([bind_ops("h1", &instance(1))]),
    ] {
        assert_error(&patch(api, bad.clone()).await, 400, "BadRequest");
    }
    let (_, still) = api.get(&format!("/v2/accelerator_requests/{fpga}")).await;
    assert_eq!(still["state"], "Unbound", "a refused patch binds nothing");
    let not_json = api
        .send(
            api.request(Method::PATCH, "/v2/accelerator_requests")
                .body("{"),
        )
        .await;
    assert_error(&not_json, 400, "BadRequest");
    assert_error(
        &patch(
            api,
            json!({"00000000-0000-0000-0000-000000000000": bind_ops("h1", &instance(7))}),
        )
        .await,
        404,
        "NotFound",
    );
    assert_error(
        &api.get("/v2/accelerator_requests/nope").await,
        404,
        "NotFound",
    );

    // Delete by instance (i1's GPU request), twice: 204 both times.
    for _ in 0..2 {
        assert_eq!(
            delete(
                api,
                &format!("/v2/accelerator_requests?instance={}", instance(1))
            )
            .await
            .0,
            204
        );
    }
    assert_error(
        &api.get(&format!("/v2/accelerator_requests/{gpu}")).await,
        404,
        "NotFound",
    );
    // Delete by list: as Cyborg, a missing one makes it 404 and deletes nothing; then
    // the list of existing ones, 204; again, 404 (the retry of a delete that happened).
    let missing = format!(
        "/v2/accelerator_requests?arqs={fpga},{second_fpga},00000000-0000-0000-0000-000000000000"
    );
    assert_error(&delete(api, &missing).await, 404, "NotFound");
    let (_, still) = api.get(&format!("/v2/accelerator_requests/{fpga}")).await;
    assert_eq!(still["uuid"], fpga.as_str(), "nothing deleted");
    let list = format!("/v2/accelerator_requests?arqs={fpga},{second_fpga}");
    assert_eq!(delete(api, &list).await.0, 204);
    assert_error(&delete(api, &list).await, 404, "NotFound");
    let (_, none) = api.get("/v2/accelerator_requests").await;
    assert_eq!(none["arqs"], json!([]));
    // The devices are free again: h1's handles can be taken by a new request.
    let (_, again) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "fpga-and-gpu", "device_profile_group_id": 0}),
    )
    .await;
    let again = again["arqs"][0]["uuid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        patch(api, json!({&again: bind_ops("h1", &instance(3))}))
            .await
            .0,
        202
    );
    // Delete needs exactly one of arqs / instance.
    for q in ["", "?arqs=", "?instance=", "?arqs=a&instance=b"] {
        assert_error(
            &delete(api, &format!("/v2/accelerator_requests{q}")).await,
            400,
            "BadRequest",
        );
    }
}

async fn odd_requests(api: &Api) {
    assert_error(&api.get("/v2/nothing-here").await, 404, "NotFound");
    assert_error(
        &api.send(api.request(Method::PUT, "/v2/devices")).await,
        405,
        "MethodNotAllowed",
    );
    // Percent-encoded oddities in paths and queries are plain strings, never panics.
    assert_error(&api.get("/v2/devices/%00%ff").await, 400, "BadRequest");
    // NUL (which PostgreSQL cannot take) in a path, a query or a body: 400, never 500.
    assert_error(&api.get("/v2/devices/%00").await, 400, "BadRequest");
    assert_error(
        &api.get("/v2/devices?hostname=h%001").await,
        400,
        "BadRequest",
    );
    assert_error(
        &api.get("/v2/accelerator_requests?instance=%00").await,
        400,
        "BadRequest",
    );
    assert_error(
        &post(
            api,
            "/v2/device_profiles",
            json!([{"name": "a\u{0}b", "groups": [{"resources:FPGA": "1"}]}]),
        )
        .await,
        400,
        "BadRequest",
    );
    // Invalid UTF-8 in a query value: decoded lossily, an empty answer, no error.
    let (status, body) = api.get("/v2/devices?hostname=%ff&type=%e2%82").await;
    assert_eq!((status, &body["devices"]), (200, &json!([])));
    // A body over the limit: a JSON 413.
    let huge = "x".repeat(3 * 1024 * 1024);
    let got = api
        .send(api.request(Method::POST, "/v2/device_profiles").body(huge))
        .await;
    assert_error(&got, 413, "RequestTooLarge");
}

/// A database that cannot be used answers 503 (retry later) with a generic message.
async fn database_failure(api: &Api) {
    api.db.close().await;
    let got = api.get("/v2/devices").await;
    let message = assert_error(&got, 503, "ServiceUnavailable");
    assert!(
        !message.contains("pool"),
        "the cause stays in the log: {message}"
    );
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (db, _dir) = crate::support::sqlite().await;
                    let api = crate::support::Api::start(db).await;
                    crate::$name(&api).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = crate::support::postgres().await;
                    let api = crate::support::Api::start(db).await;
                    crate::$name(&api).await;
                }
            )*
        }
        /// The same answers when writes go through the conductor's RPC API, as in a
        /// deployment.
        mod through_conductor {
            $(
                #[tokio::test]
                async fn $name() {
                    let (db, _dir) = crate::support::sqlite().await;
                    let api = crate::support::Api::start_through_conductor(db).await;
                    crate::$name(&api).await;
                }
            )*
        }
    };
}

/// Binds follow Placement's choice: a deployable's `rp_uuid` is Cyborg's (uuid3 of its
/// name); a bind naming one takes exactly that device, and one naming a provider of no
/// deployable of the host is refused with nothing changed.
async fn binds_follow_the_resource_provider(api: &Api) {
    seed(api).await;
    let rp = rp_of(api, "h1", "0000:3d:00.0").await;
    assert_eq!(
        rp,
        uuid::Uuid::new_v3(&uuid::Uuid::NAMESPACE_DNS, b"h1_0000:3d:00.0").to_string()
    );
    let arqs = gpu_requests(api, 2).await;
    // Not a provider of h1: another host's, or none at all.
    let other_host = rp_of(api, "h2", "0000:5e:00.0").await;
    for wrong in [other_host.as_str(), "5b2c3f0e-0000-4000-8000-000000000001"] {
        let got = patch(
            api,
            json!({&arqs[0]: bind_ops_rp("h1", &instance(7), wrong)}),
        )
        .await;
        let message = assert_error(&got, 400, "BadRequest");
        assert!(message.contains("device_rp_uuid"), "{message}");
        let (_, arq) = api
            .get(&format!("/v2/accelerator_requests/{}", arqs[0]))
            .await;
        assert_eq!(arq["state"], "Initial", "nothing changed: {arq}");
    }
    // The second GPU of h1 by its provider, though the first is free too.
    let (status, body) = patch(api, json!({&arqs[0]: bind_ops_rp("h1", &instance(7), &rp)})).await;
    assert_eq!(status, 202, "{body}");
    let (_, arq) = api
        .get(&format!("/v2/accelerator_requests/{}", arqs[0]))
        .await;
    assert_eq!(
        arq["attach_handle_info"]["address"], "0000:3d:00.0",
        "{arq}"
    );
    // Its only handle taken, the next bind to that provider finds none free.
    let got = patch(api, json!({&arqs[1]: bind_ops_rp("h1", &instance(8), &rp)})).await;
    let message = assert_error(&got, 409, "NoFreeHandle");
    assert!(message.contains(&rp), "{message}");
}

/// As Cyborg 17, a bind records the request's project: the binding caller's (noauth:
/// `X-Project-Id`), so a request created without one gets it, or the patch's
/// `/project_id` from microversion 2.1 (406 below it; noauth callers are
/// administrators). A failed patch changes no project.
async fn binds_record_the_project(api: &Api) {
    seed(api).await;
    let arqs = gpu_requests(api, 2).await;
    let project_of = |uuid: String| async move {
        let (_, arq) = api.get(&format!("/v2/accelerator_requests/{uuid}")).await;
        arq["project_id"].clone()
    };
    let rp = rp_of(api, "h1", "0000:3d:00.0").await;

    // The caller's project.
    let (status, body) = api
        .send(
            api.request(Method::PATCH, "/v2/accelerator_requests")
                .header("X-Project-Id", "p-caller")
                .json(&json!({&arqs[0]: bind_ops_rp("h1", &instance(1), &rp)})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(project_of(arqs[0].clone()).await, "p-caller");

    // The patch's, from 2.1 only.
    let mut ops = bind_ops("h1", &instance(2));
    ops.as_array_mut()
        .expect("ops")
        .push(json!({"path": "/project_id", "op": "add", "value": "p-admin-set"}));
    let at = |version: &str| {
        api.request(Method::PATCH, "/v2/accelerator_requests")
            .header(HEADER, format!("accelerator {version}"))
            .header("X-Project-Id", "p-caller")
            .json(&json!({&arqs[1]: ops.clone()}))
    };
    let got = api.send(at("2.0")).await;
    let message = assert_error(&got, 406, "NotAcceptable");
    assert!(message.contains("2.1"), "{message}");
    assert_eq!(project_of(arqs[1].clone()).await, Value::Null);
    let (status, body) = api.send(at("2.1")).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(project_of(arqs[1].clone()).await, "p-admin-set");
}

/// While `[upgrade_levels] conductor` is below 1.6 (a conductor whose `bind_arq` takes
/// no project still runs), a bind keeps the request's project, and a patch naming one
/// is 503 naming the option, with nothing bound.
#[tokio::test]
async fn binds_below_conductor_1_6_keep_the_project() {
    let (db, _dir) = support::sqlite().await;
    let api = Api::start_through_conductor_capped(
        db,
        accel_api::Limits::default(),
        Some(verso::Version::new(1, 5)),
    )
    .await;
    seed(&api).await;
    let arqs = gpu_requests(&api, 2).await;
    let (status, body) = api
        .send(
            api.request(Method::PATCH, "/v2/accelerator_requests")
                .header("X-Project-Id", "p-caller")
                .json(&json!({&arqs[0]: bind_ops("h1", &instance(1))})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (_, arq) = api
        .get(&format!("/v2/accelerator_requests/{}", arqs[0]))
        .await;
    assert_eq!(
        (&arq["state"], &arq["project_id"]),
        (&json!("Bound"), &Value::Null)
    );
    let mut ops = bind_ops("h1", &instance(2));
    ops.as_array_mut()
        .expect("ops")
        .push(json!({"path": "/project_id", "op": "add", "value": "p"}));
    let got = api
        .send(
            api.request(Method::PATCH, "/v2/accelerator_requests")
                .header(HEADER, "accelerator 2.1")
                .json(&json!({&arqs[1]: ops})),
        )
        .await;
    let message = assert_error(&got, 503, "ServiceUnavailable");
    assert!(message.contains("[upgrade_levels] conductor"), "{message}");
    let (_, arq) = api
        .get(&format!("/v2/accelerator_requests/{}", arqs[1]))
        .await;
    assert_eq!(arq["state"], "Initial", "{arq}");
}

on_both!(
    attributes,
    binds_follow_the_resource_provider,
    binds_record_the_project,
    cyborg_forms,
    versions,
    microversions,
    devices_and_deployables,
    profiles,
    accelerator_requests,
    odd_requests,
    database_failure,
);

/// `[api] public_endpoint`: links (and `next`) are built on it, whatever `Host` a
/// client sends.
#[tokio::test]
async fn links_follow_the_public_endpoint() {
    let (db, _dir) = support::sqlite().await;
    let endpoint =
        accel_api::PublicEndpoint::parse("https://cloud.example.com/accelerator/").expect("URL");
    let api = Api::start_with(
        db,
        accel_api::Limits::default(),
        accel_api::ServeOptions {
            public_endpoint: Some(endpoint),
            ..accel_api::ServeOptions::default()
        },
    )
    .await;
    seed(&api).await;
    let (_, body) = api
        .send(
            api.request(Method::GET, "/v2/devices?limit=1")
                .header("Host", "evil.example"),
        )
        .await;
    let href = body["devices"][0]["links"][0]["href"]
        .as_str()
        .expect("link");
    assert!(
        href.starts_with("https://cloud.example.com/accelerator/v2/devices/"),
        "{href}"
    );
    let next = body["next"].as_str().expect("next");
    assert!(
        next.starts_with("https://cloud.example.com/accelerator/v2/devices?"),
        "{next}"
    );
    for bad in [
        "ftp://x",
        "http://",
        "https://a b",
        "http://u@h",
        "http://h/?q",
        "/v2",
    ] {
        assert!(accel_api::PublicEndpoint::parse(bad).is_err(), "{bad}");
    }
}
