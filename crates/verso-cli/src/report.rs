//! `check`, `update-lock` and `diff`: comparing contracts and saying what to do.

use crate::lock::Lock;
use crate::rpc::{assess_rpc, RpcChange, RpcContract};
use std::collections::BTreeSet;
use std::fmt;
use verso::fingerprint::{assess, Assessment, Bump, ContractChange, ObjectContract};
use verso::Version;

/// How serious one report entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Nothing to do.
    Ok,
    /// Worth knowing, nothing to do.
    Note,
    /// Allowed, but probably not what was meant.
    Warning,
    /// Must be fixed: the command fails.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Ok => "ok",
            Severity::Note => "note",
            Severity::Warning => "WARNING",
            Severity::Error => "ERROR",
        })
    }
}

/// One object or RPC API in a report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `object Device` or `rpc conductor`.
    pub subject: String,
    /// How serious it is.
    pub severity: Severity,
    /// One line: what happened (versions, fingerprints).
    pub headline: String,
    /// What changed and which rules are broken, one per line.
    pub lines: Vec<String>,
    /// What the author should do, if anything.
    pub fix: Option<String>,
}

/// The result of `check`, `update-lock` or `diff`: an entry per object and RPC API.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    /// Every entry, objects first, each group sorted by name.
    pub entries: Vec<Entry>,
}

impl Report {
    /// Whether no entry is an error.
    pub fn is_ok(&self) -> bool {
        self.errors() == 0
    }

    /// How many entries are errors.
    pub fn errors(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.severity == Severity::Error)
            .count()
    }

    /// The entry about `subject` (`object Device`, `rpc conductor`).
    pub fn entry(&self, subject: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.subject == subject)
    }
}

impl fmt::Display for Report {
    /// Every entry that is not `ok`, then a summary line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in self.entries.iter().filter(|e| e.severity != Severity::Ok) {
            writeln!(f, "{} {}: {}", e.severity, e.subject, e.headline)?;
            for l in &e.lines {
                writeln!(f, "    - {l}")?;
            }
            if let Some(fix) = &e.fix {
                writeln!(f, "    fix: {fix}")?;
            }
        }
        let ok = self
            .entries
            .iter()
            .filter(|e| e.severity == Severity::Ok)
            .count();
        writeln!(
            f,
            "{} error(s), {} unchanged of {} contract(s)",
            self.errors(),
            ok,
            self.entries.len()
        )
    }
}

/// The version to suggest after `old` for changes that need `needs`.
fn next_version(old: Version, needs: Bump) -> Version {
    match needs {
        Bump::Major => Version::new(old.major() + 1, 0),
        _ => Version::new(old.major(), old.minor() + 1),
    }
}

fn object_fix(name: &str, old: &ObjectContract, a: &Assessment) -> String {
    let needs = a.required.max(Bump::Minor);
    let next = next_version(old.version, needs);
    let added = a
        .changes
        .iter()
        .any(|c| matches!(c, ContractChange::FieldAdded(_)));
    let mut fix = format!("bump {name}'s VERSION to {next} (the changes need {needs})");
    if added && needs == Bump::Minor {
        fix.push_str(&format!(
            ", mark each added field #[verso(since = \"{next}\")] so a backport to {} drops it",
            old.version
        ));
    }
    fix.push_str(", then run `verso objects update-lock`");
    fix
}

fn rpc_fix(name: &str, old: &RpcContract, changes: &[RpcChange]) -> String {
    let needs = changes
        .iter()
        .map(RpcChange::required_bump)
        .max()
        .unwrap_or(Bump::Minor)
        .max(Bump::Minor);
    let next = next_version(old.version, needs);
    let mut fix = format!("bump the {name} RPC API to {next} (the changes need {needs})");
    if needs == Bump::Minor {
        fix.push_str(&format!(
            ", declare new methods and arguments since {next} (new arguments optional)"
        ));
    }
    fix.push_str(", then run `verso objects update-lock`");
    fix
}

fn fingerprints(old: &ObjectContract, new: &ObjectContract) -> String {
    if old.fingerprint == new.fingerprint {
        format!("fingerprint {} (unchanged)", new.fingerprint)
    } else {
        format!("fingerprint {} -> {}", old.fingerprint, new.fingerprint)
    }
}

