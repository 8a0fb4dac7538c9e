//! What the AMQP benches share: the verso pair, the bare amqprs floor, the Python
//! oslo.messaging pair, and the environment they read.
// Each bench uses part of this module.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use verso::{RequestContext, Version};
use verso_rpc::transport::amqp::AmqpTransport;
use verso_rpc::{ArgSpec, ArgType, Args, Endpoint, MethodSpec, RpcClient, RpcServer, Target};

pub const WARMUP: usize = 100;
/// Set (to a topic) in the child process that serves the out-of-process verso pair.
pub const SERVE_ENV: &str = "VERSO_BENCH_SERVE_TOPIC";

pub fn url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

pub fn python() -> PathBuf {
    std::env::var_os("VERSO_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

/// A verso server and client over two RabbitMQ connections, ready to time.
pub struct VersoPair {
    client: RpcClient,
    server: Server,
    ctx: RequestContext,
    payload: Value,
}

pub fn ping_endpoint() -> Endpoint {
    Endpoint::new(Version::new(1, 1)).method(
        MethodSpec::new("ping", Version::new(1, 0)).arg(ArgSpec::required("arg", ArgType::Any)),
        |_ctx, args: Args| async move { Ok(json!({"arg": args.value("arg")})) },
    )
}

pub async fn start_server(topic: &str) -> verso_rpc::ServerHandle {
    let server_t = Arc::new(AmqpTransport::connect(&url()).await.expect("RabbitMQ"));
    RpcServer::new(server_t, Target::new(topic).with_server("b1"))
        .endpoint(ping_endpoint())
        .expect("endpoint")
        .start()
        .await
        .expect("server")
}

/// The child-process side of [`Server::Process`]: serves `topic` until stdin closes.
pub fn serve_until_stdin_closes(topic: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(start_server(topic));
    println!("ready");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    rt.block_on(server.stop());
}

/// Where the verso server of a [`VersoPair`] runs.
pub enum Server {
    /// In the bench's own process, on its own connection.
    InProcess(verso_rpc::ServerHandle),
    /// In a child process (this bench binary again), as a deployment runs it and as the
    /// Python pair runs its server; stops when its stdin closes.
    Process(std::process::Child),
}

impl VersoPair {
    pub async fn new(in_process: bool) -> Self {
        let topic = format!("bench-verso-{}", uuid::Uuid::new_v4().simple());
        let server = if in_process {
            Server::InProcess(start_server(&topic).await)
        } else {
            let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
                .env(SERVE_ENV, &topic)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("server process");
            let mut line = String::new();
            let out = child.stdout.take().expect("stdout");
            std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
                .expect("ready");
            assert_eq!(
                line.trim(),
                "ready",
                "the bench's server process did not start"
            );
            Server::Process(child)
        };
        let client_t = Arc::new(AmqpTransport::connect(&url()).await.expect("RabbitMQ"));
        let pair = VersoPair {
            client: RpcClient::new(client_t, Target::new(topic)),
            server,
            ctx: RequestContext::new("req-bench").with_user("bench"),
            payload: json!({"arg": {"hello": "world", "n": 1}}),
        };
        pair.calls(WARMUP).await;
        pair
    }

    pub async fn stop(self) {
        match self.server {
            Server::InProcess(s) => s.stop().await,
            Server::Process(mut child) => {
                drop(child.stdin.take());
                let _ = child.wait();
            }
        }
    }

    pub async fn calls(&self, n: usize) -> f64 {
        let start = Instant::now();
        for _ in 0..n {
            self.client
                .call(&self.ctx, "ping", "1.0", self.payload.clone())
                .await
                .expect("call");
        }
        n as f64 / start.elapsed().as_secs_f64()
    }

    /// `n` calls with `inflight` of them in flight: `inflight` tasks on the runtime, each
    /// making its share of the calls one after another on the one client, as a service's
    /// concurrent requests would.
    pub async fn calls_inflight(&self, n: usize, inflight: usize) -> f64 {
        let start = Instant::now();
        let tasks: Vec<_> = shares(n, inflight)
            .map(|count| {
                let (client, ctx, payload) =
                    (self.client.clone(), self.ctx.clone(), self.payload.clone());
                tokio::spawn(async move {
                    for _ in 0..count {
                        client
                            .call(&ctx, "ping", "1.0", payload.clone())
                            .await
                            .expect("call");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("calling task");
        }
        n as f64 / start.elapsed().as_secs_f64()
    }
}

/// `n` split into `parts` near-equal shares, none empty.
pub fn shares(n: usize, parts: usize) -> impl Iterator<Item = usize> {
    let parts = parts.max(1);
    (0..parts)
        .map(move |i| n / parts + usize::from(i < n % parts))
        .filter(|&c| c > 0)
}

/// A request body the size of a real one: the envelope of a `ping` call with a context.
pub fn oslo_body() -> Vec<u8> {
    let request = verso_rpc::message::Request {
        method: "ping".into(),
        args: json!({"arg": {"hello": "world", "n": 1}})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        version: Version::new(1, 0),
        namespace: None,
        context: RequestContext::new("req-bench").with_user("bench"),
    };
    let mut m = request.into_message();
    for key in ["_msg_id", "_reply_q", "_unique_id"] {
        m.insert(key.into(), json!(uuid::Uuid::new_v4().simple().to_string()));
    }
    m.insert("_timeout".into(), Value::Null);
    serde_json::to_vec(&verso_rpc::message::envelope(&m)).expect("json")
}

/// [`BareLapin`]'s `Shape::Oslo` round trip with bare amqprs: the broker work of an oslo
/// call with verso's AMQP client and nothing of verso (no envelope, no dispatch).
pub struct BareAmqprs {
    _server: amqprs::connection::Connection,
    _client: amqprs::connection::Connection,
    cch: amqprs::channel::Channel,
    exchange: String,
    req_q: String,
    body: Vec<u8>,
    props: amqprs::BasicProperties,
    replies: tokio::sync::mpsc::UnboundedReceiver<amqprs::channel::ConsumerMessage>,
}

pub fn amqprs_properties(expiration: bool) -> amqprs::BasicProperties {
    let mut props = amqprs::BasicProperties::default();
    props
        .with_content_type("application/json")
        .with_content_encoding("utf-8")
        .with_delivery_mode(2)
        .with_priority(0)
        .with_headers(amqprs::FieldTable::new());
    if expiration {
        props.with_expiration("60000");
    }
    props.finish()
}

impl BareAmqprs {
    pub async fn new() -> Self {
        use amqprs::channel::{
            BasicAckArguments, BasicConsumeArguments, BasicPublishArguments,
            ExchangeDeclareArguments, QueueBindArguments, QueueDeclareArguments,
        };
        let c = verso_rpc::transport::amqp::AmqpConfig::from_url(&url()).expect("url");
        let h = &c.hosts[0];
        let mut args = amqprs::connection::OpenConnectionArguments::new(
            &h.host,
            h.port,
            &h.username,
            &h.password,
        );
        args.virtual_host(&c.vhost);
        let server = amqprs::connection::Connection::open(&args)
            .await
            .expect("RabbitMQ");
        let client = amqprs::connection::Connection::open(&args)
            .await
            .expect("RabbitMQ");
        let sch = server.open_channel(None).await.expect("channel");
        let cch = client.open_channel(None).await.expect("channel");
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (exchange, req_q, rep_q) = (
            format!("bench-amqprs-x-{id}"),
            format!("bench-amqprs-req-{id}"),
            format!("bench-amqprs-rep-{id}"),
        );
        sch.exchange_declare(
            ExchangeDeclareArguments::new(&exchange, "topic")
                .auto_delete(true)
                .finish(),
        )
        .await
        .expect("exchange");
        for (ch, q) in [(&sch, &req_q), (&cch, &rep_q)] {
            ch.queue_declare(QueueDeclareArguments::new(q).auto_delete(true).finish())
                .await
                .expect("queue");
        }
        sch.queue_bind(QueueBindArguments::new(&req_q, &exchange, &req_q))
            .await
            .expect("bind");
        let (_, mut requests) = sch
            .basic_consume_rx(BasicConsumeArguments::new(&req_q, "s"))
            .await
            .expect("consume");
        let reply_ch = server.open_channel(None).await.expect("channel");
        let rep_q2 = rep_q.clone();
        tokio::spawn(async move {
            let reply_props = amqprs_properties(false);
            while let Some(m) = requests.recv().await {
                let (Some(deliver), Some(body)) = (m.deliver, m.content) else {
                    continue;
                };
                let _ = sch
                    .basic_ack(BasicAckArguments::new(deliver.delivery_tag(), false))
                    .await;
                let _ = reply_ch
                    .basic_publish(
                        reply_props.clone(),
                        body,
                        BasicPublishArguments::new("", &rep_q2),
                    )
                    .await;
            }
        });
        let (_, replies) = cch
            .basic_consume_rx(
                BasicConsumeArguments::new(&rep_q, "c")
                    .manual_ack(false)
                    .finish(),
            )
            .await
            .expect("consume");
        let mut bare = BareAmqprs {
            _server: server,
            _client: client,
            cch,
            exchange,
            req_q,
            body: oslo_body(),
            props: amqprs_properties(true),
            replies,
        };
        bare.round_trips(WARMUP).await;
        bare
    }

    pub async fn round_trips(&mut self, n: usize) -> f64 {
        let start = Instant::now();
        for _ in 0..n {
            self.cch
                .basic_publish(
                    self.props.clone(),
                    self.body.clone(),
                    amqprs::channel::BasicPublishArguments::new(&self.exchange, &self.req_q),
                )
                .await
                .expect("publish");
            self.replies.recv().await.expect("reply");
        }
        n as f64 / start.elapsed().as_secs_f64()
    }

    /// `n` round trips with `inflight` requests outstanding: `inflight` published at
    /// once, then one more for each reply, until `n` are answered (the broker work of
    /// `inflight` concurrent oslo calls, and nothing else).
    pub async fn round_trips_inflight(&mut self, n: usize, inflight: usize) -> f64 {
        let start = Instant::now();
        let mut sent = 0;
        for _ in 0..inflight.clamp(1, n.max(1)) {
            self.publish().await;
            sent += 1;
        }
        for _ in 0..n {
            self.replies.recv().await.expect("reply");
            if sent < n {
                self.publish().await;
                sent += 1;
            }
        }
        n as f64 / start.elapsed().as_secs_f64()
    }

    async fn publish(&self) {
        self.cch
            .basic_publish(
                self.props.clone(),
                self.body.clone(),
                amqprs::channel::BasicPublishArguments::new(&self.exchange, &self.req_q),
            )
            .await
            .expect("publish");
    }
}

pub fn python_peers(n: usize) -> Option<f64> {
    python_peers_inflight(n, 1, 1)
}

/// The Python pair with `inflight` calls in flight from `inflight` client threads spread
/// over `processes` client processes (peer.py's `bench`).
pub fn python_peers_inflight(n: usize, inflight: usize, processes: usize) -> Option<f64> {
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
            "--inflight",
            &inflight.to_string(),
            "--processes",
            &processes.to_string(),
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

pub fn rounds() -> usize {
    std::env::var("VERSO_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1)
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
