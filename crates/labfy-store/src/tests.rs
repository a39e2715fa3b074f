//! Store tests: migrations, refusals at open, SPECIMEN determinism, read
//! models and their bounds, commands and the append-only rules.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::Connection;
use tempfile::TempDir;

use crate::specimen::{self, SpecimenOutcome, SpecimenSpec};
use crate::*;

/// Fails unless every derived figure equals a fresh count of its source rows.
pub(crate) fn assert_derived_consistent(conn: &Connection) {
    let wrong_mentions: i64 = conn
        .query_row(
            "SELECT count(*) FROM entities n WHERE mention_count <>
               (SELECT count(*) FROM relations r WHERE r.dst = 'entity:' || n.id AND r.kind = 'mentions')",
            [],
            |x| x.get(0),
        )
        .unwrap();
    assert_eq!(wrong_mentions, 0, "entities.mention_count out of step");
    let wrong_counts: i64 = conn
        .query_row(
            "SELECT count(*) FROM investigations i WHERE
               evidence_count <> (SELECT count(*) FROM evidence WHERE investigation_id = i.id)
               OR relation_count <> (SELECT count(*) FROM relations WHERE investigation_id = i.id)
               OR provenance_count <> (SELECT count(*) FROM provenance WHERE investigation_id = i.id)",
            [],
            |x| x.get(0),
        )
        .unwrap();
    assert_eq!(wrong_counts, 0, "investigation counts out of step");
}

pub(crate) fn specimen(dir: &TempDir, seed: u64, size: u64) -> (Store, uuid::Uuid, ObjectRef) {
    let mut store = Store::open(dir.path()).unwrap();
    let outcome = specimen::generate(&mut store, SpecimenSpec { seed, size }, &mut |_, _| {}).unwrap();
    let SpecimenOutcome::Created { workspace, investigation, .. } = outcome else { panic!("not created: {outcome:?}") };
    (store, workspace.id(), investigation)
}

/// Every row of every content table, in a stable order, as text.
fn dump(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for (table, order) in [
        ("workspaces", "id"),
        ("investigations", "id"),
        ("evidence", "seq"),
        ("entities", "id"),
        ("relations", "id"),
        ("provenance", "id"),
        ("provenance_inputs", "provenance_id, position"),
    ] {
        let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY {order}")).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let mut cols = Vec::new();
                for i in 0..n {
                    cols.push(format!("{:?}", r.get_ref(i)?));
                }
                Ok(format!("{table}|{}", cols.join("|")))
            })
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

#[test]
fn fresh_open_migrates_to_latest_with_wal_and_foreign_keys() {
    let dir = TempDir::new().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let c = store.conn();
    let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = c.query_row("PRAGMA foreign_keys", [], |r| r.get(0)).unwrap();
    assert_eq!(fk, 1);
    let app: i32 = c.query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
    assert_eq!(app, APPLICATION_ID);
    drop(store);
    // Reopening is a no-op migration.
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    store.integrity_check().unwrap();
}

#[test]
fn every_migration_step_applies_on_top_of_the_previous_one() {
    // Walk the versions one by one the way an upgrade would.
    let dir = TempDir::new().unwrap();
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
    for (i, sql) in migrations::MIGRATIONS.iter().enumerate() {
        conn.execute_batch(sql).unwrap();
        conn.pragma_update(None, "user_version", i as i64 + 1).unwrap();
    }
    drop(conn);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let dir = TempDir::new().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    drop(conn);
    let err = Store::open(dir.path()).err().unwrap();
    assert!(matches!(err, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1), "{err}");
    assert_eq!(err.kind(), labfy_core::ErrorKind::Storage);
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, SCHEMA_VERSION + 1);
}

#[test]
fn a_foreign_sqlite_file_is_refused_and_left_untouched() {
    let dir = TempDir::new().unwrap();
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    conn.execute_batch("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('tarte');").unwrap();
    drop(conn);
    let err = Store::open(dir.path()).err().unwrap();
    assert!(matches!(err, StoreError::Foreign { found: 0, .. }), "{err}");
    let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
    let name: String = conn.query_row("SELECT name FROM recipes", [], |r| r.get(0)).unwrap();
    assert_eq!(name, "tarte");
    let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, 0);
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_untouched() {
    let dir = TempDir::new().unwrap();
    let garbage = b"this is not a database, it is a shopping list\n".repeat(200);
    std::fs::write(dir.path().join(DB_FILE), &garbage).unwrap();
    let err = Store::open(dir.path()).err().unwrap();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err}");
    assert_eq!(std::fs::read(dir.path().join(DB_FILE)).unwrap(), garbage);
}

