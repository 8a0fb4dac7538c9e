//! Several servers over one version record and one fleet record: finalization is decided
//! on every member any server heard, a member on older software heartbeating while
//! another server finalizes is counted or fenced, and a restarted server forgets
//! nothing. The same property fails once each server keeps its own fleet record, as
//! before the fleet record existed.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use proptest::prelude::*;
use proptest::test_runner::{Config, TestError, TestRunner};
use std::sync::Arc;
use std::time::Duration;
use verso_upgrade::fleet::{FleetStore, MemoryFleet, MemoryStore};
use verso_upgrade::store::VersionStore;
use verso_upgrade::{
    component_versions, Coordinator, HeartbeatError, MemberReport, UpgradeError, UpgradeState,
    VersionManager,
};

component_versions! {
    /// The versions a server and its members share.
    pub enum Accel: "accel" {
        /// Release N.
        Initial = 1 => "release N",
        /// Release N+1.
        Next = 2 => "release N+1",
    }
}

/// Every member heard in a case stays live: what is tested is who is counted, not when
/// a member stops counting.
const LIVE: Duration = Duration::from_secs(3600);

/// Where the servers keep the fleet record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fleet {
    /// One record for all (a table in their shared database).
    Shared,
    /// One per server, in its memory (what each conductor had before).
    PerServer,
}

struct Deployment {
    store: MemoryStore,
    shared: MemoryFleet,
    fleet: Fleet,
    /// The servers' liveness ([`LIVE`] unless a test shortens it).
    liveness: Duration,
    servers: Vec<Coordinator<Accel>>,
}

impl Deployment {
    async fn new(servers: usize, fleet: Fleet) -> Deployment {
        let (store, shared) = MemoryFleet::with_store();
        // Release N+1 installed over release N's record: pre-finalized.
        store
            .save(&verso_upgrade::store::PersistedState {
                format: 1,
                component: "accel".into(),
                apparent: 1,
                finalizing: None,
            })
            .await
            .expect("seed");
        let mut d = Deployment {
            store,
            shared,
            fleet,
            liveness: LIVE,
            servers: Vec::new(),
        };
        for i in 0..servers {
            let s = d.server(i).await;
            d.servers.push(s);
        }
        d
    }

    async fn server(&self, i: usize) -> Coordinator<Accel> {
        let m = VersionManager::<Accel>::builder_tx(self.store.clone())
            .open()
            .await
            .expect("server opens");
        let c = Coordinator::new(m, "agent", self.liveness);
        match self.fleet {
            Fleet::Shared => c.with_fleet(
                Arc::new(self.shared.clone()) as Arc<dyn FleetStore>,
                format!("server-{i}"),
            ),
            Fleet::PerServer => c,
        }
    }

    async fn restart(&mut self, i: usize) {
        let fresh = self.server(i).await;
        self.servers[i] = fresh;
        self.servers[i].resume().await.expect("resume");
    }

    /// Whether any server started (or finished) a finalization, from the shared record.
    async fn finalization_started(&self) -> bool {
        let record = self.store.load().await.expect("load").expect("record");
        record.finalizing.is_some() || record.apparent >= 2
    }
}

#[derive(Clone, Copy, Debug)]
struct Agent {
    software: u32,
    apparent: u32,
    /// The software of its last heartbeat a server accepted (`None`: none yet).
    accepted: Option<u32>,
}

#[derive(Clone, Debug)]
enum Op {
    /// Agent `.0` heartbeats to server `.1` (routing is the broker's, any server).
    Heartbeat(usize, usize),
    /// Agent `.0` is replaced by release N+1 (it keeps its apparent version).
    Upgrade(usize),
    /// Server `.0` is stopped and started again over the same stores.
    Restart(usize),
    /// The operator's finalize reaches server `.0`.
    Finalize(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..4usize, 0..4usize).prop_map(|(a, s)| Op::Heartbeat(a, s)),
        1 => (0..4usize).prop_map(Op::Upgrade),
        1 => (0..4usize).prop_map(Op::Restart),
        2 => (0..4usize).prop_map(Op::Finalize),
    ]
}

fn report(i: usize, a: &Agent) -> MemberReport {
    MemberReport {
        id: format!("agent-{i}"),
        host: format!("host-{i}"),
        software: a.software,
        apparent: a.apparent,
        incarnation: None,
    }
}

