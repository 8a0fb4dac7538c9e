//! `accel`: the reference service built on verso, one binary with a subcommand per
//! component.
//!
//! ```text
//! accel demo [--agents N]          a whole rolling upgrade from release N to N+1 (start here)
//! accel demo --from cyborg ...     the same from a running OpenStack Cyborg 17 to accel
//! accel all-in-one [--agents N]    conductor, API and N agents (fixture hosts) in one process
//! accel conductor                  the conductor: owns the database, serves the conductor API
//! accel agent [--host NAME]        an agent: discovers devices, reports them to the conductor
//! accel api                        the HTTP API (reads the database, writes through the conductor)
//! accel chaos                      the fault campaign (outside CI: scripts/chaos.sh)
//! accel db sync                    applies the database migrations
//! accel db import-cyborg --from URL takes over a Cyborg 17 database's rows (exit 0 done, 1 refused, 2 unreachable)
//! accel db clear-cleanup --device UUID  puts a device whose NVMe erase failed back in the pool (exit 0, 1 nothing to clear, 2)
//! accel upgrade check              can this deployment be upgraded? (exit 0 ok, 1 warning, 2 failure)
//! accel upgrade status [--json]    every component's versions, from any conductor
//! accel upgrade finalize [--wait]  turn on the new release (exit 0 done, 1 refused, 2 unreachable, 3 still finalizing)
//! accel config show                the effective configuration and where each value came from
//! accel bench fleet                simulated agents against real conductors: throughput, CPU, finalize time
//! ```

mod bench;
mod chaos;
mod config;
mod demo;
mod lifecycle;
mod run;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// accel: accelerator management (the verso reference service).
#[derive(Parser, Debug)]
#[command(name = "accel", version)]
struct Cli {
    /// The configuration file (TOML).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Overrides a value: `--set database.url=sqlite:///tmp/a.db` (repeatable).
    #[arg(long = "set", global = true, value_name = "SECTION.KEY=VALUE")]
    set: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A whole rolling upgrade from release N to release N+1 on this machine, checked
    /// step by step: exit 0 only if every check passed.
    Demo {
        /// How many agents (hosts with fixture devices), at least 2.
        #[arg(long, default_value_t = 6)]
        agents: u32,
        /// Run over this broker (`rabbit://user:pass@host:5672/`) instead of the memory
        /// transport.
        #[arg(long)]
        transport_url: Option<String>,
        /// Run on this database (`mysql://...`, empty; Cyborg 17 runs on MySQL/MariaDB
        /// or SQLite) instead of a SQLite file in a temporary directory.
        #[arg(long)]
        database_url: Option<String>,
        /// Write the report as JSON to this file (`-`: to stdout, without the timeline).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Leave the deployment running at the end, until Ctrl-C.
        #[arg(long)]
        keep: bool,
        /// Where release N comes from: `rust` (OpenStack Cyborg 17's conductor, API and
        /// agents in Rust, accel-cyborg17-*, in this process) or `cyborg` (OpenStack
        /// Cyborg 17's own, the Python package's; needs --transport-url, Keystone with
        /// Placement, and a Python with openstack-cyborg 17.0.0:
        /// scripts/demo-from-cyborg.sh sets them all up).
        #[arg(long, value_enum, default_value_t = ReleaseN::Rust)]
        from: ReleaseN,
        /// With --from cyborg: the Python that has openstack-cyborg 17.0.0 (Cyborg's
        /// console scripts are beside it).
        #[arg(long, env = "VERSO_TEST_PYTHON", default_value = ".venv/bin/python")]
        cyborg_python: PathBuf,
        /// With --from cyborg: Keystone's v3 URL (its catalog has Placement).
        #[arg(
            long,
            env = "VERSO_TEST_KEYSTONE_URL",
            default_value = "http://127.0.0.1:55000/v3"
        )]
        keystone_url: String,
        /// With --from cyborg: the service user (admin in project `service`) Cyborg and
        /// the demo reach Placement as.
        #[arg(long, default_value = "accel")]
        service_user: String,
        /// Its password.
        #[arg(
            long,
            env = "ACCEL_DEMO_SERVICE_PASSWORD",
            default_value = "verso-accel",
            hide_default_value = true
        )]
        service_password: String,
    },
    /// The fault campaign: separate conductors, agents and APIs on RabbitMQ and a fresh
    /// PostgreSQL database behind TCP proxies, clients writing without pause, faults on
    /// a schedule, the database's invariants and every answer checked; exit 1 on any
    /// violation. Outside CI (scripts/chaos.sh runs it for 30 minutes).
    Chaos {
        /// Seconds of faults.
        #[arg(long, default_value_t = 1800)]
        duration: u64,
        /// Seconds between two faults.
        #[arg(long, default_value_t = 15)]
        fault_interval: u64,
        /// Concurrent API clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Agents (hosts with fixture devices).
        #[arg(long, default_value_t = 3)]
        agents: u32,
        /// Conductors.
        #[arg(long, default_value_t = 2)]
        conductors: usize,
        /// APIs.
        #[arg(long, default_value_t = 2)]
        apis: usize,
        /// A PostgreSQL URL allowed to create a database (the campaign makes its own).
        #[arg(
            long,
            env = "VERSO_TEST_POSTGRES_URL",
            default_value = "postgres://verso:verso@127.0.0.1:55432/verso"
        )]
        database_url: String,
        /// The RabbitMQ URL.
        #[arg(
            long,
            env = "VERSO_TEST_RABBIT_URL",
            default_value = "rabbit://guest:guest@127.0.0.1:5672/"
        )]
        transport_url: String,
        /// Keep logs and fixtures here (default: a temporary directory, kept on failure).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Also write the summary as JSON to this file.
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Seed of the fault order and the clients' choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// A shell command restarting the database server; given, a database restart
        /// joins the faults (scripts/chaos.sh restarts the test cluster).
        #[arg(long, value_name = "COMMAND")]
        database_restart_command: Option<String>,
    },
    /// Conductor, API and N agents (each on its own fixture sysfs tree) in one process,
    /// on the memory transport and a SQLite file in a temporary directory unless
    /// configured otherwise.
    AllInOne {
        /// How many agents.
        #[arg(long, default_value_t = 3)]
        agents: u32,
    },
    /// The conductor.
    Conductor,
    /// An agent.
    Agent {
        /// This host's name (overrides `[agent] host`).
        #[arg(long)]
        host: Option<String>,
        /// Where sysfs is (overrides `[agent] sysfs_root`).
        #[arg(long)]
        sysfs_root: Option<PathBuf>,
        /// Report once and exit.
        #[arg(long)]
        once: bool,
    },
    /// The HTTP API.
    Api,
    /// The database.
    #[command(subcommand)]
    Db(Db),
    /// Upgrade checks.
    #[command(subcommand)]
    Upgrade(Upgrade),
    /// The configuration.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Benchmarks of the running service (outside the tests).
    #[command(subcommand)]
    Bench(Bench),
}

