use verso::{Field, ObjectMeta, VersionedObject};

pub struct NotAFamily;

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = NotAFamily, version = "1.0")]
pub struct Widget {
    pub id: Field<i64>,
    pub meta: ObjectMeta,
}

fn main() {}
