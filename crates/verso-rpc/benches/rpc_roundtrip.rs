//! In-process `call` round trip with a small payload, beside a bare tokio mpsc + oneshot
//! round trip, both on one core (a current-thread runtime).
//!
//! `cargo bench -p verso-rpc --bench rpc_roundtrip` runs the criterion comparison, then
//! prints p50/p99 latency and calls/s for both.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use criterion::Criterion;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, oneshot};
use verso::{RequestContext, Version};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RpcClient, RpcServer, Target};

fn payload() -> Value {
    json!({"arg": {"hello": "world"}})
}

type BareRequest = (Value, oneshot::Sender<Value>);

/// The baseline: a server task answering each request through a oneshot.
fn bare_server() -> mpsc::UnboundedSender<BareRequest> {
    let (tx, mut rx) = mpsc::unbounded_channel::<BareRequest>();
    tokio::spawn(async move {
        while let Some((v, reply)) = rx.recv().await {
            let _ = reply.send(v);
        }
    });
    tx
}

async fn bare_call(tx: &mpsc::UnboundedSender<BareRequest>, v: Value) -> Value {
    let (reply, rx) = oneshot::channel();
    tx.send((v, reply)).expect("bare server running");
    rx.await.expect("bare server replied")
}

async fn rpc_setup() -> (RpcClient, verso_rpc::ServerHandle) {
    let transport = Arc::new(MemoryTransport::new());
    let ep = Endpoint::new(Version::new(1, 1)).method(
        MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
        |_ctx, args: Args| async move { Ok(args.value("arg").cloned().unwrap_or_default()) },
    );
    let server = RpcServer::new(
        transport.clone(),
        Target::new("conductor").with_server("c1"),
    )
    .endpoint(ep)
    .expect("valid endpoint")
    .start()
    .await
    .expect("server listening");
    let client =
        RpcClient::new(transport, Target::new("conductor")).version_cap(Version::new(1, 1));
    (client, server)
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn criterion_benches(c: &mut Criterion) {
    let rt = runtime();
    let ctx = RequestContext::new("req-11111111-2222-3333-4444-555555555555")
        .with_user("demo-user")
        .with_project("demo-project");
    let mut group = c.benchmark_group("round_trip");
    let bare = rt.block_on(async { bare_server() });
    group.bench_function("bare_mpsc_oneshot", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    std::hint::black_box(bare_call(&bare, payload()).await);
                }
                start.elapsed()
            })
        })
    });
    let (client, server) = rt.block_on(rpc_setup());
    group.bench_function("rpc_call_memory", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let r = client.call(&ctx, "ping", "1.0", payload()).await;
                    std::hint::black_box(r.expect("call answered"));
                }
                start.elapsed()
            })
        })
    });
    group.finish();
    rt.block_on(server.stop());
}

struct Figures {
    p50: Duration,
    p99: Duration,
    per_sec: f64,
}

/// Times `$n` sequential awaits of `$call` (after a warm-up) on runtime `$rt`.
macro_rules! time_calls {
    ($rt:expr, $n:expr, $call:expr) => {
        $rt.block_on(async {
            for _ in 0..$n / 10 {
                std::hint::black_box($call.await);
            }
            let mut samples = Vec::with_capacity($n);
            let total = Instant::now();
            for _ in 0..$n {
                let t = Instant::now();
                std::hint::black_box($call.await);
                samples.push(t.elapsed());
            }
            let total = total.elapsed();
            samples.sort();
            Figures {
                p50: samples[$n / 2],
                p99: samples[$n * 99 / 100],
                per_sec: $n as f64 / total.as_secs_f64(),
            }
        })
    };
}

fn latency_report() {
    const N: usize = 200_000;
    let ctx = RequestContext::new("req-11111111-2222-3333-4444-555555555555")
        .with_user("demo-user")
        .with_project("demo-project");

    let rt = runtime();
    let tx = rt.block_on(async { bare_server() });
    let bare = time_calls!(rt, N, bare_call(&tx, payload()));

    let rt = runtime();
    let (client, server) = rt.block_on(rpc_setup());
    let rpc = time_calls!(rt, N, async {
        client
            .call(&ctx, "ping", "1.0", payload())
            .await
            .expect("call answered")
    });
    rt.block_on(server.stop());

    println!(
        "\nround trip on one core (current-thread runtime), {N} sequential calls, small payload:"
    );
    println!("{:<24} {:>10} {:>10} {:>12}", "", "p50", "p99", "calls/s");
    for (name, f) in [
        ("bare mpsc + oneshot", &bare),
        ("verso-rpc memory call", &rpc),
    ] {
        println!(
            "{name:<24} {:>10.2?} {:>10.2?} {:>12.0}",
            f.p50, f.p99, f.per_sec
        );
    }
    println!(
        "ratio rpc/bare: p50 {:.1}x, p99 {:.1}x, throughput {:.1}x",
        rpc.p50.as_secs_f64() / bare.p50.as_secs_f64(),
        rpc.p99.as_secs_f64() / bare.p99.as_secs_f64(),
        bare.per_sec / rpc.per_sec
    );
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    criterion_benches(&mut c);
    c.final_summary();
    latency_report();
}
