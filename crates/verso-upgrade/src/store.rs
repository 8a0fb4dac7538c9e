//! Where a component keeps its apparent version and its finalization marker.
//!
//! The record is written *before* the component acts on it: a component that crashes
//! right after a write finds it on the next start, and one that crashes right before
//! finds the previous record and does the step again (every plain step is idempotent;
//! a transactional step's data was rolled back with its record).
//!
//! [`FileStore`] keeps the record in a small JSON file, replaced atomically (temp file in
//! the same directory, fsync, rename, fsync of the directory), so a crash or a power
//! loss leaves either the old record or the new one, never a torn one. A service with a
//! database implements [`VersionStore`] over it and, so that an upgrade step's data and
//! its completion commit together, [`TransactionalStore`]: the record is then written in
//! the same transaction as the data the step changes (see
//! [`UpgradeAction::step_in_tx`](crate::UpgradeAction::step_in_tx)).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The persisted facts a component's upgrade state is derived from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedState {
    /// The record's format; this build writes and reads 1.
    pub format: u32,
    /// Which component wrote it (`conductor`, `agent`): a file of another component is refused.
    pub component: String,
    /// The apparent version's number.
    pub apparent: u32,
    /// Present while a finalization is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizing: Option<Finalizing>,
}

/// The marker of a finalization under way (Ozone's finalization checkpoints).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finalizing {
    /// How far it got.
    pub checkpoint: Checkpoint,
    /// The version being finalized to: the software version of the build that started it.
    pub target: u32,
    /// The upgrade-action steps already completed for the version after `apparent`
    /// (`"<version>/<action>/<step>"`); cleared when the apparent version moves on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps_done: Vec<String>,
    /// The last permanent failure, shown in status until a new attempt starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// A persisted finalization checkpoint. *Required* (apparent below software, no
/// marker) and *complete* (apparent at software, no marker) are derived, not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Checkpoint {
    /// The operator asked; the component's own upgrade actions are running.
    Started,
    /// A server has finalized itself; its clients are being finalized.
    ServerFinalized,
}

/// Errors of a [`VersionStore`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record could not be read.
    #[error("cannot read the version file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The record could not be written.
    #[error("cannot write the version file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The record is not one this build can read.
    #[error("the version file {path} is corrupt or not a version file: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A store over something else than a file (a database) failed.
    #[error("version store: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Keeps one component's [`PersistedState`].
#[async_trait]
pub trait VersionStore: Send + Sync + 'static {
    /// The record, or `None` before the first start (a fresh install).
    async fn load(&self) -> Result<Option<PersistedState>, StoreError>;
    /// Replaces the record durably: when this returns `Ok`, a crash cannot lose it.
    async fn save(&self, state: &PersistedState) -> Result<(), StoreError>;
}

/// A [`VersionStore`] that can write the record inside a transaction of the store's
/// backend (a database), together with other data: what lets an upgrade step's data and
/// its completion be one transaction
/// ([`UpgradeAction::step_in_tx`](crate::UpgradeAction::step_in_tx)).
///
/// The manager calls [`begin`](Self::begin), reads the stored record with
/// [`load_in`](Self::load_in) (which locks it), and, unless the record already lists the
/// step as done, hands the transaction to the step, then [`save_in`](Self::save_in) with
/// the stored record plus the step, then [`commit`](Self::commit); if the step or the
/// save fails, or the step turns out to be done already, it calls
/// [`rollback`](Self::rollback). A transaction dropped without either (a crash, a
/// cancelled future) must leave nothing behind: database transactions roll back.
///
/// Several managers may finalize over one store at once (two conductor processes on one
/// database): the lock `load_in` takes is what keeps a transactional step to one run, and
/// [`update`](Self::update) is how the manager writes the rest of the record without
/// overwriting what another manager committed meanwhile.
///
/// This crate knows nothing of the backend: `Tx` is whatever the store's transaction
/// is (`sqlx::Transaction<'static, Any>` for accel's conductor).
#[async_trait]
pub trait TransactionalStore: VersionStore {
    /// The backend's transaction. `'static` because steps receive it type-erased.
    type Tx: Send + 'static;
    /// Opens a transaction.
    async fn begin(&self) -> Result<Self::Tx, StoreError>;
    /// Reads the record inside `tx` (`None` before the first start) **and locks it**:
    /// until `tx` commits or rolls back, another transaction's `load_in` (and
    /// [`update`](Self::update)) waits, and then reads what `tx` committed. Two
    /// transactions must never both read the record and then both write it: a lock that
    /// is only taken by the first write is not enough if two transactions can read
    /// before either writes (PostgreSQL: `SELECT ... FOR UPDATE`; SQLite: a transaction
    /// that takes the write lock before it reads, `BEGIN IMMEDIATE` or a first write).
    async fn load_in(&self, tx: &mut Self::Tx) -> Result<Option<PersistedState>, StoreError>;
    /// Replaces the record inside `tx`: it becomes durable only when `tx` commits.
    async fn save_in(&self, tx: &mut Self::Tx, state: &PersistedState) -> Result<(), StoreError>;
    /// Commits `tx`: when this returns `Ok`, a crash cannot lose the record or the data.
    async fn commit(&self, tx: Self::Tx) -> Result<(), StoreError>;
    /// Abandons `tx`: neither the record nor the data written in it remains.
    async fn rollback(&self, tx: Self::Tx) -> Result<(), StoreError>;

