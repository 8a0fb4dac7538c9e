//! The quick-start job: build cyborg objects, backport them for an older peer with a
//! version manifest, and say what the peer receives.
//!
//! ```text
//! cargo run -p cyborg-model --example backport [-- Device=1.0 AttachHandle=1.1 ...] [--full]
//! ```
//!
//! Without versions the peer is a Cyborg agent from before `managed_mode`
//! (`AttachHandleList 1.0, AttachHandle 1.1, Device 1.1`). The output is one line per
//! object of the `AttachHandleList`: its version here and as sent, the fields the backport
//! dropped. `--full` adds both primitives (JSON). A class this list does not contain, a
//! version newer than this build's or of another major, or a malformed version is
//! refused (exit 2).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use clap::Parser;
use cyborg_model::{AttachHandle, AttachHandleList, AttachType, Device, DeviceType, ManagedMode};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use verso::{Field, ObjectList, Version, VersionManifest, VersionedObject};

/// Backports an AttachHandleList (two handles, each with its Device) for an older peer
/// and says what changed for each object.
///
/// Without versions the peer knows AttachHandleList 1.0, AttachHandle 1.1, Device 1.1:
/// a Cyborg agent from before Device.managed_mode.
#[derive(Parser, Debug)]
#[command(name = "backport")]
struct Cli {
    /// The peer's versions, e.g. Device=1.0 AttachHandle=1.1 (the classes of an
    /// AttachHandleList: AttachHandleList, AttachHandle, Device).
    #[arg(value_name = "CLASS=VERSION", value_parser = peer_version)]
    peer: Vec<(String, Version)>,
    /// Also prints both primitives in full: at this build's versions and as sent.
    #[arg(long)]
    full: bool,
}

