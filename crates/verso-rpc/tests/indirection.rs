//! Remotable methods through the conductor over the memory transport: agents run object
//! methods on the conductor, which owns the store, and get results at their versions.
//!
//! Over 1,000 lines on purpose: each file under `tests/` is a test binary of its own that
//! links the whole crate and its dependencies, so splitting this one would add a link
//! to every CI run on a 2-core machine for no gain in reading (the tests share helpers).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use cyborg_model::{Device, DeviceList, DeviceType, ManagedMode, MemoryStore, StoreHandle};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use verso::indirection::CallError;
use verso::{
    Field, IndirectionApi, ObjectList, ObjectMeta, RequestContext, Version, VersionManifest,
    VersionedObject,
};
use verso_rpc::conductor::{
    add_object_endpoints, indirection_version, object_methods_since, ConductorApi,
    INDIRECTION_VERSION,
};
use verso_rpc::testing::Recording;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{
    Endpoint, MethodSpec, RpcApi, RpcClient, RpcError, RpcMethod, RpcServer, ServerHandle, Target,
};

const DEV1: &str = "5d5a3e0b-6b2f-4b9a-9d0c-000000000001";

fn device_row(n: usize, host: &str) -> Value {
    json!({
        "id": n, "uuid": format!("5d5a3e0b-6b2f-4b9a-9d0c-{n:012x}"), "type": "GPU", "vendor": "10de",
        "model": "A100", "std_board_info": null, "hostname": host, "vendor_board_info": "sxm4",
        "managed_mode": "unmanaged", "created_at": "2024-03-01T12:34:56Z", "updated_at": null
    })
}

fn seed(n: usize) -> Value {
    let devices: Vec<Value> = (1..=n)
        .map(|i| device_row(i, if i % 2 == 0 { "host2" } else { "host1" }))
        .collect();
    json!({
        "Device": devices,
        "AttachHandle": [{
            "id": 1, "uuid": "a7c1f0de-0000-4000-8000-000000000001", "deployable_id": 1, "in_use": false,
            "attach_type": "PCI", "attach_info": "{}", "device": {
                "versioned_object.name": "Device", "versioned_object.namespace": "cyborg",
                "versioned_object.version": "1.2", "versioned_object.data": device_row(1, "host1")
            }
        }]
    })
}

struct Conductor {
    transport: Arc<MemoryTransport>,
    store: StoreHandle,
    requests: Arc<AtomicUsize>,
    _server: ServerHandle,
}

async fn conductor(devices: usize) -> Conductor {
    let transport = Arc::new(MemoryTransport::new());
    let store = StoreHandle(Arc::new(
        MemoryStore::from_seed(&seed(devices)).expect("seed loads"),
    ));
    let requests = Arc::new(AtomicUsize::new(0));
    let (s, r) = (store.clone(), requests.clone());
    let endpoint = add_object_endpoints(
        Endpoint::new(Version::new(1, 1)),
        INDIRECTION_VERSION,
        Arc::new(cyborg_model::registry()),
        move |ctx| {
            r.fetch_add(1, Ordering::SeqCst);
            ctx.with_extension(s.clone())
        },
    );
    let server = RpcServer::new(
        transport.clone(),
        Target::new("cyborg-conductor").with_server("c1"),
    )
    .endpoint(endpoint)
    .expect("valid endpoint")
    .start()
    .await
    .expect("server starts");
    Conductor {
        transport,
        store,
        requests,
        _server: server,
    }
}

impl Conductor {
    fn api(&self, cap: Version) -> Arc<ConductorApi> {
        let client = RpcClient::new(self.transport.clone(), Target::new("cyborg-conductor"))
            .version_cap(cap);
        Arc::new(ConductorApi::new(client, INDIRECTION_VERSION))
    }

