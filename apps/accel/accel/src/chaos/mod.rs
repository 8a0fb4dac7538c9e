//! `accel chaos`: the fault campaign. A deployment of separate processes (conductors,
//! agents, APIs: this binary) on RabbitMQ and a fresh PostgreSQL database, each reached
//! through a TCP proxy the campaign controls; clients running the API's write workflow
//! (profile, request, bind, unbind or delete) without pause; faults injected on a
//! schedule (kill -9 and SIGTERM of each kind of component, which is then restarted;
//! broker and database connections cut, or frozen for a few seconds; with
//! `--database-restart-command`, the database server restarted). It checks the
//! database's invariants continuously (`Db::consistency_violations`) and every answer
//! against the final state: a plain `503 ServiceUnavailable` promises nothing was done,
//! so a write answered so that happened anyway is a violation, as is any `500`. It
//! prints the counts per fault and exits 1 on any violation.

mod proxy;

use crate::demo::process::{Launcher, Process};
use accel_conductor::Db;
use proxy::Proxy;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What `accel chaos` runs.
#[derive(Clone, Debug)]
pub struct ChaosOptions {
    /// How long faults are injected.
    pub duration: Duration,
    /// Time between two faults.
    pub fault_interval: Duration,
    /// Concurrent API clients.
    pub clients: usize,
    /// Agents (hosts).
    pub agents: u32,
    /// Conductors.
    pub conductors: usize,
    /// APIs.
    pub apis: usize,
    /// A PostgreSQL URL allowed to create databases; the campaign makes its own.
    pub database: String,
    /// The RabbitMQ URL.
    pub transport_url: String,
    /// Where logs and fixtures go (default: a temporary directory, removed).
    pub dir: Option<PathBuf>,
    /// Also write the summary as JSON here.
    pub json: Option<PathBuf>,
    /// The seed of the fault and workload choices.
    pub seed: u64,
    /// A shell command that restarts the database server (for example the test
    /// cluster's `pg_ctl restart`); given, "restart the database" joins the faults.
    pub database_restart: Option<String>,
}

/// The faults, in the order the schedule cycles through them (shuffled per cycle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillConductor,
    TermConductor,
    KillAgent,
    TermAgent,
    KillApi,
    TermApi,
    CutBroker,
    FreezeBroker,
    CutDatabase,
    FreezeDatabase,
    RestartDatabase,
}

const FAULTS: [Fault; 10] = [
    Fault::KillConductor,
    Fault::TermConductor,
    Fault::KillAgent,
    Fault::TermAgent,
    Fault::KillApi,
    Fault::TermApi,
    Fault::CutBroker,
    Fault::FreezeBroker,
    Fault::CutDatabase,
    Fault::FreezeDatabase,
];

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::KillConductor => "kill -9 conductor",
            Fault::TermConductor => "SIGTERM conductor",
            Fault::KillAgent => "kill -9 agent",
            Fault::TermAgent => "SIGTERM agent",
            Fault::KillApi => "kill -9 api",
            Fault::TermApi => "SIGTERM api",
            Fault::CutBroker => "cut broker connections",
            Fault::FreezeBroker => "freeze broker connections 5 s",
            Fault::CutDatabase => "cut database connections",
            Fault::FreezeDatabase => "freeze database connections 5 s",
            Fault::RestartDatabase => "restart the database server",
        }
    }
}

/// How long a frozen connection stays frozen, and a stopped component down.
const FREEZE: Duration = Duration::from_secs(5);
const DOWN: Duration = Duration::from_secs(2);

/// What the clients were told, what they may check later, and what broke.
#[derive(Default)]
struct Ledger {
    /// Answers by operation and outcome (`201`, `409 NoFreeHandle`, `503 OutcomeUnknown`, ...).
    ops: BTreeMap<String, BTreeMap<String, u64>>,
    /// Answers since each kind of fault was last injected, by outcome.
    by_fault: BTreeMap<String, BTreeMap<String, u64>>,
    /// Faults injected, by name.
    injected: BTreeMap<String, u64>,
    /// Writes answered `503 ServiceUnavailable`: what must not have happened.
    claims: Vec<Claim>,
    /// Every broken invariant or promise, once.
    violations: Vec<String>,
    /// The fault whose window the answers fall in.
    current: String,
}

