//! Primitive encode/decode and manifest backport, each beside its baseline in one run:
//! - `device_roundtrip/*`: a `Device` to JSON bytes and back, vs plain serde_json on a
//!   plain struct with the same fields (target: within 1.3x);
//! - `device_list_10000/*`: backporting a 10,000-member `DeviceList` to an older
//!   manifest, vs encoding it at its own version (target: within 2x), plus 1,000 and
//!   100,000 members to show the backport is linear in N;
//! - `list_roundtrip_N/*`: a `DeviceList` of 100, 1,000 and 10,000 members to JSON bytes
//!   and back, vs plain serde_json on a `Vec` of the plain struct (target at 10,000:
//!   within 1.3x, as the `Device` round trip).
//!
//! After criterion, the same round trips through Python oslo.versionedobjects
//! (`interop/ovo_bench.py`, with `VERSO_TEST_PYTHON` or the workspace's `.venv`), and with
//! `VERSO_BENCH_OUT` set the figures (the medians of criterion's samples, recorded by the
//! bench itself) go to `codec.json` (tools/bench-report's schema).
//!
//! On a shared machine wall-clock ratios drift with the load; `examples/codec_profile.rs`
//! does the same round trips a fixed number of times for callgrind, whose instruction
//! counts do not.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use bench_report::{BenchResult, Better, Chart, Samples, Series, Table, Target};
use criterion::{black_box, criterion_group, BenchmarkId, Criterion, Throughput};
use cyborg_model::{Device, DeviceList, DeviceType, ManagedMode};
use serde::{Deserialize, Serialize};
use std::time::Instant;
use verso::{Field, ObjectList, Version, VersionManifest, VersionedObject};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct PlainDevice {
    id: i64,
    uuid: uuid::Uuid,
    #[serde(rename = "type")]
    ty: String,
    vendor: String,
    model: String,
    std_board_info: Option<String>,
    hostname: String,
    vendor_board_info: Option<String>,
    managed_mode: String,
    created_at: Option<chrono::DateTime<chrono::FixedOffset>>,
    updated_at: Option<chrono::DateTime<chrono::FixedOffset>>,
}

/// Every sample criterion takes, by benchmark id, for the result file.
static SAMPLES: Samples = Samples::new();

/// Times `routine` for criterion and records each sample under `id`.
fn timed<O>(b: &mut criterion::Bencher<'_>, id: &str, mut routine: impl FnMut() -> O) {
    b.iter_custom(|iters| {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(routine());
        }
        let elapsed = start.elapsed();
        SAMPLES.record(id, iters, elapsed);
        elapsed
    })
}

fn device(id: i64) -> Device {
    Device {
        id: id.into(),
        uuid: uuid::Uuid::from_u128(id as u128 + 1).into(),
        r#type: DeviceType::Gpu.into(),
        vendor: "10de".into(),
        model: "A100".into(),
        std_board_info: Field::new(Some("{\"product_id\": \"20b5\"}".into())),
        hostname: "host1".into(),
        vendor_board_info: Field::new(Some("sxm4".into())),
        managed_mode: ManagedMode::Managed.into(),
        created_at: Field::new(Some("2024-03-01T12:34:56Z".parse().expect("date"))),
        updated_at: Field::new(None),
        ..Device::blank()
    }
}

fn plain(id: i64) -> PlainDevice {
    PlainDevice {
        id,
        uuid: uuid::Uuid::from_u128(id as u128 + 1),
        ty: "GPU".into(),
        vendor: "10de".into(),
        model: "A100".into(),
        std_board_info: Some("{\"product_id\": \"20b5\"}".into()),
        hostname: "host1".into(),
        vendor_board_info: Some("sxm4".into()),
        managed_mode: "managed".into(),
        created_at: Some("2024-03-01T12:34:56Z".parse().expect("date")),
        updated_at: None,
    }
}

