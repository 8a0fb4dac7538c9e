//! Reads a service's configuration the way a verso service binary does (accel's sections
//! and `[upgrade_levels]`) and shows the effective values and where each came from.
//!
//! ```text
//! cargo run -p verso-rpc --example show_config -- \
//!     --config crates/verso-rpc/examples/accel.toml --show-config
//! VERSO_UPGRADE_LEVELS_AGENT=1.0 cargo run -p verso-rpc --example show_config -- \
//!     --config crates/verso-rpc/examples/accel.toml --set upgrade_levels.conductor=1.1 --show-config
//! ```
//!
//! Sources, later ones winning: defaults, `--config FILE`, `VERSO_<SECTION>_<KEY>`
//! environment variables, `--set SECTION.KEY=VALUE` (repeatable). `examples/accel.toml` is
//! a commented sample file. A bad file, variable or `--set` exits 2 with a message that
//! says what to write instead.

use clap::Parser;
use serde::Deserialize;
use std::path::PathBuf;
use std::process::ExitCode;
use verso::Version;
use verso_rpc::caps::ApiCap;
use verso_rpc::config::{Config, ConfigError, ConfigLoader};

/// The RPC APIs this example's clients call: name, newest version spoken, default cap.
fn apis() -> [ApiCap; 3] {
    [
        ApiCap::new("conductor", Version::new(1, 2), Version::new(1, 1)),
        ApiCap::new("agent", Version::new(1, 0), Version::new(1, 0)),
        ApiCap::new("scheduler", Version::new(2, 3), Version::new(2, 0)),
    ]
}

/// accel's own sections.
const SECTIONS: [&str; 6] = ["database", "transport", "api", "agent", "pci", "nvme"];

/// Two of accel's sections, typed, as its binaries read them.
#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read to check the types, not used further
struct Transport {
    url: Option<String>,
    #[serde(default)]
    control_exchange: Option<String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)]
struct Api {
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    workers: Option<u32>,
}

/// Checks the configuration of an accel-like service ([database], [transport], [api],
/// [agent], [pci], [nvme] and the [upgrade_levels] version caps) and shows the effective
/// values.
///
/// Sources, later ones winning: defaults, --config FILE, environment variables
/// VERSO_<SECTION>_<KEY> (VERSO_UPGRADE_LEVELS_CONDUCTOR, VERSO_DATABASE_URL, ...), then
/// --set.
#[derive(Parser, Debug)]
#[command(name = "show_config")]
struct Cli {
    /// A TOML file (sample: crates/verso-rpc/examples/accel.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Overrides one value, e.g. upgrade_levels.conductor=1.0 or api.workers=4 (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    overrides: Vec<String>,
    /// Prints the effective configuration and where each value came from, passwords
    /// masked (otherwise only checks it).
    #[arg(long = "show-config")]
    show: bool,
}

fn load(cli: &Cli) -> Result<Config, ConfigError> {
    let loader = apis()
        .into_iter()
        .fold(ConfigLoader::new(), ConfigLoader::api);
    let config = SECTIONS
        .into_iter()
        .fold(loader, ConfigLoader::section)
        .maybe_file(cli.config.as_deref())
        .overrides(&cli.overrides)
        .load()?;
    config.section::<Transport>("transport")?;
    config.section::<Api>("api")?;
    Ok(config)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match load(&cli) {
        Ok(config) if cli.show => {
            print!("{}", config.show_config());
            ExitCode::SUCCESS
        }
        Ok(_) => {
            println!("configuration is valid (add --show-config to see the effective values)");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
