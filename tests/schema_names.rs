//! Every schema of the OpenAPI document has a name of its own. utoipa names a schema after its Rust type
//! (or its `#[schema(as = …)]`), and when two types share a name the document keeps one of them for both:
//! a generated client then sends the wrong body (the link-message `Link` once stood in for the request of
//! `POST /accounts/link`). This test reads `host/src`, names each `ToSchema` type as utoipa would, and
//! fails on any name given twice, printing where.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("host/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The schema names declared in `source`: `(name, line)` of each type deriving `ToSchema`, named by its
/// `#[schema(as = …)]` when it has one. Generic types are left out (utoipa names each use of them).
fn schema_names(source: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut names = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        if !(line.starts_with("#[derive(") && line.contains("ToSchema")) {
            continue;
        }
        let mut renamed = None;
        for next in lines.iter().skip(i + 1).map(|l| l.trim()) {
            if let Some(rest) = next.strip_prefix("#[schema(as = ") {
                renamed = rest.split([',', ')']).next().map(|n| n.trim().to_string());
            }
            // The item itself, after its attributes and doc comments, whatever its visibility.
            let item = match next.strip_prefix("pub(") {
                Some(rest) => rest.split_once(") ").map_or(rest, |(_, item)| item),
                None => next.strip_prefix("pub ").unwrap_or(next),
            };
            let Some(rest) = item.strip_prefix("struct ").or_else(|| item.strip_prefix("enum ")) else {
                assert!(next.starts_with("#[") || next.starts_with("//"), "a ToSchema derive above `{next}`?");
                continue;
            };
            let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let generic = rest[ident.len()..].starts_with('<');
            if !generic {
                names.push((renamed.unwrap_or(ident), i + 1));
            }
            break;
        }
    }
    names
}

#[test]
fn every_schema_of_the_api_document_has_a_name_of_its_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("a source file is readable");
        let shown = file.strip_prefix(root.parent().expect("host/")).unwrap_or(file).display().to_string();
        for (name, line) in schema_names(&source) {
            seen.entry(name).or_default().push(format!("{shown}:{line}"));
        }
    }
    assert!(seen.len() > 50, "the scan found only {} schema names: it no longer reads the source right", seen.len());
    let twice: Vec<String> = seen
        .iter()
        .filter(|(_, places)| places.len() > 1)
        .map(|(name, places)| format!("{name}: {}", places.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "schema names given to more than one type (rename one with #[schema(as = …)]):\n{}",
        twice.join("\n")
    );
}

#[test]
fn the_scan_names_types_as_utoipa_does() {
    let source = "#[derive(Deserialize, ToSchema)]\n#[schema(as = AccountLink)]\nstruct Link {}\n\
                  #[derive(Serialize, ToSchema)]\npub(super) struct Link {}\n#[derive(ToSchema)]\npub struct List<T> {}\n";
    assert_eq!(schema_names(source), vec![("AccountLink".to_string(), 1), ("Link".to_string(), 4)]);
}
