//! FPGA programming with a bitstream from a real Glance (glance 33 of the test
//! .venv-openstack, behind the real Keystone), asked by Cyborg 17's own `AgentAPI` (as
//! Cyborg's conductor and API call a host's agent) over RabbitMQ: accel's agent finds
//! Glance in the Keystone catalog, downloads the image, checks it against Glance's sha512
//! and runs the programming tool with the FPGA's PCI address and the file, which is gone
//! afterwards. A missing image, one without data, and a tool that fails are answered as
//! Cyborg's agent answers them.
//!
//! Uses `VERSO_TEST_RABBIT_URL`, `VERSO_TEST_PYTHON`, `VERSO_TEST_KEYSTONE_URL` and
//! `VERSO_TEST_GLANCE_URL`, and `VERSO_TEST_GLANCE_STORE` for the tampered image
//! (scripts/test.sh starts the services and sets them all).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_agent::cyborg;
use accel_agent::fpga::{FpgaOptions, Glance, Programmer};
use accel_cyborg17::testing::{cyborg_calls_agent, cyborg_transport};
use accel_keystone::testing::glance_image;
use accel_keystone::{AuthOptions, Session};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const FPGA: &str = "0000:5e:00.0";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: scripts/test.sh starts the test services and sets it")
    })
}

/// The agent's service user (accel's: admin in project `service`, which owns the
/// images the test uploads).
fn session() -> Session {
    Session::new(AuthOptions::new(
        &env("VERSO_TEST_KEYSTONE_URL"),
        "accel",
        "verso-accel",
        "service",
    ))
    .expect("a Keystone session")
}

/// A new image in the test Glance; with `data`, uploaded (and then active).
async fn image(session: &Session, data: Option<&[u8]>) -> String {
    glance_image(session, &env("VERSO_TEST_GLANCE_URL"), data)
        .await
        .expect("an image in Glance")
}

/// A programming tool: records its arguments and the sha256 of the file it was given
/// in `record`, then exits with `status`.
fn tool(dir: &Path, record: &Path, status: i32) -> PathBuf {
    let path = dir.join(format!("program-fpga-{status}"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s %s ' \"$1\" \"$2\" > {record}\nsha256sum \"$2\" | cut -d' ' -f1 >> {record}\nexit {status}\n",
            record = record.display()
        ),
    )
    .expect("write the tool");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn programmer(tool: &Path, work_dir: &Path, endpoint_override: Option<String>) -> Arc<Programmer> {
    Arc::new(
        Programmer::new(
            Glance::new(session(), endpoint_override),
            FpgaOptions {
                program_command: vec![tool.display().to_string()],
                program_timeout: Duration::from_secs(30),
                max_bitstream_bytes: 1 << 20,
                work_dir: work_dir.to_owned(),
            },
        )
        .expect("a tool is configured"),
    )
}

fn leftovers(work_dir: &Path) -> Vec<String> {
    std::fs::read_dir(work_dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborg_programs_an_fpga_through_accels_agent_with_a_glance_bitstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("state");
    let record = dir.path().join("programmed");
    let bitstream: Vec<u8> = (0..70_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
    let session = session();
    let id = image(&session, Some(&bitstream)).await;

    let transport = cyborg_transport().await;
    let host = format!("accel-fpga-{}", uuid::Uuid::new_v4().simple());
    // Glance found through the catalog (no endpoint override).
    let ok_tool = tool(dir.path(), &record, 0);
    let server = cyborg::serve(
        transport.clone(),
        &host,
        dir.path().to_path_buf(),
        Some(programmer(&ok_tool, &work, None)),
    )
    .await
    .expect("serves cyborg-agent");

    let reply = cyborg_calls_agent(&host, "fpga_program", FPGA, "", &id).await;
    assert_eq!(reply, Ok(Value::Bool(true)));
    let recorded = std::fs::read_to_string(&record).expect("the tool ran");
    let mut fields = recorded.split_whitespace();
    assert_eq!(fields.next(), Some(FPGA), "{recorded}");
    let file = fields.next().expect("the bitstream path");
    assert!(file.starts_with(&work.display().to_string()), "{file}");
    assert_eq!(
        fields.next(),
        Some(format!("{:x}", Sha256::digest(&bitstream)).as_str()),
        "the tool got Glance's bytes"
    );
    assert!(!Path::new(file).exists(), "the bitstream file is removed");

    // Cyborg's exception classes for what cannot be programmed; the tool never runs.
    std::fs::remove_file(&record).expect("reset");
    let missing = uuid::Uuid::new_v4().to_string();
    let (class, message) = cyborg_calls_agent(&host, "fpga_program", FPGA, "", &missing)
        .await
        .expect_err("no such image");
    assert_eq!(
        class, "cyborg.common.exception.ResourceNotFound",
        "{message}"
    );
    let empty = image(&session, None).await;
    let (class, message) = cyborg_calls_agent(&host, "fpga_program", FPGA, "", &empty)
        .await
        .expect_err("no data");
    assert_eq!(
        class, "cyborg.common.exception.ImageUnacceptable",
        "{message}"
    );
    assert!(message.contains("queued"), "{message}");
    assert!(!record.exists(), "the tool ran for a refused image");
    server.stop().await;

    // A tool that fails: Cyborg's drivers answer false, and the file is gone too.
    let failing = tool(dir.path(), &record, 3);
    let server = cyborg::serve(
        transport.clone(),
        &host,
        dir.path().to_path_buf(),
        Some(programmer(
            &failing,
            &work,
            Some(env("VERSO_TEST_GLANCE_URL")),
        )),
    )
    .await
    .expect("serves cyborg-agent");
    let reply = cyborg_calls_agent(&host, "fpga_program", FPGA, "", &id).await;
    assert_eq!(reply, Ok(Value::Bool(false)));
    assert!(record.exists(), "the failing tool ran");
    assert_eq!(leftovers(&work), Vec::<String>::new());
    server.stop().await;
    transport.close().await;
}

/// Bytes Glance serves that are not the bytes it hashed at upload (its store changed
/// under it: a disk fault, or someone writing there) are refused before any tool runs,
/// as Cyborg's `ImageUnacceptable`, and nothing is left in the state directory.
/// Uses `VERSO_TEST_GLANCE_STORE`, the test Glance's file store.
#[tokio::test]
async fn a_bitstream_whose_bytes_glance_did_not_hash_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("state");
    let record = dir.path().join("programmed");
    let bitstream: Vec<u8> = (0..20_000u32).map(|i| (i * 11 + i / 7) as u8).collect();
    let id = image(&session(), Some(&bitstream)).await;
    let stored = PathBuf::from(env("VERSO_TEST_GLANCE_STORE")).join(&id);
    let mut tampered = std::fs::read(&stored).expect("Glance stored the image there");
    assert_eq!(tampered, bitstream);
    tampered[1_000] ^= 0xff;
    std::fs::write(&stored, &tampered).expect("change the stored image");

    let programmer = programmer(
        &tool(dir.path(), &record, 0),
        &work,
        Some(env("VERSO_TEST_GLANCE_URL")),
    );
    let err = programmer
        .program(FPGA, &id)
        .await
        .expect_err("bytes Glance did not hash");
    assert_eq!(err.cyborg_class(), "ImageUnacceptable", "{err}");
    assert!(err.to_string().contains("hash to sha512"), "{err}");
    assert!(
        !record.exists(),
        "the tool ran for bytes that failed the check"
    );
    assert_eq!(leftovers(&work), Vec::<String>::new());
}
