//! `accel bench fleet`: a fleet of simulated agents against 1-3 real conductors.
//!
//! Each case (a fleet size and a number of conductors) runs on a database of its own
//! (a new PostgreSQL or MariaDB database on the `--database` server, dropped at the end,
//! or a SQLite file) and the real broker, under a control exchange of its own. (The
//! exchange does not keep two runs apart: queues are named by topic alone, as
//! oslo.messaging names them, so two runs on one broker vhost consume each other's
//! requests. Run one at a time, or each on a vhost of its own in `--transport-url`.)
//!
//! 1. the database is migrated and its version record created at release N's apparent
//!    version (1) under release N+1's software (2): a deployment inside its upgrade
//!    window, so that `finalize` has work to do at the end;
//! 2. the conductors are `accel conductor` processes of this binary;
//! 3. the agents live in this process, 500 to a broker connection (RabbitMQ allows
//!    2,047 channels on one, and each agent's server takes one). Each is its own RPC
//!    identity, as a real agent: its own host name, its version record
//!    (`accel_agent::service::open_versions`, a file), its server on `accel-agent` with
//!    the host as server, and the agent's own client code for its calls
//!    (`accel_agent::client::heartbeat`; reports on the wire `--wire` names: Cyborg's,
//!    the agents' default, through `accel_agent::cyborg::CyborgReporter` on
//!    `cyborg-conductor` under a Cyborg control exchange of the case's own, or accel's
//!    through `accel_agent::client::Reporter`; each sends an unchanged inventory by
//!    digest). Registration is what an agent's start does: the version probe, a
//!    heartbeat, the first (full) report of `--devices` devices;
//! 4. a quiet window: the agents, registered and warmed up (one heartbeat interval), fall
//!    silent (`--idle-window`, 20 s), and the conductors' CPU (each process's CPU-time
//!    clock, in nanoseconds) over it is what they spend idle (timers, the version refresh, learning
//!    the fleet record, the broker's and the pool's upkeep); measured again after the
//!    steady window, and the two together are taken off the windows' CPU. (At 100 agents
//!    the idle CPU is of the order of the calls' own, and 5 s of it, measured once
//!    before the agents started, moved the per-call figures by a third between runs);
//! 5. the heartbeat window: every agent heartbeats every `--heartbeat-interval`, phases
//!    spread evenly; the conductors' CPU over the window, less the idle share, divided
//!    by the heartbeats in it is the CPU per heartbeat;
//! 6. the steady window (`--duration`): heartbeats as before and one report per agent
//!    per `--report-interval`; the conductors' CPU over it, less the heartbeats' share
//!    at the rate the heartbeat window measured, divided by the reports, is the CPU per
//!    report. The broker's depth of the conductors' queues (`accel-conductor`,
//!    `accel-upgrade`, `cyborg-conductor`; a passive declare's message count) is
//!    sampled every 500 ms;
//! 7. the second quiet window, then finalization, started as `accel upgrade finalize`
//!    starts it (the `upgrade` API's `finalize`), timed until every simulated agent's
//!    version record is finalized.
//!
//! (Long on purpose: one case end to end, set-up, simulated agents, measurement and
//! report, used by this command only.)

use super::proc::{cpu_seconds, rss_bytes};
use super::{quantile, Error};
use crate::demo::process::{Launcher, Process};
use accel_agent::client::{heartbeat, Reported, Reporter};
use accel_agent::cyborg::CyborgReporter;
use accel_agent::report::pci_attach_info;
use accel_agent::service::{conductor_client, open_versions};
use accel_conductor::{Db, DbVersionStore};
use accel_objects::rpc::{
    AgentApi, CleanupDevice, ProgramFpga, ReportNow, AGENT_TOPIC, UPGRADE_TOPIC,
};
use accel_objects::{
    AccelVersion, AttachType, DeviceType, DriverAttachHandle, DriverDevice, DriverDeviceList,
};
use bench_report::{BenchResult, Better, Chart, Series, Table};
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use verso::{Field, ObjectList, RequestContext, VersionedObject};
use verso_rpc::transport::{transport_from_url, Transport};
use verso_rpc::{Endpoint, RemoteError, RpcClient, RpcServer, ServerHandle, Target};
use verso_upgrade::admin::{finalize_and_wait, UpgradeApi, WaitOutcome};
use verso_upgrade::{ComponentVersion, VersionManager};

/// Agents sharing one broker connection (each agent's server takes a channel).
const AGENTS_PER_CONNECTION: usize = 500;
/// From the agents falling silent to the idle measurement: the calls in flight end.
const QUIET_SETTLE: Duration = Duration::from_secs(2);
/// Registrations in flight at once.
const REGISTER_CONCURRENCY: usize = 16;

/// The wire the simulated agents report on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FleetWire {
    /// Cyborg's (`report_data` and `report_unchanged` on `cyborg-conductor`): the
    /// agents' default.
    Cyborg,
    /// accel's own (`[cyborg] report_to_cyborg = false`).
    Accel,
}

impl FleetWire {
    fn label(self) -> &'static str {
        match self {
            FleetWire::Cyborg => "Cyborg's wire",
            FleetWire::Accel => "accel's own wire",
        }
    }
}

