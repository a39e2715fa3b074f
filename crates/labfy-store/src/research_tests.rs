//! Research tests: preparing requests (bounds, idempotency, scoping), human
//! decisions (grant, refusal, void under another contract), campaigns
//! (synthetic in SPECIMEN, pending in REAL), grant validity and the database
//! rules that keep a decided request unchanged. Real SQLite files, no mocks.

use chrono::{Duration, Utc};
use labfy_core::{CampaignRef, ObjectRef, RefKind};
use rusqlite::{Connection, params};
use tempfile::TempDir;
use uuid::Uuid;

use crate::specimen::{self, SpecimenOutcome, SpecimenSpec};
use crate::*;

/// Contract fingerprint of `research.prepare` most tests prepare under.
pub(crate) fn fp_a() -> String {
    "a".repeat(64)
}

/// Another contract fingerprint (a changed contract).
pub(crate) fn fp_b() -> String {
    "b".repeat(64)
}

pub(crate) const TURN: Uuid = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001);
pub(crate) const CALL: Uuid = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0002);

pub(crate) fn specimen_store(dir: &TempDir, seed: u64, size: u64) -> (Store, Uuid, ObjectRef) {
    let mut store = Store::open(dir.path()).unwrap();
    let outcome = specimen::generate(&mut store, SpecimenSpec { seed, size }, &mut |_, _| {}).unwrap();
    let SpecimenOutcome::Created { workspace, investigation, .. } = outcome else { panic!("not created: {outcome:?}") };
    (store, workspace.id(), investigation)
}

/// Adds another SPECIMEN workspace to an open store.
pub(crate) fn another_specimen(store: &mut Store, seed: u64, size: u64) -> (Uuid, ObjectRef) {
    let outcome = specimen::generate(store, SpecimenSpec { seed, size }, &mut |_, _| {}).unwrap();
    let SpecimenOutcome::Created { workspace, investigation, .. } = outcome else { panic!("not created: {outcome:?}") };
    (workspace.id(), investigation)
}

/// The first `n` ids of `table` in investigation `inv`, as refs of `kind`.
pub(crate) fn refs(conn: &Connection, kind: RefKind, inv: &ObjectRef, n: usize) -> Vec<ObjectRef> {
    let (table, order) = match kind {
        RefKind::Evidence => ("evidence", "seq"),
        RefKind::Entity => ("entities", "id"),
        RefKind::Relation => ("relations", "id"),
        _ => panic!("not selectable: {kind}"),
    };
    let mut stmt =
        conn.prepare(&format!("SELECT id FROM {table} WHERE investigation_id = ?1 ORDER BY {order} LIMIT ?2")).unwrap();
    let out: Vec<ObjectRef> = stmt
        .query_map(params![inv.id().to_string(), n as i64], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|id| ObjectRef::new(kind, Uuid::parse_str(&id.unwrap()).unwrap()))
        .collect();
    assert_eq!(out.len(), n, "not enough {table} in {inv}");
    out
}

pub(crate) fn ev(conn: &Connection, inv: &ObjectRef, n: usize) -> Vec<ObjectRef> {
    refs(conn, RefKind::Evidence, inv, n)
}

pub(crate) fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

pub(crate) fn count_with(conn: &Connection, sql: &str, arg: &str) -> i64 {
    conn.query_row(sql, [arg], |r| r.get(0)).unwrap()
}

pub(crate) fn request(selection: Vec<ObjectRef>, key: &str) -> NewResearchRequest {
    NewResearchRequest {
        selection,
        question: "Qui finance le réseau Zorglubinette depuis 2019 ?".into(),
        exclusions: vec!["pas de réseaux sociaux".into()],
        turn_id: TURN,
        call_id: CALL,
        idempotency_key: key.into(),
        requested_by: "agent:demo".into(),
        contract_fingerprint: fp_a(),
        catalog_fingerprint: "c".repeat(64),
    }
}

pub(crate) fn decision() -> GrantDecision {
    GrantDecision {
        scope: ResearchScope { hosts: vec!["news.example.org".into()] },
        budget: ResearchBudget { max_requests: 10, max_bytes: 1_000_000 },
        expires_in_minutes: 60,
        contract_fingerprints: serde_json::json!({"research.prepare": fp_a(), "web.fetch": "d".repeat(64)}),
        current_prepare_fingerprint: fp_a(),
        decided_by: "analyst".into(),
        urls: Vec::new(),
    }
}

pub(crate) fn assert_invalid<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    match r {
        Err(StoreError::Invalid(_)) => {}
        other => panic!("{what}: expected Invalid, got {other:?}"),
    }
}

pub(crate) fn assert_conflict<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    match r {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("{what}: expected Conflict, got {other:?}"),
    }
}

pub(crate) fn assert_not_found<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    match r {
        Err(StoreError::NotFound(_)) => {}
        other => panic!("{what}: expected NotFound, got {other:?}"),
    }
}

/// The counters kept on `investigations` equal fresh counts of their rows.
pub(crate) fn assert_counters_consistent(conn: &Connection) {
    let wrong = count(
        conn,
        "SELECT count(*) FROM investigations i WHERE
           evidence_count <> (SELECT count(*) FROM evidence WHERE investigation_id = i.id)
           OR relation_count <> (SELECT count(*) FROM relations WHERE investigation_id = i.id)
           OR provenance_count <> (SELECT count(*) FROM provenance WHERE investigation_id = i.id)",
    );
    assert_eq!(wrong, 0, "investigation counters out of step with count(*)");
    let wrong_mentions = count(
        conn,
        "SELECT count(*) FROM entities n WHERE mention_count <>
           (SELECT count(*) FROM relations r WHERE r.dst = 'entity:' || n.id AND r.kind = 'mentions')",
    );
    assert_eq!(wrong_mentions, 0, "entities.mention_count out of step");
}

