//! Two conductors on one database (each its own pool: two processes) and one memory
//! transport, on SQLite (a file) and PostgreSQL: the operator's finalize reaches
//! conductor A; conductor B, which only read the version record at its start, opens its
//! gates and tells the agents heartbeating to it within its refresh interval, without a
//! restart.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use accel_conductor::runtime::{self, RunningConductor, StartOptions};
use accel_conductor::testing as support;
use accel_conductor::{Db, DbVersionStore};
use accel_objects::AccelVersion;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_upgrade::store::{PersistedState, VersionStore};
use verso_upgrade::{
    ComponentVersion, FinalizeProgress, HeartbeatReply, MemberReport, UpgradeState,
};

/// The refresh interval here: short, so the bounded wait below stays short.
const REFRESH: Duration = Duration::from_millis(100);
/// Far longer than REFRESH (a loaded CI machine), far shorter than a test timeout.
const WITHIN: Duration = Duration::from_secs(10);

async fn conductor(db: &Db, transport: &Arc<dyn Transport>) -> RunningConductor {
    runtime::start_with(
        db.clone(),
        transport.clone(),
        Some("1.1".parse().expect("cap")),
        StartOptions {
            version_refresh: REFRESH,
            ..StartOptions::default()
        },
    )
    .await
    .expect("conductor starts")
}

/// An agent of release N+1 not yet finalized (apparent: release N).
fn agent() -> MemberReport {
    MemberReport {
        id: "agent-1".into(),
        host: "host-1".into(),
        software: AccelVersion::software().number(),
        apparent: AccelVersion::Initial.number(),
        incarnation: None,
    }
}

async fn heartbeat(c: &RunningConductor) -> HeartbeatReply {
    c.coordinator
        .heartbeat(agent())
        .await
        .expect("the agent is not fenced")
}

/// `first` and `second` are two pools on one migrated database.
async fn a_finalization_through_one_conductor_reaches_the_other(first: Db, second: Db) {
    // Release N+1 started on release N's record: pre-finalized.
    DbVersionStore::new(first.clone(), AccelVersion::COMPONENT)
        .save(&PersistedState {
            format: 1,
            component: AccelVersion::COMPONENT.into(),
            apparent: AccelVersion::Initial.number(),
            finalizing: None,
        })
        .await
        .expect("seed the version record");
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let a = conductor(&first, &transport).await;
    let b = conductor(&second, &transport).await;
    let gate = b
        .versions
        .gate(AccelVersion::DriverFeatures, "NVMe secure cleanup");
    assert!(!gate.is_open());
    let before = heartbeat(&b).await;
    assert_eq!(
        (before.server_apparent, before.finalize_to),
        (AccelVersion::Initial.number(), None)
    );

    // The operator's finalize reaches A (the agent heartbeats to B; A knows of it from
    // the fleet record): A finalizes, and the agent, on new software, follows.
    let progress = a.coordinator.finalize().await.expect("finalize through A");
    assert_eq!(progress, FinalizeProgress::ServerFinalized);
    assert!(a.versions.is_allowed(AccelVersion::DriverFeatures));

    let deadline = Instant::now() + WITHIN;
    while !gate.is_open() {
        assert!(
            Instant::now() < deadline,
            "B's gate is still closed {WITHIN:?} after A finalized (B: {:?})",
            b.versions
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.versions.apparent(), AccelVersion::DriverFeatures);
    assert_eq!(b.versions.state(), UpgradeState::Finalized);
    // B's agents are told: the new apparent version, and to finalize to it.
    let after = heartbeat(&b).await;
    let finalized = AccelVersion::DriverFeatures.number();
    assert_eq!(
        (after.server_apparent, after.finalize_to),
        (finalized, Some(finalized))
    );
    // The agent finalizes and says so to B; A, which holds the marker, completes the
    // finalization from the fleet record within its refresh interval.
    b.coordinator
        .heartbeat(MemberReport {
            apparent: finalized,
            ..agent()
        })
        .await
        .expect("finalized agent");
    let deadline = Instant::now() + WITHIN;
    loop {
        // Nothing went backwards in the database, and the marker goes.
        let stored = DbVersionStore::new(second.clone(), AccelVersion::COMPONENT)
            .load()
            .await
            .expect("load")
            .expect("a record");
        assert_eq!(stored.apparent, finalized);
        if stored.finalizing.is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "A never completed: {stored:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    a.stop().await;
    b.stop().await;
    first.close().await;
    second.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_finalization_through_one_conductor_reaches_the_other() {
    let (first, dir) = support::sqlite().await;
    let second = Db::connect(&support::sqlite_url(&dir))
        .await
        .expect("second pool");
    a_finalization_through_one_conductor_reaches_the_other(first, second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_finalization_through_one_conductor_reaches_the_other() {
    let url = support::postgres_database().await;
    let first = Db::connect(&url).await.expect("first pool");
    support::make_schema(&first).await;
    let second = Db::connect(&url).await.expect("second pool");
    a_finalization_through_one_conductor_reaches_the_other(first, second).await;
}