fn names<'a, V>(
    a: &'a std::collections::BTreeMap<String, V>,
    b: &'a std::collections::BTreeMap<String, V>,
) -> BTreeSet<&'a String> {
    a.keys().chain(b.keys()).collect()
}

fn ok(subject: String, headline: String) -> Entry {
    Entry {
        subject,
        severity: Severity::Ok,
        headline,
        lines: vec![],
        fix: None,
    }
}

/// `verso objects check`: does the code (`current`) match the lock (`locked`)?
///
/// Every difference fails. When the version was not bumped for a changed contract
/// (or went backwards, or the bump is too small) the entry says so and how to bump;
/// when it was bumped properly, the lock only needs updating.
///
/// ```
/// use verso_cli::{check, Lock};
/// let report = check(&Lock::default(), &Lock::default());
/// assert!(report.is_ok());
/// ```
pub fn check(locked: &Lock, current: &Lock) -> Report {
    Report {
        entries: compare(locked, current)
            .into_iter()
            .map(|(e, _)| e)
            .collect(),
    }
}

/// What `update-lock` may do with one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    /// The lock already says this.
    Matches,
    /// The lock is stale, and recording the code is safe.
    Record,
    /// Recording it would hide a broken rule (no bump, backwards, removed).
    Refuse,
}

fn compare(locked: &Lock, current: &Lock) -> Vec<(Entry, Disposition)> {
    let mut report = Vec::new();
    for name in names(&locked.objects, &current.objects) {
        let subject = format!("object {name}");
        let entry = match (locked.objects.get(name), current.objects.get(name)) {
            (Some(old), Some(new)) => {
                let a = assess(old, new);
                if a.unchanged() && old.version == new.version {
                    (
                        ok(subject, format!("{} {}", new.version, new.fingerprint)),
                        Disposition::Matches,
                    )
                } else {
                    let mut lines: Vec<String> = a.changes.iter().map(|c| c.to_string()).collect();
                    lines.extend(a.problems.iter().map(|p| p.to_string()));
                    let fix = if a.problems.is_empty() {
                        format!(
                            "the version was bumped {} -> {}: record it with `verso objects update-lock`",
                            old.version, new.version
                        )
                    } else {
                        object_fix(name, old, &a)
                    };
                    let disposition = if a.problems.is_empty() {
                        Disposition::Record
                    } else {
                        Disposition::Refuse
                    };
                    let entry = Entry {
                        subject,
                        severity: Severity::Error,
                        headline: format!(
                            "{} (lock {}, code {})",
                            fingerprints(old, new),
                            old.version,
                            new.version
                        ),
                        lines,
                        fix: Some(fix),
                    };
                    (entry, disposition)
                }
            }
            (None, Some(new)) => (
                Entry {
                    subject,
                    severity: Severity::Error,
                    headline: format!("{} {} is not in the lock", new.version, new.fingerprint),
                    lines: vec![],
                    fix: Some("record it with `verso objects update-lock`".into()),
                },
                Disposition::Record,
            ),
            (Some(old), None) => (
                Entry {
                    subject,
                    severity: Severity::Error,
                    headline: format!(
                        "{} is in the lock but no longer registered",
                        old.version
                    ),
                    lines: vec!["peers on the locked release may still send it".into()],
                    fix: Some(
                        "register it again, or drop it deliberately with `verso objects update-lock --force`"
                            .into(),
                    ),
                },
                Disposition::Refuse,
            ),
            (None, None) => continue,
        };
        report.push(entry);
    }
    for name in names(&locked.rpc, &current.rpc) {
        let subject = format!("rpc {name}");
        let entry = match (locked.rpc.get(name), current.rpc.get(name)) {
            (Some(old), Some(new)) => {
                let a = assess_rpc(old, new);
                if a.changes.is_empty() && a.problems.is_empty() && old.version == new.version {
                    (ok(subject, format!("version {}", new.version)), Disposition::Matches)
                } else {
                    let mut lines: Vec<String> = a.changes.iter().map(|c| c.to_string()).collect();
                    lines.extend(a.problems.iter().cloned());
                    let fix = if a.problems.is_empty() {
                        format!(
                            "the version was bumped {} -> {}: record it with `verso objects update-lock`",
                            old.version, new.version
                        )
                    } else {
                        rpc_fix(name, old, &a.changes)
                    };
                    let disposition = if a.problems.is_empty() {
                        Disposition::Record
                    } else {
                        Disposition::Refuse
                    };
                    let entry = Entry {
                        subject,
                        severity: Severity::Error,
                        headline: format!(
                            "the API differs from the lock (lock {}, code {})",
                            old.version, new.version
                        ),
                        lines,
                        fix: Some(fix),
                    };
                    (entry, disposition)
                }
            }
            (None, Some(new)) => (
                Entry {
                    subject,
                    severity: Severity::Error,
                    headline: format!("version {} is not in the lock", new.version),
                    lines: vec![],
                    fix: Some("record it with `verso objects update-lock`".into()),
                },
                Disposition::Record,
            ),
            (Some(old), None) => (
                Entry {
                    subject,
                    severity: Severity::Error,
                    headline: format!(
                        "version {} is in the lock but no longer served",
                        old.version
                    ),
                    lines: vec!["clients on the locked release may still call it".into()],
                    fix: Some(
                        "serve it again, or drop it deliberately with `verso objects update-lock --force`"
                            .into(),
                    ),
                },
                Disposition::Refuse,
            ),
            (None, None) => continue,
        };
        report.push(entry);
    }
    report
}

