//! [`VersionManager`]: one component's apparent version, its gates, and its own
//! finalization.
//!
//! At start the manager reads the persisted record and decides:
//! - nothing persisted (a fresh install): apparent = software, persisted at once;
//! - apparent below software: *pre-finalized* (the component was upgraded): old
//!   behaviour only, downgrade still possible;
//! - apparent above software (finalized by newer code, then downgraded): refuse to start;
//! - a finalization marker: it resumes when [`VersionManager::resume`] (or `finalize`) runs.
//!
//! Features ask [`VersionManager::is_allowed`] (true once the apparent version is at least
//! theirs) or hold a [`Gate`]. There is deliberately no "needs finalization" query to
//! gate on: a component pre-finalized for a *newer* version would wrongly turn off a
//! feature whose own version is long finalized (the trap Ozone's guide describes;
//! `tests/manager.rs` shows it).
//!
//! (Long on purpose: the manager is one state machine, apparent version, gates,
//! finalization with its checkpoints and retries, whose steps share its private state.)

use crate::action::{first_tx_step_not_over, step_id, StepKind, TxStepFn, UpgradeAction};
use crate::error::{NotSupportedBeforeFinalization, UpgradeError};
use crate::fleet::FleetStore;
use crate::store::{Checkpoint, Finalizing, PersistedState, TransactionalStore, VersionStore};
use crate::version::{ComponentVersion, Observed};
use crate::ActionError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Where a component stands, derived from its persisted record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpgradeState {
    /// Apparent below software, no finalization under way: downgrade is still possible.
    PreFinalized,
    /// A finalization is under way (or stopped at a failed action).
    Finalizing,
    /// Apparent equals software.
    Finalized,
}

/// How transient action failures are retried.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// The first delay.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    /// After this many failed attempts of one step, the failure counts as permanent.
    pub attempts: u32,
}

impl Default for RetryPolicy {
    /// 0.5 s doubling to 30 s, 10 attempts (about 3 minutes).
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            attempts: 10,
        }
    }
}

/// What a `finalize` call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizeOutcome {
    /// It was already finalized: nothing was done.
    AlreadyFinalized,
    /// This call finalized it (or resumed and finished an interrupted finalization).
    Finalized,
}

/// The status of one component, as `status` shows it and as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentStatus {
    /// The component (`conductor`, `agent`).
    pub component: String,
    /// The software version's number.
    pub software: u32,
    /// The apparent version's number.
    pub apparent: u32,
    /// Derived state.
    pub state: UpgradeState,
    /// The persisted checkpoint while finalizing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// A step being retried after a transient failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrying: Option<String>,
    /// The permanent failure that stopped finalization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Configuration read at start but not acted on until its version is finalized.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
}

/// One declared version and what uses it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionUse {
    /// The component.
    pub component: String,
    /// The version's number.
    pub number: u32,
    /// Its name in code.
    pub name: String,
    /// What it introduced.
    pub description: String,
    /// The gates, options, validators and actions registered for it.
    pub used_by: Vec<String>,
}

struct Shared<V> {
    record: PersistedState,
    retrying: Option<String>,
    uses: BTreeMap<V, Vec<String>>,
    deferred: Vec<(V, String)>,
    /// A transactional step's commit failed: it may have landed. The record is read
    /// back from the store before the next finalization step.
    uncertain: bool,
}

mod tx;
pub(crate) use tx::FleetChange;
use tx::{step_recorded, TxBinding, TxFailure, TxOutcome, TxRunner};

/// One component's versions. Cheap to clone; clones share state.
pub struct VersionManager<V: ComponentVersion> {
    store: Arc<dyn VersionStore>,
    tx: Option<Arc<dyn TxRunner>>,
    apparent: Arc<AtomicU32>,
    shared: Arc<Mutex<Shared<V>>>,
    actions: Arc<Vec<UpgradeAction<V>>>,
    finalizing: Arc<tokio::sync::Mutex<()>>,
    retry: RetryPolicy,
    /// This process's run: what its heartbeats carry ([`crate::fleet::Incarnation`]).
    run: Arc<Run>,
}

