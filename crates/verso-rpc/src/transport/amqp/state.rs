//! The state one transport's clones share ([`Inner`]): the live session, the calls
//! waiting for replies, the listeners to re-attach, and the records they keep. The
//! modules above take it; it takes only the session and the configuration, so they
//! depend on it and never the other way.

use super::error::{closed, AmqpError};
use super::io::{io_handle, lock};
use super::session::{close_connection, Session};
use super::url::AmqpConfig;
use crate::message::ReplyBody;
use crate::transport::Undecoded;
use crate::{RpcError, Target};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// What every clone of one `AmqpTransport` shares.
pub(super) struct Inner {
    pub(super) config: AmqpConfig,
    /// This transport's reply queue, `reply_<uuid hex>`, kept across reconnects.
    pub(super) reply_q: String,
    /// Whether the reply queue is needed (a call was made): re-declared on reconnect.
    pub(super) reply_wanted: AtomicBool,
    /// The live session, `None` while reconnecting.
    pub(super) session: watch::Sender<Option<Arc<Session>>>,
    /// Calls waiting for their reply, by `_msg_id`.
    pub(super) pending: Mutex<HashMap<String, Pending>>,
    /// Listeners to re-attach after a reconnect.
    pub(super) listeners: Mutex<Vec<Arc<ListenerState>>>,
    pub(super) next_session: AtomicU64,
    /// Reply queues whose replies were abandoned (the queue never appeared): further
    /// replies to them are dropped at once, as oslo.messaging's obsolete-queue cache does.
    pub(super) obsolete_reply_qs: Mutex<Dedup>,
    /// Replies the broker gave back (no such reply queue), by `"<reply_q> <msg_id>"`:
    /// when they first came back.
    pub(super) returned_replies: Mutex<HashMap<String, std::time::Instant>>,
    /// Set by [`AmqpTransport::close`]: the supervisor does not reconnect, and the
    /// listeners' tasks end, which ends their streams.
    pub(super) closed: watch::Sender<bool>,
    /// Dropped with the transport: tells the background tasks to stop.
    pub(super) _alive: watch::Sender<()>,
    pub(super) alive: watch::Receiver<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let session = self.session.send_replace(None);
        if let Some(s) = session {
            s.mark_dead();
            io_handle().spawn(close_connection(s));
        }
    }
}

/// A call waiting for its reply.
pub(super) struct Pending {
    pub(super) session: u64,
    /// Every reply message to the call (call-monitor heartbeats, an older server's
    /// result before its `ending`, the final one), or why one cannot be read or the
    /// call is lost; the call reads them until it has its answer.
    pub(super) tx: mpsc::UnboundedSender<Result<ReplyBody, RpcError>>,
}

/// How many `_unique_id`s a listener remembers to drop redelivered duplicates.
pub(super) const DEDUP_WINDOW: usize = 1024;

/// One server's subscription, re-attached to every new session.
pub(super) struct ListenerState {
    pub(super) target: Target,
    pub(super) fanout_q: String,
    pub(super) tx: mpsc::Sender<Undecoded>,
    pub(super) dedup: Mutex<Dedup>,
    /// The session this listener is consuming on (0: none yet).
    pub(super) attached: tokio::sync::Mutex<u64>,
    /// The acknowledgements of the requests the server took, on their way to the broker:
    /// a stopping listener waits for them before it closes its channel, or the broker
    /// would give requests already run to another consumer.
    pub(super) acks: tokio_util::task::TaskTracker,
}

/// The last ids seen (`_unique_id`s, or abandoned reply queues), oldest first, at most
/// `cap` of them.
pub(super) struct Dedup {
    pub(super) cap: usize,
    pub(super) order: VecDeque<String>,
    pub(super) seen: HashSet<String>,
}

impl Default for Dedup {
    fn default() -> Self {
        Dedup::with_capacity(DEDUP_WINDOW)
    }
}

impl Dedup {
    pub(super) fn with_capacity(cap: usize) -> Self {
        Dedup {
            cap,
            order: VecDeque::new(),
            seen: HashSet::new(),
        }
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.seen.contains(id)
    }

    /// Records `id`; false if it was already seen.
    pub(super) fn insert(&mut self, id: &str) -> bool {
        if self.seen.contains(id) {
            return false;
        }
        if self.order.len() == self.cap {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.order.push_back(id.to_owned());
        self.seen.insert(id.to_owned());
        true
    }
}

impl Inner {
    /// The live session, waiting up to `wait` while reconnecting.
    pub(super) async fn session_within(&self, wait: Duration) -> Result<Arc<Session>, RpcError> {
        if *self.closed.borrow() {
            return Err(closed(""));
        }
        let mut rx = self.session.subscribe();
        let found = tokio::time::timeout(wait, async {
            rx.wait_for(|s| s.as_ref().is_some_and(|s| !s.is_dead()))
                .await
                .ok()
                .and_then(|s| s.clone())
        })
        .await;
        match found {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(closed("")),
            Err(_) => Err(AmqpError::NotConnected {
                brokers: self.config.to_string(),
                wait,
            }
            .into()),
        }
    }

    /// Fails every call waiting on session `id`: its reply can no longer arrive.
    pub(super) fn fail_pending(&self, id: u64) {
        let mut pending = lock(&self.pending);
        let lost_ids: Vec<String> = pending
            .iter()
            .filter(|(_, p)| p.session <= id)
            .map(|(k, _)| k.clone())
            .collect();
        for msg_id in lost_ids {
            if let Some(p) = pending.remove(&msg_id) {
                let _ = p.tx.send(Err(RpcError::ConnectionLost {
                    detail: format!(
                        "the connection to RabbitMQ at {} was lost while waiting for the \
                         reply; the server may or may not have run it, so it was not retried \
                         (retry it yourself if the method is idempotent)",
                        self.config
                    ),
                    msg_id,
                }));
            }
        }
    }
}
