//! The driver features end to end, on SQLite and PostgreSQL: a real conductor
//! (`runtime::start`) and real agents (`accel_agent::service::start`) over the memory
//! transport, the checked-in sysfs fixture of a host with two NVMe SSDs, and fake cleanup
//! commands (shell scripts that succeed, fail or hang) instead of a disk.
//!
//! - NVMe cleanup through `cleanup_device` (agent cap 1.1) and through the agent's scan
//!   (agent cap 1.0: nothing sent, nothing relabelled);
//! - failed and timed-out cleanups leave the device in `error`, never allocatable;
//! - an agent killed during a cleanup: the next start erases the device again;
//! - a conductor restarted during a cleanup: the transition is retried and lands once;
//! - the compare-and-swap race on `update_managed`: exactly one wins, typed conflict;
//! - PCI managed-mode validation and its refusals, and the typed gate before
//!   finalization.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[macro_use]
mod features;

use accel_agent::service::{self, AgentStartError};
use accel_conductor::service::{AgentNotifier, CleanupNotice};
use accel_conductor::testing as support;
use accel_conductor::Db;
use accel_objects::errors::{classify, not_supported, HandleErrorKind};
use accel_objects::rpc::{AgentApi, BindArq, CleanupDevice, CreateArqs, ReportNow, AGENT_TOPIC};
use accel_objects::AttachHandleList;
use features::*;
use std::sync::Arc;
use std::time::Duration;
use verso::{ObjectList, Version};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcError};

// ---------------------------------------------------------------------------------

async fn cleanup_through_cleanup_device(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.1").await;
    assert!(conductor
        .versions
        .is_allowed(accel_objects::AccelVersion::DriverFeatures));
    let scripts = Scripts::new();
    let agent = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect("agent starts");
    let c = client(&transport);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    let bound = db.host_handle(&handle).await.expect("handle");
    unbind(&c, &arq).await;
    // The scan runs hourly here: only cleanup_device can have started this.
    let done = wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    assert_eq!(
        done.revision,
        bound.revision + 3,
        "released, started and succeeded, each recorded once"
    );
    assert_eq!(scripts.erased(), vec!["/dev/nvme0n1".to_owned()]);
    agent.stop().await;
    conductor.stop().await;
}

async fn cleanup_through_the_scan_when_agent_is_capped(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.0").await;
    let scripts = Scripts::new();
    let agent = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect("agent starts");
    let c = client(&transport);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    // Nothing was sent: the handle waits in cleaning.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let h = db.host_handle(&handle).await.expect("handle");
    assert_eq!(
        h.cleanup_state.map(|s| s.as_str()),
        Some("cleaning"),
        "{h:?}"
    );
    assert!(h.cleanup_reason.is_none(), "no agent started it: {h:?}");
    assert!(scripts.erased().is_empty());
    // A client capped at 1.0 cannot send cleanup_device, and never relabels it.
    let capped = RpcClient::for_api::<AgentApi>(transport.clone(), AGENT_TOPIC)
        .version_cap(Version::new(1, 0));
    let refused = capped
        .prepare()
        .server(HOST)
        .call_method(
            &ctx(),
            CleanupDevice {
                handle_uuid: handle.clone(),
            },
        )
        .await
        .expect_err("above the cap");
    assert!(matches!(refused, RpcError::VersionCap { .. }), "{refused}");
    let notifier = AgentNotifier::new(transport.clone(), Some(Version::new(1, 0)));
    assert!(!notifier.sends_cleanup());
    assert_eq!(
        notifier.cleanup_released(HOST, &handle).await,
        CleanupNotice::LeftForScan { cap: "1.0".into() }
    );
    // The agent's periodic scan picks it up.
    assert_eq!(agent.scan_now().await.expect("scan"), 1);
    wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    assert_eq!(scripts.erased(), vec!["/dev/nvme0n1".to_owned()]);
    // report_now is agent 1.0: the capped conductor-side client reaches it.
    let n = capped
        .prepare()
        .server(HOST)
        .call_method(&ctx(), ReportNow {})
        .await
        .expect("report_now");
    assert_eq!(n, agent.devices_reported());
    assert!(n > 0);
    agent.stop().await;
    conductor.stop().await;
}

