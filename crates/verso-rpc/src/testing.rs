//! Test helpers: a transport layer that records what was sent.

use crate::message::{Message, Reply, Request};
use crate::transport::{memory::MemoryTransport, Listener, Transport};
use crate::{RpcError, Target};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a [`Recording`] transport saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Call,
    Cast,
    Fanout,
}

/// Wraps the memory transport and records every request sent through it, as the oslo
/// message dict a broker would carry.
#[derive(Clone, Default)]
pub struct Recording {
    pub inner: MemoryTransport,
    pub sent: Arc<Mutex<Vec<(Sent, Target, Message)>>>,
}

impl Recording {
    pub fn count(&self) -> usize {
        self.sent.lock().expect("lock").len()
    }

    pub fn versions(&self) -> Vec<String> {
        self.sent
            .lock()
            .expect("lock")
            .iter()
            .map(|(_, _, m)| m["version"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    pub fn last(&self) -> Option<(Sent, Target, Message)> {
        self.sent.lock().expect("lock").last().cloned()
    }

    fn record(&self, kind: Sent, target: &Target, request: &Request) {
        self.sent.lock().expect("lock").push((
            kind,
            target.clone(),
            request.clone().into_message(),
        ));
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
}
