//! accel's throughput on its three databases (SQLite, PostgreSQL, MariaDB), side by side
//! in one run:
//!
//! - `report_data/N_devices`: an agent's full report of an N-device host (N = 10, 100,
//!   1,000; one GPU with 4 VFs per device, unchanged since the last report: the steady
//!   state) through the conductor's RPC API on the memory transport;
//! - `api/bind_unbind`: one accelerator request bound and unbound through the HTTP API
//!   (`ConductorService`: PATCH, conductor RPC, database), over loopback;
//! - `cyborg_report_data/100_devices`: a real Cyborg 17 agent's unchanged report of 100
//!   GPUs (Cyborg's `DriverDevice` 1.4 objects, one deployable with 4 VFs and the `rc`
//!   and `trait0` attributes each) through accel's Cyborg endpoint (memory transport),
//!   and the same report handled by real Cyborg 17's conductor (`ConductorManager.
//!   report_data`, openstack-cyborg from `VERSO_TEST_PYTHON`, on SQLite, with its real
//!   Placement lookups: `python/cyborg_conductor_bench.py` of accel-cyborg17), timed by
//!   the process CPU of `VERSO_BENCH_CYBORG_CALLS` calls (default 5; each takes seconds);
//! - `cyborg_report_unchanged/100_devices`: the same inventory from an accel agent on
//!   Cyborg's wire, by its digest (`report_unchanged`, accel's Cyborg conductor API 1.2).
//!
//! Calls per second are 1 / the time criterion reports. PostgreSQL is the test cluster
//! (`scripts/start-postgres.sh`, or `VERSO_TEST_POSTGRES_URL`), MariaDB the test server
//! (`scripts/start-mariadb.sh`, or `VERSO_TEST_MYSQL_URL`); Cyborg's conductor needs
//! Keystone and Placement (`scripts/start-keystone.sh`, `scripts/start-placement.sh`, or
//! `VERSO_TEST_KEYSTONE_URL`):
//!
//! ```sh
//! scripts/start-postgres.sh && scripts/start-mariadb.sh && scripts/start-keystone.sh && scripts/start-placement.sh
//! cargo bench -p accel-api --bench throughput
//! ```
//! With `VERSO_BENCH_OUT` set, the medians of criterion's samples (recorded by the bench
//! itself) go to `service.json` (tools/bench-report's schema).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use accel_api::{ConductorService, DbService};
use accel_conductor::Db;
use accel_objects::rpc::{ConductorApi, ReportData, CONDUCTOR_TOPIC};
use accel_objects::{AttachType, DeviceType, DriverAttachHandle, DriverDevice, DriverDeviceList};
use bench_report::{BenchResult, Better, Chart, Samples, Series, Table, Target};
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
const DATABASES: [&str; 3] = ["sqlite", "postgres", "mysql"];

/// Every sample criterion takes, by benchmark id, for the result file.
static SAMPLES: Samples = Samples::new();

/// The host of the Cyborg report, and its size.
const CYBORG_HOST: &str = "bench-cyborg";
const CYBORG_DEVICES: usize = 100;
/// What real Cyborg 17's conductor took per unchanged report, once measured.
static CYBORG: std::sync::OnceLock<CyborgFigures> = std::sync::OnceLock::new();

