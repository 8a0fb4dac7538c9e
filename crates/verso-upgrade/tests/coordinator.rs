//! Finalization across a server and its clients: the invariant before anything is
//! persisted, server before client, fencing, status, and a property over random
//! interleavings of restarts, upgrades, heartbeats and finalize calls.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use verso_upgrade::{
    component_versions, ActionError, Coordinator, FileStore, FinalizeProgress, MemberReport,
    UpgradeAction, UpgradeError, UpgradeState, VersionManager,
};

component_versions! {
    /// The versions a conductor and its agents share.
    pub enum Accel: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
        /// Release N+1.
        Cleanup = 2 => "NVMe cleanup through agent RPC 1.1",
    }
}

fn record(path: &Path, component: &str, apparent: u32) {
    std::fs::write(
        path,
        format!(r#"{{"format": 1, "component": "{component}", "apparent": {apparent}}}"#),
    )
    .expect("write record");
}

const LIVE: Duration = Duration::from_secs(60);

async fn upgraded_conductor(dir: &Path, log: Arc<Mutex<Vec<String>>>) -> Coordinator<Accel> {
    let path = dir.join("conductor.version");
    record(&path, "conductor", 1);
    let m = VersionManager::<Accel>::builder(FileStore::new(&path))
        .action(UpgradeAction::new(Accel::Cleanup, "schema").step(
            "add-cleaning-state",
            move || {
                log.lock().expect("log").push("conductor".to_owned());
                async { Ok::<(), ActionError>(()) }
            },
        ))
        .open()
        .await
        .expect("open conductor");
    Coordinator::new(m, "agent", LIVE)
}

fn report(id: &str, software: u32, apparent: u32) -> MemberReport {
    MemberReport {
        id: id.into(),
        host: format!("{id}.example"),
        software,
        apparent,
        incarnation: None,
    }
}

/// An agent with its own version file, sharing the conductor's version enum.
async fn agent(dir: &Path, id: &str, apparent: u32) -> VersionManager<Accel> {
    let path = dir.join(format!("{id}.version"));
    record(&path, "conductor", apparent);
    VersionManager::<Accel>::open(FileStore::new(path))
        .await
        .expect("open agent")
}

#[tokio::test]
async fn finalize_is_refused_while_an_old_agent_is_live_naming_it() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Mutex::new(Vec::new()));
    let c = upgraded_conductor(dir.path(), log.clone()).await;
    c.heartbeat(report("agent-1", 2, 1))
        .await
        .expect("new agent");
    c.heartbeat(report("agent-2", 1, 1))
        .await
        .expect("old agent, pre-finalized server");
    let err = c.finalize().await.expect_err("blocked");
    let UpgradeError::Blocked(blockers) = &err else {
        panic!("not blocked: {err}")
    };
    assert_eq!(blockers.len(), 1);
    assert_eq!(
        (blockers[0].id.as_str(), blockers[0].software),
        ("agent-2", 1)
    );
    assert!(err.to_string().contains("agent-2"), "{err}");
    // Nothing was persisted: the conductor is still pre-finalized, no action ran.
    assert_eq!(c.manager().state(), UpgradeState::PreFinalized);
    assert!(log.lock().expect("log").is_empty());
    assert_eq!(c.status().await?.blockers.len(), 1);
    Ok(())
}

#[tokio::test]
async fn the_server_finalizes_before_its_clients_and_status_counts_them() -> Result<(), UpgradeError>
{
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Arc::new(Mutex::new(Vec::new()));
    let c = upgraded_conductor(dir.path(), log.clone()).await;
    let agents = [
        agent(dir.path(), "a1", 1).await,
        agent(dir.path(), "a2", 1).await,
    ];
    for (i, a) in agents.iter().enumerate() {
        let reply = c
            .heartbeat(a.report(&format!("a{}", i + 1), "h"))
            .await
            .expect("accepted");
        assert_eq!(
            reply.finalize_to, None,
            "no client finalizes before the server"
        );
    }
    assert_eq!(c.finalize().await?, FinalizeProgress::ServerFinalized);
    assert_eq!(
        c.finalize().await?,
        FinalizeProgress::ServerFinalized,
        "idempotent while clients follow"
    );
    assert_eq!(c.status().await?.state, UpgradeState::Finalizing);
    assert_eq!(
        (
            c.status().await?.clients_finalized,
            c.status().await?.clients_live
        ),
        (0, 2)
    );
    for (i, a) in agents.iter().enumerate() {
        let id = format!("a{}", i + 1);
        let reply = c.heartbeat(a.report(&id, "h")).await.expect("accepted");
        assert_eq!(reply.finalize_to, Some(2));
        a.apply(&reply).await?;
        log.lock().expect("log").push(id.clone());
        c.heartbeat(a.report(&id, "h")).await.expect("accepted");
    }
    assert_eq!(*log.lock().expect("log"), ["conductor", "a1", "a2"]);
    let status = c.status().await?;
    assert_eq!(status.state, UpgradeState::Finalized);
    assert_eq!((status.clients_finalized, status.clients_live), (2, 2));
    assert!(
        status.to_string().contains("agents finalized: 2/2"),
        "{status}"
    );
    assert_eq!(c.finalize().await?, FinalizeProgress::AlreadyFinalized);
    // The status JSON keeps its documented keys.
    let json = serde_json::to_value(&status).expect("json");
    for key in [
        "state",
        "server",
        "client_component",
        "clients",
        "clients_finalized",
        "clients_live",
        "blockers",
    ] {
        assert!(json.get(key).is_some(), "status JSON lacks {key}: {json}");
    }
    assert_eq!(json["state"], "finalized");
    assert_eq!(json["server"]["apparent"], 2);
    Ok(())
}

