//! The crate's modules import one way (types down, behaviour up): no two modules, and
//! no longer ring of them, import each other. The failure names each cycle and the
//! lines that make it.
#![allow(clippy::unwrap_used, missing_docs)]

/// The one tangle left, named so that no other can join it unnoticed:
/// `UpgradeError` (`error`) has variants holding the coordinator's `Fenced` and
/// `Blocker`, while `coordinator` and `manager` return `UpgradeError`. Its fix is to move
/// those two types down into `error` (re-exported from `coordinator`); it waits for the
/// rework of the heartbeat types (issue 29), which moves them anyway. When the tangle is
/// gone this test fails until the entry is removed.
const WAITING: &[&str] = &["coordinator", "error", "manager"];

#[test]
fn modules_import_one_way() {
    let graph = module_graph::Graph::load(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).unwrap();
    let cycles = graph.cycles();
    let (waiting, new): (Vec<_>, Vec<_>) = cycles.into_iter().partition(|c| c.component == WAITING);
    assert!(new.is_empty(), "{}", module_graph::report(&new));
    assert!(
        !waiting.is_empty(),
        "the coordinator/error/manager tangle is gone: remove WAITING from this test"
    );
}
