//! People and organisations measured (SPEC A2): the labelled corpus of
//! `corpus/` (see its README) — each person and organisation marked by hand
//! — against what `extract` finds in the same text without the marks:
//! precision and recall per kind, exact spans. Printed, and held to the
//! issue's goal (precision ≥ 0.9, recall ≥ 0.8).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::collections::BTreeSet;
use std::path::Path;

use labfy_extract::{Kind, extract};

/// The text without its marks, and the marked mentions (kind, start, length
/// in characters).
fn unmark(marked: &str) -> (String, BTreeSet<(Kind, usize, usize)>) {
    let mut text = String::new();
    let mut gold = BTreeSet::new();
    let mut rest = marked;
    while let Some(open) = rest.find("[[") {
        text.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after.find("]]").expect("a mark is closed");
        let (tag, name) = after[..close].split_once('|').expect("a mark is `[[p|name]]` or `[[o|name]]`");
        let kind = match tag {
            "p" => Kind::Person,
            "o" => Kind::Organisation,
            other => panic!("unknown mark `{other}`"),
        };
        gold.insert((kind, text.chars().count(), name.chars().count()));
        text.push_str(name);
        rest = &after[close + 2..];
    }
    text.push_str(rest);
    (text, gold)
}

#[test]
fn people_and_organisations_are_found_with_precision_and_recall() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus is in {}", dir.display());
    let mut scores = std::collections::BTreeMap::<&str, (usize, usize, usize)>::new(); // hits, found, marked
    let mut misses = Vec::new();
    let mut wrong = Vec::new();
    for f in &files {
        let (text, gold) = unmark(&std::fs::read_to_string(f).unwrap());
        let chars: Vec<char> = text.chars().collect();
        let span = |s: usize, l: usize| chars[s..s + l].iter().collect::<String>();
        let got: BTreeSet<(Kind, usize, usize)> = extract(&text)
            .mentions
            .into_iter()
            .filter(|m| !m.kind.is_selector())
            .map(|m| (m.kind, m.start, m.len))
            .collect();
        for kind in [Kind::Person, Kind::Organisation] {
            let g: BTreeSet<_> = gold.iter().filter(|m| m.0 == kind).collect();
            let o: BTreeSet<_> = got.iter().filter(|m| m.0 == kind).collect();
            let e = scores.entry(kind.as_str()).or_default();
            e.0 += g.intersection(&o).count();
            e.1 += o.len();
            e.2 += g.len();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            misses.extend(g.difference(&o).map(|m| format!("{name}: {} « {} »", kind.as_str(), span(m.1, m.2))));
            wrong.extend(o.difference(&g).map(|m| format!("{name}: {} « {} »", kind.as_str(), span(m.1, m.2))));
        }
    }
    println!("{:<14} {:>7} {:>6} {:>6} {:>10} {:>7}", "kind", "marked", "found", "right", "precision", "recall");
    let mut short = Vec::new();
    for (kind, (hits, found, marked)) in &scores {
        let p = *hits as f64 / (*found).max(1) as f64;
        let r = *hits as f64 / (*marked).max(1) as f64;
        println!("{kind:<14} {marked:>7} {found:>6} {hits:>6} {p:>10.3} {r:>7.3}");
        if p < 0.9 || r < 0.8 {
            short.push(format!("{kind}: precision {p:.3}, recall {r:.3}"));
        }
    }
    println!("missed ({}):\n  {}", misses.len(), misses.join("\n  "));
    println!("wrong ({}):\n  {}", wrong.len(), wrong.join("\n  "));
    assert!(short.is_empty(), "below the goal: {short:?}");
}
