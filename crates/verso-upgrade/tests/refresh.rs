//! `VersionManager::refresh`: several processes (conductors) over one store, one of them
//! finalizes, the others catch up without a restart; never backwards, never over a
//! finalization of their own.

use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use verso_upgrade::store::{PersistedState, StoreError};
use verso_upgrade::{
    component_versions, ActionError, Coordinator, FileStore, RetryPolicy, UpgradeAction,
    UpgradeError, UpgradeState, VersionManager, VersionStore,
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

fn file(dir: &Path) -> PathBuf {
    dir.join("conductor.version")
}

fn record(apparent: u32) -> PersistedState {
    PersistedState {
        format: 1,
        component: "conductor".into(),
        apparent,
        finalizing: None,
    }
}

/// A file store counting its writes.
struct Counting {
    inner: FileStore,
    saves: Arc<AtomicUsize>,
}

#[async_trait]
impl VersionStore for Counting {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        self.inner.load().await
    }
    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        self.saves.fetch_add(1, Ordering::SeqCst);
        self.inner.save(state).await
    }
}

#[tokio::test]
async fn a_finalization_by_another_manager_opens_the_gates_on_refresh() -> Result<(), UpgradeError>
{
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(1)).await?;
    let a = VersionManager::<New>::open(FileStore::new(&path)).await?;
    let b = VersionManager::<New>::open(FileStore::new(&path)).await?;
    let gate = b.gate(New::C, "feature C");
    a.finalize().await?;
    assert_eq!(a.state(), UpgradeState::Finalized);
    // B read the record at its start only.
    assert!(!gate.is_open());
    assert_eq!(b.state(), UpgradeState::PreFinalized);

    assert!(b.refresh().await?, "advanced");
    assert!(gate.is_open());
    assert_eq!(b.apparent(), New::C);
    assert_eq!(b.state(), UpgradeState::Finalized);
    assert_eq!(b.status().apparent, 3);
    // Once caught up, nothing more to take.
    assert!(!b.refresh().await?);
    Ok(())
}

#[tokio::test]
async fn a_refresh_with_nothing_new_returns_false_and_writes_nothing() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(2)).await?;
    let saves = Arc::new(AtomicUsize::new(0));
    let m = VersionManager::<New>::open(Counting {
        inner: FileStore::new(&path),
        saves: saves.clone(),
    })
    .await?;
    let before = std::fs::read(&path).expect("read");
    for _ in 0..3 {
        assert!(!m.refresh().await?);
    }
    assert_eq!(saves.load(Ordering::SeqCst), 0, "refresh never writes");
    assert_eq!(std::fs::read(&path).expect("read"), before);
    assert_eq!(m.apparent(), New::B);
    assert_eq!(m.state(), UpgradeState::PreFinalized);
    Ok(())
}

#[tokio::test]
async fn a_refresh_never_lowers_the_apparent_version() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    let m = VersionManager::<New>::open(FileStore::new(&path)).await?;
    assert_eq!(m.apparent(), New::C);
    // An older record comes back under it (a restored backup, a stale writer).
    FileStore::new(&path).save(&record(1)).await?;
    assert!(!m.refresh().await?);
    assert_eq!(m.apparent(), New::C);
    assert!(m.is_allowed(New::C));
    assert_eq!(m.status().apparent, 3);
    Ok(())
}

#[tokio::test]
async fn a_record_finalized_by_newer_software_is_refused_as_at_start() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(1)).await?;
    let m = VersionManager::<New>::open(FileStore::new(&path)).await?;
    FileStore::new(&path).save(&record(4)).await?;
    let err = m
        .refresh()
        .await
        .expect_err("a version this build does not know");
    assert!(
        matches!(
            err,
            UpgradeError::DowngradeAfterFinalization { apparent: 4, .. }
        ),
        "{err}"
    );
    assert_eq!(m.apparent(), New::Initial);
    Ok(())
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(5),
        attempts: 2,
    }
}