impl Ledger {
    fn record(&mut self, op: &str, outcome: &str) {
        *self
            .ops
            .entry(op.to_owned())
            .or_default()
            .entry(outcome.to_owned())
            .or_default() += 1;
        let window = if self.current.is_empty() {
            "none (before the first fault)".to_owned()
        } else {
            self.current.clone()
        };
        *self
            .by_fault
            .entry(window)
            .or_default()
            .entry(outcome.to_owned())
            .or_default() += 1;
    }

    fn violation(&mut self, what: String) {
        if !self.violations.contains(&what) {
            eprintln!("chaos: VIOLATION: {what}");
            self.violations.push(what);
        }
    }
}

/// A write answered `503 ServiceUnavailable`, which says nothing was done.
#[derive(Debug)]
enum Claim {
    NoProfile(String),
    NoRequestsOf(String),
    NotBound { arq: String, instance: String },
}

/// One API answer: the status and the error type, if any.
#[derive(Debug)]
struct Answer {
    status: u16,
    kind: String,
    body: Value,
}

impl Answer {
    fn outcome(&self) -> String {
        if self.status == 0 {
            "unreachable".to_owned()
        } else if self.kind.is_empty() {
            self.status.to_string()
        } else {
            format!("{} {}", self.status, self.kind)
        }
    }

    /// The write may or may not have happened: retry what is idempotent.
    fn unknown(&self) -> bool {
        self.status == 0 || self.kind == "OutcomeUnknown"
    }

    /// A plain 503: the API promises nothing was done.
    fn unavailable(&self) -> bool {
        self.status == 503 && self.kind == "ServiceUnavailable"
    }
}

/// The deployment under test.
struct Deployment {
    launcher: Launcher,
    settings: Vec<String>,
    dir: PathBuf,
    conductors: Vec<Option<Process>>,
    agents: Vec<Option<Process>>,
    apis: Vec<Option<Process>>,
    api_ports: Vec<u16>,
    broker: Proxy,
    database: Proxy,
    database_restart: Option<String>,
}

fn host(i: usize) -> String {
    format!("chaos-h{}", i + 1)
}

impl Deployment {
    fn with_settings(&self, mut args: Vec<String>) -> Vec<String> {
        for s in &self.settings {
            args.push("--set".into());
            args.push(s.clone());
        }
        args
    }

    fn spawn_conductor(&self, i: usize) -> Result<Process, Error> {
        let args = self.with_settings(vec!["conductor".into()]);
        self.launcher.spawn(&format!("conductor-{}", i + 1), &args)
    }

    fn spawn_agent(&self, i: usize) -> Result<Process, Error> {
        let sysfs = self.dir.join("sysfs").join(host(i));
        let args = self.with_settings(vec![
            "agent".into(),
            "--host".into(),
            host(i),
            "--sysfs-root".into(),
            sysfs.display().to_string(),
        ]);
        self.launcher.spawn(&format!("agent-{}", host(i)), &args)
    }

    fn spawn_api(&self, i: usize) -> Result<Process, Error> {
        let mut args = self.with_settings(vec!["api".into()]);
        args.push("--set".into());
        args.push(format!("api.listen=127.0.0.1:{}", self.api_ports[i]));
        // The campaign's clients are administrators on loopback.
        args.push("--set".into());
        args.push("api.auth_strategy=noauth".into());
        self.launcher.spawn(&format!("api-{}", i + 1), &args)
    }

