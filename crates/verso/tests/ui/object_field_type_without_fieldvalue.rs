use verso::{Field, ObjectMeta, VersionedObject};

#[derive(Clone, Debug, PartialEq)]
pub struct Colour(u8);

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Widget {
    pub id: Field<i64>,
    pub colour: Field<Colour>,
    pub meta: ObjectMeta,
}

fn main() {}
