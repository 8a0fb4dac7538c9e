//! accel-cyborg17 against the real thing: the installed openstack-cyborg 17.0.0 (in the
//! test virtualenv, `requirements-test.txt`) is asked for its contracts by
//! `python/cyborg_contracts.py`, and every one must equal what this crate declares:
//! each class's OVO fingerprint (computed by oslo.versionedobjects over Cyborg's own
//! registry) and namespaces, and each RPC method's name, version and arguments, the
//! topics and the control exchange.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_cyborg17::objects::{self, NAMESPACE, SERIAL_NAMESPACE};
use accel_cyborg17::rpc::{self, AgentApi, ConductorApi};
use accel_cyborg17::testing::python;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use verso::fingerprint::{fingerprint, ovo_hashed_text};
use verso_rpc::RpcApi;

/// What the installed Cyborg declares, read once.
fn cyborg() -> &'static Value {
    static CONTRACTS: OnceLock<Value> = OnceLock::new();
    CONTRACTS.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/cyborg_contracts.py");
        let out = Command::new(python())
            .arg(&script)
            .output()
            .expect("the test Python runs");
        assert!(
            out.status.success(),
            "{} failed (is openstack-cyborg installed in the test venv?):\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("the script prints JSON")
    })
}

#[test]
fn the_installed_cyborg_is_the_pinned_release() {
    assert_eq!(cyborg()["version"], "17.0.0");
}

#[test]
fn every_class_has_cyborgs_fingerprint() {
    let registry = objects::registry();
    let ours: BTreeMap<&str, &verso::ObjectSchema> =
        registry.schemas().map(|s| (s.name, s)).collect();
    let theirs = cyborg()["objects"].as_object().expect("objects");
    assert_eq!(
        ours.keys().copied().collect::<BTreeSet<_>>(),
        theirs.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        "the registered classes differ from Cyborg's"
    );
    let mut wrong = Vec::new();
    for (name, schema) in &ours {
        let expected = &theirs[*name];
        if fingerprint(schema) != expected["fingerprint"] {
            wrong.push(format!(
                "{name}: ours {}\n  text ours:   {}\n  text Cyborg: {}",
                fingerprint(schema),
                ovo_hashed_text(schema),
                expected["text"]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "fingerprints differ:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_class_is_in_cyborgs_namespaces_and_has_no_remotable_method() {
    for (name, c) in cyborg()["objects"].as_object().expect("objects") {
        assert_eq!(c["project_namespace"], NAMESPACE, "{name}");
        assert_eq!(c["serial_namespace"], SERIAL_NAMESPACE, "{name}");
        assert_eq!(c["remotable"], serde_json::json!([]), "{name}");
    }
    for schema in objects::registry().schemas() {
        assert_eq!(schema.namespace, NAMESPACE, "{}", schema.name);
        assert_eq!(
            schema.primitive_keys.serial_namespace(),
            SERIAL_NAMESPACE,
            "{}",
            schema.name
        );
        assert!(schema.methods.is_empty(), "{}", schema.name);
    }
}

/// An API's methods as `name -> sorted argument names`, with its version.
fn declared<A: RpcApi>() -> (String, BTreeMap<String, Vec<String>>) {
    let methods = A::methods()
        .into_iter()
        .map(|m| {
            assert_eq!(m.since, A::VERSION, "{} is as old as the API", m.name);
            assert!(
                m.args.iter().all(|a| a.is_required()),
                "Cyborg's {} takes every argument",
                m.name
            );
            let mut args: Vec<String> = m.args.iter().map(|a| a.name.clone()).collect();
            args.sort();
            (m.name.clone(), args)
        })
        .collect();
    (A::VERSION.to_string(), methods)
}

fn cyborgs(api: &str) -> (String, BTreeMap<String, Vec<String>>) {
    let api = &cyborg()[api];
    let methods = serde_json::from_value(api["methods"].clone()).expect("methods");
    (
        api["version"].as_str().expect("version").to_owned(),
        methods,
    )
}

#[test]
fn the_conductor_api_is_cyborgs() {
    assert_eq!(declared::<ConductorApi>(), cyborgs("conductor"));
    assert_eq!(cyborg()["conductor"]["topic"], rpc::CONDUCTOR_TOPIC);
}

#[test]
fn the_agent_api_is_cyborgs() {
    assert_eq!(declared::<AgentApi>(), cyborgs("agent"));
    assert_eq!(cyborg()["agent"]["topic"], rpc::AGENT_TOPIC);
}

#[test]
fn the_control_exchange_is_cyborgs() {
    assert_eq!(cyborg()["exchange"], rpc::CONTROL_EXCHANGE);
}
