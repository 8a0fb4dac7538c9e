//! FPGAs programmed at bind (Cyborg 17's `FPGAExtARQ`) through this conductor: a request
//! whose profile names a bitstream in the real Glance is bound by a job after
//! `arq_apply_patch` answers; accel's agent (serving Cyborg's agent API `fpga_program`,
//! its tool a script recording what it got) programs the FPGA with Glance's bytes; the
//! provider gets the function's trait, the deployable the bitstream, Nova hears
//! `completed`. A second request on the programmed deployable is bound at once without
//! programming; a bitstream Glance does not have fails its bind (`failed` to Nova); a
//! profile naming both a bitstream and a function is refused.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_KEYSTONE_URL`, `VERSO_TEST_PLACEMENT_URL` and
//! `VERSO_TEST_GLANCE_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing::nova::Nova as TestNova;
use accel_cyborg17::objects::{
    Arq, DeviceProfile, DeviceType, DriverAttachHandle, DriverAttribute, DriverControlPathID,
    DriverDeployable, DriverDevice, ExtArq,
};
use accel_cyborg17::testing::cyborg_transport;
use accel_cyborg17::testing::glance_image;
use accel_cyborg17_agent::fpga::{FpgaOptions, Glance as AgentGlance, Programmer};
use accel_cyborg17_conductor::binds::Nova;
use accel_cyborg17_conductor::fpga::{function_trait, Glance, Programming};
use accel_cyborg17_conductor::placement::rp_uuid;
use accel_cyborg17_conductor::requests::{Agents, RequestError};
use accel_cyborg17_conductor::{Reports, Requests, Store};
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{
    bind_patch, compute_node, delete_tree, env, placement, recording_tool, session, state_of,
};
use verso::VersionedObject;

mod support;

const FPGA: &str = "0000:5e:00.0";

fn fpga_report(host: &str) -> DriverDevice {
    let cpid = r#"{"bus": "5e", "device": "00", "domain": "0000", "function": "0"}"#;
    let handle = |function: u8| DriverAttachHandle {
        attach_type: "TEST_PCI".to_owned().into(),
        attach_info: format!(
            r#"{{"bus": "5e", "device": "00", "domain": "0000", "function": "{function}"}}"#
        )
        .into(),
        in_use: false.into(),
        ..DriverAttachHandle::blank()
    };
    let attribute = |key: &str, value: &str| DriverAttribute {
        key: key.to_owned().into(),
        value: value.to_owned().into(),
        ..DriverAttribute::blank()
    };
    DriverDevice {
        vendor: "8086".to_owned().into(),
        model: "0b30".to_owned().into(),
        r#type: DeviceType::Fpga.into(),
        std_board_info: None.into(),
        vendor_board_info: None.into(),
        controlpath_id: DriverControlPathID {
            cpid_type: "PCI".to_owned().into(),
            cpid_info: cpid.to_owned().into(),
            ..DriverControlPathID::blank()
        }
        .into(),
        deployable_list: vec![DriverDeployable {
            name: format!("{host}_fpga").into(),
            num_accelerators: 2.into(),
            attribute_list: Some(vec![attribute("rc", "FPGA")]).into(),
            attach_handle_list: Some(vec![handle(1), handle(2)]).into(),
            driver_name: Some("intel".to_owned()).into(),
            ..DriverDeployable::blank()
        }]
        .into(),
        stub: false.into(),
        device_state: None.into(),
        ..DriverDevice::blank()
    }
}

async fn profile(requests: &Requests, name: &str, group: &[(&str, &str)]) -> i64 {
    let mut p = DeviceProfile::blank();
    p.name.set(name.to_owned());
    p.groups.set(vec![group
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
        .collect()]);
    let made = requests.create_profile(&p).await.expect("a profile");
    *made.id.get().expect("its id")
}

async fn request(requests: &Requests, profile_name: &str, profile_id: i64) -> String {
    let mut arq = Arq::blank();
    arq.device_profile_name.set(profile_name.to_owned());
    arq.device_profile_group_id.set(0);
    let mut ext = ExtArq::blank();
    ext.arq.set(arq);
    let made = requests
        .create_arq(&ext, Some(profile_id))
        .await
        .expect("a request");
    made.arq
        .get()
        .and_then(|a| a.uuid.get())
        .expect("its uuid")
        .to_string()
}

