//! Tests of typed RPC methods: declared once as types, called with values, served from the same
//! declarations; objects travel as primitives and are backported for a peer's manifest.

use crate::testing::Recording;
use crate::{
    ArgType, Endpoint, MethodSpec, RemoteError, RpcApi, RpcClient, RpcError, RpcMethod, RpcServer,
    ServerHandle, Target,
};
use cyborg_model::{Device, ManagedMode};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use verso::{RequestContext, Version, VersionManifest, VersionedObject};

/// What `report_data` answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ReportOutcome {
    accepted: usize,
    verbose: bool,
}

/// An agent reports its devices; 1.1 added `verbose`, 1.2 `note`.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(name = "report_data", since = "1.0", reply = ReportOutcome)]
struct ReportData {
    hostname: String,
    devices: Vec<Device>,
    #[rpc(since = "1.1", default = false)]
    verbose: bool,
    #[rpc(since = "1.2", default = None)]
    note: Option<String>,
}

/// Returns the device it is given, as the server decoded it.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(since = "1.0", reply = Device)]
struct Echo {
    device: Device,
}

struct Conductor;
impl RpcApi for Conductor {
    const NAME: &'static str = "conductor";
    const VERSION: Version = Version::new(1, 2);
    fn methods() -> Vec<&'static MethodSpec> {
        vec![ReportData::spec(), Echo::spec()]
    }
}

fn device(host: &str) -> Device {
    let mut d = Device::blank();
    d.id.set(1);
    d.uuid.set(uuid::Uuid::nil());
    d.hostname.set(host.into());
    d.vendor.set("0x10de".into());
    d.model.set("A100".into());
    d.managed_mode.set(ManagedMode::Managed);
    d
}

fn ctx() -> RequestContext {
    RequestContext::new("req-typed")
}

async fn serve(t: &Recording) -> ServerHandle {
    let endpoint = Endpoint::for_api::<Conductor>()
        .handle(|_ctx, r: ReportData| async move {
            assert!(r
                .devices
                .iter()
                .all(|d| d.hostname.get() == Some(&r.hostname)));
            Ok(ReportOutcome {
                accepted: r.devices.len(),
                verbose: r.verbose,
            })
        })
        .handle(|_ctx, e: Echo| async move { Ok(e.device) });
    RpcServer::new(Arc::new(t.clone()), Target::new("conductor"))
        .endpoint(endpoint)
        .expect("the declared API")
        .start()
        .await
        .expect("listening")
}

#[test]
fn the_declaration_is_the_spec() {
    let spec = ReportData::spec();
    assert_eq!(
        (spec.name.as_str(), spec.since),
        ("report_data", Version::new(1, 0))
    );
    let args: Vec<_> = spec
        .args
        .iter()
        .map(|a| (a.name.as_str(), a.ty, a.nullable))
        .collect();
    assert_eq!(
        args,
        vec![
            ("hostname", ArgType::String, false),
            ("devices", ArgType::List, false),
            ("verbose", ArgType::Bool, false),
            ("note", ArgType::String, true),
        ]
    );
    assert!(spec.args[0].is_required() && !spec.args[2].is_required());
    assert_eq!(spec.arg_version("note"), Some(Version::new(1, 2)));
    assert_eq!(Echo::spec().args[0].ty, ArgType::Object);
    assert_eq!(Echo::NAME, "echo");
    assert_eq!(Conductor::spec().methods.len(), 2);
}

#[tokio::test]
async fn typed_calls_send_the_version_their_arguments_need() {
    let t = Recording::default();
    let server = serve(&t).await;
    let client = RpcClient::for_api::<Conductor>(Arc::new(t.clone()), "conductor");
    let report = |verbose, note: Option<&str>| ReportData {
        hostname: "h1".into(),
        devices: vec![device("h1"), device("h1")],
        verbose,
        note: note.map(str::to_owned),
    };

    let got = client
        .call_method(&ctx(), report(false, None))
        .await
        .expect("1.0");
    assert_eq!(
        got,
        ReportOutcome {
            accepted: 2,
            verbose: false
        }
    );
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(msg["version"], "1.0");
    let args = msg["args"].as_object().expect("args");
    assert!(
        !args.contains_key("verbose") && !args.contains_key("note"),
        "{args:?}"
    );
    assert_eq!(args["devices"][0]["versioned_object.name"], "Device");

    client
        .call_method(&ctx(), report(true, None))
        .await
        .expect("1.1");
    assert_eq!(t.last().expect("sent").2["version"], "1.1");
    client
        .call_method(&ctx(), report(true, Some("x")))
        .await
        .expect("1.2");
    assert_eq!(t.last().expect("sent").2["version"], "1.2");

    // Pinned at 1.0: what needs 1.1 is refused before sending, the rest goes out.
    let pinned = client.clone().version_cap(Version::new(1, 0));
    let sent = t.count();
    assert!(pinned.can_send::<ReportData>());
    assert!(matches!(
        pinned.call_method(&ctx(), report(true, None)).await,
        Err(RpcError::VersionCap { requested, .. }) if requested == Version::new(1, 1)
    ));
    assert_eq!(t.count(), sent);
    let got = pinned
        .call_method(&ctx(), report(false, None))
        .await
        .expect("1.0");
    assert_eq!(got.accepted, 2);
    server.stop().await;
}

