//! Extraction into the graph (SPEC C4): mentions with offsets and version,
//! entities found or created with provenance, relations made and unmade only
//! by extraction, a job that resumes and is idempotent.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::params;
use tempfile::TempDir;

use crate::tests::{assert_derived_consistent, specimen};
use crate::*;

fn note(title: &str, content: &str) -> NewNote {
    NewNote { title: title.into(), content: content.into(), source: None, dated_at: None }
}

fn entity(store: &Store, inv: &ObjectRef, kind: &str, name: &str) -> Option<(String, i64)> {
    store
        .conn()
        .query_row(
            "SELECT id, mention_count FROM entities WHERE investigation_id = ?1 AND kind = ?2 AND name = ?3",
            params![inv.id().to_string(), kind, name],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .ok()
}

fn run_to_end(store: &mut Store, ws: uuid::Uuid, job: &ObjectRef, batch: u32) -> (ExtractionStep, usize) {
    let mut steps = 0;
    loop {
        let s = store.extraction_step(ws, job, batch).unwrap();
        steps += 1;
        assert!(steps < 10_000, "the job never ends");
        if s.done {
            return (s, steps);
        }
    }
}

#[test]
fn a_note_is_scanned_as_it_is_stored() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Delta", "analyst").unwrap();
    let ws = ws.id();
    let text = "Écrire à Contact@Delta-Import.fr ; serveur 203.0.113.7, miroir delta-import.fr.";
    let ev = store.add_note(ws, &inv, &note("Source A", text), "analyst").unwrap();

    let (email, n) = entity(&store, &inv, "email", "contact@delta-import.fr").expect("the address is an entity");
    assert_eq!(n, 1);
    let (domain, n) = entity(&store, &inv, "domain", "delta-import.fr").expect("the domain is an entity");
    assert_eq!(n, 1, "two mentions in one item are one `mentions` relation");
    assert!(entity(&store, &inv, "ipv4", "203.0.113.7").is_some());

    // Each mention keeps where it is, what found it and which version.
    let chars: Vec<char> = text.chars().collect();
    let rows: Vec<(i64, i64, String, String, u32)> = store
        .conn()
        .prepare(
            "SELECT start, length, entity_id, extractor, version FROM mentions WHERE evidence_id = ?1 ORDER BY start",
        )
        .unwrap()
        .query_map([ev.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    let written: Vec<(String, &str)> = rows
        .iter()
        .map(|(s, l, e, x, v)| {
            assert_eq!(*v, labfy_extract::VERSION);
            let w: String = chars[*s as usize..(*s + *l) as usize].iter().collect();
            assert!((e == &email) == (x == "email"), "{x} → {e}");
            (w, x.as_str())
        })
        .collect();
    assert_eq!(
        written,
        [
            ("Contact@Delta-Import.fr".to_owned(), "email"),
            ("Delta-Import.fr".to_owned(), "domain"),
            ("203.0.113.7".to_owned(), "ipv4"),
            ("delta-import.fr".to_owned(), "domain"),
        ]
    );
    // The entity's provenance names the extractor and the item it came from.
    let trace =
        store.reads().provenance_trace(ws, &ObjectRef::new(RefKind::Entity, domain.parse().unwrap()), 2).unwrap();
    let own = &trace.records[0];
    assert_eq!(own.producer, format!("labfy-extract/{}", labfy_extract::VERSION));
    assert_eq!(own.activity, "extraction");
    assert_eq!(own.inputs.iter().map(|i| i.id).collect::<Vec<_>>(), [ev]);

    // A second item mentioning the domain points at the same entity.
    store.add_note(ws, &inv, &note("Source B", "Vu sur https://delta-import.fr/contact"), "analyst").unwrap();
    assert_eq!(entity(&store, &inv, "domain", "delta-import.fr").unwrap(), (domain, 2));
    assert!(entity(&store, &inv, "url", "https://delta-import.fr/contact").is_some());
    // The overview's top entities and the neighbours now see the graph.
    let overview = store.reads().overview(ws, &inv).unwrap();
    assert_eq!(overview.top_entities[0].name, "delta-import.fr");
    assert_eq!(overview.top_entities[0].evidence_count, 2);
    let near = store.reads().neighbors(ws, &ev, 50).unwrap();
    assert_eq!(near.total, 3);
    assert_derived_consistent(store.conn());
}

#[test]
fn a_job_scans_an_investigation_in_batches_once() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen(&dir, 7, 300);
    let relations_before: i64 = store.conn().query_row("SELECT count(*) FROM relations", [], |r| r.get(0)).unwrap();
    let (job, created) = store.start_extraction(ws, &inv, "analyst").unwrap();
    assert!(created);
    // Asked again while it runs: the same job.
    assert_eq!(store.start_extraction(ws, &inv, "analyst").unwrap(), (job, false));
    let first = store.extraction_step(ws, &job, 64).unwrap();
    assert!(!first.done);
    assert_eq!(first.stats.scanned, 64);
    let running = store.reads().job(ws, &job).unwrap();
    assert_eq!(running.status, "RUNNING");
    assert!(running.progress > 0.0 && running.progress < 1.0, "{}", running.progress);
    assert_eq!(store.running_extractions(ws).unwrap(), [job]);

    let (end, _) = run_to_end(&mut store, ws, &job, 64);
    let evidence: i64 = store.conn().query_row("SELECT count(*) FROM evidence", [], |r| r.get(0)).unwrap();
    assert_eq!(end.stats.scanned, evidence as u64);
    assert_eq!(end.stats.to_scan, evidence as u64);
    let done = store.reads().job(ws, &job).unwrap();
    assert_eq!((done.kind.as_str(), done.status.as_str(), done.progress), ("extraction", "SUCCEEDED", 1.0));
    assert!(done.detail.starts_with(&format!("{evidence}/{evidence} evidence items scanned")), "{}", done.detail);
    assert!(store.running_extractions(ws).unwrap().is_empty());
    let stored: i64 = store.conn().query_row("SELECT count(*) FROM mentions", [], |r| r.get(0)).unwrap();
    assert_eq!(stored as u64, end.stats.mentions);
    assert!(stored > 0, "SPECIMEN pages mention domains and addresses");
    let relations_after: i64 = store.conn().query_row("SELECT count(*) FROM relations", [], |r| r.get(0)).unwrap();
    assert_eq!(relations_after - relations_before, end.stats.relations_created as i64);
    assert_derived_consistent(store.conn());

    // Idempotent: a second run has nothing to scan and changes nothing.
    let (again, created) = store.start_extraction(ws, &inv, "analyst").unwrap();
    assert!(created);
    let (second, steps) = run_to_end(&mut store, ws, &again, 64);
    assert_eq!((second.stats.to_scan, second.stats.scanned, steps), (0, 0, 1));
    let relations_again: i64 = store.conn().query_row("SELECT count(*) FROM relations", [], |r| r.get(0)).unwrap();
    assert_eq!(relations_again, relations_after);
    let audit: Vec<String> = store.reads().audit(ws, 10).unwrap().into_iter().map(|a| a.action).collect();
    assert!(audit.contains(&"extraction.finish".to_owned()) && audit.contains(&"extraction.start".to_owned()));
}

#[test]
fn a_new_version_replaces_mentions_and_unmakes_only_its_own_relations() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Epsilon", "analyst").unwrap();
    let ws = ws.id();
    let ev = store.add_note(ws, &inv, &note("Source", "hôte epsilon.fr"), "analyst").unwrap();
    let (domain, _) = entity(&store, &inv, "domain", "epsilon.fr").unwrap();
    // As if an older extractor had also found `old.example.com` here, and an
    // analyst had linked the item to it by hand.
    let stale = uuid::Uuid::now_v7().to_string();
    let ev_ref = ev.to_string();
    let inv_id = inv.id().to_string();
    let c = store.conn();
    c.execute(
        "INSERT INTO entities (id, investigation_id, kind, name, created_at) VALUES (?1, ?2, 'domain', 'old.example.com', 'x')",
        params![stale, inv_id],
    )
    .unwrap();
    c.execute(
        "INSERT INTO mentions (evidence_id, start, length, entity_id, extractor, version) VALUES (?1, 0, 3, ?2, 'domain', 9)",
        params![ev.id().to_string(), stale],
    )
    .unwrap();
    for (id, producer) in [("r-extract", "labfy-extract"), ("r-analyst", "analyst")] {
        c.execute(
            "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at, producer)
             VALUES (?1, ?2, ?3, ?4, ?5, 1.0, 'x', ?6)",
            params![
                id,
                inv_id,
                if producer == "analyst" { "linked_to" } else { "mentions" },
                ev_ref,
                format!("entity:{stale}"),
                producer
            ],
        )
        .unwrap();
    }
    c.execute("UPDATE extraction_state SET version = 9", []).unwrap();
    crate::primitives::recount_derived(c, &inv_id).unwrap();

    let (job, _) = store.start_extraction(ws, &inv, "analyst").unwrap();
    let (end, _) = run_to_end(&mut store, ws, &job, 10);
    assert_eq!((end.stats.to_scan, end.stats.scanned, end.stats.relations_removed), (1, 1, 1));
    let kept: Vec<String> = store
        .conn()
        .prepare("SELECT id FROM relations ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(kept.contains(&"r-analyst".to_owned()) && !kept.contains(&"r-extract".to_owned()), "{kept:?}");
    let mentioned: Vec<String> = store
        .conn()
        .prepare("SELECT entity_id FROM mentions WHERE evidence_id = ?1")
        .unwrap()
        .query_map([ev.id().to_string()], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(mentioned, [domain]);
    assert_derived_consistent(store.conn());
}

#[test]
fn a_job_refuses_what_is_not_its_own() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("A", "analyst").unwrap();
    let (other, _) = store.create_real_workspace("B", "analyst").unwrap();
    assert!(matches!(store.start_extraction(other.id(), &inv, "analyst"), Err(StoreError::NotFound(_))));
    assert!(matches!(store.start_extraction(ws.id(), &ws, "analyst"), Err(StoreError::Invalid(_))));
    let (job, _) = store.start_extraction(ws.id(), &inv, "analyst").unwrap();
    assert!(matches!(store.extraction_step(other.id(), &job, 10), Err(StoreError::NotFound(_))));
    assert!(matches!(store.extraction_step(ws.id(), &inv, 10), Err(StoreError::Invalid(_))));
}

/// SPEC A5 (the walk: the unspaced IBAN found 1 of its 4 pieces, a phone
/// number written without spaces none): a query that is a selector finds
/// every piece where the extraction saw it, in whatever form either is
/// written, before the words' own matches, its mention marked.
#[test]
fn a_selector_query_finds_every_piece_mentioning_it_whatever_the_spelling() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Iota", "analyst").unwrap();
    let ws = ws.id();
    let pieces = [
        ("Relevé", "Virement depuis FR7630006000011234567890189 le 3 mars."),
        ("Courriel", "Merci de verser sur l'IBAN FR76 3000 6000 0112 3456 7890 189, à l'attention de M. Durand."),
        ("Facture", "Coordonnées bancaires : FR76 3000 6000 0112 3456 7890 189 — tél. 06 12 34 56 78"),
        ("Note", "Appeler le +33 6 12 34 56 78 (Durand) ; compte FR7630006000011234567890189"),
        ("Bruit", "Un autre compte : FR1420041010050500013M02606 et le 01 23 45 67 89."),
    ];
    let mut ids = Vec::new();
    for (title, text) in pieces {
        ids.push(store.add_note(ws, &inv, &note(title, text), "analyst").unwrap());
    }
    let reads = store.reads();
    for q in ["FR7630006000011234567890189", "FR76 3000 6000 0112 3456 7890 189", " fr76 3000 6000 0112 3456 7890 189 "]
    {
        let r = reads.search(ws, &inv, q, 20).unwrap();
        let sel = r.selector.as_ref().unwrap_or_else(|| panic!("{q:?} is an IBAN"));
        assert_eq!(
            (sel.kind.as_str(), sel.value.as_str(), sel.pieces),
            ("iban", "FR7630006000011234567890189", 4),
            "{q}"
        );
        let found: Vec<&ObjectRef> = r.hits.iter().map(|h| &h.id).collect();
        assert_eq!(found.len(), 4, "{q}: {found:?}");
        assert!(ids[..4].iter().all(|id| found.contains(&id)), "{q}: {found:?}");
        let spaced = r.hits.iter().find(|h| h.title == "Facture").unwrap();
        assert!(spaced.snippet.contains("\u{E000}FR76 3000 6000 0112 3456 7890 189\u{E001}"), "{}", spaced.snippet);
    }
    for q in ["0612345678", "06.12.34.56.78", "+33612345678"] {
        let r = reads.search(ws, &inv, q, 20).unwrap();
        assert_eq!(r.selector.as_ref().map(|s| (s.value.as_str(), s.pieces)), Some(("+33612345678", 2)), "{q}");
        let titles: Vec<&str> = r.hits.iter().take(2).map(|h| h.title.as_str()).collect();
        assert_eq!(titles, ["Note", "Facture"], "{q}: the selector's pieces first, newest first");
    }
    // A name is no selector: the words' search, and the person « M.
    // Durand » the recognisers found (SPEC A2) among the entities.
    let r = reads.search(ws, &inv, "Durand", 20).unwrap();
    assert!(r.selector.is_none());
    assert_eq!(r.hits.len(), 2);
    let named: Vec<(&str, &str)> = r.entities.items.iter().map(|e| (e.kind.as_str(), e.name.as_str())).collect();
    assert_eq!(named, [("person", "Durand")], "found by its honorific");
    // Entities are found by the beginning of their name, any case, the
    // most mentioned first, with their kinds counted.
    let r = reads.search(ws, &inv, "fr", 20).unwrap();
    let named: Vec<(&str, &str, i64)> =
        r.entities.items.iter().map(|e| (e.kind.as_str(), e.name.as_str(), e.evidence_count)).collect();
    assert_eq!(named, [("iban", "FR7630006000011234567890189", 4), ("iban", "FR1420041010050500013M02606", 1)]);
    assert_eq!(r.entities.kinds.iter().map(|k| (k.kind.as_str(), k.count)).collect::<Vec<_>>(), [("iban", 2)]);
    assert!(!r.entities.more);
    // A selector nobody mentions: recognised, no piece.
    let r = reads.search(ws, &inv, "FR1420041010050500013M02606", 20).unwrap();
    assert_eq!(r.selector.as_ref().map(|s| s.pieces), Some(1));
    let r = reads.search(ws, &inv, "DE89 3704 0044 0532 0130 00", 20).unwrap();
    assert_eq!(r.selector.as_ref().map(|s| (s.pieces, s.entities.len())), Some((0, 0)));
}

