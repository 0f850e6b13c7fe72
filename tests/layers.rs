//! The host's layers, read from its code: every `use crate::…` path and every `crate::…` or `super::…`
//! path written in the code of `host/src` is an edge from its file to the file that defines what it names.
//! The test fails when an edge runs to a higher layer or when files depend on each other in a circle, and
//! prints each offending edge (`file:line`, the item).
//!
//! The layers, bottom up (the table `LAYERS` below is the one place they are named; `host/src/lib.rs`
//! describes them):
//! 1. names: the closed sets of stored names, settings, time, secrets and the pure checks;
//! 2. store: every SQL statement (`store/`), the Wasm runtime (`runtime/`) and the channel providers;
//! 3. domain: what the service does (messages, conversations, flows, payments, bots, events, …);
//! 4. workers: what runs beside the API (delivery, webhooks, broadcasts);
//! 5. http: the API, its credentials, its error type and the shared state.
//!
//! The binary (`main.rs`, `cli/`) is a crate of its own on top of the library and is not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each file's layer, by the longest matching path prefix under `host/src`.
const LAYERS: &[(&str, &str)] = &[
    ("names.rs", "names"),
    ("clock.rs", "names"),
    ("secrets.rs", "names"),
    ("validate.rs", "names"),
    ("forms.rs", "names"),
    ("config.rs", "names"),
    ("signing.rs", "names"),
    ("store/", "store"),
    ("runtime/", "store"),
    ("providers.rs", "store"),
    ("webpush.rs", "store"),
    ("encryption.rs", "domain"),
    ("template.rs", "domain"),
    ("events.rs", "domain"),
    ("messages/", "domain"),
    ("conversations.rs", "domain"),
    ("flows.rs", "domain"),
    ("channel_steps.rs", "domain"),
    ("payments.rs", "domain"),
    ("bots.rs", "domain"),
    ("senders.rs", "domain"),
    ("otp.rs", "domain"),
    ("members.rs", "domain"),
    ("passkeys.rs", "domain"),
    ("health.rs", "domain"),
    ("delivery/", "workers"),
    ("webhooks/", "workers"),
    ("broadcasts.rs", "workers"),
    ("inbound.rs", "workers"),
    ("http/", "http"),
    ("metrics.rs", "http"),
    ("auth.rs", "http"),
    ("state.rs", "http"),
    ("lib.rs", "http"),
];

const ORDER: &[&str] = &["names", "store", "domain", "workers", "http"];

/// Folders whose children may use their parent `mod.rs` (which in turn declares and uses them), each with
/// why. Only that edge is exempt: children of one folder must not depend on each other in a circle.
const PARENTS_SHARED_WITH_CHILDREN: &[(&str, &str)] = &[
    (
        "runtime/",
        "mod.rs is the runtime's API (Runtime, RuntimeError, RuntimeLimits) and its children implement it: the \
         engine, the sandbox, the conversions, the compiler and the slots answer in the API's error type",
    ),
    (
        "delivery/",
        "mod.rs is the delivery worker's context (Delivery) that the provider receipts and Meta's template \
         review run with",
    ),
];

/// Whether `from` → `to` is a child's use of its own parent `mod.rs` in a folder that allows it.
fn child_uses_parent(from: &str, to: &str) -> bool {
    PARENTS_SHARED_WITH_CHILDREN
        .iter()
        .any(|(dir, _)| to == format!("{dir}mod.rs") && from.starts_with(dir) && !from[dir.len()..].contains('/'))
}

