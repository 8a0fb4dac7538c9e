//! Cleanup faults on the real transport and database: RabbitMQ (`VERSO_TEST_RABBIT_URL`)
//! and PostgreSQL (`VERSO_TEST_POSTGRES_URL`), both started by scripts/test.sh; a missing
//! service fails the test with its cause, never skips it.
//!
//! - the conductor restarted during an erase: the agent's result waits in the
//!   conductor's queue (or is retried) and lands exactly once;
//! - the agent's broker connection cut during an erase (a TCP proxy between the agent
//!   and RabbitMQ drops every connection and refuses new ones for a while, as a broker
//!   restart looks from the agent): the transport reconnects, the transition is retried
//!   with the same expected revision, nothing is lost and nothing applied twice;
//! - a transition delivered twice, as a broker restart (or a consumer cut after the
//!   delivery, before the acknowledgement) redelivers it: the agent's `object_action`
//!   call for `cleanup_succeeded` (captured from verso's client with the recording
//!   transport) is published twice with the same `_unique_id` as raw oslo.messaging
//!   envelopes by a second AMQP client, to the conductor's topic with a reply queue of
//!   its own. The handle becomes available, its revision moves by exactly one, and
//!   exactly one reply arrives: the transport dropped the duplicate before the
//!   conductor saw it (run, it would have been answered too). Then the agent's own
//!   retry after a lost reply (the same call, a new `_unique_id`) is run, answered with
//!   the same success by the conductor's exactly-once check, and leaves the row as it
//!   was.
//!
//! accel's topics are fixed names and RabbitMQ names a topic's queue after it in the
//! vhost, so the scenarios run one after the other in one test, each with its own
//! control exchange.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod features;

use accel_conductor::testing as support;
use accel_objects::rpc::{AgentApi, ReportNow, AGENT_TOPIC, CONDUCTOR_TOPIC};
use accel_objects::AttachHandleList;
use amqprs::channel::{
    BasicConsumeArguments, BasicPublishArguments, Channel, ConsumerMessage, QueueDeclareArguments,
};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::{BasicProperties, FieldTable};
use features::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use verso::ObjectList;
use verso_rpc::message::{envelope, open_envelope, Message};
use verso_rpc::testing::{Recording, Sent};
use verso_rpc::transport::amqp::AmqpConfig;
use verso_rpc::transport::{transport_from_url, Transport};

fn rabbit_url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

/// `rabbit://USER:PASS@HOST:PORT/VHOST` -> (`USER:PASS`, `HOST:PORT`, `VHOST`).
fn split_url(url: &str) -> (String, String, String) {
    let rest = url.split_once("://").expect("scheme").1;
    let (auth, rest) = rest.rsplit_once('@').expect("credentials");
    let (host, vhost) = rest.split_once('/').unwrap_or((rest, ""));
    (auth.to_owned(), host.to_owned(), vhost.to_owned())
}

/// A TCP proxy to the broker that can be cut: every connection dropped, new ones
/// refused, until restored.
struct Proxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    live: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cut = Arc::new(AtomicBool::new(false));
        let live: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::new(Mutex::new(Vec::new()));
        let (c, l) = (cut.clone(), live.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: refused while cut
                }
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                l.lock().unwrap().push(task);
            }
        });
        Proxy {
            addr,
            cut,
            live,
            accept,
        }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for t in self.live.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

/// A second AMQP client on the test broker that writes and reads oslo.messaging
/// envelopes itself, as another oslo.messaging peer's connection does: what reaches the
/// conductor is bytes on its queue, not a verso call.
struct RawAmqp {
    conn: Connection,
    ch: Channel,
}

impl RawAmqp {
    async fn connect(url: &str) -> RawAmqp {
        let config = AmqpConfig::from_url(url).expect("broker url");
        let h = &config.hosts[0];
        let mut args = OpenConnectionArguments::new(&h.host, h.port, &h.username, &h.password);
        args.virtual_host(&config.vhost);
        let conn = Connection::open(&args).await.expect("raw AMQP connection");
        let ch = conn.open_channel(None).await.expect("raw AMQP channel");
        RawAmqp { conn, ch }
    }

