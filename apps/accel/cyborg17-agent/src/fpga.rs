//! FPGA programming: a bitstream (a Glance image) downloaded, checked and written to an
//! FPGA by the host's vendor tool, as Cyborg's agent does for `fpga_program`.
//!
//! The download is checked before anything touches the card: the image must be
//! `active`, no larger than `[fpga] max_bitstream_bytes`, and its bytes must hash to the
//! `os_hash_value` Glance computed when it was uploaded (sha512, Glance's default; an
//! image with another algorithm is refused rather than written unchecked). The file
//! lives in the agent's state directory only while the tool runs, and is removed
//! whatever happens.
//!
//! The tool is the operator's (`[fpga] program_command`, split on whitespace), run as
//! `<command> <PCI address> <bitstream file>` within `[fpga] program_timeout`; exit 0
//! means programmed. Cyborg's drivers call `fpgaconf` (Intel OPAE) or `xbmgmt` (Xilinx)
//! the same way; a wrapper script adapts the arguments to the card's tool.
//!
//! Release N's frozen copy of what accel's N+1 crate `accel-agent` had
//! (`accel_agent::fpga`, and the tool runner of its `cleanup`), so release N's
//! `fpga_program` does not change when N+1's does.

use accel_cyborg17::keystone::{Service, Session, SessionError};
use sha2::{Digest, Sha512};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Why a bitstream was not programmed. Each maps to the exception class Cyborg's agent
/// raises for it ([`ProgramError::cyborg_class`]).
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// The image does not exist (or is not visible to the agent's user).
    #[error("image {0} not found in Glance")]
    ImageNotFound(String),
    /// Glance refused the agent's user.
    #[error("not authorized for image {0}")]
    ImageNotAuthorized(String),
    /// The image cannot be a bitstream for this agent: not active, too large, or its
    /// bytes are not what Glance recorded.
    #[error("image {image} is not acceptable: {why}")]
    ImageUnacceptable {
        /// The image.
        image: String,
        /// Why.
        why: String,
    },
    /// Glance could not be reached or answered what its API does not document.
    #[error("Glance: {0}")]
    Glance(String),
    /// The bitstream could not be written to the state directory.
    #[error("writing the bitstream to {path}: {why}")]
    Store {
        /// The file.
        path: String,
        /// The OS error.
        why: String,
    },
    /// The programming tool failed (or outlived the timeout).
    #[error("programming {address}: {source}")]
    Tool {
        /// The FPGA's PCI address.
        address: String,
        /// What the tool did.
        #[source]
        source: ToolError,
    },
}

impl ProgramError {
    /// The class of `cyborg.common.exception` Cyborg's agent raises for this.
    pub fn cyborg_class(&self) -> &'static str {
        match self {
            ProgramError::ImageNotFound(_) => "ResourceNotFound",
            ProgramError::ImageNotAuthorized(_) => "ImageNotAuthorized",
            ProgramError::ImageUnacceptable { .. } => "ImageUnacceptable",
            ProgramError::Glance(_) => "GlanceConnectionFailed",
            ProgramError::Store { .. } | ProgramError::Tool { .. } => "FPGAProgramError",
        }
    }
}

/// Why the programming tool failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
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
}

/// `[fpga]` as the agent uses it.
#[derive(Clone, Debug)]
pub struct FpgaOptions {
    /// The tool and its leading arguments (`[fpga] program_command`, split on
    /// whitespace).
    pub program_command: Vec<String>,
    /// How long the tool may run before it is killed.
    pub program_timeout: Duration,
    /// The largest bitstream taken.
    pub max_bitstream_bytes: u64,
    /// Where a bitstream is kept while the tool runs (the agent's state directory).
    pub work_dir: PathBuf,
}

/// Glance as the agent's service user sees it.
#[derive(Clone, Debug)]
pub struct Glance {
    service: Service,
}

impl Glance {
    /// Glance through `session`'s catalog (`image`), or at `endpoint_override`.
    pub fn new(session: Session, endpoint_override: Option<String>) -> Glance {
        Glance {
            service: Service::new(session, "image", endpoint_override),
        }
    }

    fn session(&self) -> &Session {
        self.service.session()
    }

    async fn endpoint(&self) -> Result<String, ProgramError> {
        self.service.endpoint().await.map_err(glance_error)
    }
}

fn glance_error(e: SessionError) -> ProgramError {
    ProgramError::Glance(e.to_string())
}

/// Programs FPGAs with bitstreams from Glance.
#[derive(Clone, Debug)]
pub struct Programmer {
    glance: Glance,
    options: FpgaOptions,
}

/// What Glance says of an image (`GET /v2/images/{id}`), the fields checked.
#[derive(serde::Deserialize)]
struct Image {
    status: String,
    size: Option<u64>,
    os_hash_algo: Option<String>,
    os_hash_value: Option<String>,
}

impl Programmer {
    /// A programmer downloading from `glance` and running `options`' tool; `None` when
    /// no tool is configured (programming is then refused as not supported).
    pub fn new(glance: Glance, options: FpgaOptions) -> Option<Programmer> {
        (!options.program_command.is_empty()).then_some(Programmer { glance, options })
    }

    /// Downloads bitstream `image` and programs the FPGA at `address` (`DDDD:BB:DD.F`,
    /// checked by the caller) with it.
    pub async fn program(&self, address: &str, image: &str) -> Result<(), ProgramError> {
        let file = self.download(image).await?;
        let (program, leading) = self
            .options
            .program_command
            .split_first()
            .ok_or_else(|| ProgramError::Glance("no program command".into()))?;
        let mut args = leading.to_vec();
        args.push(address.to_owned());
        args.push(file.path.display().to_string());
        let done = run(program, &args, self.options.program_timeout).await;
        drop(file);
        done.map(|_| ()).map_err(|source| ProgramError::Tool {
            address: address.to_owned(),
            source,
        })
    }

