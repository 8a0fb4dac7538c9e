//! The embedded transport: in-process, no broker.
//!
//! One [`MemoryTransport`] (cheap to clone; clones share the same "broker") can host a
//! conductor and many agents in one process. Like RabbitMQ's topology it has, per topic, a
//! shared queue (a call or cast to the topic goes to its servers round-robin), one queue
//! per `topic.server`, and a fanout to every server of the topic. Messages are the same
//! dicts a broker transport carries, without the envelope.

use super::{Incoming, Listener, ReplySink, Transport};
use crate::message::Message;
use crate::{RpcError, Target};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The in-process transport.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::json;
/// use verso::{RequestContext, Version};
/// use verso_rpc::{transport::memory::MemoryTransport, Endpoint, MethodSpec, ArgSpec, ArgType,
///     RpcClient, RpcServer, Target};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), verso_rpc::RpcError> {
/// let transport = Arc::new(MemoryTransport::new());
/// let endpoint = Endpoint::new(Version::new(1, 0)).method(
///     MethodSpec::new("echo", Version::new(1, 0)).arg(ArgSpec::required("v", ArgType::Any)),
///     |_ctx, args: verso_rpc::Args| async move { Ok(args.value("v").cloned().unwrap_or_default()) },
/// );
/// let server = RpcServer::new(transport.clone(), Target::new("svc").with_server("a"))
///     .endpoint(endpoint)?
///     .start()
///     .await?;
/// let client = RpcClient::new(transport, Target::new("svc"));
/// let got = client.call(&RequestContext::new("req-1"), "echo", "1.0", json!({"v": 5})).await?;
/// assert_eq!(got, json!(5));
/// server.stop().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct MemoryTransport {
    inner: Arc<Mutex<Broker>>,
}

type Sender = mpsc::UnboundedSender<Incoming>;

#[derive(Default)]
struct Broker {
    topics: HashMap<String, Topic>,
}

#[derive(Default)]
struct Topic {
    shared: Queue,
    servers: HashMap<String, Queue>,
    fanout: Vec<Sender>,
}

/// Consumers of one queue, served round-robin.
#[derive(Default)]
struct Queue {
    consumers: Vec<Sender>,
    next: usize,
}

impl Queue {
    /// Delivers to the next live consumer; gives the message back if there is none.
    fn deliver(&mut self, mut incoming: Incoming) -> Result<(), Incoming> {
        while !self.consumers.is_empty() {
            let i = self.next % self.consumers.len();
            match self.consumers[i].send(incoming) {
                Ok(()) => {
                    self.next = i + 1;
                    return Ok(());
                }
                Err(mpsc::error::SendError(back)) => {
                    // That listener was dropped: forget it and try the next one.
                    self.consumers.swap_remove(i);
                    incoming = back;
                }
            }
        }
        Err(incoming)
    }
}

impl MemoryTransport {
    /// A new, empty in-process broker.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many listeners are subscribed to `topic`'s shared queue (dropped ones included
    /// until the next delivery notices them).
    pub fn listeners(&self, topic: &str) -> usize {
        self.broker()
            .topics
            .get(topic)
            .map_or(0, |t| t.shared.consumers.len())
    }

    fn broker(&self) -> std::sync::MutexGuard<'_, Broker> {
        // Nothing panics while holding the lock; recover the data if something ever did.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deliver(&self, target: &Target, incoming: Incoming) -> Result<(), RpcError> {
        let unreachable = || RpcError::Unreachable {
            topic: target.topic.clone(),
            server: target.server.clone(),
        };
        let mut broker = self.broker();
        let topic = broker
            .topics
            .get_mut(&target.topic)
            .ok_or_else(unreachable)?;
        let queue = match &target.server {
            Some(s) => topic.servers.get_mut(s).ok_or_else(unreachable)?,
            None => &mut topic.shared,
        };
        queue.deliver(incoming).map_err(|_| unreachable())
    }
}

impl std::fmt::Debug for MemoryTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let broker = self.broker();
        let mut topics: Vec<_> = broker.topics.keys().collect();
        topics.sort();
        f.debug_struct("MemoryTransport")
            .field("topics", &topics)
            .finish()
    }
}

struct OneshotReply(oneshot::Sender<Message>);

