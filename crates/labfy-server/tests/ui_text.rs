//! The UI's words (SPEC U4): French and English hold the same keys, none
//! twice, and every key the code asks for exists — a label missing in one
//! language fails here, not in front of an analyst.

use std::collections::{BTreeMap, BTreeSet};

const APP_JS: &str = include_str!("../assets/app.js");
const GRAPH_JS: &str = include_str!("../assets/graph.js");
const I18N_JS: &str = include_str!("../assets/i18n.js");
const DOM_JS: &str = include_str!("../assets/dom.js");
const API_JS: &str = include_str!("../assets/api.js");
const RESOURCES_JS: &str = include_str!("../assets/resources.js");
const AGENT_JS: &str = include_str!("../assets/agent.js");
const EGRESS_JS: &str = include_str!("../assets/egress.js");
const VIEWS_JS: [&str; 8] = [
    include_str!("../assets/page.js"),
    include_str!("../assets/overview.js"),
    include_str!("../assets/cases.js"),
    include_str!("../assets/lists.js"),
    include_str!("../assets/forms.js"),
    include_str!("../assets/reader.js"),
    include_str!("../assets/node.js"),
    include_str!("../assets/provenance.js"),
];
const INDEX_HTML: &str = include_str!("../assets/index.html");

/// The keys of one language block of `I18N` in i18n.js (`  fr: {` … `  },`), with how
/// many times each is written.
fn keys(lang: &str) -> BTreeMap<String, usize> {
    let start = I18N_JS.find(&format!("\n  {lang}: {{\n")).unwrap_or_else(|| panic!("no `{lang}` block in I18N"));
    let body = &I18N_JS[start..];
    let end = body.find("\n  },\n").unwrap_or_else(|| panic!("the `{lang}` block does not end"));
    let mut out = BTreeMap::new();
    for line in body[..end].lines().skip(2) {
        // `    key: '…',` or `    'key-with-dash': '…',` at four spaces.
        let Some(rest) = line.strip_prefix("    ") else { continue };
        if rest.starts_with(' ') {
            continue; // a continued value
        }
        // One key, or several on a line (`a_one: '…', a_other: '…'`).
        for (i, _) in rest.match_indices(": '") {
            let head = &rest[..i];
            let key = head.rsplit(", ").next().unwrap_or_default().trim_matches('\'');
            let starts_entry =
                head.len() == key.len() || head.ends_with(&format!(", {key}")) || head == format!("'{key}'");
            if starts_entry && !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                *out.entry(key.to_owned()).or_insert(0) += 1;
            }
        }
    }
    assert!(out.len() > 100, "{lang}: only {} keys read; the block's layout changed", out.len());
    out
}

/// Keys passed as a literal to `call(` in `src`.
fn literal_keys(src: &str, call: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in src.match_indices(call) {
        // Only whole names: `t(` not `set(`.
        if src[..i].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            continue;
        }
        let rest = &src[i + call.len()..];
        if let Some(quoted) = rest.strip_prefix('\'') {
            let key = quoted.split('\'').next().unwrap_or_default();
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                out.insert(key.to_owned());
            }
        }
    }
    out
}

#[test]
fn french_and_english_hold_the_same_keys_once_each() {
    let fr = keys("fr");
    let en = keys("en");
    let twice: Vec<_> = fr.iter().chain(en.iter()).filter(|(_, n)| **n > 1).map(|(k, _)| k).collect();
    assert!(twice.is_empty(), "keys written twice (the second silently wins): {twice:?}");
    let fr: BTreeSet<_> = fr.into_keys().collect();
    let en: BTreeSet<_> = en.into_keys().collect();
    let only_fr: Vec<_> = fr.difference(&en).collect();
    let only_en: Vec<_> = en.difference(&fr).collect();
    assert!(
        only_fr.is_empty() && only_en.is_empty(),
        "untranslated: French only {only_fr:?}; English only {only_en:?}"
    );
}

#[test]
fn every_key_the_code_asks_for_exists() {
    let fr: BTreeSet<String> = keys("fr").into_keys().collect();
    let mut missing = Vec::new();
    for src in
        [APP_JS, GRAPH_JS, DOM_JS, API_JS, RESOURCES_JS, AGENT_JS, EGRESS_JS, I18N_JS].into_iter().chain(VIEWS_JS)
    {
        for key in literal_keys(src, "t(") {
            if !fr.contains(&key) {
                missing.push(key);
            }
        }
        for key in literal_keys(src, "tn(") {
            for form in ["one", "other"] {
                let k = format!("{key}_{form}");
                if !fr.contains(&k) {
                    missing.push(k);
                }
            }
        }
    }
    for attr in ["data-i18n=\"", "data-i18n-placeholder=\"", "data-i18n-aria-label=\""] {
        for (i, _) in INDEX_HTML.match_indices(attr) {
            let key = INDEX_HTML[i + attr.len()..].split('"').next().unwrap_or_default().to_owned();
            if !fr.contains(&key) {
                missing.push(key);
            }
        }
    }
    assert!(missing.is_empty(), "keys asked for and not defined: {missing:?}");
    // The check reads what it claims to: some keys of each file are found.
    assert!(literal_keys(GRAPH_JS, "t(").contains("graph_title"));
    assert!(VIEWS_JS.iter().any(|v| literal_keys(v, "t(").contains("list_next")));
}
