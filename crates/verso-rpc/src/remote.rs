//! [`RemoteError`]: an error raised by an endpoint, in oslo.messaging's failure form, and
//! [`RemoteException`], which turns your own error types into one and back.
//!
//! On the wire a reply's `failure` is a JSON *string* holding
//! `{"class", "module", "message", "tb", "args", "kwargs"}`; verso keeps the error's fields
//! in `kwargs`, so a verso caller gets the typed value back with [`RemoteError::downcast`].

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// An error raised by an endpoint's method, as it crosses the wire.
///
/// ```
/// use verso_rpc::RemoteError;
/// let e = RemoteError::new("DeviceNotFound", "accel.errors", "no device 7")
///     .with_field("device_id", 7);
/// let wire = e.to_failure_string();
/// let back = RemoteError::from_failure_str(&wire)?;
/// assert_eq!(back.kind, "DeviceNotFound");
/// assert_eq!(back.fields["device_id"], 7);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteError {
    /// The error's class name (`class` on the wire), e.g. `DeviceNotFound`.
    #[serde(rename = "class")]
    pub kind: String,
    /// The module that defines it (`module`), e.g. `accel.errors` or `builtins`.
    #[serde(default)]
    pub module: String,
    /// The human-readable message.
    #[serde(default)]
    pub message: String,
    /// Structured fields (`kwargs` on the wire).
    #[serde(rename = "kwargs", default)]
    pub fields: Map<String, Value>,
    /// Positional arguments (`args`); oslo.messaging puts the message here.
    #[serde(default)]
    pub args: Vec<Value>,
    /// Traceback lines (`tb`); a Python server fills them, a verso server sends none.
    #[serde(rename = "tb", default)]
    pub traceback: Vec<String>,
}

impl RemoteError {
    /// An error of class `kind` from `module` with `message` (also its only positional arg,
    /// as oslo.messaging sends it).
    pub fn new(
        kind: impl Into<String>,
        module: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        RemoteError {
            kind: kind.into(),
            module: module.into(),
            args: vec![Value::String(message.clone())],
            message,
            fields: Map::new(),
            traceback: Vec::new(),
        }
    }

    /// Adds one structured field.
    pub fn with_field(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.insert(name.into(), value.into());
        self
    }

    /// Replaces the structured fields.
    pub fn with_fields(mut self, fields: Map<String, Value>) -> Self {
        self.fields = fields;
        self
    }

    /// Builds the remote form of one of your error types.
    pub fn from_exception<E: RemoteException>(e: &E) -> Self {
        let fields = match serde_json::to_value(e) {
            Ok(Value::Object(m)) => m,
            Ok(Value::Null) | Err(_) => Map::new(),
            // Enums and newtypes serialize to non-objects; kwargs must be an object.
            Ok(other) => Map::from_iter([(WRAPPED.to_owned(), other)]),
        };
        RemoteError::new(E::KIND, E::MODULE, e.to_string()).with_fields(fields)
    }

    /// Your error type back, when this error is of its kind and module and its fields
    /// decode; otherwise `None`.
    pub fn downcast<E: RemoteException>(&self) -> Option<E> {
        if self.kind != E::KIND || self.module != E::MODULE {
            return None;
        }
        match self.fields.get(WRAPPED) {
            Some(inner) if self.fields.len() == 1 => serde_json::from_value(inner.clone()).ok(),
            _ => serde_json::from_value(Value::Object(self.fields.clone())).ok(),
        }
    }

    /// Whether this error is of `E`'s kind and module.
    pub fn is<E: RemoteException>(&self) -> bool {
        self.kind == E::KIND && self.module == E::MODULE
    }

    /// The failure as oslo.messaging sends it: a JSON string.
    pub fn to_failure_string(&self) -> String {
        // A struct of strings and JSON values always serializes.
        serde_json::to_string(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Parses a failure string from a reply.
    pub fn from_failure_str(s: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }
}

const WRAPPED: &str = "value";

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.module.is_empty() {
            write!(f, "{}: {}", self.kind, self.message)
        } else {
            write!(f, "{}.{}: {}", self.module, self.kind, self.message)
        }
    }
}

