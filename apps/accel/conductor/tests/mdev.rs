//! Mediated devices (vGPUs) at bind and unbind, as Cyborg 17's conductor makes them: a
//! GPU whose attach handles are `MDEV` (what Cyborg's NVIDIA driver reports with
//! `[devices] enabled_vgpu_types`) is bound through the conductor API, and the conductor
//! has the host's agent make the mediated device (`create_vgpu_mdev` of Cyborg's agent
//! API, served here by accel's implementation of it, on a sysfs tree in a scratch
//! directory), named by the handle's UUID; unbinding removes it; a device that cannot be
//! made fails the bind (`MdevFailed`) and leaves the request unbound, its handle free;
//! one that cannot be removed fails the unbind (`MdevFailed`) and leaves the request
//! `UnbindFailed` holding its handle, until an unbind or delete removes it.
//! On SQLite and PostgreSQL, over the memory transport.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[macro_use]
mod features;

use accel_conductor::db::ReportedDevice;
use accel_conductor::runtime::{self, CyborgAgents, StartOptions};
use accel_conductor::testing as support;
use accel_conductor::Db;
use accel_objects::rpc::{BindArq, CreateArqs, CreateDeviceProfile, UnbindArq};
use features::{client, ctx};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verso::{ObjectList, Version};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcError};

const HOST: &str = "vgpu-host";
const GPU: &str = "0000:3b:00.0";
const TYPE: &str = "nvidia-35";

/// A mediated device's attach info as Cyborg's GPU driver writes it.
fn mdev_info(n: usize) -> String {
    serde_json::json!({
        "asked_type": TYPE, "bus": "3b", "device": "00", "domain": "0000",
        "function": "0", "vgpu_mark": format!("{TYPE}_{n}"),
    })
    .to_string()
}

/// The GPU's mdev type directory in the host's sysfs tree at `root`.
fn type_dir(root: &Path) -> PathBuf {
    root.join("class/mdev_bus")
        .join(GPU)
        .join("mdev_supported_types")
        .join(TYPE)
}

/// A new request of the `vgpu` profile.
async fn request(c: &RpcClient) -> String {
    let arqs = c
        .call_method(
            &ctx(),
            CreateArqs {
                device_profile_name: "vgpu".into(),
                group_id: None,
                project_id: None,
            },
        )
        .await
        .expect("create arqs");
    arqs.iter()
        .next()
        .and_then(|a| a.uuid.get())
        .expect("a request")
        .to_string()
}

async fn bind(c: &RpcClient, arq: &str, instance: &str) -> Result<String, RpcError> {
    let bound = c
        .call_method(
            &ctx(),
            BindArq {
                uuid: arq.to_owned(),
                hostname: HOST.into(),
                instance_uuid: instance.into(),
                device_rp_uuid: None,
                project_id: None,
            },
        )
        .await?;
    Ok(bound
        .attach_handle_uuid
        .get()
        .cloned()
        .flatten()
        .expect("bound to a handle"))
}

