//! The `verso` command for release N's objects and RPC APIs, with release N's own lock
//! (`objects.lock` beside this crate; release N's classes never go into release N+1's):
//! `cargo run -p accel-release-n --example verso-release-n -- objects check`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/objects.lock");
    let app = verso_cli::Application::new("accel-release-n", accel_release_n::objects::registry())
        .api::<accel_release_n::rpc::ConductorApi>()
        .api::<accel_release_n::rpc::AgentApi>()
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
