//! Cyborg's own forms of the API, the ones the OpenStack clients use (`?name=` and
//! `?vendor=` filters, `PATCH`/`DELETE` of one request, `DELETE ?value=`, the version
//! range headers), and `/v2/attributes`.

use super::*;

/// Cyborg's forms the OpenStack clients use: `?name=` and `?vendor=` filters (paged,
/// the filter kept in `next`), `PATCH` and `DELETE` of `/accelerator_requests/{uuid}`,
/// `DELETE /device_profiles?value=`, and the version range headers.
pub(crate) async fn cyborg_forms(api: &Api) {
    seed(api).await;
    let gpu = accel_conductor::db::ReportedDevice {
        vendor: "10de".to_owned(),
        ..device("0000:60:00.0", "GPU", 1)
    };
    api.db.report("h3", &[gpu]).await.expect("report h3");
    let (_, body) = api.get("/v2/devices?vendor=10de").await;
    let hosts: Vec<&Value> = body["devices"]
        .as_array()
        .expect("list")
        .iter()
        .map(|d| &d["hostname"])
        .collect();
    assert_eq!(hosts, [&json!("h3")], "{body}");
    let (_, body) = api.get("/v2/devices?vendor=10ee&limit=2").await;
    let next = body["next"].as_str().expect("a full page has next");
    assert!(next.contains("vendor=10ee"), "{next}");

    for name in ["a", "b", "c"] {
        let (status, _) = post(
            api,
            "/v2/device_profiles",
            json!([{"name": name, "groups": [{"resources:FPGA": "1"}]}]),
        )
        .await;
        assert_eq!(status, 201);
    }
    let names = |body: &Value| -> Vec<String> {
        body["device_profiles"]
            .as_array()
            .expect("list")
            .iter()
            .map(|p| p["name"].as_str().expect("name").to_owned())
            .collect()
    };
    let (_, body) = api.get("/v2/device_profiles?name=b").await;
    assert_eq!(names(&body), ["b"]);
    let (_, body) = api.get("/v2/device_profiles?name=a,c&limit=1").await;
    assert_eq!(names(&body), ["a"]);
    let next = body["next"].as_str().expect("a full page has next");
    let (_, body) = api.send(api.request_url(Method::GET, next)).await;
    assert_eq!(names(&body), ["c"], "the next page keeps the filter");
    let (_, body) = api.get("/v2/device_profiles?name=nope").await;
    assert_eq!(names(&body), Vec::<String>::new());
    assert_error(
        &api.get("/v2/device_profiles?name=,").await,
        400,
        "BadRequest",
    );

    // PATCH and DELETE of one request.
    let (_, body) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "a"}),
    )
    .await;
    let arq = body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned();
    let path = format!("/v2/accelerator_requests/{arq}");
    let bind = json!({ arq.clone(): [
        {"path": "/hostname", "op": "add", "value": "h1"},
        {"path": "/instance_uuid", "op": "add", "value": instance(1)},
    ]});
    let other = json!({ uuid::Uuid::new_v4().to_string(): [
        {"path": "/hostname", "op": "add", "value": "h1"},
        {"path": "/instance_uuid", "op": "add", "value": instance(1)},
    ]});
    let got = api
        .send(api.request(Method::PATCH, &path).json(&other))
        .await;
    assert_error(&got, 400, "BadRequest");
    let (status, _) = api
        .send(api.request(Method::PATCH, &path).json(&bind))
        .await;
    assert_eq!(status, 202);
    assert_eq!(api.get(&path).await.1["state"], "Bound");
    // Nova's `bind_state=resolved`: the instance's requests once every bind has ended.
    let (status, body) = api
        .get(&format!(
            "/v2/accelerator_requests?instance={}&bind_state=resolved",
            instance(1)
        ))
        .await;
    assert_eq!((status, uuids(&body["arqs"])), (200, vec![arq.clone()]));
    let (_, body) = api
        .get("/v2/accelerator_requests?bind_state=resolved")
        .await;
    for a in body["arqs"].as_array().expect("list") {
        assert!(
            ["Bound", "BindFailed", "Deleting"].contains(&a["state"].as_str().unwrap_or("")),
            "{a}"
        );
    }
    // Without an instance the filter applies to each page read, and `next` follows the
    // page read: walking pages of one, the unbound request makes an empty page that
    // still links on to the bound one after it.
    api.db
        .report("h4", &[device("0000:61:00.0", "FPGA", 1)])
        .await
        .expect("report h4");
    let mut made = Vec::new();
    for _ in 0..2 {
        let (_, body) = post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": "a"}),
        )
        .await;
        made.push(body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned());
    }
    let later = json!({ made[1].clone(): [
        {"path": "/hostname", "op": "add", "value": "h4"},
        {"path": "/instance_uuid", "op": "add", "value": instance(9)},
    ]});
    let (status, _) = api
        .send(
            api.request(
                Method::PATCH,
                &format!("/v2/accelerator_requests/{}", made[1]),
            )
            .json(&later),
        )
        .await;
    assert_eq!(status, 202);
    let (_, body) = api
        .get("/v2/accelerator_requests?bind_state=resolved")
        .await;
    let resolved = uuids(&body["arqs"]);
    assert!(resolved.contains(&made[1]) && !resolved.contains(&made[0]));
    let (mut walked, mut pages, mut empty) = (Vec::new(), 0, 0);
    let mut next = Some(format!(
        "{}/v2/accelerator_requests?bind_state=resolved&limit=1",
        api.base
    ));
    while let Some(url) = next.take() {
        let (status, body) = api.send(api.request_url(Method::GET, &url)).await;
        assert_eq!(status, 200, "{body}");
        let got = uuids(&body["arqs"]);
        empty += usize::from(got.is_empty());
        walked.extend(got);
        pages += 1;
        assert!(pages < 100, "the walk must end");
        next = body["next"].as_str().map(str::to_owned);
    }
    assert_eq!(
        walked, resolved,
        "every resolved request, in order, across the pages"
    );
    assert!(
        empty >= 1,
        "the unbound request's page is empty and links on"
    );
    for uuid in &made {
        let (status, _) = api
            .send(api.request(Method::DELETE, &format!("/v2/accelerator_requests/{uuid}")))
            .await;
        assert_eq!(status, 204);
    }
    assert_error(
        &api.get("/v2/accelerator_requests?bind_state=Bound").await,
        400,
        "BadRequest",
    );
    // No hot add: the instance has a request, another is refused ...
    let new_arq = || async {
        let (_, body) = post(
            api,
            "/v2/accelerator_requests",
            json!({"device_profile_name": "a"}),
        )
        .await;
        body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned()
    };
    let bind_to = |arqs: &[&String], instance: &str| {
        let mut body = serde_json::Map::new();
        for arq in arqs {
            body.insert(
                (*arq).clone(),
                json!([
                    {"path": "/hostname", "op": "add", "value": "h1"},
                    {"path": "/instance_uuid", "op": "add", "value": instance},
                ]),
            );
        }
        Value::Object(body)
    };
    let second = new_arq().await;
    let got = patch(api, bind_to(&[&second], &instance(1))).await;
    let message = assert_error(&got, 400, "BadRequest");
    assert!(
        message.contains("already has accelerator requests"),
        "{message}"
    );
    // ... the same bind again (a retry) is not.
    let (status, _) = patch(api, bind_to(&[&arq], &instance(1))).await;
    assert_eq!(status, 202);
    // Requests bound in one patch are one set: they pass the check (and here find h1's
    // one FPGA taken: 409, not 400).
    let third = new_arq().await;
    let got = patch(api, bind_to(&[&second, &third], &instance(2))).await;
    assert_error(&got, 409, "NoFreeHandle");
    let (status, _) = delete(
        api,
        &format!("/v2/accelerator_requests?arqs={second},{third}"),
    )
    .await;
    assert_eq!(status, 204);
    // Unbinding forgets host and instance, and the handle info is `{}` (as Cyborg).
    let unbind = json!({ arq.clone(): [
        {"path": "/hostname", "op": "remove"},
        {"path": "/instance_uuid", "op": "remove"},
    ]});
    let (status, _) = api
        .send(api.request(Method::PATCH, &path).json(&unbind))
        .await;
    assert_eq!(status, 202);
    let (_, unbound) = api.get(&path).await;
    assert_eq!(
        (
            &unbound["state"],
            &unbound["hostname"],
            &unbound["instance_uuid"],
            &unbound["attach_handle_info"]
        ),
        (&json!("Unbound"), &Value::Null, &Value::Null, &json!({})),
        "{unbound}"
    );
    let (status, _) = delete(api, &path).await;
    assert_eq!(status, 204);
    assert_error(&api.get(&path).await, 404, "NotFound");

    // Several profiles by name.
    let (status, _) = delete(api, "/v2/device_profiles?value=a,b").await;
    assert_eq!(status, 204);
    let (_, body) = api.get("/v2/device_profiles").await;
    assert_eq!(names(&body), ["c"]);
    assert_error(&delete(api, "/v2/device_profiles").await, 400, "BadRequest");

    // Profiles Cyborg accepts: amounts above 1 (that many requests), accel:* keys,
    // CUSTOM_* classes (which accel cannot bind without Placement: 400 at bind).
    let (status, body) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "two_fpgas", "groups": [
            {"resources: FPGA": "2", "accel:bitstream_id": "b-1", "trait:CUSTOM_FAST": "required"}
        ]}]),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["groups"][0]["resources:FPGA"], "2",
        "key normalized: {body}"
    );
    let (status, body) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "two_fpgas"}),
    )
    .await;
    assert_eq!((status, uuids(&body["arqs"]).len()), (201, 2), "{body}");
    let (status, _) = post(
        api,
        "/v2/device_profiles",
        json!([{"name": "custom", "groups": [{"resources:CUSTOM_ACCELERATOR_X": "1"}]}]),
    )
    .await;
    assert_eq!(status, 201);
    let (_, body) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "custom"}),
    )
    .await;
    let custom = body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned();
    let message = assert_error(
        &patch(api, bind_to(&[&custom], &instance(5))).await,
        400,
        "BadRequest",
    );
    assert!(message.contains("device_rp_uuid"), "{message}");
    for bad in [
        json!([{"name": "a b", "groups": [{"resources:FPGA": "1"}]}]),
        json!([{"name": "t", "groups": [{"resources:FPGA": "1", "trait:HW_X": "required"}]}]),
        json!([{"name": "t", "groups": [{"resources:FPGA": "1", "trait:CUSTOM_X": "maybe"}]}]),
        json!([{"name": "t", "groups": [{"resources:FPGA": "x"}]}]),
    ] {
        assert_error(
            &post(api, "/v2/device_profiles", bad.clone()).await,
            400,
            "BadRequest",
        );
    }

    // Device maintenance (Cyborg's disable and enable): h1's FPGA is free again once the
    // request above is gone; disabled, it is given to no new request; enabled, it is.
    let (_, fpgas) = api.get("/v2/devices?hostname=h1&type=FPGA").await;
    let fpga = fpgas["devices"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    let maint = |action: &'static str| {
        let path = format!("/v2/devices/{fpga}/{action}");
        async move { api.send(api.request(Method::POST, &path)).await.0 }
    };
    assert_eq!(maint("disable").await, 204);
    assert_eq!(maint("disable").await, 204, "idempotent");
    let status_of = || async {
        let (_, d) = api
            .send(
                api.request(Method::GET, &format!("/v2/devices/{fpga}"))
                    .header(HEADER, "accelerator 2.3"),
            )
            .await;
        d["status"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(status_of().await, "maintaining");
    let (_, body) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "c"}),
    )
    .await;
    let c_arq = body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned();
    let got = patch(api, bind_to(&[&c_arq], &instance(6))).await;
    assert_error(&got, 409, "NoFreeHandle");
    assert_eq!(maint("enable").await, 204);
    assert_eq!(status_of().await, "enabled");
    let (_, body) = post(
        api,
        "/v2/accelerator_requests",
        json!({"device_profile_name": "c"}),
    )
    .await;
    let c_again = body["arqs"][0]["uuid"].as_str().expect("uuid").to_owned();
    let (status, _) = patch(api, bind_to(&[&c_again], &instance(7))).await;
    assert_eq!(status, 202, "enabled, the FPGA binds");
    let (status, _) = delete(
        api,
        &format!("/v2/accelerator_requests?arqs={c_arq},{c_again}"),
    )
    .await;
    assert_eq!(status, 204);
    assert_error(
        &api.send(api.request(
            Method::POST,
            "/v2/devices/00000000-0000-4000-8000-000000000000/disable",
        ))
        .await,
        404,
        "NotFound",
    );

    // The range served, on every answer (errors too).
    for path in ["/v2/devices", "/v2/nothing"] {
        let response = api.request(Method::GET, path).send().await.expect("send");
        let h = response.headers();
        assert_eq!(h["OpenStack-API-Minimum-Version"], "2.0", "{path}");
        assert_eq!(h["OpenStack-API-Maximum-Version"], "2.3", "{path}");
    }
}

