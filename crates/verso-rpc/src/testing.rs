//! Test helpers: a transport layer that records what was sent.

use crate::message::Message;
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

/// Wraps the memory transport and records every message sent through it.
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

    fn record(&self, kind: Sent, target: &Target, message: &Message) {
        self.sent
            .lock()
            .expect("lock")
            .push((kind, target.clone(), message.clone()));
    }
}

#[async_trait]
impl Transport for Recording {
    async fn call(
        &self,
        target: &Target,
        message: Message,
        timeout: Duration,
    ) -> Result<Message, RpcError> {
        self.record(Sent::Call, target, &message);
        self.inner.call(target, message, timeout).await
    }

    async fn cast(&self, target: &Target, message: Message) -> Result<(), RpcError> {
        self.record(Sent::Cast, target, &message);
        self.inner.cast(target, message).await
    }

    async fn fanout(&self, target: &Target, message: Message) -> Result<(), RpcError> {
        self.record(Sent::Fanout, target, &message);
        self.inner.fanout(target, message).await
    }

    async fn listen(&self, target: &Target) -> Result<Listener, RpcError> {
        self.inner.listen(target).await
    }
}