/// Where the demo's release N comes from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ReleaseN {
    /// OpenStack Cyborg 17 in Rust (accel-cyborg17-conductor, -api and -agent).
    Rust,
    /// OpenStack Cyborg 17 (openstack-cyborg 17.0.0).
    Cyborg,
}

#[derive(Subcommand, Debug)]
enum Bench {
    /// Simulated agents (each its own host, version record and agent-API server)
    /// heartbeating and reporting over RabbitMQ to real `accel conductor` processes:
    /// throughput, latency, the conductors' CPU per call and RSS, queue depth, and the
    /// time from `finalize` to every agent finalized.
    Fleet {
        /// Fleet sizes, comma-separated.
        #[arg(long, default_value = "100,1000,10000", value_delimiter = ',', num_args = 1..)]
        agents: Vec<u64>,
        /// Conductor counts, comma-separated (each fleet size runs with each).
        #[arg(long, default_value = "1,3", value_delimiter = ',', num_args = 1..)]
        conductors: Vec<u64>,
        /// A PostgreSQL or MariaDB server (`postgres://user:pass@host:port/db`,
        /// `mysql://user:pass@host:port/`; a database is created on it per case and
        /// dropped after), or `sqlite` (a file per case). Default:
        /// $VERSO_TEST_POSTGRES_URL, else the test cluster's URL.
        #[arg(long)]
        database: Option<String>,
        /// The broker. Default: $VERSO_TEST_RABBIT_URL, else the local RabbitMQ.
        #[arg(long)]
        transport_url: Option<String>,
        /// Seconds between an agent's heartbeats.
        #[arg(long, default_value_t = 10.0)]
        heartbeat_interval: f64,
        /// Seconds between an agent's inventory reports.
        #[arg(long, default_value_t = 60.0)]
        report_interval: f64,
        /// Devices in each agent's inventory.
        #[arg(long, default_value_t = 100)]
        devices: u32,
        /// Seconds of the heartbeat-only window. The default is one period of the
        /// conductors' fleet-record writes at the default intervals (a member's row is
        /// written again by its first heartbeat a quarter of the agent liveness, 45 s,
        /// after the last write: every 50 s at 10 s heartbeats), so the window holds
        /// one write per agent whatever the phase of those writes.
        #[arg(long, default_value_t = 50.0)]
        heartbeat_window: f64,
        /// Seconds of the steady window (heartbeats and reports); at least one report
        /// interval, so every agent reports in it. The default is two periods of the
        /// fleet-record writes (see `--heartbeat-window`).
        #[arg(long, default_value_t = 100.0)]
        duration: f64,
        /// Seconds of each of the two quiet windows (every agent registered and silent)
        /// that measure the conductors' idle CPU; whole periods of their 5 s version
        /// refresh.
        #[arg(long, default_value_t = 20.0)]
        idle_window: f64,
        /// Also write the results (JSON, the benchmark schema) to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// The wire the agents report on: Cyborg's (the agents' default) or accel's own.
        #[arg(long, value_enum, default_value = "cyborg")]
        wire: bench::fleet::FleetWire,
        /// The conductors' `[conductor] threads` (default: theirs).
        #[arg(long)]
        conductor_threads: Option<usize>,
    },
}

