use verso::VersionedEnum;

#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    #[verso(value = "on")]
    On,
    #[verso(value = "on")]
    Enabled,
}

fn main() {}
