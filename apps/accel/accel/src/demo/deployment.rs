//! The deployment the demo upgrades: release N (OpenStack Cyborg 17 in Rust:
//! `accel-cyborg17-conductor`, `-api` and `-agent`, always in this process) and release
//! N+1 (accel's conductor, API and agents: in this process on the memory transport, or
//! as processes of this binary over a real broker), their configuration, and starting,
//! stopping and replacing them. The steps are in [`super::scenario`].

use super::process::{Launcher, Process};
use super::report::Component;
use super::Error;
use accel_conductor::census::Census;
use accel_conductor::Db;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::transport::Transport;
use verso_rpc::RpcClient;
use verso_upgrade::admin::Status;
use verso_upgrade::coordinator::DeploymentStatus;

/// How often in-process agents heartbeat and report (a minute in production; agents
/// that are processes use a second, the smallest the configuration takes).
pub(super) const AGENT_INTERVAL: Duration = Duration::from_millis(300);
/// How often agents scan for handles left in `cleaning`: long, so the NVMe cleanup of
/// step 8 shows it came by `cleanup_device` (agent RPC 1.1), not by the scan.
pub(super) const SCAN_INTERVAL: Duration = Duration::from_secs(120);
/// `[conductor] agent_liveness` of the demo's N+1 conductor (180 s by default): how long
/// a silent agent still counts, and so how long after a host's N+1 agent stopped
/// heartbeating its Cyborg 17 agent's reports count it as release N again (a live
/// heartbeat outranks a report, which an N+1 agent on Cyborg's wire also sends).
pub(super) const LIVENESS: Duration = Duration::from_secs(3);
/// How long the demo waits for something the deployment does in the background.
pub(super) const PATIENCE: Duration = Duration::from_secs(30);
/// accel's control exchange (the binary's default `[transport] control_exchange`).
pub(super) const CONTROL_EXCHANGE: &str = "accel";
/// The demo's NVMe cleanup command: it waits a second and succeeds. It never touches a
/// disk (a deployment configures `nvme format`/`sanitize` or its own tool).
pub(super) const CLEANUP_SCRIPT: &str = "#!/bin/sh\n# accel demo: stands in for a secure erase of \"$1\"; touches nothing.\nsleep 1\nexit 0\n";

/// A release N or N+1 conductor.
pub(super) enum ConductorNode {
    /// Cyborg 17's, in Rust.
    N(accel_cyborg17_conductor::run::Running),
    /// accel's, with its server of Cyborg's agents' `report_data` (`[cyborg]
    /// serve_agents`).
    Next(
        accel_conductor::runtime::RunningConductor,
        verso_rpc::ServerHandle,
    ),
    Process(Process),
}

/// A release N or N+1 agent.
pub(super) enum AgentNode {
    /// Cyborg 17's, in Rust.
    N(accel_cyborg17_agent::run::Running),
    Next(accel_agent::service::RunningAgent),
    Process(Process),
}

impl AgentNode {
    pub(super) async fn stop(self) {
        match self {
            AgentNode::N(a) => a.stop().await,
            AgentNode::Next(a) => a.stop().await,
            AgentNode::Process(p) => p.stop().await,
        }
    }
}

/// The API.
pub(super) struct ApiNode {
    pub(super) base: String,
    pub(super) server: ApiServer,
}

pub(super) enum ApiServer {
    /// Cyborg 17's, in Rust.
    N(accel_cyborg17_api::run::Running),
    Next {
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<()>,
    },
    Process(Box<Process>),
}

/// Everything the demo runs, and its handles on it.
pub(super) struct Deployment {
    pub(super) scratch: PathBuf,
    pub(super) db_url: String,
    pub(super) transport_url: String,
    pub(super) db: Db,
    /// On accel's control exchange.
    pub(super) transport: Arc<dyn Transport>,
    /// On Cyborg's (`cyborg`): release N, and accel's agents on Cyborg's wire. The
    /// memory transport has no exchanges: there it is `transport` itself.
    pub(super) cyborg_transport: Arc<dyn Transport>,
    /// `Some`: every component is a process of this binary (a real broker).
    pub(super) launcher: Option<Launcher>,
    pub(super) http: reqwest::Client,
    pub(super) api: Option<ApiNode>,
    pub(super) conductor: Option<ConductorNode>,
    pub(super) agents: BTreeMap<String, AgentNode>,
    pub(super) hosts: Vec<String>,
    pub(super) upgrade: RpcClient,
    pub(super) cleanup_command: PathBuf,
    /// The N+1 conductor's `[conductor] agent_liveness`.
    pub(super) agent_liveness: Duration,
    /// Hosts whose release N+1 agent speaks Cyborg's wire (Cyborg 17 plus the seed
    /// spec, the agent's default); the others speak accel's own (`[cyborg]
    /// report_to_cyborg = false`).
    pub(super) cyborg_wire_hosts: std::collections::BTreeSet<String>,
}

