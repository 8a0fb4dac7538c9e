//! What an RPC API declares, as plain data: each method ([`MethodSpec`]) with its
//! arguments ([`ArgSpec`], [`ArgType`], [`Requirement`]), an endpoint's whole
//! declaration ([`EndpointSpec`], serializable for the lock file), and the rules a call is
//! checked by against them. The typed methods (`method`) and the endpoints (`endpoint`)
//! are both built on these; this module knows neither.

use crate::message::json_type;
use crate::RpcError;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use verso::Version;

/// The JSON type an argument must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ArgType {
    /// Any JSON value.
    Any,
    /// `true` / `false`.
    Bool,
    /// An integer.
    Int,
    /// A number (integers are accepted).
    Float,
    /// A string.
    String,
    /// A list.
    List,
    /// An object (dict).
    Dict,
    /// A versioned object primitive of any serial namespace (an object with a string
    /// `versioned_object.name`, or a family's own key such as `cyborg_object.name`).
    Object,
}

impl ArgType {
    /// Whether `v` has this type (`null` is handled by [`ArgSpec::nullable`]).
    pub(crate) fn matches(self, v: &Value) -> bool {
        match self {
            ArgType::Any => true,
            ArgType::Bool => v.is_boolean(),
            ArgType::Int => v.is_i64() || v.is_u64(),
            ArgType::Float => v.is_number(),
            ArgType::String => v.is_string(),
            ArgType::List => v.is_array(),
            ArgType::Dict => v.is_object(),
            ArgType::Object => v
                .as_object()
                .and_then(verso::primitive::name_of)
                .is_some_and(Value::is_string),
        }
    }
}

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArgType::Any => "any value",
            ArgType::Bool => "a boolean",
            ArgType::Int => "an integer",
            ArgType::Float => "a number",
            ArgType::String => "a string",
            ArgType::List => "a list",
            ArgType::Dict => "an object",
            ArgType::Object => "a versioned object primitive",
        })
    }
}

/// Whether an argument must be sent, or else what the server fills in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Requirement {
    /// The caller must send it.
    Required,
    /// The server fills `default` when the caller does not send it.
    Optional {
        /// The value used when the argument is absent.
        default: Value,
    },
}

/// One argument of a method.
///
/// ```
/// use serde_json::json;
/// use verso::Version;
/// use verso_rpc::{ArgSpec, ArgType};
/// let a = ArgSpec::optional("verbose", ArgType::Bool, json!(false)).since(Version::new(1, 2));
/// assert!(!a.is_required());
/// assert_eq!(a.since, Some(Version::new(1, 2)));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgSpec {
    /// The argument's name.
    pub name: String,
    /// Its JSON type.
    #[serde(rename = "type")]
    pub ty: ArgType,
    /// Whether `null` is accepted.
    #[serde(default)]
    pub nullable: bool,
    /// Required, or optional with a default.
    pub requirement: Requirement,
    /// The version that added it; `None` means it came with the method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Version>,
}

impl ArgSpec {
    /// A required argument.
    pub fn required(name: impl Into<String>, ty: ArgType) -> Self {
        ArgSpec {
            name: name.into(),
            ty,
            nullable: false,
            requirement: Requirement::Required,
            since: None,
        }
    }

    /// An optional argument, filled with `default` when absent.
    pub fn optional(name: impl Into<String>, ty: ArgType, default: impl Into<Value>) -> Self {
        ArgSpec {
            name: name.into(),
            ty,
            nullable: false,
            requirement: Requirement::Optional {
                default: default.into(),
            },
            since: None,
        }
    }

    /// Accepts `null` as well.
    pub fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }

    /// Records the version that added the argument (it must then be optional).
    pub fn since(mut self, version: Version) -> Self {
        self.since = Some(version);
        self
    }

    /// Whether the caller must send it.
    pub fn is_required(&self) -> bool {
        matches!(self.requirement, Requirement::Required)
    }

    pub(crate) fn accepts(&self, v: &Value) -> bool {
        (self.nullable && v.is_null()) || self.ty.matches(v)
    }
}

