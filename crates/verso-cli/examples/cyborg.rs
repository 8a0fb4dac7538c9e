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
use std::sync::Arc;
use verso_cli::Application;
use verso_rpc::conductor::{add_object_endpoints, INDIRECTION_VERSION};
use verso_rpc::Endpoint;

fn main() -> ExitCode {
    let lock =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/cyborg-model/objects.lock");
    // A shorter path in messages when the file is there; the path as is when it is not.
    let lock = std::fs::canonicalize(&lock).unwrap_or(lock);
    let conductor = add_object_endpoints(
        Endpoint::new(INDIRECTION_VERSION),
        Arc::new(cyborg_model::registry()),
        |ctx| ctx,
    );
    let app = Application::new("cyborg", cyborg_model::registry())
        .rpc_api("conductor", conductor.spec())
        .default_lock(lock);
    verso_cli::run(&app, std::env::args_os())
}
