//! The errors a user of `#[derive(VersionedObject)]`, `#[derive(VersionedEnum)]`,
//! `#[derive(ObjectFamily)]` and `#[verso::remotable]` meets, each compiled and compared
//! with its snapshot (`tests/ui/*.stderr`). Re-bless after a deliberate change of a
//! message with `TRYBUILD=overwrite cargo test -p verso --test derive_errors`.

#[test]
fn derive_misuse_is_a_compile_error_naming_the_mistake() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
