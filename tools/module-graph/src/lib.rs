//! module-graph: which module of a crate imports which, read from the crate's sources,
//! and the import cycles among them. A crate whose modules should import one way (types
//! down, behaviour up) keeps them so with a test:
//!
//! ```
//! let graph = module_graph::Graph::load(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))?;
//! let cycles = graph.cycles();
//! assert!(cycles.is_empty(), "{}", module_graph::report(&cycles));
//! # Ok::<(), module_graph::Error>(())
//! ```
//!
//! The modules are the crate's module tree from `lib.rs` (or `main.rs`), inline modules
//! (`mod tests { .. }`) included as modules of their own, so a test module importing
//! others does not tie its parent to them. Module `a` imports module `b` when `a`'s own
//! items (not its child modules') name `b` or an item defined in `b`:
//! - a private `use` (`use crate::b::X`, `use super::X`, `use b::X` for a child `b`, also
//!   inside a function);
//! - a path of two segments or more in code, macro calls included (`crate::b::f()`,
//!   `b::Kind::Queue`, `$crate::b::X`);
//! - a name `a` re-exports used in `a`'s own code.
//!
//! A re-export (`pub use`, any visibility) is no import by itself: like a `mod`
//! declaration it is how the crate shows its items; a path through it is an import of the
//! module that defines the item (`crate::RpcError`, re-exported by the root from `error`,
//! is an import of `error`). Paths are resolved through the crate's modules and `use`
//! names only; a name that is neither (an external crate, a local item) is not followed.
//! `extern crate self as NAME` in the root makes `NAME::` a path from the root.

use proc_macro2::{Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// Why a crate's sources could not be read as a module tree.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A source file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A source file is not Rust syn can parse.
    #[error("cannot parse {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: syn::Error,
    },
    /// A `mod NAME;` whose file is not where the compiler would look.
    #[error("module `{module}` has no file (looked for {})", tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    MissingModule {
        /// The module's path in the crate.
        module: String,
        /// The files looked for.
        tried: Vec<PathBuf>,
    },
    /// Neither `lib.rs` nor `main.rs` in the source directory.
    #[error("no lib.rs or main.rs in {}", dir.display())]
    NoRoot {
        /// The directory given.
        dir: PathBuf,
    },
}

/// One place a module names another: what makes an edge of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The file, relative to the crate's directory (the parent of its `src`).
    pub file: PathBuf,
    /// Its line (1-based).
    pub line: usize,
    /// The path as written (`crate::config::ConfigError`).
    pub path: String,
}

/// An import cycle: `modules[0]` imports `modules[1]`, ..., the last imports the first.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// The modules of the shortest cycle through the first module of the component.
    pub modules: Vec<String>,
    /// Every module of the strongly connected component the cycle lies in (each reaches
    /// each other): all of them must be untangled, not only the cycle shown.
    pub component: Vec<String>,
    /// For each step of the cycle, the references that make it (at least one).
    pub links: Vec<Vec<Reference>>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ring = self.modules.clone();
        ring.extend(self.modules.first().cloned());
        write!(f, "import cycle: {}", ring.join(" -> "))?;
        if self.component.len() > self.modules.len() {
            write!(f, " (in a tangle of {})", self.component.join(", "))?;
        }
        for (i, refs) in self.links.iter().enumerate() {
            let from = &ring[i];
            let to = &ring[i + 1];
            if let Some(first) = refs.first() {
                write!(
                    f,
                    "\n  {from} -> {to}: {}:{} `{}`",
                    first.file.display(),
                    first.line,
                    first.path
                )?;
                if refs.len() > 1 {
                    write!(f, " and {} more", refs.len() - 1)?;
                }
            }
        }
        Ok(())
    }
}

