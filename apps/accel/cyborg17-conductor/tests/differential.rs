//! This crate against Cyborg 17's own conductor: one sequence of reports (built with
//! Cyborg's driver objects: `python/cyborg_conductor.py reports`) is applied by
//! openstack-cyborg 17.0.0's `ConductorManager.report_data` (the Python package, on a
//! SQLite database Cyborg's `create_schema` made) and by [`Reports`] (on a database
//! [`Store::sync`] made from the declared schema), each against the real Placement
//! through the real Keystone. After every report both databases, read by Cyborg's own
//! database API, and Placement's providers under the host must be the same, and a report
//! one side refuses the other must refuse too.
//!
//! Each runs on SQLite (Cyborg's schema from its `create_schema`) and on MariaDB
//! (Cyborg's schema from its own `cyborg-dbsync upgrade`, as a deployment has it).
//!
//! Uses `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL`, `VERSO_TEST_PLACEMENT_URL` and
//! `VERSO_TEST_MYSQL_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::objects::DriverDevice;
use accel_cyborg17::testing::{
    cyborg_conductor_config_on, cyborg_conductor_schema, cyborg_dbsync_upgrade, cyborg_report,
    cyborg_reports, cyborg_snapshot, mysql_execute, write_cyborg_database_config,
};
use accel_cyborg17_conductor::{Placement, Reports, Store};
use support::{compute_node, delete_tree, env, placement};

mod support;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use verso::VersionedObject;

async fn get(placement: &Placement, path: &str) -> Value {
    let (status, body) = placement
        .call(Method::GET, path, Some("1.14"), None)
        .await
        .expect("Placement answers");
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// The providers under the compute node `root`, by name: UUID, inventories, traits.
async fn providers(placement: &Placement, root: &str) -> BTreeMap<String, Value> {
    let tree = get(placement, &format!("/resource_providers?in_tree={root}")).await;
    let mut out = BTreeMap::new();
    for p in tree["resource_providers"].as_array().expect("providers") {
        let uuid = p["uuid"].as_str().expect("uuid");
        if uuid == root {
            continue;
        }
        let inventories = get(
            placement,
            &format!("/resource_providers/{uuid}/inventories"),
        )
        .await;
        let traits = get(placement, &format!("/resource_providers/{uuid}/traits")).await;
        let mut traits: Vec<String> = traits["traits"]
            .as_array()
            .expect("traits")
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect();
        traits.sort();
        out.insert(
            p["name"].as_str().expect("name").to_owned(),
            json!({
                "uuid": uuid,
                "parent": p["parent_provider_uuid"],
                "inventories": inventories["inventories"],
                "traits": traits,
            }),
        );
    }
    out
}

/// One step's outcome: whether the report was taken, the host's rows, its providers.
#[derive(Debug, PartialEq)]
struct Step {
    accepted: bool,
    rows: Value,
    providers: BTreeMap<String, Value>,
}

/// The database both conductors run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Sqlite,
    MariaDb,
}

/// The schema both databases hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Schema {
    /// Cyborg 17's own.
    Cyborg17,
    /// accel release N+1's: Cyborg 17's plus accel's additions
    /// (`accel_conductor::Db::sync_on_cyborg17`), which Cyborg 17's conductors must not
    /// notice.
    AccelOnCyborg17,
}

/// A host of its own with a compute node in Placement, and the two conductors'
/// databases (files in a temporary directory, or databases of the test MariaDB).
struct Bench {
    backend: Backend,
    schema: Schema,
    dir: tempfile::TempDir,
    host: String,
    root: String,
    placement: Placement,
    suffix: String,
}

impl Bench {
    async fn new(backend: Backend, schema: Schema) -> Bench {
        let dir = tempfile::tempdir().expect("tempdir");
        let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let host = format!("cyborg17-diff-{suffix}");
        let placement = placement();
        let root = compute_node(&placement, &host).await;
        let bench = Bench {
            backend,
            schema,
            dir,
            host,
            root,
            placement,
            suffix,
        };
        if backend == Backend::MariaDb {
            for side in ["theirs", "ours"] {
                mysql_execute(
                    &env("VERSO_TEST_MYSQL_URL"),
                    &format!(
                        "CREATE DATABASE {} CHARACTER SET utf8mb4",
                        bench.database(side)
                    ),
                );
            }
        }
        bench
    }

