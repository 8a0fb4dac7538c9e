//! NVMe secure cleanup on the agent: erase a released SSD before anyone else gets it.
//!
//! The conductor decides *that* a device must be cleaned (it puts the handle in
//! `cleaning`); the agent decides *how*, with `[nvme] cleanup_command`:
//! - a configured command is run with the namespace's device path as its last argument
//!   (`/dev/nvme1n1`); exit status 0 means clean;
//! - without one, the built-in cleanup uses the `nvme` CLI (nvme-cli): it reads the
//!   controller's capabilities (`nvme id-ctrl -o json`) and runs a block-erase sanitize
//!   when the controller supports it, otherwise a secure-erase format (`--ses=1`), and
//!   refuses (a failed cleanup, never a silent success) when neither is supported or
//!   `nvme` is not installed.
//!
//! Every run has a timeout (`[nvme] cleanup_timeout`); a command that outlives it is
//! killed and the cleanup counts as failed, so an unclean device is never reused.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// How to clean a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CleanupMethod {
    /// `program args... <device path>`.
    Command {
        /// The program.
        program: PathBuf,
        /// Arguments before the device path.
        args: Vec<String>,
    },
    /// The built-in nvme-cli sanitize or secure-erase format.
    NvmeCli,
}

impl CleanupMethod {
    /// From `[nvme] cleanup_command` (split on whitespace; empty or absent: the built-in).
    pub fn from_config(command: Option<&str>) -> CleanupMethod {
        let mut words = command.unwrap_or_default().split_whitespace();
        match words.next() {
            None => CleanupMethod::NvmeCli,
            Some(program) => CleanupMethod::Command {
                program: PathBuf::from(program),
                args: words.map(str::to_owned).collect(),
            },
        }
    }
}

/// Why a cleanup failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CleanupError {
    /// The command could not be started.
    #[error("cannot run {program}: {why}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        why: String,
    },
    /// The command exited unsuccessfully.
    #[error("{program} failed ({status}): {stderr}")]
    Failed {
        /// The program.
        program: String,
        /// Its exit status.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// The command outlived the timeout and was killed.
    #[error("{program} did not finish within {seconds} s and was killed")]
    Timeout {
        /// The program.
        program: String,
        /// The timeout.
        seconds: u64,
    },
    /// The device supports no erase the built-in cleanup can verify.
    #[error("{device}: {why}")]
    Unsupported {
        /// The device path.
        device: String,
        /// What is missing.
        why: String,
    },
}

/// Starts `program`. A program file that is still open for writing somewhere (being
/// replaced by an operator, or inherited for an instant by another thread's fork) makes
/// exec fail with ETXTBSY; that passes within milliseconds, so it is retried briefly.
async fn spawn(program: &str, args: &[String]) -> Result<tokio::process::Child, CleanupError> {
    const ETXTBSY: i32 = 26;
    let mut attempt = 0;
    loop {
        let spawned = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        match spawned {
            Ok(child) => return Ok(child),
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempt < 20 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => {
                return Err(CleanupError::Spawn {
                    program: program.to_owned(),
                    why: e.to_string(),
                })
            }
        }
    }
}

pub(crate) async fn run(
    program: &str,
    args: &[String],
    timeout: Duration,
) -> Result<Vec<u8>, CleanupError> {
    let child = spawn(program, args).await?;
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => out.map_err(|e| CleanupError::Spawn {
            program: program.to_owned(),
            why: e.to_string(),
        })?,
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => {
            return Err(CleanupError::Timeout {
                program: program.to_owned(),
                seconds: timeout.as_secs(),
            })
        }
    };
    if output.status.success() {
        Ok(output.stdout)
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .trim()
            .chars()
            .rev()
            .take(300)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(CleanupError::Failed {
            program: program.to_owned(),
            status: output.status.to_string(),
            stderr: tail,
        })
    }
}

