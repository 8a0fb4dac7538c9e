//! The fleet record in the database, with several conductors (each its own pool, as
//! separate processes have) on SQLite and PostgreSQL: heartbeats of release N agents
//! racing a finalize through another conductor are counted or fenced, never missed; a
//! host known only from its reports blocks finalization while live and is refused after.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use accel_conductor::runtime::{self, StartOptions};
use accel_conductor::testing as support;
use accel_conductor::{Db, DbFleetStore, DbVersionStore};
use accel_objects::rpc::{ConductorApi, ReportData, CONDUCTOR_TOPIC};
use accel_objects::{AccelVersion, DriverDeviceList};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verso::{Field, RequestContext, VersionedObject};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcError};
use verso_upgrade::fleet::{Admission, Admit, FleetStore, Heard, Incarnation};
use verso_upgrade::store::{
    Checkpoint, Finalizing, PersistedState, TransactionalStore, VersionStore,
};
use verso_upgrade::{ComponentVersion, Coordinator, MemberReport, UpgradeError};

fn pre_finalized() -> PersistedState {
    PersistedState {
        format: 1,
        component: AccelVersion::COMPONENT.into(),
        apparent: AccelVersion::Initial.number(),
        finalizing: None,
    }
}

/// A conductor's coordinator over `db` (its own pool), sharing the database's records.
async fn coordinator(db: &Db, name: &str) -> Coordinator<AccelVersion> {
    Coordinator::new(
        support::versions(db).await,
        "agent",
        Duration::from_secs(600),
    )
    .with_fleet(
        Arc::new(DbFleetStore::new(db.clone(), AccelVersion::COMPONENT)),
        name,
    )
}

fn release_n(host: &str) -> MemberReport {
    MemberReport {
        id: host.into(),
        host: host.into(),
        software: AccelVersion::Initial.number(),
        apparent: AccelVersion::Initial.number(),
        incarnation: None,
    }
}