#[async_trait]
impl ReplySink for OneshotReply {
    async fn send(self: Box<Self>, reply: Message) -> Result<(), RpcError> {
        self.0.send(reply).map_err(|_| RpcError::Transport {
            detail: "the caller stopped waiting for this reply (timed out?)".into(),
        })
    }
}

#[async_trait]
impl Transport for MemoryTransport {
    async fn call(
        &self,
        target: &Target,
        message: Message,
        _timeout: Duration,
    ) -> Result<Message, RpcError> {
        let (tx, rx) = oneshot::channel();
        self.deliver(target, Incoming::call(message, Box::new(OneshotReply(tx))))?;
        rx.await.map_err(|_| RpcError::Transport {
            detail: format!("the server of {target} dropped the call without replying (stopped?)"),
        })
    }

    async fn cast(&self, target: &Target, message: Message) -> Result<(), RpcError> {
        self.deliver(target, Incoming::cast(message))
    }

    async fn fanout(&self, target: &Target, message: Message) -> Result<(), RpcError> {
        let mut broker = self.broker();
        if let Some(topic) = broker.topics.get_mut(&target.topic) {
            // A fanout to no server is not an error: there may be no agents yet.
            topic
                .fanout
                .retain(|tx| tx.send(Incoming::cast(message.clone())).is_ok());
        }
        Ok(())
    }

    async fn listen(&self, target: &Target) -> Result<Listener, RpcError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut broker = self.broker();
        let topic = broker.topics.entry(target.topic.clone()).or_default();
        topic.shared.consumers.push(tx.clone());
        if let Some(server) = &target.server {
            topic
                .servers
                .entry(server.clone())
                .or_default()
                .consumers
                .push(tx.clone());
        }
        topic.fanout.push(tx);
        Ok(Listener::new(rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn msg(n: i64) -> Message {
        Message::from_iter([("n".to_owned(), Value::from(n))])
    }

    async fn drain(l: &mut Listener) -> Vec<i64> {
        let mut got = Vec::new();
        while let Ok(Some(inc)) = tokio::time::timeout(Duration::from_millis(10), l.next()).await {
            got.push(inc.message["n"].as_i64().unwrap_or(-1));
        }
        got
    }

    #[tokio::test]
    async fn casts_to_a_topic_go_round_robin() {
        let t = MemoryTransport::new();
        let mut a = t
            .listen(&Target::new("svc").with_server("a"))
            .await
            .expect("listen");
        let mut b = t
            .listen(&Target::new("svc").with_server("b"))
            .await
            .expect("listen");
        for n in 0..4 {
            t.cast(&Target::new("svc"), msg(n)).await.expect("cast");
        }
        assert_eq!(drain(&mut a).await, vec![0, 2]);
        assert_eq!(drain(&mut b).await, vec![1, 3]);
    }

    #[tokio::test]
    async fn server_targets_and_fanout() {
        let t = MemoryTransport::new();
        let mut a = t
            .listen(&Target::new("svc").with_server("a"))
            .await
            .expect("listen");
        let mut b = t
            .listen(&Target::new("svc").with_server("b"))
            .await
            .expect("listen");
        t.cast(&Target::new("svc").with_server("b"), msg(7))
            .await
            .expect("cast");
        t.fanout(&Target::new("svc"), msg(9)).await.expect("fanout");
        assert_eq!(drain(&mut a).await, vec![9]);
        assert_eq!(drain(&mut b).await, vec![7, 9]);
    }

    #[tokio::test]
    async fn nobody_listening_is_unreachable_and_dropped_listeners_are_skipped() {
        let t = MemoryTransport::new();
        assert!(matches!(
            t.cast(&Target::new("svc"), msg(1)).await,
            Err(RpcError::Unreachable { .. })
        ));
        let a = t
            .listen(&Target::new("svc").with_server("a"))
            .await
            .expect("listen");
        let mut b = t
            .listen(&Target::new("svc").with_server("b"))
            .await
            .expect("listen");
        drop(a);
        for n in 0..3 {
            t.cast(&Target::new("svc"), msg(n)).await.expect("cast");
        }
        assert_eq!(drain(&mut b).await, vec![0, 1, 2]);
        assert!(matches!(
            t.cast(&Target::new("svc").with_server("a"), msg(1)).await,
            Err(RpcError::Unreachable { server: Some(s), .. }) if s == "a"
        ));
        // A fanout to a topic nobody serves is fine.
        t.fanout(&Target::new("other"), msg(1))
            .await
            .expect("fanout");
    }
}
