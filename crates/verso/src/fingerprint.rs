//! Contract fingerprints of objects and the lock file that pins them.
//!
//! Two things are computed from an [`ObjectSchema`]:
//!
//! - its **fingerprint**, `VERSION-md5hex`, bit for bit the one oslo.versionedobjects'
//!   `fixture.ObjectVersionChecker.get_hashes()` gives the same class, so a Python
//!   service and a Rust service of one model can compare their hashes
//!   ([`fingerprint`], [`ovo_hashed_text`]);
//! - its **contract** ([`ObjectContract`]): the version, the fingerprint, and the
//!   fields, remotable methods and child rules in enough detail to say *what* changed
//!   between two contracts ([`ContractChange`]) and whether the version step made for
//!   it is enough ([`assess`]).
//!
//! # The hashed text (OVO's algorithm)
//! The text is Python's `repr()` of a tuple, UTF-8 encoded, fed to MD5:
//!
//! 1. the fields, `[(name, field), ...]` sorted by name, each field rendered as
//!    `Type(default=D,nullable=B)`: `Type` is [`FieldType::ovo_class`], `D` is Python's
//!    `str()` of the default ([`crate::field::python_str`]) or
//!    `<class 'oslo_versionedobjects.fields.UnspecifiedDefault'>` when there is none,
//!    `B` is `True`/`False`; an enum field adds `,valid_values=('a', 'b')` (the values as
//!    a Python tuple, which is how the model declares them), unless its [`OvoRepr`]
//!    says the Python declaration prints otherwise (a named enum class, an
//!    auto-typed field without its values, values given as one string);
//! 2. the remotable methods, `[(name, ArgSpec(args=[...], varargs=None, keywords=None,
//!    defaults=None)), ...]` sorted by name; a class method's args are
//!    `['cls', 'context', <args>]`, an instance method's `['self', <args>]`;
//! 3. for list classes only, `OrderedDict([('1.0', '1.0'), ...])` of `child_versions`
//!    sorted by key *as strings* (Python sorts the dict items), or `OrderedDict()`.
//!
//! The fingerprint is `VERSION + "-" + md5(text)`. MD5 is OVO's choice and is kept for
//! that reason only: it is a change detector between honest parties, not a security
//! measure.
//!
//! OVO's text does not see an enum's Rust variants, a list's element type, a child's
//! class, `since`, relationship tables, argument types or return types; the contract
//! does, so [`assess`] catches those changes too.
//!
//! ```
//! use verso::{Field, ObjectMeta, VersionedObject};
//! use verso::fingerprint::{fingerprint, ObjectContract};
//!
//! #[derive(VersionedObject, Clone, Debug, PartialEq)]
//! #[verso(namespace = "demo", version = "1.0")]
//! pub struct Widget {
//!     pub id: Field<i64>,
//!     pub meta: ObjectMeta,
//! }
//!
//! let fp = fingerprint(Widget::schema());
//! assert!(fp.starts_with("1.0-") && fp.len() == 4 + 32);
//! let contract = ObjectContract::from_schema(Widget::schema());
//! assert_eq!(contract.fingerprint, fp);
//! assert_eq!(contract.fields[0].ty, "Integer");
//! ```

use crate::field::{python_str, FieldType};
use crate::object::{FieldSchema, MethodKind, MethodSchema, ObjectSchema};
use crate::schema::{OvoRepr, DEFAULT_SERIAL_NAMESPACE};
use crate::Version;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fmt::Write as _;

/// What OVO writes for a field without a default.
const UNSPECIFIED: &str = "<class 'oslo_versionedobjects.fields.UnspecifiedDefault'>";

