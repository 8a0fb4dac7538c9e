//! The error kinds the attach-handle methods fail with, as an agent matches on them.
//!
//! A remotable body fails with a [`CallError::Method`] whose `kind` names the error; it
//! crosses the wire as oslo's failure form and comes back as the same kind. The
//! conductor's database errors keep the names its RPC API uses (`StaleHandle`,
//! `HandleInUse`, `NotCleaning`, `NotFound`); a gated request carries the whole
//! [`NotSupportedBeforeFinalization`] in its fields.

use serde_json::Value;
use verso::indirection::CallError;
use verso_upgrade::NotSupportedBeforeFinalization;

/// The handle changed since the caller read it: read again (never overwrite).
pub const STALE_HANDLE: &str = "StaleHandle";
/// The handle is allocated to an instance.
pub const HANDLE_IN_USE: &str = "HandleInUse";
/// A cleanup transition for a handle that is not (any more) in `cleaning`.
pub const NOT_CLEANING: &str = "NotCleaning";
/// No such handle.
pub const NOT_FOUND: &str = "NotFound";
/// The conductor's database failed.
pub const DATABASE_ERROR: &str = "DatabaseError";
/// A stored record does not parse (a UUID, type or state the model does not have): an
/// operator must look at the database; retrying cannot help (classified fatal).
pub const CORRUPT_RECORD: &str = "CorruptRecord";
/// The method ran where there is no database (no indirection configured).
pub const NO_STORE: &str = "NoStore";
/// The request needs a component version that is not finalized yet.
pub const NOT_SUPPORTED_BEFORE_FINALIZATION: &str = "NotSupportedBeforeFinalization";

/// What an agent does about a failed attach-handle call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandleErrorKind {
    /// Lost a compare-and-swap: read the handle again and decide again.
    Stale,
    /// The handle is allocated.
    InUse,
    /// The handle is no longer in `cleaning`: someone else resolved it.
    NotCleaning,
    /// The handle is gone.
    NotFound,
    /// Refused until the upgrade is finalized.
    NotFinalized(NotSupportedBeforeFinalization),
    /// The call may not have reached the conductor (timeout, broker, restart) or the
    /// conductor's database failed: retry the same call, which lands at most once.
    Retryable,
    /// Anything else: a bug or a configuration error, not retried.
    Fatal,
}

/// Classifies a failed attach-handle call.
pub fn classify(e: &CallError) -> HandleErrorKind {
    match e {
        CallError::Indirection(_) => HandleErrorKind::Retryable,
        CallError::Method { kind, .. } => match kind.as_str() {
            STALE_HANDLE => HandleErrorKind::Stale,
            HANDLE_IN_USE => HandleErrorKind::InUse,
            NOT_CLEANING => HandleErrorKind::NotCleaning,
            NOT_FOUND => HandleErrorKind::NotFound,
            DATABASE_ERROR => HandleErrorKind::Retryable,
            NOT_SUPPORTED_BEFORE_FINALIZATION => {
                not_supported(e).map_or(HandleErrorKind::Fatal, HandleErrorKind::NotFinalized)
            }
            _ => HandleErrorKind::Fatal,
        },
        _ => HandleErrorKind::Fatal,
    }
}

/// The refusal as a call error: its fields are the typed error, so the caller gets it
/// back with [`not_supported`].
pub fn refused(e: &NotSupportedBeforeFinalization) -> CallError {
    let fields = match serde_json::to_value(e) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    CallError::Method {
        kind: NOT_SUPPORTED_BEFORE_FINALIZATION.to_owned(),
        message: e.to_string(),
        fields,
    }
}

/// The typed refusal inside a call error, if it is one.
pub fn not_supported(e: &CallError) -> Option<NotSupportedBeforeFinalization> {
    match e {
        CallError::Method { kind, fields, .. } if kind == NOT_SUPPORTED_BEFORE_FINALIZATION => {
            serde_json::from_value(Value::Object(fields.clone())).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_survives_its_call_error_form() {
        let e = NotSupportedBeforeFinalization {
            component: "accel".into(),
            feature: "unmanaged PCI attach handles".into(),
            required: 2,
            required_name: "DriverFeatures".into(),
            apparent: 1,
        };
        let call = refused(&e);
        assert_eq!(classify(&call), HandleErrorKind::NotFinalized(e.clone()));
        assert_eq!(not_supported(&call), Some(e));
        assert_eq!(
            classify(&CallError::method(STALE_HANDLE, "x")),
            HandleErrorKind::Stale
        );
        assert_eq!(
            classify(&CallError::method("Whatever", "x")),
            HandleErrorKind::Fatal
        );
    }
}
