//! An example conductor for the Cyborg model that a Python (or Rust) agent can use.
//!
//! ```text
//! cargo run -p verso-rpc --example conductor -- \
//!     --transport-url rabbit://guest:guest@127.0.0.1:5672/ --topic cyborg-conductor \
//!     --seed crates/verso-rpc/interop/cyborg-seed.json [--server NAME] [--exchange E]
//! ```
//!
//! Serves conductor RPC 1.1 until Ctrl-C: `ping(arg)` (1.0, the existing API) and the
//! object-indirection methods `object_class_action_versions`, `object_action` and
//! `object_backport_versions` (1.1) over the model of `crates/verso/tests/vectors/ovo-model.json`,
//! with the remotable bodies reading and writing an in-memory store loaded from the seed
//! file: a JSON object mapping `Device`, `Deployable`, `AttachHandle` to lists of rows,
//! each row the field values of that object's `versioned_object.data` at its newest
//! version. Prints `ready` on stdout once it listens.

use clap::Parser;
use serde_json::json;
use std::process::ExitCode;
use std::sync::Arc;
use verso::Version;
use verso_rpc::conductor::{add_object_endpoints, INDIRECTION_VERSION};
use verso_rpc::transport::{redact, transport_from_url};
use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RpcServer, Target};

/// Serves conductor RPC 1.1 for the Cyborg example model until Ctrl-C: ping (1.0) and
/// the object-indirection methods (1.1) over an in-memory store loaded from --seed.
/// Prints `ready` on stdout once it listens.
#[derive(Parser, Debug)]
#[command(name = "conductor", args_override_self = true)]
struct Cli {
    /// The broker, in oslo.messaging's form: rabbit://user:pass@host:5672/vhost, or memory://.
    #[arg(long = "transport-url", value_name = "URL")]
    url: String,
    /// The topic to listen on (the agents' conductor topic).
    #[arg(long)]
    topic: String,
    /// A JSON file mapping Device, Deployable, AttachHandle to lists of rows
    /// (e.g. crates/verso-rpc/interop/cyborg-seed.json).
    #[arg(long, value_name = "FILE")]
    seed: String,
    /// This server's name, for calls directed to one server of the topic.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// The control exchange (oslo.messaging's default is `openstack`).
    #[arg(long)]
    exchange: Option<String>,
}

fn load_store(path: &str) -> Result<cyborg_model::StoreHandle, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read seed {path}: {e}"))?;
    let seed = serde_json::from_str(&text).map_err(|e| format!("seed {path} is not JSON: {e}"))?;
    let store =
        cyborg_model::MemoryStore::from_seed(&seed).map_err(|e| format!("seed {path}: {e}"))?;
    Ok(cyborg_model::StoreHandle(Arc::new(store)))
}

async fn run(cli: Cli) -> Result<(), String> {
    let store = load_store(&cli.seed)?;
    let transport = transport_from_url(&cli.url, cli.exchange.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    let base = Endpoint::new(Version::new(1, 1)).method(
        MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
        |_ctx, args: Args| {
            let reply = json!({"arg": args.value("arg"), "peer": "verso-conductor"});
            async move { Ok(reply) }
        },
    );
    // Every request's context gets the conductor's store; agents' contexts never do.
    let endpoint = add_object_endpoints(
        base,
        INDIRECTION_VERSION,
        Arc::new(cyborg_model::registry()),
        move |ctx| ctx.with_extension(store.clone()),
    );
    let mut target = Target::new(cli.topic.clone());
    if let Some(s) = &cli.server {
        target = target.with_server(s.clone());
    }
    let handle = RpcServer::new(transport, target.clone())
        .endpoint(endpoint)
        .map_err(|e| e.to_string())?
        .start()
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "conductor serving {target} at RPC 1.1 on {} (Ctrl-C stops)",
        redact(&cli.url)
    );
    println!("ready");
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("error: cannot wait for Ctrl-C: {e}");
    }
    handle.stop().await;
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
