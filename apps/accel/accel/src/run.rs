//! What each subcommand runs.

use crate::config::{AccelConfig, AuthStrategyName};
use crate::lifecycle::{Ended, Lifecycle, Part};
use accel_agent::service::{AgentConfig, AgentStartError, AgentStop, NvmeConfig};
use accel_conductor::runtime::{RunningConductor, StartOptions};
use accel_conductor::{Db, DbVersionStore};
pub use accel_objects::rpc::{CONDUCTOR_TOPIC, UPGRADE_TOPIC};
use accel_objects::AccelVersion;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};
use verso_rpc::transport::{transport_from_url, Transport};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{ComponentVersion, Observed};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// A line on stdout, where a service says what it serves; a closed stdout (a supervisor
/// that stopped reading) is ignored: it must not turn a running service into a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

async fn transport(config: &AccelConfig) -> Result<Arc<dyn Transport>, Error> {
    transport_on(config, &config.transport.control_exchange).await
}

/// The configured transport on `exchange`, with `[transport] call_monitor_timeout` on
/// RabbitMQ.
async fn transport_on(config: &AccelConfig, exchange: &str) -> Result<Arc<dyn Transport>, Error> {
    let url = &config.transport.url;
    if url.starts_with("memory:") {
        return Ok(transport_from_url(url, Some(exchange)).await?);
    }
    let amqp = AmqpConfig::from_url(url)?
        .with_control_exchange(exchange)
        .with_call_monitor_timeout(Some(Duration::from_secs(
            config.transport.call_monitor_timeout,
        )));
    Ok(Arc::new(AmqpTransport::connect_with(amqp).await?))
}

async fn open_db(url: &str) -> Result<Db, Error> {
    let db = Db::connect(url).await?;
    let applied = db.migrate().await?;
    if !applied.is_empty() {
        tracing::info!(?applied, "database migrated");
    }
    Ok(db)
}

/// `[nova]` as checked before anything starts.
type NovaOptions = Option<(
    accel_conductor::keystone::Session,
    accel_conductor::nova::NovaOptions,
)>;

/// `cyborg`: a transport on Cyborg's control exchange when the conductor serves agents
/// on Cyborg's wire (`[cyborg] serve_agents`), for their `cleanup_device`.
async fn start_conductor(
    db: Db,
    transport: Arc<dyn Transport>,
    config: &AccelConfig,
    nova: NovaOptions,
    cyborg: Option<Arc<dyn Transport>>,
) -> Result<RunningConductor, Error> {
    // Zero would count no agent as live: finalization would never be blocked.
    if config.conductor.agent_liveness == 0 {
        return Err("[conductor] agent_liveness must be at least 1 (seconds)".into());
    }
    // Where a database without a version record starts is the database's to say
    // (`Db::starts_at_release_n`: release N when it holds Cyborg's rows).
    let options = StartOptions {
        agent_liveness: Duration::from_secs(config.conductor.agent_liveness),
        // Nova's build waits for accelerator-request-bound events when it is told.
        nova: nova
            .map(|(session, options)| accel_conductor::nova::Notifier::start(session, options)),
        cyborg_agents: cyborg.map(|transport| accel_conductor::runtime::CyborgAgents {
            transport,
            cap: config
                .layers
                .cap(accel_conductor::runtime::CYBORG_AGENT_CAP),
        }),
        glance: config.conductor_glance()?,
        ..StartOptions::default()
    };
    Ok(
        accel_conductor::runtime::start_with(db, transport, config.layers.cap("agent"), options)
            .await?,
    )
}

/// A client of the conductor API, capped by `[upgrade_levels] conductor`.
fn conductor_client(config: &AccelConfig, transport: Arc<dyn Transport>) -> verso_rpc::RpcClient {
    accel_agent::service::conductor_client(transport, config.layers.cap("conductor"))
}

