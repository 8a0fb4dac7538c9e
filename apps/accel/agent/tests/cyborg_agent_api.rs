//! accel's agent serving Cyborg 17's agent API to Cyborg's own client (Cyborg's
//! `AgentAPI`, as a Cyborg 17 conductor calls a host's agent during a migration), over
//! RabbitMQ on exchange `cyborg`: mediated devices made and removed through a fixture
//! sysfs `mdev_supported_types` tree, bad arguments refused with Cyborg's exception
//! classes (rebuilt by Cyborg's client as its own) before anything is written, and FPGA
//! programming refused as not supported without a programming tool.
//! Uses `VERSO_TEST_RABBIT_URL` and `VERSO_TEST_PYTHON` (scripts/test.sh sets both).
// A failed set-up step fails the test (or bench) with its message.
#![allow(clippy::expect_used)]

use accel_agent::cyborg;
use accel_cyborg17::testing::{cyborg_calls_agent, cyborg_transport};
use std::path::Path;

const GPU: &str = "0000:3b:00.0";
const MDEV_TYPE: &str = "nvidia-35";

/// The GPU's `mdev_supported_types` tree of the one type.
fn fixture(root: &Path) -> std::path::PathBuf {
    accel_agent::fixture::write_mdev_type(root, GPU, MDEV_TYPE).expect("mdev tree")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cyborgs_conductor_makes_and_removes_mdevs_through_accels_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let type_dir = fixture(dir.path());
    let host = format!("accel-agent-{}", uuid::Uuid::new_v4().simple());
    let transport = cyborg_transport().await;
    let server = cyborg::serve(transport.clone(), &host, dir.path().to_path_buf(), None)
        .await
        .expect("serves cyborg-agent");

    let mdev = uuid::Uuid::new_v4().to_string();
    let reply = cyborg_calls_agent(&host, "create_vgpu_mdev", GPU, MDEV_TYPE, &mdev).await;
    assert_eq!(reply, Ok(serde_json::Value::Null));
    assert_eq!(
        std::fs::read_to_string(type_dir.join("create")).expect("create"),
        mdev,
        "the attach handle's UUID was written to create"
    );

    // The kernel made the device; removing it writes 1 to its remove attribute.
    let device = type_dir.join("devices").join(&mdev);
    std::fs::create_dir_all(&device).expect("mdev device");
    std::fs::write(device.join("remove"), "").expect("remove attribute");
    let reply = cyborg_calls_agent(&host, "remove_vgpu_mdev", GPU, MDEV_TYPE, &mdev).await;
    assert_eq!(reply, Ok(serde_json::Value::Null));
    assert_eq!(
        std::fs::read_to_string(device.join("remove")).expect("remove"),
        "1"
    );

    // Refused with Cyborg's exception classes, nothing written.
    std::fs::write(type_dir.join("create"), "").expect("reset");
    let (class, message) = cyborg_calls_agent(&host, "create_vgpu_mdev", GPU, "../../x", &mdev)
        .await
        .expect_err("a type that is no directory name");
    assert_eq!(
        class, "cyborg.common.exception.InvalidParameterValue",
        "{message}"
    );
    let (class, _) = cyborg_calls_agent(&host, "create_vgpu_mdev", GPU, MDEV_TYPE, "nope")
        .await
        .expect_err("no UUID");
    assert_eq!(class, "cyborg.common.exception.InvalidUUID");
    let (class, message) = cyborg_calls_agent(&host, "create_vgpu_mdev", GPU, "nvidia-36", &mdev)
        .await
        .expect_err("a type the GPU does not offer");
    assert!(message.contains("nvidia-36"), "{class}: {message}");
    assert_eq!(
        std::fs::read_to_string(type_dir.join("create")).expect("create"),
        "",
        "no refused call wrote anything"
    );
    assert!(!dir.path().join("x").exists());

    // FPGA programming: a bitstream that is no UUID as Cyborg refuses it, else not
    // supported by an agent without a programming tool (tests/fpga_program.rs has one).
    let (class, _) = cyborg_calls_agent(&host, "fpga_program", GPU, MDEV_TYPE, "not-a-uuid")
        .await
        .expect_err("no UUID");
    assert_eq!(class, "cyborg.common.exception.InvalidUUID");
    let (_, message) = cyborg_calls_agent(&host, "fpga_program", GPU, MDEV_TYPE, &mdev)
        .await
        .expect_err("not supported");
    assert!(
        message.contains("has no [fpga] program_command"),
        "{message}"
    );

    server.stop().await;
    transport.close().await;
}
