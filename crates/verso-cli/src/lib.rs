//! The `verso` command: guards an application's object and RPC contracts across
//! releases.
//!
//! An application hands its objects ([`verso::Registry`]) and the RPC APIs it serves
//! ([`verso_rpc::EndpointSpec`]) to [`run`] from a binary of its own, e.g. a
//! `src/bin/verso.rs` or an example; every application uses it the same way:
//!
//! ```no_run
//! use verso_cli::Application;
//! # fn registry() -> verso::Registry { verso::Registry::new() }
//! fn main() -> std::process::ExitCode {
//!     let app = Application::new("accel", registry()).default_lock("objects.lock");
//!     verso_cli::run(&app, std::env::args_os())
//! }
//! ```
//!
//! Subcommands:
//!
//! - `verso objects list [--json]`: every object (name, version, fingerprint, fields,
//!   methods) and RPC API;
//! - `verso objects check [--lock F]`: compares the code with the lock; exits 1 with a
//!   report naming each object, its old and new fingerprint, what changed, and what
//!   to bump;
//! - `verso objects update-lock [--lock F] [--force]`: rewrites the lock; refuses
//!   (unless `--force`) a contract that changed without a sufficient version bump, a
//!   version that went backwards, or an object or API that disappeared;
//! - `verso objects diff OLD NEW`: the compatibility report between two releases'
//!   locks (works without an application, so the generic `verso` binary runs it);
//! - `verso objects lint [--lock F]`: the model mistakes OVO leaves to luck
//!   ([`lint()`]);
//! - `verso versions list|lint`: the component versions and what uses each; a version
//!   nothing uses fails `lint`;
//! - `verso upgrade status|finalize --transport-url URL --exchange EXCHANGE --topic
//!   TOPIC [--json]` (`finalize` also `--wait`, `--timeout`): a running deployment's `upgrade` API (verso-upgrade's `admin`); name the
//!   service's control exchange (oslo.messaging's `openstack` otherwise) and its upgrade
//!   topic. A service may offer its own command reading its configuration instead, as
//!   `accel upgrade` does.
//!
//! The lock format is described in [`lock`]; the fingerprint algorithm (OVO's, bit for
//! bit) in [`verso::fingerprint`].
//!
//! Exit codes: 0 passed, 1 the check found problems, 2 the command could not run.

pub mod error;
pub mod lint;
pub mod lock;
pub mod report;
pub mod rpc;

pub use error::CliError;
pub use lint::{lint, lint_schemas, Finding};
pub use lock::{Lock, LOCK_FORMAT};
pub use report::{check, diff, update_lock, Entry, Report, Severity};
pub use rpc::RpcContract;

use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use verso::fingerprint::ObjectContract;
use verso::Registry;
use verso_rpc::EndpointSpec;
use verso_upgrade::VersionUse;

/// What the CLI knows of an application: its objects, the RPC APIs it serves, and
/// where its lock file lives.
///
/// RPC APIs are recorded from their typed declarations ([`verso_rpc::RpcApi`]), the same
/// the client and the server are built from:
///
/// ```
/// use verso::{Registry, Version};
/// use verso_cli::Application;
/// use verso_rpc::{MethodSpec, RpcApi, RpcMethod};
///
/// #[derive(RpcMethod)]
/// #[rpc(since = "1.0", reply = serde_json::Value)]
/// struct Ping { arg: serde_json::Value }
///
/// struct Demo;
/// impl RpcApi for Demo {
///     const NAME: &'static str = "demo";
///     const VERSION: Version = Version::new(1, 0);
///     fn methods() -> Vec<&'static MethodSpec> { vec![Ping::spec()] }
/// }
///
/// let app = Application::new("demo", Registry::new()).api::<Demo>();
/// let lock = app.contracts();
/// assert_eq!(lock.rpc["demo"].methods[0].name, "ping");
/// assert_eq!(lock.rpc["demo"].methods[0].args[0].ty, "any");
/// ```
pub struct Application {
    name: String,
    registry: Registry,
    rpc_apis: BTreeMap<String, EndpointSpec>,
    default_lock: PathBuf,
    versions: Vec<VersionSource>,
}

