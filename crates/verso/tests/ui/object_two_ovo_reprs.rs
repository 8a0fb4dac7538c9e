use verso::{Field, ObjectMeta, VersionedEnum, VersionedObject};

#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    On,
    Off,
}

#[derive(VersionedObject, Clone, Debug, PartialEq)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Widget {
    #[verso(ovo_auto_typed, ovo_values_as_text)]
    pub mode: Field<Mode>,
    pub meta: ObjectMeta,
}

fn main() {}