/// Waits (30 s at most) until the request is no longer `BindStarted`; its state.
async fn settled(requests: &Requests, uuid: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let state = state_of(requests, uuid).await;
        if state != "BindStarted" || Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (30 s at most) until Nova heard of `n` binds of `instance`; what it heard.
async fn told(nova: &TestNova, instance: &str, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events: Vec<Value> = nova
            .of(instance)
            .iter()
            .flat_map(|r| r.body["events"].as_array().cloned().unwrap_or_default())
            .collect();
        if events.len() >= n || Instant::now() > deadline {
            return events;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fpga_is_programmed_at_bind_with_its_bitstream_from_glance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let host = format!("cyborg17-fpga-{suffix}");
    let instance = "8b9c0d1e-2f3a-4b4c-8d5e-6f7a8b9c0d1e";
    let placement = placement();
    let root = compute_node(&placement, &host).await;
    let nova = TestNova::builder().server(instance, "vm").start().await;

    // A bitstream image of function `fn1`.
    let bitstream: Vec<u8> = (0..4096u32).map(|i| (i * 31) as u8).collect();
    let image = glance_image(&session(), &env("VERSO_TEST_GLANCE_URL"), Some(&bitstream))
        .await
        .expect("an image");
    let http = session();
    let client = http.http().clone();
    let url = format!("{}/v2/images/{image}", env("VERSO_TEST_GLANCE_URL"));
    let patched = http
        .send(|token| {
            client
                .patch(&url)
                .header("X-Auth-Token", token)
                .header(
                    "Content-Type",
                    "application/openstack-images-v2.1-json-patch",
                )
                .body(r#"[{"op": "add", "path": "/accel:function_id", "value": "fn1"}]"#)
        })
        .await
        .expect("Glance answers");
    assert_eq!(patched.status().as_u16(), 200);

    // The host's agent, programming with a recording tool.
    let record = dir.path().join("programmed");
    let programmer = Programmer::new(
        AgentGlance::new(session(), None),
        FpgaOptions {
            program_command: vec![recording_tool(dir.path(), &record).display().to_string()],
            program_timeout: Duration::from_secs(30),
            max_bitstream_bytes: 1 << 20,
            work_dir: dir.path().join("work"),
        },
    )
    .expect("a tool");
    let transport = cyborg_transport().await;
    let agent = accel_cyborg17_agent::cyborg::serve(
        transport.clone(),
        &host,
        dir.path().to_path_buf(),
        Some(Arc::new(programmer)),
    )
    .await
    .expect("the agent serves");

    let store = Store::connect(&format!(
        "sqlite://{}",
        dir.path().join("c.sqlite").display()
    ))
    .await
    .expect("connect");
    store.sync().await.expect("sync");
    Reports::new(store.clone(), placement.clone())
        .report(&host, &[fpga_report(&host)])
        .await
        .expect("the FPGA reported");
    let rp = rp_uuid(&format!("{host}_fpga"));
    let requests = Requests::new(
        store.clone(),
        Some(Agents::new(transport, Duration::from_secs(30))),
    )
    .with_nova(Nova::new(session(), Some(nova.url().to_owned())))
    .with_programming(Programming {
        glance: Glance::new(session(), None),
        placement: placement.clone(),
    });

    let name = format!("fn1-{suffix}");
    let with_bitstream = profile(
        &requests,
        &name,
        &[("resources:FPGA", "1"), ("accel:bitstream_id", &image)],
    )
    .await;
    let first = request(&requests, &name, with_bitstream).await;
    let (patch, fields) = bind_patch(&first, &host, &rp, instance);
    requests
        .apply_patch(&patch, &fields, None)
        .await
        .expect("the bind starts");
    assert_eq!(settled(&requests, &first).await, "Bound");
    assert_eq!(
        std::fs::read_to_string(&record).expect("the tool ran"),
        FPGA
    );
    let (_, traits) = placement
        .call(
            Method::GET,
            &format!("/resource_providers/{rp}/traits"),
            Some("1.6"),
            None,
        )
        .await
        .expect("Placement answers");
    assert!(
        traits["traits"]
            .as_array()
            .expect("traits")
            .contains(&json!(function_trait("intel", "fn1"))),
        "{traits}"
    );
    let bitstream_id: Option<String> =
        sqlx::query_scalar("SELECT bitstream_id FROM deployables WHERE rp_uuid = ?")
            .bind(&rp)
            .fetch_one(store.pool())
            .await
            .expect("the deployable");
    assert_eq!(bitstream_id.as_deref(), Some(image.as_str()));
    let events = told(&nova, instance, 1).await;
    assert_eq!(
        events,
        [
            json!({"name": "accelerator-request-bound", "server_uuid": instance, "tag": first, "status": "completed"})
        ]
    );

    // Already programmed: bound at once, the tool not run again.
    std::fs::remove_file(&record).expect("reset");
    let second = request(&requests, &name, with_bitstream).await;
    let (patch, fields) = bind_patch(&second, &host, &rp, instance);
    requests
        .apply_patch(&patch, &fields, None)
        .await
        .expect("bound");
    assert_eq!(state_of(&requests, &second).await, "Bound");
    assert!(!record.exists(), "programmed again");

    // A bitstream Glance does not have: the job fails the bind, Nova hears `failed`.
    let missing = uuid::Uuid::new_v4().to_string();
    let gone = format!("gone-{suffix}");
    let gone_id = profile(
        &requests,
        &gone,
        &[("resources:FPGA", "1"), ("accel:bitstream_id", &missing)],
    )
    .await;
    let third = request(&requests, &gone, gone_id).await;
    let (patch, fields) = bind_patch(&third, &host, &rp, instance);
    requests
        .apply_patch(&patch, &fields, None)
        .await
        .expect("the bind starts");
    assert_eq!(settled(&requests, &third).await, "BindFailed");
    let events = told(&nova, instance, 3).await;
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[2]["status"], "failed");
    assert_eq!(events[2]["tag"], json!(third));

    // Both a bitstream and a function: refused, BindFailed.
    let both = format!("both-{suffix}");
    let both_id = profile(
        &requests,
        &both,
        &[
            ("resources:FPGA", "1"),
            ("accel:bitstream_id", &image),
            ("accel:function_id", "fn1"),
        ],
    )
    .await;
    let fourth = request(&requests, &both, both_id).await;
    let (patch, fields) = bind_patch(&fourth, &host, &rp, instance);
    let err = requests
        .apply_patch(&patch, &fields, None)
        .await
        .expect_err("refused");
    assert!(matches!(err, RequestError::Programming { .. }), "{err:?}");
    assert_eq!(state_of(&requests, &fourth).await, "BindFailed");

    agent.stop().await;
    delete_tree(&placement, &root, true).await;
}