/// The exact text OVO's `ObjectVersionChecker` hashes for this class (see the module
/// documentation for the format).
///
/// ```
/// use verso::{Field, ObjectMeta, VersionedObject};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.0")]
/// pub struct Widget {
///     #[verso(default = true)]
///     pub on: Field<bool>,
///     pub meta: ObjectMeta,
/// }
/// assert_eq!(
///     verso::fingerprint::ovo_hashed_text(Widget::schema()),
///     "([('on', Boolean(default=True,nullable=False))], [])"
/// );
/// ```
pub fn ovo_hashed_text(schema: &ObjectSchema) -> String {
    let mut fields: Vec<&FieldSchema> = schema.fields.iter().collect();
    fields.sort_by_key(|f| f.name);
    let fields: Vec<String> = fields
        .iter()
        .map(|f| format!("({}, {})", py_repr_str(f.name), ovo_field_repr(f)))
        .collect();

    let mut methods: Vec<&MethodSchema> = schema.methods.iter().collect();
    methods.sort_by_key(|m| m.name);
    let methods: Vec<String> = methods
        .iter()
        .map(|m| {
            let args: Vec<String> = ovo_arg_names(m).iter().map(|a| py_repr_str(a)).collect();
            format!(
                "({}, ArgSpec(args=[{}], varargs=None, keywords=None, defaults=None))",
                py_repr_str(m.name),
                args.join(", ")
            )
        })
        .collect();

    let mut text = format!("([{}], [{}]", fields.join(", "), methods.join(", "));
    if schema.is_list {
        let mut pairs: Vec<(String, String)> = schema
            .child_versions
            .iter()
            .map(|(l, c)| (l.to_string(), c.to_string()))
            .collect();
        pairs.sort();
        if pairs.is_empty() {
            text.push_str(", OrderedDict()");
        } else {
            let items: Vec<String> = pairs
                .iter()
                .map(|(l, c)| format!("({}, {})", py_repr_str(l), py_repr_str(c)))
                .collect();
            let _ = write!(text, ", OrderedDict([{}])", items.join(", "));
        }
    }
    text.push(')');
    text
}

/// OVO's fingerprint of this class: `VERSION-md5hex` of [`ovo_hashed_text`].
///
/// ```
/// use verso::{Field, ObjectMeta, VersionedObject};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.3")]
/// pub struct Widget {
///     pub id: Field<i64>,
///     pub meta: ObjectMeta,
/// }
/// assert!(verso::fingerprint::fingerprint(Widget::schema()).starts_with("1.3-"));
/// ```
pub fn fingerprint(schema: &ObjectSchema) -> String {
    format!(
        "{}-{}",
        schema.version,
        md5_hex(ovo_hashed_text(schema).as_bytes())
    )
}

/// The argument names OVO's `ArgSpec` lists for a remotable method.
fn ovo_arg_names(m: &MethodSchema) -> Vec<&str> {
    let receiver: &[&str] = match m.kind {
        MethodKind::Class => &["cls", "context"],
        MethodKind::Instance => &["self"],
    };
    receiver
        .iter()
        .copied()
        .chain(m.args.iter().map(|a| a.name))
        .collect()
}

fn ovo_field_repr(f: &FieldSchema) -> String {
    let default = f
        .default
        .as_ref()
        .map_or_else(|| UNSPECIFIED.to_owned(), python_str);
    let nullable = if f.nullable { "True" } else { "False" };
    match (&f.ty, f.ovo_repr) {
        (FieldType::Enum(values), OvoRepr::Standard) => format!(
            "Enum(default={default},nullable={nullable},valid_values={})",
            py_repr_tuple(values)
        ),
        (FieldType::Enum(values), OvoRepr::EnumClass(class)) => format!(
            "{class}(default={default},nullable={nullable},valid_values={})",
            py_repr_tuple(values)
        ),
        (FieldType::Enum(values), OvoRepr::ValuesAsText) => format!(
            "Enum(default={default},nullable={nullable},valid_values={})",
            values.concat()
        ),
        (ty, _) => format!("{}(default={default},nullable={nullable})", ty.ovo_class()),
    }
}

