//! Cyborg 17's own code on the other side of `report_data`, over RabbitMQ on exchange
//! `cyborg` (`python/cyborg_peer.py`, with the pinned openstack-cyborg 17.0.0):
//! - a real Cyborg agent's report (Cyborg's fake driver's discovery, sent by Cyborg's
//!   `ConductorAPI` through its serializer) reaches a verso server declared with this
//!   crate's `ConductorApi`, and decodes into this crate's `DriverDevice`s, whose
//!   primitives are the ones Cyborg sent;
//! - a report a verso client sends with this crate's types is turned into Cyborg's own
//!   `DriverDevice` objects by Cyborg's serializer, whose primitives are verso's.
//!
//! Uses `VERSO_TEST_RABBIT_URL` and `VERSO_TEST_PYTHON` (scripts/test.sh sets both).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::objects::{
    DeviceState, DeviceType, DriverAttachHandle, DriverAttribute, DriverControlPathID,
    DriverDeployable, DriverDevice,
};
use accel_cyborg17::rpc::ReportData;
use accel_cyborg17::testing::{cyborg_transport, peer_script, python, rabbit_url};
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;
use verso::{FieldValue, RequestContext, Version, VersionedObject};
use verso_rpc::{Endpoint, RpcClient, RpcServer, Target};

fn unique_topic(name: &str) -> String {
    format!(
        "cyborg-conductor-test-{name}-{}",
        uuid::Uuid::new_v4().simple()
    )
}

/// `python/cyborg_peer.py MODE ...`, its output read line by line.
fn peer(mode: &str, topic: &str, host: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(python())
        .arg(peer_script())
        .args([mode, "--transport-url", &rabbit_url(), "--topic", topic])
        .args(["--host", host])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the test Python starts");
    let out = BufReader::new(child.stdout.take().expect("piped")).lines();
    (child, out)
}

/// The next line starting with `prefix`, within a deadline.
async fn line(out: &mut Lines<BufReader<ChildStdout>>, prefix: &str) -> String {
    let wait = async {
        while let Some(l) = out.next_line().await.expect("the peer's output") {
            if let Some(rest) = l.strip_prefix(prefix) {
                return rest.to_owned();
            }
        }
        panic!("the peer ended without a `{prefix}` line");
    };
    tokio::time::timeout(Duration::from_secs(60), wait)
        .await
        .unwrap_or_else(|_| panic!("no `{prefix}` line from the peer within 60 s"))
}

/// A primitive with every `changes` list sorted: OVO writes a set's iteration order.
fn normalised(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k.ends_with(".changes") {
                        if let Value::Array(a) = x {
                            a.sort_by_key(|c| c.as_str().map(str::to_owned));
                        }
                    }
                    walk(x);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_cyborg_agents_report_reaches_a_verso_conductor() {
    let topic = unique_topic("from-cyborg");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let endpoint = Endpoint::new(Version::new(1, 0)).handle(move |_ctx, report: ReportData| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(report);
            Ok(())
        }
    });
    let server = RpcServer::new(cyborg_transport().await, Target::new(&topic))
        .endpoint(endpoint)
        .expect("endpoint")
        .start()
        .await
        .expect("the verso conductor listens");

    let (mut child, mut out) = peer("send", &topic, "cyborg-host-1");
    let sent: Value = serde_json::from_str(&line(&mut out, "sent ").await).expect("JSON");
    assert_eq!(
        line(&mut out, "reply ").await,
        "null",
        "report_data replies None"
    );
    assert!(child.wait().await.expect("the peer exits").success());

    let report = rx.recv().await.expect("the report reached the handler");
    assert_eq!(report.hostname, "cyborg-host-1");
    let devices = &report.driver_device_list;
    assert_eq!(devices.len(), 1, "Cyborg's fake driver reports one device");
    let d = &devices[0];
    assert_eq!(d.r#type.get(), Some(&DeviceType::Fpga));
    assert_eq!(d.vendor.get().map(String::as_str), Some("0xABCD"));
    let deployables = d.deployable_list.get().expect("deployables");
    let handles = deployables[0].attach_handle_list.get().expect("set");
    assert!(
        handles.as_ref().is_some_and(|h| !h.is_empty()),
        "attach handles"
    );
    // Every field, nested object and change mark survives: verso writes back exactly
    // what Cyborg sent.
    let ours: Vec<Value> = devices
        .iter()
        .map(|d| VersionedObject::to_primitive(d, verso::Target::Own).expect("encodes"))
        .collect();
    assert_eq!(normalised(Value::Array(ours)), normalised(sent));
    server.stop().await;
}

fn nvme_device() -> DriverDevice {
    let handle = DriverAttachHandle {
        attach_type: "PCI".to_owned().into(),
        attach_info: r#"{"bus": "5e", "device": "00", "domain": "0000", "function": "0"}"#
            .to_owned()
            .into(),
        in_use: false.into(),
        ..DriverAttachHandle::blank()
    };
    let attribute = DriverAttribute {
        key: "rc".to_owned().into(),
        value: "CUSTOM_NVME".to_owned().into(),
        ..DriverAttribute::blank()
    };
    DriverDevice {
        vendor: "0x8086".to_owned().into(),
        model: "0x0a54".to_owned().into(),
        r#type: DeviceType::Nvme.into(),
        std_board_info: Some(r#"{"class": "0x010802"}"#.to_owned()).into(),
        vendor_board_info: None.into(),
        controlpath_id: DriverControlPathID {
            cpid_type: "PCI".to_owned().into(),
            cpid_info: r#"{"bus": "5e", "device": "00", "domain": "0000", "function": "0"}"#
                .to_owned()
                .into(),
            ..DriverControlPathID::blank()
        }
        .into(),
        deployable_list: vec![DriverDeployable {
            name: "host2_nvme_0000_5e_00_0".to_owned().into(),
            num_accelerators: 1.into(),
            attribute_list: Some(vec![attribute]).into(),
            attach_handle_list: Some(vec![handle]).into(),
            driver_name: Some("nvme".to_owned()).into(),
            ..DriverDeployable::blank()
        }]
        .into(),
        stub: false.into(),
        device_state: Some(DeviceState::Available).into(),
        ..DriverDevice::blank()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verso_report_is_read_by_cyborgs_own_serializer() {
    let topic = unique_topic("to-cyborg");
    let (mut child, mut out) = peer("serve", &topic, "unused");
    line(&mut out, "ready").await;

    let devices = vec![nvme_device()];
    let client = RpcClient::new(cyborg_transport().await, Target::new(&topic))
        .timeout(Duration::from_secs(30));
    client
        .call_method(
            &RequestContext::new("req-verso-report"),
            ReportData {
                hostname: "verso-host-2".into(),
                driver_device_list: devices.clone(),
            },
        )
        .await
        .expect("Cyborg's serializer took the report");

    let received = line(&mut out, "received ").await;
    let (host, body) = received.split_once(' ').expect("host and body");
    assert_eq!(host, "verso-host-2");
    let theirs: Value = serde_json::from_str(body).expect("JSON");
    assert_eq!(theirs[0]["cyborg_object.name"], "DriverDevice");
    let ours: Vec<Value> = devices.iter().map(FieldValue::to_primitive).collect();
    assert_eq!(normalised(theirs), normalised(Value::Array(ours)));
    let _ = child.start_kill();
}
