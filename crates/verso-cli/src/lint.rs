//! `verso objects lint`: the model mistakes OVO leaves to luck.
//!
//! | rule | finding |
//! |---|---|
//! | `list-no-child-rule` | a list class with neither `child_versions` nor a relationship table on `objects`: OVO sends every member at 1.0 when it backports the list |
//! | `list-no-child-versions` | a list class with a relationship table on `objects` but no `child_versions`: without a manifest the table decides, but with a manifest that lacks the member class the members go to 1.0 |
//! | `object-field-no-relationship` | an object field (outside a list's `objects`) with no relationship table: a backport without a manifest fails with `NoRelationshipRule` |
//! | `relationship-backwards` | a relationship table or `child_versions` whose own versions do not increase, or whose child versions decrease |
//! | `relationship-gap` | a table that skips a minor version of its class (that version silently takes the older entry), or starts after the field's `since` (the field is dropped at versions that have it) |
//! | `relationship-range` | an entry for a version the class does not have yet, or naming a child version the child class does not have |
//! | `relationship-stale` | the newest entry sends an older child than the child class is at: the class should get a new version whose entry names the child's |
//! | `since-out-of-range` | a `since` newer than the class, or of another major |
//! | `field-without-since` | a field that the lock's contract of an *older* version does not have, yet declares no `since` (or a `since` at or before that version): a backport to the old version keeps sending it |
//! | `serial-namespace-mixed` | a class whose serial namespace (`OBJ_SERIAL_NAMESPACE`, the prefix of its primitive's keys) differs from another class of its project namespace, or from an object field's class: OVO reads a contained object with its parent's keys, so a Python peer cannot decode it; declare the family once (`#[derive(ObjectFamily)]`, `family = ...`) |
//! | `required-field-without-default` | a non-nullable field added in a minor version with no default: primitives from older peers cannot fill it |
//!
//! `field-without-since` needs the lock: the schema alone cannot tell a field that was
//! always there from one added later and left without `since`. The lock records the
//! fields of the last released version, so a field missing there, in a class whose
//! version has moved on, was added since. Without a lock the rule is skipped (and the
//! command says so).
//!
//! Test-only registrations are not linted.

use crate::lock::Lock;
use std::fmt;
use verso::{FieldSchema, ObjectSchema, Registry, Version};

/// One problem in the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule (see the module documentation).
    pub rule: &'static str,
    /// The object.
    pub object: String,
    /// The field, when the finding is about one.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}.{}", self.object, field)?,
            None => write!(f, "{}", self.object)?,
        }
        write!(
            f,
            " [{}]: {}\n    fix: {}",
            self.rule, self.message, self.fix
        )
    }
}

/// Lints every production class of `registry`; `lock` (the checked-in contracts)
/// enables `field-without-since`. Findings are sorted by object, then field, then rule.
///
/// ```
/// use verso::{Field, ObjectMeta, Registry, VersionedObject};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.1")]
/// pub struct Widget {
///     pub id: Field<i64>,
///     #[verso(since = "1.1")]
///     pub colour: Field<String>,
///     pub meta: ObjectMeta,
/// }
/// let mut registry = Registry::new();
/// registry.register::<Widget>();
/// let findings = verso_cli::lint(&registry, None);
/// assert_eq!(findings[0].rule, "required-field-without-default");
/// assert_eq!(findings[0].field.as_deref(), Some("colour"));
/// ```
pub fn lint(registry: &Registry, lock: Option<&Lock>) -> Vec<Finding> {
    let schemas: Vec<&ObjectSchema> = registry.schemas().collect();
    lint_schemas(&schemas, lock)
}

/// [`lint`] over a set of schemas (e.g. edited copies, in a test); child classes are
/// looked up among them.
pub fn lint_schemas(schemas: &[&ObjectSchema], lock: Option<&Lock>) -> Vec<Finding> {
    let mut out = Vec::new();
    for schema in schemas.iter().filter(|s| !s.test_only) {
        lint_class(schemas, schema, lock, &mut out);
    }
    out.sort_by(|a, b| (&a.object, &a.field, a.rule).cmp(&(&b.object, &b.field, b.rule)));
    out
}

fn finding(
    rule: &'static str,
    schema: &ObjectSchema,
    field: Option<&str>,
    message: String,
    fix: String,
) -> Finding {
    Finding {
        rule,
        object: schema.name.to_owned(),
        field: field.map(str::to_owned),
        message,
        fix,
    }
}

