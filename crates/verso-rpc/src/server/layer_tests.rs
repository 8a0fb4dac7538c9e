//! Unit tests of `server` with tower layers on the server, beside the private items they exercise.

use super::*;
use crate::client::Outgoing;
use crate::transport::memory::MemoryTransport;
use crate::{MethodSpec, RpcClient};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use verso::{RequestContext, Version};

/// A user-written server layer: refuses requests without a user (authorization) and
/// records the methods it let through.
#[derive(Clone)]
struct Authorize(Arc<Mutex<Vec<String>>>);

impl<S> Layer<S> for Authorize {
    type Service = AuthorizeService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        AuthorizeService {
            inner,
            seen: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct AuthorizeService<S> {
    inner: S,
    seen: Arc<Mutex<Vec<String>>>,
}

impl<S> Service<Request> for AuthorizeService<S>
where
    S: Service<Request, Response = Value, Error = RpcError>,
    S::Future: Send + 'static,
{
    type Response = Value;
    type Error = RpcError;
    type Future = futures::future::BoxFuture<'static, Result<Value, RpcError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), RpcError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if request.context.user.is_none() {
            return Box::pin(async {
                Err(RemoteError::new("NotAuthorized", "accel.errors", "who are you?").into())
            });
        }
        self.seen.lock().expect("lock").push(request.method.clone());
        Box::pin(self.inner.call(request))
    }
}

#[tokio::test]
async fn user_layers_run_on_the_client_and_on_the_server() {
    let t = Arc::new(MemoryTransport::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ep = Endpoint::new(Version::new(1, 0)).method(
        MethodSpec::new("whoami", Version::new(1, 0)),
        |ctx: RequestContext, _args| async move { Ok(json!(ctx.user)) },
    );
    let server = RpcServer::new(t.clone(), Target::new("c"))
        .endpoint(ep)
        .expect("valid")
        .layer(Authorize(seen.clone()))
        .start()
        .await
        .expect("listening");

    // Client side: credentials stamped on each request, and a count of what left.
    let sent = Arc::new(AtomicUsize::new(0));
    let count = sent.clone();
    let plain = RpcClient::new(t.clone(), Target::new("c"));
    let client = plain.clone().layer(
        tower::ServiceBuilder::new()
            .map_request(move |mut o: Outgoing| {
                count.fetch_add(1, Ordering::SeqCst);
                o.request.context.user = Some("svc-agent".into());
                o
            })
            .map_response(|reply: Option<Reply>| reply),
    );
    let ctx = RequestContext::new("req-layers");
    assert_eq!(
        client
            .call(&ctx, "whoami", "1.0", json!({}))
            .await
            .expect("authorized"),
        json!("svc-agent")
    );
    client
        .cast(&ctx, "whoami", "1.0", json!({}))
        .await
        .expect("sent");
    assert_eq!(sent.load(Ordering::SeqCst), 2);

    // Without the client's layer the server's layer refuses, as a typed remote error.
    match plain.call(&ctx, "whoami", "1.0", json!({})).await {
        Err(RpcError::Remote(r)) => assert_eq!(r.kind, "NotAuthorized"),
        other => panic!("expected NotAuthorized, got {other:?}"),
    }
    // A cap refusal never reaches the client's layers.
    let capped = client.clone().version_cap(Version::new(1, 0));
    let refused = capped.call(&ctx, "whoami", "1.1", json!({})).await;
    assert!(
        matches!(refused, Err(RpcError::VersionCap { .. })),
        "{refused:?}"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 2);
    server.stop().await;
    assert_eq!(*seen.lock().expect("lock"), vec!["whoami", "whoami"]);
}
