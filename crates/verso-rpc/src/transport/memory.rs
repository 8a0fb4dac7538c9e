//! The embedded transport: in-process, no broker.
//!
//! One [`MemoryTransport`] (cheap to clone; clones share the same "broker") can host a
//! conductor and many agents in one process. Like RabbitMQ's topology it has, per topic, a
//! shared queue (a call or cast to the topic goes to its servers round-robin), one queue
//! per `topic.server`, and a fanout to every server of the topic.
//!
//! Requests and replies cross as typed values, not as the oslo.messaging dict a broker
//! carries: building that dict and parsing it back in the same process costs several
//! times the rest of a call. What a server receives is still exactly what the dict would
//! have given it: the context is stripped of the sender's extensions (a server never
//! sees the caller's database or indirection handles), and the context keys and
//! arguments are the ones the dict would carry (a test pins this against the dict path).

use super::{Incoming, Listener, ReplySink, Transport};
use crate::message::{Reply, Request};
use crate::{RpcError, Target};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use verso::context::Extensions;

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
    /// Delivers to the next live consumer; false (the message dropped) if there is none.
    fn deliver(&mut self, mut incoming: Incoming) -> bool {
        while !self.consumers.is_empty() {
            let i = self.next % self.consumers.len();
            match self.consumers[i].send(incoming) {
                Ok(()) => {
                    self.next = i + 1;
                    return true;
                }
                Err(mpsc::error::SendError(back)) => {
                    // That listener was dropped: forget it and try the next one.
                    self.consumers.swap_remove(i);
                    incoming = back;
                }
            }
        }
        false
    }
}

impl MemoryTransport {
    /// A new, empty in-process broker.
    pub fn new() -> Self {
        Self::default()
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
        if queue.deliver(incoming) {
            Ok(())
        } else {
            Err(unreachable())
        }
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

struct OneshotReply(oneshot::Sender<Reply>);

#[async_trait]
impl ReplySink for OneshotReply {
    async fn send(self: Box<Self>, reply: Reply) -> Result<(), RpcError> {
        self.0.send(reply).map_err(|_| {
            RpcError::transport("the caller stopped waiting for this reply (timed out?)")
        })
    }
}

#[async_trait]
impl Transport for MemoryTransport {
    async fn call(
        &self,
        target: &Target,
        request: Request,
        timeout: Duration,
    ) -> Result<Reply, RpcError> {
        let (tx, rx) = oneshot::channel();
        let incoming = Incoming::call(Ok(as_received(request)), Box::new(OneshotReply(tx)))
            .with_deadline(std::time::SystemTime::now().checked_add(timeout));
        self.deliver(target, incoming)?;
        rx.await.map_err(|_| {
            RpcError::transport(format!(
                "the server of {target} dropped the call without replying (stopped?)"
            ))
        })
    }

    async fn cast(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        self.deliver(target, Incoming::cast(Ok(as_received(request))))
    }

    async fn fanout(&self, target: &Target, request: Request) -> Result<(), RpcError> {
        let request = as_received(request);
        let mut broker = self.broker();
        if let Some(topic) = broker.topics.get_mut(&target.topic) {
            // A fanout to no server is not an error: there may be no agents yet.
            topic
                .fanout
                .retain(|tx| tx.send(Incoming::cast(Ok(request.clone()))).is_ok());
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

/// The request as a server would read it from the wire: the context without the
/// sender's extensions.
fn as_received(mut request: Request) -> Request {
    request.context.extensions = Extensions::default();
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};
    use verso::{RequestContext, Version};

    fn msg(n: i64) -> Request {
        Request {
            method: "m".into(),
            args: Map::from_iter([("n".to_owned(), Value::from(n))]),
            version: Version::new(1, 0),
            namespace: None,
            context: RequestContext::new("req-1"),
        }
    }

    async fn drain(l: &mut Listener) -> Vec<i64> {
        let mut got = Vec::new();
        while let Ok(Some(inc)) = tokio::time::timeout(Duration::from_millis(10), l.next()).await {
            let n = inc.request.ok().and_then(|r| r.args["n"].as_i64());
            got.push(n.unwrap_or(-1));
        }
        got
    }

    /// What crosses in-process is what a server would read from the oslo dict: the same
    /// request, context keys included, and none of the sender's extensions.
    #[tokio::test]
    async fn a_request_arrives_as_the_dict_would_deliver_it() {
        #[derive(Debug)]
        struct Secret;
        let t = MemoryTransport::new();
        let mut l = t.listen(&Target::new("svc")).await.expect("listen");
        let mut ctx = RequestContext::new("req-9")
            .with_user("alice")
            .with_project("p")
            .with_role("admin")
            .with_role("reader");
        ctx.global_request_id = Some("req-g".into());
        ctx.domain = Some("d".into());
        ctx.user_domain = Some("ud".into());
        ctx.project_domain = Some("pd".into());
        ctx.auth_token = Some("tok".into());
        ctx.is_admin = true;
        ctx.read_only = true;
        ctx.show_deleted = true;
        ctx.extra
            .insert("tenant_region".into(), json!({"a": [1, 2]}));
        let ctx = ctx.with_extension(Secret);
        let mut sent = msg(3);
        sent.namespace = Some("ns".into());
        sent.version = Version::new(1, 7);
        sent.context = ctx;
        t.cast(&Target::new("svc"), sent.clone())
            .await
            .expect("cast");
        let got = l
            .next()
            .await
            .expect("delivered")
            .request
            .expect("a request");
        let through_dict = Request::from_message(sent.into_message()).expect("dict");
        assert_eq!(got, through_dict);
        assert_eq!(got.context.to_dict(), through_dict.context.to_dict());
        assert!(got.context.extension::<Secret>().is_none());
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
