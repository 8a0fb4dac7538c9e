//! The test's own Nova: the compute API calls the OpenStack clients and accel's conductor
//! make (version discovery, a server by id or by name, `os-server-external-events`),
//! over the servers the test names, on a free loopback port. Registered in the test
//! Keystone's catalog ([`accel_keystone::testing::Catalog`]), it is found as a real
//! Nova would be. (Nova itself does not run here: it needs a hypervisor.)

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A fake Nova's servers and what it was told.
pub struct Nova {
    /// Server id to name.
    servers: HashMap<String, String>,
    /// The bodies of `os-server-external-events`, with their microversion header.
    events: Mutex<Vec<(Option<String>, Value)>>,
    url: String,
}

impl Nova {
    /// Serves `servers` (id, name); the compute endpoint is [`Nova::url`].
    pub async fn start(servers: &[(&str, &str)]) -> Arc<Nova> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let nova = Arc::new(Nova {
            servers: servers
                .iter()
                .map(|(id, name)| ((*id).to_owned(), (*name).to_owned()))
                .collect(),
            events: Mutex::default(),
            url: format!("http://{addr}/compute/v2.1"),
        });
        let app = Router::new()
            .route("/compute", get(versions))
            .route("/compute/", get(versions))
            .route("/compute/v2.1", get(version))
            .route("/compute/v2.1/", get(version))
            .route("/compute/v2.1/servers", get(list))
            .route("/compute/v2.1/servers/detail", get(list))
            .route("/compute/v2.1/servers/{id}", get(show))
            .route("/compute/v2.1/os-server-external-events", post(events))
            .with_state(nova.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        nova
    }

    /// The compute endpoint, as a catalog names it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The external events received so far: (microversion header, body).
    pub fn events(&self) -> Vec<(Option<String>, Value)> {
        self.events.lock().expect("lock").clone()
    }

    fn server(&self, id: &str, name: &str) -> Value {
        json!({
            "id": id,
            "name": name,
            "status": "ACTIVE",
            "links": [{"rel": "self", "href": format!("{}/servers/{id}", self.url)}],
        })
    }
}

fn version_doc(nova: &Nova) -> Value {
    json!({
        "id": "v2.1",
        "status": "CURRENT",
        "version": "2.96",
        "min_version": "2.1",
        "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{}/", nova.url)}],
    })
}

async fn versions(State(nova): State<Arc<Nova>>) -> Json<Value> {
    Json(json!({ "versions": [version_doc(&nova)] }))
}

async fn version(State(nova): State<Arc<Nova>>) -> Json<Value> {
    Json(json!({ "version": version_doc(&nova) }))
}

async fn show(State(nova): State<Arc<Nova>>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    match nova.servers.get(&id) {
        Some(name) => (
            StatusCode::OK,
            Json(json!({ "server": nova.server(&id, name) })),
        ),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"itemNotFound": {"code": 404, "message": "Instance could not be found."}})),
        ),
    }
}

/// `?name=` is a regular expression in Nova; the tests' names match only themselves.
async fn list(
    State(nova): State<Arc<Nova>>,
    Query(query): Query<HashMap<String, String>>,
) -> Json<Value> {
    let servers: Vec<Value> = nova
        .servers
        .iter()
        .filter(|(_, name)| query.get("name").is_none_or(|n| n == *name))
        .map(|(id, name)| nova.server(id, name))
        .collect();
    Json(json!({ "servers": servers }))
}

/// Each event of a known server is accepted (200), of another 404, as Nova answers.
async fn events(
    State(nova): State<Arc<Nova>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let microversion = headers
        .get("openstack-api-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    nova.events
        .lock()
        .expect("lock")
        .push((microversion, body.clone()));
    let answered: Vec<Value> = body["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let known = e["server_uuid"]
                .as_str()
                .is_some_and(|id| nova.servers.contains_key(id));
            let mut e = e.clone();
            e["code"] = json!(if known { 200 } else { 404 });
            e
        })
        .collect();
    let status = if answered.iter().all(|e| e["code"] == 200) {
        StatusCode::OK
    } else if answered.iter().any(|e| e["code"] == 200) {
        StatusCode::MULTI_STATUS
    } else {
        StatusCode::NOT_FOUND
    };
    (status, Json(json!({ "events": answered })))
}