/// The cycles as one message, for a test's failure (empty when there are none).
pub fn report(cycles: &[Cycle]) -> String {
    cycles
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the crate whose sources are in `src_dir` imports one way: `Err` with every
/// cycle named (or why the sources could not be read). What a crate's
/// `tests/modules.rs` asserts.
pub fn check_acyclic(src_dir: impl AsRef<Path>) -> Result<(), String> {
    let graph = Graph::load(src_dir).map_err(|e| e.to_string())?;
    let cycles = graph.cycles();
    if cycles.is_empty() {
        Ok(())
    } else {
        Err(report(&cycles))
    }
}

/// The modules of one crate and who imports whom.
#[derive(Debug)]
pub struct Graph {
    modules: Vec<Module>,
    /// (importer, imported) -> where.
    edges: BTreeMap<(usize, usize), Vec<Reference>>,
}

#[derive(Debug)]
struct Module {
    /// `crate` for the root, else the path from it (`transport::amqp`).
    name: String,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// The module's file, relative to the crate's directory.
    file: PathBuf,
    /// Names its `use` items bind, each with the path it names (relative to the module).
    aliases: BTreeMap<String, Alias>,
    items: Vec<syn::Item>,
}

#[derive(Debug)]
struct Alias {
    path: Vec<String>,
    reexport: bool,
}

/// One leaf of a `use` tree.
struct UseLeaf {
    path: Vec<String>,
    /// The name it binds (none for a glob or `as _`).
    name: Option<String>,
    line: usize,
}

impl Graph {
    /// Reads the crate whose sources are in `src_dir` (`lib.rs`, else `main.rs`, and the
    /// module files they declare).
    pub fn load(src_dir: impl AsRef<Path>) -> Result<Self, Error> {
        let src_dir = src_dir.as_ref();
        let root_file = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src_dir.join(f))
            .find(|p| p.is_file())
            .ok_or_else(|| Error::NoRoot {
                dir: src_dir.to_owned(),
            })?;
        let base = src_dir.parent().unwrap_or(src_dir).to_owned();
        let mut loader = Loader {
            base,
            modules: Vec::new(),
        };
        let items = parse(&root_file)?.items;
        let crate_alias = items.iter().find_map(|item| match item {
            syn::Item::ExternCrate(e) if e.ident == "self" => {
                e.rename.as_ref().map(|(_, name)| name.to_string())
            }
            _ => None,
        });
        loader.module(None, "crate".into(), &root_file, src_dir.to_owned(), items)?;
        let mut graph = Graph {
            modules: loader.modules,
            edges: BTreeMap::new(),
        };
        graph.link(crate_alias.as_deref());
        Ok(graph)
    }

    /// Every module, the root (`crate`) first, in the order they are declared.
    pub fn modules(&self) -> impl Iterator<Item = &str> {
        self.modules.iter().map(|m| m.name.as_str())
    }

    /// The modules `module` imports, by name (empty for an unknown module).
    pub fn imports(&self, module: &str) -> Vec<&str> {
        let Some(from) = self.modules.iter().position(|m| m.name == module) else {
            return Vec::new();
        };
        self.edges
            .keys()
            .filter(|(a, _)| *a == from)
            .map(|(_, b)| self.modules[*b].name.as_str())
            .collect()
    }

    /// The references that make `from` import `to` (empty when it does not).
    pub fn references(&self, from: &str, to: &str) -> &[Reference] {
        let index = |name: &str| self.modules.iter().position(|m| m.name == name);
        match (index(from), index(to)) {
            (Some(a), Some(b)) => self.edges.get(&(a, b)).map_or(&[], Vec::as_slice),
            _ => &[],
        }
    }

    /// One cycle per tangle of modules that import each other (a strongly connected
    /// component of more than one module); none when imports run one way.
    pub fn cycles(&self) -> Vec<Cycle> {
        let n = self.modules.len();
        let mut out = vec![Vec::new(); n];
        for (a, b) in self.edges.keys() {
            out[*a].push(*b);
        }
        components(&out)
            .into_iter()
            .filter(|c| c.len() > 1)
            .filter_map(|component| {
                let set: BTreeSet<usize> = component.iter().copied().collect();
                let start = *set.first()?;
                let ring = shortest_cycle(&out, &set, start)?;
                let links = (0..ring.len())
                    .map(|i| {
                        let next = ring[(i + 1) % ring.len()];
                        self.edges
                            .get(&(ring[i], next))
                            .cloned()
                            .unwrap_or_default()
                    })
                    .collect();
                Some(Cycle {
                    modules: ring.iter().map(|&i| self.modules[i].name.clone()).collect(),
                    component: set.iter().map(|&i| self.modules[i].name.clone()).collect(),
                    links,
                })
            })
            .collect()
    }

    fn link(&mut self, crate_alias: Option<&str>) {
        let mut edges: BTreeMap<(usize, usize), Vec<Reference>> = BTreeMap::new();
        for from in 0..self.modules.len() {
            let mut refs = Refs {
                graph: self,
                from,
                crate_alias,
                found: Vec::new(),
            };
            for item in &self.modules[from].items {
                match item {
                    // A child module is a node of its own.
                    syn::Item::Mod(_) => {}
                    syn::Item::Use(u) => {
                        // A re-export is how the crate shows an item, not an import.
                        if matches!(u.vis, syn::Visibility::Inherited) {
                            refs.use_tree(&u.tree);
                        }
                    }
                    other => refs.visit_item(other),
                }
            }
            for (to, reference) in refs.found {
                if to != from {
                    edges.entry((from, to)).or_default().push(reference);
                }
            }
        }
        self.edges = edges;
    }

    /// Where `segments`, written in module `from`, lead: the module they end in, and
    /// whether they name that module itself (`false`: an item in it). `None` for a path
    /// outside the crate or a name this graph does not know.
    fn resolve(
        &self,
        from: usize,
        segments: &[String],
        crate_alias: Option<&str>,
        depth: u8,
    ) -> Option<(usize, bool)> {
        // A chain of re-exports longer than this is a loop of `use`s.
        if depth > 32 {
            return None;
        }
        let (first, rest) = segments.split_first()?;
        let module = &self.modules[from];
        let mut current = match first.as_str() {
            "crate" | "$crate" => 0,
            name if Some(name) == crate_alias => 0,
            "self" => from,
            "super" => module.parent?,
            name => {
                if let Some(&child) = module.children.get(name) {
                    child
                } else if let Some(alias) = module.aliases.get(name) {
                    let (target, whole) =
                        self.resolve(from, &alias.path, crate_alias, depth + 1)?;
                    if !whole {
                        return Some((target, false));
                    }
                    target
                } else {
                    return None;
                }
            }
        };
        let mut rest = rest;
        // `super::super::X`
        while let Some((next, tail)) = rest.split_first() {
            if next == "super" {
                current = self.modules[current].parent?;
                rest = tail;
            } else {
                break;
            }
        }
        for segment in rest {
            let module = &self.modules[current];
            if let Some(&child) = module.children.get(segment) {
                current = child;
            } else if let Some(alias) = module.aliases.get(segment) {
                let (target, whole) = self.resolve(current, &alias.path, crate_alias, depth + 1)?;
                if !whole {
                    return Some((target, false));
                }
                current = target;
            } else {
                return Some((current, false));
            }
        }
        Some((current, true))
    }
}

