//! Nova's `accelerator-request-bound` events: when every accelerator request of an
//! instance is resolved (Bound, BindFailed or Deleting), Nova is told, one event per
//! request, as Cyborg 17 does (`POST /os-server-external-events`, compute 2.82); Nova's
//! build waits for them.
//!
//! Nova binds an instance's requests one call each, and accel's conductor learns that
//! every request of the instance is resolved after each of them binds (only bound
//! requests carry the instance); so a batch waits [`NovaOptions::coalesce`] in the queue,
//! and a later batch of the same instance replaces it there: an instance whose requests
//! bind within that window gets one request to Nova with every event, as Cyborg sends.
//!
//! [`Notifier::notify`] only enqueues: a background task sends, retrying with an
//! exponential backoff (bounded attempts and total time) when Nova cannot be reached or
//! answers 5xx, so a bind is never held up by Nova. A 4xx (a 401 is renewed by the
//! session first), or a 207 whose events are all 422 (the instance has no host yet,
//! expected when the bind precedes the build), is final. The queue is bounded: when it
//! is full the oldest batch is dropped with a warning. A lost event costs little: Nova
//! also reads the requests' states, and otherwise waits out its own timeout.

use crate::keystone::{Session, SessionError};
use crate::lifecycle::ArqState;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The event's name.
pub const EVENT: &str = "accelerator-request-bound";

/// The compute microversion that has `accelerator-request-bound` (2.82).
pub const MICROVERSION: &str = "compute 2.82";

/// A request's bind outcome as Nova's event `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindStatus {
    /// Bound.
    Completed,
    /// BindFailed, or deleted while binding.
    Failed,
}

impl BindStatus {
    /// The status of a resolved request; `None` while it is not resolved.
    pub fn of(state: ArqState) -> Option<BindStatus> {
        match state {
            ArqState::Bound => Some(BindStatus::Completed),
            ArqState::BindFailed | ArqState::Deleting => Some(BindStatus::Failed),
            _ => None,
        }
    }

    /// Nova's word.
    pub fn as_str(self) -> &'static str {
        match self {
            BindStatus::Completed => "completed",
            BindStatus::Failed => "failed",
        }
    }
}

/// How the notifier reaches Nova and how hard it tries.
#[derive(Clone, Debug)]
pub struct NovaOptions {
    /// Nova's compute URL instead of the catalog's `compute` endpoint.
    pub endpoint_override: Option<String>,
    /// Attempts per batch of events, the first included (at least 1).
    pub attempts: u32,
    /// The wait before the first retry, doubled before each next one.
    pub backoff: Duration,
    /// No attempt starts later than this after the first one.
    pub deadline: Duration,
    /// Batches waiting to be sent; beyond, the oldest is dropped.
    pub queue_size: usize,
    /// Batches being sent at once.
    pub concurrency: usize,
    /// How long a batch waits in the queue before it is sent, so that the batch of the
    /// instance's next bind can replace it (one request with every event).
    pub coalesce: Duration,
}

impl Default for NovaOptions {
    fn default() -> Self {
        // 2 + 4 + 8 + 16 s of backoff: five attempts within about a minute.
        NovaOptions {
            endpoint_override: None,
            attempts: 5,
            backoff: Duration::from_secs(2),
            deadline: Duration::from_secs(60),
            queue_size: 1000,
            concurrency: 4,
            // Nova's binds of one instance's requests follow each other within
            // milliseconds; Nova waits for the events up to 300 s.
            coalesce: Duration::from_millis(200),
        }
    }
}

/// What became of the batches so far (counters since start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifierStats {
    /// Batches Nova accepted (200, or a 207 with some events accepted).
    pub delivered: u64,
    /// Batches Nova answered 207 with 422 for every event: the instance has no host yet.
    pub no_host: u64,
    /// Batches refused for good (a 4xx other than 401; 404: no such instance).
    pub rejected: u64,
    /// Batches given up after the attempts or the deadline.
    pub gave_up: u64,
    /// Batches dropped from a full queue.
    pub dropped: u64,
    /// HTTP requests made (each attempt, retries included).
    pub attempts: u64,
}

#[derive(Default)]
struct Counters {
    delivered: AtomicU64,
    no_host: AtomicU64,
    rejected: AtomicU64,
    gave_up: AtomicU64,
    dropped: AtomicU64,
    attempts: AtomicU64,
}

/// One instance's events.
#[derive(Clone, Debug)]
struct Batch {
    instance: String,
    events: Vec<(String, BindStatus)>,
    /// When the instance's first batch still queued was queued.
    queued: Instant,
}

