//! accel's throughput on both databases, side by side in one run:
//!
//! - `report_data/100_devices`: an agent's full report of a 100-device host (one GPU
//!   with 4 VFs per device, unchanged since the last report: the steady state) through
//!   the conductor's RPC API on the memory transport;
//! - `api/bind_unbind`: one accelerator request bound and unbound through the HTTP API
//!   (`ConductorService`: PATCH, conductor RPC, database), over loopback.
//!
//! Calls per second are 1 / the time criterion reports. PostgreSQL is the test cluster
//! (`scripts/start-postgres.sh`, or `VERSO_TEST_POSTGRES_URL`):
//!
//! ```sh
//! scripts/start-postgres.sh && cargo bench -p accel-api --bench throughput
//! ```

#![allow(missing_docs)] // criterion_group! generates undocumented items

use accel_api::{ConductorService, DbService};
use accel_conductor::Db;
use accel_objects::rpc::{ConductorApi, ReportData, CONDUCTOR_TOPIC};
use accel_objects::{AttachType, DeviceType, DriverAttachHandle, DriverDevice, DriverDeviceList};
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::sync::Arc;
use verso::{Field, RequestContext, VersionedObject};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::RpcClient;

const DEVICES: usize = 100;
const HOST: &str = "bench-host";

fn report() -> DriverDeviceList {
    let devices = (0..DEVICES)
        .map(|d| {
            let pf = format!("0000:{:02x}:00.0", d + 1);
            let handles = (1..=4)
                .map(|vf| DriverAttachHandle {
                    attach_type: AttachType::Pci.into(),
                    attach_info: format!("{{\"address\": \"0000:{:02x}:00.{vf}\"}}", d + 1).into(),
                    ..DriverAttachHandle::blank()
                })
                .collect();
            DriverDevice {
                control_path_id: pf.into(),
                r#type: DeviceType::Gpu.into(),
                vendor: "10de".to_owned().into(),
                model: "20b5".to_owned().into(),
                std_board_info: Field::new(None),
                driver_name: Field::new(Some("nvidia".to_owned())),
                attach_handles: Field::new(handles),
                ..DriverDevice::blank()
            }
        })
        .collect();
    DriverDeviceList {
        objects: Field::new(devices),
        ..DriverDeviceList::blank()
    }
}

/// A conductor over `db` on a memory transport, a client of it, and the API over HTTP.
struct Stack {
    _conductor: accel_conductor::runtime::RunningConductor,
    client: RpcClient,
    api: String,
    http: reqwest::Client,
}

async fn stack(db: Db) -> Stack {
    let transport = Arc::new(MemoryTransport::new());
    let conductor = accel_conductor::runtime::start(db.clone(), transport.clone(), None)
        .await
        .expect("conductor");
    let client = RpcClient::for_api::<ConductorApi>(transport, CONDUCTOR_TOPIC);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let api = format!("http://{}", listener.local_addr().expect("addr"));
    let service = ConductorService::new(DbService::new(db), client.clone());
    tokio::spawn(async move {
        let _ = accel_api::serve(listener, service).await;
    });
    Stack {
        _conductor: conductor,
        client,
        api,
        http: reqwest::Client::new(),
    }
}

async fn send_report(s: &Stack, devices: &DriverDeviceList) {
    let ctx = RequestContext::new("req-bench");
    s.client
        .call_method(
            &ctx,
            ReportData {
                hostname: HOST.into(),
                devices: devices.clone(),
            },
        )
        .await
        .expect("report");
}

/// A request of a GPU profile, ready to bind on the bench host.
async fn arq(s: &Stack) -> String {
    let post = |path: &str, body: serde_json::Value| {
        s.http.post(format!("{}{path}", s.api)).json(&body).send()
    };
    post(
        "/v2/device_profiles",
        json!({"name": "bench-gpu", "groups": [{"resources:GPU": "1"}]}),
    )
    .await
    .expect("profile");
    let created: serde_json::Value = post(
        "/v2/accelerator_requests",
        json!({"device_profile_name": "bench-gpu"}),
    )
    .await
    .expect("arq")
    .json()
    .await
    .expect("arq json");
    created["arqs"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned()
}

async fn bind_unbind(s: &Stack, arq: &str) {
    for ops in [
        json!([{"path": "/hostname", "op": "add", "value": HOST},
               {"path": "/instance_uuid", "op": "add", "value": "6f1a3b9e-2f4c-4a7e-9a51-3c1d2e4f5a6b"}]),
        json!([{"path": "/hostname", "op": "remove"}, {"path": "/instance_uuid", "op": "remove"}]),
    ] {
        let status = s
            .http
            .patch(format!("{}/v2/accelerator_requests", s.api))
            .json(&json!({ arq: ops }))
            .send()
            .await
            .expect("patch")
            .status();
        assert_eq!(status.as_u16(), 202);
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let devices = report();
    let (sqlite, _dir) = rt.block_on(accel_conductor::testing::sqlite());
    let postgres = rt.block_on(accel_conductor::testing::postgres());
    for (name, db) in [("sqlite", sqlite), ("postgres", postgres)] {
        let s = rt.block_on(stack(db));
        rt.block_on(send_report(&s, &devices));
        let arq = rt.block_on(arq(&s));
        c.bench_function(&format!("report_data/100_devices/{name}"), |b| {
            b.iter(|| rt.block_on(send_report(&s, &devices)))
        });
        c.bench_function(&format!("api/bind_unbind/{name}"), |b| {
            b.iter(|| rt.block_on(bind_unbind(&s, &arq)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
