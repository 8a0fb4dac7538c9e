//! accel's release N+1 agent on Cyborg's wire (`AgentConfig::cyborg_wire`), against a
//! real conductor serving Cyborg's conductor API with the seed spec
//! (`accel_conductor::cyborg`, 1.1) beside its upgrade API, on SQLite and PostgreSQL,
//! over the memory transport, on the sysfs fixture host with two NVMe SSDs and fake
//! cleanup commands:
//!
//! - its inventory lands through Cyborg's `report_data`; it heartbeats on accel's
//!   upgrade API, so the fleet record has its software, not Cyborg 17's;
//! - NVMe cleanups on Cyborg's `Device.device_state`: started by `cleanup_device`
//!   (Cyborg agent API 1.1, or accel's of a handle: accel's agent API is served too) or
//!   found by the scan, claimed, erased, recorded; a failed
//!   erase leaves the device in `error`; an erase interrupted by a stop is done again at
//!   the next start; `cleanup_device` for a device not waiting is refused, typed; the
//!   conductor casts it under `[upgrade_levels] cyborg_agent` 1.1, not below;
//! - the PCI managed mode through `AttachHandleList.get_by_hostname` and
//!   `AttachHandle.update_managed`: set on free handles, a start refused when an
//!   allocated handle would change, `[pci] managed = false` refused with
//!   `[upgrade_levels] cyborg_conductor` below 1.1.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[macro_use]
mod features;

use accel_agent::service::{AgentStartError, CyborgWire, RunningAgent};
use accel_conductor::handles::HostHandle;
use accel_conductor::runtime::{self, CyborgAgents, RunningConductor, StartOptions};
use accel_conductor::service::{AgentNotifier, CleanupNotice};
use accel_conductor::testing as support;
use accel_conductor::{cyborg, Db};
use accel_cyborg17::rpc::{AGENT_TOPIC, CONDUCTOR_TOPIC};
use accel_objects::cyborg::{AgentApi, CleanupDevice};
use accel_objects::{attach_info_managed, AccelVersion, CleanupState};
use features::*;
use std::sync::Arc;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcError, ServerHandle};
use verso_upgrade::ComponentVersion;

/// A conductor with its upgrade API and accel's conductor API (for the API's binds;
/// agent cap 1.0: it sends accel's `cleanup_device` to no one), and Cyborg's conductor
/// API with the seed spec on Cyborg's topic, witnessed by its coordinator; it casts
/// Cyborg's `cleanup_device` under `cyborg_agent_cap` (`None`: it has no client of
/// Cyborg's agent API).
async fn conductor_for_cyborg(
    db: &Db,
    transport: &Arc<dyn Transport>,
    cyborg_agent_cap: Option<&str>,
) -> (RunningConductor, ServerHandle) {
    let options = StartOptions {
        cyborg_agents: cyborg_agent_cap.map(|cap| CyborgAgents {
            transport: transport.clone(),
            cap: Some(cap.parse().expect("cap")),
        }),
        ..StartOptions::default()
    };
    let running = runtime::start_with(
        db.clone(),
        transport.clone(),
        Some(Version::new(1, 0)),
        options,
    )
    .await
    .expect("conductor starts");
    let served = cyborg::serve(
        transport.clone(),
        db.clone(),
        CONDUCTOR_TOPIC,
        Some(running.coordinator.clone()),
    )
    .await
    .expect("Cyborg's conductor API listens");
    (running, served)
}

/// The fixture host's agent on Cyborg's wire, erasing with `script`.
fn on_cyborgs_wire(
    transport: &Arc<dyn Transport>,
    scripts: &Scripts,
    script: &str,
) -> accel_agent::service::AgentConfig {
    let mut c = agent_config(scripts, script);
    c.cyborg_wire = Some(CyborgWire {
        transport: transport.clone(),
        conductor_cap: None,
        report_timeout: Duration::from_secs(30),
    });
    c
}

/// The fixture host's agent on Cyborg's wire, erasing with `script`, started.
async fn agent_on_wire(
    transport: &Arc<dyn Transport>,
    scripts: &Scripts,
    script: &str,
) -> RunningAgent {
    accel_agent::service::start(
        on_cyborgs_wire(transport, scripts, script),
        transport.clone(),
    )
    .await
    .expect("agent starts")
}

