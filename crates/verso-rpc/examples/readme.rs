//! The README's RPC examples, whole: every `rust` block of the README's RPC sections is
//! an excerpt of this file (`tests/readme.rs` checks it, line by line), and this file is
//! compiled and run by `cargo test -p verso-rpc` (`tests/examples.rs`).
//!
//! ```sh
//! cargo run -p verso-rpc --example readme
//! ```
#![allow(clippy::print_stdout)]

use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use verso::{RequestContext, Version};
use verso_rpc::caps::ApiCap;
use verso_rpc::config::{Config, ConfigLoader};
use verso_rpc::message::Request;
use verso_rpc::transport::{memory::MemoryTransport, Transport};
use verso_rpc::{
    ArgSpec, ArgType, Args, Endpoint, MethodSpec, Outgoing, RpcApi, RpcClient, RpcError, RpcMethod,
    RpcServer, Target,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

// README: "Versioned RPC", the typed method.
/// Reports a host's devices; 1.1 added `verbose`.
#[derive(RpcMethod, Debug)]
#[rpc(name = "report_data", since = "1.0", reply = String)]
struct ReportData {
    hostname: String, // required, since the method's 1.0
    #[rpc(since = "1.1", default = false)] // optional: older clients leave it out
    verbose: bool,
}

/// The conductor's API, declared once: name, newest version, methods.
struct Conductor;
impl RpcApi for Conductor {
    const NAME: &'static str = "conductor"; // the lock's [rpc.conductor]
    const VERSION: Version = Version::new(1, 1);
    fn methods() -> Vec<&'static MethodSpec> {
        vec![ReportData::spec()]
    }
}

/// A command line with `--config FILE` and `--set SECTION.KEY=VALUE`.
struct Cli {
    config: Option<PathBuf>,
    set: Vec<String>,
}

/// The application's own configuration section.
#[derive(Debug, Deserialize)]
struct Database {
    url: String,
}

// README: "A service's configuration", caps declared by the application.
fn load(cli: &Cli) -> Result<Config, Error> {
    // A third API, with its own cap: [upgrade_levels] scheduler.
    let scheduler = ApiCap::new("scheduler", Version::new(2, 3), Version::new(2, 0));
    let config = ConfigLoader::new()
        .api(ApiCap::for_api::<Conductor>(Version::new(1, 1))) // [upgrade_levels] conductor
        .api(scheduler)
        .section("database") // the application's own sections
        .maybe_file(cli.config.as_deref())
        .overrides(&cli.set)
        .load()?; // ConfigError says what to write
    Ok(config)
}

async fn typed(transport: Arc<dyn Transport>, config: &Config) -> Result<String, Error> {
    let ctx = RequestContext::new("req-1");
    // README: "Versioned RPC", the server and the client of the typed method.
    let endpoint = Endpoint::for_api::<Conductor>() // refused unless it serves exactly the API
        .handle(|_ctx, r: ReportData| async move {
            Ok(format!("{} verbose={}", r.hostname, r.verbose))
        });
    let server = RpcServer::new(transport.clone(), Target::new("conductor"))
        .endpoint(endpoint)?
        .start()
        .await?;

    let cap = config.cap("conductor").unwrap_or(Conductor::VERSION);
    let pinned = RpcClient::for_api::<Conductor>(transport.clone(), "conductor").version_cap(cap);
    let report = ReportData {
        hostname: "h1".into(),
        verbose: false,
    };
    let reply: String = pinned.call_method(&ctx, report).await?;
    // README: end.
    let verbose = ReportData {
        hostname: "h1".into(),
        verbose: true,
    };
    let refused = pinned.call_method(&ctx, verbose).await;
    if cap < Version::new(1, 1) {
        assert!(matches!(refused, Err(RpcError::VersionCap { .. })));
    } else {
        assert_eq!(refused?, "h1 verbose=true");
    }
    server.stop().await;
    Ok(reply)
}

