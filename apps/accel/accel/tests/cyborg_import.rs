//! `accel db import-cyborg`: a real Cyborg 17 database, made and filled by Cyborg's own
//! code (its schema by `create_schema` on SQLite and by `cyborg-dbsync upgrade`, its
//! alembic migrations, on MariaDB; its conductor's `report_data` of the fake driver on
//! two hosts and of an SR-IOV NIC whose virtual functions are deployables of their own,
//! with the providers in the real Placement, three device profiles, their requests,
//! three binds (one to a virtual function), a device in maintenance), taken over by
//! accel: every device,
//! deployable, attach handle, attribute, profile and request is in accel's database
//! with its UUID and fields, the requests bound to the same handles, so accel's own
//! unbind and bind work on them. A dry run writes nothing; a second run changes
//! nothing; an accel database holding other rows, and a database at another Cyborg
//! schema revision, are refused with nothing written.
//!
//! Uses `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL`, `VERSO_TEST_PLACEMENT_URL`,
//! `VERSO_TEST_POSTGRES_URL` and `VERSO_TEST_MYSQL_URL` (scripts/test.sh sets them).
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

mod support;

use accel_conductor::db::{rp_uuid, Db, ListFilter, ReportedDeployable, ReportedDevice};
use accel_conductor::lifecycle::ArqState;
use accel_cyborg17::testing::{
    cyborg_conductor_config, cyborg_conductor_config_on, cyborg_conductor_schema,
    cyborg_dbsync_upgrade, cyborg_dump, cyborg_fill, mysql_execute,
};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

/// `accel db import-cyborg --from <from>` on accel's database `db_url`.
fn import(db_url: &str, from: &str, dry_run: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_accel"));
    cmd.args(["--set", &format!("database.url={db_url}")])
        .args(["db", "import-cyborg", "--from", from]);
    if dry_run {
        cmd.arg("--dry-run");
    }
    cmd.output().expect("accel db import-cyborg runs")
}

/// `accel db sync` pointed at Cyborg 17's own database (`cyborg_url` as accel names it),
/// as an operator moving a running Cyborg to accel does: the database is taken in place
/// (accel's additions only), Cyborg's own objects still read every row as before
/// (`dump`, read back from `conf`), accel reads the same inventory, profiles and requests
/// an import would have given it, and its reports and binds work on them.
async fn db_sync_takes_cyborgs_database_in_place(cyborg_url: &str, conf: &Path, dump: &Value) {
    let sync = || {
        Command::new(env!("CARGO_BIN_EXE_accel"))
            .args(["--set", &format!("database.url={cyborg_url}")])
            .args(["db", "sync"])
            .output()
            .expect("accel db sync runs")
    };
    let out = sync();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(
            "took OpenStack Cyborg 17's database in place: applied accel's additions [101, 102]; the deployment is at release N (Cyborg 17)"
        ),
        "{}",
        text(&out)
    );
    assert_eq!(
        &cyborg_dump(conf),
        dump,
        "Cyborg's objects read otherwise after accel db sync"
    );
    let out = sync();
    assert!(
        out.status.success() && text(&out).contains("database is up to date"),
        "{}",
        text(&out)
    );
    let db = Db::connect(cyborg_url).await.expect("Cyborg's database");
    let want = as_accel_holds_it(dump.clone());
    assert_eq!(
        accel_view(&db).await,
        want,
        "accel reads another inventory than Cyborg holds"
    );
    // An import into a database taken in place (of itself, here) finds Cyborg's rows
    // already there, as they are: nothing written.
    let out = import(cyborg_url, cyborg_url, false);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("already imported, nothing written"),
        "{}",
        text(&out)
    );
    assert_eq!(accel_view(&db).await, want, "an import of itself wrote");
    works_on(&db, &want, dump).await;
    db.close().await;
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A Cyborg conductor configuration (for the fill and dump scripts) on `connection`.
fn cyborg_conf(dir: &Path, connection: Option<&str>) -> std::path::PathBuf {
    let path = dir.join("cyborg.conf");
    let log = dir.join("cyborg.log");
    let keystone = support::env("VERSO_TEST_KEYSTONE_URL");
    let conf = match connection {
        None => cyborg_conductor_config(
            "cyborg-import",
            &dir.join("cyborg.sqlite"),
            &keystone,
            "accel",
            "verso-accel",
            &log,
        ),
        Some(c) => {
            cyborg_conductor_config_on("cyborg-import", c, &keystone, "accel", "verso-accel", &log)
        }
    };
    std::fs::write(&path, conf).expect("write cyborg.conf");
    path
}

