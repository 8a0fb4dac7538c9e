//! Prints a crate's modules with the modules each imports, then its import cycles:
//! `cargo run -p module-graph --example graph -- crates/verso-rpc/src`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: graph SRC_DIR (a crate's src directory)")?;
    let graph = module_graph::Graph::load(&dir)?;
    for module in graph.modules() {
        println!("{module}: {}", graph.imports(module).join(", "));
    }
    let cycles = graph.cycles();
    println!(
        "\n{} cycle(s)\n{}",
        cycles.len(),
        module_graph::report(&cycles)
    );
    Ok(())
}
