//! Full-text search's ranking (SPEC C2: search p50 ≤ 15 ms, p99 ≤ 50 ms at
//! 1,000,000 items). FTS5 finds the matches; the score is computed here.
//!
//! Why not FTS5's own `bm25()`: before scoring the first row it counts, for
//! every word of the query, every document of the whole index holding it
//! (`xQueryPhrase`), on every query. At 1,000,000 items a domain name's
//! `example` is in 655,000 documents (37 ms to count) and a digit such as
//! `6` in 404,000 (23 ms): an ordinary name cost 50–80 ms in counting alone.
//! Here each word's document frequency is counted once per process and kept
//! ([`document_frequency`]; past 20,000 holders, estimated from the first
//! 20,000), and the BM25 formula (FTS5's constants: k1 1.2,
//! b 0.75, both columns weighing the same) is applied to the candidates' own
//! text, tokenized like the index does it ([`fold`]).
//!
//! Two approximations, both on the ranking only (which items match never
//! depends on them): the average document length is the candidates' own
//! (FTS5 uses the whole index's), and a piece is scored on its first
//! [`SCORED_CHARS`] characters (a 1 MB extracted PDF is not read whole to
//! rank it).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use rusqlite::{Connection, params};
use unicode_normalization::UnicodeNormalization;

use crate::error::Result;

/// Private-use character opening a match in a search snippet.
pub const SNIPPET_OPEN: char = '\u{E000}';
/// Private-use character closing a match in a search snippet.
pub const SNIPPET_CLOSE: char = '\u{E001}';

/// Characters of a piece's content read to score it.
pub const SCORED_CHARS: u32 = 20_000;

const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Holders of a word read to count it; past that, its frequency is
/// estimated from the sample ([`document_frequency`]).
const DF_SAMPLE: u64 = 20_000;
/// Entries kept in the document-frequency cache before it starts afresh.
const DF_CACHE_MAX: usize = 50_000;

/// One word of a query, folded; the last one may be typed as a prefix.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct QueryTerm {
    pub folded: String,
    pub prefix: bool,
}

impl QueryTerm {
    pub fn new(word: &str, prefix: bool) -> Self {
        Self { folded: fold(word), prefix }
    }

    /// The term as an FTS5 expression (quoted: an operator is a word).
    pub fn expression(&self) -> String {
        if self.prefix { format!("\"{}\"*", self.folded) } else { format!("\"{}\"", self.folded) }
    }

    fn matches(&self, token: &str) -> bool {
        if self.prefix { token.starts_with(&self.folded) } else { token == self.folded }
    }
}

/// A word as the index holds it: lower case, diacritics removed (the FTS5
/// tokenizer `unicode61 remove_diacritics 2`: « Réunion » → « reunion »).
pub fn fold(word: &str) -> String {
    if word.is_ascii() {
        return word.to_ascii_lowercase();
    }
    word.chars()
        .flat_map(char::to_lowercase)
        .nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .collect()
}

/// [`fold`] into `buf` (cleared first), sparing an allocation for ASCII.
fn fold_into(raw: &str, buf: &mut String) {
    buf.clear();
    if raw.is_ascii() {
        buf.extend(raw.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        buf.push_str(&fold(raw));
    }
}

/// Splits `text` into the index's tokens (runs of letters and digits),
/// folded, calling `each` with every one; returns how many there were.
fn for_each_token(text: &str, buf: &mut String, mut each: impl FnMut(&str)) -> usize {
    let mut n = 0;
    for raw in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        fold_into(raw, buf);
        each(buf);
        n += 1;
    }
    n
}

/// A candidate: its rowid, title and (the start of its) content.
pub(crate) struct Candidate {
    pub rowid: i64,
    pub title: String,
    pub content: String,
}

