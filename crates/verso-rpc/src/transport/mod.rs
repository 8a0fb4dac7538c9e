//! The [`Transport`] trait: how requests and replies move between clients and servers.
//!
//! A transport knows nothing about versions, endpoints or errors of the application: it
//! carries [`Request`]s to a [`Target`] and brings [`Reply`]s back. The client and server
//! are written against this trait only, so the embedded [`memory`] transport and the RabbitMQ
//! `amqp` transport (cargo feature `amqp`, on by default) are interchangeable
//! ([`transport_from_url`] picks one by URL).
//!
//! The transports build on this module and it on none of them: `from_url` (which names
//! them all) sits above them, `redact` (masking passwords in any URL) below.
//!
//! The wire form is each transport's business: a broker transport writes the oslo.messaging
//! message dict ([`Request::into_message`], [`Reply::into_message`]) inside its envelope
//! and reads it back; the in-process transport hands the typed values over as they are,
//! since a dict built only to be parsed again in the same process would be pure cost.
//!
//! A server receives everything through one [`Listener`]: calls and casts to its topic (one
//! server of the topic gets each), to `topic.server`, and fanout casts. Each received
//! message is an [`Incoming`]; a call carries a [`ReplySink`] for its one reply.

#[cfg(feature = "amqp")]
pub mod amqp;
mod from_url;
pub mod memory;
mod redact;

pub use from_url::transport_from_url;
pub use redact::redact;

use crate::message::{Reply, Request};
use crate::{RpcError, Target};
use async_trait::async_trait;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// Moves requests and replies. Implement it for a new broker; the client and server stay
/// as they are.
///
/// A request's context crosses as its serialized keys only: what a server sees is what
/// [`RequestContext::to_dict`](verso::RequestContext::to_dict) carries, never the
/// sender's [`extensions`](verso::RequestContext::extensions).
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Sends a call and awaits its reply. `timeout` is what the caller will wait (a
    /// broker transport sets the message's expiration from it and sends the deadline
    /// it gives as `_deadline`, for the server to drop a call nobody waits for); the
    /// client enforces it.
    async fn call(
        &self,
        target: &Target,
        request: Request,
        timeout: Duration,
    ) -> Result<Reply, RpcError>;

    /// Sends a cast to one server of the topic, or to `target.server`.
    async fn cast(&self, target: &Target, request: Request) -> Result<(), RpcError>;

    /// Sends a cast to every server listening on `target.topic`.
    async fn fanout(&self, target: &Target, request: Request) -> Result<(), RpcError>;

    /// Starts receiving, for a server at `target` (its topic, `topic.server` when
    /// `target.server` is set, and the topic's fanout).
    async fn listen(&self, target: &Target) -> Result<Listener, RpcError>;

    /// Ends the transport in order, once its servers have stopped: what was sent
    /// (replies included) reaches the broker before the connection goes, so a process
    /// that exits after `close` loses no answer it gave. The default does nothing (a
    /// transport that holds nothing to flush).
    async fn close(&self) {}
}

/// Where the one reply to a call goes.
#[async_trait]
pub trait ReplySink: Send + 'static {
    /// Sends the reply (on a broker: the dict with `result`, `failure`, `ending`).
    async fn send(self: Box<Self>, reply: Reply) -> Result<(), RpcError>;
}

/// How many received messages a broker transport holds for its server, unacknowledged,
/// before it takes no more (the bound of its [`Listener`] and of the broker's prefetch).
pub const LISTENER_BUFFER: usize = 64;

/// Acknowledges a message to its broker.
type Ack = Box<dyn FnOnce() + Send>;

/// One received message: a call (with its reply sink) or a cast.
pub struct Incoming {
    /// The request, or why the received message is not one (a call still gets a reply
    /// saying so).
    pub request: Result<Request, RpcError>,
    reply: Option<Box<dyn ReplySink>>,
    ack: Option<Ack>,
    deadline: Option<SystemTime>,
}