/// Cyborg's `cleanup_device` to the fixture host's agent, as a conductor at agent 1.1
/// sends it.
async fn cleanup_device(transport: &Arc<dyn Transport>, device_uuid: &str) -> Result<(), RpcError> {
    RpcClient::for_api::<AgentApi>(transport.clone(), AGENT_TOPIC)
        .prepare()
        .server(HOST)
        .call_method(
            &RequestContext::new("req-cleanup-device"),
            CleanupDevice {
                device_uuid: device_uuid.to_owned(),
            },
        )
        .await
        .map(|_| ())
}

/// The device a handle belongs to (its UUID), from the handle's row.
async fn device_of(db: &Db, handle: &str) -> HostHandle {
    db.host_handle(handle).await.expect("handle")
}

/// The kind of a remote error.
fn remote_kind(e: &RpcError) -> &str {
    match e {
        RpcError::Remote(r) => &r.kind,
        other => panic!("not a remote error: {other}"),
    }
}

async fn cleans_devices_on_cyborgs_lifecycle(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let (conductor, cyborg_api) = conductor_for_cyborg(&db, &transport, None).await;
    let scripts = Scripts::new();
    let agent = agent_on_wire(&transport, &scripts, "ok.sh").await;
    assert!(agent.uses_indirection());

    // Its report came through Cyborg's report_data: both SSDs, with their handles.
    let handles = db.host_handles(HOST).await.expect("handles");
    assert!(handles.len() >= 2, "{handles:?}");
    assert!(agent.devices_reported() >= 2);
    // It heartbeats: the fleet record has it at this build's software, so it does
    // not block finalization as a Cyborg 17 agent does.
    let fleet = conductor.coordinator.status().await.expect("status");
    let me = fleet
        .clients
        .iter()
        .find(|m| m.host == HOST)
        .unwrap_or_else(|| panic!("{HOST} in {fleet:?}"));
    assert_eq!(
        (me.software, me.heartbeats, me.live),
        (AccelVersion::software().number(), true, true),
        "{me:?}"
    );

    // Released for cleaning, started by cleanup_device.
    let c = client(&transport);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    let bound = device_of(&db, &handle).await;
    unbind(&c, &arq).await;
    cleanup_device(&transport, &bound.device_uuid)
        .await
        .expect("cleanup_device");
    let done = wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    assert_eq!(
        done.revision,
        bound.revision + 3,
        "released, started and succeeded, each recorded once"
    );
    assert_eq!(scripts.erased(), vec!["/dev/nvme0n1".to_owned()]);

    // A device not waiting for a cleanup, and one that is not there: refused, typed.
    let refused = cleanup_device(&transport, &bound.device_uuid)
        .await
        .expect_err("not waiting");
    assert_eq!(remote_kind(&refused), "NotCleaning", "{refused}");
    let refused = cleanup_device(&transport, &uuid::Uuid::new_v4().to_string())
        .await
        .expect_err("not there");
    assert_eq!(remote_kind(&refused), "NotFound", "{refused}");
    let refused = cleanup_device(&transport, "not-a-uuid")
        .await
        .expect_err("no UUID");
    assert_eq!(remote_kind(&refused), "InvalidUUID", "{refused}");

    // Released again, no call: the scan finds it.
    let (arq, handle) = bind_ssd(&c, "vm-2").await;
    unbind(&c, &arq).await;
    assert_eq!(agent.scan_now().await.expect("scan"), 1);
    wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    assert_eq!(scripts.erased().len(), 2, "{:?}", scripts.erased());
    assert_eq!(agent.scan_now().await.expect("scan"), 0, "nothing left");

    // accel's own agent API is served too: accel's `cleanup_device` of a handle cleans
    // the handle's device, and `report_now` reports.
    let accel_api = RpcClient::for_api::<accel_objects::rpc::AgentApi>(
        transport.clone(),
        accel_objects::rpc::AGENT_TOPIC,
    );
    let (arq, handle) = bind_ssd(&c, "vm-3").await;
    unbind(&c, &arq).await;
    let erased = scripts.erased().len();
    accel_api
        .prepare()
        .server(HOST)
        .call_method(
            &ctx(),
            accel_objects::rpc::CleanupDevice {
                handle_uuid: handle.clone(),
            },
        )
        .await
        .expect("accel's cleanup_device");
    wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    assert!(scripts.erased().len() > erased, "{:?}", scripts.erased());
    let n = accel_api
        .prepare()
        .server(HOST)
        .call_method(&ctx(), accel_objects::rpc::ReportNow {})
        .await
        .expect("report_now");
    assert_eq!(n, agent.devices_reported());
    agent.stop().await;
    cyborg_api.stop().await;
    conductor.stop().await;
}

