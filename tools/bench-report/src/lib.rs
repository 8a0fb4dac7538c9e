//! The benchmarks' result files and the report made of them.
//!
//! A benchmark builds a [`BenchResult`] from its own measured figures and calls
//! [`BenchResult::write_if_asked`], which writes `<bench>.json` into the directory named by
//! `VERSO_BENCH_OUT` (and does nothing when it is unset). The `bench-report` binary
//! (feature `render`, on by default) reads every result file of a directory and writes
//! BENCHMARKS.md with one section per file and SVG charts under `docs/bench/`.
//!
//! ```
//! use bench_report::{BenchResult, Better, Target};
//! let mut r = BenchResult::new("demo", "a demo", "cargo bench --bench demo");
//! r.targets.push(Target::new("verso / floor", 1.1, 1.3, "x", Better::Lower));
//! assert!(r.targets[0].met);
//! ```

mod error;
mod load;
mod schema;
mod write;

#[cfg(feature = "render")]
mod chart;
#[cfg(feature = "render")]
mod render;

pub use error::Error;
pub use load::{load_dir, load_file, Loaded};
pub use schema::{BenchResult, Better, Chart, Series, Table, Target, SCHEMA};
pub use write::{machine, now_utc, Samples, OUT_ENV};

#[cfg(feature = "render")]
pub use render::{render, write, Report, CHART_DIR};
