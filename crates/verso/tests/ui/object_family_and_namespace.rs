use verso::{Field, ObjectFamily, ObjectMeta, VersionedObject};

#[derive(ObjectFamily)]
#[verso(namespace = "demo", serial_namespace = "demo_object")]
pub struct Demo;

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(family = Demo, namespace = "demo", version = "1.0")]
pub struct Widget {
    pub id: Field<i64>,
    pub meta: ObjectMeta,
}

fn main() {}
