//! The conductor's RPC service over the memory transport and both databases: an agent's
//! discovery reported over RPC, profiles and requests, typed errors, and a client pinned
//! to conductor 1.0 (release N's agents) still served.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_agent::discovery::discover;
use accel_agent::report::driver_devices;
use accel_conductor::service::{endpoint, ReleasePolicy};
use accel_conductor::testing as support;
use accel_conductor::{db::Release, Db};
use accel_objects::rpc::{
    BindArq, ConductorApi, CreateArqs, CreateDeviceProfile, DeleteArqs, ReportData, UnbindArq,
};
use std::path::Path;
use std::sync::Arc;
use verso::{ObjectList, RequestContext, Version};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{RpcClient, RpcError, RpcServer, Target};

async fn scenario(db: Db) {
    let transport = Arc::new(MemoryTransport::new());
    let release: ReleasePolicy = Arc::new(|| Release::Immediate);
    let server = RpcServer::new(transport.clone(), Target::new("accel-conductor"))
        .endpoint(endpoint(
            db.clone(),
            accel_objects::registry(),
            release,
            |ctx| ctx,
        ))
        .expect("endpoint")
        .start()
        .await
        .expect("start");
    // Release N's agents speak conductor 1.0: everything but indirection works for them.
    let client = RpcClient::for_api::<ConductorApi>(transport, "accel-conductor")
        .version_cap(Version::new(1, 0));
    let ctx = RequestContext::new("req-test");

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/sysfs/host2");
    let devices = driver_devices(&discover(&root).expect("discover"));
    let n = devices.len();
    let summary = client
        .call_method(
            &ctx,
            ReportData {
                hostname: "host2".into(),
                devices: devices.clone(),
            },
        )
        .await
        .expect("report");
    assert_eq!(summary.added.len(), n);
    let again = client
        .call_method(
            &ctx,
            ReportData {
                hostname: "host2".into(),
                devices: devices.clone(),
            },
        )
        .await
        .expect("report");
    assert_eq!((again.unchanged, again.added.len()), (n as u64, 0));

    // A device without a vendor would be stored as one that can never be bound: the
    // report is refused whole, naming the field, and the inventory stays as it was.
    let stored = db.host_handles("host2").await.expect("handles");
    let mut members = devices.objects.get().cloned().expect("members");
    members[0].vendor = verso::Field::default();
    let mut broken = devices;
    broken.objects = members.into();
    let e = client
        .call_method(
            &ctx,
            ReportData {
                hostname: "host2".into(),
                devices: broken,
            },
        )
        .await
        .expect_err("a device without a vendor");
    assert!(
        e.to_string()
            .contains("reported device #0: DriverDevice.vendor is unset"),
        "{e}"
    );
    assert_eq!(db.host_handles("host2").await.expect("handles"), stored);

    let groups = vec![[("resources:FPGA".to_owned(), "1".to_owned())]
        .into_iter()
        .collect()];
    let profile = client
        .call_method(
            &ctx,
            CreateDeviceProfile {
                name: "fpga".into(),
                groups,
                description: None,
            },
        )
        .await
        .expect("profile");
    assert_eq!(profile.name.get().map(String::as_str), Some("fpga"));
    let arqs = client
        .call_method(
            &ctx,
            CreateArqs {
                device_profile_name: "fpga".into(),
                group_id: None,
                project_id: None,
            },
        )
        .await
        .expect("arqs");
    assert_eq!(arqs.len(), 1);
    let uuid = arqs[0].uuid.get().expect("uuid").to_string();
    let bound = client
        .call_method(
            &ctx,
            BindArq {
                uuid: uuid.clone(),
                hostname: "host2".into(),
                instance_uuid: "i-1".into(),
                device_rp_uuid: None,
                project_id: None,
            },
        )
        .await
        .expect("bind");
    assert_eq!(bound.state.get().map(String::as_str), Some("Bound"));
    // A second FPGA request finds none free on host2: the typed kind reaches the caller.
    let more = client
        .call_method(
            &ctx,
            CreateArqs {
                device_profile_name: "fpga".into(),
                group_id: Some(0),
                project_id: None,
            },
        )
        .await
        .expect("arqs");
    let second = more[0].uuid.get().expect("uuid").to_string();
    let err = client
        .call_method(
            &ctx,
            BindArq {
                uuid: second,
                hostname: "host2".into(),
                instance_uuid: "i-2".into(),
                device_rp_uuid: None,
                project_id: None,
            },
        )
        .await
        .expect_err("no free FPGA");
    match err {
        RpcError::Remote(r) => assert_eq!(
            (r.kind.as_str(), r.module.as_str()),
            ("NoFreeHandle", "accel")
        ),
        other => panic!("expected a remote error, got {other}"),
    }
    let unbound = client
        .call_method(&ctx, UnbindArq { uuid: uuid.clone() })
        .await
        .expect("unbind");
    assert_eq!(unbound.state.get().map(String::as_str), Some("Unbound"));
    let deleted = client
        .call_method(
            &ctx,
            DeleteArqs {
                uuids: vec![uuid.clone(), uuid],
                instance_uuid: None,
            },
        )
        .await
        .expect("delete");
    assert_eq!(deleted, 1, "deleting twice deletes once");
    // Object indirection is 1.1: the pinned client cannot send it.
    assert!(!client.can_send_version("1.1"));
    server.stop().await;
}

#[tokio::test]
async fn sqlite_service() {
    let (db, _dir) = support::sqlite().await;
    scenario(db).await;
}

#[tokio::test]
async fn postgres_service() {
    scenario(support::postgres().await).await;
}

#[tokio::test]
async fn mysql_service() {
    scenario(support::mysql().await).await;
}