#[derive(Subcommand, Debug)]
enum Db {
    /// Makes accel's schema: Cyborg 17's with accel's additions in an empty database, the
    /// additions a Cyborg 17 database lacks in place.
    Sync,
    /// Copies a Cyborg 17 database's devices, deployables, attach handles, attributes,
    /// device profiles and accelerator requests into accel's (`[database] url`), UUIDs
    /// kept, in one transaction; also a database of accel's own former schema history
    /// (migrations 1-13), which accel no longer runs on. Exit 0: imported (or already imported); 1: refused,
    /// nothing written (the row is named); 2: a database could not be read or written.
    ImportCyborg {
        /// Cyborg's database, as its `[database] connection` names it:
        /// `mysql+pymysql://USER:PASS@HOST/cyborg` (or `mysql://...`), or `sqlite://PATH`;
        /// accel's former schema also `postgres://USER:PASS@HOST/DB`.
        #[arg(long, value_name = "URL")]
        from: String,
        /// Check and write everything, then roll back: nothing is kept.
        #[arg(long)]
        dry_run: bool,
    },
    /// Puts an NVMe device whose secure erase failed back in the pool, once an operator
    /// has dealt with it by hand (erased and checked, or replaced): its attach handles
    /// in cleanup `error` lose the state and the reason. Exit 0: cleared; 1: the device
    /// has no failed cleanup, or is unknown; 2: the database could not be used.
    ClearCleanup {
        /// The device's UUID (`openstack accelerator device list`).
        #[arg(long, value_name = "UUID")]
        device: String,
    },
}