fn layer_of(file: &str) -> Option<usize> {
    let (_, layer) = LAYERS
        .iter()
        .filter(|(prefix, _)| if prefix.ends_with('/') { file.starts_with(prefix) } else { file == *prefix })
        .max_by_key(|(prefix, _)| prefix.len())?;
    ORDER.iter().position(|l| l == layer)
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

/// The code of a file with comments, string and char literals blanked (newlines kept, so lines still
/// count), and without its `#[cfg(test)]` modules.
fn code_of(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &b in s {
            out.push(if b == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map(|e| e + 4).unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"r#\"") || rest.starts_with(b"r\"") || rest.starts_with(b"br\"") {
            let start = rest.iter().position(|&b| b == b'"').unwrap();
            let hashes = rest[..start].iter().filter(|&&b| b == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let end = text[i + start + 1..].find(&close).map(|e| start + 1 + e + close.len()).unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, &rest[..(j + 1).min(rest.len())]);
            i += j + 1;
        } else if rest[0] == b'\'' && rest.len() > 2 && (rest[2] == b'\'' || rest[1] == b'\\') {
            // A char literal (a lifetime has no closing quote right after one character).
            let end = rest[1..].iter().position(|&b| b == b'\'').map(|e| e + 2).unwrap_or(1);
            blank(&mut out, &rest[..end]);
            i += end;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    match out.find("#[cfg(test)]\nmod tests") {
        Some(at) => out[..at].to_string(),
        None => out,
    }
}

/// The paths of a `use` tree, expanded: `a::{b, c::{d, self}}` gives `a::b`, `a::c::d`, `a::c`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap().trim_end_matches("::*").to_string()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        for path in expand(part) {
            let path = path.split("as").next().unwrap().to_string();
            if path == "self" {
                out.push(prefix.trim_end_matches("::").to_string());
            } else {
                out.push(format!("{prefix}{path}"));
            }
        }
    }
    out
}