/// Python's `repr()` of a tuple of strings: `('a', 'b')`, `('a',)`, `()`.
fn py_repr_tuple(values: &[&str]) -> String {
    match values {
        [] => "()".into(),
        [one] => format!("({},)", py_repr_str(one)),
        many => format!(
            "({})",
            many.iter()
                .map(|v| py_repr_str(v))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Python's `repr()` of a `str`: single quotes unless the text has a single quote and
/// no double quote; backslashes, the quote and control characters escaped.
fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// MD5 of `data`, as 32 lowercase hex digits (the `md-5` crate).
fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    format!("{:x}", md5::Md5::digest(data))
}

/// One field as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldContract {
    /// The field name.
    pub name: String,
    /// The full type ([`FieldType`]'s display: `Enum(a,b)`, `List(String)`,
    /// `Object(Device)`, `ListOfObjects(Device)`).
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether `None` is a value.
    pub nullable: bool,
    /// The default as JSON text (`"unmanaged"` with its quotes, `{}`, `0.0`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The object version that added the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Version>,
    /// The relationship table (`(my_version, child_version)` pairs) of an object field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relationships: Vec<(Version, Version)>,
}

/// One argument of a remotable method, as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgContract {
    /// The argument name.
    pub name: String,
    /// Its Rust type as written (whitespace normalised).
    #[serde(rename = "type")]
    pub ty: String,
}

/// One remotable method, as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodContract {
    /// The method name.
    pub name: String,
    /// `"class"` or `"instance"`.
    pub kind: String,
    /// The arguments after the receiver and context.
    #[serde(default)]
    pub args: Vec<ArgContract>,
    /// The Rust return type (the `Ok` type), whitespace normalised.
    pub returns: String,
}

impl MethodContract {
    /// The signature in one line: `class get_by_uuid(uuid: Uuid) -> Device`.
    pub fn signature(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| format!("{}: {}", a.name, a.ty))
            .collect();
        format!(
            "{} {}({}) -> {}",
            self.kind,
            self.name,
            args.join(", "),
            self.returns
        )
    }
}

/// The contract of one object class: what a lock file pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectContract {
    /// The class version.
    pub version: Version,
    /// OVO's fingerprint ([`fingerprint`]).
    pub fingerprint: String,
    /// The serial namespace, the prefix of the primitive's keys (OVO's
    /// `OBJ_SERIAL_NAMESPACE`). OVO's fingerprint leaves it out, so the contract records
    /// it beside it; absent (in a lock written before it was recorded, or for the
    /// default) it is `versioned_object`.
    #[serde(
        default = "default_serial_namespace",
        skip_serializing_if = "is_default_serial_namespace"
    )]
    pub serial_namespace: String,
    /// Whether it is a list class.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub list: bool,
    /// A list class's `child_versions`, sorted by list version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub child_versions: Vec<(Version, Version)>,
    /// The fields, sorted by name.
    #[serde(default)]
    pub fields: Vec<FieldContract>,
    /// The remotable methods, sorted by name.
    #[serde(default)]
    pub methods: Vec<MethodContract>,
}

fn default_serial_namespace() -> String {
    DEFAULT_SERIAL_NAMESPACE.to_owned()
}

fn is_default_serial_namespace(s: &str) -> bool {
    s == DEFAULT_SERIAL_NAMESPACE
}

impl ObjectContract {
    /// The contract of a class as the schema declares it.
    pub fn from_schema(schema: &ObjectSchema) -> Self {
        let mut fields: Vec<FieldContract> = schema
            .fields
            .iter()
            .map(|f| FieldContract {
                name: f.name.to_owned(),
                ty: f.ty.to_string(),
                nullable: f.nullable,
                default: f.default.as_ref().map(|v| v.to_string()),
                since: f.since,
                relationships: f.relationships.clone(),
            })
            .collect();
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        let mut methods: Vec<MethodContract> = schema
            .methods
            .iter()
            .map(|m| MethodContract {
                name: m.name.to_owned(),
                kind: match m.kind {
                    MethodKind::Class => "class".into(),
                    MethodKind::Instance => "instance".into(),
                },
                args: m
                    .args
                    .iter()
                    .map(|a| ArgContract {
                        name: a.name.to_owned(),
                        ty: normalise_type(a.ty),
                    })
                    .collect(),
                returns: normalise_type(m.returns),
            })
            .collect();
        methods.sort_by(|a, b| a.name.cmp(&b.name));
        let mut child_versions = schema.child_versions.clone();
        child_versions.sort();
        ObjectContract {
            version: schema.version,
            fingerprint: fingerprint(schema),
            serial_namespace: schema.serial_namespace().to_owned(),
            list: schema.is_list,
            child_versions,
            fields,
            methods,
        }
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&FieldContract> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The method called `name`.
    pub fn method(&self, name: &str) -> Option<&MethodContract> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// Token text from the derive (`std :: string :: String`) in the way one writes it.
fn normalise_type(ty: &str) -> String {
    let mut s = ty.trim().to_owned();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" ::", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s
}

/// How big a version step is needed, or was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bump {
    /// No change of version.
    None,
    /// A minor step (`1.2` -> `1.3`): compatible additions, with a backport rule.
    Minor,
    /// A major step (`1.x` -> `2.0`): peers at the old major cannot take it.
    Major,
}

impl fmt::Display for Bump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bump::None => "no version change",
            Bump::Minor => "a minor version bump",
            Bump::Major => "a major version bump",
        })
    }
}