#[derive(Subcommand, Debug)]
enum Upgrade {
    /// Reports whether this deployment can be upgraded: exit 0 ok, 1 warning, 2 failure.
    Check,
    /// The running deployment's versions: the conductors' record and every agent any
    /// conductor heard of (through `[transport]`). Exit 0, or 2 when no conductor answers.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Starts finalization (idempotent). Exit 0: started or done (with --wait: done);
    /// 1: refused, with each live component still on older software; 2: no conductor
    /// answered; 3 (with --wait): still finalizing when the wait ran out.
    Finalize {
        /// Wait until every live agent has finalized.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigCmd {
    /// Prints the effective configuration with each value's origin, passwords masked.
    Show,
}

/// mimalloc instead of glibc's malloc: measured on verso's RPC path (the
/// `amqp_inflight` bench, 64 calls in flight), glibc's per-thread arenas and frees
/// across threads cost about a fifth of the CPU per call, which the I/O thread and the
/// runtime's workers pass messages between.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The process's runtime: `threads` workers, 0 one per core. One thread runs the broker
/// connection's tasks too (`run_io_on`), so that a call never leaves it.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    match threads {
        0 => tokio::runtime::Runtime::new(),
        1 => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // Fails only when a connection was opened before: none is, this early.
            let _ = verso_rpc::transport::amqp::run_io_on(rt.handle().clone());
            Ok(rt)
        }
        n => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo's timeline is its output; its components' logs stay quiet unless asked.
    let default_level = match cli.command {
        Command::Demo { .. } | Command::Chaos { .. } | Command::Bench(_) => "error",
        // The operator reads the command's answer; a refusal is not a log line.
        Command::Upgrade(Upgrade::Status { .. } | Upgrade::Finalize { .. }) => "error",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = match config::load(cli.config.as_ref(), &cli.set) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("accel: configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let threads = match cli.command {
        Command::Conductor => config.conductor.threads,
        _ => 0,
    };
    let runtime = match runtime(threads) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("accel: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Demo {
                agents,
                transport_url,
                database_url,
                json,
                keep,
                from,
                cyborg_python,
                keystone_url,
                service_user,
                service_password,
            } => {
                let from_cyborg =
                    (from == ReleaseN::Cyborg).then_some(demo::from_cyborg::CyborgOptions {
                        python: cyborg_python,
                        keystone_url,
                        user: service_user,
                        password: service_password,
                    });
                demo::run(demo::DemoOptions {
                    agents,
                    transport_url,
                    database_url,
                    json,
                    keep,
                    from_cyborg,
                })
                .await
            }
            Command::Chaos {
                duration,
                fault_interval,
                clients,
                agents,
                conductors,
                apis,
                database_url,
                transport_url,
                dir,
                json,
                seed,
                database_restart_command,
            } => {
                chaos::run(chaos::ChaosOptions {
                    duration: std::time::Duration::from_secs(duration),
                    fault_interval: std::time::Duration::from_secs(fault_interval.max(1)),
                    clients,
                    agents,
                    conductors,
                    apis,
                    database: database_url,
                    transport_url,
                    dir,
                    json,
                    seed,
                    database_restart: database_restart_command,
                })
                .await
            }
            Command::Bench(Bench::Fleet {
                agents,
                conductors,
                database,
                transport_url,
                heartbeat_interval,
                report_interval,
                devices,
                heartbeat_window,
                duration,
                idle_window,
                json,
                wire,
                conductor_threads,
            }) => {
                let seconds = |what: &str, s: f64| {
                    Duration::try_from_secs_f64(s)
                        .map_err(|_| format!("--{what} {s}: not a number of seconds"))
                };
                let options = bench::fleet::FleetOptions {
                    wire,
                    agents,
                    conductors,
                    database: database
                        .or_else(|| std::env::var("VERSO_TEST_POSTGRES_URL").ok())
                        .unwrap_or_else(|| "postgres://verso:verso@127.0.0.1:55432/verso".into()),
                    transport_url: transport_url
                        .or_else(|| std::env::var("VERSO_TEST_RABBIT_URL").ok())
                        .unwrap_or_else(|| "rabbit://guest:guest@127.0.0.1:5672/".into()),
                    heartbeat_interval: seconds("heartbeat-interval", heartbeat_interval)?,
                    report_interval: seconds("report-interval", report_interval)?,
                    devices,
                    heartbeat_window: seconds("heartbeat-window", heartbeat_window)?,
                    duration: seconds("duration", duration)?,
                    idle_window: seconds("idle-window", idle_window)?,
                    json,
                    conductor_threads,
                    command: std::env::args()
                        .map(|a| if a.contains(' ') { format!("{a:?}") } else { a })
                        .collect::<Vec<_>>()
                        .join(" "),
                };
                bench::fleet::run(options).await
            }
            Command::AllInOne { agents } => run::all_in_one(config, agents).await,
            Command::Conductor => run::conductor(config).await,
            Command::Agent {
                host,
                sysfs_root,
                once,
            } => run::agent(config, host, sysfs_root, once).await,
            Command::Api => run::api(config).await,
            Command::Db(Db::Sync) => run::db_sync(config).await,
            Command::Db(Db::ImportCyborg { from, dry_run }) => {
                run::db_import_cyborg(config, &from, dry_run).await
            }
            Command::Db(Db::ClearCleanup { device }) => {
                run::db_clear_cleanup(config, &device).await
            }
            Command::Upgrade(Upgrade::Check) => run::upgrade_check(config).await,
            Command::Upgrade(Upgrade::Status { json }) => run::upgrade_status(config, json).await,
            Command::Upgrade(Upgrade::Finalize {
                wait,
                timeout,
                json,
            }) => run::upgrade_finalize(config, wait, timeout, json).await,
            Command::Config(ConfigCmd::Show) => {
                print!("{}", config.layers.show_config());
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("accel: {e}");
            ExitCode::from(2)
        }
    }
}
