//! [`ConfigError`] and [`Origin`]: what the configuration and `[upgrade_levels]`
//! ([`caps`](crate::caps)) report in, below both.

use std::fmt;
use verso::Version;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The built-in default.
    Default,
    /// A config file.
    File(String),
    /// An environment variable.
    Env(String),
    /// The command line.
    Cli,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("default"),
            Origin::File(p) => write!(f, "file {p}"),
            Origin::Env(v) => write!(f, "environment {v}"),
            Origin::Cli => f.write_str("command line"),
        }
    }
}

/// An error in a service's configuration: each says what to write instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A cap is not a `major.minor` string.
    #[error(
        "[upgrade_levels] {option} = \"{value}\" (from {origin}) is not a version: {detail}; \
         write MAJOR.MINOR such as \"1.0\""
    )]
    CapMalformed {
        /// The option (`conductor`, `agent`, ...).
        option: String,
        /// The value given.
        value: String,
        /// Where the value came from.
        origin: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A cap of `auto`.
    #[error(
        "[upgrade_levels] {option} = \"auto\" (from {origin}): automatic version discovery is \
         not supported; pin a version such as \"1.0\" and raise it once every node is upgraded"
    )]
    CapAuto {
        /// The option.
        option: String,
        /// Where the value came from.
        origin: String,
    },
    /// A cap written as a bare TOML number.
    #[error(
        "[upgrade_levels] {option} = {value} (from {origin}) is a bare number; quote it, as in \
         {option} = \"{suggestion}\", since a number like 1.10 would read as 1.1"
    )]
    CapBareNumber {
        /// The option.
        option: String,
        /// The number as written.
        value: String,
        /// The quoted form to write instead (check it: the number may have lost digits).
        suggestion: String,
        /// Where the value came from.
        origin: String,
    },
    /// A cap of another TOML type (boolean, table, ...).
    #[error("[upgrade_levels] {option} (from {origin}) must be a quoted version string such as \"1.0\", got {found}")]
    CapWrongType {
        /// The option.
        option: String,
        /// Where the value came from.
        origin: String,
        /// The type given.
        found: String,
    },
    /// A cap above what the local client can send, or of another major version.
    #[error(
        "[upgrade_levels] {option} = \"{value}\" (from {origin}) is not supported here: this \
         {option} client speaks up to {local_max}; use a version of major {} at most {local_max}",
        local_max.major()
    )]
    CapNotSupported {
        /// The option.
        option: String,
        /// The cap given.
        value: Version,
        /// The newest version the local client speaks.
        local_max: Version,
        /// Where the value came from.
        origin: String,
    },
    /// An option that `[upgrade_levels]` does not have (likely a typo).
    #[error("[upgrade_levels] has no option '{option}' (from {origin}); known options: {known}")]
    CapUnknownOption {
        /// The option given.
        option: String,
        /// Where it came from.
        origin: String,
        /// The options that exist (the declared APIs).
        known: String,
    },
    /// The config file could not be read or is not TOML.
    #[error("config file {path}: {detail}")]
    ConfigFile {
        /// The file.
        path: String,
        /// What failed.
        detail: String,
        /// The I/O or TOML error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A `--set` override that is not `SECTION.KEY=VALUE`, or names no known section.
    #[error("--set {assignment}: {detail}")]
    Override {
        /// The override as given.
        assignment: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A section's values do not fit the application's type.
    #[error("[{section}]: {source}")]
    Section {
        /// The section.
        section: String,
        /// Figment's error: the key, what was expected, and the value's origin.
        #[source]
        source: Box<figment::Error>,
    },
    /// The application declared an RPC API badly (a bug in the service, not the config).
    #[error("RPC API '{name}' cannot be an [upgrade_levels] option: {detail}")]
    InvalidApi {
        /// The API's name.
        name: String,
        /// What is wrong.
        detail: String,
    },
}