#[tokio::test]
async fn objects_travel_as_objects_and_are_backported_for_the_peer() {
    let t = Recording::default();
    let server = serve(&t).await;
    let client = RpcClient::for_api::<Conductor>(Arc::new(t.clone()), "conductor");
    let d = device("h1");
    let back = client
        .call_method(&ctx(), Echo { device: d.clone() })
        .await
        .expect("echo");
    assert_eq!(back.hostname.get(), Some(&"h1".to_owned()));
    assert_eq!(back.managed_mode.get(), Some(&ManagedMode::Managed));

    // A peer that knows Device 1.1: sent as 1.1, managed_mode dropped.
    let mut manifest = VersionManifest::default();
    manifest.insert("Device", Version::new(1, 1));
    let back = client
        .prepare()
        .peer_manifest(&manifest)
        .call_method(&ctx(), Echo { device: d })
        .await
        .expect("echo");
    let (_, _, msg) = t.last().expect("sent");
    assert_eq!(msg["args"]["device"]["versioned_object.version"], "1.1");
    assert!(msg["args"]["device"]["versioned_object.data"]
        .get("managed_mode")
        .is_none());
    assert_eq!(back.version(), Version::new(1, 1));
    assert_eq!(back.managed_mode.get(), None);
    server.stop().await;
}

#[tokio::test]
async fn a_bad_argument_is_a_typed_error_and_untyped_callers_share_the_path() {
    let t = Recording::default();
    let server = serve(&t).await;
    let client = RpcClient::for_api::<Conductor>(Arc::new(t.clone()), "conductor");
    // The untyped form reaches the same endpoint and its checks.
    let err = client
        .call(
            &ctx(),
            "echo",
            "1.0",
            serde_json::json!({"device": {"x": 1}}),
        )
        .await
        .expect_err("not an object primitive");
    assert!(matches!(err, RpcError::InvalidArgument { .. }), "{err:?}");
    let reply = client
        .call(
            &ctx(),
            "echo",
            "1.0",
            serde_json::json!({"device": verso::FieldValue::to_primitive(&device("h2"))}),
        )
        .await
        .expect("untyped call of a typed method");
    assert_eq!(reply["versioned_object.data"]["hostname"], "h2");
    // Above the API's own version: refused locally.
    assert!(matches!(
        client
            .call(&ctx(), "echo", "1.3", serde_json::json!({}))
            .await,
        Err(RpcError::VersionAboveLocal { .. })
    ));
    server.stop().await;
}

#[test]
fn an_endpoint_of_a_declared_api_serves_exactly_its_methods() {
    let missing =
        Endpoint::for_api::<Conductor>().handle(|_ctx, e: Echo| async move { Ok(e.device) });
    let err = missing.validate().expect_err("report_data has no handler");
    assert!(err.to_string().contains("report_data"), "{err}");
    #[derive(RpcMethod)]
    #[rpc(since = "1.0")]
    struct Extra {}
    let extra = Endpoint::for_api::<Conductor>()
        .handle(|_ctx, e: Echo| async move { Ok(e.device) })
        .handle(|_ctx, _r: ReportData| async move {
            Err::<ReportOutcome, _>(RemoteError::new("E", "m", "x"))
        })
        .handle(|_ctx, _: Extra| async move { Ok(()) });
    let err = extra.validate().expect_err("extra is not declared");
    assert!(err.to_string().contains("'extra' is not declared"), "{err}");
}

