use verso::ObjectFamily;

#[derive(ObjectFamily)]
#[verso(namespace = "demo", serial_namespace = "")]
pub struct Demo;

fn main() {}
