//! RPC API contracts: what a lock file records of an endpoint, and how two contracts
//! of one API compare.
//!
//! An API's contract is its version and every method with its arguments (name, type,
//! required or optional with a default, nullable, the version that added it). The
//! rules are oslo.messaging's: a client capped at an older version must keep working,
//! so removing a method or argument, making an argument required, or changing its
//! type needs a major bump; a new method or a new *optional* argument needs a minor
//! bump and must say it came with the new version.

use serde::{Deserialize, Serialize};
use std::fmt;
use verso::fingerprint::{version_step, Bump};
use verso::Version;
use verso_rpc::{EndpointSpec, Requirement};

/// One argument of an RPC method, as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcArgContract {
    /// The argument name.
    pub name: String,
    /// Its JSON type (`int`, `string`, `dict`, `object`, `any`, ...).
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether the caller must send it.
    pub required: bool,
    /// Whether `null` is accepted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nullable: bool,
    /// The default of an optional argument, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The version that added the argument, when later than its method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Version>,
}

/// One RPC method, as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcMethodContract {
    /// The method name.
    pub name: String,
    /// The API version that added it.
    pub since: Version,
    /// Its arguments, in declaration order.
    #[serde(default)]
    pub args: Vec<RpcArgContract>,
}

impl RpcMethodContract {
    fn arg(&self, name: &str) -> Option<&RpcArgContract> {
        self.args.iter().find(|a| a.name == name)
    }

    /// The version that added `arg`: its own `since`, or the method's.
    pub fn arg_since(&self, arg: &RpcArgContract) -> Version {
        arg.since.unwrap_or(self.since).max(self.since)
    }
}

/// The contract of one RPC API (one endpoint).
///
/// ```
/// use verso::Version;
/// use verso_rpc::{ArgSpec, ArgType, EndpointSpec, MethodSpec};
/// use verso_cli::rpc::RpcContract;
/// let spec = EndpointSpec {
///     namespace: None,
///     version: Version::new(1, 1),
///     methods: vec![MethodSpec::new("ping", Version::new(1, 0))
///         .arg(ArgSpec::required("arg", ArgType::Any))],
/// };
/// let c = RpcContract::from_spec(&spec);
/// assert_eq!(c.methods[0].args[0].ty, "any");
/// assert!(c.methods[0].args[0].required);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcContract {
    /// The version the API serves.
    pub version: Version,
    /// The endpoint namespace, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The methods, sorted by name.
    #[serde(default)]
    pub methods: Vec<RpcMethodContract>,
}

impl RpcContract {
    /// The contract of an endpoint's declaration.
    pub fn from_spec(spec: &EndpointSpec) -> Self {
        let mut methods: Vec<RpcMethodContract> = spec
            .methods
            .iter()
            .map(|m| RpcMethodContract {
                name: m.name.clone(),
                since: m.since,
                args: m
                    .args
                    .iter()
                    .map(|a| {
                        let (required, default) = match &a.requirement {
                            Requirement::Required => (true, None),
                            Requirement::Optional { default } => (false, Some(default.to_string())),
                        };
                        RpcArgContract {
                            name: a.name.clone(),
                            ty: serde_json::to_value(a.ty)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_owned))
                                .unwrap_or_else(|| format!("{:?}", a.ty).to_lowercase()),
                            required,
                            nullable: a.nullable,
                            default,
                            since: a.since.filter(|s| *s > m.since),
                        }
                    })
                    .collect(),
            })
            .collect();
        methods.sort_by(|a, b| a.name.cmp(&b.name));
        RpcContract {
            version: spec.version,
            namespace: spec.namespace.clone(),
            methods,
        }
    }

    fn method(&self, name: &str) -> Option<&RpcMethodContract> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// One difference between two contracts of an RPC API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcChange {
    /// The endpoint namespace changed (old clients address the old one).
    Namespace {
        /// The old namespace.
        old: Option<String>,
        /// The new namespace.
        new: Option<String>,
    },
    /// A method was added.
    MethodAdded(RpcMethodContract),
    /// A method was removed.
    MethodRemoved(RpcMethodContract),
    /// A method's `since` changed.
    MethodSince {
        /// The method.
        method: String,
        /// The old version.
        old: Version,
        /// The new version.
        new: Version,
    },
    /// An argument was added.
    ArgAdded {
        /// The method.
        method: String,
        /// The argument.
        arg: RpcArgContract,
    },
    /// An argument was removed.
    ArgRemoved {
        /// The method.
        method: String,
        /// The argument.
        arg: RpcArgContract,
    },
    /// An argument became required or optional.
    ArgRequirement {
        /// The method.
        method: String,
        /// The argument.
        arg: String,
        /// Whether it is required now.
        required: bool,
    },
    /// An argument's type changed.
    ArgRetyped {
        /// The method.
        method: String,
        /// The argument.
        arg: String,
        /// The old type.
        old: String,
        /// The new type.
        new: String,
    },
    /// An argument started or stopped accepting `null`.
    ArgNullability {
        /// The method.
        method: String,
        /// The argument.
        arg: String,
        /// Whether it accepts `null` now.
        nullable: bool,
    },
    /// An optional argument's default, or its `since`, changed.
    ArgDetail {
        /// The method.
        method: String,
        /// The argument.
        arg: String,
        /// What changed, as text.
        detail: String,
    },
}

