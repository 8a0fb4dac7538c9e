//! Release N's conductor: schema N (migration 1) on SQLite or PostgreSQL, the
//! `conductor` API 1.0 on topic `accel-conductor`, and the `upgrade` admin API
//! (heartbeats, finalize, status) on topic `accel-upgrade`, with a verso-upgrade
//! [`Coordinator`] over the component record in the database.
//!
//! [`start`] migrates a fresh database to schema N. It also runs on a database release
//! N+1 has migrated but not finalized (the downgrade window): a release's migrations
//! before finalization only add columns and tables (see `accel_conductor::db`), so release
//! N's queries, which name their columns, work on the expanded schema and ignore what
//! they do not know. It refuses a database whose `accel` record was finalized above
//! release N's version, or whose finalization to such a version has started
//! ([`StartError::FinalizedByNewer`]), and one with newer migrations but no `accel` record
//! at all ([`StartError::SchemaNewer`]): release N never ran on it, so it is no upgrade
//! of release N's and nothing says it is still inside a downgrade window.

pub mod db;
pub mod service;
pub mod versions;

use crate::objects::AccelVersion;
use crate::rpc::{CONDUCTOR_TOPIC, UPGRADE_TOPIC};
use crate::schema::SCHEMA_VERSION;
use db::{redact_url, Db, DbError};
use std::sync::Arc;
use std::time::Duration;
use versions::DbVersionStore;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcError, RpcServer, ServerHandle, Target};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{ComponentVersion, Coordinator, Observed, UpgradeError, VersionManager};

/// How long the conductor waits for its database at start.
pub const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// How long an agent may go without a heartbeat before it no longer counts as live.
pub const AGENT_LIVENESS: Duration = Duration::from_secs(180);

/// Why release N's conductor did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database could not be opened, read or migrated.
    #[error("release N conductor: {0}")]
    Db(#[from] DbError),
    /// The database has migrations of a newer release and no `accel` component record:
    /// it was created by a newer release (its migrations applied before any conductor
    /// ran), not upgraded from release N, so release N cannot tell it is inside a
    /// downgrade window.
    #[error(
        "release N conductor: the database {url} has migrations {newer:?}, newer than release N's schema (migration {known}), \
         and no accel version record: it was created by a newer release, not upgraded from release N; \
         run release N+1 (or newer) on it, or restore a backup taken before the upgrade"
    )]
    SchemaNewer {
        /// The database URL, password masked.
        url: String,
        /// The applied migrations release N does not have.
        newer: Vec<i64>,
        /// The newest migration release N has.
        known: i64,
    },
    /// The database was finalized at a component version above release N's.
    #[error(
        "release N conductor: the database {url} was finalized at accel version {apparent} by a newer release; \
         release N runs accel version {software} and cannot act as {apparent}: a finalized upgrade cannot be \
         rolled back, run release N+1 (accel version {apparent}) or newer"
    )]
    FinalizedByNewer {
        /// The database URL, password masked.
        url: String,
        /// The recorded apparent version (or the target of a finalization under way).
        apparent: u32,
        /// Release N's software version.
        software: u32,
    },
    /// The version record could not be used.
    #[error("release N conductor: component versions: {0}")]
    Versions(#[source] UpgradeError),
    /// A server could not start on the transport.
    #[error("release N conductor: cannot serve on the transport: {0}")]
    Rpc(#[from] RpcError),
}

/// A running release N conductor.
pub struct RunningConductor {
    db_url: String,
    db: Db,
    servers: Vec<ServerHandle>,
}

impl std::fmt::Debug for RunningConductor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningConductor")
            .field("db_url", &redact_url(&self.db_url))
            .finish_non_exhaustive()
    }
}

impl RunningConductor {
    /// The database URL it runs on.
    pub fn db_url(&self) -> &str {
        &self.db_url
    }

    /// Its database.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Stops serving and closes the database.
    pub async fn stop(self) {
        for s in self.servers {
            s.stop().await;
        }
        self.db.close().await;
    }
}

/// What [`check_database`] found on a database release N can run on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatabaseCheck {
    /// Applied migrations newer than release N's (release N+1's, before finalization):
    /// release N runs on that expanded schema and ignores the columns it added.
    pub newer: Vec<i64>,
}

