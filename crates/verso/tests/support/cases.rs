//! The golden-vector case runner shared by `conformance.rs` and `differential.rs`: reads
//! case files in the format of `tests/vectors/README.md` and runs one case against the
//! cyborg example model, in the serial namespace the case file names (`versioned_object`,
//! or `cyborg_object`: the same model declared in that family, `cyborg_object_model.rs`).
//!
//! Included by each test with `#[path = "support/cases.rs"] mod cases;`.

#![allow(dead_code)]

#[path = "cyborg_object_model.rs"]
pub mod cyborg_object_model;

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use verso::primitive::DEFAULT_SERIAL_NAMESPACE;
use verso::{AnyObject, Registry, Version, VersionManifest};

/// The model's registry in `serial_namespace` (a case file's `serial_namespace`).
pub fn registry_for(serial_namespace: &str) -> Result<Registry, String> {
    match serial_namespace {
        DEFAULT_SERIAL_NAMESPACE => Ok(cyborg_model::registry()),
        "cyborg_object" => Ok(cyborg_object_model::registry()),
        other => Err(format!("no model in serial namespace {other}")),
    }
}

/// The `*.json` files of `dir`, sorted.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read vector directory {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// The `cases` of a case file.
pub fn load_cases(file: &Path) -> Result<Vec<Value>, String> {
    load_case_file(file).map(|(_, cases)| cases)
}

/// The serial namespace (`versioned_object` when the file names none) and the `cases`
/// of a case file.
pub fn load_case_file(file: &Path) -> Result<(String, Vec<Value>), String> {
    let doc: Value = std::fs::read_to_string(file)
        .map_err(|e| format!("{}: {e}", file.display()))
        .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("{}: {e}", file.display())))?;
    match doc {
        Value::Object(mut m) => {
            let serial = match m.remove("serial_namespace") {
                None => DEFAULT_SERIAL_NAMESPACE.to_owned(),
                Some(Value::String(s)) => s,
                Some(other) => {
                    return Err(format!(
                        "{}: serial_namespace {other} is not a string",
                        file.display()
                    ))
                }
            };
            match m.remove("cases") {
                Some(Value::Array(cases)) => Ok((serial, cases)),
                _ => Err(format!("{}: no cases", file.display())),
            }
        }
        _ => Err(format!("{}: not a case file", file.display())),
    }
}

/// A case's name, for reports.
pub fn case_name(case: &Value) -> &str {
    case["name"].as_str().unwrap_or("<unnamed>")
}

/// Turns a build spec into the primitive OVO's constructor would have produced: the
/// object is then made by decoding it, which assigns each field through the same
/// coercion as OVO's `setattr` and restores the changed set exactly.
fn spec_to_primitive(reg: &Registry, spec: &Value) -> Result<Value, String> {
    if let Some(p) = spec.get("decode") {
        return Ok(p.clone());
    }
    let class = spec["class"].as_str().ok_or("build spec without class")?;
    let schema = reg
        .schema(class)
        .ok_or_else(|| format!("unknown class {class}"))?;
    let fields = spec["fields"]
        .as_object()
        .ok_or("build spec without fields")?;
    let mut data = Map::new();
    for (name, value) in fields {
        data.insert(name.clone(), field_value(reg, schema, name, value)?);
    }
    let changes = match spec.get("changes") {
        Some(c) => c.clone(),
        None => Value::Array(fields.keys().cloned().map(Value::String).collect()),
    };
    let keys = schema.primitive_keys;
    let mut p = Map::new();
    p.insert(keys.name().into(), class.into());
    p.insert(keys.namespace().into(), schema.namespace.into());
    p.insert(keys.version().into(), schema.version.to_string().into());
    p.insert(keys.data().into(), Value::Object(data));
    p.insert(keys.changes().into(), changes);
    Ok(Value::Object(p))
}

fn field_value(
    reg: &Registry,
    schema: &verso::ObjectSchema,
    name: &str,
    value: &Value,
) -> Result<Value, String> {
    let is_object = schema
        .field(name)
        .is_some_and(|f| f.ty.child_object().is_some());
    match value {
        Value::Array(items) if is_object => Ok(Value::Array(
            items
                .iter()
                .map(|s| spec_to_primitive(reg, s))
                .collect::<Result<_, _>>()?,
        )),
        Value::Object(_) if is_object => spec_to_primitive(reg, value),
        other => Ok(other.clone()),
    }
}