    /// The image's bytes in a file of the work directory, checked against what Glance
    /// recorded of them.
    async fn download(&self, image: &str) -> Result<TempFile, ProgramError> {
        let base = format!("{}/v2/images/{image}", self.glance.endpoint().await?);
        let http = self.glance.session().http().clone();
        let response = self
            .glance
            .session()
            .send(|token| http.get(&base).header("X-Auth-Token", token))
            .await
            .map_err(glance_error)?;
        check_status(response.status().as_u16(), image)?;
        let meta: Image = response
            .json()
            .await
            .map_err(|e| ProgramError::Glance(format!("image {image}: {e}")))?;
        let unacceptable = |why: String| ProgramError::ImageUnacceptable {
            image: image.to_owned(),
            why,
        };
        if meta.status != "active" {
            return Err(unacceptable(format!(
                "its status is {}, not active",
                meta.status
            )));
        }
        let max = self.options.max_bitstream_bytes;
        if meta.size.is_some_and(|s| s > max) {
            return Err(unacceptable(format!(
                "{} bytes, more than [fpga] max_bitstream_bytes ({max})",
                meta.size.unwrap_or_default()
            )));
        }
        let want = match (meta.os_hash_algo.as_deref(), meta.os_hash_value) {
            (Some("sha512"), Some(v)) => v.to_ascii_lowercase(),
            (algo, _) => {
                return Err(unacceptable(format!(
                    "Glance recorded no sha512 of it ({}), so its bytes cannot be checked",
                    algo.unwrap_or("no hash")
                )))
            }
        };

        let file_url = format!("{base}/file");
        let mut response = self
            .glance
            .session()
            .send(|token| http.get(&file_url).header("X-Auth-Token", token))
            .await
            .map_err(glance_error)?;
        check_status(response.status().as_u16(), image)?;
        tokio::fs::create_dir_all(&self.options.work_dir)
            .await
            .map_err(|e| ProgramError::Store {
                path: self.options.work_dir.display().to_string(),
                why: e.to_string(),
            })?;
        let path = self.options.work_dir.join(format!(
            "bitstream-{image}-{}.gbs",
            uuid::Uuid::new_v4().simple()
        ));
        let store = |e: std::io::Error| ProgramError::Store {
            path: path.display().to_string(),
            why: e.to_string(),
        };
        let mut out = tokio::fs::File::create(&path).await.map_err(store)?;
        let file = TempFile { path: path.clone() };
        let mut hash = Sha512::new();
        let mut size = 0u64;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ProgramError::Glance(format!("downloading image {image}: {e}")))?
        {
            size += chunk.len() as u64;
            if size > max {
                return Err(unacceptable(format!(
                    "more than [fpga] max_bitstream_bytes ({max}) bytes"
                )));
            }
            hash.update(&chunk);
            out.write_all(&chunk).await.map_err(store)?;
        }
        out.flush().await.map_err(store)?;
        out.sync_all().await.map_err(store)?;
        let got = hex(&hash.finalize());
        if got != want {
            return Err(unacceptable(format!(
                "its {size} bytes hash to sha512 {got}, Glance recorded {want}"
            )));
        }
        Ok(file)
    }
}

/// Starts `program`. A program file that is still open for writing somewhere (being
/// replaced by an operator, or inherited for an instant by another thread's fork) makes
/// exec fail with ETXTBSY; that passes within milliseconds, so it is retried briefly.
async fn spawn(program: &str, args: &[String]) -> Result<tokio::process::Child, ToolError> {
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
                return Err(ToolError::Spawn {
                    program: program.to_owned(),
                    why: e.to_string(),
                })
            }
        }
    }
}

async fn run(program: &str, args: &[String], timeout: Duration) -> Result<Vec<u8>, ToolError> {
    let child = spawn(program, args).await?;
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => out.map_err(|e| ToolError::Spawn {
            program: program.to_owned(),
            why: e.to_string(),
        })?,
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => {
            return Err(ToolError::Timeout {
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
        Err(ToolError::Failed {
            program: program.to_owned(),
            status: output.status.to_string(),
            stderr: tail,
        })
    }
}

fn check_status(status: u16, image: &str) -> Result<(), ProgramError> {
    match status {
        200..=299 => Ok(()),
        404 => Err(ProgramError::ImageNotFound(image.to_owned())),
        401 | 403 => Err(ProgramError::ImageNotAuthorized(image.to_owned())),
        other => Err(ProgramError::Glance(format!("image {image}: HTTP {other}"))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A downloaded bitstream, removed when dropped (programmed, failed or cancelled).
struct TempFile {
    path: PathBuf,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "bitstream file left behind");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_cyborgs_exceptions() {
        assert!(check_status(200, "i").is_ok());
        let class = |s| check_status(s, "i").map_err(|e| e.cyborg_class());
        assert_eq!(class(404), Err("ResourceNotFound"));
        assert_eq!(class(403), Err("ImageNotAuthorized"));
        assert_eq!(class(401), Err("ImageNotAuthorized"));
        assert_eq!(class(500), Err("GlanceConnectionFailed"));
    }

    #[test]
    fn hashes_print_as_glance_records_them() {
        assert_eq!(hex(&[0x00, 0xab, 0x7f]), "00ab7f");
    }
}