/// accel's database as the dump's shape: `{devices, profiles, arqs}`, each sorted by
/// UUID, with the fields Cyborg's objects show.
async fn accel_view(db: &Db) -> Value {
    let all = ListFilter::default();
    let deployables = db.deployables(&all).await.expect("deployables");
    let handles = db.attach_handles(None).await.expect("handles");
    let paths = db.control_paths(None).await.expect("control paths");
    // Cyborg's `rp_uuid` column as stored (the rows' `rp_uuid` is the name's, computed).
    let stored_rp: std::collections::BTreeMap<String, Option<String>> =
        accel_conductor::testing::stored_providers(db)
            .await
            .into_iter()
            .map(|(_, uuid, rp)| (uuid, rp))
            .collect();
    let path_uuid = |id: Option<i64>| {
        paths
            .iter()
            .find(|c| Some(c.id) == id)
            .map(|c| c.uuid.clone())
    };
    let mut devices = Vec::new();
    for d in db.devices(&all).await.expect("devices") {
        let mut deps: Vec<Value> = Vec::new();
        let mut control_path_id = None;
        for dep in deployables.iter().filter(|dep| dep.device_id == d.id) {
            control_path_id = Some(dep.control_path_id.clone());
            let mut dep_handles: Vec<Value> = handles
                .iter()
                .filter(|h| h.deployable_id == dep.id)
                .map(|h| {
                    json!({
                        "uuid": h.uuid,
                        "attach_type": h.attach_type,
                        "attach_info": h.attach_info,
                        "in_use": h.in_use,
                        "cpid_uuid": path_uuid(h.cpid_id),
                    })
                })
                .collect();
            dep_handles.sort_by(|a, b| a["uuid"].as_str().cmp(&b["uuid"].as_str()));
            deps.push(json!({
                "uuid": dep.uuid,
                "name": dep.name,
                "num_accelerators": dep.num_accelerators,
                "driver_name": dep.driver_name,
                "rp_uuid": stored_rp[&dep.uuid],
                "attributes": dep.attributes,
                "handles": dep_handles,
            }));
        }
        deps.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        devices.push(json!({
            "uuid": d.uuid,
            "hostname": d.hostname,
            "type": d.device_type,
            "vendor": d.vendor,
            "model": d.model,
            "std_board_info": d.std_board_info,
            "vendor_board_info": d.vendor_board_info,
            "status": if d.maintaining { "maintaining" } else { "enabled" },
            "control_path_id": control_path_id.expect("a deployable per device"),
            "cpid_info": paths.iter().find(|c| c.device_id == d.id).map(|c| c.cpid_info.clone()),
            "cpid_uuid": paths.iter().find(|c| c.device_id == d.id).map(|c| c.uuid.clone()),
            "deployables": deps,
        }));
    }
    let profiles: Vec<Value> = db
        .profiles()
        .await
        .expect("profiles")
        .into_iter()
        .map(|p| {
            json!({
                "uuid": p.uuid,
                "name": p.name,
                "groups": p.groups,
                "description": p.description,
            })
        })
        .collect();
    let arqs: Vec<Value> = db
        .arqs(None)
        .await
        .expect("requests")
        .into_iter()
        .map(|r| {
            json!({
                "uuid": r.uuid,
                "state": r.state.as_str(),
                "device_profile_name": r.device_profile_name,
                "device_profile_group_id": r.device_profile_group_id,
                "hostname": r.hostname,
                "device_rp_uuid": r.device_rp_uuid,
                "instance_uuid": r.instance_uuid,
                "project_id": r.project_id,
                "attach_handle_uuid": r.attach_handle_uuid,
            })
        })
        .collect();
    let sorted = |mut v: Vec<Value>| {
        v.sort_by(|a, b| a["uuid"].as_str().cmp(&b["uuid"].as_str()));
        Value::Array(v)
    };
    json!({ "devices": sorted(devices), "profiles": sorted(profiles), "arqs": sorted(arqs) })
}

