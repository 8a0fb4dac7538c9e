use verso::VersionedEnum;

#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    On,
    Level(u8),
}

fn main() {}
