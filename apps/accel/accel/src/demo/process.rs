//! Components as processes of this binary (`accel conductor`, `accel agent`,
//! ...), for the demo on a real broker: each writes its log to a file in the demo's
//! directory and is stopped as a service manager stops it (SIGTERM, then SIGKILL).

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long a stopped component may take to finish before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Starts components as processes of one executable.
#[derive(Clone, Debug)]
pub struct Launcher {
    exe: PathBuf,
    logs: PathBuf,
}

/// A running component process.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    /// It leads a process group of its own, signalled whole (a service that forks
    /// workers, as oslo.service's do).
    group: bool,
}

/// How a process that was expected to end ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// What it wrote to stderr and stdout.
    pub output: String,
}

impl Launcher {
    /// Components of `exe`, logging into `logs`.
    pub fn new(exe: PathBuf, logs: PathBuf) -> Result<Launcher, Error> {
        std::fs::create_dir_all(&logs)?;
        Ok(Launcher { exe, logs })
    }

    fn command(
        &self,
        program: &Path,
        name: &str,
        args: &[String],
    ) -> Result<(Command, PathBuf), Error> {
        let log = self.logs.join(format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true);
        Ok((command, log))
    }

    /// Starts `name` (also its log's name): this executable with `args`.
    pub fn spawn(&self, name: &str, args: &[String]) -> Result<Process, Error> {
        self.spawn_program(&self.exe.clone(), name, args)
    }

    /// Starts `name` (also its log's name): `program` with `args`.
    pub fn spawn_program(
        &self,
        program: &Path,
        name: &str,
        args: &[String],
    ) -> Result<Process, Error> {
        self.start(program, name, args, false)
    }

    /// [`Launcher::spawn_program`] in a process group of its own, stopped and killed
    /// whole: for services that fork workers which would outlive their parent (Cyborg's,
    /// on oslo.service).
    pub fn spawn_group(
        &self,
        program: &Path,
        name: &str,
        args: &[String],
    ) -> Result<Process, Error> {
        self.start(program, name, args, true)
    }

    fn start(
        &self,
        program: &Path,
        name: &str,
        args: &[String],
        group: bool,
    ) -> Result<Process, Error> {
        let (mut command, log) = self.command(program, name, args)?;
        if group {
            command.process_group(0);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {name} ({}): {e}", program.display()))?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log,
            group,
        })
    }

    /// Runs `name` with `args` to its end (at most `limit`).
    pub async fn run(
        &self,
        name: &str,
        args: &[String],
        limit: Duration,
    ) -> Result<Finished, Error> {
        let mut process = self.spawn(name, args)?;
        let status = match tokio::time::timeout(limit, process.child.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                process.stop().await;
                return Err(format!("{name} did not finish within {limit:?}").into());
            }
        };
        Ok(Finished {
            code: status.code(),
            output: std::fs::read_to_string(&process.log).unwrap_or_default(),
        })
    }
}

impl Drop for Process {
    /// A group leader still running when dropped (the demo ended by an error) takes its
    /// workers with it; `kill_on_drop` reaches the leader only.
    fn drop(&mut self) {
        if self.group {
            self.signal(Signal::SIGKILL);
        }
    }
}

impl Process {
    /// Its process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it has written to its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it has exited (and with what).
    pub fn exited(&mut self) -> Option<Option<i32>> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code()),
            Ok(None) => None,
            Err(_) => Some(None),
        }
    }

    /// Fails with its log's tail if it has exited.
    pub fn ensure_running(&mut self) -> Result<(), Error> {
        match self.exited() {
            None => Ok(()),
            Some(code) => {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(format!(
                    "{} exited ({}); its log {}:\n{}",
                    self.name,
                    code.map_or("killed".to_owned(), |c| format!("code {c}")),
                    self.log.display(),
                    tail.join("\n")
                )
                .into())
            }
        }
    }

    /// Its log file (stdout and stderr).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Sends `signal` to it (to its whole group, for a group leader).
    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.child.id() {
            let pid = pid as i32;
            let _ = kill(Pid::from_raw(if self.group { -pid } else { pid }), signal);
        }
    }

    /// Kills it at once (SIGKILL), as a crash or a lost host would stop it.
    pub async fn kill(mut self) {
        self.signal(Signal::SIGKILL);
        let _ = self.child.kill().await;
    }

    /// Stops it: SIGTERM, then SIGKILL after a grace period.
    pub async fn stop(mut self) {
        if self.child.id().is_some() {
            self.signal(Signal::SIGTERM);
            let ended = tokio::time::timeout(STOP_GRACE, self.child.wait())
                .await
                .is_ok();
            if ended {
                if self.group {
                    // Workers the leader did not take with it.
                    self.signal(Signal::SIGKILL);
                }
                return;
            }
            tracing::warn!(process = %self.name, "did not stop on SIGTERM; killed");
        }
        self.signal(Signal::SIGKILL);
        let _ = self.child.kill().await;
    }
}