/// (evidence_count, relation_count, provenance_count) as stored on the investigation.
pub(crate) fn counters(conn: &Connection, inv: &ObjectRef) -> (i64, i64, i64) {
    conn.query_row(
        "SELECT evidence_count, relation_count, provenance_count FROM investigations WHERE id = ?1",
        [inv.id().to_string()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .unwrap()
}

/// (title, content, sha256, source, byte_len) of an evidence item.
pub(crate) fn evidence_row(conn: &Connection, e: &ObjectRef) -> (String, String, String, String, i64) {
    conn.query_row(
        "SELECT title, content, sha256, source, byte_len FROM evidence WHERE id = ?1",
        [e.id().to_string()],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
    .unwrap()
}

pub(crate) fn audit_actions(store: &Store, ws: Uuid, n: u32) -> Vec<String> {
    store.reads().audit(ws, n).unwrap().into_iter().map(|a| a.action).collect()
}

// ---------------------------------------------------------------------------
// prepare
// ---------------------------------------------------------------------------

#[test]
fn prepare_stores_a_pending_request_with_its_audit_row_and_nothing_else() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let c = store.conn();
    let selection =
        vec![ev(c, &inv, 1)[0], refs(c, RefKind::Entity, &inv, 1)[0], refs(c, RefKind::Relation, &inv, 1)[0]];
    let req = request(selection.clone(), "key-1");
    let (r, created) = store.prepare_research(ws, &req).unwrap();
    assert!(created);
    assert_eq!(r.kind(), RefKind::ResearchRequest);

    let got = store.reads().research_request(ws, &r).unwrap();
    assert_eq!(got.id, r);
    assert_eq!(got.investigation_id, inv);
    assert_eq!(got.status, "PENDING");
    assert_eq!(got.question, req.question);
    assert_eq!(got.selection, selection);
    assert_eq!(got.exclusions, req.exclusions);
    assert_eq!((got.turn_id, got.call_id), (TURN, CALL));
    assert_eq!(got.requested_by, "agent:demo");
    assert_eq!(got.contract_fingerprint, fp_a());
    assert_eq!(got.catalog_fingerprint, "c".repeat(64));
    assert!(chrono::DateTime::parse_from_rfc3339(&got.created_at).is_ok(), "{}", got.created_at);
    assert!(got.decided_at.is_none() && got.decided_by.is_none() && got.decision_note.is_none());
    assert!(got.grant.is_none() && got.campaign.is_none() && !got.grant_active);

    let audit = store.reads().audit(ws, 5).unwrap();
    assert_eq!(audit[0].action, "research.prepare");
    assert_eq!(audit[0].actor, "agent:demo");
    assert_eq!(audit[0].object_ref.as_deref(), Some(r.to_string().as_str()));
    assert_eq!(audit[0].detail["selection"], 3);
    assert_eq!(audit[0].detail["exclusions"], 1);
    assert_eq!(audit[0].detail["contract_fingerprint"], fp_a());

    // Preparing creates no grant, no campaign and no evidence (G11).
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM research_requests"), 1);
    assert_eq!(count(c, "SELECT count(*) FROM grants"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM campaigns"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM evidence"), 50);

    let pending = store.reads().pending_research(ws).unwrap();
    assert_eq!(pending.iter().map(|p| p.id).collect::<Vec<_>>(), vec![r]);
    let listed = store.reads().research_requests(ws, &inv, 10).unwrap();
    assert_eq!(listed.iter().map(|p| p.id).collect::<Vec<_>>(), vec![r]);
}

#[test]
fn an_identical_replay_finds_the_same_request_and_a_different_one_conflicts() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let sel = ev(store.conn(), &inv, 3);
    let req = request(sel.clone(), "replay-key");
    let (first, created) = store.prepare_research(ws, &req).unwrap();
    assert!(created);
    let (again, created_again) = store.prepare_research(ws, &req).unwrap();
    assert_eq!(again, first);
    assert!(!created_again);
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM research_requests"), 1);
    assert_eq!(count(c, "SELECT count(*) FROM audit_log WHERE action = 'research.prepare'"), 1);

    // Same key, another intent: a conflict, and nothing is written.
    let variants = [
        NewResearchRequest { question: "Une autre question ?".into(), ..req.clone() },
        NewResearchRequest { selection: sel[..2].to_vec(), ..req.clone() },
        NewResearchRequest { selection: vec![sel[1], sel[0], sel[2]], ..req.clone() },
        NewResearchRequest { exclusions: vec![], ..req.clone() },
        NewResearchRequest { exclusions: vec!["autre chose".into()], ..req.clone() },
        NewResearchRequest { turn_id: Uuid::from_u128(7), ..req.clone() },
        NewResearchRequest { call_id: Uuid::from_u128(8), ..req.clone() },
    ];
    for (i, v) in variants.iter().enumerate() {
        assert_conflict(store.prepare_research(ws, v), &format!("variant {i}"));
    }
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM research_requests"), 1);
    assert_eq!(count(c, "SELECT count(*) FROM audit_log WHERE action = 'research.prepare'"), 1);
    let stored = store.reads().research_request(ws, &first).unwrap();
    assert_eq!(stored.question, req.question);

    // A replay after the decision still finds the same (decided) request.
    store.refuse_research(ws, &first, "hors périmètre", "analyst").unwrap();
    let (after, created_after) = store.prepare_research(ws, &req).unwrap();
    assert_eq!((after, created_after), (first, false));
    assert_eq!(store.reads().research_request(ws, &after).unwrap().status, "REFUSED");

    // Keys are per workspace: the same key elsewhere prepares a new request.
    let (ws2, inv2) = another_specimen(&mut store, 2, 20);
    let other = request(ev(store.conn(), &inv2, 1), "replay-key");
    let (r2, created2) = store.prepare_research(ws2, &other).unwrap();
    assert!(created2);
    assert_ne!(r2, first);
    assert_eq!(count(store.conn(), "SELECT count(*) FROM research_requests"), 2);
}

#[test]
fn prepare_refuses_out_of_bounds_input_and_accepts_the_edges() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let nine = ev(store.conn(), &inv, 9);
    let entity = refs(store.conn(), RefKind::Entity, &inv, 1)[0];
    let relation = refs(store.conn(), RefKind::Relation, &inv, 1)[0];
    let jobs = store.reads().overview(ws, &inv).unwrap().jobs;
    let job = jobs[0].id;
    assert_eq!(job.kind(), RefKind::Job);
    let base = request(nine[..1].to_vec(), "k");
    let with = |key: &str, f: &dyn Fn(&mut NewResearchRequest)| {
        let mut r = NewResearchRequest { idempotency_key: key.into(), ..base.clone() };
        f(&mut r);
        r
    };

    let refused: Vec<(&str, NewResearchRequest)> = vec![
        ("0 selection ids", with("r0", &|r| r.selection.clear())),
        ("9 selection ids", with("r1", &|r| r.selection = nine.clone())),
        ("duplicate selection", with("r2", &|r| r.selection = vec![nine[0], nine[1], nine[0]])),
        ("job ref", with("r3", &|r| r.selection = vec![nine[0], job])),
        ("grant ref", with("r4", &|r| r.selection = vec![ObjectRef::new(RefKind::Grant, Uuid::now_v7())])),
        ("investigation ref", with("r5", &|r| r.selection = vec![inv])),
        ("workspace ref", with("r6", &|r| r.selection = vec![ObjectRef::new(RefKind::Workspace, ws)])),
        ("campaign ref", with("r7", &|r| r.selection = vec![ObjectRef::new(RefKind::Campaign, Uuid::now_v7())])),
        ("513-char question", with("r8", &|r| r.question = "q".repeat(MAX_RESEARCH_QUESTION_CHARS + 1))),
        ("empty question", with("r9", &|r| r.question = String::new())),
        ("blank question", with("r10", &|r| r.question = "  \n ".into())),
        ("control char in question", with("r11", &|r| r.question = "qui\u{0000}quoi".into())),
        (
            "9 exclusions",
            with("r12", &|r| r.exclusions = (0..=MAX_RESEARCH_EXCLUSIONS).map(|i| format!("ex{i}")).collect()),
        ),
        ("201-char exclusion", with("r13", &|r| r.exclusions = vec!["e".repeat(MAX_EXCLUSION_CHARS + 1)])),
        ("empty exclusion", with("r14", &|r| r.exclusions = vec!["ok".into(), String::new()])),
        ("empty key", with("", &|_| {})),
        ("129-char key", with(&"k".repeat(MAX_IDEMPOTENCY_KEY_CHARS + 1), &|_| {})),
        ("empty requested_by", with("r15", &|r| r.requested_by = String::new())),
        ("short contract fingerprint", with("r16", &|r| r.contract_fingerprint = "a".repeat(63))),
        ("upper-case contract fingerprint", with("r17", &|r| r.contract_fingerprint = "A".repeat(64))),
        ("non-hex catalog fingerprint", with("r18", &|r| r.catalog_fingerprint = "g".repeat(64))),
    ];
    for (what, r) in &refused {
        assert_invalid(store.prepare_research(ws, r), what);
    }
    assert_eq!(count(store.conn(), "SELECT count(*) FROM research_requests"), 0, "a refused prepare wrote a row");

    let accepted: Vec<(&str, NewResearchRequest)> = vec![
        ("8 selection ids", with("a0", &|r| r.selection = nine[..MAX_RESEARCH_SELECTION].to_vec())),
        (
            "evidence, entity and relation",
            with("a1", &|r| {
                r.selection = vec![nine[0], entity, relation];
            }),
        ),
        ("512-char question", with("a2", &|r| r.question = "q".repeat(MAX_RESEARCH_QUESTION_CHARS))),
        // The database counts characters too, not bytes.
        ("512 two-byte characters", with("a3", &|r| r.question = "é".repeat(MAX_RESEARCH_QUESTION_CHARS))),
        ("no exclusions", with("a4", &|r| r.exclusions.clear())),
        (
            "8 exclusions",
            with("a5", &|r| r.exclusions = (0..MAX_RESEARCH_EXCLUSIONS).map(|i| format!("ex{i}")).collect()),
        ),
        ("200-char exclusion", with("a6", &|r| r.exclusions = vec!["e".repeat(MAX_EXCLUSION_CHARS)])),
        ("128-char key", with(&"k".repeat(MAX_IDEMPOTENCY_KEY_CHARS), &|_| {})),
    ];
    let mut ok = 0;
    for (what, r) in &accepted {
        let (_, created) = store.prepare_research(ws, r).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(created, "{what}");
        ok += 1;
    }
    assert_eq!(count(store.conn(), "SELECT count(*) FROM research_requests"), ok);
    let stored: String = store
        .conn()
        .query_row("SELECT question FROM research_requests WHERE idempotency_key = 'a3'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored.chars().count(), MAX_RESEARCH_QUESTION_CHARS);
    assert_eq!(MIN_RESEARCH_SELECTION, 1);
    assert_eq!(SELECTABLE_KINDS, [RefKind::Evidence, RefKind::Entity, RefKind::Relation]);
}

#[test]
fn selection_outside_the_workspace_is_not_found() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws_a, inv_a) = specimen_store(&dir, 10, 20);
    let (ws_b, inv_b) = another_specimen(&mut store, 11, 20);
    let a = ev(store.conn(), &inv_a, 1)[0];
    let b = ev(store.conn(), &inv_b, 1)[0];
    let b_entity = refs(store.conn(), RefKind::Entity, &inv_b, 1)[0];
    let b_relation = refs(store.conn(), RefKind::Relation, &inv_b, 1)[0];
    assert_not_found(store.prepare_research(ws_a, &request(vec![b], "x1")), "evidence of B from A");
    assert_not_found(store.prepare_research(ws_a, &request(vec![a, b], "x2")), "A and B mixed");
    assert_not_found(store.prepare_research(ws_a, &request(vec![b_entity], "x3")), "entity of B from A");
    assert_not_found(store.prepare_research(ws_a, &request(vec![b_relation], "x4")), "relation of B from A");
    let unknown = ObjectRef::new(RefKind::Evidence, Uuid::now_v7());
    assert_not_found(store.prepare_research(ws_a, &request(vec![unknown], "x5")), "unknown evidence");
    assert_not_found(store.prepare_research(Uuid::now_v7(), &request(vec![a], "x6")), "unknown workspace");
    assert_eq!(count(store.conn(), "SELECT count(*) FROM research_requests"), 0);
    // Each in its own workspace is fine.
    assert!(store.prepare_research(ws_a, &request(vec![a], "x7")).unwrap().1);
    assert!(store.prepare_research(ws_b, &request(vec![b], "x7")).unwrap().1);
}