#[test]
fn read_only_store_requires_a_migrated_file() {
    let dir = TempDir::new().unwrap();
    assert!(matches!(ReadOnlyStore::open(dir.path()), Err(StoreError::NotFound(_))));
    let (_store, ws, _inv) = specimen(&dir, 3, 20);
    let ro = ReadOnlyStore::open(dir.path()).unwrap();
    assert_eq!(ro.reads().workspace(ws).unwrap().class, WorkspaceClass::Specimen);
}

#[test]
fn specimen_is_deterministic_for_a_seed_and_differs_across_seeds() {
    let (a, b, c) = (TempDir::new().unwrap(), TempDir::new().unwrap(), TempDir::new().unwrap());
    let (sa, wa, _) = specimen(&a, 42, 300);
    let (sb, wb, _) = specimen(&b, 42, 300);
    let (sc, wc, _) = specimen(&c, 43, 300);
    assert_eq!(wa, wb);
    assert_ne!(wa, wc);
    assert_eq!(wa, specimen::workspace_id_for_seed(42));
    let (da, db, dc) = (dump(sa.conn()), dump(sb.conn()), dump(sc.conn()));
    assert!(da.len() > 300 * 4, "suspiciously small dump: {}", da.len());
    assert!(da == db, "same seed gave different content");
    assert_ne!(da, dc);
}

#[test]
fn specimen_has_the_promised_shape() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 1, 500);
    let r = store.reads();
    let o = r.overview(ws, &inv).unwrap();
    assert_eq!(o.counts.evidence, 500);
    assert_eq!(o.workspace.class, WorkspaceClass::Specimen);
    let kinds: Vec<_> = o.entity_kinds.iter().map(|k| k.kind.as_str()).collect();
    for k in ["person", "organisation", "domain", "email", "location", "phone"] {
        assert!(kinds.contains(&k), "missing entity kind {k}: {kinds:?}");
    }
    assert!(o.counts.relations > 500 * 2);
    assert_eq!(o.jobs[0].status, "SUCCEEDED");
    assert!(o.top_entities[0].evidence_count > 10, "no hub entity");
    assert_derived_consistent(store.conn());
    // SHA-256 of every evidence is the hash of its content.
    let bad: i64 =
        store.conn().query_row("SELECT count(*) FROM evidence WHERE length(sha256) <> 64", [], |x| x.get(0)).unwrap();
    assert_eq!(bad, 0);
    let (content, sha): (String, String) = store
        .conn()
        .query_row("SELECT content, sha256 FROM evidence LIMIT 1", [], |x| Ok((x.get(0)?, x.get(1)?)))
        .unwrap();
    assert_eq!(sha256_hex(content.as_bytes()), sha);
    // Derived documents form provenance chains deeper than one step.
    let mut stmt = store
        .conn()
        .prepare("SELECT 'evidence:' || id FROM evidence WHERE title LIKE 'Traduction de : Traduction%' OR title LIKE 'Pièce jointe extraite de : Traduction%' LIMIT 1")
        .unwrap();
    let chained: String = stmt.query_row([], |x| x.get(0)).unwrap();
    let trace = r.provenance_trace(ws, &chained.parse().unwrap(), 8).unwrap();
    assert!(trace.records.iter().any(|rec| rec.depth >= 1), "{trace:?}");
    // Every domain is a reserved example domain.
    let real: i64 = store
        .conn()
        .query_row("SELECT count(*) FROM entities WHERE kind = 'domain' AND name NOT LIKE '%.example'", [], |x| {
            x.get(0)
        })
        .unwrap();
    assert_eq!(real, 0);
}