    /// An agent's context: no store, the conductor API as indirection.
    fn agent_ctx(&self, cap: Version) -> RequestContext {
        RequestContext::new("req-agent")
            .with_user("agent")
            .with_project("p")
            .with_indirection("cyborg", self.api(cap))
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn without_indirection_the_body_runs_locally() {
    let c = conductor(3).await;
    let ctx = RequestContext::new("req-local").with_extension(c.store.clone());
    let all = DeviceList::get_all(&ctx).await.expect("local call");
    assert_eq!(all.len(), 3);
    assert_eq!(c.requests(), 0, "nothing went over RPC");
}

#[tokio::test]
async fn an_agent_without_indirection_never_reads_a_database() {
    let err = DeviceList::get_all(&RequestContext::new("req"))
        .await
        .expect_err("no store here");
    assert_eq!(err.kind(), "NoStore");
}

#[tokio::test]
async fn class_method_runs_on_the_conductor_in_one_call() {
    let c = conductor(40).await;
    let ctx = c.agent_ctx(Version::new(1, 1));
    let list = DeviceList::get_by_hostname(&ctx, "host1".into())
        .await
        .expect("remote call");
    assert_eq!(list.len(), 20);
    assert!(list
        .iter()
        .all(|d| d.hostname.get().map(String::as_str) == Some("host1")));
    assert_eq!(c.requests(), 1, "a list of 20 is one RPC");
    assert!(
        list.context()
            .is_some_and(|cx| cx.request_id == "req-agent"),
        "results carry the caller's context"
    );
}

#[tokio::test]
async fn instance_method_applies_changes_and_tracking() {
    let c = conductor(2).await;
    let admin = c.agent_ctx(Version::new(1, 1)).with_role("admin");
    let mut dev = Device::get_by_uuid(&admin, DEV1.parse().expect("uuid"))
        .await
        .expect("fetch");
    assert_eq!(dev.managed_mode.get(), Some(&ManagedMode::Unmanaged));
    dev.set_managed(ManagedMode::Managed)
        .await
        .expect("admin may");
    assert_eq!(
        dev.managed_mode.get(),
        Some(&ManagedMode::Managed),
        "field applied from the reply"
    );
    assert!(
        dev.updated_at.get().is_some_and(Option::is_some),
        "save set updated_at on the conductor"
    );
    assert!(
        dev.what_changed().is_empty(),
        "change tracking comes from the reply (saved)"
    );
    let local = RequestContext::new("check").with_extension(c.store.clone());
    let stored = Device::get_by_uuid(&local, DEV1.parse().expect("uuid"))
        .await
        .expect("stored");
    assert_eq!(stored.managed_mode.get(), Some(&ManagedMode::Managed));
    assert_eq!(c.requests(), 2);
}

#[tokio::test]
async fn errors_and_authorization_cross_the_wire_typed() {
    let c = conductor(1).await;
    let ctx = c.agent_ctx(Version::new(1, 1));
    let missing = Device::get_by_uuid(&ctx, uuid::Uuid::nil())
        .await
        .expect_err("no such device");
    assert_eq!(missing.kind(), "DeviceNotFound");
    let mut dev = Device::get_by_uuid(&ctx, DEV1.parse().expect("uuid"))
        .await
        .expect("fetch");
    let forbidden = dev
        .set_managed(ManagedMode::Managed)
        .await
        .expect_err("not an admin");
    assert!(
        matches!(&forbidden, CallError::Method { kind, .. } if kind == "Forbidden"),
        "{forbidden}"
    );
    assert_eq!(
        dev.managed_mode.get(),
        Some(&ManagedMode::Unmanaged),
        "nothing applied on failure"
    );
}

#[tokio::test]
async fn cap_1_0_refuses_before_sending_and_never_runs_locally() {
    let c = conductor(1).await;
    let api = c.api(Version::new(1, 0));
    assert!(!api.supports_object_indirection());
    assert!(c.api(Version::new(1, 1)).supports_object_indirection());
    let err = api
        .require_indirection("NVMe cleanup")
        .expect_err("cap too low");
    let text = err.to_string();
    assert!(
        text.contains("NVMe cleanup")
            && text.contains("1.1")
            && text.contains("1.0")
            && text.contains("[upgrade_levels] conductor"),
        "{text}"
    );

    // Even with a store at hand, a capped agent does not fall back to it.
    let ctx = c
        .agent_ctx(Version::new(1, 0))
        .with_extension(c.store.clone());
    let err = DeviceList::get_all(&ctx).await.expect_err("cap 1.0");
    let CallError::Indirection(source) = &err else {
        panic!("expected an indirection error, got {err}")
    };
    assert!(
        matches!(
            source.downcast_ref::<RpcError>(),
            Some(RpcError::VersionCap { .. })
        ),
        "{source}"
    );
    assert_eq!(c.requests(), 0, "no object call was sent");
}

#[tokio::test]
async fn older_callers_get_members_backported_in_the_same_reply() {
    let c = conductor(4).await;
    let api = c.api(Version::new(1, 1));
    let ctx = RequestContext::new("req-old-agent");
    let mut old = VersionManifest::new();
    old.insert("DeviceList", Version::new(1, 1))
        .insert("Device", Version::new(1, 1));
    let reply = api
        .object_class_action_versions(
            &ctx,
            "DeviceList",
            "get_all",
            &old,
            vec![],
            Default::default(),
        )
        .await
        .expect("remote call");
    assert_eq!(reply["versioned_object.version"], "1.1");
    let members = reply["versioned_object.data"]["objects"]
        .as_array()
        .expect("members");
    assert_eq!(members.len(), 4);
    for m in members {
        assert_eq!(m["versioned_object.version"], "1.1");
        assert!(m["versioned_object.data"].get("managed_mode").is_none());
    }
    assert_eq!(c.requests(), 1);
}

#[tokio::test]
async fn backport_versions_converts_nested_objects() {
    let c = conductor(1).await;
    let api = c.api(Version::new(1, 1));
    let ctx = RequestContext::new("req").with_extension(c.store.clone());
    let uuid = "a7c1f0de-0000-4000-8000-000000000001"
        .parse()
        .expect("uuid");
    let handle = cyborg_model::AttachHandle::get_by_uuid(&ctx, uuid)
        .await
        .expect("local");
    let mut m = VersionManifest::new();
    m.insert("AttachHandle", Version::new(1, 1))
        .insert("Device", Version::new(1, 0));
    let back = api
        .object_backport_versions(&ctx, verso::FieldValue::to_primitive(&handle), &m)
        .await
        .expect("backport");
    assert_eq!(back["versioned_object.version"], "1.1");
    let dev = &back["versioned_object.data"]["device"];
    assert_eq!(dev["versioned_object.version"], "1.0");
    assert!(dev["versioned_object.data"]
        .get("vendor_board_info")
        .is_none());
}

#[tokio::test]
async fn unsupported_requests_fail_typed_without_fallback() {
    let c = conductor(1).await;
    let api = c.api(Version::new(1, 1));
    let ctx = RequestContext::new("req");
    let mut newer = VersionManifest::new();
    newer
        .insert("DeviceList", Version::new(1, 3))
        .insert("Device", Version::new(1, 3));
    let none = Default::default;
    let e = api
        .object_class_action_versions(&ctx, "DeviceList", "get_all", &newer, vec![], none())
        .await
        .expect_err("too new");
    assert_eq!(e.kind(), "IncompatibleObjectVersion");
    let e = api
        .object_class_action_versions(&ctx, "Accelerator", "get_all", &newer, vec![], none())
        .await
        .expect_err("unknown object");
    assert_eq!(e.kind(), "UnsupportedObjectError");
    let m = DeviceList::manifest();
    let e = api
        .object_class_action_versions(&ctx, "DeviceList", "destroy_all", &m, vec![], none())
        .await
        .expect_err("unknown method");
    assert_eq!(e.kind(), "AttributeError");
    let e = api
        .object_class_action_versions(&ctx, "DeviceList", "get_by_hostname", &m, vec![], none())
        .await
        .expect_err("missing argument");
    assert_eq!(e.kind(), "TypeError");
    let mut too_new = verso::FieldValue::to_primitive(&Device::blank());
    too_new["versioned_object.version"] = json!("1.9");
    let e = api
        .object_backport_versions(&ctx, too_new, &Device::manifest())
        .await
        .expect_err("too new");
    assert_eq!(e.kind(), "IncompatibleObjectVersion");
}

/// A conductor API of another shape than oslo's: major 2, object indirection added in
/// 2.3 (oslo's is 1.1).
struct ConductorV2;

const V2_INDIRECTION: Version = Version::new(2, 3);

/// The API's own method.
#[derive(RpcMethod, Debug)]
#[rpc(name = "ping", since = "2.0", reply = String)]
struct Ping {}

impl RpcApi for ConductorV2 {
    const NAME: &'static str = "conductor";
    const VERSION: Version = Version::new(2, 4);

    fn methods() -> Vec<&'static MethodSpec> {
        let mut m = vec![Ping::spec()];
        m.extend(object_methods_since(V2_INDIRECTION));
        m
    }
}

/// Every (method, version) the recording transport sent, oldest first.
fn sent(t: &Recording) -> Vec<(String, String)> {
    t.sent
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|(_, _, m)| {
            let text = |k: &str| m[k].as_str().unwrap_or("?").to_owned();
            (text("method"), text("version"))
        })
        .collect()
}

