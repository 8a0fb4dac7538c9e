//! Nova's `accelerator-request-bound` events from binds through the conductor's RPC
//! service (memory transport, SQLite), sent to the tests' own Nova
//! (`accel_conductor::testing::nova`) answering as Nova's `os-server-external-events`
//! does, with tokens it checks with the real test Keystone
//! (`VERSO_TEST_KEYSTONE_URL`, started by scripts/test.sh): a bound request is
//! `completed`, a bind without a free device `failed`; a 503 is retried and delivered,
//! a 207 of 422s (no host yet) and a 404 are final; while Nova is slow, a full queue
//! drops its oldest batch and keeps the newest.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_agent::discovery::discover;
use accel_agent::report::driver_devices;
use accel_conductor::db::Release;
use accel_conductor::keystone::{AuthOptions, Session};
use accel_conductor::nova::{Notifier, NotifierStats, NovaOptions};
use accel_conductor::service::{endpoint_with_agents, ReleasePolicy};
use accel_conductor::testing as support;
use accel_conductor::testing::nova::{Answer, Nova};
use accel_keystone::testing::Catalog;
use accel_objects::rpc::{BindArq, ConductorApi, CreateArqs, CreateDeviceProfile, ReportData};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verso::RequestContext;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::{RpcClient, RpcServer, Target};

fn keystone_url() -> String {
    std::env::var("VERSO_TEST_KEYSTONE_URL").unwrap_or_else(|_| {
        panic!("VERSO_TEST_KEYSTONE_URL is not set: scripts/test.sh starts the test Keystone and sets it")
    })
}

/// Polls `done` until it holds, or fails after a deadline.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A notifier whose service user is the test Keystone's `nova`.
fn notifier_as_nova(options: NovaOptions) -> Notifier {
    Notifier::start(
        Session::new(AuthOptions::new(
            &keystone_url(),
            "nova",
            "verso-nova",
            "service",
        ))
        .expect("session"),
        options,
    )
}

fn stats(n: &Notifier) -> NotifierStats {
    n.stats()
}

#[tokio::test]
async fn binds_through_the_conductor_tell_nova() {
    let instances: Vec<String> = (0..4).map(|_| uuid::Uuid::new_v4().to_string()).collect();
    let answers = [
        Answer::Accept,
        Answer::UnavailableOnce,
        Answer::NoHost,
        Answer::NotFound,
    ];
    let nova = instances
        .iter()
        .zip(answers)
        .fold(Nova::builder(), |nova, (instance, answer)| {
            nova.answer(instance, answer)
        })
        .keystone(&keystone_url())
        .start()
        .await;
    let compute = nova.url();
    let session = Session::new(AuthOptions::new(
        &keystone_url(),
        "nova",
        "verso-nova",
        "service",
    ))
    .expect("session");
    let notifier = Notifier::start(
        session,
        NovaOptions {
            endpoint_override: Some(format!("{compute}/")),
            backoff: Duration::from_millis(50),
            deadline: Duration::from_secs(10),
            ..NovaOptions::default()
        },
    );

    let (db, _dir) = support::sqlite().await;
    let transport = Arc::new(MemoryTransport::new());
    let release: ReleasePolicy = Arc::new(|| Release::Immediate);
    let server = RpcServer::new(transport.clone(), Target::new("accel-conductor"))
        .endpoint(endpoint_with_agents(
            db.clone(),
            accel_objects::registry(),
            release,
            None,
            None,
            Some(notifier.clone()),
            |ctx| ctx,
        ))
        .expect("endpoint")
        .start()
        .await
        .expect("start");
    let client = RpcClient::for_api::<ConductorApi>(transport, "accel-conductor");
    let ctx = RequestContext::new("req-test");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/fixtures/sysfs/host2");
    client
        .call_method(
            &ctx,
            ReportData {
                hostname: "host2".into(),
                devices: driver_devices(&discover(&root).expect("discover")),
            },
        )
        .await
        .expect("report");
    client
        .call_method(
            &ctx,
            CreateDeviceProfile {
                name: "fpga".into(),
                groups: vec![[("resources:FPGA".to_owned(), "1".to_owned())]
                    .into_iter()
                    .collect()],
                description: None,
            },
        )
        .await
        .expect("profile");
    let mut arqs = Vec::new();
    for _ in &instances {
        let created = client
            .call_method(
                &ctx,
                CreateArqs {
                    device_profile_name: "fpga".into(),
                    group_id: None,
                    project_id: None,
                },
            )
            .await
            .expect("arqs");
        arqs.push(created[0].uuid.get().expect("uuid").to_string());
    }
    // host2 has one FPGA: the first bind gets it, the others fail (NoFreeHandle).
    for (i, (arq, instance)) in arqs.iter().zip(&instances).enumerate() {
        let bound = client
            .call_method(
                &ctx,
                BindArq {
                    uuid: arq.clone(),
                    hostname: "host2".into(),
                    instance_uuid: instance.clone(),
                    device_rp_uuid: None,
                    project_id: None,
                },
            )
            .await;
        assert_eq!(bound.is_ok(), i == 0, "bind {i}: {bound:?}");
    }
    let expected = |i: usize, status: &str| {
        json!({"events": [{
            "name": "accelerator-request-bound",
            "server_uuid": instances[i],
            "tag": arqs[i],
            "status": status,
        }]})
    };

    // Bound: `completed`, with a token Keystone vouches for, at compute 2.82.
    until("the bound request's event", || {
        !nova.of(&instances[0]).is_empty()
    })
    .await;
    let got = nova.of(&instances[0]);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].body, expected(0, "completed"));
    assert_eq!(got[0].microversion.as_deref(), Some("compute 2.82"));
    assert_eq!(got[0].token_user.as_deref(), Some("nova"));

    // NoFreeHandle: `failed`; Nova's 503 is retried until it accepts.
    until("the failed bind's event, retried", || {
        nova.of(&instances[1]).len() == 2
    })
    .await;
    for r in nova.of(&instances[1]) {
        assert_eq!(r.body, expected(1, "failed"));
    }

    // 207 of 422s (no host yet) and 404 are final: once the notifier counts them done,
    // Nova was asked exactly once each.
    until("every batch settled", || {
        let s = stats(&notifier);
        s.delivered == 2 && s.no_host == 1 && s.rejected == 1
    })
    .await;
    for i in [2, 3] {
        let got = nova.of(&instances[i]);
        assert_eq!(got.len(), 1, "instance {i}: {got:?}");
        assert_eq!(got[0].body, expected(i, "failed"));
    }
    let s = stats(&notifier);
    assert_eq!((s.attempts, s.gave_up, s.dropped), (5, 0, 0), "{s:?}");
    server.stop().await;
}