/// Real Cyborg 17's conductor on the Cyborg report: per timed call.
#[derive(serde::Deserialize)]
struct CyborgFigures {
    cpu_ms: Vec<f64>,
    wall_ms: Vec<f64>,
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

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

/// A Cyborg 17 agent's report of `n` GPUs on `host`, as Cyborg's drivers shape one:
/// one deployable per device (named by Cyborg's convention, `<host>_<address>`) with 4
/// VFs to attach and the `rc`/`trait0` attributes Cyborg's conductor gives Placement.
fn cyborg_report(host: &str, n: usize) -> Vec<accel_cyborg17::objects::DriverDevice> {
    use accel_cyborg17::objects::{
        DeviceType as CyborgType, DriverAttachHandle as Handle, DriverAttribute,
        DriverControlPathID, DriverDeployable, DriverDevice as CyborgDevice,
    };
    let pci = |domain: usize, bus: usize, function: usize| {
        format!(
            "{{\"domain\": \"{domain:04x}\", \"bus\": \"{bus:02x}\", \"device\": \"00\", \"function\": \"{function:x}\"}}"
        )
    };
    let attribute = |key: &str, value: &str| DriverAttribute {
        key: key.to_owned().into(),
        value: value.to_owned().into(),
        ..DriverAttribute::blank()
    };
    (0..n)
        .map(|d| {
            let (domain, bus) = ((d + 1) / 256, (d + 1) % 256);
            let handles = (1..=4)
                .map(|vf| Handle {
                    attach_type: "PCI".to_owned().into(),
                    attach_info: pci(domain, bus, vf).into(),
                    in_use: false.into(),
                    ..Handle::blank()
                })
                .collect();
            CyborgDevice {
                vendor: "10de".to_owned().into(),
                model: "20b5".to_owned().into(),
                r#type: CyborgType::Gpu.into(),
                std_board_info: Some("{}".to_owned()).into(),
                vendor_board_info: Some("{}".to_owned()).into(),
                controlpath_id: DriverControlPathID {
                    cpid_type: "PCI".to_owned().into(),
                    cpid_info: pci(domain, bus, 0).into(),
                    ..DriverControlPathID::blank()
                }
                .into(),
                deployable_list: vec![DriverDeployable {
                    name: format!("{host}_{domain:04x}:{bus:02x}:00.0").into(),
                    num_accelerators: 4.into(),
                    attribute_list: Some(vec![
                        attribute("rc", "PGPU"),
                        attribute("trait0", "CUSTOM_GPU_NVIDIA"),
                    ])
                    .into(),
                    attach_handle_list: Some(handles).into(),
                    driver_name: Some("nvidia".to_owned()).into(),
                    ..DriverDeployable::blank()
                }]
                .into(),
                stub: false.into(),
                ..CyborgDevice::blank()
            }
        })
        .collect()
}

/// Runs real Cyborg 17's conductor on `devices` (`cyborg_conductor_bench.py`): a fresh
/// SQLite database, Placement through the test Keystone.
fn measure_cyborg(devices: &[accel_cyborg17::objects::DriverDevice]) -> CyborgFigures {
    let dir = tempfile::tempdir().expect("tempdir");
    let primitives: Vec<serde_json::Value> = devices
        .iter()
        .map(|d| VersionedObject::to_primitive(d, verso::Target::Own).expect("encodes"))
        .collect();
    let report = dir.path().join("report.json");
    std::fs::write(&report, serde_json::to_vec(&primitives).expect("json")).expect("write");
    let keystone = std::env::var("VERSO_TEST_KEYSTONE_URL")
        .unwrap_or_else(|_| "http://127.0.0.1:55000/v3".into());
    let log = dir.path().join("cyborg.log");
    let config = dir.path().join("cyborg.conf");
    std::fs::write(
        &config,
        accel_cyborg17::testing::cyborg_agent_config(
            CYBORG_HOST,
            &keystone,
            "accel",
            "verso-accel",
            &log,
        ),
    )
    .expect("write cyborg.conf");
    let calls = std::env::var("VERSO_BENCH_CYBORG_CALLS").unwrap_or_else(|_| "5".into());
    eprintln!("throughput: real Cyborg 17's conductor, {calls} unchanged reports (minutes)");
    let out = std::process::Command::new(accel_cyborg17::testing::python())
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../cyborg17/python/cyborg_conductor_bench.py"),
        )
        .arg("--config")
        .arg(&config)
        .arg("--database")
        .arg(dir.path())
        .args(["--host", CYBORG_HOST, "--calls", &calls])
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run Python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Cyborg's conductor failed (it needs Keystone and Placement: scripts/start-keystone.sh, \
         scripts/start-placement.sh): {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("Cyborg's figures {line:?}: {e}"))
}