    /// The MariaDB database of one side.
    fn database(&self, side: &str) -> String {
        format!("cyborg_test_diff_{}_{side}", self.suffix)
    }

    /// One side's database: (sqlx's URL, SQLAlchemy's URL).
    fn urls(&self, side: &str) -> (String, String) {
        match self.backend {
            Backend::Sqlite => {
                let file = self.dir.path().join(format!("{side}.sqlite"));
                (
                    format!("sqlite://{}", file.display()),
                    format!("sqlite:///{}", file.display()),
                )
            }
            Backend::MariaDb => {
                let server = env("VERSO_TEST_MYSQL_URL");
                let rest = server.trim_start_matches("mysql://").trim_end_matches('/');
                let db = self.database(side);
                (
                    format!("mysql://{rest}/{db}"),
                    format!("mysql+pymysql://{rest}/{db}?charset=utf8mb4"),
                )
            }
        }
    }

    /// Cyborg 17's own conductor applies `reports` in order on a database of its own;
    /// each step's outcome. Placement is left empty under the host after.
    async fn theirs(&self, reports: &[Value]) -> Vec<Step> {
        let conf = self.dir.path().join("cyborg.conf");
        std::fs::write(
            &conf,
            cyborg_conductor_config_on(
                &format!("cyborg-conductor-{}", self.suffix),
                &self.urls("theirs").1,
                &env("VERSO_TEST_KEYSTONE_URL"),
                "accel",
                "verso-accel",
                &self.dir.path().join("cyborg.log"),
            ),
        )
        .expect("write cyborg.conf");
        match self.backend {
            Backend::Sqlite => cyborg_conductor_schema(&conf),
            Backend::MariaDb => cyborg_dbsync_upgrade(&conf),
        }
        if self.schema == Schema::AccelOnCyborg17 {
            // Cyborg's database taken in place: the additions only.
            let db = accel_conductor::Db::connect(&self.urls("theirs").0)
                .await
                .expect("open");
            let synced = db.sync_on_cyborg17().await.expect("accel's additions");
            assert!(
                !synced.made_cyborg_schema
                    && synced.applied == accel_conductor::db::addition_versions(),
                "{synced:?}"
            );
            db.close().await;
        }
        let mut steps = Vec::new();
        for (i, devices) in reports.iter().enumerate() {
            let file = self.dir.path().join(format!("report-{i}.json"));
            std::fs::write(&file, devices.to_string()).expect("write the report");
            let accepted = self.cyborg_report_settled(&conf, &file);
            self.check_accels_columns("theirs").await;
            steps.push(Step {
                accepted,
                rows: cyborg_snapshot(&conf, &self.host),
                providers: providers(&self.placement, &self.root).await,
            });
        }
        delete_tree(&self.placement, &self.root, false).await;
        steps
    }

    /// Cyborg's conductor applying the report in `file`: accepted or not. Cyborg 17's
    /// `drv_device_make_diff` logs a device it failed to create (a transient failure
    /// under load: the database or Placement busy) and reports success anyway, which
    /// would make a passing moment's failure the reference; a report accepted with an
    /// `ERROR` in `cyborg.log` is sent again (Cyborg diffs it against what it stored, so
    /// a second run completes the first), at most three times, then the test fails with
    /// Cyborg's log.
    fn cyborg_report_settled(&self, conf: &std::path::Path, file: &std::path::Path) -> bool {
        let log = self.dir.path().join("cyborg.log");
        let mut logged = String::new();
        for _ in 0..3 {
            let before = std::fs::metadata(&log).map_or(0, |m| m.len());
            let accepted = cyborg_report(conf, &self.host, file).is_ok();
            let after = std::fs::read(&log).unwrap_or_default();
            let new =
                usize::try_from(before).map_or(&[][..], |b| after.get(b..).unwrap_or_default());
            logged = String::from_utf8_lossy(new).into_owned();
            if !accepted || !logged.lines().any(|l| l.contains(" ERROR ")) {
                return accepted;
            }
            eprintln!(
                "Cyborg's conductor logged an error and accepted {}; sending it again:\n{logged}",
                file.display()
            );
        }
        panic!(
            "Cyborg's conductor logged an error on each of three tries of {}:\n{logged}",
            file.display()
        );
    }