/// Runs `ops` over `servers` servers and checks the invariant after each: once any
/// server started finalization, no agent whose last accepted heartbeat ran release N
/// exists (it blocked the start, or it was fenced instead of accepted).
async fn run_case(servers: usize, fleet: Fleet, ops: &[Op]) -> Result<(), String> {
    let mut d = Deployment::new(servers, fleet).await;
    let mut agents = [Agent {
        software: 1,
        apparent: 1,
        accepted: None,
    }; 4];
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Heartbeat(a, s) => {
                let s = s % servers;
                match d.servers[s].heartbeat(report(a, &agents[a])).await {
                    Ok(reply) => {
                        agents[a].accepted = Some(agents[a].software);
                        if let Some(to) = reply.finalize_to {
                            agents[a].apparent = to.min(agents[a].software);
                        }
                    }
                    // A fenced agent exits: one on the newest software, finalized no
                    // further than the record says, must never be (a server that had
                    // not re-read the record once fenced one another had finalized).
                    Err(HeartbeatError::Fenced(f)) if agents[a].software == 2 => {
                        let record = d.store.load().await.expect("load").expect("record");
                        if agents[a].apparent <= record.apparent {
                            return Err(format!(
                                "step {step} ({op:?}): agent-{a} on the newest software was fenced: {f}; ops: {ops:?}"
                            ));
                        }
                    }
                    Err(_) => {}
                }
            }
            Op::Upgrade(a) => agents[a].software = 2,
            Op::Restart(s) => d.restart(s % servers).await,
            Op::Finalize(s) => match d.servers[s % servers].finalize().await {
                Ok(_) | Err(UpgradeError::Blocked(_)) => {}
                Err(e) => return Err(format!("step {step}: finalize failed: {e}")),
            },
        }
        if d.finalization_started().await {
            if let Some(i) = agents.iter().position(|a| a.accepted == Some(1)) {
                return Err(format!(
                    "after step {step} ({op:?}): finalization started while agent-{i} runs release N, live and accepted; ops: {ops:?}"
                ));
            }
        }
    }
    Ok(())
}

fn case() -> impl Strategy<Value = (usize, Vec<Op>)> {
    (1..=4usize, prop::collection::vec(op(), 1..40))
}

fn check(fleet: Fleet, cases: u32) -> Result<(), TestError<(usize, Vec<Op>)>> {
    let mut runner = TestRunner::new(Config {
        cases,
        ..Config::default()
    });
    runner.run(&case(), |(servers, ops)| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(run_case(servers, fleet, &ops))
            .map_err(TestCaseError::fail)
    })
}

#[test]
fn no_server_finalizes_while_a_live_agent_anywhere_runs_older_software() {
    if let Err(e) = check(Fleet::Shared, 256) {
        panic!("{e}");
    }
}

/// The property is not vacuous: with a fleet record per server (what each conductor had
/// before) it finds a counterexample.
#[test]
fn the_same_property_fails_with_a_fleet_record_per_server() {
    match check(Fleet::PerServer, 256) {
        Err(TestError::Fail(why, (servers, ops))) => {
            assert!(
                servers > 1 || ops.iter().any(|o| matches!(o, Op::Restart(_))),
                "{why}: {servers} {ops:?}"
            );
        }
        other => panic!("expected a counterexample, got {other:?}"),
    }
}

#[tokio::test]
async fn a_finalize_refused_through_one_server_names_the_agent_another_heard() {
    let d = Deployment::new(2, Fleet::Shared).await;
    let old = Agent {
        software: 1,
        apparent: 1,
        accepted: None,
    };
    d.servers[0]
        .heartbeat(report(7, &old))
        .await
        .expect("accepted before finalization");
    let err = d.servers[1].finalize().await.expect_err("blocked");
    let UpgradeError::Blocked(blockers) = &err else {
        panic!("{err}")
    };
    assert_eq!(blockers.len(), 1);
    assert_eq!(blockers[0].id, "agent-7");
    assert!(err.to_string().contains("agent-7"), "{err}");
    let status = d.servers[1].status().await.expect("status");
    assert_eq!(status.clients.len(), 1);
    assert_eq!(status.clients[0].heard_by, "server-0");
    assert_eq!(status.state, UpgradeState::PreFinalized);
}

