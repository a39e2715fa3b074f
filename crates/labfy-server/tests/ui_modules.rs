//! The UI's ES modules (SPEC U9) fit together: every name a module imports
//! from another is exported there, and no module imports itself or one it
//! is imported by through the views (a view reaches another only through
//! `page.js`'s router). A broken import stops the whole page in the
//! browser; here it fails by name. (What a module uses without importing
//! is found by the browser scenarios, which fail on any page error.)

#![allow(clippy::expect_used)] // tests fail loudly by design

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.js` of `assets/` (the vendored library aside): name → text.
fn modules() -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("assets/") {
        let path = entry.expect("an entry").path();
        if path.extension().is_some_and(|e| e == "js") {
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            out.insert(name, std::fs::read_to_string(&path).expect("a module"));
        }
    }
    out
}

/// `import { a, b } from './m.js';` lines: (module, names).
fn imports(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("import { ") else { continue };
        let Some((names, from)) = rest.split_once(" } from './") else { continue };
        let module = from.trim_end_matches("';").to_owned();
        out.push((module, names.split(", ").map(str::to_owned).collect()));
    }
    out
}

/// Names a module exports (`export function f`, `export const X`, …).
fn exports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("export ") else { continue };
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        for kind in ["function ", "const ", "let ", "class "] {
            if let Some(name) = rest.strip_prefix(kind) {
                let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$')).unwrap_or(name.len());
                out.insert(name[..end].to_owned());
            }
        }
    }
    out
}

#[test]
fn every_import_is_exported_by_its_module() {
    let all = modules();
    assert!(all.contains_key("app.js") && all.contains_key("page.js") && all.len() >= 15, "{:?}", all.keys());
    let mut problems = Vec::new();
    for (name, text) in &all {
        for (from, names) in imports(text) {
            let Some(source) = all.get(&from) else {
                problems.push(format!("{name} imports from {from}, which does not exist"));
                continue;
            };
            let offered = exports(source);
            for n in names {
                if !offered.contains(&n) {
                    problems.push(format!("{name} imports {n} from {from}, which does not export it"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn views_lead_to_each_other_only_through_the_router() {
    let all = modules();
    let views = ["overview.js", "cases.js", "lists.js", "reader.js", "node.js", "provenance.js"];
    for view in views {
        for (from, _) in imports(&all[view]) {
            assert!(!views.contains(&from.as_str()) || from == "lists.js", "{view} imports the view {from}");
            assert_ne!(from, "app.js", "{view} imports app.js");
        }
    }
    // The one view others import: `lists.js`, for the lists' vocabulary
    // (LISTS, RELATION_KINDS, listHref) the overview and the node view link
    // with; it imports no view.
    assert!(imports(&all["overview.js"]).iter().any(|(m, _)| m == "lists.js"));
    assert!(imports(&all["lists.js"]).iter().all(|(m, _)| !views.contains(&m.as_str())));
}
