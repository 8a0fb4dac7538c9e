//! The one error type of the crate.

use crate::{LimitError, Version, VersionError};

/// Everything that can go wrong encoding, decoding or backporting an object.
///
/// Each variant corresponds to the exception oslo.versionedobjects raises in the same
/// situation; [`Error::ovo_exception`] names it, so an RPC layer can report it to a Python
/// peer under the name it expects.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The primitive names a known object at a version this side cannot read: newer than
    /// ours, or another major. The sender must backport it (to `supported` or older).
    #[error("Version {version} of {name} is not supported, supported version is {supported}")]
    IncompatibleObjectVersion {
        /// Object name.
        name: String,
        /// The version that was sent.
        version: Version,
        /// The newest version this side has.
        supported: Version,
    },
    /// The primitive names an object this side does not know, or another namespace
    /// (`objtype` is then `namespace.Name`). Register the class, or check the sender.
    #[error("Unsupported object type {objtype}")]
    UnsupportedObject {
        /// The name (or `namespace.name`) that was not found.
        objtype: String,
    },
    /// Encoding was asked for a version newer than the object's own.
    #[error("Invalid target version {version}")]
    InvalidTargetVersion {
        /// The version that was asked for.
        version: Version,
    },
    /// The primitive lacks a required key of its serial namespace (`versioned_object.*`,
    /// `cyborg_object.*`).
    #[error("malformed primitive: missing key '{key}'")]
    MissingKey {
        /// The full key, e.g. `versioned_object.namespace` or `cyborg_object.data`.
        key: String,
    },
    /// The primitive is not shaped like one (not an object, a key of the wrong type).
    #[error("malformed primitive: {what}")]
    Malformed {
        /// What is wrong.
        what: String,
    },
    /// A version string is not dotted integers.
    #[error(transparent)]
    Version(#[from] VersionError),
    /// A field value that the field rejects (null for a non-nullable field without a
    /// default, an enum value outside its valid values, a date that does not parse).
    #[error("{object}.{field}: {reason}")]
    InvalidField {
        /// Object name.
        object: &'static str,
        /// Field name.
        field: String,
        /// Why, in OVO's words where it has them (`Field value bogus is invalid`).
        reason: String,
    },
    /// A field name the object does not have.
    #[error("{object} object has no attribute '{field}'")]
    UnknownField {
        /// Object name.
        object: &'static str,
        /// The name that was asked for.
        field: String,
    },
    /// A backport needed a relationship rule (`relationships` on an object field) that
    /// the object does not declare. Add the rule; `verso objects lint` finds these.
    #[error("{object}.{field}: no relationship rule to backport this object field (add #[verso(relationships = ...)])")]
    NoRelationshipRule {
        /// Object name.
        object: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// `set_defaults` named a field that has no default.
    #[error("{object}.{field}: no default set for field")]
    NoDefault {
        /// Object name.
        object: &'static str,
        /// Field name.
        field: String,
    },
    /// The document is over a [`DecodeLimits`](crate::DecodeLimits) bound (too deep, or a
    /// list too long); none of it was decoded.
    #[error("primitive refused: {0}")]
    Limit(#[from] LimitError),
    /// A field that must be set was read unset ([`Field::require`](crate::Field::require)).
    /// OVO raises `NotImplementedError` ("Cannot load 'field' in the base class") when
    /// code reads an unset field it cannot lazy-load.
    #[error("{object}.{field} is unset")]
    UnsetField {
        /// Object name.
        object: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// A typed decode found another class than the one expected.
    #[error("an object of type {expected} is required, not a {found}")]
    WrongObjectType {
        /// The class the caller asked for.
        expected: &'static str,
        /// The class the primitive names.
        found: String,
    },
}

impl Error {
    /// The oslo.versionedobjects exception class this error corresponds to
    /// (`IncompatibleObjectVersion`, `UnsupportedObjectError`, `InvalidTargetVersion`,
    /// `KeyError`, `ValueError`, `AttributeError`, `ObjectActionError`).
    pub fn ovo_exception(&self) -> &'static str {
        match self {
            Error::IncompatibleObjectVersion { .. } => "IncompatibleObjectVersion",
            Error::UnsupportedObject { .. } => "UnsupportedObjectError",
            Error::InvalidTargetVersion { .. } => "InvalidTargetVersion",
            Error::MissingKey { .. } => "KeyError",
            Error::Malformed { .. }
            | Error::Version(_)
            | Error::InvalidField { .. }
            | Error::WrongObjectType { .. }
            | Error::Limit(_) => "ValueError",
            Error::UnknownField { .. } => "AttributeError",
            Error::NoRelationshipRule { .. } | Error::NoDefault { .. } => "ObjectActionError",
            Error::UnsetField { .. } => "NotImplementedError",
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