    /// Declares and consumes a caller's reply queue (`reply_<hex>`, as oslo names it).
    async fn reply_queue(&self) -> (String, UnboundedReceiver<ConsumerMessage>) {
        let q = format!("reply_{}", uuid::Uuid::new_v4().simple());
        self.ch
            .queue_declare(QueueDeclareArguments::transient_autodelete(&q))
            .await
            .expect("declare the reply queue");
        let mut consume = BasicConsumeArguments::new(&q, "raw-replies");
        consume.auto_ack(true);
        let (_, rx) = self
            .ch
            .basic_consume_rx(consume.finish())
            .await
            .expect("consume the reply queue");
        (q, rx)
    }

    /// Publishes `message` in its `oslo.version` 2.0 envelope with the properties
    /// oslo.messaging (and verso) give a request.
    async fn publish(&self, exchange: &str, routing_key: &str, message: &Message) {
        let mut props = BasicProperties::default();
        props
            .with_content_type("application/json")
            .with_content_encoding("utf-8")
            .with_delivery_mode(2)
            .with_priority(0)
            .with_headers(FieldTable::new());
        let body = serde_json::to_vec(&envelope(message)).expect("body");
        self.ch
            .basic_publish(
                props.finish(),
                body,
                BasicPublishArguments::new(exchange, routing_key),
            )
            .await
            .expect("raw publish");
    }

    async fn close(self) {
        let _ = self.ch.close().await;
        let _ = self.conn.close().await;
    }
}

/// The next reply on a raw reply queue within `wait`, opened from its envelope.
async fn next_reply(
    rx: &mut UnboundedReceiver<ConsumerMessage>,
    wait: Duration,
) -> Option<Message> {
    let delivery = tokio::time::timeout(wait, rx.recv()).await.ok()??;
    let body: Value =
        serde_json::from_slice(&delivery.content.expect("a reply body")).expect("json reply");
    Some(open_envelope(body).expect("an oslo envelope"))
}

/// `call` as oslo.messaging's AMQP driver sends it: a reply address, no call monitor,
/// and the `_unique_id` a redelivery repeats and a new send does not.
fn oslo_call(call: &Message, msg_id: &str, reply_q: &str, unique_id: &str) -> Message {
    let mut m = call.clone();
    m.insert("_msg_id".into(), msg_id.into());
    m.insert("_reply_q".into(), reply_q.into());
    m.insert("_timeout".into(), Value::Null);
    m.insert("_unique_id".into(), unique_id.into());
    m
}

async fn rabbit(url: &str, exchange: &str) -> Arc<dyn Transport> {
    transport_from_url(url, Some(exchange))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}\nthese tests need RabbitMQ: run scripts/test.sh or set VERSO_TEST_RABBIT_URL"
            )
        })
}

fn exchange() -> String {
    format!("accel-faults-{}", uuid::Uuid::new_v4().simple())
}

async fn conductor_restart(url: &str) {
    let db = support::postgres().await;
    let exchange = exchange();
    let conductor_side = rabbit(url, &exchange).await;
    let agent_side = rabbit(url, &exchange).await;
    let first = conductor(&db, &conductor_side, "1.1").await;
    let scripts = Scripts::new();
    let agent = agent(&agent_side, agent_config(&scripts, "slow-ok.sh"))
        .await
        .expect("agent starts");
    let c = client(&agent_side);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    let claimed = wait_for(&db, &handle, Duration::from_secs(30), "started", started).await;
    scripts.wait_for_started(1, Duration::from_secs(30)).await;
    first.stop().await;
    scripts.wait_for_erased(1, Duration::from_secs(30)).await;
    assert_eq!(scripts.erased().len(), 1, "the erase finished, once");
    assert_eq!(
        db.host_handle(&handle).await.expect("handle"),
        claimed,
        "nothing recorded while the conductor is down"
    );
    let second = conductor(&db, &conductor_side, "1.1").await;
    let done = wait_for(&db, &handle, Duration::from_secs(60), "recorded", available).await;
    assert_eq!(done.revision, claimed.revision + 1, "recorded exactly once");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(db.host_handle(&handle).await.expect("handle"), done);
    agent.stop().await;
    second.stop().await;
}