/// The version step from `old` to `new`: `None` when it went backwards.
///
/// ```
/// use verso::fingerprint::{version_step, Bump};
/// use verso::Version;
/// assert_eq!(version_step(Version::new(1, 2), Version::new(1, 3)), Some(Bump::Minor));
/// assert_eq!(version_step(Version::new(1, 2), Version::new(2, 0)), Some(Bump::Major));
/// assert_eq!(version_step(Version::new(1, 2), Version::new(1, 1)), None);
/// ```
pub fn version_step(old: Version, new: Version) -> Option<Bump> {
    if new < old {
        None
    } else if new.major() > old.major() {
        Some(Bump::Major)
    } else if new > old {
        Some(Bump::Minor)
    } else {
        Some(Bump::None)
    }
}

/// One difference between two contracts of the same class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractChange {
    /// A field was added.
    FieldAdded(FieldContract),
    /// A field was removed.
    FieldRemoved(FieldContract),
    /// A field's type changed.
    FieldRetyped {
        /// The field.
        field: String,
        /// The old type.
        old: String,
        /// The new type.
        new: String,
    },
    /// A field became nullable or stopped being nullable.
    FieldNullability {
        /// The field.
        field: String,
        /// Whether it is nullable now.
        nullable: bool,
    },
    /// A field's default changed.
    FieldDefault {
        /// The field.
        field: String,
        /// The old default (JSON text).
        old: Option<String>,
        /// The new default (JSON text).
        new: Option<String>,
    },
    /// A field's `since` changed (its backport rule moved).
    FieldSince {
        /// The field.
        field: String,
        /// The old `since`.
        old: Option<Version>,
        /// The new `since`.
        new: Option<Version>,
    },
    /// A field's relationship table changed.
    FieldRelationships {
        /// The field.
        field: String,
        /// The old table.
        old: Vec<(Version, Version)>,
        /// The new table.
        new: Vec<(Version, Version)>,
    },
    /// A remotable method was added.
    MethodAdded(MethodContract),
    /// A remotable method was removed.
    MethodRemoved(MethodContract),
    /// A remotable method's signature (kind, arguments or return type) changed.
    MethodSignature {
        /// The old method.
        old: MethodContract,
        /// The new method.
        new: MethodContract,
    },
    /// A list's `child_versions` changed.
    ChildVersions {
        /// The old table.
        old: Vec<(Version, Version)>,
        /// The new table.
        new: Vec<(Version, Version)>,
    },
    /// The serial namespace (the prefix of every primitive key) changed: a peer that
    /// reads the old keys finds no object at all, whatever the version says.
    SerialNamespace {
        /// The old serial namespace.
        old: String,
        /// The new serial namespace.
        new: String,
    },
}

/// `new` keeps every entry of `old` and only adds entries after them.
fn only_appended(old: &[(Version, Version)], new: &[(Version, Version)]) -> bool {
    new.len() >= old.len() && new[..old.len()] == *old
}

