//! Export and verification of a bundle (SPEC C5): a fresh export verifies;
//! each kind of tampering fails and names the file and, for bytes, the hash
//! expected; fetched pieces are checked against egress's own fetch log, and
//! a page the server rewrote in its database is named (SPEC V4).

use std::fs;
use std::path::Path;

use labfy_core::ObjectRef;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::bundle::{
    BundleError, BundleFile, BundleWriter, FETCHED_EVIDENCE, FetchedCheck, MANIFEST, SHA256SUMS, STIX_COVERAGE,
    add_egress_ledger, verify,
};
use crate::research_tests::{decision, request};
use crate::tests::specimen;
use crate::*;

/// A SPECIMEN investigation with its extraction run and a note, exported.
fn exported() -> (TempDir, std::path::PathBuf, String, ObjectRef) {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen(&dir, 3, 120);
    let (job, _) = store.start_extraction(ws, &inv, "analyst").unwrap();
    while !store.extraction_step(ws, &job, 50).unwrap().done {}
    store
        .add_note(
            ws,
            &inv,
            &NewNote {
                title: "Note".into(),
                content: "Vu 198.51.100.4 ; virement FR76 3000 6000 0112 3456 7890 189".into(),
                source: None,
                dated_at: None,
            },
            "analyst",
        )
        .unwrap();
    drop(store);
    let out = dir.path().join("bundle");
    let ro = ReadOnlyStore::open(dir.path()).unwrap();
    let mut w = BundleWriter::create(&out).unwrap();
    let header = ro.export(&inv, &mut w).unwrap();
    let done = w.finish(header).unwrap();
    (dir, out, done.fingerprint, inv)
}

fn lines(path: &Path) -> usize {
    fs::read_to_string(path).unwrap().lines().count()
}

/// Rewrites the manifest and SHA256SUMS with the files' current hashes, as a
/// forger would; returns the new fingerprint.
pub(crate) fn forge_manifest(dir: &Path) -> String {
    let text = fs::read(dir.join(MANIFEST)).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_slice(&text).unwrap();
    let mut files: Vec<BundleFile> = serde_json::from_value(manifest["files"].clone()).unwrap();
    for f in files.iter_mut().filter(|f| f.path != SHA256SUMS) {
        let bytes = fs::read(dir.join(&f.path)).unwrap();
        f.sha256 = hex::encode(Sha256::digest(&bytes));
        f.bytes = bytes.len() as u64;
    }
    let sums: String =
        files.iter().filter(|f| f.path != SHA256SUMS).map(|f| format!("{}  {}\n", f.sha256, f.path)).collect();
    fs::write(dir.join(SHA256SUMS), &sums).unwrap();
    for f in files.iter_mut().filter(|f| f.path == SHA256SUMS) {
        f.sha256 = hex::encode(Sha256::digest(sums.as_bytes()));
        f.bytes = sums.len() as u64;
    }
    manifest["files"] = serde_json::to_value(&files).unwrap();
    let text = serde_json::to_vec_pretty(&manifest).unwrap();
    fs::write(dir.join(MANIFEST), &text).unwrap();
    hex::encode(Sha256::digest(&text))
}

