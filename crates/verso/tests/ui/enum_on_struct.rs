use verso::VersionedEnum;

#[derive(VersionedEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode;

fn main() {}
