//! List objects: a versioned object whose one field `objects` holds members of one class.
//!
//! Declare one with `#[derive(VersionedObject)]` and `#[verso(list, child_versions =
//! [...])]` on a struct with `objects: Field<Vec<Member>>`; the derive implements
//! [`ObjectList`] and makes the list iterable and indexable like a `Vec`.
//!
//! ```
//! use verso::{Field, ObjectList, ObjectMeta, VersionedObject};
//!
//! #[derive(VersionedObject, Clone, Debug, PartialEq)]
//! #[verso(namespace = "demo", version = "1.0")]
//! pub struct Widget { pub id: Field<i64>, pub meta: ObjectMeta }
//!
//! #[derive(VersionedObject, Clone, Debug, PartialEq)]
//! #[verso(namespace = "demo", version = "1.0", list, child_versions = [("1.0", "1.0")])]
//! pub struct WidgetList { pub objects: Field<Vec<Widget>>, pub meta: ObjectMeta }
//!
//! let list = WidgetList::from_objects((1..=3).map(|id| Widget { id: id.into(), ..Widget::blank() }).collect());
//! assert_eq!(list.len(), 3);
//! assert_eq!(list[1].id.get(), Some(&2));
//! let ids: Vec<i64> = list.iter().filter_map(|w| w.id.get().copied()).collect();
//! assert_eq!(ids, [1, 2, 3]);
//! ```

use crate::VersionedObject;

/// A list object (OVO's `ObjectListBase`).
pub trait ObjectList: VersionedObject {
    /// The member class.
    type Item: VersionedObject;

    /// The members (empty when `objects` is unset).
    fn objects(&self) -> &[Self::Item];

    /// The members, mutably; marks `objects` changed.
    fn objects_mut(&mut self) -> &mut Vec<Self::Item>;

    /// A list of these members, with `objects` marked changed (as after OVO's constructor).
    fn from_objects(objects: Vec<Self::Item>) -> Self;

    /// The number of members.
    fn len(&self) -> usize {
        self.objects().len()
    }

    /// Whether there are no members.
    fn is_empty(&self) -> bool {
        self.objects().is_empty()
    }

    /// Iterates over the members.
    fn iter(&self) -> std::slice::Iter<'_, Self::Item> {
        self.objects().iter()
    }
}