/// `accel bench fleet`'s options.
#[derive(Clone, Debug)]
pub struct FleetOptions {
    /// The wire the agents report on.
    pub wire: FleetWire,
    /// Fleet sizes.
    pub agents: Vec<u64>,
    /// Numbers of conductors.
    pub conductors: Vec<u64>,
    /// A PostgreSQL or MariaDB server URL (a database is created on it per case) or
    /// `sqlite`.
    pub database: String,
    /// The broker.
    pub transport_url: String,
    /// Between an agent's heartbeats.
    pub heartbeat_interval: Duration,
    /// Between an agent's reports.
    pub report_interval: Duration,
    /// Devices per agent.
    pub devices: u32,
    /// The heartbeat-only window.
    pub heartbeat_window: Duration,
    /// The steady window (heartbeats and reports).
    pub duration: Duration,
    /// Each quiet window (the conductors' idle CPU): best whole periods of the
    /// conductors' version refresh (5 s), so each holds the same number of its runs.
    pub idle_window: Duration,
    /// Where to write the JSON too.
    pub json: Option<PathBuf>,
    /// The conductors' `[conductor] threads`; `None`: their default.
    pub conductor_threads: Option<usize>,
    /// The command line, for the result file.
    pub command: String,
}

/// Phases of a case, as the agents see them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Warmup,
    /// No calls: what the conductors spend with the fleet registered and silent.
    Quiet,
    Heartbeats,
    Steady,
    Finalize,
    Stop,
}

#[derive(Default)]
struct Calls {
    latencies_ms: Vec<f64>,
    errors: u64,
    /// Reports the conductor took by digest (counted with the latencies, so a call
    /// that ends after its window was taken is in neither).
    by_digest: u64,
}

/// What the agents measured, per window.
#[derive(Default)]
struct Recorder {
    heartbeats: [Mutex<Calls>; 2],
    reports: [Mutex<Calls>; 2],
    last_error: Mutex<Option<String>>,
}

impl Recorder {
    /// One call of `phase`; `by_digest`: a report the conductor took by its digest.
    fn record(&self, phase: Phase, report: bool, took: Duration, ok: Result<bool, String>) {
        let window = match phase {
            Phase::Heartbeats => 0,
            Phase::Steady => 1,
            _ => return,
        };
        let slot = if report {
            &self.reports[window]
        } else {
            &self.heartbeats[window]
        };
        let mut calls = slot.lock().unwrap_or_else(PoisonError::into_inner);
        match ok {
            Ok(by_digest) => {
                calls.latencies_ms.push(took.as_secs_f64() * 1e3);
                calls.by_digest += u64::from(by_digest);
            }
            Err(e) => {
                calls.errors += 1;
                *self
                    .last_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(e);
            }
        }
    }