    /// Injects `fault` on a component chosen by `rng`; returns what was done.
    async fn inject(&mut self, fault: Fault, rng: &mut StdRng) -> Result<String, Error> {
        let kill = matches!(
            fault,
            Fault::KillConductor | Fault::KillAgent | Fault::KillApi
        );
        match fault {
            Fault::KillConductor | Fault::TermConductor => {
                let i = rng.gen_range(0..self.conductors.len());
                stop(&mut self.conductors[i], kill).await;
                tokio::time::sleep(DOWN).await;
                self.conductors[i] = Some(self.spawn_conductor(i)?);
                Ok(format!("{} {}", fault.name(), i + 1))
            }
            Fault::KillAgent | Fault::TermAgent => {
                let i = rng.gen_range(0..self.agents.len());
                stop(&mut self.agents[i], kill).await;
                tokio::time::sleep(DOWN).await;
                self.agents[i] = Some(self.spawn_agent(i)?);
                Ok(format!("{} {}", fault.name(), host(i)))
            }
            Fault::KillApi | Fault::TermApi => {
                let i = rng.gen_range(0..self.apis.len());
                stop(&mut self.apis[i], kill).await;
                tokio::time::sleep(DOWN).await;
                self.apis[i] = Some(self.spawn_api(i)?);
                Ok(format!("{} {}", fault.name(), i + 1))
            }
            Fault::CutBroker => {
                self.broker.cut();
                Ok(fault.name().to_owned())
            }
            Fault::CutDatabase => {
                self.database.cut();
                Ok(fault.name().to_owned())
            }
            Fault::RestartDatabase => {
                let command = self
                    .database_restart
                    .clone()
                    .ok_or("no --database-restart-command")?;
                let status = tokio::time::timeout(
                    Duration::from_secs(120),
                    tokio::process::Command::new("sh")
                        .args(["-c", &command])
                        .stdout(std::process::Stdio::null())
                        .status(),
                )
                .await
                .map_err(|_| format!("{command:?} did not finish within 120 s"))??;
                if !status.success() {
                    return Err(format!("{command:?} failed: {status}").into());
                }
                Ok(fault.name().to_owned())
            }
            Fault::FreezeBroker | Fault::FreezeDatabase => {
                let proxy = if fault == Fault::FreezeBroker {
                    &self.broker
                } else {
                    &self.database
                };
                proxy.freeze(true);
                tokio::time::sleep(FREEZE).await;
                proxy.freeze(false);
                Ok(fault.name().to_owned())
            }
        }
    }

    /// Components that exited on their own (not by a fault): each is a violation.
    fn exited(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for slot in self
            .conductors
            .iter_mut()
            .chain(self.agents.iter_mut())
            .chain(self.apis.iter_mut())
        {
            if let Some(p) = slot {
                if let Err(e) = p.ensure_running() {
                    out.push(e.to_string());
                    *slot = None;
                }
            }
        }
        out
    }

    async fn stop_all(&mut self) {
        for slot in self
            .apis
            .iter_mut()
            .chain(self.agents.iter_mut())
            .chain(self.conductors.iter_mut())
        {
            if let Some(p) = slot.take() {
                p.stop().await;
            }
        }
    }
}

/// Stops a component: kill -9, or SIGTERM (then SIGKILL after the grace period).
async fn stop(slot: &mut Option<Process>, kill: bool) {
    if let Some(p) = slot.take() {
        if kill {
            p.kill().await;
        } else {
            p.stop().await;
        }
    }
}

/// `host:port` of a URL's authority, resolved.
async fn upstream(url: &url::Url) -> Result<SocketAddr, Error> {
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port().ok_or("the URL has no port")?;
    tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| format!("{host}:{port} does not resolve").into())
}

