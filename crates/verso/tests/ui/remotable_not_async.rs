use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Counter {
    pub value: Field<i64>,
    pub meta: ObjectMeta,
}

#[verso::remotable]
impl Counter {
    #[remotable]
    pub fn add(&mut self, n: i64) -> Result<i64, verso::CallError> {
        Ok(n)
    }
}

fn main() {}
