//! What each subcommand runs.

use crate::config::AccelConfig;
use accel_agent::discovery::discover;
use accel_agent::report::driver_devices;
use accel_conductor::db::Release;
use accel_conductor::service::{endpoint, ReleasePolicy};
use accel_conductor::{Db, DbVersionStore};
use accel_objects::rpc::{ConductorApi, ReportData};
use accel_objects::AccelVersion;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use verso::RequestContext;
use verso_rpc::transport::{transport_from_url, Transport};
use verso_rpc::{RpcClient, RpcServer, ServerHandle, Target};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{ComponentVersion, Coordinator, Observed, VersionManager};

/// The topic the conductor API is served on.
pub const CONDUCTOR_TOPIC: &str = "accel-conductor";
/// The topic the `upgrade` API (heartbeats, finalize, status) is served on.
pub const UPGRADE_TOPIC: &str = "accel-upgrade";

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

/// A running conductor: its servers and its version coordinator.
struct RunningConductor {
    servers: Vec<ServerHandle>,
}

async fn start_conductor(db: Db, transport: Arc<dyn Transport>) -> Result<RunningConductor, Error> {
    let recovered = db.recover_interrupted_binds().await?;
    if recovered > 0 {
        tracing::warn!(
            recovered,
            "binds interrupted by a restart marked BindFailed"
        );
    }
    let versions = VersionManager::<AccelVersion>::open(DbVersionStore::new(
        db.clone(),
        AccelVersion::COMPONENT,
    ))
    .await?;
    let cleanup = versions.gate(AccelVersion::DriverFeatures, "NVMe secure cleanup");
    let coordinator = Arc::new(Coordinator::new(
        versions,
        "agent",
        Duration::from_secs(180),
    ));
    coordinator.resume().await?;
    let release: ReleasePolicy = Arc::new(move || {
        if cleanup.is_open() {
            Release::CleanSsd
        } else {
            Release::Immediate
        }
    });
    let conductor = RpcServer::new(transport.clone(), Target::new(CONDUCTOR_TOPIC))
        .endpoint(endpoint(db, accel_objects::registry(), release, |ctx| ctx))?
        .start()
        .await?;
    let upgrade = RpcServer::new(transport, Target::new(UPGRADE_TOPIC))
        .endpoint(verso_upgrade::admin::endpoint(coordinator))?
        .start()
        .await?;
    Ok(RunningConductor {
        servers: vec![conductor, upgrade],
    })
}

/// `accel conductor`.
pub async fn conductor(config: AccelConfig) -> Result<ExitCode, Error> {
    let db = open_db(&config.database.url).await?;
    let running = start_conductor(db, transport(&config).await?).await?;
    println!(
        "conductor: serving {CONDUCTOR_TOPIC} and {UPGRADE_TOPIC} on {}",
        verso_rpc::transport::amqp::redact(&config.transport.url)
    );
    tokio::signal::ctrl_c().await?;
    for s in running.servers {
        s.stop().await;
    }
    Ok(ExitCode::SUCCESS)
}

fn default_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Discovers and reports once; returns how many devices were reported.
async fn report(
    client: &RpcClient,
    host: &str,
    sysfs_root: &std::path::Path,
) -> Result<usize, Error> {
    let found = discover(sysfs_root)?;
    for p in &found.problems {
        tracing::warn!(path = %p.path.display(), why = %p.why, "device skipped");
    }
    let devices = driver_devices(&found);
    let n = verso::ObjectList::len(&devices);
    let ctx = RequestContext::new(format!("req-report-{host}"));
    let summary = client
        .call_method(
            &ctx,
            ReportData {
                hostname: host.to_owned(),
                devices,
            },
        )
        .await?;
    tracing::info!(
        host,
        devices = n,
        added = summary.added.len(),
        updated = summary.updated.len(),
        removed = summary.removed.len(),
        lost = summary.lost.len(),
        "inventory reported"
    );
    Ok(n)
}

fn conductor_client(config: &AccelConfig, transport: Arc<dyn Transport>) -> RpcClient {
    let client = RpcClient::for_api::<ConductorApi>(transport, CONDUCTOR_TOPIC);
    match config.layers.cap("conductor") {
        Some(cap) => client.version_cap(cap),
        None => client,
    }
}

/// An agent's place in the upgrade: its version record and the `upgrade` API client.
struct AgentVersions {
    manager: VersionManager<AccelVersion>,
    upgrade: RpcClient,
}

/// Why an agent stops.
#[derive(Debug)]
enum AgentStop {
    /// The conductor refused it (fencing): the reason says what to do.
    Fenced(verso_upgrade::Fenced),
    /// Its version record does not allow this build to run.
    Versions(verso_upgrade::UpgradeError),
}

