//! What one pass of the Placement reconciler costs the conductor when nothing changed
//! (the steady state of a large fleet): `placement::wanted`, the whole inventory read
//! page by page and every host's providers computed, which each pass does before it
//! compares with what it last pushed (no Placement call follows when nothing changed).
//! Hosts of 4 devices each (a GPU with 4 VFs, an FPGA, an NVMe SSD, a NIC), 1,000 and
//! 10,000 hosts, on SQLite and on PostgreSQL, side by side in one run. Beside it, what a
//! changed-hosts pass reads (`placement::wanted_of`) when 10 hosts changed and when a
//! tenth of them did: per host against the full read, the reconciler's
//! `HOST_READS_PER_FULL_READ`. `VERSO_BENCH_HOSTS=1000` runs one size.
//!
//! ```sh
//! scripts/start-postgres.sh
//! cargo bench -p accel-conductor --bench reconcile
//! ```
//! Filling 10,000 hosts takes a few minutes per database (one report per host). With
//! `VERSO_BENCH_OUT` set, the medians of criterion's samples become `placement.json`
//! there, BENCHMARKS.md's section (`scripts/bench.sh placement`).
// A failed set-up step fails the bench with its message.
#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use accel_conductor::db::ReportedDevice;
use accel_conductor::placement::{wanted, wanted_of};
use accel_conductor::testing::reported_device;
use accel_conductor::Db;
use bench_report::{BenchResult, Chart, Samples, Series, Table};
use criterion::{criterion_group, BenchmarkId, Criterion};
use std::time::Duration;

/// Every sample criterion takes, by id, for the result file.
static SAMPLES: Samples = Samples::new();
const BACKENDS: [&str; 2] = ["sqlite", "postgres"];
const READS: [(&str, &str); 3] = [
    ("full", "the whole inventory (a full pass)"),
    ("changed-10", "10 changed hosts"),
    ("changed-tenth", "a tenth of the hosts changed"),
];

/// `routine` timed by criterion, each sample also kept in [`SAMPLES`] under `id`.
fn timed<T>(b: &mut criterion::Bencher<'_>, id: &str, mut routine: impl FnMut() -> T) {
    b.iter_custom(|iters| {
        let start = std::time::Instant::now();
        for _ in 0..iters {
            std::hint::black_box(routine());
        }
        let elapsed = start.elapsed();
        SAMPLES.record(id, iters, elapsed);
        elapsed
    })
}

fn sizes() -> Vec<usize> {
    std::env::var("VERSO_BENCH_HOSTS")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("VERSO_BENCH_HOSTS: numbers like 1000,10000")
        })
        .collect()
}

fn host_devices() -> Vec<ReportedDevice> {
    vec![
        reported_device("0000:3b:00.0", "GPU", "10de", "20b5", 4),
        reported_device("0000:3c:00.0", "FPGA", "10ee", "5020", 1),
        reported_device("0000:3d:00.0", "SSD", "144d", "a80a", 1),
        reported_device("0000:3e:00.0", "NIC", "15b3", "101d", 1),
    ]
}

async fn fill(db: &Db, hosts: usize) {
    let devices = host_devices();
    for i in 0..hosts {
        db.report(&format!("bench-host-{i:05}"), &devices)
            .await
            .expect("report");
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = c.benchmark_group("reconcile_pass");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    let sizes: Vec<usize> = std::env::var("VERSO_BENCH_HOSTS")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("VERSO_BENCH_HOSTS: numbers like 1000,10000")
        })
        .collect();
    for hosts in sizes {
        let (sqlite, _dir) = rt.block_on(accel_conductor::testing::sqlite());
        let postgres = rt.block_on(accel_conductor::testing::postgres());
        for (backend, db) in [("sqlite", &sqlite), ("postgres", &postgres)] {
            rt.block_on(fill(db, hosts));
            let providers: usize = rt
                .block_on(wanted(db))
                .expect("a pass")
                .values()
                .map(Vec::len)
                .sum();
            assert_eq!(providers, hosts * 4);
            let id = format!("{backend}/full/{hosts}");
            group.bench_with_input(
                BenchmarkId::new(format!("{backend}/full"), hosts),
                db,
                |b, db| {
                    timed(b, &id, || rt.block_on(wanted(db)).expect("a pass"));
                },
            );
            for (label, count) in [("changed-10", 10), ("changed-tenth", hosts / 10)] {
                let changed: Vec<String> = (0..count)
                    .map(|i| format!("bench-host-{:05}", i * hosts / count))
                    .collect();
                let read = rt.block_on(wanted_of(db, &changed)).expect("a pass");
                assert_eq!(read.values().map(Vec::len).sum::<usize>(), count * 4);
                let id = format!("{backend}/{label}/{hosts}");
                group.bench_with_input(
                    BenchmarkId::new(format!("{backend}/{label}"), hosts),
                    db,
                    |b, db| {
                        timed(b, &id, || {
                            rt.block_on(wanted_of(db, &changed)).expect("a pass")
                        });
                    },
                );
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);

fn result() -> BenchResult {
    let ms = |id: &str| SAMPLES.median_ns(id).map(|v| v / 1e6);
    let mut r = BenchResult::new(
        "placement",
        "The Placement reconciler's read: the whole inventory against the hosts that changed",
        "cargo bench -p accel-conductor --bench reconcile",
    );
    let sizes = sizes();
    r.charts.push(Chart {
        id: "placement".into(),
        title: "what one reconciler pass reads and computes, by hosts of 4 deployables".into(),
        x_label: "hosts".into(),
        y_label: "ms per pass".into(),
        log_x: true,
        log_y: true,
        series: BACKENDS
            .iter()
            .flat_map(|db| READS.iter().map(move |(read, _)| (db, read)))
            .map(|(db, read)| Series {
                label: format!("{db}, {read}"),
                points: sizes
                    .iter()
                    .filter_map(|n| Some([*n as f64, ms(&format!("{db}/{read}/{n}"))?]))
                    .collect(),
            })
            .filter(|s| !s.points.is_empty())
            .collect(),
    });
    let mut rows = Vec::new();
    for db in BACKENDS {
        for (read, what) in READS {
            for n in &sizes {
                if let Some(v) = ms(&format!("{db}/{read}/{n}")) {
                    rows.push(vec![
                        what.into(),
                        db.into(),
                        n.to_string(),
                        format!("{v:.2}"),
                    ]);
                }
            }
        }
    }
    r.tables.push(Table {
        title: "median of criterion's samples".into(),
        columns: ["read", "database", "hosts", "ms"]
            .map(String::from)
            .to_vec(),
        rows,
    });
    let at = |id: &str| ms(id).map_or("-".into(), |v| format!("{v:.2} ms"));
    let top = sizes.iter().max().copied().unwrap_or(0);
    r.summary = format!(
        "What one pass of the conductor's Placement reconciler reads from the database \
         and computes before it compares with what it last pushed to Placement (no \
         Placement call follows when nothing changed), on hosts of 4 deployables. A full \
         pass (the whole inventory: on taking the reconciler lease and every \
         `[placement] full_sync_interval`) grows with the inventory: {} on SQLite and {} \
         on PostgreSQL at {top} hosts. A pass every `sync_interval` reads only the hosts \
         the database marked as changed (migration 8's triggers): {} and {} when 10 of \
         {top} hosts changed, and one empty table when none did.",
        at(&format!("sqlite/full/{top}")),
        at(&format!("postgres/full/{top}")),
        at(&format!("sqlite/changed-10/{top}")),
        at(&format!("postgres/changed-10/{top}")),
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
        Err(e) => eprintln!("reconcile: {e}"),
    }
}
