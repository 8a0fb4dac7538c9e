use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0", list)]
pub struct WidgetList {
    pub objects: Field<Option<i64>>,
    pub meta: ObjectMeta,
}

fn main() {}
