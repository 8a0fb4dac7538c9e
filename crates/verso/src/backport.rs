//! The backport rules: what becomes of each field of an object encoded for an older
//! version (OVO's `obj_make_compatible` and `_get_subobject_version`), below the codec
//! that applies them.
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
use crate::manifest::VersionManifest;
use crate::object::VersionedObject;
use crate::schema::{FieldSchema, ObjectSchema};
use crate::version::Version;
use std::borrow::Cow;

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
