//! The lock file (`objects.lock`): the checked-in contracts of an application's objects
//! and RPC APIs.
//!
//! It is TOML, written in a fixed layout so that a change reads well in review: one
//! table per object (`[objects.Device]`) and per RPC API (`[rpc.conductor]`), sorted by
//! name, and one line per field, method or argument list. Parsing is ordinary TOML, so
//! a hand edit or a merge is fine as long as it stays valid.
//!
//! ```toml
//! format = 1
//!
//! [objects.Device]
//! version = "1.2"
//! fingerprint = "1.2-fe5b27a5b5f3db959bc08a5f761d166b"
//! fields = [
//!     { name = "hostname", type = "String", nullable = false },
//!     { name = "managed_mode", type = "Enum(managed,unmanaged)", nullable = false, default = "\"unmanaged\"", since = "1.2" },
//! ]
//! methods = [
//!     { name = "get_by_uuid", kind = "class", args = [{ name = "uuid", type = "Uuid" }], returns = "Device" },
//! ]
//!
//! [rpc.conductor]
//! version = "1.1"
//! methods = [
//!     { name = "object_action", since = "1.1", args = [{ name = "objinst", type = "object", required = true }] },
//! ]
//! ```
//!
//! The fingerprint is OVO's (see [`verso::fingerprint`]), so the `fingerprint` lines can
//! be compared with a Python service's `ObjectVersionChecker` hashes. OVO's fingerprint
//! leaves out the serial namespace (`OBJ_SERIAL_NAMESPACE`, the prefix of the
//! primitive's keys), so a class outside the default one has a `serial_namespace =
//! "cyborg_object"` line after its fingerprint; no line means `versioned_object`, which
//! is how locks written before the line existed still read. A change of it is a
//! contract change. Test-only registrations are never written.

use crate::error::CliError;
use crate::rpc::RpcContract;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use verso::fingerprint::ObjectContract;

/// The lock format this version writes and reads.
pub const LOCK_FORMAT: u32 = 1;

/// The contracts of one application: every production object and every RPC API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// The file format ([`LOCK_FORMAT`]).
    pub format: u32,
    /// Objects by name.
    #[serde(default)]
    pub objects: BTreeMap<String, ObjectContract>,
    /// RPC APIs by name.
    #[serde(default)]
    pub rpc: BTreeMap<String, RpcContract>,
}

impl Default for Lock {
    fn default() -> Self {
        Lock {
            format: LOCK_FORMAT,
            objects: BTreeMap::new(),
            rpc: BTreeMap::new(),
        }
    }
}

impl Lock {
    /// Parses lock text; `path` names the file in errors.
    ///
    /// ```
    /// let lock = verso_cli::Lock::parse("format = 1\n", "objects.lock".as_ref())?;
    /// assert!(lock.objects.is_empty());
    /// # Ok::<(), verso_cli::CliError>(())
    /// ```
    pub fn parse(text: &str, path: &Path) -> Result<Lock, CliError> {
        #[derive(Deserialize)]
        struct Head {
            format: Option<u32>,
        }
        let head: Head = toml::from_str(text).map_err(|e| CliError::ParseLock {
            path: path.to_owned(),
            detail: e.message().to_owned(),
        })?;
        match head.format {
            Some(LOCK_FORMAT) => {}
            Some(found) => {
                return Err(CliError::LockFormat {
                    path: path.to_owned(),
                    found,
                    expected: LOCK_FORMAT,
                })
            }
            None => {
                return Err(CliError::ParseLock {
                    path: path.to_owned(),
                    detail: "no `format = 1` line".into(),
                })
            }
        }
        toml::from_str(text).map_err(|e| CliError::ParseLock {
            path: path.to_owned(),
            detail: e.to_string().trim_end().replace('\n', " "),
        })
    }

    /// Reads and parses a lock file.
    pub fn read(path: &Path) -> Result<Lock, CliError> {
        let text = std::fs::read_to_string(path).map_err(|source| CliError::ReadLock {
            path: path.to_owned(),
            source,
        })?;
        Lock::parse(&text, path)
    }

    /// Writes the lock to `path` atomically (a temporary file in the same directory,
    /// then a rename), so an interrupted write never leaves half a lock.
    pub fn write(&self, path: &Path) -> Result<(), CliError> {
        let text = self.render()?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let err = |source| CliError::WriteLock {
            path: path.to_owned(),
            source,
        };
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
        tmp.write_all(text.as_bytes()).map_err(err)?;
        tmp.as_file().sync_all().map_err(err)?;
        tmp.persist(path).map_err(|e| err(e.error))?;
        Ok(())
    }

