//! The connection's life: connecting to the first broker that answers (and attaching
//! the reply queue and every listener to the new session), and the supervisor that
//! reconnects when the connection drops.

use super::connect::{connect_once, Failure, CONNECT_CHECKLIST};
use super::error::{AmqpError, ConnectKind};
use super::io::{io_handle, lock, OnIo};
use super::listen::{attach, retry_attach};
use super::reply::watch_returns;
use super::session::{close_connection, open_channel, Callbacks, ConnectionEvents, Role, Session};
use super::state::{Inner, ListenerState};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, watch, OnceCell};

/// How often the supervisor checks that the connection is still up (besides amqprs's
/// failure notice and the broker's connection.close).
pub(super) const WATCHDOG: Duration = Duration::from_millis(500);

/// Connects to the first broker that answers, starting at host `start`, and attaches the
/// reply queue (if wanted) and every live listener.
pub(super) async fn connect_session(
    inner: &Arc<Inner>,
    start: usize,
) -> Result<Arc<Session>, AmqpError> {
    let hosts = &inner.config.hosts;
    // Each broker's failure; the error names a broker once.
    let mut failures: Vec<(String, Failure)> = Vec::new();
    for k in 0..hosts.len() {
        let index = (start + k) % hosts.len();
        let host = &hosts[index];
        let conn = match connect_once(&inner.config, host).await {
            Ok(c) => c,
            Err(e) => {
                failures.push((host.to_string(), e));
                continue;
            }
        };
        let dead = Arc::new(watch::channel(false).0);
        let broker = host.to_string();
        if let Err(e) = conn
            .register_callback(ConnectionEvents {
                broker: broker.clone(),
                dead: dead.clone(),
            })
            .await
        {
            failures.push((host.to_string(), Failure::plain(e.to_string())));
            let _ = conn.close().await;
            continue;
        }
        let publish = match open_channel(&conn, Callbacks::new(Role::Vital, &dead)).await {
            Ok(ch) => ch,
            Err(e) => {
                failures.push((
                    host.to_string(),
                    Failure::plain(format!("opening a channel: {e}")),
                ));
                let _ = conn.close().await;
                continue;
            }
        };
        let (returns_tx, returns_rx) = mpsc::unbounded_channel();
        let reply_callbacks = Callbacks {
            returns: Some(returns_tx),
            ..Callbacks::new(Role::Vital, &dead)
        };
        let replies = match open_channel(&conn, reply_callbacks).await {
            Ok(ch) => ch,
            Err(e) => {
                failures.push((
                    host.to_string(),
                    Failure::plain(format!("opening the reply channel: {e}")),
                ));
                let _ = conn.close().await;
                continue;
            }
        };
        // A broken socket (or the end of the connection for any other reason).
        let (watched, dead_on_failure) = (conn.clone(), dead.clone());
        let watched_broker = broker.clone();
        let mut marked = dead.subscribe();
        io_handle().spawn(async move {
            // Until the session is dead for any reason: this clone keeps the connection.
            tokio::select! {
                failed = watched.listen_network_io_failure() => if failed {
                    tracing::warn!(broker = %watched_broker, "the connection to RabbitMQ failed");
                },
                _ = marked.wait_for(|d| *d) => {}
            }
            dead_on_failure.send_replace(true);
        });
        let session = Arc::new(Session {
            id: inner.next_session.fetch_add(1, Ordering::Relaxed),
            host_index: index,
            broker,
            conn: OnIo::new(conn),
            publish: OnIo::new(publish),
            replies: OnIo::new(replies),
            declared: Mutex::new(HashSet::new()),
            reply: OnceCell::new(),
            dead,
            refused_channels: AtomicU64::new(0),
        });
        io_handle().spawn(watch_returns(
            Arc::downgrade(inner),
            Arc::downgrade(&session),
            returns_rx,
        ));
        if inner.reply_wanted.load(Ordering::Relaxed) {
            if let Err(e) = inner.ensure_reply(&session).await {
                failures.push((host.to_string(), Failure::plain(e.to_string())));
                session.mark_dead();
                close_connection(session).await;
                continue;
            }
        }
        let listeners: Vec<Arc<ListenerState>> = {
            let mut l = lock(&inner.listeners);
            l.retain(|s| !s.tx.is_closed());
            l.clone()
        };
        for state in listeners {
            if let Err(e) = attach(inner, &session, &state).await {
                tracing::error!(target = %state.target, error = %e,
                    "cannot re-subscribe a listener after reconnecting; retrying");
                io_handle().spawn(retry_attach(
                    Arc::downgrade(inner),
                    Arc::downgrade(&session),
                    state,
                ));
            }
        }
        tracing::info!(broker = %session.broker, "connected to RabbitMQ");
        return Ok(session);
    }
    let brokers = hosts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut detail = match failures.as_slice() {
        [] => "no broker in the URL".to_owned(),
        // The error's "at BROKER" names it.
        [(_, f)] if hosts.len() == 1 => f.why.clone(),
        several => several
            .iter()
            .map(|(host, f)| format!("{host}: {}", f.why))
            .collect::<Vec<_>>()
            .join("; "),
    };
    if failures.iter().any(|(_, f)| !f.diagnosed) {
        detail = format!("{detail}; {CONNECT_CHECKLIST}");
    }
    let kind = match failures.split_first() {
        Some(((_, first), rest)) if rest.iter().all(|(_, f)| f.kind == first.kind) => first.kind,
        _ => ConnectKind::Other,
    };
    Err(AmqpError::Connect {
        brokers,
        detail,
        kind,
    })
}

/// Watches the session; when it dies, fails its calls and reconnects.
pub(super) async fn supervise(weak: Weak<Inner>, mut session: Arc<Session>) {
    let Some(mut alive) = weak.upgrade().map(|i| i.alive.clone()) else {
        return;
    };
    loop {
        let mut dead = session.dead.subscribe();
        loop {
            tokio::select! {
                r = dead.wait_for(|d| *d) => { let _ = r; break; }
                r = alive.changed() => if r.is_err() { return; },
                () = tokio::time::sleep(WATCHDOG) => {
                    if !session.conn.is_open() {
                        session.mark_dead();
                    }
                }
            }
        }
        let Some(inner) = weak.upgrade() else { return };
        if *inner.closed.borrow() {
            inner.fail_pending(session.id);
            return;
        }
        inner.session.send_if_modified(|s| match s {
            Some(cur) if cur.id == session.id => {
                *s = None;
                true
            }
            _ => false,
        });
        inner.fail_pending(session.id);
        if lock(&inner.listeners).is_empty() && !inner.reply_wanted.load(Ordering::Relaxed) {
            tracing::info!(broker = %session.broker, "connection to RabbitMQ lost; reconnecting");
        } else {
            tracing::warn!(broker = %session.broker, "connection to RabbitMQ lost; reconnecting");
        }
        close_connection(session.clone()).await;
        let mut delay = inner.config.retry_interval;
        let max = inner.config.retry_interval_max.max(delay);
        let mut next_host = session.host_index + 1;
        drop(inner);
        loop {
            let Some(inner) = weak.upgrade() else { return };
            if *inner.closed.borrow() {
                return;
            }
            match connect_session(&inner, next_host).await {
                Ok(s) => {
                    inner.session.send_replace(Some(s.clone()));
                    session = s;
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?delay, "reconnecting to RabbitMQ failed");
                }
            }
            drop(inner);
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                r = alive.changed() => if r.is_err() { return; },
            }
            delay = (delay * 2).min(max);
            next_host += 1;
        }
    }
}