/// Cyborg's dump as accel holds it: the control path also as its deployables' PCI
/// address (Cyborg's row is kept as it is).
fn as_accel_holds_it(mut dump: Value) -> Value {
    for d in dump["devices"].as_array_mut().expect("devices") {
        let cpid: Value =
            serde_json::from_str(d["cpid_info"].as_str().expect("cpid_info")).expect("JSON");
        let address = format!(
            "{}:{}:{}.{}",
            cpid["domain"].as_str().expect("domain"),
            cpid["bus"].as_str().expect("bus"),
            cpid["device"].as_str().expect("device"),
            cpid["function"].as_str().expect("function"),
        );
        let d = d.as_object_mut().expect("a device");
        d.insert("control_path_id".into(), Value::String(address));
        if let Some(deps) = d.get_mut("deployables").and_then(Value::as_array_mut) {
            deps.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        }
    }
    dump
}

/// What the fill made, checked on Cyborg's side first so the comparison means
/// something: an FPGA with 16 handles on each host, and on the first an SR-IOV NIC
/// whose two virtual functions are deployables of their own (one handle each, their
/// own attributes and providers); three bound requests holding in-use handles (one of
/// them on the NIC's second virtual function), one device in maintenance.
fn check_filled(dump: &Value, hosts: &[&str]) {
    let devices = dump["devices"].as_array().expect("devices");
    let mut on: Vec<(&str, &str)> = devices
        .iter()
        .map(|d| {
            (
                d["hostname"].as_str().expect("host"),
                d["type"].as_str().expect("type"),
            )
        })
        .collect();
    on.sort();
    let mut want: Vec<(&str, &str)> = hosts.iter().map(|h| (*h, "FPGA")).collect();
    want.push((hosts[0], "NIC"));
    want.sort();
    assert_eq!(on, want, "{dump:#}");
    for d in devices {
        let deps = d["deployables"].as_array().expect("deployables");
        let handles: Vec<usize> = deps
            .iter()
            .map(|dep| dep["handles"].as_array().expect("handles").len())
            .collect();
        match d["type"].as_str() {
            Some("NIC") => assert_eq!(handles, [1, 1], "{d:#}"),
            _ => assert_eq!(handles, [16], "{d:#}"),
        }
        for dep in deps {
            assert_eq!(
                dep["rp_uuid"],
                json!(rp_uuid(dep["name"].as_str().expect("name")))
            );
        }
    }
    let bound: Vec<&Value> = dump["arqs"]
        .as_array()
        .expect("arqs")
        .iter()
        .filter(|a| a["state"] == "Bound")
        .collect();
    assert_eq!(bound.len(), 3, "{dump:#}");
    assert!(bound
        .iter()
        .all(|a| a["attach_handle_uuid"].is_string() && a["project_id"].is_string()));
    let nic = devices
        .iter()
        .find(|d| d["type"] == "NIC")
        .expect("the NIC");
    let vf2 = nic["deployables"]
        .as_array()
        .expect("deployables")
        .iter()
        .find(|dep| {
            dep["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("_nic_vf2"))
        })
        .expect("the second virtual function");
    assert!(
        bound.iter().any(|a| a["device_rp_uuid"] == vf2["rp_uuid"]
            && a["attach_handle_uuid"] == vf2["handles"][0]["uuid"]),
        "no request bound to the NIC's second virtual function: {dump:#}"
    );
    assert_eq!(dump["arqs"].as_array().expect("arqs").len(), 4);
    assert_eq!(
        devices
            .iter()
            .filter(|d| d["status"] == "maintaining")
            .count(),
        1
    );
}

/// The import of `from` (whose dump is `dump`) into the empty accel database `db_url`
/// (given accel's schema first): dry run, import, second run, and accel's own unbind and
/// bind on what came over.
/// The apparent version accel's version record in `db` holds, if there is one.
async fn apparent(db: &Db) -> Option<u32> {
    use verso_upgrade::store::VersionStore;
    accel_conductor::DbVersionStore::new(db.clone(), "accel")
        .load()
        .await
        .expect("the version record reads")
        .map(|r| r.apparent)
}

async fn take_over(db_url: &str, from: &str, dump: &Value) -> Db {
    let db = Db::connect(db_url).await.expect("accel's database");
    db.migrate().await.expect("migrate");

    let out = import(db_url, from, true);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("would import (dry run, nothing kept) 3 devices on 2 hosts (34 attach handles, 8 attributes), 3 device profiles, 4 accelerator requests"),
        "{}",
        text(&out)
    );
    let empty = accel_view(&db).await;
    assert_eq!(empty["devices"], json!([]), "a dry run wrote");
    assert_eq!(empty["arqs"], json!([]), "a dry run wrote");
    assert!(!db.starts_at_release_n().await.expect("reads"));

    let out = import(db_url, from, false);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("imported 3 devices on 2 hosts"),
        "{}",
        text(&out)
    );
    // Cyborg's hosts run release N: the deployment starts there (Cyborg's rows, no
    // accel version record), though accel made this database.
    assert_eq!(apparent(&db).await, None);
    assert!(db.starts_at_release_n().await.expect("reads"));
    let want = as_accel_holds_it(dump.clone());
    assert_eq!(
        accel_view(&db).await,
        want,
        "accel holds another inventory than Cyborg did"
    );

    let out = import(db_url, from, false);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("already imported, nothing written"),
        "{}",
        text(&out)
    );
    assert_eq!(
        accel_view(&db).await,
        want,
        "a second import changed something"
    );
    works_on(&db, &want, dump).await;
    db
}

