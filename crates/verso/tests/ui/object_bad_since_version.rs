use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.1")]
pub struct Widget {
    pub id: Field<i64>,
    #[verso(since = "1")]
    pub name: Field<String>,
    pub meta: ObjectMeta,
}

fn main() {}
