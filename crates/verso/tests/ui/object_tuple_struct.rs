use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Widget(Field<i64>, ObjectMeta);

fn main() {}
