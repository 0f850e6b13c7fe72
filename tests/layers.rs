//! The host's layers, read from its code as rustc reads it: every file of `host/src` is parsed (`syn`), and
//! every path its code names that leads into the crate is an edge from its file to the file that defines
//! it — `use` trees (renames and globs included), paths in expressions, types, patterns and attributes,
//! paths in macro calls and `macro_rules!` bodies (`$crate::…`), and the names a module brings into scope
//! (its `use` aliases, `use crate as x`, and the child modules it declares). Test modules (`#[cfg(test)]`)
//! are left out wherever they stand in a file. The test fails when an edge runs to a higher layer or when
//! files depend on each other in a circle, and prints each offending edge (`file:line`, the item).
//!
//! The layers are the table of `host/src/layers.md`, which `host/src/lib.rs` includes as its documentation:
//! the one place they are named. A file may use the `mod.rs` of its own folder and of every folder above it
//! (one rule, for every folder); every other circle fails.
//!
//! The binary (`main.rs`, `cli/`) is a crate of its own on top of the library and is not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The layers, bottom up, and the path prefixes of each (`host/src/layers.md`).
struct Layers {
    order: Vec<String>,
    prefixes: Vec<(String, usize)>,
}

impl Layers {
    /// Reads the table: a row's first cell is `N. name`, its last the files as `code` spans.
    fn parse(table: &str) -> Layers {
        let mut layers = Layers { order: Vec::new(), prefixes: Vec::new() };
        for row in table.lines().filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let Some((number, name)) = cells[0].split_once(". ") else { continue };
            if number.parse::<usize>().is_err() {
                continue;
            }
            let floor = layers.order.len();
            layers.order.push(name.to_string());
            let files = cells.last().unwrap();
            for prefix in files.split('`').skip(1).step_by(2) {
                layers.prefixes.push((prefix.to_string(), floor));
            }
        }
        layers
    }

    /// A file's layer: that of the longest prefix naming it (a folder `a/` names what is under it).
    fn of(&self, file: &str) -> Option<usize> {
        let named = |prefix: &str| if prefix.ends_with('/') { file.starts_with(prefix) } else { file == prefix };
        self.prefixes.iter().filter(|(p, _)| named(p)).max_by_key(|(p, _)| p.len()).map(|(_, l)| *l)
    }
}

/// Every `.rs` file under `dir`, as paths relative to `root`.
fn sources(root: &Path, dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The module path of a file (`store/messages.rs` → `store::messages`, `store/mod.rs` → `store`).
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The file that defines the longest prefix of `module` (an item of `a::b` is in `a/b.rs` or `a/b/mod.rs`).
fn file_for(module: &[String], files: &BTreeSet<String>) -> Option<String> {
    for len in (0..=module.len()).rev() {
        let base = module[..len].join("/");
        let candidates = match base.is_empty() {
            true => vec!["lib.rs".to_string()],
            false => vec![format!("{base}.rs"), format!("{base}/mod.rs")],
        };
        if let Some(found) = candidates.into_iter().find(|c| files.contains(c)) {
            return Some(found);
        }
    }
    None
}

/// Whether `to` is the `mod.rs` of a folder `from` is in (its own, or one above it).
fn descendant_uses_ancestor(from: &str, to: &str) -> bool {
    to.strip_suffix("mod.rs").is_some_and(|dir| !dir.is_empty() && from.starts_with(dir) && from != to)
}

/// A path the code names, resolved: the absolute module path of what it names, and the line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    path: Vec<String>,
    line: usize,
}

/// The names one scope (a module, or a block) brings in: each to the absolute path it stands for.
#[derive(Default, Clone)]
struct Scope {
    module: Vec<String>,
    names: BTreeMap<String, Vec<String>>,
}

