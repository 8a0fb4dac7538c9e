use verso::VersionedObject;

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub enum Widget {
    One,
}

fn main() {}