/// The v2 conductor's endpoint: `ping` and the object methods served at `version`.
fn conductor_v2(store: &StoreHandle, version: Version) -> Endpoint {
    let s = store.clone();
    add_object_endpoints(
        Endpoint::for_api::<ConductorV2>()
            .handle(|_ctx, _: Ping| async move { Ok("pong".to_owned()) }),
        version,
        Arc::new(cyborg_model::registry()),
        move |ctx| ctx.with_extension(s.clone()),
    )
}

#[tokio::test]
async fn indirection_at_another_version_is_served_and_called_there() {
    // The declaration says where the three methods are, and the lock file records them so.
    assert_eq!(indirection_version::<ConductorV2>(), Some(V2_INDIRECTION));
    assert_eq!(
        indirection_version::<verso_rpc::conductor::ObjectIndirectionApi>(),
        Some(INDIRECTION_VERSION)
    );
    let declared: Vec<_> = ConductorV2::spec()
        .methods
        .into_iter()
        .filter(|m| m.name.starts_with("object_"))
        .map(|m| (m.name, m.since))
        .collect();
    assert_eq!(declared.len(), 3);
    assert!(
        declared.iter().all(|(_, since)| *since == V2_INDIRECTION),
        "{declared:?}"
    );

    let t = Recording::default();
    let store = StoreHandle(Arc::new(
        MemoryStore::from_seed(&seed(4)).expect("seed loads"),
    ));
    let server = RpcServer::new(Arc::new(t.clone()), Target::new("conductor-v2"))
        .endpoint(conductor_v2(&store, V2_INDIRECTION))
        .expect("served where declared")
        .start()
        .await
        .expect("server starts");
    let client = |cap: Version| {
        RpcClient::for_api::<ConductorV2>(Arc::new(t.clone()), "conductor-v2").version_cap(cap)
    };
    let api = Arc::new(ConductorApi::new(
        client(Version::new(2, 4)),
        V2_INDIRECTION,
    ));
    assert_eq!(api.version(), V2_INDIRECTION);
    assert!(api.supports_object_indirection());
    let ctx = RequestContext::new("req-v2")
        .with_role("admin")
        .with_indirection("cyborg", api.clone());

    // A class method, an instance method and a backport, each at 2.3.
    let hosts = DeviceList::get_by_hostname(&ctx, "host1".into())
        .await
        .expect("class method");
    assert_eq!(hosts.len(), 2);
    let mut dev = Device::get_by_uuid(&ctx, DEV1.parse().expect("uuid"))
        .await
        .expect("class method");
    dev.set_managed(ManagedMode::Managed)
        .await
        .expect("instance method");
    assert_eq!(dev.managed_mode.get(), Some(&ManagedMode::Managed));
    let mut old = VersionManifest::new();
    old.insert("Device", Version::new(1, 1));
    let back = api
        .object_backport_versions(&ctx, verso::FieldValue::to_primitive(&dev), &old)
        .await
        .expect("backport");
    assert_eq!(back["versioned_object.version"], "1.1");
    let expect: Vec<(String, String)> = [
        "object_class_action_versions",
        "object_class_action_versions",
        "object_action",
        "object_backport_versions",
    ]
    .iter()
    .map(|m| (m.to_string(), "2.3".to_owned()))
    .collect();
    assert_eq!(sent(&t), expect);

    // Capped below 2.3: refused before sending, naming 2.3.
    let pinned = ConductorApi::new(client(Version::new(2, 2)), V2_INDIRECTION);
    assert!(!pinned.supports_object_indirection());
    let text = pinned
        .require_indirection("NVMe cleanup")
        .expect_err("cap too low")
        .to_string();
    assert!(
        text.contains("conductor to 2.3") && text.contains("is 2.2"),
        "{text}"
    );
    let capped = RequestContext::new("req").with_indirection("cyborg", Arc::new(pinned));
    let err = DeviceList::get_all(&capped).await.expect_err("cap 2.2");
    let CallError::Indirection(source) = &err else {
        panic!("expected an indirection error, got {err}")
    };
    assert!(matches!(
        source.downcast_ref::<RpcError>(),
        Some(RpcError::VersionCap { .. })
    ));

    // oslo's client (1.1) is refused by this conductor's dispatcher: another major.
    let oslo = ConductorApi::new(
        RpcClient::new(Arc::new(t.clone()), Target::new("conductor-v2")),
        INDIRECTION_VERSION,
    );
    let err = oslo
        .object_backport_versions(&ctx, verso::FieldValue::to_primitive(&dev), &old)
        .await
        .expect_err("1.1 is not served");
    let CallError::Indirection(source) = &err else {
        panic!("expected an indirection error, got {err}")
    };
    assert!(
        matches!(
            source.downcast_ref::<RpcError>(),
            Some(RpcError::UnsupportedVersion { .. })
        ),
        "{source}"
    );
    assert_eq!(sent(&t).len(), 5, "the capped call sent nothing");
    server.stop().await;

    // Served at a version its API does not declare: refused when the server registers it.
    let Err(err) = RpcServer::new(Arc::new(t.clone()), Target::new("conductor-v2"))
        .endpoint(conductor_v2(&store, Version::new(2, 2)))
    else {
        panic!("served where not declared, yet registered")
    };
    assert!(
        err.to_string().contains("declares it added in 2.3"),
        "{err}"
    );
}

