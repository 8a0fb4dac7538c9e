//! OpenStack Cyborg 17's agent in Rust: the agent of accel's release N to be, beside
//! `accel-cyborg17-conductor` and `accel-cyborg17-api`. It never touches the database.
//!
//! Run in place of `cyborg-agent` on a compute host, on the same `cyborg.conf`
//! ([`config`]), it does what Cyborg 17's agent service does on the wire:
//! - reports the host's devices to the conductor (`report_data(hostname,
//!   driver_device_list)` on `cyborg-conductor`, exchange `cyborg`: a plain list of
//!   `DriverDevice` 1.4 objects) at start and every interval ([`run`]);
//! - serves Cyborg's agent API 1.0 on `cyborg-agent` with the host as server:
//!   `create_vgpu_mdev` / `remove_vgpu_mdev` through sysfs `mdev_supported_types`, and
//!   `fpga_program` with the bitstream from Glance and the operator's tool.
//!
//! What differs from Cyborg's agent is below the wire: devices are found by accel's
//! sysfs discovery ([`discovery`]: PCI functions with their drivers, SR-IOV virtual
//! functions, NVMe namespaces) instead of Cyborg's per-vendor drivers, and turned into
//! Cyborg's report form by [`report`] (the form accel's release N+1 agent sends on
//! Cyborg's wire, so a host keeps its devices' keys when its agent is upgraded); FPGAs
//! are programmed by a command the operator names ([`fpga`]).
//!
//! [`discovery`], [`report`], [`cyborg`] and [`fpga`] are release N's own copies of
//! what accel's N+1 agent (`accel-agent`) had when release N was frozen: release N
//! depends on no N+1 crate, so it does not change when N+1's agent does.

pub mod config;
pub mod cyborg;
pub mod discovery;
pub mod fpga;
pub mod report;
pub mod run;