#[test]
fn specimen_bounds_rerun_and_interrupted_runs() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    for size in [0, specimen::MAX_SPECIMEN_SIZE + 1] {
        let err = specimen::generate(&mut store, SpecimenSpec { seed: 1, size }, &mut |_, _| {}).unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    }
    let one = specimen::generate(&mut store, SpecimenSpec { seed: 9, size: 1 }, &mut |_, _| {}).unwrap();
    assert!(matches!(one, SpecimenOutcome::Created { .. }));
    let again = specimen::generate(&mut store, SpecimenSpec { seed: 9, size: 1 }, &mut |_, _| {}).unwrap();
    assert!(matches!(again, SpecimenOutcome::AlreadyPresent { size: 1, .. }));
    // Simulate a run killed half-way: the workspace stays GENERATING.
    store
        .conn()
        .execute("UPDATE workspaces SET status = 'GENERATING' WHERE id = ?1", [one.workspace().id().to_string()])
        .unwrap();
    let redo = specimen::generate(&mut store, SpecimenSpec { seed: 9, size: 1 }, &mut |_, _| {}).unwrap();
    assert!(matches!(redo, SpecimenOutcome::Created { replaced_incomplete: true, .. }), "{redo:?}");
    let n: i64 = store.conn().query_row("SELECT count(*) FROM evidence", [], |x| x.get(0)).unwrap();
    assert_eq!(n, 1);
}

#[test]
fn progress_is_reported_per_batch_up_to_the_total() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let mut seen = Vec::new();
    let size = specimen::BATCH + 5;
    specimen::generate(&mut store, SpecimenSpec { seed: 5, size }, &mut |d, t| seen.push((d, t))).unwrap();
    assert_eq!(seen, vec![(specimen::BATCH, size), (size, size)]);
}

#[test]
fn search_finds_names_bounds_queries_and_marks_matches() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 1, 400);
    let r = store.reads();
    let top = &r.overview(ws, &inv).unwrap().top_entities[0];
    let res = r.search(ws, &inv, &top.name, 20).unwrap();
    assert!(!res.hits.is_empty(), "no hit for {}", top.name);
    assert!(res.hits.iter().any(|h| h.snippet.contains(SNIPPET_OPEN) && h.snippet.contains(SNIPPET_CLOSE)));
    let hostile = r.search(ws, &inv, "onerror", 5).unwrap();
    assert!(hostile.hits[0].title.contains("forum-echanges.example"));
    // Query syntax is neutralised: FTS operators are just words.
    assert!(r.search(ws, &inv, "\"NEAR( OR * AND", 5).is_ok());
    let at_bound = "a".repeat(MAX_SEARCH_QUERY_CHARS);
    assert!(r.search(ws, &inv, &at_bound, 5).is_ok());
    let over = "a".repeat(MAX_SEARCH_QUERY_CHARS + 1);
    assert!(matches!(r.search(ws, &inv, &over, 5), Err(StoreError::Invalid(_))));
    assert!(matches!(r.search(ws, &inv, " ,;- ", 5), Err(StoreError::Invalid(_))));
    let many = vec!["mot"; MAX_SEARCH_TERMS + 1].join(" ");
    assert!(matches!(r.search(ws, &inv, &many, 5), Err(StoreError::Invalid(_))));
    assert!(matches!(r.search(ws, &inv, "Paris", 0), Err(StoreError::Invalid(_))));
    assert!(matches!(r.search(ws, &inv, "Paris", MAX_SEARCH_LIMIT + 1), Err(StoreError::Invalid(_))));
    let one = r.search(ws, &inv, "Paris", 1).unwrap();
    assert_eq!(one.hits.len(), 1);
    assert!(one.truncated);
}

/// Issue 19 (injection corpus): a document carrying the snippet markers
/// U+E000/U+E001 cannot highlight text of its choosing in search results;
/// they are stored as U+FFFD, same length, and only the match is marked.
#[test]
fn documents_cannot_forge_search_highlights() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Marqueurs", "analyst").unwrap();
    let forged = format!("{SNIPPET_OPEN}Autorisation accordée{SNIPPET_CLOSE} pour la société Quillon.");
    let note = NewNote { title: "Faux surlignage".into(), content: forged.clone(), source: None, dated_at: None };
    let ev = store.add_note(ws.id(), &inv, &note, "analyst").unwrap();
    let r = store.reads();
    let hits = r.search(ws.id(), &inv, "Quillon", 5).unwrap().hits;
    assert_eq!(hits.len(), 1);
    let marked: Vec<&str> =
        hits[0].snippet.split(SNIPPET_OPEN).skip(1).map(|m| m.split(SNIPPET_CLOSE).next().unwrap()).collect();
    assert_eq!(marked, ["Quillon"], "{:?}", hits[0].snippet);
    assert!(hits[0].snippet.contains("\u{FFFD}Autorisation accordée\u{FFFD}"), "{:?}", hits[0].snippet);
    let excerpt = r.excerpt(ws.id(), &ev, 0, 200).unwrap();
    assert_eq!(excerpt.text.chars().count(), forged.chars().count(), "same length: offsets hold");
    assert!(!excerpt.text.contains([SNIPPET_OPEN, SNIPPET_CLOSE]));
}

