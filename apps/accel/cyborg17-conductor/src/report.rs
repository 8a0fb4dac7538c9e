//! `report_data`: an agent's whole inventory of a host diffed against the database and
//! Placement, step for step as Cyborg 17's `ConductorManager.drv_device_make_diff` and
//! the diffs under it do.
//!
//! - Devices are the same device when their control path's `cpid_info` text is equal.
//!   A device the agent marks `stub` is left as it is. A gone device loses its
//!   deployables' providers and then its rows; a new one is stored with everything under
//!   it and then its deployables are offered in Placement (when that fails, the device
//!   and its providers are taken back out); a kept one gets the board fields that
//!   changed (`std_board_info`, `vendor`, `vendor_board_info`, `model`, `type`).
//! - Deployables of a kept device are the same when their `name` is; attributes when
//!   their `key` is; attach handles when their `attach_info` is. A changed number of
//!   accelerators rewrites the provider's inventory; a changed `trait*` attribute swaps
//!   the trait, a changed `rc` the resource class; a changed `attach_type` is saved.
//!
//! Where Cyborg's code fails half-way on a bad report (an unset field, a device that
//! cannot be stored), this module refuses the report before touching anything
//! ([`ReportError::Invalid`]) or rolls the one device back: each device's rows are
//! written in one transaction, where Cyborg writes row by row.

use crate::db::{DbError, NewDeployable, NewDevice, Store, StoredDeployable, StoredDevice};
use crate::placement::{rp_uuid, Placement, PlacementError};
use accel_cyborg17::objects::{DriverDeployable, DriverDevice};
use std::collections::BTreeSet;
use verso::VersionedEnum;

