//! Serves the accel API over a database, for trying it with curl until the `accel`
//! binary mounts it:
//!
//! ```sh
//! cargo run -p accel-api --example serve -- --demo-inventory
//! curl -s -H 'OpenStack-API-Version: accelerator 2.3' http://127.0.0.1:6666/v2/devices
//! ```

use accel_api::DbService;
use accel_conductor::db::ReportedDevice;
use accel_conductor::Db;
use clap::Parser;
use std::process::ExitCode;

/// Serves the accel API (Cyborg's v2 API) over a SQLite, PostgreSQL or MariaDB database.
#[derive(Parser)]
struct Args {
    /// The database: sqlite://PATH (created and migrated if new), postgres://USER:PASS@HOST/DB
    /// or mysql://USER:PASS@HOST/DB (MariaDB 10.5+).
    #[arg(long, default_value = "sqlite://accel-api-demo.db")]
    database: String,
    /// The address to listen on (loopback unless you say otherwise).
    #[arg(long, default_value = accel_api::DEFAULT_LISTEN)]
    listen: String,
    /// Report a sample inventory for host `demo-host` first (an FPGA and two GPUs).
    #[arg(long)]
    demo_inventory: bool,
}

fn demo_device(cp: &str, device_type: &str) -> ReportedDevice {
    ReportedDevice {
        control_path_id: cp.to_owned(),
        device_type: device_type.to_owned(),
        vendor: if device_type == "GPU" { "10de" } else { "10ee" }.to_owned(),
        model: "demo".to_owned(),
        std_board_info: None,
        driver_name: Some("vfio-pci".to_owned()),
        handles: vec![("PCI".to_owned(), format!("{{\"address\": \"{cp}\"}}"))],
        ..Default::default()
    }
}

async fn run(args: Args) -> Result<(), String> {
    let db = Db::connect(&args.database)
        .await
        .map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    if args.demo_inventory {
        let devices = [
            demo_device("0000:3b:00.0", "FPGA"),
            demo_device("0000:af:00.0", "GPU"),
            demo_device("0000:d8:00.0", "GPU"),
        ];
        db.report("demo-host", &devices)
            .await
            .map_err(|e| e.to_string())?;
    }
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    // One line on stdout, for scripts and tests that listen on port 0.
    println!("accel API listening on http://{address}");
    accel_api::serve_with_shutdown(listener, DbService::new(db), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .map_err(|e| format!("serving failed: {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("accel API: {e}");
            ExitCode::FAILURE
        }
    }
}
