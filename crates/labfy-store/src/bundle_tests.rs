//! Export and verification of a bundle (SPEC C5): a fresh export verifies;
//! each kind of tampering fails and names the file and, for bytes, the hash
//! expected.

use std::fs;
use std::path::Path;

use labfy_core::ObjectRef;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::bundle::{BundleError, BundleFile, BundleWriter, MANIFEST, SHA256SUMS, verify};
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
            &NewNote { title: "Note".into(), content: "Vu 198.51.100.4".into(), source: None },
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
fn forge_manifest(dir: &Path) -> String {
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