/// The race itself, with threads: agents on release N heartbeat to three servers while a
/// fourth finalizes. Either the finalization was refused, or every one of them was
/// fenced; never both a start and an accepted release-N heartbeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heartbeats_racing_a_finalize_are_counted_or_fenced() {
    for round in 0..40 {
        let d = Arc::new(Deployment::new(4, Fleet::Shared).await);
        let mut beats = Vec::new();
        for a in 0..12usize {
            let d = d.clone();
            beats.push(tokio::spawn(async move {
                let agent = Agent {
                    software: 1,
                    apparent: 1,
                    accepted: None,
                };
                // Staggered, so some land before the decision and some after.
                for _ in 0..(a % 4) {
                    tokio::task::yield_now().await;
                }
                d.servers[a % 3].heartbeat(report(a, &agent)).await.is_ok()
            }));
        }
        let finalized = d.servers[3].finalize().await;
        let mut accepted = 0;
        for b in beats {
            if b.await.expect("task") {
                accepted += 1;
            }
        }
        match finalized {
            Ok(_) => {
                assert_eq!(
                    accepted, 0,
                    "round {round}: finalization started and {accepted} release N heartbeats were accepted"
                );
            }
            Err(UpgradeError::Blocked(b)) => assert!(!b.is_empty(), "round {round}"),
            Err(e) => panic!("round {round}: {e}"),
        }
    }
}

/// A member known only from other traffic (an agent of a release that sends no
/// heartbeat, seen through its reports) counts as the oldest software: it blocks
/// finalization until it heartbeats on new software, and is refused once one started.
#[tokio::test]
async fn a_member_seen_only_through_reports_blocks_until_it_heartbeats() {
    let d = Deployment::new(2, Fleet::Shared).await;
    d.servers[0].seen("host-1", "host-1").await.expect("seen");
    let err = d.servers[1].finalize().await.expect_err("blocked");
    let UpgradeError::Blocked(blockers) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (blockers[0].id.as_str(), blockers[0].software),
        ("host-1", 1)
    );
    assert!(
        blockers[0].reason.contains("known only from its reports"),
        "{err}"
    );
    // Upgraded: its heartbeat replaces the assumption, and reports keep what it said.
    let upgraded = MemberReport {
        id: "host-1".into(),
        host: "host-1".into(),
        software: 2,
        apparent: 1,
        incarnation: None,
    };
    d.servers[1].heartbeat(upgraded).await.expect("accepted");
    d.servers[0].seen("host-1", "host-1").await.expect("seen");
    let status = d.servers[0].status().await.expect("status");
    assert_eq!(
        (status.clients[0].software, status.clients[0].heartbeats),
        (2, true)
    );
    d.servers[1].finalize().await.expect("nothing old is live");
    // A host never heard heartbeating shows up after the start: refused, not recorded.
    let fenced = d.servers[0]
        .seen("host-2", "host-2")
        .await
        .expect_err("finalization started")
        .into_fenced()
        .expect("fenced");
    assert!(fenced.reason.contains("upgrade it"), "{fenced}");
    let status = d.servers[0].status().await.expect("status");
    assert_eq!(status.clients.len(), 1);
}

