//! The fleet record: every member of a deployment as the servers last heard of it
//! (component, id, host, software and apparent version, when, through which server), in
//! a store all servers share, so that finalization is decided on the whole fleet and
//! status shows it from any server.
//!
//! A [`FleetStore`] is database-free, like [`TransactionalStore`]: a service keeps it
//! where its version record is (accel's conductor: a table beside `component_versions`).
//! Two operations carry the invariant *no server finalizes while a live member anywhere
//! runs older software*:
//!
//! - [`FleetStore::members_in`] reads the members inside the version record's
//!   transaction, after [`TransactionalStore::load_in`] locked the record, so the
//!   finalize decision and the marker it writes are one step under one lock;
//! - [`FleetStore::record`] with an [`Admit`] check records a member running older
//!   software atomically against that step: the check sees the version record as it is
//!   after any finalization that could have missed the member, and refuses (the server
//!   fences the member) once a finalization started. A finalization either counted the
//!   member or the member is fenced; it is never missed.
//!
//! Members on the newest software can never block finalization: they are recorded
//! without the check (one upsert).
//!
//! [`MemoryFleet`] keeps the record in memory: alone, for a service with a single
//! server (its [`Coordinator`](crate::Coordinator) serializes the two operations in
//! process), or paired with a [`MemoryStore`] that holds the version record under the
//! same lock, which behaves as a shared database would (tests of several servers).

use crate::store::{PersistedState, StoreError, TransactionalStore, VersionStore};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Which run of a client a heartbeat comes from: when the process started (ms since the
/// Unix epoch, by its host's clock) and the report's number in that run. Ordered by
/// both, so the fleet record can tell a heartbeat that arrives late from a run that has
/// since been replaced (a killed agent's last call, delivered after its successor's
/// first) and drop it instead of recording the old run's versions over the new one's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Incarnation {
    /// When the run started, ms since the Unix epoch.
    pub started_ms: u64,
    /// The report's number within the run, from 0.
    pub seq: u64,
}

/// One member of the fleet as the store has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetMember {
    /// The component kind (`agent`).
    pub component: String,
    /// Unique per member of that kind.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its software version's number.
    pub software: u32,
    /// Its apparent version's number.
    pub apparent: u32,
    /// The server that heard it last.
    pub heard_by: String,
    /// False for a member known only from other traffic than heartbeats (accel: the
    /// inventory reports of an agent that sends none): its versions are assumed.
    pub heartbeats: bool,
    /// How long ago it was last heard of, by the store's clock.
    pub age: Duration,
}

impl FleetMember {
    /// Heard of within `liveness`.
    pub fn is_live(&self, liveness: Duration) -> bool {
        self.age <= liveness
    }
}

/// A heartbeat as a server records it.
#[derive(Clone, Copy, Debug)]
pub struct Heard<'a> {
    /// The member's kind (`agent`).
    pub component: &'a str,
    /// Its id.
    pub id: &'a str,
    /// Its host.
    pub host: &'a str,
    /// Its software version's number.
    pub software: u32,
    /// Its apparent version's number.
    pub apparent: u32,
    /// The server that heard it.
    pub heard_by: &'a str,
    /// True for a heartbeat. False for other traffic that shows the member is live but
    /// not its versions (accel: an inventory report): `software` and `apparent` are then
    /// what is assumed of a member that does not heartbeat. A member whose heartbeats
    /// are live (recorded within `liveness`) keeps what they recorded, untouched (a
    /// live heartbeat outranks a report, which a member that heartbeats may send too:
    /// [`Admission::Superseded`]); a member never heard heartbeating, or whose
    /// heartbeats stopped longer than `liveness` ago while this traffic goes on (it went
    /// back to a release that sends none), is recorded at the assumed versions.
    pub heartbeats: bool,
    /// The run of the member that sent it, if it says ([`run_order`]).
    pub incarnation: Option<Incarnation>,
    /// How long a silent member still counts (the server's): an earlier run is refused
    /// while the later run recorded for the member is live.
    pub liveness: Duration,
}

