//! Sequential `call` round trips over a local RabbitMQ, side by side:
//! verso client -> verso server, Python oslo.messaging client -> Python server, and bare
//! lapin and amqprs publish/consume round trips.
//!
//! ```text
//! crates/verso-rpc/interop/start-rabbitmq.sh
//! cargo bench -p verso-rpc --bench amqp_roundtrip      # 5 rounds of 10000/5 calls each
//! VERSO_BENCH_CALLS=20000 VERSO_BENCH_ROUNDS=10 cargo bench -p verso-rpc --bench amqp_roundtrip
//! VERSO_BENCH_ONLY=verso cargo bench -p verso-rpc --bench amqp_roundtrip   # one, for profiling
//! ```
//! Six pairs run in interleaved rounds (rotating order) and each round's ratios are
//! printed, with their medians: the machine's load drifts, and a ratio of two runs
//! minutes apart measures the drift as much as the code.
//! - `lapin`: bare lapin, a minimal message through the default exchange;
//! - `lapin-oslo`: bare lapin doing the broker work of an oslo call (topic exchange,
//!   oslo's properties, a real-size body);
//! - `amqprs-oslo`: the same with bare amqprs, the client verso's transport is built on
//!   (its floor);
//! - `verso`: verso client and server in this process, on two connections;
//! - `verso-2p`: the verso server in a child process (this binary again), as a deployment
//!   runs it and as the Python pair runs;
//! - `python`: oslo.messaging client and server (interop/peer.py), two processes.
//!
//! `lapin/python` is what a transport built on lapin could reach against Python.
//! Uses `VERSO_TEST_RABBIT_URL` and `VERSO_TEST_PYTHON` like the interop tests.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use std::time::Instant;

mod amqp_common;
use amqp_common::{
    median, oslo_body, python_peers, rounds, serve_until_stdin_closes, url, BareAmqprs, VersoPair,
    SERVE_ENV, WARMUP,
};

fn calls() -> usize {
    std::env::var("VERSO_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
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

/// Request queue + reply queue, a consumer that acks and answers, with no envelope and no
/// dispatch. `Shape::Minimal`: a 26-byte body with no properties through the default
/// exchange (the floor of any lapin round trip). `Shape::Oslo`: the broker work an
/// oslo.messaging call needs, done with bare lapin: the request through a topic exchange
/// with oslo's properties (persistent delivery mode, expiration) and a body the size of a
/// real enveloped request, the reply likewise.
struct BareLapin {
    _server: Connection,
    _client: Connection,
    cch: lapin::Channel,
    exchange: String,
    req_q: String,
    body: Vec<u8>,
    props: BasicProperties,
    replies: lapin::Consumer,
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Minimal,
    Oslo,
}

/// The properties verso and oslo.messaging put on a request (`expiration` on calls).
fn oslo_properties(expiration: bool) -> BasicProperties {
    let props = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("utf-8".into())
        .with_delivery_mode(2)
        .with_priority(0)
        .with_headers(FieldTable::default());
    if expiration {
        props.with_expiration("60000".into())
    } else {
        props
    }
}

impl BareLapin {
    async fn new(shape: Shape) -> Self {
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
        let exchange = match shape {
            Shape::Minimal => String::new(),
            Shape::Oslo => {
                let x = format!("bench-bare-x-{id}");
                let auto_x = lapin::options::ExchangeDeclareOptions {
                    auto_delete: true,
                    ..Default::default()
                };
                sch.exchange_declare(
                    &x,
                    lapin::ExchangeKind::Topic,
                    auto_x,
                    FieldTable::default(),
                )
                .await
                .expect("exchange");
                sch.queue_bind(
                    &req_q,
                    &x,
                    &req_q,
                    Default::default(),
                    FieldTable::default(),
                )
                .await
                .expect("bind");
                x
            }
        };
        let reply_props = match shape {
            Shape::Minimal => BasicProperties::default(),
            Shape::Oslo => oslo_properties(false),
        };
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
                        reply_props.clone(),
                    )
                    .await;
            }
        });
        let replies = cch
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
        let (body, props) = match shape {
            Shape::Minimal => (
                br#"{"hello": "world", "n": 1}"#.to_vec(),
                BasicProperties::default(),
            ),
            Shape::Oslo => (oslo_body(), oslo_properties(true)),
        };
        let mut bare = BareLapin {
            _server: server,
            _client: client,
            cch,
            exchange,
            req_q,
            body,
            props,
            replies,
        };
        bare.round_trips(WARMUP).await;
        bare
    }

    async fn round_trips(&mut self, n: usize) -> f64 {
        let start = Instant::now();
        for _ in 0..n {
            self.cch
                .basic_publish(
                    &self.exchange,
                    &self.req_q,
                    BasicPublishOptions::default(),
                    &self.body,
                    self.props.clone(),
                )
                .await
                .expect("publish");
            self.replies.next().await.expect("reply").expect("delivery");
        }
        n as f64 / start.elapsed().as_secs_f64()
    }
}