/// SPEC C2 (search at 1,000,000 items): a query matching more items than the
/// window ranks the most recent of them, says so, and never answers short
/// because another investigation's matches filled the window.
#[test]
fn broad_searches_rank_the_most_recent_matches_and_say_so() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Fenêtre", "analyst").unwrap();
    let ws = ws.id();
    let note = |n: usize| NewNote {
        title: format!("Note {n}"),
        content: format!("Réunion à Lyon numéro {n}"),
        source: None,
        dated_at: None,
    };
    let mut ours = Vec::new();
    for n in 0..8 {
        ours.push(store.add_note(ws, &inv, &note(n), "analyst").unwrap());
    }
    let r = store.reads();
    // Eight matches, a window of five: the three hits are among the five newest.
    let res = r.search_within(ws, &inv, "Lyon", 3, 5).unwrap();
    assert_eq!(res.ranked_among, Some(5));
    assert_eq!(res.hits.len(), 3);
    assert!(res.truncated);
    for hit in &res.hits {
        assert!(ours[3..].contains(&hit.id), "{} is older than the window", hit.id);
    }
    // A window wider than the matches ranks them all, and says nothing.
    let all = r.search_within(ws, &inv, "Lyon", 20, 8).unwrap();
    assert_eq!((all.hits.len(), all.truncated, all.ranked_among), (8, false, None));
    let json = serde_json::to_value(&all).unwrap();
    assert!(json.get("ranked_among").is_none());

    // Six newer matches in another investigation do not count: the window
    // holds this investigation's matches only, all eight ranked.
    let other = store.create_investigation(ws, "Autre", "", "analyst").unwrap();
    for n in 0..6 {
        store.add_note(ws, &other, &note(100 + n), "analyst").unwrap();
    }
    let r = store.reads();
    let res = r.search_within(ws, &inv, "Lyon", 20, 8).unwrap();
    assert_eq!((res.hits.len(), res.truncated, res.ranked_among), (8, false, None));
    assert!(res.hits.iter().all(|h| ours.contains(&h.id)));
    // Typing: hits matched through the last word's prefix only keep their
    // highlighted snippet.
    let typed = r.search_within(ws, &inv, "Réunion Ly", 20, 8).unwrap();
    assert_eq!(typed.hits.len(), 0, "a two-letter last word is matched whole");
    let typed = r.search_within(ws, &inv, "Réunion Lyo", 20, 8).unwrap();
    assert_eq!(typed.hits.len(), 8);
    assert!(typed.hits.iter().all(|h| h.snippet.contains("\u{e000}Lyon\u{e001}")), "{:?}", typed.hits[0].snippet);
    let exact = r.search_within(ws, &inv, "Lyon numéro 3", 20, 8).unwrap();
    assert_eq!(exact.hits.len(), 1);
    assert!(exact.hits[0].snippet.contains("\u{e000}Lyon\u{e001}"), "{}", exact.hits[0].snippet);
}

