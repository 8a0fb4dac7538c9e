//! An RPC client anyone can run, against a verso or a Python oslo.messaging server.
//!
//! ```text
//! cargo run -p verso-rpc --example rpc_client -- \
//!     --transport-url rabbit://guest:guest@127.0.0.1:5672/ --topic demo \
//!     --method ping --arg '{"hello": "world"}' [--version 1.0] [--cap 1.1] \
//!     [--exchange openstack] [--server s1] [--timeout 60] [--cast | --fanout]
//! ```
//!
//! Sends `--arg` (JSON) as the keyword argument `arg` and prints the result as one JSON
//! line (exit 0). `--cast` / `--fanout` send without waiting and print `null`. A version
//! above `--cap` is refused before anything is sent (exit 3); a remote or dispatch error
//! prints its typed error on stderr (exit 1), and so does a call nobody answers within
//! `--timeout` (the library's default call timeout unless given); bad arguments exit 2.

use clap::Parser;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::transport::transport_from_url;
use verso_rpc::{RpcClient, RpcError, Target, DEFAULT_TIMEOUT};

/// Makes one RPC call (or cast) and prints the result as one JSON line.
///
/// Exit status: 0 success, 1 a remote, transport or timeout error, 2 bad arguments,
/// 3 the version is above --cap (nothing was sent).
#[derive(Parser, Debug)]
#[command(name = "rpc_client", args_override_self = true)]
struct Cli {
    /// The broker, in oslo.messaging's form: rabbit://user:pass@host:5672/vhost, or memory://.
    #[arg(long, value_name = "URL")]
    transport_url: String,
    /// The topic the server listens on.
    #[arg(long)]
    topic: String,
    /// The method to call.
    #[arg(long)]
    method: String,
    /// The keyword argument `arg`, as JSON (quote strings: '"x"').
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    arg: Option<Value>,
    /// The RPC version the call needs.
    #[arg(long, value_name = "MAJOR.MINOR", default_value = "1.0", value_parser = parse_version)]
    version: Version,
    /// The client's version cap, as [upgrade_levels] would set it.
    #[arg(long, value_name = "MAJOR.MINOR", value_parser = parse_version)]
    cap: Option<Version>,
    /// The control exchange (oslo.messaging's default is `openstack`).
    #[arg(long)]
    exchange: Option<String>,
    /// Sends to this server of the topic only.
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// Seconds to wait for the reply (the library's default call timeout unless given).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIMEOUT.as_secs_f64(),
          value_parser = parse_timeout)]
    timeout: f64,
    /// Casts (no reply is waited for; prints null).
    #[arg(long, conflicts_with = "fanout")]
    cast: bool,
    /// Casts to every server of the topic (prints null).
    #[arg(long)]
    fanout: bool,
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON ({e}); quote strings: '\"x\"'"))
}

fn parse_version(text: &str) -> Result<Version, String> {
    text.parse()
        .map_err(|_| format!("'{text}' is not a version; write MAJOR.MINOR such as 1.0"))
}

fn parse_timeout(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t > 0.0)
        .ok_or_else(|| format!("'{text}' is not a positive number of seconds"))
}

/// The variant name of an error, so scripts can match on it.
fn kind(e: &RpcError) -> String {
    let dbg = format!("{e:?}");
    dbg.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("RpcError")
        .to_owned()
}

/// What the command prints for an error: the library's message, except for a timeout,
/// whose library message points at the API (`prepare().timeout()`) rather than at this
/// command's own option.
fn message(e: &RpcError) -> String {
    match e {
        RpcError::Timeout {
            method,
            topic,
            timeout,
        } => format!(
            "no reply to '{method}' on topic '{topic}' within {}s; is a server listening on \
             that topic (and exchange)? If the method is just slow, raise --timeout",
            timeout.as_secs_f64()
        ),
        other => other.to_string(),
    }
}

async fn run(cli: Cli) -> Result<Value, (ExitCode, String)> {
    let fail = |e: RpcError| {
        let code = if matches!(e, RpcError::VersionCap { .. }) {
            ExitCode::from(3)
        } else {
            ExitCode::from(1)
        };
        (code, format!("error: {}: {}", kind(&e), message(&e)))
    };
    let transport = transport_from_url(&cli.transport_url, cli.exchange.as_deref())
        .await
        .map_err(fail)?;
    let client = RpcClient::new(transport, Target::new(cli.topic))
        .timeout(Duration::from_secs_f64(cli.timeout))
        .with_cap(cli.cap);
    let ctx = RequestContext::new(format!("req-{}", uuid::Uuid::new_v4())).with_user("rpc_client");
    let mut prepared = client.prepare();
    if let Some(s) = cli.server {
        prepared = prepared.server(s);
    }
    let args = json!({ "arg": cli.arg.unwrap_or(Value::Null) });
    if cli.cast || cli.fanout {
        if cli.fanout {
            prepared = prepared.fanout();
        }
        prepared
            .cast(&ctx, &cli.method, cli.version, args)
            .await
            .map_err(fail)?;
        Ok(Value::Null)
    } else {
        prepared
            .call(&ctx, &cli.method, cli.version, args)
            .await
            .map_err(fail)
    }
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
