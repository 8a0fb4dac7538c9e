use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Widget<T> {
    pub id: Field<i64>,
    pub extra: std::marker::PhantomData<T>,
    pub meta: ObjectMeta,
}

fn main() {}
