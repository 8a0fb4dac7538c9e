//! An RPC server anyone can run, and that a Python oslo.messaging client can call.
//!
//! ```text
//! cargo run -p verso-rpc --example rpc_server -- \
//!     --transport-url rabbit://guest:guest@127.0.0.1:5672/ --topic demo [--server s1] [--exchange openstack]
//! ```
//!
//! Serves one endpoint at version 1.1 until Ctrl-C: `ping(arg)` (since 1.0) returns
//! `{"arg": <arg>, "topic": ..., "server": ...}`; `fail(message)` (since 1.1) raises an
//! application error (`DemoError`, module `verso_rpc.examples`). `--transport-url memory://`
//! runs it in-process (useful only to check the arguments). Prints `ready` on stdout once
//! it listens.

use clap::Parser;
use serde_json::json;
use std::process::ExitCode;
use verso::Version;
use verso_rpc::transport::{redact, transport_from_url};
use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RemoteError, RpcServer, Target};

/// Serves one endpoint at version 1.1 until Ctrl-C: ping(arg) since 1.0, fail(message)
/// since 1.1. Prints `ready` on stdout once it listens.
#[derive(Parser, Debug)]
#[command(name = "rpc_server", args_override_self = true)]
struct Cli {
    /// The broker, in oslo.messaging's form: rabbit://user:pass@host:5672/vhost, or memory://.
    #[arg(long = "transport-url", value_name = "URL")]
    url: String,
    /// The topic to listen on.
    #[arg(long)]
    topic: String,
    /// This server's name, for calls directed to one server of the topic.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// The control exchange (oslo.messaging's default is `openstack`).
    #[arg(long)]
    exchange: Option<String>,
}

fn endpoint(topic: String, server: Option<String>) -> Endpoint {
    Endpoint::new(Version::new(1, 1))
        .method(
            MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
            move |_ctx, args: Args| {
                let reply = json!({"arg": args.value("arg"), "topic": topic, "server": server});
                async move { Ok(reply) }
            },
        )
        .method(
            MethodSpec::new("fail", Version::new(1, 1))
                .arg(ArgSpec::required("message", ArgType::Any)),
            |_ctx, args: Args| {
                let message = match args.value("message") {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    other => other.map(ToString::to_string).unwrap_or_default(),
                };
                async move { Err(RemoteError::new("DemoError", "verso_rpc.examples", message)) }
            },
        )
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs on stderr; RUST_LOG=debug shows more.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let transport = match transport_from_url(&cli.url, cli.exchange.as_deref()).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut target = Target::new(cli.topic.clone());
    if let Some(s) = &cli.server {
        target = target.with_server(s.clone());
    }
    let server = match RpcServer::new(transport, target.clone())
        .endpoint(endpoint(cli.topic.clone(), cli.server.clone()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let handle = match server.start().await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    eprintln!(
        "serving {target} at version 1.1 on {} (Ctrl-C stops)",
        redact(&cli.url)
    );
    println!("ready");
    if let Err(e) = tokio::signal::ctrl_c().await {
        eprintln!("error: cannot wait for Ctrl-C: {e}");
    }
    handle.stop().await;
    ExitCode::SUCCESS
}