/// Nova down (nothing listens): the events are tried as many times as configured, then
/// given up.
#[tokio::test]
async fn nova_down_is_retried_then_given_up() {
    // A port nothing listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut options = AuthOptions::new(&keystone_url(), "nova", "verso-nova", "service");
    options.max_retries = 0;
    let notifier = Notifier::start(
        Session::new(options).expect("session"),
        NovaOptions {
            endpoint_override: Some(format!("http://127.0.0.1:{port}/compute")),
            attempts: 3,
            backoff: Duration::from_millis(20),
            deadline: Duration::from_secs(10),
            ..NovaOptions::default()
        },
    );
    notifier.notify(
        "0b6d7d8e-2d5b-4a43-9e1f-6f0f3b9b8a11",
        vec![(
            "5f1e0c9a-7f3d-4a57-8d51-0f2c9c8d7e61".into(),
            accel_conductor::nova::BindStatus::Completed,
        )],
    );
    until("the batch given up", || stats(&notifier).gave_up == 1).await;
    let s = stats(&notifier);
    assert_eq!((s.attempts, s.delivered), (3, 0), "{s:?}");
}

#[tokio::test]
async fn a_full_queue_drops_the_oldest_batch() {
    // Five instances' batches while Nova holds every request: the first in flight (one
    // at a time), then four queued in one go (the test's runtime has one thread, so the
    // sender cannot take any of them meanwhile) into a queue of two: the fourth and the
    // fifth each drop the oldest queued batch (the second, then the third), never a
    // newer one.
    let instances: Vec<String> = (0..5)
        .map(|i| format!("7c1d2e3f-4a5b-4c6d-8e7f-00000000000{i}"))
        .collect();
    let nova = instances
        .iter()
        .fold(Nova::builder(), |nova, instance| {
            nova.answer(instance, Answer::Held)
        })
        .start()
        .await;
    let notifier = notifier_as_nova(NovaOptions {
        endpoint_override: Some(nova.url().to_owned()),
        queue_size: 2,
        concurrency: 1,
        ..NovaOptions::default()
    });
    let event = |i: usize| {
        vec![(
            format!("5f1e0c9a-7f3d-4a57-8d51-00000000000{i}"),
            accel_conductor::nova::BindStatus::Completed,
        )]
    };
    notifier.notify(&instances[0], event(0));
    until("the first batch at Nova", || {
        !nova.of(&instances[0]).is_empty()
    })
    .await;
    for (i, instance) in instances.iter().enumerate().skip(1) {
        notifier.notify(instance, event(i));
    }
    assert_eq!(stats(&notifier).dropped, 2, "{:?}", stats(&notifier));
    nova.release();
    until("the kept batches delivered", || {
        stats(&notifier).delivered == 3
    })
    .await;
    let got: Vec<bool> = instances.iter().map(|i| !nova.of(i).is_empty()).collect();
    assert_eq!(
        got,
        [true, false, false, true, true],
        "delivered, by instance"
    );
    let s = stats(&notifier);
    assert_eq!((s.delivered, s.dropped, s.gave_up), (3, 2, 0), "{s:?}");
}

