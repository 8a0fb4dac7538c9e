//! `accel demo --from cyborg`: the rolling upgrade whose release N is OpenStack Cyborg
//! 17 itself (openstack-cyborg 17.0.0's own conductor, API and agents, on RabbitMQ, its
//! own database and the real Placement) and whose release N+1 is accel, node by node:
//!
//! 1. release N: Cyborg's conductor, API and agents (Cyborg's fake driver: this machine
//!    has no accelerators) start; a device profile and requests are made through
//!    Cyborg's API and bound on every host;
//! 2. verify: Cyborg's API and Placement agree;
//! 3. the control plane goes to accel: Cyborg's API and conductor stop, `accel db sync`
//!    takes their database in place (or, with `--database-url`, `accel db import-cyborg`
//!    copies it into that database), accel's conductor (serving Cyborg's agents) and API
//!    start; everything Cyborg held is there with its UUIDs, the Cyborg agents keep
//!    reporting, and a bind on a Cyborg agent's host works;
//! 4. before finalization the gated feature is refused, and so is finalization, naming
//!    every host that still runs Cyborg's agent;
//! 5. the agents are replaced host by host by accel's; the devices Cyborg's fake driver
//!    made up stay while requests hold them;
//! 6. finalization: conductor first, then every agent;
//! 7. after it the gated feature works, and a Cyborg 17 agent on a new host is fenced;
//! 8. everything made is deleted.
//!
//! It needs a broker (`--transport-url`), Keystone with Placement in its catalog and a
//! Python with openstack-cyborg 17.0.0 (`scripts/demo-from-cyborg.sh` starts and
//! installs them all).
//!
//! (Long on purpose: the Cyborg services this demo starts and the steps that drive
//! them are read together, top to bottom, as the operator's procedure; the parts shared
//! with `accel demo` are in `deployment.rs` and `scenario.rs`.)

use super::deployment::{bind_patch, discovered, Deployment};
use super::process::{Launcher, Process};
use super::report::Timeline;
use super::{DemoOptions, Error};
use accel_conductor::db::{rp_uuid, DeviceStatus, ListFilter};
use accel_conductor::keystone::{AuthOptions, Session};
use accel_conductor::placement::Placement;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use verso::RequestContext;
use verso_upgrade::admin::Finalize;

/// Where Cyborg 17 and the OpenStack services it needs are.
#[derive(Clone, Debug)]
pub struct CyborgOptions {
    /// A Python with openstack-cyborg 17.0.0 installed (its console scripts beside it).
    pub python: PathBuf,
    /// Keystone's v3 URL; its catalog has Placement.
    pub keystone_url: String,
    /// A service user, admin in project `service`: Cyborg's services and the demo reach
    /// Placement as it.
    pub user: String,
    /// Its password.
    pub password: String,
}

/// The project's script making Cyborg's schema (Cyborg's own `create_schema`).
const CONDUCTOR_SCRIPT: &str = include_str!("../../../cyborg17/python/cyborg_conductor.py");
/// The module of Cyborg driver devices the conductor script imports.
const DEVICES_SCRIPT: &str = include_str!("../../../cyborg17/python/cyborg_devices.py");
/// The project's script serving Cyborg's WSGI API application.
const API_SCRIPT: &str = include_str!("../../../cyborg17/python/cyborg_api.py");
/// Cyborg's API pipeline without Keystone's middleware (the API listens on loopback;
/// the demo's requests carry what keystonemiddleware would set: the admin role in
/// `X-Roles`, Nova's service token's roles in `X-Service-Roles`).
const API_PASTE: &str = "[pipeline:main]\npipeline = request_id api_v2\n\n\
    [app:api_v2]\npaste.app_factory = cyborg.api.app:app_factory\n\n\
    [filter:request_id]\npaste.filter_factory = oslo_middleware:RequestId.factory\n";
/// `[conductor] agent_liveness` of the demo's conductor: how long a silent agent still
/// counts (180 s by default).
const LIVENESS: Duration = Duration::from_secs(8);
/// How long Cyborg's services may take to start (its agents look Placement up first).
const CYBORG_PATIENCE: Duration = Duration::from_secs(90);
/// The project the demo's requests are made in.
const PROJECT: &str = "b1d0c3a2e5f44d6e8a7b9c0d1e2f3a4b";
/// The resource provider name suffix Cyborg's fake driver gives its device's deployable.
const FAKE_DEPLOYABLE: &str = "FakeDevice";

/// Cyborg 17's services, as processes of the test venv's Python.
struct Cyborg {
    dir: PathBuf,
    options: CyborgOptions,
    launcher: Launcher,
    transport_url: String,
    http: reqwest::Client,
    api_base: String,
    api: Option<Process>,
    conductor: Option<Process>,
    agents: BTreeMap<String, Process>,
}

