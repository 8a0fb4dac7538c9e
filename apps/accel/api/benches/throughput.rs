//! accel's throughput on both databases, side by side in one run:
//!
//! - `report_data/N_devices`: an agent's full report of an N-device host (N = 10, 100,
//!   1,000; one GPU with 4 VFs per device, unchanged since the last report: the steady
//!   state) through the conductor's RPC API on the memory transport;
//! - `api/bind_unbind`: one accelerator request bound and unbound through the HTTP API
//!   (`ConductorService`: PATCH, conductor RPC, database), over loopback.
//!
//! Calls per second are 1 / the time criterion reports. PostgreSQL is the test cluster
//! (`scripts/start-postgres.sh`, or `VERSO_TEST_POSTGRES_URL`):
//!
//! ```sh
//! scripts/start-postgres.sh && cargo bench -p accel-api --bench throughput
//! ```
//! With `VERSO_BENCH_OUT` set, the medians of criterion's samples (recorded by the bench
//! itself) go to `service.json` (tools/bench-report's schema).

#![allow(missing_docs)] // criterion_group! generates undocumented items

use accel_api::{ConductorService, DbService};
use accel_conductor::Db;
use accel_objects::rpc::{ConductorApi, ReportData, CONDUCTOR_TOPIC};
use accel_objects::{AttachType, DeviceType, DriverAttachHandle, DriverDevice, DriverDeviceList};
use bench_report::{BenchResult, Chart, Samples, Series, Table};
use criterion::{criterion_group, Criterion};
use serde_json::json;
use std::sync::Arc;
use verso::{Field, RequestContext, VersionedObject};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::RpcClient;
use verso_upgrade::ComponentVersion;

/// Devices per report; the bind host reports 100.
const SIZES: [usize; 3] = [10, 100, 1_000];
const HOST: &str = "bench-host";
const DATABASES: [&str; 2] = ["sqlite", "postgres"];

/// Every sample criterion takes, by benchmark id, for the result file.
static SAMPLES: Samples = Samples::new();

/// Times `routine` for criterion and records each sample under `id`.
fn timed(b: &mut criterion::Bencher<'_>, id: &str, mut routine: impl FnMut()) {
    b.iter_custom(|iters| {
        let start = std::time::Instant::now();
        for _ in 0..iters {
            routine();
        }
        let elapsed = start.elapsed();
        SAMPLES.record(id, iters, elapsed);
        elapsed
    })
}

/// The host reporting `n` devices: the bind host at 100, others beside it.
fn host(n: usize) -> String {
    if n == 100 {
        HOST.into()
    } else {
        format!("{HOST}-{n}")
    }
}

