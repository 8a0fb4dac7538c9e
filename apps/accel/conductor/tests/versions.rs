//! The conductor's component versions in its database, on SQLite and PostgreSQL: fresh
//! install, pre-finalized after an upgrade, finalized, downgrade refused after it.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing as support;

use accel_conductor::{Db, DbVersionStore};
use verso_upgrade::{component_versions, UpgradeError, UpgradeState, VersionManager};

component_versions! {
    /// Release N+1.
    pub enum New: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
        /// Release N+1.
        Next = 2 => "release N+1",
    }
}

component_versions! {
    /// Release N.
    pub enum Old: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
    }
}

async fn upgrade_cycle(db: &Db) -> Result<(), UpgradeError> {
    // Release N installs fresh.
    let old = VersionManager::<Old>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    assert_eq!(old.state(), UpgradeState::Finalized);
    // Release N+1 starts on its record: pre-finalized; N still starts (downgrade window).
    let new = VersionManager::<New>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    assert_eq!(new.state(), UpgradeState::PreFinalized);
    VersionManager::<Old>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    new.finalize().await?;
    // Another conductor of the deployment reads the same record.
    let other = VersionManager::<New>::open(DbVersionStore::new(db.clone(), "conductor")).await?;
    assert_eq!(other.state(), UpgradeState::Finalized);
    let err = VersionManager::<Old>::open(DbVersionStore::new(db.clone(), "conductor"))
        .await
        .expect_err("downgrade after finalization");
    assert!(
        matches!(
            err,
            UpgradeError::DowngradeAfterFinalization {
                apparent: 2,
                software: 1,
                ..
            }
        ),
        "{err}"
    );
    Ok(())
}

#[tokio::test]
async fn sqlite_versions() -> Result<(), UpgradeError> {
    let (db, _dir) = support::sqlite().await;
    upgrade_cycle(&db).await
}

#[tokio::test]
async fn postgres_versions() -> Result<(), UpgradeError> {
    upgrade_cycle(&support::postgres().await).await
}

#[tokio::test]
async fn mysql_versions() -> Result<(), UpgradeError> {
    upgrade_cycle(&support::mysql().await).await
}
