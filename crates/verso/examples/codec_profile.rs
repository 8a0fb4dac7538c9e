//! A fixed amount of codec work for instruction-counting profilers, which are reliable
//! on a shared machine where wall-clock benches are not:
//!
//! ```sh
//! cargo build --release -p verso --example codec_profile
//! valgrind --tool=callgrind target/release/examples/codec_profile device-bytes 2000
//! ```
//!
//! Workloads (`codec_profile WORKLOAD ROUNDS [MEMBERS]`): `device-bytes` / `device-serde`
//! (one `Device` through JSON bytes and back, verso's byte path / plain serde_json on the
//! same fields), `list-bytes` / `list-serde` (a `DeviceList` / `Vec` of MEMBERS, default
//! 1,000), `list-decode` / `serde-list-decode` (the decode half only). `split` times each
//! half and its parts (limits scan, parse alone, drop) for both, alternated in one
//! process, best of ROUNDS: wall clock, where cache misses show that instruction counts
//! do not. The structs are the bench's (`benches/primitive.rs`).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use cyborg_model::{Device, DeviceList, DeviceType, ManagedMode};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use verso::{Field, ObjectList, VersionedObject};

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
    let mut d = Device {
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
    };
    d.reset_changes();
    d
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let work = args.get(1).map_or("device-bytes", String::as_str);
    let n: usize = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(1000);
    let members: i64 = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(1000);
    match work {
        "device-bytes" => {
            let d = device(1);
            for _ in 0..n {
                let bytes = black_box(&d)
                    .to_primitive_bytes(verso::Target::Own)
                    .expect("encodes at its own version");
                black_box(Device::from_primitive_slice(&bytes).expect("decode"));
            }
        }
        "device-serde" => {
            let p = plain(1);
            for _ in 0..n {
                let bytes = serde_json::to_vec(black_box(&p)).expect("encode");
                black_box(serde_json::from_slice::<PlainDevice>(&bytes).expect("decode"));
            }
        }
        "list-bytes" => {
            let mut list = DeviceList::from_objects((0..members).map(device).collect());
            list.reset_changes_of(&[], true);
            for _ in 0..n {
                let bytes = black_box(&list)
                    .to_primitive_bytes(verso::Target::Own)
                    .expect("encodes at its own version");
                black_box(DeviceList::from_primitive_slice(&bytes).expect("decode"));
            }
        }
        "list-serde" => {
            let list: Vec<PlainDevice> = (0..members).map(plain).collect();
            for _ in 0..n {
                let bytes = serde_json::to_vec(black_box(&list)).expect("encode");
                black_box(serde_json::from_slice::<Vec<PlainDevice>>(&bytes).expect("decode"));
            }
        }
        "list-decode" | "serde-list-decode" => {
            let mut list = DeviceList::from_objects((0..members).map(device).collect());
            list.reset_changes_of(&[], true);
            let plain_list: Vec<PlainDevice> = (0..members).map(plain).collect();
            let bytes = list
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes");
            let plain_bytes = serde_json::to_vec(&plain_list).expect("encode");
            drop((list, plain_list));
            for _ in 0..n {
                if work == "list-decode" {
                    black_box(DeviceList::from_primitive_slice(black_box(&bytes)).expect("decode"));
                } else {
                    black_box(
                        serde_json::from_slice::<Vec<PlainDevice>>(black_box(&plain_bytes))
                            .expect("decode"),
                    );
                }
            }
        }
        "split" => {
            // Wall clock of each half, verso and serde_json alternated in one process:
            // the best of `n` rounds of each.
            let mut list = DeviceList::from_objects((0..members).map(device).collect());
            list.reset_changes_of(&[], true);
            let plain_list: Vec<PlainDevice> = (0..members).map(plain).collect();
            let bytes = list
                .to_primitive_bytes(verso::Target::Own)
                .expect("encodes");
            let plain_bytes = serde_json::to_vec(&plain_list).expect("encode");
            println!(
                "size of Device {} vs PlainDevice {}; bytes {} vs {}",
                std::mem::size_of::<Device>(),
                std::mem::size_of::<PlainDevice>(),
                bytes.len(),
                plain_bytes.len()
            );
            let time = |f: &mut dyn FnMut()| {
                let start = std::time::Instant::now();
                f();
                start.elapsed().as_secs_f64() * 1e6
            };
            let names = [
                "verso encode",
                "serde encode",
                "verso decode",
                "serde decode",
                "verso drop",
                "serde drop",
                "limits scan",
                "verso parse only",
                "serde parse only",
            ];
            let mut best = [f64::MAX; 9];
            for _ in 0..n {
                let t = [
                    time(&mut || {
                        black_box(
                            black_box(&list)
                                .to_primitive_bytes(verso::Target::Own)
                                .expect("encodes"),
                        );
                    }),
                    time(&mut || {
                        black_box(serde_json::to_vec(black_box(&plain_list)).expect("encode"));
                    }),
                    time(&mut || {
                        black_box(
                            DeviceList::from_primitive_slice(black_box(&bytes)).expect("decode"),
                        );
                    }),
                    time(&mut || {
                        black_box(
                            serde_json::from_slice::<Vec<PlainDevice>>(black_box(&plain_bytes))
                                .expect("decode"),
                        );
                    }),
                    {
                        let mut d = Some(DeviceList::from_primitive_slice(&bytes).expect("decode"));
                        time(&mut || drop(black_box(d.take())))
                    },
                    {
                        let mut d = Some(
                            serde_json::from_slice::<Vec<PlainDevice>>(&plain_bytes)
                                .expect("decode"),
                        );
                        time(&mut || drop(black_box(d.take())))
                    },
                    time(&mut || {
                        verso::DecodeLimits::default()
                            .check_json(black_box(&bytes))
                            .expect("within limits");
                    }),
                    time(&mut || {
                        black_box(
                            serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&bytes))
                                .expect("json"),
                        );
                    }),
                    time(&mut || {
                        black_box(
                            serde_json::from_slice::<serde::de::IgnoredAny>(black_box(
                                &plain_bytes,
                            ))
                            .expect("json"),
                        );
                    }),
                ];
                for (b, t) in best.iter_mut().zip(t) {
                    *b = b.min(t);
                }
            }
            for (name, b) in names.iter().zip(best) {
                println!("{name:>18}: {b:8.0} us");
            }
            println!(
                "ratios: encode {:.2}x, decode {:.2}x, round trip {:.2}x",
                best[0] / best[1],
                best[2] / best[3],
                (best[0] + best[2]) / (best[1] + best[3])
            );
        }
        other => {
            eprintln!(
                "unknown workload {other}: device-bytes, device-serde, list-bytes, list-serde"
            );
            std::process::exit(2);
        }
    }
}