/// The module path of a file (`store/messages.rs` → `store::messages`, `store/mod.rs` → `store`).
fn module_of(file: &str) -> Vec<String> {
    let trimmed = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = trimmed.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The file that defines the longest prefix of `module` (an item of `a::b` is in `a/b.rs` or `a/b/mod.rs`).
fn file_for(module: &[String], files: &BTreeSet<String>) -> Option<String> {
    for len in (0..=module.len()).rev() {
        let base = module[..len].join("/");
        let candidates = if base.is_empty() {
            vec!["lib.rs".to_string()]
        } else {
            vec![format!("{base}.rs"), format!("{base}/mod.rs")]
        };
        if let Some(found) = candidates.into_iter().find(|c| files.contains(c)) {
            return Some(found);
        }
    }
    None
}

/// A path written in `file` (`crate::…`, `super::…`, `self::…`) as an absolute module path.
fn absolute(path: &str, file: &str) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut module = module_of(file);
    let mut rest = &segments[..];
    match rest.first()? {
        &"crate" => {
            module.clear();
            rest = &rest[1..];
        }
        &"super" | &"self" => {
            while let Some(&"super") = rest.first() {
                module.pop();
                rest = &rest[1..];
            }
            if rest.first() == Some(&"self") {
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    module.extend(rest.iter().map(|s| s.to_string()));
    Some(module)
}

struct Edge {
    from: String,
    line: usize,
    to: String,
    item: String,
}

fn edges(root: &Path, files: &BTreeSet<String>) -> Vec<Edge> {
    let mut found = Vec::new();
    for file in files {
        let code = code_of(&std::fs::read_to_string(root.join(file)).unwrap());
        let line_at = |offset: usize| code[..offset].matches('\n').count() + 1;
        let mut record = |path: &str, offset: usize| {
            let Some(module) = absolute(path, file) else { return };
            let Some(to) = file_for(&module, files) else { return };
            if &to != file {
                found.push(Edge { from: file.clone(), line: line_at(offset), to, item: module.join("::") });
            }
        };
        // `use` statements, their trees expanded.
        let mut search = 0;
        while let Some(at) = code[search..].find("use ") {
            let start = search + at;
            search = start + 4;
            let before = code[..start].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let Some(end) = code[start..].find(';') else { break };
            let tree = code[start + 4..start + end].trim();
            let tree = tree.strip_prefix("pub ").unwrap_or(tree);
            if tree.starts_with("crate") || tree.starts_with("super") || tree.starts_with("self") {
                for path in expand(tree) {
                    record(&path, start);
                }
            }
            search = start + end;
        }
        // Paths written in the code: `crate::a::b`, `super::a`.
        for prefix in ["crate::", "super::"] {
            let mut from = 0;
            while let Some(at) = code[from..].find(prefix) {
                let start = from + at;
                from = start + prefix.len();
                let before = code[..start].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let line_start = code[..start].rfind('\n').map(|n| n + 1).unwrap_or(0);
                if code[line_start..start].trim_start().starts_with("use ")
                    || code[line_start..start].trim_start().starts_with("pub use ")
                {
                    continue;
                }
                let path: String =
                    code[start..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                record(path.trim_end_matches(':'), start);
            }
        }
    }
    found
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

#[test]
fn layers_only_depend_downwards_and_no_files_form_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    sources(&root, &root, &mut all);
    // The binary is a crate of its own, on top of the library.
    let files: BTreeSet<String> = all.into_iter().filter(|f| f != "main.rs" && !f.starts_with("cli/")).collect();
    let mut problems = Vec::new();
    for file in &files {
        if layer_of(file).is_none() {
            problems.push(format!("{file} belongs to no layer: add it to LAYERS in tests/layers.rs"));
        }
    }
    let edges = edges(&root, &files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for edge in &edges {
        if !child_uses_parent(&edge.from, &edge.to) {
            graph.entry(edge.from.clone()).or_default().insert(edge.to.clone());
        }
        if let (Some(from), Some(to)) = (layer_of(&edge.from), layer_of(&edge.to))
            && to > from
        {
            problems.push(format!(
                "upward: host/src/{}:{} ({}) uses {} of host/src/{} ({})",
                edge.from, edge.line, ORDER[from], edge.item, edge.to, ORDER[to]
            ));
        }
    }
    for circle in circles(&graph) {
        let members: BTreeSet<&String> = circle.iter().collect();
        let ties: Vec<String> = edges
            .iter()
            .filter(|e| members.contains(&e.from) && members.contains(&e.to) && !child_uses_parent(&e.from, &e.to))
            .map(|e| format!("    host/src/{}:{} uses {} (host/src/{})", e.from, e.line, e.item, e.to))
            .collect();
        problems.push(format!("circle of {} files: {}\n{}", circle.len(), circle.join(", "), ties.join("\n")));
    }
    assert!(problems.is_empty(), "{} problems in the layers:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_reader_finds_what_the_code_names() {
    assert_eq!(
        expand("crate::store::{self, Db, messages::{find, Message as M}}"),
        ["crate::store", "crate::store::Db", "crate::store::messages::find", "crate::store::messages::Message"]
    );
    let code = code_of(
        "use crate::a; // crate::b\nlet s = \"crate::c\"; let c = '\"'; crate::d::e();\n#[cfg(test)]\nmod tests { use crate::f; }",
    );
    assert!(code.contains("crate::a") && code.contains("crate::d::e") && !code.contains("crate::b"));
    assert!(!code.contains("crate::c") && !code.contains("crate::f"));
    assert_eq!(absolute("super::x::Y", "http/bots/inbound.rs").unwrap(), ["http", "bots", "x", "Y"]);
    assert_eq!(absolute("super::Y", "http/bots/mod.rs").unwrap(), ["http", "Y"]);
    let files: BTreeSet<String> =
        ["store/mod.rs", "store/messages.rs", "lib.rs"].iter().map(|s| s.to_string()).collect();
    assert_eq!(file_for(&["store".into(), "messages".into(), "find".into()], &files).unwrap(), "store/messages.rs");
    assert_eq!(file_for(&["store".into(), "Db".into()], &files).unwrap(), "store/mod.rs");
    let _ = PathBuf::new();
}
