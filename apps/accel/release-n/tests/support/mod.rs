//! What the release N tests share: transports (memory, or RabbitMQ on
//! `VERSO_TEST_RABBIT_URL` with an exchange of its own per test), sysfs fixture trees,
//! and release N's conductor client.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use accel_release_n::agent::{self, AgentConfig, RunningAgent};
use accel_release_n::rpc::{ConductorApi, CONDUCTOR_TOPIC};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::{transport_from_url, Transport};
use verso_rpc::RpcClient;

/// The test broker's URL.
pub fn rabbit_url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

/// A connection to the test broker on `exchange`; a missing broker fails the test.
pub async fn rabbit(exchange: &str) -> Arc<dyn Transport> {
    transport_from_url(&rabbit_url(), Some(exchange))
        .await
        .unwrap_or_else(|e| {
            panic!("{e}\nthese tests need RabbitMQ: run scripts/test.sh (or crates/verso-rpc/interop/start-rabbitmq.sh) or set VERSO_TEST_RABBIT_URL")
        })
}

/// A fresh control exchange name, so tests on one broker do not see each other.
pub fn exchange() -> String {
    format!("accel-release-n-{}", uuid::Uuid::new_v4().simple())
}

/// One transport shared by every component of a test.
pub fn memory() -> Arc<dyn Transport> {
    Arc::new(MemoryTransport::new())
}

/// Writes sample host `index`'s sysfs tree under `dir` (once); returns its root.
pub fn sysfs(dir: &Path, index: u32) -> PathBuf {
    let root = dir.join(format!("sysfs-host{index}"));
    if root.exists() {
        return root;
    }
    accel_agent::fixture::write_tree(&root, &accel_agent::fixture::sample_host(index))
        .expect("fixture tree");
    root
}

/// Sample host 1: a GPU with one VF, two NVMe SSDs, a QAT card with two VFs, a NIC.
pub const HOST1_DEVICES: u64 = 5;
/// Its attach handles.
pub const HOST1_HANDLES: usize = 6;

/// Starts release N's agent for sample host `index` (reporting every minute: tests
/// report with `report_now`).
pub async fn n_agent(dir: &Path, index: u32, transport: Arc<dyn Transport>) -> RunningAgent {
    agent::start(
        AgentConfig {
            host: format!("host{index}"),
            sysfs_root: sysfs(dir, index),
            state_dir: dir.join("state"),
            report_interval: Duration::from_secs(60),
        },
        transport,
    )
    .await
    .expect("release N agent starts")
}

/// Release N's conductor client (what release N's API and agents send, at 1.0).
pub fn n_client(transport: Arc<dyn Transport>) -> RpcClient {
    RpcClient::for_api::<ConductorApi>(transport, CONDUCTOR_TOPIC)
        .version_cap(accel_release_n::rpc::CONDUCTOR_VERSION)
        .timeout(Duration::from_secs(20))
}

/// A SQLite URL in `dir`.
pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("accel.db").display())
}