/// BM25 scores of `docs` (higher is better) for `terms`, each weighed by its
/// `idf`. Every candidate matched every term, so the scores only order them.
pub(crate) fn scores(terms: &[QueryTerm], idf: &[f64], docs: &[Candidate]) -> Vec<(i64, f64)> {
    let mut buf = String::new();
    let mut counted: Vec<(i64, usize, Vec<u32>)> = Vec::with_capacity(docs.len());
    for doc in docs {
        let mut tf = vec![0u32; terms.len()];
        let mut tally = |token: &str| {
            for (i, t) in terms.iter().enumerate() {
                if t.matches(token) {
                    tf[i] += 1;
                }
            }
        };
        let len = for_each_token(&doc.title, &mut buf, &mut tally) + for_each_token(&doc.content, &mut buf, &mut tally);
        counted.push((doc.rowid, len, tf));
    }
    let avg = if counted.is_empty() {
        1.0
    } else {
        (counted.iter().map(|(_, len, _)| *len as f64).sum::<f64>() / counted.len() as f64).max(1.0)
    };
    counted
        .into_iter()
        .map(|(rowid, len, tf)| {
            let norm = K1 * (1.0 - B + B * len as f64 / avg);
            let score = tf
                .iter()
                .zip(idf)
                .map(|(&f, &w)| {
                    let f = f64::from(f);
                    w * f * (K1 + 1.0) / (f + norm)
                })
                .sum();
            (rowid, score)
        })
        .collect()
}

/// Tokens a snippet holds (FTS5's `snippet(…, 24)` for the search hits).
pub const SNIPPET_TOKENS: usize = 24;

/// A snippet of `text` around the query's words: the window of
/// [`SNIPPET_TOKENS`] tokens holding the most distinct words (then the most
/// matches; the first such), each match between [`SNIPPET_OPEN`]
/// and [`SNIPPET_CLOSE`], `…` where the text goes on. `None` when no
/// word of the query is in `text`. The stored text holds no marker (they
/// are replaced at storage), so only matches are marked.
pub(crate) fn snippet(terms: &[QueryTerm], text: &str) -> Option<String> {
    // Tokens as byte ranges, with the term each matches.
    let mut tokens: Vec<(usize, usize, Option<usize>)> = Vec::new();
    let mut start = None;
    let mut buf = String::new();
    let mut close = |from: usize, to: usize, tokens: &mut Vec<(usize, usize, Option<usize>)>| {
        fold_into(&text[from..to], &mut buf);
        tokens.push((from, to, terms.iter().position(|t| t.matches(&buf))));
    };
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(from)) => {
                close(from, i, &mut tokens);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        close(from, text.len(), &mut tokens);
    }
    let matched: Vec<usize> = tokens.iter().enumerate().filter(|(_, t)| t.2.is_some()).map(|(i, _)| i).collect();
    if matched.is_empty() {
        return None;
    }
    // Windows starting a few tokens before each match, scored.
    let lead = 4;
    let mut best: Option<(usize, usize, usize)> = None; // (distinct, matches, start)
    for &m in &matched {
        // A few tokens before the match; earlier when the text ends before
        // the window would (a short text is shown whole).
        let from = m.saturating_sub(lead).min(tokens.len().saturating_sub(SNIPPET_TOKENS));
        let to = (from + SNIPPET_TOKENS).min(tokens.len());
        let mut seen = vec![false; terms.len()];
        let mut count = 0;
        for t in &tokens[from..to] {
            if let Some(k) = t.2 {
                seen[k] = true;
                count += 1;
            }
        }
        let distinct = seen.iter().filter(|s| **s).count();
        if best.is_none_or(|(d, c, _)| (distinct, count) > (d, c)) {
            best = Some((distinct, count, from));
        }
    }
    let (_, _, from) = best?;
    let to = (from + SNIPPET_TOKENS).min(tokens.len());
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    // From the text's start when the window is there (leading punctuation
    // kept), to its end likewise.
    let mut at = if from == 0 { 0 } else { tokens[from].0 };
    for &(begin, end, term) in &tokens[from..to] {
        out.push_str(&text[at..begin]);
        if term.is_some() {
            out.push(SNIPPET_OPEN);
            out.push_str(&text[begin..end]);
            out.push(SNIPPET_CLOSE);
        } else {
            out.push_str(&text[begin..end]);
        }
        at = end;
    }
    if to < tokens.len() {
        out.push('…');
    } else {
        out.push_str(&text[at..]);
    }
    Some(out)
}

