//! The crate's modules import one way (types down, behaviour up): no two modules, and
//! no longer ring of them, import each other. The failure names each cycle and the
//! lines that make it.
#![allow(clippy::unwrap_used, missing_docs)]

#[test]
fn modules_import_one_way() {
    let graph = module_graph::Graph::load(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).unwrap();
    let cycles = graph.cycles();
    assert!(cycles.is_empty(), "{}", module_graph::report(&cycles));
}
