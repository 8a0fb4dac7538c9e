//! Primitive encode/decode and manifest backport, each beside its baseline in one run:
//! - `device_roundtrip/*`: a `Device` to JSON bytes and back, vs plain serde_json on a
//!   plain struct with the same fields (target: within 1.3x);
//! - `device_list_10000/*`: backporting a 10,000-member `DeviceList` to an older
//!   manifest, vs encoding it at its own version (target: within 2x), plus 1,000 and
//!   100,000 members to show the backport is linear in N;
//! - `list_roundtrip_10000/*`: a 10,000-member `DeviceList` to JSON bytes and back, vs
//!   plain serde_json on a `Vec` of the plain struct (target: within 1.3x, as the
//!   `Device` round trip).
//!
//! On a shared machine wall-clock ratios drift with the load; `examples/codec_profile.rs`
//! does the same round trips a fixed number of times for callgrind, whose instruction
//! counts do not.

#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cyborg_model::{Device, DeviceList, DeviceType, ManagedMode};
use serde::{Deserialize, Serialize};
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
        b.iter(|| {
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
        b.iter(|| {
            let bytes = black_box(&d)
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version");
            black_box(Device::from_primitive_slice(&bytes).expect("decode"))
        })
    });
    g.bench_function("plain_serde", |b| {
        b.iter(|| {
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
            b.iter(|| {
                serde_json::to_vec(
                    &black_box(&list)
                        .to_primitive(verso::Target::Own)
                        .expect("encodes at its own version"),
                )
                .expect("encode")
            })
        });
        g.bench_function(BenchmarkId::new("own_version_bytes", n), |b| {
            b.iter(|| {
                black_box(&list)
                    .to_primitive_bytes(verso::Target::Own)
                    .expect("encodes at its own version")
            })
        });
        g.bench_function(BenchmarkId::new("manifest_backport", n), |b| {
            b.iter(|| {
                serde_json::to_vec(
                    &black_box(&list)
                        .to_primitive(verso::Target::Peer(&manifest))
                        .expect("backport"),
                )
                .expect("encode")
            })
        });
        g.bench_function(BenchmarkId::new("manifest_backport_bytes", n), |b| {
            b.iter(|| {
                black_box(&list)
                    .to_primitive_bytes(verso::Target::Peer(&manifest))
                    .expect("backport")
            })
        });
        g.finish();
        assert_eq!(list.len(), n);
    }
}

fn list_roundtrip(c: &mut Criterion) {
    let n = 10_000i64;
    // As loaded from a database: no pending changes, as in `roundtrip`.
    let mut list = DeviceList::from_objects((0..n).map(device).collect());
    list.reset_changes_of(&[], true);
    let plain_list: Vec<PlainDevice> = (0..n).map(plain).collect();
    let mut g = c.benchmark_group("list_roundtrip_10000");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    g.bench_function("verso_bytes", |b| {
        b.iter(|| {
            let bytes = black_box(&list)
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes at its own version");
            black_box(DeviceList::from_primitive_slice(&bytes).expect("decode"))
        })
    });
    g.bench_function("plain_serde", |b| {
        b.iter(|| {
            let bytes = serde_json::to_vec(black_box(&plain_list)).expect("encode");
            black_box(serde_json::from_slice::<Vec<PlainDevice>>(&bytes).expect("decode"))
        })
    });
    g.finish();
}

criterion_group!(benches, roundtrip, list_roundtrip, list_backport);
criterion_main!(benches);
