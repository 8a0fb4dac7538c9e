//! The census counts what the database holds, on both databases: empty, after a report,
//! after a bind and a release into cleanup.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_conductor::db::{Release, ReportedDevice};
use accel_conductor::testing as support;
use accel_conductor::Db;
use std::collections::BTreeMap;

fn device(cp: &str, device_type: &str) -> ReportedDevice {
    ReportedDevice {
        control_path_id: cp.to_owned(),
        device_type: device_type.to_owned(),
        vendor: "144d".to_owned(),
        model: "a80a".to_owned(),
        std_board_info: None,
        driver_name: Some("nvme".to_owned()),
        handles: vec![("PCI".to_owned(), format!("{{\"address\": \"{cp}\"}}"))],
        ..Default::default()
    }
}

async fn counts(db: &Db) {
    let empty = db.census().await.expect("census");
    assert_eq!(empty.devices, 0);
    assert_eq!(empty.arqs_total(), 0);
    assert_eq!(empty.handles_cleaning, Some(0));

    db.report(
        "h1",
        &[device("0000:3b:00.0", "SSD"), device("0000:3c:00.0", "GPU")],
    )
    .await
    .expect("report");
    let groups = vec![[("resources:SSD".to_owned(), "1".to_owned())]
        .into_iter()
        .collect::<BTreeMap<_, _>>()];
    db.create_profile("ssd", groups, None)
        .await
        .expect("profile");
    let a = db.create_arq("ssd", 0, None).await.expect("arq a");
    db.create_arq("ssd", 0, None).await.expect("arq b");
    db.bind(&a.uuid, "h1", "instance-1", None)
        .await
        .expect("bind");
    let bound = db.census().await.expect("census");
    assert_eq!(
        (bound.devices, bound.deployables, bound.attach_handles),
        (2, 2, 2)
    );
    assert_eq!(bound.handles_in_use, 1);
    assert_eq!(bound.device_profiles, 1);
    assert_eq!((bound.arqs_in("Bound"), bound.arqs_in("Initial")), (1, 1));
    assert_eq!(bound.arqs_total(), 2);

    db.unbind_with(&a.uuid, Release::CleanSsd)
        .await
        .expect("unbind");
    let cleaning = db.census().await.expect("census");
    assert_eq!(cleaning.handles_in_use, 0);
    assert_eq!(cleaning.handles_cleaning, Some(1));
    assert_eq!(cleaning.handles_failed_cleanup, Some(0));
}

#[tokio::test]
async fn census_on_sqlite() {
    let (db, _dir) = support::sqlite().await;
    counts(&db).await;
}

#[tokio::test]
async fn census_on_postgres() {
    counts(&support::postgres().await).await;
}

#[tokio::test]
async fn census_on_mysql() {
    counts(&support::mysql().await).await;
}
