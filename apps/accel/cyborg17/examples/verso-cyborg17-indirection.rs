//! The `verso` command for Cyborg 17 with the seed spec (what accel's N+1 conductor serves
//! Cyborg agents, `accel_cyborg17::indirection`): `cargo run -p accel-cyborg17 --example
//! verso-cyborg17-indirection -- objects check`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/indirection.lock");
    let app = verso_cli::Application::new("cyborg", accel_cyborg17::indirection::registry())
        .api::<accel_cyborg17::indirection::ConductorApi>()
        .api::<accel_cyborg17::rpc::AgentApi>()
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
