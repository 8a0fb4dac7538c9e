//! Test support (feature `testing`) for the crates whose tests run Cyborg 17's own code
//! as a peer: the test virtualenv's Python (`VERSO_TEST_PYTHON`, default the
//! workspace's `.venv`), the test broker (`VERSO_TEST_RABBIT_URL`), a transport on
//! Cyborg's control exchange, and `python/cyborg_peer.py`. A missing Python or broker
//! fails the test with what to start; nothing is skipped.

#![allow(clippy::expect_used)]

use crate::rpc::CONTROL_EXCHANGE;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verso_rpc::transport::amqp::{AmqpConfig, AmqpTransport};
use verso_rpc::transport::Transport;

/// The test broker's URL.
pub fn rabbit_url() -> String {
    std::env::var("VERSO_TEST_RABBIT_URL")
        .unwrap_or_else(|_| "rabbit://guest:guest@127.0.0.1:5672/".into())
}

/// The Python with openstack-cyborg 17.0.0 (`requirements-test.txt`).
pub fn python() -> PathBuf {
    let python = std::env::var_os("VERSO_TEST_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../.venv/bin/python"),
        PathBuf::from,
    );
    assert!(
        python.exists(),
        "no Python at {}: create the venv with requirements-test.txt (scripts/test.sh does) or set VERSO_TEST_PYTHON",
        python.display()
    );
    python
}

/// `python/cyborg_peer.py`: Cyborg's own report path (`send`) and serializer (`serve`).
pub fn peer_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cyborg_peer.py")
}

/// A transport to the test broker on Cyborg's control exchange (`cyborg`).
pub async fn cyborg_transport() -> Arc<dyn Transport> {
    let mut config = AmqpConfig::from_url(&rabbit_url()).expect("the test broker URL");
    config.control_exchange = CONTROL_EXCHANGE.to_owned();
    Arc::new(
        AmqpTransport::connect_with(config)
            .await
            .unwrap_or_else(|e| panic!("RabbitMQ (scripts/test.sh starts it): {e}")),
    )
}

/// A real Cyborg agent's report, once: `python/cyborg_peer.py send` (Cyborg's fake
/// driver's discovery through Cyborg's `ConductorAPI.report_data`) to `topic` as
/// `host`; the primitives it sent. Fails the test unless Cyborg's call returned `None`.
pub async fn cyborg_agent_reports(topic: &str, host: &str) -> serde_json::Value {
    let out = tokio::process::Command::new(python())
        .arg(peer_script())
        .args(["send", "--transport-url", &rabbit_url(), "--topic", topic])
        .args(["--host", host])
        .kill_on_drop(true)
        .output()
        .await
        .expect("the test Python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().any(|l| l == "reply null"),
        "Cyborg's report_data failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sent "))
        .expect("a sent line");
    serde_json::from_str(sent).expect("JSON")
}