impl ContractChange {
    /// The smallest version step that makes this change safe for older peers.
    pub fn required_bump(&self) -> Bump {
        match self {
            ContractChange::FieldAdded(_)
            | ContractChange::FieldDefault { .. }
            | ContractChange::FieldSince { .. }
            | ContractChange::MethodAdded(_) => Bump::Minor,
            ContractChange::FieldRelationships { old, new, .. }
            | ContractChange::ChildVersions { old, new } => {
                if only_appended(old, new) {
                    Bump::Minor
                } else {
                    Bump::Major
                }
            }
            ContractChange::FieldRemoved(_)
            | ContractChange::FieldRetyped { .. }
            | ContractChange::FieldNullability { .. }
            | ContractChange::MethodRemoved(_)
            | ContractChange::MethodSignature { .. }
            | ContractChange::SerialNamespace { .. } => Bump::Major,
        }
    }
}

fn opt<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "none".into(), |v| v.to_string())
}

fn table(t: &[(Version, Version)]) -> String {
    let items: Vec<String> = t.iter().map(|(a, b)| format!("{a}->{b}")).collect();
    format!("[{}]", items.join(", "))
}

impl fmt::Display for ContractChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContractChange::FieldAdded(x) => write!(
                f,
                "field added: {} {}{}{} (since {})",
                x.name,
                x.ty,
                if x.nullable { " nullable" } else { "" },
                x.default
                    .as_ref()
                    .map_or_else(String::new, |d| format!(" default {d}")),
                opt(&x.since)
            ),
            ContractChange::FieldRemoved(x) => write!(f, "field removed: {} {}", x.name, x.ty),
            ContractChange::FieldRetyped { field, old, new } => {
                write!(f, "field retyped: {field} {old} -> {new}")
            }
            ContractChange::FieldNullability { field, nullable } => write!(
                f,
                "field nullability changed: {field} is {}",
                if *nullable {
                    "now nullable"
                } else {
                    "no longer nullable"
                }
            ),
            ContractChange::FieldDefault { field, old, new } => write!(
                f,
                "field default changed: {field} {} -> {}",
                opt(old),
                opt(new)
            ),
            ContractChange::FieldSince { field, old, new } => write!(
                f,
                "field since changed: {field} {} -> {}",
                opt(old),
                opt(new)
            ),
            ContractChange::FieldRelationships { field, old, new } => write!(
                f,
                "field relationships changed: {field} {} -> {}",
                table(old),
                table(new)
            ),
            ContractChange::MethodAdded(m) => write!(f, "method added: {}", m.signature()),
            ContractChange::MethodRemoved(m) => write!(f, "method removed: {}", m.signature()),
            ContractChange::MethodSignature { old, new } => write!(
                f,
                "method signature changed: {} -> {}",
                old.signature(),
                new.signature()
            ),
            ContractChange::ChildVersions { old, new } => write!(
                f,
                "child_versions changed: {} -> {}",
                table(old),
                table(new)
            ),
            ContractChange::SerialNamespace { old, new } => write!(
                f,
                "serial namespace changed: {old} -> {new} (peers reading {old}.* keys \
                 cannot read the objects at any version)"
            ),
        }
    }
}

/// Every difference between two contracts of one class: the serial namespace, then
/// fields, methods and child versions; each list in name order.
pub fn changes(old: &ObjectContract, new: &ObjectContract) -> Vec<ContractChange> {
    let mut out = Vec::new();
    if old.serial_namespace != new.serial_namespace {
        out.push(ContractChange::SerialNamespace {
            old: old.serial_namespace.clone(),
            new: new.serial_namespace.clone(),
        });
    }
    for o in &old.fields {
        match new.field(&o.name) {
            None => out.push(ContractChange::FieldRemoved(o.clone())),
            Some(n) => {
                let field = || o.name.clone();
                if o.ty != n.ty {
                    out.push(ContractChange::FieldRetyped {
                        field: field(),
                        old: o.ty.clone(),
                        new: n.ty.clone(),
                    });
                }
                if o.nullable != n.nullable {
                    out.push(ContractChange::FieldNullability {
                        field: field(),
                        nullable: n.nullable,
                    });
                }
                if o.default != n.default {
                    out.push(ContractChange::FieldDefault {
                        field: field(),
                        old: o.default.clone(),
                        new: n.default.clone(),
                    });
                }
                if o.since != n.since {
                    out.push(ContractChange::FieldSince {
                        field: field(),
                        old: o.since,
                        new: n.since,
                    });
                }
                if o.relationships != n.relationships {
                    out.push(ContractChange::FieldRelationships {
                        field: field(),
                        old: o.relationships.clone(),
                        new: n.relationships.clone(),
                    });
                }
            }
        }
    }
    for n in &new.fields {
        if old.field(&n.name).is_none() {
            out.push(ContractChange::FieldAdded(n.clone()));
        }
    }
    for o in &old.methods {
        match new.method(&o.name) {
            None => out.push(ContractChange::MethodRemoved(o.clone())),
            Some(n) if n != o => out.push(ContractChange::MethodSignature {
                old: o.clone(),
                new: n.clone(),
            }),
            Some(_) => {}
        }
    }
    for n in &new.methods {
        if old.method(&n.name).is_none() {
            out.push(ContractChange::MethodAdded(n.clone()));
        }
    }
    if old.child_versions != new.child_versions {
        out.push(ContractChange::ChildVersions {
            old: old.child_versions.clone(),
            new: new.child_versions.clone(),
        });
    }
    out
}

