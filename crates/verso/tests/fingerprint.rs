//! Fingerprints against oslo.versionedobjects: for every class of the example model, the
//! hashed text and the fingerprint are OVO's, byte for byte
//! (`tests/vectors/ovo-fingerprints.json`); and contract changes are judged right.
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use verso::fingerprint::{
    assess, changes, fingerprint, ovo_hashed_text, Bump, ContractChange, ObjectContract, Problem,
};
use verso::{
    ArgSchema, FieldType, MethodKind, MethodSchema, ObjectSchema, Version, VersionedObject,
};

fn vectors_file() -> PathBuf {
    let vendored = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/ovo");
    std::env::var_os("VERSO_VECTORS")
        .map_or(vendored, PathBuf::from)
        .join("../ovo-fingerprints.json")
}

fn ovo_objects() -> Vec<Value> {
    let path = vectors_file();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).expect("ovo-fingerprints.json is JSON");
    doc["objects"].as_array().expect("objects array").clone()
}

#[test]
fn every_class_matches_ovo_byte_for_byte() {
    let registry = cyborg_model::registry();
    let objects = ovo_objects();
    assert_eq!(objects.len(), 6, "the vectors hold the six model classes");
    for o in objects {
        let name = o["name"].as_str().expect("name");
        let schema = registry
            .schema(name)
            .unwrap_or_else(|| panic!("{name} is registered"));
        assert_eq!(
            ovo_hashed_text(schema),
            o["hashed_text"].as_str().expect("hashed_text"),
            "hashed text of {name}"
        );
        assert_eq!(
            fingerprint(schema),
            o["fingerprint"].as_str().expect("fingerprint"),
            "fingerprint of {name}"
        );
    }
}

fn device() -> ObjectSchema {
    cyborg_model::Device::schema().clone()
}

fn bumped(mut s: ObjectSchema, v: Version) -> ObjectSchema {
    s.version = v;
    s
}

fn contract(s: &ObjectSchema) -> ObjectContract {
    ObjectContract::from_schema(s)
}

#[test]
fn unchanged_schema_has_no_changes_and_no_problems() {
    let a = assess(&contract(&device()), &contract(&device()));
    assert!(a.unchanged(), "{a:?}");
    assert_eq!(a.step, Some(Bump::None));
}

#[test]
fn retyped_field_needs_a_major_bump() {
    let mut s = device();
    let f = s
        .fields
        .iter_mut()
        .find(|f| f.name == "vendor")
        .expect("vendor");
    f.ty = FieldType::Integer;
    let old = contract(&device());
    assert_ne!(fingerprint(&s), old.fingerprint);

    let same = assess(&old, &contract(&s));
    assert_eq!(
        same.changes,
        vec![ContractChange::FieldRetyped {
            field: "vendor".into(),
            old: "String".into(),
            new: "Integer".into()
        }]
    );
    assert_eq!(same.required, Bump::Major);
    assert_eq!(same.problems, vec![Problem::ChangedWithoutBump]);

    let minor = assess(&old, &contract(&bumped(s.clone(), Version::new(1, 3))));
    assert!(matches!(
        minor.problems.as_slice(),
        [Problem::BumpTooSmall {
            needs: Bump::Major,
            ..
        }]
    ));
    let major = assess(&old, &contract(&bumped(s, Version::new(2, 0))));
    assert!(major.problems.is_empty(), "{major:?}");
}

#[test]
fn added_field_needs_a_minor_bump_and_a_since() {
    let mut s = device();
    let mut f = s.field("hostname").expect("hostname").clone();
    f.name = "rack";
    f.nullable = true;
    s.fields.push(f.clone());
    let old = contract(&device());

    let same = assess(&old, &contract(&s));
    assert!(matches!(same.changes.as_slice(), [ContractChange::FieldAdded(x)] if x.name == "rack"));
    assert_eq!(same.problems, vec![Problem::ChangedWithoutBump]);

    // Bumped but no `since`: a backport to 1.2 would keep sending the field.
    let s13 = bumped(s.clone(), Version::new(1, 3));
    let no_since = assess(&old, &contract(&s13));
    assert_eq!(
        no_since.problems,
        vec![Problem::AddedFieldSince {
            field: "rack".into(),
            since: None
        }]
    );

    let mut good = s13;
    if let Some(x) = good.fields.iter_mut().find(|x| x.name == "rack") {
        x.since = Some(Version::new(1, 3));
    }
    let ok = assess(&old, &contract(&good));
    assert!(ok.problems.is_empty(), "{ok:?}");
    assert_eq!(ok.step, Some(Bump::Minor));
}

