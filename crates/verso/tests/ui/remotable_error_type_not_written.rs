use verso::{Field, ObjectMeta, VersionedObject};

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Counter {
    pub value: Field<i64>,
    pub meta: ObjectMeta,
}

type Outcome<T> = Result<T, verso::CallError>;

#[verso::remotable]
impl Counter {
    #[remotable]
    pub async fn add(&mut self, n: i64) -> Outcome<i64> {
        Ok(n)
    }
}

fn main() {}
