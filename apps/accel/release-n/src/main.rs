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

use accel_release_n::cli::{self, Command};
use clap::Parser;
use std::process::ExitCode;

/// accel release N (beside release N+1, for mixed-version deployments).
#[derive(Parser, Debug)]
#[command(name = "accel-release-n", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    runtime.block_on(cli::run(cli.command))
}