/// A process's run of a component: when it started (ms since the Unix epoch, this
/// host's clock) and how many heartbeat reports it has made.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) started_ms: u64,
    pub(crate) reports: std::sync::atomic::AtomicU64,
}

impl Run {
    fn now() -> Run {
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Run {
            started_ms,
            reports: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

impl<V: ComponentVersion> Clone for VersionManager<V> {
    fn clone(&self) -> Self {
        VersionManager {
            store: self.store.clone(),
            tx: self.tx.clone(),
            apparent: self.apparent.clone(),
            shared: self.shared.clone(),
            actions: self.actions.clone(),
            finalizing: self.finalizing.clone(),
            retry: self.retry,
            run: self.run.clone(),
        }
    }
}

impl<V: ComponentVersion> std::fmt::Debug for VersionManager<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionManager")
            .field("component", &V::COMPONENT)
            .field("apparent", &self.apparent.load(Ordering::Acquire))
            .field("software", &V::software().number())
            .finish()
    }
}

/// Builds a [`VersionManager`]: its store, its upgrade actions, its retry policy.
pub struct Builder<V: ComponentVersion> {
    store: Arc<dyn VersionStore>,
    tx: Option<Arc<dyn TxRunner>>,
    actions: Vec<UpgradeAction<V>>,
    retry: RetryPolicy,
    min_supported: Option<V>,
    fresh_at: Option<V>,
}

impl<V: ComponentVersion> Builder<V> {
    /// Registers an upgrade action; actions of one version run in registration order.
    pub fn action(mut self, action: UpgradeAction<V>) -> Self {
        self.actions.push(action);
        self
    }

    /// How transient action failures are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The oldest apparent version this build can upgrade from (default: the oldest
    /// declared version).
    pub fn min_supported(mut self, v: V) -> Self {
        self.min_supported = Some(v);
        self
    }

    /// The apparent version of a fresh install (default: the software version). A client
    /// joining a deployment whose server is still pre-finalized starts at the server's
    /// apparent version, never above it.
    pub fn fresh_at(mut self, v: V) -> Self {
        self.fresh_at = Some(v);
        self
    }