// README: "A call states the version it needs".
async fn allocate(
    client: &RpcClient,
    ctx: &RequestContext,
    id: &str,
    n: i64,
) -> Result<serde_json::Value, RpcError> {
    let reply = if client.can_send_version("1.2") {
        let args = json!({"uuid": id, "count": n});
        client.call(ctx, "allocate", "1.2", args).await?
    } else {
        let args = json!({"uuid": id}); // the older form
        client.call(ctx, "allocate", "1.1", args).await?
    };
    Ok(reply)
}

async fn untyped(transport: Arc<dyn Transport>) -> Result<(), Error> {
    let endpoint = Endpoint::new(Version::new(1, 2)).method(
        MethodSpec::new("allocate", Version::new(1, 0))
            .arg(ArgSpec::required("uuid", ArgType::String))
            .arg(ArgSpec::optional("count", ArgType::Int, 1).since(Version::new(1, 2))),
        |_ctx, args: Args| async move { Ok(json!(args.get::<i64>("count")?)) },
    );
    let server = RpcServer::new(transport.clone(), Target::new("scheduler"))
        .endpoint(endpoint)?
        .start()
        .await?;
    let ctx = RequestContext::new("req-2");
    for (cap, count) in [(Version::new(1, 1), 1), (Version::new(1, 2), 4)] {
        let client = RpcClient::new(transport.clone(), Target::new("scheduler")).version_cap(cap);
        assert_eq!(allocate(&client, &ctx, "u-1", 4).await?, json!(count));
    }
    server.stop().await;
    Ok(())
}

async fn layered(
    transport: Arc<dyn Transport>,
    endpoint: Endpoint,
) -> Result<(usize, usize), Error> {
    let seen = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let (count, out) = (seen.clone(), sent.clone());
    // README: "Layers".
    let server = RpcServer::new(transport.clone(), Target::new("svc"))
        .endpoint(endpoint)?
        .layer(tower::ServiceBuilder::new().map_request(move |r: Request| {
            count.fetch_add(1, Relaxed); // a metric, a span, an authorization check
            r
        }))
        .start()
        .await?;
    let client = RpcClient::new(transport, Target::new("svc")).layer(
        tower::ServiceBuilder::new().map_request(move |o: Outgoing| {
            out.fetch_add(1, Relaxed); // credentials, a rate limit, a span
            o
        }),
    );
    // README: end.
    client
        .call(&RequestContext::new("req-3"), "ping", "1.0", json!({}))
        .await?;
    server.stop().await;
    Ok((seen.load(Relaxed), sent.load(Relaxed)))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());

    let dir = tempfile::tempdir()?;
    let file = dir.path().join("accel.toml");
    std::fs::write(
        &file,
        "[upgrade_levels]\nconductor = \"1.0\"\n\n[database]\nurl = \"sqlite::memory:\"\n",
    )?;
    let cli = Cli {
        config: Some(file),
        set: vec!["scheduler=2.1".into()],
    };
    let config = load(&cli)?;
    // README: "A service's configuration", reading it.
    let db: Database = config.section("database")?; // serde, with the key and origin of a bad value
    let conductor_cap = config.cap("conductor"); // Some(1.0): from the file
    let scheduler_cap = config.cap("scheduler"); // Some(2.1): from --set
    print!("{}", config.show_config()); // every value and its origin, passwords masked
                                        // README: end.
    assert_eq!(db.url, "sqlite::memory:");
    assert_eq!(conductor_cap, Some(Version::new(1, 0)));
    assert_eq!(scheduler_cap, Some(Version::new(2, 1)));

    let reply = typed(transport.clone(), &config).await?;
    assert_eq!(reply, "h1 verbose=false");
    println!("typed call under cap 1.0: {reply}");

    untyped(transport.clone()).await?;
    println!("allocate: the 1.1 form under cap 1.1, the 1.2 form under cap 1.2");

    let ping = Endpoint::new(Version::new(1, 0)).method(
        MethodSpec::new("ping", Version::new(1, 0)),
        |_ctx, _args| async { Ok(json!("pong")) },
    );
    let (seen, sent) = layered(transport, ping).await?;
    assert_eq!((seen, sent), (1, 1));
    println!("layers: the server's saw {seen} request, the client's sent {sent}");
    Ok(())
}
