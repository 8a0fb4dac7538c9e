use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Part {
    pub id: Field<i64>,
    pub meta: ObjectMeta,
}

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Widget {
    #[verso(relationships = ["1.0"])]
    pub part: Field<Part>,
    pub meta: ObjectMeta,
}

fn main() {}
