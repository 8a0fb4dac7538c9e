//! Serving the API: HTTP/1.1 over TCP, with a bound on every edge. Release N's frozen
//! copy of `accel_api::server` (N+1's), so release N's limits do not change when N+1's
//! do; without TLS (release N serves plain HTTP).
//!
//! axum's own `serve` has no timeouts and accepts every connection, so a client that
//! sends half a header, stalls a body or opens thousands of idle connections holds a
//! task and a descriptor for as long as it likes. [`serve`] is the accept loop with:
//!
//! | bound | default | what happens |
//! |---|---|---|
//! | [`ServeOptions::header_read_timeout`] | 10 s | a connection must deliver a request's complete headers within this time of opening, or of its previous response; otherwise it is closed. So it also bounds idle keep-alive connections (hyper starts the timer whenever it waits for a request). |
//! | [`ServeOptions::body_read_timeout`] | 30 s | a request body that sends nothing for this long is abandoned: 408 `RequestTimeout`, connection closed |
//! | [`ServeOptions::request_timeout`] | 120 s | a request whose answer is not ready by then gets 503 (its outcome unknown); above the 60 s conductor call timeout, so that answer normally comes first |
//! | [`ServeOptions::max_connections`] | 1024 | connections beyond this wait in the listen backlog, not accepted (no descriptor, no task) until one closes |

use crate::http::error::{ApiError, ErrorKind};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tower_http::timeout::RequestBodyTimeoutLayer;

/// How [`serve`] bounds its connections; see the module docs for each default.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Time for a request's headers to arrive (from the connection's start or its
    /// previous response): half-sent headers and idle keep-alive connections are closed.
    pub header_read_timeout: Duration,
    /// Longest pause while a request body is read.
    pub body_read_timeout: Duration,
    /// Longest a request may take, body and answer included.
    pub request_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// The URL links are built on (`[api] public_endpoint`, Cyborg's option), when the
    /// API is reached through a proxy or another name; unset, `http://` and the
    /// request's `Host` header.
    pub public_endpoint: Option<crate::http::PublicEndpoint>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(120),
            max_connections: 1024,
            public_endpoint: None,
        }
    }
}

/// Serves `router` on `listener` with `options` until `shutdown` completes; then stops
/// accepting, lets every connection finish the request under way, and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let request_timeout = options.request_timeout;
    let router = match options.public_endpoint.clone() {
        Some(endpoint) => router.layer(axum::Extension(endpoint)),
        None => router,
    };
    let router = router.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| within(request_timeout, req, next),
    ));
    // Outside the router: it wraps hyper's body before axum sees it.
    let service = tower::ServiceBuilder::new()
        .layer(RequestBodyTimeoutLayer::new(options.body_read_timeout))
        .service(router);
    let max = options.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let permits = Arc::new(Semaphore::new(max));
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        // A permit first: past the limit, connections wait in the kernel's backlog.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of descriptors, say: wait instead of spinning or exiting.
                    tracing::error!(error = %e, "the API cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = service.clone();
        let stopping = stopping.clone();
        let header_timeout = options.header_read_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            connection(stream, service, header_timeout, stopping).await
        });
    }
    let _ = stop.send(true);
    // Every connection holds a permit until it ends: all of them back means all done.
    let _ = permits.acquire_many(max as u32).await;
    Ok(())
}

/// The request, or 503 when it takes longer than `limit`.
async fn within(limit: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            ErrorKind::OutcomeUnknown,
            format!(
                "the request did not finish within {} s; its outcome is unknown: read the resource before retrying",
                limit.as_secs()
            ),
        )
        .into_response(),
    }
}

/// One connection, HTTP/1.1 with keep-alive, until the client leaves, a timeout closes
/// it, or the server stops (then after the request under way).
async fn connection<I, S>(
    io: I,
    service: S,
    header_timeout: Duration,
    mut stopping: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "API connection closed");
            }
        }
        _ = async { stopping.wait_for(|stop| *stop).await.map(drop) } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Errors of one connection that has not been accepted yet (the client left first).
fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}
