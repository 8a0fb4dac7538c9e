//! `accel-cyborg17-conductor --config-file cyborg.conf`: Cyborg 17's conductor in Rust,
//! in place of Cyborg's own `cyborg-conductor`, on the same configuration file and
//! database. It makes Cyborg 17's schema in an empty database, takes a database at
//! Cyborg 17's alembic revision as it is, and refuses any other. Stops on SIGINT or
//! SIGTERM once the calls in hand are answered.
//!
//! Exit status: 0 after a stop, 2 when the configuration or the database cannot be used,
//! 1 when the broker cannot be reached.

use accel_cyborg17::rpc::CONTROL_EXCHANGE;
use accel_cyborg17_conductor::config::Config;
use accel_cyborg17_conductor::run::start;
use accel_cyborg17_conductor::service;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc, as every accel binary (see `accel`'s main).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Cyborg 17's conductor, in Rust.
#[derive(Parser, Debug)]
#[command(name = "accel-cyborg17-conductor", version)]
struct Args {
    /// Cyborg's configuration file (`/etc/cyborg/cyborg.conf`).
    #[arg(long = "config-file")]
    config_file: PathBuf,
}

async fn run(args: Args) -> ExitCode {
    let config = match Config::load(&args.config_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: {e}");
            return ExitCode::from(2);
        }
    };
    let running = match start(&config).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    if running.schema_made {
        println!("made Cyborg 17's schema in the empty database");
    }
    for missing in config.without_openstack() {
        println!("warning: {missing}");
    }
    println!(
        "serving {} (exchange {CONTROL_EXCHANGE}) as {}",
        service::TOPIC,
        config.host.as_deref().unwrap_or("this host")
    );
    accel_cyborg17::service::wait_for_stop().await;
    running.stop().await;
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
            eprintln!("accel-cyborg17-conductor: {e}");
            ExitCode::FAILURE
        }
    }
}