async fn vgpus_are_made_at_bind_and_removed_at_unbind(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let conductor = runtime::start_with(
        db.clone(),
        transport.clone(),
        Some(Version::new(1, 0)),
        StartOptions {
            cyborg_agents: Some(CyborgAgents {
                transport: transport.clone(),
                cap: None,
            }),
            ..StartOptions::default()
        },
    )
    .await
    .expect("conductor starts");
    // The host's agent on Cyborg's agent API, over a sysfs tree with the GPU's type.
    let sysfs = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(type_dir(sysfs.path())).expect("mdev tree");
    std::fs::write(type_dir(sysfs.path()).join("create"), "").expect("create attribute");
    let agent = accel_agent::cyborg::serve(transport.clone(), HOST, sysfs.path().to_owned(), None)
        .await
        .expect("the agent's Cyborg API");
    let gpu = ReportedDevice {
        control_path_id: GPU.into(),
        device_type: "GPU".into(),
        vendor: "10de".into(),
        model: "1eb8".into(),
        handles: (0..2).map(|n| ("MDEV".to_owned(), mdev_info(n))).collect(),
        ..Default::default()
    };
    db.report(HOST, &[gpu]).await.expect("the GPU reported");
    let c = client(&transport);
    c.call_method(
        &ctx(),
        CreateDeviceProfile {
            name: "vgpu".into(),
            groups: vec![[("resources:VGPU".to_owned(), "1".to_owned())]
                .into_iter()
                .collect::<BTreeMap<_, _>>()],
            description: None,
        },
    )
    .await
    .expect("profile");

    // A bind makes the mediated device, named by the handle.
    let arq = request(&c).await;
    let handle = bind(&c, &arq, "vm-1").await.expect("bound");
    assert_eq!(
        std::fs::read_to_string(type_dir(sysfs.path()).join("create")).expect("create"),
        handle
    );
    // (The kernel makes the device's directory.)
    let remove = type_dir(sysfs.path())
        .join("devices")
        .join(&handle)
        .join("remove");
    std::fs::create_dir_all(remove.parent().expect("dir")).expect("device dir");
    std::fs::write(&remove, "").expect("remove attribute");
    // An unbind removes it.
    c.call_method(&ctx(), UnbindArq { uuid: arq.clone() })
        .await
        .expect("unbound");
    assert_eq!(std::fs::read_to_string(&remove).expect("remove"), "1");

    // A device the host cannot remove (here its `remove` attribute is a directory):
    // the unbind fails, `MdevFailed`, and the request is UnbindFailed still holding the
    // handle (given back, the next bind of it would find the device made); once the
    // host can, a second unbind removes it and frees the handle.
    let arq_held = request(&c).await;
    let held = bind(&c, &arq_held, "vm-3").await.expect("bound");
    let remove = type_dir(sysfs.path())
        .join("devices")
        .join(&held)
        .join("remove");
    // (The handle may be the first one again: its device's directory is still there.)
    let _ = std::fs::remove_file(&remove);
    std::fs::create_dir_all(&remove).expect("an unwritable remove attribute");
    let err = c
        .call_method(
            &ctx(),
            UnbindArq {
                uuid: arq_held.clone(),
            },
        )
        .await
        .expect_err("the device is not removed");
    let RpcError::Remote(r) = &err else {
        panic!("not a remote error: {err}")
    };
    assert_eq!(r.kind, "MdevFailed", "{r:?}");
    let row = db.arq(&arq_held).await.expect("the request");
    assert_eq!(
        (row.state.as_str(), row.attach_handle_uuid.as_deref()),
        ("UnbindFailed", Some(held.as_str())),
        "{row:?}"
    );
    let handles = db.host_handles(HOST).await.expect("handles");
    assert!(
        handles.iter().any(|h| h.uuid == held && h.in_use),
        "{handles:?}"
    );
    std::fs::remove_dir(&remove).expect("the attribute back");
    std::fs::write(&remove, "").expect("remove attribute");
    c.call_method(
        &ctx(),
        UnbindArq {
            uuid: arq_held.clone(),
        },
    )
    .await
    .expect("unbound on the second try");
    assert_eq!(std::fs::read_to_string(&remove).expect("remove"), "1");
    let row = db.arq(&arq_held).await.expect("the request");
    assert_eq!(row.state.as_str(), "Unbound", "{row:?}");
    // A device already gone (removed by the host's operator) does not hold a delete.
    let held = bind(&c, &arq_held, "vm-4").await.expect("bound again");
    let _ = std::fs::remove_dir_all(type_dir(sysfs.path()).join("devices").join(&held));
    c.call_method(
        &ctx(),
        accel_objects::rpc::DeleteArqs {
            uuids: vec![arq_held.clone()],
            instance_uuid: None,
        },
    )
    .await
    .expect("deleted");
    assert!(db.arq(&arq_held).await.is_err(), "the request is deleted");

    // A type the GPU no longer offers: the bind fails, the request stays unbound and
    // the handle free.
    std::fs::remove_file(type_dir(sysfs.path()).join("create")).expect("type gone");
    let arq = request(&c).await;
    let err = bind(&c, &arq, "vm-2")
        .await
        .expect_err("no mediated device");
    let RpcError::Remote(r) = &err else {
        panic!("not a remote error: {err}")
    };
    assert_eq!(r.kind, "MdevFailed", "{r:?}");
    assert!(r.message.contains("does not exist"), "{r:?}");
    let row = db.arq(&arq).await.expect("the request");
    assert_eq!(
        (row.state.as_str(), row.attach_handle_uuid.as_deref()),
        ("Unbound", None),
        "{row:?}"
    );
    let handles = db.host_handles(HOST).await.expect("handles");
    assert!(handles.iter().all(|h| !h.in_use), "{handles:?}");
    agent.stop().await;
    conductor.stop().await;
}

on_both_databases!(vgpus_are_made_at_bind_and_removed_at_unbind);