/// SPEC C2: the last word is a prefix only while it is not a whole word of
/// the index (typing), and the best match comes first (BM25, search.rs).
#[test]
fn a_whole_word_is_searched_whole_and_the_best_match_comes_first() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Typage", "analyst").unwrap();
    let ws = ws.id();
    let mut add = |title: &str, content: &str| {
        let note = NewNote { title: title.into(), content: content.into(), source: None, dated_at: None };
        store.add_note(ws, &inv, &note, "analyst").unwrap()
    };
    let company = add("Quillon SAS", "Quillon SAS, siège à Lyon. Quillon SAS dépose ses comptes.");
    let sasha = add("Courrier", "Sasha écrit à Quillon.");
    let long = add(
        "Revue de presse",
        &format!("{} Quillon SAS est citée une fois dans cette longue revue.", "Actualités diverses. ".repeat(60)),
    );
    let r = store.reads();
    let whole = r.search(ws, &inv, "Quillon SAS", 10).unwrap();
    assert_eq!(
        whole.hits.iter().map(|h| h.id).collect::<Vec<_>>(),
        [company, long],
        "« SAS » does not bring « Sasha »"
    );
    let typed = r.search(ws, &inv, "Quillon Sash", 10).unwrap();
    assert_eq!(typed.hits.iter().map(|h| h.id).collect::<Vec<_>>(), [sasha], "« Sash » is being typed");
    assert!(typed.hits[0].snippet.contains("\u{e000}Sasha\u{e001}"), "{}", typed.hits[0].snippet);
    let accents = r.search(ws, &inv, "SIEGE quillon", 10).unwrap();
    assert_eq!(accents.hits.iter().map(|h| h.id).collect::<Vec<_>>(), [company], "folded like the index");
    // A match past the text a piece is scored on still gets its snippet
    // (FTS5's, for that piece).
    let far = format!("{}Ostrander conclut.", "rien ".repeat(crate::search::SCORED_CHARS as usize / 4));
    let note = NewNote { title: "Long".into(), content: far, source: None, dated_at: None };
    let long_piece = store.add_note(ws, &inv, &note, "analyst").unwrap();
    let r = store.reads();
    let hit = &r.search(ws, &inv, "Ostrander", 5).unwrap().hits[0];
    assert_eq!(hit.id, long_piece);
    assert!(hit.snippet.contains("\u{e000}Ostrander\u{e001}"), "{}", hit.snippet);
}

/// SPEC X1: a file a sandbox run left becomes evidence only when the analyst
/// keeps it — with its bytes checked against the run's report, provenance
/// naming the run and its inputs, once.
#[test]
fn a_run_file_is_kept_once_with_provenance_naming_the_run() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Exécutions", "analyst").unwrap();
    let ws = ws.id();
    let note = NewNote { title: "Liste".into(), content: "alpha\nbeta\nalpha".into(), source: None, dated_at: None };
    let input = store.add_note(ws, &inv, &note, "analyst").unwrap();
    let text = "mot,compte\nalpha,2\nbeta,1\n".to_owned();
    let file = RunFile {
        name: "comptes.csv".into(),
        sha256: crate::primitives::sha256_hex(text.as_bytes()),
        text,
        program: "python3".into(),
        reservation: "sandbox-7".into(),
        result_id: Uuid::new_v4(),
        inputs: vec![input],
    };
    let kept = store.keep_run_file(ws, &inv, &file, "analyst").unwrap();
    assert!(kept.created);
    assert_eq!(store.keep_run_file(ws, &inv, &file, "analyst").unwrap(), KeptFile { created: false, ..kept }, "once");
    // Once even when the file holds the snippet markers (stored as U+FFFD).
    let marked = format!("{SNIPPET_OPEN}faux{SNIPPET_CLOSE}\n");
    let marked = RunFile {
        name: "marques.txt".into(),
        sha256: crate::primitives::sha256_hex(marked.as_bytes()),
        text: marked,
        inputs: vec![],
        ..file.clone()
    };
    let first = store.keep_run_file(ws, &inv, &marked, "analyst").unwrap();
    assert_eq!(store.keep_run_file(ws, &inv, &marked, "analyst").unwrap(), KeptFile { created: false, ..first });
    let r = store.reads();
    let trace = r.provenance_trace(ws, &kept.evidence, 2).unwrap();
    let first = &trace.records[0];
    assert_eq!((first.producer.as_str(), first.activity.as_str()), ("sandbox.exec:python3", "sandbox_run"));
    assert_eq!(first.inputs.iter().map(|i| i.id).collect::<Vec<_>>(), [input]);
    let summary = r.evidence_summary(ws, &kept.evidence).unwrap();
    assert!(
        summary.source.contains("run sandbox-7") && summary.source.contains("/work/comptes.csv"),
        "{}",
        summary.source
    );
    assert_eq!(r.search(ws, &inv, "comptes", 5).unwrap().hits[0].id, kept.evidence, "searchable at once");

    // Bytes that are not the reported file, an empty file, an input of
    // another investigation: refused, nothing stored.
    let before = r.overview(ws, &inv).unwrap().counts.evidence;
    let forged = RunFile { text: "autre chose".into(), ..file.clone() };
    assert!(
        matches!(store.keep_run_file(ws, &inv, &forged, "analyst"), Err(StoreError::Invalid(m)) if m.contains("SHA-256"))
    );
    let empty = RunFile { text: String::new(), sha256: crate::primitives::sha256_hex(b""), ..file.clone() };
    assert!(matches!(store.keep_run_file(ws, &inv, &empty, "analyst"), Err(StoreError::Invalid(_))));
    let other = store.create_investigation(ws, "Autre", "", "analyst").unwrap();
    let elsewhere = store.add_note(ws, &other, &note, "analyst").unwrap();
    let crossed = RunFile { inputs: vec![elsewhere], result_id: Uuid::new_v4(), ..file.clone() };
    assert!(
        matches!(store.keep_run_file(ws, &inv, &crossed, "analyst"), Err(StoreError::Invalid(m)) if m.contains("another investigation"))
    );
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, before);
}