#[tokio::test]
async fn a_refresh_during_this_managers_own_finalization_does_nothing() -> Result<(), UpgradeError>
{
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(1)).await?;
    let (inside, go) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (i, g) = (inside.clone(), go.clone());
    let m = VersionManager::<New>::builder(FileStore::new(&path))
        .action(UpgradeAction::new(New::B, "slow").step("wait", move || {
            let (i, g) = (i.clone(), g.clone());
            async move {
                i.notify_one();
                g.notified().await;
                Ok::<(), ActionError>(())
            }
        }))
        .open()
        .await?;
    let finalizing = tokio::spawn({
        let m = m.clone();
        async move { m.finalize().await }
    });
    inside.notified().await;
    // Another process's write lands meanwhile: this manager's finalization owns the
    // record until it ends, so refresh leaves it alone (and does not wait for it).
    FileStore::new(&path).save(&record(3)).await?;
    let refreshed = tokio::time::timeout(Duration::from_secs(5), m.refresh())
        .await
        .expect("refresh does not wait for the finalization")?;
    assert!(!refreshed);
    assert_eq!(m.apparent(), New::Initial);
    go.notify_one();
    finalizing.await.expect("join")?;
    assert_eq!(m.state(), UpgradeState::Finalized);
    Ok(())
}

#[tokio::test]
async fn a_refresh_keeps_this_managers_own_marker() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(1)).await?;
    let m = VersionManager::<New>::builder(FileStore::new(&path))
        .action(
            UpgradeAction::new(New::B, "broken").step("fails", || async {
                Err::<(), _>(ActionError::Permanent("no such table".into()))
            }),
        )
        .retry(fast_retry())
        .open()
        .await?;
    m.finalize().await.expect_err("the action fails");
    assert_eq!(m.state(), UpgradeState::Finalizing);
    assert!(m.status().failed.is_some());
    // Another process (without the broken action) finalized over the same store.
    FileStore::new(&path).save(&record(3)).await?;
    assert!(m.refresh().await?);
    assert!(m.is_allowed(New::C));
    // Its own marker (and the failure it records) stays until its own finalize clears it.
    assert_eq!(m.state(), UpgradeState::Finalizing);
    assert!(m.status().failed.is_some());
    m.finalize().await?;
    assert_eq!(m.state(), UpgradeState::Finalized);
    let stored = FileStore::new(&path).load().await?.expect("record");
    assert_eq!((stored.apparent, stored.finalizing), (3, None));
    Ok(())
}

#[tokio::test]
async fn a_refreshed_coordinator_tells_its_clients_to_finalize() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(1)).await?;
    let a = VersionManager::<New>::open(FileStore::new(&path)).await?;
    let b = VersionManager::<New>::open(FileStore::new(&path)).await?;
    let a = Coordinator::new(a, "agent", Duration::from_secs(60));
    let b = Coordinator::new(b, "agent", Duration::from_secs(60));
    a.finalize().await?;
    let agent_file = dir.path().join("agent.version");
    FileStore::new(&agent_file).save(&record(1)).await?;
    let agent = VersionManager::<New>::open(FileStore::new(&agent_file)).await?;
    let before = b
        .heartbeat(agent.report("a1", "h1"))
        .await
        .expect("heartbeat");
    assert_eq!((before.server_apparent, before.finalize_to), (1, None));
    assert!(b.manager().refresh().await?);
    let after = b
        .heartbeat(agent.report("a1", "h1"))
        .await
        .expect("heartbeat");
    assert_eq!((after.server_apparent, after.finalize_to), (3, Some(3)));
    Ok(())
}

#[tokio::test]
async fn status_and_finalize_refresh_first() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = file(dir.path());
    FileStore::new(&path).save(&record(1)).await?;
    let a = VersionManager::<New>::open(FileStore::new(&path)).await?;
    let b = VersionManager::<New>::open(FileStore::new(&path)).await?;
    let saves = Arc::new(AtomicUsize::new(0));
    let c = VersionManager::<New>::open(Counting {
        inner: FileStore::new(&path),
        saves: saves.clone(),
    })
    .await?;
    a.finalize().await?;
    let b = Coordinator::new(b, "agent", Duration::from_secs(60));
    assert_eq!(b.status().await?.server.apparent, 1, "not re-read yet");
    let status = b.refreshed_status().await?;
    assert_eq!(
        (status.server.apparent, status.state),
        (3, UpgradeState::Finalized)
    );
    // A finalize reaching a server another one finalized is a no-op.
    let c = Coordinator::new(c, "agent", Duration::from_secs(60));
    assert_eq!(
        c.finalize().await?,
        verso_upgrade::FinalizeProgress::AlreadyFinalized
    );
    assert_eq!(saves.load(Ordering::SeqCst), 0);
    Ok(())
}
