//! The `verso` command for the example model (`examples/cyborg-model`): its six classes
//! and the conductor RPC API the example conductor serves (object indirection at 1.1).
//!
//! ```text
//! cargo run -p verso-cli --example cyborg -- objects check
//! cargo run -p verso-cli --example cyborg -- objects list --json
//! cargo run -p verso-cli --example cyborg -- objects lint
//! ```
//!
//! The lock defaults to `examples/cyborg-model/objects.lock`.

use std::path::Path;
use std::process::ExitCode;
use verso_cli::Application;
use verso_rpc::conductor::ObjectIndirectionApi;

fn main() -> ExitCode {
    let lock =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cyborg-model/objects.lock");
    // A shorter path in messages when the file is there; the path as is when it is not.
    let lock = std::fs::canonicalize(&lock).unwrap_or(lock);
    // The conductor API as declared, the one its server and clients are built from.
    let app = Application::new("cyborg", cyborg_model::registry())
        .api::<ObjectIndirectionApi>()
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
