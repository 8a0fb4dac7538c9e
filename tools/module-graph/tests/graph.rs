//! The graph of small crates written to a temporary directory: what counts as an import,
//! and how a cycle is reported.
#![allow(clippy::unwrap_used, missing_docs)]

use module_graph::{Error, Graph};
use std::path::Path;

/// A crate of `files` (path under `src/`, text) in a temporary directory.
fn write_crate(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join("src").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// The graph of a crate of `files` ([`write_crate`]).
fn graph(files: &[(&str, &str)]) -> Graph {
    let dir = write_crate(files);
    Graph::load(dir.path().join("src")).unwrap()
}

fn rings(g: &Graph) -> Vec<Vec<String>> {
    g.cycles().into_iter().map(|c| c.modules).collect()
}

#[test]
fn two_modules_that_use_each_other_are_a_cycle_named_with_its_lines() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "b.rs",
            "pub struct B;\n\npub fn f() -> crate::a::A { todo!() }\n",
        ),
    ]);
    assert_eq!(rings(&g), [["a", "b"]]);
    let report = module_graph::report(&g.cycles());
    assert!(report.contains("import cycle: a -> b -> a"), "{report}");
    assert!(
        report.contains("a -> b: src/a.rs:1 `crate::b::B`"),
        "{report}"
    );
    assert!(
        report.contains("b -> a: src/b.rs:3 `crate::a::A`"),
        "{report}"
    );
}

#[test]
fn one_way_imports_are_no_cycle() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", "use crate::a::A;\npub struct B(A);\n"),
    ]);
    assert!(g.cycles().is_empty());
    assert_eq!(g.imports("b"), ["a"]);
    assert!(g.imports("a").is_empty());
}

#[test]
fn a_path_through_a_reexport_imports_the_defining_module() {
    // The root re-exports everything; `b` names `A` through it, and `a` names `b`: one
    // way, since the re-export is not an import of the root's.
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\npub use a::A;\npub use b::B;\n"),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", "use crate::A;\npub struct B(A);\n"),
    ]);
    assert!(
        g.cycles().is_empty(),
        "{}",
        module_graph::report(&g.cycles())
    );
    assert_eq!(g.imports("b"), ["a"]);
    assert!(g.imports("crate").is_empty());
}

#[test]
fn a_parent_using_its_child_that_uses_it_is_a_cycle() {
    let g = graph(&[
        ("lib.rs", "pub mod t;\n"),
        ("t.rs", "mod c;\npub struct T;\npub fn f() { c::g() }\n"),
        ("t/c.rs", "pub fn g() { let _ = super::T; }\n"),
    ]);
    assert_eq!(rings(&g), [["t", "t::c"]]);
}

#[test]
fn a_child_using_its_parent_alone_is_no_cycle() {
    // Types down: the parent holds the trait, the child implements it; the parent
    // re-exports the child's item without using it.
    let g = graph(&[
        ("lib.rs", "pub mod t;\n"),
        ("t/mod.rs", "mod c;\npub use c::Impl;\npub trait T {}\n"),
        (
            "t/c.rs",
            "use super::T;\npub struct Impl;\nimpl T for Impl {}\n",
        ),
    ]);
    assert!(
        g.cycles().is_empty(),
        "{}",
        module_graph::report(&g.cycles())
    );
    assert_eq!(g.imports("t::c"), ["t"]);
}

#[test]
fn a_reexported_name_used_by_its_module_is_an_import() {
    let g = graph(&[
        ("lib.rs", "pub mod t;\n"),
        (
            "t.rs",
            "mod c;\npub use c::Impl;\npub struct T;\npub fn f() -> Impl { Impl }\n",
        ),
        (
            "t/c.rs",
            "pub struct Impl;\npub fn g() -> super::T { super::T }\n",
        ),
    ]);
    assert_eq!(rings(&g), [["t", "t::c"]]);
}

#[test]
fn paths_in_macros_and_function_bodies_count() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "pub fn f() { println!(\"{}\", crate::b::N); }\n"),
        (
            "b.rs",
            "pub const N: u8 = 1;\npub fn g() { use crate::c::h; h() }\n",
        ),
        (
            "c.rs",
            "pub fn h() {}\nfn _x() { assert!(matches!(crate::a::f(), ())); }\n",
        ),
    ]);
    assert_eq!(rings(&g), [["a", "b", "c"]]);
    let cycle = &g.cycles()[0];
    assert_eq!(cycle.component, ["a", "b", "c"]);
}

#[test]
fn a_test_module_does_not_tie_its_parent_to_what_it_imports() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct A;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::B;\n}\n"),
        ("b.rs", "use crate::a::A;\npub struct B(A);\n"),
    ]);
    assert!(
        g.cycles().is_empty(),
        "{}",
        module_graph::report(&g.cycles())
    );
    assert_eq!(g.imports("a::tests"), ["a", "b"]);
}

#[test]
fn the_crate_name_from_extern_crate_self_is_the_root() {
    let g = graph(&[
        ("lib.rs", "extern crate self as my_crate;\nmod a;\nmod b;\n"),
        ("a.rs", "pub struct A(my_crate::b::B);\n"),
        ("b.rs", "pub struct B;\npub fn f(_: crate::a::A) {}\n"),
    ]);
    assert_eq!(rings(&g), [["a", "b"]]);
}

#[test]
fn a_module_without_its_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "mod gone;\n").unwrap();
    match Graph::load(dir.path().join("src")) {
        Err(Error::MissingModule { module, .. }) => assert_eq!(module, "gone"),
        other => panic!("expected MissingModule, got {other:?}"),
    }
    match Graph::load(Path::new("/nonexistent-module-graph-dir/src")) {
        Err(Error::NoRoot { .. }) => {}
        other => panic!("expected NoRoot, got {other:?}"),
    }
}

#[test]
fn check_acyclic_says_what_a_crates_modules_test_asserts() {
    let one_way = write_crate(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", "use crate::a::A;\npub struct B(A);\n"),
    ]);
    assert_eq!(
        module_graph::check_acyclic(one_way.path().join("src")),
        Ok(())
    );
    let cyclic = write_crate(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "b.rs",
            "pub struct B;\npub fn f() -> crate::a::A { todo!() }\n",
        ),
    ]);
    let err = module_graph::check_acyclic(cyclic.path().join("src")).unwrap_err();
    assert!(err.contains("import cycle: a -> b -> a"), "{err}");
    let missing = module_graph::check_acyclic("/nonexistent/src").expect_err("no sources");
    assert!(missing.contains("/nonexistent/src"), "{missing}");
}
