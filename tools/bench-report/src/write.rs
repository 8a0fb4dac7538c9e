//! What a benchmark needs to write its result file: the machine's description, the start
//! time, the output directory from `VERSO_BENCH_OUT`, and a recorder of criterion's
//! samples so a criterion bench reports its own measured figures.

use crate::{BenchResult, Error, SCHEMA};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The environment variable naming the directory result files go to.
pub const OUT_ENV: &str = "VERSO_BENCH_OUT";

impl BenchResult {
    /// A result with this machine's description and the current time, nothing measured yet.
    pub fn new(bench: &str, title: impl Into<String>, command: impl Into<String>) -> Self {
        BenchResult {
            schema: SCHEMA,
            bench: bench.into(),
            title: title.into(),
            command: command.into(),
            machine: machine(),
            started: now_utc(),
            summary: String::new(),
            charts: Vec::new(),
            tables: Vec::new(),
            targets: Vec::new(),
        }
    }

    /// Writes `<bench>.json` into `dir` (created if missing); returns the file's path.
    pub fn write_to(&self, dir: &Path) -> Result<PathBuf, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(format!("{}.json", self.bench));
        let text = serde_json::to_string_pretty(self).map_err(|source| Error::Parse {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&path, text + "\n").map_err(|source| Error::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Writes the file into `VERSO_BENCH_OUT` when it is set; `Ok(None)` when it is not.
    pub fn write_if_asked(&self) -> Result<Option<PathBuf>, Error> {
        match std::env::var_os(OUT_ENV) {
            Some(dir) if !dir.is_empty() => self.write_to(Path::new(&dir)).map(Some),
            _ => Ok(None),
        }
    }
}

/// "N cores (MODEL), M GiB, Linux VERSION" from /proc; the parts it cannot read are left out.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, m)| m.trim().to_string());
    let mut parts = vec![match model {
        Some(m) => format!("{cores} cores ({m})"),
        None => format!("{cores} cores"),
    }];
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    if let Some(kib) = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
    {
        parts.push(format!("{:.0} GiB", kib / (1024.0 * 1024.0)));
    }
    if let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
        parts.push(format!("Linux {}", release.trim()));
    }
    parts.join(", ")
}

/// Now, as RFC 3339 in UTC to the second.
pub fn now_utc() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Per-iteration times of criterion's samples, by benchmark id: a criterion bench times
/// its routine with `iter_custom`, records each sample here, and builds its result file
/// from these figures at the end.
#[derive(Default)]
pub struct Samples {
    by_id: Mutex<BTreeMap<String, Vec<f64>>>,
}

impl Samples {
    /// An empty recorder (const: a bench can keep one in a `static`).
    pub const fn new() -> Self {
        Samples {
            by_id: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records one sample: `iters` runs of `id` took `elapsed`.
    pub fn record(&self, id: &str, iters: u64, elapsed: Duration) {
        if iters == 0 {
            return;
        }
        let per_iter = elapsed.as_secs_f64() * 1e9 / iters as f64;
        // A poisoned lock only means another sample panicked; its data is still whole.
        let mut by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        by_id.entry(id.to_string()).or_default().push(per_iter);
    }

    /// The median time of one iteration of `id`, in nanoseconds, over every sample
    /// recorded (criterion's warm-up included: a few short samples next to its hundred).
    pub fn median_ns(&self, id: &str) -> Option<f64> {
        let by_id = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = by_id.get(id)?.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }
}