/// FTS5's inverse document frequency: ln((N − n + ½) / (n + ½)), and a
/// floor for words in more than half of the documents.
pub(crate) fn idf(documents: u64, holding: u64) -> f64 {
    let (n, df) = (documents.max(holding) as f64, holding as f64);
    let v = ((n - df + 0.5) / (df + 0.5)).ln();
    if v <= 0.0 { 1e-6 } else { v }
}

type DfKey = (String, String);
static DF_CACHE: OnceLock<Mutex<HashMap<DfKey, (u64, i64)>>> = OnceLock::new();

/// How many of the index's documents hold `term` (all investigations, as
/// FTS5's bm25 counts; estimated past [`DF_SAMPLE`]), counted once per
/// database file and process, and
/// again when the evidence has grown past a twentieth since (`generation`:
/// the newest evidence row) or the file was replaced by an older one.
/// An in-memory database is counted every time.
pub(crate) fn document_frequency(conn: &Connection, term: &QueryTerm, generation: i64) -> Result<u64> {
    let path = conn.path().filter(|p| !p.is_empty()).map(str::to_owned);
    let expr = term.expression();
    if let Some(path) = &path {
        let cache = DF_CACHE.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&(df, at)) = cache.get(&(path.clone(), expr.clone())) {
            if generation >= at && generation <= at + (at / 20).max(64) {
                return Ok(df);
            }
        }
    }
    let df = count_holders(conn, &expr, generation, DF_SAMPLE)?;
    if let Some(path) = path {
        let mut cache = DF_CACHE.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= DF_CACHE_MAX {
            cache.clear();
        }
        cache.insert((path, expr), (df, generation));
    }
    Ok(df)
}