/// Why a report was not (fully) applied.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The report itself is malformed; nothing of it was applied.
    #[error("invalid report: {0}")]
    Invalid(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// Placement failed where Cyborg's conductor does not catch it.
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

/// A device of a report, checked.
#[derive(Clone, Debug)]
struct Reported {
    r#type: String,
    vendor: String,
    model: String,
    std_board_info: Option<String>,
    vendor_board_info: Option<String>,
    cpid_type: String,
    cpid_info: String,
    stub: bool,
    device_state: Option<String>,
    deployables: Vec<ReportedDeployable>,
}

#[derive(Clone, Debug)]
struct ReportedDeployable {
    name: String,
    num_accelerators: i64,
    driver_name: Option<String>,
    attributes: Vec<(String, String)>,
    handles: Vec<(String, String, bool)>,
}

impl ReportedDeployable {
    fn new_row(&self) -> NewDeployable<'_> {
        NewDeployable {
            name: &self.name,
            num_accelerators: self.num_accelerators,
            driver_name: self.driver_name.as_deref(),
            attributes: self
                .attributes
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
            handles: self
                .handles
                .iter()
                .map(|(t, i, u)| (t.as_str(), i.as_str(), *u))
                .collect(),
        }
    }

    fn attribute_pairs(&self) -> Vec<(&str, &str)> {
        self.attributes
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

fn invalid(e: verso::Error) -> ReportError {
    ReportError::Invalid(e.to_string())
}

fn checked(devices: &[DriverDevice]) -> Result<Vec<Reported>, ReportError> {
    devices
        .iter()
        .map(|d| {
            let cpid = d
                .controlpath_id
                .require("DriverDevice", "controlpath_id")
                .map_err(invalid)?;
            let deployables = d
                .deployable_list
                .get()
                .map(|l| {
                    l.iter()
                        .map(checked_deployable)
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?
                .unwrap_or_default();
            Ok(Reported {
                r#type: d
                    .r#type
                    .require("DriverDevice", "type")
                    .map_err(invalid)?
                    .as_str()
                    .to_owned(),
                vendor: d
                    .vendor
                    .require("DriverDevice", "vendor")
                    .map_err(invalid)?
                    .clone(),
                model: d
                    .model
                    .require("DriverDevice", "model")
                    .map_err(invalid)?
                    .clone(),
                std_board_info: d.std_board_info.get().cloned().flatten(),
                vendor_board_info: d.vendor_board_info.get().cloned().flatten(),
                cpid_type: cpid
                    .cpid_type
                    .require("DriverControlPathID", "cpid_type")
                    .map_err(invalid)?
                    .clone(),
                cpid_info: cpid
                    .cpid_info
                    .require("DriverControlPathID", "cpid_info")
                    .map_err(invalid)?
                    .clone(),
                stub: d.stub.get().copied().unwrap_or(false),
                device_state: d
                    .device_state
                    .get()
                    .copied()
                    .flatten()
                    .map(|s| s.as_str().to_owned()),
                deployables,
            })
        })
        .collect()
}

fn checked_deployable(d: &DriverDeployable) -> Result<ReportedDeployable, ReportError> {
    let attributes = d
        .attribute_list
        .get()
        .cloned()
        .flatten()
        .unwrap_or_default()
        .iter()
        .map(|a| {
            Ok((
                a.key
                    .require("DriverAttribute", "key")
                    .map_err(invalid)?
                    .clone(),
                a.value
                    .require("DriverAttribute", "value")
                    .map_err(invalid)?
                    .clone(),
            ))
        })
        .collect::<Result<Vec<_>, ReportError>>()?;
    let handles = d
        .attach_handle_list
        .get()
        .cloned()
        .flatten()
        .unwrap_or_default()
        .iter()
        .map(|h| {
            Ok((
                h.attach_type
                    .require("DriverAttachHandle", "attach_type")
                    .map_err(invalid)?
                    .clone(),
                h.attach_info
                    .require("DriverAttachHandle", "attach_info")
                    .map_err(invalid)?
                    .clone(),
                h.in_use.get().copied().unwrap_or(false),
            ))
        })
        .collect::<Result<Vec<_>, ReportError>>()?;
    Ok(ReportedDeployable {
        name: d
            .name
            .require("DriverDeployable", "name")
            .map_err(invalid)?
            .clone(),
        num_accelerators: *d
            .num_accelerators
            .require("DriverDeployable", "num_accelerators")
            .map_err(invalid)?,
        driver_name: d.driver_name.get().cloned().flatten(),
        attributes,
        handles,
    })
}

/// The first item of `items` whose key is `key` (Python's `list.index`).
fn first<'a, T>(items: &'a [T], key: &str, key_of: impl Fn(&T) -> &str) -> Option<&'a T> {
    items.iter().find(|i| key_of(i) == key)
}

/// What a report changed, for the log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Devices stored.
    pub added: usize,
    /// Devices deleted.
    pub deleted: usize,
    /// Devices kept (diffed further down).
    pub kept: usize,
    /// New devices taken back out because Placement refused them.
    pub reverted: usize,
}

/// Cyborg 17's conductor's report handling over a database and Placement.
#[derive(Clone, Debug)]
pub struct Reports {
    store: Store,
    /// `None`: an all-in-one without Placement (providers named, not made).
    placement: Option<Placement>,
}

impl Reports {
    /// Reports applied to `store` and `placement`.
    pub fn new(store: Store, placement: Placement) -> Reports {
        Reports {
            store,
            placement: Some(placement),
        }
    }

    /// Reports applied to `store` alone, for a deployment without Placement: each
    /// deployable is named the provider Cyborg would make for it ([`rp_uuid`] of its
    /// name, what a bind's `device_rp_uuid` names), and no provider is made.
    pub fn without_placement(store: Store) -> Reports {
        Reports {
            store,
            placement: None,
        }
    }

    /// Deletes the provider `uuid` and its children, when there is Placement.
    async fn delete_tree(&self, uuid: &str) -> Result<(), PlacementError> {
        match &self.placement {
            Some(p) => p.delete_tree(uuid).await,
            None => Ok(()),
        }
    }

    /// Applies `hostname`'s report (Cyborg's `report_data`).
    pub async fn report(
        &self,
        hostname: &str,
        devices: &[DriverDevice],
    ) -> Result<Outcome, ReportError> {
        let new = checked(devices)?;
        let old = self.store.host_devices(hostname).await?;
        let host_rp = match &self.placement {
            Some(p) => p.root_provider(hostname).await?,
            None => String::new(),
        };

        let stub: BTreeSet<&str> = new
            .iter()
            .filter(|d| d.stub)
            .map(|d| d.cpid_info.as_str())
            .collect();
        let new_keys: BTreeSet<&str> = new.iter().map(|d| d.cpid_info.as_str()).collect();
        let old_keys: BTreeSet<&str> = old.iter().map(|d| d.cpid.cpid_info.as_str()).collect();
        let same: BTreeSet<&str> = new_keys
            .intersection(&old_keys)
            .filter(|k| !stub.contains(*k))
            .copied()
            .collect();
        let mut outcome = Outcome::default();

        for gone in old_keys
            .iter()
            .filter(|k| !same.contains(*k) && !stub.contains(*k))
        {
            let Some(old_dev) = first(&old, gone, |d| &d.cpid.cpid_info) else {
                continue;
            };
            for dep in &old_dev.deployables {
                self.delete_tree(&rp_uuid(&dep.name)).await?;
            }
            let deployables: Vec<(String, Vec<String>)> = old_dev
                .deployables
                .iter()
                .map(|d| {
                    (
                        d.name.clone(),
                        d.handles.iter().map(|h| h.attach_info.clone()).collect(),
                    )
                })
                .collect();
            self.store
                .destroy_device(hostname, gone, &deployables)
                .await?;
            outcome.deleted += 1;
        }

        for added in new_keys
            .iter()
            .filter(|k| !same.contains(*k) && !stub.contains(*k))
        {
            let Some(dev) = first(&new, added, |d| &d.cpid_info) else {
                continue;
            };
            if self.add_device(hostname, dev, &host_rp).await? {
                outcome.added += 1;
            } else {
                outcome.reverted += 1;
            }
        }

        for kept in &same {
            let (Some(new_dev), Some(old_dev)) = (
                first(&new, kept, |d| &d.cpid_info),
                first(&old, kept, |d| &d.cpid.cpid_info),
            ) else {
                continue;
            };
            self.keep_device(new_dev, old_dev, &host_rp).await?;
            outcome.kept += 1;
        }
        Ok(outcome)
    }

    /// Stores a new device and offers its deployables; false when Placement refused and
    /// the device was taken back out.
    async fn add_device(
        &self,
        host: &str,
        dev: &Reported,
        host_rp: &str,
    ) -> Result<bool, ReportError> {
        let row = NewDevice {
            r#type: &dev.r#type,
            vendor: &dev.vendor,
            model: &dev.model,
            std_board_info: dev.std_board_info.as_deref(),
            vendor_board_info: dev.vendor_board_info.as_deref(),
            device_state: dev.device_state.as_deref().unwrap_or("available"),
            cpid_type: &dev.cpid_type,
            cpid_info: &dev.cpid_info,
        };
        let deployables: Vec<NewDeployable<'_>> = dev
            .deployables
            .iter()
            .map(ReportedDeployable::new_row)
            .collect();
        let (device_id, _) = match self.store.create_device(host, &row, &deployables).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::error!(host, cpid_info = %dev.cpid_info, error = %e, "failed to add a device");
                return Ok(false);
            }
        };
        for dep in &dev.deployables {
            if let Err(e) = self.offer(device_id, dep, host_rp).await {
                tracing::info!(host, cpid_info = %dev.cpid_info, error = %e, "failed to add a device to Placement; taking it back out");
                let names: Vec<(String, Vec<String>)> = dev
                    .deployables
                    .iter()
                    .map(|d| {
                        (
                            d.name.clone(),
                            d.handles.iter().map(|h| h.1.clone()).collect(),
                        )
                    })
                    .collect();
                self.store
                    .destroy_device(host, &dev.cpid_info, &names)
                    .await?;
                for d in &dev.deployables {
                    self.delete_tree(&rp_uuid(&d.name)).await?;
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Offers a stored deployable in Placement under `host_rp` and records its provider
    /// (Cyborg's `get_placement_needed_info_and_report`).
    async fn offer(
        &self,
        device_id: i64,
        dep: &ReportedDeployable,
        host_rp: &str,
    ) -> Result<(), ReportError> {
        let uuid = match &self.placement {
            Some(p) => {
                p.report_deployable(
                    host_rp,
                    &dep.name,
                    &dep.attribute_pairs(),
                    dep.num_accelerators,
                )
                .await?
            }
            None => rp_uuid(&dep.name),
        };
        Ok(self.store.set_rp_uuid(device_id, &dep.name, &uuid).await?)
    }

    async fn keep_device(
        &self,
        new: &Reported,
        old: &StoredDevice,
        host_rp: &str,
    ) -> Result<(), ReportError> {
        // `old` is the host's newest device with this control path, the one Cyborg's
        // `get_device_obj` looks up again.
        let device_id = old.id;
        let mut changes: Vec<(&'static str, Option<String>)> = Vec::new();
        if new.std_board_info != old.std_board_info {
            changes.push(("std_board_info", new.std_board_info.clone()));
        }
        if new.vendor != old.vendor {
            changes.push(("vendor", Some(new.vendor.clone())));
        }
        if new.vendor_board_info != old.vendor_board_info {
            changes.push(("vendor_board_info", new.vendor_board_info.clone()));
        }
        if new.model != old.model {
            changes.push(("model", Some(new.model.clone())));
        }
        if new.r#type != old.r#type {
            changes.push(("type", Some(new.r#type.clone())));
        }
        self.store.update_device(device_id, &changes).await?;
        self.diff_deployables(
            device_id,
            old.cpid.id,
            &old.deployables,
            &new.deployables,
            host_rp,
        )
        .await
    }

    async fn diff_deployables(
        &self,
        device_id: i64,
        cpid_id: i64,
        old: &[StoredDeployable],
        new: &[ReportedDeployable],
        host_rp: &str,
    ) -> Result<(), ReportError> {
        let new_names: BTreeSet<&str> = new.iter().map(|d| d.name.as_str()).collect();
        let old_names: BTreeSet<&str> = old.iter().map(|d| d.name.as_str()).collect();
        for gone in old_names.difference(&new_names) {
            let Some(dep) = first(old, gone, |d| &d.name) else {
                continue;
            };
            let infos: Vec<String> = dep.handles.iter().map(|h| h.attach_info.clone()).collect();
            self.store
                .destroy_deployable(device_id, gone, &infos)
                .await?;
            self.delete_tree(&rp_uuid(gone)).await?;
        }
        for added in new_names.difference(&old_names) {
            let Some(dep) = first(new, added, |d| &d.name) else {
                continue;
            };
            self.store
                .create_deployable(device_id, cpid_id, &dep.new_row())
                .await?;
            if let Err(e) = self.offer(device_id, dep, host_rp).await {
                tracing::info!(deployable = %dep.name, error = %e, "failed to add a deployable to Placement; taking it back out");
                let infos: Vec<String> = dep.handles.iter().map(|h| h.1.clone()).collect();
                self.store
                    .destroy_deployable(device_id, added, &infos)
                    .await?;
                self.delete_tree(&rp_uuid(added)).await?;
            }
        }
        for kept in new_names.intersection(&old_names) {
            let (Some(new_dep), Some(old_dep)) =
                (first(new, kept, |d| &d.name), first(old, kept, |d| &d.name))
            else {
                continue;
            };
            let Some((dep_id, stored_accelerators)) =
                self.store.deployable_by_name(device_id, kept).await?
            else {
                continue;
            };
            let mut accelerators = stored_accelerators;
            if stored_accelerators != new_dep.num_accelerators {
                accelerators = new_dep.num_accelerators;
                self.store.set_accelerators(dep_id, accelerators).await?;
                if let Some(placement) = &self.placement {
                    let rc = new_dep
                        .attributes
                        .iter()
                        .find(|(k, _)| k == "rc")
                        .map(|(_, v)| v.as_str())
                        .ok_or_else(|| PlacementError::NoResourceClass(new_dep.name.clone()))?;
                    placement
                        .update_inventory(&rp_uuid(kept), rc, accelerators)
                        .await?;
                }
            }
            self.diff_attributes(
                dep_id,
                kept,
                accelerators,
                &old_dep.attributes,
                &new_dep.attributes,
            )
            .await?;
            self.diff_handles(dep_id, cpid_id, old_dep, new_dep).await?;
        }
        Ok(())
    }

    async fn diff_attributes(
        &self,
        dep_id: i64,
        dep_name: &str,
        accelerators: i64,
        old: &[(String, String)],
        new: &[(String, String)],
    ) -> Result<(), ReportError> {
        let rp = rp_uuid(dep_name);
        let new_keys: BTreeSet<&str> = new.iter().map(|(k, _)| k.as_str()).collect();
        let old_keys: BTreeSet<&str> = old.iter().map(|(k, _)| k.as_str()).collect();
        for gone in old_keys.difference(&new_keys) {
            let Some((_, value)) = first(old, gone, |(k, _)| k) else {
                continue;
            };
            if let Some(placement) = &self.placement {
                placement.delete_trait(&rp, value).await?;
            }
            self.store.delete_attributes(dep_id, gone).await?;
        }
        for added in new_keys.difference(&old_keys) {
            let Some((key, value)) = first(new, added, |(k, _)| k) else {
                continue;
            };
            self.store.create_attribute(dep_id, key, value).await?;
            if let Some(placement) = &self.placement {
                placement.add_traits(&rp, &[value.as_str()]).await?;
            }
        }
        for kept in new_keys.intersection(&old_keys) {
            let (Some((key, new_value)), Some((_, old_value))) =
                (first(new, kept, |(k, _)| k), first(old, kept, |(k, _)| k))
            else {
                continue;
            };
            if new_value == old_value {
                continue;
            }
            self.store.set_attribute(dep_id, key, new_value).await?;
            let Some(placement) = &self.placement else {
                continue;
            };
            if key.starts_with("trait") {
                placement.delete_trait(&rp, old_value).await?;
                placement.add_traits(&rp, &[new_value.as_str()]).await?;
            }
            if key.starts_with("rc") {
                placement.ensure_resource_class(new_value).await?;
                placement
                    .update_inventory(&rp, new_value, accelerators)
                    .await?;
                placement.delete_resource_class(old_value).await?;
            }
        }
        Ok(())
    }

    async fn diff_handles(
        &self,
        dep_id: i64,
        cpid_id: i64,
        old: &StoredDeployable,
        new: &ReportedDeployable,
    ) -> Result<(), ReportError> {
        let new_infos: BTreeSet<&str> = new.handles.iter().map(|h| h.1.as_str()).collect();
        let old_infos: BTreeSet<&str> =
            old.handles.iter().map(|h| h.attach_info.as_str()).collect();
        for gone in old_infos.difference(&new_infos) {
            self.store.destroy_handle(dep_id, gone).await?;
        }
        for added in new_infos.difference(&old_infos) {
            let Some((attach_type, attach_info, in_use)) = first(&new.handles, added, |h| &h.1)
            else {
                continue;
            };
            self.store
                .create_handle(dep_id, cpid_id, attach_type, attach_info, *in_use)
                .await?;
        }
        for kept in new_infos.intersection(&old_infos) {
            let (Some(new_h), Some(old_h)) = (
                first(&new.handles, kept, |h| &h.1),
                first(&old.handles, kept, |h| &h.attach_info),
            ) else {
                continue;
            };
            if new_h.0 != old_h.attach_type {
                self.store.set_attach_type(dep_id, kept, &new_h.0).await?;
            }
        }
        Ok(())
    }
}
