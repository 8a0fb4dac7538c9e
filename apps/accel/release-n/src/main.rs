//! `accel-release-n`: release N's components as processes, for the upgrade demo's
//! one-process-per-component mode and for trying release N by hand.
//!
//! ```text
//! accel-release-n conductor --database-url URL --transport-url URL
//! accel-release-n agent --host NAME --sysfs-root DIR --state-dir DIR --transport-url URL
//! accel-release-n api --database-url URL [--listen ADDR]
//! ```
//!
//! Each runs until interrupted (exit 0). A component that refuses to start (a database
//! release N cannot run on, a version record finalized by N+1) prints why and exits 2;
//! an agent the conductor fences exits 3 with the conductor's reason, as `accel agent`.

use accel_release_n::{agent, api, conductor};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use verso_rpc::transport::{transport_from_url, Transport};

/// accel release N (beside release N+1, for mixed-version deployments).
#[derive(Parser, Debug)]
#[command(name = "accel-release-n", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Debug)]
struct TransportArgs {
    /// The transport (`rabbit://user:pass@host:5672/`; `memory://` only within one
    /// process).
    #[arg(long)]
    transport_url: String,
    /// The control exchange (accel's default).
    #[arg(long, default_value = "accel")]
    exchange: String,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Release N's conductor: schema N, conductor API 1.0, the upgrade API.
    Conductor {
        /// `sqlite://PATH` or `postgres://USER:PASS@HOST/DB`.
        #[arg(long)]
        database_url: String,
        #[command(flatten)]
        transport: TransportArgs,
    },
    /// Release N's agent on one host.
    Agent {
        /// The host name.
        #[arg(long)]
        host: String,
        /// The sysfs tree to discover.
        #[arg(long, default_value = "/sys")]
        sysfs_root: PathBuf,
        /// Where the agent's version record lives.
        #[arg(long)]
        state_dir: PathBuf,
        /// Seconds between heartbeats and reports.
        #[arg(long, default_value_t = 60)]
        report_interval: u64,
        #[command(flatten)]
        transport: TransportArgs,
    },
    /// Release N's HTTP API (microversion 2.0) over a database release N's conductor made.
    Api {
        /// `sqlite://PATH` or `postgres://USER:PASS@HOST/DB`.
        #[arg(long)]
        database_url: String,
        /// Where to listen.
        #[arg(long, default_value = accel_api::DEFAULT_LISTEN)]
        listen: String,
    },
}

async fn transport(args: &TransportArgs) -> Result<Arc<dyn Transport>, ExitCode> {
    transport_from_url(&args.transport_url, Some(&args.exchange))
        .await
        .map_err(|e| {
            eprintln!("accel-release-n: cannot use the transport: {e}");
            ExitCode::from(2)
        })
}

async fn run(cli: Cli) -> Result<(), ExitCode> {
    let interrupted = || async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            eprintln!("accel-release-n: cannot wait for Ctrl-C: {e}");
        }
    };
    match cli.command {
        Command::Conductor {
            database_url,
            transport: t,
        } => {
            let t = transport(&t).await?;
            let running = conductor::start(&database_url, t).await.map_err(|e| {
                eprintln!("{e}");
                ExitCode::from(2)
            })?;
            println!("release N conductor: serving accel-conductor (1.0) and accel-upgrade");
            interrupted().await;
            running.stop().await;
        }
        Command::Agent {
            host,
            sysfs_root,
            state_dir,
            report_interval,
            transport: t,
        } => {
            let t = transport(&t).await?;
            let config = agent::AgentConfig {
                host: host.clone(),
                sysfs_root,
                state_dir,
                report_interval: Duration::from_secs(report_interval.max(1)),
            };
            let mut running = agent::start(config, t).await.map_err(|e| {
                eprintln!("{e}");
                match e {
                    agent::StartError::Fenced(_) => ExitCode::from(3),
                    _ => ExitCode::from(2),
                }
            })?;
            println!("release N agent {host}: serving accel-agent.{host} (1.0)");
            tokio::select! {
                stopped = running.wait_stopped(Duration::MAX) => {
                    if let Some(why) = stopped {
                        eprintln!("release N agent {host}: {why}");
                        running.stop().await;
                        return Err(ExitCode::from(3));
                    }
                }
                () = interrupted() => {}
            }
            running.stop().await;
        }
        Command::Api {
            database_url,
            listen,
        } => {
            let running = api::start(&database_url, &listen).await.map_err(|e| {
                eprintln!("{e}");
                ExitCode::from(2)
            })?;
            println!(
                "release N API: listening on {} (microversion 2.0)",
                running.url()
            );
            interrupted().await;
            running.stop().await;
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("accel-release-n: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
