//! Import (SPEC C2): one evidence item per distinct bytes, one provenance
//! record per import, embedded documents as children, refusals in the
//! report, extraction in the same transaction.

use labfy_core::{ObjectRef, RefKind};
use labfy_parse::parse;
use tempfile::TempDir;

use crate::blobs::BlobStore;
use crate::tests::assert_derived_consistent;
use crate::*;

fn real(dir: &TempDir) -> (Store, BlobStore, uuid::Uuid, ObjectRef) {
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Alpha", "test").unwrap();
    (store, BlobStore::open(dir.path()).unwrap(), ws.id(), inv)
}

fn import(
    store: &mut Store,
    blobs: &BlobStore,
    ws: uuid::Uuid,
    job: &ObjectRef,
    name: &str,
    bytes: &[u8],
    parent: Option<&ObjectRef>,
) -> ImportOutcome {
    let blob = blobs.put(&mut &bytes[..], 1 << 20).unwrap();
    let parsed = parse(bytes, name);
    store
        .import_file(ws, job, &ImportedFile { name, path: name, blob: &blob, parsed: &parsed, parent }, "analyste")
        .unwrap()
}

#[test]
fn the_same_bytes_twice_are_one_evidence_with_two_provenance_records() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, Some(3), false, "analyste").unwrap();
    let text = b"Contact : jean@alpha.example, IBAN FR76 3000 6000 0112 3456 7890 189";
    let a = import(&mut store, &blobs, ws, &job, "a.txt", text, None);
    let b = import(&mut store, &blobs, ws, &job, "copie/a.txt", text, None);
    assert!(matches!(a, ImportOutcome::Imported(_)), "{a:?}");
    assert_eq!(b, ImportOutcome::Duplicate(a.evidence().to_owned()));
    store.import_refused(ws, &job, "bad\u{1b}name", "file name contains control characters").unwrap();
    let stats = store.finish_import(ws, &job, None, "analyste").unwrap();
    assert_eq!((stats.files, stats.imported, stats.duplicates, stats.refused), (3, 1, 1, 1));
    assert_eq!(stats.bytes, 2 * text.len() as u64);

    let reads = store.reads();
    let records = reads.imports_of(ws, a.evidence()).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].original_path, "copie/a.txt");
    assert_eq!(records[0].sha256, sha256_hex(text));
    let ev = reads.evidence_summary(ws, a.evidence()).unwrap();
    assert!(ev.original);
    assert_eq!(ev.imports.len(), 2);
    assert_eq!(ev.sha256, sha256_hex(text), "an imported item's hash is its bytes'");
    let report = reads.import_report(ws, &job, None, 10).unwrap();
    assert_eq!(report.iter().map(|l| l.outcome.as_str()).collect::<Vec<_>>(), ["imported", "duplicate", "refused"]);
    assert_eq!(report[2].path, "bad\u{fffd}name", "a control character is not echoed");
    let job_row = reads.job(ws, &job).unwrap();
    assert_eq!((job_row.status.as_str(), job_row.progress), ("SUCCEEDED", 1.0));
    // Extraction ran with the import: the address and the IBAN are entities.
    let ents: Vec<String> = store
        .conn
        .prepare("SELECT kind || ':' || name FROM entities ORDER BY 1")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(ents.contains(&"email:jean@alpha.example".to_owned()), "{ents:?}");
    assert!(ents.iter().any(|e| e.starts_with("iban:FR76")), "{ents:?}");
    assert_derived_consistent(&store.conn);
    assert!(store.import_refused(ws, &job, "x", "y").is_err(), "a finished job takes no more files");
}

#[test]
fn an_attachment_is_a_child_evidence_derived_from_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, None, false, "analyste").unwrap();
    let mail = b"From: a@alpha.example\r\nSubject: Facture\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
Content-Type: text/plain\r\n\r\nci-joint\r\n--b\r\nContent-Type: text/plain\r\nContent-Disposition: attachment; filename=f.txt\r\n\r\n\
paye par 198.51.100.7\r\n--b--\r\n";
    let parsed = parse(mail, "m.eml");
    assert_eq!(parsed.children.len(), 1);
    let parent = import(&mut store, &blobs, ws, &job, "m.eml", mail, None);
    let child = &parsed.children[0];
    let c = import(&mut store, &blobs, ws, &job, &child.name, &child.bytes, Some(parent.evidence()));
    let stats = store.finish_import(ws, &job, None, "analyste").unwrap();
    assert_eq!((stats.files, stats.embedded), (1, 1));
    let n = store.reads().neighbors(ws, c.evidence(), 10).unwrap();
    assert!(n.neighbors.iter().any(|x| x.relation.kind == "derived_from" && x.node.id == *parent.evidence()), "{n:?}");
    assert_eq!(store.reads().evidence_summary(ws, parent.evidence()).unwrap().title, "Facture");
    assert_derived_consistent(&store.conn);
}

