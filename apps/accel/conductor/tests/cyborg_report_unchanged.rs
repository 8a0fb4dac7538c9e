//! An unchanged inventory on Cyborg's wire goes by digest (accel's conductor RPC 1.2 on
//! Cyborg's topic, `report_unchanged`), on SQLite and PostgreSQL: an agent on Cyborg's
//! wire (`CyborgReporter::with_digests`) sends its inventory whole once, then its
//! `accel_objects::cyborg::report_digest` while nothing changed, and the conductor skips
//! the diff while the host's rows are what that report made them. To tell the two paths
//! apart the test writes a row behind the conductor's back and puts the digest back:
//! a report by digest leaves the write in place, a full report (a digest the conductor
//! no longer has) undoes it. An agent capped below 1.2 sends every report whole.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_agent::cyborg::CyborgReporter;
use accel_agent::fixture::{sample_host, write_tree};
use accel_conductor::testing as support;
use accel_conductor::{cyborg, Db};
use accel_objects::cyborg::{ConductorApi, ReportUnchanged};
use std::sync::Arc;
use std::time::Duration;
use verso::{RequestContext, Version};
use verso_rpc::transport::memory::MemoryTransport;
use verso_rpc::transport::Transport;
use verso_rpc::RpcClient;

const HOST: &str = "cyborg-digest-host";

/// A reporter of the fixture host at `root`, by digest under `cap`.
fn reporter(
    transport: &Arc<dyn Transport>,
    root: &std::path::Path,
    cap: Option<Version>,
) -> CyborgReporter {
    let client = RpcClient::for_api::<ConductorApi>(transport.clone(), cyborg::TOPIC).with_cap(cap);
    CyborgReporter::new(
        transport.clone(),
        HOST,
        root.to_owned(),
        Duration::from_secs(30),
    )
    .with_digests(client)
}

/// Writes a device's vendor behind the conductor's back and puts the host's digest
/// back (the write's trigger deleted it), as if the write had not happened; the
/// device's UUID.
async fn tamper(db: &Db) -> String {
    let (digest, devices) = db
        .report_digest(HOST)
        .await
        .expect("read")
        .expect("a digest after the full report");
    let device = db
        .devices_on(HOST)
        .await
        .expect("devices")
        .into_iter()
        .next()
        .expect("a device");
    sqlx::query("UPDATE devices SET vendor = 'tampered' WHERE uuid = $1")
        .bind(&device.uuid)
        .execute(db.pool())
        .await
        .expect("the write");
    assert_eq!(
        db.report_digest(HOST).await.expect("read"),
        None,
        "the write forgets the digest"
    );
    sqlx::query(
        "INSERT INTO host_reports (hostname, digest, devices, updated_at) \
         VALUES ($1, $2, $3, '2026-12-07 00:00:00')",
    )
    .bind(HOST)
    .bind(&digest)
    .bind(i64::try_from(devices).expect("a count"))
    .execute(db.pool())
    .await
    .expect("the digest put back");
    device.uuid
}

async fn vendor_of(db: &Db, device: &str) -> String {
    db.devices_on(HOST)
        .await
        .expect("devices")
        .into_iter()
        .find(|d| d.uuid == device)
        .expect("the device")
        .vendor
}

async fn unchanged_reports_go_by_digest(db: Db) {
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let server = cyborg::serve(transport.clone(), db.clone(), cyborg::TOPIC, None)
        .await
        .expect("the Cyborg endpoint listens");
    let dir = tempfile::tempdir().expect("dir");
    write_tree(dir.path(), &sample_host(0)).expect("the fixture host");

    // First report: whole; the conductor stores its digest of it.
    let agent = reporter(&transport, dir.path(), None);
    let n = agent.report().await.expect("reported");
    assert!(n > 0);
    let (digest, devices) = db.report_digest(HOST).await.expect("read").expect("stored");
    assert!(digest.starts_with("cyborg-v2:"), "{digest}");
    assert_eq!(devices, n as u64);

    // Unchanged: by digest, so the write behind the conductor's back stays.
    let device = tamper(&db).await;
    assert_eq!(agent.report().await.expect("reported"), n);
    assert_eq!(
        vendor_of(&db, &device).await,
        "tampered",
        "a full report was sent"
    );

    // The conductor answers the digest it has, and None for another one.
    let client = RpcClient::for_api::<ConductorApi>(transport.clone(), cyborg::TOPIC);
    let ctx = RequestContext::new("req-test");
    let ask = |digest: String| ReportUnchanged {
        hostname: HOST.into(),
        digest,
    };
    let known = client
        .call_method(&ctx, ask(digest.clone()))
        .await
        .expect("answered");
    assert_eq!(known, Some(n as i64));
    let other = client
        .call_method(&ctx, ask("cyborg-v2:00".into()))
        .await
        .expect("answered");
    assert_eq!(other, None);

    // A digest the conductor forgot (a write to the host's rows) gets the full report.
    let device = tamper(&db).await;
    sqlx::query("UPDATE host_reports SET digest = 'cyborg-v2:stale' WHERE hostname = $1")
        .bind(HOST)
        .execute(db.pool())
        .await
        .expect("the digest replaced");
    assert_eq!(agent.report().await.expect("reported"), n);
    assert_ne!(
        vendor_of(&db, &device).await,
        "tampered",
        "the conductor did not ask for it whole"
    );
    assert_eq!(
        db.report_digest(HOST).await.expect("read").map(|(d, _)| d),
        Some(digest),
        "the full report stores the same digest"
    );
    server.stop().await;
}

/// Under a cap below 1.2 (a conductor that has no `report_unchanged`) every report is
/// whole: against a conductor serving Cyborg's API at 1.1 (here one that records the
/// methods it is called with), a capped agent's second report is `report_data` again,
/// where an uncapped one's would be refused.
#[tokio::test]
async fn below_1_2_every_report_is_whole() {
    use std::sync::Mutex;
    let transport: Arc<dyn Transport> = Arc::new(MemoryTransport::new());
    let calls: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let seen = calls.clone();
    let endpoint = verso_rpc::Endpoint::new(Version::new(1, 1)).handle(
        move |_ctx, _m: accel_cyborg17::rpc::ReportData| {
            let seen = seen.clone();
            async move {
                seen.lock().expect("calls").push("report_data");
                Ok(())
            }
        },
    );
    let server =
        verso_rpc::RpcServer::new(transport.clone(), verso_rpc::Target::new(cyborg::TOPIC))
            .endpoint(endpoint)
            .expect("endpoint")
            .start()
            .await
            .expect("serving");
    let dir = tempfile::tempdir().expect("dir");
    write_tree(dir.path(), &sample_host(0)).expect("the fixture host");
    let capped = reporter(&transport, dir.path(), Some(Version::new(1, 1)));
    capped.report().await.expect("first report");
    capped.report().await.expect("second report");
    assert_eq!(
        *calls.lock().expect("calls"),
        ["report_data", "report_data"]
    );
    let uncapped = reporter(&transport, dir.path(), None);
    uncapped.report().await.expect("first report");
    let e = uncapped
        .report()
        .await
        .expect_err("report_unchanged is 1.2");
    assert!(e.to_string().contains("1.2"), "{e}");
    server.stop().await;
}

#[tokio::test]
async fn unchanged_reports_go_by_digest_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    unchanged_reports_go_by_digest(db).await;
}

#[tokio::test]
async fn unchanged_reports_go_by_digest_on_postgresql() {
    unchanged_reports_go_by_digest(support::postgres().await).await;
}