/// A rule broken by going from one contract to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The version is lower than before.
    VersionWentBackwards {
        /// The old version.
        old: Version,
        /// The new version.
        new: Version,
    },
    /// The contract changed but the version did not (OVO's open hole: a hash updated
    /// without a bump).
    ChangedWithoutBump,
    /// A change needs a bigger step than the one made.
    BumpTooSmall {
        /// The change, as text.
        change: String,
        /// What it needs.
        needs: Bump,
    },
    /// A field added in a minor step has no `since`, or a `since` outside the step:
    /// backporting to the old version would not drop it.
    AddedFieldSince {
        /// The field.
        field: String,
        /// What the field declares.
        since: Option<Version>,
    },
    /// The recorded fingerprint does not match the recorded contract (the lock was
    /// edited by hand, or written by another fingerprint algorithm).
    FingerprintMismatch {
        /// The old fingerprint.
        old: String,
        /// The new fingerprint.
        new: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::VersionWentBackwards { old, new } => {
                write!(f, "version went backwards: {old} -> {new}")
            }
            Problem::ChangedWithoutBump => {
                f.write_str("the contract changed but VERSION did not: bump the version")
            }
            Problem::BumpTooSmall { change, needs } => {
                write!(f, "{change}: needs {needs}")
            }
            Problem::AddedFieldSince { field, since } => write!(
                f,
                "field {field} was added in this step but declares since {}: set \
                 #[verso(since = \"<new version>\")] so a backport to the old version drops it",
                opt(since)
            ),
            Problem::FingerprintMismatch { old, new } => write!(
                f,
                "fingerprint {old} -> {new} with the same recorded contract: the lock was \
                 edited by hand or written by another algorithm; regenerate it"
            ),
        }
    }
}

/// How one class moved between two contracts: what changed, the step made, and the
/// rules broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assessment {
    /// What changed.
    pub changes: Vec<ContractChange>,
    /// The step made (`None`: backwards).
    pub step: Option<Bump>,
    /// The step the changes need.
    pub required: Bump,
    /// The rules broken; empty when the move is safe.
    pub problems: Vec<Problem>,
}

impl Assessment {
    /// Whether the contract is the same.
    pub fn unchanged(&self) -> bool {
        self.changes.is_empty() && self.problems.is_empty()
    }
}