async fn failed_and_hung_cleanups_leave_the_device_in_error(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.1").await;
    let scripts = Scripts::new();
    let c = client(&transport);

    let failing = agent(&transport, agent_config(&scripts, "fail.sh"))
        .await
        .expect("agent starts");
    let (arq, first) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    let h = wait_for(&db, &first, Duration::from_secs(15), "failed", |h| {
        h.cleanup_state.map(|s| s.as_str()) == Some("error")
    })
    .await;
    assert!(
        h.cleanup_reason
            .as_deref()
            .is_some_and(|r| r.contains("media error")),
        "{h:?}"
    );
    failing.stop().await;

    let mut hanging = agent_config(&scripts, "hang.sh");
    hanging.nvme.cleanup_timeout = Duration::from_secs(1);
    let hanging = agent(&transport, hanging).await.expect("agent starts");
    let (arq, second) = bind_ssd(&c, "vm-2").await;
    assert_ne!(first, second, "a device in error is never allocated");
    unbind(&c, &arq).await;
    let h = wait_for(&db, &second, Duration::from_secs(15), "timed out", |h| {
        h.cleanup_state.map(|s| s.as_str()) == Some("error")
    })
    .await;
    assert!(
        h.cleanup_reason
            .as_deref()
            .is_some_and(|r| r.contains("did not finish within 1 s")),
        "{h:?}"
    );
    assert!(scripts.erased().is_empty());
    // Both SSDs are out of the pool: a new request finds none.
    let arqs = c
        .call_method(
            &ctx(),
            CreateArqs {
                device_profile_name: "ssd".into(),
                group_id: None,
                project_id: None,
            },
        )
        .await
        .expect("arqs");
    let uuid = arqs
        .iter()
        .next()
        .expect("arq")
        .uuid
        .get()
        .expect("uuid")
        .to_string();
    let err = c
        .call_method(
            &ctx(),
            BindArq {
                uuid,
                hostname: HOST.into(),
                instance_uuid: "vm-3".into(),
                device_rp_uuid: None,
                project_id: None,
            },
        )
        .await
        .expect_err("no clean SSD left");
    let RpcError::Remote(remote) = err else {
        panic!("not remote: {err}")
    };
    assert_eq!(remote.kind, "NoFreeHandle");
    hanging.stop().await;
    conductor.stop().await;
}

async fn an_agent_killed_during_cleanup_is_recovered_at_its_next_start(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.1").await;
    let scripts = Scripts::new();
    let c = client(&transport);
    let mut hang = agent_config(&scripts, "hang.sh");
    hang.nvme.cleanup_timeout = Duration::from_secs(600);
    let first = agent(&transport, hang).await.expect("agent starts");
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    wait_for(&db, &handle, Duration::from_secs(15), "started", started).await;
    assert_eq!(first.cleanups_running(), 1);
    // Killed mid-erase (stop kills the running command).
    first.stop().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let h = db.host_handle(&handle).await.expect("handle");
    assert!(
        started(&h),
        "still cleaning, never available unerased: {h:?}"
    );
    assert!(scripts.erased().is_empty());

    // The next start finds it and erases it.
    let second = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect("agent starts");
    let done = wait_for(
        &db,
        &handle,
        Duration::from_secs(15),
        "recovered",
        available,
    )
    .await;
    assert_eq!(scripts.erased(), vec!["/dev/nvme0n1".to_owned()]);
    second.stop().await;
    // Recovery is idempotent: another start has nothing to do.
    let third = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect("agent starts");
    assert_eq!(third.scan_now().await.expect("scan"), 0);
    assert_eq!(db.host_handle(&handle).await.expect("handle"), done);
    assert_eq!(scripts.erased().len(), 1);
    third.stop().await;
    conductor.stop().await;
}

