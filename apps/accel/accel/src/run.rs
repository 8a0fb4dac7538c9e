//! What each subcommand runs.

use crate::config::AccelConfig;
use accel_agent::service::{AgentConfig, AgentStartError, AgentStop, NvmeConfig, RunningAgent};
use accel_conductor::runtime::RunningConductor;
use accel_conductor::{Db, DbVersionStore};
pub use accel_objects::rpc::{CONDUCTOR_TOPIC, UPGRADE_TOPIC};
use accel_objects::AccelVersion;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use verso_rpc::transport::{transport_from_url, Transport};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{ComponentVersion, Observed};

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn transport(config: &AccelConfig) -> Result<Arc<dyn Transport>, Error> {
    Ok(transport_from_url(
        &config.transport.url,
        Some(&config.transport.control_exchange),
    )
    .await?)
}

async fn open_db(url: &str) -> Result<Db, Error> {
    let db = Db::connect(url).await?;
    let applied = db.migrate().await?;
    if !applied.is_empty() {
        tracing::info!(?applied, "database migrated");
    }
    Ok(db)
}

async fn start_conductor(
    db: Db,
    transport: Arc<dyn Transport>,
    config: &AccelConfig,
) -> Result<RunningConductor, Error> {
    Ok(accel_conductor::runtime::start(db, transport, config.layers.cap("agent")).await?)
}

/// A client of the conductor API, capped by `[upgrade_levels] conductor`.
fn conductor_client(config: &AccelConfig, transport: Arc<dyn Transport>) -> verso_rpc::RpcClient {
    accel_agent::service::conductor_client(transport, config.layers.cap("conductor"))
}

/// `accel conductor`.
pub async fn conductor(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = open_db(&config.database.url).await?;
    let cyborg_agents = if config.cyborg.serve_agents {
        let transport =
            transport_from_url(&config.transport.url, Some(&config.cyborg.control_exchange))
                .await?;
        Some(
            accel_conductor::cyborg::serve(transport, db.clone(), accel_conductor::cyborg::TOPIC)
                .await?,
        )
    } else {
        None
    };
    let running = start_conductor(db, transport(&config).await?, &config).await?;
    println!(
        "conductor: serving {CONDUCTOR_TOPIC} and {UPGRADE_TOPIC} on {}",
        verso_rpc::transport::amqp::redact(&config.transport.url)
    );
    if cyborg_agents.is_some() {
        println!(
            "conductor: serving Cyborg 17 agents' report_data on {} (exchange {})",
            accel_conductor::cyborg::TOPIC,
            config.cyborg.control_exchange
        );
    }
    verso_rpc::shutdown::shutdown_signal().await;
    if let Some(server) = cyborg_agents {
        server.stop().await;
    }
    running.stop().await;
    Ok(ExitCode::SUCCESS)
}