    /// Reads the record and decides the start (see the module docs).
    ///
    /// Refuses an action with a transactional step
    /// ([`UpgradeAction::step_in_tx`]) unless the builder was made by
    /// [`VersionManager::builder_tx`] over the store type the step names.
    pub async fn open(self) -> Result<VersionManager<V>, UpgradeError> {
        let software = V::software();
        let tx_store = self.tx.as_ref().map(|t| t.store_type());
        for a in &self.actions {
            if let Some((step, wanted)) = first_tx_step_not_over(a, tx_store) {
                return Err(UpgradeError::TransactionalStepWithoutStore {
                    component: V::COMPONENT,
                    version: a.version.number(),
                    action: a.name.to_owned(),
                    step: step.to_owned(),
                    wanted,
                    store: self
                        .tx
                        .as_ref()
                        .map_or("a store that is not transactional", |t| t.store_name()),
                });
            }
        }
        let record = match self.store.load().await? {
            None => {
                let start = self.fresh_at.unwrap_or(software).min(software);
                let fresh = PersistedState {
                    format: 1,
                    component: V::COMPONENT.to_owned(),
                    apparent: start.number(),
                    finalizing: None,
                };
                self.store.save(&fresh).await?;
                tracing::info!(component = V::COMPONENT, version = %start.label(), "fresh install");
                fresh
            }
            Some(r) => r,
        };
        let apparent = stored_apparent::<V>(&record)?;
        if let Some(f) = &record.finalizing {
            if let Observed::Future(target) = V::observe(f.target)? {
                return Err(UpgradeError::DowngradeDuringFinalization {
                    component: V::COMPONENT,
                    target,
                    software: software.number(),
                });
            }
        }
        let min = self.min_supported.unwrap_or_else(V::oldest);
        if apparent < min {
            return Err(UpgradeError::TooOld {
                component: V::COMPONENT,
                apparent: apparent.number(),
                min_supported: min.number(),
            });
        }
        if apparent < software && record.finalizing.is_none() {
            tracing::info!(component = V::COMPONENT, apparent = %apparent.label(), software = %software.label(), "pre-finalized: new features wait for finalization, downgrade is still possible");
        }
        let mut uses: BTreeMap<V, Vec<String>> = BTreeMap::new();
        for a in &self.actions {
            uses.entry(a.version)
                .or_default()
                .push(format!("upgrade action {}", a.name));
        }
        Ok(VersionManager {
            store: self.store,
            tx: self.tx,
            apparent: Arc::new(AtomicU32::new(apparent.number())),
            shared: Arc::new(Mutex::new(Shared {
                record,
                retrying: None,
                uses,
                deferred: Vec::new(),
                uncertain: false,
            })),
            actions: Arc::new(self.actions),
            finalizing: Arc::new(tokio::sync::Mutex::new(())),
            retry: self.retry,
            run: Arc::new(Run::now()),
        })
    }
}

impl<V: ComponentVersion> VersionManager<V> {
    /// The next heartbeat's [`crate::fleet::Incarnation`]: this run, one report later.
    pub(crate) fn next_incarnation(&self) -> crate::fleet::Incarnation {
        crate::fleet::Incarnation {
            started_ms: self.run.started_ms,
            seq: self.run.reports.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A builder over `store`.
    pub fn builder(store: impl VersionStore) -> Builder<V> {
        Self::builder_arc(Arc::new(store))
    }

    /// A builder over a shared store.
    pub fn builder_arc(store: Arc<dyn VersionStore>) -> Builder<V> {
        Builder {
            store,
            tx: None,
            actions: Vec::new(),
            retry: RetryPolicy::default(),
            min_supported: None,
            fresh_at: None,
        }
    }

    /// A builder over a [`TransactionalStore`]: its actions may have transactional steps
    /// ([`UpgradeAction::step_in_tx`]) over `S`, whose data and completion commit in one
    /// transaction.
    pub fn builder_tx<S: TransactionalStore>(store: S) -> Builder<V> {
        let store = Arc::new(store);
        let mut b = Self::builder_arc(store.clone());
        b.tx = Some(Arc::new(TxBinding(store)));
        b
    }

    /// Opens with no upgrade actions.
    pub async fn open(store: impl VersionStore) -> Result<Self, UpgradeError> {
        Self::builder(store).open().await
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared<V>> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The apparent version: what this component acts as.
    pub fn apparent(&self) -> V {
        let n = self.apparent.load(Ordering::Acquire);
        // Only known versions are ever stored in the atomic.
        V::from_number(n).unwrap_or_else(V::oldest)
    }

    /// This build's software version.
    pub fn software(&self) -> V {
        V::software()
    }

    /// True once the apparent version is at least `v`. The one feature gate.
    pub fn is_allowed(&self, v: V) -> bool {
        self.apparent.load(Ordering::Acquire) >= v.number()
    }

    /// `Ok` once `v` is finalized, else the typed refusal naming `feature`.
    pub fn require(&self, v: V, feature: &str) -> Result<(), NotSupportedBeforeFinalization> {
        if self.is_allowed(v) {
            Ok(())
        } else {
            Err(NotSupportedBeforeFinalization {
                component: V::COMPONENT.to_owned(),
                feature: feature.to_owned(),
                required: v.number(),
                required_name: v.name().to_owned(),
                apparent: self.apparent.load(Ordering::Acquire),
            })
        }
    }

    /// A named gate for a feature of version `v`; registering it records that `v` is
    /// used (see [`VersionManager::unused_versions`]).
    pub fn gate(&self, v: V, feature: &str) -> Gate<V> {
        self.shared()
            .uses
            .entry(v)
            .or_default()
            .push(format!("gate {feature}"));
        Gate {
            manager: self.clone(),
            version: v,
            feature: feature.to_owned(),
        }
    }

    /// A configuration option whose effect would block a downgrade: returns whether to
    /// act on it now. Before `v` is finalized the option is read but not acted on, and
    /// the manager says so in its log and in status.
    pub fn config_option(&self, v: V, option: &str) -> bool {
        let allowed = self.is_allowed(v);
        let mut shared = self.shared();
        shared
            .uses
            .entry(v)
            .or_default()
            .push(format!("option {option}"));
        if !allowed {
            tracing::warn!(component = V::COMPONENT, option, required = %v.label(), "option read but not acted on until its version is finalized");
            shared.deferred.push((v, option.to_owned()));
        }
        allowed
    }

    /// Versions after the oldest that no gate, option or action uses: a version declared
    /// in one commit and used in a later one (the release-cut trap).
    pub fn unused_versions(&self) -> Vec<V> {
        let shared = self.shared();
        V::all()
            .iter()
            .copied()
            .skip(1)
            .filter(|v| !shared.uses.contains_key(v))
            .collect()
    }

    /// Every declared version with what uses it (gates, options, actions, validators),
    /// oldest first: what `verso versions lint` reports.
    pub fn uses(&self) -> Vec<VersionUse> {
        let shared = self.shared();
        V::all()
            .iter()
            .map(|v| VersionUse {
                component: V::COMPONENT.to_owned(),
                number: v.number(),
                name: v.name().to_owned(),
                description: v.description().to_owned(),
                used_by: shared.uses.get(v).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The derived state.
    pub fn state(&self) -> UpgradeState {
        let shared = self.shared();
        if shared.record.finalizing.is_some() {
            UpgradeState::Finalizing
        } else if shared.record.apparent < V::software().number() {
            UpgradeState::PreFinalized
        } else {
            UpgradeState::Finalized
        }
    }

    /// The persisted checkpoint, while finalizing.
    pub fn checkpoint(&self) -> Option<Checkpoint> {
        self.shared()
            .record
            .finalizing
            .as_ref()
            .map(|f| f.checkpoint)
    }

    /// This component's status.
    pub fn status(&self) -> ComponentStatus {
        let state = self.state();
        let shared = self.shared();
        ComponentStatus {
            component: V::COMPONENT.to_owned(),
            software: V::software().number(),
            apparent: shared.record.apparent,
            state,
            checkpoint: shared.record.finalizing.as_ref().map(|f| f.checkpoint),
            retrying: shared.retrying.clone(),
            failed: shared
                .record
                .finalizing
                .as_ref()
                .and_then(|f| f.failed.clone()),
            deferred: shared
                .deferred
                .iter()
                .filter(|(v, _)| !self.is_allowed(*v))
                .map(|(v, o)| format!("{o} (waits for {})", v.label()))
                .collect(),
        }
    }

    /// Finalizes this component to its software version: runs the upgrade actions of
    /// every version above the apparent one, in order, persisting each step, then the
    /// apparent version. Idempotent; resumes an interrupted finalization.
    pub async fn finalize(&self) -> Result<FinalizeOutcome, UpgradeError> {
        self.finalize_to(V::software()).await
    }

    /// Finalizes up to `target` (at most the software version): what a client does when
    /// its server has finalized `target`.
    pub async fn finalize_to(&self, target: V) -> Result<FinalizeOutcome, UpgradeError> {
        let target = target.min(V::software());
        let _one_at_a_time = self.finalizing.lock().await;
        if self.apparent() >= target && self.shared().record.finalizing.is_none() {
            return Ok(FinalizeOutcome::AlreadyFinalized);
        }
        self.run_to(target, Checkpoint::Started).await?;
        self.persist(|r| r.finalizing = None).await?;
        tracing::info!(component = V::COMPONENT, apparent = %self.apparent().label(), "finalized");
        Ok(FinalizeOutcome::Finalized)
    }

    /// Continues a finalization a crash interrupted; does nothing without a marker.
    pub async fn resume(&self) -> Result<(), UpgradeError> {
        let marker = self.shared().record.finalizing.clone();
        match marker {
            Some(f) if f.checkpoint == Checkpoint::Started => {
                let target = V::from_number(f.target).unwrap_or_else(V::software);
                tracing::info!(component = V::COMPONENT, target = %target.label(), "resuming an interrupted finalization");
                self.finalize_to(target).await.map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// Catches up with a finalization another process did over the same store (several
    /// conductors on one database: the one the operator's `finalize` reached persisted
    /// the new apparent version; the others only read it at their next start unless they
    /// refresh). Reads the stored record and, when its apparent version is above this
    /// manager's, takes it: gates open, and a [`Coordinator`](crate::Coordinator) over
    /// this manager tells its clients. Returns whether the apparent version advanced.
    ///
    /// Only the apparent version is taken, never the other process's finalization
    /// marker: this manager keeps its own (or none), and never moves backwards. While a
    /// finalization of this manager's own runs, it does nothing and returns `false` (that
    /// finalization reads and writes the record itself). Nothing is written.
    ///
    /// A stored apparent version this build does not know (newer software finalized the
    /// deployment) is [`UpgradeError::DowngradeAfterFinalization`], as at start.
    pub async fn refresh(&self) -> Result<bool, UpgradeError> {
        // Held until the end: no finalization of this manager starts in between.
        let Ok(_not_finalizing) = self.finalizing.try_lock() else {
            return Ok(false);
        };
        let Some(stored) = self.store.load().await? else {
            return Ok(false);
        };
        let newer = stored_apparent::<V>(&stored)?;
        let before = self.apparent();
        if newer <= before {
            return Ok(false);
        }
        {
            // In place: this manager's marker (and anything else it holds) stays.
            let mut shared = self.shared();
            shared.record.apparent = shared.record.apparent.max(newer.number());
        }
        self.apparent.fetch_max(newer.number(), Ordering::AcqRel);
        tracing::info!(
            component = V::COMPONENT,
            from = %before.label(),
            apparent = %newer.label(),
            "finalized by another process over the same store"
        );
        Ok(true)
    }

    /// Runs the actions up to `target` under a marker at `checkpoint`; leaves the marker.
    pub(crate) async fn run_to(
        &self,
        target: V,
        checkpoint: Checkpoint,
    ) -> Result<(), UpgradeError> {
        let marker_target = target.number();
        self.reload_if_uncertain().await?;
        self.persist(|r| match &mut r.finalizing {
            Some(f) => f.failed = None,
            None => {
                r.finalizing = Some(Finalizing {
                    checkpoint,
                    target: marker_target,
                    steps_done: Vec::new(),
                    failed: None,
                })
            }
        })
        .await?;
        let pending: Vec<V> = V::all()
            .iter()
            .copied()
            .filter(|v| *v > self.apparent() && *v <= target)
            .collect();
        for v in pending {
            if self.shared().record.apparent >= v.number() {
                // Another manager over the same store finalized it meanwhile.
                continue;
            }
            for action in self.actions.iter().filter(|a| a.version == v) {
                for step in &action.steps {
                    let id = step_id(v, action.name, step.name);
                    let done = self
                        .shared()
                        .record
                        .finalizing
                        .as_ref()
                        .is_some_and(|f| f.steps_done.contains(&id));
                    if done {
                        continue;
                    }
                    let ran = match &step.kind {
                        StepKind::Plain(run) => self.run_step(&id, || run()).await,
                        StepKind::InTx { run, .. } => {
                            self.run_step(&id, || self.tx_attempt(v.number(), &id, run))
                                .await
                        }
                    };
                    if let Err(reason) = ran {
                        self.persist(|r| {
                            if let Some(f) = &mut r.finalizing {
                                f.failed = Some(format!("{id}: {reason}"));
                            }
                        })
                        .await?;
                        return Err(UpgradeError::ActionFailed {
                            component: V::COMPONENT,
                            version: v.number(),
                            action: action.name.to_owned(),
                            step: step.name.to_owned(),
                            reason,
                        });
                    }
                    if let StepKind::Plain(_) = step.kind {
                        self.persist(|r| {
                            if let Some(f) = &mut r.finalizing {
                                if !f.steps_done.contains(&id) {
                                    f.steps_done.push(id.clone());
                                }
                            }
                        })
                        .await?;
                    }
                    // A transactional step recorded itself in its own transaction.
                }
            }
            self.persist(|r| {
                // Never backwards: another manager may have gone further meanwhile.
                if r.apparent < v.number() {
                    r.apparent = v.number();
                    if let Some(f) = &mut r.finalizing {
                        f.steps_done.clear();
                    }
                }
            })
            .await?;
            self.apparent.fetch_max(v.number(), Ordering::AcqRel);
            tracing::info!(component = V::COMPONENT, version = %v.label(), "version finalized");
        }
        Ok(())
    }

    /// One attempt of a transactional step of `version`: its data and the record marking
    /// it done in one transaction. Whether it is done is decided on the stored record,
    /// read under its lock in that transaction: another manager finalizing over the same
    /// store may have run it. A store failure counts as transient (a database
    /// restarting); a failed commit is checked against the store, since it may have
    /// landed.
    async fn tx_attempt(&self, version: u32, id: &str, run: &TxStepFn) -> Result<(), ActionError> {
        let Some(runner) = &self.tx else {
            // `open` refuses transactional steps without a transactional store.
            return Err(ActionError::Permanent(
                "internal error: a transactional step without a transactional store".into(),
            ));
        };
        self.reload_if_uncertain()
            .await
            .map_err(|e| ActionError::Transient(e.to_string()))?;
        if self.step_done(version, id) {
            return Ok(());
        }
        let current = self.shared().record.clone();
        match runner.run(run, id, version, &current).await {
            Ok(TxOutcome::Ran(saved)) => {
                self.adopt(saved);
                Ok(())
            }
            Ok(TxOutcome::AlreadyDone(stored)) => {
                tracing::info!(
                    component = V::COMPONENT,
                    step = id,
                    "upgrade step already done by another finalizer over the same store"
                );
                self.adopt(stored);
                Ok(())
            }
            Ok(TxOutcome::Failed(e)) => Err(e),
            Err(TxFailure::Before(e)) => Err(ActionError::Transient(format!("version store: {e}"))),
            Err(TxFailure::Commit(e)) => {
                tracing::warn!(component = V::COMPONENT, step = id, error = %e, "commit of an upgrade step failed; reading back whether it landed");
                self.shared().uncertain = true;
                self.reload_if_uncertain()
                    .await
                    .map_err(|e| ActionError::Transient(e.to_string()))?;
                if self.step_done(version, id) {
                    Ok(())
                } else {
                    Err(ActionError::Transient(format!(
                        "version store: commit: {e}"
                    )))
                }
            }
        }
    }

    fn step_done(&self, version: u32, id: &str) -> bool {
        step_recorded(&self.shared().record, version, id)
    }

    /// Takes `record`, read from or written to the store, as this manager's; the
    /// apparent version only moves forward (another manager may have finalized more).
    fn adopt(&self, record: PersistedState) {
        if V::from_number(record.apparent).is_some() {
            self.apparent.fetch_max(record.apparent, Ordering::AcqRel);
        }
        self.shared().record = record;
    }

    /// After a commit whose outcome is unknown, takes the record the store has.
    async fn reload_if_uncertain(&self) -> Result<(), UpgradeError> {
        if !self.shared().uncertain {
            return Ok(());
        }
        if let Some(stored) = self.store.load().await? {
            self.adopt(stored);
            self.shared().uncertain = false;
        }
        Ok(())
    }

    /// Runs one step, retrying transient failures; the error is the permanent reason.
    async fn run_step<F, Fut>(&self, id: &str, mut run: F) -> Result<(), String>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), ActionError>>,
    {
        let mut delay = self.retry.initial;
        let mut attempt = 1;
        loop {
            let result = run().await;
            match result {
                Ok(()) => {
                    self.shared().retrying = None;
                    return Ok(());
                }
                Err(ActionError::Permanent(why)) => {
                    self.shared().retrying = None;
                    return Err(why);
                }
                Err(ActionError::Transient(why)) if attempt >= self.retry.attempts => {
                    self.shared().retrying = None;
                    return Err(format!("still failing after {attempt} attempts: {why}"));
                }
                Err(ActionError::Transient(why)) => {
                    tracing::warn!(component = V::COMPONENT, step = id, attempt, error = %why, "upgrade step failed, retrying");
                    self.shared().retrying =
                        Some(format!("{id}: attempt {attempt} failed: {why}; retrying"));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.retry.max);
                    attempt += 1;
                }
            }
        }
    }

    /// Serializes finalization steps of this component (the coordinator's and its own).
    pub(crate) async fn finalizing_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.finalizing.lock().await
    }

    /// Applies `change` to the record and persists it; memory changes only once it is durable.
    ///
    /// Over a [`TransactionalStore`] the change applies to the *stored* record, under
    /// its lock ([`TransactionalStore::update`]), so it cannot overwrite what another
    /// manager over the same store committed meanwhile (a step it ran, the apparent
    /// version it reached); the manager then takes the result as its record.
    pub(crate) async fn persist(
        &self,
        change: impl Fn(&mut PersistedState) + Send + Sync,
    ) -> Result<(), UpgradeError> {
        let current = self.shared().record.clone();
        let next = match &self.tx {
            Some(runner) => {
                runner
                    .update(&|stored: Option<PersistedState>| {
                        let mut next = stored.unwrap_or_else(|| current.clone());
                        change(&mut next);
                        next
                    })
                    .await?
            }
            None => {
                let mut next = current;
                change(&mut next);
                self.store.save(&next).await?;
                next
            }
        };
        self.adopt(next);
        Ok(())
    }
}

impl<V: ComponentVersion> VersionManager<V> {
    /// Writes `change(record, fleet's members)` unless it returns `None` (then nothing is
    /// written and this returns `false`). Over a [`TransactionalStore`] the members are
    /// read in the record's transaction, under its lock, so the decision and the write are
    /// one step for every server sharing the store; otherwise they are read first (one
    /// server: its coordinator serializes heartbeats against this).
    pub(crate) async fn persist_with_fleet(
        &self,
        fleet: &dyn FleetStore,
        change: &FleetChange<'_>,
    ) -> Result<bool, UpgradeError> {
        let current = self.shared().record.clone();
        let next = match &self.tx {
            Some(runner) => runner.update_with_fleet(fleet, &current, change).await?,
            None => {
                let members = fleet.members().await?;
                match change(&current, &members) {
                    Some(next) => {
                        self.store.save(&next).await?;
                        Some(next)
                    }
                    None => None,
                }
            }
        };
        match next {
            Some(next) => {
                self.adopt(next);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// The apparent version a stored record holds, as this build reads it: refused when the
/// record is another component's ([`UpgradeError::WrongComponent`]) or when newer
/// software finalized past this build ([`UpgradeError::DowngradeAfterFinalization`]).
fn stored_apparent<V: ComponentVersion>(record: &PersistedState) -> Result<V, UpgradeError> {
    if record.component != V::COMPONENT {
        return Err(UpgradeError::WrongComponent {
            expected: V::COMPONENT,
            found: record.component.clone(),
        });
    }
    match V::observe(record.apparent)? {
        Observed::Known(v) => Ok(v),
        Observed::Future(n) => Err(UpgradeError::DowngradeAfterFinalization {
            component: V::COMPONENT,
            apparent: n,
            software: V::software().number(),
        }),
    }
}

/// A feature's gate: a version and the feature's name, checked on each use.
#[derive(Clone, Debug)]
pub struct Gate<V: ComponentVersion> {
    manager: VersionManager<V>,
    version: V,
    feature: String,
}

impl<V: ComponentVersion> Gate<V> {
    /// True once the version is finalized.
    pub fn is_open(&self) -> bool {
        self.manager.is_allowed(self.version)
    }

    /// `Ok` once finalized, else the typed refusal.
    pub fn check(&self) -> Result<(), NotSupportedBeforeFinalization> {
        self.manager.require(self.version, &self.feature)
    }

    /// The version it waits for.
    pub fn version(&self) -> V {
        self.version
    }
}

/// A value (an enum variant, a field) that only exists from some version on: writing it,
/// to a database or the wire, must wait for that version to be finalized.
pub trait Introduced<V: ComponentVersion> {
    /// The version that introduced this value, or `None` for one every version knows.
    fn introduced_in(&self) -> Option<V>;

    /// A name for messages (`DeviceState::Cleaning`).
    fn describe(&self) -> String;
}

impl<V: ComponentVersion> VersionManager<V> {
    /// `Ok` when `value` may be written now.
    pub fn check_value<T: Introduced<V>>(
        &self,
        value: &T,
    ) -> Result<(), NotSupportedBeforeFinalization> {
        match value.introduced_in() {
            Some(v) => self.require(v, &value.describe()),
            None => Ok(()),
        }
    }
}