/// A conductor over `db` on a memory transport, a client of it, and the API over HTTP.
struct Stack {
    conductor: accel_conductor::runtime::RunningConductor,
    client: RpcClient,
    /// A client of the conductor's Cyborg endpoint (what a Cyborg 17 agent calls).
    cyborg: RpcClient,
    /// The same endpoint as accel's agents on Cyborg's wire call it (with 1.2).
    cyborg_next: RpcClient,
    _cyborg_server: verso_rpc::ServerHandle,
    api: String,
    http: reqwest::Client,
}

async fn stack(db: Db) -> Stack {
    let transport = Arc::new(MemoryTransport::new());
    let conductor = accel_conductor::runtime::start(db.clone(), transport.clone(), None)
        .await
        .expect("conductor");
    let client = RpcClient::for_api::<ConductorApi>(transport.clone(), CONDUCTOR_TOPIC);
    let cyborg_server = accel_conductor::cyborg::serve(
        transport.clone(),
        db.clone(),
        accel_conductor::cyborg::TOPIC,
        None,
    )
    .await
    .expect("the Cyborg endpoint");
    let cyborg = RpcClient::for_api::<accel_cyborg17::rpc::ConductorApi>(
        transport.clone(),
        accel_conductor::cyborg::TOPIC,
    );
    let cyborg_next = RpcClient::for_api::<accel_objects::cyborg::ConductorApi>(
        transport,
        accel_conductor::cyborg::TOPIC,
    );
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
        cyborg,
        cyborg_next,
        _cyborg_server: cyborg_server,
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
        .heartbeat(verso_upgrade::MemberReport::new(host, host, now, now))
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

async fn send_cyborg_report(s: &Stack, devices: &[accel_cyborg17::objects::DriverDevice]) {
    let ctx = RequestContext::new("req-bench");
    s.cyborg
        .call_method(
            &ctx,
            accel_cyborg17::rpc::ReportData {
                hostname: CYBORG_HOST.into(),
                driver_device_list: devices.to_vec(),
            },
        )
        .await
        .expect("Cyborg report");
}

async fn send_cyborg_unchanged(s: &Stack, digest: &str) {
    let ctx = RequestContext::new("req-bench");
    let known = s
        .cyborg_next
        .call_method(
            &ctx,
            accel_objects::cyborg::ReportUnchanged {
                hostname: CYBORG_HOST.into(),
                digest: digest.to_owned(),
            },
        )
        .await
        .expect("Cyborg report by digest");
    assert!(known.is_some(), "the conductor did not know the digest");
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
    let cyborg = cyborg_report(CYBORG_HOST, CYBORG_DEVICES);
    let cyborg_digest = accel_objects::cyborg::report_digest(&cyborg);
    let (sqlite, _dir) = rt.block_on(accel_conductor::testing::sqlite());
    let postgres = rt.block_on(accel_conductor::testing::postgres());
    let mysql = rt.block_on(accel_conductor::testing::mysql());
    for (name, db) in DATABASES.into_iter().zip([sqlite, postgres, mysql]) {
        let s = rt.block_on(stack(db));
        for (n, devices) in &reports {
            rt.block_on(heartbeat(&s, &host(*n)));
            rt.block_on(send_report(&s, &host(*n), devices));
        }
        rt.block_on(send_cyborg_report(&s, &cyborg));
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
        let id = format!("cyborg_report_data/{CYBORG_DEVICES}_devices/{name}");
        c.bench_function(&id, |b| {
            timed(b, &id, || rt.block_on(send_cyborg_report(&s, &cyborg)))
        });
        let id = format!("cyborg_report_unchanged/{CYBORG_DEVICES}_devices/{name}");
        c.bench_function(&id, |b| {
            timed(b, &id, || {
                rt.block_on(send_cyborg_unchanged(&s, &cyborg_digest))
            })
        });
    }
    // Last, beside accel's figures of the same run: seconds per call, so few calls.
    let _ = CYBORG.set(measure_cyborg(&cyborg));
}

criterion_group!(benches, bench);

fn result() -> BenchResult {
    let ms = |id: &str| SAMPLES.median_ns(id).map(|v| v / 1e6);
    let mut r = BenchResult::new(
        "service",
        "accel's service operations: report_data and bind/unbind on SQLite, PostgreSQL and MariaDB",
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
    for db in DATABASES {
        let v = ms(&format!("cyborg_report_data/{CYBORG_DEVICES}_devices/{db}"));
        rows.push(vec![
            format!("a Cyborg 17 agent's report, {CYBORG_DEVICES} devices unchanged"),
            db.into(),
            cell(v, &|v| format!("{v:.2}")),
            cell(v, &|v| format!("{:.0}", 1e3 / v)),
        ]);
        let v = ms(&format!(
            "cyborg_report_unchanged/{CYBORG_DEVICES}_devices/{db}"
        ));
        rows.push(vec![
            format!(
                "an accel agent on Cyborg's wire, {CYBORG_DEVICES} devices unchanged (by digest)"
            ),
            db.into(),
            cell(v, &|v| format!("{v:.2}")),
            cell(v, &|v| format!("{:.0}", 1e3 / v)),
        ]);
    }
    if let Some(v) = ms(&format!(
        "cyborg_report_unchanged/{CYBORG_DEVICES}_devices/sqlite"
    )) {
        r.targets.push(Target::new(
            format!(
                "an unchanged {CYBORG_DEVICES}-device report on Cyborg's wire (by digest), SQLite"
            ),
            v,
            1.0,
            "ms",
            Better::Lower,
        ));
    }
    let cyborg = CYBORG.get();
    let cyborg_cpu = cyborg.and_then(|c| median(&c.cpu_ms));
    let cyborg_wall = cyborg.and_then(|c| median(&c.wall_ms));
    rows.push(vec![
        format!(
            "the same report through real Cyborg 17's conductor (CPU; wall {})",
            cell(cyborg_wall, &|v| format!("{v:.0} ms"))
        ),
        "sqlite".into(),
        cell(cyborg_cpu, &|v| format!("{v:.1}")),
        cell(cyborg_cpu, &|v| format!("{:.2}", 1e3 / v)),
    ]);
    let accel_cyborg = ms(&format!(
        "cyborg_report_data/{CYBORG_DEVICES}_devices/sqlite"
    ));
    if let (Some(theirs), Some(ours)) = (cyborg_cpu, accel_cyborg) {
        r.targets.push(Target::new(
            format!(
                "real Cyborg 17's conductor CPU / accel's conductor time, unchanged \
                 {CYBORG_DEVICES}-device Cyborg report, SQLite"
            ),
            theirs / ours,
            20.0,
            "x",
            Better::Higher,
        ));
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
         100-device report takes {} on SQLite, {} on PostgreSQL and {} on MariaDB; the \
         time grows with the devices a report carries. A bind and unbind takes {} on \
         SQLite, {} on PostgreSQL and {} on MariaDB. A real Cyborg 17 agent's unchanged 100-device report costs accel's \
         conductor {} on SQLite (recognised by the conductor's own digest of what it \
         applied), and real Cyborg 17's conductor {} of CPU per call on SQLite (median of \
         its timed calls; it diffs the whole inventory with several queries per device \
         and asks Placement for the host's provider each time). accel's figure is the \
         whole call's time, client included, so the ratio understates the gap.",
        at("report_data/100_devices/sqlite"),
        at("report_data/100_devices/postgres"),
        at("report_data/100_devices/mysql"),
        at("api/bind_unbind/sqlite"),
        at("api/bind_unbind/postgres"),
        at("api/bind_unbind/mysql"),
        at(&format!(
            "cyborg_report_data/{CYBORG_DEVICES}_devices/sqlite"
        )),
        cell(cyborg_cpu, &|v| format!("{v:.0} ms")),
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