/// Compares `old` and `new` and judges the version step between them: the contract
/// changed without a bump; a step too small for a change (a removed or retyped field, a
/// changed signature, need a major bump); a field added in a minor step without a
/// matching `since`; a version that went backwards.
///
/// ```
/// use verso::fingerprint::{assess, ObjectContract, Problem};
/// use verso::{Field, ObjectMeta, VersionedObject};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.0")]
/// pub struct Widget {
///     pub id: Field<i64>,
///     pub meta: ObjectMeta,
/// }
/// let old = ObjectContract::from_schema(Widget::schema());
/// let mut schema = Widget::schema().clone();
/// schema.fields.pop();
/// let new = ObjectContract::from_schema(&schema);
/// let a = assess(&old, &new);
/// assert!(a.problems.contains(&Problem::ChangedWithoutBump));
/// ```
pub fn assess(old: &ObjectContract, new: &ObjectContract) -> Assessment {
    let changes = changes(old, new);
    let step = version_step(old.version, new.version);
    let required = changes
        .iter()
        .map(ContractChange::required_bump)
        .max()
        .unwrap_or(Bump::None);
    let mut problems = Vec::new();
    match step {
        None => problems.push(Problem::VersionWentBackwards {
            old: old.version,
            new: new.version,
        }),
        Some(Bump::None) if !changes.is_empty() => problems.push(Problem::ChangedWithoutBump),
        Some(Bump::None) if old.fingerprint != new.fingerprint => {
            problems.push(Problem::FingerprintMismatch {
                old: old.fingerprint.clone(),
                new: new.fingerprint.clone(),
            })
        }
        Some(Bump::None) | Some(Bump::Major) => {}
        Some(Bump::Minor) => {
            for c in &changes {
                if c.required_bump() == Bump::Major {
                    problems.push(Problem::BumpTooSmall {
                        change: c.to_string(),
                        needs: Bump::Major,
                    });
                }
                if let ContractChange::FieldAdded(f) = c {
                    let in_step = f.since.is_some_and(|s| s > old.version && s <= new.version);
                    if !in_step {
                        problems.push(Problem::AddedFieldSince {
                            field: f.name.clone(),
                            since: f.since,
                        });
                    }
                }
            }
        }
    }
    Assessment {
        changes,
        step,
        required,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enum_field(ovo_repr: OvoRepr, values: &'static [&'static str]) -> FieldSchema {
        FieldSchema {
            name: "kind",
            ty: FieldType::Enum(values),
            nullable: false,
            default: None,
            since: None,
            relationships: Vec::new(),
            child: None,
            ovo_repr,
        }
    }

    /// The three ways a Python service declares an enum field, as OVO prints them
    /// (Cyborg 17 uses all three; its fingerprints are checked against the real package
    /// in `apps/accel/cyborg17/tests/cyborg.rs`).
    #[test]
    fn enum_fields_print_as_their_python_declaration_does() {
        let u = UNSPECIFIED;
        assert_eq!(
            ovo_field_repr(&enum_field(OvoRepr::Standard, &["a", "b"])),
            format!("Enum(default={u},nullable=False,valid_values=('a', 'b'))")
        );
        assert_eq!(
            ovo_field_repr(&enum_field(OvoRepr::EnumClass("ARQState"), &["a"])),
            format!("ARQState(default={u},nullable=False,valid_values=('a',))")
        );
        assert_eq!(
            ovo_field_repr(&enum_field(OvoRepr::AutoTyped, &["a", "b"])),
            format!("Enum(default={u},nullable=False)")
        );
        assert_eq!(
            ovo_field_repr(&enum_field(OvoRepr::ValuesAsText, &["PCI"])),
            format!("Enum(default={u},nullable=False,valid_values=PCI)")
        );
    }

    #[test]
    fn md5_matches_rfc_1321_test_suite() {
        let cases = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                "abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(md5_hex(input.as_bytes()), want, "md5({input:?})");
        }
    }

    #[test]
    fn python_repr_of_strings_and_tuples() {
        assert_eq!(py_repr_str("a"), "'a'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("a'\"b"), "'a\\'\"b'");
        assert_eq!(py_repr_str("a\\b\n"), "'a\\\\b\\n'");
        assert_eq!(py_repr_tuple(&[]), "()");
        assert_eq!(py_repr_tuple(&["x"]), "('x',)");
        assert_eq!(py_repr_tuple(&["x", "y"]), "('x', 'y')");
    }

    #[test]
    fn type_text_is_normalised() {
        assert_eq!(
            normalise_type("std :: string :: String"),
            "std::string::String"
        );
        assert_eq!(normalise_type("Vec < Option < i64 > >"), "Vec<Option<i64>>");
        assert_eq!(normalise_type("& str"), "&str");
        assert_eq!(normalise_type("(i64 , bool)"), "(i64, bool)");
    }
}
