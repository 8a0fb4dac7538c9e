//! `accel-cyborg17-agent --config-file cyborg.conf`: Cyborg 17's agent in Rust, in place
//! of Cyborg's own `cyborg-agent` on a compute host, on the same configuration file.
//! Prints `reported N devices` (or why a report failed) after each report; stops on
//! SIGINT or SIGTERM once the calls in hand are answered.
//!
//! Exit status: 0 after a stop, 2 when the configuration cannot be used, 1 when the
//! broker cannot be reached.

use accel_cyborg17_agent::config::AgentConfig;
use accel_cyborg17_agent::run::{start, Reported};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc, as every accel binary (see `accel`'s main).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Cyborg 17's agent, in Rust.
#[derive(Parser, Debug)]
#[command(name = "accel-cyborg17-agent", version)]
struct Args {
    /// Cyborg's configuration file (`/etc/cyborg/cyborg.conf`).
    #[arg(long = "config-file")]
    config_file: PathBuf,
}

async fn run(args: Args) -> ExitCode {
    let config = match AgentConfig::load(&args.config_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("accel-cyborg17-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let running = match start(&config).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("accel-cyborg17-agent: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    println!("serving cyborg-agent as {}", config.host);
    let mut reported = running.reported();
    let progress = tokio::spawn(async move {
        while reported.changed().await.is_ok() {
            let line = match &reported.borrow().1 {
                Reported::Devices(n) => format!("reported {n} devices"),
                Reported::Failed(why) => format!("report failed: {why}"),
                Reported::Nothing => continue,
            };
            println!("{line}");
        }
    });
    accel_cyborg17::service::wait_for_stop().await;
    running.stop().await;
    progress.abort();
    println!("stopped");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(run(args)),
        Err(e) => {
            eprintln!("accel-cyborg17-agent: {e}");
            ExitCode::FAILURE
        }
    }
}