fn roundtrip(c: &mut Criterion) {
    let mut g = c.benchmark_group("device_roundtrip");
    // As loaded from a database: no pending changes (the plain struct has none either).
    let mut d = device(1);
    d.reset_changes();
    let p = plain(1);
    g.bench_function("verso", |b| {
        timed(b, "device_roundtrip/verso", || {
            let bytes = serde_json::to_vec(
                &black_box(&d)
                    .to_primitive(verso::Target::Own)
                    .expect("encodes at its own version"),
            )
            .expect("encode");
            let v: serde_json::Value = serde_json::from_slice(&bytes).expect("parse");
            black_box(Device::from_primitive(&v).expect("decode"))
        })
    });
    g.bench_function("verso_bytes", |b| {
        timed(b, "device_roundtrip/verso_bytes", || {
            let bytes = black_box(&d)
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version");
            black_box(Device::from_primitive_slice(&bytes).expect("decode"))
        })
    });
    g.bench_function("plain_serde", |b| {
        timed(b, "device_roundtrip/plain_serde", || {
            let bytes = serde_json::to_vec(black_box(&p)).expect("encode");
            black_box(serde_json::from_slice::<PlainDevice>(&bytes).expect("decode"))
        })
    });
    g.finish();
}

fn list_backport(c: &mut Criterion) {
    let mut manifest = VersionManifest::new();
    manifest
        .insert("DeviceList", Version::new(1, 0))
        .insert("Device", Version::new(1, 0));
    for n in [1_000usize, 10_000, 100_000] {
        let list = DeviceList::from_objects((0..n as i64).map(device).collect());
        let mut g = c.benchmark_group(format!("device_list_{n}"));
        g.throughput(Throughput::Elements(n as u64));
        g.sample_size(if n > 10_000 { 10 } else { 30 });
        g.bench_function(BenchmarkId::new("own_version", n), |b| {
            timed(b, &format!("device_list_{n}/own_version"), || {
                serde_json::to_vec(
                    &black_box(&list)
                        .to_primitive(verso::Target::Own)
                        .expect("encodes at its own version"),
                )
                .expect("encode")
            })
        });
        g.bench_function(BenchmarkId::new("own_version_bytes", n), |b| {
            timed(b, &format!("device_list_{n}/own_version_bytes"), || {
                black_box(&list)
                    .to_primitive_bytes(verso::Target::Own)
                    .expect("encodes at its own version")
            })
        });
        g.bench_function(BenchmarkId::new("manifest_backport", n), |b| {
            timed(b, &format!("device_list_{n}/manifest_backport"), || {
                serde_json::to_vec(
                    &black_box(&list)
                        .to_primitive(verso::Target::Peer(&manifest))
                        .expect("backport"),
                )
                .expect("encode")
            })
        });
        g.bench_function(BenchmarkId::new("manifest_backport_bytes", n), |b| {
            timed(
                b,
                &format!("device_list_{n}/manifest_backport_bytes"),
                || {
                    black_box(&list)
                        .to_primitive_bytes(verso::Target::Peer(&manifest))
                        .expect("backport")
                },
            )
        });
        g.finish();
        assert_eq!(list.len(), n);
    }
}

fn list_roundtrip(c: &mut Criterion) {
    for n in LIST_SIZES {
        // As loaded from a database: no pending changes, as in `roundtrip`.
        let mut list = DeviceList::from_objects((0..n as i64).map(device).collect());
        list.reset_changes_of(&[], true);
        let plain_list: Vec<PlainDevice> = (0..n as i64).map(plain).collect();
        let mut g = c.benchmark_group(format!("list_roundtrip_{n}"));
        g.throughput(Throughput::Elements(n as u64));
        g.sample_size(if n >= 10_000 { 20 } else { 50 });
        g.bench_function("verso_bytes", |b| {
            timed(b, &format!("list_roundtrip_{n}/verso_bytes"), || {
                let bytes = black_box(&list)
                    .to_primitive_bytes(verso::Target::Own)
                    .expect("encodes at its own version");
                DeviceList::from_primitive_slice(&bytes).expect("decode")
            })
        });
        g.bench_function("plain_serde", |b| {
            timed(b, &format!("list_roundtrip_{n}/plain_serde"), || {
                let bytes = serde_json::to_vec(black_box(&plain_list)).expect("encode");
                serde_json::from_slice::<Vec<PlainDevice>>(&bytes).expect("decode")
            })
        });
        g.finish();
    }
}