#[test]
fn selection_across_two_investigations_is_refused() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv1) = store.create_real_workspace("Dossier Est", "analyst").unwrap();
    // No command creates a second investigation yet: add one by hand.
    let inv2 = ObjectRef::new(RefKind::Investigation, Uuid::now_v7());
    store
        .conn()
        .execute(
            "INSERT INTO investigations (id, workspace_id, title, summary, created_at)
             VALUES (?1, ?2, 'Second', '', '2026-01-01T00:00:00.000Z')",
            [inv2.id().to_string(), ws.id().to_string()],
        )
        .unwrap();
    let note = |t: &str| NewNote { title: t.into(), content: format!("contenu {t}"), source: None, dated_at: None };
    let e1 = store.add_note(ws.id(), &inv1, &note("un"), "analyst").unwrap();
    let e2 = store.add_note(ws.id(), &inv2, &note("deux"), "analyst").unwrap();
    assert_invalid(store.prepare_research(ws.id(), &request(vec![e1, e2], "cross")), "two investigations");
    assert_eq!(count(store.conn(), "SELECT count(*) FROM research_requests"), 0);
    let (r, _) = store.prepare_research(ws.id(), &request(vec![e2], "single")).unwrap();
    assert_eq!(store.reads().research_request(ws.id(), &r).unwrap().investigation_id, inv2);
}

// ---------------------------------------------------------------------------
// grant: SPECIMEN (synthetic) and REAL
// ---------------------------------------------------------------------------

