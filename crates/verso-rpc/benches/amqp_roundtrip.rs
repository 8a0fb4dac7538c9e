//! Sequential `call` round trips over a local RabbitMQ, side by side:
//! verso client -> verso server, Python oslo.messaging client -> Python server, and a
//! bare lapin publish/consume round trip (the floor for any lapin-based transport).
//!
//! ```text
//! crates/verso-rpc/interop/start-rabbitmq.sh
//! cargo bench -p verso-rpc --bench amqp_roundtrip            # N=2000 calls each
//! VERSO_BENCH_CALLS=5000 cargo bench -p verso-rpc --bench amqp_roundtrip
//! ```
//! Uses `VERSO_TEST_RABBIT_URL` and `VERSO_TEST_PYTHON` like the interop tests.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use verso::{RequestContext, Version};
use verso_rpc::transport::amqp::AmqpTransport;
use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RpcClient, RpcServer, Target};

const WARMUP: usize = 100;

fn calls() -> usize {
    std::env::var("VERSO_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

fn python() -> PathBuf {
    std::env::var_os("VERSO_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

async fn verso(n: usize) -> f64 {
    let topic = format!("bench-verso-{}", uuid::Uuid::new_v4().simple());
    let server_t = Arc::new(AmqpTransport::connect(&url()).await.expect("RabbitMQ"));
    let client_t = Arc::new(AmqpTransport::connect(&url()).await.expect("RabbitMQ"));
    let endpoint = Endpoint::new(Version::new(1, 1)).method(
        MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
        |_ctx, args: Args| async move { Ok(json!({"arg": args.value("arg")})) },
    );
    let server = RpcServer::new(server_t, Target::new(topic.clone()).with_server("b1"))
        .endpoint(endpoint)
        .expect("endpoint")
        .start()
        .await
        .expect("server");
    let client = RpcClient::new(client_t, Target::new(topic));
    let ctx = RequestContext::new("req-bench").with_user("bench");
    let payload = json!({"arg": {"hello": "world", "n": 1}});
    for _ in 0..WARMUP {
        client
            .call(&ctx, "ping", "1.0", payload.clone())
            .await
            .expect("call");
    }
    let start = Instant::now();
    for _ in 0..n {
        client
            .call(&ctx, "ping", "1.0", payload.clone())
            .await
            .expect("call");
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    server.stop().await;
    rate
}

async fn lapin_conn() -> Connection {
    let c = verso_rpc::transport::amqp::AmqpConfig::from_url(&url()).expect("url");
    let h = &c.hosts[0];
    let vhost = c.vhost.replace('%', "%25").replace('/', "%2f");
    Connection::connect(
        &format!(
            "amqp://{}:{}@{}:{}/{vhost}",
            h.username, h.password, h.host, h.port
        ),
        ConnectionProperties::default()
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio),
    )
    .await
    .expect("RabbitMQ")
}

/// Request queue + reply queue, a consumer that acks and answers: the same broker work as
/// one RPC call, with no envelope, no dispatch.
async fn bare_lapin(n: usize) -> f64 {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (req_q, rep_q) = (
        format!("bench-bare-req-{id}"),
        format!("bench-bare-rep-{id}"),
    );
    let server = lapin_conn().await;
    let client = lapin_conn().await;
    let sch = server.create_channel().await.expect("channel");
    let cch = client.create_channel().await.expect("channel");
    let auto = QueueDeclareOptions {
        auto_delete: true,
        ..Default::default()
    };
    sch.queue_declare(&req_q, auto, FieldTable::default())
        .await
        .expect("queue");
    cch.queue_declare(&rep_q, auto, FieldTable::default())
        .await
        .expect("queue");
    let mut requests = sch
        .basic_consume(
            &req_q,
            "s",
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let reply_ch = server.create_channel().await.expect("channel");
    let rep_q2 = rep_q.clone();
    tokio::spawn(async move {
        while let Some(Ok(d)) = requests.next().await {
            let _ = d.acker.ack(BasicAckOptions::default()).await;
            let _ = reply_ch
                .basic_publish(
                    "",
                    &rep_q2,
                    BasicPublishOptions::default(),
                    &d.data,
                    BasicProperties::default(),
                )
                .await;
        }
    });
    let mut replies = cch
        .basic_consume(
            &rep_q,
            "c",
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let body = br#"{"hello": "world", "n": 1}"#;
    let mut timed = None;
    for i in 0..WARMUP + n {
        if i == WARMUP {
            timed = Some(Instant::now());
        }
        cch.basic_publish(
            "",
            &req_q,
            BasicPublishOptions::default(),
            body,
            BasicProperties::default(),
        )
        .await
        .expect("publish");
        replies.next().await.expect("reply").expect("delivery");
    }
    let start = timed.unwrap_or_else(Instant::now);
    n as f64 / start.elapsed().as_secs_f64()
}

fn python_peers(n: usize) -> Option<f64> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop/peer.py");
    let topic = format!("bench-python-{}", uuid::Uuid::new_v4().simple());
    let out = std::process::Command::new(python())
        .arg(script)
        .args([
            "bench",
            "--url",
            &url(),
            "--topic",
            &topic,
            "--n",
            &n.to_string(),
        ])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        other => {
            eprintln!("python bench failed: {other:?}");
            return None;
        }
    };
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(line.lines().last().unwrap_or("")).ok()?;
    v["calls_per_s"].as_f64()
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let n = calls();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let bare = rt.block_on(bare_lapin(n));
    let ours = rt.block_on(verso(n));
    let py_n = n.min(2000);
    let py = python_peers(py_n);
    println!(
        "sequential call round trips over RabbitMQ at {}",
        verso_rpc::transport::amqp::redact(&url())
    );
    println!("  bare lapin publish/consume : {bare:>9.0} round trips/s ({n})");
    println!("  verso -> verso             : {ours:>9.0} calls/s ({n})");
    match py {
        Some(py) => println!("  python -> python (oslo)    : {py:>9.0} calls/s ({py_n})"),
        None => println!("  python -> python (oslo)    :   (failed, see stderr)"),
    }
    println!(
        "  bare lapin / verso         : {:>9.2}x (target <= 1.30x)",
        bare / ours
    );
    if let Some(py) = py {
        println!(
            "  verso / python             : {:>9.2}x (target >= 5x)",
            ours / py
        );
    }
}
