//! The crate's one error type: every variant names the file it is about.

use std::path::PathBuf;

/// Reading, checking or writing result files and the report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file is not JSON of the result schema.
    #[error("{}: not a benchmark result file: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A file of a schema version this tool does not read.
    #[error("{}: schema {found} is not supported (this tool reads schema {})", path.display(), crate::SCHEMA)]
    Schema {
        /// The file.
        path: PathBuf,
        /// The version it declares.
        found: u32,
    },
    /// A file parses but its content cannot be rendered as it is.
    #[error("{}: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where in the file.
        what: String,
    },
    /// A chart could not be drawn.
    #[error("{}: chart {chart}: {message}", path.display())]
    Chart {
        /// The result file the chart is from.
        path: PathBuf,
        /// The chart's id.
        chart: String,
        /// The plotting library's message.
        message: String,
    },
    /// A file or directory could not be written.
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