#[test]
fn a_grant_in_a_specimen_runs_a_complete_synthetic_campaign() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let c = store.conn();
    let e = ev(c, &inv, 1)[0];
    let n = refs(c, RefKind::Entity, &inv, 1)[0];
    let rel = refs(c, RefKind::Relation, &inv, 1)[0];
    let selection = vec![e, n, rel];
    let (before_ev, before_rel, before_prov) = counters(c, &inv);
    let (r, _) = store.prepare_research(ws, &request(selection.clone(), "g1")).unwrap();
    let d = decision();
    let out = store.grant_research(ws, &r, &d).unwrap();

    // The request is granted, with its grant and campaign.
    let got = store.reads().research_request(ws, &r).unwrap();
    assert_eq!(got.status, "GRANTED");
    assert_eq!(got.decided_by.as_deref(), Some("analyst"));
    assert!(got.decided_at.is_some());
    assert!(got.decision_note.is_none());
    assert!(got.grant_active);
    let grant = got.grant.as_ref().unwrap();
    assert_eq!(grant.id, out.grant);
    assert_eq!(grant.investigation_id, inv);
    assert_eq!(serde_json::to_value(&grant.scope).unwrap(), serde_json::json!({"hosts": ["news.example.org"]}));
    assert_eq!(
        serde_json::to_value(grant.budget).unwrap(),
        serde_json::json!({"max_requests": 10, "max_bytes": 1_000_000})
    );
    assert_eq!(grant.contract_fingerprints, d.contract_fingerprints);
    assert_eq!(grant.decided_by, "analyst");
    assert!(grant.revoked_at.is_none());
    assert_eq!(store.reads().grant(ws, &out.grant).unwrap().id, out.grant);

    // The campaign completed synthetically: three pages.
    let camp = store.reads().campaign(ws, &out.campaign).unwrap();
    assert_eq!(got.campaign.as_ref().map(|x| x.id), Some(out.campaign));
    assert_eq!(camp.grant_id, out.grant);
    assert_eq!(camp.status, "COMPLETED");
    assert!(camp.synthetic);
    assert_eq!((camp.items_total, camp.items_done, camp.items_failed), (3, 3, 0));
    assert_eq!(camp.evidence.len(), SYNTHETIC_PAGES as usize);
    assert!(camp.detail.contains("no network"), "{}", camp.detail);

    let c = store.conn();
    let mut total_bytes = 0;
    for (i, page) in camp.evidence.iter().enumerate() {
        assert_eq!(page.kind(), RefKind::Evidence);
        let (title, content, sha, source, byte_len) = evidence_row(c, page);
        assert_eq!(sha, sha256_hex(content.as_bytes()), "page {i}: SHA-256 is not the content's");
        assert_eq!(byte_len as usize, content.len());
        total_bytes += byte_len;
        assert!(title.contains(&format!("{}/3", i + 1)), "pages out of order: {title}");
        assert!(source.starts_with("https://news.example.org/labfy-synthetic/"), "{source}");
        assert!(source.ends_with(&format!("/{}", i + 1)), "{source}");
        assert!(content.contains("Zorglubinette"), "question missing: {content}");
        assert!(content.contains("pas de réseaux sociaux"), "exclusion missing: {content}");
        // Provenance: producer = campaign; inputs = grant, request, selection.
        let (prov_id, producer, activity): (String, String, String) = c
            .query_row("SELECT id, producer, activity FROM provenance WHERE object_ref = ?1", [page.to_string()], |x| {
                Ok((x.get(0)?, x.get(1)?, x.get(2)?))
            })
            .unwrap();
        assert_eq!(producer, out.campaign.to_string());
        assert_eq!(activity, "synthetic_fetch");
        let inputs: Vec<String> = c
            .prepare("SELECT input_ref FROM provenance_inputs WHERE provenance_id = ?1 ORDER BY position")
            .unwrap()
            .query_map([prov_id], |x| x.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let expected: Vec<String> =
            [out.grant.into(), r].iter().chain(selection.iter()).map(ToString::to_string).collect();
        assert_eq!(inputs, expected);
        // derived_from the selected evidence and entity (not the relation).
        let derived: Vec<String> = c
            .prepare("SELECT dst FROM relations WHERE src = ?1 AND kind = 'derived_from' ORDER BY dst")
            .unwrap()
            .query_map([page.to_string()], |x| x.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut want = vec![e.to_string(), n.to_string()];
        want.sort();
        assert_eq!(derived, want);
    }
    assert_eq!(camp.bytes, total_bytes);

    // Counters moved by exactly what was written, and equal count(*).
    assert_eq!(counters(c, &inv), (before_ev + 3, before_rel + 6, before_prov + 3));
    assert_counters_consistent(c);
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, 53);

    // The full-text index knows the synthetic pages.
    let hits = store.reads().search(ws, &inv, "Zorglubinette", 10).unwrap();
    let mut found: Vec<ObjectRef> = hits.hits.iter().map(|h| h.id).collect();
    found.sort();
    let mut pages = camp.evidence.clone();
    pages.sort();
    assert_eq!(found, pages);
    let accent_free = store.reads().search(ws, &inv, "synthetique campagne", 10).unwrap();
    assert_eq!(accent_free.hits.len(), 3);

    // Audit: decision, campaign creation and completion, newest first.
    let actions = audit_actions(&store, ws, 4);
    assert_eq!(actions, ["campaign.complete", "campaign.create", "grant.decide", "research.prepare"]);
    let audit = store.reads().audit(ws, 4).unwrap();
    assert_eq!(audit[2].object_ref.as_deref(), Some(out.grant.to_string().as_str()));
    assert_eq!(audit[2].actor, "analyst");
    assert_eq!(audit[0].object_ref.as_deref(), Some(out.campaign.to_string().as_str()));
    assert_eq!(audit[0].detail["done"], 3);

    // Not pending any more; the synthetic evidence is immutable like any other.
    assert!(store.reads().pending_research(ws).unwrap().is_empty());
    let err = store
        .conn()
        .execute("UPDATE evidence SET content = 'x' WHERE id = ?1", [camp.evidence[0].id().to_string()])
        .unwrap_err();
    assert!(err.to_string().contains("immutable"), "{err}");
    store.integrity_check().unwrap();
}

#[test]
fn the_synthetic_campaign_stays_inside_its_budget_and_scope() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 3, 50);
    let sel = ev(store.conn(), &inv, 2);
    let prepare = |store: &mut Store, key: &str| store.prepare_research(ws, &request(sel.clone(), key)).unwrap().0;
    let grant_with = |store: &mut Store, key: &str, budget: ResearchBudget, hosts: &[&str]| {
        let r = prepare(store, key);
        let d = GrantDecision {
            budget,
            scope: ResearchScope { hosts: hosts.iter().map(|h| (*h).to_owned()).collect() },
            ..decision()
        };
        let out = store.grant_research(ws, &r, &d).unwrap();
        store.reads().campaign(ws, &out.campaign).unwrap()
    };

    // A reference run with a large budget gives the page sizes.
    let big = ResearchBudget { max_requests: MAX_GRANT_REQUESTS, max_bytes: MAX_GRANT_BYTES };
    let reference = grant_with(&mut store, "ref", big, &["*.example.org", "archive.example.net"]);
    assert_eq!((reference.items_total, reference.items_done), (3, 3));
    let sources: Vec<String> = reference.evidence.iter().map(|e| evidence_row(store.conn(), e).3).collect();
    // Hosts are used in turn; `*.example.org` becomes a sub-domain, never the bare domain.
    assert!(sources[0].starts_with("https://www.example.org/"), "{sources:?}");
    assert!(sources[1].starts_with("https://archive.example.net/"), "{sources:?}");
    assert!(sources[2].starts_with("https://www.example.org/"), "{sources:?}");
    let first_len = evidence_row(store.conn(), &reference.evidence[0]).4;

    // One request allowed: one page.
    let one = grant_with(&mut store, "one", ResearchBudget { max_requests: 1, max_bytes: 1_000_000 }, &["a.example"]);
    assert_eq!((one.items_total, one.items_done, one.items_failed, one.evidence.len()), (1, 1, 0, 1));
    assert_eq!(one.status, "COMPLETED");

    // Two requests allowed: two pages.
    let two = grant_with(&mut store, "two", ResearchBudget { max_requests: 2, max_bytes: 1_000_000 }, &["a.example"]);
    assert_eq!((two.items_total, two.items_done, two.evidence.len()), (2, 2, 2));

    // Exactly the first page's bytes: it fits, the other two do not.
    let exact = grant_with(
        &mut store,
        "exact",
        ResearchBudget { max_requests: 10, max_bytes: first_len as u64 },
        &["*.example.org", "archive.example.net"],
    );
    assert_eq!((exact.items_total, exact.items_done, exact.items_failed), (3, 1, 2));
    assert_eq!(exact.bytes, first_len);
    assert_eq!(exact.evidence.len(), 1);
    assert_eq!(evidence_row(store.conn(), &exact.evidence[0]).1, evidence_row(store.conn(), &reference.evidence[0]).1);

    // One byte: nothing fits, nothing is written, the campaign still ends.
    let before = counters(store.conn(), &inv);
    let none = grant_with(&mut store, "none", ResearchBudget { max_requests: 10, max_bytes: 1 }, &["a.example"]);
    assert_eq!((none.status.as_str(), none.items_total, none.items_done, none.items_failed), ("COMPLETED", 3, 0, 3));
    assert_eq!(none.bytes, 0);
    assert!(none.evidence.is_empty());
    assert_eq!(counters(store.conn(), &inv), before);
    assert_eq!(
        count_with(store.conn(), "SELECT count(*) FROM provenance WHERE producer = ?1", &none.id.to_string()),
        0
    );

    // Budgets are never exceeded.
    let c = store.conn();
    for camp in [&reference, &one, &two, &exact, &none] {
        let sum: i64 = c
            .query_row(
                "SELECT coalesce(sum(e.byte_len), 0) FROM evidence e
                 JOIN provenance p ON p.object_ref = 'evidence:' || e.id WHERE p.producer = ?1",
                [camp.id.to_string()],
                |x| x.get(0),
            )
            .unwrap();
        assert_eq!(sum, camp.bytes, "{}", camp.id);
    }
    assert_counters_consistent(c);
}