#[test]
fn bad_names_and_foreign_jobs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, None, false, "analyste").unwrap();
    let blob = blobs.put(&mut &b"x"[..], 10).unwrap();
    let parsed = parse(b"x", "x.txt");
    for (name, path) in [("x.txt", "../x.txt"), ("a\nb", "a"), ("", "a")] {
        let f = ImportedFile { name, path, blob: &blob, parsed: &parsed, parent: None };
        assert!(matches!(store.import_file(ws, &job, &f, "t"), Err(StoreError::Invalid(_))), "{name:?} {path:?}");
    }
    let other = ObjectRef::new(RefKind::Job, uuid::Uuid::now_v7());
    assert!(store.import_refused(ws, &other, "x", "y").is_err());
    assert!(
        store
            .start_import(ws, &ObjectRef::new(RefKind::Investigation, uuid::Uuid::now_v7()), None, false, "t")
            .is_err()
    );
}

#[test]
fn an_export_carries_the_original_bytes_and_verify_checks_them() {
    use crate::bundle::{BundleError, BundleWriter, verify};
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, None, false, "analyste").unwrap();
    let page = b"<html><head><title>Alpha</title></head><body>Voir alpha.example</body></html>";
    import(&mut store, &blobs, ws, &job, "page.html", page, None);
    import(&mut store, &blobs, ws, &job, "image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR binary", None);
    store.finish_import(ws, &job, None, "analyste").unwrap();
    drop(store);
    let out = dir.path().join("bundle");
    let ro = ReadOnlyStore::open(dir.path()).unwrap();
    let mut w = BundleWriter::create(&out).unwrap();
    let header = ro.export(&inv, &mut w).unwrap();
    let fp = w.finish(header).unwrap().fingerprint;
    verify(&out, Some(&fp)).expect("a fresh export verifies");
    let original = out.join("blobs").join(sha256_hex(page));
    assert_eq!(std::fs::read(&original).unwrap(), page);
    assert_eq!(std::fs::read_to_string(out.join("imports.jsonl")).unwrap().lines().count(), 2);
    // One byte of the original changed: verify names the file.
    let mut bytes = page.to_vec();
    bytes[1] ^= 0x20;
    std::fs::write(&original, &bytes).unwrap();
    let err = verify(&out, None).unwrap_err();
    assert!(matches!(&err, BundleError::HashMismatch { path, .. } if path.starts_with("blobs/")), "{err}");
}

/// SPEC K3: the jobs a dead server left running (an upload, an export)
/// end `FAILED` with the reason at the next start, an import's files kept;
/// a job of another actor (a `labfy import` that may still run) and a
/// finished one are left as they are; settling twice settles nothing more.
#[test]
fn a_dead_servers_imports_and_exports_are_ended_with_the_reason_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let served = store.start_import(ws, &inv, Some(2), false, "analyste").unwrap();
    let kept = import(&mut store, &blobs, ws, &served, "a.txt", b"Une page avant le kill", None);
    let cli = store.start_import(ws, &inv, None, false, "labfy import").unwrap();
    let done = store.start_import(ws, &inv, None, false, "analyste").unwrap();
    store.finish_import(ws, &done, None, "analyste").unwrap();
    let export = store.start_job(ws, &inv, crate::EXPORT_JOB, "analyste").unwrap();

    let why = "interrupted: the server stopped during the import";
    let settled = store.settle_interrupted_jobs("analyste", why).unwrap();
    assert_eq!(settled, [served, export]);
    let reads = store.reads();
    let row = reads.job(ws, &served).unwrap();
    assert_eq!(row.status, "FAILED");
    assert!(row.detail.contains(why), "{}", row.detail);
    assert!(reads.evidence_summary(ws, kept.evidence()).is_ok(), "the file recorded stays");
    assert_eq!(reads.job(ws, &cli).unwrap().status, "RUNNING", "another actor's job is not the server's");
    assert_eq!(reads.job(ws, &done).unwrap().status, "SUCCEEDED");
    let row = store.reads().job(ws, &export).unwrap();
    assert_eq!((row.status.as_str(), row.detail.contains(why)), ("FAILED", true), "{}", row.detail);
    assert!(store.settle_interrupted_jobs("analyste", why).unwrap().is_empty());
    assert!(store.import_refused(ws, &served, "x", "y").is_err(), "an ended job takes no more files");
}