/// Checks that release N can run on `db` (see [`StartError`]) without changing it, and
/// logs a warning when it runs on a schema expanded by a newer release.
///
/// The `accel` record decides: finalized above release N's version, or a finalization to
/// such a version started (any checkpoint), is [`StartError::FinalizedByNewer`]. Newer
/// migrations under a record still at release N's version are the downgrade window:
/// allowed. Newer migrations without any record are [`StartError::SchemaNewer`].
pub async fn check_database(db: &Db, url: &str) -> Result<DatabaseCheck, StartError> {
    let applied = db.applied_migrations().await?;
    let newer: Vec<i64> = applied
        .iter()
        .copied()
        .filter(|v| *v > SCHEMA_VERSION)
        .collect();
    let mut recorded = false;
    if applied.contains(&SCHEMA_VERSION) {
        let store = DbVersionStore::new(db.clone(), AccelVersion::COMPONENT);
        if let Some(record) = store
            .load()
            .await
            .map_err(|e| StartError::Versions(e.into()))?
        {
            recorded = true;
            let mut newest = record.apparent;
            if let Some(f) = &record.finalizing {
                newest = newest.max(f.target);
            }
            if let Ok(Observed::Future(n)) = AccelVersion::observe(newest) {
                return Err(StartError::FinalizedByNewer {
                    url: redact_url(url),
                    apparent: n,
                    software: AccelVersion::software().number(),
                });
            }
        }
    }
    if newer.is_empty() {
        return Ok(DatabaseCheck::default());
    }
    if !recorded {
        return Err(StartError::SchemaNewer {
            url: redact_url(url),
            newer,
            known: SCHEMA_VERSION,
        });
    }
    tracing::warn!(
        url = %redact_url(url),
        newer = ?newer,
        known = SCHEMA_VERSION,
        "release N runs on a schema expanded by a newer release (migrations {newer:?} above release N's {SCHEMA_VERSION}), \
         not finalized: it ignores the added columns until the upgrade is finalized or rolled back"
    );
    Ok(DatabaseCheck { newer })
}

fn versions_error(e: UpgradeError, url: &str) -> StartError {
    match e {
        UpgradeError::DowngradeAfterFinalization {
            apparent, software, ..
        } => StartError::FinalizedByNewer {
            url: redact_url(url),
            apparent,
            software,
        },
        UpgradeError::DowngradeDuringFinalization {
            target, software, ..
        } => StartError::FinalizedByNewer {
            url: redact_url(url),
            apparent: target,
            software,
        },
        e => StartError::Versions(e),
    }
}

/// Starts release N's conductor on `database_url` (created and migrated to schema N
/// when fresh) and `transport`.
pub async fn start(
    database_url: &str,
    transport: Arc<dyn Transport>,
) -> Result<RunningConductor, StartError> {
    let db = Db::connect(database_url, CONNECT_WAIT).await?;
    match serve(&db, database_url, transport).await {
        Ok(servers) => Ok(RunningConductor {
            db_url: database_url.to_owned(),
            db,
            servers,
        }),
        Err(e) => {
            db.close().await;
            Err(e)
        }
    }
}

async fn serve(
    db: &Db,
    url: &str,
    transport: Arc<dyn Transport>,
) -> Result<Vec<ServerHandle>, StartError> {
    check_database(db, url).await?;
    if db.migrate().await? {
        tracing::info!(url = %redact_url(url), "database migrated to release N's schema");
    }
    let recovered = db.recover_interrupted_binds().await?;
    if recovered > 0 {
        tracing::warn!(
            recovered,
            "binds interrupted by a restart marked BindFailed"
        );
    }
    let versions = VersionManager::<AccelVersion>::open(DbVersionStore::new(
        db.clone(),
        AccelVersion::COMPONENT,
    ))
    .await
    .map_err(|e| versions_error(e, url))?;
    let coordinator = Arc::new(Coordinator::new(versions, "agent", AGENT_LIVENESS));
    coordinator
        .resume()
        .await
        .map_err(|e| versions_error(e, url))?;
    let conductor = RpcServer::new(transport.clone(), Target::new(CONDUCTOR_TOPIC))
        .endpoint(service::endpoint(db.clone()))?
        .start()
        .await?;
    let upgrade = match RpcServer::new(transport, Target::new(UPGRADE_TOPIC))
        .endpoint(verso_upgrade::admin::endpoint(coordinator))
    {
        Ok(server) => server.start().await,
        Err(e) => Err(e),
    };
    match upgrade {
        Ok(upgrade) => Ok(vec![conductor, upgrade]),
        Err(e) => {
            conductor.stop().await;
            Err(e.into())
        }
    }
}
