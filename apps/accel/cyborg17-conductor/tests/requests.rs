//! Device profiles and accelerator requests against Cyborg 17's own conductor: the calls
//! Cyborg's API makes of its conductor (`python/cyborg_conductor.py requests`: profiles
//! created, one a duplicate; requests created per unit; one bound by Cyborg's own bind
//! code; requests deleted by UUID, one bound and one missing, and by instance; a profile
//! deleted, one missing; binds and unbinds by JSON patch, one of a request already
//! bound, one to a provider no deployable has) go once to openstack-cyborg 17.0.0's
//! `ConductorManager` and
//! once over RabbitMQ, through Cyborg's own `ConductorAPI` client, to this crate's
//! conductor. Each reply as Cyborg's client rebuilds it, each refusal's exception class,
//! what the database holds after, read by Cyborg's objects, and the events Nova is sent
//! (the test's own Nova, `accel_conductor::testing::nova`) must be the same. On SQLite
//! and on MariaDB.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL`,
//! `VERSO_TEST_PLACEMENT_URL` and `VERSO_TEST_MYSQL_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_conductor::testing::nova::{Nova as TestNova, Received};
use accel_cyborg17::testing::{
    cyborg_conductor_config_on, cyborg_conductor_schema, cyborg_dbsync_upgrade, cyborg_requests,
    cyborg_transport, mysql_execute,
};
use accel_cyborg17_conductor::binds::Nova;
use accel_cyborg17_conductor::requests::Agents;
use accel_cyborg17_conductor::{service, Conductor, Placement, Reports, Requests, Store};
use std::path::{Path, PathBuf};
use support::{env, session};

mod support;
use std::time::Duration;

/// A Cyborg configuration on `connection`, telling binds to the Nova at `nova`.
fn config(dir: &Path, side: &str, connection: &str, nova: &str) -> PathBuf {
    let path = dir.join(format!("{side}.conf"));
    let keystone = env("VERSO_TEST_KEYSTONE_URL");
    std::fs::write(
        &path,
        format!(
            "{}\n[nova]\nauth_type = password\nauth_url = {keystone}\nusername = accel\n\
             password = verso-accel\nproject_name = service\nuser_domain_name = Default\n\
             project_domain_name = Default\nendpoint_override = {nova}\n",
            cyborg_conductor_config_on(
                &format!("cyborg-{side}"),
                connection,
                &keystone,
                "accel",
                "verso-accel",
                &dir.join(format!("{side}.log")),
            )
        ),
    )
    .expect("write the config");
    path
}

/// The events Nova took, with the requests' UUIDs (`tag`, new each run) as whether set.
fn events(received: &[Received]) -> Vec<serde_json::Value> {
    received
        .iter()
        .map(|r| {
            let mut body = r.body.clone();
            for e in body["events"].as_array_mut().into_iter().flatten() {
                e["tag"] = serde_json::json!(e["tag"].is_string());
            }
            serde_json::json!({"microversion": r.microversion, "body": body})
        })
        .collect()
}

/// Makes the database at `url` accel release N+1's schema (on Cyborg 17's): the additions
/// only when Cyborg's schema is there, Cyborg's and the additions when it is empty.
async fn accels_schema(url: &str, empty: bool) {
    let db = accel_conductor::Db::connect(url).await.expect("open");
    let synced = db.sync_on_cyborg17().await.expect("accel's schema");
    assert_eq!(synced.made_cyborg_schema, empty, "{synced:?}");
    db.close().await;
}