    /// The lock as text, in the fixed layout described in the module documentation.
    ///
    /// ```
    /// let lock = verso_cli::Lock::default();
    /// let text = lock.render()?;
    /// assert_eq!(verso_cli::Lock::parse(&text, "x".as_ref())?, lock);
    /// # Ok::<(), verso_cli::CliError>(())
    /// ```
    pub fn render(&self) -> Result<String, CliError> {
        let mut out = String::new();
        out.push_str(
            "# The contracts of this application's versioned objects and RPC APIs.\n\
             # Written by `verso objects update-lock`; `verso objects check` compares the code\n\
             # with it. Fingerprints are oslo.versionedobjects' (ObjectVersionChecker).\n",
        );
        let _ = writeln!(out, "format = {}", self.format);
        for (name, contract) in &self.objects {
            section(&mut out, "objects", name, contract)?;
        }
        for (name, contract) in &self.rpc {
            section(&mut out, "rpc", name, contract)?;
        }
        Ok(out)
    }
}

fn section<T: Serialize>(
    out: &mut String,
    group: &str,
    name: &str,
    value: &T,
) -> Result<(), CliError> {
    let value = toml::Value::try_from(value).map_err(|e| CliError::Render(e.to_string()))?;
    let toml::Value::Table(table) = value else {
        return Err(CliError::Render(format!("{group}.{name} is not a table")));
    };
    let header = format!("{group}.{}", key(name));
    let _ = writeln!(out, "\n[{header}]");
    let mut sections = Vec::new();
    for (k, v) in ordered(&table) {
        match v {
            toml::Value::Array(items) if items.iter().any(toml::Value::is_table) => {
                if items.iter().any(needs_own_section) {
                    sections.push((k, items));
                    continue;
                }
                let _ = writeln!(out, "{} = [", key(k));
                for item in items {
                    let _ = writeln!(out, "    {},", inline(item));
                }
                out.push_str("]\n");
            }
            v => {
                let _ = writeln!(out, "{} = {}", key(k), inline(v));
            }
        }
    }
    // Items too long for one line get a `[[...]]` table each, after every plain key
    // (a key after such a header would belong to it).
    for (k, items) in sections {
        for item in items {
            let _ = writeln!(out, "\n[[{header}.{}]]", key(k));
            if let toml::Value::Table(t) = item {
                for (ik, iv) in ordered(t) {
                    match iv {
                        toml::Value::Array(xs) if xs.iter().any(toml::Value::is_table) => {
                            let _ = writeln!(out, "{} = [", key(ik));
                            for x in xs {
                                let _ = writeln!(out, "    {},", inline(x));
                            }
                            out.push_str("]\n");
                        }
                        iv => {
                            let _ = writeln!(out, "{} = {}", key(ik), inline(iv));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// A table item whose inline form would be a very long line because of a nested list
/// of tables (an RPC method's arguments).
fn needs_own_section(item: &toml::Value) -> bool {
    let toml::Value::Table(t) = item else {
        return false;
    };
    t.values().any(|v| matches!(v, toml::Value::Array(xs) if xs.len() > 1 && xs.iter().any(toml::Value::is_table)))
        && inline(item).len() > 100
}

/// Keys in reading order: identity first, nested lists last.
fn ordered(table: &toml::Table) -> Vec<(&String, &toml::Value)> {
    const ORDER: [&str; 19] = [
        "name",
        "version",
        "fingerprint",
        "serial_namespace",
        "namespace",
        "list",
        "child_versions",
        "kind",
        "type",
        "required",
        "nullable",
        "default",
        "since",
        "relationships",
        "args",
        "returns",
        "fields",
        "methods",
        "format",
    ];
    let rank = |k: &str| ORDER.iter().position(|o| *o == k).unwrap_or(ORDER.len());
    let mut items: Vec<_> = table.iter().collect();
    items.sort_by(|(a, _), (b, _)| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    items
}

fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => string(s),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => format!("{f:?}"),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(items) => {
            let items: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", items.join(", "))
        }
        toml::Value::Table(t) => {
            if t.is_empty() {
                return "{}".into();
            }
            let items: Vec<String> = ordered(t)
                .into_iter()
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
    }
}

fn key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.to_owned()
    } else {
        string(k)
    }
}

/// A TOML basic string.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_keys_are_quoted_as_toml() {
        assert_eq!(string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(key("conductor"), "conductor");
        assert_eq!(key("cyborg.conductor"), "\"cyborg.conductor\"");
    }

    #[test]
    fn a_wrong_format_is_refused() {
        let e = Lock::parse("format = 2\n", Path::new("x.lock"));
        assert!(matches!(e, Err(CliError::LockFormat { found: 2, .. })));
        let e = Lock::parse("[objects]\n", Path::new("x.lock"));
        assert!(matches!(e, Err(CliError::ParseLock { .. })));
    }

    #[test]
    fn a_bare_number_version_is_refused_with_a_hint() {
        let text = "format = 1\n[objects.X]\nversion = 1.1\nfingerprint = \"\"\n";
        match Lock::parse(text, Path::new("x.lock")) {
            Err(CliError::ParseLock { detail, .. }) => {
                assert!(detail.contains("quote"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
}
