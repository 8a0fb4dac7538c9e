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

use serde_json::json;
use std::process::ExitCode;
use std::sync::Arc;
use verso::Version;
use verso_rpc::conductor::add_object_endpoints;
use verso_rpc::transport::{amqp::redact, transport_from_url};
use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RpcServer, Target};

const USAGE: &str = "usage: conductor --transport-url URL --topic TOPIC --seed FILE [--server NAME] [--exchange EXCHANGE]";

struct Cli {
    url: String,
    topic: String,
    seed: String,
    server: Option<String>,
    exchange: Option<String>,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Cli, String> {
    let (mut url, mut topic, mut seed, mut server, mut exchange) = (None, None, None, None, None);
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--transport-url" => &mut url,
            "--topic" => &mut topic,
            "--seed" => &mut seed,
            "--server" => &mut server,
            "--exchange" => &mut exchange,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        };
        *slot = Some(
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?,
        );
    }
    let need =
        |v: Option<String>, what: &str| v.ok_or_else(|| format!("{what} is required\n{USAGE}"));
    Ok(Cli {
        url: need(url, "--transport-url")?,
        topic: need(topic, "--topic")?,
        seed: need(seed, "--seed")?,
        server,
        exchange,
    })
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
    let endpoint = add_object_endpoints(base, Arc::new(cyborg_model::registry()), move |ctx| {
        ctx.with_extension(store.clone())
    });
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
    let cli = match parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
