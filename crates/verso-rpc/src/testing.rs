//! Test helpers: a transport that records what was sent.
//!
//! Compiled for this crate's unit tests and, with the `testing` feature, for anyone's
//! tests (this crate's integration tests turn it on):
//!
//! ```toml
//! [dev-dependencies]
//! verso-rpc = { workspace = true, features = ["testing"] }
//! ```

use crate::message::{Message, Reply, Request};
use crate::transport::{memory::MemoryTransport, Listener, Transport};
use crate::{RpcError, Target};
use async_trait::async_trait;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What a [`Recording`] transport saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// A call (a reply awaited).
    Call,
    /// A cast to one server of the topic.
    Cast,
    /// A cast to every server of the topic.
    Fanout,
}

/// Wraps the memory transport and records every request sent through it, as the oslo
/// message dict a broker would carry.
#[derive(Clone, Default)]
pub struct Recording {
    /// The transport the requests go on to (servers listen on it).
    pub inner: MemoryTransport,
    /// Every request sent, oldest first.
    pub sent: Arc<Mutex<Vec<(Sent, Target, Message)>>>,
}

impl Recording {
    fn sent(&self) -> MutexGuard<'_, Vec<(Sent, Target, Message)>> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many requests were sent.
    pub fn count(&self) -> usize {
        self.sent().len()
    }

    /// The `version` of every request sent, oldest first (`?` where it has none).
    pub fn versions(&self) -> Vec<String> {
        self.sent()
            .iter()
            .map(|(_, _, m)| m["version"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// The last request sent.
    pub fn last(&self) -> Option<(Sent, Target, Message)> {
        self.sent().last().cloned()
    }

    fn record(&self, kind: Sent, target: &Target, request: &Request) {
        self.sent()
            .push((kind, target.clone(), request.clone().into_message()));
    }
}

#[async_trait]
impl Transport for Recording {
    async fn call(
        &self,
        target: &Target,
        request: Request,
        timeout: Duration,
    ) -> Result<Reply, RpcError> {
        self.record(Sent::Call, target, &request);
        self.inner.call(target, request, timeout).await
    }

    async fn cast(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        self.record(Sent::Cast, target, &request);
        self.inner.cast(target, request).await
    }

    async fn fanout(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        self.record(Sent::Fanout, target, &request);
        self.inner.fanout(target, request).await
    }

    async fn listen(&self, target: &Target) -> Result<Listener, RpcError> {
        self.inner.listen(target).await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}
