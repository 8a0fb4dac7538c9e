//! The documents' code is compiled: each `rust` block of the README, of
//! `docs/architecture.md` and of `docs/driver-features.md` is marked with
//! `<!-- excerpt of PATH -->` and must be an excerpt of that file (a file `cargo test`
//! compiles, such as `examples/readme.rs`): every line of the block, trimmed, is a line
//! of the file, in the same order. A line `...` or `// ...` stands for lines left out.
//! A doc test's lines count without their `//!` or `///`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};

const MARKER: &str = "<!-- excerpt of ";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One marked block: the file it is an excerpt of, its first line in the README, its
/// lines.
struct Block {
    source: String,
    line: usize,
    lines: Vec<String>,
}

/// The marked `rust` blocks of `markdown` (a marker applies to the block right after it);
/// an error names the line.
fn blocks(markdown: &str) -> Result<Vec<Block>, String> {
    let mut out = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let Some(rest) = line.trim().strip_prefix(MARKER) else {
            continue;
        };
        let source = rest
            .strip_suffix("-->")
            .ok_or_else(|| format!("line {}: the marker does not end with -->", n + 1))?
            .trim()
            .to_owned();
        match lines.next() {
            Some((_, fence)) if fence.trim() == "```rust" => {}
            _ => {
                return Err(format!(
                    "line {}: a marker must be followed by a ```rust block",
                    n + 1
                ))
            }
        }
        let mut body = Vec::new();
        for (_, l) in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            body.push(l.trim().to_owned());
        }
        out.push(Block {
            source,
            line: n + 2,
            lines: body,
        });
    }
    Ok(out)
}

/// A line as compared: trimmed, and a doc test's line without its comment marker.
fn code(line: &str) -> &str {
    let line = line.trim();
    line.strip_prefix("//!")
        .or_else(|| line.strip_prefix("///"))
        .map_or(line, str::trim)
}

/// The first line of `block` not found, in order, among `source`'s lines.
fn first_missing<'b>(block: &'b [String], source: &str) -> Option<&'b str> {
    let mut source = source.lines().map(code);
    block
        .iter()
        .filter(|l| !l.is_empty() && *l != "..." && *l != "// ...")
        .find(|l| !source.any(|s| s == code(l)))
        .map(String::as_str)
}

/// Every rust block of `doc` (a path from the workspace root) is marked and an excerpt.
fn check(doc: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(doc)).expect(doc);
    let blocks = blocks(&text).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let rust_blocks = text.lines().filter(|l| l.trim() == "```rust").count();
    let mut failures = Vec::new();
    if blocks.len() != rust_blocks {
        failures.push(format!(
            "{doc}: {rust_blocks} rust blocks, {} marked as the excerpt of a file",
            blocks.len()
        ));
    }
    for b in &blocks {
        let source = std::fs::read_to_string(root().join(&b.source))
            .unwrap_or_else(|e| panic!("{doc}:{}: {}: {e}", b.line, b.source));
        if let Some(missing) = first_missing(&b.lines, &source) {
            failures.push(format!(
                "{doc}:{}: not in {} (or out of order): {missing}",
                b.line, b.source
            ));
        }
    }
    failures
}

#[test]
fn every_rust_block_of_the_readme_and_the_docs_is_an_excerpt_of_compiled_code() {
    let failures: Vec<String> = [
        "README.md",
        "docs/architecture.md",
        "docs/driver-features.md",
    ]
    .into_iter()
    .flat_map(check)
    .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_check_finds_a_changed_line_and_an_out_of_order_one() {
    let source = "fn a() {\n    let x = 1;\n    let y = 2;\n}\n";
    let block = |text: &str| {
        text.lines()
            .map(|l| l.trim().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(first_missing(&block("let x = 1;\n...\n}"), source), None);
    assert_eq!(
        first_missing(&block("let x = 2;"), source),
        Some("let x = 2;")
    );
    assert_eq!(
        first_missing(&block("let y = 2;\nlet x = 1;"), source),
        Some("let x = 1;")
    );
    let md = "text\n<!-- excerpt of a.rs -->\n```rust\n  let x = 1;\n```\n";
    let b = blocks(md).expect("parsed");
    assert_eq!((b[0].source.as_str(), b[0].line), ("a.rs", 3));
    assert_eq!(b[0].lines, vec!["let x = 1;"]);
    match blocks("<!-- excerpt of a.rs -->\nno block\n") {
        Err(e) => assert!(e.contains("line 1: a marker must be followed"), "{e}"),
        Ok(b) => panic!("a marker without a block was taken ({} blocks)", b.len()),
    }
    // A doc test's lines.
    let doc = "//! ```\n//! let x = 1;\n//! ```\n";
    assert_eq!(first_missing(&block("let x = 1;"), doc), None);
    assert_eq!(first_missing(&block("let x = 3;"), doc), Some("let x = 3;"));
}