/// `serial-namespace-mixed`: one family, one serial namespace.
fn lint_serial_namespace(registry: &[&ObjectSchema], s: &ObjectSchema, out: &mut Vec<Finding>) {
    let ours = s.serial_namespace();
    let fix = || {
        format!(
            "declare the family once with #[derive(ObjectFamily)] and name it in every class \
             of namespace {} (#[verso(family = ...)])",
            s.namespace
        )
    };
    if let Some(other) = registry
        .iter()
        .find(|o| !o.test_only && o.namespace == s.namespace && o.serial_namespace() != ours)
    {
        out.push(finding(
            "serial-namespace-mixed",
            s,
            None,
            format!(
                "serial namespace {ours}, but {} of the same project namespace {} uses {}",
                other.name,
                s.namespace,
                other.serial_namespace()
            ),
            fix(),
        ));
    }
    for f in &s.fields {
        let Some(child) = f.child.map(|c| c()) else {
            continue;
        };
        if child.serial_namespace() != ours {
            out.push(finding(
                "serial-namespace-mixed",
                s,
                Some(f.name),
                format!(
                    "holds {} in serial namespace {}, inside {ours} keys: OVO reads a contained \
                     object with its parent's keys, so a Python peer cannot decode it",
                    child.name,
                    child.serial_namespace()
                ),
                fix(),
            ));
        }
    }
}

fn pairs(t: &[(Version, Version)]) -> String {
    let items: Vec<String> = t
        .iter()
        .map(|(a, b)| format!("(\"{a}\", \"{b}\")"))
        .collect();
    format!("[{}]", items.join(", "))
}

fn lint_class(
    registry: &[&ObjectSchema],
    s: &ObjectSchema,
    lock: Option<&Lock>,
    out: &mut Vec<Finding>,
) {
    lint_serial_namespace(registry, s, out);
    let members = s.is_list.then(|| s.field("objects")).flatten();
    if let Some(objects) = members {
        let member = objects.ty.child_object().unwrap_or("the member class");
        if s.child_versions.is_empty() && objects.relationships.is_empty() {
            out.push(finding(
                "list-no-child-rule",
                s,
                Some("objects"),
                format!(
                    "list has no child-version rule: no child_versions and no relationship \
                     table on `objects`, so OVO backports every {member} member to 1.0"
                ),
                format!(
                    "declare child_versions = [(\"{v}\", \"<{member} version>\")] on the list, one \
                     entry per list version",
                    v = s.version
                ),
            ));
        } else if s.child_versions.is_empty() {
            out.push(finding(
                "list-no-child-versions",
                s,
                Some("objects"),
                format!(
                    "list has a relationship table on `objects` {} but no child_versions: without \
                     a manifest the table decides, but a manifest that lacks {member} sends the \
                     members at 1.0",
                    pairs(&objects.relationships)
                ),
                format!(
                    "declare child_versions = {} on the list (the same pairs)",
                    pairs(&objects.relationships)
                ),
            ));
        }
        if !s.child_versions.is_empty() {
            table_rules(
                registry,
                s,
                objects,
                &s.child_versions,
                "child_versions",
                out,
            );
        }
    }

    let locked = lock.and_then(|l| l.objects.get(s.name));
    for f in &s.fields {
        let is_members = members.is_some_and(|m| m.name == f.name);
        if let Some(child) = f.ty.child_object() {
            if !is_members && f.relationships.is_empty() {
                out.push(finding(
                    "object-field-no-relationship",
                    s,
                    Some(f.name),
                    format!(
                        "object field ({child}) has no relationship rule: a backport without a \
                         manifest fails (NoRelationshipRule)"
                    ),
                    format!(
                        "declare #[verso(relationships = [(\"{}\", \"<{child} version>\")])], one \
                         entry per version of {} since the field was added",
                        f.since.unwrap_or(Version::new(s.version.major(), 0)),
                        s.name
                    ),
                ));
            }
        }
        if !f.relationships.is_empty() {
            table_rules(registry, s, f, &f.relationships, "relationships", out);
        }
        since_rules(
            s,
            f,
            locked.map(|c| (c.version, c.field(f.name).is_some())),
            out,
        );
    }
}

