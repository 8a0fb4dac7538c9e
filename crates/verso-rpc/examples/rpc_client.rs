//! An RPC client anyone can run, against a verso or a Python oslo.messaging server.
//!
//! ```text
//! cargo run -p verso-rpc --example rpc_client -- \
//!     --transport-url rabbit://guest:guest@127.0.0.1:5672/ --topic demo \
//!     --method ping --arg '{"hello": "world"}' [--version 1.0] [--cap 1.1] \
//!     [--exchange openstack] [--server s1] [--timeout 10] [--cast | --fanout]
//! ```
//!
//! Sends `--arg` (JSON) as the keyword argument `arg` and prints the result as one JSON
//! line (exit 0). `--cast` / `--fanout` send without waiting and print `null`. A version
//! above `--cap` is refused before anything is sent (exit 3); a remote or dispatch error
//! prints its typed error on stderr (exit 1); bad arguments exit 2.

use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::transport::transport_from_url;
use verso_rpc::{RpcClient, RpcError, Target};

const USAGE: &str = "usage: rpc_client --transport-url URL --topic TOPIC --method METHOD \
                     --arg JSON [--version V] [--cap C] [--exchange E] [--server NAME] \
                     [--timeout SECONDS] [--cast | --fanout]";

#[derive(Default)]
struct Cli {
    url: Option<String>,
    topic: Option<String>,
    method: Option<String>,
    arg: Option<String>,
    version: Option<String>,
    cap: Option<String>,
    exchange: Option<String>,
    server: Option<String>,
    timeout: Option<String>,
    cast: bool,
    fanout: bool,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Cli, String> {
    let mut cli = Cli::default();
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--transport-url" => &mut cli.url,
            "--topic" => &mut cli.topic,
            "--method" => &mut cli.method,
            "--arg" => &mut cli.arg,
            "--version" => &mut cli.version,
            "--cap" => &mut cli.cap,
            "--exchange" => &mut cli.exchange,
            "--server" => &mut cli.server,
            "--timeout" => &mut cli.timeout,
            "--cast" => {
                cli.cast = true;
                continue;
            }
            "--fanout" => {
                cli.fanout = true;
                continue;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        };
        *slot = Some(
            args.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?,
        );
    }
    Ok(cli)
}

/// The variant name of an error, so scripts can match on it.
fn kind(e: &RpcError) -> String {
    let dbg = format!("{e:?}");
    dbg.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("RpcError")
        .to_owned()
}

async fn run(cli: Cli) -> Result<Value, (ExitCode, String)> {
    let usage = |m: &str| (ExitCode::from(2), format!("{m}\n{USAGE}"));
    let url = cli
        .url
        .ok_or_else(|| usage("--transport-url is required"))?;
    let topic = cli.topic.ok_or_else(|| usage("--topic is required"))?;
    let method = cli.method.ok_or_else(|| usage("--method is required"))?;
    let arg: Value = match cli.arg {
        None => Value::Null,
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| usage(&format!("--arg is not JSON ({e}); quote strings: '\"x\"'")))?,
    };
    let version: Version = cli
        .version
        .as_deref()
        .unwrap_or("1.0")
        .parse()
        .map_err(|e| usage(&format!("--version: {e}; write MAJOR.MINOR such as 1.0")))?;
    let cap: Option<Version> = match cli.cap {
        None => None,
        Some(c) => Some(
            c.parse()
                .map_err(|e| usage(&format!("--cap: {e}; write MAJOR.MINOR such as 1.0")))?,
        ),
    };
    let timeout = match cli.timeout {
        None => Duration::from_secs(30),
        Some(t) => t
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t > 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| usage("--timeout must be a positive number of seconds"))?,
    };
    let fail = |e: RpcError| {
        let code = if matches!(e, RpcError::VersionCap { .. }) {
            ExitCode::from(3)
        } else {
            ExitCode::from(1)
        };
        (code, format!("error: {}: {e}", kind(&e)))
    };
    let transport = transport_from_url(&url, cli.exchange.as_deref())
        .await
        .map_err(fail)?;
    let mut client = RpcClient::new(transport, Target::new(topic)).timeout(timeout);
    if let Some(cap) = cap {
        client = client.version_cap(cap);
    }
    let ctx = RequestContext::new(format!("req-{}", uuid::Uuid::new_v4())).with_user("rpc_client");
    let mut prepared = client.prepare();
    if let Some(s) = cli.server {
        prepared = prepared.server(s);
    }
    let args = json!({ "arg": arg });
    if cli.cast || cli.fanout {
        if cli.fanout {
            prepared = prepared.fanout();
        }
        prepared
            .cast(&ctx, &method, version, args)
            .await
            .map_err(fail)?;
        Ok(Value::Null)
    } else {
        prepared
            .call(&ctx, &method, version, args)
            .await
            .map_err(fail)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // Logs on stderr; RUST_LOG=debug shows more.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = match parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(cli).await {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err((code, message)) => {
            eprintln!("{message}");
            code
        }
    }
}