fn through(url: &url::Url, proxy: &Proxy) -> Result<url::Url, Error> {
    let mut u = url.clone();
    u.set_host(Some("127.0.0.1"))?;
    u.set_port(Some(proxy.addr().port()))
        .map_err(|()| "cannot set the URL's port")?;
    Ok(u)
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Runs the campaign.
pub async fn run(options: ChaosOptions) -> Result<ExitCode, Error> {
    if options.conductors == 0 || options.agents == 0 || options.apis == 0 {
        return Err("chaos needs at least one conductor, agent and API".into());
    }
    let scratch = tempfile::tempdir()?;
    let dir = options
        .dir
        .clone()
        .unwrap_or_else(|| scratch.path().to_owned());
    std::fs::create_dir_all(&dir)?;

    // A fresh database, created through the admin URL.
    let admin_url = url::Url::parse(&options.database)?;
    let name = format!("accel_chaos_{}", uuid::Uuid::new_v4().simple());
    let admin = Db::connect(&options.database).await?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(admin.pool())
        .await?;
    admin.close().await;
    let mut direct = admin_url.clone();
    direct.set_path(&format!("/{name}"));
    let check_db = Db::connect(direct.as_str()).await?;
    check_db.migrate().await?;

    let broker_url = url::Url::parse(&options.transport_url)?;
    let broker = Proxy::start(upstream(&broker_url).await?).await?;
    let database = Proxy::start(upstream(&admin_url).await?).await?;
    let exchange = format!("chaos-{}", uuid::Uuid::new_v4().simple());
    let settings = vec![
        format!("database.url={}", through(&direct, &database)?),
        format!("transport.url={}", through(&broker_url, &broker)?),
        format!("transport.control_exchange={exchange}"),
        "transport.call_monitor_timeout=5".to_owned(),
        "conductor.stop_timeout=10".to_owned(),
        "conductor.agent_liveness=60".to_owned(),
        format!("agent.state_dir={}", dir.join("state").display()),
        "agent.report_interval=5".to_owned(),
    ];
    for i in 0..options.agents as usize {
        accel_agent::fixture::write_tree(
            &dir.join("sysfs").join(host(i)),
            &accel_agent::fixture::sample_host(i as u32 + 1),
        )?;
    }
    let launcher = Launcher::new(std::env::current_exe()?, dir.join("logs"))?;
    let mut d = Deployment {
        launcher,
        settings,
        dir: dir.clone(),
        conductors: Vec::new(),
        agents: Vec::new(),
        apis: Vec::new(),
        api_ports: (0..options.apis)
            .map(|_| free_port())
            .collect::<Result<_, _>>()?,
        broker,
        database,
        database_restart: options.database_restart.clone(),
    };
    for i in 0..options.conductors {
        let p = d.spawn_conductor(i)?;
        d.conductors.push(Some(p));
    }
    // Agents ask a conductor for its version first: it must be listening.
    for p in d.conductors.iter().flatten() {
        wait_log(p.log(), "conductor: serving").await?;
    }
    for i in 0..options.agents as usize {
        let p = d.spawn_agent(i)?;
        d.agents.push(Some(p));
    }
    for i in 0..options.apis {
        let p = d.spawn_api(i)?;
        d.apis.push(Some(p));
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(150))
        .build()?;
    let bases: Vec<String> = d
        .api_ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    wait_ready(&http, &bases[0], options.agents as usize).await?;
    println!(
        "chaos: {} conductors, {} agents, {} APIs on {} (database {name}); logs in {}",
        options.conductors,
        options.agents,
        options.apis,
        verso_rpc::transport::amqp::redact(&options.transport_url),
        dir.join("logs").display()
    );

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let until = Instant::now() + options.duration;
    let hosts: Vec<String> = (0..options.agents as usize).map(host).collect();
    let clients: Vec<_> = (0..options.clients)
        .map(|c| {
            let client = Client {
                http: http.clone(),
                bases: bases.clone(),
                hosts: hosts.clone(),
                ledger: ledger.clone(),
                rng: StdRng::seed_from_u64(options.seed.wrapping_add(c as u64 + 1)),
                id: c,
            };
            tokio::spawn(client.run(until))
        })
        .collect();
    let checker = {
        let ledger = ledger.clone();
        let db = check_db.clone();
        tokio::spawn(async move {
            while Instant::now() < until {
                check_invariants(&db, &ledger).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };

    let mut rng = StdRng::seed_from_u64(options.seed);
    let started = Instant::now();
    let mut order = Vec::new();
    let signal = verso_rpc::shutdown::shutdown_signal();
    tokio::pin!(signal);
    while Instant::now() + options.fault_interval < until {
        tokio::select! {
            () = tokio::time::sleep(options.fault_interval) => {}
            () = &mut signal => {
                // Ctrl-C or SIGTERM: take the deployment down with the campaign.
                d.stop_all().await;
                return Err("interrupted; the deployment was stopped".into());
            }
        }
        for e in d.exited() {
            lock(&ledger).violation(format!("a component exited on its own: {e}"));
        }
        if order.is_empty() {
            order = FAULTS.to_vec();
            if options.database_restart.is_some() {
                order.push(Fault::RestartDatabase);
            }
            // A new order each cycle, every fault once per cycle.
            for i in (1..order.len()).rev() {
                order.swap(i, rng.gen_range(0..=i));
            }
        }
        let Some(fault) = order.pop() else { continue };
        {
            let mut l = lock(&ledger);
            l.current = fault.name().to_owned();
            *l.injected.entry(fault.name().to_owned()).or_default() += 1;
        }
        let what = d.inject(fault, &mut rng).await?;
        let (ops, violations) = {
            let l = lock(&ledger);
            (
                l.ops.values().flat_map(|m| m.values()).sum::<u64>(),
                l.violations.len(),
            )
        };
        println!(
            "chaos: t={:>4}s {what}; {ops} answers, {violations} violations",
            started.elapsed().as_secs()
        );
    }
    for c in clients {
        c.await?;
    }
    checker.await?;
    // Quiet: every transient state settles, then the final state is judged.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for e in d.exited() {
        lock(&ledger).violation(format!("a component exited on its own: {e}"));
    }
    check_invariants(&check_db, &ledger).await;
    check_claims(&check_db, &ledger).await?;
    d.stop_all().await;
    check_db.close().await;

    let summary = summarize(&lock(&ledger), &options, started.elapsed());
    print_summary(&summary);
    if let Some(path) = &options.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)?)?;
    }
    let clean = lock(&ledger).violations.is_empty();
    if clean {
        // A failed run keeps its database for the post-mortem.
        if let Ok(admin) = Db::connect(&options.database).await {
            let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            if let Err(e) = sqlx::query(&drop).execute(admin.pool()).await {
                eprintln!("chaos: cannot drop {name}: {e}");
            }
            admin.close().await;
        }
    }
    if options.dir.is_none() && !clean {
        // Keep the logs of a failed run.
        let kept = scratch.keep();
        println!("chaos: logs kept in {}", kept.join("logs").display());
    }
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    ledger
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits (60 s at most) until `log` has a line containing `needle`.
async fn wait_log(log: &std::path::Path, needle: &str) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .contains(needle)
    {
        if Instant::now() > deadline {
            return Err(format!("no {needle:?} in {} within 60 s", log.display()).into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Waits until the API answers and every agent's devices are in.
async fn wait_ready(http: &reqwest::Client, base: &str, agents: usize) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.get(format!("{base}/v2/devices")).send().await {
            if let Ok(v) = r.json::<Value>().await {
                let hosts: std::collections::BTreeSet<&str> = v["devices"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|d| d["hostname"].as_str()).collect())
                    .unwrap_or_default();
                if hosts.len() >= agents {
                    return Ok(());
                }
            }
        }
        if Instant::now() > deadline {
            return Err("the deployment did not come up within 60 s (see its logs)".into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn check_invariants(db: &Db, ledger: &Mutex<Ledger>) {
    // Read directly, not through the proxies: the check itself is not under fault.
    match db.consistency_violations(Db::INTERRUPTED_BIND_LEASE).await {
        Ok(found) => {
            let mut l = lock(ledger);
            for f in found {
                l.violation(format!("invariant: {f}"));
            }
        }
        Err(e) => eprintln!("chaos: cannot check the invariants now: {e}"),
    }
}

/// Every write answered `503 ServiceUnavailable` did not happen.
async fn check_claims(db: &Db, ledger: &Mutex<Ledger>) -> Result<(), Error> {
    let claims = std::mem::take(&mut lock(ledger).claims);
    for claim in claims {
        let broken = match &claim {
            // Through the conductor's queries, which read either schema.
            Claim::NoProfile(name) => db.profiles().await?.iter().any(|p| &p.name == name),
            Claim::NoRequestsOf(profile) => db
                .arqs(None)
                .await?
                .iter()
                .any(|r| &r.device_profile_name == profile),
            Claim::NotBound { arq, instance } => match db.arq(arq).await {
                Ok(r) => r.instance_uuid.as_deref() == Some(instance.as_str()),
                Err(accel_conductor::DbError::NotFound { .. }) => false,
                Err(e) => return Err(e.into()),
            },
        };
        if broken {
            lock(ledger).violation(format!(
                "answered 503 ServiceUnavailable, done anyway: {claim:?}"
            ));
        }
    }
    Ok(())
}

/// One API client running the write workflow.
struct Client {
    http: reqwest::Client,
    bases: Vec<String>,
    hosts: Vec<String>,
    ledger: Arc<Mutex<Ledger>>,
    rng: StdRng,
    id: usize,
}

const RESOURCE_CLASSES: [&str; 4] = ["GPU", "FPGA", "QAT", "NIC"];

impl Client {
    async fn run(mut self, until: Instant) {
        let mut n = 0u64;
        while Instant::now() < until {
            self.workflow(n).await;
            n += 1;
        }
    }

    /// One request to a random API (another one if it cannot be reached).
    async fn send(&mut self, method: reqwest::Method, path: &str, body: Option<Value>) -> Answer {
        let first = self.rng.gen_range(0..self.bases.len());
        let mut last = Answer {
            status: 0,
            kind: String::new(),
            body: Value::Null,
        };
        for k in 0..self.bases.len() {
            let base = &self.bases[(first + k) % self.bases.len()];
            let mut req = self.http.request(method.clone(), format!("{base}{path}"));
            if let Some(b) = &body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body: Value = r.json().await.unwrap_or(Value::Null);
                    let kind = body["error"]["type"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    return Answer { status, kind, body };
                }
                // Refused before anything was sent: the next API.
                Err(e) if e.is_connect() => continue,
                Err(_) => return last,
            }
        }
        last.kind = String::new();
        last
    }

    /// `send`, recorded; an unknown outcome is retried (at most 5 times, 1 s apart)
    /// when `idempotent`. The answer returned is the last one, marked `OutcomeUnknown`
    /// when an earlier attempt's outcome was unknown (a later plain 503 then says
    /// nothing about the earlier attempt).
    async fn op(
        &mut self,
        op: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        idempotent: bool,
    ) -> Answer {
        let mut attempt = 0;
        let mut unknown_before = false;
        loop {
            let a = self.send(method.clone(), path, body.clone()).await;
            {
                let mut l = lock(&self.ledger);
                l.record(op, &a.outcome());
                if a.status == 500 {
                    l.violation(format!("500 on {op} {path}: {}", a.body));
                }
            }
            attempt += 1;
            if !(idempotent && a.unknown()) || attempt >= 5 {
                return if unknown_before && a.unavailable() {
                    Answer {
                        kind: "OutcomeUnknown".to_owned(),
                        ..a
                    }
                } else {
                    a
                };
            }
            unknown_before = true;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn claim(&self, claim: Claim) {
        lock(&self.ledger).claims.push(claim);
    }

    async fn workflow(&mut self, n: u64) {
        use reqwest::Method;
        let profile = format!("chaos-{}-{n}", self.id);
        let rc = RESOURCE_CLASSES[self.rng.gen_range(0..RESOURCE_CLASSES.len())];
        let a = self
            .op(
                "create profile",
                Method::POST,
                "/v2/device_profiles",
                Some(json!({"name": profile, "groups": [{format!("resources:{rc}"): "1"}]})),
                true,
            )
            .await;
        match a.status {
            201 | 409 => {}
            _ => {
                if a.unavailable() {
                    self.claim(Claim::NoProfile(profile));
                } else if a.status != 0 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                return;
            }
        }
        let a = self
            .op(
                "create request",
                Method::POST,
                "/v2/accelerator_requests",
                Some(json!({"device_profile_name": profile})),
                false,
            )
            .await;
        let arq = match (a.status, a.body["arqs"][0]["uuid"].as_str()) {
            (201, Some(u)) => u.to_owned(),
            _ => {
                if a.unavailable() {
                    self.claim(Claim::NoRequestsOf(profile));
                }
                // Unknown: a request may exist; the profile is left as it is.
                return;
            }
        };
        let instance = uuid::Uuid::new_v4().to_string();
        let host = self.hosts[self.rng.gen_range(0..self.hosts.len())].clone();
        let a = self
            .op(
                "bind",
                Method::PATCH,
                "/v2/accelerator_requests",
                Some(json!({ &arq: [
                    {"path": "/hostname", "op": "add", "value": host},
                    {"path": "/instance_uuid", "op": "add", "value": instance},
                ]})),
                true,
            )
            .await;
        if a.unavailable() {
            // Left alone, so the final state can show whether it was bound anyway.
            self.claim(Claim::NotBound { arq, instance });
            return;
        }
        // Cyborg's API answers a bind 202 (accepted); 200 from older clients' view.
        if matches!(a.status, 200 | 202) && self.rng.gen_bool(0.5) {
            self.op(
                "unbind",
                Method::PATCH,
                "/v2/accelerator_requests",
                Some(json!({ &arq: [
                    {"path": "/hostname", "op": "remove"},
                    {"path": "/instance_uuid", "op": "remove"},
                ]})),
                true,
            )
            .await;
        }
        let a = self
            .op(
                "delete request",
                Method::DELETE,
                &format!("/v2/accelerator_requests?arqs={arq}"),
                None,
                true,
            )
            .await;
        // 404: a retry after an unknown outcome, the first attempt deleted it.
        if a.status == 204 || a.status == 404 {
            self.op(
                "delete profile",
                Method::DELETE,
                &format!("/v2/device_profiles/{profile}"),
                None,
                true,
            )
            .await;
        }
    }
}

fn summarize(l: &Ledger, options: &ChaosOptions, took: Duration) -> Value {
    json!({
        "seconds": took.as_secs(),
        "seed": options.seed,
        "conductors": options.conductors,
        "agents": options.agents,
        "apis": options.apis,
        "clients": options.clients,
        "faults": l.injected,
        "answers_by_operation": l.ops,
        "answers_after_each_fault": l.by_fault,
        "claims_checked": l.ops.values().flat_map(|m| m.iter()).filter(|(k, _)| k.as_str() == "503 ServiceUnavailable").map(|(_, v)| v).sum::<u64>(),
        "violations": l.violations,
    })
}

/// One line per key of `counts` (`{key: {outcome: n}}`): its outcomes and their counts.
fn print_counts(title: &str, counts: &Value) {
    println!("chaos: {title}");
    for (k, v) in counts.as_object().into_iter().flatten() {
        let parts: Vec<String> = v
            .as_object()
            .map(|m| m.iter().map(|(o, n)| format!("{o}: {n}")).collect())
            .unwrap_or_default();
        println!("  {k}: {}", parts.join(", "));
    }
}

fn print_summary(s: &Value) {
    println!("\nchaos: faults injected");
    if let Some(f) = s["faults"].as_object() {
        for (k, v) in f {
            println!("  {v:>4}  {k}");
        }
    }
    print_counts(
        "answers after each kind of fault",
        &s["answers_after_each_fault"],
    );
    print_counts("answers by operation", &s["answers_by_operation"]);
    let violations = s["violations"].as_array().map_or(0, Vec::len);
    println!(
        "chaos: {} s, {violations} violation(s){}",
        s["seconds"],
        if violations == 0 { "" } else { ": see above" }
    );
}
