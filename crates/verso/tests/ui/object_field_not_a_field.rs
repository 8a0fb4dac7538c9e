use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Widget {
    pub id: Field<i64>,
    pub name: String,
    pub meta: ObjectMeta,
}

fn main() {}
