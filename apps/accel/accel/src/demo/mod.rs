//! `accel demo`: a whole rolling upgrade of an accel deployment from release N to
//! release N+1 on one machine, in the style of OpenStack's Grenade: old and new nodes
//! talk to each other through the wire form only, every step checks side effects in the
//! database as well as API answers, and the run ends with finalization.
//!
//! Release N is `accel-release-n` (its own objects, RPC API versions, component versions
//! and schema); release N+1 is the current code. The steps:
//!
//! 1. release N: conductor, API and agents start on a fresh database; profiles and
//!    requests are created, some bound;
//! 2. verify: devices, handles in use, requests bound, as the API and the database say;
//! 3. the database and the conductor (and API) go to N+1; old agents keep working;
//! 4. an N+1 agent that needs indirection but is pinned to conductor 1.0 refuses to start;
//! 5. the agents are upgraded in batches; the conductor's agent cap is raised;
//! 6. before finalization the gated feature is refused; one agent goes back to N;
//! 7. finalization is refused while that agent runs N; it is upgraded; finalization runs,
//!    conductor first, then every agent;
//! 8. after finalization an NVMe release goes through cleanup on its agent (agent RPC
//!    1.1); release N's conductor refuses the finalized database;
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
    /// `postgres://...` (an empty database) to run on PostgreSQL; SQLite in a temporary
    /// directory otherwise.
    pub database_url: Option<String>,
    /// Write the report as JSON here (`-`: stdout, and no timeline).
    pub json: Option<PathBuf>,
    /// Leave the deployment running at the end (until Ctrl-C).
    pub keep: bool,
    /// Run the last host's release N agent as the project's Python oslo.versionedobjects
    /// agent with this interpreter (needs a broker: `transport_url`).
    pub python_agent: Option<PathBuf>,
    /// Release N is OpenStack Cyborg 17 from here ([`from_cyborg`]) instead of
    /// `accel-release-n`.
    pub from_cyborg: Option<from_cyborg::CyborgOptions>,
}

/// Runs the demo; exit 0 only if every check passed.
pub async fn run(options: DemoOptions) -> Result<ExitCode, Error> {
    if options.agents < 2 {
        return Err(
            "--agents must be at least 2 (one of them is downgraded and upgraded again)".into(),
        );
    }
    if options.python_agent.is_some()
        && options
            .transport_url
            .as_deref()
            .is_none_or(|u| u.starts_with("memory:"))
    {
        return Err("--python-agent needs a broker: give --transport-url rabbit://...".into());
    }
    if options.python_agent.is_some() && options.from_cyborg.is_some() {
        return Err(
            "--python-agent is release N's accel agent; --from cyborg runs Cyborg's".into(),
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