#[test]
fn synthetic_content_is_deterministic() {
    // Two identical requests (different keys) in one store, and the same
    // request in a second store built from the same seed.
    let (d1, d2) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let (mut s1, ws1, inv1) = specimen_store(&d1, 7, 50);
    let (mut s2, ws2, inv2) = specimen_store(&d2, 7, 50);
    assert_eq!((ws1, inv1), (ws2, inv2));
    let sel = {
        let c = s1.conn();
        vec![ev(c, &inv1, 1)[0], refs(c, RefKind::Entity, &inv1, 1)[0]]
    };
    let run = |store: &mut Store, ws: Uuid, key: &str, question: &str| {
        let req =
            NewResearchRequest { question: question.into(), call_id: Uuid::now_v7(), ..request(sel.clone(), key) };
        let (r, _) = store.prepare_research(ws, &req).unwrap();
        let out = store.grant_research(ws, &r, &decision()).unwrap();
        let camp = store.reads().campaign(ws, &out.campaign).unwrap();
        camp.evidence
            .iter()
            .map(|e| {
                let (title, content, sha, source, len) = evidence_row(store.conn(), e);
                (title, content, sha, source, len)
            })
            .collect::<Vec<_>>()
    };
    let q = "Quels liens entre ces deux objets ?";
    let a = run(&mut s1, ws1, "key-a", q);
    let b = run(&mut s1, ws1, "key-b", q);
    let c = run(&mut s2, ws2, "key-c", q);
    assert_eq!(a.len(), 3);
    assert_eq!(a, b, "same request, same store: different pages");
    assert_eq!(a, c, "same request, same seed, another store: different pages");
    let other = run(&mut s1, ws1, "key-d", "Une tout autre question ?");
    for (x, y) in a.iter().zip(&other) {
        assert_ne!(x.2, y.2, "another question gave the same page");
        assert_ne!(x.3, y.3, "another question gave the same address");
    }
    assert_counters_consistent(s1.conn());
    assert_counters_consistent(s2.conn());
}

#[test]
fn a_grant_in_a_real_workspace_leaves_its_campaign_pending() {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Dossier Nord", "analyst").unwrap();
    let ws = ws.id();
    let note = NewNote { title: "Piste".into(), content: "Le fil 8812.".into(), source: None, dated_at: None };
    let e = store.add_note(ws, &inv, &note, "analyst").unwrap();
    let (r, _) = store.prepare_research(ws, &request(vec![e], "real")).unwrap();
    let before = counters(store.conn(), &inv);
    let d = GrantDecision { urls: vec!["https://news.example.org/fil-8812".into()], ..decision() };
    let out = store.grant_research(ws, &r, &d).unwrap();
    let camp = store.reads().campaign(ws, &out.campaign).unwrap();
    assert_eq!(camp.status, "PENDING");
    assert!(!camp.synthetic);
    assert_eq!((camp.items_total, camp.items_done, camp.items_failed, camp.bytes), (1, 0, 0, 0));
    assert_eq!(camp.items.len(), 1);
    assert_eq!(camp.items[0].status, ItemStatus::Planned);
    assert!(camp.started_at.is_none() && camp.finished_at.is_none());
    assert!(camp.evidence.is_empty());
    assert_eq!(camp.grant_id, out.grant);
    let got = store.reads().research_request(ws, &r).unwrap();
    assert_eq!(got.status, "GRANTED");
    assert!(got.grant_active);
    assert_eq!(got.campaign.unwrap().status, "PENDING");
    let c = store.conn();
    assert_eq!(counters(c, &inv), before);
    assert_eq!(count(c, "SELECT count(*) FROM evidence"), 1);
    assert_eq!(count(c, "SELECT count(*) FROM provenance WHERE activity = 'synthetic_fetch'"), 0);
    assert_counters_consistent(c);
    let actions = audit_actions(&store, ws, 3);
    assert_eq!(actions, ["campaign.create", "grant.decide", "research.prepare"]);
}

// ---------------------------------------------------------------------------
// decisions
// ---------------------------------------------------------------------------

#[test]
fn a_request_is_decided_once() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let sel = ev(store.conn(), &inv, 1);
    let (granted, _) = store.prepare_research(ws, &request(sel.clone(), "once-1")).unwrap();
    store.grant_research(ws, &granted, &decision()).unwrap();
    let snapshot = count(store.conn(), "SELECT count(*) FROM evidence");
    assert_conflict(store.grant_research(ws, &granted, &decision()), "grant after grant");
    assert_conflict(store.refuse_research(ws, &granted, "non", "analyst"), "refuse after grant");
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM grants"), 1);
    assert_eq!(count(c, "SELECT count(*) FROM campaigns"), 1);
    assert_eq!(count(c, "SELECT count(*) FROM evidence"), snapshot);
    let got = store.reads().research_request(ws, &granted).unwrap();
    assert_eq!(got.status, "GRANTED");
    assert!(got.decision_note.is_none());

    let (refused, _) = store.prepare_research(ws, &request(sel, "once-2")).unwrap();
    store.refuse_research(ws, &refused, "hors sujet", "analyst").unwrap();
    assert_conflict(store.grant_research(ws, &refused, &decision()), "grant after refusal");
    assert_conflict(store.refuse_research(ws, &refused, "encore", "analyst"), "refuse after refusal");
    let got = store.reads().research_request(ws, &refused).unwrap();
    assert_eq!((got.status.as_str(), got.decision_note.as_deref()), ("REFUSED", Some("hors sujet")));
    assert_eq!(count(store.conn(), "SELECT count(*) FROM grants"), 1);
    assert_eq!(count(store.conn(), "SELECT count(*) FROM campaigns"), 1);
}