/// One round's rates (calls per second).
#[derive(Default)]
struct Round {
    lapin: f64,
    lapin_oslo: f64,
    amqprs_oslo: f64,
    verso: f64,
    verso_2p: f64,
    python: Option<f64>,
}

fn main() {
    if let Ok(topic) = std::env::var(SERVE_ENV) {
        return serve_until_stdin_closes(&topic);
    }
    // `cargo bench` passes --bench; nothing else to parse.
    let (n, rounds) = (calls(), rounds());
    let per_round = (n / rounds).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if let Ok(which) = std::env::var("VERSO_BENCH_ONLY") {
        let rate = rt.block_on(async {
            match which.as_str() {
                "lapin" => BareLapin::new(Shape::Minimal).await.round_trips(n).await,
                "lapin-oslo" => BareLapin::new(Shape::Oslo).await.round_trips(n).await,
                "amqprs-oslo" => BareAmqprs::new().await.round_trips(n).await,
                "verso" => VersoPair::new(true).await.calls(n).await,
                "verso-2p" => VersoPair::new(false).await.calls(n).await,
                "python" => python_peers(n).expect("python peers"),
                other => panic!(
                    "VERSO_BENCH_ONLY={other}: lapin|lapin-oslo|amqprs-oslo|verso|verso-2p|python"
                ),
            }
        });
        println!("{which}: {rate:.0} calls/s ({n} sequential calls)");
        return;
    }
    let mut bare = rt.block_on(BareLapin::new(Shape::Minimal));
    let mut oslo = rt.block_on(BareLapin::new(Shape::Oslo));
    let mut amqprs_oslo = rt.block_on(BareAmqprs::new());
    let ours = rt.block_on(VersoPair::new(true));
    let ours_2p = rt.block_on(VersoPair::new(false));
    println!(
        "sequential call round trips over RabbitMQ at {}, {rounds} interleaved rounds of \
         {per_round} (calls per second)",
        verso_rpc::transport::amqp::redact(&url())
    );
    println!(
        "  {:>5} {:>6} {:>10} {:>11} {:>6} {:>8} {:>6} | {:>11} {:>16} {:>17} {:>12} {:>15} {:>12}",
        "round",
        "lapin",
        "lapin-oslo",
        "amqprs-oslo",
        "verso",
        "verso-2p",
        "python",
        "lapin/verso",
        "lapin-oslo/verso",
        "amqprs-oslo/verso",
        "verso/python",
        "verso-2p/python",
        "lapin/python"
    );
    let mut all = Vec::new();
    for round in 1..=rounds {
        let mut r = Round::default();
        for k in 0..6 {
            match (round + k) % 6 {
                0 => r.lapin = rt.block_on(bare.round_trips(per_round)),
                1 => r.lapin_oslo = rt.block_on(oslo.round_trips(per_round)),
                2 => r.amqprs_oslo = rt.block_on(amqprs_oslo.round_trips(per_round)),
                3 => r.verso = rt.block_on(ours.calls(per_round)),
                4 => r.verso_2p = rt.block_on(ours_2p.calls(per_round)),
                _ => r.python = python_peers(per_round.min(2000)),
            }
        }
        let py = |v: f64| {
            r.python
                .map_or("-".to_string(), |p| format!("{:.2}", v / p))
        };
        println!(
            "  {round:>5} {:>6.0} {:>10.0} {:>11.0} {:>6.0} {:>8.0} {:>6} | {:>11.2} {:>16.2} {:>17.2} {:>12} {:>15} {:>12}",
            r.lapin,
            r.lapin_oslo,
            r.amqprs_oslo,
            r.verso,
            r.verso_2p,
            r.python.map_or("failed".to_string(), |p| format!("{p:.0}")),
            r.lapin / r.verso,
            r.lapin_oslo / r.verso,
            r.amqprs_oslo / r.verso,
            py(r.verso),
            py(r.verso_2p),
            py(r.lapin),
        );
        all.push(r);
    }
    let med = |f: &dyn Fn(&Round) -> Option<f64>| {
        let v: Vec<f64> = all.iter().filter_map(f).collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}x", median(v))
        }
    };
    println!(
        "  median bare lapin / verso   : {} (target <= 1.30x)",
        med(&|r| Some(r.lapin / r.verso))
    );
    println!(
        "  median lapin-oslo / verso   : {}",
        med(&|r| Some(r.lapin_oslo / r.verso))
    );
    println!(
        "  median amqprs-oslo / verso  : {} (verso's own cost over its AMQP client)",
        med(&|r| Some(r.amqprs_oslo / r.verso))
    );
    println!(
        "  median verso / python       : {} (target >= 5x)",
        med(&|r| r.python.map(|p| r.verso / p))
    );
    println!(
        "  median verso-2p / python    : {} (target >= 5x)",
        med(&|r| r.python.map(|p| r.verso_2p / p))
    );
    println!(
        "  median bare lapin / python  : {}",
        med(&|r| r.python.map(|p| r.lapin / p))
    );
    rt.block_on(ours.stop());
    rt.block_on(ours_2p.stop());
    // amqprs closes a connection it drops with tokio::spawn: drop it inside the runtime.
    rt.block_on(async move { drop(amqprs_oslo) });
}
