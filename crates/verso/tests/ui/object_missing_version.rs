use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo")]
pub struct Widget {
    pub id: Field<i64>,
    pub meta: ObjectMeta,
}

fn main() {}
