//! Bundles received from another appliance (SPEC I4): a REAL case with a
//! campaign, fetched pages, their originals and egress's own fetch log,
//! exported by one data directory, is received by another whole — the same
//! ids and text, the fetches, the sender's audit log and egress's ledger
//! kept — read-only, once; a bundle that fails verification, or names an
//! investigation held here, writes nothing.

use std::fs;
use std::path::Path;

use tempfile::TempDir;

use crate::bundle::{BundleError, MANIFEST, verify};
use crate::bundle_tests::{fetched_case, forge_manifest};
use crate::*;

fn count(store: &Store, sql: &str, inv: &ObjectRef) -> i64 {
    store.conn.query_row(sql, [inv.id().to_string()], |r| r.get(0)).unwrap()
}

fn lines(path: &Path) -> i64 {
    fs::read_to_string(path).unwrap().lines().count() as i64
}

#[test]
fn a_bundle_from_another_appliance_is_received_whole_read_only_and_once() {
    let case = fetched_case();
    let (bundle, fingerprint) = case.export("bundle", true);
    let here = TempDir::new().unwrap();
    let mut store = Store::open(here.path()).unwrap();
    let r = store.receive_bundle(&bundle, Some(&fingerprint), None, "test").unwrap();
    assert!(!r.already);
    assert_eq!(r.investigation, case.inv, "the sender's ids are kept");
    assert_eq!(r.fingerprint, fingerprint);
    let v = r.verified.as_ref().unwrap();
    assert!(matches!(v.fetched, crate::bundle::FetchedCheck::Matched { pieces: 2, .. }), "{:?}", v.fetched);

    // Whole: every row, the text of each piece, its original bytes.
    let sender = Store::open(case.dir.path()).unwrap();
    let ws = r.workspace.id();
    for sql in [
        "SELECT count(*) FROM evidence WHERE investigation_id = ?1",
        "SELECT count(*) FROM entities WHERE investigation_id = ?1",
        "SELECT count(*) FROM relations WHERE investigation_id = ?1",
        "SELECT count(*) FROM provenance WHERE investigation_id = ?1",
        "SELECT count(*) FROM grants WHERE investigation_id = ?1",
        "SELECT count(*) FROM campaigns WHERE investigation_id = ?1",
        "SELECT count(*) FROM research_requests WHERE investigation_id = ?1",
        "SELECT count(*) FROM fetch_provenance f JOIN provenance p ON p.id = f.provenance_id WHERE p.investigation_id = ?1",
        "SELECT count(*) FROM mentions m JOIN evidence e ON e.id = m.evidence_id WHERE e.investigation_id = ?1",
    ] {
        assert_eq!(count(&store, sql, &case.inv), count(&sender, sql, &case.inv), "{sql}");
    }
    for piece in &case.pieces {
        let text = |s: &Store| -> (String, String) {
            s.conn
                .query_row("SELECT content, sha256 FROM evidence WHERE id = ?1", [piece.id().to_string()], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap()
        };
        assert_eq!(text(&store), text(&sender));
        let (ours, theirs) =
            (store.reads().evidence_summary(ws, piece).unwrap(), sender.reads().evidence_summary(ws, piece).unwrap());
        assert_eq!(ours.fetch, theirs.fetch, "its fetch provenance");
        let (sha, _, _) = store.reads().blob_of(ws, piece).unwrap().expect("the original kept");
        let blobs = crate::blobs::BlobStore::open(here.path()).unwrap();
        assert!(blobs.open_blob(&sha).is_ok(), "the original bytes are in this blob store");
    }
    let hits = store.reads().search(ws, &case.inv, "ministre", 10).unwrap();
    assert!(!hits.hits.is_empty(), "the received text is searchable");
    // What the schema has no table for is kept as it came.
    let kept = |source: &str| -> i64 {
        store
            .conn
            .query_row(
                "SELECT count(*) FROM received_records WHERE investigation_id = ?1 AND source = ?2",
                rusqlite::params![case.inv.id().to_string(), source],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(kept("audit"), lines(&bundle.join("audit.jsonl")));
    assert_eq!(kept("egress_fetch"), lines(&bundle.join("egress/fetch_log.jsonl")));
    assert_eq!(kept("egress_grant"), 1);
    let listed = store.reads().investigations(ws).unwrap();
    let mark = listed[0].received.as_ref().expect("marked received");
    assert_eq!(mark.fingerprint, fingerprint);
    let overview = store.reads().overview(ws, &case.inv).unwrap();
    assert_eq!(overview.investigation.received.as_ref(), Some(mark));
    assert_eq!(
        overview.counts.evidence,
        count(&sender, "SELECT count(*) FROM evidence WHERE investigation_id = ?1", &case.inv)
    );

    // Read-only: a note, an entity, an extraction, an import are refused
    // with the reason; nothing changed.
    let before = count(&store, "SELECT count(*) FROM evidence WHERE investigation_id = ?1", &case.inv);
    let note = NewNote { title: "Ajout".into(), content: "texte".into(), source: None, dated_at: None };
    for refused in [
        store.add_note(ws, &case.inv, &note, "analyst").map(drop),
        store.create_entity(ws, &case.inv, &NewEntity { kind: "person".into(), name: "X".into() }, "a").map(drop),
        store.start_extraction(ws, &case.inv, "analyst").map(drop),
        store.start_import(ws, &case.inv, None, false, "analyst").map(drop),
    ] {
        match refused {
            Err(StoreError::Conflict(why)) => assert!(why.contains("read-only"), "{why}"),
            other => panic!("a write into a received investigation: {other:?}"),
        }
    }
    assert_eq!(count(&store, "SELECT count(*) FROM evidence WHERE investigation_id = ?1", &case.inv), before);

    // This appliance's sweeps leave it alone: its campaign still running
    // there is not resumed here, its grant not revoked, its request not
    // voided.
    assert!(store.reads().unfinished_real_campaigns().unwrap().is_empty());
    let voided = store.void_under_old_contracts(&|_| Some("f".repeat(64)), "labfy-server").unwrap();
    assert!(voided.is_empty(), "{voided:?}");
    assert_eq!(store.abandon_stale_jobs(ws, "9999-12-31T00:00:00.000Z").unwrap(), 0);

    // Once: the same bundle again writes nothing.
    let again = store.receive_bundle(&bundle, None, None, "test").unwrap();
    assert!(again.already);
    assert_eq!(again.investigation, case.inv);
    assert_eq!(count(&store, "SELECT count(*) FROM evidence WHERE investigation_id = ?1", &case.inv), before);
    // The sender cannot receive its own investigation back.
    drop(sender);
    let mut sender = Store::open(case.dir.path()).unwrap();
    match sender.receive_bundle(&bundle, None, None, "test") {
        Err(BundleError::Store(StoreError::Conflict(why))) => assert!(why.contains("own"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Nothing is left in the private copy's directory.
    assert_eq!(fs::read_dir(here.path().join("receiving")).unwrap().count(), 0);
}

#[test]
fn a_bundle_that_fails_verification_or_names_another_investigation_writes_nothing() {
    let case = fetched_case();
    let here = TempDir::new().unwrap();
    let mut store = Store::open(here.path()).unwrap();
    let nothing = |store: &Store| {
        let n: i64 = store.conn.query_row("SELECT count(*) FROM investigations", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 0, "nothing received");
    };

    // A piece's text changed after the export.
    let (bundle, _) = case.export("tampered", true);
    let text = fs::read_dir(bundle.join("evidence")).unwrap().next().unwrap().unwrap().path();
    fs::write(&text, "autre chose").unwrap();
    let e = store.receive_bundle(&bundle, None, None, "test").unwrap_err();
    assert!(matches!(e, BundleError::HashMismatch { .. }), "{e}");
    nothing(&store);

    // A fingerprint other than the one handed over.
    let (bundle, _) = case.export("other", true);
    let e = store.receive_bundle(&bundle, Some(&"0".repeat(64)), None, "test").unwrap_err();
    assert!(matches!(e, BundleError::Fingerprint { .. }), "{e}");
    nothing(&store);

    // A forged row of another investigation, the manifest made to agree:
    // verification passes, the receiver refuses it.
    let (bundle, _) = case.export("forged", true);
    let path = bundle.join("provenance.jsonl");
    let exported = fs::read_to_string(&path).unwrap();
    let forged = exported.replacen(&case.inv.id().to_string(), "01234567-89ab-7def-8123-456789abcdef", 1);
    assert_ne!(forged, exported);
    fs::write(&path, forged).unwrap();
    forge_manifest(&bundle);
    verify(&bundle, None).unwrap();
    let e = store.receive_bundle(&bundle, None, None, "test").unwrap_err();
    assert!(e.to_string().contains("not the bundle's"), "{e}");
    nothing(&store);

    // A piece made to name a blob the bundle does not carry (the
    // receiver's own, say), the manifest made to agree: refused.
    let (bundle, _) = case.export("blobless", true);
    let path = bundle.join("evidence.jsonl");
    let mut rows: Vec<serde_json::Value> =
        fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let row = rows.iter_mut().find(|r| r.get("original").is_some()).expect("a piece with its original");
    let other = crate::sha256_hex(b"un original du destinataire");
    row.as_object_mut().unwrap().insert("blob_sha256".into(), serde_json::json!(other));
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    fs::write(&path, text).unwrap();
    forge_manifest(&bundle);
    let e = store.receive_bundle(&bundle, None, None, "test").unwrap_err();
    assert!(e.to_string().contains("is not the original the bundle carries"), "{e}");
    nothing(&store);
    assert!(bundle.join(MANIFEST).is_file(), "the bundle given is left as it was");
}

/// The UI's export downloads the bundle as a `.tar` with one top folder: it
/// is received as such, here into a REAL workspace of the receiver's own,
/// where it is listed beside the local investigations; a SPECIMEN
/// workspace does not take it.
#[test]
fn the_tar_the_ui_downloads_is_received_into_a_workspace_of_the_receiver() {
    let case = fetched_case();
    let (bundle, fingerprint) = case.export("bundle", false);
    let tar_path = case.dir.path().join("dossier.tar");
    let mut b = tar::Builder::new(fs::File::create(&tar_path).unwrap());
    b.append_dir_all("labfy-dossier", &bundle).unwrap();
    b.finish().unwrap();
    drop(b);
    let here = TempDir::new().unwrap();
    let (mut store, specimen_ws, _) = crate::tests::specimen(&here, 5, 20);
    let e = store.receive_bundle(&tar_path, None, Some(specimen_ws), "test").unwrap_err();
    assert!(e.to_string().contains("a REAL investigation goes into a REAL workspace"), "{e}");
    let (ours, local) = store.create_real_workspace("Dossier Durand", "analyst").unwrap();
    let r = store.receive_bundle(&tar_path, Some(&fingerprint), Some(ours.id()), "test").unwrap();
    assert_eq!((r.investigation, r.workspace), (case.inv, ours));
    let v = r.verified.unwrap();
    assert!(v.fetched.unverifiable() > 0, "no egress log in the UI's bundle: said, not hidden");
    let listed: Vec<ObjectRef> = store.reads().investigations(ours.id()).unwrap().into_iter().map(|i| i.id).collect();
    assert!(listed.len() == 2 && listed.contains(&local) && listed.contains(&case.inv), "{listed:?}");
    let campaigns: i64 = store
        .conn
        .query_row("SELECT count(*) FROM campaigns WHERE workspace_id = ?1", [ours.id().to_string()], |r| r.get(0))
        .unwrap();
    assert_eq!(campaigns, 1, "its rows are placed in the receiver's workspace");
}