/// `Device` as a release that stops at 1.1 has it (no `managed_mode`).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(name = "Device", namespace = "cyborg", version = "1.1")]
struct DeviceN {
    id: Field<i64>,
    uuid: Field<uuid::Uuid>,
    r#type: Field<DeviceType>,
    vendor: Field<String>,
    model: Field<String>,
    std_board_info: Field<Option<String>>,
    hostname: Field<String>,
    #[verso(since = "1.1")]
    vendor_board_info: Field<Option<String>>,
    created_at: Field<Option<verso::DateTime>>,
    updated_at: Field<Option<verso::DateTime>>,
    meta: ObjectMeta,
}

/// The server's method: a device, at this build's `Device` (1.2).
#[derive(RpcMethod, Debug)]
#[rpc(name = "get_devices", since = "1.0", reply = Vec<Device>)]
struct GetDevices {
    host: String,
}

/// The same method as the release N client declares it: its replies are `Device` 1.1.
#[derive(RpcMethod, Debug)]
#[rpc(name = "get_devices", since = "1.0", reply = Vec<DeviceN>)]
struct GetDevicesN {
    host: String,
}

/// One device, as the release N client declares it.
#[derive(RpcMethod, Debug)]
#[rpc(name = "get_device", since = "1.0", reply = DeviceN)]
struct GetDeviceN {
    uuid: String,
}

