//! The conductor records the wire each host's agent reports on (`host_wires`, migration
//! 102), so it calls the agent on that wire only: on SQLite, PostgreSQL and MariaDB, a
//! host reporting on Cyborg's topic (`report_data`, then `report_unchanged` by digest)
//! is on Cyborg's wire, the same host reporting on accel's topic moves to accel's, a host
//! whose reports were applied before migration 102 (no row) gets its wire from its next
//! report even when that report goes by digest, and a report that is refused records
//! nothing.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_agent::client::{Reported, Reporter};
use accel_agent::cyborg::CyborgReporter;
use accel_agent::discovery::discover;
use accel_agent::fixture::{sample_host, write_tree};
use accel_agent::report::driver_devices;
use accel_conductor::db::{AgentWire, Release};
use accel_conductor::service::{endpoint, ReleasePolicy};
use accel_conductor::testing as support;
use accel_conductor::{cyborg, Db};
use std::sync::Arc;
use std::time::Duration;
use verso::VersionedObject;
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_rpc::{RpcClient, RpcServer, Target};

const HOST: &str = "wire-host";

async fn forget_wire(db: &Db) {
    sqlx::query(
        &db.backend()
            .sql("DELETE FROM host_wires WHERE hostname = $1"),
    )
    .bind(HOST)
    .execute(db.pool())
    .await
    .expect("the wire forgotten");
}

async fn wires(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let cyborg_server = cyborg::serve(transport.clone(), db.clone(), cyborg::TOPIC, None)
        .await
        .expect("Cyborg's topic served");
    let release: ReleasePolicy = Arc::new(|| Release::Immediate);
    let accel_server = RpcServer::new(transport.clone(), Target::new("accel-conductor"))
        .endpoint(endpoint(
            db.clone(),
            accel_objects::registry(),
            release,
            |ctx| ctx,
        ))
        .expect("endpoint")
        .start()
        .await
        .expect("accel's topic served");
    let dir = tempfile::tempdir().expect("dir");
    write_tree(dir.path(), &sample_host(0)).expect("the fixture host");
    assert_eq!(
        db.host_wire(HOST).await.expect("read"),
        None,
        "never reported"
    );

    // On Cyborg's topic: a full report, then one by digest.
    let client =
        RpcClient::for_api::<accel_objects::cyborg::ConductorApi>(transport.clone(), cyborg::TOPIC);
    let on_cyborg = CyborgReporter::new(
        transport.clone(),
        HOST,
        dir.path().to_owned(),
        Duration::from_secs(30),
    )
    .with_digests(client);
    let n = on_cyborg.report().await.expect("reported whole");
    assert!(n > 0);
    assert_eq!(
        db.host_wire(HOST).await.expect("read"),
        Some(AgentWire::Cyborg)
    );
    // Applied before migration 102: no row; the next report, by digest, records it.
    forget_wire(&db).await;
    let (stored, _) = db.report_digest(HOST).await.expect("read").expect("digest");
    assert_eq!(on_cyborg.report().await.expect("by digest"), n);
    assert_eq!(
        db.report_digest(HOST).await.expect("read").map(|(d, _)| d),
        Some(stored),
        "the second report went by digest"
    );
    assert_eq!(
        db.host_wire(HOST).await.expect("read"),
        Some(AgentWire::Cyborg)
    );

    // The host's agent moves to accel's wire: its first report there is whole (the
    // digests of the two wires differ) and records the move; by digest it stays.
    let devices = driver_devices(&discover(dir.path()).expect("discover"));
    let on_accel = Reporter::new(
        HOST,
        RpcClient::for_api::<accel_objects::rpc::ConductorApi>(
            transport.clone(),
            "accel-conductor",
        ),
    );
    let first = on_accel.report(&devices).await.expect("reported");
    assert!(matches!(first, Reported::Full(_)), "{first:?}");
    assert_eq!(
        db.host_wire(HOST).await.expect("read"),
        Some(AgentWire::Accel)
    );
    forget_wire(&db).await;
    let again = on_accel.report(&devices).await.expect("reported");
    assert!(matches!(again, Reported::Unchanged(_)), "{again:?}");
    assert_eq!(
        db.host_wire(HOST).await.expect("read"),
        Some(AgentWire::Accel)
    );

    // A refused report records nothing: a Cyborg report of a device with no fields.
    let blank = accel_cyborg17::objects::DriverDevice::blank();
    let refused =
        RpcClient::for_api::<accel_cyborg17::rpc::ConductorApi>(transport.clone(), cyborg::TOPIC)
            .call_method(
                &verso::RequestContext::new("req-test"),
                accel_cyborg17::rpc::ReportData {
                    hostname: HOST.into(),
                    driver_device_list: vec![blank],
                },
            )
            .await;
    let refused = refused.expect_err("a device with no fields is refused");
    match &refused {
        verso_rpc::RpcError::Remote(r) => assert_eq!(r.kind, "InvalidReport", "{refused}"),
        other => panic!("not the conductor's refusal: {other}"),
    }
    assert_eq!(
        db.host_wire(HOST).await.expect("read"),
        Some(AgentWire::Accel),
        "a refused report moved the host"
    );
    cyborg_server.stop().await;
    accel_server.stop().await;
}

#[tokio::test]
async fn wires_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    wires(db).await;
}

#[tokio::test]
async fn wires_on_postgresql() {
    wires(support::postgres().await).await;
}

#[tokio::test]
async fn wires_on_mariadb() {
    wires(support::mysql().await).await;
}