#[tokio::test]
async fn fenced_clients_are_told_why() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = upgraded_conductor(dir.path(), Arc::default()).await;
    // A client newer than the server: servers are upgraded first.
    let f = c
        .heartbeat(report("a1", 3, 1))
        .await
        .expect_err("newer software")
        .into_fenced()
        .expect("fenced");
    assert!(f.reason.contains("upgrade the conductor first"), "{f}");
    // A client whose apparent version is above the server's.
    let f = c
        .heartbeat(report("a1", 2, 2))
        .await
        .expect_err("apparent above server")
        .into_fenced()
        .expect("fenced");
    assert!(
        f.reason.contains("never finalizes before its server"),
        "{f}"
    );
    // Once finalized, a client on older software is refused.
    c.finalize().await?;
    let f = c
        .heartbeat(report("old", 1, 1))
        .await
        .expect_err("old software after finalization")
        .into_fenced()
        .expect("fenced");
    assert!(f.reason.contains("upgrade it"), "{f}");
    assert!(f.to_string().contains("old on old.example"), "{f}");
    Ok(())
}

#[tokio::test]
async fn an_agent_that_comes_back_later_is_finalized_then() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = upgraded_conductor(dir.path(), Arc::default()).await;
    assert_eq!(
        c.finalize().await?,
        FinalizeProgress::Complete,
        "no live client: complete at once"
    );
    let late = agent(dir.path(), "late", 1).await;
    let reply = c
        .heartbeat(late.report("late", "h"))
        .await
        .expect("accepted");
    assert_eq!(reply.finalize_to, Some(2));
    late.apply(&reply).await?;
    assert_eq!(late.state(), UpgradeState::Finalized);
    Ok(())
}

#[tokio::test]
async fn a_conductor_restarted_mid_finalization_resumes() -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conductor.version");
    std::fs::write(
        &path,
        r#"{"format": 1, "component": "conductor", "apparent": 1, "finalizing": {"checkpoint": "started", "target": 2}}"#,
    )
    .expect("write");
    let m = VersionManager::<Accel>::open(FileStore::new(&path)).await?;
    let c = Coordinator::new(m, "agent", LIVE);
    assert_eq!(c.status().await?.state, UpgradeState::Finalizing);
    c.resume().await?;
    assert_eq!(c.manager().apparent(), Accel::Cleanup);
    // No live agents: the next finalize completes.
    assert_eq!(c.finalize().await?, FinalizeProgress::Complete);
    Ok(())
}

#[derive(Clone, Debug)]
enum Op {
    RestartServer,
    UpgradeAgent(usize),
    DowngradeAgent(usize),
    Heartbeat(usize),
    Finalize,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::RestartServer),
        (0..3usize).prop_map(Op::UpgradeAgent),
        (0..3usize).prop_map(Op::DowngradeAgent),
        (0..3usize).prop_map(Op::Heartbeat),
        Just(Op::Finalize),
    ]
}

component_versions! {
    /// Release N's view of the same versions.
    pub enum AccelN: "conductor" {
        /// Release N.
        Initial = 1 => "release N",
    }
}

/// An agent process: which release it runs, over its version file.
struct Agent {
    path: PathBuf,
    new_release: bool,
}

