//! Reading a directory of result files, each checked before anything is rendered.

use crate::{BenchResult, Error, SCHEMA};
use std::path::{Path, PathBuf};

/// A result file as read, with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file.
    pub path: PathBuf,
    /// Its content.
    pub result: BenchResult,
}

/// Every `*.json` in `dir`, in order of bench name; the first bad file is an error
/// naming it.
pub fn load_dir(dir: &Path) -> Result<Vec<Loaded>, Error> {
    let read_err = |source| Error::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        if path.extension().is_some_and(|e| e == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut loaded = paths
        .into_iter()
        .map(|p| load_file(&p).map(|result| Loaded { path: p, result }))
        .collect::<Result<Vec<_>, _>>()?;
    loaded.sort_by(|a, b| a.result.bench.cmp(&b.result.bench));
    Ok(loaded)
}

/// One result file, parsed and checked.
pub fn load_file(path: &Path) -> Result<BenchResult, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    // The version first, so a newer schema is named as such rather than as a parse error.
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|source| Error::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(found) = value.get("schema").and_then(serde_json::Value::as_u64) {
        if found != u64::from(SCHEMA) {
            return Err(Error::Schema {
                path: path.to_path_buf(),
                found: u32::try_from(found).unwrap_or(u32::MAX),
            });
        }
    }
    let result: BenchResult = serde_json::from_value(value).map_err(|source| Error::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    check(path, &result)?;
    Ok(result)
}

fn check(path: &Path, r: &BenchResult) -> Result<(), Error> {
    let invalid = |what: String| Error::Invalid {
        path: path.to_path_buf(),
        what,
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if r.bench != stem {
        return Err(invalid(format!(
            "bench {:?} differs from the file's name {stem:?}",
            r.bench
        )));
    }
    if !is_name(&r.bench) {
        return Err(invalid(format!(
            "bench {:?}: use letters, digits, '-' and '_' only",
            r.bench
        )));
    }
    let mut ids = std::collections::BTreeSet::new();
    for c in &r.charts {
        if !is_name(&c.id) {
            return Err(invalid(format!(
                "chart id {:?}: use letters, digits, '-' and '_' only",
                c.id
            )));
        }
        if !ids.insert(c.id.as_str()) {
            return Err(invalid(format!("chart id {:?} is used twice", c.id)));
        }
        for s in &c.series {
            for p in &s.points {
                if (c.log_x && p[0] <= 0.0) || (c.log_y && p[1] <= 0.0) {
                    return Err(invalid(format!(
                        "chart {:?}, series {:?}: point [{}, {}] on a logarithmic axis must be above 0",
                        c.id, s.label, p[0], p[1]
                    )));
                }
            }
        }
    }
    for t in &r.tables {
        if let Some((i, row)) = t
            .rows
            .iter()
            .enumerate()
            .find(|(_, row)| row.len() != t.columns.len())
        {
            return Err(invalid(format!(
                "table {:?}, row {}: {} cells for {} columns",
                t.title,
                i + 1,
                row.len(),
                t.columns.len()
            )));
        }
    }
    Ok(())
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
