//! A vGPU bound and released through this conductor: the host's agent makes and removes
//! the mediated device, Cyborg 17's agent API (`create_vgpu_mdev` / `remove_vgpu_mdev`
//! with Cyborg's arguments, RabbitMQ, exchange `cyborg`), served by accel's agent on a
//! fixture sysfs `mdev_supported_types` tree. A host whose agent cannot make the device
//! fails the bind (`BindFailed`) and keeps its handle free.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and
//! `VERSO_TEST_PLACEMENT_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing::nova::Nova as TestNova;
use accel_cyborg17::objects::{Arq, DeviceProfile, ExtArq};
use accel_cyborg17::testing::cyborg_transport;
use accel_cyborg17_conductor::binds::Nova;
use accel_cyborg17_conductor::db::{NewDeployable, NewDevice};
use accel_cyborg17_conductor::requests::{Agents, RequestError};
use accel_cyborg17_conductor::{Requests, Store};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use support::{bind_patch, session, state_of};
use verso::VersionedObject;

mod support;

const GPU: &str = "0000:3b:00.0";
const MDEV_TYPE: &str = "nvidia-35";

/// The GPU's `mdev_supported_types` tree of the one type.
fn fixture(root: &Path) -> std::path::PathBuf {
    accel_agent::fixture::write_mdev_type(root, GPU, MDEV_TYPE).expect("mdev tree")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vgpu_is_made_at_bind_and_removed_at_unbind_on_its_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = dir.path().join("sys");
    let type_dir = fixture(&sysfs);
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-vgpu-{suffix}");
    let instance = "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d";
    let transport = cyborg_transport().await;
    let agent = accel_cyborg17_agent::cyborg::serve(transport.clone(), &host, sysfs.clone(), None)
        .await
        .expect("the host's agent serves cyborg-agent");
    let nova = TestNova::builder().server(instance, "vm").start().await;

    // The GPU as Cyborg's NVIDIA driver reports one vGPU type: one MDEV handle.
    let store = Store::connect(&format!(
        "sqlite://{}",
        dir.path().join("c.sqlite").display()
    ))
    .await
    .expect("connect");
    store.sync().await.expect("sync");
    let attach_info = json!({"asked_type": MDEV_TYPE, "bus": "3b", "device": "00",
        "domain": "0000", "function": "0", "vgpu_mark": format!("{MDEV_TYPE}_0")})
    .to_string();
    let name = format!("{host}_{GPU}");
    let (device_id, _) = store
        .create_device(
            &host,
            &NewDevice {
                r#type: "GPU",
                vendor: "10de",
                model: "1eb8",
                std_board_info: None,
                vendor_board_info: None,
                device_state: "available",
                cpid_type: "PCI",
                cpid_info: r#"{"bus": "3b", "device": "00", "domain": "0000", "function": "0"}"#,
            },
            &[NewDeployable {
                name: &name,
                num_accelerators: 1,
                driver_name: Some("nvidia"),
                attributes: vec![("rc", "VGPU")],
                handles: vec![("MDEV", &attach_info, false)],
            }],
        )
        .await
        .expect("the GPU stored");
    let rp = "7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f";
    store
        .set_rp_uuid(device_id, &name, rp)
        .await
        .expect("its provider");

    let requests = Requests::new(
        store.clone(),
        Some(Agents::new(transport, Duration::from_secs(30))),
    )
    .with_nova(Nova::new(session(), Some(nova.url().to_owned())));
    let mut profile = DeviceProfile::blank();
    profile.name.set(format!("vgpu-{suffix}"));
    profile.groups.set(vec![BTreeMap::from([(
        "resources:VGPU".to_owned(),
        Some("1".to_owned()),
    )])]);
    let profile = requests.create_profile(&profile).await.expect("a profile");
    let mut arq = Arq::blank();
    arq.device_profile_name.set(format!("vgpu-{suffix}"));
    arq.device_profile_group_id.set(0);
    let mut ext = ExtArq::blank();
    ext.arq.set(arq);
    let made = requests
        .create_arq(&ext, profile.id.get().copied())
        .await
        .expect("a request");
    let uuid = made
        .arq
        .get()
        .and_then(|a| a.uuid.get())
        .expect("its uuid")
        .to_string();

    // Bound: the handle's UUID written to the type's `create`, the request Bound.
    let (patch, fields) = bind_patch(&uuid, &host, rp, instance);
    requests
        .apply_patch(&patch, &fields, None)
        .await
        .expect("bound");
    let bound = requests.arq(&uuid).await.expect("read");
    let arq = bound.arq.get().expect("arq");
    assert_eq!(state_of(&requests, &uuid).await, "Bound");
    assert_eq!(
        arq.attach_handle_type.get().cloned().flatten().as_deref(),
        Some("MDEV")
    );
    let handle = arq
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("a handle");
    assert_eq!(
        std::fs::read_to_string(type_dir.join("create")).expect("create"),
        handle
    );
    assert_eq!(nova.of(instance).len(), 1);

    // The kernel made the device; unbinding removes it (writes 1 to its `remove`).
    let device = type_dir.join("devices").join(&handle);
    std::fs::create_dir_all(&device).expect("mdev device");
    std::fs::write(device.join("remove"), "").expect("remove attribute");
    let unbind = BTreeMap::from([(uuid.clone(), json!([{"path": "/hostname", "op": "remove"}]))]);
    requests
        .apply_patch(&unbind, &BTreeMap::new(), None)
        .await
        .expect("unbound");
    assert_eq!(
        std::fs::read_to_string(device.join("remove")).expect("remove"),
        "1"
    );
    assert_eq!(state_of(&requests, &uuid).await, "Unbound");

    // The agent refuses to make the device (the type is gone from the GPU): BindFailed,
    // the handle free for the next bind.
    std::fs::remove_dir_all(&type_dir).expect("the type gone");
    let (patch, fields) = bind_patch(&uuid, &host, rp, instance);
    let err = requests
        .apply_patch(&patch, &fields, None)
        .await
        .expect_err("refused");
    assert!(matches!(err, RequestError::Agent { .. }), "{err:?}");
    assert_eq!(state_of(&requests, &uuid).await, "BindFailed");
    let free: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM attach_handles WHERE in_use = 0")
        .fetch_one(store.pool())
        .await
        .expect("count");
    assert_eq!(free, 1, "the handle is free again");
    agent.stop().await;
}