#[test]
fn a_refusal_is_stored_with_its_reason() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let (ws_b, _) = another_specimen(&mut store, 2, 10);
    let sel = ev(store.conn(), &inv, 1);
    let (r, _) = store.prepare_research(ws, &request(sel.clone(), "refuse")).unwrap();

    // Bounds and scoping first: none of these decides anything.
    assert_invalid(store.refuse_research(ws, &r, "", "analyst"), "empty reason");
    assert_invalid(store.refuse_research(ws, &r, "   ", "analyst"), "blank reason");
    assert_invalid(store.refuse_research(ws, &r, &"x".repeat(MAX_DECISION_NOTE_CHARS + 1), "analyst"), "long reason");
    assert_invalid(store.refuse_research(ws, &r, "non", ""), "empty decided_by");
    assert_invalid(store.refuse_research(ws, &inv, "non", "analyst"), "not a request ref");
    assert_not_found(store.refuse_research(ws_b, &r, "non", "analyst"), "from another workspace");
    let unknown = ObjectRef::new(RefKind::ResearchRequest, Uuid::now_v7());
    assert_not_found(store.refuse_research(ws, &unknown, "non", "analyst"), "unknown request");
    assert_eq!(store.reads().research_request(ws, &r).unwrap().status, "PENDING");

    let reason = "r".repeat(MAX_DECISION_NOTE_CHARS);
    store.refuse_research(ws, &r, &reason, "analyste Marie").unwrap();
    let got = store.reads().research_request(ws, &r).unwrap();
    assert_eq!(got.status, "REFUSED");
    assert_eq!(got.decision_note.as_deref(), Some(reason.as_str()));
    assert_eq!(got.decided_by.as_deref(), Some("analyste Marie"));
    assert!(got.decided_at.is_some());
    assert!(got.grant.is_none() && got.campaign.is_none() && !got.grant_active);
    let audit = store.reads().audit(ws, 1).unwrap();
    assert_eq!(audit[0].action, "research.refuse");
    assert_eq!(audit[0].actor, "analyste Marie");
    assert_eq!(audit[0].object_ref.as_deref(), Some(r.to_string().as_str()));
    assert!(store.reads().pending_research(ws).unwrap().is_empty());
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM grants"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM campaigns"), 0);
}

