//! A remotable class call returning a 1,000-member `DeviceList` over the memory transport
//! (`object_class_action_versions` to the conductor and back), beside calling the same
//! body locally and encoding its result, in one run. Also prints the reply's size.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use std::sync::Arc;
use verso::{RequestContext, Version, VersionedObject};
use verso_rpc::conductor::{add_object_endpoints, ConductorApi, INDIRECTION_VERSION};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{Endpoint, RpcClient, RpcServer, Target};

const MEMBERS: usize = 1_000;

fn store() -> cyborg_model::StoreHandle {
    let rows: Vec<_> = (1..=MEMBERS)
        .map(|n| {
            json!({"id": n, "uuid": format!("5d5a3e0b-6b2f-4b9a-9d0c-{n:012x}"), "type": "GPU", "vendor": "10de",
                   "model": "A100", "std_board_info": null, "hostname": "host1", "vendor_board_info": "sxm4",
                   "managed_mode": "managed", "created_at": "2024-03-01T12:34:56Z", "updated_at": null})
        })
        .collect();
    let s = cyborg_model::MemoryStore::from_seed(&json!({ "Device": rows })).expect("seed");
    cyborg_model::StoreHandle(Arc::new(s))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = store();
    let transport = Arc::new(MemoryTransport::new());
    let s = store.clone();
    let endpoint = add_object_endpoints(
        Endpoint::new(Version::new(1, 1)),
        INDIRECTION_VERSION,
        Arc::new(cyborg_model::registry()),
        move |ctx| ctx.with_extension(s.clone()),
    );
    let _server = rt.block_on(async {
        RpcServer::new(transport.clone(), Target::new("conductor"))
            .endpoint(endpoint)
            .expect("endpoint")
            .start()
            .await
            .expect("start")
    });
    let api = Arc::new(ConductorApi::new(
        RpcClient::new(transport, Target::new("conductor")).version_cap(Version::new(1, 1)),
        INDIRECTION_VERSION,
    ));
    let agent = RequestContext::new("req-bench").with_indirection("cyborg", api);
    let local = RequestContext::new("req-bench").with_extension(store);

    let remote_list = rt
        .block_on(cyborg_model::DeviceList::get_all(&agent))
        .expect("remote call");
    let bytes = serde_json::to_vec(&verso::FieldValue::to_primitive(&remote_list))
        .expect("json")
        .len();
    println!(
        "reply: {MEMBERS} members, {bytes} bytes of primitive JSON (same as the local encoding)"
    );

    let mut g = c.benchmark_group("device_list_1000");
    g.bench_function("remote_via_conductor", |b| {
        b.iter(|| {
            rt.block_on(cyborg_model::DeviceList::get_all(&agent))
                .expect("remote call")
        })
    });
    g.bench_function("local_body_and_encode", |b| {
        b.iter(|| {
            let list = rt
                .block_on(cyborg_model::DeviceList::get_all(&local))
                .expect("local call");
            list.to_primitive(verso::Target::Peer(&cyborg_model::DeviceList::manifest()))
                .expect("encode")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
