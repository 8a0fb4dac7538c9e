//! The `verso` command for accel's objects: `cargo run -p accel-objects --example verso-accel --
//! objects check` (run from `apps/accel/objects`, or pass `--lock`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/objects.lock");
    let app = verso_cli::Application::new("accel", accel_objects::registry())
        .api::<accel_objects::rpc::ConductorApi>()
        .api::<accel_objects::rpc::AgentApi>()
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