/// `accel conductor`.
pub async fn conductor(config: AccelConfig) -> Result<ExitCode, Error> {
    let placement = config.placement.client()?;
    let nova = config.nova.options()?;
    let db = open_db(&config.database.url).await?;
    let mut parts = Lifecycle::new(Duration::from_secs(config.conductor.stop_timeout));
    let (_, cyborg) = conductor_parts(&db, &config, nova, &mut parts).await?;
    say!(
        "conductor: serving {CONDUCTOR_TOPIC} and {UPGRADE_TOPIC} on {}",
        verso_rpc::transport::amqp::redact(&config.transport.url)
    );
    // Each deployable a resource provider in Placement, reconciled from the database.
    if let Some((client, schedule)) = placement {
        say!(
            "conductor: keeping resource providers in Placement every {} s",
            schedule.interval.as_secs()
        );
        parts.push(Part::Task(accel_conductor::placement::spawn_reconciler(
            db.clone(),
            client,
            schedule,
            accel_conductor::runtime::conductor_id(),
        )));
    }
    if cyborg.is_some() {
        say!(
            "conductor: serving Cyborg's conductor API on {} (exchange {}) for accel's agents and Cyborg 17's",
            accel_conductor::cyborg::TOPIC,
            config.cyborg.control_exchange
        );
    }
    parts.ended().await;
    // Stop taking calls everywhere, answer the ones taken, then flush the answers out:
    // an answer still in this process when it exits is a caller left waiting.
    let finished = parts.stop().await;
    say!(
        "conductor: stopped{}",
        if finished {
            ""
        } else {
            " (calls still running were abandoned at stop_timeout)"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The conductor over `db`, its parts in `parts`: accel's conductor and upgrade APIs on
/// `[transport] control_exchange`, and, unless `[cyborg] serve_agents = false`,
/// Cyborg's conductor API (1.1: Cyborg 17's methods and the seed spec's object
/// indirection) on `[cyborg] control_exchange`, where accel's agents report and Cyborg
/// 17's agents left during a migration too (their reports tell the fleet record that
/// their hosts still run release N). Every server is up when it returns. Returns the
/// transports (accel's, Cyborg's if served), for the agents of an all-in-one: the
/// embedded transport is one bus per transport.
async fn conductor_parts(
    db: &Db,
    config: &AccelConfig,
    nova: NovaOptions,
    parts: &mut Lifecycle,
) -> Result<(Arc<dyn Transport>, Option<Arc<dyn Transport>>), Error> {
    let transport = transport(config).await?;
    parts.close_at_end(transport.clone());
    let cyborg = if config.cyborg.serve_agents {
        let t = transport_on(config, &config.cyborg.control_exchange).await?;
        parts.close_at_end(t.clone());
        Some(t)
    } else {
        None
    };
    let running =
        start_conductor(db.clone(), transport.clone(), config, nova, cyborg.clone()).await?;
    let shared = running.shared();
    parts.push(Part::Conductor(running));
    if let Some(t) = &cyborg {
        let server =
            accel_conductor::cyborg::serve_with(t.clone(), accel_conductor::cyborg::TOPIC, shared)
                .await?;
        parts.push(Part::Server(server));
    }
    Ok((transport, cyborg))
}

/// What to check when an agent on Cyborg's wire (release N+1 there) found no accel
/// conductor at `step` (a first heartbeat, or a first report).
fn cyborg_wire_hint(step: accel_agent::service::StartStep) -> &'static str {
    if step.is_heartbeat() {
        "on Cyborg's wire at [upgrade_levels] cyborg_conductor 1.1 or above the agent needs accel's conductor (its upgrade API); while this host's conductor is still Cyborg 17's, set cyborg_conductor = \"1.0\""
    } else {
        "on Cyborg's wire the agent reports to accel's conductor on cyborg-conductor: check that it serves Cyborg's conductor API ([cyborg] serve_agents, on by default) on the same [cyborg] control_exchange"
    }
}

/// `[upgrade_levels] cyborg_conductor` when it is below the seed spec's 1.1, i.e. names a
/// Cyborg 17 conductor (no object indirection); `None` at 1.1 or unset (no cap is the
/// newest version, as everywhere in `[upgrade_levels]`).
fn cyborg_17_conductor_cap(config: &AccelConfig) -> Option<verso::Version> {
    config
        .layers
        .cap(accel_agent::service::CYBORG_CONDUCTOR_CAP)
        .filter(|c| *c < accel_objects::cyborg::INDIRECTION_VERSION)
}

/// How an agent speaks Cyborg's wire on `transport` (`[cyborg] control_exchange`),
/// capped by `[upgrade_levels] cyborg_conductor`.
fn cyborg_wire(
    config: &AccelConfig,
    transport: Arc<dyn Transport>,
) -> accel_agent::service::CyborgWire {
    accel_agent::service::CyborgWire {
        transport,
        conductor_cap: config
            .layers
            .cap(accel_agent::service::CYBORG_CONDUCTOR_CAP),
        report_timeout: CYBORG_REPORT_TIMEOUT,
    }
}

fn default_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The library configuration of an agent on `host` from accel's configuration.
fn agent_config(
    config: &AccelConfig,
    host: String,
    sysfs_root: PathBuf,
    fpga: Option<Arc<accel_agent::fpga::Programmer>>,
) -> AgentConfig {
    AgentConfig {
        fpga,
        host,
        sysfs_root,
        state_dir: config.agent.state_dir.clone(),
        report_interval: Duration::from_secs(config.agent.report_interval.max(1)),
        conductor_cap: config.layers.cap("conductor"),
        pci_managed: config.pci.managed,
        nvme: NvmeConfig {
            cleanup_command: config.nvme.cleanup_command.clone(),
            cleanup_timeout: Duration::from_secs(config.nvme.cleanup_timeout.max(1)),
        },
        scan_interval: Duration::from_secs(config.agent.scan_interval.max(1)),
        cyborg_wire: None,
    }
}

/// The exit code and message of an agent that did not start: 3 when the conductor
/// refused it (fencing), 2 otherwise.
fn not_started(host: &str, e: &AgentStartError) -> ExitCode {
    eprintln!("accel agent {host}: {e}");
    match e {
        AgentStartError::Fenced(_) => ExitCode::from(3),
        _ => ExitCode::from(2),
    }
}

fn stopped(host: &str, stop: AgentStop) -> ExitCode {
    match stop {
        AgentStop::Stopped => ExitCode::SUCCESS,
        AgentStop::Fenced(f) => {
            eprintln!("accel agent {host}: refused by the conductor: {}", f.reason);
            ExitCode::from(3)
        }
        AgentStop::Versions(e) => {
            eprintln!("accel agent {host}: {e}");
            ExitCode::from(2)
        }
    }
}

/// `accel agent`.
pub async fn agent(
    config: AccelConfig,
    host: Option<String>,
    sysfs_root: Option<PathBuf>,
    once: bool,
) -> Result<ExitCode, Error> {
    let host = host
        .or_else(|| config.agent.host.clone())
        .unwrap_or_else(default_host);
    let sysfs_root = sysfs_root.unwrap_or_else(|| config.agent.sysfs_root.clone());
    // [fpga] and [glance] are checked before anything starts.
    let programmer = config
        .fpga_programmer(config.agent.state_dir.clone())?
        .map(Arc::new);
    let mut library_config = agent_config(
        &config,
        host.clone(),
        sysfs_root.clone(),
        programmer.clone(),
    );
    let mut cyborg_transport = None;
    // Cyborg's wire by default.
    if config.cyborg.report_to_cyborg {
        if let Some(c) = cyborg_17_conductor_cap(&config) {
            // A Cyborg 17 conductor has no object indirection: the handles' mode cannot
            // be set through it.
            if !config.pci.managed {
                let why = verso_rpc::conductor::IndirectionUnavailable {
                    feature: accel_agent::service::UNMANAGED_PCI_FEATURE.to_owned(),
                    option: accel_agent::service::CYBORG_CONDUCTOR_CAP.to_owned(),
                    required: accel_objects::cyborg::INDIRECTION_VERSION,
                    configured: c.to_string(),
                };
                eprintln!("accel agent {host}: {why}");
                return Ok(ExitCode::from(2));
            }
            return cyborg_agent(&config, host, sysfs_root, programmer, once).await;
        }
        // Release N+1 on Cyborg's wire: Cyborg's conductor and agent APIs with the seed
        // spec, accel's heartbeats.
        let wire = transport_on(&config, &config.cyborg.control_exchange).await?;
        library_config.cyborg_wire = Some(cyborg_wire(&config, wire.clone()));
        cyborg_transport = Some(wire);
    }
    let transport = transport(&config).await?;
    let running = match accel_agent::service::start(library_config, transport.clone()).await {
        Ok(r) => r,
        Err(e) => {
            if let (Some(_), AgentStartError::Conductor { step, .. }) = (&cyborg_transport, &e) {
                eprintln!("accel agent {host}: {}", cyborg_wire_hint(*step));
            }
            return Ok(not_started(&host, &e));
        }
    };
    if once {
        let n = running.devices_reported();
        running.stop().await;
        transport.close().await;
        if let Some(wire) = cyborg_transport {
            wire.close().await;
        }
        say!("agent {host}: reported {n} devices");
        return Ok(ExitCode::SUCCESS);
    }
    let mut parts = Lifecycle::new(Duration::from_secs(config.conductor.stop_timeout));
    // The agent's last answers and report reach the broker before the process goes.
    parts.close_at_end(transport);
    let apparent = running.apparent().label();
    parts.push(Part::Agent {
        host: host.clone(),
        running,
    });
    // A Cyborg 17 conductor still running during a migration calls this host's agent
    // on Cyborg's exchange (mdev creation and removal, FPGA programming); on Cyborg's
    // wire the agent serves that API already. Started before the agent says it serves.
    let also_cyborg = if config.cyborg.serve_conductor && cyborg_transport.is_none() {
        let t = transport_on(&config, &config.cyborg.control_exchange).await?;
        parts.close_at_end(t.clone());
        let server = accel_agent::cyborg::serve(t, &host, sysfs_root, programmer).await?;
        parts.push(Part::Server(server));
        format!(
            "; Cyborg 17's agent API on {} (exchange {})",
            accel_cyborg17::rpc::AGENT_TOPIC,
            config.cyborg.control_exchange
        )
    } else {
        String::new()
    };
    if let Some(wire) = cyborg_transport {
        parts.close_at_end(wire);
        say!(
            "agent {host}: serving {} with cleanup_device (exchange {}) and {} (exchange {}), reporting to {} as {}: release N+1 on Cyborg's wire",
            accel_cyborg17::rpc::AGENT_TOPIC,
            config.cyborg.control_exchange,
            accel_objects::rpc::AGENT_TOPIC,
            config.transport.control_exchange,
            accel_cyborg17::rpc::CONDUCTOR_TOPIC,
            apparent
        );
    } else {
        say!(
            "agent {host}: serving {} and reporting to {} (exchange {}) as {}{also_cyborg}",
            accel_objects::rpc::AGENT_TOPIC,
            accel_objects::rpc::CONDUCTOR_TOPIC,
            config.transport.control_exchange,
            apparent
        );
    }
    let exit = match parts.ended().await {
        Ended::Agent { host, stop } => stopped(&host, stop),
        Ended::Signal | Ended::Api => ExitCode::SUCCESS,
    };
    parts.stop().await;
    Ok(exit)
}

/// `accel agent` on Cyborg's wire with `[upgrade_levels] cyborg_conductor` below 1.1:
/// the host's devices reported to a Cyborg 17 conductor every `[agent] report_interval`
/// (a failed report is logged and tried again at the next), Cyborg's agent API served
/// for that conductor's calls.
/// With `once`, one report, whose failure is the exit code 2.
async fn cyborg_agent(
    config: &AccelConfig,
    host: String,
    sysfs_root: PathBuf,
    programmer: Option<Arc<accel_agent::fpga::Programmer>>,
    once: bool,
) -> Result<ExitCode, Error> {
    let exchange = &config.cyborg.control_exchange;
    let transport = transport_on(config, exchange).await?;
    let reporter = accel_agent::cyborg::CyborgReporter::new(
        transport.clone(),
        host.clone(),
        sysfs_root.clone(),
        CYBORG_REPORT_TIMEOUT,
    );
    if once {
        let exit = match reporter.report().await {
            Ok(n) => {
                say!("agent {host}: reported {n} devices to Cyborg's conductor");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("accel agent {host}: {e}");
                ExitCode::from(2)
            }
        };
        transport.close().await;
        return Ok(exit);
    }
    let mut parts = Lifecycle::new(Duration::from_secs(config.conductor.stop_timeout));
    parts.close_at_end(transport.clone());
    let server = accel_agent::cyborg::serve(transport, &host, sysfs_root, programmer).await?;
    parts.push(Part::Server(server));
    say!(
        "agent {host}: reporting to Cyborg's conductor on {} and serving Cyborg 17's agent API on {} (exchange {exchange})",
        accel_cyborg17::rpc::CONDUCTOR_TOPIC,
        accel_cyborg17::rpc::AGENT_TOPIC,
    );
    let period = Duration::from_secs(config.agent.report_interval.max(1));
    parts.push(Part::Task(tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = reporter.report().await {
                tracing::warn!(host = %host, error = %e, "report to Cyborg's conductor failed; trying again at the next period");
            }
        }
    })));
    parts.ended().await;
    parts.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// How long a report waits for Cyborg's conductor, which updates Placement inside the
