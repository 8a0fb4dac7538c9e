use verso::ObjectFamily;

#[derive(ObjectFamily)]
#[verso(serial_namespace = "demo_object")]
pub struct Demo;

fn main() {}
