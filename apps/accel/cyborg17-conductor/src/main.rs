//! `accel-cyborg17-conductor --config-file cyborg.conf`: Cyborg 17's conductor in Rust,
//! in place of Cyborg's own `cyborg-conductor`, on the same configuration file and
//! database. It makes Cyborg 17's schema in an empty database, takes a database at
//! Cyborg 17's alembic revision as it is, and refuses any other. Stops on SIGINT or
//! SIGTERM once the calls in hand are answered.
//!
//! Exit status: 0 after a stop, 2 when the configuration or the database cannot be used,
//! 1 when the broker cannot be reached.

use accel_cyborg17::rpc::CONTROL_EXCHANGE;
use accel_cyborg17_conductor::config::{Config, ServiceAuth};
use accel_cyborg17_conductor::requests::{Agents, Nova};
use accel_cyborg17_conductor::{service, Conductor, Placement, Reports, Requests, Store};
use accel_keystone::Session;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};

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

fn session(of: &ServiceAuth) -> Result<Session, String> {
    Session::new(of.auth.clone()).map_err(|e| e.to_string())
}

async fn run(args: Args) -> ExitCode {
    let config = match Config::load(&args.config_file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: {e}");
            return ExitCode::from(2);
        }
    };
    let store = match Store::connect(&config.database_url).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: the database: {e}");
            return ExitCode::from(2);
        }
    };
    match store.sync().await {
        Ok(true) => println!("made Cyborg 17's schema in the empty database"),
        Ok(false) => {}
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: {e}");
            return ExitCode::from(2);
        }
    }
    let placement = match session(&config.placement) {
        Ok(s) => Placement::new(s, config.placement.endpoint_override.clone()),
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: [placement]: {e}");
            return ExitCode::from(2);
        }
    };
    let mut amqp = match AmqpConfig::from_url(&config.transport_url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: [DEFAULT] transport_url: {e}");
            return ExitCode::from(2);
        }
    };
    amqp.control_exchange = CONTROL_EXCHANGE.to_owned();
    let transport: Arc<dyn verso_rpc::transport::Transport> =
        match AmqpTransport::connect_with(amqp).await {
            Ok(t) => Arc::new(t),
            Err(e) => {
                eprintln!("accel-cyborg17-conductor: RabbitMQ: {e}");
                return ExitCode::from(1);
            }
        };
    let mut requests = Requests::new(
        store.clone(),
        Some(Agents::new(transport.clone(), config.agent_timeout)),
    );
    if let Some(nova) = &config.nova {
        match session(nova) {
            Ok(s) => requests = requests.with_nova(Nova::new(s, nova.endpoint_override.clone())),
            Err(e) => {
                eprintln!("accel-cyborg17-conductor: [nova]: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let conductor = Conductor {
        reports: Reports::new(store, placement),
        requests,
    };
    let server = match service::serve(transport, conductor, service::TOPIC).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("accel-cyborg17-conductor: serving {}: {e}", service::TOPIC);
            return ExitCode::from(1);
        }
    };
    println!(
        "serving {} (exchange {CONTROL_EXCHANGE}) as {}",
        service::TOPIC,
        config.host.as_deref().unwrap_or("this host")
    );
    wait_for_stop().await;
    server.stop().await;
    println!("stopped");
    ExitCode::SUCCESS
}

async fn wait_for_stop() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
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