async fn failed_and_interrupted_cleanups(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let (conductor, cyborg_api) = conductor_for_cyborg(&db, &transport, None).await;
    let scripts = Scripts::new();
    let c = client(&transport);

    // A failed erase: the device goes to error with the command's reason.
    let failing = agent_on_wire(&transport, &scripts, "fail.sh").await;
    let (arq, first) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    assert_eq!(failing.scan_now().await.expect("scan"), 1);
    let h = wait_for(&db, &first, Duration::from_secs(15), "failed", |h| {
        h.cleanup_state == Some(CleanupState::Error)
    })
    .await;
    assert!(
        h.cleanup_reason
            .as_deref()
            .is_some_and(|r| r.contains("media error")),
        "{h:?}"
    );
    assert!(scripts.erased().is_empty());
    failing.stop().await;

    // An erase interrupted by a stop: claimed (`cleaning`), then the agent goes.
    let slow = agent_on_wire(&transport, &scripts, "slow-ok.sh").await;
    let (arq, second) = bind_ssd(&c, "vm-2").await;
    assert_ne!(first, second, "the failed device is out of the pool");
    unbind(&c, &arq).await;
    assert_eq!(slow.scan_now().await.expect("scan"), 1);
    scripts.wait_for_started(1, Duration::from_secs(15)).await;
    slow.stop().await;
    let h = device_of(&db, &second).await;
    assert!(started(&h), "claimed and left: {h:?}");
    assert!(scripts.erased().is_empty());
    // The next start resumes it (the device is `cleaning`, no second claim) and
    // records the outcome once.
    let again = agent_on_wire(&transport, &scripts, "ok.sh").await;
    let done = wait_for(&db, &second, Duration::from_secs(15), "resumed", available).await;
    assert_eq!(done.revision, h.revision + 1, "succeeded, recorded once");
    // Every namespace of the device's function, each once: the fixture's second SSD
    // has two.
    assert_eq!(
        scripts.erased(),
        vec!["/dev/nvme1n1".to_owned(), "/dev/nvme1n2".to_owned()]
    );
    again.stop().await;
    cyborg_api.stop().await;
    conductor.stop().await;
}

/// The conductor casts Cyborg's `cleanup_device` to the device's host once
/// `[upgrade_levels] cyborg_agent` allows 1.1, and not below.
async fn the_conductor_casts_cleanup_device_under_its_cap(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    // The notifier's choice, without a conductor.
    let notifier = AgentNotifier::new(transport.clone(), Some(Version::new(1, 0)));
    assert_eq!(notifier.cyborg_cleanup_released(HOST, "d").await, None);
    let notifier = notifier.with_cyborg(transport.clone(), Some(Version::new(1, 0)));
    assert_eq!(
        notifier.cyborg_cleanup_released(HOST, "d").await,
        Some(CleanupNotice::LeftForScan { cap: "1.0".into() })
    );

    let (conductor, cyborg_api) = conductor_for_cyborg(&db, &transport, Some("1.1")).await;
    let scripts = Scripts::new();
    let agent = agent_on_wire(&transport, &scripts, "ok.sh").await;
    let c = client(&transport);
    let (arq, handle) = bind_ssd(&c, "vm-1").await;
    unbind(&c, &arq).await;
    // The scan runs hourly here and nobody calls the agent: only the conductor's cast
    // can have started this.
    wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    assert_eq!(scripts.erased(), vec!["/dev/nvme0n1".to_owned()]);
    agent.stop().await;
    cyborg_api.stop().await;
    conductor.stop().await;

    // At 1.0 nothing is cast: the device waits for the agent's scan.
    let (conductor, cyborg_api) = conductor_for_cyborg(&db, &transport, Some("1.0")).await;
    let agent = agent_on_wire(&transport, &scripts, "ok.sh").await;
    let (arq, handle) = bind_ssd(&c, "vm-2").await;
    unbind(&c, &arq).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let h = device_of(&db, &handle).await;
    assert_eq!(h.cleanup_state, Some(CleanupState::Cleaning), "{h:?}");
    assert!(h.cleanup_reason.is_none(), "no agent claimed it: {h:?}");
    assert_eq!(agent.scan_now().await.expect("scan"), 1);
    wait_for(&db, &handle, Duration::from_secs(15), "cleaned", available).await;
    agent.stop().await;
    cyborg_api.stop().await;
    conductor.stop().await;
}