struct Loader {
    base: PathBuf,
    modules: Vec<Module>,
}

impl Loader {
    /// Adds a module and, depth first, the modules it declares; `dir` is where its
    /// `mod NAME;` files are.
    fn module(
        &mut self,
        parent: Option<usize>,
        name: String,
        file: &Path,
        dir: PathBuf,
        items: Vec<syn::Item>,
    ) -> Result<usize, Error> {
        let index = self.modules.len();
        let mut aliases = BTreeMap::new();
        for item in &items {
            if let syn::Item::Use(u) = item {
                let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                for leaf in use_leaves(&u.tree) {
                    if let Some(bound) = leaf.name {
                        aliases.insert(
                            bound,
                            Alias {
                                path: leaf.path,
                                reexport,
                            },
                        );
                    }
                }
            }
        }
        self.modules.push(Module {
            name: name.clone(),
            parent,
            children: BTreeMap::new(),
            file: file.strip_prefix(&self.base).unwrap_or(file).to_owned(),
            aliases,
            items: Vec::new(),
        });
        let mut kept = Vec::with_capacity(items.len());
        for item in items {
            if let syn::Item::Mod(m) = &item {
                let child_name = m.ident.to_string();
                let full = if parent.is_none() {
                    child_name.clone()
                } else {
                    format!("{name}::{child_name}")
                };
                let child_dir = dir.join(&child_name);
                let child = match &m.content {
                    Some((_, inline)) => {
                        self.module(Some(index), full, file, child_dir, inline.clone())?
                    }
                    None => {
                        let tried = match path_attr(&m.attrs) {
                            Some(p) => vec![file.parent().unwrap_or(&dir).join(p)],
                            None => vec![
                                dir.join(format!("{child_name}.rs")),
                                child_dir.join("mod.rs"),
                            ],
                        };
                        let Some(found) = tried.iter().find(|p| p.is_file()).cloned() else {
                            return Err(Error::MissingModule {
                                module: full,
                                tried,
                            });
                        };
                        let parsed = parse(&found)?;
                        self.module(Some(index), full, &found, child_dir, parsed.items)?
                    }
                };
                self.modules[index].children.insert(child_name, child);
            }
            kept.push(item);
        }
        self.modules[index].items = kept;
        Ok(index)
    }
}

fn parse(path: &Path) -> Result<syn::File, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    syn::parse_file(&text).map_err(|source| Error::Parse {
        path: path.to_owned(),
        source,
    })
}

/// `#[path = "..."]` on a `mod` declaration.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn use_leaves(tree: &syn::UseTree) -> Vec<UseLeaf> {
    fn walk(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let line = n.ident.span().start().line;
                if n.ident == "self" {
                    out.push(UseLeaf {
                        path: prefix.clone(),
                        name: prefix.last().cloned(),
                        line,
                    });
                } else {
                    let mut path = prefix.clone();
                    path.push(n.ident.to_string());
                    out.push(UseLeaf {
                        path,
                        name: Some(n.ident.to_string()),
                        line,
                    });
                }
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                let name = (r.rename != "_").then(|| r.rename.to_string());
                out.push(UseLeaf {
                    path,
                    name,
                    line: r.ident.span().start().line,
                });
            }
            syn::UseTree::Glob(g) => out.push(UseLeaf {
                path: prefix.clone(),
                name: None,
                line: g.star_token.spans[0].start().line,
            }),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// Collects the references of one module's items.