/// Builds one component's version manager with everything the service registers on it
/// and returns its [`VersionUse`]s (see [`Application::component_versions`]).
pub type VersionSource = Box<dyn Fn() -> Result<Vec<VersionUse>, String>>;

impl Application {
    /// An application with these objects; its lock defaults to `objects.lock` in the
    /// working directory.
    pub fn new(name: impl Into<String>, registry: Registry) -> Self {
        Application {
            name: name.into(),
            registry,
            rpc_apis: BTreeMap::new(),
            default_lock: PathBuf::from("objects.lock"),
            versions: Vec::new(),
        }
    }

    /// Adds a component's versions for `verso versions list` and `verso versions lint`:
    /// `uses` builds the component's `VersionManager` the way the service does (every
    /// gate, option, validator and action registered) and returns
    /// `VersionManager::uses()`.
    pub fn component_versions(
        mut self,
        uses: impl Fn() -> Result<Vec<VersionUse>, String> + 'static,
    ) -> Self {
        self.versions.push(Box::new(uses));
        self
    }

    /// Adds the declared RPC API `A` the application serves, as `[rpc.NAME]`.
    pub fn api<A: verso_rpc::RpcApi>(self) -> Self {
        self.rpc_api(A::NAME, A::spec())
    }

    /// Adds an RPC API the application serves from its endpoint's declaration, under the
    /// name the lock uses (for APIs assembled at run time; prefer [`api`](Self::api)).
    pub fn rpc_api(mut self, name: impl Into<String>, spec: EndpointSpec) -> Self {
        self.rpc_apis.insert(name.into(), spec);
        self
    }

    /// The lock file used when `--lock` is not given.
    pub fn default_lock(mut self, path: impl Into<PathBuf>) -> Self {
        self.default_lock = path.into();
        self
    }

    /// The application's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The contracts of the code as it is: every production object (test-only
    /// registrations left out) and every RPC API.
    pub fn contracts(&self) -> Lock {
        Lock {
            format: LOCK_FORMAT,
            objects: self
                .registry
                .schemas()
                .filter(|s| !s.test_only)
                .map(|s| (s.name.to_owned(), ObjectContract::from_schema(s)))
                .collect(),
            rpc: self
                .rpc_apis
                .iter()
                .map(|(n, s)| (n.clone(), RpcContract::from_spec(s)))
                .collect(),
        }
    }

