//! One component's versions: fresh install, upgrade, finalize, downgrade window, crashes
//! during finalization, action failures, gates.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use verso_upgrade::store::{PersistedState, StoreError};
use verso_upgrade::{
    component_versions, ActionError, ComponentVersion, FileStore, FinalizeOutcome, RetryPolicy,
    UpgradeAction, UpgradeError, UpgradeState, VersionManager, VersionStore,
};

component_versions! {
    /// Release N+1 of a component.
    pub enum New: "conductor" {
        /// First release.
        Initial = 1 => "first release",
        /// Feature B.
        B = 2 => "feature B",
        /// Feature C.
        C = 3 => "feature C",
    }
}

component_versions! {
    /// Release N of the same component.
    pub enum Old: "conductor" {
        /// First release.
        Initial = 1 => "first release",
    }
}

fn file(dir: &Path) -> PathBuf {
    dir.join("conductor.version")
}

fn write_record(path: &Path, apparent: u32) {
    std::fs::write(
        path,
        format!(r#"{{"format": 1, "component": "conductor", "apparent": {apparent}}}"#),
    )
    .expect("write record");
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        initial: std::time::Duration::from_millis(1),
        max: std::time::Duration::from_millis(5),
        attempts: 5,
    }
}

#[tokio::test]
async fn a_fresh_install_is_finalized_and_persisted() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = VersionManager::<New>::open(FileStore::new(file(dir.path()))).await?;
    assert_eq!(m.apparent(), New::C);
    assert_eq!(m.state(), UpgradeState::Finalized);
    assert!(m.is_allowed(New::C));
    let on_disk = FileStore::new(file(dir.path()))
        .load()
        .await?
        .expect("persisted");
    assert_eq!(on_disk.apparent, 3);
    Ok(())
}

#[tokio::test]
async fn after_an_upgrade_the_component_is_pre_finalized_and_gates_are_closed(
) -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 1);
    let m = VersionManager::<New>::open(FileStore::new(file(dir.path()))).await?;
    assert_eq!(m.state(), UpgradeState::PreFinalized);
    assert_eq!(m.apparent(), New::Initial);
    assert!(m.is_allowed(New::Initial));
    assert!(!m.is_allowed(New::B));
    let err = m.require(New::C, "feature C").expect_err("gated");
    assert_eq!((err.required, err.apparent), (3, 1));
    assert!(err.to_string().contains("feature C"), "{err}");
    // The refusal crosses the wire as itself.
    let json = serde_json::to_string(&err).expect("serialize");
    assert_eq!(
        serde_json::from_str::<verso_upgrade::NotSupportedBeforeFinalization>(&json).expect("back"),
        err
    );
    Ok(())
}

#[tokio::test]
async fn gates_flip_exactly_at_finalization_and_a_second_finalize_is_a_no_op(
) -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 1);
    let m = VersionManager::<New>::open(FileStore::new(file(dir.path()))).await?;
    let gate = m.gate(New::C, "feature C");
    assert!(!gate.is_open());
    assert_eq!(m.finalize().await?, FinalizeOutcome::Finalized);
    assert!(gate.is_open());
    assert_eq!(m.state(), UpgradeState::Finalized);
    assert_eq!(m.finalize().await?, FinalizeOutcome::AlreadyFinalized);
    let on_disk = FileStore::new(file(dir.path()))
        .load()
        .await?
        .expect("persisted");
    assert_eq!((on_disk.apparent, on_disk.finalizing), (3, None));
    Ok(())
}

