//! A test's own Nova (feature `testing`): the compute API calls that OpenStack clients
//! and accel's conductor make (version discovery, a server by id or by name,
//! `POST /os-server-external-events`) on a free loopback port. Nova itself does not run
//! in the tests: it needs a hypervisor. Register [`Nova::url`] in the test Keystone's
//! catalog (`accel_keystone::testing::Catalog`) and clients find it as they find a real
//! Nova, or give it to the conductor as `[nova] endpoint_override`.
//!
//! ```no_run
//! # async fn example() {
//! use accel_conductor::testing::nova::{Answer, Nova};
//! let nova = Nova::builder()
//!     .server("3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b", "accel-vm")
//!     .answer("9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c01", Answer::NoHost)
//!     .keystone("http://127.0.0.1:55000/v3")
//!     .start()
//!     .await;
//! let compute_url = nova.url();
//! // ... the events the conductor sent there:
//! let received = nova.of("3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b");
//! # }
//! ```
//!
//! Each request to `os-server-external-events` needs an `X-Auth-Token` (401 without
//! one, as behind Nova's keystonemiddleware); with [`NovaBuilder::keystone`], the test
//! Keystone checks it (401 when it refuses it). Every other request is recorded
//! ([`Received`]) before it is answered. Each event is answered as its instance's
//! [`Answer`]: the one the test scripted, else [`Answer::Accept`] for a server the
//! test named and [`Answer::NotFound`] for any other.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How the fake Nova answers the events of one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200: each event accepted (a server the test named, by default).
    Accept,
    /// 503 to the first request naming the instance, then as [`Answer::Accept`].
    UnavailableOnce,
    /// 207 with 422 for each event: the instance has no host yet.
    NoHost,
    /// 404: no such instance (any instance neither named nor scripted, by default).
    NotFound,
    /// Recorded at once, answered as [`Answer::Accept`] once [`Nova::release`] is
    /// called: a slow Nova.
    Held,
}

/// One `os-server-external-events` request the fake Nova took.
#[derive(Clone, Debug)]
pub struct Received {
    /// Its `OpenStack-API-Version` header (`compute 2.82`, as accel sends it).
    pub microversion: Option<String>,
    /// The name of the user whose token it carried, as Keystone says (only with
    /// [`NovaBuilder::keystone`]).
    pub token_user: Option<String>,
    /// Its JSON body (`{"events": [...]}`).
    pub body: Value,
}

impl Received {
    /// Whether one of its events is of `instance` (its `server_uuid`).
    fn names(&self, instance: &str) -> bool {
        events_of(&self.body).any(|e| e["server_uuid"] == instance)
    }
}

/// What a fake Nova will be: its servers, scripted answers and token check.
/// [`Nova::builder`] makes one, [`NovaBuilder::start`] serves it.
#[derive(Debug, Default)]
pub struct NovaBuilder {
    servers: HashMap<String, String>,
    answers: HashMap<String, Answer>,
    keystone: Option<String>,
}

impl NovaBuilder {
    /// A server with `id` and `name`: shown by id (`GET /servers/{id}`), listed by name
    /// (`GET /servers?name=`, `/servers/detail`), its events accepted unless scripted
    /// otherwise.
    pub fn server(mut self, id: &str, name: &str) -> Self {
        self.servers.insert(id.to_owned(), name.to_owned());
        self
    }

    /// Answers the events of `instance` as `answer` (the instance need not be a server).
    pub fn answer(mut self, instance: &str, answer: Answer) -> Self {
        self.answers.insert(instance.to_owned(), answer);
        self
    }

    /// Has the Keystone at `url` (with or without `/v3`) check every event request's
    /// token, as Nova's keystonemiddleware does, and records the token's user.
    pub fn keystone(mut self, url: &str) -> Self {
        self.keystone = Some(url.trim_end_matches('/').trim_end_matches("/v3").to_owned());
        self
    }