#[test]
fn graph_reads_neighbours_correlations_and_excerpts() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 2, 300);
    let r = store.reads();
    let hub = r.overview(ws, &inv).unwrap().top_entities[0].id;
    let n = r.neighbors(ws, &hub, 5).unwrap();
    assert_eq!(n.neighbors.len(), 5);
    assert!(n.total > 5);
    assert!(n.neighbors.iter().all(|x| x.node.label != x.node.id.to_string()), "unlabelled neighbour");
    assert!(matches!(r.neighbors(ws, &hub, MAX_NEIGHBORS_LIMIT + 1), Err(StoreError::Invalid(_))));
    let node = r.node(ws, &hub).unwrap();
    assert_eq!(node.degree, n.total);
    let corr = r.correlations(ws, &inv, None, 10).unwrap();
    assert!(corr.iter().all(|c| c.evidence_count >= 2 && !c.sample_evidence.is_empty()));
    let ev = corr[0].sample_evidence[0];
    let focused = r.correlations(ws, &inv, Some(&ev), 10).unwrap();
    assert!(focused.iter().all(|c| !c.sample_evidence.contains(&ev)));
    let summary = r.evidence_summary(ws, &ev).unwrap();
    assert!(!summary.entities.is_empty());
    let total = summary.char_len;
    let ex = r.excerpt(ws, &ev, 0, 10).unwrap();
    assert_eq!((ex.length, ex.total_chars, ex.truncated), (10, total, true));
    let tail = r.excerpt(ws, &ev, (total - 3) as u64, 100).unwrap();
    assert_eq!((tail.length, tail.truncated), (3, false));
    assert!(matches!(r.excerpt(ws, &ev, 0, MAX_EXCERPT_CHARS + 1), Err(StoreError::Invalid(_))));
    assert!(r.excerpt(ws, &ev, 0, MAX_EXCERPT_CHARS).is_ok());
    assert!(matches!(r.excerpt(ws, &ev, (total + 1) as u64, 10), Err(StoreError::Invalid(_))));
    // Wrong kinds are refused, not coerced.
    assert!(matches!(r.evidence_summary(ws, &hub), Err(StoreError::Invalid(_))));
    let trace = r.provenance_trace(ws, &hub, 4).unwrap();
    assert!(!trace.records.is_empty());
    assert!(matches!(r.provenance_trace(ws, &hub, MAX_PROVENANCE_DEPTH + 1), Err(StoreError::Invalid(_))));
}

#[test]
fn reads_are_scoped_to_the_callers_workspace() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws_a, inv_a) = specimen(&dir, 10, 30);
    specimen::generate(&mut store, SpecimenSpec { seed: 11, size: 30 }, &mut |_, _| {}).unwrap();
    let ws_b = specimen::workspace_id_for_seed(11);
    let r = store.reads();
    let ev = r.overview(ws_a, &inv_a).unwrap().recent_evidence[0].id;
    assert!(r.evidence_summary(ws_a, &ev).is_ok());
    assert!(matches!(r.evidence_summary(ws_b, &ev), Err(StoreError::NotFound(_))));
    assert!(matches!(r.overview(ws_b, &inv_a), Err(StoreError::NotFound(_))));
    assert!(matches!(r.node(ws_b, &ev), Err(StoreError::NotFound(_))));
    let unknown = ObjectRef::new(RefKind::Evidence, uuid::Uuid::new_v4());
    assert!(matches!(r.node(ws_a, &unknown), Err(StoreError::NotFound(_))));
    assert_eq!(r.workspaces().unwrap().len(), 2);
}