impl Agent {
    async fn report(&self, id: &str) -> Option<(MemberReport, Option<VersionManager<Accel>>)> {
        if self.new_release {
            let m = VersionManager::<Accel>::open(FileStore::new(&self.path))
                .await
                .ok()?;
            Some((m.report(id, "h"), Some(m)))
        } else {
            // Release N refuses to start on a record finalized past it.
            let m = VersionManager::<AccelN>::open(FileStore::new(&self.path))
                .await
                .ok()?;
            Some((
                MemberReport {
                    id: id.into(),
                    host: "h".into(),
                    software: 1,
                    apparent: verso_upgrade::ComponentVersion::number(m.apparent()),
                    incarnation: None,
                },
                None,
            ))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// No agent ever acts at an apparent version above what its server has finalized, and
    /// an agent whose record is finalized never runs release N.
    #[test]
    fn no_client_acts_above_what_its_server_finalized(ops in prop::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let server_path = dir.path().join("conductor.version");
            record(&server_path, "conductor", 1);
            let open = || async { Coordinator::new(VersionManager::<Accel>::open(FileStore::new(&server_path)).await.expect("server"), "agent", LIVE) };
            let mut server = open().await;
            let mut agents = Vec::new();
            for i in 0..3 {
                let path = dir.path().join(format!("a{i}.version"));
                record(&path, "conductor", 1);
                agents.push(Agent { path, new_release: false });
            }
            for op in ops {
                match op {
                    Op::RestartServer => {
                        server = open().await;
                        server.resume().await.expect("resume");
                    }
                    Op::UpgradeAgent(i) => agents[i].new_release = true,
                    Op::DowngradeAgent(i) => agents[i].new_release = false,
                    Op::Heartbeat(i) => {
                        let id = format!("a{i}");
                        if let Some((report, manager)) = agents[i].report(&id).await {
                            if let Ok(reply) = server.heartbeat(report).await {
                                if let Some(m) = manager {
                                    m.apply(&reply).await.expect("apply");
                                }
                            }
                        }
                    }
                    Op::Finalize => {
                        let _ = server.finalize().await;
                    }
                }
                let server_apparent = server.manager().apparent() as u32;
                for a in &agents {
                    let text = std::fs::read_to_string(&a.path).expect("agent record");
                    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
                    let apparent = v["apparent"].as_u64().expect("apparent") as u32;
                    prop_assert!(apparent <= server_apparent, "agent at {apparent} above server at {server_apparent}");
                }
            }
            Ok(())
        })?;
    }
}

/// A fleet record that counts its full reads.
struct CountingFleet {
    inner: verso_upgrade::MemoryFleet,
    reads: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl verso_upgrade::FleetStore for CountingFleet {
    async fn record(
        &self,
        heard: &verso_upgrade::fleet::Heard<'_>,
        admit: Option<&verso_upgrade::fleet::Admit>,
    ) -> Result<verso_upgrade::fleet::Admission, verso_upgrade::store::StoreError> {
        self.inner.record(heard, admit).await
    }

    async fn members(
        &self,
    ) -> Result<Vec<verso_upgrade::FleetMember>, verso_upgrade::store::StoreError> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.members().await
    }

    async fn members_in(
        &self,
        tx: &mut (dyn std::any::Any + Send),
    ) -> Result<Vec<verso_upgrade::FleetMember>, verso_upgrade::store::StoreError> {
        self.inner.members_in(tx).await
    }

    async fn forget(
        &self,
        component: &str,
        id: &str,
    ) -> Result<bool, verso_upgrade::store::StoreError> {
        self.inner.forget(component, id).await
    }
}

/// While clients follow a finalization, a finalized client's heartbeat reads the whole
/// fleet record only when it may be the last one the previous read found unfinalized:
/// thousands of finalized heartbeats do not each read thousands of members.
#[tokio::test]
async fn finalized_heartbeats_read_the_fleet_only_when_they_may_be_the_last(
) -> Result<(), UpgradeError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("conductor.version");
    record(&path, "conductor", 1);
    let m = VersionManager::<Accel>::open(FileStore::new(&path))
        .await
        .expect("open conductor");
    let fleet = Arc::new(CountingFleet {
        inner: verso_upgrade::MemoryFleet::new(),
        reads: Default::default(),
    });
    let c = Coordinator::new(m, "agent", LIVE).with_fleet(fleet.clone(), "c1");
    for id in ["a1", "a2", "a3"] {
        c.heartbeat(report(id, 2, 1)).await.expect("accepted");
    }
    assert_eq!(c.finalize().await?, FinalizeProgress::ServerFinalized);
    let reads = || fleet.reads.load(std::sync::atomic::Ordering::SeqCst);
    let before = reads();
    // finalize's own check found a1, a2 and a3 unfinalized.
    for _ in 0..5 {
        c.heartbeat(report("a1", 2, 2)).await.expect("accepted");
    }
    c.heartbeat(report("a2", 2, 2)).await.expect("accepted");
    assert_eq!(reads(), before, "a3 is still left: no read");
    c.heartbeat(report("a3", 2, 2)).await.expect("accepted");
    assert_eq!(reads(), before + 1, "the last one reads, and completes");
    assert_eq!(c.status().await?.state, UpgradeState::Finalized);
    Ok(())
}
