use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0", child_versions = ("1.0", "1.0"))]
pub struct Widget {
    pub id: Field<i64>,
    pub meta: ObjectMeta,
}

fn main() {}
