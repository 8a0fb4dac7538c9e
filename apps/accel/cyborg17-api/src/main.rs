//! `accel-cyborg17-api --config-file cyborg.conf`: Cyborg 17's API in Rust, in place of
//! Cyborg's own `cyborg-api`, on the same configuration file, database and conductor. It
//! never migrates: a database that is not at Cyborg 17's alembic revision is refused.
//! Stops on SIGINT or SIGTERM once the requests under way are answered.
//!
//! Exit status: 0 after a stop, 2 when the configuration or the database cannot be used,
//! 1 when the broker or the address cannot be had.

use accel_cyborg17_api::config::ApiConfig;
use accel_cyborg17_api::run::start;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc, as every accel binary (see `accel`'s main).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Cyborg 17's API, in Rust.
#[derive(Parser, Debug)]
#[command(name = "accel-cyborg17-api", version)]
struct Args {
    /// Cyborg's configuration file (`/etc/cyborg/cyborg.conf`).
    #[arg(long = "config-file")]
    config_file: PathBuf,
}

async fn run(args: Args) -> ExitCode {
    let config = match ApiConfig::load(&args.config_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("accel-cyborg17-api: {e}");
            return ExitCode::from(2);
        }
    };
    let running = match start(&config).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("accel-cyborg17-api: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    println!("serving Cyborg's v2 API on http://{}", running.addr);
    accel_cyborg17::service::wait_for_stop().await;
    if let Err(e) = running.stop().await {
        eprintln!("accel-cyborg17-api: {e}");
        return ExitCode::FAILURE;
    }
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
            eprintln!("accel-cyborg17-api: {e}");
            ExitCode::FAILURE
        }
    }
}
