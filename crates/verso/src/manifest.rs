//! Version manifests, and the targets of an encode.
//!
//! A [`VersionManifest`] maps object names to the versions one side knows (OVO's
//! `obj_tree_get_versions`). Backporting with a manifest converts the object and every
//! contained object and list member, at any depth, in the same pass over the primitive
//! (the rules are in [`backport`](crate::backport)). A [`Target`] says what an encode is
//! for: the instance version, a version, a manifest, or a peer's manifest.
use crate::schema::ObjectSchema;
use crate::version::Version;
use std::collections::BTreeMap;
use std::fmt;

/// Object name to version: what one side of a connection can read.
///
/// ```
/// use verso::VersionManifest;
/// let m: VersionManifest = serde_json::from_str(r#"{"Device": "1.0", "DeviceList": "1.0"}"#)?;
/// assert_eq!(m.get("Device").map(|v| v.to_string()).as_deref(), Some("1.0"));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct VersionManifest(BTreeMap<String, Version>);

impl VersionManifest {
    /// An empty manifest. As in OVO, it alone does not cause a backport; with a target
    /// version it leaves object fields alone and sends list members to 1.0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The manifest of a class: the class and everything it can contain, at their
    /// versions in this build.
    pub fn for_schema(schema: &ObjectSchema) -> Self {
        let mut m = VersionManifest::new();
        m.add_tree(schema);
        m
    }

    fn add_tree(&mut self, schema: &ObjectSchema) {
        if self.0.contains_key(schema.name) {
            return;
        }
        self.0.insert(schema.name.to_owned(), schema.version);
        for child in schema.fields.iter().filter_map(|f| f.child) {
            self.add_tree(child());
        }
    }

    /// Adds or replaces one entry.
    pub fn insert(&mut self, name: impl Into<String>, version: Version) -> &mut Self {
        self.0.insert(name.into(), version);
        self
    }

    /// The version for `name`.
    pub fn get(&self, name: &str) -> Option<Version> {
        self.0.get(name).copied()
    }

    /// Whether the manifest has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Version)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl fmt::Debug for VersionManifest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (k, v.to_string())))
            .finish()
    }
}

impl FromIterator<(String, Version)> for VersionManifest {
    fn from_iter<I: IntoIterator<Item = (String, Version)>>(iter: I) -> Self {
        VersionManifest(iter.into_iter().collect())
    }
}

/// What version an object is encoded at, and for whom: the argument of
/// [`VersionedObject::to_primitive`] and
/// [`VersionedObject::to_primitive_bytes`](crate::VersionedObject::to_primitive_bytes).
///
/// ```
/// use verso::{Field, ObjectMeta, Target, VersionedObject, VersionManifest};
/// #[derive(VersionedObject, Clone, Debug, PartialEq)]
/// #[verso(namespace = "demo", version = "1.1")]
/// pub struct Widget {
///     pub id: Field<i64>,
///     #[verso(since = "1.1")]
///     pub colour: Field<String>,
///     pub meta: ObjectMeta,
/// }
/// let w = Widget { id: 1.into(), colour: "red".into(), ..Widget::blank() };
/// let mut peer = VersionManifest::new();
/// peer.insert("Widget", "1.0".parse()?);
/// let own = w.to_primitive(Target::Own)?;
/// let old = w.to_primitive_bytes(Target::Peer(&peer))?;
/// assert_eq!(own["versioned_object.version"], "1.1");
/// assert_eq!(serde_json::from_slice::<serde_json::Value>(&old)?["versioned_object.version"], "1.0");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The instance version, nothing backported (`obj_to_primitive()`).
    Own,
    /// Backported to this version (`obj_to_primitive(target_version)`); contained
    /// objects follow their relationship tables.
    Version(Version),
    /// The instance version with every contained object and list member backported to
    /// the version the manifest names for its class, in one pass
    /// (`obj_to_primitive(version_manifest=...)`).
    Manifest(&'a VersionManifest),
    /// Both at once: OVO's `obj_to_primitive(target_version, version_manifest)`.
    VersionAndManifest(Version, &'a VersionManifest),
    /// For a peer that knows the versions in the manifest: the object at the manifest's
    /// version of its class when that is older than the instance (else its own),
    /// contained objects as the manifest says. What a conductor sends back to an older
    /// agent.
    Peer(&'a VersionManifest),
}

impl<'a> Target<'a> {
    /// OVO's two optional arguments of `obj_to_primitive`.
    pub fn ovo(version: Option<Version>, manifest: Option<&'a VersionManifest>) -> Self {
        match (version, manifest) {
            (None, None) => Target::Own,
            (Some(v), None) => Target::Version(v),
            (None, Some(m)) => Target::Manifest(m),
            (Some(v), Some(m)) => Target::VersionAndManifest(v, m),
        }
    }
}
