//! Cleanup faults on the real transport and database: RabbitMQ (`VERSO_TEST_RABBIT_URL`)
//! and PostgreSQL (`VERSO_TEST_POSTGRES_URL`), both started by scripts/test.sh; a missing
//! service fails the test with its cause, never skips it.
//!
//! - the conductor restarted during an erase: the agent's result waits in the
//!   conductor's queue (or is retried) and lands exactly once;
//! - the agent's broker connection cut during an erase (a TCP proxy between the agent
//!   and RabbitMQ drops every connection and refuses new ones for a while, as a broker
//!   restart looks from the agent): the transport reconnects, the transition is retried
//!   with the same expected revision, nothing is lost and nothing applied twice.
//!
//! accel's topics are fixed names and RabbitMQ names a topic's queue after it in the
//! vhost, so the two scenarios run one after the other in one test, each with its own
//! control exchange.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod features;

use accel_conductor::testing as support;
use accel_objects::rpc::{AgentApi, ReportNow, AGENT_TOPIC};
use features::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
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
    first.stop().await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(scripts.erased().len(), 1, "the erase finished");
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
    // The agent loses the broker while erasing, and gets it back after 4 s.
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(scripts.erased().len(), 1, "the erase finished");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_survives_a_conductor_restart_and_a_broker_connection_cut() {
    let url = rabbit_url();
    conductor_restart(&url).await;
    broker_connection_cut(&url).await;
}
