//! Release N's components as commands: what the `accel-release-n` binary runs and what
//! `accel release-n ...` runs (the rolling-upgrade demo starts release N's components as
//! processes of the `accel` binary, so one build holds both releases).
//!
//! ```text
//! conductor --database-url URL --transport-url URL
//! agent --host NAME --sysfs-root DIR --state-dir DIR --transport-url URL
//! api --database-url URL [--listen ADDR]
//! ```
//!
//! Each runs until interrupted (SIGINT or SIGTERM; exit 0). A component that refuses to
//! start (a database release N cannot run on, a version record finalized by N+1) prints
//! why and exits 2; an agent the conductor fences exits 3 with the conductor's reason.

use crate::{agent, api, conductor};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use verso_rpc::transport::{transport_from_url, Transport};

/// Where a component finds the others.
#[derive(clap::Args, Debug)]
pub struct TransportArgs {
    /// The transport (`rabbit://user:pass@host:5672/`; `memory://` only within one
    /// process).
    #[arg(long)]
    transport_url: String,
    /// The control exchange (accel's default).
    #[arg(long, default_value = "accel")]
    exchange: String,
}

/// A release N component.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Release N's conductor: schema N, conductor API 1.0, the upgrade API.
    Conductor {
        /// `sqlite://PATH` or `postgres://USER:PASS@HOST/DB`.
        #[arg(long)]
        database_url: String,
        /// The transport.
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
        /// The transport.
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

/// Runs one release N component until it is interrupted or refuses to run.
pub async fn run(command: Command) -> ExitCode {
    match run_inner(command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

async fn run_inner(command: Command) -> Result<(), ExitCode> {
    let interrupted = verso_rpc::shutdown::shutdown_signal;
    match command {
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