/// Walks a file's syntax tree, resolving every path into the crate.
struct Reader {
    scopes: Vec<Scope>,
    found: Vec<Named>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().replace(' ', "") == "test")
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The leaves of a `use` tree: each name it brings in (none for a glob) and the path it stands for as written.
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Option<String>, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => out.push((prefix.last().cloned(), prefix.clone())),
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((Some(n.ident.to_string()), path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((Some(r.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                use_leaves(tree, prefix, out);
            }
        }
    }
}

impl Reader {
    fn new(file: &str) -> Reader {
        Reader { scopes: vec![Scope { module: module_of(file), names: BTreeMap::new() }], found: Vec::new() }
    }

    fn scope(&self) -> &Scope {
        self.scopes.last().unwrap()
    }

    /// The absolute path `segments` stands for in the current scope, when it leads into the crate.
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let module = &self.scope().module;
        let mut base = match first.as_str() {
            "crate" | "$crate" => Vec::new(),
            "self" => module.clone(),
            "super" => {
                let mut base = module.clone();
                base.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            name => self.scopes.iter().rev().find_map(|s| s.names.get(name)).cloned()?,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: &[String], line: usize) {
        // The crate itself (`use crate as x;`) names no file; what is reached through it does.
        if let Some(path) = self.resolve(segments).filter(|p| !p.is_empty()) {
            self.found.push(Named { path, line });
        }
    }

    /// Brings in the names of `items` (their `use` leaves and the modules they declare) into the scope on
    /// top, resolving `use` paths in rounds so that one alias may build on another (`use crate::a; use a::b;`).
    fn bring_in(&mut self, items: &[syn::Item]) {
        let mut leaves = Vec::new();
        for item in items.iter().filter(|i| !is_test(item_attrs(i))) {
            match item {
                syn::Item::Use(u) => use_leaves(&u.tree, &mut Vec::new(), &mut leaves),
                syn::Item::Mod(m) => {
                    let mut path = self.scope().module.clone();
                    path.push(m.ident.to_string());
                    self.scopes.last_mut().unwrap().names.insert(m.ident.to_string(), path);
                }
                _ => {}
            }
        }
        let mut pending: Vec<(Option<String>, Vec<String>)> = leaves;
        loop {
            let before = pending.len();
            pending.retain(|(name, path)| match (name, self.resolve(path)) {
                (Some(name), Some(absolute)) => {
                    self.scopes.last_mut().unwrap().names.insert(name.clone(), absolute);
                    false
                }
                _ => true,
            });
            if pending.len() == before {
                break;
            }
        }
    }

    /// Paths in a token stream (a macro call's arguments, a `macro_rules!` body, an attribute): each run of
    /// `name :: name …` whose first name leads into the crate (`$crate` included).
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => {
                    self.tokens(g.stream());
                    i += 1;
                }
                TokenTree::Punct(p) if p.as_char() == '$' => {
                    if let Some(TokenTree::Ident(id)) = trees.get(i + 1)
                        && id == "crate"
                    {
                        let line = id.span().start().line;
                        let (mut segments, next) = path_at(&trees, i + 1);
                        segments[0] = "$crate".into();
                        self.record(&segments, line);
                        i = next;
                    } else {
                        i += 1;
                    }
                }
                TokenTree::Ident(id) => {
                    let line = id.span().start().line;
                    let (segments, next) = path_at(&trees, i);
                    let after_colons = i >= 2
                        && matches!((&trees[i - 1], &trees[i - 2]), (TokenTree::Punct(a), TokenTree::Punct(b)) if a.as_char() == ':' && b.as_char() == ':');
                    if segments.len() > 1 && !after_colons {
                        self.record(&segments, line);
                    }
                    i = next.max(i + 1);
                }
                _ => i += 1,
            }
        }
    }
}

