//! `accel bench`: benchmarks of the service as it runs (real conductor processes, the
//! local RabbitMQ and PostgreSQL), outside the test suite. Each writes a human table,
//! `--json FILE`, and `$VERSO_BENCH_OUT/<bench>.json` in the shared benchmark schema
//! (`bench_report::BenchResult`, the one every bench writes) that `scripts/bench.sh`
//! turns into a section of BENCHMARKS.md.
//!
//! | module | owns |
//! |---|---|
//! | `fleet` | `accel bench fleet`: simulated agents heartbeating and reporting to 1-3 conductors |
//! | `proc` | a child's CPU seconds and RSS from `/proc` |

pub mod fleet;
pub mod proc;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The value at quantile `q` (0..=1) of sorted `values`; 0 when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
