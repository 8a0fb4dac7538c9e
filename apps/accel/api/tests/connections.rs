//! The API's connection limit, alone in its test binary: it counts this process's open
//! descriptors, which other tests running beside it would change.

mod support;

use accel_api::{Limits, ServeOptions};
use std::time::{Duration, Instant};
use support::Api;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Connections past the limit wait in the listen backlog: 200 clients holding
/// connections open add their own 200 descriptors to this process and at most `LIMIT`
/// on the server's side; and once the held connections time out, a waiting request is
/// served.
#[tokio::test]
async fn connections_past_the_limit_wait_without_descriptors() {
    const LIMIT: usize = 8;
    const CLIENTS: usize = 200;
    let (db, _dir) = support::sqlite().await;
    let api = Api::start_with(
        db,
        Limits::default(),
        ServeOptions {
            max_connections: LIMIT,
            header_read_timeout: Duration::from_secs(2),
            ..ServeOptions::default()
        },
    )
    .await;
    // Warm the client's pool and the runtime before the baseline.
    assert_eq!(api.get("/v2").await.0, 200);
    let baseline = open_descriptors();

    let mut held = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let mut stream = TcpStream::connect(api.addr).await.expect("connect");
        // Half a request: a server that accepted it keeps it until the header timeout.
        stream
            .write_all(b"GET /v2 HTTP/1.1\r\nHost: localhost\r\n")
            .await
            .expect("write");
        held.push(stream);
    }
    // Watch for a second: the server side never exceeds the limit (an unlimited server
    // accepts all of them within milliseconds).
    let bound = baseline + CLIENTS + LIMIT + 8;
    let mut most = 0;
    let watch_until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < watch_until {
        most = most.max(open_descriptors());
        assert!(
            most <= bound,
            "{most} descriptors open: {baseline} before, {CLIENTS} clients, limit {LIMIT}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most >= baseline + CLIENTS,
        "the clients' own descriptors are counted"
    );

    // Keep LIMIT of them: a request waiting behind those is answered once they time out
    // (the rest, closed by their clients, are accepted and finished at once).
    held.truncate(LIMIT);
    let started = Instant::now();
    let (status, _) = api.get("/v2").await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
