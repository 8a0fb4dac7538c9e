use verso::ObjectFamily;

#[derive(ObjectFamily)]
#[verso(namespace = "demo")]
pub struct Demo<T>(std::marker::PhantomData<T>);

fn main() {}