impl RpcChange {
    /// The smallest version step that keeps clients at the old version working.
    pub fn required_bump(&self) -> Bump {
        match self {
            RpcChange::MethodAdded(_)
            | RpcChange::MethodSince { .. }
            | RpcChange::ArgDetail { .. } => Bump::Minor,
            RpcChange::ArgAdded { arg, .. } if !arg.required => Bump::Minor,
            RpcChange::ArgRequirement { required, .. } if !required => Bump::Minor,
            RpcChange::ArgNullability { nullable, .. } if *nullable => Bump::Minor,
            RpcChange::Namespace { .. }
            | RpcChange::MethodRemoved(_)
            | RpcChange::ArgAdded { .. }
            | RpcChange::ArgRemoved { .. }
            | RpcChange::ArgRequirement { .. }
            | RpcChange::ArgRetyped { .. }
            | RpcChange::ArgNullability { .. } => Bump::Major,
        }
    }
}

fn arg_text(a: &RpcArgContract) -> String {
    let mut s = format!("{}: {}", a.name, a.ty);
    if a.nullable {
        s.push_str(" nullable");
    }
    match &a.default {
        Some(d) => s.push_str(&format!(" optional (default {d})")),
        None if a.required => s.push_str(" required"),
        None => s.push_str(" optional"),
    }
    if let Some(v) = a.since {
        s.push_str(&format!(" since {v}"));
    }
    s
}

fn method_text(m: &RpcMethodContract) -> String {
    let args: Vec<String> = m.args.iter().map(arg_text).collect();
    format!("{}({}) since {}", m.name, args.join(", "), m.since)
}

impl fmt::Display for RpcChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = |n: &Option<String>| n.clone().unwrap_or_else(|| "none".into());
        match self {
            RpcChange::Namespace { old, new } => {
                write!(f, "namespace changed: {} -> {}", ns(old), ns(new))
            }
            RpcChange::MethodAdded(m) => write!(f, "method added: {}", method_text(m)),
            RpcChange::MethodRemoved(m) => write!(f, "method removed: {}", method_text(m)),
            RpcChange::MethodSince { method, old, new } => {
                write!(f, "method {method}: since changed {old} -> {new}")
            }
            RpcChange::ArgAdded { method, arg } => {
                write!(f, "method {method}: argument added: {}", arg_text(arg))
            }
            RpcChange::ArgRemoved { method, arg } => {
                write!(f, "method {method}: argument removed: {}", arg_text(arg))
            }
            RpcChange::ArgRequirement {
                method,
                arg,
                required,
            } => write!(
                f,
                "method {method}: argument {arg} made {}",
                if *required { "required" } else { "optional" }
            ),
            RpcChange::ArgRetyped {
                method,
                arg,
                old,
                new,
            } => write!(f, "method {method}: argument {arg} retyped {old} -> {new}"),
            RpcChange::ArgNullability {
                method,
                arg,
                nullable,
            } => write!(
                f,
                "method {method}: argument {arg} {}",
                if *nullable {
                    "now accepts null"
                } else {
                    "no longer accepts null"
                }
            ),
            RpcChange::ArgDetail {
                method,
                arg,
                detail,
            } => write!(f, "method {method}: argument {arg}: {detail}"),
        }
    }
}

