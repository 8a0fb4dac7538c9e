//! `accel demo`: a whole rolling upgrade of an accel deployment from release N to
//! release N+1 on one machine, in the style of OpenStack's Grenade: old and new nodes
//! talk to each other through the wire form only, every step checks side effects in the
//! database as well as API answers, and the run ends with finalization.
//!
//! Release N is OpenStack Cyborg 17: its conductor, API and agent as accel has them in
//! Rust (`accel-cyborg17-conductor`, `-api`, `-agent`, held to Cyborg's own code by their
//! tests), on Cyborg 17's wire and schema, run without Placement and Nova (the demo runs
//! no OpenStack); release N+1 is accel, the current code. The steps:
//!
//! 1. release N: conductor, API and agents start on a fresh database (Cyborg 17's
//!    schema); profiles and requests are created through Cyborg's API, some bound;
//! 2. verify: devices, handles in use, requests bound, as the API and the database say;
//! 3. `accel db sync` takes the database in place and accel's conductor and API replace
//!    Cyborg's; Cyborg's agents keep reporting and count as release N; the conductor
//!    and API roll back to Cyborg's (which unbinds and binds again a request accel
//!    bound) and forward to accel's again, as before finalization an operator may;
//! 4. an N+1 agent that needs indirection but is pinned to conductor 1.0 refuses to start;
//! 5. the agents are replaced by accel's in batches (every other host on Cyborg's wire
//!    with the seed spec, the others on accel's); the conductor's agent cap is raised;
//! 6. before finalization the gated feature is refused; one host goes back to Cyborg
//!    17's agent;
//! 7. finalization is refused while that host runs N; it is upgraded; finalization runs,
//!    conductor first, then every agent;
//! 8. after finalization an NVMe release goes through cleanup on its agent (agent RPC
//!    1.1); a Cyborg 17 agent on a new host is fenced;
//! 9. everything created is destroyed and the database is clean.
//!
//! With `--from cyborg` ([`from_cyborg`]) release N is OpenStack Cyborg 17 itself (the
//! PyPI package's conductor, API and agents) and the upgrade takes a Cyborg deployment
//! to accel node by node.

mod deployment;
pub mod from_cyborg;
pub(crate) mod process;
mod report;
mod scenario;

pub use report::Report;

use std::path::PathBuf;
use std::process::ExitCode;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What `accel demo` is asked to do.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// How many agents (hosts), at least 2.
    pub agents: u32,
    /// `rabbit://...` to run over a broker; the memory transport otherwise.
    pub transport_url: Option<String>,
    /// `mysql://...` (an empty database) to run on MySQL/MariaDB, where Cyborg 17 runs;
    /// SQLite in a temporary directory otherwise. (With `--from cyborg`: the database
    /// Cyborg's rows are imported into, any accel runs on.)
    pub database_url: Option<String>,
    /// Write the report as JSON here (`-`: stdout, and no timeline).
    pub json: Option<PathBuf>,
    /// Leave the deployment running at the end (until Ctrl-C).
    pub keep: bool,
    /// Release N is OpenStack Cyborg 17's own Python services from here
    /// ([`from_cyborg`]) instead of Cyborg 17 in Rust.
    pub from_cyborg: Option<from_cyborg::CyborgOptions>,
}

/// Runs the demo; exit 0 only if every check passed.
pub async fn run(options: DemoOptions) -> Result<ExitCode, Error> {
    if options.agents < 2 {
        return Err(
            "--agents must be at least 2 (one of them is downgraded and upgraded again)".into(),
        );
    }
    let quiet = options.json.as_deref() == Some(std::path::Path::new("-"));
    let report = match &options.from_cyborg {
        Some(cyborg) => from_cyborg::run(&options, cyborg, quiet).await?,
        None => scenario::run(&options, quiet).await?,
    };
    if let Some(path) = &options.json {
        let text = serde_json::to_string_pretty(&report)?;
        if quiet {
            println!("{text}");
        } else {
            std::fs::write(path, text + "\n")?;
            println!("report written to {}", path.display());
        }
    }
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