/// SPEC A2: people and organisations become entities like selectors do;
/// each mention names the rule that found it, and the `mentions` relation
/// carries that rule's confidence.
#[test]
fn people_and_organisations_are_entities_with_their_rule_and_confidence() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Lemaître", "analyst").unwrap();
    let ws = ws.id();
    let text =
        "Rédigée par Hélène Marchetti au sujet de Transports Lemaître et Fils SARL ; Mme Kowalczyk a reçu les fonds.";
    let ev = store.add_note(ws, &inv, &note("Synthèse", text), "analyst").unwrap();
    let rule_and_confidence = |kind: &str, name: &str| -> (String, f64) {
        let (id, n) = entity(&store, &inv, kind, name).unwrap_or_else(|| panic!("{kind} {name} is an entity"));
        assert_eq!(n, 1);
        let rule: String = store
            .conn()
            .query_row(
                "SELECT extractor FROM mentions WHERE evidence_id = ?1 AND entity_id = ?2",
                params![ev.id().to_string(), id],
                |r| r.get(0),
            )
            .unwrap();
        let confidence: f64 = store
            .conn()
            .query_row(
                "SELECT confidence FROM relations WHERE src = ?1 AND dst = ?2 AND kind = 'mentions'",
                params![ev.to_string(), format!("entity:{id}")],
                |r| r.get(0),
            )
            .unwrap();
        (rule, confidence)
    };
    assert_eq!(rule_and_confidence("person", "Hélène Marchetti"), ("person/given_name".into(), 0.85));
    assert_eq!(
        rule_and_confidence("organisation", "Transports Lemaître et Fils SARL"),
        ("organisation/legal_form".into(), 0.9)
    );
    assert_eq!(rule_and_confidence("person", "Kowalczyk"), ("person/honorific".into(), 0.8));
    // A hand-made person keeps its name as typed (no recogniser decides it).
    store
        .create_entity(ws, &inv, &NewEntity { kind: "person".into(), name: "  Zoé   Martin ".into() }, "analyst")
        .unwrap();
    assert!(entity(&store, &inv, "person", "Zoé Martin").is_some());
}