/// `verso objects update-lock`: the lock to write, and the report.
///
/// An entry whose contract changed without a (sufficient) version bump, whose version
/// went backwards, or that disappeared, is refused: nothing is written unless `force`.
/// Otherwise the new lock is `current`.
///
/// ```
/// use verso_cli::{update_lock, Lock};
/// let (report, write) = update_lock(None, &Lock::default(), false);
/// assert!(report.is_ok() && write.is_some());
/// ```
pub fn update_lock(locked: Option<&Lock>, current: &Lock, force: bool) -> (Report, Option<Lock>) {
    let empty = Lock::default();
    let mut report = Report::default();
    for (mut e, disposition) in compare(locked.unwrap_or(&empty), current) {
        match disposition {
            Disposition::Matches => {}
            Disposition::Record => {
                e.severity = Severity::Note;
                e.headline = format!("recorded: {}", e.headline);
                e.fix = None;
            }
            Disposition::Refuse if force => {
                e.severity = Severity::Warning;
                e.headline = format!("forced: {}", e.headline);
                e.fix = Some("--force recorded it as it is; peers may not cope".into());
            }
            Disposition::Refuse => {
                e.headline = format!("refused: {}", e.headline);
                if let Some(fix) = &mut e.fix {
                    if !fix.contains("--force") {
                        fix.push_str(" (or pass --force to record it as it is)");
                    }
                }
            }
        }
        report.entries.push(e);
    }
    let write = report.is_ok().then(|| current.clone());
    (report, write)
}

/// `verso objects diff OLD NEW`: the compatibility report between two releases' locks.
///
/// Per object: fields added (fine with a minor bump and a `since` backport rule),
/// removed or retyped (a major bump), methods added or changed, versions that went
/// backwards. Per RPC API: methods or arguments removed, arguments made required or
/// retyped (a major bump), optional arguments and methods added with a minor bump.
///
/// ```
/// use verso_cli::{diff, Lock};
/// assert!(diff(&Lock::default(), &Lock::default()).is_ok());
/// ```
pub fn diff(old: &Lock, new: &Lock) -> Report {
    let mut report = Report::default();
    for name in names(&old.objects, &new.objects) {
        let subject = format!("object {name}");
        let entry = match (old.objects.get(name), new.objects.get(name)) {
            (Some(o), Some(n)) => object_diff(subject, o, n),
            (None, Some(n)) => added(subject, n.version),
            (Some(o), None) => removed(
                subject,
                o.version,
                "peers on the old release still send it and cannot be decoded",
                "keep the class registered until no peer runs the old release",
            ),
            (None, None) => continue,
        };
        report.entries.push(entry);
    }
    for name in names(&old.rpc, &new.rpc) {
        let subject = format!("rpc {name}");
        let entry = match (old.rpc.get(name), new.rpc.get(name)) {
            (Some(o), Some(n)) => rpc_diff(subject, name, o, n),
            (None, Some(n)) => added(subject, n.version),
            (Some(o), None) => removed(
                subject,
                o.version,
                "clients on the old release still call it",
                "keep serving it until no client runs the old release",
            ),
            (None, None) => continue,
        };
        report.entries.push(entry);
    }
    report
}