/// Each round: twelve release N agents heartbeat to three conductors while a fourth
/// finalizes. Either the finalization is refused, or every one of them is fenced.
async fn racing_heartbeats_are_counted_or_fenced(url: &str) {
    let pools: Vec<Db> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(Db::connect(url).await.expect("pool"));
        }
        v
    };
    for round in 0..12 {
        sqlx::query("DELETE FROM fleet_members")
            .execute(pools[0].pool())
            .await
            .expect("clear the fleet");
        DbVersionStore::new(pools[0].clone(), AccelVersion::COMPONENT)
            .save(&pre_finalized())
            .await
            .expect("seed");
        let mut conductors = Vec::new();
        for (i, db) in pools.iter().enumerate() {
            conductors.push(Arc::new(coordinator(db, &format!("c{i}")).await));
        }
        let mut beats = Vec::new();
        for a in 0..12usize {
            let c = conductors[a % 3].clone();
            beats.push(tokio::spawn(async move {
                for _ in 0..(a % 4) {
                    tokio::task::yield_now().await;
                }
                c.heartbeat(release_n(&format!("host{a}"))).await.is_ok()
            }));
        }
        let finalized = conductors[3].finalize().await;
        let mut accepted = 0;
        for b in beats {
            accepted += usize::from(b.await.expect("task"));
        }
        let stored = conductors[3]
            .fleet()
            .members()
            .await
            .expect("members")
            .len();
        assert_eq!(
            stored, accepted,
            "round {round}: the record holds the accepted, only"
        );
        match finalized {
            Ok(_) => assert_eq!(
                accepted, 0,
                "round {round}: finalization started and {accepted} release N agents were accepted"
            ),
            Err(UpgradeError::Blocked(b)) => {
                assert!(!b.is_empty() && b.len() <= accepted, "round {round}: {b:?}");
            }
            Err(e) => panic!("round {round}: {e}"),
        }
    }
    for db in pools {
        db.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_racing_heartbeats_are_counted_or_fenced() {
    let (db, dir) = support::sqlite().await;
    db.close().await;
    racing_heartbeats_are_counted_or_fenced(&support::sqlite_url(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_racing_heartbeats_are_counted_or_fenced() {
    let url = support::postgres_database().await;
    let db = Db::connect(&url).await.expect("db");
    support::make_schema(&db).await;
    db.close().await;
    racing_heartbeats_are_counted_or_fenced(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_racing_heartbeats_are_counted_or_fenced() {
    let url = support::mysql_database().await;
    let db = Db::connect(&url).await.expect("db");
    support::make_schema(&db).await;
    db.close().await;
    racing_heartbeats_are_counted_or_fenced(&url).await;
}

/// What a conductor answers a report of `host` (an empty inventory).
async fn report(client: &RpcClient, host: &str) -> Result<(), RpcError> {
    let devices = DriverDeviceList {
        objects: Field::new(Vec::new()),
        ..DriverDeviceList::blank()
    };
    client
        .call_method(
            &RequestContext::new("report"),
            ReportData {
                hostname: host.into(),
                devices,
            },
        )
        .await
        .map(|_| ())
}

/// Cyborg 17's agent never heartbeats: two conductors on one database, its reports
/// through one block a finalize through the other until it is silent for the liveness
/// window; after that a host never heard heartbeating is refused, its report not applied.
async fn a_host_known_only_from_reports_blocks_finalization(first: Db, second: Db) {
    DbVersionStore::new(first.clone(), AccelVersion::COMPONENT)
        .save(&pre_finalized())
        .await
        .expect("seed");
    let liveness = Duration::from_millis(1500);
    let options = |name: &str| StartOptions {
        agent_liveness: liveness,
        conductor_id: Some(name.into()),
        ..StartOptions::default()
    };
    let t1: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let t2: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let a = runtime::start_with(first.clone(), t1.clone(), None, options("a"))
        .await
        .expect("a");
    let b = runtime::start_with(second.clone(), t2, None, options("b"))
        .await
        .expect("b");
    let to_a = RpcClient::for_api::<ConductorApi>(t1, CONDUCTOR_TOPIC);
    report(&to_a, "cyborg17-host")
        .await
        .expect("report applied");

    let err = b.coordinator.finalize().await.expect_err("blocked");
    let UpgradeError::Blocked(blockers) = &err else {
        panic!("{err}")
    };
    assert_eq!(blockers.len(), 1, "{blockers:?}");
    assert_eq!(
        (blockers[0].id.as_str(), blockers[0].software),
        ("cyborg17-host", 1)
    );
    let status = b.coordinator.status().await.expect("status");
    assert_eq!(
        (
            status.clients[0].heard_by.as_str(),
            status.clients[0].heartbeats
        ),
        ("a", false)
    );

    // Silent past the window: it no longer blocks.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match b.coordinator.finalize().await {
            Ok(_) => break,
            Err(UpgradeError::Blocked(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("still refused: {e}"),
        }
    }
    // A host never heard heartbeating, after the start: refused, nothing applied.
    let err = report(&to_a, "late-host").await.expect_err("refused");
    let RpcError::Remote(remote) = &err else {
        panic!("{err}")
    };
    assert_eq!(remote.kind, "Fenced", "{err}");
    let devices = first.devices(&Default::default()).await.expect("devices");
    assert!(devices.iter().all(|d| d.hostname != "late-host"));
    let members = b.coordinator.fleet().members().await.expect("members");
    assert!(members.iter().all(|m| m.id != "late-host"), "{members:?}");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_host_known_only_from_reports_blocks_finalization() {
    let (first, dir) = support::sqlite().await;
    let second = Db::connect(&support::sqlite_url(&dir))
        .await
        .expect("second");
    a_host_known_only_from_reports_blocks_finalization(first, second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_host_known_only_from_reports_blocks_finalization() {
    let url = support::postgres_database().await;
    let first = Db::connect(&url).await.expect("first");
    support::make_schema(&first).await;
    let second = Db::connect(&url).await.expect("second");
    a_host_known_only_from_reports_blocks_finalization(first, second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_host_known_only_from_reports_blocks_finalization() {
    let url = support::mysql_database().await;
    let first = Db::connect(&url).await.expect("first");
    support::make_schema(&first).await;
    let second = Db::connect(&url).await.expect("second");
    a_host_known_only_from_reports_blocks_finalization(first, second).await;
}

/// A host whose accel agent heartbeated and then went back to Cyborg 17's agent, which
/// only reports: while its heartbeats are live its reports leave their row as it is
/// (an N+1 agent on Cyborg's wire reports as well as heartbeats); once they are older
/// than the liveness, its reports record it as release N again, and it blocks
/// finalization, named.
async fn a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age(db: Db) {
    DbVersionStore::new(db.clone(), AccelVersion::COMPONENT)
        .save(&pre_finalized())
        .await
        .expect("seed");
    let liveness = Duration::from_millis(1500);
    let c = Coordinator::new(support::versions(&db).await, "agent", liveness).with_fleet(
        Arc::new(DbFleetStore::new(db.clone(), AccelVersion::COMPONENT)),
        "a",
    );
    let upgraded = MemberReport {
        software: AccelVersion::DriverFeatures.number(),
        ..release_n("back-host")
    };
    c.heartbeat(upgraded).await.expect("accepted");
    c.seen("back-host", "back-host")
        .await
        .expect("a report of a host heartbeating");
    assert_eq!(row(&db, "back-host").await, (2, 1, "a".into()));
    let status = c.status().await.expect("status");
    assert!(status.clients[0].heartbeats, "{status:?}");

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        c.seen("back-host", "back-host").await.expect("seen");
        if row(&db, "back-host").await.0 == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still at software 2 long after its heartbeats stopped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = c.status().await.expect("status");
    assert!(!status.clients[0].heartbeats, "{status:?}");
    let err = c.finalize().await.expect_err("blocked");
    let UpgradeError::Blocked(blockers) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (blockers[0].id.as_str(), blockers[0].software),
        ("back-host", 1),
        "{err}"
    );
}

#[tokio::test]
async fn sqlite_a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age() {
    let (db, _dir) = support::sqlite().await;
    a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age(db).await;
}

#[tokio::test]
async fn postgres_a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age() {
    let db = Db::connect(&support::postgres_database().await)
        .await
        .expect("db");
    support::make_schema(&db).await;
    a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age(db).await;
}

#[tokio::test]
async fn mysql_a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age() {
    let db = Db::connect(&support::mysql_database().await)
        .await
        .expect("db");
    support::make_schema(&db).await;
    a_host_back_on_reports_alone_counts_as_release_n_once_its_heartbeats_age(db).await;
}

/// The lock itself, deterministically: while a finalize decision holds the version
/// record (its transaction open, as between reading the fleet and committing the
/// marker), a release N heartbeat through another conductor waits, then sees the
/// marker and is fenced, not recorded.
async fn a_heartbeat_waits_for_a_finalize_decision(url: &str) {
    let deciding = Db::connect(url).await.expect("pool");
    let other = Db::connect(url).await.expect("pool");
    let store = DbVersionStore::new(deciding.clone(), AccelVersion::COMPONENT);
    store.save(&pre_finalized()).await.expect("seed");
    let conductor = coordinator(&other, "c1").await;
    let fleet = conductor.fleet().clone();
    let mut tx = store.begin().await.expect("begin");
    let mut record = store
        .load_in(&mut tx)
        .await
        .expect("load_in")
        .expect("record");
    let beat = tokio::spawn(async move { conductor.heartbeat(release_n("host-n")).await });
    // Long enough for an unlocked heartbeat to finish many times over.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !beat.is_finished(),
        "a release N heartbeat went through while a finalize decision held the record"
    );
    record.finalizing = Some(Finalizing {
        checkpoint: Checkpoint::Started,
        target: AccelVersion::DriverFeatures.number(),
        steps_done: Vec::new(),
        failed: None,
    });
    store.save_in(&mut tx, &record).await.expect("save_in");
    store.commit(tx).await.expect("commit");
    let fenced = beat
        .await
        .expect("task")
        .expect_err("fenced after the decision")
        .into_fenced()
        .expect("fenced");
    assert!(fenced.reason.contains("has started"), "{fenced}");
    assert!(fleet.members().await.expect("members").is_empty());
    deciding.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_heartbeat_waits_for_a_finalize_decision() {
    let (db, dir) = support::sqlite().await;
    db.close().await;
    a_heartbeat_waits_for_a_finalize_decision(&support::sqlite_url(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_heartbeat_waits_for_a_finalize_decision() {
    let url = support::postgres_database().await;
    let db = Db::connect(&url).await.expect("db");
    support::make_schema(&db).await;
    db.close().await;
    a_heartbeat_waits_for_a_finalize_decision(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_heartbeat_waits_for_a_finalize_decision() {
    let url = support::mysql_database().await;
    let db = Db::connect(&url).await.expect("db");
    support::make_schema(&db).await;
    db.close().await;
    a_heartbeat_waits_for_a_finalize_decision(&url).await;
}

/// What the fleet record holds for `id`: its software, apparent version and hearer.
async fn row(db: &Db, id: &str) -> (i64, i64, String) {
    use sqlx::Row;
    let r = sqlx::query(
        &db.backend()
            .sql("SELECT software, apparent, heard_by FROM fleet_members WHERE member_id = $1"),
    )
    .bind(id)
    .fetch_one(db.pool())
    .await
    .expect("member row");
    (
        r.try_get("software").unwrap(),
        r.try_get("apparent").unwrap(),
        r.try_get("heard_by").unwrap(),
    )
}

fn heard<'a>(id: &'a str, software: u32, apparent: u32, by: &'a str) -> Heard<'a> {
    Heard {
        component: "agent",
        id,
        host: id,
        software,
        apparent,
        heard_by: by,
        heartbeats: true,
        incarnation: None,
        liveness: Duration::from_secs(60),
    }
}

/// A conductor does not write a heartbeat that repeats what it wrote for the member
/// within its write interval, or what another conductor wrote and it learned from the
/// record; a change, or a checked record of older software (which a skipped write must
/// never hide), is written at once.
async fn repeated_heartbeats_are_written_once_per_interval(db: Db) {
    let newest = AccelVersion::software().number();
    let older = AccelVersion::Initial.number();
    let a = DbFleetStore::new(db.clone(), AccelVersion::COMPONENT)
        .with_write_interval(Duration::from_secs(3600));
    let b = DbFleetStore::new(db.clone(), AccelVersion::COMPONENT);
    let admit_all: &Admit = &|_, _| Ok(());

    a.record(&heard("h1", newest, older, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h1").await,
        (newest.into(), older.into(), "a".into())
    );
    // Another conductor hears it next; a's repeat is not written over that.
    b.record(&heard("h1", newest, older, "b"), None)
        .await
        .unwrap();
    a.record(&heard("h1", newest, older, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h1").await.2,
        "b",
        "a repeated heartbeat is not written"
    );
    // A change (the agent finalized) is written at once.
    a.record(&heard("h1", newest, newest, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h1").await,
        (newest.into(), newest.into(), "a".into())
    );

    // The host is rolled back to release N: its checked record through a is written,
    // and a's memory of the newest software is gone with it.
    a.record(&heard("h1", older, older, "a"), Some(admit_all))
        .await
        .unwrap();
    assert_eq!(row(&db, "h1").await.0, i64::from(older));
    // Upgraded again: written at once, not taken for a repeat.
    b.record(&heard("h1", newest, older, "b"), None)
        .await
        .unwrap();
    a.record(&heard("h1", newest, older, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h1").await,
        (newest.into(), older.into(), "a".into())
    );

    // Rolled back through another conductor: a's repeat of the newest software leaves
    // the older software in the record (it blocks finalization: the safe side).
    b.record(&heard("h1", older, older, "b"), Some(admit_all))
        .await
        .unwrap();
    a.record(&heard("h1", newest, older, "a"), None)
        .await
        .unwrap();
    assert_eq!(row(&db, "h1").await.0, i64::from(older));

    // What another conductor wrote, once learned from the record, is not written again
    // either (its heartbeats reach each conductor of a shared queue in turn); a change is.
    let c = DbFleetStore::new(db.clone(), AccelVersion::COMPONENT)
        .with_write_interval(Duration::from_secs(3600));
    b.record(&heard("h3", newest, older, "b"), None)
        .await
        .unwrap();
    c.record(&heard("h3", newest, older, "c"), None)
        .await
        .unwrap();
    assert_eq!(row(&db, "h3").await.2, "c", "not learned yet: written");
    b.record(&heard("h3", newest, older, "b"), None)
        .await
        .unwrap();
    assert!(a.learn().await.unwrap() >= 1);
    a.record(&heard("h3", newest, older, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h3").await.2,
        "b",
        "learned: a repeat is not written"
    );
    a.record(&heard("h3", newest, newest, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h3").await,
        (newest.into(), newest.into(), "a".into())
    );
    // Learning never makes older software a repeat: its records are checked.
    b.record(&heard("h3", older, older, "b"), Some(admit_all))
        .await
        .unwrap();
    a.learn().await.unwrap();
    a.record(&heard("h3", newest, newest, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h3").await,
        (newest.into(), newest.into(), "a".into()),
        "the learned row said older software: the newest is written"
    );
    // The record's versions win over this store's own entry whatever the times say:
    // here the other conductor's write reads as older than this store's (its clock, the
    // database's milliseconds), yet it is what the record holds now.
    b.record(&heard("h3", older, older, "b"), Some(admit_all))
        .await
        .unwrap();
    sqlx::query(
        "UPDATE fleet_members SET last_seen_ms = last_seen_ms - 500 WHERE member_id = 'h3'",
    )
    .execute(db.pool())
    .await
    .expect("age the row");
    a.learn().await.unwrap();
    a.record(&heard("h3", newest, newest, "a"), None)
        .await
        .unwrap();
    assert_eq!(
        row(&db, "h3").await,
        (newest.into(), newest.into(), "a".into()),
        "the record held older software than this store's entry: the newest is written"
    );
    // A store without an interval learns nothing.
    assert_eq!(b.learn().await.unwrap(), 0);

    // Without an interval every heartbeat is written.
    b.record(&heard("h2", newest, older, "b"), None)
        .await
        .unwrap();
    a.record(&heard("h2", newest, older, "a"), None)
        .await
        .unwrap();
    b.record(&heard("h2", newest, older, "b"), None)
        .await
        .unwrap();
    assert_eq!(row(&db, "h2").await.2, "b");
}

#[tokio::test]
async fn sqlite_repeated_heartbeats_are_written_once_per_interval() {
    let (db, _dir) = support::sqlite().await;
    repeated_heartbeats_are_written_once_per_interval(db).await;
}

#[tokio::test]
async fn postgres_repeated_heartbeats_are_written_once_per_interval() {
    repeated_heartbeats_are_written_once_per_interval(support::postgres().await).await;
}

#[tokio::test]
async fn mysql_repeated_heartbeats_are_written_once_per_interval() {
    repeated_heartbeats_are_written_once_per_interval(support::mysql().await).await;
}

/// `heard` numbered in run `started` (ms), report `seq`, live for `liveness`.
fn heard_in_run<'a>(
    id: &'a str,
    software: u32,
    by: &'a str,
    (started, seq): (u64, u64),
    liveness: Duration,
) -> Heard<'a> {
    Heard {
        incarnation: Some(Incarnation {
            started_ms: started,
            seq,
        }),
        liveness,
        ..heard(id, software, software, by)
    }
}

/// The database applies verso's run rule in its upsert, whichever conductor hears
/// which run: a replacement run is recorded, the replaced run's late heartbeat is
/// refused (and leaves the row), a report its own run superseded writes nothing, and
/// once the later run is silent past the liveness an earlier-looking run is recorded.
/// Through the write-interval cache too: a new run is never taken for a repeat.
async fn heartbeats_of_replaced_runs_are_refused(db: Db) {
    let newest = AccelVersion::software().number();
    let older = AccelVersion::Initial.number();
    let a = DbFleetStore::new(db.clone(), AccelVersion::COMPONENT)
        .with_write_interval(Duration::from_secs(3600));
    let b = DbFleetStore::new(db.clone(), AccelVersion::COMPONENT);
    let admit_all: &Admit = &|_, _| Ok(());
    let live = Duration::from_secs(3600);

    // Release N's run on host h1 (older software: a checked record), then its
    // replacement through the other conductor.
    let recorded = a
        .record(
            &heard_in_run("h1", older, "a", (1_000, 7), live),
            Some(admit_all),
        )
        .await
        .expect("record");
    assert_eq!(recorded, Admission::Recorded);
    let recorded = b
        .record(&heard_in_run("h1", newest, "b", (2_000, 0), live), None)
        .await
        .expect("record");
    assert_eq!(recorded, Admission::Recorded);
    // The killed run's last heartbeat, delivered late: refused, the row unchanged.
    let late = a
        .record(
            &heard_in_run("h1", older, "a", (1_000, 8), live),
            Some(admit_all),
        )
        .await
        .expect("record");
    assert!(
        matches!(&late, Admission::Refused(reason) if reason.contains("earlier run")),
        "{late:?}"
    );
    assert_eq!(
        row(&db, "h1").await,
        (newest.into(), newest.into(), "b".into())
    );
    // The same run's reports: a later one is written, an earlier one is superseded.
    a.record(&heard_in_run("h1", newest, "a", (2_000, 5), live), None)
        .await
        .expect("record");
    assert_eq!(row(&db, "h1").await.2, "a");
    let superseded = b
        .record(&heard_in_run("h1", newest, "b", (2_000, 4), live), None)
        .await
        .expect("record");
    assert_eq!(superseded, Admission::Superseded);
    assert_eq!(row(&db, "h1").await.2, "a");
    // A new run through `a`, whose cache holds the previous run: written.
    b.record(&heard_in_run("h1", newest, "b", (2_000, 6), live), None)
        .await
        .expect("record");
    a.record(&heard_in_run("h1", newest, "a", (3_000, 0), live), None)
        .await
        .expect("record");
    assert_eq!(row(&db, "h1").await.2, "a", "a new run is not a repeat");

    // The later run silent past a short liveness: an earlier-looking run is recorded.
    let short = Duration::from_millis(50);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let got = b
            .record(&heard_in_run("h1", newest, "b", (2_500, 0), short), None)
            .await
            .expect("record");
        if got == Admission::Recorded {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {got:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(row(&db, "h1").await.2, "b");
}

#[tokio::test]
async fn sqlite_heartbeats_of_replaced_runs_are_refused() {
    let (db, _dir) = support::sqlite().await;
    heartbeats_of_replaced_runs_are_refused(db).await;
}

#[tokio::test]
async fn postgres_heartbeats_of_replaced_runs_are_refused() {
    heartbeats_of_replaced_runs_are_refused(support::postgres().await).await;
}

#[tokio::test]
async fn mysql_heartbeats_of_replaced_runs_are_refused() {
    heartbeats_of_replaced_runs_are_refused(support::mysql().await).await;
}
