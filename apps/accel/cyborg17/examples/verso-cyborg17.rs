//! The `verso` command for Cyborg 17's contracts: `cargo run -p accel-cyborg17 --example
//! verso-cyborg17 -- objects check` (run from `apps/accel/cyborg17`, or pass `--lock`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/objects.lock");
    let app = verso_cli::Application::new("cyborg", accel_cyborg17::registry())
        .api::<accel_cyborg17::rpc::ConductorApi>()
        .api::<accel_cyborg17::rpc::AgentApi>()
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