fn step_text(step: Option<Bump>) -> &'static str {
    match step {
        None => "version went backwards",
        Some(Bump::None) => "same version",
        Some(Bump::Minor) => "minor bump",
        Some(Bump::Major) => "major bump",
    }
}

fn verdict(needs: Bump, step: Option<Bump>) -> String {
    match step {
        Some(s) if s >= needs => format!("fine with a {}", step_text(step)),
        _ => format!("needs {needs}"),
    }
}

fn object_diff(subject: String, o: &ObjectContract, n: &ObjectContract) -> Entry {
    let a = assess(o, n);
    let mut lines = Vec::new();
    let mut warned = false;
    for c in &a.changes {
        let mut line = format!("{c}: {}", verdict(c.required_bump(), a.step));
        if let ContractChange::FieldAdded(f) = c {
            if a.step == Some(Bump::Minor) {
                if f.since.is_some_and(|s| s > o.version) {
                    line.push_str(&format!(
                        " (backported by since {})",
                        f.since.map(|s| s.to_string()).unwrap_or_default()
                    ));
                }
                if !f.nullable && f.default.is_none() {
                    warned = true;
                    line.push_str(
                        "; WARNING: non-nullable without a default, so primitives from older \
                         peers cannot fill it: give it a default or make it nullable",
                    );
                }
            }
        }
        lines.push(line);
    }
    lines.extend(a.problems.iter().map(|p| format!("ERROR: {p}")));
    let severity = if !a.problems.is_empty() {
        Severity::Error
    } else if warned {
        Severity::Warning
    } else if a.changes.is_empty() && o.version == n.version {
        Severity::Ok
    } else {
        Severity::Note
    };
    let fix = (severity == Severity::Error).then(|| {
        format!(
            "the new release must not ship this: {}",
            object_fix(subject.trim_start_matches("object "), o, &a)
        )
    });
    Entry {
        headline: format!(
            "{} -> {} ({}), {}",
            o.version,
            n.version,
            step_text(a.step),
            fingerprints(o, n)
        ),
        subject,
        severity,
        lines,
        fix,
    }
}

fn rpc_diff(subject: String, name: &str, o: &RpcContract, n: &RpcContract) -> Entry {
    let a = assess_rpc(o, n);
    let mut lines: Vec<String> = a
        .changes
        .iter()
        .map(|c| format!("{c}: {}", verdict(c.required_bump(), a.step)))
        .collect();
    lines.extend(a.problems.iter().map(|p| format!("ERROR: {p}")));
    let severity = if !a.problems.is_empty() {
        Severity::Error
    } else if a.changes.is_empty() && o.version == n.version {
        Severity::Ok
    } else {
        Severity::Note
    };
    let fix = (severity == Severity::Error).then(|| {
        format!(
            "the new release must not ship this: {}",
            rpc_fix(name, o, &a.changes)
        )
    });
    Entry {
        subject,
        severity,
        headline: format!("{} -> {} ({})", o.version, n.version, step_text(a.step)),
        lines,
        fix,
    }
}

/// A diff entry for a contract that is new in the newer lock.
fn added(subject: String, version: Version) -> Entry {
    Entry {
        subject,
        severity: Severity::Note,
        headline: format!("added at {version}"),
        lines: vec![],
        fix: None,
    }
}

/// A diff entry for a contract the newer lock no longer has.
fn removed(subject: String, version: Version, why: &str, fix: &str) -> Entry {
    Entry {
        subject,
        severity: Severity::Error,
        headline: format!("removed (was {version})"),
        lines: vec![why.into()],
        fix: Some(fix.into()),
    }
}
