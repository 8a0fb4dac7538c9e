//! The benchmark result file shared by every benchmark that feeds BENCHMARKS.md
//! (schema 1): written to `--json FILE` and, when `VERSO_BENCH_OUT` names a directory,
//! to `$VERSO_BENCH_OUT/<bench>.json`.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One benchmark's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchFile {
    /// Always 1.
    pub schema: u32,
    /// The file stem: one section of BENCHMARKS.md.
    pub bench: String,
    /// The section's title.
    pub title: String,
    /// Exactly what to type to reproduce it.
    pub command: String,
    /// The machine it ran on.
    pub machine: String,
    /// When it started (RFC 3339, UTC).
    pub started: String,
    /// What was measured and what it shows, in plain words.
    pub summary: String,
    /// Charts.
    pub charts: Vec<Chart>,
    /// Tables (cells already formatted).
    pub tables: Vec<Table>,
    /// Targets, each met or not.
    pub targets: Vec<BenchTarget>,
}

/// A chart: series of (x, y) points.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Chart {
    /// Its id (the SVG's name).
    pub id: String,
    /// Its title.
    pub title: String,
    /// The x axis.
    pub x_label: String,
    /// The y axis.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// One line of a chart.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Series {
    /// The legend.
    pub label: String,
    /// `[x, y]` points.
    pub points: Vec<[f64; 2]>,
}

/// A table of formatted cells.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Table {
    /// Its title.
    pub title: String,
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

/// A target: a measured value against its limit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchTarget {
    /// What it is.
    pub name: String,
    /// The measured value.
    pub value: f64,
    /// The limit.
    pub limit: f64,
    /// The unit (`ms`, `s`, `x` for a ratio).
    pub unit: String,
    /// `lower` or `higher`.
    pub better: String,
    /// Whether the value is on the right side of the limit.
    pub met: bool,
}

impl BenchTarget {
    /// A target whose value must be at most `limit`.
    pub fn at_most(name: impl Into<String>, value: f64, limit: f64, unit: &str) -> Self {
        BenchTarget {
            name: name.into(),
            value,
            limit,
            unit: unit.into(),
            better: "lower".into(),
            met: value <= limit,
        }
    }
}

/// The current time as RFC 3339 UTC text.
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Writes `file` to `json` (if given) and to `$VERSO_BENCH_OUT/<bench>.json` (if set);
/// returns the paths written.
pub fn write(file: &BenchFile, json: Option<&Path>) -> std::io::Result<Vec<PathBuf>> {
    let text = serde_json::to_string_pretty(file).map_err(std::io::Error::other)?;
    let mut paths: Vec<PathBuf> = json.map(Path::to_path_buf).into_iter().collect();
    if let Some(dir) = std::env::var_os("VERSO_BENCH_OUT").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        paths.push(dir.join(format!("{}.json", file.bench)));
    }
    for p in &paths {
        std::fs::write(p, &text)?;
    }
    Ok(paths)
}
