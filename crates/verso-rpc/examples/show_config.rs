//! Reads `[upgrade_levels]` the way a verso service binary does and shows the effective
//! version caps.
//!
//! ```text
//! cargo run -p verso-rpc --example show_config -- \
//!     --config crates/verso-rpc/examples/accel.toml --show-config
//! VERSO_UPGRADE_LEVELS_AGENT=1.0 cargo run -p verso-rpc --example show_config -- \
//!     --config crates/verso-rpc/examples/accel.toml --set upgrade_levels.conductor=1.1 --show-config
//! ```
//!
//! Sources, later ones winning: defaults, `--config FILE`, `VERSO_UPGRADE_LEVELS_*`
//! environment variables, `--set OPTION=VERSION` (repeatable). `examples/accel.toml` is a
//! commented sample file. A bad file, variable or `--set` exits 2 with a message that
//! says what to write instead.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use verso::Version;
use verso_rpc::caps::{Limits, UpgradeLevels};

/// The newest API versions this example's clients speak.
const LIMITS: Limits = Limits {
    conductor: Version::new(1, 2),
    agent: Version::new(1, 0),
};

/// Checks the `[upgrade_levels]` version caps of a configuration and shows the
/// effective ones.
///
/// Sources, later ones winning: defaults, --config FILE, the VERSO_UPGRADE_LEVELS_CONDUCTOR
/// and VERSO_UPGRADE_LEVELS_AGENT environment variables, then --set.
#[derive(Parser, Debug)]
#[command(name = "show_config")]
struct Cli {
    /// A TOML file with an [upgrade_levels] section (sample: crates/verso-rpc/examples/accel.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Overrides one cap, e.g. upgrade_levels.conductor=1.0 (repeatable).
    #[arg(long = "set", value_name = "OPTION=VERSION")]
    overrides: Vec<String>,
    /// Prints the effective caps and where each came from (otherwise only checks them).
    #[arg(long = "show-config")]
    show: bool,
}

fn run(cli: &Cli) -> Result<(), verso_rpc::RpcError> {
    let mut levels = UpgradeLevels::load(LIMITS, cli.config.as_deref())?;
    for o in &cli.overrides {
        levels.apply_cli(o)?;
    }
    if cli.show {
        print!("{}", levels.show_config());
    } else {
        println!("configuration is valid (add --show-config to see the effective caps)");
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