/// SPEC A2: variants of a name are proposed for a merge, never merged —
/// accents and case, a legal form, a surname alone, an initial.
#[test]
fn name_variants_are_proposed_and_nothing_is_merged() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Lemaître", "analyst").unwrap();
    let ws = ws.id();
    for (title, text) in [
        ("A", "Rédigée par Hélène Marchetti. Fleuve Logistique SAS facture ; Mme Kowalczyk paie."),
        ("B", "Copie à HÉLÈNE MARCHETTI. La société Fleuve Logistique, dont Sabine Kowalczyk est cliente."),
        ("C", "Le destinataire signe Marc D. pour Marc Delmas ; Jérôme Lemaître et François Lemaître."),
    ] {
        store.add_note(ws, &inv, &note(title, text), "analyst").unwrap();
    }
    let count = |store: &Store| -> i64 {
        store
            .conn()
            .query_row("SELECT count(*) FROM entities WHERE kind IN ('person', 'organisation')", [], |r| r.get(0))
            .unwrap()
    };
    let before = count(&store);
    let v = store.reads().name_variants(ws, &inv, 50).unwrap();
    let groups: Vec<(&str, Vec<&str>)> =
        v.groups.iter().map(|g| (g.reason, g.entities.iter().map(|e| e.name.as_str()).collect())).collect();
    let has = |reason: &str, names: &[&str]| {
        groups.iter().any(|(r, n)| *r == reason && names.iter().all(|x| n.contains(x)) && n.len() == names.len())
    };
    assert!(has("same_letters", &["Hélène Marchetti", "HÉLÈNE MARCHETTI"]), "{groups:?}");
    assert!(has("same_letters", &["Fleuve Logistique SAS", "Fleuve Logistique"]), "{groups:?}");
    assert!(has("surname", &["Kowalczyk", "Sabine Kowalczyk"]), "{groups:?}");
    assert!(has("initial", &["Marc D.", "Marc Delmas"]), "{groups:?}");
    assert!(
        !groups.iter().any(|(_, n)| n.contains(&"Jérôme Lemaître") && n.contains(&"François Lemaître")),
        "{groups:?}"
    );
    assert_eq!(count(&store), before, "nothing merged");

    // SPEC A3: the analyst says two of them are two — that pair is not
    // proposed again; the others are, and nothing is merged.
    let id_of = |name: &str| v.groups.iter().flat_map(|g| &g.entities).find(|e| e.name == name).map(|e| e.id).unwrap();
    let (hm, hm2) = (id_of("Hélène Marchetti"), id_of("HÉLÈNE MARCHETTI"));
    store.set_apart(ws, &hm2, &hm, "analyst").unwrap();
    store.set_apart(ws, &hm, &hm2, "analyst").unwrap(); // once is enough; twice changes nothing
    let again = store.reads().name_variants(ws, &inv, 50).unwrap();
    assert!(!again.groups.iter().any(|g| g.entities.iter().any(|e| e.id == hm2)), "{:?}", again.groups);
    assert_eq!(again.groups.len(), v.groups.len() - 1, "the other proposals stay");
    assert!(store.set_apart(ws, &hm, &hm, "analyst").is_err());
    assert!(store.set_apart(ws, &hm, &inv, "analyst").is_err());
    let apart: String = store
        .conn()
        .query_row("SELECT attributes FROM entities WHERE id = ?1", [hm.id().to_string()], |r| r.get(0))
        .unwrap();
    let apart: serde_json::Value = serde_json::from_str(&apart).unwrap();
    assert_eq!(apart["distinct_from"], serde_json::json!([hm2.to_string()]), "once, and the rest kept: {apart}");
    assert_eq!(apart["extractor"], "person", "{apart}");
    assert_eq!(count(&store), before, "nothing merged");
}