/// Opens the agent's version record; a fresh agent starts at the conductor's apparent
/// version (asked with a heartbeat at the oldest version), never above it.
async fn agent_versions(
    upgrade: RpcClient,
    host: &str,
    state_dir: &std::path::Path,
) -> Result<AgentVersions, Error> {
    std::fs::create_dir_all(state_dir)?;
    let store = verso_upgrade::FileStore::new(state_dir.join(format!("agent-{host}.version")));
    let mut builder = VersionManager::<AccelVersion>::builder(store.clone());
    if store.load().await?.is_none() {
        let probe = verso_upgrade::MemberReport {
            id: host.to_owned(),
            host: host.to_owned(),
            software: AccelVersion::software().number(),
            apparent: AccelVersion::oldest().number(),
        };
        let ctx = RequestContext::new(format!("req-heartbeat-{host}"));
        let reply = upgrade
            .call_method(&ctx, verso_upgrade::admin::Heartbeat { report: probe })
            .await?;
        let server = AccelVersion::observe(reply.server_apparent)
            .ok()
            .and_then(Observed::known);
        builder = builder.fresh_at(server.unwrap_or_else(AccelVersion::oldest));
    }
    let manager = builder.open().await.map_err(|e| Box::new(e) as Error)?;
    Ok(AgentVersions { manager, upgrade })
}

/// One heartbeat: the conductor records the agent and says whether to finalize.
async fn heartbeat(v: &AgentVersions, host: &str) -> Result<(), AgentStop> {
    let ctx = RequestContext::new(format!("req-heartbeat-{host}"));
    let report = v.manager.report(host, host);
    match v
        .upgrade
        .call_method(&ctx, verso_upgrade::admin::Heartbeat { report })
        .await
    {
        Ok(reply) => {
            if let Some(outcome) = v.manager.apply(&reply).await.map_err(AgentStop::Versions)? {
                tracing::info!(host, ?outcome, apparent = %v.manager.apparent().label(), "agent finalized");
            }
            Ok(())
        }
        Err(verso_rpc::RpcError::Remote(r)) if r.is::<verso_upgrade::Fenced>() => {
            match r.downcast::<verso_upgrade::Fenced>() {
                Some(f) => Err(AgentStop::Fenced(f)),
                None => Ok(()),
            }
        }
        Err(e) => {
            tracing::warn!(host, error = %e, "heartbeat failed; retried at the next interval");
            Ok(())
        }
    }
}

async fn agent_loop(
    client: RpcClient,
    versions: AgentVersions,
    host: String,
    sysfs_root: PathBuf,
    interval: Duration,
) -> AgentStop {
    loop {
        if let Err(stop) = heartbeat(&versions, &host).await {
            return stop;
        }
        if let Err(e) = report(&client, &host, &sysfs_root).await {
            tracing::warn!(host, error = %e, "inventory report failed; retried at the next interval");
        }
        tokio::time::sleep(interval).await;
    }
}

fn stopped(host: &str, stop: AgentStop) -> ExitCode {
    match stop {
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
    let client = conductor_client(&config, transport.clone());
    let upgrade = RpcClient::for_api::<verso_upgrade::admin::UpgradeApi>(transport, UPGRADE_TOPIC);
    let versions = match agent_versions(upgrade, &host, &config.agent.state_dir).await {
        Ok(v) => v,
        Err(e) => {
            eprintln!("accel agent {host}: cannot start: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if once {
        if let Err(stop) = heartbeat(&versions, &host).await {
            return Ok(stopped(&host, stop));
        }
        let n = report(&client, &host, &sysfs_root).await?;
        println!("agent {host}: reported {n} devices");
        return Ok(ExitCode::SUCCESS);
    }
    let interval = Duration::from_secs(config.agent.report_interval.max(1));
    tokio::select! {
        stop = agent_loop(client, versions, host.clone(), sysfs_root, interval) => Ok(stopped(&host, stop)),
        r = tokio::signal::ctrl_c() => { r?; Ok(ExitCode::SUCCESS) }
    }
}

/// The API: reads from `db`, writes through the conductor (`conductor`, capped by the
/// operator's `[upgrade_levels] conductor`).
async fn serve_api(
    db: Db,
    conductor: RpcClient,
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
        r = tokio::signal::ctrl_c() => r?,
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
    let running = start_conductor(db.clone(), transport.clone()).await?;
    let client = conductor_client(&config, transport.clone());
    let (addr, api_task) = serve_api(db, client.clone(), &config.api.listen).await?;
    let upgrade = RpcClient::for_api::<verso_upgrade::admin::UpgradeApi>(transport, UPGRADE_TOPIC);
    let interval = Duration::from_secs(config.agent.report_interval.max(1));
    let mut tasks = Vec::new();
    let mut reported = 0;
    for i in 1..=agents {
        let host = format!("host{i}");
        let root = scratch.path().join(&host);
        accel_agent::fixture::write_tree(&root, &accel_agent::fixture::sample_host(i))?;
        let versions = agent_versions(upgrade.clone(), &host, scratch.path()).await?;
        if let Err(stop) = heartbeat(&versions, &host).await {
            return Ok(stopped(&host, stop));
        }
        reported += report(&client, &host, &root).await?;
        let client = client.clone();
        tasks.push(tokio::spawn(agent_loop(
            client, versions, host, root, interval,
        )));
    }
    println!("all-in-one: {agents} agents reported {reported} devices");
    println!("api: listening on http://{addr}");
    tokio::select! {
        _ = api_task => {}
        r = tokio::signal::ctrl_c() => r?,
    }
    for t in tasks {
        t.abort();
    }
    for s in running.servers {
        s.stop().await;
    }
    Ok(ExitCode::SUCCESS)
}
