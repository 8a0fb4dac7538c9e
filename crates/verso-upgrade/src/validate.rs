//! Request validators: checks that run before a request is processed and refuse one that
//! uses something (a new field, a new enum value, a new option) of a version that is not
//! finalized yet (Ozone's `RequestFeatureValidator`).
//!
//! A validator is registered once, for one version and one feature, with a predicate
//! that says whether a request uses the feature. Registering it counts as a use of the
//! version (see [`VersionManager::unused_versions`]). Two components at different
//! apparent versions that run the same requests through the same validators therefore
//! persist the same results wherever their versions agree: the newer one refuses what
//! the older one could not have done.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use verso_upgrade::{component_versions, FileStore, RequestValidators, VersionManager};
//! component_versions! {
//!     /// Versions.
//!     pub enum V: "conductor" { Initial = 1 => "first", Cleaning = 2 => "cleaning state" }
//! }
//! struct SetState { state: String }
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("v");
//! std::fs::write(&path, r#"{"format": 1, "component": "conductor", "apparent": 1}"#)?;
//! let versions = VersionManager::<V>::open(FileStore::new(&path)).await?;
//! let validators = RequestValidators::new(&versions)
//!     .validator(V::Cleaning, "state = cleaning", |r: &SetState| r.state == "cleaning");
//! assert!(validators.check(&SetState { state: "available".into() }).is_ok());
//! let refused = validators.check(&SetState { state: "cleaning".into() }).err();
//! assert_eq!(refused.map(|e| e.feature).as_deref(), Some("state = cleaning"));
//! # Ok(()) }
//! ```

use crate::error::NotSupportedBeforeFinalization;
use crate::manager::VersionManager;
use crate::version::ComponentVersion;
use std::sync::Arc;

type Uses<R> = Arc<dyn Fn(&R) -> bool + Send + Sync>;

/// The validators of one request type `R`.
pub struct RequestValidators<V: ComponentVersion, R> {
    manager: VersionManager<V>,
    validators: Vec<(crate::manager::Gate<V>, Uses<R>)>,
}

impl<V: ComponentVersion, R> Clone for RequestValidators<V, R> {
    fn clone(&self) -> Self {
        RequestValidators {
            manager: self.manager.clone(),
            validators: self.validators.clone(),
        }
    }
}

impl<V: ComponentVersion, R> std::fmt::Debug for RequestValidators<V, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestValidators")
            .field("validators", &self.validators.len())
            .finish()
    }
}

impl<V: ComponentVersion, R> RequestValidators<V, R> {
    /// No validators yet.
    pub fn new(manager: &VersionManager<V>) -> Self {
        RequestValidators {
            manager: manager.clone(),
            validators: Vec::new(),
        }
    }

    /// Refuses requests for which `uses` is true until `version` is finalized.
    pub fn validator(
        mut self,
        version: V,
        feature: &str,
        uses: impl Fn(&R) -> bool + Send + Sync + 'static,
    ) -> Self {
        let gate = self.manager.gate(version, feature);
        self.validators.push((gate, Arc::new(uses)));
        self
    }

    /// `Ok` when the request uses nothing unfinalized; else the first refusal.
    pub fn check(&self, request: &R) -> Result<(), NotSupportedBeforeFinalization> {
        for (gate, uses) in &self.validators {
            if !gate.is_open() && uses(request) {
                return gate.check();
            }
        }
        Ok(())
    }
}