/// accel's conductor works on `db`, which holds what Cyborg held (`want`, the `dump` as
/// accel holds it): each host's report of that inventory finds every row as it is, a
/// bound request unbinds, an unbound one binds.
async fn works_on(db: &Db, want: &Value, dump: &Value) {
    // Each host's Cyborg agent reports next to accel's conductor: the same inventory
    // finds every imported row as it is (nothing updated, no handle replaced).
    let mut reports: std::collections::BTreeMap<String, Vec<ReportedDevice>> =
        std::collections::BTreeMap::new();
    for device in want["devices"].as_array().expect("devices") {
        let deps = device["deployables"].as_array().expect("deployables");
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let handles_of = |dep: &Value| -> Vec<(String, String)> {
            dep["handles"]
                .as_array()
                .expect("handles")
                .iter()
                .map(|h| {
                    (
                        text(&h["attach_type"]).expect("type"),
                        text(&h["attach_info"]).expect("info"),
                    )
                })
                .collect()
        };
        let row = ReportedDevice {
            control_path_id: text(&device["control_path_id"]).expect("address"),
            device_type: text(&device["type"]).expect("type"),
            vendor: text(&device["vendor"]).expect("vendor"),
            model: text(&device["model"]).expect("model"),
            std_board_info: text(&device["std_board_info"]),
            vendor_board_info: text(&device["vendor_board_info"]),
            ..ReportedDevice::default()
        }
        .with_deployables(
            deps.iter()
                .map(|dep| ReportedDeployable {
                    name: text(&dep["name"]).expect("name"),
                    driver_name: text(&dep["driver_name"]),
                    handles: handles_of(dep),
                    attributes: serde_json::from_value(dep["attributes"].clone())
                        .expect("attributes"),
                })
                .collect(),
        );
        let host = device["hostname"].as_str().expect("host");
        reports.entry(host.to_owned()).or_default().push(row);
    }
    for (host, rows) in &reports {
        let outcome = db.report(host, rows).await.expect("report");
        assert_eq!(
            (
                outcome.unchanged,
                outcome.updated.len(),
                outcome.added.len()
            ),
            (rows.len(), 0, 0),
            "{host}'s next report changed imported rows: {outcome:?}"
        );
    }
    assert_eq!(
        accel_view(db).await,
        *want,
        "a report changed what was taken over"
    );

    // accel's lifecycle works on the requests Cyborg made: a bound one unbinds and
    // frees Cyborg's handle; the unbound one binds to the named provider of a host.
    let arqs = dump["arqs"].as_array().expect("arqs");
    let bound = arqs
        .iter()
        .find(|a| a["state"] == "Bound")
        .expect("a bound request");
    let handle = bound["attach_handle_uuid"].as_str().expect("its handle");
    let host = bound["hostname"].as_str().expect("its host");
    let unbound = db
        .unbind(bound["uuid"].as_str().expect("uuid"))
        .await
        .expect("accel unbinds Cyborg's bound request");
    assert_eq!(unbound.state, ArqState::Unbound);
    let handles = db.attach_handles(Some(host)).await.expect("handles");
    let freed = handles
        .iter()
        .find(|h| h.uuid == handle)
        .expect("the handle");
    assert!(!freed.in_use, "the handle Cyborg allocated was not freed");
    let initial = arqs
        .iter()
        .find(|a| a["state"] == "Initial")
        .expect("an unbound request");
    let enabled = dump["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["status"] == "enabled" && d["type"] == "FPGA")
        .expect("an FPGA in service");
    let rp = enabled["deployables"][0]["rp_uuid"].as_str().expect("rp");
    let host = enabled["hostname"].as_str().expect("host");
    let instance = uuid::Uuid::new_v4().to_string();
    let bound = db
        .bind(
            initial["uuid"].as_str().expect("uuid"),
            host,
            &instance,
            Some(rp),
        )
        .await
        .expect("accel binds Cyborg's request to Cyborg's provider");
    assert_eq!(bound.state, ArqState::Bound);
    let in_use: Vec<String> = db
        .attach_handles(Some(host))
        .await
        .expect("handles")
        .into_iter()
        .filter(|h| h.in_use)
        .map(|h| h.uuid)
        .collect();
    assert!(
        in_use.contains(bound.attach_handle_uuid.as_ref().expect("a handle")),
        "{bound:?} {in_use:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_17_database_on_sqlite_is_taken_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let hosts = [format!("cy-imp-a-{suffix}"), format!("cy-imp-b-{suffix}")];
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let placement = support::placement();
    let _nodes = [
        support::ComputeNode::create(&placement, hosts[0]).await,
        support::ComputeNode::create(&placement, hosts[1]).await,
    ];
    let conf = cyborg_conf(dir.path(), None);
    cyborg_conductor_schema(&conf);
    cyborg_fill(&conf, &hosts);
    let dump = cyborg_dump(&conf);
    check_filled(&dump, &hosts);
    let from = format!("sqlite://{}", dir.path().join("cyborg.sqlite").display());
    let db_url = format!("sqlite://{}", dir.path().join("accel.db").display());
    let db = take_over(&db_url, &from, &dump).await;
    let before = accel_view(&db).await;

    // Another Cyborg database (other UUIDs) into the same accel database: refused,
    // naming a row accel holds, and nothing written.
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other_conf = cyborg_conf(other_dir.path(), None);
    cyborg_conductor_schema(&other_conf);
    cyborg_fill(&other_conf, &hosts);
    let other = format!(
        "sqlite://{}",
        other_dir.path().join("cyborg.sqlite").display()
    );
    let out = import(&db_url, &other, false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("accel's database already holds device"),
        "{}",
        text(&out)
    );
    assert_eq!(accel_view(&db).await, before, "a refused import wrote");

    // A database at another schema revision: refused before anything is read.
    let stale = other_dir.path().join("cyborg.sqlite");
    let stale_db = Db::connect(&format!("sqlite://{}", stale.display()))
        .await
        .expect("open Cyborg's SQLite file");
    sqlx::query("UPDATE alembic_version SET version_num = 'a35b4295a0e5'")
        .execute(stale_db.pool())
        .await
        .expect("change the revision");
    stale_db.close().await;
    let out = Command::new(env!("CARGO_BIN_EXE_accel"))
        .args(["--set", &format!("database.url={other}")])
        .args(["db", "sync"])
        .output()
        .expect("accel db sync runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("alembic revision a35b4295a0e5, not Cyborg 17's")
            && text(&out).contains("cyborg-dbsync upgrade"),
        "{}",
        text(&out)
    );
    let fresh = format!("sqlite://{}", other_dir.path().join("accel.db").display());
    let out = import(&fresh, &other, false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("not at Cyborg 17's schema revision b47c8f2d1e3a (found a35b4295a0e5)"),
        "{}",
        text(&out)
    );
    // A database that is not Cyborg's at all, and a URL of no database it reads. (accel's
    // own database is Cyborg 17's schema with accel's additions, so a source it reads.)
    let foreign = format!("sqlite://{}", other_dir.path().join("foreign.db").display());
    let foreign_db = Db::connect(&foreign).await.expect("a new SQLite file");
    sqlx::query("CREATE TABLE inventory (id INTEGER PRIMARY KEY)")
        .execute(foreign_db.pool())
        .await
        .expect("a table of something else");
    foreign_db.close().await;
    let out = import(&fresh, &foreign, false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("found no alembic_version"),
        "{}",
        text(&out)
    );
    let out = import(&fresh, "mssql://cyborg@db/cyborg", false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("unsupported Cyborg database URL"),
        "{}",
        text(&out)
    );

    // A target an accel conductor started on at release N+1 (its version record says
    // so): Cyborg's hosts would be refused as older, so the import is, writing nothing.
    let started = format!("sqlite://{}", other_dir.path().join("started.db").display());
    let started_db = Db::connect(&started).await.expect("a new SQLite file");
    started_db.migrate().await.expect("accel's schema");
    {
        use verso_upgrade::store::{PersistedState, VersionStore};
        accel_conductor::DbVersionStore::new(started_db.clone(), "accel")
            .save(&PersistedState {
                format: 1,
                component: "accel".into(),
                apparent: 2,
                finalizing: None,
            })
            .await
            .expect("the record of a conductor at release N+1");
    }
    let out = import(&started, &from, false);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("at apparent version 2 (finalizing: false), past release N"),
        "{}",
        text(&out)
    );
    assert_eq!(
        accel_view(&started_db).await["devices"],
        json!([]),
        "a refused import wrote"
    );
    assert_eq!(apparent(&started_db).await, Some(2));
    started_db.close().await;

    // Or no import at all: Cyborg's own database taken in place.
    db_sync_takes_cyborgs_database_in_place(&from, &conf, &dump).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_17_database_on_mariadb_is_taken_over_into_postgresql() {
    taken_over_from_mariadb(accel_conductor::testing::postgres_database().await).await;
}

/// accel's own database on MariaDB, the server Cyborg's was on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cyborg_17_database_on_mariadb_is_taken_over_into_mariadb() {
    taken_over_from_mariadb(accel_conductor::testing::mysql_database().await).await;
}

/// A Cyborg 17 database on MariaDB, made by `cyborg-dbsync` and filled by Cyborg's
/// conductor code, imported into accel's empty database at `db_url`.
async fn taken_over_from_mariadb(db_url: String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let hosts = [format!("cy-imp-c-{suffix}"), format!("cy-imp-d-{suffix}")];
    let hosts: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let placement = support::placement();
    let _nodes = [
        support::ComputeNode::create(&placement, hosts[0]).await,
        support::ComputeNode::create(&placement, hosts[1]).await,
    ];
    // Cyborg's database as a deployment has it: MariaDB, made by cyborg-dbsync.
    let server = support::env("VERSO_TEST_MYSQL_URL");
    let name = format!("cyborg_test_{suffix}");
    mysql_execute(
        &server,
        &format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"),
    );
    let base = server.trim_end_matches('/');
    let rest = base.strip_prefix("mysql://").expect("a mysql:// URL");
    let connection = format!("mysql+pymysql://{rest}/{name}?charset=utf8");
    let conf = cyborg_conf(dir.path(), Some(&connection));
    cyborg_dbsync_upgrade(&conf);
    cyborg_fill(&conf, &hosts);
    let dump = cyborg_dump(&conf);
    check_filled(&dump, &hosts);

    // Imported as the operator pastes Cyborg's connection.
    let db = take_over(&db_url, &connection, &dump).await;
    db.close().await;
    // Or no import at all: Cyborg's own database taken in place.
    db_sync_takes_cyborgs_database_in_place(&format!("mysql://{rest}/{name}"), &conf, &dump).await;
    mysql_execute(&server, &format!("DROP DATABASE {name}"));
}