const LIST_SIZES: [usize; 3] = [100, 1_000, 10_000];
const BACKPORT_SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// Python OVO's round trips (ns): one `Device`, and a `DeviceList` by size; `None` with a
/// note when there is no Python with oslo.versionedobjects.
fn python_ovo() -> Option<(f64, Vec<(usize, f64)>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("VERSO_TEST_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("../../.venv/bin/python"));
    let sizes = LIST_SIZES.map(|n| n.to_string()).join(",");
    let out = std::process::Command::new(&python)
        .arg(root.join("interop/ovo_bench.py"))
        .args(["--sizes", &sizes])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        other => {
            eprintln!(
                "primitive: no Python OVO figures ({}): {other:?}",
                python.display()
            );
            return None;
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let lists = LIST_SIZES
        .iter()
        .filter_map(|n| Some((*n, v["list_ns"][n.to_string()].as_f64()?)))
        .collect();
    Some((v["device_ns"].as_f64()?, lists))
}

fn result(python: Option<(f64, Vec<(usize, f64)>)>) -> BenchResult {
    let ns = |id: &str| SAMPLES.median_ns(id);
    let ms = |v: f64| v / 1e6;
    let mut r = BenchResult::new(
        "codec",
        "The object codec: verso against plain serde_json and Python oslo.versionedobjects",
        "cargo bench -p verso --bench primitive",
    );
    let series = |label: &str, points: Vec<[f64; 2]>| Series {
        label: label.into(),
        points,
    };
    let of = |sizes: &[usize], id: &dyn Fn(usize) -> String| -> Vec<[f64; 2]> {
        sizes
            .iter()
            .filter_map(|&n| Some([n as f64, ms(ns(&id(n))?)]))
            .collect()
    };
    let mut lines = vec![
        series(
            "verso (bytes path)",
            of(&LIST_SIZES, &|n| format!("list_roundtrip_{n}/verso_bytes")),
        ),
        series(
            "plain serde_json",
            of(&LIST_SIZES, &|n| format!("list_roundtrip_{n}/plain_serde")),
        ),
    ];
    if let Some((_, lists)) = &python {
        lines.push(series(
            "Python OVO",
            lists.iter().map(|(n, v)| [*n as f64, ms(*v)]).collect(),
        ));
    }
    r.charts.push(Chart {
        id: "list-roundtrip".into(),
        title: "DeviceList to JSON and back, time by list size".into(),
        x_label: "members".into(),
        y_label: "ms per round trip".into(),
        log_x: true,
        log_y: true,
        series: lines.into_iter().filter(|s| !s.points.is_empty()).collect(),
    });
    r.charts.push(Chart {
        id: "backport".into(),
        title: "DeviceList encode: own version vs backport to a 1.0 manifest".into(),
        x_label: "members".into(),
        y_label: "ms per encode".into(),
        log_x: true,
        log_y: true,
        series: [
            ("own version (bytes)", "own_version_bytes"),
            ("backport (bytes)", "manifest_backport_bytes"),
        ]
        .into_iter()
        .map(|(label, f)| {
            series(
                label,
                of(&BACKPORT_SIZES, &|n| format!("device_list_{n}/{f}")),
            )
        })
        .filter(|s| !s.points.is_empty())
        .collect(),
    });
    let fmt_us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}", v / 1e3));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    let py_device = python.as_ref().map(|p| p.0);
    let py_list = |n: usize| {
        python
            .as_ref()
            .and_then(|p| p.1.iter().find(|(m, _)| *m == n).map(|(_, v)| *v))
    };
    let mut rows = vec![{
        let (v, p) = (
            ns("device_roundtrip/verso_bytes"),
            ns("device_roundtrip/plain_serde"),
        );
        vec![
            "one Device".into(),
            fmt_us(v),
            fmt_us(p),
            fmt_us(py_device),
            ratio(v, p),
            ratio(py_device, v),
        ]
    }];
    for n in LIST_SIZES {
        let (v, p) = (
            ns(&format!("list_roundtrip_{n}/verso_bytes")),
            ns(&format!("list_roundtrip_{n}/plain_serde")),
        );
        rows.push(vec![
            format!("DeviceList of {n}"),
            fmt_us(v),
            fmt_us(p),
            fmt_us(py_list(n)),
            ratio(v, p),
            ratio(py_list(n), v),
        ]);
    }
    r.tables.push(Table {
        title: "round trip to JSON bytes and back (median, microseconds)".into(),
        columns: [
            "what",
            "verso",
            "serde_json",
            "Python OVO",
            "verso / serde_json",
            "Python / verso",
        ]
        .map(String::from)
        .to_vec(),
        rows,
    });
    r.tables.push(Table {
        title: "DeviceList encode to bytes (median, milliseconds)".into(),
        columns: [
            "members",
            "own version",
            "backport to 1.0",
            "backport / own",
        ]
        .map(String::from)
        .to_vec(),
        rows: BACKPORT_SIZES
            .iter()
            .map(|n| {
                let (own, back) = (
                    ns(&format!("device_list_{n}/own_version_bytes")),
                    ns(&format!("device_list_{n}/manifest_backport_bytes")),
                );
                let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2}", ms(v)));
                vec![n.to_string(), f(own), f(back), ratio(back, own)]
            })
            .collect(),
    });
    let mut target = |name: &str, a: &str, b: &str, limit: f64| {
        if let (Some(a), Some(b)) = (ns(a), ns(b)) {
            r.targets
                .push(Target::new(name, a / b, limit, "x", Better::Lower));
        }
    };
    target(
        "Device round trip, verso / serde_json",
        "device_roundtrip/verso_bytes",
        "device_roundtrip/plain_serde",
        1.3,
    );
    target(
        "10,000-member list round trip, verso / serde_json",
        "list_roundtrip_10000/verso_bytes",
        "list_roundtrip_10000/plain_serde",
        1.3,
    );
    target(
        "10,000-member list backport / own-version encode",
        "device_list_10000/manifest_backport_bytes",
        "device_list_10000/own_version_bytes",
        2.0,
    );
    r.summary = format!(
        "verso's codec (the byte path every RPC call takes) on the Cyborg model's Device and \
         DeviceList, against plain serde_json on a struct with the same fields (the floor of \
         any JSON codec in Rust) and against oslo.versionedobjects doing the same round trip \
         (obj_to_primitive, json.dumps, json.loads, obj_from_primitive){}. Time grows \
         linearly with the list for all three; backporting to an older manifest costs a \
         constant factor over encoding at the object's own version.",
        match (py_device, ns("device_roundtrip/verso_bytes")) {
            (Some(p), Some(v)) => format!(": Python takes {:.0}x verso's time per Device", p / v),
            _ => String::new(),
        }
    );
    r
}

criterion_group!(benches, roundtrip, list_roundtrip, list_backport);

fn main() {
    // criterion_main!, then the Python side and the result file.
    benches();
    Criterion::default().configure_from_args().final_summary();
    let python = python_ovo();
    if let Some((device, lists)) = &python {
        println!("Python OVO round trip: Device {:.1} us", device / 1e3);
        for (n, v) in lists {
            println!("Python OVO round trip: DeviceList of {n} {:.2} ms", v / 1e6);
        }
    }
    match result(python).write_if_asked() {
        Ok(Some(path)) => println!("wrote {}", path.display()),
        Ok(None) => {}
        Err(e) => eprintln!("primitive: {e}"),
    }
}