async fn broker_connection_cut(url: &str) {
    let db = support::postgres().await;
    let exchange = exchange();
    let (auth, upstream, vhost) = split_url(url);
    let proxy = Proxy::start(upstream).await;
    let proxied = format!(
        "rabbit://{auth}@{}/{vhost}?rabbit_retry_interval=1&rabbit_interval_max=1",
        proxy.addr
    );
    let conductor_side = rabbit(url, &exchange).await;
    let agent_side = rabbit(&proxied, &exchange).await;
    let conductor = conductor(&db, &conductor_side, "1.1").await;
    let scripts = Scripts::new();
    let agent = agent(&agent_side, agent_config(&scripts, "slow-ok.sh"))
        .await
        .expect("agent starts");
    // The operator's calls go straight to the broker.
    let c = client(&conductor_side);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    let claimed = wait_for(&db, &handle, Duration::from_secs(30), "started", started).await;
    // The agent loses the broker while erasing, and gets it back once the erase is done.
    scripts.wait_for_started(1, Duration::from_secs(30)).await;
    proxy.cut();
    scripts.wait_for_erased(1, Duration::from_secs(30)).await;
    assert_eq!(scripts.erased().len(), 1, "the erase finished, once");
    assert_eq!(
        db.host_handle(&handle).await.expect("handle"),
        claimed,
        "nothing recorded without a broker"
    );
    proxy.restore();
    let done = wait_for(&db, &handle, Duration::from_secs(90), "recorded", available).await;
    assert_eq!(done.revision, claimed.revision + 1, "recorded exactly once");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(db.host_handle(&handle).await.expect("handle"), done);
    // The agent serves its API again over its new connection.
    let to_agent = verso_rpc::RpcClient::for_api::<AgentApi>(conductor_side.clone(), AGENT_TOPIC);
    let n = to_agent
        .prepare()
        .server(HOST)
        .call_method(&verso::RequestContext::new("req-report-now"), ReportNow {})
        .await
        .expect("report_now after reconnecting");
    assert_eq!(n, agent.devices_reported());
    agent.stop().await;
    conductor.stop().await;
}

/// How long a second reply is waited for before concluding there is none.
const GRACE: Duration = Duration::from_secs(3);

