//! Version manifests and the backport of contained objects.
//!
//! A [`VersionManifest`] maps object names to the versions one side knows (OVO's
//! `obj_tree_get_versions`). Backporting with a manifest converts the object and every
//! contained object and list member, at any depth, in the same pass over the primitive.
//!
//! The rules are OVO's, quirks included (see `crates/verso/tests/vectors/README.md`):
//! - without a manifest, an object field follows its relationship table
//!   (`#[verso(relationships = ...)]`): a target before the first entry removes the
//!   field, an exact or in-between target picks the child version of the nearest entry
//!   at or below it, a target after the last entry leaves the child as it is;
//! - with a manifest, the manifest's version for the child's class wins, even where the
//!   table would have removed the field; a class missing from the manifest leaves an
//!   object field untouched;
//! - a list object with `child_versions` uses them, manifest or not; without them, a
//!   list uses its relationship table (no manifest) or the manifest, and falls back to
//!   sending members at `1.0` when neither has an answer;
//! - a backported child's `versioned_object.version` is set to the chosen version even
//!   when the child was older (its data is then unchanged).

use crate::error::{Error, Result};
use crate::field::PrimitiveData;
use crate::object::{FieldSchema, ObjectSchema};
use crate::primitive::{KEY_DATA, KEY_VERSION};
use crate::{Version, VersionedObject};
use serde_json::Value;
use std::borrow::Cow;
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

/// What a relationship table says for a target version.
pub(crate) enum Rule {
    /// The parent at this version did not have the field: remove it.
    Remove,
    /// Backport the child to this version.
    To(Version),
    /// The target is past the table: leave the child alone.
    Keep,
}

/// OVO's `_get_subobject_version`.
pub(crate) fn lookup(target: &Version, table: &[(Version, Version)]) -> Rule {
    for (i, (parent, child)) in table.iter().enumerate() {
        if target < parent {
            return if i == 0 {
                Rule::Remove
            } else {
                Rule::To(table[i - 1].1)
            };
        }
        if target == parent {
            return Rule::To(*child);
        }
    }
    Rule::Keep
}

/// `(parent_version, child_version)` pairs, borrowed from the schema or made for a call.
pub(crate) type Table<'a> = Cow<'a, [(Version, Version)]>;

/// The rule table for one object field, or `None` for "leave it alone".
pub(crate) fn table_for<'a>(
    schema: &'a ObjectSchema,
    f: &'a FieldSchema,
    target: &Version,
    manifest: Option<&VersionManifest>,
) -> Result<Option<Table<'a>>> {
    let is_members = schema.is_list && f.name == "objects";
    if is_members && !schema.child_versions.is_empty() {
        return Ok(Some(Cow::Borrowed(&schema.child_versions)));
    }
    let from_rules = match manifest {
        None if !f.relationships.is_empty() => Some(Cow::Borrowed(f.relationships.as_slice())),
        None => None,
        Some(m) => {
            f.ty.child_object()
                .and_then(|c| m.get(c))
                .map(|v| Cow::Owned(vec![(*target, v)]))
        }
    };
    match (from_rules, is_members) {
        (Some(t), _) => Ok(Some(t)),
        // OVO's list fallback: with no information at all, members go to 1.0.
        (None, true) => Ok(Some(Cow::Owned(vec![(*target, Version::new(1, 0))]))),
        (None, false) if manifest.is_some() => Ok(None),
        (None, false) => Err(Error::NoRelationshipRule {
            object: schema.name,
            field: f.name,
        }),
    }
}

/// OVO's default `obj_make_compatible`, plus the drop of fields added after `target`
/// (the rule every OVO model writes by hand). Call it from a custom hook to keep the
/// default behaviour and add to it.
pub fn default_make_compatible<O: VersionedObject>(
    obj: &O,
    data: &mut PrimitiveData,
    target: &Version,
    manifest: Option<&VersionManifest>,
) -> Result<()> {
    let schema = O::schema();
    for (i, f) in schema.fields.iter().enumerate() {
        if f.ty.child_object().is_none() || !obj.field(i).is_set() {
            continue;
        }
        let Some(table) = table_for(schema, f, target, manifest)? else {
            continue;
        };
        match lookup(target, &table) {
            Rule::Remove => {
                data.remove(f.name);
            }
            Rule::To(child_version) => {
                if let Some(p) = data.get_mut(f.name) {
                    // OVO passes contained objects `manifest or None`.
                    obj.field(i).backport_children(
                        p,
                        &child_version,
                        manifest.filter(|m| !m.is_empty()),
                    )?;
                }
            }
            Rule::Keep => {}
        }
    }
    for f in &schema.fields {
        if f.ty.child_object().is_none() && f.since.is_some_and(|s| *target < s) {
            data.remove(f.name);
        }
    }
    Ok(())
}

/// Backports one contained object whose primitive is `primitive` to `to`, and labels
/// it `to` (OVO's `_do_subobject_backport`). Used by the derive's `FieldValue` impl.
#[doc(hidden)]
pub fn backport_object<O: VersionedObject>(
    obj: &O,
    primitive: &mut Value,
    to: &Version,
    manifest: Option<&VersionManifest>,
) -> Result<()> {
    let Some(map) = primitive.as_object_mut() else {
        return Ok(());
    };
    if let Some(Value::Object(data)) = map.get_mut(KEY_DATA) {
        obj.make_compatible(data, to, manifest)?;
    }
    map.insert(KEY_VERSION.into(), Value::String(to.to_string()));
    Ok(())
}