/// The first `sample` holders of `expr`, oldest first: all of them for a
/// word rarer than that (exact), else an estimate from how far into the
/// rowids (up to `generation`, the newest) the sample reached: a word in
/// 655,000 of 1,000,000 documents is not read whole to weigh it ~0.6.
fn count_holders(conn: &Connection, expr: &str, generation: i64, sample: u64) -> Result<u64> {
    let (seen, reached): (i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT count(*), max(rowid) FROM
               (SELECT rowid FROM evidence_fts WHERE evidence_fts MATCH ?1 ORDER BY rowid LIMIT ?2)",
        )?
        .query_row(params![expr, sample], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let seen = u64::try_from(seen).unwrap_or(0);
    Ok(match reached {
        Some(at) if seen >= sample && at > 0 => {
            ((seen as f64) * (generation.max(at) as f64) / (at as f64)).round() as u64
        }
        _ => seen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_like_the_index() {
        assert_eq!(fold("Réunion"), "reunion");
        assert_eq!(fold("ÉLODIE"), "elodie");
        assert_eq!(fold("Garonne"), "garonne");
        assert_eq!(fold("Ærø"), "ærø", "no decomposition: kept, as unicode61 keeps it");
        let mut seen = Vec::new();
        let n = for_each_token("Réunion à LYON-3, n°12", &mut String::new(), |t| seen.push(t.to_owned()));
        assert_eq!(seen, ["reunion", "a", "lyon", "3", "n", "12"]);
        assert_eq!(n, 6);
    }

    #[test]
    fn scores_favour_frequent_rare_words_in_short_documents() {
        let doc = |rowid, title: &str, content: &str| Candidate { rowid, title: title.into(), content: content.into() };
        let terms = [QueryTerm::new("Quillon", false), QueryTerm::new("sas", false)];
        let weights = [idf(1_000_000, 40), idf(1_000_000, 500_000)];
        assert!(weights[0] > 10.0 * weights[1]);
        let docs = [
            doc(1, "Note", "Quillon SAS, une longue note sur bien d'autres choses encore et encore et encore"),
            doc(2, "Quillon", "Quillon SAS"),
            doc(3, "SAS", "SAS SAS SAS Quillon"),
        ];
        let s: HashMap<i64, f64> = scores(&terms, &weights, &docs).into_iter().collect();
        assert!(s[&2] > s[&1], "twice the rare word, shorter: {s:?}");
        assert!(s[&2] > s[&3], "the rare word weighs more than the common one: {s:?}");
        let typed = [QueryTerm::new("Quil", true)];
        let s = scores(&typed, &[1.0], &docs);
        assert!(s.iter().all(|(_, v)| *v > 0.0), "a prefix counts its completions: {s:?}");
        assert_eq!(idf(10, 10), 1e-6, "a word everywhere weighs (almost) nothing");
    }

    #[test]
    fn snippets_mark_the_matches_in_the_best_window() {
        let terms = [QueryTerm::new("Quillon", false), QueryTerm::new("vire", true)];
        let text = format!(
            "{} Le virement de Quillon SAS, reçu à Lyon. {}",
            "Début sans rapport. ".repeat(10),
            "Fin. ".repeat(30)
        );
        let s = snippet(&terms, &text).unwrap();
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("\u{e000}virement\u{e001} de \u{e000}Quillon\u{e001} SAS, reçu"), "{s}");
        assert_eq!(s.matches(SNIPPET_OPEN).count(), 2);
        let short = snippet(&[QueryTerm::new("lyon", false)], "Réunion à Lyon").unwrap();
        assert_eq!(short, "Réunion à \u{e000}Lyon\u{e001}", "the whole text, nothing cut");
        assert_eq!(snippet(&terms, "rien à voir"), None);
        assert_eq!(snippet(&[QueryTerm::new("reunion", false)], "RÉUNION.").unwrap(), "\u{e000}RÉUNION\u{e001}.");
    }

    #[test]
    fn document_frequencies_are_exact_below_the_sample_and_estimated_past_it() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = crate::Store::open(dir.path()).unwrap();
        let (ws, inv) = store.create_real_workspace("Fréquences", "analyst").unwrap();
        for n in 0..40 {
            let content = if n % 2 == 0 { format!("Réunion à Lyon {n}") } else { format!("Réunion à Paris {n}") };
            let note = crate::NewNote { title: format!("Note {n}"), content, source: None, dated_at: None };
            store.add_note(ws.id(), &inv, &note, "analyst").unwrap();
        }
        let conn = &store.conn;
        let generation: i64 = conn.query_row("SELECT max(seq) FROM evidence", [], |r| r.get(0)).unwrap();
        let lyon = QueryTerm::new("LYON", false).expression();
        assert_eq!(count_holders(conn, &lyon, generation, 100).unwrap(), 20, "exact below the sample");
        let estimate = count_holders(conn, &lyon, generation, 8).unwrap();
        assert!((16..=24).contains(&estimate), "estimated from 8 of 20: {estimate}");
        assert_eq!(count_holders(conn, &QueryTerm::new("reunion", false).expression(), generation, 8).unwrap(), 40);
        assert_eq!(count_holders(conn, &QueryTerm::new("Marseille", false).expression(), generation, 8).unwrap(), 0);
        // Cached per file: one more holder is not counted again; 70 more (past
        // the tolerance of a twentieth, at least 64 rows) are.
        let term = QueryTerm::new("Réunion", false);
        assert_eq!(document_frequency(&store.conn, &term, generation).unwrap(), 40);
        let add = |store: &mut crate::Store, n: usize| {
            for i in 0..n {
                let note = crate::NewNote {
                    title: format!("Plus {i}"),
                    content: "Réunion".into(),
                    source: None,
                    dated_at: None,
                };
                store.add_note(ws.id(), &inv, &note, "analyst").unwrap();
            }
            store.conn.query_row("SELECT max(seq) FROM evidence", [], |r| r.get::<_, i64>(0)).unwrap()
        };
        let g = add(&mut store, 1);
        assert_eq!(document_frequency(&store.conn, &term, g).unwrap(), 40, "within the tolerance: cached");
        let g = add(&mut store, 70);
        assert_eq!(document_frequency(&store.conn, &term, g).unwrap(), 111, "past it: counted again");
    }
}