fn apply_step(reg: &Registry, obj: &mut dyn AnyObject, step: &Value) -> Result<(), String> {
    let (kind, arg) = step
        .as_object()
        .and_then(|m| m.iter().next())
        .ok_or("empty step")?;
    let names = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    match kind.as_str() {
        "reset_changes" => {
            let fields = names(arg.get("fields"));
            let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            let recursive = arg
                .get("recursive")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            obj.obj_reset_changes(&fields, recursive);
        }
        "set" => {
            let schema = obj.obj_schema();
            for (name, value) in arg.as_object().ok_or("set takes an object")? {
                let prim = field_value(reg, schema, name, value)?;
                obj.obj_set_field(name, &prim)
                    .map_err(|e| format!("set {name}: {e}"))?;
            }
        }
        "set_defaults" => {
            let fields = names(Some(arg));
            let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
            obj.obj_set_defaults(&fields).map_err(|e| e.to_string())?;
        }
        other => return Err(format!("unknown step kind {other}")),
    }
    Ok(())
}

/// Whether `key` is a primitive's `changes` key, in any serial namespace.
fn is_changes_key(key: &str) -> bool {
    key.ends_with(".changes")
}

/// JSON equality with key order free, numbers compared numerically, and every
/// `<serial>.changes` list compared as a set.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.get(k).is_some_and(|w| {
                        if is_changes_key(k) {
                            sorted(v) == sorted(w)
                        } else {
                            same(v, w)
                        }
                    })
                })
        }
        _ => a == b,
    }
}

/// The path of the first place where `a` and `b` differ, with both values there.
fn first_difference(a: &Value, b: &Value, path: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let here = format!("{path}/{k}");
                match y.get(k) {
                    None => return Some(format!("{here} (missing in actual)")),
                    Some(w) if is_changes_key(k) => {
                        if sorted(v) != sorted(w) {
                            return Some(format!("{here}: {v} vs {w}"));
                        }
                    }
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, here) {
                            return Some(d);
                        }
                    }
                }
            }
            y.keys()
                .find(|k| !x.contains_key(*k))
                .map(|k| format!("{path}/{k} (only in actual)"))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(v, w, format!("{path}/{i}"))),
        _ if same(a, b) => None,
        _ => Some(format!("{path}: {a} vs {b}")),
    }
}

fn sorted(v: &Value) -> Vec<String> {
    let mut s: Vec<String> = v
        .as_array()
        .map(|a| a.iter().map(|x| x.to_string()).collect())
        .unwrap_or_default();
    s.sort();
    s
}

enum Outcome {
    Value(Value),
    Error(verso::Error),
}

fn check(expect: &Value, key: &str, outcome: Outcome) -> Result<(), String> {
    match (outcome, expect.get("error")) {
        (Outcome::Error(e), Some(want)) => {
            let want = want["exception"].as_str().unwrap_or_default();
            if e.ovo_exception() == want {
                Ok(())
            } else {
                Err(format!("expected {want}, got {} ({e})", e.ovo_exception()))
            }
        }
        (Outcome::Error(e), None) => Err(format!("unexpected error {} ({e})", e.ovo_exception())),
        (Outcome::Value(v), Some(want)) => Err(format!("expected {want}, got {v}")),
        (Outcome::Value(v), None) => {
            let want = expect
                .get(key)
                .ok_or_else(|| format!("expect has neither error nor {key}"))?;
            if same(&v, want) {
                Ok(())
            } else {
                let at = first_difference(want, &v, String::new()).unwrap_or_default();
                Err(format!(
                    "differs at {at}\n  expected {want}\n  actual   {v}"
                ))
            }
        }
    }
}

/// Decodes `bytes` with the typed streaming decoder of the model class `name`, with
/// `reg`'s classes as the ones contained objects of another class are looked up in.
fn decode_slice_as(
    reg: &Registry,
    name: &str,
    bytes: &[u8],
) -> Option<verso::Result<Box<dyn AnyObject>>> {
    use cyborg_model::{
        AttachHandle, AttachHandleList, Deployable, DeployableList, Device, DeviceList,
    };
    use verso::VersionedObject;
    fn boxed<O: VersionedObject>(
        reg: &Registry,
        bytes: &[u8],
    ) -> verso::Result<Box<dyn AnyObject>> {
        reg.from_primitive_slice_as::<O>(bytes)
            .map(|o| Box::new(o) as Box<dyn AnyObject>)
    }
    if reg.serial_namespaces().any(|s| s == "cyborg_object") {
        use cyborg_object_model as m;
        return Some(match name {
            "Device" => boxed::<m::Device>(reg, bytes),
            "Deployable" => boxed::<m::Deployable>(reg, bytes),
            "AttachHandle" => boxed::<m::AttachHandle>(reg, bytes),
            "DeviceList" => boxed::<m::DeviceList>(reg, bytes),
            "AttachHandleList" => boxed::<m::AttachHandleList>(reg, bytes),
            "DeployableList" => boxed::<m::DeployableList>(reg, bytes),
            _ => return None,
        });
    }
    Some(match name {
        "Device" => boxed::<Device>(reg, bytes),
        "Deployable" => boxed::<Deployable>(reg, bytes),
        "AttachHandle" => boxed::<AttachHandle>(reg, bytes),
        "DeviceList" => boxed::<DeviceList>(reg, bytes),
        "AttachHandleList" => boxed::<AttachHandleList>(reg, bytes),
        "DeployableList" => boxed::<DeployableList>(reg, bytes),
        _ => return None,
    })
}