async fn start(
    transport: &Arc<dyn Transport>,
    scripts: &Scripts,
    managed: bool,
    cap: Option<Version>,
) -> Result<RunningAgent, AgentStartError> {
    let mut config = on_cyborgs_wire(transport, scripts, "ok.sh");
    config.pci_managed = managed;
    if let Some(wire) = config.cyborg_wire.as_mut() {
        wire.conductor_cap = cap;
    }
    accel_agent::service::start(config, transport.clone()).await
}

fn pci_modes(handles: &[HostHandle]) -> Vec<bool> {
    handles
        .iter()
        .filter(|h| h.attach_type == "PCI")
        .map(|h| attach_info_managed(&h.attach_info))
        .collect()
}

async fn managed_mode_through_cyborgs_classes(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let (conductor, cyborg_api) = conductor_for_cyborg(&db, &transport, None).await;
    assert!(conductor.versions.is_allowed(AccelVersion::DriverFeatures));
    let scripts = Scripts::new();

    // Unmanaged: every free PCI handle gets it after the first report, UUIDs kept.
    let agent = start(&transport, &scripts, false, None)
        .await
        .expect("agent starts");
    let handles = db.host_handles(HOST).await.expect("handles");
    assert!(!handles.is_empty());
    assert!(pci_modes(&handles).iter().all(|m| !m), "{handles:?}");
    agent.stop().await;
    // Started again, nothing to change: nothing written.
    let again = start(&transport, &scripts, false, None)
        .await
        .expect("agent starts");
    assert_eq!(db.host_handles(HOST).await.expect("handles"), handles);
    again.stop().await;

    // An allocated handle would change: refused, naming the device and the handle.
    let c = client(&transport);
    let (_arq, bound) = bind_ssd(&c, "vm-42").await;
    let before = db.host_handles(HOST).await.expect("handles");
    let err = start(&transport, &scripts, true, None)
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
    let row = device_of(&db, &bound).await;
    assert_eq!((handle.as_str(), instance), (bound.as_str(), &None));
    assert_eq!((*persisted, *configured), (false, true));
    assert!(
        device.contains(&row.device_uuid)
            && device.contains("SSD")
            && device.contains(&row.control_path_id),
        "{device}"
    );
    assert!(err.to_string().contains("[pci] managed = false"), "{err}");
    assert_eq!(
        db.host_handles(HOST).await.expect("handles"),
        before,
        "a refused start changes nothing"
    );

    // Below 1.1 there is no indirection: unmanaged mode is refused, naming the option.
    let err = start(&transport, &scripts, false, Some(Version::new(1, 0)))
        .await
        .expect_err("refused");
    let AgentStartError::Indirection(e) = &err else {
        panic!("not the indirection refusal: {err}")
    };
    assert_eq!(e.option, "cyborg_conductor");
    assert!(err
        .to_string()
        .contains("[upgrade_levels] cyborg_conductor"));
    // Managed and capped: it runs, reporting only (nothing to validate with).
    let plain = start(&transport, &scripts, true, Some(Version::new(1, 0)))
        .await
        .expect("agent starts at 1.0");
    assert!(!plain.uses_indirection());
    plain.stop().await;
    cyborg_api.stop().await;
    conductor.stop().await;
}

on_both_databases!(
    cleans_devices_on_cyborgs_lifecycle,
    failed_and_interrupted_cleanups,
    managed_mode_through_cyborgs_classes,
    the_conductor_casts_cleanup_device_under_its_cap,
);