#[test]
fn a_fresh_export_holds_everything_and_verifies() {
    let (dir, out, fingerprint, inv) = exported();
    let v = verify(&out, Some(&fingerprint)).unwrap();
    assert_eq!(v.fingerprint, fingerprint);
    assert_eq!(v.investigation, inv.to_string());
    assert_eq!(v.fetched, FetchedCheck::Unverifiable { pieces: 0 }, "a SPECIMEN case fetched nothing");
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let count = |sql: &str| -> usize { conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as usize };
    assert_eq!(lines(&out.join("evidence.jsonl")), count("SELECT count(*) FROM evidence"));
    assert_eq!(lines(&out.join("entities.jsonl")), count("SELECT count(*) FROM entities"));
    assert_eq!(lines(&out.join("relations.jsonl")), count("SELECT count(*) FROM relations"));
    assert_eq!(lines(&out.join("mentions.jsonl")), count("SELECT count(*) FROM mentions"));
    assert_eq!(lines(&out.join("provenance.jsonl")), count("SELECT count(*) FROM provenance"));
    assert!(lines(&out.join("mentions.jsonl")) > 100);
    assert!(lines(&out.join("audit.jsonl")) >= 2, "extraction start and finish at least");
    // Each item's text is its own file and hashes to the stored SHA-256.
    let first: serde_json::Value =
        serde_json::from_str(fs::read_to_string(out.join("evidence.jsonl")).unwrap().lines().next().unwrap()).unwrap();
    assert!(first.get("content").is_none());
    let text = fs::read(out.join(first["text"].as_str().unwrap())).unwrap();
    assert_eq!(hex::encode(Sha256::digest(&text)), first["sha256"].as_str().unwrap());
    // `sha256sum -c` reads SHA256SUMS.
    let sums = fs::read_to_string(out.join(SHA256SUMS)).unwrap();
    assert!(sums.lines().any(|l| l.ends_with("  evidence.jsonl")));
    // The STIX graph names its objects by kind.
    let stix: serde_json::Value = serde_json::from_slice(&fs::read(out.join("graph.stix.json")).unwrap()).unwrap();
    let types: std::collections::BTreeSet<&str> =
        stix["objects"].as_array().unwrap().iter().map(|o| o["type"].as_str().unwrap()).collect();
    for t in ["file", "identity", "domain-name", "email-addr", "relationship", "ipv4-addr"] {
        assert!(types.contains(t), "{t} missing from {types:?}");
    }
    // Nothing is readable by others.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(fs::metadata(out.join(MANIFEST)).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn each_kind_of_tampering_fails_and_names_what() {
    // A byte changed in an item's text: the file and the hash expected.
    let (_d, out, fp, _) = exported();
    let rel = fs::read_dir(out.join("evidence")).unwrap().next().unwrap().unwrap().file_name();
    let path = out.join("evidence").join(&rel);
    let listed = {
        let m: serde_json::Value = serde_json::from_slice(&fs::read(out.join(MANIFEST)).unwrap()).unwrap();
        let name = format!("evidence/{}", rel.to_string_lossy());
        m["files"].as_array().unwrap().iter().find(|f| f["path"] == name.as_str()).unwrap()["sha256"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mut bytes = fs::read(&path).unwrap();
    bytes[0] ^= 0x20;
    fs::write(&path, &bytes).unwrap();
    let err = verify(&out, None).unwrap_err();
    assert!(
        matches!(&err, BundleError::HashMismatch { path, expected, .. }
        if path.ends_with(&*rel.to_string_lossy()) && *expected == listed),
        "{err}"
    );
    assert!(err.to_string().contains(&listed));
    // The forger rewrites the manifest: the item's own SHA-256 still
    // disagrees, and the fingerprint handed over does too.
    let forged = forge_manifest(&out);
    let err = verify(&out, None).unwrap_err();
    assert!(matches!(err, BundleError::Reference { ref file, .. } if file == "evidence.jsonl"), "{err}");
    let err = verify(&out, Some(&fp)).unwrap_err();
    assert!(matches!(err, BundleError::Fingerprint { ref found, .. } if *found == forged), "{err}");

    // A file removed, a file added, a link planted.
    let (_d, out, _, _) = exported();
    fs::remove_file(out.join("relations.jsonl")).unwrap();
    let err = verify(&out, None).unwrap_err();
    assert!(matches!(err, BundleError::Missing { ref path, .. } if path == "relations.jsonl"), "{err}");
    let (_d, out, _, _) = exported();
    fs::write(out.join("evidence/extra.txt"), b"x").unwrap();
    assert!(matches!(verify(&out, None).unwrap_err(), BundleError::Unlisted(p) if p == "evidence/extra.txt"));
    let (_d, out, _, _) = exported();
    fs::remove_file(out.join("jobs.jsonl")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", out.join("jobs.jsonl")).unwrap();
    assert!(matches!(verify(&out, None).unwrap_err(), BundleError::Unlisted(p) if p.starts_with("jobs.jsonl")));

    // A row removed with every hash made consistent again: the references
    // that pointed at it fail.
    let (_d, out, _, _) = exported();
    let entities = fs::read_to_string(out.join("entities.jsonl")).unwrap();
    let mentions = fs::read_to_string(out.join("mentions.jsonl")).unwrap();
    let first_mention: serde_json::Value = serde_json::from_str(mentions.lines().next().unwrap()).unwrap();
    let victim = first_mention["entity_id"].as_str().unwrap();
    let kept: String = entities.lines().filter(|l| !l.contains(victim)).map(|l| format!("{l}\n")).collect();
    fs::write(out.join("entities.jsonl"), kept).unwrap();
    forge_manifest(&out);
    let err = verify(&out, None).unwrap_err();
    assert!(err.to_string().contains(&format!("entity:{victim} is not in the bundle")), "{err}");

    // A mention moved past the end of its text.
    let (_d, out, _, _) = exported();
    let mentions = fs::read_to_string(out.join("mentions.jsonl")).unwrap();
    let moved = mentions.replacen("\"start\":", "\"start\":9999999", 1);
    fs::write(out.join("mentions.jsonl"), moved).unwrap();
    forge_manifest(&out);
    let err = verify(&out, None).unwrap_err();
    assert!(
        matches!(&err, BundleError::Reference { file, line: 1, detail } if file == "mentions.jsonl" && detail.contains("outside")),
        "{err}"
    );

    // A row count that disagrees with the manifest.
    let (_d, out, _, _) = exported();
    let audit = fs::read_to_string(out.join("audit.jsonl")).unwrap();
    fs::write(out.join("audit.jsonl"), audit.lines().skip(1).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    forge_manifest(&out);
    let err = verify(&out, None).unwrap_err();
    assert!(err.to_string().contains("audit.jsonl has"), "{err}");
}

#[test]
fn an_export_never_writes_into_a_used_directory() {
    let dir = TempDir::new().unwrap();
    fs::write(dir.path().join("keep.txt"), b"mine").unwrap();
    assert!(matches!(BundleWriter::create(dir.path()), Err(BundleError::Exists(_))));
    assert!(matches!(BundleWriter::create(&dir.path().join("keep.txt")), Err(BundleError::Exists(_))));
    assert_eq!(fs::read(dir.path().join("keep.txt")).unwrap(), b"mine");
    // An empty directory is fine.
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    BundleWriter::create(&empty).unwrap();
}

/// `labfy export` adds egress's own record of the bundle's grants (SPEC T2):
/// their rows of egress's ledger and fetch log, and no other grant's; no
/// ledger, nothing added; a file that is not a database, a clear error.
#[test]
fn egress_ledger_rows_of_the_bundles_grants_only() {
    let dir = TempDir::new().unwrap();
    let ledger = dir.path().join("ledger.sqlite3");
    let conn = rusqlite::Connection::open(&ledger).unwrap();
    conn.execute_batch(
        "CREATE TABLE grants (id TEXT PRIMARY KEY, proposed_at TEXT, urls TEXT);
         CREATE TABLE fetch_log (seq INTEGER PRIMARY KEY, grant_id TEXT, url TEXT);
         INSERT INTO grants VALUES ('grant:0001', '2026-12-01', '[\"https://a.example/\"]'),
                                   ('grant:0002', '2026-12-02', '[\"https://b.example/\"]');
         INSERT INTO fetch_log VALUES (1, 'grant:0002', 'https://b.example/'),
                                      (2, 'grant:0001', 'https://a.example/'),
                                      (3, 'grant:0001', 'https://a.example/x');",
    )
    .unwrap();
    drop(conn);
    let out = dir.path().join("bundle");
    let mut w = BundleWriter::create(&out).unwrap();
    w.add_jsonl("grants.jsonl", [serde_json::json!({"id": "0001"})]).unwrap();
    crate::bundle::add_egress_ledger(&mut w, &ledger).unwrap();
    let rows = |f: &str| -> Vec<serde_json::Value> {
        fs::read_to_string(out.join(f)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let grants = rows("egress/grants.jsonl");
    assert_eq!(grants.len(), 1, "{grants:?}");
    assert_eq!(grants[0]["id"], "grant:0001");
    let log: Vec<_> = rows("egress/fetch_log.jsonl").iter().map(|r| r["url"].as_str().unwrap().to_owned()).collect();
    assert_eq!(log, ["https://a.example/", "https://a.example/x"]);

    // No ledger (egress never ran): nothing added, no error.
    let out2 = dir.path().join("bundle2");
    let mut w = BundleWriter::create(&out2).unwrap();
    crate::bundle::add_egress_ledger(&mut w, &dir.path().join("absent.sqlite3")).unwrap();
    assert!(!out2.join("egress").exists());
    // Not a database: refused with the file named.
    let junk = dir.path().join("junk.sqlite3");
    fs::write(&junk, b"not a database at all, not even close to one").unwrap();
    let out3 = dir.path().join("bundle3");
    let mut w = BundleWriter::create(&out3).unwrap();
    w.add_jsonl("grants.jsonl", [serde_json::json!({"id": "0001"})]).unwrap();
    let err = crate::bundle::add_egress_ledger(&mut w, &junk).unwrap_err();
    assert!(err.to_string().contains("junk.sqlite3"), "{err}");
}

/// Egress's ledger as `egress/src/ledger.rs` creates it: `fetch_log` column
/// for column; of `grants`, the columns the export orders by and the ids.
const EGRESS_LEDGER: &str = "
CREATE TABLE grants (id TEXT PRIMARY KEY, workspace TEXT NOT NULL, campaign TEXT NOT NULL UNIQUE,
                     proposed_at TEXT NOT NULL) STRICT;
CREATE TABLE fetch_log (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    at           TEXT NOT NULL,
    grant_id     TEXT NOT NULL REFERENCES grants(id),
    campaign     TEXT NOT NULL,
    url          TEXT NOT NULL,
    final_url    TEXT,
    status       TEXT NOT NULL,
    http_status  INTEGER,
    bytes        INTEGER NOT NULL,
    sha256       TEXT,
    reason       TEXT
) STRICT;";

/// The pages of the REAL campaign below: the first two fetched and stored,
/// the third fetched by egress but refused by the store (no piece).
const PAGES: [(&str, &[u8]); 3] = [
    ("https://news.example.org/acme", b"<html><title>ACME</title><p>ACME wired 2,000 EUR to a charity.</p></html>"),
    ("https://news.example.org/minister", b"<html><title>Minister</title><p>The minister declared nothing.</p></html>"),
    ("https://news.example.org/refused", b"not stored"),
];

/// A REAL investigation whose campaign stored two fetched pages as the
/// server records them, and egress's ledger that logged those fetches (each
/// 3 ms after it ended, as egress does), the third and a refusal.
pub(crate) struct Fetched {
    pub(crate) dir: TempDir,
    pub(crate) inv: ObjectRef,
    ledger: std::path::PathBuf,
    pub(crate) pieces: Vec<ObjectRef>,
}

pub(crate) fn fetched_case() -> Fetched {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Garde", "analyst").unwrap();
    let ws = ws.id();
    let note = NewNote { title: "Piste".into(), content: "ACME et le ministre".into(), source: None, dated_at: None };
    let note = store.add_note(ws, &inv, &note, "analyst").unwrap();
    let (r, _) = store.prepare_research(ws, &request(vec![note], "custody")).unwrap();
    let urls = PAGES.iter().map(|(u, _)| (*u).to_owned()).collect();
    let g = store.grant_research(ws, &r, &GrantDecision { urls, ..decision() }).unwrap();
    store.campaign_admitted(ws, &g.campaign, "admitted").unwrap();
    store.campaign_started(ws, &g.campaign).unwrap();

    let ledger = dir.path().join("ledger.sqlite3");
    let log = rusqlite::Connection::open(&ledger).unwrap();
    log.execute_batch(EGRESS_LEDGER).unwrap();
    let (grant, campaign) = (g.grant.to_string(), g.campaign.to_string());
    log.execute(
        "INSERT INTO grants VALUES (?1, ?2, ?3, '2026-03-01T09:59:00.000Z')",
        rusqlite::params![grant, ws.to_string(), campaign],
    )
    .unwrap();
    let blobs = crate::blobs::BlobStore::open(dir.path()).unwrap();
    let mut pieces = Vec::new();
    for (i, (url, body)) in PAGES.iter().enumerate() {
        let blob = blobs.put(&mut &body[..], 1 << 20).unwrap();
        log.execute(
            "INSERT INTO fetch_log (at, grant_id, campaign, url, final_url, status, http_status, bytes, sha256)
             VALUES (?1, ?2, ?3, ?4, ?4, 'FETCHED', 200, ?5, ?6)",
            rusqlite::params![
                format!("2026-03-01T10:0{i}:00.853Z"),
                grant,
                campaign,
                url,
                body.len() as i64,
                blob.sha256
            ],
        )
        .unwrap();
        if i == 2 {
            break;
        }
        let page = FetchedPage {
            url: (*url).into(),
            final_url: (*url).into(),
            redirects: Vec::new(),
            http_status: 200,
            headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
            content_type: Some("text/html; charset=utf-8".into()),
            body_sha256: blob.sha256.clone(),
            body: Some(FetchedBody { parsed: labfy_parse::parse(body, "page.html"), blob }),
            started_at: format!("2026-03-01T10:0{i}:00.000Z"),
            elapsed_ms: 850,
            isolation: "campaign-iso-1".into(),
            asked_by: None,
        };
        pieces.push(store.record_fetch(ws, &g.campaign, i as u32, &page).unwrap());
    }
    log.execute(
        "INSERT INTO fetch_log (at, grant_id, campaign, url, status, bytes, reason)
         VALUES ('2026-03-01T10:05:00.000Z', ?1, ?2, 'https://elsewhere.example.com/', 'REFUSED', 0, 'not granted')",
        rusqlite::params![grant, campaign],
    )
    .unwrap();
    Fetched { dir, inv, ledger, pieces }
}

impl Fetched {
    /// Exports the case into `name`, with egress's ledger as `labfy export`
    /// adds it or without, as the UI exports; the bundle and its fingerprint.
    pub(crate) fn export(&self, name: &str, with_ledger: bool) -> (std::path::PathBuf, String) {
        let out = self.dir.path().join(name);
        let ro = ReadOnlyStore::open(self.dir.path()).unwrap();
        let mut w = BundleWriter::create(&out).unwrap();
        let header = ro.export(&self.inv, &mut w).unwrap();
        if with_ledger {
            add_egress_ledger(&mut w, &self.ledger).unwrap();
        }
        (out.clone(), w.finish(header).unwrap().fingerprint)
    }

    /// What a compromised server does in its own database (red team G4):
    /// drops the immutability triggers, then makes `piece` say it fetched
    /// `body` — a new blob, the item's text and hashes, its fetch
    /// provenance's SHA-256 and size, all consistent.
    fn rewrite_page(&self, piece: &ObjectRef, body: &[u8]) {
        let blob = crate::blobs::BlobStore::open(self.dir.path()).unwrap().put(&mut &body[..], 1 << 20).unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        let conn = self.db();
        conn.execute(
            "INSERT OR IGNORE INTO blobs (sha256, byte_len, created_at) VALUES (?1, ?2, '2026-03-01T10:00:00.000Z')",
            rusqlite::params![blob.sha256, blob.len as i64],
        )
        .unwrap();
        let id = piece.id().to_string();
        conn.execute("DELETE FROM mentions WHERE evidence_id = ?1", [&id]).unwrap();
        conn.execute(
            "UPDATE evidence SET content = ?2, sha256 = ?3, blob_sha256 = ?3, byte_len = ?4, char_len = ?5 WHERE id = ?1",
            rusqlite::params![id, text, blob.sha256, blob.len as i64, text.chars().count() as i64],
        )
        .unwrap();
        let n = conn
            .execute(
                "UPDATE fetch_provenance SET body_sha256 = ?2, body_bytes = ?3
                 WHERE provenance_id IN (SELECT id FROM provenance WHERE object_ref = ?1)",
                rusqlite::params![piece.to_string(), blob.sha256, blob.len as i64],
            )
            .unwrap();
        assert_eq!(n, 1, "{piece} has one fetch provenance");
    }

    /// The server's database with the immutability triggers dropped.
    fn db(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(self.dir.path().join(DB_FILE)).unwrap();
        conn.execute_batch(
            "DROP TRIGGER IF EXISTS evidence_immutable; DROP TRIGGER IF EXISTS fetch_provenance_immutable;",
        )
        .unwrap();
        conn
    }
}

fn manifest_of(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join(MANIFEST)).unwrap()).unwrap()
}

/// SPEC V4: the pages as egress fetched them pass, each matched with its
/// own entry of egress's log; the fetch egress logged that no piece holds is
/// counted, the refusal is not.
#[test]
fn fetched_pieces_that_match_egress_fetch_log_pass() {
    let case = fetched_case();
    let (out, fp) = case.export("bundle", true);
    assert_eq!(manifest_of(&out)[FETCHED_EVIDENCE], "checked_against_egress_fetch_log");
    assert_eq!(lines(&out.join("egress/fetch_log.jsonl")), 4);
    let v = verify(&out, Some(&fp)).unwrap();
    assert_eq!(v.fetched, FetchedCheck::Matched { pieces: 2, unclaimed: 1 });
    assert_eq!(v.fetched.unverifiable(), 0);
}

/// Red team F5 (G4): the server rewrites a fetched page in its database —
/// body, text, hashes and fetch provenance consistent — and moves another's
/// time; `labfy export` then writes a bundle whose every hash holds, but
/// egress's log names both pieces and what differs.
#[test]
fn a_page_the_server_rewrote_is_named_against_egress_fetch_log() {
    let case = fetched_case();
    let forged = b"ACME wired 2,000,000 EUR to the minister (FORGED BY THE SERVER)";
    case.rewrite_page(&case.pieces[0], forged);
    let moved = case
        .db()
        .execute(
            "UPDATE fetch_provenance SET started_at = '2026-03-02T10:01:00.000Z'
             WHERE provenance_id IN (SELECT id FROM provenance WHERE object_ref = ?1)",
            [case.pieces[1].to_string()],
        )
        .unwrap();
    assert_eq!(moved, 1);
    let (out, fp) = case.export("bundle", true);
    let err = verify(&out, Some(&fp)).unwrap_err();
    let BundleError::NotInEgressLog(unbacked) = &err else { panic!("expected NotInEgressLog, got {err}") };
    assert_eq!(unbacked.len(), 2, "{err}");
    let (rewritten, retimed) = (&unbacked[0], &unbacked[1]);
    assert_eq!(rewritten.piece, case.pieces[0].to_string());
    assert_eq!(rewritten.url, PAGES[0].0);
    let forged_sha = hex::encode(Sha256::digest(forged));
    let fetched_sha = hex::encode(Sha256::digest(PAGES[0].1));
    for said in [
        format!("SHA-256 {forged_sha} here, {fetched_sha} in egress's log"),
        format!("{} bytes here, {} in egress's log", forged.len(), PAGES[0].1.len()),
    ] {
        assert!(rewritten.differs.contains(&said), "{said} not in {}", rewritten.differs);
    }
    assert_eq!(retimed.piece, case.pieces[1].to_string());
    assert!(retimed.differs.contains("egress logged it at 2026-03-01T10:01:00.853Z"), "{}", retimed.differs);
    assert!(!retimed.differs.contains("SHA-256"), "{}", retimed.differs);
    let text = err.to_string();
    assert!(text.contains(&case.pieces[0].to_string()) && text.contains(&case.pieces[1].to_string()), "{text}");

    // Rewritten to what egress did fetch, the piece passes again.
    let case = fetched_case();
    case.rewrite_page(&case.pieces[0], PAGES[0].1);
    let (out, fp) = case.export("bundle", true);
    assert_eq!(verify(&out, Some(&fp)).unwrap().fetched, FetchedCheck::Matched { pieces: 2, unclaimed: 1 });

    // A piece egress never logged: named as such.
    let case = fetched_case();
    rusqlite::Connection::open(&case.ledger)
        .unwrap()
        .execute_batch("DELETE FROM fetch_log WHERE url LIKE '%/minister'")
        .unwrap();
    let (out, _) = case.export("bundle", true);
    let err = verify(&out, None).unwrap_err();
    let BundleError::NotInEgressLog(unbacked) = &err else { panic!("expected NotInEgressLog, got {err}") };
    assert_eq!(unbacked.len(), 1, "{err}");
    assert_eq!(unbacked[0].piece, case.pieces[1].to_string());
    assert!(unbacked[0].differs.contains("egress's log holds no FETCHED entry of this URL"), "{err}");
}

/// The UI's export holds no egress log: its manifest says the fetched
/// pieces are the server's word, and verify reports them unverifiable, not
/// verified. A forger who strips the log from a `labfy export` bundle is
/// caught by the manifest's own word.
#[test]
fn without_egress_fetch_log_fetched_pieces_are_unverifiable() {
    let case = fetched_case();
    let (out, fp) = case.export("ui-bundle", false);
    assert!(!out.join("egress").exists());
    assert_eq!(manifest_of(&out)[FETCHED_EVIDENCE], "server_word_not_checked_against_egress");
    let v = verify(&out, Some(&fp)).unwrap();
    assert_eq!(v.fetched, FetchedCheck::Unverifiable { pieces: 2 });
    assert_eq!(v.fetched.unverifiable(), 2);
    // So is a rewritten page: nothing here can say otherwise.
    case.rewrite_page(&case.pieces[0], b"FORGED");
    let (out, fp) = case.export("ui-bundle-2", false);
    assert_eq!(verify(&out, Some(&fp)).unwrap().fetched, FetchedCheck::Unverifiable { pieces: 2 });

    // egress's files taken out of a bundle that had them, every hash redone.
    let (out, _) = case.export("stripped", true);
    fs::remove_dir_all(out.join("egress")).unwrap();
    let mut manifest = manifest_of(&out);
    let rows = manifest["rows"].as_object_mut().unwrap();
    rows.remove("egress/grants.jsonl");
    rows.remove("egress/fetch_log.jsonl");
    let files = manifest["files"].as_array_mut().unwrap();
    files.retain(|f| !f["path"].as_str().unwrap().starts_with("egress/"));
    fs::write(out.join(MANIFEST), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    forge_manifest(&out);
    let err = verify(&out, None).unwrap_err();
    assert!(
        matches!(&err, BundleError::Manifest(m) if m.contains(FETCHED_EVIDENCE) && m.contains("has no egress/fetch_log.jsonl")),
        "{err}"
    );
}

/// SPEC I3: STIX that other tools accept — observables named by the UUIDv5
/// of their value in STIX's namespace (the same IBAN, the same id in any
/// tool), other objects by a version-4 UUID drawn from their Labfy
/// reference (the same in the next export), timestamps to the millisecond,
/// OpenCTI's types for what STIX lacks, and a coverage file that says what
/// STIX cannot hold and where it lies instead.
#[test]
fn the_stix_graph_names_objects_as_stix_asks_and_says_what_it_leaves_out() {
    let (d, out, _fp, inv) = exported();
    let stix: serde_json::Value = serde_json::from_slice(&fs::read(out.join("graph.stix.json")).unwrap()).unwrap();
    let objects = stix["objects"].as_array().unwrap();
    let uuid_of = |id: &str| uuid::Uuid::parse_str(id.split_once("--").unwrap().1).unwrap();
    let iban = objects.iter().find(|o| o["type"] == "bank-account").expect("an IBAN as OpenCTI's bank account");
    let namespace = uuid::uuid!("00abedb4-aa42-466c-9c01-fed23315a9b7");
    let want =
        uuid::Uuid::new_v5(&namespace, format!("{{\"iban\":\"{}\"}}", iban["iban"].as_str().unwrap()).as_bytes());
    assert_eq!(uuid_of(iban["id"].as_str().unwrap()), want, "{iban}");
    assert!(
        iban["extensions"]["extension-definition--f93e2c80-4231-4f9a-af8b-95c9bd566a82"]["extension_type"] == "new-sco"
    );
    for o in objects {
        let id = uuid_of(o["id"].as_str().unwrap());
        let observable = !matches!(o["type"].as_str().unwrap(), "identity" | "relationship" | "x-labfy-selector");
        assert_eq!(id.get_version_num(), if observable { 5 } else { 4 }, "{o}");
        assert!(o["x_labfy_ref"].as_str().is_some_and(|r| r.contains(':')), "{o}");
        for t in ["created", "modified"] {
            if let Some(ts) = o[t].as_str() {
                assert!(ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[19] == b'.', "{t}: {ts}");
            }
        }
    }
    let coverage: serde_json::Value = serde_json::from_slice(&fs::read(out.join(STIX_COVERAGE)).unwrap()).unwrap();
    let counted: u64 = coverage["objects"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(counted, objects.len() as u64);
    assert_eq!(coverage["not_in_stix"]["mentions (offset, length, rule)"], "mentions.jsonl");
    // The same investigation exported again names every object alike.
    let again = d.path().join("bundle-again");
    let ro = ReadOnlyStore::open(d.path()).unwrap();
    let mut w = BundleWriter::create(&again).unwrap();
    let header = ro.export(&inv, &mut w).unwrap();
    w.finish(header).unwrap();
    let ids = |p: &Path| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(&fs::read(p.join("graph.stix.json")).unwrap()).unwrap();
        v["objects"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(ids(&out), ids(&again));
}