impl Cyborg {
    fn new(scratch: &Path, options: CyborgOptions, transport_url: &str) -> Result<Cyborg, Error> {
        let dir = scratch.join("cyborg");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("cyborg_conductor.py"), CONDUCTOR_SCRIPT)?;
        std::fs::write(dir.join("cyborg_devices.py"), DEVICES_SCRIPT)?;
        std::fs::write(dir.join("cyborg_api.py"), API_SCRIPT)?;
        std::fs::write(dir.join("api-paste.ini"), API_PASTE)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        Ok(Cyborg {
            launcher: Launcher::new(options.python.clone(), scratch.join("logs"))?,
            options,
            transport_url: transport_url.to_owned(),
            http: reqwest::Client::builder().use_rustls_tls().build()?,
            api_base: format!("http://127.0.0.1:{port}"),
            dir,
            api: None,
            conductor: None,
            agents: BTreeMap::new(),
        })
    }

    /// The database Cyborg's conductor and API use: SQLite, its tables by Cyborg's own
    /// `create_schema` (Cyborg's alembic migrations run on MySQL/MariaDB only).
    fn database(&self) -> PathBuf {
        self.dir.join("cyborg.sqlite")
    }

    /// Its database as accel names it.
    fn database_url(&self) -> String {
        format!("sqlite://{}", self.database().display())
    }

    /// Writes `<name>.conf`: the broker, `host`, the database, Placement through
    /// Keystone, and `extra` sections.
    fn conf(&self, name: &str, host: &str, extra: &str) -> Result<PathBuf, Error> {
        let o = &self.options;
        let path = self.dir.join(format!("{name}.conf"));
        std::fs::write(
            &path,
            format!(
                "[DEFAULT]\ntransport_url = {transport}\nhost = {host}\n\
                 \n\
                 [database]\nconnection = sqlite:///{db}\n\n\
                 [placement]\nauth_type = password\nauth_url = {keystone}\nusername = {user}\n\
                 password = {password}\nproject_name = service\nuser_domain_name = Default\n\
                 project_domain_name = Default\nregion_name = RegionOne\n\n{extra}",
                transport = self.transport_url,
                db = self.database().display(),
                keystone = o.keystone_url,
                user = o.user,
                password = o.password,
            ),
        )?;
        Ok(path)
    }

    fn script(&self, name: &str) -> PathBuf {
        self.options.python.with_file_name(name)
    }

    /// Cyborg's schema, made by Cyborg's own code.
    async fn schema(&self) -> Result<(), Error> {
        let conf = self.conf("cyborg-conductor", "cyborg-conductor", "")?;
        let out = tokio::process::Command::new(&self.options.python)
            .arg(self.dir.join("cyborg_conductor.py"))
            .args(["schema", "--config"])
            .arg(&conf)
            .output()
            .await
            .map_err(|e| format!("{}: {e}", self.options.python.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !stdout.contains("schema ready") {
            return Err(format!(
                "Cyborg's create_schema failed: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        Ok(())
    }

    /// Waits until `process`'s log has `needle`; fails with its log if it ends first.
    async fn wait_log(process: &mut Process, needle: &str) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + CYBORG_PATIENCE;
        loop {
            process.ensure_running()?;
            if process.log_text().contains(needle) {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "{} did not log {needle:?} within {CYBORG_PATIENCE:?}; see {}",
                    process.name(),
                    process.log().display()
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn start_conductor(&mut self) -> Result<(), Error> {
        let conf = self.conf("cyborg-conductor", "cyborg-conductor", "")?;
        let mut p = self.launcher.spawn_group(
            &self.script("cyborg-conductor"),
            "cyborg-conductor",
            &["--config-file".into(), conf.display().to_string()],
        )?;
        Self::wait_log(&mut p, "Created RPC server for service").await?;
        self.conductor = Some(p);
        Ok(())
    }

    async fn start_api(&mut self) -> Result<(), Error> {
        let paste = self.dir.join("api-paste.ini");
        let conf = self.conf(
            "cyborg-api",
            "cyborg-api",
            &format!("[api]\napi_paste_config = {}\n", paste.display()),
        )?;
        let listen = self.api_base.trim_start_matches("http://").to_owned();
        let mut p = self.launcher.spawn_group(
            &self.options.python,
            "cyborg-api",
            &[
                self.dir.join("cyborg_api.py").display().to_string(),
                "--config".into(),
                conf.display().to_string(),
                "--listen".into(),
                listen,
            ],
        )?;
        Self::wait_log(&mut p, "serving on").await?;
        self.api = Some(p);
        Ok(())
    }

    async fn start_agent(&mut self, host: &str) -> Result<(), Error> {
        let conf = self.conf(
            &format!("cyborg-agent-{host}"),
            host,
            &format!(
                "[agent]\nenabled_drivers = fake_driver\nresource_provider_name = {host}\n\
                 resource_provider_startup_retries = 0\n"
            ),
        )?;
        let mut p = self.launcher.spawn_group(
            &self.script("cyborg-agent"),
            &format!("cyborg-agent-{host}"),
            &["--config-file".into(), conf.display().to_string()],
        )?;
        Self::wait_log(&mut p, "Created RPC server for service").await?;
        self.agents.insert(host.to_owned(), p);
        Ok(())
    }

    async fn stop_agent(&mut self, host: &str) {
        if let Some(p) = self.agents.remove(host) {
            p.stop().await;
        }
    }

    /// The requests Cyborg's API lists, by UUID.
    async fn arqs(&self) -> Result<BTreeMap<String, Value>, Error> {
        let (status, body) = self
            .call(reqwest::Method::GET, "/v2/accelerator_requests", None)
            .await?;
        Ok(arqs_by_uuid(list(
            "Cyborg's GET /v2/accelerator_requests",
            status,
            &body,
            "arqs",
        )?))
    }

    async fn stop_conductor(&mut self) {
        if let Some(p) = self.conductor.take() {
            p.stop().await;
        }
    }

    async fn stop_control_plane(&mut self) {
        if let Some(p) = self.api.take() {
            p.stop().await;
        }
        if let Some(p) = self.conductor.take() {
            p.stop().await;
        }
    }

    async fn shutdown(&mut self) {
        let hosts: Vec<String> = self.agents.keys().cloned().collect();
        for h in hosts {
            self.stop_agent(&h).await;
        }
        self.stop_control_plane().await;
    }

    /// A call to Cyborg's API as an administrator of the demo's project.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), Error> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.api_base))
            .header("X-Roles", "admin,member,reader,service")
            .header("X-Project-Id", PROJECT)
            .header("X-User-Id", "demo")
            // What keystonemiddleware sets for Nova's service token: binds need it.
            .header("X-Service-Roles", "service")
            .header("OpenStack-API-Version", "accelerator 2.3");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok((status, body))
    }
}

/// A request as an API lists it, in the fields both APIs show alike.
fn arq_view(a: &Value) -> Value {
    json!({
        "uuid": a["uuid"],
        "state": a["state"],
        "device_profile_name": a["device_profile_name"],
        "hostname": a["hostname"],
        "device_rp_uuid": a["device_rp_uuid"],
        "instance_uuid": a["instance_uuid"],
        "attach_handle_type": a["attach_handle_type"],
        "attach_handle_info": a["attach_handle_info"],
    })
}

/// The `key` list of `body`, or an error naming what answered.
fn list<'a>(what: &str, status: u16, body: &'a Value, key: &str) -> Result<&'a Vec<Value>, Error> {
    match body[key].as_array() {
        Some(l) if status == 200 => Ok(l),
        _ => Err(format!("{what}: {status} {body}").into()),
    }
}

/// The requests an API lists, by UUID.
fn arqs_by_uuid(arqs: &[Value]) -> BTreeMap<String, Value> {
    arqs.iter()
        .map(|a| {
            (
                a["uuid"].as_str().unwrap_or_default().to_owned(),
                arq_view(a),
            )
        })
        .collect()
}

fn uuids(list: &[Value]) -> BTreeSet<String> {
    list.iter()
        .filter_map(|v| v["uuid"].as_str().map(str::to_owned))
        .collect()
}

/// What step 1 made through Cyborg, checked again after each step.
struct Baseline {
    devices: BTreeSet<String>,
    arqs: BTreeMap<String, Value>,
    spare: String,
}

/// Runs the scenario; the report says what passed.
pub async fn run(
    options: &DemoOptions,
    cyborg: &CyborgOptions,
    quiet: bool,
) -> Result<super::Report, Error> {
    let transport_url = options
        .transport_url
        .clone()
        .filter(|u| !u.starts_with("memory:"))
        .ok_or("--from cyborg needs a broker: give --transport-url rabbit://...")?;
    let tmp = tempfile::Builder::new()
        .prefix("accel-demo-cyborg-")
        .tempdir()?;
    let scratch = tmp.path().to_owned();
    let mut cy = Cyborg::new(&scratch, cyborg.clone(), &transport_url)?;
    // accel's database: Cyborg's own, taken in place at step 4; or, given
    // `--database-url`, another one Cyborg's rows are imported into.
    let db_url = options
        .database_url
        .clone()
        .unwrap_or_else(|| cy.database_url());
    let mut t = Timeline::new(
        options.agents,
        verso_rpc::transport::amqp::redact(&transport_url),
        accel_conductor::db::redact_url(&db_url),
        quiet,
    );
    t.steps_total(9);
    t.release_n_is_cyborg();
    // Placement outlives the demo: each run's hosts have names of their own.
    let run_id = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let hosts: Vec<String> = (1..=options.agents)
        .map(|i| format!("cy{run_id}-host{i}"))
        .collect();
    for (i, h) in hosts.iter().enumerate() {
        accel_agent::fixture::write_tree(
            &scratch.join("sysfs").join(h),
            &accel_agent::fixture::sample_host(i as u32 + 1),
        )?;
    }
    let mut d = Deployment::new(scratch.clone(), db_url, transport_url.clone(), hosts).await?;
    d.agent_liveness = LIVENESS;
    // Every other host keeps Cyborg's wire at release N+1 (Cyborg 17 plus the seed
    // spec); the others move to accel's.
    d.cyborg_wire_hosts = d.hosts.iter().step_by(2).cloned().collect();
    let session = Session::new(AuthOptions::new(
        &cyborg.keystone_url,
        &cyborg.user,
        &cyborg.password,
        "service",
    ))?;
    let placement = Placement::new(session, None);
    let mut nodes = Vec::new();
    // Ctrl-C (or SIGTERM) stops the scenario, not the clean-up below: Cyborg's services
    // and the compute nodes in Placement would outlive the demo otherwise.
    let outcome = tokio::select! {
        r = steps(&mut d, &mut cy, &placement, &mut nodes, &mut t, run_id) => r,
        () = verso_rpc::shutdown::shutdown_signal() => {
            Err("interrupted: stopping what the demo started".into())
        }
    };
    if let Ok(status) = d.status().await {
        t.components(super::deployment::components(&status));
    }
    let report = t.finish(outcome.err().map(|e| e.to_string()));
    if options.keep {
        let kept = tmp.keep();
        println!(
            "\nthe deployment keeps running: API {}, database {}, files in {}; Ctrl-C ends it",
            d.api.as_ref().map_or("-", |a| a.base.as_str()),
            d.db_url,
            kept.display()
        );
        verso_rpc::shutdown::shutdown_signal().await;
    }
    cy.shutdown().await;
    d.shutdown().await;
    for node in nodes {
        placement.delete_tree(&node).await;
    }
    Ok(report)
}

/// The compute node provider of `host`, as nova-compute makes it.
async fn compute_node(placement: &Placement, host: &str) -> Result<String, Error> {
    let (status, body) = placement
        .call(
            reqwest::Method::POST,
            "/resource_providers",
            Some(&json!({ "name": host })),
        )
        .await?;
    match body["uuid"].as_str() {
        Some(uuid) if status == 200 => Ok(uuid.to_owned()),
        _ => Err(format!("Placement refused the compute node {host}: {status} {body}").into()),
    }
}

async fn steps(
    d: &mut Deployment,
    cy: &mut Cyborg,
    placement: &Placement,
    nodes: &mut Vec<String>,
    t: &mut Timeline,
    run_id: &str,
) -> Result<(), Error> {
    let base = release_n(d, cy, placement, nodes, t).await?;
    verify_release_n(cy, placement, t, &base).await?;
    rust_conductor(cy, t, &base).await?;
    control_plane(d, cy, t, &base).await?;
    before_finalization(d, t).await?;
    replace_agents(d, cy, t, &base).await?;
    finalize(d, t).await?;
    after_finalization(d, cy, placement, nodes, t, run_id).await?;
    destroy(d, t).await
}

/// Step 1.
async fn release_n(
    d: &mut Deployment,
    cy: &mut Cyborg,
    placement: &Placement,
    nodes: &mut Vec<String>,
    t: &mut Timeline,
) -> Result<Baseline, Error> {
    let n = d.hosts.len();
    t.step(
        1,
        format!("release N is OpenStack Cyborg 17: its conductor, API and {n} agents start"),
    );
    for host in &d.hosts {
        nodes.push(compute_node(placement, host).await?);
    }
    t.note(format!(
        "{n} compute nodes in Placement, as nova-compute would have made them"
    ));
    cy.schema().await?;
    cy.start_conductor().await?;
    cy.start_api().await?;
    let bar = t.bar(n as u64, "Cyborg 17 agents (fake driver)");
    for host in d.hosts.clone() {
        cy.start_agent(&host).await?;
        bar.inc(1);
    }
    t.finish_bar(bar, "Cyborg 17 agents started");
    // A report is done when its deployables have their providers (Cyborg's conductor
    // writes the device first, then the deployable, then asks Placement).
    let deadline = tokio::time::Instant::now() + CYBORG_PATIENCE;
    loop {
        let (status, body) = cy
            .call(reqwest::Method::GET, "/v2/deployables", None)
            .await?;
        let with_provider = list("Cyborg's GET /v2/deployables", status, &body, "deployables")?
            .iter()
            .filter(|dep| dep["rp_uuid"].is_string())
            .count();
        if with_provider >= n || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, body) = cy.call(reqwest::Method::GET, "/v2/devices", None).await?;
    let devices = list("Cyborg's GET /v2/devices", status, &body, "devices")?.clone();
    t.expect_eq(
        "devices Cyborg's agents reported (Cyborg's API)",
        devices.len(),
        n,
    )?;
    let (status, _) = cy
        .call(
            reqwest::Method::POST,
            "/v2/device_profiles",
            Some(json!([{
                "name": "demo-fpga",
                "groups": [{"resources:FPGA": "1", "trait:CUSTOM_FAKE_DEVICE": "required"}],
                "description": "one FPGA of Cyborg's fake driver",
            }])),
        )
        .await?;
    t.expect_eq(
        "a device profile created through Cyborg's API (HTTP status)",
        status,
        201,
    )?;
    let mut made = Vec::new();
    for _ in 0..=n {
        let (status, body) = cy
            .call(
                reqwest::Method::POST,
                "/v2/accelerator_requests",
                Some(json!({"device_profile_name": "demo-fpga"})),
            )
            .await?;
        let uuid = body["arqs"][0]["uuid"]
            .as_str()
            .ok_or_else(|| format!("Cyborg's POST /v2/accelerator_requests: {status} {body}"))?;
        made.push(uuid.to_owned());
    }
    let spare = made.pop().ok_or("no request made")?;
    let mut answers = BTreeMap::new();
    for (arq, host) in made.iter().zip(d.hosts.clone()) {
        let rp = rp_uuid(&format!("{host}_{FAKE_DEPLOYABLE}"));
        let patch = bind_patch(arq, &host, Some(&rp));
        let (status, body) = cy
            .call(
                reqwest::Method::PATCH,
                "/v2/accelerator_requests",
                Some(patch),
            )
            .await?;
        *answers
            .entry(format!("{status} {}", error_text(&body)))
            .or_insert(0usize) += 1;
    }
    for (answer, count) in &answers {
        t.note(format!("Cyborg's API answered {count} bind(s): {answer}"));
    }
    if answers.keys().any(|a| a.starts_with("500")) {
        t.note(
            "Cyborg 17 binds, then tells Nova (os-server-external-events); this machine has \
             no Nova, so it answers 500 after the request is Bound",
        );
    }
    let arqs = cy.arqs().await?;
    let bound = arqs.values().filter(|a| a["state"] == "Bound").count();
    t.expect_eq("requests Bound, one per host (Cyborg's API)", bound, n)?;
    t.expect_eq(
        "the spare request Initial (Cyborg's API)",
        arqs.get(&spare).map_or(json!(null), |a| a["state"].clone()),
        json!("Initial"),
    )?;
    Ok(Baseline {
        devices: uuids(&devices),
        arqs,
        spare,
    })
}

/// An API error's text (Cyborg's `error_message` holds JSON text), or empty.
fn error_text(body: &Value) -> String {
    let text = body["error_message"]
        .as_str()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|e| e["faultstring"].as_str().map(str::to_owned))
        .unwrap_or_default();
    // A remote error's text ends with the Python traceback: its first line says it.
    let line = text.lines().next().unwrap_or_default();
    let line = line.split(" ['Traceback").next().unwrap_or_default();
    line.chars().take(160).collect()
}

/// Step 2.
async fn verify_release_n(
    cy: &Cyborg,
    placement: &Placement,
    t: &mut Timeline,
    base: &Baseline,
) -> Result<(), Error> {
    t.step(2, "verify release N: Cyborg's API and Placement agree");
    let (status, body) = cy
        .call(reqwest::Method::GET, "/v2/deployables", None)
        .await?;
    let deployables = list("Cyborg's GET /v2/deployables", status, &body, "deployables")?;
    let mut providers = 0;
    for dep in deployables {
        let rp = dep["rp_uuid"].as_str().unwrap_or_default();
        let (status, inventory) = placement
            .call(
                reqwest::Method::GET,
                &format!("/resource_providers/{rp}/inventories"),
                None,
            )
            .await?;
        if status == 200 && inventory["inventories"]["FPGA"]["total"] == dep["num_accelerators"] {
            providers += 1;
        }
    }
    t.expect_eq(
        "deployables with their FPGA inventory in Placement",
        providers,
        base.devices.len(),
    )?;
    t.expect_eq(
        "deployables Cyborg's API lists",
        deployables.len(),
        base.devices.len(),
    )?;
    Ok(())
}

/// accel's API's requests, by UUID.
async fn accel_arqs(d: &Deployment) -> Result<BTreeMap<String, Value>, Error> {
    let (status, body) = d
        .http(reqwest::Method::GET, "/v2/accelerator_requests", None)
        .await?;
    Ok(arqs_by_uuid(list(
        "accel's GET /v2/accelerator_requests",
        status,
        &body,
        "arqs",
    )?))
}

/// accel's API's device UUIDs.
async fn accel_devices(d: &Deployment) -> Result<BTreeSet<String>, Error> {
    let (status, body) = d.http(reqwest::Method::GET, "/v2/devices", None).await?;
    Ok(uuids(list(
        "accel's GET /v2/devices",
        status,
        &body,
        "devices",
    )?))
}

/// Step 3.
async fn rust_conductor(cy: &mut Cyborg, t: &mut Timeline, base: &Baseline) -> Result<(), Error> {
    t.step(
        3,
        "Cyborg's conductor, then its API, replaced by accel's Cyborg 17 in Rust, on the same cyborg.conf and database; Cyborg's agents unchanged",
    );
    cy.stop_conductor().await;
    let conf = cy.conf("cyborg-conductor", "cyborg-conductor", "")?;
    let config = accel_cyborg17_conductor::config::Config::load(&conf)?;
    let running = accel_cyborg17_conductor::run::start(&config).await?;
    t.expect_eq(
        "Cyborg 17's database taken as it is (no schema made)",
        running.schema_made,
        false,
    )?;
    let outcome = match rust_conductor_checks(cy, t, base, "Cyborg's API").await {
        Ok(()) => rust_api(cy, t, base).await,
        Err(e) => Err(e),
    };
    running.stop().await;
    outcome
}

/// Cyborg's API process stopped and `accel-cyborg17-api` started in its place, at the
/// same address on the same file (noauth, as the demo's Cyborg API pipeline has no
/// Keystone middleware); the same checks through it.
async fn rust_api(cy: &mut Cyborg, t: &mut Timeline, base: &Baseline) -> Result<(), Error> {
    if let Some(p) = cy.api.take() {
        p.stop().await;
    }
    let (host, port) = cy
        .api_base
        .trim_start_matches("http://")
        .rsplit_once(':')
        .map(|(h, p)| (h.to_owned(), p.to_owned()))
        .ok_or("the API's address has no port")?;
    let conf = cy.conf(
        "accel-cyborg17-api",
        "cyborg-api",
        &format!("[api]\nhost_ip = {host}\nport = {port}\nauth_strategy = noauth\n"),
    )?;
    let config = accel_cyborg17_api::config::ApiConfig::load(&conf)?;
    let api = accel_cyborg17_api::run::start(&config).await?;
    t.note(format!(
        "accel-cyborg17-api serves Cyborg's v2 API on http://{}",
        api.addr
    ));
    let outcome = rust_conductor_checks(cy, t, base, "accel's Cyborg 17 API").await;
    api.stop().await?;
    outcome
}

async fn rust_conductor_checks(
    cy: &Cyborg,
    t: &mut Timeline,
    base: &Baseline,
    api: &str,
) -> Result<(), Error> {
    let (status, body) = cy.call(reqwest::Method::GET, "/v2/devices", None).await?;
    t.expect_eq(
        format!("devices {api} lists, unchanged"),
        uuids(list("Cyborg's GET /v2/devices", status, &body, "devices")?) == base.devices,
        true,
    )?;
    let (status, _) = cy
        .call(
            reqwest::Method::POST,
            "/v2/device_profiles",
            Some(json!([{"name": "demo-rust-conductor", "groups": [{"resources:FPGA": "1"}]}])),
        )
        .await?;
    t.expect_eq(
        format!("a profile made through {api} by accel's conductor (HTTP status)"),
        status,
        201,
    )?;
    let (status, body) = cy
        .call(
            reqwest::Method::POST,
            "/v2/accelerator_requests",
            Some(json!({"device_profile_name": "demo-rust-conductor"})),
        )
        .await?;
    t.expect_eq(
        format!("a request made through {api} by accel's conductor (HTTP status)"),
        status,
        201,
    )?;
    let made = body["arqs"][0]["uuid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (status, _) = cy
        .call(
            reqwest::Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={made}"),
            None,
        )
        .await?;
    let (deleted, _) = cy
        .call(
            reqwest::Method::DELETE,
            "/v2/device_profiles/demo-rust-conductor",
            None,
        )
        .await?;
    t.expect_eq(
        format!("the request and the profile deleted through {api} (HTTP statuses)"),
        format!("{status} {deleted}"),
        "204 204".to_owned(),
    )?;
    let arqs = cy.arqs().await?;
    t.expect_eq(
        format!("requests {api} lists, unchanged (the bound ones still Bound)"),
        arqs == base.arqs,
        true,
    )?;
    Ok(())
}

/// Step 4.
async fn control_plane(
    d: &mut Deployment,
    cy: &mut Cyborg,
    t: &mut Timeline,
    base: &Baseline,
) -> Result<(), Error> {
    let in_place = d.db_url == cy.database_url();
    t.step(
        4,
        format!(
            "the control plane goes to accel: Cyborg's database {}; Cyborg's agents keep reporting",
            if in_place {
                "taken in place"
            } else {
                "imported"
            }
        ),
    );
    cy.stop_control_plane().await;
    if in_place {
        super::scenario::sync_in_place(d, t).await?;
    } else {
        let from = cy.database_url();
        let summary = match accel_conductor::cyborg_import::import(&from, &d.db, false).await? {
            accel_conductor::cyborg_import::Imported::Done(s) => s,
            accel_conductor::cyborg_import::Imported::Already(_) => {
                return Err("accel's new database already held Cyborg's rows".into())
            }
        };
        t.note(format!(
            "accel db import-cyborg: {} devices, {} attach handles, {} attributes, {} profiles, {} requests",
            summary.devices,
            summary.attach_handles,
            summary.attributes,
            summary.device_profiles,
            summary.accelerator_requests
        ));
    }
    super::scenario::start_next_control_plane(
        d,
        t,
        "accel conductor software/apparent version (pre-finalized: Cyborg 17 is release N)",
    )
    .await?;
    if in_place {
        // The control plane can move a service at a time: Cyborg 17's own API, started
        // again on the database taken in place, works on accel's conductor (which serves
        // Cyborg's whole conductor API) beside accel's API.
        cy.start_api().await?;
        t.note("Cyborg 17's own API started again on the database taken in place, beside accel's API: its calls go to accel's conductor");
        let checked = rust_conductor_checks(cy, t, base, "Cyborg's own API").await;
        if let Some(p) = cy.api.take() {
            p.stop().await;
        }
        checked?;
    }
    t.expect_eq(
        "devices accel's API lists are Cyborg's (same UUIDs)",
        accel_devices(d).await? == base.devices,
        true,
    )?;
    let arqs = accel_arqs(d).await?;
    let differs = base
        .arqs
        .iter()
        .find(|(uuid, a)| arqs.get(*uuid) != Some(*a))
        .map(|(uuid, a)| {
            format!(
                "Cyborg {a}, accel {}",
                arqs.get(uuid).unwrap_or(&Value::Null)
            )
        });
    t.check(
        "requests accel's API lists are Cyborg's: UUID, state, host, provider, instance, attach handle",
        differs.is_none() && arqs.len() == base.arqs.len(),
        differs.unwrap_or_else(|| format!("{} requests", arqs.len())),
    )?;
    // Cyborg's agents report every period to accel's conductor now (cyborg-conductor on
    // exchange cyborg): each is in the fleet record as release N. Their period is
    // Cyborg 17's fixed 60 s (its agent's report task takes no interval option).
    let taken = d.db.deployables(&ListFilter::default()).await?;
    t.note("waiting for the Cyborg agents' next reports (every 60 s, Cyborg 17's period)");
    let deadline = tokio::time::Instant::now() + CYBORG_PATIENCE;
    let heard = loop {
        let status = d.status().await?;
        let heard = status
            .clients
            .iter()
            .filter(|m| d.hosts.contains(&m.id) && m.software == 1)
            .count();
        if heard == d.hosts.len() || tokio::time::Instant::now() > deadline {
            break heard;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    t.expect_eq(
        "Cyborg 17 agents reporting to accel's conductor (release N in the fleet record)",
        heard,
        d.hosts.len(),
    )?;
    t.expect_eq(
        "devices after their reports (same UUIDs)",
        accel_devices(d).await? == base.devices,
        true,
    )?;
    t.expect_eq(
        "their reports found Cyborg's rows as taken over (deployables unchanged)",
        d.db.deployables(&ListFilter::default()).await? == taken,
        true,
    )?;
    let host = d.hosts[0].clone();
    let rp = rp_uuid(&format!("{host}_{FAKE_DEPLOYABLE}"));
    let status = d.bind_to(&base.spare, &host, Some(&rp)).await?;
    t.expect_eq(
        format!(
            "accel binds Cyborg's spare request on {host}, a Cyborg agent's host (HTTP status)"
        ),
        status,
        202,
    )?;
    Ok(())
}

/// Step 5.
async fn before_finalization(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        5,
        "before finalization: the gated feature and finalization are refused while Cyborg agents run",
    );
    let refused = super::scenario::gated_feature(d).await;
    t.check(
        "PCI unmanaged mode refused before finalization",
        matches!(&refused, Err(kind) if kind == "NotSupportedBeforeFinalization"),
        format!("{refused:?}"),
    )?;
    super::scenario::finalize_refused(
        d,
        t,
        "finalization refused; the blockers (every Cyborg agent's host)",
        d.hosts.clone(),
    )
    .await
}

/// Step 6.
async fn replace_agents(
    d: &mut Deployment,
    cy: &mut Cyborg,
    t: &mut Timeline,
    base: &Baseline,
) -> Result<(), Error> {
    t.step(6, "replace Cyborg's agents by accel's, host by host");
    let bar = t.bar(d.hosts.len() as u64, "hosts on accel's agent");
    let mut fixture = 0;
    for host in d.hosts.clone() {
        cy.stop_agent(&host).await;
        fixture += discovered(&d.sysfs(&host))?;
        d.start_agent_next(&host).await?;
        bar.inc(1);
    }
    t.finish_bar(bar, "every host on accel's agent");
    t.note(format!(
        "on Cyborg's wire (Cyborg 17 plus the seed spec): {}; on accel's: the others",
        d.cyborg_wire_hosts
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // A host on Cyborg's wire serves Cyborg's agent API at 1.1: the NVMe feature's
    // `cleanup_device` answers (a device it does not have: NotFound).
    if let Some(host) = d.cyborg_wire_hosts.iter().next() {
        let answered = cyborg_agent_api_1_1(&d.transport_url, host).await;
        t.check(
            "a host on Cyborg's wire answers Cyborg's agent API 1.1 (cleanup_device)",
            answered.as_deref() == Ok("NotFound"),
            format!("{answered:?}"),
        )?;
    }
    let status = d.status().await?;
    let upgraded = status
        .clients
        .iter()
        .filter(|m| d.hosts.contains(&m.id) && m.software == 2)
        .count();
    t.expect_eq("agents on software 2", upgraded, d.hosts.len())?;
    // Cyborg's fake driver made its FPGAs up: accel's agents discover the hosts' own
    // devices instead. A device a request holds is never taken away by a report: each
    // stays, missing and then lost, until its request is released.
    let reported = d.report_all().await?;
    t.expect_eq("devices accel's agents discover", reported, fixture)?;
    let devices = d.db.devices(&ListFilter::default()).await?;
    let kept = devices
        .iter()
        .filter(|dev| base.devices.contains(&dev.uuid) && dev.status != DeviceStatus::Available)
        .count();
    t.expect_eq(
        "Cyborg's fake FPGAs kept while bound, missing or lost",
        kept,
        base.devices.len(),
    )?;
    let arqs = accel_arqs(d).await?;
    let bound = arqs.values().filter(|a| a["state"] == "Bound").count();
    t.expect_eq("requests still Bound", bound, d.hosts.len() + 1)?;
    Ok(())
}

/// Cyborg's `cleanup_device` (agent API 1.1) of a device `host` does not have, on
/// Cyborg's exchange: the kind of the remote error it answers.
async fn cyborg_agent_api_1_1(transport_url: &str, host: &str) -> Result<String, String> {
    use accel_objects::cyborg::{AgentApi, CleanupDevice};
    let transport = verso_rpc::transport::transport_from_url(
        transport_url,
        Some(accel_cyborg17::rpc::CONTROL_EXCHANGE),
    )
    .await
    .map_err(|e| e.to_string())?;
    let answer = verso_rpc::RpcClient::for_api::<AgentApi>(
        transport.clone(),
        accel_cyborg17::rpc::AGENT_TOPIC,
    )
    .timeout(Duration::from_secs(20))
    .prepare()
    .server(host)
    .call_method(
        &RequestContext::new("req-demo-cleanup-device"),
        CleanupDevice {
            device_uuid: uuid::Uuid::new_v4().to_string(),
        },
    )
    .await;
    transport.close().await;
    match answer {
        Err(verso_rpc::RpcError::Remote(r)) => Ok(r.kind),
        Ok(()) => Err("cleanup_device of no device succeeded".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Step 6.
async fn finalize(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(7, "finalize: conductor first, then every agent");
    let ctx = RequestContext::new("req-demo-finalize");
    let state = d.upgrade.call_method(&ctx, Finalize {}).await?;
    t.note(format!("finalize answered {state:?}"));
    let status = d.status().await?;
    t.expect_eq(
        "conductor finalized first (apparent version)",
        status.server.apparent,
        2,
    )?;
    super::scenario::agents_finalized(d, t).await
}

/// Step 7.
async fn after_finalization(
    d: &mut Deployment,
    cy: &mut Cyborg,
    placement: &Placement,
    nodes: &mut Vec<String>,
    t: &mut Timeline,
    run_id: &str,
) -> Result<(), Error> {
    t.step(
        8,
        "after finalization: the gated feature works; a Cyborg 17 agent on a new host is fenced",
    );
    let done = super::scenario::gated_feature(d).await;
    t.check(
        "PCI unmanaged mode accepted after finalization",
        done.is_ok(),
        format!("{done:?}"),
    )?;
    let late = format!("cy{run_id}-late");
    nodes.push(compute_node(placement, &late).await?);
    cy.start_agent(&late).await?;
    let fenced = {
        let deadline = tokio::time::Instant::now() + CYBORG_PATIENCE;
        loop {
            let p = cy.agents.get_mut(&late).ok_or("the late agent")?;
            let log = p.log_text();
            if log.contains("Fenced") || tokio::time::Instant::now() > deadline {
                break log.contains("Fenced");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    t.check(
        format!("{late}'s Cyborg 17 agent: its report refused (Fenced)"),
        fenced,
        "its log names the Fenced refusal",
    )?;
    let stored =
        d.db.devices(&ListFilter {
            host: Some(late.clone()),
            ..ListFilter::default()
        })
        .await?;
    t.expect_eq(
        format!("devices of {late} in accel's database"),
        stored.len(),
        0,
    )?;
    cy.stop_agent(&late).await;
    Ok(())
}

/// Step 8.
async fn destroy(d: &mut Deployment, t: &mut Timeline) -> Result<(), Error> {
    t.step(
        9,
        "delete everything made; the fake FPGAs go with their last request",
    );
    let arqs: Vec<String> = accel_arqs(d).await?.into_keys().collect();
    let (status, _) = d
        .http(
            reqwest::Method::DELETE,
            &format!("/v2/accelerator_requests?arqs={}", arqs.join(",")),
            None,
        )
        .await?;
    t.expect_eq("requests deleted (HTTP status)", status, 204)?;
    let (status, _) = d
        .http(
            reqwest::Method::DELETE,
            "/v2/device_profiles/demo-fpga",
            None,
        )
        .await?;
    t.expect_eq("profile deleted (HTTP status)", status, 204)?;
    // The next reports no longer have a request holding the fake FPGAs.
    let fixture = d.report_all().await?;
    let census = d.census().await?;
    t.expect_eq(
        "devices left: the hosts' own (the fake FPGAs deleted)",
        census.devices as u64,
        fixture,
    )?;
    t.expect_eq("attach handles in use", census.handles_in_use, 0)?;
    Ok(())
}