/// The server's single-device method.
#[derive(RpcMethod, Debug)]
#[rpc(name = "get_device", since = "1.0", reply = Device)]
struct GetDevice {
    uuid: String,
}

#[tokio::test]
async fn a_reply_newer_than_the_callers_class_is_backported_through_the_conductor() {
    let t = Recording::default();
    let store = StoreHandle(Arc::new(
        MemoryStore::from_seed(&seed(4)).expect("seed loads"),
    ));
    // A release N+1 conductor: its own methods reply with Device 1.2; it serves the
    // object methods too (oslo's 1.1).
    let endpoint = Endpoint::new(Version::new(1, 1))
        .with_state(store)
        .handle(|store: StoreHandle, _ctx, m: GetDevices| {
            let ctx = RequestContext::new("conductor").with_extension(store);
            async move {
                let all = DeviceList::get_by_hostname(&ctx, m.host)
                    .await
                    .map_err(|e| verso_rpc::RemoteError::new(e.kind(), "test", e.to_string()))?;
                Ok(all.iter().cloned().collect())
            }
        })
        .handle(|store: StoreHandle, _ctx, m: GetDevice| {
            let ctx = RequestContext::new("conductor").with_extension(store);
            async move {
                let uuid = m
                    .uuid
                    .parse()
                    .map_err(|_| verso_rpc::RemoteError::new("ValueError", "test", "not a uuid"))?;
                Device::get_by_uuid(&ctx, uuid)
                    .await
                    .map_err(|e| verso_rpc::RemoteError::new(e.kind(), "test", e.to_string()))
            }
        })
        .into_endpoint();
    let endpoint = add_object_endpoints(
        endpoint,
        INDIRECTION_VERSION,
        Arc::new(cyborg_model::registry()),
        |ctx| ctx,
    );
    let server = RpcServer::new(Arc::new(t.clone()), Target::new("conductor"))
        .endpoint(endpoint)
        .expect("valid")
        .start()
        .await
        .expect("server starts");
    let client = RpcClient::new(Arc::new(t.clone()), Target::new("conductor"));
    let api = Arc::new(ConductorApi::new(client.clone(), INDIRECTION_VERSION));
    let agent_n = RequestContext::new("req-n").with_indirection("cyborg", api);

    // One object: backported to 1.1 by one object_backport_versions with N's manifest.
    let dev = client
        .call_method(&agent_n, GetDeviceN { uuid: DEV1.into() })
        .await
        .expect("backported reply");
    assert_eq!(
        verso::FieldValue::to_primitive(&dev)["versioned_object.version"],
        "1.1"
    );
    assert_eq!(dev.hostname.get().map(String::as_str), Some("host1"));
    assert_eq!(dev.vendor_board_info.get(), Some(&Some("sxm4".to_owned())));
    let calls = sent(&t);
    assert_eq!(
        calls,
        vec![
            ("get_device".to_owned(), "1.0".to_owned()),
            ("object_backport_versions".to_owned(), "1.1".to_owned())
        ]
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(
        msg["args"]["object_versions"],
        json!({"Device": "1.1"}),
        "the caller's manifest of its reply type"
    );
    assert_eq!(msg["args"]["objinst"]["versioned_object.version"], "1.2");

    // A list: each member backported (as OVO's serializer walks a list).
    let devs = client
        .call_method(
            &agent_n,
            GetDevicesN {
                host: "host2".into(),
            },
        )
        .await
        .expect("backported members");
    assert_eq!(devs.len(), 2);
    assert!(devs
        .iter()
        .all(|d| d.hostname.get().map(String::as_str) == Some("host2")));
    assert_eq!(sent(&t).len(), 5, "one call and two backports");

    // A caller that knows 1.2 decodes it as it is: no backport.
    let current = client
        .call_method(&agent_n, GetDevice { uuid: DEV1.into() })
        .await
        .expect("current reply");
    assert_eq!(current.managed_mode.get(), Some(&ManagedMode::Unmanaged));
    assert_eq!(sent(&t).len(), 6);

    // Without indirection: the incompatible-version error of today.
    let err = client
        .call_method(
            &RequestContext::new("req-plain"),
            GetDeviceN { uuid: DEV1.into() },
        )
        .await
        .expect_err("no indirection");
    assert!(
        matches!(&err, RpcError::Serialization { detail }
            if detail.contains("Version 1.2 of Device is not supported, supported version is 1.1")),
        "{err}"
    );
    assert_eq!(sent(&t).len(), 7, "nothing but the call was sent");
    server.stop().await;
}

/// A release N agent's method: it takes a device, at its `Device` (1.1).
#[derive(RpcMethod, Debug)]
#[rpc(name = "describe_device", since = "1.0", reply = String)]
struct DescribeDeviceN {
    device: DeviceN,
}

/// The same method as release N+1, the caller, declares it.
#[derive(RpcMethod, Debug)]
#[rpc(name = "describe_device", since = "1.0", reply = String)]
struct DescribeDevice {
    device: Device,
}

#[tokio::test]
async fn an_argument_newer_than_the_servers_class_is_backported_through_the_conductor() {
    let t = Recording::default();
    let store = StoreHandle(Arc::new(
        MemoryStore::from_seed(&seed(2)).expect("seed loads"),
    ));
    let s = store.clone();
    let conductor = RpcServer::new(Arc::new(t.clone()), Target::new("conductor"))
        .endpoint(add_object_endpoints(
            Endpoint::new(Version::new(1, 1)),
            INDIRECTION_VERSION,
            Arc::new(cyborg_model::registry()),
            move |ctx| ctx.with_extension(s.clone()),
        ))
        .expect("valid")
        .start()
        .await
        .expect("conductor starts");

    // Release N agents: one whose requests' contexts carry the conductor as their
    // indirection API (a server layer attaches it), one without.
    let describe = || {
        Endpoint::new(Version::new(1, 0)).handle(|_ctx, m: DescribeDeviceN| async move {
            let p = verso::FieldValue::to_primitive(&m.device);
            Ok(format!(
                "{} {} {}",
                m.device.hostname.get().map_or("?", String::as_str),
                p["versioned_object.version"].as_str().unwrap_or("?"),
                p["versioned_object.data"].get("managed_mode").is_some(),
            ))
        })
    };
    let api = Arc::new(ConductorApi::new(
        RpcClient::new(Arc::new(t.clone()), Target::new("conductor")),
        INDIRECTION_VERSION,
    ));
    let agent = RpcServer::new(Arc::new(t.clone()), Target::new("agent"))
        .endpoint(describe())
        .expect("valid")
        .layer(tower::ServiceBuilder::new().map_request(
            move |mut r: verso_rpc::message::Request| {
                r.context = r.context.with_indirection("cyborg", api.clone());
                r
            },
        ))
        .start()
        .await
        .expect("agent starts");
    let plain = RpcServer::new(Arc::new(t.clone()), Target::new("agent-plain"))
        .endpoint(describe())
        .expect("valid")
        .start()
        .await
        .expect("agent starts");

    // Release N+1 sends its Device 1.2, not knowing the agent's manifest.
    let local = RequestContext::new("req-local").with_extension(store.clone());
    let dev = Device::get_by_uuid(&local, DEV1.parse().expect("uuid"))
        .await
        .expect("local");
    let ctx = RequestContext::new("req-new");
    let reply = RpcClient::new(Arc::new(t.clone()), Target::new("agent"))
        .call_method(
            &ctx,
            DescribeDevice {
                device: dev.clone(),
            },
        )
        .await
        .expect("backported argument");
    assert_eq!(reply, "host1 1.1 false");
    assert_eq!(
        sent(&t),
        vec![
            ("describe_device".to_owned(), "1.0".to_owned()),
            ("object_backport_versions".to_owned(), "1.1".to_owned())
        ]
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(msg["args"]["object_versions"], json!({"Device": "1.1"}));

    // Without indirection: refused as today, naming the argument and the versions.
    let err = RpcClient::new(Arc::new(t.clone()), Target::new("agent-plain"))
        .call_method(&ctx, DescribeDevice { device: dev })
        .await
        .expect_err("no indirection");
    let RpcError::Remote(remote) = &err else {
        panic!("expected the method's argument error, got {err}")
    };
    assert_eq!(remote.kind, "ValueError");
    assert!(
        remote
            .message
            .contains("device: Version 1.2 of Device is not supported, supported version is 1.1"),
        "{}",
        remote.message
    );
    assert_eq!(sent(&t).len(), 3, "no backport was asked for");
    for s in [agent, plain, conductor] {
        s.stop().await;
    }
}

/// A device as the release N+1 conductor hands it out: `Device` 1.2, managed.
fn device_1_2() -> Device {
    Device {
        id: 7.into(),
        hostname: "host1".into(),
        vendor_board_info: Some("sxm4".to_owned()).into(),
        managed_mode: ManagedMode::Managed.into(),
        ..Device::blank()
    }
}

/// A slot holding a device, as release N+1 (the conductor) has it: its instance methods
/// return and store `Device` 1.2.
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(name = "Slot", namespace = "cyborg", version = "1.0", remotable)]
struct Slot {
    id: Field<i64>,
    device: Field<Option<Device>>,
    meta: ObjectMeta,
}

#[verso::remotable]
impl Slot {
    /// The slot's device (an object result).
    #[remotable]
    async fn device_of(&mut self) -> Result<Device, CallError> {
        Ok(device_1_2())
    }

    /// Puts a device in the slot (an object-valued field update).
    #[remotable]
    async fn plug(&mut self) -> Result<(), CallError> {
        self.device.set(Some(device_1_2()));
        Ok(())
    }

    /// Changes the id (no object anywhere).
    #[remotable]
    async fn renumber(&mut self, id: i64) -> Result<i64, CallError> {
        self.id.set(id);
        Ok(id)
    }
}

/// The same class as release N has it: it knows `Device` 1.1 only. Its bodies never run
/// (the agent's context delegates them).
#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(name = "Slot", namespace = "cyborg", version = "1.0", remotable)]
struct SlotN {
    id: Field<i64>,
    device: Field<Option<DeviceN>>,
    meta: ObjectMeta,
}

#[verso::remotable]
impl SlotN {
    /// See `Slot::device_of`.
    #[remotable]
    async fn device_of(&mut self) -> Result<DeviceN, CallError> {
        Err(CallError::method("RanLocally", "runs on the conductor"))
    }

    /// See `Slot::plug`.
    #[remotable]
    async fn plug(&mut self) -> Result<(), CallError> {
        Err(CallError::method("RanLocally", "runs on the conductor"))
    }

    /// See `Slot::renumber`.
    #[remotable]
    async fn renumber(&mut self, id: i64) -> Result<i64, CallError> {
        let _ = id;
        Err(CallError::method("RanLocally", "runs on the conductor"))
    }
}

/// A release N+1 conductor serving `Slot` (and the model) over the recording transport,
/// and a context whose indirection API is that conductor.
async fn slot_conductor(t: &Recording) -> (ServerHandle, RequestContext) {
    let mut registry = cyborg_model::registry();
    registry.register_remotable::<Slot>();
    let server = RpcServer::new(Arc::new(t.clone()), Target::new("conductor"))
        .endpoint(add_object_endpoints(
            Endpoint::new(Version::new(1, 1)),
            INDIRECTION_VERSION,
            Arc::new(registry),
            |ctx| ctx,
        ))
        .expect("valid")
        .start()
        .await
        .expect("conductor starts");
    let api = Arc::new(ConductorApi::new(
        RpcClient::new(Arc::new(t.clone()), Target::new("conductor")),
        INDIRECTION_VERSION,
    ));
    (
        server,
        RequestContext::new("req-n").with_indirection("cyborg", api),
    )
}

/// `obj` as loaded: nothing changed, with `ctx`.
fn with_ctx<O: VersionedObject>(mut obj: O, ctx: &RequestContext) -> O {
    obj.reset_changes();
    obj.meta_mut().context = Some(Box::new(ctx.clone()));
    obj
}

fn called(methods: &[&str]) -> Vec<(String, String)> {
    methods
        .iter()
        .map(|m| (m.to_string(), "1.1".to_owned()))
        .collect()
}

#[tokio::test]
async fn an_instance_methods_newer_result_is_backported_through_the_conductor() {
    let t = Recording::default();
    let (server, ctx) = slot_conductor(&t).await;
    let mut slot = with_ctx(
        SlotN {
            id: 1.into(),
            ..SlotN::blank()
        },
        &ctx,
    );

    let dev = slot.device_of().await.expect("backported result");
    let p = verso::FieldValue::to_primitive(&dev);
    assert_eq!(p["versioned_object.version"], "1.1");
    assert!(p["versioned_object.data"].get("managed_mode").is_none());
    assert_eq!(dev.id.get(), Some(&7));
    assert_eq!(dev.hostname.get().map(String::as_str), Some("host1"));
    assert_eq!(dev.vendor_board_info.get(), Some(&Some("sxm4".to_owned())));
    assert!(
        dev.context().is_some_and(|c| c.request_id == "req-n"),
        "the result carries the caller's context"
    );
    assert_eq!(
        sent(&t),
        called(&["object_action", "object_backport_versions"])
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(
        msg["args"]["object_versions"],
        json!({"Device": "1.1"}),
        "the manifest of the method's result type"
    );
    assert_eq!(msg["args"]["objinst"]["versioned_object.version"], "1.2");
    server.stop().await;
}

#[tokio::test]
async fn an_instance_methods_newer_field_update_is_backported_through_the_conductor() {
    let t = Recording::default();
    let (server, ctx) = slot_conductor(&t).await;
    let mut slot = with_ctx(
        SlotN {
            id: 1.into(),
            ..SlotN::blank()
        },
        &ctx,
    );

    slot.plug().await.expect("backported update");
    let dev = slot
        .device
        .get()
        .and_then(Option::as_ref)
        .expect("the device was applied");
    assert_eq!(
        verso::FieldValue::to_primitive(dev)["versioned_object.version"],
        "1.1"
    );
    assert_eq!(dev.id.get(), Some(&7));
    assert_eq!(dev.vendor_board_info.get(), Some(&Some("sxm4".to_owned())));
    assert_eq!(
        slot.what_changed().into_iter().collect::<Vec<_>>(),
        vec!["device"],
        "change tracking comes from the reply"
    );
    assert_eq!(
        sent(&t),
        called(&["object_action", "object_backport_versions"])
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(
        msg["args"]["object_versions"],
        json!({"Device": "1.1", "Slot": "1.0"}),
        "the manifest of the caller's class"
    );
    assert_eq!(msg["args"]["objinst"]["versioned_object.name"], "Device");
    assert_eq!(msg["args"]["objinst"]["versioned_object.version"], "1.2");
    server.stop().await;
}

#[tokio::test]
async fn an_instance_method_with_nothing_newer_makes_no_backport_call() {
    let t = Recording::default();
    let (server, ctx) = slot_conductor(&t).await;

    // Release N: no object in the reply.
    let mut slot = with_ctx(
        SlotN {
            id: 1.into(),
            ..SlotN::blank()
        },
        &ctx,
    );
    assert_eq!(slot.renumber(5).await.expect("renumbered"), 5);
    assert_eq!(slot.id.get(), Some(&5));
    assert_eq!(sent(&t), called(&["object_action"]));

    // Release N+1 knows Device 1.2: the result and the update are read as they come.
    let mut slot = with_ctx(
        Slot {
            id: 1.into(),
            ..Slot::blank()
        },
        &ctx,
    );
    let dev = slot.device_of().await.expect("current result");
    assert_eq!(dev.managed_mode.get(), Some(&ManagedMode::Managed));
    slot.plug().await.expect("current update");
    assert_eq!(
        slot.device
            .get()
            .and_then(Option::as_ref)
            .and_then(|d| d.managed_mode.get()),
        Some(&ManagedMode::Managed)
    );
    assert_eq!(slot.renumber(6).await.expect("renumbered"), 6);
    assert_eq!(
        sent(&t),
        called(&["object_action"; 4]),
        "no object_backport_versions"
    );
    server.stop().await;
}
