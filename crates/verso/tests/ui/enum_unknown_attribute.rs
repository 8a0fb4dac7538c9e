use verso::VersionedEnum;

#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    #[verso(text = "on")]
    On,
    Off,
}

fn main() {}
