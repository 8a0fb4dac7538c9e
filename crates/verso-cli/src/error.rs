//! The errors of the `verso` command.

use std::path::PathBuf;

/// Why a command could not run (as opposed to a check that ran and found problems,
/// which is a [`crate::Report`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The deployment's `upgrade` API could not be reached or answered an error.
    #[error("the deployment did not answer: {0}")]
    Deployment(String),
    /// `finalize --wait` ran out of time while clients were still finalizing.
    #[error("still finalizing after {0} s; `verso upgrade status` shows who is left")]
    StillFinalizing(u64),
    /// An application's component versions could not be built.
    #[error("cannot build the component versions: {0}")]
    Versions(String),
    /// The lock file could not be read.
    #[error("cannot read lock file {path}: {source}; create it with `verso objects update-lock`")]
    ReadLock {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The lock file is not a valid lock.
    #[error("lock file {path} is not valid: {detail}; regenerate it with `verso objects update-lock --force`")]
    ParseLock {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The lock file has a format this version of verso does not know.
    #[error("lock file {path} has format {found}, this verso writes format {expected}; use a matching verso")]
    LockFormat {
        /// The file.
        path: PathBuf,
        /// The format in the file.
        found: u32,
        /// The format this verso knows.
        expected: u32,
    },
    /// The lock file could not be written.
    #[error("cannot write lock file {path}: {source}")]
    WriteLock {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A contract could not be rendered as TOML.
    #[error("cannot render the lock file: {0}")]
    Render(String),
    /// The command needs the application's objects, and the generic binary has none.
    #[error("`{command}` needs the application's objects and RPC APIs: run it through the application's own binary, which calls `verso_cli::run` with its registry")]
    NoApplication {
        /// The command.
        command: &'static str,
    },
    /// The command line is wrong, or help was asked for (clap's message and exit code).
    #[error(transparent)]
    Usage(#[from] clap::Error),
    /// Writing the report failed.
    #[error("cannot write output: {0}")]
    Output(#[from] std::io::Error),
}