/// SPEC A2, A4: a signature block says who works where — the signer
/// `works_for` the organisation under the name, once, with provenance from
/// the piece; a later scan makes nothing more.
#[test]
fn a_signature_block_becomes_works_for() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Lemaître", "analyst").unwrap();
    let ws = ws.id();
    let text = "Bonjour,\nVoici le relevé.\n\nBien cordialement,\n\nMme Hélène Marchetti\nDirectrice financière\n\
                Transports Lemaître et Fils SARL";
    let ev = store.add_note(ws, &inv, &note("Relevé", text), "analyst").unwrap();
    store.add_note(ws, &inv, &note("Copie", text), "analyst").unwrap();
    let works = |store: &Store| -> Vec<(String, String, String)> {
        store
            .conn()
            .prepare(
                "SELECT (SELECT name FROM entities WHERE 'entity:' || id = r.src),
                        (SELECT name FROM entities WHERE 'entity:' || id = r.dst), i.input_ref
                 FROM relations r JOIN provenance p ON p.object_ref = 'relation:' || r.id
                 JOIN provenance_inputs i ON i.provenance_id = p.id WHERE r.kind = 'works_for'",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let expected = vec![("Hélène Marchetti".to_owned(), "Transports Lemaître et Fils SARL".to_owned(), ev.to_string())];
    assert_eq!(works(&store), expected, "once, from the first piece that says it");
    store.conn().execute("UPDATE extraction_state SET version = 1", []).unwrap();
    let (job, _) = store.start_extraction(ws, &inv, "analyst").unwrap();
    while !store.extraction_step(ws, &job, 10).unwrap().done {}
    assert_eq!(works(&store), expected);
    crate::tests::assert_derived_consistent(store.conn());
}