    /// This crate's conductor, on a database [`Store::sync`] made, and the Cyborg
    /// configuration that reads it.
    async fn ours(&self) -> (Reports, std::path::PathBuf) {
        let dir = self.dir.path().join("ours");
        std::fs::create_dir(&dir).expect("mkdir");
        let (url, sqlalchemy) = self.urls("ours");
        if self.schema == Schema::AccelOnCyborg17 {
            let db = accel_conductor::Db::connect(&url).await.expect("open");
            let synced = db.sync_on_cyborg17().await.expect("accel's schema");
            assert!(synced.made_cyborg_schema, "{synced:?}");
            db.close().await;
        }
        let store = Store::connect(&url).await.expect("connect");
        assert_eq!(
            store.sync().await.expect("sync"),
            self.schema == Schema::Cyborg17,
            "an empty database gets Cyborg's schema; accel's is Cyborg's already"
        );
        let conf = write_cyborg_database_config(&dir, &sqlalchemy);
        (Reports::new(store, self.placement.clone()), conf)
    }

    /// Applies one report with `conductor`; the step's outcome.
    async fn apply(
        &self,
        conductor: &Reports,
        conf: &std::path::Path,
        devices: &Value,
    ) -> (Step, String) {
        let devices: Vec<DriverDevice> = devices
            .as_array()
            .expect("devices")
            .iter()
            .map(|p| DriverDevice::from_primitive(p).expect("Cyborg's primitive decodes"))
            .collect();
        let result = conductor.report(&self.host, &devices).await;
        self.check_accels_columns("ours").await;
        let step = Step {
            accepted: result.is_ok(),
            rows: cyborg_snapshot(conf, &self.host),
            providers: providers(&self.placement, &self.root).await,
        };
        (step, format!("{result:?}"))
    }

    /// On accel's schema, the columns accel adds to `deployables` are filled by its
    /// triggers from what a Cyborg 17 conductor stored: each deployable's host is its
    /// device's, its PCI address its device's control path's.
    async fn check_accels_columns(&self, side: &str) {
        if self.schema != Schema::AccelOnCyborg17 {
            return;
        }
        let db = accel_conductor::Db::connect(&self.urls(side).0)
            .await
            .expect("open");
        let text = |col: &str| match self.backend {
            Backend::Sqlite => col.to_owned(),
            Backend::MariaDb => format!("CAST({col} AS CHAR(255))"),
        };
        let sql = format!(
            "SELECT {}, {}, {}, {} FROM deployables d \
             JOIN devices v ON v.id = d.device_id \
             LEFT JOIN controlpath_ids c ON c.device_id = v.id",
            text("d.hostname"),
            text("v.hostname"),
            text("d.control_path_id"),
            text("c.cpid_info"),
        );
        // (the deployable's host, its device's, its PCI address, the control path's info)
        type Filled = (Option<String>, String, Option<String>, Option<String>);
        let rows: Vec<Filled> = sqlx::query_as(&sql)
            .fetch_all(db.pool())
            .await
            .expect("deployables");
        db.close().await;
        for (host, device_host, path, info) in rows {
            assert_eq!(host.as_deref(), Some(device_host.as_str()), "{side}");
            let info: Value = serde_json::from_str(&info.expect("a control path")).expect("JSON");
            let address = format!(
                "{}:{}:{}.{}",
                info["domain"].as_str().expect("domain"),
                info["bus"].as_str().expect("bus"),
                info["device"].as_str().expect("device"),
                info["function"].as_str().expect("function"),
            );
            assert_eq!(path, Some(address), "{side}");
        }
    }

