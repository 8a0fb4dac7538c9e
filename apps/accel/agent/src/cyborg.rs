//! Cyborg 17's agent API, served by accel's agent so that a Cyborg 17 conductor still
//! running during a migration can call it: topic `cyborg-agent`, server = the host name,
//! on Cyborg's control exchange (`[cyborg] serve_conductor`).
//!
//! - `create_vgpu_mdev(pci_addr, asked_type, ah_uuid)` writes the attach handle's UUID to
//!   `class/mdev_bus/<pci_addr>/mdev_supported_types/<asked_type>/create` under the
//!   agent's sysfs root, and `remove_vgpu_mdev` writes `1` to
//!   `.../<asked_type>/devices/<ah_uuid>/remove`: what Cyborg's GPU utilities do, so
//!   the kernel makes (or removes) the mediated device.
//! - `fpga_program(controlpath_id, bitstream_uuid, driver_name)` refuses a bitstream
//!   that is no UUID as Cyborg's agent does (`InvalidUUID`); programming needs the
//!   bitstream from Glance, which accel's agent does not fetch: it answers
//!   `NotSupported`, and nothing is written.
//!
//! Every argument is checked before anything is touched (a PCI address `DDDD:BB:DD.F`,
//! an mdev type that is one path component, a UUID), so a caller cannot make the agent
//! write outside the mdev tree; a refused call answers a typed error naming the value.

use accel_cyborg17::rpc::{CreateVgpuMdev, FpgaProgram, RemoveVgpuMdev, AGENT_TOPIC};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verso::Version;
use verso_rpc::transport::Transport;
use verso_rpc::{Endpoint, RemoteError, RpcError, RpcServer, ServerHandle, Target};

/// The module of the remote errors this API answers with (Cyborg's exceptions module,
/// so Cyborg's conductor reads them as its own).
pub const ERROR_MODULE: &str = "cyborg.common.exception";

fn invalid(kind: &str, message: String) -> RemoteError {
    RemoteError::new(kind, ERROR_MODULE, message)
}

/// An argument refused: Cyborg's exception class and the message.
type Refused = (&'static str, String);

fn refused((kind, message): Refused) -> RemoteError {
    invalid(kind, message)
}

/// `DDDD:BB:DD.F`, lower-case hexadecimal, as the kernel names PCI functions.
fn check_pci(pci: &str) -> Result<(), Refused> {
    let b = pci.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(|c| c.is_ascii_hexdigit());
    let ok = b.len() == 12
        && hex(0..4)
        && b[4] == b':'
        && hex(5..7)
        && b[7] == b':'
        && hex(8..10)
        && b[10] == b'.'
        && (b'0'..=b'7').contains(&b[11]);
    if ok {
        Ok(())
    } else {
        Err((
            "InvalidParameterValue",
            format!("pci_addr {pci:?} is not a PCI address (DDDD:BB:DD.F)"),
        ))
    }
}

/// An mdev type is one directory name (`nvidia-35`, `i915-GVTg_V5_4`).
fn check_type(t: &str) -> Result<(), Refused> {
    let ok = !t.is_empty()
        && t.len() <= 255
        && t != "."
        && t != ".."
        && t.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err((
            "InvalidParameterValue",
            format!("asked_type {t:?} is not an mdev type name"),
        ))
    }
}

fn check_uuid(u: &str) -> Result<(), Refused> {
    uuid::Uuid::parse_str(u)
        .map(|_| ())
        .map_err(|_| ("InvalidUUID", format!("Expected a uuid but received {u}.")))
}

/// The directory of one mdev type of one GPU.
fn type_dir(sysfs_root: &Path, pci: &str, asked_type: &str) -> PathBuf {
    sysfs_root
        .join("class/mdev_bus")
        .join(pci)
        .join("mdev_supported_types")
        .join(asked_type)
}

/// Writes `text` to the sysfs attribute `path`, which must exist (sysfs attributes are
/// never created by writing): a missing one is `NotFound` naming it.
async fn write_attribute(path: PathBuf, text: String) -> Result<(), RemoteError> {
    let shown = path.display().to_string();
    let done = tokio::task::spawn_blocking(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
    })
    .await
    .map_err(|e| invalid("AgentError", format!("writing {shown}: {e}")))?;
    done.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => invalid("NotFound", format!("{shown} does not exist")),
        _ => invalid("AgentError", format!("writing {shown}: {e}")),
    })
}

/// Cyborg's agent API over the sysfs tree at `sysfs_root` (`/sys` on a host).
pub fn endpoint(sysfs_root: PathBuf) -> Endpoint {
    Endpoint::new(Version::new(1, 0))
        .with_state(sysfs_root)
        .handle(|root: PathBuf, _ctx, m: CreateVgpuMdev| async move {
            check_pci(&m.pci_addr).map_err(refused)?;
            check_type(&m.asked_type).map_err(refused)?;
            check_uuid(&m.ah_uuid).map_err(refused)?;
            let path = type_dir(&root, &m.pci_addr, &m.asked_type).join("create");
            write_attribute(path, m.ah_uuid.clone()).await?;
            tracing::info!(pci = %m.pci_addr, mdev_type = %m.asked_type, mdev = %m.ah_uuid, "mediated device created for Cyborg's conductor");
            Ok(())
        })
        .handle(|root: PathBuf, _ctx, m: RemoveVgpuMdev| async move {
            check_pci(&m.pci_addr).map_err(refused)?;
            check_type(&m.asked_type).map_err(refused)?;
            check_uuid(&m.ah_uuid).map_err(refused)?;
            let path = type_dir(&root, &m.pci_addr, &m.asked_type)
                .join("devices")
                .join(&m.ah_uuid)
                .join("remove");
            write_attribute(path, "1".to_owned()).await?;
            tracing::info!(pci = %m.pci_addr, mdev_type = %m.asked_type, mdev = %m.ah_uuid, "mediated device removed for Cyborg's conductor");
            Ok(())
        })
        .handle(|_, _ctx, m: FpgaProgram| async move {
            check_uuid(&m.bitstream_uuid).map_err(refused)?;
            Err(invalid(
                "NotSupported",
                format!(
                    "fpga_program of bitstream {} with driver {}: accel's agent does not \
                     fetch bitstreams from Glance, so it programs no FPGA",
                    m.bitstream_uuid, m.driver_name
                ),
            ))
        })
        .into_endpoint()
}

/// Serves [`endpoint`] as host `host`'s Cyborg agent (topic `cyborg-agent`, server
/// `host`) over `transport`, whose control exchange must be Cyborg's.
pub async fn serve(
    transport: Arc<dyn Transport>,
    host: &str,
    sysfs_root: PathBuf,
) -> Result<ServerHandle, RpcError> {
    RpcServer::new(transport, Target::new(AGENT_TOPIC).with_server(host))
        .endpoint(endpoint(sysfs_root))?
        .start()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked_before_any_write() {
        assert!(check_pci("0000:3b:00.0").is_ok());
        for bad in [
            "0000:3b:00",
            "../../etc",
            "0000:3b:00.8",
            "0000:3g:00.0",
            "",
        ] {
            assert_eq!(check_pci(bad).expect_err(bad).0, "InvalidParameterValue");
        }
        assert!(check_type("nvidia-35").is_ok());
        assert!(check_type("i915-GVTg_V5_4").is_ok());
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(check_type(bad).is_err(), "{bad}");
        }
        assert_eq!(check_uuid("x").expect_err("x").0, "InvalidUUID");
        assert!(check_uuid("5f0b9d9e-4ec4-4d8b-9a6a-3b1f0d1e2c3a").is_ok());
    }
}
