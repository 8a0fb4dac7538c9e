//! The `verso` command for Cyborg 17 with the seed spec (what accel's N+1 conductor serves
//! Cyborg agents, `accel_objects::cyborg`): `cargo run -p accel-objects --example
//! verso-accel-cyborg -- objects check`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/cyborg.lock");
    let app = verso_cli::Application::new("cyborg", accel_objects::cyborg::registry())
        .api::<accel_objects::cyborg::ConductorApi>()
        .api::<accel_objects::cyborg::AgentApi>()
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
