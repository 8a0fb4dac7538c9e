use verso::ObjectFamily;

#[derive(ObjectFamily)]
#[verso(namespace = "demo", version = "1.0")]
pub struct Demo;

fn main() {}