/// SPEC I5: a SPECIMEN workspace (synthetic data) takes real files only
/// when the analyst says so; refused, nothing is started.
#[test]
fn a_specimen_workspace_takes_real_files_only_when_asked() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = crate::tests::specimen(&dir, 7, 50);
    let jobs = |store: &Store| -> i64 {
        store.conn().query_row("SELECT count(*) FROM jobs WHERE kind = ?1", [IMPORT_JOB], |r| r.get(0)).unwrap()
    };
    let before = jobs(&store);
    let refused = store.start_import(ws, &inv, Some(1), false, "analyste").unwrap_err();
    assert!(matches!(&refused, StoreError::Conflict(m) if m == SPECIMEN_IMPORT_REFUSED), "{refused:?}");
    assert_eq!(jobs(&store), before, "nothing started");
    store.start_import(ws, &inv, Some(1), true, "analyste").unwrap();
    assert_eq!(jobs(&store), before + 1);
}

/// SPEC I1: `labfy import` records many files to a transaction. A file
/// refused midway leaves nothing of itself and the batch goes on; a batch
/// dropped uncommitted (the process killed) leaves nothing at all; a file
/// known by its hash is recorded as a duplicate without being read, with
/// the first import's reading.
#[test]
fn a_batch_commits_its_files_together_and_a_known_file_is_not_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, None, false, "labfy import").unwrap();
    let put = |bytes: &[u8]| blobs.put(&mut &bytes[..], 1 << 20).unwrap();
    let a = b"Note A : jean@alpha.example".as_slice();
    let (blob_a, parsed_a) = (put(a), parse(a, "a.txt"));
    let file = |name: &'static str, blob, parsed| ImportedFile { name, path: name, blob, parsed, parent: None };

    // Dropped: nothing.
    {
        let mut batch = store.import_batch(ws, &job, "labfy import").unwrap();
        batch.record(&file("a.txt", &blob_a, &parsed_a)).unwrap();
        assert_eq!(batch.len(), 1);
    }
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, 0, "a dropped batch leaves nothing");

    let mut batch = store.import_batch(ws, &job, "labfy import").unwrap();
    // A file undone whole leaves nothing, and the batch goes on.
    batch.begin_file().unwrap();
    batch.record(&file("a.txt", &blob_a, &parsed_a)).unwrap();
    batch.end_file(false).unwrap();
    assert_eq!(batch.len(), 0);
    batch.begin_file().unwrap();
    let first = batch.record(&file("a.txt", &blob_a, &parsed_a)).unwrap();
    batch.end_file(true).unwrap();
    assert!(matches!(first, ImportOutcome::Imported(_)), "undone, then imported anew: {first:?}");
    let bad = batch.record(&file("bad\u{7}.txt", &blob_a, &parsed_a));
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    batch.refuse("bad\u{7}.txt", "file name contains control characters").unwrap();
    let b = b"Note B".as_slice();
    assert_eq!(batch.record_known("b.txt", "b.txt", &put(b)).unwrap(), None, "unknown bytes are to be read");
    let again = batch.record_known("copie/a.txt", "copie/a.txt", &blob_a).unwrap();
    assert_eq!(again, Some(ImportOutcome::Duplicate(*first.evidence())));
    assert_eq!(batch.len(), 3);
    batch.commit().unwrap();

    let stats = store.finish_import(ws, &job, None, "labfy import").unwrap();
    assert_eq!((stats.files, stats.imported, stats.duplicates, stats.refused), (3, 1, 1, 1));
    let records = store.reads().imports_of(ws, first.evidence()).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].original_path, "copie/a.txt");
    assert_eq!((&records[1].format, &records[1].encoding), (&records[0].format, &records[0].encoding));
    assert_eq!(records[1].metadata, records[0].metadata, "the first import's reading");
    let report = store.reads().import_report(ws, &job, None, 10).unwrap();
    assert_eq!(report.iter().map(|l| l.outcome.as_str()).collect::<Vec<_>>(), ["imported", "refused", "duplicate"]);
    assert!(store.reads().evidence_hashes(ws, &inv).unwrap().contains(&blob_a.sha256));
    assert_derived_consistent(&store.conn);
}