async fn redelivered_and_retried_transition(url: &str) {
    let db = support::postgres().await;
    let exchange = exchange();
    let conductor_side = rabbit(url, &exchange).await;
    let agent_side = rabbit(url, &exchange).await;
    let conductor = conductor(&db, &conductor_side, "1.1").await;
    let scripts = Scripts::new();
    let mut hang = agent_config(&scripts, "hang.sh");
    hang.nvme.cleanup_timeout = Duration::from_secs(600);
    let agent = agent(&agent_side, hang).await.expect("agent starts");
    let c = client(&agent_side);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    let claimed = wait_for(&db, &handle, Duration::from_secs(30), "started", started).await;
    // The agent claimed the handle and is erasing; it goes away (stop kills the erase),
    // so only the messages published below, standing for the result it sends, act on
    // the handle.
    agent.stop().await;

    // That message: the agent's handle after its claim (read through its remotable
    // lookup), `cleanup_succeeded` on it captured from verso's own indirection client.
    let lookup = indirect_ctx(&agent_side);
    let mut h = AttachHandleList::get_cleaning(&lookup, HOST.into())
        .await
        .expect("get_cleaning")
        .iter()
        .find(|h| h.uuid.get().map(ToString::to_string).as_deref() == Some(handle.as_str()))
        .expect("the claimed handle is cleaning")
        .clone();
    assert_eq!(h.current_revision().expect("revision"), claimed.revision);
    let recording = Recording::default();
    let recorder: Arc<dyn Transport> = Arc::new(recording.clone());
    h.meta.context = Some(Box::new(indirect_ctx(&recorder)));
    h.cleanup_succeeded()
        .await
        .expect_err("nothing listens on the recording transport");
    let (sent, target, call) = recording.last().expect("the agent's call");
    assert_eq!((sent, target.topic.as_str()), (Sent::Call, CONDUCTOR_TOPIC));
    assert_eq!(call["method"], "object_action");
    assert_eq!(call["args"]["objmethod"], "cleanup_succeeded");
    assert_eq!(db.host_handle(&handle).await.expect("handle"), claimed);

    // 1. Delivered twice with one `_unique_id` (a broker restart or a consumer cut
    //    after delivery redelivers what was not acknowledged): run once, answered once.
    let raw = RawAmqp::connect(url).await;
    let (reply_q, mut replies) = raw.reply_queue().await;
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let first = oslo_call(&call, "msg-first", &reply_q, &unique);
    raw.publish(&exchange, CONDUCTOR_TOPIC, &first).await;
    raw.publish(&exchange, CONDUCTOR_TOPIC, &first).await;
    let answered = next_reply(&mut replies, Duration::from_secs(30))
        .await
        .expect("the call is answered");
    assert_eq!(answered["_msg_id"], "msg-first");
    assert_eq!(answered["failure"], Value::Null, "{answered:?}");
    let done = wait_for(&db, &handle, Duration::from_secs(5), "recorded", available).await;
    assert_eq!(done.revision, claimed.revision + 1, "recorded exactly once");
    // `[updates, result]`: the agent's object becomes the stored handle.
    let updates = &answered["result"][0];
    assert_eq!(
        (&updates["cleanup_state"], &updates["revision"]),
        (&Value::Null, &Value::from(done.revision)),
        "{answered:?}"
    );
    // Running the duplicate would answer it too (the exactly-once check recognizes the
    // landed write and answers success): no second reply means the transport dropped
    // it before the conductor saw it.
    let second = next_reply(&mut replies, GRACE).await;
    assert!(second.is_none(), "the duplicate delivery ran: {second:?}");
    assert_eq!(db.host_handle(&handle).await.expect("handle"), done);

    // 2. The agent's own retry after a lost reply: a new send, a new `_unique_id` (and
    //    `_msg_id`), the same call. It runs, the conductor recognizes its own landed
    //    write and answers the same success; the row does not move.
    let retry = oslo_call(
        &call,
        "msg-retry",
        &reply_q,
        &uuid::Uuid::new_v4().simple().to_string(),
    );
    raw.publish(&exchange, CONDUCTOR_TOPIC, &retry).await;
    let again = next_reply(&mut replies, Duration::from_secs(30))
        .await
        .expect("the retry is answered");
    assert_eq!(again["_msg_id"], "msg-retry");
    assert_eq!(again["failure"], Value::Null, "{again:?}");
    assert_eq!(again["result"], answered["result"], "the same answer");
    let extra = next_reply(&mut replies, GRACE).await;
    assert!(extra.is_none(), "one retry, one answer: {extra:?}");
    assert_eq!(
        db.host_handle(&handle).await.expect("handle"),
        done,
        "the retry changed nothing"
    );
    raw.close().await;
    conductor.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_survives_a_conductor_restart_a_broker_connection_cut_and_redelivery() {
    let url = rabbit_url();
    conductor_restart(&url).await;
    broker_connection_cut(&url).await;
    redelivered_and_retried_transition(&url).await;
}