#[test]
fn a_request_prepared_under_another_contract_becomes_void() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let sel = ev(store.conn(), &inv, 1);
    let (r, _) = store.prepare_research(ws, &request(sel, "void")).unwrap();
    let evidence_before = count(store.conn(), "SELECT count(*) FROM evidence");
    let changed = GrantDecision { current_prepare_fingerprint: fp_b(), ..decision() };
    assert_conflict(store.grant_research(ws, &r, &changed), "grant under another contract");
    let got = store.reads().research_request(ws, &r).unwrap();
    assert_eq!(got.status, "VOID");
    assert!(got.decided_at.is_some());
    assert_eq!(got.decided_by.as_deref(), Some("analyst"));
    assert!(got.decision_note.as_deref().is_some_and(|n| n.contains("another contract")), "{:?}", got.decision_note);
    assert!(got.grant.is_none() && got.campaign.is_none() && !got.grant_active);
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM grants"), 0, "a void request got a grant");
    assert_eq!(count(c, "SELECT count(*) FROM campaigns"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM evidence"), evidence_before);
    let audit = store.reads().audit(ws, 1).unwrap();
    assert_eq!(audit[0].action, "research.void");
    assert_eq!(audit[0].detail["prepared_under"], fp_a());
    assert_eq!(audit[0].detail["current"], fp_b());
    // Void is final: granting under the original contract is still a conflict.
    assert_conflict(store.grant_research(ws, &r, &decision()), "grant after void");
    assert_conflict(store.refuse_research(ws, &r, "non", "analyst"), "refuse after void");
    assert_eq!(count(store.conn(), "SELECT count(*) FROM grants"), 0);
    assert!(store.reads().pending_research(ws).unwrap().is_empty());
}

#[test]
fn invalid_decisions_are_refused_and_decide_nothing() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let sel = ev(store.conn(), &inv, 1);
    let (r, _) = store.prepare_research(ws, &request(sel.clone(), "bad-decisions")).unwrap();
    let hosts = |h: &[&str]| ResearchScope { hosts: h.iter().map(|s| (*s).to_owned()).collect() };
    let many: Vec<String> = (0..=MAX_SCOPE_HOSTS).map(|i| format!("h{i}.example.org")).collect();
    let long_host = format!("{}.org", "a.".repeat(125)); // 254 characters
    assert_eq!(long_host.len(), MAX_HOST_CHARS + 1);
    let d = decision();
    let bad: Vec<(&str, GrantDecision)> = vec![
        ("no hosts", GrantDecision { scope: hosts(&[]), ..d.clone() }),
        ("17 hosts", GrantDecision { scope: ResearchScope { hosts: many.clone() }, ..d.clone() }),
        ("upper case", GrantDecision { scope: hosts(&["Example.org"]), ..d.clone() }),
        ("port", GrantDecision { scope: hosts(&["example.org:443"]), ..d.clone() }),
        ("scheme", GrantDecision { scope: hosts(&["http://x.org"]), ..d.clone() }),
        ("path", GrantDecision { scope: hosts(&["example.org/a"]), ..d.clone() }),
        ("credentials", GrantDecision { scope: hosts(&["user@example.org"]), ..d.clone() }),
        ("star", GrantDecision { scope: hosts(&["*"]), ..d.clone() }),
        ("star tld", GrantDecision { scope: hosts(&["*.org"]), ..d.clone() }),
        ("inner star", GrantDecision { scope: hosts(&["a.*.example.org"]), ..d.clone() }),
        ("localhost", GrantDecision { scope: hosts(&["localhost"]), ..d.clone() }),
        ("empty host", GrantDecision { scope: hosts(&[""]), ..d.clone() }),
        ("trailing dot", GrantDecision { scope: hosts(&["example.org."]), ..d.clone() }),
        ("254 characters", GrantDecision { scope: ResearchScope { hosts: vec![long_host] }, ..d.clone() }),
        (
            "duplicate",
            GrantDecision { scope: hosts(&["a.example.org", "b.example.org", "a.example.org"]), ..d.clone() },
        ),
        ("0 requests", GrantDecision { budget: ResearchBudget { max_requests: 0, ..d.budget }, ..d.clone() }),
        (
            "too many requests",
            GrantDecision { budget: ResearchBudget { max_requests: MAX_GRANT_REQUESTS + 1, ..d.budget }, ..d.clone() },
        ),
        ("0 bytes", GrantDecision { budget: ResearchBudget { max_bytes: 0, ..d.budget }, ..d.clone() }),
        (
            "too many bytes",
            GrantDecision { budget: ResearchBudget { max_bytes: MAX_GRANT_BYTES + 1, ..d.budget }, ..d.clone() },
        ),
        ("0 minutes", GrantDecision { expires_in_minutes: 0, ..d.clone() }),
        ("over 7 days", GrantDecision { expires_in_minutes: MAX_GRANT_MINUTES + 1, ..d.clone() }),
        (
            "fingerprints not an object",
            GrantDecision { contract_fingerprints: serde_json::json!([fp_a()]), ..d.clone() },
        ),
        ("empty decided_by", GrantDecision { decided_by: String::new(), ..d.clone() }),
    ];
    for (what, bad) in &bad {
        assert_invalid(store.grant_research(ws, &r, bad), what);
    }
    assert_invalid(store.grant_research(ws, &inv, &d), "not a request ref");
    let c = store.conn();
    assert_eq!(count(c, "SELECT count(*) FROM grants"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM campaigns"), 0);
    assert_eq!(store.reads().research_request(ws, &r).unwrap().status, "PENDING");

    // The edges themselves are accepted.
    let sixteen: Vec<String> = (0..MAX_SCOPE_HOSTS).map(|i| format!("h{i}.example.org")).collect();
    let edge = GrantDecision {
        scope: ResearchScope { hosts: sixteen },
        budget: ResearchBudget { max_requests: MAX_GRANT_REQUESTS, max_bytes: MAX_GRANT_BYTES },
        expires_in_minutes: MAX_GRANT_MINUTES,
        ..d.clone()
    };
    store.grant_research(ws, &r, &edge).unwrap();
    let (r2, _) = store.prepare_research(ws, &request(sel, "edge-low")).unwrap();
    let low = GrantDecision {
        scope: hosts(&["192.0.2.7"]),
        budget: ResearchBudget { max_requests: 1, max_bytes: 1 },
        expires_in_minutes: 1,
        ..d
    };
    let out = store.grant_research(ws, &r2, &low).unwrap();
    let camp = store.reads().campaign(ws, &out.campaign).unwrap();
    assert_eq!((camp.items_total, camp.items_done, camp.items_failed), (1, 0, 1));
    assert_counters_consistent(store.conn());
}

#[test]
fn host_patterns_are_lower_case_dns_names_or_ipv4() {
    for ok in [
        "example.org",
        "news.example.org",
        "*.example.org",
        "*.example.co.uk",
        "*.news.example.co.uk",
        "co.uk",
        "a-b.example.org",
        "xn--bcher-kva.example",
        "192.0.2.1",
        &format!("{}.example", "a".repeat(63)),
    ] {
        check_host_pattern(ok).unwrap_or_else(|e| panic!("`{ok}` refused: {e}"));
    }
    for bad in [
        "",
        "*",
        "*.",
        "*.org",
        "*.co.uk",
        "*.com.au",
        "*.github.io",
        "*.gouv.fr",
        "*.*.example.org",
        "a.*.example.org",
        "localhost",
        "Example.org",
        "EXAMPLE.ORG",
        "example.org:443",
        "http://x.org",
        "x.org/path",
        "user@x.org",
        "-a.example.org",
        "a-.example.org",
        "a..example.org",
        ".example.org",
        "example.org.",
        "exa mple.org",
        "éxample.org",
        "a_b.example.org",
        &format!("{}.example", "a".repeat(64)),
    ] {
        assert_invalid(check_host_pattern(bad), &format!("host `{bad}`"));
    }
}

/// SPEC F3: an onion service is granted by its v3 address, whose checksum
/// is checked where every scope pattern is; a bad one says why.
#[test]
fn onion_scopes_need_a_v3_address_with_its_checksum() {
    let v3 = "pg6mmjiyjmcrsslvykfwnntlaru7p5svn6y2ymmju6nubxndf4pscryd";
    for ok in [format!("{v3}.onion"), format!("www.{v3}.onion"), format!("*.{v3}.onion")] {
        check_host_pattern(&ok).unwrap_or_else(|e| panic!("`{ok}` refused: {e}"));
    }
    let forged = format!("{}.onion", v3.replacen('p', "q", 1));
    let e = check_host_pattern(&forged).unwrap_err().to_string();
    assert!(e.contains("checksum is wrong"), "{e}");
    let e = check_host_pattern("expyuzz4wqqyqhjn.onion").unwrap_err().to_string();
    assert!(e.contains("v2 addresses are retired"), "{e}");
    assert_invalid(check_host_pattern("*.onion"), "host `*.onion`");
    // A URL under a granted onion scope is normalised like any other.
    let scope = [format!("{v3}.onion")];
    let url = check_campaign_url(&format!("http://{}.ONION/a b", v3.to_uppercase()), &scope);
    assert!(url.is_err(), "spaces are refused: {url:?}");
    let url = check_campaign_url(&format!("http://{}.ONION/a", v3.to_uppercase()), &scope).unwrap();
    assert_eq!(url, format!("http://{v3}.onion/a"));
}

#[test]
fn a_grant_is_active_until_revoked_or_expired() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let sel = ev(store.conn(), &inv, 1);
    let (r, _) = store.prepare_research(ws, &request(sel, "active")).unwrap();
    let out = store.grant_research(ws, &r, &decision()).unwrap();
    let grant = store.reads().grant(ws, &out.grant).unwrap();
    let now = Utc::now();
    assert!(grant_is_active(&grant, now));
    assert!(store.reads().research_request(ws, &r).unwrap().grant_active);
    // It expires 60 minutes after the decision.
    let decided = chrono::DateTime::parse_from_rfc3339(&grant.decided_at).unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(&grant.expires_at).unwrap();
    let lasts = expires - decided;
    assert!((lasts - Duration::minutes(60)).num_seconds().abs() <= 2, "grant lasts {lasts}");
    assert!(grant_is_active(&grant, now + Duration::minutes(59)));
    assert!(!grant_is_active(&grant, now + Duration::minutes(61)));
    assert!(!grant_is_active(&Grant { expires_at: "never".into(), ..grant.clone() }, now));

    store.revoke_grant(ws, &out.grant, "analyst").unwrap();
    let revoked = store.reads().grant(ws, &out.grant).unwrap();
    assert!(!grant_is_active(&revoked, now));
    assert!(!grant_is_active(&revoked, now - Duration::minutes(1)));
    let got = store.reads().research_request(ws, &r).unwrap();
    assert!(!got.grant_active);
    assert_eq!(got.status, "GRANTED");
    assert!(got.grant.unwrap().revoked_at.is_some());
    assert_conflict(store.revoke_grant(ws, &out.grant, "analyst"), "revoke twice");
}

// ---------------------------------------------------------------------------
// database rules and reads
// ---------------------------------------------------------------------------

#[test]
fn the_database_forbids_changing_a_request_other_than_deciding_it_once() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let sel = ev(store.conn(), &inv, 2);
    let (pending, _) = store.prepare_research(ws, &request(sel.clone(), "p")).unwrap();
    let (granted, _) = store.prepare_research(ws, &request(sel.clone(), "g")).unwrap();
    let (refused, _) = store.prepare_research(ws, &request(sel, "r")).unwrap();
    store.grant_research(ws, &granted, &decision()).unwrap();
    store.refuse_research(ws, &refused, "non", "analyst").unwrap();
    let c = store.conn();
    let forbidden = |sql: &str, r: &ObjectRef| {
        let err = c.execute(sql, [r.id().to_string()]).unwrap_err();
        assert!(err.to_string().contains("decided once"), "{sql} on {r}: {err}");
    };
    // Content never changes, pending or decided.
    for r in [&pending, &granted, &refused] {
        forbidden("UPDATE research_requests SET question = 'autre' WHERE id = ?1", r);
        forbidden("UPDATE research_requests SET selection = '[]' WHERE id = ?1", r);
        forbidden("UPDATE research_requests SET exclusions = '[\"x\"]' WHERE id = ?1", r);
        forbidden("UPDATE research_requests SET contract_fingerprint = ?1 || '' WHERE id = ?1", r);
        forbidden("UPDATE research_requests SET idempotency_key = 'other' WHERE id = ?1", r);
        forbidden("UPDATE research_requests SET requested_by = 'agent:other' WHERE id = ?1", r);
        forbidden("UPDATE research_requests SET created_at = '2000-01-01T00:00:00Z' WHERE id = ?1", r);
    }
    // A decision is never changed or undone.
    forbidden(
        "UPDATE research_requests SET status = 'PENDING', decided_at = NULL, grant_id = NULL WHERE id = ?1",
        &granted,
    );
    forbidden("UPDATE research_requests SET decided_by = 'mallory' WHERE id = ?1", &granted);
    forbidden("UPDATE research_requests SET decision_note = 'autre' WHERE id = ?1", &refused);
    forbidden("UPDATE research_requests SET status = 'VOID' WHERE id = ?1", &refused);
    // Status and decision columns agree, by CHECK.
    let err = c
        .execute(
            "UPDATE research_requests SET status = 'GRANTED', decided_at = 'x' WHERE id = ?1",
            [pending.id().to_string()],
        )
        .unwrap_err();
    assert!(err.to_string().contains("CHECK"), "{err}");
    let err = c
        .execute("UPDATE research_requests SET status = 'REFUSED' WHERE id = ?1", [pending.id().to_string()])
        .unwrap_err();
    assert!(err.to_string().contains("CHECK"), "{err}");
    // Nothing changed.
    let got = store.reads().research_request(ws, &granted).unwrap();
    assert_eq!((got.status.as_str(), got.decided_by.as_deref()), ("GRANTED", Some("analyst")));
    assert_eq!(store.reads().research_request(ws, &refused).unwrap().decision_note.as_deref(), Some("non"));
    assert_eq!(store.reads().research_request(ws, &pending).unwrap().status, "PENDING");
    // The grant behind it is immutable too.
    let err = c.execute("UPDATE grants SET scope = '{\"hosts\":[\"*\"]}'", []).unwrap_err();
    assert!(err.to_string().contains("immutable"), "{err}");
}