/// Cleans the namespace at `device` (`/dev/nvme1n1`) with `method`, within `timeout`.
pub async fn clean(
    method: &CleanupMethod,
    device: &str,
    timeout: Duration,
) -> Result<(), CleanupError> {
    match method {
        CleanupMethod::Command { program, args } => {
            let mut all = args.clone();
            all.push(device.to_owned());
            run(&program.to_string_lossy(), &all, timeout)
                .await
                .map(drop)
        }
        CleanupMethod::NvmeCli => {
            let controller = controller_of(device).ok_or_else(|| CleanupError::Unsupported {
                device: device.to_owned(),
                why: "not an NVMe namespace path (/dev/nvmeXnY)".into(),
            })?;
            let id = run(
                "nvme",
                &[
                    "id-ctrl".into(),
                    controller.clone(),
                    "-o".into(),
                    "json".into(),
                ],
                timeout,
            )
            .await?;
            let id: serde_json::Value =
                serde_json::from_slice(&id).map_err(|e| CleanupError::Unsupported {
                    device: device.to_owned(),
                    why: format!("nvme id-ctrl gave no JSON: {e}"),
                })?;
            match choose_erase(&id) {
                Some(Erase::Sanitize) => run("nvme", &["sanitize".into(), controller, "--sanact=2".into()], timeout).await.map(drop),
                Some(Erase::Format) => run("nvme", &["format".into(), device.to_owned(), "--ses=1".into(), "--force".into()], timeout).await.map(drop),
                None => Err(CleanupError::Unsupported {
                    device: device.to_owned(),
                    why: "the controller supports neither block-erase sanitize nor secure-erase format".into(),
                }),
            }
        }
    }
}

/// The erase the built-in cleanup runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Erase {
    /// `nvme sanitize --sanact=2` (block erase).
    Sanitize,
    /// `nvme format --ses=1` (user-data secure erase).
    Format,
}

/// Picks the erase a controller supports from its `id-ctrl` JSON: block-erase sanitize
/// (SANICAP bit 1) first, else secure-erase format (FNA/OACS: format supported, OACS bit 1).
pub fn choose_erase(id_ctrl: &serde_json::Value) -> Option<Erase> {
    let field = |k: &str| {
        id_ctrl
            .get(k)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    };
    if field("sanicap") & 0b10 != 0 {
        Some(Erase::Sanitize)
    } else if field("oacs") & 0b10 != 0 {
        Some(Erase::Format)
    } else {
        None
    }
}

/// `/dev/nvme1n2` -> `/dev/nvme1`.
fn controller_of(device: &str) -> Option<String> {
    let name = device.strip_prefix("/dev/")?;
    let rest = name.strip_prefix("nvme")?;
    let (ctrl, ns) = rest.split_once('n')?;
    (!ctrl.is_empty()
        && ctrl.bytes().all(|b| b.is_ascii_digit())
        && !ns.is_empty()
        && ns.bytes().all(|b| b.is_ascii_digit()))
    .then(|| format!("/dev/nvme{ctrl}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_map_to_controllers() {
        assert_eq!(controller_of("/dev/nvme1n2").as_deref(), Some("/dev/nvme1"));
        assert_eq!(
            controller_of("/dev/nvme12n1").as_deref(),
            Some("/dev/nvme12")
        );
        assert_eq!(controller_of("/dev/sda"), None);
        assert_eq!(controller_of("/dev/nvme1"), None);
        assert_eq!(controller_of("/dev/nvmeXn1"), None);
    }

    #[test]
    fn the_erase_follows_the_controllers_capabilities() {
        use serde_json::json;
        assert_eq!(
            choose_erase(&json!({"sanicap": 3, "oacs": 2})),
            Some(Erase::Sanitize)
        );
        assert_eq!(
            choose_erase(&json!({"sanicap": 1, "oacs": 0x17})),
            Some(Erase::Format)
        );
        assert_eq!(choose_erase(&json!({"sanicap": 0, "oacs": 0})), None);
        assert_eq!(choose_erase(&json!({})), None);
    }

    #[test]
    fn the_configured_command_is_split_into_program_and_arguments() {
        assert_eq!(CleanupMethod::from_config(None), CleanupMethod::NvmeCli);
        assert_eq!(
            CleanupMethod::from_config(Some("  ")),
            CleanupMethod::NvmeCli
        );
        assert_eq!(
            CleanupMethod::from_config(Some("/usr/local/bin/erase --verify")),
            CleanupMethod::Command {
                program: "/usr/local/bin/erase".into(),
                args: vec!["--verify".into()]
            }
        );
    }
}