/// Parses `CLASS=VERSION` and checks it against this build: the class must be one an
/// `AttachHandleList` contains, and the version one it can backport to.
fn peer_version(arg: &str) -> Result<(String, Version), String> {
    let ours = AttachHandleList::manifest();
    let known = || {
        ours.iter()
            .map(|(name, v)| format!("{name} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((name, text)) = arg.split_once('=') else {
        return Err("expected CLASS=VERSION, e.g. Device=1.1".into());
    };
    let version: Version = text
        .parse()
        .map_err(|_| format!("'{text}' is not a version; write MAJOR.MINOR, e.g. {name}=1.1"))?;
    let Some(own) = ours.get(name) else {
        return Err(if cyborg_model::registry().schema(name).is_some() {
            format!(
                "an AttachHandleList never contains a {name}, so its version changes nothing; \
                 name one of {}",
                known()
            )
        } else {
            format!(
                "'{name}' is not a class of this model; an AttachHandleList contains {}",
                known()
            )
        });
    };
    if version.major() != own.major() {
        return Err(format!(
            "{name} {version} is another major version than this build's {name} {own}: \
             a backport only goes to an older minor version of the same major ({}.0 to {own})",
            own.major()
        ));
    }
    if version > own {
        return Err(format!(
            "{name} {version} is newer than this build's {name} {own}: nothing can be \
             backported up; a peer that new would backport for this build instead"
        ));
    }
    Ok((name.to_owned(), version))
}

fn device(id: i64, mode: ManagedMode) -> Device {
    Device {
        id: id.into(),
        uuid: uuid::Uuid::from_u128(0x5d5a_3e0b_6b2f_4b9a_9d0c_6d3f_2c1b_0a00 + id as u128).into(),
        r#type: DeviceType::Gpu.into(),
        vendor: "10de".into(),
        model: "A100".into(),
        std_board_info: Field::new(None),
        hostname: "host1".into(),
        vendor_board_info: Field::new(Some("sxm4".into())),
        managed_mode: mode.into(),
        created_at: Field::new(Some(verso::DateTime::now())),
        updated_at: Field::new(None),
        ..Device::blank()
    }
}

fn handles() -> AttachHandleList {
    AttachHandleList::from_objects(
        (1..=2)
            .map(|id| AttachHandle {
                id: id.into(),
                uuid: uuid::Uuid::from_u128(0xa7c1_f0de_0000_4000_8000_0000_0000_0000 + id as u128)
                    .into(),
                deployable_id: 1.into(),
                in_use: false.into(),
                attach_type: AttachType::Pci.into(),
                attach_info: r#"{"bus": "af", "device": "00", "function": "0"}"#.into(),
                device: Field::new(Some(device(id, ManagedMode::Managed))),
                ..AttachHandle::blank()
            })
            .collect(),
    )
}

fn manifest_line(m: &VersionManifest) -> String {
    m.iter()
        .map(|(name, v)| format!("{name} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One object of the tree: where it is, its class, and how the backport changed it.
struct Change {
    path: String,
    name: String,
    ours: String,
    sent: String,
    dropped: Vec<String>,
    /// Fields sent although newer than the version sent, and whether each is an object
    /// field (with a manifest, OVO backports those by the manifest alone and never drops
    /// them by the relationship table).
    kept: Vec<(String, bool)>,
    added: Vec<String>,
    rewritten: Vec<String>,
}

fn object_parts(p: &Value) -> Option<(&str, &str, &Map<String, Value>)> {
    let o = p.as_object()?;
    Some((
        o.get("versioned_object.name")?.as_str()?,
        o.get("versioned_object.version")?.as_str()?,
        o.get("versioned_object.data")?.as_object()?,
    ))
}

/// Walks the primitive at this build's versions and the one sent side by side.
fn compare(ours: &Value, sent: &Value, path: String, out: &mut Vec<Change>) {
    let (Some((name, v_ours, d_ours)), Some((_, v_sent, d_sent))) =
        (object_parts(ours), object_parts(sent))
    else {
        return;
    };
    let mut change = Change {
        path: path.clone(),
        name: name.to_owned(),
        ours: v_ours.to_owned(),
        sent: v_sent.to_owned(),
        dropped: d_ours
            .keys()
            .filter(|k| !d_sent.contains_key(*k))
            .cloned()
            .collect(),
        added: d_sent
            .keys()
            .filter(|k| !d_ours.contains_key(*k))
            .cloned()
            .collect(),
        kept: newer_fields_kept(name, v_sent, d_sent),
        rewritten: Vec::new(),
    };
    let mut children = Vec::new();
    for (field, a) in d_ours {
        let Some(b) = d_sent.get(field) else { continue };
        match (a, b) {
            (a, b) if object_parts(a).is_some() => children.push((format!("{path}.{field}"), a, b)),
            (Value::Array(xs), Value::Array(ys))
                if xs.len() == ys.len() && xs.iter().any(|x| object_parts(x).is_some()) =>
            {
                for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
                    children.push((format!("{path}.{field}[{i}]"), x, y));
                }
            }
            (a, b) if a != b => change.rewritten.push(field.clone()),
            _ => {}
        }
    }
    out.push(change);
    for (p, a, b) in children {
        compare(a, b, p, out);
    }
}

/// The fields of `data` that the class gained after `version`, each with whether it is
/// an object field.
fn newer_fields_kept(name: &str, version: &str, data: &Map<String, Value>) -> Vec<(String, bool)> {
    let (Some(schema), Ok(version)) = (
        cyborg_model::registry().schema(name),
        version.parse::<Version>(),
    ) else {
        return Vec::new();
    };
    schema
        .fields
        .iter()
        .filter(|f| f.since.is_some_and(|since| since > version) && data.contains_key(f.name))
        .map(|f| (f.name.to_owned(), f.child.is_some()))
        .collect()
}

fn describe(c: &Change) -> String {
    let mut parts = vec![if c.ours == c.sent {
        format!("{} (unchanged version)", c.ours)
    } else {
        format!("{} -> {}", c.ours, c.sent)
    }];
    let list = |what: &str, fields: &[String]| format!("{what} {}", fields.join(", "));
    if !c.dropped.is_empty() {
        parts.push(list("dropped", &c.dropped));
    }
    for (field, is_object) in &c.kept {
        parts.push(format!(
            "kept {field} though newer than {}{}",
            c.sent,
            if *is_object {
                " (as OVO does: with a manifest, an object field follows the manifest, never \
                 the relationship table that would drop it)"
            } else {
                ""
            }
        ));
    }
    if !c.added.is_empty() {
        parts.push(list("added", &c.added));
    }
    if !c.rewritten.is_empty() {
        parts.push(list("rewritten", &c.rewritten));
    }
    if c.dropped.is_empty() && c.kept.is_empty() && c.added.is_empty() && c.rewritten.is_empty() {
        parts.push(if c.ours == c.sent {
            "as is".into()
        } else {
            "relabelled only, same fields".into()
        });
    }
    parts.join("; ")
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut manifest = VersionManifest::new();
    if cli.peer.is_empty() {
        manifest
            .insert("AttachHandleList", Version::new(1, 0))
            .insert("AttachHandle", Version::new(1, 1))
            .insert("Device", Version::new(1, 1));
    }
    for (name, version) in &cli.peer {
        if let Some(earlier) = manifest.get(name) {
            eprintln!("error: {name} is named twice ({earlier} and {version}); name it once");
            return ExitCode::from(2);
        }
        manifest.insert(name.clone(), *version);
    }
    let handles = handles();
    let ours = handles
        .to_primitive(verso::Target::Own)
        .expect("encodes at its own version");
    let sent = match handles.to_primitive(verso::Target::Peer(&manifest)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: cannot backport for this peer: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "this build: {}",
        manifest_line(&AttachHandleList::manifest())
    );
    let _ = writeln!(out, "peer:       {}", manifest_line(&manifest));
    let _ = writeln!(
        out,
        "what the peer receives for an {} of {} handles, per object (this build -> sent):",
        AttachHandleList::NAME,
        handles.len()
    );
    let mut changes = Vec::new();
    compare(&ours, &sent, String::new(), &mut changes);
    let labels: Vec<String> = changes
        .iter()
        .map(|c| {
            if c.path.is_empty() {
                c.name.clone()
            } else {
                format!("{} {}", c.path.trim_start_matches('.'), c.name)
            }
        })
        .collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    for (label, c) in labels.iter().zip(&changes) {
        let _ = writeln!(out, "  {label:<width$}  {}", describe(c));
    }
    if cli.full {
        let _ = writeln!(
            out,
            "# {} at this build's versions:",
            AttachHandleList::NAME
        );
        let _ = writeln!(out, "{}", pretty(&ours));
        let _ = writeln!(out, "# as sent to the peer (backported in one pass):");
        let _ = writeln!(out, "{}", pretty(&sent));
    } else {
        let _ = writeln!(out, "(--full prints both primitives)");
    }
    // One write; a reader that goes away early (`| head`) is not an error of ours.
    let _ = std::io::stdout().write_all(out.as_bytes());
    ExitCode::SUCCESS
}