struct Shared {
    session: Session,
    options: NovaOptions,
    queue: Mutex<VecDeque<Batch>>,
    wake: tokio::sync::Notify,
    counters: Counters,
    closed: std::sync::atomic::AtomicBool,
}

/// Closes the queue when the last [`Notifier`] clone goes: the worker then ends (the
/// batches being sent finish).
struct Guard(Arc<Shared>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::SeqCst);
        self.0.wake.notify_one();
    }
}

/// Sends `accelerator-request-bound` events to Nova in the background (cheap to clone).
#[derive(Clone)]
pub struct Notifier {
    shared: Arc<Shared>,
    _guard: Arc<Guard>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("session", &self.shared.session)
            .field("options", &self.shared.options)
            .finish()
    }
}

/// What one attempt came to.
enum Attempt {
    Done(Outcome),
    Retry(String),
}

enum Outcome {
    Delivered,
    NoHost,
    Rejected,
}

impl Notifier {
    /// A notifier over `session` (the service user's token, the catalog), and its
    /// worker task (needs a Tokio runtime).
    pub fn start(session: Session, mut options: NovaOptions) -> Notifier {
        options.attempts = options.attempts.max(1);
        options.queue_size = options.queue_size.max(1);
        options.concurrency = options.concurrency.max(1);
        options.endpoint_override = options
            .endpoint_override
            .map(|e| e.trim_end_matches('/').to_owned())
            .filter(|e| !e.is_empty());
        let shared = Arc::new(Shared {
            session,
            options,
            queue: Mutex::new(VecDeque::new()),
            wake: tokio::sync::Notify::new(),
            counters: Counters::default(),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        tokio::spawn(worker(shared.clone()));
        Notifier {
            _guard: Arc::new(Guard(shared.clone())),
            shared,
        }
    }

    /// Queues one event per request of `instance` (`(arq_uuid, status)`); returns at once.
    pub fn notify(&self, instance: &str, events: Vec<(String, BindStatus)>) {
        if events.is_empty() {
            return;
        }
        {
            let mut queue = self.shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            // The instance's batch not sent yet: the newer events (a read of every
            // request of the instance after the later bind) replace its, in its place.
            if let Some(waiting) = queue.iter_mut().find(|b| b.instance == instance) {
                waiting.events = events;
                return;
            }
            let batch = Batch {
                instance: instance.to_owned(),
                events,
                queued: Instant::now(),
            };
            if queue.len() >= self.shared.options.queue_size {
                if let Some(old) = queue.pop_front() {
                    self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(instance = %old.instance, events = old.events.len(),
                        "Nova's event queue is full: the oldest accelerator-request-bound events are dropped");
                }
            }
            queue.push_back(batch);
        }
        self.shared.wake.notify_one();
    }

    /// What became of the batches so far.
    pub fn stats(&self) -> NotifierStats {
        let c = &self.shared.counters;
        NotifierStats {
            delivered: c.delivered.load(Ordering::SeqCst),
            no_host: c.no_host.load(Ordering::SeqCst),
            rejected: c.rejected.load(Ordering::SeqCst),
            gave_up: c.gave_up.load(Ordering::SeqCst),
            dropped: c.dropped.load(Ordering::SeqCst),
            attempts: c.attempts.load(Ordering::SeqCst),
        }
    }
}

/// Takes batches off the queue and sends each in its own task, at most
/// `concurrency` at once, until the last notifier is gone.
async fn worker(shared: Arc<Shared>) {
    let permits = Arc::new(tokio::sync::Semaphore::new(shared.options.concurrency));
    loop {
        let next = {
            let mut queue = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
            // The oldest batch, once it has waited its coalescing window.
            match queue.front().map(|b| b.queued.elapsed()) {
                Some(age) if age < shared.options.coalesce => Err(shared.options.coalesce - age),
                _ => Ok(queue.pop_front()),
            }
        };
        let next = match next {
            Ok(next) => next,
            Err(wait) => {
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        let Some(batch) = next else {
            if shared.closed.load(Ordering::SeqCst) {
                return;
            }
            shared.wake.notified().await;
            continue;
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            deliver(&shared, &batch).await;
            drop(permit);
        });
    }
}

/// Sends one batch, retrying as the options say, and counts its outcome.
async fn deliver(shared: &Shared, batch: &Batch) {
    let o = &shared.options;
    let started = Instant::now();
    let mut wait = o.backoff;
    let mut attempt = 1;
    loop {
        shared.counters.attempts.fetch_add(1, Ordering::Relaxed);
        let why = match send(shared, batch).await {
            Attempt::Done(outcome) => {
                let counter = match outcome {
                    Outcome::Delivered => &shared.counters.delivered,
                    Outcome::NoHost => &shared.counters.no_host,
                    Outcome::Rejected => &shared.counters.rejected,
                };
                counter.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Attempt::Retry(why) => why,
        };
        if attempt >= o.attempts || started.elapsed() + wait > o.deadline {
            tracing::warn!(instance = %batch.instance, attempts = attempt, error = %why,
                "accelerator-request-bound events not delivered to Nova: given up (Nova reads the requests' states itself)");
            shared.counters.gave_up.fetch_add(1, Ordering::SeqCst);
            return;
        }
        tracing::info!(instance = %batch.instance, attempt, error = %why, retry_in_ms = wait.as_millis() as u64,
            "accelerator-request-bound events not delivered to Nova yet: retrying");
        tokio::time::sleep(wait).await;
        wait = wait.saturating_mul(2);
        attempt += 1;
    }
}

/// One `POST /os-server-external-events` and what it means.
async fn send(shared: &Shared, batch: &Batch) -> Attempt {
    let endpoint = match &shared.options.endpoint_override {
        Some(e) => e.clone(),
        None => match shared.session.endpoint("compute").await {
            Ok(e) => e,
            Err(e) => return session_failed(batch, e),
        },
    };
    let url = format!("{endpoint}/os-server-external-events");
    let body = json!({"events": batch.events.iter().map(|(arq, status)| json!({
        "name": EVENT,
        "server_uuid": batch.instance,
        "tag": arq,
        "status": status.as_str(),
    })).collect::<Vec<_>>()});
    let http = shared.session.http();
    let response = match shared
        .session
        .send(|token| {
            http.post(&url)
                .header("X-Auth-Token", token)
                .header("OpenStack-API-Version", MICROVERSION)
                .json(&body)
        })
        .await
    {
        Ok(r) => r,
        Err(e) => return session_failed(batch, e),
    };
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let instance = &batch.instance;
    match status {
        200 => {
            tracing::info!(%instance, events = batch.events.len(), "accelerator-request-bound events delivered to Nova");
            Attempt::Done(Outcome::Delivered)
        }
        207 => {
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let codes: Vec<u64> = answer["events"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["code"].as_u64())
                .collect();
            if !codes.is_empty() && codes.iter().all(|c| *c == 422) {
                // Nova has not given the instance a host yet: expected when the bind
                // precedes the build; Nova then finds the requests bound by reading them.
                tracing::debug!(%instance, "Nova answered 422 for every event: the instance has no host yet");
                Attempt::Done(Outcome::NoHost)
            } else if codes.contains(&200) {
                tracing::warn!(%instance, ?codes, "Nova accepted only some accelerator-request-bound events");
                Attempt::Done(Outcome::Delivered)
            } else {
                tracing::warn!(%instance, ?codes, "Nova refused the accelerator-request-bound events");
                Attempt::Done(Outcome::Rejected)
            }
        }
        404 => {
            tracing::warn!(%instance, "Nova knows no such instance: accelerator-request-bound events dropped");
            Attempt::Done(Outcome::Rejected)
        }
        s if s >= 500 => Attempt::Retry(format!("Nova answered HTTP {s}")),
        s => {
            tracing::warn!(%instance, status = s, body = %text.chars().take(300).collect::<String>(),
                "Nova refused the accelerator-request-bound events");
            Attempt::Done(Outcome::Rejected)
        }
    }
}

/// A session failure: retried when Nova or Keystone could not be reached, final
/// otherwise (a refused service user or a catalog without Nova needs the operator).
fn session_failed(batch: &Batch, e: SessionError) -> Attempt {
    match e {
        SessionError::Unreachable { .. } => Attempt::Retry(e.to_string()),
        _ => {
            tracing::error!(instance = %batch.instance, error = %e,
                "accelerator-request-bound events cannot be sent to Nova");
            Attempt::Done(Outcome::Rejected)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_states() {
        assert_eq!(BindStatus::of(ArqState::Bound), Some(BindStatus::Completed));
        assert_eq!(
            BindStatus::of(ArqState::BindFailed),
            Some(BindStatus::Failed)
        );
        assert_eq!(BindStatus::of(ArqState::Deleting), Some(BindStatus::Failed));
        for s in [
            ArqState::Initial,
            ArqState::BindStarted,
            ArqState::Unbound,
            ArqState::UnbindFailed,
        ] {
            assert_eq!(BindStatus::of(s), None, "{s:?}");
        }
    }
}