#[tokio::test]
async fn downgrade_works_before_finalization_and_is_refused_after() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    // Release N installed fresh, then N+1 started on its record: pre-finalized.
    VersionManager::<Old>::open(FileStore::new(&path)).await?;
    let before = std::fs::read(&path).expect("read");
    let new = VersionManager::<New>::open(FileStore::new(&path)).await?;
    assert_eq!(new.state(), UpgradeState::PreFinalized);
    drop(new);
    // Nothing new was written: release N starts again on the same record.
    assert_eq!(std::fs::read(&path).expect("read"), before);
    let old = VersionManager::<Old>::open(FileStore::new(&path)).await?;
    assert_eq!(old.state(), UpgradeState::Finalized);
    // Finalized by N+1, the record refuses release N, naming both versions.
    VersionManager::<New>::open(FileStore::new(&path))
        .await?
        .finalize()
        .await?;
    let err = VersionManager::<Old>::open(FileStore::new(&path))
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            UpgradeError::DowngradeAfterFinalization {
                apparent: 3,
                software: 1,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("cannot be downgraded"), "{err}");
    Ok(())
}

#[tokio::test]
async fn unknown_future_and_foreign_records_are_typed_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    write_record(&path, 9);
    let err = VersionManager::<New>::open(FileStore::new(&path))
        .await
        .expect_err("future");
    assert!(matches!(
        err,
        UpgradeError::DowngradeAfterFinalization {
            apparent: 9,
            software: 3,
            ..
        }
    ));
    write_record(&path, 0);
    let err = VersionManager::<New>::open(FileStore::new(&path))
        .await
        .expect_err("unknown");
    assert!(matches!(err, UpgradeError::Unknown(_)), "{err}");
    std::fs::write(
        &path,
        r#"{"format": 1, "component": "agent", "apparent": 1}"#,
    )
    .expect("write");
    let err = VersionManager::<New>::open(FileStore::new(&path))
        .await
        .expect_err("foreign");
    assert!(matches!(err, UpgradeError::WrongComponent { .. }), "{err}");
    // A finalization started by newer software cannot be continued by this one.
    std::fs::write(
        &path,
        r#"{"format": 1, "component": "conductor", "apparent": 1, "finalizing": {"checkpoint": "started", "target": 3}}"#,
    )
    .expect("write");
    let err = VersionManager::<Old>::open(FileStore::new(&path))
        .await
        .expect_err("mid-finalization");
    assert!(
        matches!(
            err,
            UpgradeError::DowngradeDuringFinalization { target: 3, .. }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn data_older_than_the_minimum_supported_version_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 1);
    let err = VersionManager::<New>::builder(FileStore::new(file(dir.path())))
        .min_supported(New::B)
        .open()
        .await
        .expect_err("too old");
    assert!(
        matches!(
            err,
            UpgradeError::TooOld {
                apparent: 1,
                min_supported: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("intermediate release"), "{err}");
}

/// The trap of Ozone's guide: "pre-finalized" means *some* newer version waits, so it
/// cannot gate a feature whose own version is long finalized.
#[tokio::test]
async fn pre_finalized_for_a_newer_version_does_not_disable_a_finalized_one(
) -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 2);
    let m = VersionManager::<New>::open(FileStore::new(file(dir.path()))).await?;
    // Gating feature B on "not pre-finalized" would turn it off here...
    assert_eq!(m.state(), UpgradeState::PreFinalized);
    // ...while its own version is finalized, which is what is_allowed answers.
    assert!(m.is_allowed(New::B));
    assert!(!m.is_allowed(New::C));
    Ok(())
}

/// A data file the actions migrate: a JSON list of applied operations, each applied once
/// (idempotent: a replayed step finds its mark).
fn migrating_actions(data: PathBuf, log: Arc<Mutex<Vec<String>>>) -> Vec<UpgradeAction<New>> {
    let step = move |name: &'static str| {
        let data = data.clone();
        let log = log.clone();
        move || {
            let data = data.clone();
            let log = log.clone();
            async move {
                log.lock().expect("log").push(name.to_owned());
                let mut applied: Vec<String> = std::fs::read(&data)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                if !applied.iter().any(|a| a == name) {
                    applied.push(name.to_owned());
                    std::fs::write(&data, serde_json::to_vec(&applied).expect("json"))
                        .map_err(|e| ActionError::Transient(e.to_string()))?;
                }
                Ok(())
            }
        }
    };
    vec![
        UpgradeAction::new(New::B, "b-migrate")
            .step("b1", step("b1"))
            .step("b2", step("b2")),
        UpgradeAction::new(New::C, "c-migrate")
            .step("c1", step("c1"))
            .step("c2", step("c2"))
            .step("c3", step("c3")),
    ]
}