impl Incoming {
    /// A call, answered through `reply`.
    pub fn call(request: Result<Request, RpcError>, reply: Box<dyn ReplySink>) -> Self {
        Incoming {
            request,
            reply: Some(reply),
            ack: None,
            deadline: None,
        }
    }

    /// A cast: nobody waits for a reply.
    pub fn cast(request: Result<Request, RpcError>) -> Self {
        Incoming {
            request,
            reply: None,
            ack: None,
            deadline: None,
        }
    }

    /// Runs `ack` when the server takes the message ([`accept`](Self::accept)), not
    /// before: a broker transport acknowledges the delivery there, so a message its
    /// server never took (a full server that crashed or stopped) is redelivered by the
    /// broker to another consumer.
    pub fn with_ack(mut self, ack: impl FnOnce() + Send + 'static) -> Self {
        self.ack = Some(Box::new(ack));
        self
    }

    /// The time after which the caller no longer waits for the answer (a call's
    /// `_deadline`): a server that has not started the request by then drops it.
    pub fn with_deadline(mut self, deadline: Option<SystemTime>) -> Self {
        self.deadline = deadline;
        self
    }

    /// The caller's deadline, when the sender gave one.
    pub fn deadline(&self) -> Option<SystemTime> {
        self.deadline
    }

    /// The server has taken the message: acknowledges it to the broker (once).
    pub fn accept(&mut self) {
        if let Some(ack) = self.ack.take() {
            ack();
        }
    }

    /// Whether the sender waits for a reply.
    pub fn is_call(&self) -> bool {
        self.reply.is_some()
    }

    /// Splits into the request and, for a call, its reply sink.
    pub fn into_parts(self) -> (Result<Request, RpcError>, Option<Box<dyn ReplySink>>) {
        (self.request, self.reply)
    }
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Incoming")
            .field("request", &self.request)
            .field("is_call", &self.is_call())
            .finish()
    }
}

/// A server's stream of [`Incoming`] messages. A transport feeds the sending half of the
/// channel; dropping the listener stops the subscription.
#[derive(Debug)]
pub struct Listener {
    rx: Rx,
}

/// A received message not decoded yet: decoding it gives the [`Incoming`], or `None`
/// for a message the transport drops (a duplicate delivery). Sent by a transport that
/// leaves decoding to the server's own runtime (see [`Listener::decoding`]).
pub type Undecoded = Box<dyn FnOnce() -> Option<Incoming> + Send>;

enum Rx {
    Unbounded(mpsc::UnboundedReceiver<Incoming>),
    Bounded(mpsc::Receiver<Incoming>),
    Decoding(mpsc::Receiver<Undecoded>),
}

impl std::fmt::Debug for Rx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rx::Unbounded(_) => "Unbounded",
            Rx::Bounded(_) => "Bounded",
            Rx::Decoding(_) => "Decoding",
        })
    }
}

impl Listener {
    /// A listener fed by `rx`.
    pub fn new(rx: mpsc::UnboundedReceiver<Incoming>) -> Self {
        Listener {
            rx: Rx::Unbounded(rx),
        }
    }

    /// A listener fed by a bounded channel: the transport waits while it is full
    /// (backpressure up to the broker).
    pub fn bounded(rx: mpsc::Receiver<Incoming>) -> Self {
        Listener {
            rx: Rx::Bounded(rx),
        }
    }

    /// A bounded listener fed messages still to be decoded: [`next`](Self::next)
    /// decodes each on the server's runtime, so a transport whose I/O runs on a thread of
    /// its own spends none of that thread on the message bodies.
    pub fn decoding(rx: mpsc::Receiver<Undecoded>) -> Self {
        Listener {
            rx: Rx::Decoding(rx),
        }
    }

    /// The next message; `None` once the transport has closed the subscription.
    pub async fn next(&mut self) -> Option<Incoming> {
        match &mut self.rx {
            Rx::Unbounded(rx) => rx.recv().await,
            Rx::Bounded(rx) => rx.recv().await,
            Rx::Decoding(rx) => loop {
                if let Some(incoming) = rx.recv().await?() {
                    return Some(incoming);
                }
            },
        }
    }
}