    /// Compares the code with the lock at `path`: for a test that must fail when the
    /// lock is out of date (`assert!(report.is_ok(), "{report}")`).
    pub fn check_lock(&self, path: &Path) -> Result<Report, CliError> {
        Ok(check(&Lock::read(path)?, &self.contracts()))
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "verso",
    about = "Guards versioned-object and RPC contracts across releases"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Versioned objects, RPC APIs and their lock file.
    #[command(subcommand)]
    Objects(Objects),
    /// Component versions (verso-upgrade) and what uses them.
    #[command(subcommand)]
    Versions(Versions),
    /// The upgrade of a running deployment, through its `upgrade` RPC API.
    #[command(subcommand)]
    Upgrade(Upgrade),
}

/// Where the deployment's `upgrade` API is served.
#[derive(clap::Args, Debug)]
struct Deployment {
    /// The deployment's transport (`rabbit://user:pass@host:5672/`).
    #[arg(long)]
    transport_url: String,
    /// The topic the server serves the `upgrade` API on.
    #[arg(long, default_value = "upgrade")]
    topic: String,
    /// The service's control exchange (default: oslo.messaging's `openstack`).
    #[arg(long)]
    exchange: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Upgrade {
    /// Every component's software and apparent version, state, and the blockers.
    Status {
        #[command(flatten)]
        deployment: Deployment,
    },
    /// Starts finalization (idempotent). Exit 0: started or done (with --wait: done);
    /// 1: refused, with each blocker; 2: the deployment could not be reached; 3 (with
    /// --wait): still finalizing when the wait ran out.
    Finalize {
        #[command(flatten)]
        deployment: Deployment,
        /// Poll status until every live client has finalized.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
}

#[derive(Subcommand, Debug)]
enum Versions {
    /// Lists every component version with the gates, options and actions that use it.
    List,
    /// Reports component versions that nothing uses (declared in one commit and used in
    /// a later one: a release cut between them finalizes a version with no feature).
    Lint,
}

#[derive(Subcommand, Debug)]
enum Objects {
    /// Lists every object (version, fingerprint, fields, methods) and RPC API.
    List {
        /// Print JSON (the lock's contracts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Fails when the code differs from the lock.
    Check {
        /// The lock file (default: the application's).
        #[arg(long)]
        lock: Option<PathBuf>,
    },
    /// Rewrites the lock from the code.
    UpdateLock {
        /// The lock file (default: the application's).
        #[arg(long)]
        lock: Option<PathBuf>,
        /// Record contracts that changed without a version bump, went backwards or
        /// disappeared.
        #[arg(long)]
        force: bool,
    },
    /// The compatibility report between two releases' lock files.
    Diff {
        /// The older release's lock.
        old: PathBuf,
        /// The newer release's lock.
        new: PathBuf,
    },
    /// Reports model mistakes (missing child-version and relationship rules, missing
    /// `since`, required fields without defaults).
    Lint {
        /// The lock file used to find fields added without `since` (default: the
        /// application's; skipped when it does not exist).
        #[arg(long)]
        lock: Option<PathBuf>,
    },
}

/// Runs the command line `args` (program name first) for `app`, printing to stdout and
/// stderr; returns the process exit code (0 passed, 1 problems found, 2 could not run).
pub fn run<I, T>(app: &Application, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    finish(execute(Some(app), args, &mut std::io::stdout().lock()))
}

/// [`run`] without an application: only `objects diff` works (the generic binary).
pub fn run_without_application<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    finish(execute(None, args, &mut std::io::stdout().lock()))
}

fn finish(result: Result<bool, CliError>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(CliError::Usage(e)) => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
        }
        Err(e @ CliError::StillFinalizing(_)) => {
            eprintln!("verso: {e}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("verso: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the command line `args` for `app` (or none), writing the report to `out`;
/// `Ok(true)` when the command passed, `Ok(false)` when it found problems.
///
/// ```
/// use verso::Registry;
/// use verso_cli::{execute, Application};
/// let dir = tempfile::tempdir()?;
/// let lock = dir.path().join("objects.lock");
/// let app = Application::new("demo", Registry::new()).default_lock(&lock);
/// let mut out = Vec::new();
/// assert!(execute(Some(&app), ["verso", "objects", "update-lock"], &mut out)?);
/// assert!(execute(Some(&app), ["verso", "objects", "check"], &mut out)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn execute<I, T>(
    app: Option<&Application>,
    args: I,
    out: &mut dyn Write,
) -> Result<bool, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(args).map_err(CliError::Usage)?;
    let need = |command: &'static str| app.ok_or(CliError::NoApplication { command });
    let cmd = match cli.command {
        Command::Objects(cmd) => cmd,
        Command::Versions(cmd) => return versions(need("versions")?, cmd, out),
        Command::Upgrade(cmd) => return upgrade(cmd, out),
    };
    match cmd {
        Objects::List { json } => {
            let contracts = need("objects list")?.contracts();
            if json {
                let text = serde_json::to_string_pretty(&contracts)
                    .map_err(|e| CliError::Render(e.to_string()))?;
                writeln!(out, "{text}")?;
            } else {
                write_list(&contracts, out)?;
            }
            Ok(true)
        }
        Objects::Check { lock } => {
            let app = need("objects check")?;
            let path = lock.unwrap_or_else(|| app.default_lock.clone());
            let report = app.check_lock(&path)?;
            if report.is_ok() {
                writeln!(out, "{} matches the code of {}", path.display(), app.name)?;
                write!(out, "{report}")?;
            } else {
                writeln!(
                    out,
                    "{} does not match the code of {}:",
                    path.display(),
                    app.name
                )?;
                write!(out, "{report}")?;
                writeln!(
                    out,
                    "A changed contract needs a version bump (and a backport rule) before \
                     `verso objects update-lock` records it."
                )?;
            }
            Ok(report.is_ok())
        }
        Objects::UpdateLock { lock, force } => {
            let app = need("objects update-lock")?;
            let path = lock.unwrap_or_else(|| app.default_lock.clone());
            let old_text = match std::fs::read_to_string(&path) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(source) => return Err(CliError::ReadLock { path, source }),
            };
            let old = old_text
                .as_deref()
                .map(|t| Lock::parse(t, &path))
                .transpose()?;
            let (report, write) = update_lock(old.as_ref(), &app.contracts(), force);
            write!(out, "{report}")?;
            match write {
                Some(lock) if old_text.as_deref() == Some(lock.render()?.as_str()) => {
                    writeln!(out, "{} is up to date", path.display())?;
                    Ok(true)
                }
                Some(lock) => {
                    lock.write(&path)?;
                    writeln!(out, "wrote {}", path.display())?;
                    Ok(true)
                }
                None => {
                    writeln!(
                        out,
                        "{} not written: fix the refused entries (or pass --force)",
                        path.display()
                    )?;
                    Ok(false)
                }
            }
        }
        Objects::Diff { old, new } => {
            let report = diff(&Lock::read(&old)?, &Lock::read(&new)?);
            writeln!(out, "{} -> {}", old.display(), new.display())?;
            write!(out, "{report}")?;
            Ok(report.is_ok())
        }
        Objects::Lint { lock } => {
            let app = need("objects lint")?;
            let path = lock.unwrap_or_else(|| app.default_lock.clone());
            let locked = if path.exists() {
                Some(Lock::read(&path)?)
            } else {
                writeln!(
                    out,
                    "note: no lock at {}, so fields added without `since` cannot be found",
                    path.display()
                )?;
                None
            };
            let findings = lint(&app.registry, locked.as_ref());
            for f in &findings {
                writeln!(out, "{f}")?;
            }
            writeln!(out, "{} finding(s)", findings.len())?;
            Ok(findings.is_empty())
        }
    }
}

fn versions(app: &Application, cmd: Versions, out: &mut dyn Write) -> Result<bool, CliError> {
    let mut all = Vec::new();
    for source in &app.versions {
        all.extend(source().map_err(CliError::Versions)?);
    }
    match cmd {
        Versions::List => {
            for v in &all {
                let used = if v.used_by.is_empty() {
                    "unused".to_owned()
                } else {
                    v.used_by.join("; ")
                };
                writeln!(
                    out,
                    "{} {} {}: {} [{used}]",
                    v.component, v.number, v.name, v.description
                )?;
            }
            Ok(true)
        }
        Versions::Lint => {
            // A component's first version is the baseline: nothing has to gate it.
            let unused: Vec<&VersionUse> = all
                .iter()
                .filter(|v| v.used_by.is_empty() && !is_first(&all, v))
                .collect();
            for v in &unused {
                writeln!(
                    out,
                    "{} version {} ({}) is declared but no gate, option, validator or upgrade \
                     action uses it: use it in the same change that declares it",
                    v.component, v.number, v.name
                )?;
            }
            writeln!(out, "{} finding(s)", unused.len())?;
            Ok(unused.is_empty())
        }
    }
}

fn upgrade(cmd: Upgrade, out: &mut dyn Write) -> Result<bool, CliError> {
    use verso_upgrade::admin::{finalize_and_wait, Status, UpgradeApi, WaitOutcome};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Deployment(e.to_string()))?;
    let deployment = match &cmd {
        Upgrade::Status { deployment } | Upgrade::Finalize { deployment, .. } => deployment,
    };
    let json = deployment.json;
    let (topic, exchange) = (
        deployment.topic.clone(),
        deployment
            .exchange
            .clone()
            .unwrap_or_else(|| "openstack".into()),
    );
    let unreachable = |e: verso_rpc::RpcError| {
        if e.is_timeout() {
            CliError::Deployment(format!(
                "no answer on topic '{topic}' of exchange '{exchange}' within 30 s: is the server running, and are --topic and --exchange the service's?"
            ))
        } else {
            CliError::Deployment(e.to_string())
        }
    };
    let write_status =
        |status: &verso_upgrade::DeploymentStatus, out: &mut dyn Write| -> Result<(), CliError> {
            if json {
                let text = serde_json::to_string_pretty(status)
                    .map_err(|e| CliError::Render(e.to_string()))?;
                writeln!(out, "{text}")?;
            } else {
                write!(out, "{status}")?;
            }
            Ok(())
        };
    runtime.block_on(async {
        let transport = verso_rpc::transport::transport_from_url(
            &deployment.transport_url,
            deployment.exchange.as_deref(),
        )
        .await
        .map_err(unreachable)?;
        let client =
            verso_rpc::RpcClient::for_api::<UpgradeApi>(transport, deployment.topic.clone())
                .timeout(std::time::Duration::from_secs(30));
        let ctx = verso::RequestContext::new("verso-upgrade-admin");
        match cmd {
            Upgrade::Status { .. } => {
                let status = client
                    .call_method(&ctx, Status {})
                    .await
                    .map_err(unreachable)?;
                write_status(&status, out)?;
                Ok(true)
            }
            Upgrade::Finalize { wait, timeout, .. } => {
                let wait = if wait {
                    std::time::Duration::from_secs(timeout)
                } else {
                    std::time::Duration::ZERO
                };
                let outcome =
                    finalize_and_wait(&client, &ctx, wait, std::time::Duration::from_secs(1))
                        .await
                        .map_err(unreachable)?;
                match outcome {
                    WaitOutcome::Finalized(status) => {
                        write_status(&status, out)?;
                        Ok(true)
                    }
                    WaitOutcome::TimedOut(status) if wait.is_zero() => {
                        writeln!(
                            out,
                            "finalization started; `verso upgrade status` shows its progress"
                        )?;
                        write_status(&status, out)?;
                        Ok(true)
                    }
                    WaitOutcome::TimedOut(status) => {
                        write_status(&status, out)?;
                        Err(CliError::StillFinalizing(timeout))
                    }
                    WaitOutcome::Refused(refused) => {
                        writeln!(out, "finalization refused: {refused}")?;
                        for b in &refused.blockers {
                            writeln!(out, "blocker: {b}")?;
                        }
                        Ok(false)
                    }
                }
            }
        }
    })
}

fn is_first(all: &[VersionUse], v: &VersionUse) -> bool {
    all.iter()
        .filter(|o| o.component == v.component)
        .map(|o| o.number)
        .min()
        == Some(v.number)
}

fn write_list(contracts: &Lock, out: &mut dyn Write) -> std::io::Result<()> {
    for (name, c) in &contracts.objects {
        writeln!(out, "{name} {} {}", c.version, c.fingerprint)?;
        let fields: Vec<String> = c
            .fields
            .iter()
            .map(|f| {
                let mut s = format!("{} {}", f.name, f.ty);
                if f.nullable {
                    s.push('?');
                }
                if let Some(d) = &f.default {
                    s.push_str(&format!(" = {d}"));
                }
                if let Some(v) = f.since {
                    s.push_str(&format!(" (since {v})"));
                }
                s
            })
            .collect();
        writeln!(out, "    fields: {}", fields.join(", "))?;
        if !c.methods.is_empty() {
            let methods: Vec<String> = c.methods.iter().map(|m| m.signature()).collect();
            writeln!(out, "    methods: {}", methods.join("; "))?;
        }
        if !c.child_versions.is_empty() {
            let cv: Vec<String> = c
                .child_versions
                .iter()
                .map(|(l, m)| format!("{l}->{m}"))
                .collect();
            writeln!(out, "    child_versions: {}", cv.join(", "))?;
        }
    }
    for (name, c) in &contracts.rpc {
        writeln!(out, "rpc {name} {}", c.version)?;
        for m in &c.methods {
            let args: Vec<String> = m
                .args
                .iter()
                .map(|a| {
                    let mut s = format!("{}: {}", a.name, a.ty);
                    if !a.required {
                        s.push('?');
                    }
                    s
                })
                .collect();
            writeln!(out, "    {}({}) since {}", m.name, args.join(", "), m.since)?;
        }
    }
    Ok(())
}