/// Runs one case: `Ok` when verso does what its `expect` says.
pub fn run_case(reg: &Registry, case: &Value) -> Result<(), String> {
    let expect = case.get("expect").ok_or("case without expect")?;
    match case["op"].as_str() {
        Some("to_primitive") => {
            let built = spec_to_primitive(reg, case.get("object").ok_or("case without object")?)?;
            let mut obj = reg
                .from_primitive(&built)
                .map_err(|e| format!("cannot build object: {e}"))?;
            for step in case
                .get("steps")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                apply_step(reg, obj.as_mut(), step)?;
            }
            let target = match case
                .get("target_version")
                .map(|t| t.as_str().ok_or("target_version is not a string"))
            {
                Some(t) => match t?.parse::<Version>() {
                    Ok(v) => Some(v),
                    Err(e) => return check(expect, "primitive", Outcome::Error(e.into())),
                },
                None => None,
            };
            let manifest: Option<VersionManifest> = match case.get("version_manifest") {
                Some(m) => Some(
                    serde_json::from_value(m.clone()).map_err(|e| format!("bad manifest: {e}"))?,
                ),
                None => None,
            };
            let out = match obj.obj_to_primitive(verso::Target::ovo(target, manifest.as_ref())) {
                Ok(p) => Outcome::Value(p),
                Err(e) => Outcome::Error(e),
            };
            check(expect, "primitive", out)?;
            // The direct byte writer must give the same JSON.
            let bytes =
                match obj.obj_to_primitive_bytes(verso::Target::ovo(target, manifest.as_ref())) {
                    Ok(b) => Outcome::Value(
                        serde_json::from_slice(&b)
                            .map_err(|e| format!("byte path wrote bad JSON: {e}"))?,
                    ),
                    Err(e) => Outcome::Error(e),
                };
            check(expect, "primitive", bytes).map_err(|e| format!("byte path: {e}"))
        }
        Some("from_primitive") => {
            match reg.from_primitive(&case["primitive"]) {
                Err(e) => check(expect, "object", Outcome::Error(e))?,
                Ok(obj) => {
                    check(expect, "object", Outcome::Value(obj.obj_describe()))?;
                    let re = obj
                        .obj_to_primitive(verso::Target::Own)
                        .map_err(|e| format!("re-encode: {e}"))?;
                    check(expect, "reencoded", Outcome::Value(re))?;
                }
            }
            // The streaming decoder of the class the primitive names must agree.
            let bytes = serde_json::to_vec(&case["primitive"]).map_err(|e| e.to_string())?;
            // The class the primitive names under the model's keys, else in whichever
            // serial namespace it is written (the decoder then reads it with its own
            // class's keys and refuses it).
            let serial = reg
                .serial_namespaces()
                .next()
                .unwrap_or(DEFAULT_SERIAL_NAMESPACE);
            let by_slice = match case["primitive"].as_object().and_then(|p| {
                p.get(&format!("{serial}.name"))
                    .or_else(|| verso::primitive::name_of(p))
            }) {
                Some(Value::String(name)) => decode_slice_as(reg, name, &bytes),
                _ => None,
            };
            match by_slice {
                None => Ok(()),
                Some(Err(e)) => check(expect, "object", Outcome::Error(e))
                    .map_err(|e| format!("slice decode: {e}")),
                Some(Ok(obj)) => check(expect, "object", Outcome::Value(obj.obj_describe()))
                    .map_err(|e| format!("slice decode: {e}")),
            }
        }
        Some("manifest") => {
            let class = case["class"]
                .as_str()
                .ok_or("manifest case without class")?;
            let m = reg
                .manifest(class)
                .ok_or_else(|| format!("unknown class {class}"))?;
            let v = serde_json::to_value(&m).map_err(|e| e.to_string())?;
            check(expect, "manifest", Outcome::Value(v))
        }
        other => Err(format!("unknown op {other:?}")),
    }
}