struct Refs<'g> {
    graph: &'g Graph,
    from: usize,
    crate_alias: Option<&'g str>,
    found: Vec<(usize, Reference)>,
}

impl Refs<'_> {
    fn path(&mut self, segments: Vec<String>, line: usize) {
        if segments.is_empty() {
            return;
        }
        // One name is an import only through a re-export of this module's: any other
        // bare name is a local item, or came in by a `use`, which counted already.
        if segments.len() == 1 {
            let reexported = self.graph.modules[self.from]
                .aliases
                .get(&segments[0])
                .is_some_and(|a| a.reexport);
            if !reexported {
                return;
            }
        }
        if let Some((to, _)) = self
            .graph
            .resolve(self.from, &segments, self.crate_alias, 0)
        {
            self.found.push((
                to,
                Reference {
                    file: self.graph.modules[self.from].file.clone(),
                    line,
                    path: segments.join("::"),
                },
            ));
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree) {
        for leaf in use_leaves(tree) {
            if leaf.path.is_empty() {
                continue;
            }
            if let Some((to, _)) = self
                .graph
                .resolve(self.from, &leaf.path, self.crate_alias, 0)
            {
                self.found.push((
                    to,
                    Reference {
                        file: self.graph.modules[self.from].file.clone(),
                        line: leaf.line,
                        path: leaf.path.join("::"),
                    },
                ));
            }
        }
    }

    /// Paths inside a macro call's tokens: `a::b::c` sequences (and `$crate::...`).
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            let start = match &trees[i] {
                TokenTree::Group(g) => {
                    self.tokens(g.stream());
                    i += 1;
                    continue;
                }
                TokenTree::Punct(p) if p.as_char() == '$' => match trees.get(i + 1) {
                    Some(TokenTree::Ident(id)) if id == "crate" => {
                        i += 1;
                        Some(("$crate".to_owned(), id.span().start().line))
                    }
                    _ => None,
                },
                TokenTree::Ident(id) => {
                    // `::name` is an external crate's path.
                    let global = i >= 1
                        && matches!(&trees[i - 1], TokenTree::Punct(p) if p.as_char() == ':')
                        && i >= 2
                        && matches!(&trees[i - 2], TokenTree::Punct(p) if p.as_char() == ':' && p.spacing() == Spacing::Joint);
                    (!global).then(|| (id.to_string(), id.span().start().line))
                }
                _ => None,
            };
            let Some((first, line)) = start else {
                i += 1;
                continue;
            };
            let mut segments = vec![first];
            let mut j = i + 1;
            while let (
                Some(TokenTree::Punct(a)),
                Some(TokenTree::Punct(b)),
                Some(TokenTree::Ident(id)),
            ) = (trees.get(j), trees.get(j + 1), trees.get(j + 2))
            {
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':' {
                    segments.push(id.to_string());
                    j += 3;
                } else {
                    break;
                }
            }
            self.path(segments, line);
            i = j;
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let line = path
                .segments
                .first()
                .map_or(0, |s| s.ident.span().start().line);
            self.path(segments, line);
        }
        // Generic arguments hold paths too.
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A `use` inside a function: private, so an import.
        self.use_tree(&u.tree);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    // Documentation and derives name no module of the crate.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    // A module inside a function body is not followed.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}
}

/// The strongly connected components of a graph given as adjacency lists (Tarjan's
/// algorithm, iterative).
fn components(out: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = out.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut result = Vec::new();
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, position in its adjacency list)
        let mut work = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&(v, pos)) = work.last() {
            if let Some(&w) = out[v].get(pos) {
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    component.sort_unstable();
                    result.push(component);
                }
            }
        }
    }
    result.sort();
    result
}

/// The shortest cycle from `start` back to it inside `set` (breadth first).
fn shortest_cycle(out: &[Vec<usize>], set: &BTreeSet<usize>, start: usize) -> Option<Vec<usize>> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &out[v] {
            if !set.contains(&w) {
                continue;
            }
            if w == start {
                let mut ring = vec![v];
                let mut at = v;
                while at != start {
                    at = *came_from.get(&at)?;
                    ring.push(at);
                }
                ring.reverse();
                return Some(ring);
            }
            if w != start && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    None
}