/// What a heartbeat of run `heard` does to a member whose record holds run `recorded`,
/// last heard `recorded_age` ago: the rule every [`FleetStore`] applies.
///
/// - Either run unknown (a client that does not number its runs, or a record made
///   before it did): recorded, as every heartbeat was before runs were numbered.
/// - The same run: recorded if it is a later report than the one recorded, else
///   [`RunOrder::Superseded`] (a delayed or retried report; it changes nothing).
/// - A later run (the process was restarted or replaced): recorded.
/// - An earlier run while the later one is live: [`RunOrder::Earlier`], which the
///   server fences: it is a dead process's last heartbeat delivered late, or a second
///   process running under the same id, which must stop (recording either would put
///   the earlier run's versions over the live one's, and finalization could decide on
///   them). Once the later run has been silent past `liveness` the earlier one is
///   recorded again, so a process whose host clock stepped back before it started is
///   fenced for at most one liveness window.
pub fn run_order(
    heard: Option<Incarnation>,
    recorded: Option<Incarnation>,
    recorded_age: Duration,
    liveness: Duration,
) -> RunOrder {
    let (Some(heard), Some(recorded)) = (heard, recorded) else {
        return RunOrder::Record;
    };
    if heard.started_ms == recorded.started_ms {
        if heard.seq > recorded.seq {
            RunOrder::Record
        } else {
            RunOrder::Superseded
        }
    } else if heard.started_ms > recorded.started_ms || recorded_age > liveness {
        RunOrder::Record
    } else {
        RunOrder::Earlier(format!(
            "a later run of it (started at {} ms since the epoch) is live; this heartbeat comes from an earlier run (started at {} ms): a second process with the same id, or a late delivery from a stopped one",
            recorded.started_ms, heard.started_ms
        ))
    }
}

/// What [`run_order`] decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOrder {
    /// Record the heartbeat.
    Record,
    /// A later report of the same run is recorded: nothing to do.
    Superseded,
    /// An earlier run of a member whose later run is live: refused, with the reason.
    Earlier(String),
}

/// The check a member on older software passes before it is recorded: given the stored
/// version record (`None` when the store keeps none, or none exists yet) and the software
/// version the member is recorded with, `Err(reason)` refuses it.
pub type Admit = dyn Fn(Option<&PersistedState>, u32) -> Result<(), String> + Send + Sync;

/// What [`FleetStore::record`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The member is recorded.
    Recorded,
    /// A later report of the same run was recorded already ([`RunOrder::Superseded`]);
    /// nothing was written.
    Superseded,
    /// The check refused it, with its reason; nothing was recorded.
    Refused(String),
}

/// The fleet record a deployment's servers share.
#[async_trait]
pub trait FleetStore: Send + Sync + 'static {
    /// Records a heartbeat: the member's versions, now, and the server that heard it,
    /// unless [`run_order`] says otherwise (an earlier run while a later one is live is
    /// [`Admission::Refused`], a report its run has superseded
    /// [`Admission::Superseded`]).
    ///
    /// With `admit`, atomically against a finalization deciding under the version
    /// record's lock: the store waits for such a decision to commit, then runs `admit` on
    /// the record as it stands (a store that keeps no version record passes `None`) and
    /// the software the member is recorded with, and records the member only if it
    /// passes. Without `admit`, one plain upsert. See [`Heard::heartbeats`] for traffic
    /// other than heartbeats.
    async fn record(
        &self,
        heard: &Heard<'_>,
        admit: Option<&Admit>,
    ) -> Result<Admission, StoreError>;

    /// Every member, with its age.
    async fn members(&self) -> Result<Vec<FleetMember>, StoreError>;

    /// Every member, read inside `tx`, a transaction of the version record's
    /// [`TransactionalStore`] (type-erased, as upgrade steps receive it) that locked the
    /// record: what finalize decides on.
    async fn members_in(&self, tx: &mut (dyn Any + Send)) -> Result<Vec<FleetMember>, StoreError>;

    /// Removes a member that left the deployment for good; true if it was there.
    async fn forget(&self, component: &str, id: &str) -> Result<bool, StoreError>;
}

#[derive(Clone, Debug)]
struct Entry {
    host: String,
    software: u32,
    apparent: u32,
    heard_by: String,
    heartbeats: bool,
    incarnation: Option<Incarnation>,
    seen: Instant,
}

#[derive(Debug, Default)]
struct State {
    record: Option<PersistedState>,
    members: BTreeMap<(String, String), Entry>,
}

impl State {
    fn list(&self) -> Vec<FleetMember> {
        self.members
            .iter()
            .map(|((component, id), e)| FleetMember {
                component: component.clone(),
                id: id.clone(),
                host: e.host.clone(),
                software: e.software,
                apparent: e.apparent,
                heard_by: e.heard_by.clone(),
                heartbeats: e.heartbeats,
                age: e.seen.elapsed(),
            })
            .collect()
    }
}

/// A [`FleetStore`] in memory. See the module docs for when it is enough.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use verso_upgrade::fleet::{FleetStore, Heard, MemoryFleet};
/// let fleet = MemoryFleet::new();
/// let heard = Heard {
///     component: "agent", id: "host1", host: "host1", software: 2, apparent: 1,
///     heard_by: "conductor-a", heartbeats: true, incarnation: None,
///     liveness: std::time::Duration::from_secs(60),
/// };
/// fleet.record(&heard, None).await?;
/// let members = fleet.members().await?;
/// assert_eq!((members[0].id.as_str(), members[0].heard_by.as_str()), ("host1", "conductor-a"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct MemoryFleet {
    state: Arc<Mutex<State>>,
    /// Shares its lock with a [`MemoryStore`]'s record.
    paired: bool,
}