/// One method: name, the version that added it, and its arguments.
///
/// ```
/// use verso::Version;
/// use verso_rpc::{ArgSpec, ArgType, MethodSpec};
/// let m = MethodSpec::new("get_by_hostname", Version::new(1, 0))
///     .arg(ArgSpec::required("hostname", ArgType::String));
/// assert_eq!(m.args[0].name, "hostname");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodSpec {
    /// The method's name on the wire.
    pub name: String,
    /// The endpoint version that added the method.
    pub since: Version,
    /// Its arguments, in declaration order.
    pub args: Vec<ArgSpec>,
}

impl MethodSpec {
    /// A method with no arguments yet.
    pub fn new(name: impl Into<String>, since: Version) -> Self {
        MethodSpec {
            name: name.into(),
            since,
            args: Vec::new(),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: ArgSpec) -> Self {
        self.args.push(arg);
        self
    }

    /// The version that added `arg`: its own `since`, or the method's.
    pub fn arg_since(&self, arg: &ArgSpec) -> Version {
        arg.since.unwrap_or(self.since).max(self.since)
    }

    /// Checks a call's arguments against the declaration, for a call sent at `version`:
    /// unknown, missing-required, added-later and wrongly-typed arguments are refused;
    /// absent optional ones are filled with their default.
    pub(crate) fn check_args(
        &self,
        version: Version,
        mut args: Map<String, Value>,
    ) -> Result<Map<String, Value>, RpcError> {
        if let Some(unknown) = args
            .keys()
            .find(|k| !self.args.iter().any(|a| &a.name == *k))
        {
            return Err(RpcError::UnknownArgument {
                method: self.name.clone(),
                argument: unknown.clone(),
            });
        }
        for spec in &self.args {
            match args.get(&spec.name) {
                Some(v) => {
                    let since = self.arg_since(spec);
                    if version < since {
                        return Err(RpcError::ArgumentNotInVersion {
                            method: self.name.clone(),
                            argument: spec.name.clone(),
                            since,
                            requested: version,
                        });
                    }
                    if !spec.accepts(v) {
                        return Err(RpcError::InvalidArgument {
                            method: self.name.clone(),
                            argument: spec.name.clone(),
                            expected: expected(spec),
                            found: json_type(v).into(),
                        });
                    }
                }
                None => match &spec.requirement {
                    Requirement::Required => {
                        return Err(RpcError::MissingArgument {
                            method: self.name.clone(),
                            argument: spec.name.clone(),
                        })
                    }
                    Requirement::Optional { default } => {
                        args.insert(spec.name.clone(), default.clone());
                    }
                },
            }
        }
        Ok(args)
    }
}

/// What `spec` takes, as a refusal names it (`string or null`).
pub(crate) fn expected(spec: &ArgSpec) -> String {
    if spec.nullable {
        format!("{} or null", spec.ty)
    } else {
        spec.ty.to_string()
    }
}

/// The declaration of an endpoint: namespace, version, methods. Plain data for listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndpointSpec {
    /// The namespace, or `None`.
    pub namespace: Option<String>,
    /// The version the endpoint serves (it accepts the same major, minor <= this).
    pub version: Version,
    /// Its methods, in declaration order.
    pub methods: Vec<MethodSpec>,
}

impl MethodSpec {
    /// The version that added argument `name`, if the method has it.
    pub fn arg_version(&self, name: &str) -> Option<Version> {
        self.args
            .iter()
            .find(|a| a.name == name)
            .map(|a| self.arg_since(a))
    }

    /// The version a call with these encoded arguments is sent at, and the arguments to
    /// send: the method's version, raised to that of each argument whose value differs
    /// from its default. Arguments newer than that version hold their defaults, which the
    /// server fills in, so they are left out (an older server does not know them).
    pub(crate) fn version_for(&self, args: &mut Map<String, Value>) -> Version {
        let mut version = self.since;
        for spec in &self.args {
            let since = self.arg_since(spec);
            if since <= version {
                continue;
            }
            let at_default = match (&spec.requirement, args.get(&spec.name)) {
                (_, None) => true,
                (Requirement::Optional { default }, Some(v)) => v == default,
                (Requirement::Required, Some(_)) => false,
            };
            if !at_default {
                version = since;
            }
        }
        if self.args.iter().any(|a| self.arg_since(a) > version) {
            for spec in &self.args {
                if self.arg_since(spec) > version {
                    args.remove(&spec.name);
                }
            }
        }
        version
    }
}
