//! Release N's report form is the one accel's N+1 agent sends on Cyborg's wire: the same
//! hosts discovered by release N's own copy of the discovery and report form
//! (`accel_cyborg17_agent::report`) and by N+1's (`accel-agent`, a dev-dependency of
//! this test only) give the same `DriverDevice` primitives, so a host keeps its
//! devices' keys (control paths, deployable names, attributes) when its agent is
//! upgraded from release N to N+1. A deliberate change of N+1's form that breaks this
//! is a change of the upgrade, to be made knowingly.
// A failed set-up step fails the test with its message.
#![allow(clippy::expect_used)]

use accel_agent::fixture::{sample_host, write_tree};
use verso::{Target, VersionedObject};

fn primitives<'a>(
    devices: impl Iterator<Item = &'a accel_cyborg17::objects::DriverDevice>,
) -> Vec<serde_json::Value> {
    devices
        .map(|d| d.to_primitive(Target::Own).expect("encodes"))
        .collect()
}

#[test]
fn release_n_reports_what_n_plus_1_reports_on_cyborgs_wire() {
    for index in 0..4 {
        let dir = tempfile::tempdir().expect("a directory");
        write_tree(dir.path(), &sample_host(index)).expect("a fixture host");
        let host = format!("compute-{index}");

        let found = accel_cyborg17_agent::discovery::discover(dir.path()).expect("discovered");
        let (ours, left_out) = accel_cyborg17_agent::report::driver_devices(&host, &found);
        assert!(left_out.is_empty(), "{left_out:?}");

        let theirs = accel_agent::discovery::discover(dir.path()).expect("discovered");
        let form = accel_agent::report::driver_devices(&theirs);
        let (theirs, left_out) = accel_agent::cyborg::driver_devices(&host, &form);
        assert!(left_out.is_empty(), "{left_out:?}");

        assert!(!ours.is_empty());
        assert_eq!(
            primitives(ours.iter()),
            primitives(theirs.iter()),
            "host {index}"
        );
    }
}