fn default_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The library configuration of an agent on `host` from accel's configuration.
fn agent_config(config: &AccelConfig, host: String, sysfs_root: PathBuf) -> AgentConfig {
    AgentConfig {
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
    let transport = transport(&config).await?;
    let mut running = match accel_agent::service::start(
        agent_config(&config, host.clone(), sysfs_root),
        transport,
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return Ok(not_started(&host, &e)),
    };
    if once {
        let n = running.devices_reported();
        running.stop().await;
        println!("agent {host}: reported {n} devices");
        return Ok(ExitCode::SUCCESS);
    }
    tokio::select! {
        stop = running.stopped() => {
            running.stop().await;
            Ok(stopped(&host, stop))
        }
        () = verso_rpc::shutdown::shutdown_signal() => {
            running.stop().await;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The API: reads from `db`, writes through the conductor (`conductor`, capped by the
/// operator's `[upgrade_levels] conductor`).
async fn serve_api(
    db: Db,
    conductor: verso_rpc::RpcClient,
    listen: &str,
) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let service = accel_api::ConductorService::new(accel_api::DbService::new(db), conductor);
    let task = tokio::spawn(async move {
        if let Err(e) = accel_api::serve(listener, service).await {
            tracing::error!(error = %e, "the API stopped");
        }
    });
    Ok((addr, task))
}

/// `accel api`.
pub async fn api(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = Db::connect(&config.database.url).await?;
    let pending = db.pending_migrations().await?;
    if !pending.is_empty() {
        return Err(format!("the database lacks migrations {pending:?}: run `accel db sync` (or start the conductor) first").into());
    }
    let conductor = conductor_client(&config, transport(&config).await?);
    let (addr, task) = serve_api(db, conductor, &config.api.listen).await?;
    println!("api: listening on http://{addr}");
    tokio::select! {
        _ = task => {}
        () = verso_rpc::shutdown::shutdown_signal() => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// `accel db sync`.
pub async fn db_sync(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = Db::connect(&config.database.url).await?;
    let applied = db.migrate().await?;
    if applied.is_empty() {
        println!("database is up to date");
    } else {
        println!("applied migrations {applied:?}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `accel upgrade check`: 0 ok, 1 warning (something to do before or after the
/// upgrade), 2 failure (this build cannot run on this database).
pub async fn upgrade_check(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = match Db::connect_within(&config.database.url, Duration::from_secs(10)).await {
        Ok(db) => db,
        Err(e) => {
            println!("FAILURE: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut worst = 0u8;
    let pending = db.pending_migrations().await?;
    if pending.is_empty() {
        println!("ok: the database schema is current");
    } else {
        println!("WARNING: migrations {pending:?} are not applied: run `accel db sync` (or start the conductor)");
        worst = 1;
    }
    let record = if pending.contains(&1) {
        None
    } else {
        DbVersionStore::new(db, AccelVersion::COMPONENT)
            .load()
            .await?
    };
    let software = AccelVersion::software();
    match record.map(|r| AccelVersion::observe(r.apparent)) {
        None => println!("ok: no component version recorded yet (a fresh install)"),
        Some(Ok(Observed::Known(v))) if v == software => println!("ok: finalized at {}", v.label()),
        Some(Ok(Observed::Known(v))) => {
            println!("WARNING: pre-finalized at {} (this build: {}): finalize once every agent runs it (`verso upgrade finalize --topic {UPGRADE_TOPIC}`)", v.label(), software.label());
            worst = worst.max(1);
        }
        Some(Ok(Observed::Future(n))) => {
            println!("FAILURE: the database was finalized at version {n}, newer than this build ({}): install that release", software.number());
            worst = 2;
        }
        Some(Err(e)) => {
            println!("FAILURE: {e}");
            worst = 2;
        }
    }
    Ok(ExitCode::from(worst))
}

/// `accel all-in-one`.
pub async fn all_in_one(config: AccelConfig, agents: u32) -> Result<ExitCode, Error> {
    let scratch = tempfile::tempdir()?;
    let url = match config.layers.origin("database.url") {
        Some(verso_rpc::config::Origin::Default) | None => {
            format!("sqlite://{}", scratch.path().join("accel.db").display())
        }
        Some(_) => config.database.url.clone(),
    };
    let db = open_db(&url).await?;
    let transport = transport(&config).await?;
    let running = start_conductor(db.clone(), transport.clone(), &config).await?;
    let client = conductor_client(&config, transport.clone());
    let (addr, api_task) = serve_api(db, client, &config.api.listen).await?;
    let mut started: Vec<RunningAgent> = Vec::new();
    let mut reported = 0;
    for i in 1..=agents {
        let host = format!("host{i}");
        let root = scratch.path().join(&host);
        accel_agent::fixture::write_tree(&root, &accel_agent::fixture::sample_host(i))?;
        let mut agent_cfg = agent_config(&config, host.clone(), root);
        agent_cfg.state_dir = scratch.path().to_owned();
        match accel_agent::service::start(agent_cfg, transport.clone()).await {
            Ok(agent) => {
                reported += agent.devices_reported();
                started.push(agent);
            }
            Err(e) => return Ok(not_started(&host, &e)),
        }
    }
    println!("all-in-one: {agents} agents reported {reported} devices");
    println!("api: listening on http://{addr}");
    tokio::select! {
        _ = api_task => {}
        () = verso_rpc::shutdown::shutdown_signal() => {}
    }
    for agent in started {
        agent.stop().await;
    }
    running.stop().await;
    Ok(ExitCode::SUCCESS)
}