#[test]
fn research_reads_are_bounded_ordered_and_scoped() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let (ws_b, inv_b) = another_specimen(&mut store, 2, 10);
    let sel = ev(store.conn(), &inv, 1);
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(store.prepare_research(ws, &request(sel.clone(), &format!("list-{i}"))).unwrap().0);
    }
    store.refuse_research(ws, &made[1], "non", "analyst").unwrap();
    let r = store.reads();

    // Pending: oldest first, decided ones left out.
    let pending: Vec<ObjectRef> = r.pending_research(ws).unwrap().into_iter().map(|x| x.id).collect();
    assert_eq!(pending, vec![made[0], made[2], made[3], made[4]]);
    assert!(r.pending_research(ws_b).unwrap().is_empty());

    // Per investigation: all of them, bounded by the limit.
    let listed: Vec<ObjectRef> = r.research_requests(ws, &inv, 100).unwrap().into_iter().map(|x| x.id).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    let mut want = made.clone();
    want.sort();
    assert_eq!(sorted, want);
    assert_eq!(r.research_requests(ws, &inv, 2).unwrap().len(), 2);
    assert_eq!(r.research_requests(ws, &inv, MAX_RESEARCH_LIST).unwrap().len(), 5);
    assert_invalid(r.research_requests(ws, &inv, 0), "limit 0");
    assert_invalid(r.research_requests(ws, &inv, MAX_RESEARCH_LIST + 1), "limit 101");
    assert_invalid(r.research_requests(ws, &sel[0], 10), "not an investigation");
    assert_not_found(r.research_requests(ws_b, &inv, 10), "investigation of another workspace");
    assert!(r.research_requests(ws_b, &inv_b, 10).unwrap().is_empty());

    // One request: kind checked, workspace scoped.
    assert_eq!(r.research_request(ws, &made[0]).unwrap().id, made[0]);
    assert_invalid(r.research_request(ws, &sel[0]), "not a request ref");
    assert_not_found(r.research_request(ws_b, &made[0]), "request of another workspace");
    assert_not_found(
        r.research_request(ws, &ObjectRef::new(RefKind::ResearchRequest, Uuid::now_v7())),
        "unknown request",
    );

    // Campaign reads and decisions are scoped the same way.
    let out = store.grant_research(ws, &made[0], &decision()).unwrap();
    let r = store.reads();
    assert!(r.campaign(ws, &out.campaign).is_ok());
    assert_not_found(r.campaign(ws_b, &out.campaign), "campaign of another workspace");
    assert_not_found(r.campaign(ws, &CampaignRef::new(Uuid::now_v7())), "unknown campaign");
    assert_not_found(store.grant_research(ws_b, &made[2], &decision()), "grant from another workspace");
    assert_eq!(store.reads().research_request(ws, &made[2]).unwrap().status, "PENDING");
    assert_eq!(count(store.conn(), "SELECT count(*) FROM grants"), 1);
}

/// The provenance read model walks a synthetic page back to its campaign,
/// grant, request and selection, and every reference it stores parses back.
#[test]
fn synthetic_pages_trace_back_through_the_provenance_read_model() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 50);
    let selection = ev(store.conn(), &inv, 2);
    let (r, _) = store.prepare_research(ws, &request(selection.clone(), "trace")).unwrap();
    assert_eq!(r.to_string().parse::<ObjectRef>().unwrap(), r, "a research request reference does not parse back");
    let out = store.grant_research(ws, &r, &decision()).unwrap();
    let camp = store.reads().campaign(ws, &out.campaign).unwrap();
    for page in &camp.evidence {
        let trace = store.reads().provenance_trace(ws, page, 1).unwrap();
        assert_eq!(trace.records[0].producer, out.campaign.to_string());
        assert_eq!(trace.records[0].activity, "synthetic_fetch");
        assert_eq!(trace.records[0].inputs.len(), 2 + selection.len());
    }
}

/// `research_requests` promises newest first. Requests prepared within the
/// same millisecond share `created_at`; the tie-break must keep newest first.
#[test]
fn research_requests_are_listed_newest_first() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 1, 20);
    let sel = ev(store.conn(), &inv, 1);
    let mut made = Vec::new();
    for i in 0..30 {
        made.push(store.prepare_research(ws, &request(sel.clone(), &format!("order-{i}"))).unwrap().0);
    }
    let listed: Vec<ObjectRef> =
        store.reads().research_requests(ws, &inv, 100).unwrap().into_iter().map(|x| x.id).collect();
    let mut newest_first = made.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);
    let pending: Vec<ObjectRef> = store.reads().pending_research(ws).unwrap().into_iter().map(|x| x.id).collect();
    assert_eq!(pending, made);
}