/// Every difference between two contracts of one RPC API.
pub fn rpc_changes(old: &RpcContract, new: &RpcContract) -> Vec<RpcChange> {
    let mut out = Vec::new();
    if old.namespace != new.namespace {
        out.push(RpcChange::Namespace {
            old: old.namespace.clone(),
            new: new.namespace.clone(),
        });
    }
    for o in &old.methods {
        let Some(n) = new.method(&o.name) else {
            out.push(RpcChange::MethodRemoved(o.clone()));
            continue;
        };
        let method = || o.name.clone();
        if o.since != n.since {
            out.push(RpcChange::MethodSince {
                method: method(),
                old: o.since,
                new: n.since,
            });
        }
        for oa in &o.args {
            let Some(na) = n.arg(&oa.name) else {
                out.push(RpcChange::ArgRemoved {
                    method: method(),
                    arg: oa.clone(),
                });
                continue;
            };
            let arg = || oa.name.clone();
            if oa.ty != na.ty {
                out.push(RpcChange::ArgRetyped {
                    method: method(),
                    arg: arg(),
                    old: oa.ty.clone(),
                    new: na.ty.clone(),
                });
            }
            if oa.required != na.required {
                out.push(RpcChange::ArgRequirement {
                    method: method(),
                    arg: arg(),
                    required: na.required,
                });
            }
            if oa.nullable != na.nullable {
                out.push(RpcChange::ArgNullability {
                    method: method(),
                    arg: arg(),
                    nullable: na.nullable,
                });
            }
            if oa.default != na.default && !oa.required && !na.required {
                out.push(RpcChange::ArgDetail {
                    method: method(),
                    arg: arg(),
                    detail: format!(
                        "default changed {} -> {}",
                        oa.default.as_deref().unwrap_or("none"),
                        na.default.as_deref().unwrap_or("none")
                    ),
                });
            }
            if o.arg_since(oa) != n.arg_since(na) {
                out.push(RpcChange::ArgDetail {
                    method: method(),
                    arg: arg(),
                    detail: format!("since changed {} -> {}", o.arg_since(oa), n.arg_since(na)),
                });
            }
        }
        for na in &n.args {
            if o.arg(&na.name).is_none() {
                out.push(RpcChange::ArgAdded {
                    method: method(),
                    arg: na.clone(),
                });
            }
        }
    }
    for n in &new.methods {
        if old.method(&n.name).is_none() {
            out.push(RpcChange::MethodAdded(n.clone()));
        }
    }
    out
}

/// How one RPC API moved between two contracts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcAssessment {
    /// What changed.
    pub changes: Vec<RpcChange>,
    /// The step made (`None`: backwards).
    pub step: Option<Bump>,
    /// The rules broken, as sentences; empty when the move is safe.
    pub problems: Vec<String>,
}

/// Compares two contracts of one API and judges the version step between them.
///
/// ```
/// use verso::Version;
/// use verso_cli::rpc::{assess_rpc, RpcContract};
/// let old = RpcContract { version: Version::new(1, 0), namespace: None, methods: vec![] };
/// let mut new = old.clone();
/// new.version = Version::new(0, 9);
/// assert!(assess_rpc(&old, &new).problems[0].contains("backwards"));
/// ```
pub fn assess_rpc(old: &RpcContract, new: &RpcContract) -> RpcAssessment {
    let changes = rpc_changes(old, new);
    let step = version_step(old.version, new.version);
    let mut problems = Vec::new();
    match step {
        None => problems.push(format!(
            "version went backwards: {} -> {}",
            old.version, new.version
        )),
        Some(Bump::None) if !changes.is_empty() => problems.push(format!(
            "methods or arguments changed but the RPC version is still {}: bump it",
            new.version
        )),
        Some(Bump::None) | Some(Bump::Major) => {}
        Some(Bump::Minor) => {
            for c in &changes {
                if c.required_bump() == Bump::Major {
                    problems.push(format!("{c}: needs a major version bump"));
                }
                match c {
                    RpcChange::MethodAdded(m) if m.since <= old.version => problems.push(format!(
                        "method {} is new but declares since {}: servers at {} do not have it; \
                         declare it since {}",
                        m.name, m.since, old.version, new.version
                    )),
                    RpcChange::ArgAdded { method, arg } if !arg.required => {
                        let since = new.method(method).map_or(old.version, |m| m.arg_since(arg));
                        if since <= old.version {
                            problems.push(format!(
                                "argument {} of {method} is new but declares since {since}: \
                                 servers at {} reject it; declare it `.since({})`",
                                arg.name, old.version, new.version
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    RpcAssessment {
        changes,
        step,
        problems,
    }
}
