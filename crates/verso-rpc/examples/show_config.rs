//! Reads `[upgrade_levels]` the way a verso service binary does and shows the effective
//! version caps.
//!
//! ```text
//! cargo run -p verso-rpc --example show_config -- --config accel.toml --show-config
//! VERSO_UPGRADE_LEVELS_AGENT=1.0 cargo run -p verso-rpc --example show_config -- \
//!     --config accel.toml --set upgrade_levels.conductor=1.0 --show-config
//! ```
//!
//! Sources, later ones winning: defaults, `--config FILE`, `VERSO_UPGRADE_LEVELS_*`
//! environment variables, `--set OPTION=VERSION` (repeatable).

use std::path::PathBuf;
use std::process::ExitCode;
use verso::Version;
use verso_rpc::caps::{Limits, UpgradeLevels};

/// The newest API versions this example's clients speak.
const LIMITS: Limits = Limits {
    conductor: Version::new(1, 2),
    agent: Version::new(1, 0),
};

const USAGE: &str = "usage: show_config [--config FILE] [--set OPTION=VERSION]... [--show-config]";

struct Cli {
    config: Option<PathBuf>,
    overrides: Vec<String>,
    show: bool,
}

fn parse_args() -> Result<Cli, String> {
    let mut cli = Cli {
        config: None,
        overrides: Vec::new(),
        show: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--config" => cli.config = Some(args.next().ok_or("--config needs a FILE")?.into()),
            "--set" => cli
                .overrides
                .push(args.next().ok_or("--set needs OPTION=VERSION")?),
            "--show-config" => cli.show = true,
            "-h" | "--help" => return Err(USAGE.into()),
            other => {
                if let Some(path) = other.strip_prefix("--config=") {
                    cli.config = Some(path.into());
                } else if let Some(kv) = other.strip_prefix("--set=") {
                    cli.overrides.push(kv.into());
                } else {
                    return Err(format!("unknown argument '{other}'\n{USAGE}"));
                }
            }
        }
    }
    Ok(cli)
}

fn run() -> Result<(), String> {
    let cli = parse_args()?;
    let mut levels =
        UpgradeLevels::load(LIMITS, cli.config.as_deref()).map_err(|e| e.to_string())?;
    for o in &cli.overrides {
        levels.apply_cli(o).map_err(|e| e.to_string())?;
    }
    if cli.show {
        print!("{}", levels.show_config());
    } else {
        println!("configuration is valid (add --show-config to see the effective caps)");
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