/// The path `a :: b :: c` starting at `trees[i]` (an identifier): its segments and the index after it.
fn path_at(trees: &[TokenTree], mut i: usize) -> (Vec<String>, usize) {
    let mut segments = Vec::new();
    while let Some(TokenTree::Ident(id)) = trees.get(i) {
        segments.push(id.to_string());
        let colons = matches!((trees.get(i + 1), trees.get(i + 2)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
        if !colons {
            return (segments, i + 1);
        }
        i += 3;
    }
    (segments, i)
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_file(&mut self, file: &'ast syn::File) {
        self.bring_in(&file.items);
        for attr in &file.attrs {
            self.visit_attribute(attr);
        }
        for item in &file.items {
            self.visit_item(item);
        }
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let test = match item {
            syn::ImplItem::Fn(f) => is_test(&f.attrs),
            _ => false,
        };
        if !test {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let Some((_, items)) = &m.content else { return };
        let mut module = self.scope().module.clone();
        module.push(m.ident.to_string());
        self.scopes.push(Scope { module, names: BTreeMap::new() });
        self.bring_in(items);
        for item in items {
            self.visit_item(item);
        }
        self.scopes.pop();
    }

    fn visit_block(&mut self, block: &'ast syn::Block) {
        let items: Vec<syn::Item> = block
            .stmts
            .iter()
            .filter_map(|s| match s {
                syn::Stmt::Item(item) => Some(item.clone()),
                _ => None,
            })
            .collect();
        let module = self.scope().module.clone();
        self.scopes.push(Scope { module, names: BTreeMap::new() });
        self.bring_in(&items);
        syn::visit::visit_block(self, block);
        self.scopes.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        let line = u.use_token.span.start().line;
        for (_, path) in leaves {
            self.record(&path, line);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = path.segments.first() {
            self.record(&segments, first.ident.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    fn visit_attribute(&mut self, attr: &'ast syn::Attribute) {
        match &attr.meta {
            syn::Meta::List(list) => {
                self.visit_path(&list.path);
                self.tokens(list.tokens.clone());
            }
            syn::Meta::NameValue(nv) => self.visit_expr(&nv.value),
            syn::Meta::Path(p) => self.visit_path(p),
        }
    }
}

/// What a file's code names into the crate, parsed from `source` as the file `file`.
fn named(file: &str, source: &str) -> Vec<Named> {
    let parsed = syn::parse_file(source).unwrap_or_else(|e| panic!("host/src/{file} does not parse: {e}"));
    let mut reader = Reader::new(file);
    reader.visit_file(&parsed);
    reader.found
}

struct Edge {
    from: String,
    line: usize,
    to: String,
    item: String,
}

fn edges_of(file: &str, source: &str, files: &BTreeSet<String>) -> Vec<Edge> {
    let mut edges = Vec::new();
    let mut seen = BTreeSet::new();
    for Named { path, line } in named(file, source) {
        if !seen.insert((path.clone(), line)) {
            continue;
        }
        let Some(to) = file_for(&path, files) else { continue };
        if to != file {
            edges.push(Edge { from: file.to_string(), line, to, item: path.join("::") });
        }
    }
    edges
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

/// The problems of a tree of sources (`(file, source)`): files of no layer, upward edges, circles.
fn problems(layers: &Layers, sources: &[(String, String)]) -> Vec<String> {
    let files: BTreeSet<String> = sources.iter().map(|(f, _)| f.clone()).collect();
    let mut problems = Vec::new();
    for file in &files {
        if layers.of(file).is_none() {
            problems.push(format!("{file} belongs to no layer: add it to the table of host/src/layers.md"));
        }
    }
    let edges: Vec<Edge> = sources.iter().flat_map(|(file, source)| edges_of(file, source, &files)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for edge in &edges {
        if !descendant_uses_ancestor(&edge.from, &edge.to) {
            graph.entry(edge.from.clone()).or_default().insert(edge.to.clone());
        }
        if let (Some(from), Some(to)) = (layers.of(&edge.from), layers.of(&edge.to))
            && to > from
        {
            problems.push(format!(
                "upward: host/src/{}:{} ({}) uses {} of host/src/{} ({})",
                edge.from, edge.line, layers.order[from], edge.item, edge.to, layers.order[to]
            ));
        }
    }
    for edge in &edges {
        if edge.from.starts_with("http/") && edge.to.starts_with("store/") && !store_allowed_in_http(edge) {
            problems.push(format!(
                "a handler calls the store: host/src/{}:{} uses {} of host/src/{} (call its domain instead)",
                edge.from, edge.line, edge.item, edge.to
            ));
        }
    }
    for circle in circles(&graph) {
        let members: BTreeSet<&String> = circle.iter().collect();
        let ties: Vec<String> = edges
            .iter()
            .filter(|e| {
                members.contains(&e.from) && members.contains(&e.to) && !descendant_uses_ancestor(&e.from, &e.to)
            })
            .map(|e| format!("    host/src/{}:{} uses {} (host/src/{})", e.from, e.line, e.item, e.to))
            .collect();
        problems.push(format!("circle of {} files: {}\n{}", circle.len(), circle.join(", "), ties.join("\n")));
    }
    problems
}

/// What of the store `http/` may name: handlers call the domain, never a statement of the store. They may
/// name the store's handle (`Db`) they pass along; the composition root (`http/state.rs`) builds the
/// store's writers; the metrics recorder (`http/metrics.rs`) reads the backlogs it reports; and the live
/// streams (`http/live/`, and the stream tickets of `http/auth.rs`) tail the event log
/// (`store/user_events.rs`), which is what they are.
fn store_allowed_in_http(edge: &Edge) -> bool {
    edge.item.split("::").any(|name| matches!(name, "Db" | "Backend"))
        || edge.from == "http/state.rs"
        || edge.from == "http/metrics.rs"
        || (edge.to == "store/user_events.rs" && (edge.from.starts_with("http/live/") || edge.from == "http/auth.rs"))
}

fn the_layers() -> Layers {
    let layers = Layers::parse(include_str!("../host/src/layers.md"));
    assert_eq!(layers.order, ["names", "store", "domain", "workers", "http"], "the floors of host/src/layers.md");
    layers
}

#[test]
fn layers_only_depend_downwards_and_no_files_form_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    sources(&root, &root, &mut all);
    // The binary is a crate of its own, on top of the library.
    let sources: Vec<(String, String)> = all
        .into_iter()
        .filter(|f| f != "main.rs" && !f.starts_with("cli/"))
        .map(|f| {
            let text = std::fs::read_to_string(root.join(&f)).unwrap();
            (f, text)
        })
        .collect();
    let problems = problems(&the_layers(), &sources);
    assert!(problems.is_empty(), "{} problems in the layers:\n{}", problems.len(), problems.join("\n"));
}

/// The problems of a small tree, for the reader's self-tests: `names.rs` (bottom, its code `names`),
/// `store/mod.rs` and `store/messages.rs`, `broadcasts.rs` (workers), `http/mod.rs`, `http/stream.rs` (its
/// code `http_stream`), `http/conversations/mod.rs` and `http/conversations/events.rs` (top): the shape of
/// the circle the earlier reader missed.
fn planted(names: &str, http_stream: &str) -> Vec<String> {
    let tree = [
        ("names.rs", names),
        ("lib.rs", "pub mod names; pub mod store; pub mod broadcasts; pub mod http;"),
        ("store/mod.rs", "pub mod messages; pub struct Db;"),
        ("store/messages.rs", "pub fn find() {}"),
        ("broadcasts.rs", "pub fn run() {}"),
        ("http/mod.rs", "pub mod stream; pub mod conversations;"),
        ("http/stream.rs", http_stream),
        (
            "http/conversations/mod.rs",
            "mod events; pub struct ConversationRecord; pub fn router() { events::conversation_events(); }",
        ),
        ("http/conversations/events.rs", "use crate::http::stream::sse; pub fn conversation_events() { sse(); }"),
    ];
    let sources: Vec<(String, String)> = tree.iter().map(|(f, s)| (f.to_string(), s.to_string())).collect();
    problems(&the_layers(), &sources)
}

#[test]
fn the_reader_finds_each_way_code_names_another_file() {
    // Nothing planted: the stream uses nothing of conversations, so no circle; names uses nothing above.
    assert_eq!(planted("pub fn x() {}", "pub fn sse() {}"), Vec::<String>::new());
    let upward = |problems: Vec<String>, item: &str| {
        assert!(problems.iter().any(|p| p.starts_with("upward: host/src/names.rs") && p.contains(item)), "{problems:?}")
    };
    // An alias of the crate itself, then a path through it.
    upward(planted("use crate as x; pub fn f() { x::broadcasts::run(); }", "pub fn sse() {}"), "broadcasts::run");
    // Code after the file's test module.
    upward(
        planted("#[cfg(test)]\nmod tests { }\npub fn f() { crate::broadcasts::run(); }", "pub fn sse() {}"),
        "broadcasts::run",
    );
    // A macro whose body names `$crate::…`.
    upward(
        planted("#[macro_export]\nmacro_rules! m { () => { $crate::broadcasts::run() }; }", "pub fn sse() {}"),
        "broadcasts::run",
    );
    // A rename with a bare `as` inside a group: the whole name, not `broadc`.
    upward(planted("use crate::{broadcasts as b}; pub fn f() { b::run(); }", "pub fn sse() {}"), "broadcasts");
    let renamed = named("names.rs", "use crate::{broadcasts as b, store::Db};");
    assert_eq!(renamed.iter().map(|n| n.path.join("::")).collect::<Vec<_>>(), ["broadcasts", "store::Db"]);
    // A path inside a macro call, and inside an attribute.
    upward(planted("pub fn f() { let _ = format!(\"{:?}\", crate::http::stream::sse()); }", "pub fn sse() {}"), "http");
    upward(
        planted("#[doc(alias = \"x\")]\n#[my(with = crate::http::stream::sse)]\npub fn f() {}", "pub fn sse() {}"),
        "http",
    );
    // A use group that opens with the crate: `use crate::{store::…}` is the store, no alarm.
    assert_eq!(planted("use crate::{store::messages::find}; pub fn f() { find(); }", "pub fn sse() {}").len(), 1);
    // A handler that calls the store is refused (it calls the domain); the store's handle it passes along is not.
    let calls = planted("pub fn x() {}", "use crate::{store::messages::find}; pub fn sse() { find(); }");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].starts_with("a handler calls the store: host/src/http/stream.rs:1 uses store::messages::find"));
    assert!(planted("pub fn x() {}", "use crate::store::Db; pub fn sse(_: &Db) {}").is_empty());
    // A parent's bare path to its own child (`events::…` after `mod events;`) is an edge: with the stream
    // using the conversations' record, the three files form the circle that was missed.
    let circle = planted("pub fn x() {}", "use crate::http::conversations::ConversationRecord; pub fn sse() {}");
    assert_eq!(circle.len(), 1, "{circle:?}");
    assert!(
        circle[0]
            .starts_with("circle of 3 files: http/conversations/events.rs, http/conversations/mod.rs, http/stream.rs"),
        "{circle:?}"
    );
    // A child's use of an ancestor folder's mod.rs is allowed, at any depth.
    assert!(descendant_uses_ancestor("http/conversations/events.rs", "http/mod.rs"));
    assert!(descendant_uses_ancestor("http/conversations/events.rs", "http/conversations/mod.rs"));
    assert!(!descendant_uses_ancestor("http/mod.rs", "http/conversations/mod.rs"));
    assert!(!descendant_uses_ancestor("store/messages.rs", "http/mod.rs"));
}

#[test]
fn the_layers_are_the_table_lib_rs_includes() {
    let lib = include_str!("../host/src/lib.rs");
    assert!(lib.contains("#![doc = include_str!(\"layers.md\")]"), "lib.rs includes host/src/layers.md");
    let layers = the_layers();
    assert_eq!(layers.of("store/messages.rs"), Some(1));
    assert_eq!(layers.of("http/conversations/events.rs"), Some(4));
    assert_eq!(layers.of("names.rs"), Some(0));
    assert_eq!(layers.of("nowhere.rs"), None);
}