#[test]
fn added_remotable_method_changes_the_fingerprint() {
    let mut s = device();
    s.methods.push(MethodSchema {
        name: "refresh",
        kind: MethodKind::Instance,
        args: vec![],
        returns: "()",
    });
    let old = contract(&device());
    assert_ne!(fingerprint(&s), old.fingerprint);
    assert!(ovo_hashed_text(&s).contains(
        "('refresh', ArgSpec(args=['self'], varargs=None, keywords=None, defaults=None))"
    ));
    let c = changes(&old, &contract(&s));
    assert!(matches!(c.as_slice(), [ContractChange::MethodAdded(m)] if m.name == "refresh"));
    assert_eq!(c[0].required_bump(), Bump::Minor);
    let ok = assess(&old, &contract(&bumped(s, Version::new(1, 3))));
    assert!(ok.problems.is_empty(), "{ok:?}");
}

#[test]
fn changed_signature_is_reported_even_when_ovo_cannot_see_it() {
    let old = contract(&device());
    // A new argument: OVO's hash sees it.
    let mut s = device();
    let m = s
        .methods
        .iter_mut()
        .find(|m| m.name == "set_managed")
        .expect("set_managed");
    m.args.push(ArgSchema {
        name: "force",
        ty: "bool",
    });
    assert_ne!(fingerprint(&s), old.fingerprint);
    let c = changes(&old, &contract(&s));
    assert!(matches!(
        c.as_slice(),
        [ContractChange::MethodSignature { old, new }]
            if old.args.len() == 1 && new.args.len() == 2
    ));
    assert_eq!(c[0].required_bump(), Bump::Major);

    // Only the argument's type: OVO's hash does not see it, the contract does.
    let mut s = device();
    let m = s
        .methods
        .iter_mut()
        .find(|m| m.name == "set_managed")
        .expect("set_managed");
    m.args[0].ty = "String";
    assert_eq!(fingerprint(&s), old.fingerprint);
    let a = assess(&old, &contract(&s));
    assert_eq!(a.problems, vec![Problem::ChangedWithoutBump]);
    assert!(
        a.changes[0].to_string().contains("mode: String"),
        "{}",
        a.changes[0]
    );
}

#[test]
fn version_going_backwards_is_a_problem() {
    let old = contract(&device());
    let a = assess(&old, &contract(&bumped(device(), Version::new(1, 1))));
    assert_eq!(
        a.problems,
        vec![Problem::VersionWentBackwards {
            old: Version::new(1, 2),
            new: Version::new(1, 1)
        }]
    );
}

#[test]
fn a_tampered_fingerprint_is_reported() {
    let old = contract(&device());
    let mut edited = old.clone();
    edited.fingerprint = "1.2-00000000000000000000000000000000".into();
    let a = assess(&edited, &old);
    assert!(matches!(
        a.problems.as_slice(),
        [Problem::FingerprintMismatch { .. }]
    ));
}

#[test]
fn child_versions_appended_is_minor_rewritten_is_major() {
    let old = contract(cyborg_model::DeviceList::schema());
    let mut s = cyborg_model::DeviceList::schema().clone();
    s.child_versions
        .push((Version::new(1, 3), Version::new(1, 3)));
    let c = changes(&old, &contract(&s));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].required_bump(), Bump::Minor);
    s.child_versions[0].1 = Version::new(1, 1);
    assert_eq!(changes(&old, &contract(&s))[0].required_bump(), Bump::Major);
}