async fn a_conductor_restarted_during_cleanup_gets_the_result_once(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let first = conductor(&db, &transport, "1.1").await;
    let scripts = Scripts::new();
    let c = client(&transport);
    let agent = agent(&transport, agent_config(&scripts, "slow-ok.sh"))
        .await
        .expect("agent starts");
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    let claimed = wait_for(&db, &handle, Duration::from_secs(15), "started", started).await;
    // The conductor goes away while the erase runs (2 s); its result cannot be recorded.
    first.stop().await;
    scripts.wait_for_erased(1, Duration::from_secs(30)).await;
    assert_eq!(scripts.erased().len(), 1, "the erase finished, once");
    let h = db.host_handle(&handle).await.expect("handle");
    assert_eq!(h, claimed, "nothing recorded while the conductor is down");
    // It comes back: the agent's retry lands, once.
    let second = conductor(&db, &transport, "1.1").await;
    let done = wait_for(&db, &handle, Duration::from_secs(20), "recorded", available).await;
    assert_eq!(
        done.revision,
        claimed.revision + 1,
        "succeeded recorded once"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(db.host_handle(&handle).await.expect("handle"), done);
    agent.stop().await;
    second.stop().await;
}

async fn update_managed_races_have_one_winner(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.0").await;
    let scripts = Scripts::new();
    let agent = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect("agent starts");
    let ctx = indirect_ctx(&transport);
    let handles = AttachHandleList::get_by_host(&ctx, HOST.into())
        .await
        .expect("get_by_host");
    assert_eq!(
        handles.len(),
        db.host_handles(HOST).await.expect("handles").len()
    );
    let h = handles.iter().next().expect("a handle").clone();
    let uuid = h.uuid.get().expect("uuid").to_string();
    let rev = h.current_revision().expect("revision");
    let (mut a, mut b) = (h.clone(), h.clone());
    a.meta.context = Some(Box::new(ctx.clone()));
    b.meta.context = Some(Box::new(ctx.clone()));
    let (ra, rb) = tokio::join!(a.update_managed(false, rev), b.update_managed(true, rev));
    let winners = [ra.is_ok(), rb.is_ok()];
    assert_eq!(winners.iter().filter(|w| **w).count(), 1, "{ra:?} {rb:?}");
    let loser = ra.err().or(rb.err()).expect("a loser");
    assert_eq!(classify(&loser), HandleErrorKind::Stale, "{loser}");
    let row = db.host_handle(&uuid).await.expect("row");
    assert_eq!(row.revision, rev + 1);
    let winner = if winners[0] { &a } else { &b };
    assert_eq!(
        row.attach_info,
        *winner.attach_info.get().expect("info"),
        "the row is the winner's, whole"
    );
    assert_eq!(
        winner.current_revision().expect("revision"),
        rev + 1,
        "the winner's object is the stored one"
    );
    // The loser's retry with the old revision still loses: it must read again.
    let winner_managed = winner.managed().expect("attach info");
    let mut again = if winners[0] { b } else { a };
    let stale = again
        .update_managed(!winner_managed, rev)
        .await
        .expect_err("stale");
    assert_eq!(classify(&stale), HandleErrorKind::Stale);

    // An object without a usable attach_info never overwrites the stored PCI address
    // with a bare mode: refused, naming the field, and nothing is written.
    let before = db.host_handle(&uuid).await.expect("row");
    let mut blank = again.clone();
    blank.attach_info = verso::Field::default();
    let e = blank
        .update_managed(true, before.revision)
        .await
        .expect_err("no attach_info");
    assert!(
        e.to_string().contains("AttachHandle.attach_info is unset"),
        "{e}"
    );
    let mut garbled = again.clone();
    garbled.attach_info = "not json".to_owned().into();
    let e = garbled
        .update_managed(true, before.revision)
        .await
        .expect_err("not an address");
    assert!(e.to_string().contains("is not a JSON object"), "{e}");
    assert_eq!(
        db.host_handle(&uuid).await.expect("row"),
        before,
        "nothing written"
    );

    // Two runners claiming the same cleanup (agent cap 1.0 and an hourly scan: nobody
    // else touches it): one claims it; the other, and any stale result, is refused.
    let c = client(&transport);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    let cleaning = AttachHandleList::get_cleaning(&ctx, HOST.into())
        .await
        .expect("get_cleaning");
    let h = cleaning
        .iter()
        .find(|h| h.uuid.get().map(ToString::to_string) == Some(handle.clone()))
        .expect("the released handle is cleaning")
        .clone();
    // A handle without its revision is refused, naming the field: the compare-and-swap
    // never runs against a revision the object did not carry.
    let before = db.host_handle(&handle).await.expect("row");
    let mut unrevised = h.clone();
    unrevised.revision = verso::Field::default();
    unrevised.meta.context = Some(Box::new(indirect_ctx(&transport)));
    let e = unrevised.cleanup_started().await.expect_err("no revision");
    assert!(
        e.to_string().contains("AttachHandle.revision is unset"),
        "{e}"
    );
    assert_eq!(db.host_handle(&handle).await.expect("row"), before);
    // Each runner has its own context (its request id is its claim).
    let (mut a, mut b) = (h.clone(), h.clone());
    a.meta.context = Some(Box::new(indirect_ctx(&transport)));
    b.meta.context = Some(Box::new(indirect_ctx(&transport)));
    let (ra, rb) = tokio::join!(a.cleanup_started(), b.cleanup_started());
    assert_eq!(
        [ra.is_ok(), rb.is_ok()].iter().filter(|w| **w).count(),
        1,
        "{ra:?} {rb:?}"
    );
    let (mut claimed, mut stale) = if ra.is_ok() { (a, b) } else { (b, a) };
    let e = stale
        .cleanup_succeeded()
        .await
        .expect_err("a stale runner cannot finish it");
    assert_eq!(classify(&e), HandleErrorKind::Stale, "{e}");
    claimed
        .cleanup_failed("media error".into())
        .await
        .expect("recorded");
    let row = db.host_handle(&handle).await.expect("row");
    assert_eq!(row.cleanup_state.map(|s| s.as_str()), Some("error"));
    // The device someone else moved to error cannot be made available by the stale one.
    let e = stale.cleanup_succeeded().await.expect_err("moved");
    assert_eq!(classify(&e), HandleErrorKind::NotCleaning, "{e}");
    assert_eq!(db.host_handle(&handle).await.expect("row"), row);
    agent.stop().await;
    conductor.stop().await;
}

async fn unmanaged_is_refused_before_finalization(db: Db) {
    pre_finalize(&db).await;
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.0").await;
    let scripts = Scripts::new();
    // A managed agent runs (and reports the host's handles).
    let managed = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect("a managed agent starts before finalization");
    managed.stop().await;
    // An unmanaged one refuses to start with the typed error, changing nothing.
    let mut config = agent_config(&scripts, "ok.sh");
    config.pci_managed = false;
    let err = agent(&transport, config.clone())
        .await
        .expect_err("refused before finalization");
    let AgentStartError::NotFinalized(refusal) = &err else {
        panic!("not the typed refusal: {err}")
    };
    assert_eq!((refusal.required, refusal.apparent), (2, 1));
    assert_eq!(refusal.feature, accel_objects::UNMANAGED_FEATURE);
    assert!(
        err.to_string().contains("finalize the upgrade first"),
        "{err}"
    );
    // Any other caller (a tool, an old agent's own code) gets the conductor's typed
    // remote refusal.
    let ctx = service::conductor_context(transport.clone(), None);
    let handles = AttachHandleList::get_by_host(&ctx, HOST.into())
        .await
        .expect("get_by_host");
    let mut h = handles.iter().next().expect("a handle").clone();
    h.meta.context = Some(Box::new(ctx));
    let rev = h.current_revision().expect("revision");
    let e = h.update_managed(false, rev).await.expect_err("gated");
    assert_eq!(e.kind(), "NotSupportedBeforeFinalization");
    let typed = not_supported(&e).expect("typed");
    assert_eq!(
        (typed.feature.as_str(), typed.required, typed.apparent),
        (accel_objects::UNMANAGED_FEATURE, 2, 1)
    );
    assert_eq!(classify(&e), HandleErrorKind::NotFinalized(typed));
    assert!(db
        .host_handles(HOST)
        .await
        .expect("handles")
        .iter()
        .all(|h| !h.attach_info.contains("managed")));
    // Once the conductor is finalized, the same agent (same record) starts: its start's
    // heartbeat finalizes it before the check.
    conductor.versions.finalize().await.expect("finalize");
    let agent = agent(&transport, config)
        .await
        .expect("starts once finalized");
    assert!(db
        .host_handles(HOST)
        .await
        .expect("handles")
        .iter()
        .all(|h| !accel_objects::attach_info_managed(&h.attach_info)));
    agent.stop().await;
    conductor.stop().await;
}

async fn managed_mode_validation(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = conductor(&db, &transport, "1.1").await;
    let scripts = Scripts::new();
    let c = client(&transport);

    // managed = false: every PCI handle of the host gets it, keeping its uuid.
    let mut unmanaged = agent_config(&scripts, "ok.sh");
    unmanaged.pci_managed = false;
    let first = agent(&transport, unmanaged.clone())
        .await
        .expect("agent starts");
    let handles = db.host_handles(HOST).await.expect("handles");
    assert!(!handles.is_empty());
    assert!(
        handles
            .iter()
            .all(|h| !accel_objects::attach_info_managed(&h.attach_info)),
        "{handles:?}"
    );
    // A report does not replace them (the managed key is metadata, not identity).
    first.report_now().await.expect("report");
    let after: Vec<_> = db.host_handles(HOST).await.expect("handles");
    assert_eq!(after, handles);
    first.stop().await;
    // A restart with the same setting changes nothing.
    let again = agent(&transport, unmanaged.clone())
        .await
        .expect("agent starts");
    assert_eq!(db.host_handles(HOST).await.expect("handles"), handles);
    again.stop().await;

    // An allocated handle would change: refused, naming device, handle, instance, setting.
    let (_arq, bound) = bind_ssd(&c, "vm-42").await;
    let err = agent(&transport, agent_config(&scripts, "ok.sh"))
        .await
        .expect_err("refused");
    let AgentStartError::ManagedModeInUse {
        handle,
        instance,
        persisted,
        configured,
        device,
    } = &err
    else {
        panic!("not the managed-mode refusal: {err}")
    };
    assert_eq!(
        (handle.as_str(), instance.as_deref()),
        (bound.as_str(), Some("vm-42"))
    );
    assert_eq!((*persisted, *configured), (false, true));
    assert!(
        device.contains("SSD") && device.contains("0000:3c:00.0"),
        "{device}"
    );
    let text = err.to_string();
    assert!(
        text.contains("[pci] managed = false") && text.contains("vm-42") && text.contains(&bound),
        "{text}"
    );
    // Nothing was changed by the refused start.
    assert!(db
        .host_handles(HOST)
        .await
        .expect("handles")
        .iter()
        .all(|h| !accel_objects::attach_info_managed(&h.attach_info)));

    // managed = false with [upgrade_levels] conductor = "1.0": the configuration error.
    let mut pinned = unmanaged.clone();
    pinned.conductor_cap = Some(Version::new(1, 0));
    let err = agent(&transport, pinned).await.expect_err("refused");
    assert!(matches!(err, AgentStartError::Indirection(_)), "{err}");
    let text = err.to_string();
    for needed in [
        "PCI unmanaged mode ([pci] managed = false) needs object indirection",
        "conductor RPC 1.1",
        "[upgrade_levels] conductor is 1.0",
    ] {
        assert!(text.contains(needed), "{needed:?} missing from {text}");
    }
    // With no feature that needs indirection, a 1.0 agent runs (and skips validation).
    let mut plain = agent_config(&scripts, "ok.sh");
    plain.conductor_cap = Some(Version::new(1, 0));
    let plain = agent(&transport, plain).await.expect("agent starts at 1.0");
    assert!(!plain.uses_indirection());
    plain.stop().await;
    conductor.stop().await;
}

on_both_databases!(
    cleanup_through_cleanup_device,
    cleanup_through_the_scan_when_agent_is_capped,
    failed_and_hung_cleanups_leave_the_device_in_error,
    an_agent_killed_during_cleanup_is_recovered_at_its_next_start,
    a_conductor_restarted_during_cleanup_gets_the_result_once,
    update_managed_races_have_one_winner,
    unmanaged_is_refused_before_finalization,
    managed_mode_validation,
);