    fn take(&self, report: bool, window: usize) -> Calls {
        let slot = if report {
            &self.reports[window]
        } else {
            &self.heartbeats[window]
        };
        std::mem::take(&mut *slot.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

struct SimAgent {
    host: String,
    upgrade: RpcClient,
    versions: VersionManager<AccelVersion>,
    reporter: SimReporter,
    devices: DriverDeviceList,
}

/// A simulated agent's reports, on the wire of the case.
enum SimReporter {
    Accel(Reporter),
    Cyborg(CyborgReporter),
}

impl SimReporter {
    /// Reports `devices`; whether the conductor took them by digest.
    async fn report(&self, devices: &DriverDeviceList) -> Result<bool, verso_rpc::RpcError> {
        match self {
            SimReporter::Accel(r) => r
                .report(devices)
                .await
                .map(|r| matches!(r, Reported::Unchanged(_))),
            SimReporter::Cyborg(r) => r.deliver(devices).await.map(|d| d.by_digest),
        }
    }
}

/// A synthetic inventory of `n` PCI devices, each its own attach handle.
fn inventory(n: u32) -> DriverDeviceList {
    let types = [
        DeviceType::Gpu,
        DeviceType::Fpga,
        DeviceType::Qat,
        DeviceType::Nic,
        DeviceType::AiChip,
    ];
    let devices = (0..n)
        .map(|k| {
            let address = format!("0000:{:02x}:{:02x}.0", k / 32 + 1, k % 32);
            DriverDevice {
                control_path_id: address.clone().into(),
                r#type: types[k as usize % types.len()].into(),
                vendor: "10de".to_owned().into(),
                model: "20b5".to_owned().into(),
                std_board_info: Some(format!(
                    r#"{{"class":"0x030200","iommu_group":{k},"numa_node":{}}}"#,
                    k % 2
                ))
                .into(),
                driver_name: Some("vfio-pci".to_owned()).into(),
                attach_handles: vec![DriverAttachHandle {
                    attach_type: AttachType::Pci.into(),
                    attach_info: pci_attach_info(&address).unwrap_or_default().into(),
                    ..DriverAttachHandle::blank()
                }]
                .into(),
                ..DriverDevice::blank()
            }
        })
        .collect();
    DriverDeviceList {
        objects: Field::new(devices),
        ..DriverDeviceList::blank()
    }
}

/// The agent API as a simulated agent serves it: `report_now` reports its inventory;
/// it has no NVMe device, so `cleanup_device` has nothing to erase, nor an FPGA to
/// program.
fn agent_endpoint(agent: Arc<SimAgent>) -> Endpoint {
    Endpoint::for_api::<AgentApi>()
        .with_state(agent)
        .handle(|agent: Arc<SimAgent>, _ctx, _m: ReportNow| async move {
            agent
                .reporter
                .report(&agent.devices)
                .await
                .map(|_| ObjectList::len(&agent.devices) as u64)
                .map_err(|e| RemoteError::new("ReportFailed", "accel.agent", e.to_string()))
        })
        .handle(|_, _ctx, m: CleanupDevice| async move {
            Err::<(), _>(RemoteError::new(
                "NotFound",
                "accel.agent",
                format!("simulated host has no NVMe handle {}", m.handle_uuid),
            ))
        })
        .handle(|_, _ctx, m: ProgramFpga| async move {
            Err::<(), _>(RemoteError::new(
                accel_objects::errors::ErrorKind::ProgramFailed.as_str(),
                "accel.agent",
                format!("simulated host has no FPGA at {}", m.address),
            ))
        })
        .into_endpoint()
}

/// A database for one case: a new PostgreSQL or MariaDB database on the server of
/// `url`, or a SQLite file in `dir`. Returns its URL and what drops it.
async fn case_database(
    url: &str,
    dir: &std::path::Path,
) -> Result<(String, Option<String>), Error> {
    if url == "sqlite" || url.starts_with("sqlite:") {
        return Ok((format!("sqlite://{}", dir.join("fleet.db").display()), None));
    }
    let name = format!("accel_fleet_{}", uuid::Uuid::new_v4().simple());
    let db_url = Db::create_database(url, &name).await?;
    Ok((db_url, Some(name)))
}

async fn drop_database(admin_url: &str, name: &str) {
    if let Err(e) = Db::drop_database(admin_url, name).await {
        eprintln!("accel bench fleet: could not drop database {name}: {e}");
    }
}

/// The broker's message count of the conductors' queues, by passive declares on a
/// connection of its own.
struct QueueProbe {
    channel: amqprs::channel::Channel,
    _connection: amqprs::connection::Connection,
}

impl QueueProbe {
    async fn open(url: &str) -> Result<QueueProbe, Error> {
        let config = verso_rpc::transport::amqp::AmqpConfig::from_url(url)?;
        let host = config
            .hosts
            .first()
            .ok_or("the transport URL names no broker")?;
        let connection = amqprs::connection::Connection::open(
            amqprs::connection::OpenConnectionArguments::new(
                &host.host,
                host.port,
                &host.username,
                &host.password,
            )
            .virtual_host(&config.vhost),
        )
        .await?;
        let channel = connection.open_channel(None).await?;
        Ok(QueueProbe {
            channel,
            _connection: connection,
        })
    }

    /// Messages waiting in `queues` (a queue that does not exist counts 0).
    async fn depth(&mut self, queues: &[&str]) -> u64 {
        let mut n = 0;
        for q in queues {
            let args = amqprs::channel::QueueDeclareArguments::new(q)
                .passive(true)
                .finish();
            match self.channel.queue_declare(args).await {
                Ok(Some((_, count, _))) => n += u64::from(count),
                Ok(None) => {}
                Err(_) => {
                    // A refused passive declare closes the channel: take a new one.
                    if let Ok(ch) = self._connection.open_channel(None).await {
                        self.channel = ch;
                    }
                }
            }
        }
        n
    }
}

/// One case's figures.
#[derive(Clone, Debug, Default)]
struct CaseResult {
    agents: u64,
    conductors: u64,
    register_s: f64,
    /// The conductors' CPU with the fleet silent, ms per second, summed over the
    /// conductors: both quiet windows, and each.
    idle_ms_per_s: f64,
    idle_before_ms_per_s: f64,
    idle_after_ms_per_s: f64,
    hb_count: u64,
    hb_errors: u64,
    hb_per_s: f64,
    hb_p50: f64,
    hb_p99: f64,
    rep_count: u64,
    rep_errors: u64,
    rep_by_digest: u64,
    rep_per_s: f64,
    rep_p50: f64,
    rep_p99: f64,
    cpu_per_hb_ms: f64,
    cpu_per_report_ms: f64,
    /// Per conductor: CPU seconds in the heartbeat window, in the steady window, RSS MiB.
    per_conductor: Vec<(f64, f64, f64)>,
    queue_max: u64,
    queue_mean: f64,
    finalize_s: Option<f64>,
    last_error: Option<String>,
}

/// The conductors' CPU over a quiet window.
#[derive(Clone, Copy, Debug)]
struct Idle {
    cpu_s: f64,
    span_s: f64,
}

impl Idle {
    fn per_second(self) -> f64 {
        if self.span_s > 0.0 {
            self.cpu_s / self.span_s
        } else {
            0.0
        }
    }
}

/// A quiet window: the agents stop calling; once the calls in flight are answered
/// ([`QUIET_SETTLE`]), the conductors' CPU over `span`.
async fn quiet(
    conductors: &[Process],
    phase: &watch::Sender<(Phase, Instant)>,
    span: Duration,
    what: &str,
) -> Result<Idle, Error> {
    let _ = phase.send((Phase::Quiet, Instant::now()));
    tokio::time::sleep(QUIET_SETTLE).await;
    let cpu0 = cpu_of(conductors)?;
    let t = Instant::now();
    window(span, what).await;
    let cpu1 = cpu_of(conductors)?;
    Ok(Idle {
        cpu_s: spent(&cpu0, &cpu1),
        span_s: t.elapsed().as_secs_f64(),
    })
}

/// CPU seconds the conductors spent between two [`cpu_of`] readings, summed.
fn spent(before: &[f64], after: &[f64]) -> f64 {
    after.iter().zip(before).map(|(a, b)| a - b).sum()
}

fn cpu_of(conductors: &[Process]) -> Result<Vec<f64>, Error> {
    conductors
        .iter()
        .map(|p| {
            p.id()
                .and_then(cpu_seconds)
                .ok_or_else(|| "a conductor's CPU-time clock cannot be read (did it exit?)".into())
        })
        .collect()
}

async fn wait_ready(process: &mut Process, deadline: Duration) -> Result<(), Error> {
    let until = Instant::now() + deadline;
    loop {
        process.ensure_running()?;
        if process.log_text().contains("conductor: serving") {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!("{} did not start within {deadline:?}", process.name()).into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>28} [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_owned());
    bar
}

/// Waits `span`, showing it as a bar of seconds.
async fn window(span: Duration, what: &str) {
    let bar = bar(span.as_secs().max(1), what);
    let start = Instant::now();
    while start.elapsed() < span {
        tokio::time::sleep(Duration::from_millis(250).min(span.saturating_sub(start.elapsed())))
            .await;
        bar.set_position(start.elapsed().as_secs());
    }
    bar.finish_and_clear();
}

async fn agent_loop(
    agent: Arc<SimAgent>,
    index: usize,
    count: usize,
    options: Arc<FleetOptions>,
    mut phase: watch::Receiver<(Phase, Instant)>,
    recorder: Arc<Recorder>,
) {
    let share = |span: Duration| span.mul_f64(index as f64 / count as f64);
    let mut next_hb = Instant::now() + share(options.heartbeat_interval);
    let mut next_report: Option<Instant> = None;
    loop {
        let (current, since) = *phase.borrow_and_update();
        match current {
            Phase::Stop => return,
            Phase::Quiet => {
                if phase.changed().await.is_err() {
                    return;
                }
                // Spread evenly again from the next phase's start, as at the first.
                let (_, since) = *phase.borrow();
                next_hb = since + share(options.heartbeat_interval);
                continue;
            }
            Phase::Steady if next_report.is_none() => {
                next_report = Some(since + share(options.report_interval));
            }
            Phase::Steady => {}
            _ => next_report = None,
        }
        let wake = next_report.map_or(next_hb, |r| r.min(next_hb));
        tokio::select! {
            () = tokio::time::sleep_until(wake.into()) => {}
            changed = phase.changed() => {
                if changed.is_err() { return; }
                continue;
            }
        }
        let now = Instant::now();
        if now >= next_hb {
            next_hb += options.heartbeat_interval;
            let start = Instant::now();
            let r = heartbeat(&agent.upgrade, &agent.versions, &agent.host).await;
            recorder.record(
                current,
                false,
                start.elapsed(),
                r.map(|_| false).map_err(|e| e.to_string()),
            );
        }
        if let Some(due) = next_report.filter(|due| now >= *due) {
            next_report = Some(due + options.report_interval);
            let start = Instant::now();
            let r = agent.reporter.report(&agent.devices).await;
            recorder.record(current, true, start.elapsed(), r.map_err(|e| e.to_string()));
        }
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

async fn run_case(
    options: &Arc<FleetOptions>,
    agents: usize,
    conductors: usize,
) -> Result<CaseResult, Error> {
    let dir = tempfile::Builder::new().prefix("accel-fleet-").tempdir()?;
    let (db_url, dropped) = case_database(&options.database, dir.path()).await?;
    let result = run_case_on(options, agents, conductors, &db_url, dir.path()).await;
    if let Some(name) = dropped {
        drop_database(&options.database, &name).await;
    }
    result
}

async fn run_case_on(
    options: &Arc<FleetOptions>,
    agents: usize,
    conductors: usize,
    db_url: &str,
    dir: &std::path::Path,
) -> Result<CaseResult, Error> {
    let mut result = CaseResult {
        agents: agents as u64,
        conductors: conductors as u64,
        ..CaseResult::default()
    };
    // 1. Inside the upgrade window: release N's apparent version under N+1's software.
    let db = Db::connect(db_url).await?;
    db.migrate().await?;
    VersionManager::<AccelVersion>::builder_tx(DbVersionStore::new(
        db.clone(),
        AccelVersion::COMPONENT,
    ))
    .fresh_at(AccelVersion::Initial)
    .open()
    .await?;
    db.close().await;

    // 2. The conductors.
    let exchange = format!("accel-fleet-{}", uuid::Uuid::new_v4().simple());
    let config = dir.join("accel.toml");
    let mut text = format!(
        "[database]\nurl = {}\n\n[transport]\nurl = {}\ncontrol_exchange = {}\n\n\
         [cyborg]\ncontrol_exchange = {}\n",
        toml_string(db_url),
        toml_string(&options.transport_url),
        toml_string(&exchange),
        toml_string(&cyborg_exchange(&exchange)),
    );
    if let Some(threads) = options.conductor_threads {
        text.push_str(&format!("\n[conductor]\nthreads = {threads}\n"));
    }
    std::fs::write(&config, text)?;
    let launcher = Launcher::new(std::env::current_exe()?, dir.join("logs"))?;
    let mut running = Vec::new();
    for i in 0..conductors {
        let args = vec![
            "--config".to_owned(),
            config.display().to_string(),
            "conductor".to_owned(),
        ];
        running.push(launcher.spawn(&format!("conductor-{i}"), &args)?);
    }
    let outcome = drive(options, agents, &mut running, &exchange, dir, &mut result).await;
    for p in running {
        p.stop().await;
    }
    outcome.map(|()| result)
}

/// The case's Cyborg control exchange (its conductors serve Cyborg's conductor API
/// there; agents on Cyborg's wire report there).
fn cyborg_exchange(exchange: &str) -> String {
    format!("{exchange}-cyborg")
}

fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

async fn drive(
    options: &Arc<FleetOptions>,
    agents: usize,
    conductors: &mut [Process],
    exchange: &str,
    dir: &std::path::Path,
    result: &mut CaseResult,
) -> Result<(), Error> {
    for p in conductors.iter_mut() {
        wait_ready(p, Duration::from_secs(60)).await?;
    }
    // 3. The agents, registered as their start does.
    let mut transports: Vec<Arc<dyn Transport>> = Vec::new();
    let mut cyborg_transports: Vec<Arc<dyn Transport>> = Vec::new();
    for _ in 0..agents.div_ceil(AGENTS_PER_CONNECTION) {
        transports.push(transport_from_url(&options.transport_url, Some(exchange)).await?);
        if options.wire == FleetWire::Cyborg {
            let on = cyborg_exchange(exchange);
            cyborg_transports.push(transport_from_url(&options.transport_url, Some(&on)).await?);
        }
    }
    let state = dir.join("agents");
    let devices = inventory(options.devices);
    let started = Instant::now();
    let progress = bar(agents as u64, &format!("registering {agents} agents"));
    let registered: Vec<Result<(Arc<SimAgent>, ServerHandle), Error>> =
        futures::stream::iter(0..agents)
            .map(|i| {
                let transport = transports[i / AGENTS_PER_CONNECTION].clone();
                let cyborg = cyborg_transports.get(i / AGENTS_PER_CONNECTION).cloned();
                let (state, devices, progress) = (state.clone(), devices.clone(), progress.clone());
                async move {
                    let host = format!("fleet-{i:05}");
                    let upgrade =
                        RpcClient::for_api::<UpgradeApi>(transport.clone(), UPGRADE_TOPIC);
                    let versions = open_versions(&upgrade, &host, &state).await?;
                    let reporter = match cyborg {
                        // As an agent on Cyborg's wire reports: Cyborg's report_data, by
                        // digest while unchanged (no cap: accel's conductor).
                        Some(t) => SimReporter::Cyborg(
                            CyborgReporter::new(
                                t.clone(),
                                host.clone(),
                                PathBuf::new(),
                                Duration::from_secs(60),
                            )
                            .with_digests(RpcClient::for_api::<
                                accel_objects::cyborg::ConductorApi,
                            >(
                                t,
                                accel_cyborg17::rpc::CONDUCTOR_TOPIC,
                            )),
                        ),
                        None => SimReporter::Accel(Reporter::new(
                            host.clone(),
                            conductor_client(transport.clone(), None),
                        )),
                    };
                    let agent = Arc::new(SimAgent {
                        reporter,
                        host: host.clone(),
                        upgrade,
                        versions,
                        devices,
                    });
                    heartbeat(&agent.upgrade, &agent.versions, &host).await?;
                    agent.reporter.report(&agent.devices).await?;
                    let server =
                        RpcServer::new(transport, Target::new(AGENT_TOPIC).with_server(host))
                            .endpoint(agent_endpoint(agent.clone()))?
                            .start()
                            .await?;
                    progress.inc(1);
                    Ok((agent, server))
                }
            })
            .buffer_unordered(REGISTER_CONCURRENCY)
            .collect()
            .await;
    progress.finish_and_clear();
    let mut fleet = Vec::new();
    let mut servers = Vec::new();
    for r in registered {
        let (agent, server) = r.map_err(|e| format!("registering an agent: {e}"))?;
        fleet.push(agent);
        servers.push(server);
    }
    result.register_s = started.elapsed().as_secs_f64();

    let outcome = measure(options, &fleet, conductors, exchange, result).await;
    for s in servers {
        s.stop().await;
    }
    outcome
}

async fn measure(
    options: &Arc<FleetOptions>,
    fleet: &[Arc<SimAgent>],
    conductors: &mut [Process],
    exchange: &str,
    result: &mut CaseResult,
) -> Result<(), Error> {
    let recorder = Arc::new(Recorder::default());
    let (phase_tx, phase_rx) = watch::channel((Phase::Warmup, Instant::now()));
    let tasks: Vec<_> = fleet
        .iter()
        .enumerate()
        .map(|(i, a)| {
            tokio::spawn(agent_loop(
                a.clone(),
                i,
                fleet.len(),
                options.clone(),
                phase_rx.clone(),
                recorder.clone(),
            ))
        })
        .collect();
    // Queue depth, sampled while the windows run.
    let depths = Arc::new(Mutex::new(Vec::<u64>::new()));
    let sampling = {
        let (depths, url, mut phase) = (
            depths.clone(),
            options.transport_url.clone(),
            phase_rx.clone(),
        );
        tokio::spawn(async move {
            let Ok(mut probe) = QueueProbe::open(&url).await else {
                return;
            };
            loop {
                let current = phase.borrow_and_update().0;
                if matches!(current, Phase::Finalize | Phase::Stop) {
                    return;
                }
                if matches!(current, Phase::Heartbeats | Phase::Steady) {
                    let d = probe
                        .depth(&[
                            accel_objects::rpc::CONDUCTOR_TOPIC,
                            UPGRADE_TOPIC,
                            accel_cyborg17::rpc::CONDUCTOR_TOPIC,
                        ])
                        .await;
                    depths
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(d);
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = phase.changed() => {}
                }
            }
        })
    };
    let outcome = windows(
        options, fleet, conductors, exchange, &phase_tx, &recorder, result,
    )
    .await;
    let _ = phase_tx.send((Phase::Stop, Instant::now()));
    for t in tasks {
        let _ = t.await;
    }
    let _ = sampling.await;
    let depths = std::mem::take(&mut *depths.lock().unwrap_or_else(PoisonError::into_inner));
    result.queue_max = depths.iter().copied().max().unwrap_or(0);
    result.queue_mean = if depths.is_empty() {
        0.0
    } else {
        depths.iter().sum::<u64>() as f64 / depths.len() as f64
    };
    result.last_error = recorder
        .last_error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    outcome
}

async fn windows(
    options: &Arc<FleetOptions>,
    fleet: &[Arc<SimAgent>],
    conductors: &mut [Process],
    exchange: &str,
    phase: &watch::Sender<(Phase, Instant)>,
    recorder: &Recorder,
    result: &mut CaseResult,
) -> Result<(), Error> {
    // Every agent heartbeats once before anything is measured.
    window(options.heartbeat_interval, "warming up").await;

    // What the conductors spend with the fleet registered and silent (timers, the
    // version refresh, learning the fleet record, the broker's and the pool's upkeep),
    // before the windows and after them; taken off the windows' CPU before dividing.
    let idle_before = quiet(conductors, phase, options.idle_window, "idle before").await?;

    // 4. Heartbeats only.
    let cpu0 = cpu_of(conductors)?;
    let t0 = Instant::now();
    let _ = phase.send((Phase::Heartbeats, t0));
    window(options.heartbeat_window, "heartbeat window").await;
    let _ = phase.send((Phase::Warmup, Instant::now()));
    let hb_span = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_of(conductors)?;
    let hb = recorder.take(false, 0);

    // 5. Heartbeats and reports.
    let cpu2 = cpu_of(conductors)?;
    let t2 = Instant::now();
    let _ = phase.send((Phase::Steady, t2));
    window(options.duration, "steady window").await;
    let _ = phase.send((Phase::Quiet, Instant::now()));
    let steady_span = t2.elapsed().as_secs_f64();
    let cpu3 = cpu_of(conductors)?;
    let hb2 = recorder.take(false, 1);
    let reps = recorder.take(true, 1);

    let idle_after = quiet(conductors, phase, options.idle_window, "idle after").await?;
    let _ = phase.send((Phase::Finalize, Instant::now()));
    result.idle_before_ms_per_s = idle_before.per_second() * 1e3;
    result.idle_after_ms_per_s = idle_after.per_second() * 1e3;
    let idle = Idle {
        cpu_s: idle_before.cpu_s + idle_after.cpu_s,
        span_s: idle_before.span_s + idle_after.span_s,
    }
    .per_second();
    result.idle_ms_per_s = idle * 1e3;
    let hb_cpu = (spent(&cpu0, &cpu1) - idle * hb_span).max(0.0);
    let hb_count = hb.latencies_ms.len() as u64;
    let cpu_per_hb = if hb_count == 0 {
        0.0
    } else {
        hb_cpu / hb_count as f64
    };
    let steady_cpu = spent(&cpu2, &cpu3) - idle * steady_span;
    let rep_count = reps.latencies_ms.len() as u64;
    let report_cpu = (steady_cpu - hb2.latencies_ms.len() as f64 * cpu_per_hb).max(0.0);

    let hb_all: Vec<f64> = hb
        .latencies_ms
        .iter()
        .chain(&hb2.latencies_ms)
        .copied()
        .collect();
    let hb_sorted = sorted(hb_all);
    let rep_sorted = sorted(reps.latencies_ms);
    result.hb_count = hb_count + hb2.latencies_ms.len() as u64;
    result.hb_errors = hb.errors + hb2.errors;
    result.hb_per_s = hb_count as f64 / hb_span;
    result.hb_p50 = quantile(&hb_sorted, 0.5);
    result.hb_p99 = quantile(&hb_sorted, 0.99);
    result.rep_count = rep_count;
    result.rep_errors = reps.errors;
    result.rep_by_digest = reps.by_digest;
    result.rep_per_s = rep_count as f64 / steady_span;
    result.rep_p50 = quantile(&rep_sorted, 0.5);
    result.rep_p99 = quantile(&rep_sorted, 0.99);
    result.cpu_per_hb_ms = cpu_per_hb * 1e3;
    result.cpu_per_report_ms = if rep_count == 0 {
        0.0
    } else {
        report_cpu / rep_count as f64 * 1e3
    };
    result.per_conductor = conductors
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let rss = p.id().and_then(rss_bytes).unwrap_or(0) as f64 / (1024.0 * 1024.0);
            (cpu1[i] - cpu0[i], cpu3[i] - cpu2[i], rss)
        })
        .collect();

    // 6. Finalization, as `accel upgrade finalize` starts it.
    let transport = transport_from_url(&options.transport_url, Some(exchange)).await?;
    let client = RpcClient::for_api::<UpgradeApi>(transport, UPGRADE_TOPIC);
    let ctx = RequestContext::new("accel-bench-finalize");
    let started = Instant::now();
    match finalize_and_wait(&client, &ctx, Duration::ZERO, Duration::from_secs(1)).await? {
        WaitOutcome::Refused(r) => return Err(format!("finalize refused: {r}").into()),
        WaitOutcome::Finalized(_) | WaitOutcome::TimedOut(_) => {}
    }
    let deadline = options.heartbeat_interval * 10 + Duration::from_secs(60);
    let progress = bar(fleet.len() as u64, "finalizing");
    loop {
        let done = fleet
            .iter()
            .filter(|a| a.versions.apparent() == AccelVersion::software())
            .count();
        progress.set_position(done as u64);
        if done == fleet.len() {
            result.finalize_s = Some(started.elapsed().as_secs_f64());
            break;
        }
        if started.elapsed() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    progress.finish_and_clear();
    Ok(())
}

fn table(results: &[CaseResult]) -> Table {
    let columns = [
        "agents",
        "conductors",
        "register s",
        "idle CPU ms/s (before/after)",
        "heartbeats/s",
        "heartbeat p50 ms",
        "heartbeat p99 ms",
        "reports/s",
        "by digest",
        "report p50 ms",
        "report p99 ms",
        "CPU ms/heartbeat",
        "CPU ms/report",
        "conductor CPU s (hb, steady)",
        "RSS MiB",
        "queue max/mean",
        "errors",
        "finalize s",
    ];
    let rows = results
        .iter()
        .map(|r| {
            vec![
                r.agents.to_string(),
                r.conductors.to_string(),
                format!("{:.1}", r.register_s),
                format!(
                    "{:.1} ({:.1}/{:.1})",
                    r.idle_ms_per_s, r.idle_before_ms_per_s, r.idle_after_ms_per_s
                ),
                format!("{:.1}", r.hb_per_s),
                format!("{:.2}", r.hb_p50),
                format!("{:.2}", r.hb_p99),
                format!("{:.2}", r.rep_per_s),
                format!("{}/{}", r.rep_by_digest, r.rep_count),
                format!("{:.2}", r.rep_p50),
                format!("{:.2}", r.rep_p99),
                format!("{:.3}", r.cpu_per_hb_ms),
                format!("{:.3}", r.cpu_per_report_ms),
                r.per_conductor
                    .iter()
                    .map(|(a, b, _)| format!("{a:.2}/{b:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                r.per_conductor
                    .iter()
                    .map(|(_, _, m)| format!("{m:.0}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                format!("{}/{:.1}", r.queue_max, r.queue_mean),
                (r.hb_errors + r.rep_errors).to_string(),
                r.finalize_s
                    .map_or("not finished".into(), |s| format!("{s:.1}")),
            ]
        })
        .collect();
    Table {
        title: "per fleet size and conductor count".into(),
        columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        rows,
    }
}

fn series_by_conductors(
    results: &[CaseResult],
    label: &str,
    y: impl Fn(&CaseResult) -> Option<f64>,
) -> Vec<Series> {
    let mut counts: Vec<u64> = results.iter().map(|r| r.conductors).collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .map(|c| Series {
            label: format!("{label}, {c} conductor{}", if c == 1 { "" } else { "s" }),
            points: results
                .iter()
                .filter(|r| r.conductors == c)
                .filter_map(|r| y(r).map(|v| [r.agents as f64, v]))
                .collect(),
        })
        .collect()
}

fn bench_file(options: &FleetOptions, started: String, results: &[CaseResult]) -> BenchResult {
    let hb_limit = 0.2;
    let report_limit = 1.0;
    let finalize_limit = 2.0 * options.heartbeat_interval.as_secs_f64();
    let worst = |f: &dyn Fn(&CaseResult) -> f64| results.iter().map(f).fold(0.0, f64::max);
    let mut targets = vec![
        at_most(
            "conductor CPU per heartbeat (worst case)",
            worst(&|r| r.cpu_per_hb_ms),
            hb_limit,
            "ms",
        ),
        at_most(
            format!(
                "conductor CPU per unchanged {}-device report (worst case)",
                options.devices
            ),
            worst(&|r| r.cpu_per_report_ms),
            report_limit,
            "ms",
        ),
    ];
    if let Some(largest) = results.iter().map(|r| r.agents).max() {
        let finalize = results
            .iter()
            .filter(|r| r.agents == largest)
            .map(|r| r.finalize_s.unwrap_or(f64::INFINITY))
            .fold(0.0, f64::max);
        targets.push(at_most(
            format!("{largest} agents finalized after finalize (two heartbeat intervals)"),
            if finalize.is_finite() { finalize } else { -1.0 },
            finalize_limit,
            "s",
        ));
        if !finalize.is_finite() {
            if let Some(t) = targets.last_mut() {
                t.met = false;
            }
        }
    }
    let charts = vec![
        Chart {
            id: "fleet-latency".into(),
            title: "call latency by fleet size".into(),
            x_label: "agents".into(),
            y_label: "ms".into(),
            log_x: true,
            log_y: false,
            series: [
                series_by_conductors(results, "heartbeat p50", |r| Some(r.hb_p50)),
                series_by_conductors(results, "heartbeat p99", |r| Some(r.hb_p99)),
                series_by_conductors(results, "report p50", |r| Some(r.rep_p50)),
                series_by_conductors(results, "report p99", |r| Some(r.rep_p99)),
            ]
            .concat(),
        },
        Chart {
            id: "fleet-cpu".into(),
            title: "conductor CPU per call by fleet size".into(),
            x_label: "agents".into(),
            y_label: "ms".into(),
            log_x: true,
            log_y: false,
            series: [
                series_by_conductors(results, "per heartbeat", |r| Some(r.cpu_per_hb_ms)),
                series_by_conductors(results, "per report", |r| Some(r.cpu_per_report_ms)),
            ]
            .concat(),
        },
        Chart {
            id: "fleet-finalize".into(),
            title: "time from finalize to every agent finalized".into(),
            x_label: "agents".into(),
            y_label: "s".into(),
            log_x: true,
            log_y: false,
            series: series_by_conductors(results, "finalize", |r| r.finalize_s),
        },
    ];
    let database = if options.database.starts_with("sqlite") {
        "SQLite"
    } else if options.database.starts_with("mysql") || options.database.starts_with("mariadb") {
        "MariaDB"
    } else {
        "PostgreSQL"
    };
    let summary = format!(
        "Simulated accel agents (each its own host name, version record and agent-API \
         server, using the agent's own client code) heartbeat every {} s and report {} \
         devices every {} s on {} over the local RabbitMQ to real `accel conductor` \
         processes on {}. A heartbeat-only window ({} s) gives the conductors' CPU per \
         heartbeat; a steady window with reports ({} s; unchanged inventories, sent by \
         digest) gives the CPU per report after the heartbeats' share; then `finalize` \
         is timed until every agent has finalized. CPU is the conductor processes' CPU-time clocks \
         (clock_getcpuclockid, nanoseconds), summed over the conductors, less what they \
         spend idle (measured for {} s with every agent registered and silent, before the \
         windows and again after them), divided by the calls they served.",
        options.heartbeat_interval.as_secs_f64(),
        options.devices,
        options.report_interval.as_secs_f64(),
        options.wire.label(),
        database,
        options.heartbeat_window.as_secs_f64(),
        options.duration.as_secs_f64(),
        options.idle_window.as_secs_f64(),
    );
    let conductors = match (
        options.conductors.iter().min(),
        options.conductors.iter().max(),
    ) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi} conductors"),
        (Some(1), _) => "1 conductor".to_owned(),
        (Some(n), _) => format!("{n} conductors"),
        _ => "conductors".to_owned(),
    };
    let mut file = BenchResult::new(
        "fleet",
        format!(
            "accel fleet: simulated agents on {}, {conductors} on {database} and RabbitMQ",
            options.wire.label()
        ),
        options.command.clone(),
    );
    file.started = started;
    file.summary = summary;
    file.charts = charts;
    file.tables = vec![table(results)];
    file.targets = targets;
    file
}

/// A target whose value must be at most `limit`.
fn at_most(name: impl Into<String>, value: f64, limit: f64, unit: &str) -> bench_report::Target {
    bench_report::Target::new(name, value, limit, unit, Better::Lower)
}

fn print_table(file: &BenchResult) {
    for t in &file.tables {
        let mut out = comfy_table::Table::new();
        out.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
            .set_header(t.columns.clone());
        for row in &t.rows {
            out.add_row(row.clone());
        }
        println!("{}\n{out}", t.title);
    }
    for t in &file.targets {
        println!(
            "target {}: {:.3} {} (limit {} {}): {}",
            t.name,
            t.value,
            t.unit,
            t.limit,
            t.unit,
            if t.met { "met" } else { "NOT met" }
        );
    }
}

/// Runs every case (each fleet size with each conductor count) and writes the results.
pub async fn run(options: FleetOptions) -> Result<ExitCode, Error> {
    if options.heartbeat_interval.is_zero() || options.report_interval.is_zero() {
        return Err("--heartbeat-interval and --report-interval must be above zero".into());
    }
    if options.devices == 0 || options.devices > 8000 {
        return Err("--devices must be 1 to 8000".into());
    }
    if let Some(c) = options.conductors.iter().find(|c| **c == 0 || **c > 8) {
        return Err(format!("--conductors {c}: 1 to 8").into());
    }
    if options.agents.contains(&0) {
        return Err("--agents: every fleet size must be at least 1".into());
    }
    let options = Arc::new(options);
    let started = bench_report::now_utc();
    let mut results = Vec::new();
    for &agents in &options.agents {
        for &conductors in &options.conductors {
            eprintln!("accel bench fleet: {agents} agents, {conductors} conductor(s)");
            let r = run_case(&options, agents as usize, conductors as usize).await?;
            if let Some(e) = &r.last_error {
                eprintln!("accel bench fleet: last failed call: {e}");
            }
            results.push(r);
        }
    }
    let file = bench_file(&options, started, &results);
    print_table(&file);
    if let Some(path) = options.json.as_deref() {
        std::fs::write(path, serde_json::to_string_pretty(&file)? + "\n")?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = file.write_if_asked()? {
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
