//! Writes a sample host's fixture sysfs tree (see `accel_agent::fixture::sample_host`).
//!
//! `cargo run -p accel-agent --example write_sysfs_fixture -- --host 1 /tmp/host1`

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Writes a fixture sysfs tree for sample host N into DIR.
#[derive(Parser)]
struct Args {
    /// Which sample host (the device mix varies with it).
    #[arg(long, default_value_t = 0)]
    host: u32,
    /// The directory to write (created; must not hold a tree already).
    dir: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match accel_agent::fixture::write_tree(&args.dir, &accel_agent::fixture::sample_host(args.host))
    {
        Ok(()) => {
            println!("wrote sample host {} to {}", args.host, args.dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "cannot write the fixture tree in {}: {e}",
                args.dir.display()
            );
            ExitCode::FAILURE
        }
    }
}