/// A file store that "crashes" (fails, and is then abandoned) at its `crash_at`-th save.
struct CrashingStore {
    inner: FileStore,
    saves: AtomicUsize,
    crash_at: usize,
}

#[async_trait]
impl VersionStore for CrashingStore {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        self.inner.load().await
    }
    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        if self.saves.fetch_add(1, Ordering::SeqCst) + 1 == self.crash_at {
            return Err(StoreError::Backend("injected crash".into()));
        }
        self.inner.save(state).await
    }
}

async fn migrate_once(
    dir: &Path,
    crash_at: Option<usize>,
) -> Result<(Vec<String>, usize), UpgradeError> {
    let path = file(dir);
    let data = dir.join("data.json");
    write_record(&path, 1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut crashed = false;
    if let Some(crash_at) = crash_at {
        let store = CrashingStore {
            inner: FileStore::new(&path),
            saves: AtomicUsize::new(0),
            crash_at,
        };
        let mut b = VersionManager::<New>::builder(store);
        for a in migrating_actions(data.clone(), log.clone()) {
            b = b.action(a);
        }
        let m = b.open().await?;
        crashed = m.finalize().await.is_err();
    }
    // The next start (no crash) resumes from the last persisted checkpoint.
    let mut b = VersionManager::<New>::builder(FileStore::new(&path)).retry(fast_retry());
    for a in migrating_actions(data.clone(), log.clone()) {
        b = b.action(a);
    }
    let m = b.open().await?;
    m.resume().await?;
    if m.state() != UpgradeState::Finalized {
        m.finalize().await?;
    }
    assert_eq!(m.state(), UpgradeState::Finalized);
    let applied: Vec<String> =
        serde_json::from_slice(&std::fs::read(&data).expect("data")).expect("json");
    let runs = log.lock().expect("log").len();
    Ok((applied, if crashed { runs } else { 0 }))
}

#[tokio::test]
async fn a_crash_at_every_write_of_finalization_resumes_to_the_same_data(
) -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (expected, _) = migrate_once(dir.path(), None).await?;
    assert_eq!(expected, ["b1", "b2", "c1", "c2", "c3"]);
    // Finalization writes: marker, 2 steps, apparent 2, 3 steps, apparent 3, clear = 9.
    let mut crashes = 0;
    for crash_at in 1..=9 {
        let dir = tempfile::tempdir().expect("tempdir");
        let (applied, runs) = migrate_once(dir.path(), Some(crash_at)).await?;
        assert_eq!(applied, expected, "crash at write {crash_at}");
        if runs > 0 {
            crashes += 1;
            // At least once: no step is skipped; at most the crashed step runs twice.
            assert!(
                (5..=6).contains(&runs),
                "crash at write {crash_at}: {runs} step runs"
            );
        }
    }
    assert_eq!(crashes, 9, "every injected crash interrupted finalization");
    Ok(())
}