#[tokio::test]
async fn an_instances_binds_in_quick_succession_make_one_request() {
    // Nova binds an instance's two requests one call each, a few milliseconds apart:
    // after the first the conductor sees one resolved request, after the second both.
    // Nova gets one request with both events, not the first event twice.
    let instance = "3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b".to_owned();
    let nova = Nova::builder()
        .answer(&instance, Answer::Accept)
        .keystone(&keystone_url())
        .start()
        .await;
    let notifier = notifier_as_nova(NovaOptions {
        endpoint_override: Some(nova.url().to_owned()),
        ..NovaOptions::default()
    });
    let completed = accel_conductor::nova::BindStatus::Completed;
    let (first, second) = (
        "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c01".to_owned(),
        "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c02".to_owned(),
    );
    notifier.notify(&instance, vec![(first.clone(), completed)]);
    // The second bind comes well inside the coalescing window (200 ms by default).
    tokio::time::sleep(Duration::from_millis(20)).await;
    notifier.notify(
        &instance,
        vec![(first.clone(), completed), (second.clone(), completed)],
    );
    until("the instance's events delivered", || {
        stats(&notifier).delivered == 1
    })
    .await;
    let got = nova.of(&instance);
    assert_eq!(got.len(), 1, "one request: {got:?}");
    let tags: Vec<&str> = got[0].body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["tag"].as_str())
        .collect();
    assert_eq!(tags, [first.as_str(), second.as_str()]);
    assert_eq!(stats(&notifier).attempts, 1);
}

/// Without `[nova] endpoint_override`, Nova is the `compute` endpoint of the service
/// user's Keystone catalog, in the configured region: the events reach the fake Nova
/// registered there, with the `nova` user's token. A region whose catalog has no
/// `compute` endpoint is a configuration error: the batch is given up at once as
/// rejected (no request is made, no retries).
#[tokio::test]
async fn nova_is_found_in_the_keystone_catalog() {
    let instance = uuid::Uuid::new_v4().to_string();
    let nova = Nova::builder()
        .answer(&instance, Answer::Accept)
        .keystone(&keystone_url())
        .start()
        .await;
    let admin = Session::new(AuthOptions::new(
        &keystone_url(),
        "admin",
        "verso-admin",
        "admin",
    ))
    .expect("admin session");
    let catalog = Catalog::add(&admin, "compute", nova.url())
        .await
        .expect("the test Keystone takes the catalog entry");
    let in_region = |region: &str| {
        let mut auth = AuthOptions::new(&keystone_url(), "nova", "verso-nova", "service");
        auth.region_name = Some(region.to_owned());
        Notifier::start(
            Session::new(auth).expect("session"),
            NovaOptions {
                endpoint_override: None,
                backoff: Duration::from_millis(20),
                deadline: Duration::from_secs(10),
                ..NovaOptions::default()
            },
        )
    };
    let arq = uuid::Uuid::new_v4().to_string();
    let events = vec![(arq.clone(), accel_conductor::nova::BindStatus::Completed)];

    let found = in_region(catalog.region());
    found.notify(&instance, events.clone());
    until("the event at the catalog's Nova", || {
        stats(&found).delivered == 1
    })
    .await;
    let got = nova.of(&instance);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0].body,
        json!({"events": [{
            "name": "accelerator-request-bound",
            "server_uuid": instance,
            "tag": arq,
            "status": "completed",
        }]})
    );
    assert_eq!(got[0].token_user.as_deref(), Some("nova"));

    // A region no endpoint is in.
    let missing = in_region(&format!("{}-elsewhere", catalog.region()));
    missing.notify(&instance, events);
    until("the batch given up", || stats(&missing).rejected == 1).await;
    let s = stats(&missing);
    assert_eq!((s.attempts, s.delivered, s.gave_up), (1, 0, 0), "{s:?}");
    assert_eq!(nova.of(&instance).len(), 1, "nothing more reached Nova");
}