fn report(n: usize) -> DriverDeviceList {
    let devices = (0..n)
        .map(|d| {
            // Bus numbers past 0xff go to the next PCI domain.
            let (domain, bus) = ((d + 1) / 256, (d + 1) % 256);
            let pf = format!("{domain:04x}:{bus:02x}:00.0");
            let handles = (1..=4)
                .map(|vf| DriverAttachHandle {
                    attach_type: AttachType::Pci.into(),
                    attach_info: format!("{{\"address\": \"{domain:04x}:{bus:02x}:00.{vf}\"}}")
                        .into(),
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
    conductor: accel_conductor::runtime::RunningConductor,
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
        conductor,
        client,
        api,
        http: reqwest::Client::new(),
    }
}

/// The host's agent heartbeats at this release first, as a real one does: the conductor
/// refuses (`Fenced`) a report from a host the fleet record never heard of once the
/// deployment is finalized, which a fresh test database is.
async fn heartbeat(s: &Stack, host: &str) {
    let now = accel_objects::AccelVersion::DriverFeatures.number();
    s.conductor
        .coordinator
        .heartbeat(verso_upgrade::MemberReport {
            id: host.into(),
            host: host.into(),
            software: now,
            apparent: now,
        })
        .await
        .expect("heartbeat");
}

async fn send_report(s: &Stack, hostname: &str, devices: &DriverDeviceList) {
    let ctx = RequestContext::new("req-bench");
    s.client
        .call_method(
            &ctx,
            ReportData {
                hostname: hostname.into(),
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
    let reports: Vec<(usize, DriverDeviceList)> = SIZES.iter().map(|&n| (n, report(n))).collect();
    let (sqlite, _dir) = rt.block_on(accel_conductor::testing::sqlite());
    let postgres = rt.block_on(accel_conductor::testing::postgres());
    for (name, db) in DATABASES.into_iter().zip([sqlite, postgres]) {
        let s = rt.block_on(stack(db));
        for (n, devices) in &reports {
            rt.block_on(heartbeat(&s, &host(*n)));
            rt.block_on(send_report(&s, &host(*n), devices));
        }
        let arq = rt.block_on(arq(&s));
        for (n, devices) in &reports {
            let id = format!("report_data/{n}_devices/{name}");
            let mut g = c.benchmark_group(format!("report_data/{n}_devices"));
            if *n >= 1_000 {
                g.sample_size(10);
            }
            g.bench_function(name, |b| {
                timed(b, &id, || rt.block_on(send_report(&s, &host(*n), devices)))
            });
            g.finish();
        }
        let id = format!("api/bind_unbind/{name}");
        c.bench_function(&id, |b| {
            timed(b, &id, || rt.block_on(bind_unbind(&s, &arq)))
        });
    }
}

criterion_group!(benches, bench);

fn result() -> BenchResult {
    let ms = |id: &str| SAMPLES.median_ns(id).map(|v| v / 1e6);
    let mut r = BenchResult::new(
        "service",
        "accel's service operations: report_data and bind/unbind on SQLite and PostgreSQL",
        "cargo bench -p accel-api --bench throughput",
    );
    r.charts.push(Chart {
        id: "report".into(),
        title: "unchanged report through the conductor, time by devices per report".into(),
        x_label: "devices per report".into(),
        y_label: "ms per report_data call".into(),
        log_x: true,
        log_y: true,
        series: DATABASES
            .iter()
            .map(|db| Series {
                label: (*db).into(),
                points: SIZES
                    .iter()
                    .filter_map(|n| {
                        Some([*n as f64, ms(&format!("report_data/{n}_devices/{db}"))?])
                    })
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
    });
    let cell = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".into(), f);
    let mut rows = Vec::new();
    for db in DATABASES {
        for n in SIZES {
            let v = ms(&format!("report_data/{n}_devices/{db}"));
            rows.push(vec![
                format!("report_data, {n} devices unchanged"),
                db.into(),
                cell(v, &|v| format!("{v:.2}")),
                cell(v, &|v| format!("{:.0}", 1e3 / v)),
            ]);
        }
        let v = ms(&format!("api/bind_unbind/{db}"));
        rows.push(vec![
            "bind + unbind through the HTTP API".into(),
            db.into(),
            cell(v, &|v| format!("{v:.2}")),
            cell(v, &|v| format!("{:.0}", 1e3 / v)),
        ]);
    }
    r.tables.push(Table {
        title: "median of criterion's samples".into(),
        columns: ["operation", "database", "ms", "per second"]
            .map(String::from)
            .to_vec(),
        rows,
    });
    let at = |id: &str| cell(ms(id), &|v| format!("{v:.2} ms"));
    r.summary = format!(
        "One operation at a time through the real stack: an agent's unchanged report \
         through the conductor's RPC API (memory transport, so the figure is the \
         conductor's and the database's time), and an accelerator request bound and \
         unbound through the HTTP API (PATCH, conductor RPC, database). An unchanged \
         100-device report takes {} on SQLite and {} on PostgreSQL; the time grows with \
         the devices a report carries. A bind and unbind takes {} on SQLite and {} on \
         PostgreSQL.",
        at("report_data/100_devices/sqlite"),
        at("report_data/100_devices/postgres"),
        at("api/bind_unbind/sqlite"),
        at("api/bind_unbind/postgres"),
    );
    r
}

fn main() {
    // criterion_main!, then the result file.
    benches();
    Criterion::default().configure_from_args().final_summary();
    match result().write_if_asked() {
        Ok(Some(path)) => println!("wrote {}", path.display()),
        Ok(None) => {}
        Err(e) => eprintln!("throughput: {e}"),
    }
}