fn since_rules(
    s: &ObjectSchema,
    f: &FieldSchema,
    locked: Option<(Version, bool)>,
    out: &mut Vec<Finding>,
) {
    if let Some(since) = f.since {
        if since > s.version || since.major() != s.version.major() {
            out.push(finding(
                "since-out-of-range",
                s,
                Some(f.name),
                format!(
                    "since {since} is outside the class's versions (it is at {})",
                    s.version
                ),
                format!(
                    "set since to the {}.x version that added the field",
                    s.version.major()
                ),
            ));
        }
    }
    let mut added_in_minor = f.since.is_some_and(|v| v.minor() > 0);
    if let Some((locked_version, in_lock)) = locked {
        let newer = locked_version < s.version && locked_version.major() == s.version.major();
        if newer && !in_lock && !matches!(f.since, Some(v) if v > locked_version) {
            added_in_minor = true;
            let next = Version::new(locked_version.major(), locked_version.minor() + 1);
            out.push(finding(
                "field-without-since",
                s,
                Some(f.name),
                format!(
                    "field is not in the locked {locked_version} contract, so it was added after \
                     {locked_version}, but it declares since {}: a backport to {locked_version} keeps \
                     sending it",
                    f.since.map_or_else(|| "none".into(), |v| v.to_string())
                ),
                format!("mark it #[verso(since = \"{next}\")] (the version that added it)"),
            ));
        }
    }
    if added_in_minor && !f.nullable && f.default.is_none() {
        out.push(finding(
            "required-field-without-default",
            s,
            Some(f.name),
            format!(
                "non-nullable field added in minor version {} has no default: primitives from \
                 older peers lack it and cannot fill it",
                f.since
                    .map_or_else(|| "(unknown)".into(), |v| v.to_string())
            ),
            "give it a default (#[verso(default = ...)]) or make it nullable (Option<T>)".into(),
        ));
    }
}

fn table_rules(
    registry: &[&ObjectSchema],
    s: &ObjectSchema,
    f: &FieldSchema,
    table: &[(Version, Version)],
    what: &str,
    out: &mut Vec<Finding>,
) {
    let field = Some(f.name);
    for w in table.windows(2) {
        let ((p0, c0), (p1, c1)) = (w[0], w[1]);
        if p1 <= p0 || c1 < c0 {
            out.push(finding(
                "relationship-backwards",
                s,
                field,
                format!("{what} go backwards: ({p0}, {c0}) then ({p1}, {c1})"),
                format!(
                    "list the entries oldest first, each {} version newer than the last and \
                     no older child",
                    s.name
                ),
            ));
        } else if p1.major() == p0.major() && p1.minor() > p0.minor() + 1 {
            let missing = Version::new(p0.major(), p0.minor() + 1);
            out.push(finding(
                "relationship-gap",
                s,
                field,
                format!(
                    "{what} skip {missing}: between ({p0}, {c0}) and ({p1}, {c1}), so {missing} \
                     silently takes the {p0} entry"
                ),
                format!(
                    "add an entry (\"{missing}\", \"<child version>\") for each skipped version"
                ),
            ));
        }
    }
    let start = f.since.unwrap_or(Version::new(s.version.major(), 0));
    if let Some(&(first, _)) = table.first() {
        if first > start && first.major() == start.major() {
            out.push(finding(
                "relationship-gap",
                s,
                field,
                format!(
                    "{what} start at {first} but the field exists since {start}: a backport to \
                     {start} drops it"
                ),
                format!("add an entry (\"{start}\", \"<child version>\") at the front"),
            ));
        }
    }
    let child =
        f.ty.child_object()
            .and_then(|c| registry.iter().copied().find(|s| s.name == c));
    for &(p, c) in table {
        if p > s.version {
            out.push(finding(
                "relationship-range",
                s,
                field,
                format!(
                    "{what} has an entry for {p}, but {} is at {}",
                    s.name, s.version
                ),
                format!("remove the entry, or bump {} to {p}", s.name),
            ));
        }
        if let Some(cs) = child.filter(|cs| c > cs.version) {
            out.push(finding(
                "relationship-range",
                s,
                field,
                format!(
                    "{what} name {} {c}, but {} is at {}",
                    cs.name, cs.name, cs.version
                ),
                format!("use a {} version that exists", cs.name),
            ));
        }
    }
    if let (Some(cs), Some(&(p, c))) = (child, table.last()) {
        if c < cs.version {
            let next = if p >= s.version {
                Version::new(s.version.major(), s.version.minor() + 1)
            } else {
                s.version
            };
            out.push(finding(
                "relationship-stale",
                s,
                field,
                format!(
                    "the newest {what} entry ({p}, {c}) sends {} {c}, but {} is at {}",
                    cs.name, cs.name, cs.version
                ),
                format!(
                    "give {} version {next} with an entry (\"{next}\", \"{}\")",
                    s.name, cs.version
                ),
            ));
        }
    }
}
