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
    /// Where its own lines start in `log`: a process started again under the same name
    /// appends to the log of the one before.
    log_start: u64,
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
        let log_start = std::fs::metadata(&log).map_or(0, |m| m.len());
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
            log_start,
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

    /// What it has written to its log so far (not what an earlier process of its name
    /// wrote there).
    pub fn log_text(&self) -> String {
        let all = std::fs::read(&self.log).unwrap_or_default();
        let start = usize::try_from(self.log_start)
            .unwrap_or(usize::MAX)
            .min(all.len());
        String::from_utf8_lossy(&all[start..]).into_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A process started again under a name sees only its own lines: waiting for a line
    /// the one before wrote would find it at once.
    #[tokio::test]
    async fn a_restarted_process_reads_only_its_own_log() {
        let dir = tempfile::tempdir().expect("dir");
        let launcher =
            Launcher::new(PathBuf::from("/bin/sh"), dir.path().to_owned()).expect("launcher");
        let sh = Path::new("/bin/sh");
        let script = |text: &str| vec!["-c".to_owned(), format!("echo {text}")];
        let mut first = launcher
            .spawn_group(sh, "svc", &script("first-run"))
            .expect("starts");
        first.child.wait().await.expect("ends");
        assert_eq!(first.log_text(), "first-run\n");
        let mut second = launcher
            .spawn_group(sh, "svc", &script("second-run"))
            .expect("starts");
        second.child.wait().await.expect("ends");
        assert_eq!(second.log_text(), "second-run\n");
        let whole = std::fs::read_to_string(second.log()).expect("the log");
        assert_eq!(whole, "first-run\nsecond-run\n");
    }
}
