//! The crate's modules import one way (types down, behaviour up): no two modules, and
//! no longer ring of them, import each other. The failure names each cycle and the
//! lines that make it.
#![allow(missing_docs)]

#[test]
fn modules_import_one_way() -> Result<(), String> {
    module_graph::check_acyclic(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}
