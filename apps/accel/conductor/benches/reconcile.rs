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
//! Filling 10,000 hosts takes a few minutes per database (one report per host).
// A failed set-up step fails the bench with its message.
#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use accel_conductor::db::ReportedDevice;
use accel_conductor::placement::{wanted, wanted_of};
use accel_conductor::testing::reported_device;
use accel_conductor::Db;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::time::Duration;

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
            group.bench_with_input(
                BenchmarkId::new(format!("{backend}/full"), hosts),
                db,
                |b, db| {
                    b.iter(|| rt.block_on(wanted(db)).expect("a pass"));
                },
            );
            for (label, count) in [("changed-10", 10), ("changed-tenth", hosts / 10)] {
                let changed: Vec<String> = (0..count)
                    .map(|i| format!("bench-host-{:05}", i * hosts / count))
                    .collect();
                let read = rt.block_on(wanted_of(db, &changed)).expect("a pass");
                assert_eq!(read.values().map(Vec::len).sum::<usize>(), count * 4);
                group.bench_with_input(
                    BenchmarkId::new(format!("{backend}/{label}"), hosts),
                    db,
                    |b, db| {
                        b.iter(|| rt.block_on(wanted_of(db, &changed)).expect("a pass"));
                    },
                );
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