    /// Replaces the record by `change(stored record)`, atomically against other
    /// transactions and updates (a read-modify-write under the lock of
    /// [`load_in`](Self::load_in)), and returns what it wrote: how the manager writes the
    /// record outside a step (the marker, a plain step done, the apparent version).
    /// When this returns `Ok`, a crash cannot lose it.
    ///
    /// The default is [`begin`](Self::begin), `load_in`, [`save_in`](Self::save_in),
    /// [`commit`](Self::commit); a store that can do it in one operation may override it.
    async fn update(
        &self,
        change: &(dyn Fn(Option<PersistedState>) -> PersistedState + Send + Sync),
    ) -> Result<PersistedState, StoreError> {
        let mut tx = self.begin().await?;
        let next = match self.load_in(&mut tx).await {
            Ok(stored) => change(stored),
            Err(e) => {
                let _ = self.rollback(tx).await;
                return Err(e);
            }
        };
        if let Err(e) = self.save_in(&mut tx, &next).await {
            let _ = self.rollback(tx).await;
            return Err(e);
        }
        self.commit(tx).await?;
        Ok(next)
    }
}

/// A [`VersionStore`] in a JSON file, replaced atomically.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use verso_upgrade::store::{FileStore, PersistedState, VersionStore};
/// let dir = tempfile::tempdir()?;
/// let store = FileStore::new(dir.path().join("conductor.version"));
/// assert_eq!(store.load().await?, None);
/// let state = PersistedState { format: 1, component: "conductor".into(), apparent: 2, finalizing: None };
/// store.save(&state).await?;
/// assert_eq!(store.load().await?, Some(state));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    /// A store in `path`; its directory must exist (it is not created behind the
    /// operator's back).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn load_blocking(path: &Path) -> Result<Option<PersistedState>, StoreError> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(StoreError::Read {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let state: PersistedState =
            serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
                path: path.to_owned(),
                why: e.to_string(),
            })?;
        if state.format != 1 {
            return Err(StoreError::Corrupt {
                path: path.to_owned(),
                why: format!(
                    "format {} (this build reads format 1; it was written by newer software)",
                    state.format
                ),
            });
        }
        Ok(Some(state))
    }

    fn save_blocking(path: &Path, state: &PersistedState) -> Result<(), StoreError> {
        let write_err = |source| StoreError::Write {
            path: path.to_owned(),
            source,
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        let mut body = serde_json::to_vec_pretty(state)
            .map_err(|e| write_err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        body.push(b'\n');
        let mut tmp = tempfile::Builder::new()
            .prefix(".verso-version-")
            .tempfile_in(&dir)
            .map_err(write_err)?;
        tmp.write_all(&body).map_err(write_err)?;
        tmp.as_file().sync_all().map_err(write_err)?;
        tmp.persist(path).map_err(|e| write_err(e.error))?;
        // The rename is durable only once the directory entry is.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(write_err)?;
        Ok(())
    }
}

#[async_trait]
impl VersionStore for FileStore {
    async fn load(&self) -> Result<Option<PersistedState>, StoreError> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || Self::load_blocking(&path))
            .await
            .map_err(|e| StoreError::Backend(Box::new(e)))?
    }

    async fn save(&self, state: &PersistedState) -> Result<(), StoreError> {
        let path = self.path.clone();
        let state = state.clone();
        tokio::task::spawn_blocking(move || Self::save_blocking(&path, &state))
            .await
            .map_err(|e| StoreError::Backend(Box::new(e)))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(apparent: u32) -> PersistedState {
        PersistedState {
            format: 1,
            component: "agent".into(),
            apparent,
            finalizing: Some(Finalizing {
                checkpoint: Checkpoint::Started,
                target: 3,
                steps_done: vec!["2/migrate/0".into()],
                failed: None,
            }),
        }
    }

    #[tokio::test]
    async fn a_saved_record_is_read_back_and_replaced_whole() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Backend(Box::new(e)))?;
        let store = FileStore::new(dir.path().join("agent.version"));
        store.save(&state(1)).await?;
        store.save(&state(2)).await?;
        assert_eq!(store.load().await?, Some(state(2)));
        // No temp file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .map_err(|e| StoreError::Backend(Box::new(e)))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("agent.version")]);
        Ok(())
    }

    #[tokio::test]
    async fn corrupt_and_future_formats_are_typed_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("v");
        std::fs::write(&path, b"{not json").expect("write");
        let err = FileStore::new(&path).load().await.expect_err("corrupt");
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        std::fs::write(
            &path,
            br#"{"format": 2, "component": "agent", "apparent": 1}"#,
        )
        .expect("write");
        let err = FileStore::new(&path)
            .load()
            .await
            .expect_err("future format");
        assert!(err.to_string().contains("format 2"), "{err}");
    }

    #[tokio::test]
    async fn a_missing_directory_is_a_write_error_naming_the_file() {
        let store = FileStore::new("/nonexistent-verso-dir/agent.version");
        let err = store.save(&state(1)).await.expect_err("no directory");
        assert!(
            err.to_string()
                .contains("/nonexistent-verso-dir/agent.version"),
            "{err}"
        );
    }
}