pub(super) fn host_name(i: u32) -> String {
    format!("host{i}")
}

pub(super) fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// A free loopback port for a process's API.
fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Deployment {
    /// A deployment of `hosts` on `db_url` and `transport_url` (`memory://`: every
    /// component in this process; a broker: each a process of this binary), with no
    /// component running yet.
    pub(super) async fn new(
        scratch: PathBuf,
        db_url: String,
        transport_url: String,
        hosts: Vec<String>,
    ) -> Result<Deployment, Error> {
        let transport =
            verso_rpc::transport::transport_from_url(&transport_url, Some(CONTROL_EXCHANGE))
                .await?;
        let in_process = transport_url.starts_with("memory:");
        let cyborg_transport = match in_process {
            true => transport.clone(),
            false => {
                verso_rpc::transport::transport_from_url(
                    &transport_url,
                    Some(accel_cyborg17::rpc::CONTROL_EXCHANGE),
                )
                .await?
            }
        };
        let launcher = match in_process {
            true => None,
            false => Some(Launcher::new(
                std::env::current_exe()?,
                scratch.join("logs"),
            )?),
        };
        let cleanup_command = scratch.join("demo-cleanup.sh");
        std::fs::write(&cleanup_command, CLEANUP_SCRIPT)?;
        make_executable(&cleanup_command)?;
        Ok(Deployment {
            db: Db::connect_within(&db_url, Duration::from_secs(10)).await?,
            scratch,
            db_url,
            transport_url,
            launcher,
            transport: transport.clone(),
            cyborg_transport,
            http: reqwest::Client::builder().use_rustls_tls().build()?,
            api: None,
            conductor: None,
            agents: BTreeMap::new(),
            hosts,
            upgrade: RpcClient::for_api::<verso_upgrade::admin::UpgradeApi>(
                transport,
                accel_objects::rpc::UPGRADE_TOPIC,
            )
            .timeout(Duration::from_secs(10)),
            cleanup_command,
            agent_liveness: LIVENESS,
            cyborg_wire_hosts: std::collections::BTreeSet::new(),
        })
    }

    pub(super) fn sysfs(&self, host: &str) -> PathBuf {
        self.scratch.join("sysfs").join(host)
    }

    pub(super) fn state_dir(&self) -> PathBuf {
        self.scratch.join("state")
    }

    /// `--set` options every release N+1 process gets.
    pub(super) fn next_settings(&self) -> Vec<String> {
        vec![
            "--set".into(),
            format!("database.url={}", self.db_url),
            "--set".into(),
            format!("transport.url={}", self.transport_url),
        ]
    }

    /// Waits until the conductor answers `upgrade_status` at `software`.
    pub(super) async fn wait_conductor(&mut self, software: u32) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(ConductorNode::Process(p)) = &mut self.conductor {
                p.ensure_running()?;
            }
            match self.status().await {
                Ok(s) if s.server.software == software => return Ok(()),
                _ if tokio::time::Instant::now() > deadline => {
                    return Err(format!("the conductor did not answer within {PATIENCE:?}").into())
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Release N's configuration, as Cyborg's `cyborg.conf` would give it: the broker,
    /// the database, no Placement and no Nova (the demo runs no OpenStack: the
    /// conductor names each deployable's provider without making it, and binds end
    /// without Nova's event; `accel_cyborg17_conductor::config` says more).
    pub(super) fn cyborg_config(&self) -> accel_cyborg17_conductor::config::Config {
        accel_cyborg17_conductor::config::Config {
            transport_url: self.transport_url.clone(),
            host: Some("cyborg-conductor".into()),
            database_url: self.db_url.clone(),
            placement: None,
            nova: None,
            glance_endpoint: None,
            agent_timeout: PATIENCE,
        }
    }

    /// Release N's conductor: Cyborg 17's, in Rust (it makes Cyborg 17's schema in the
    /// empty database).
    pub(super) async fn start_conductor_n(&mut self) -> Result<bool, Error> {
        let running = accel_cyborg17_conductor::run::start_with(
            &self.cyborg_config(),
            self.cyborg_transport.clone(),
        )
        .await?;
        let made = running.schema_made;
        self.conductor = Some(ConductorNode::N(running));
        // Connected again: the demo's connection was made on the empty database, and
        // a connection knows its schema from when it was made.
        self.reconnect().await?;
        Ok(made)
    }

    /// The demo's connection to the database made again (and the old one closed).
    async fn reconnect(&mut self) -> Result<(), Error> {
        let old = std::mem::replace(&mut self.db, Db::connect(&self.db_url).await?);
        old.close().await;
        Ok(())
    }

    /// `accel db sync` on release N's database: Cyborg 17's taken in place (accel's
    /// additions only, every row kept; `migrate` reads the schema Cyborg made after the
    /// demo's connection was opened). What it did, as `Cyborg17 [101, 102]` (`Empty [101, 102]`
    /// had it made Cyborg's schema: release N's conductor had made none).
    pub(super) async fn sync_in_place(&mut self) -> Result<String, Error> {
        let done = self.db.sync_on_cyborg17().await?;
        let found = if done.made_cyborg_schema {
            "Empty"
        } else {
            "Cyborg17"
        };
        let at = if done.at_release_n {
            ", at release N"
        } else {
            ""
        };
        Ok(format!("{found} {:?}{at}", done.applied))
    }

    /// Starts release N+1's conductor; `agent_cap` is both `[upgrade_levels] agent` and
    /// `cyborg_agent` (the agent APIs of the two wires, raised together once every agent
    /// runs N+1: the conductor calls each host on the wire it reports on).
    pub(super) async fn start_conductor_next(
        &mut self,
        agent_cap: Option<Version>,
    ) -> Result<(), Error> {
        let node = match &self.launcher {
            None => {
                let db = Db::connect(&self.db_url).await?;
                // What `accel conductor` does: the database `db sync` took from Cyborg 17
                // opens at release N (Cyborg's rows, no accel version record), Cyborg's
                // agents report through accel's inventory diff on Cyborg's conductor API
                // and count as release N.
                let options = accel_conductor::runtime::StartOptions {
                    agent_liveness: self.agent_liveness,
                    cyborg_agents: Some(accel_conductor::runtime::CyborgAgents {
                        transport: self.cyborg_transport.clone(),
                        cap: agent_cap,
                    }),
                    ..accel_conductor::runtime::StartOptions::default()
                };
                let running = accel_conductor::runtime::start_with(
                    db.clone(),
                    self.transport.clone(),
                    agent_cap,
                    options,
                )
                .await?;
                let cyborg = accel_conductor::cyborg::serve_with(
                    self.cyborg_transport.clone(),
                    accel_conductor::cyborg::TOPIC,
                    running.shared(),
                )
                .await?;
                ConductorNode::Next(running, cyborg)
            }
            Some(l) => {
                let mut a = vec!["conductor".to_owned()];
                a.extend(self.next_settings());
                a.extend([
                    "--set".to_owned(),
                    format!("conductor.agent_liveness={}", self.agent_liveness.as_secs()),
                ]);
                if let Some(cap) = agent_cap {
                    for option in ["agent", "cyborg_agent"] {
                        a.extend(["--set".to_owned(), format!("upgrade_levels.{option}={cap}")]);
                    }
                }
                ConductorNode::Process(l.spawn("conductor", &a)?)
            }
        };
        self.conductor = Some(node);
        self.wait_conductor(2).await
    }

    pub(super) async fn stop_conductor(&mut self) {
        match self.conductor.take() {
            Some(ConductorNode::N(c)) => c.stop().await,
            Some(ConductorNode::Next(c, cyborg)) => {
                cyborg.stop().await;
                c.stop().await;
            }
            Some(ConductorNode::Process(p)) => p.stop().await,
            None => {}
        }
    }

    pub(super) async fn serve_api(
        &mut self,
        service: impl accel_api::AccelService,
    ) -> Result<(), Error> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            if let Err(e) = accel_api::serve_with_shutdown(listener, service, shutdown).await {
                tracing::error!(error = %e, "the demo's API stopped");
            }
        });
        self.api = Some(ApiNode {
            base,
            server: ApiServer::Next { stop, task },
        });
        Ok(())
    }

    /// Waits until the API answers `GET /`.
    pub(super) async fn wait_api(&mut self) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(ApiNode {
                server: ApiServer::Process(p),
                ..
            }) = &mut self.api
            {
                p.ensure_running()?;
            }
            match self.http(reqwest::Method::GET, "/", None).await {
                Ok((200, _)) => return Ok(()),
                _ if tokio::time::Instant::now() > deadline => {
                    return Err(format!("the API did not answer within {PATIENCE:?}").into())
                }
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Release N's API: Cyborg 17's v2 API, in Rust, on loopback without Keystone.
    pub(super) async fn start_api_n(&mut self) -> Result<(), Error> {
        let config = accel_cyborg17_api::config::ApiConfig {
            common: self.cyborg_config(),
            listen: "127.0.0.1:0".parse()?,
            public_endpoint: None,
            auth: accel_cyborg17_api::AuthStrategy::Noauth,
        };
        let api =
            accel_cyborg17_api::run::start_with(&config, self.cyborg_transport.clone()).await?;
        self.api = Some(ApiNode {
            base: format!("http://{}", api.addr),
            server: ApiServer::N(api),
        });
        self.wait_api().await
    }

    pub(super) async fn start_api_next(&mut self) -> Result<(), Error> {
        match &self.launcher {
            None => {
                let reads = accel_api::DbService::new(Db::connect(&self.db_url).await?);
                let conductor =
                    accel_agent::service::conductor_client(self.transport.clone(), None);
                self.serve_api(accel_api::ConductorService::new(reads, conductor))
                    .await?;
            }
            Some(l) => {
                let listen = format!("127.0.0.1:{}", free_port()?);
                let mut a = vec!["api".to_owned()];
                a.extend(self.next_settings());
                // On loopback, without Keystone: the demo is one machine's.
                a.extend([
                    "--set".to_owned(),
                    format!("api.listen={listen}"),
                    "--set".to_owned(),
                    "api.auth_strategy=noauth".to_owned(),
                ]);
                let p = l.spawn("api", &a)?;
                self.api = Some(ApiNode {
                    base: format!("http://{listen}"),
                    server: ApiServer::Process(Box::new(p)),
                });
            }
        }
        self.wait_api().await
    }

    pub(super) async fn stop_api(&mut self) {
        match self.api.take().map(|a| a.server) {
            Some(ApiServer::N(api)) => {
                if let Err(e) = api.stop().await {
                    tracing::warn!(error = %e, "release N's API did not stop cleanly");
                }
            }
            Some(ApiServer::Next { stop, task }) => {
                let _ = stop.send(());
                let _ = task.await;
            }
            Some(ApiServer::Process(p)) => p.stop().await,
            None => {}
        }
    }

    /// Waits until the N+1 conductor counts `host` at `software`: an N+1 agent from its
    /// heartbeats (its first report is done by then: every agent reports before it
    /// serves), a Cyborg 17 agent (software 1) from its reports.
    pub(super) async fn wait_agent(&mut self, host: &str, software: u32) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(AgentNode::Process(p)) = self.agents.get_mut(host) {
                p.ensure_running()?;
            }
            let status = self.status().await?;
            if status
                .clients
                .iter()
                .any(|m| m.id == host && m.software == software)
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "agent {host} was not heard at software {software} within {PATIENCE:?}"
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Release N's agent on `host`: Cyborg 17's, in Rust, reporting every
    /// [`AGENT_INTERVAL`] (Cyborg's own reports every minute). It sends no heartbeat: an
    /// N+1 conductor knows its host from its reports. Returns what its first report
    /// came to.
    pub(super) async fn start_agent_n(
        &mut self,
        host: &str,
    ) -> Result<accel_cyborg17_agent::run::Reported, Error> {
        let config = accel_cyborg17_agent::config::AgentConfig {
            transport_url: self.transport_url.clone(),
            host: host.to_owned(),
            rpc_timeout: PATIENCE,
            report_interval: AGENT_INTERVAL,
            sysfs_root: self.sysfs(host),
            fpga: None,
        };
        let agent =
            accel_cyborg17_agent::run::start_with(&config, self.cyborg_transport.clone()).await?;
        let first = tokio::time::timeout(PATIENCE, agent.first_report()).await;
        self.agents.insert(host.to_owned(), AgentNode::N(agent));
        first.map_err(|_| {
            Error::from(format!(
                "{host}'s Cyborg 17 agent did not report within {PATIENCE:?}"
            ))
        })
    }

    pub(super) fn agent_config_next(&self, host: &str) -> accel_agent::service::AgentConfig {
        accel_agent::service::AgentConfig {
            host: host.to_owned(),
            sysfs_root: self.sysfs(host),
            state_dir: self.state_dir(),
            report_interval: AGENT_INTERVAL,
            scan_interval: SCAN_INTERVAL,
            conductor_cap: None,
            pci_managed: true,
            nvme: accel_agent::service::NvmeConfig {
                cleanup_command: Some(self.cleanup_command.display().to_string()),
                cleanup_timeout: Duration::from_secs(20),
            },
            fpga: None,
            cyborg_wire: self.cyborg_wire_hosts.contains(host).then(|| {
                accel_agent::service::CyborgWire {
                    transport: self.cyborg_transport.clone(),
                    conductor_cap: None,
                    report_timeout: Duration::from_secs(60),
                }
            }),
        }
    }

    /// `accel agent` arguments for `host` (release N+1, as a process).
    pub(super) fn agent_args_next(&self, host: &str, state_dir: &Path) -> Vec<String> {
        let mut a = args(&[
            "agent",
            "--host",
            host,
            "--sysfs-root",
            &self.sysfs(host).display().to_string(),
        ]);
        a.extend(self.next_settings());
        for setting in [
            format!("agent.state_dir={}", state_dir.display()),
            "agent.report_interval=1".to_owned(),
            format!("agent.scan_interval={}", SCAN_INTERVAL.as_secs()),
            format!("nvme.cleanup_command={}", self.cleanup_command.display()),
            "nvme.cleanup_timeout=20".to_owned(),
        ] {
            a.extend(["--set".to_owned(), setting]);
        }
        // Cyborg's wire is the agent's default; the other hosts take accel's own.
        if !self.cyborg_wire_hosts.contains(host) {
            a.extend([
                "--set".to_owned(),
                "cyborg.report_to_cyborg=false".to_owned(),
            ]);
        }
        a
    }

    pub(super) async fn start_agent_next(&mut self, host: &str) -> Result<(), Error> {
        let node = match &self.launcher {
            None => AgentNode::Next(
                accel_agent::service::start(self.agent_config_next(host), self.transport.clone())
                    .await?,
            ),
            Some(l) => AgentNode::Process(l.spawn(
                &format!("agent-{host}"),
                &self.agent_args_next(host, &self.state_dir()),
            )?),
        };
        self.agents.insert(host.to_owned(), node);
        self.wait_agent(host, 2).await
    }

    pub(super) async fn stop_agent(&mut self, host: &str) {
        if let Some(a) = self.agents.remove(host) {
            a.stop().await;
        }
    }

    pub(super) async fn census(&self) -> Result<Census, Error> {
        Ok(self.db.census().await?)
    }

    pub(super) async fn status(&self) -> Result<DeploymentStatus, Error> {
        let ctx = RequestContext::new("req-demo-status");
        Ok(self.upgrade.call_method(&ctx, Status {}).await?)
    }

    pub(super) fn api_base(&self) -> Result<&str, Error> {
        Ok(self
            .api
            .as_ref()
            .map(|a| a.base.as_str())
            .ok_or("the API is not running")?)
    }

    pub(super) async fn http(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), Error> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.api_base()?));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)?
        };
        Ok((status, body))
    }

    pub(super) async fn create_arq(&self, profile: &str) -> Result<String, Error> {
        let (status, body) = self
            .http(
                reqwest::Method::POST,
                "/v2/accelerator_requests",
                Some(json!({"device_profile_name": profile})),
            )
            .await?;
        if status != 201 {
            return Err(format!("creating a request of {profile}: {status} {body}").into());
        }
        Ok(body["arqs"][0]["uuid"]
            .as_str()
            .ok_or("a created request without a uuid")?
            .to_owned())
    }

    /// Binds `arq` on `host`, to the deployable whose resource provider is `rp` when
    /// given (as Nova binds; accel's API also takes a bind without one).
    pub(super) async fn bind_to(
        &self,
        arq: &str,
        host: &str,
        rp: Option<&str>,
    ) -> Result<u16, Error> {
        let (status, _) = self
            .http(
                reqwest::Method::PATCH,
                "/v2/accelerator_requests",
                Some(bind_patch(arq, host, rp)),
            )
            .await?;
        Ok(status)
    }

    pub(super) async fn unbind(&self, arq: &str) -> Result<u16, Error> {
        let patch = json!({ arq: [
            {"path": "/hostname", "op": "remove"},
            {"path": "/instance_uuid", "op": "remove"},
        ]});
        let (status, _) = self
            .http(
                reqwest::Method::PATCH,
                "/v2/accelerator_requests",
                Some(patch),
            )
            .await?;
        Ok(status)
    }

    pub(super) async fn api_count(&self, path: &str, key: &str) -> Result<usize, Error> {
        let (status, body) = self.http(reqwest::Method::GET, path, None).await?;
        if status != 200 {
            return Err(format!("GET {path}: {status} {body}").into());
        }
        Ok(body[key].as_array().map_or(0, Vec::len))
    }

    pub(super) async fn arq_states(&self) -> Result<BTreeMap<String, usize>, Error> {
        let (_, body) = self
            .http(reqwest::Method::GET, "/v2/accelerator_requests", None)
            .await?;
        let mut states = BTreeMap::new();
        for a in body["arqs"].as_array().into_iter().flatten() {
            let state = a["state"].as_str().unwrap_or("?").to_owned();
            *states.entry(state).or_insert(0) += 1;
        }
        Ok(states)
    }

    /// Asks each agent to report now through the agent RPC API at 1.0 (what every
    /// release serves); returns the devices they reported.
    pub(super) async fn report_all(&self) -> Result<u64, Error> {
        let client = RpcClient::for_api::<accel_objects::rpc::AgentApi>(
            self.transport.clone(),
            accel_objects::rpc::AGENT_TOPIC,
        )
        .version_cap(Version::new(1, 0));
        let mut total = 0;
        for host in &self.hosts {
            let ctx = RequestContext::new(format!("req-demo-report-{host}"));
            total += client
                .prepare()
                .server(host)
                .call_method(&ctx, accel_objects::rpc::ReportNow {})
                .await?;
        }
        Ok(total)
    }

    pub(super) async fn wait_for<F>(&self, what: &str, mut done: F) -> Result<Census, Error>
    where
        F: FnMut(&Census) -> bool,
    {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let c = self.census().await?;
            if done(&c) {
                return Ok(c);
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("gave up waiting {PATIENCE:?} for {what}: {c:?}").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(super) async fn shutdown(&mut self) {
        let hosts: Vec<String> = self.agents.keys().cloned().collect();
        for h in hosts {
            self.stop_agent(&h).await;
        }
        self.stop_api().await;
        self.stop_conductor().await;
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Cyborg's bind patch of request `arq` to `host` for a new instance, to the deployable
/// whose resource provider is `rp` when given: what Nova sends, to Cyborg's API or accel's.
pub(super) fn bind_patch(arq: &str, host: &str, rp: Option<&str>) -> Value {
    let mut ops = vec![json!({"path": "/hostname", "op": "add", "value": host})];
    if let Some(rp) = rp {
        ops.push(json!({"path": "/device_rp_uuid", "op": "add", "value": rp}));
    }
    ops.push(
        json!({"path": "/instance_uuid", "op": "add", "value": uuid::Uuid::new_v4().to_string()}),
    );
    json!({ arq: ops })
}

/// How many devices a host's fixture tree has, as discovery sees it.
pub(super) fn discovered(root: &Path) -> Result<u64, Error> {
    let found = accel_agent::discovery::discover(root)?;
    Ok(verso::ObjectList::len(&accel_agent::report::driver_devices(&found)) as u64)
}

pub(super) fn components(status: &DeploymentStatus) -> Vec<Component> {
    let mut out = vec![Component {
        component: "conductor".into(),
        id: "conductor".into(),
        software: status.server.software,
        apparent: status.server.apparent,
        state: format!("{:?}", status.server.state),
    }];
    out.extend(status.clients.iter().map(|m| Component {
        component: status.client_component.clone(),
        id: m.id.clone(),
        software: m.software,
        apparent: m.apparent,
        state: format!("{:?}", m.state),
    }));
    out
}