    /// Serves the fake Nova on a free loopback port, on the current tokio runtime (it
    /// stops when the returned [`Nova`] is dropped).
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(self) -> Nova {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the fake Nova");
        let addr = listener.local_addr().expect("the fake Nova's address");
        let url = format!("http://{addr}/compute/v2.1");
        let shared = Arc::new(Shared {
            servers: self.servers,
            answers: self.answers,
            keystone: self.keystone,
            http: reqwest::Client::new(),
            received: Mutex::default(),
            released: tokio::sync::watch::channel(false).0,
            url: url.clone(),
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
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Nova { shared, url, task }
    }
}

/// A fake Nova being served: its URL, what it received, and the release of
/// [`Answer::Held`] answers. Dropped, it stops serving.
#[derive(Debug)]
pub struct Nova {
    shared: Arc<Shared>,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Nova {
    /// A fake Nova with no servers, no scripted answers and no token check.
    pub fn builder() -> NovaBuilder {
        NovaBuilder::default()
    }

    /// The compute endpoint (`http://127.0.0.1:PORT/compute/v2.1`), as a catalog names
    /// it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every `os-server-external-events` request recorded so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received().clone()
    }

    /// The recorded requests with an event of `instance`, in arrival order.
    pub fn of(&self, instance: &str) -> Vec<Received> {
        self.shared
            .received()
            .iter()
            .filter(|r| r.names(instance))
            .cloned()
            .collect()
    }

    /// Lets the [`Answer::Held`] answers go, those waiting and any later.
    pub fn release(&self) {
        self.shared.released.send_replace(true);
    }
}

impl Drop for Nova {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The fake Nova's state, shared with its handlers.
#[derive(Debug)]
struct Shared {
    /// Server id to name.
    servers: HashMap<String, String>,
    answers: HashMap<String, Answer>,
    /// Keystone's URL without `/v3`, when tokens are checked.
    keystone: Option<String>,
    http: reqwest::Client,
    received: Mutex<Vec<Received>>,
    /// Becomes `true` once [`Nova::release`] is called.
    released: tokio::sync::watch::Sender<bool>,
    url: String,
}

impl Shared {
    fn received(&self) -> std::sync::MutexGuard<'_, Vec<Received>> {
        // A handler that panicked holding the lock left whole entries: keep reading.
        self.received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn answer(&self, instance: &str) -> Answer {
        match self.answers.get(instance) {
            Some(answer) => *answer,
            None if self.servers.contains_key(instance) => Answer::Accept,
            None => Answer::NotFound,
        }
    }

    fn server(&self, id: &str, name: &str) -> Value {
        json!({
            "id": id,
            "name": name,
            "status": "ACTIVE",
            "links": [{"rel": "self", "href": format!("{}/servers/{id}", self.url)}],
        })
    }

    fn version(&self) -> Value {
        json!({
            "id": "v2.1",
            "status": "CURRENT",
            "version": "2.96",
            "min_version": "2.1",
            "updated": "2013-07-23T11:33:21Z",
            "links": [{"rel": "self", "href": format!("{}/", self.url)}],
        })
    }

    /// The user Keystone says `token` is of (`Ok(None)` without a check), or `Err` when
    /// Keystone refuses the token.
    async fn token_user(&self, token: &str) -> Result<Option<String>, ()> {
        let Some(keystone) = &self.keystone else {
            return Ok(None);
        };
        // The service's own token checks itself: enough for a test.
        let r = self
            .http
            .get(format!("{keystone}/v3/auth/tokens"))
            .header("X-Auth-Token", token)
            .header("X-Subject-Token", token)
            .send()
            .await
            .expect("the test Keystone answers the fake Nova's token check");
        if r.status() != 200 {
            return Err(());
        }
        let v: Value = r.json().await.expect("Keystone's token body");
        Ok(v["token"]["user"]["name"].as_str().map(str::to_owned))
    }
}

fn events_of(body: &Value) -> impl Iterator<Item = &Value> {
    body["events"].as_array().into_iter().flatten()
}

async fn versions(State(nova): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({ "versions": [nova.version()] }))
}

async fn version(State(nova): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({ "version": nova.version() }))
}

async fn show(
    State(nova): State<Arc<Shared>>,
    Path(id): Path<String>,
) -> (StatusCode, Json<Value>) {
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
    State(nova): State<Arc<Shared>>,
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

/// `POST /os-server-external-events`: the token checked, the request recorded, then
/// each event answered as its instance's [`Answer`]: 503 when one is
/// [`Answer::UnavailableOnce`] named for the first time, else each event's code (200,
/// 422 or 404) in a 200 when all are 200, a 207 when some are 200 or 422, a 404 when
/// all are 404.
async fn events(
    State(nova): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let Some(token) = header("x-auth-token") else {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "no token"})));
    };
    let Ok(token_user) = nova.token_user(&token).await else {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "bad token"})),
        );
    };
    let instances: Vec<String> = events_of(&body)
        .filter_map(|e| e["server_uuid"].as_str().map(str::to_owned))
        .collect();
    let first_time = {
        let mut received = nova.received();
        received.push(Received {
            microversion: header("openstack-api-version"),
            token_user,
            body: body.clone(),
        });
        let asked = |instance: &str| received.iter().filter(|r| r.names(instance)).count();
        instances
            .iter()
            .any(|i| nova.answer(i) == Answer::UnavailableOnce && asked(i) == 1)
    };
    if first_time {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": "later"})),
        );
    }
    if instances.iter().any(|i| nova.answer(i) == Answer::Held) {
        // The sender is gone only when `Shared` is, and the handler holds it.
        let _ = nova
            .released
            .subscribe()
            .wait_for(|released| *released)
            .await;
    }
    let answered: Vec<Value> = events_of(&body)
        .map(|e| {
            let code = match e["server_uuid"].as_str().map(|i| nova.answer(i)) {
                Some(Answer::NoHost) => 422,
                Some(Answer::NotFound) | None => 404,
                Some(_) => 200,
            };
            let mut e = e.clone();
            e["code"] = json!(code);
            e
        })
        .collect();
    if answered.iter().all(|e| e["code"] == 404) {
        return (
            StatusCode::NOT_FOUND,
            Json(
                json!({"itemNotFound": {"code": 404, "message": "No instances found for any event"}}),
            ),
        );
    }
    let status = if answered.iter().all(|e| e["code"] == 200) {
        StatusCode::OK
    } else {
        StatusCode::MULTI_STATUS
    };
    (status, Json(json!({ "events": answered })))
}