/// A member whose heartbeats stopped while its reports go on (a host gone back to a
/// release that sends none): while its heartbeats are live its reports change nothing;
/// once they are older than the liveness, it is the oldest software again and blocks.
#[tokio::test]
async fn a_member_back_on_reports_alone_counts_as_the_oldest_once_its_heartbeats_age() {
    let mut d = Deployment::new(1, Fleet::Shared).await;
    d.liveness = Duration::from_millis(300);
    d.restart(0).await;
    let c = &d.servers[0];
    let upgraded = MemberReport {
        id: "host-1".into(),
        host: "host-1".into(),
        software: 2,
        apparent: 1,
        incarnation: None,
    };
    c.heartbeat(upgraded).await.expect("accepted");
    c.seen("host-1", "host-1").await.expect("seen");
    let status = c.status().await.expect("status");
    assert_eq!(
        (status.clients[0].software, status.clients[0].heartbeats),
        (2, true)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let member = loop {
        c.seen("host-1", "host-1").await.expect("seen");
        let status = c.status().await.expect("status");
        let member = status.clients.into_iter().find(|m| m.id == "host-1");
        match member {
            Some(m) if m.software == 1 => break m,
            _ if std::time::Instant::now() > deadline => {
                panic!("still not the oldest software: {member:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert!(!member.heartbeats, "{member:?}");
    let err = c.finalize().await.expect_err("blocked");
    let UpgradeError::Blocked(blockers) = &err else {
        panic!("{err}")
    };
    assert_eq!(
        (blockers[0].id.as_str(), blockers[0].software),
        ("host-1", 1)
    );
}

/// Seen with three `accel conductor`s: one finalizes and tells an agent so through its
/// heartbeat; the agent's next heartbeat reaches another conductor that has not re-read
/// the version record yet. It must not fence the agent for being ahead of it (the agent
/// would exit): it reads the record again first.
#[tokio::test]
async fn an_agent_finalized_through_one_server_is_not_fenced_by_another() {
    let d = Deployment::new(2, Fleet::Shared).await;
    let mut agent = Agent {
        software: 2,
        apparent: 1,
        accepted: None,
    };
    d.servers[0]
        .heartbeat(report(1, &agent))
        .await
        .expect("accepted before finalization");
    d.servers[0].finalize().await.expect("finalizes");
    let reply = d.servers[0]
        .heartbeat(report(1, &agent))
        .await
        .expect("accepted after finalization");
    agent.apparent = reply.finalize_to.expect("told to finalize");
    assert_eq!(agent.apparent, 2);
    let reply = d.servers[1]
        .heartbeat(report(1, &agent))
        .await
        .expect("not fenced by a server that had not re-read the record");
    assert_eq!(reply.server_apparent, 2);
}

/// A report numbered in run `started` (ms), report `seq`.
fn run_report(id: &str, software: u32, started: u64, seq: u64) -> MemberReport {
    MemberReport {
        incarnation: Some(verso_upgrade::Incarnation {
            started_ms: started,
            seq,
        }),
        ..MemberReport::new(id, id, software, 1)
    }
}

/// A killed agent's last heartbeat delivered after its replacement's first (seen in the
/// demo: the host then read as release N again and finalization was refused): the
/// earlier run is fenced and the record keeps the later run's versions; a report its
/// own run has superseded changes nothing and is answered; a second process under the
/// same id is fenced while the later one is live.
#[tokio::test]
async fn a_late_heartbeat_of_a_replaced_run_is_refused_not_recorded() {
    let d = Deployment::new(2, Fleet::Shared).await;
    d.servers[0]
        .heartbeat(run_report("host-1", 1, 1_000, 7))
        .await
        .expect("release N's run");
    d.servers[1]
        .heartbeat(run_report("host-1", 2, 2_000, 0))
        .await
        .expect("the replacement's first heartbeat");
    let late = d.servers[0]
        .heartbeat(run_report("host-1", 1, 1_000, 8))
        .await
        .expect_err("an earlier run")
        .into_fenced()
        .expect("fenced");
    assert!(late.reason.contains("earlier run"), "{late}");
    let status = d.servers[0].status().await.expect("status");
    assert_eq!(status.clients[0].software, 2, "{status:?}");
    // Delayed within the live run: answered, nothing written.
    d.servers[1]
        .heartbeat(run_report("host-1", 2, 2_000, 3))
        .await
        .expect("recorded");
    d.servers[0]
        .heartbeat(run_report("host-1", 2, 2_000, 1))
        .await
        .expect("superseded, answered");
    // Finalization decides on the live run: nothing older is recorded.
    d.servers[1].finalize().await.expect("finalize");
}

/// Once the later run has been silent past the liveness window (it stopped, or the
/// host's clock stepped back before the next run started), an earlier-looking run is
/// recorded again: a clock step fences a process for at most one window.
#[tokio::test]
async fn an_earlier_run_is_recorded_once_the_later_one_is_silent() {
    let (store, fleet) = MemoryFleet::with_store();
    let manager = VersionManager::<Accel>::open(store).await.expect("manager");
    let server = Coordinator::new(manager, "agent", Duration::from_millis(50))
        .with_fleet(Arc::new(fleet), "conductor-a");
    server
        .heartbeat(run_report("host-1", 2, 2_000, 0))
        .await
        .expect("later run");
    server
        .heartbeat(run_report("host-1", 2, 1_000, 0))
        .await
        .expect_err("the later run is live")
        .into_fenced()
        .expect("fenced");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match server.heartbeat(run_report("host-1", 2, 1_000, 1)).await {
            Ok(_) => break,
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "still refused: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}