/// `on_accels`: both conductors on accel release N+1's schema instead of Cyborg's own
/// (Cyborg's database taken in place on their side), which they must not notice.
async fn the_api_calls_answer_as_cyborgs_own_conductor(mariadb: bool, on_accels: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let host = format!("cyborg17-requests-{suffix}");
    let server = env("VERSO_TEST_MYSQL_URL");
    let rest = server
        .trim_start_matches("mysql://")
        .trim_end_matches('/')
        .to_owned();
    let urls = |side: &str| -> (String, String) {
        if mariadb {
            let db = format!("cyborg_test_requests_{suffix}_{side}");
            mysql_execute(
                &server,
                &format!("CREATE DATABASE {db} CHARACTER SET utf8mb4"),
            );
            (
                format!("mysql://{rest}/{db}"),
                format!("mysql+pymysql://{rest}/{db}?charset=utf8mb4"),
            )
        } else {
            let file = dir.path().join(format!("{side}.sqlite"));
            (
                format!("sqlite://{}", file.display()),
                format!("sqlite:///{}", file.display()),
            )
        }
    };

    // Cyborg 17's own conductor, on Cyborg's schema made by Cyborg.
    let instance = "5f1c7e3a-9b2d-4c6e-8a0f-1d3b5c7e9a20";
    let theirs_nova = TestNova::builder().server(instance, "vm").start().await;
    let (theirs_sqlx, theirs_url) = urls("theirs");
    let theirs_conf = config(dir.path(), "theirs", &theirs_url, theirs_nova.url());
    if mariadb {
        cyborg_dbsync_upgrade(&theirs_conf);
    } else {
        cyborg_conductor_schema(&theirs_conf);
    }
    if on_accels {
        accels_schema(&theirs_sqlx, false).await;
    }
    let theirs = cyborg_requests(&theirs_conf, &host, None);

    // This crate's, on the declared schema, over RabbitMQ.
    let (ours_url, ours_sqlalchemy) = urls("ours");
    if on_accels {
        accels_schema(&ours_url, true).await;
    }
    let store = Store::connect(&ours_url).await.expect("connect");
    store.sync().await.expect("sync");
    let session = session();
    let transport = cyborg_transport().await;
    let ours_nova = TestNova::builder().server(instance, "vm").start().await;
    let conductor = Conductor {
        reports: Reports::new(
            store.clone(),
            Placement::new(session.clone(), Some(env("VERSO_TEST_PLACEMENT_URL"))),
        ),
        requests: Requests::new(
            store,
            Some(Agents::new(transport.clone(), Duration::from_secs(30))),
        )
        .with_nova(Nova::new(session, Some(ours_nova.url().to_owned()))),
    };
    let topic = format!("cyborg-conductor-{suffix}");
    let served = service::serve(transport, conductor, &topic)
        .await
        .expect("serving");
    let ours_conf = config(dir.path(), "ours", &ours_sqlalchemy, ours_nova.url());
    let ours = cyborg_requests(&ours_conf, &host, Some(&topic));
    served.stop().await;

    // What the sequence shows on Cyborg's side, or the comparison proves little.
    let outcomes: Vec<(String, String)> = theirs["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            let what = c[0].as_str().expect("what").to_owned();
            let how = match c[1].as_str() {
                Some("ok") => "ok".to_owned(),
                _ => c[2].as_str().unwrap_or_default().to_owned(),
            };
            (what, how)
        })
        .collect();
    let expect = [
        ("device_profile_create", "ok"),
        ("device_profile_create", "ok"),
        (
            "device_profile_create duplicate",
            "DuplicateDeviceProfileName",
        ),
        ("arq_create", "ok"),
        ("arq_create", "ok"),
        ("arq_create", "ok"),
        ("bind", "Bound"),
        ("arq_apply_patch bind", "ok"),
        ("state", ""),
        ("arq_apply_patch bind again", "ARQBadState"),
        ("arq_apply_patch unbind", "ok"),
        ("state", ""),
        ("arq_apply_patch rebind", "ok"),
        ("state", ""),
        ("arq_apply_patch nowhere", "ResourceNotFound"),
        ("state", ""),
        ("arq_delete_by_uuid", "ResourceNotFound"),
        ("arq_delete_by_instance_uuid", "ok"),
        ("arq_delete_by_uuid nic", "ResourceNotFound"),
        ("device_profile_delete", "ok"),
        ("device_profile_delete missing", "ResourceNotFound"),
    ];
    assert_eq!(
        outcomes,
        expect.map(|(a, b)| (a.to_owned(), b.to_owned())),
        "{theirs:#}"
    );
    // Every request ended deleted: by UUID, by instance (the rebound one and the one
    // whose bind found no deployable) and the NIC's.
    assert_eq!(theirs["arqs"], serde_json::json!([]), "{theirs:#}");
    // Two binds finished, each told to Nova as one completed event of the instance.
    let told = events(&theirs_nova.of(instance));
    assert_eq!(told.len(), 2, "{told:#?}");
    assert_eq!(
        told[0]["body"]["events"],
        serde_json::json!([{"name": "accelerator-request-bound", "server_uuid": instance,
            "tag": true, "status": "completed"}])
    );

    for (i, (o, t)) in ours["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .zip(theirs["calls"].as_array().expect("calls"))
        .enumerate()
    {
        assert_eq!(
            o, t,
            "call {i}: ours (left) against Cyborg's own conductor (right)"
        );
    }
    assert_eq!(
        ours, theirs,
        "ours (left) against Cyborg's own conductor (right)"
    );
    assert_eq!(
        events(&ours_nova.of(instance)),
        told,
        "Nova was told otherwise"
    );
    if mariadb {
        for side in ["theirs", "ours"] {
            mysql_execute(
                &server,
                &format!("DROP DATABASE cyborg_test_requests_{suffix}_{side}"),
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_api_calls_answer_as_cyborgs_own_conductor() {
    the_api_calls_answer_as_cyborgs_own_conductor(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_the_api_calls_answer_as_cyborgs_own_conductor() {
    the_api_calls_answer_as_cyborgs_own_conductor(true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_api_calls_on_accels_schema_answer_as_cyborgs_own_conductor() {
    the_api_calls_answer_as_cyborgs_own_conductor(false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_the_api_calls_on_accels_schema_answer_as_cyborgs_own_conductor() {
    the_api_calls_answer_as_cyborgs_own_conductor(true, true).await;
}
