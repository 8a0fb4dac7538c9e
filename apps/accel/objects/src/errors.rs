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

/// The kinds of error accel's conductor answers with, one list for its RPC API
/// (`accel_conductor::service::to_remote`), its object methods (`to_call_error`) and
/// their callers (the API's conductor client, agents' [`classify`]). The wire carries the
/// name ([`ErrorKind::as_str`]); a name not in the list parses to nothing and callers
/// treat it as an internal error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Nothing has that id.
    NotFound,
    /// A unique name is taken.
    Duplicate,
    /// The request's state does not allow the change.
    InvalidTransition,
    /// No free device matches the request on that host.
    NoFreeHandle,
    /// A device profile is still used by requests.
    ProfileInUse,
    /// The handle changed since the caller read it: read again (never overwrite).
    StaleHandle,
    /// The handle is allocated to an instance.
    HandleInUse,
    /// A cleanup transition for a handle that is not (any more) in `cleaning`.
    NotCleaning,
    /// Input refused.
    Invalid,
    /// The conductor's database cannot be reached: a write may have committed.
    DatabaseUnavailable,
    /// The conductor's database failed.
    DatabaseError,
    /// A stored record does not parse (a UUID, type, status or state the model does not
    /// have): an operator must look at the database; retrying cannot help (fatal).
    CorruptRecord,
    /// The method ran where there is no database (no indirection configured).
    NoStore,
    /// The request needs a component version that is not finalized yet.
    NotSupportedBeforeFinalization,
    /// An FPGA could not be programmed (the agent's reason in the message).
    ProgramFailed,
    /// A mediated device (vGPU) could not be made on its host for a bind (the agent's
    /// reason in the message): the request is unbound, its handle free.
    MdevFailed,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 16] = [
        ErrorKind::NotFound,
        ErrorKind::Duplicate,
        ErrorKind::InvalidTransition,
        ErrorKind::NoFreeHandle,
        ErrorKind::ProfileInUse,
        ErrorKind::StaleHandle,
        ErrorKind::HandleInUse,
        ErrorKind::NotCleaning,
        ErrorKind::Invalid,
        ErrorKind::DatabaseUnavailable,
        ErrorKind::DatabaseError,
        ErrorKind::CorruptRecord,
        ErrorKind::NoStore,
        ErrorKind::NotSupportedBeforeFinalization,
        ErrorKind::ProgramFailed,
        ErrorKind::MdevFailed,
    ];

    /// The name on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NotFound",
            ErrorKind::Duplicate => "Duplicate",
            ErrorKind::InvalidTransition => "InvalidTransition",
            ErrorKind::NoFreeHandle => "NoFreeHandle",
            ErrorKind::ProfileInUse => "ProfileInUse",
            ErrorKind::StaleHandle => "StaleHandle",
            ErrorKind::HandleInUse => "HandleInUse",
            ErrorKind::NotCleaning => "NotCleaning",
            ErrorKind::Invalid => "Invalid",
            ErrorKind::DatabaseUnavailable => "DatabaseUnavailable",
            ErrorKind::DatabaseError => "DatabaseError",
            ErrorKind::CorruptRecord => "CorruptRecord",
            ErrorKind::NoStore => "NoStore",
            ErrorKind::NotSupportedBeforeFinalization => "NotSupportedBeforeFinalization",
            ErrorKind::ProgramFailed => "ProgramFailed",
            ErrorKind::MdevFailed => "MdevFailed",
        }
    }

    /// The kind a wire name names, if any.
    pub fn parse(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The handle changed since the caller read it: read again (never overwrite).
pub const STALE_HANDLE: &str = ErrorKind::StaleHandle.as_str();
/// The handle is allocated to an instance.
pub const HANDLE_IN_USE: &str = ErrorKind::HandleInUse.as_str();
/// A cleanup transition for a handle that is not (any more) in `cleaning`.
pub const NOT_CLEANING: &str = ErrorKind::NotCleaning.as_str();
/// No such handle.
pub const NOT_FOUND: &str = ErrorKind::NotFound.as_str();
/// The conductor's database failed.
pub const DATABASE_ERROR: &str = ErrorKind::DatabaseError.as_str();
/// A stored record does not parse: see [`ErrorKind::CorruptRecord`].
pub const CORRUPT_RECORD: &str = ErrorKind::CorruptRecord.as_str();
/// The method ran where there is no database (no indirection configured).
pub const NO_STORE: &str = ErrorKind::NoStore.as_str();
/// The request needs a component version that is not finalized yet.
pub const NOT_SUPPORTED_BEFORE_FINALIZATION: &str =
    ErrorKind::NotSupportedBeforeFinalization.as_str();

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
        CallError::Method { kind, .. } => match ErrorKind::parse(kind) {
            Some(ErrorKind::StaleHandle) => HandleErrorKind::Stale,
            Some(ErrorKind::HandleInUse) => HandleErrorKind::InUse,
            Some(ErrorKind::NotCleaning) => HandleErrorKind::NotCleaning,
            Some(ErrorKind::NotFound) => HandleErrorKind::NotFound,
            Some(ErrorKind::DatabaseError) => HandleErrorKind::Retryable,
            Some(ErrorKind::NotSupportedBeforeFinalization) => {
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
    fn every_kind_parses_from_its_wire_name() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(ErrorKind::parse("Whatever"), None);
        // The names are the wire: changing one breaks older peers.
        assert_eq!(CORRUPT_RECORD, "CorruptRecord");
        assert_eq!(
            ErrorKind::DatabaseUnavailable.as_str(),
            "DatabaseUnavailable"
        );
    }

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