    async fn finish(self) {
        if self.backend == Backend::MariaDb {
            for side in ["theirs", "ours"] {
                mysql_execute(
                    &env("VERSO_TEST_MYSQL_URL"),
                    &format!("DROP DATABASE {}", self.database(side)),
                );
            }
        }
        delete_tree(&self.placement, &self.root, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reports_leave_database_and_placement_as_cyborgs_own_conductor_does() {
    reports_leave_database_and_placement_as_cyborgs_own_conductor_does(
        Backend::Sqlite,
        Schema::Cyborg17,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_reports_leave_database_and_placement_as_cyborgs_own_conductor_does() {
    reports_leave_database_and_placement_as_cyborgs_own_conductor_does(
        Backend::MariaDb,
        Schema::Cyborg17,
    )
    .await;
}

/// Both conductors on accel release N+1's schema (Cyborg's taken in place on their side,
/// made empty on ours): the same outcomes, and accel's columns kept filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reports_on_accels_schema_leave_it_as_cyborgs_own_conductor_does() {
    reports_leave_database_and_placement_as_cyborgs_own_conductor_does(
        Backend::Sqlite,
        Schema::AccelOnCyborg17,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_reports_on_accels_schema_leave_it_as_cyborgs_own_conductor_does() {
    reports_leave_database_and_placement_as_cyborgs_own_conductor_does(
        Backend::MariaDb,
        Schema::AccelOnCyborg17,
    )
    .await;
}

async fn reports_leave_database_and_placement_as_cyborgs_own_conductor_does(
    backend: Backend,
    schema: Schema,
) {
    let bench = Bench::new(backend, schema).await;
    let reports = cyborg_reports(&bench.host);
    let reports = reports.as_array().expect("a list of reports");
    assert_eq!(reports.len(), 6);
    let devices: Vec<Value> = reports.iter().map(|r| r["devices"].clone()).collect();
    let theirs = bench.theirs(&devices).await;

    // The sequence does what it says on Cyborg's side, or the comparison proves little.
    let devices = |step: &Step| step.rows["devices"].as_array().expect("devices").len();
    // Every report is taken; the device without a resource class is taken back out
    // (Placement cannot offer it), the rest of its report still applied.
    assert!(theirs.iter().all(|s| s.accepted), "{theirs:#?}");
    assert_eq!(devices(&theirs[0]), 2);
    assert_eq!(theirs[0].providers.len(), 3, "{:#?}", theirs[0].providers);
    assert_eq!(
        theirs[0].rows, theirs[1].rows,
        "an unchanged report changed nothing"
    );
    assert_ne!(theirs[1].rows, theirs[2].rows);
    assert_ne!(theirs[1].providers, theirs[2].providers);
    assert_eq!(
        devices(&theirs[3]),
        2,
        "the GPU added, the FPGA gone, the stub NIC kept"
    );
    assert_eq!(
        devices(&theirs[4]),
        1,
        "the GPU kept, the NIC gone, no device without a class"
    );
    assert_eq!(theirs[4].providers.len(), 1, "{:#?}", theirs[4].providers);
    assert_eq!(
        theirs[5].rows["counts"],
        json!({"devices": 0, "controlpath_ids": 0, "deployables": 0, "attributes": 0, "attach_handles": 0})
    );
    assert!(theirs[5].providers.is_empty());

    // This crate, on a database of the declared schema.
    let (conductor, conf) = bench.ours().await;
    for (i, report) in reports.iter().enumerate() {
        let (ours, result) = bench.apply(&conductor, &conf, &report["devices"]).await;
        assert_eq!(
            ours, theirs[i],
            "after report {i} ({}), ours (left, {result}) differs from Cyborg's",
            report["what"]
        );
    }
    bench.finish().await;
}

/// The handle rows of the FPGA in a snapshot: (attach_info, attach_type).
fn fpga_handles(step: &Step) -> Vec<(String, String)> {
    let fpga = step.rows["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["type"] == "FPGA")
        .expect("the FPGA");
    fpga["deployables"][0]["handles"]
        .as_array()
        .expect("handles")
        .iter()
        .map(|h| {
            (
                h["attach_info"].as_str().expect("info").to_owned(),
                h["attach_type"].as_str().expect("type").to_owned(),
            )
        })
        .collect()
}

/// Where this conductor is not Cyborg 17's, on purpose: Cyborg finds "the handle of a
/// deployable with this attach_info" through a database filter that ignores
/// `attach_info` (`attach_handle_get_by_filters` has no such key), so when a report drops
/// or changes a handle that is not the deployable's newest, Cyborg deletes or changes
/// the newest one instead (its next report then churns again, and the newest handle may
/// be in use). This conductor deletes and changes the handle the report names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_dropped_or_changed_handle_is_the_one_the_report_names() {
    a_dropped_or_changed_handle_is_the_one_the_report_names(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_a_dropped_or_changed_handle_is_the_one_the_report_names() {
    a_dropped_or_changed_handle_is_the_one_the_report_names(Backend::MariaDb).await;
}

async fn a_dropped_or_changed_handle_is_the_one_the_report_names(backend: Backend) {
    let bench = Bench::new(backend, Schema::Cyborg17).await;
    let reports = cyborg_reports(&bench.host);
    let first = reports[0]["devices"].clone();
    // The FPGA's oldest handle dropped, its second oldest made a PCI handle.
    let mut second = first.clone();
    let fpga = second
        .as_array_mut()
        .expect("devices")
        .iter_mut()
        .find(|d| d["cyborg_object.data"]["type"] == "FPGA")
        .expect("the FPGA");
    let handles = fpga["cyborg_object.data"]["deployable_list"][0]["cyborg_object.data"]
        ["attach_handle_list"]
        .as_array_mut()
        .expect("handles");
    let dropped = handles.remove(0)["cyborg_object.data"]["attach_info"]
        .as_str()
        .expect("info")
        .to_owned();
    handles[0]["cyborg_object.data"]["attach_type"] = json!("PCI");
    let changed = handles[0]["cyborg_object.data"]["attach_info"]
        .as_str()
        .expect("info")
        .to_owned();
    let newest = handles
        .last()
        .and_then(|h| h["cyborg_object.data"]["attach_info"].as_str())
        .expect("info")
        .to_owned();

    let theirs = bench.theirs(&[first.clone(), second.clone()]).await;
    let (conductor, conf) = bench.ours().await;
    let (ours_first, _) = bench.apply(&conductor, &conf, &first).await;
    assert_eq!(ours_first, theirs[0]);
    let (ours, result) = bench.apply(&conductor, &conf, &second).await;
    assert!(ours.accepted && theirs[1].accepted, "{result}");

    let type_of = |handles: &[(String, String)], info: &str| {
        handles
            .iter()
            .find(|(i, _)| i == info)
            .map(|(_, t)| t.clone())
    };
    // Cyborg 17: the dropped handle is still there and the newest is gone, and the PCI
    // type went to the newest handle left, not the one the report changed.
    let cyborgs = fpga_handles(&theirs[1]);
    assert_eq!(type_of(&cyborgs, &dropped).as_deref(), Some("TEST_PCI"));
    assert_eq!(type_of(&cyborgs, &newest), None);
    assert_eq!(type_of(&cyborgs, &changed).as_deref(), Some("TEST_PCI"));
    let pci: Vec<&(String, String)> = cyborgs.iter().filter(|(_, t)| t == "PCI").collect();
    assert_eq!(pci.len(), 1, "{cyborgs:?}");
    // Ours: exactly what the report says.
    let handles = fpga_handles(&ours);
    assert_eq!(handles.len(), 15);
    assert_eq!(type_of(&handles, &dropped), None);
    assert_eq!(type_of(&handles, &newest).as_deref(), Some("TEST_PCI"));
    assert_eq!(type_of(&handles, &changed).as_deref(), Some("PCI"));
    // Nothing else differs.
    assert_eq!(ours.providers, theirs[1].providers);
    assert_eq!(ours.rows["counts"], theirs[1].rows["counts"]);
    bench.finish().await;
}
