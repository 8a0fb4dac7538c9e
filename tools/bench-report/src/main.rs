//! `bench-report RESULTS_DIR [--out ROOT]`: BENCHMARKS.md and docs/bench/*.svg from the
//! result files the benchmarks wrote.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Writes BENCHMARKS.md (one section per result file) and its SVG charts.
#[derive(Parser)]
#[command(version)]
struct Args {
    /// The directory the benchmarks wrote their `<bench>.json` files to (VERSO_BENCH_OUT).
    results: PathBuf,
    /// The repository root: BENCHMARKS.md goes here, the charts under docs/bench/.
    #[arg(long, default_value = ".")]
    out: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let run = || -> Result<usize, bench_report::Error> {
        let loaded = bench_report::load_dir(&args.results)?;
        let report = bench_report::render(&loaded)?;
        bench_report::write(&report, &args.out)?;
        Ok(loaded.len())
    };
    match run() {
        Ok(n) => {
            println!(
                "{}: {n} sections, charts in {}",
                args.out.join("BENCHMARKS.md").display(),
                args.out.join(bench_report::CHART_DIR).display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-report: {e}");
            ExitCode::FAILURE
        }
    }
}
