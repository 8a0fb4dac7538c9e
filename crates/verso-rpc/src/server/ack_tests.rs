//! Unit tests of `server`: when a request is acknowledged, beside the private items they exercise.

use super::*;
use crate::transport::Incoming;
use crate::MethodSpec;
use async_trait::async_trait;
use serde_json::json;
use serde_json::Map;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::mpsc;
use verso::{RequestContext, Version};

/// A transport whose one listener is fed by the test, as a broker transport feeds it.
struct Feed(Mutex<Option<mpsc::Receiver<Incoming>>>);

#[async_trait]
impl Transport for Feed {
    async fn call(&self, t: &Target, _: Request, _: Duration) -> Result<Reply, RpcError> {
        Err(RpcError::MalformedMessage {
            detail: format!("no calls to {t}"),
        })
    }
    async fn cast(&self, _: &Target, _: Request) -> Result<(), RpcError> {
        Ok(())
    }
    async fn fanout(&self, _: &Target, _: Request) -> Result<(), RpcError> {
        Ok(())
    }
    async fn listen(&self, _: &Target) -> Result<Listener, RpcError> {
        let rx = self.0.lock().expect("lock").take();
        rx.map(Listener::bounded).ok_or(RpcError::MalformedMessage {
            detail: "one listener only".into(),
        })
    }
}

fn cast(acks: &Arc<AtomicUsize>) -> Incoming {
    let acks = acks.clone();
    Incoming::cast(Ok(Request {
        method: "slow".into(),
        args: Map::new(),
        version: Version::new(1, 0),
        namespace: None,
        context: RequestContext::new("req-ack"),
    }))
    .with_ack(move || {
        acks.fetch_add(1, Ordering::SeqCst);
    })
}

/// Waits (at most 10 s, on a loaded machine) until `n` acknowledgements were made.
async fn until(acks: &AtomicUsize, n: usize) {
    for _ in 0..1000 {
        if acks.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{n} acknowledgements expected, {} made",
        acks.load(Ordering::SeqCst)
    );
}

#[tokio::test]
async fn a_request_is_acknowledged_when_the_server_takes_it_not_before() {
    let (tx, rx) = mpsc::channel(4);
    let (release, released) = tokio::sync::watch::channel(false);
    let ep = Endpoint::new(Version::new(1, 0)).method(
        MethodSpec::new("slow", Version::new(1, 0)),
        move |_ctx, _args| {
            let mut released = released.clone();
            async move {
                let _ = released.wait_for(|r| *r).await;
                Ok(json!(null))
            }
        },
    );
    let server = RpcServer::new(Arc::new(Feed(Mutex::new(Some(rx)))), Target::new("c"))
        .endpoint(ep)
        .expect("valid")
        .max_concurrency(1)
        .start()
        .await
        .expect("listening");
    let acks = Arc::new(AtomicUsize::new(0));
    tx.send(cast(&acks)).await.expect("queued");
    tx.send(cast(&acks)).await.expect("queued");
    // One handler slot: the first is taken (acknowledged), the second waits unacknowledged.
    until(&acks, 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(acks.load(Ordering::SeqCst), 1);
    release.send(true).expect("handler waiting");
    until(&acks, 2).await;
    server.stop().await;
}