#[test]
fn notes_are_bounded_stored_with_provenance_and_audited() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen(&dir, 1, 10);
    let note = |title: &str, content: &str| NewNote {
        title: title.into(),
        content: content.into(),
        source: None,
        dated_at: None,
    };
    let ev = store.add_note(ws, &inv, &note("<b>Hypothèse</b>", "Le fil 8812 est un leurre."), "analyst").unwrap();
    let s = store.reads().evidence_summary(ws, &ev).unwrap();
    assert_eq!(s.title, "<b>Hypothèse</b>");
    assert_eq!(s.sha256, sha256_hex("Le fil 8812 est un leurre.".as_bytes()));
    let trace = store.reads().provenance_trace(ws, &ev, 1).unwrap();
    assert_eq!(trace.records[0].producer, "analyst");
    let audit = store.reads().audit(ws, 5).unwrap();
    assert_eq!(audit[0].action, "evidence.add_note");
    for (title, content) in [
        ("", "x"),
        ("t", ""),
        (&*"t".repeat(MAX_NOTE_TITLE_CHARS + 1), "x"),
        ("a\u{0007}b", "x"),
        ("t", &*"x".repeat(MAX_NOTE_CONTENT_BYTES + 1)),
    ] {
        let err = store.add_note(ws, &inv, &note(title, content), "analyst").unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    }
    assert!(store.add_note(ws, &inv, &note(&"t".repeat(MAX_NOTE_TITLE_CHARS), "x"), "analyst").is_ok());
    assert_derived_consistent(store.conn());
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, 12);
    let other_ws = uuid::Uuid::new_v4();
    assert!(matches!(store.add_note(other_ws, &inv, &note("t", "x"), "analyst"), Err(StoreError::NotFound(_))));
    // Evidence is immutable.
    let err = store.conn().execute("UPDATE evidence SET title = 'x'", []).unwrap_err();
    assert!(err.to_string().contains("immutable"), "{err}");
}

#[test]
fn audit_log_is_append_only() {
    let dir = TempDir::new().unwrap();
    let (store, _ws, _inv) = specimen(&dir, 1, 5);
    let n: i64 = store.conn().query_row("SELECT count(*) FROM audit_log", [], |x| x.get(0)).unwrap();
    assert!(n >= 1);
    for sql in ["UPDATE audit_log SET actor = 'mallory'", "DELETE FROM audit_log"] {
        let err = store.conn().execute(sql, []).unwrap_err();
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    let after: i64 = store.conn().query_row("SELECT count(*) FROM audit_log", [], |x| x.get(0)).unwrap();
    assert_eq!(after, n);
}

#[test]
fn grants_are_immutable_decisions_that_can_be_revoked_once() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen(&dir, 1, 5);
    let grant = NewGrant {
        investigation: inv,
        scope: ResearchScope { hosts: vec!["news.example".into()] },
        budget: ResearchBudget { max_requests: 10, max_bytes: 1_000_000 },
        expires_at: "2026-12-31T00:00:00Z".into(),
        contract_fingerprints: serde_json::json!({"web.fetch": "ab".repeat(32)}),
        decided_by: "analyst".into(),
    };
    let g = store.record_grant(ws, &grant).unwrap();
    let stored = store.reads().grant(ws, &g).unwrap();
    assert_eq!(stored.scope, grant.scope);
    assert!(stored.revoked_at.is_none());
    let err = store.conn().execute("UPDATE grants SET scope = '{\"hosts\":[\"*\"]}'", []).unwrap_err();
    assert!(err.to_string().contains("immutable"), "{err}");
    store.revoke_grant(ws, &g, "analyst").unwrap();
    assert!(store.reads().grant(ws, &g).unwrap().revoked_at.is_some());
    assert!(matches!(store.revoke_grant(ws, &g, "analyst"), Err(StoreError::Conflict(_))));
    let actions: Vec<_> = store.reads().audit(ws, 10).unwrap().into_iter().map(|a| a.action).collect();
    assert!(actions.starts_with(&["grant.revoke".to_string(), "grant.decide".to_string()]), "{actions:?}");
    let bad = NewGrant { expires_at: "tomorrow".into(), ..grant };
    assert!(matches!(store.record_grant(ws, &bad), Err(StoreError::Invalid(_))));
}

#[test]
fn real_workspaces_start_empty() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Dossier Nord", "analyst").unwrap();
    let o = store.reads().overview(ws.id(), &inv).unwrap();
    assert_eq!(o.workspace.class, WorkspaceClass::Real);
    assert_eq!(o.counts.evidence, 0);
    assert!(matches!(store.create_real_workspace(" ", "analyst"), Err(StoreError::Invalid(_))));
}