impl std::error::Error for RemoteError {}

/// An error type of yours that crosses the wire as a [`RemoteError`] and comes back typed.
///
/// Its serde form (preferably a struct) becomes the failure's `kwargs`; `Display` becomes
/// the message. Any `RemoteException` converts into `RemoteError` with `?` in a handler.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use verso_rpc::{RemoteError, RemoteException};
///
/// #[derive(Debug, PartialEq, Serialize, Deserialize)]
/// struct DeviceNotFound { device_id: u64 }
/// impl std::fmt::Display for DeviceNotFound {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "no device {}", self.device_id)
///     }
/// }
/// impl RemoteException for DeviceNotFound {
///     const KIND: &'static str = "DeviceNotFound";
///     const MODULE: &'static str = "accel.errors";
/// }
///
/// let wire: RemoteError = DeviceNotFound { device_id: 7 }.into();
/// assert_eq!(wire.message, "no device 7");
/// assert_eq!(wire.downcast::<DeviceNotFound>(), Some(DeviceNotFound { device_id: 7 }));
/// ```
pub trait RemoteException: fmt::Display + Serialize + DeserializeOwned {
    /// The class name on the wire.
    const KIND: &'static str;
    /// The module name on the wire.
    const MODULE: &'static str;
}

impl<E: RemoteException> From<E> for RemoteError {
    fn from(e: E) -> Self {
        RemoteError::from_exception(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum QuotaError {
        Exceeded { used: u32, limit: u32 },
        Disabled,
    }
    impl fmt::Display for QuotaError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "quota: {self:?}")
        }
    }
    impl RemoteException for QuotaError {
        const KIND: &'static str = "QuotaError";
        const MODULE: &'static str = "accel.quota";
    }

    #[test]
    fn enums_round_trip_through_kwargs() {
        for e in [
            QuotaError::Exceeded { used: 3, limit: 2 },
            QuotaError::Disabled,
        ] {
            let wire = RemoteError::from(e).to_failure_string();
            let back = RemoteError::from_failure_str(&wire).expect("parses");
            assert!(back.is::<QuotaError>());
            assert!(back.downcast::<QuotaError>().is_some(), "{wire}");
        }
        let e = RemoteError::from(QuotaError::Exceeded { used: 3, limit: 2 });
        assert_eq!(
            e.downcast::<QuotaError>(),
            Some(QuotaError::Exceeded { used: 3, limit: 2 })
        );
    }

    #[test]
    fn other_kinds_do_not_downcast() {
        let e = RemoteError::new("QuotaError", "elsewhere", "x");
        assert_eq!(e.downcast::<QuotaError>(), None);
    }

    #[test]
    fn failure_string_has_the_oslo_keys() {
        let e = RemoteError::new("NoSuchMethod", "oslo_messaging.rpc.dispatcher", "m");
        let v: Value = serde_json::from_str(&e.to_failure_string()).expect("json");
        let obj = v.as_object().expect("object");
        for k in ["class", "module", "message", "tb", "args", "kwargs"] {
            assert!(obj.contains_key(k), "missing {k}");
        }
        assert_eq!(obj["args"], serde_json::json!(["m"]));
    }

    #[test]
    fn python_failure_parses() {
        let s = r#"{"class": "TypeError", "module": "builtins",
            "message": "ping() missing 1 required positional argument: 'arg'",
            "tb": ["Traceback (most recent call last):\n"],
            "args": ["ping() missing 1 required positional argument: 'arg'"], "kwargs": {}}"#;
        let e = RemoteError::from_failure_str(s).expect("parses");
        assert_eq!(e.kind, "TypeError");
        assert_eq!(e.module, "builtins");
        assert_eq!(e.traceback.len(), 1);
    }
}
