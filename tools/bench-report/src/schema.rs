//! The result file every benchmark writes (schema 1): one section of BENCHMARKS.md.

use serde::{Deserialize, Serialize};

/// The schema version this crate writes and reads.
pub const SCHEMA: u32 = 1;

/// One benchmark's results: `<bench>.json` in `VERSO_BENCH_OUT`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// Always [`SCHEMA`].
    pub schema: u32,
    /// The file stem; one section of BENCHMARKS.md.
    pub bench: String,
    /// The section's heading.
    pub title: String,
    /// Exactly what to type to reproduce the figures.
    #[serde(default)]
    pub command: String,
    /// Cores, CPU model, memory and kernel of the machine that ran it.
    #[serde(default)]
    pub machine: String,
    /// When the run started (RFC 3339, UTC).
    #[serde(default)]
    pub started: String,
    /// What was measured and what it shows, in plain words.
    #[serde(default)]
    pub summary: String,
    /// How cost grows with work.
    #[serde(default)]
    pub charts: Vec<Chart>,
    /// The figures, already formatted.
    #[serde(default)]
    pub tables: Vec<Table>,
    /// The speed targets and whether this run met them.
    #[serde(default)]
    pub targets: Vec<Target>,
}

/// A line chart: one or more series of (x, y) points.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Chart {
    /// Unique within the file; part of the SVG's file name (`<bench>-<id>.svg`).
    pub id: String,
    /// The chart's caption.
    pub title: String,
    /// The x axis' label.
    #[serde(default)]
    pub x_label: String,
    /// The y axis' label.
    #[serde(default)]
    pub y_label: String,
    /// A logarithmic x axis (every x must be above 0).
    #[serde(default)]
    pub log_x: bool,
    /// A logarithmic y axis (every y must be above 0).
    #[serde(default)]
    pub log_y: bool,
    /// The lines.
    #[serde(default)]
    pub series: Vec<Series>,
}

/// One line of a [`Chart`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's text.
    pub label: String,
    /// `[x, y]` pairs, in the order they are joined.
    pub points: Vec<[f64; 2]>,
}

/// A table of formatted cells.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Table {
    /// The table's heading.
    #[serde(default)]
    pub title: String,
    /// The header row.
    pub columns: Vec<String>,
    /// Each row has as many cells as there are columns.
    pub rows: Vec<Vec<String>>,
}

/// Which way a [`Target`]'s value is better.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// At most the limit.
    Lower,
    /// At least the limit.
    Higher,
}

/// A speed target: a measured value against its limit.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Target {
    /// What is measured.
    pub name: String,
    /// The measured value (a ratio's unit is `x`).
    pub value: f64,
    /// The value the target allows.
    pub limit: f64,
    /// `ms`, `x`, `calls/s`, ...
    #[serde(default)]
    pub unit: String,
    /// Whether lower or higher values are better.
    pub better: Better,
    /// Whether this run met the target (computed by the benchmark).
    pub met: bool,
}

impl Target {
    /// A target whose `met` is computed from `value`, `limit` and `better`.
    pub fn new(
        name: impl Into<String>,
        value: f64,
        limit: f64,
        unit: &str,
        better: Better,
    ) -> Self {
        let met = match better {
            Better::Lower => value <= limit,
            Better::Higher => value >= limit,
        };
        Target {
            name: name.into(),
            value,
            limit,
            unit: unit.into(),
            better,
            met,
        }
    }
}