#[test]
fn damage_found_after_opening_is_reported_as_damage() {
    let dir = TempDir::new().unwrap();
    let (store, ws, inv) = specimen(&dir, 6, 300);
    drop(store);
    // Overwrite the middle of the file (past the header and schema pages).
    let path = dir.path().join(DB_FILE);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len();
    for b in &mut bytes[len / 3..len / 3 + 64 * 1024] {
        *b = 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let store = Store::open(dir.path()).unwrap();
    let err = store.reads().overview(ws, &inv).and_then(|_| store.integrity_check()).unwrap_err();
    assert_eq!(err.kind(), labfy_core::ErrorKind::Storage, "{err}");
}

#[test]
fn the_data_directory_and_database_are_private_whatever_the_umask() {
    // SPEC T4 / red team F11: 0700 and 0600 from the store itself, not from
    // the caller's umask (the test process keeps its own, usually 022).
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::TempDir::new().unwrap();
    let data = dir.path().join("fresh").join("data");
    let store = Store::open(&data).unwrap();
    drop(store);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    for f in ["labfy.sqlite3", "labfy.sqlite3-wal", "labfy.sqlite3-shm"] {
        let p = data.join(f);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{f}");
        }
    }
    assert!(data.join("labfy.sqlite3").exists());
}

#[test]
fn the_journal_keeps_a_bounded_number_of_records_in_a_file_of_its_own() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new().unwrap();
    let mut journal = JournalStore::open(dir.path()).unwrap();
    let ws = uuid::Uuid::new_v4();
    let records: Vec<JournalRecord> = (0..JOURNAL_KEEP + 50)
        .map(|i| JournalRecord {
            workspace: ws,
            layer: JournalLayer::Gateway,
            kind: JournalKind::Event,
            id: i.to_string(),
            seq: i as i64,
            body: format!("{{\"n\": {i}}}"),
        })
        .collect();
    journal.write(&records).unwrap();
    assert_eq!(journal.prune().unwrap(), 50);
    assert_eq!(journal.prune().unwrap(), 0, "nothing more");
    let kept = journal.read(ws, JournalLayer::Gateway, JournalKind::Event, 5_000).unwrap();
    assert_eq!(kept.len(), JOURNAL_KEEP);
    assert_eq!(kept.first().unwrap().seq, 50, "the oldest went first");
    assert_eq!(journal.last_seq(JournalLayer::Gateway, JournalKind::Event).unwrap(), (JOURNAL_KEEP + 49) as i64);
    assert!(journal.read(uuid::Uuid::new_v4(), JournalLayer::Gateway, JournalKind::Event, 10).unwrap().is_empty());
    // A later snapshot replaces the record; a body that is not JSON is
    // refused and nothing of its batch is written.
    let again = JournalRecord { body: "{\"n\": \"again\"}".into(), ..records[JOURNAL_KEEP + 49].clone() };
    journal.write(std::slice::from_ref(&again)).unwrap();
    assert_eq!(journal.read(ws, JournalLayer::Gateway, JournalKind::Event, 1).unwrap(), [again]);
    let good = JournalRecord { id: "x".into(), seq: 1_000_000, ..records[0].clone() };
    let bad = JournalRecord { body: "pas du JSON".into(), id: "y".into(), ..records[0].clone() };
    assert!(matches!(journal.write(&[good, bad]), Err(StoreError::Invalid(_))));
    assert_eq!(journal.last_seq(JournalLayer::Gateway, JournalKind::Event).unwrap(), (JOURNAL_KEEP + 49) as i64);
    drop(journal);
    // The file is the journal's, 0600; another SQLite file in its place is
    // refused and left untouched.
    let path = dir.path().join(JOURNAL_FILE);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let other = TempDir::new().unwrap();
    let foreign = other.path().join(JOURNAL_FILE);
    Connection::open(&foreign).unwrap().execute_batch("PRAGMA application_id = 7; CREATE TABLE t (x);").unwrap();
    let before = std::fs::read(&foreign).unwrap();
    assert!(matches!(JournalStore::open(other.path()), Err(StoreError::Foreign { found: 7, .. })));
    assert_eq!(std::fs::read(&foreign).unwrap(), before);
}