/// call: Cyborg's agent waits its `rpc_response_timeout`, 60 s by default.
const CYBORG_REPORT_TIMEOUT: Duration = Duration::from_secs(60);

/// The API: reads from `db`, writes through the conductor (`conductor`, capped by the
/// operator's `[upgrade_levels] conductor`), with `[api]`'s limits, timeouts and TLS,
/// its callers authenticated and held to the policy by `auth`. Returns where it
/// listens, as a URL.
async fn serve_api(
    db: Db,
    conductor: verso_rpc::RpcClient,
    listen: &str,
    (limits, options): (accel_api::Limits, accel_api::ServeOptions),
    auth: accel_api::Authenticator,
) -> Result<(String, Part), Error> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let url = match options.tls {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    };
    let service = accel_api::ConductorService::new(accel_api::DbService::new(db), conductor);
    let router = accel_api::router_with(Arc::new(service), limits, auth);
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopping.await;
    };
    let task = tokio::spawn(async move {
        if let Err(e) = accel_api::server::serve(listener, router, options, shutdown).await {
            tracing::error!(error = %e, "the API stopped");
        }
    });
    Ok((url, Part::Api { stop, task }))
}

/// `accel api`.
pub async fn api(config: AccelConfig) -> Result<ExitCode, Error> {
    let options = config.api.options()?;
    let auth = config.authenticator(AuthStrategyName::Keystone)?;
    let db = Db::connect(&config.database.url).await?;
    let pending = db.pending_migrations().await?;
    if !pending.is_empty() {
        return Err(format!("the database lacks migrations {pending:?}: run `accel db sync` (or start the conductor) first").into());
    }
    let transport = transport(&config).await?;
    let mut parts = Lifecycle::new(Duration::from_secs(config.conductor.stop_timeout));
    parts.close_at_end(transport.clone());
    let conductor = conductor_client(&config, transport);
    // On SIGTERM the server stops accepting and answers the requests under way (each
    // bounded by [api] request_timeout) before the process exits.
    let (url, api) = serve_api(db, conductor, &config.api.listen, options, auth).await?;
    parts.push(api);
    say!("api: listening on {url}");
    parts.ended().await;
    parts.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// `accel db sync`.
pub async fn db_sync(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = Db::connect(&config.database.url).await?;
    let done = db.sync_on_cyborg17().await;
    db.close().await;
    let done = done?;
    match (done.applied.is_empty(), done.made_cyborg_schema) {
        (true, _) => say!("database is up to date"),
        (false, true) => say!(
            "made OpenStack Cyborg 17's schema with accel's additions {:?} in the empty database",
            done.applied
        ),
        (false, false) => say!(
            "took OpenStack Cyborg 17's database in place: applied accel's additions {:?}{}",
            done.applied,
            if done.at_release_n {
                "; the deployment is at release N (Cyborg 17) until `accel upgrade finalize`"
            } else {
                ""
            }
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `accel db clear-cleanup`: 0 the device's failed cleanup was cleared, 1 it had none
/// (or the device is unknown), 2 the database could not be used.
pub async fn db_clear_cleanup(config: AccelConfig, device: &str) -> Result<ExitCode, Error> {
    let db = Db::connect(&config.database.url).await?;
    let outcome = db.clear_failed_cleanup(device).await;
    db.close().await;
    match outcome {
        Ok(cleared) if cleared.is_empty() => {
            say!("device {device} has no failed cleanup: nothing cleared");
            Ok(ExitCode::from(1))
        }
        Ok(cleared) => {
            for h in &cleared {
                say!(
                    "cleared attach handle {} ({}): allocatable again",
                    h.uuid,
                    h.control_path_id
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(accel_conductor::DbError::NotFound { .. }) => {
            say!("no device {device}");
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

/// `accel db import-cyborg`: 0 imported or already imported, 1 refused (nothing
/// written), 2 a database could not be opened, read or written.
pub async fn db_import_cyborg(
    config: AccelConfig,
    from: &str,
    dry_run: bool,
) -> Result<ExitCode, Error> {
    use accel_conductor::cyborg_import::{import, ImportError, Imported};
    let db = Db::connect(&config.database.url).await?;
    let outcome = import(from, &db, dry_run).await;
    db.close().await;
    let (summary, verb) = match outcome {
        Ok(Imported::Done(s)) if dry_run => (s, "would import (dry run, nothing kept)"),
        Ok(Imported::Done(s)) => (s, "imported"),
        Ok(Imported::Already(s)) => (s, "already imported, nothing written:"),
        Err(e) => {
            eprintln!("accel: import refused, nothing written: {e}");
            let code = match e {
                ImportError::Connect { .. } | ImportError::Read { .. } | ImportError::Target(_) => {
                    2
                }
                _ => 1,
            };
            return Ok(ExitCode::from(code));
        }
    };
    say!(
        "{verb} {} devices on {} hosts ({} attach handles, {} attributes), {} device profiles, {} accelerator requests",
        summary.devices,
        summary.hosts,
        summary.attach_handles,
        summary.attributes,
        summary.device_profiles,
        summary.accelerator_requests
    );
    for note in &summary.notes {
        say!("note: {note}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `accel upgrade check`: 0 ok, 1 warning (something to do before or after the
/// upgrade), 2 failure (this build cannot run on this database).
pub async fn upgrade_check(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = match Db::connect_within(&config.database.url, Duration::from_secs(10)).await {
        Ok(db) => db,
        Err(e) => {
            say!("FAILURE: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut worst = 0u8;
    let pending = db.pending_migrations().await?;
    if pending.is_empty() {
        say!("ok: the database schema is current");
    } else {
        say!("WARNING: migrations {pending:?} are not applied: run `accel db sync` (or start the conductor)");
        worst = 1;
    }
    // Before the first migration of either schema (accel's own history's 1, the
    // additions' 101 to Cyborg's) there is no version record to read.
    let record = if pending.contains(&1) || pending.contains(&accel_conductor::db::FIRST_ADDITION) {
        None
    } else {
        DbVersionStore::new(db, AccelVersion::COMPONENT)
            .load()
            .await?
    };
    let software = AccelVersion::software();
    match record.map(|r| AccelVersion::observe(r.apparent)) {
        None => say!("ok: no component version recorded yet (a fresh install)"),
        Some(Ok(Observed::Known(v))) if v == software => say!("ok: finalized at {}", v.label()),
        Some(Ok(Observed::Known(v))) => {
            say!("WARNING: pre-finalized at {} (this build: {}): finalize once every agent runs it (`accel upgrade finalize`)", v.label(), software.label());
            worst = worst.max(1);
        }
        Some(Ok(Observed::Future(n))) => {
            say!("FAILURE: the database was finalized at version {n}, newer than this build ({}): install that release", software.number());
            worst = 2;
        }
        Some(Err(e)) => {
            say!("FAILURE: {e}");
            worst = 2;
        }
    }
    Ok(ExitCode::from(worst))
}

/// `accel all-in-one`.
pub async fn all_in_one(config: AccelConfig, agents: u32) -> Result<ExitCode, Error> {
    let options = config.api.options()?;
    let auth = config.authenticator(AuthStrategyName::Noauth)?;
    let scratch = tempfile::tempdir()?;
    let url = match config.layers.origin("database.url") {
        Some(verso_rpc::config::Origin::Default) | None => {
            format!("sqlite://{}", scratch.path().join("accel.db").display())
        }
        Some(_) => config.database.url.clone(),
    };
    let placement = config.placement.client()?;
    let nova = config.nova.options()?;
    if config.cyborg.report_to_cyborg && !config.cyborg.serve_agents {
        return Err("all-in-one: [cyborg] report_to_cyborg (its agents on Cyborg's wire) needs [cyborg] serve_agents (its conductor serving them)".into());
    }
    if config.cyborg.report_to_cyborg && cyborg_17_conductor_cap(&config).is_some() {
        return Err("all-in-one: [upgrade_levels] cyborg_conductor below 1.1 names a Cyborg 17 conductor; all-in-one's conductor is accel's".into());
    }
    let db = open_db(&url).await?;
    let mut parts = Lifecycle::new(Duration::from_secs(config.conductor.stop_timeout));
    let (transport, cyborg_transport) = conductor_parts(&db, &config, nova, &mut parts).await?;
    if let Some((client, schedule)) = placement {
        parts.push(Part::Task(accel_conductor::placement::spawn_reconciler(
            db.clone(),
            client,
            schedule,
            accel_conductor::runtime::conductor_id(),
        )));
    }
    let client = conductor_client(&config, transport.clone());
    let (url, api) = serve_api(db, client, &config.api.listen, options, auth).await?;
    parts.push(api);
    let programmer = config
        .fpga_programmer(scratch.path().to_owned())?
        .map(Arc::new);
    let mut reported = 0;
    for i in 1..=agents {
        let host = format!("host{i}");
        let root = scratch.path().join(&host);
        accel_agent::fixture::write_tree(&root, &accel_agent::fixture::sample_host(i))?;
        let mut agent_cfg = agent_config(&config, host.clone(), root, programmer.clone());
        agent_cfg.state_dir = scratch.path().to_owned();
        if config.cyborg.report_to_cyborg {
            agent_cfg.cyborg_wire = cyborg_transport.clone().map(|t| cyborg_wire(&config, t));
        }
        match accel_agent::service::start(agent_cfg, transport.clone()).await {
            Ok(agent) => {
                reported += agent.devices_reported();
                parts.push(Part::Agent {
                    host,
                    running: agent,
                });
            }
            Err(e) => {
                let exit = not_started(&host, &e);
                parts.stop().await;
                return Ok(exit);
            }
        }
    }
    say!("all-in-one: {agents} agents reported {reported} devices");
    say!("api: listening on {url}");
    let exit = match parts.ended().await {
        Ended::Agent { host, stop } => stopped(&host, stop),
        Ended::Signal | Ended::Api => ExitCode::SUCCESS,
    };
    parts.stop().await;
    Ok(exit)
}

/// How long `accel upgrade` waits for a conductor's answer.
const UPGRADE_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The deployment's `upgrade` API, as accel's configuration names it: the transport,
/// the control exchange, the upgrade topic.
async fn upgrade_client(config: &AccelConfig) -> Result<verso_rpc::RpcClient, String> {
    if config.transport.url.starts_with("memory:") {
        return Err(format!(
            "[transport] url is {}: a running deployment is reached through its broker; set it (--config, ACCEL_TRANSPORT_URL or --set transport.url=rabbit://...)",
            config.transport.url
        ));
    }
    let transport = transport_from_url(
        &config.transport.url,
        Some(&config.transport.control_exchange),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(
        verso_rpc::RpcClient::for_api::<verso_upgrade::admin::UpgradeApi>(transport, UPGRADE_TOPIC)
            .timeout(UPGRADE_CALL_TIMEOUT),
    )
}

/// A failed call of `accel upgrade`, as the operator reads it (exit 2).
fn unreachable(config: &AccelConfig, e: &verso_rpc::RpcError) -> ExitCode {
    if e.is_timeout() {
        eprintln!(
            "accel upgrade: no conductor answered on topic {UPGRADE_TOPIC} of exchange {} at {} within {} s: is a conductor running with this configuration?",
            config.transport.control_exchange,
            verso_rpc::transport::amqp::redact(&config.transport.url),
            UPGRADE_CALL_TIMEOUT.as_secs()
        );
    } else {
        eprintln!("accel upgrade: {e}");
    }
    ExitCode::from(2)
}

fn print_status(status: &verso_upgrade::DeploymentStatus, json: bool) -> Result<(), Error> {
    if json {
        say!("{}", serde_json::to_string_pretty(status)?);
    } else {
        print!("{status}");
    }
    Ok(())
}

/// `accel upgrade status [--json]`: any conductor's answer shows the whole fleet (the
/// fleet record is in the database). Exit 0, or 2 when no conductor answers.
pub async fn upgrade_status(config: AccelConfig, json: bool) -> Result<ExitCode, Error> {
    let client = match upgrade_client(&config).await {
        Ok(c) => c,
        Err(why) => {
            eprintln!("accel upgrade: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let ctx = verso::RequestContext::new("accel-upgrade");
    match client
        .call_method(&ctx, verso_upgrade::admin::Status {})
        .await
    {
        Ok(status) => {
            print_status(&status, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(unreachable(&config, &e)),
    }
}

/// `accel upgrade finalize [--wait] [--timeout SECS] [--json]`, with `verso upgrade`'s
/// exit codes: 0 started or done (with `--wait`: done), 1 refused (each blocker named),
/// 2 no conductor answered, 3 with `--wait`: still finalizing when the time ran out.
pub async fn upgrade_finalize(
    config: AccelConfig,
    wait: bool,
    timeout: u64,
    json: bool,
) -> Result<ExitCode, Error> {
    use verso_upgrade::admin::{finalize_and_wait, WaitOutcome};
    let client = match upgrade_client(&config).await {
        Ok(c) => c,
        Err(why) => {
            eprintln!("accel upgrade: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let ctx = verso::RequestContext::new("accel-upgrade");
    let wait_for = if wait {
        Duration::from_secs(timeout)
    } else {
        Duration::ZERO
    };
    let outcome = match finalize_and_wait(&client, &ctx, wait_for, Duration::from_secs(1)).await {
        Ok(o) => o,
        Err(e) => return Ok(unreachable(&config, &e)),
    };
    let code = outcome.exit_code();
    match outcome {
        WaitOutcome::Finalized(status) => print_status(&status, json)?,
        WaitOutcome::TimedOut(status) if !wait => {
            if !json {
                say!("finalization started; `accel upgrade status` shows its progress");
            }
            print_status(&status, json)?;
            return Ok(ExitCode::SUCCESS);
        }
        WaitOutcome::TimedOut(status) => {
            print_status(&status, json)?;
            eprintln!("accel upgrade: still finalizing after {timeout} s; `accel upgrade status` shows who is left");
        }
        WaitOutcome::Refused(refused) => {
            if json {
                say!("{}", serde_json::to_string_pretty(&refused)?);
            } else {
                say!("finalization refused: {refused}");
                for b in &refused.blockers {
                    say!("blocker: {b}");
                }
            }
        }
    }
    Ok(ExitCode::from(code))
}

#[cfg(test)]
mod tests {
    use super::cyborg_wire_hint;
    use accel_agent::service::StartStep;

    /// A heartbeat that found no accel conductor points at the cap (the host's
    /// conductor may still be Cyborg 17's); a report that found none, at the conductor's
    /// Cyborg side.
    #[test]
    fn the_hint_follows_the_step_that_failed() {
        for step in [StartStep::ApparentVersion, StartStep::FirstHeartbeat] {
            assert!(
                cyborg_wire_hint(step).contains("cyborg_conductor = \"1.0\""),
                "{step:?}"
            );
        }
        assert!(cyborg_wire_hint(StartStep::FirstReport).contains("[cyborg] serve_agents"));
    }
}