#[test]
fn defaults_take_any_value_convertible_into_the_field_type() {
    #[derive(RpcMethod)]
    #[rpc(since = "2.0", reply = Option<String>)]
    struct Tune {
        #[rpc(default = "fast")]
        mode: String,
        #[rpc(default = 3)]
        level: i64,
        #[rpc(since = "2.1", default = None)]
        label: Option<String>,
        #[rpc(rename = "type", default = "gpu")]
        kind: String,
    }
    let spec = Tune::spec();
    let defaults: Vec<_> = spec
        .args
        .iter()
        .map(|a| match &a.requirement {
            crate::Requirement::Optional { default } => (a.name.as_str(), default.clone()),
            crate::Requirement::Required => (a.name.as_str(), serde_json::Value::Null),
        })
        .collect();
    assert_eq!(
        defaults,
        vec![
            ("mode", serde_json::json!("fast")),
            ("level", serde_json::json!(3)),
            ("label", serde_json::Value::Null),
            ("type", serde_json::json!("gpu")),
        ]
    );
    assert!(Endpoint::new(Version::new(2, 1))
        .handle(|_ctx, t: Tune| async move { Ok(t.label.or(Some(t.kind))) })
        .validate()
        .is_ok());
    let t = Tune {
        mode: "fast".into(),
        level: 3,
        label: None,
        kind: "gpu".into(),
    };
    let mut args = t.encode_args(&crate::Encoder::new()).expect("encodes");
    assert_eq!(spec.version_for(&mut args), Version::new(2, 0));
    assert!(!args.contains_key("label"));
}

/// Cyborg's family: its objects' primitives are keyed `cyborg_object.*`.
#[derive(verso::ObjectFamily)]
#[verso(namespace = "cyborg", serial_namespace = "cyborg_object")]
struct CyborgObject;

/// A driver's report of one device, in Cyborg's family; 1.1 added `vendor`.
#[derive(verso::VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = CyborgObject, version = "1.1")]
struct DriverDevice {
    hostname: verso::Field<String>,
    #[verso(since = "1.1")]
    vendor: verso::Field<String>,
    meta: verso::ObjectMeta,
}

/// Returns the driver devices it is given (a plain list, as Cyborg sends them).
#[derive(RpcMethod, Debug, Clone)]
#[rpc(since = "1.0", reply = Vec<DriverDevice>)]
struct EchoDriverDevices {
    driver_device_list: Vec<DriverDevice>,
}

/// Returns the driver device it is given.
#[derive(RpcMethod, Debug, Clone)]
#[rpc(since = "1.0", reply = DriverDevice)]
struct EchoDriverDevice {
    driver_device: DriverDevice,
}

struct FamilyConductor;
impl RpcApi for FamilyConductor {
    const NAME: &'static str = "conductor";
    const VERSION: Version = Version::new(1, 0);
    fn methods() -> Vec<&'static MethodSpec> {
        vec![EchoDriverDevices::spec(), EchoDriverDevice::spec()]
    }
}

#[tokio::test]
async fn objects_of_another_serial_namespace_are_object_arguments() {
    let t = Recording::default();
    let endpoint = Endpoint::for_api::<FamilyConductor>()
        .handle(|_ctx, e: EchoDriverDevices| async move { Ok(e.driver_device_list) })
        .handle(|_ctx, e: EchoDriverDevice| async move { Ok(e.driver_device) });
    let server = RpcServer::new(Arc::new(t.clone()), Target::new("conductor"))
        .endpoint(endpoint)
        .expect("the declared API")
        .start()
        .await
        .expect("starts");
    let client = RpcClient::for_api::<FamilyConductor>(Arc::new(t.clone()), "conductor");
    let mut d = DriverDevice::blank();
    d.hostname.set("h1".into());
    d.vendor.set("0x10de".into());
    let mut manifest = VersionManifest::default();
    manifest.insert("DriverDevice", Version::new(1, 0));
    let back = client
        .prepare()
        .peer_manifest(&manifest)
        .call_method(
            &ctx(),
            EchoDriverDevices {
                driver_device_list: vec![d],
            },
        )
        .await
        .expect("echo");
    let (_, _, msg) = t.last().expect("sent");
    let sent = &msg["args"]["driver_device_list"][0];
    assert_eq!(sent["cyborg_object.version"], "1.0");
    assert!(sent["cyborg_object.data"].get("vendor").is_none());
    assert!(sent.get("versioned_object.name").is_none());
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].version(), Version::new(1, 0));
    assert_eq!(back[0].hostname.get(), Some(&"h1".to_owned()));
    // The argument's type check takes a family's primitive as an object, untyped too.
    let reply = client
        .call(
            &ctx(),
            "echo_driver_device",
            "1.0",
            serde_json::json!({"driver_device":
                {"cyborg_object.name": "DriverDevice", "cyborg_object.namespace": "cyborg",
                 "cyborg_object.version": "1.1", "cyborg_object.data": {"hostname": "h2"}}
            }),
        )
        .await
        .expect("untyped call");
    assert_eq!(reply["cyborg_object.data"]["hostname"], "h2");
    server.stop().await;
}