/// SPEC I1: what an import asks for each file is answered by an index on
/// what the file names, never by a walk over the investigation (an import
/// would slow as the investigation grows: it did, for embedded documents).
#[test]
fn an_import_asks_nothing_that_walks_the_investigation() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, _, _) = real(&dir);
    let plan = |sql: &str, args: usize| -> String {
        let marks: Vec<String> = (1..=args).map(|i| format!("x{i}")).collect();
        let mut stmt = store.conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = stmt.query_map(rusqlite::params_from_iter(marks), |r| r.get::<_, String>(3)).unwrap();
        rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
    };
    let derived = plan(crate::import::DERIVED_EXISTS, 3);
    assert!(derived.contains("relations_src (src=? AND kind=?)"), "{derived}");
    let same = plan("SELECT id FROM evidence WHERE investigation_id = ?1 AND sha256 = ?2 ORDER BY seq LIMIT 1", 2);
    assert!(same.contains("evidence_sha256"), "{same}");
}

/// SPEC A4: a message's header states who sent it and who received it —
/// the message `sent_by` its sender's address, `sent_to` and `copied_to`
/// its recipients'; a display name's person `uses_email` its address, with
/// provenance from the message. The same text in a note states nothing,
/// and a rescan makes the same relations, not more.
#[test]
fn a_messages_header_becomes_typed_relations() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, None, false, "analyste").unwrap();
    let mail = "Received: from mx.cabinet.example (mx.cabinet.example [198.51.100.7]) by mx.exemple.example\r\n\
                Received: from [10.0.0.5] (pc-paul [203.0.113.44]) by mx.cabinet.example with ESMTPSA\r\n\
                From: Paul Durand <paul@durand.example>\r\nTo: banque@exemple.example, \
                Hélène Marchetti <h.marchetti@cabinet.example>\r\nCc: Jérôme Lemaître <jerome@lemaitre.example>\r\n\
                Subject: Virement\r\n\r\nVoir aussi support@durand.example.\r\n";
    let m = import(&mut store, &blobs, ws, &job, "m.eml", mail.as_bytes(), None);
    store.finish_import(ws, &job, None, "analyste").unwrap();
    let typed = |store: &Store| -> Vec<(String, String, String)> {
        store
            .conn
            .prepare(
                "SELECT r.kind, coalesce((SELECT name FROM entities WHERE 'entity:' || id = r.src), r.src),
                        (SELECT name FROM entities WHERE 'entity:' || id = r.dst)
                 FROM relations r WHERE r.kind IN ('sent_by', 'sent_to', 'copied_to', 'sent_from', 'uses_email')
                 ORDER BY 1, 3",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let msg = m.evidence().to_string();
    let expected = vec![
        ("copied_to".to_owned(), msg.clone(), "jerome@lemaitre.example".to_owned()),
        ("sent_by".into(), msg.clone(), "paul@durand.example".into()),
        ("sent_from".into(), msg.clone(), "203.0.113.44".into()),
        ("sent_to".into(), msg.clone(), "banque@exemple.example".into()),
        ("sent_to".into(), msg.clone(), "h.marchetti@cabinet.example".into()),
        ("uses_email".into(), "Hélène Marchetti".into(), "h.marchetti@cabinet.example".into()),
        ("uses_email".into(), "Jérôme Lemaître".into(), "jerome@lemaitre.example".into()),
        ("uses_email".into(), "Paul Durand".into(), "paul@durand.example".into()),
    ];
    assert_eq!(typed(&store), expected, "the body's address has no role");
    let uses: String = store
        .conn
        .query_row(
            "SELECT i.input_ref FROM relations r JOIN provenance p ON p.object_ref = 'relation:' || r.id
             JOIN provenance_inputs i ON i.provenance_id = p.id WHERE r.kind = 'uses_email' LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(uses, msg, "a person's address is known from this message");
    assert_derived_consistent(&store.conn);

    // The same lines written in a note are a note's text: no role.
    store
        .add_note(
            ws,
            &inv,
            &NewNote { title: "n".into(), content: mail.into(), source: None, dated_at: None },
            "analyste",
        )
        .unwrap();
    assert_eq!(typed(&store), expected);
    // Scanned again (a new extractor version): the same relations.
    store.conn.execute("UPDATE extraction_state SET version = 1", []).unwrap();
    let (job, _) = store.start_extraction(ws, &inv, "analyste").unwrap();
    while !store.extraction_step(ws, &job, 10).unwrap().done {}
    assert_eq!(typed(&store), expected);
    assert_derived_consistent(&store.conn);
}

/// Issue 44, item 6: the timeline places a message at its `Date:`, anything
/// else at its collection; oldest or newest first, one entity's pieces
/// alone, a page at a time.
#[test]
fn the_timeline_orders_pieces_by_what_they_date() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, blobs, ws, inv) = real(&dir);
    let job = store.start_import(ws, &inv, None, false, "analyste").unwrap();
    let mail = |date: &str, from: &str, subject: &str| {
        format!("From: {from}\r\nDate: {date}\r\nSubject: {subject}\r\n\r\nTexte.\r\n").into_bytes()
    };
    let late = import(
        &mut store,
        &blobs,
        ws,
        &job,
        "b.eml",
        &mail("Mon, 3 Feb 2025 09:14:00 +0100", "b@beta.example", "Second"),
        None,
    );
    let early = import(
        &mut store,
        &blobs,
        ws,
        &job,
        "a.eml",
        &mail("Sun, 5 Jan 2025 18:00:00 +0000", "a@alpha.example", "Premier"),
        None,
    );
    store.finish_import(ws, &job, None, "analyste").unwrap();
    let note = store
        .add_note(
            ws,
            &inv,
            &NewNote { title: "Note".into(), content: "Aujourd'hui.".into(), source: None, dated_at: None },
            "analyste",
        )
        .unwrap();
    // A note of an event, placed at its date (between the two messages);
    // a date that is none refused.
    let event = NewNote {
        title: "Rendez-vous".into(),
        content: "Vu à Lyon.".into(),
        source: None,
        dated_at: Some("2025-01-20T10:30:00+01:00".into()),
    };
    let event = store.add_note(ws, &inv, &event, "analyste").unwrap();
    let bad = NewNote { title: "x".into(), content: "x".into(), source: None, dated_at: Some("mardi".into()) };
    assert!(
        matches!(store.add_note(ws, &inv, &bad, "analyste"), Err(StoreError::Invalid(m)) if m.contains("not a date"))
    );
    let reads = store.reads();
    let page = |q: TimelineQuery| reads.timeline(ws, &inv, &q).unwrap();
    let all = page(TimelineQuery { limit: 10, ..TimelineQuery::default() });
    let order: Vec<ObjectRef> = all.items.iter().map(|i| i.id).collect();
    assert_eq!(order, [*early.evidence(), event, *late.evidence(), note], "{all:?}");
    assert_eq!(all.items[0].date, "2025-01-05 18:00:00");
    assert_eq!((all.items[1].date.as_str(), all.items[1].date_kind), ("2025-01-20 09:30:00", "event"));
    assert_eq!(all.items[2].date, "2025-02-03 08:14:00", "in UTC");
    assert_eq!((all.items[0].date_kind, all.items[3].date_kind), ("document", "collected"));
    let newest = page(TimelineQuery { newest_first: true, limit: 10, ..TimelineQuery::default() });
    assert_eq!(
        newest.items.iter().map(|i| i.id).collect::<Vec<_>>(),
        [note, *late.evidence(), event, *early.evidence()]
    );
    // One entity's pieces.
    let alpha: String = store
        .conn
        .query_row("SELECT id FROM entities WHERE kind = 'email' AND name = 'a@alpha.example'", [], |r| r.get(0))
        .unwrap();
    let alpha: ObjectRef = format!("entity:{alpha}").parse().unwrap();
    let reads = store.reads();
    let only = reads
        .timeline(ws, &inv, &TimelineQuery { entity: Some(alpha), limit: 10, ..TimelineQuery::default() })
        .unwrap();
    assert_eq!(only.items.iter().map(|i| i.id).collect::<Vec<_>>(), [*early.evidence()]);
    // A page at a time.
    let first = reads.timeline(ws, &inv, &TimelineQuery { limit: 3, ..TimelineQuery::default() }).unwrap();
    assert_eq!(first.items.len(), 3);
    let rest = reads
        .timeline(ws, &inv, &TimelineQuery { limit: 3, after: first.next.clone(), ..TimelineQuery::default() })
        .unwrap();
    assert_eq!(rest.items.iter().map(|i| i.id).collect::<Vec<_>>(), [note]);
    assert!(rest.next.is_none());
    assert!(reads.timeline(ws, &inv, &TimelineQuery { limit: 0, ..TimelineQuery::default() }).is_err());
    assert!(
        reads.timeline(ws, &inv, &TimelineQuery { entity: Some(inv), limit: 5, ..TimelineQuery::default() }).is_err()
    );
}