#[tokio::test]
async fn transient_failures_are_retried_and_shown_permanent_ones_stop_finalization(
) -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 1);
    let attempts = Arc::new(AtomicUsize::new(0));
    let broken = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let seen_retrying = Arc::new(Mutex::new(None));
    let (a, br) = (attempts.clone(), broken.clone());
    let m_slot: Arc<Mutex<Option<VersionManager<New>>>> = Arc::new(Mutex::new(None));
    let (slot, seen) = (m_slot.clone(), seen_retrying.clone());
    let flaky = UpgradeAction::new(New::B, "flaky").step("connect", move || {
        let n = a.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 2 {
            // While the step is being retried, status says so.
            let m = slot.lock().expect("slot").clone();
            *seen.lock().expect("seen") = m.and_then(|m| m.status().retrying);
        }
        async move {
            if n < 3 {
                Err(ActionError::Transient(format!("database restarting ({n})")))
            } else {
                Ok(())
            }
        }
    });
    let strict = UpgradeAction::new(New::C, "strict").step("check", move || {
        let broken = br.load(Ordering::SeqCst);
        async move {
            if broken {
                Err(ActionError::Permanent(
                    "row 7 has no control-path id".into(),
                ))
            } else {
                Ok(())
            }
        }
    });
    let m = VersionManager::<New>::builder(FileStore::new(file(dir.path())))
        .retry(fast_retry())
        .action(flaky)
        .action(strict)
        .open()
        .await?;
    *m_slot.lock().expect("slot") = Some(m.clone());
    let err = m.finalize().await.expect_err("permanent failure");
    assert!(
        matches!(&err, UpgradeError::ActionFailed { version: 3, action, .. } if action == "strict"),
        "{err}"
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert!(seen_retrying
        .lock()
        .expect("seen")
        .as_deref()
        .is_some_and(|r| r.contains("database restarting (1)")));
    // Version B was finalized before the failure; C waits, and status shows why.
    assert_eq!(m.apparent(), New::B);
    let status = m.status();
    assert_eq!(status.state, UpgradeState::Finalizing);
    assert!(
        status
            .failed
            .as_deref()
            .is_some_and(|f| f.contains("row 7")),
        "{status:?}"
    );
    // Fixed by the operator, finalize again: it continues at the failed step only.
    broken.store(false, Ordering::SeqCst);
    assert_eq!(m.finalize().await?, FinalizeOutcome::Finalized);
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        3,
        "the finished action is not run again"
    );
    assert_eq!(m.status().failed, None);
    Ok(())
}

#[tokio::test]
async fn every_version_must_be_used_and_deferred_options_are_reported() -> Result<(), UpgradeError>
{
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 1);
    let m = VersionManager::<New>::open(FileStore::new(file(dir.path()))).await?;
    assert_eq!(m.unused_versions(), vec![New::B, New::C]);
    let _gate = m.gate(New::B, "feature B");
    // An option whose effect would block a downgrade is read but not acted on.
    assert!(!m.config_option(New::C, "[pci] managed = false"));
    assert_eq!(m.unused_versions(), Vec::<New>::new());
    assert_eq!(m.status().deferred.len(), 1);
    assert!(m.status().deferred[0].contains("[pci] managed = false"));
    m.finalize().await?;
    assert!(m.config_option(New::C, "[pci] managed = false"));
    assert!(m.status().deferred.is_empty());
    assert_eq!(New::software().number(), 3);
    Ok(())
}

#[tokio::test]
async fn values_introduced_by_a_version_wait_for_it() -> Result<(), UpgradeError> {
    #[derive(Debug)]
    enum HandleState {
        Available,
        Cleaning,
    }
    impl verso_upgrade::Introduced<New> for HandleState {
        fn introduced_in(&self) -> Option<New> {
            match self {
                HandleState::Available => None,
                HandleState::Cleaning => Some(New::C),
            }
        }
        fn describe(&self) -> String {
            format!("HandleState::{self:?}")
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    write_record(&file(dir.path()), 1);
    let m = VersionManager::<New>::open(FileStore::new(file(dir.path()))).await?;
    assert!(m.check_value(&HandleState::Available).is_ok());
    let err = m.check_value(&HandleState::Cleaning).expect_err("not yet");
    assert_eq!(err.feature, "HandleState::Cleaning");
    m.finalize().await?;
    assert!(m.check_value(&HandleState::Cleaning).is_ok());
    Ok(())
}

#[tokio::test]
async fn a_fresh_client_can_start_at_its_servers_version() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = VersionManager::<New>::builder(FileStore::new(file(dir.path())))
        .fresh_at(New::B)
        .open()
        .await?;
    assert_eq!(
        (m.apparent(), m.state()),
        (New::B, UpgradeState::PreFinalized)
    );
    let on_disk = FileStore::new(file(dir.path()))
        .load()
        .await?
        .expect("persisted");
    assert_eq!(on_disk.apparent, 2);
    Ok(())
}