impl MemoryFleet {
    /// An empty fleet record of its own.
    pub fn new() -> Self {
        MemoryFleet::default()
    }

    /// A version store and a fleet record under one lock, as a database holds both: the
    /// store's transactions lock the fleet too.
    pub fn with_store() -> (MemoryStore, MemoryFleet) {
        let state = Arc::new(Mutex::new(State::default()));
        (
            MemoryStore {
                state: state.clone(),
            },
            MemoryFleet {
                state,
                paired: true,
            },
        )
    }
}

#[async_trait]
impl FleetStore for MemoryFleet {
    async fn record(
        &self,
        heard: &Heard<'_>,
        admit: Option<&Admit>,
    ) -> Result<Admission, StoreError> {
        let mut state = self.state.lock().await;
        let key = (heard.component.to_owned(), heard.id.to_owned());
        let known = state.members.get(&key).filter(|e| e.heartbeats).cloned();
        if let (true, Some(k)) = (heard.heartbeats, &known) {
            match run_order(
                heard.incarnation,
                k.incarnation,
                k.seen.elapsed(),
                heard.liveness,
            ) {
                RunOrder::Record => {}
                RunOrder::Superseded => return Ok(Admission::Superseded),
                RunOrder::Earlier(reason) => return Ok(Admission::Refused(reason)),
            }
        }
        if let (false, Some(k)) = (heard.heartbeats, &known) {
            // Not a heartbeat: live heartbeats' versions stand, and so does their age.
            if k.seen.elapsed() <= heard.liveness {
                return Ok(Admission::Superseded);
            }
        }
        let entry = Entry {
            host: heard.host.to_owned(),
            software: heard.software,
            apparent: heard.apparent,
            heard_by: heard.heard_by.to_owned(),
            heartbeats: heard.heartbeats,
            incarnation: heard.incarnation,
            seen: Instant::now(),
        };
        if let Some(admit) = admit {
            let record = if self.paired {
                state.record.as_ref()
            } else {
                None
            };
            if let Err(reason) = admit(record, entry.software) {
                return Ok(Admission::Refused(reason));
            }
        }
        state.members.insert(key, entry);
        Ok(Admission::Recorded)
    }

    async fn members(&self) -> Result<Vec<FleetMember>, StoreError> {
        Ok(self.state.lock().await.list())
    }

    async fn members_in(&self, tx: &mut (dyn Any + Send)) -> Result<Vec<FleetMember>, StoreError> {
        match tx.downcast_mut::<MemoryTx>() {
            // The paired store's transaction already holds the lock.
            Some(tx) if Arc::ptr_eq(&tx.state, &self.state) => Ok(tx.guard.list()),
            _ => self.members().await,
        }
    }

    async fn forget(&self, component: &str, id: &str) -> Result<bool, StoreError> {
        let mut state = self.state.lock().await;
        Ok(state
            .members
            .remove(&(component.to_owned(), id.to_owned()))
            .is_some())
    }
}

/// The version record of [`MemoryFleet::with_store`]: a [`TransactionalStore`] whose
/// transaction holds the lock of the record and of its fleet.
#[derive(Clone, Debug)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
}

/// A [`MemoryStore`] transaction: the lock, and the record it will write.
pub struct MemoryTx {
    state: Arc<Mutex<State>>,
    guard: OwnedMutexGuard<State>,
    pending: Option<PersistedState>,
}

impl std::fmt::Debug for MemoryTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTx")
            .field("pending", &self.pending)
            .finish()
    }
}

#[async_trait]
impl VersionStore for MemoryStore {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        Ok(self.state.lock().await.record.clone())
    }

    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        self.state.lock().await.record = Some(state.clone());
        Ok(())
    }
}

#[async_trait]
impl TransactionalStore for MemoryStore {
    type Tx = MemoryTx;

    async fn begin(&self) -> Result<MemoryTx, StoreError> {
        Ok(MemoryTx {
            state: self.state.clone(),
            guard: self.state.clone().lock_owned().await,
            pending: None,
        })
    }

    async fn load_in(&self, tx: &mut MemoryTx) -> Result<Option<PersistedState>, StoreError> {
        Ok(tx.pending.clone().or_else(|| tx.guard.record.clone()))
    }

    async fn save_in(&self, tx: &mut MemoryTx, state: &PersistedState) -> Result<(), StoreError> {
        tx.pending = Some(state.clone());
        Ok(())
    }

    async fn commit(&self, mut tx: MemoryTx) -> Result<(), StoreError> {
        if let Some(record) = tx.pending.take() {
            tx.guard.record = Some(record);
        }
        Ok(())
    }

    async fn rollback(&self, _tx: MemoryTx) -> Result<(), StoreError> {
        Ok(())
    }
}