/// Cyborg's `/v2/attributes`: reported attributes listed (by deployable and key), shown
/// in the deployable's `attributes_list`; an administrator creates and deletes them.
pub(crate) async fn attributes(api: &Api) {
    let mut fpga = device("0000:3b:00.0", "FPGA", 1);
    fpga.attributes = [("rc", "FPGA"), ("trait0", "CUSTOM_FPGA_XILINX")]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    api.db
        .report("h1", &[fpga, device("0000:3c:00.0", "GPU", 1)])
        .await
        .expect("report");
    let (_, deps) = api.get("/v2/deployables").await;
    let fpga_dep = deps["deployables"]
        .as_array()
        .expect("list")
        .iter()
        .find(|d| d["name"] == "h1_0000:3b:00.0")
        .expect("the FPGA's deployable")
        .clone();
    let attrs: Value =
        serde_json::from_str(fpga_dep["attributes_list"].as_str().expect("text")).expect("json");
    assert_eq!(
        attrs,
        json!([{"rc": "FPGA"}, {"trait0": "CUSTOM_FPGA_XILINX"}])
    );
    assert!(fpga_dep["created_at"].is_string(), "{fpga_dep}");

    let (status, list) = api.get("/v2/attributes").await;
    assert_eq!(status, 200);
    let list = list["attributes"].as_array().expect("list").clone();
    assert_eq!(list.len(), 2);
    let dep_id = list[0]["deployable_id"].as_i64().expect("deployable_id");
    let rc = list.iter().find(|a| a["key"] == "rc").expect("rc").clone();
    assert_eq!(rc["value"], "FPGA");
    let uuid = rc["uuid"].as_str().expect("uuid");
    assert!(rc["links"][0]["href"]
        .as_str()
        .expect("href")
        .ends_with(&format!("/v2/attributes/{uuid}")));
    let (status, one) = api.get(&format!("/v2/attributes/{uuid}")).await;
    assert_eq!((status, &one["key"]), (200, &json!("rc")));
    let (_, by_key) = api.get("/v2/attributes?key=trait0").await;
    assert_eq!(by_key["attributes"].as_array().map(Vec::len), Some(1));
    let (_, by_dep) = api
        .get(&format!("/v2/attributes?deployable_id={}", dep_id + 1000))
        .await;
    assert_eq!(by_dep["attributes"], json!([]));
    let (_, paged) = api.get("/v2/attributes?limit=1").await;
    assert!(paged["next"].as_str().expect("next").contains("marker="));

    // Create, refuse a duplicate or a missing deployable, delete.
    let (status, made) = post(
        api,
        "/v2/attributes",
        json!({"deployable_id": dep_id, "key": "owner", "value": "team-a"}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (&made["key"], &made["value"]),
        (&json!("owner"), &json!("team-a"))
    );
    assert_error(
        &post(
            api,
            "/v2/attributes",
            json!({"deployable_id": dep_id, "key": "owner", "value": "team-b"}),
        )
        .await,
        409,
        "Duplicate",
    );
    assert_error(
        &post(
            api,
            "/v2/attributes",
            json!({"deployable_id": dep_id + 1000, "key": "k", "value": "v"}),
        )
        .await,
        404,
        "NotFound",
    );
    assert_error(
        &post(api, "/v2/attributes", json!({"key": "k", "value": "v"})).await,
        400,
        "BadRequest",
    );
    assert_error(
        &post(
            api,
            "/v2/attributes",
            json!({"deployable_id": dep_id, "key": "", "value": "v"}),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_error(
        &api.get("/v2/attributes?deployable_id=one").await,
        400,
        "BadRequest",
    );
    let made_uuid = made["uuid"].as_str().expect("uuid");
    let (status, _) = delete(api, &format!("/v2/attributes/{made_uuid}")).await;
    assert_eq!(status, 204);
    assert_error(
        &delete(api, &format!("/v2/attributes/{made_uuid}")).await,
        404,
        "NotFound",
    );
    assert_error(
        &api.get(&format!("/v2/attributes/{made_uuid}")).await,
        404,
        "NotFound",
    );
}
