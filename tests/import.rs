//! `labfy import` for real (SPEC C2): a folder of real documents — text in
//! Latin-1, an HTML page declaring its charset, a PDF, a `.docx`, an e-mail
//! with an attachment, a mailbox, an image — and the bad inputs of the
//! issue: an empty file, a name with a control character, a symbolic link
//! out of the folder, a file over the bound, the same bytes twice. Each gets
//! its outcome; the parsed text, the provenance, the graph and an export
//! that verifies follow.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use labfy_core::ObjectRef;
use labfy_parse::fixtures;
use labfy_store::Store;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

fn labfy(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("run labfy")
}

fn folder(root: &Path) {
    fs::create_dir_all(root.join("copie")).unwrap();
    fs::create_dir_all(root.join("courriels")).unwrap();
    let latin1 = b"Le pr\xe9sident de l'association \xe9crit depuis jean.dupont@alpha.example ; \
        l'IBAN est FR76 3000 6000 0112 3456 7890 189.";
    fs::write(root.join("note-latin1.txt"), latin1).unwrap();
    fs::write(root.join("copie/note-latin1.txt"), latin1).unwrap();
    fs::write(
        root.join("page.html"),
        b"<html><head><meta charset=\"iso-8859-1\"><title>Soci\xe9t\xe9 Alpha</title></head>\
          <body><p>Si\xe8ge : voir https://alpha.example/contact</p><script>var x = 'cach\xe9';</script></body></html>",
    )
    .unwrap();
    fs::write(root.join("rapport.pdf"), fixtures::pdf(&["Rapport sur Alpha", "Serveur 198.51.100.23"])).unwrap();
    fs::write(root.join("note.docx"), fixtures::docx("Note interne", &["Contact : marie@beta.example"])).unwrap();
    fs::write(
        root.join("courriels/facture.eml"),
        fixtures::eml(
            "Jean <jean.dupont@alpha.example>",
            "Facture",
            "Voir la pièce.",
            ("iban.txt", "Réglé sur FR7630006000011234567890189"),
        ),
    )
    .unwrap();
    fs::write(
        root.join("courriels/boite.mbox"),
        fixtures::mbox(&[("a@alpha.example", "Premier", "un"), ("b@beta.example", "Second", "deux")]),
    )
    .unwrap();
    fs::write(root.join("image.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDRpixels").unwrap();
    let pdf = fixtures::pdf(&["Tronqué"]);
    fs::write(root.join("tronque.pdf"), &pdf[..pdf.len() / 2]).unwrap();
    fs::write(root.join("vide.txt"), b"").unwrap();
    fs::write(root.join("nom\u{1b}[2J.txt"), b"escape").unwrap();
    fs::write(root.join("gros.bin"), vec![7u8; (1 << 20) + 1]).unwrap();
    symlink("/etc/hostname", root.join("dehors")).unwrap();
    symlink(root.join("page.html"), root.join("interne.html")).unwrap();
}

#[test]
fn a_folder_is_imported_with_an_outcome_per_file_and_exports_verifiably() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (ws, inv) = Store::open(&data).unwrap().create_real_workspace("Affaire Alpha", "test").unwrap();
    let root = dir.path().join("dossier");
    folder(&root);

    let o = labfy(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--investigation",
        &inv.to_string(),
        "--workspace",
        &ws.to_string(),
        "--max-file-mib",
        "1",
        root.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let job: ObjectRef = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(!err.contains('\u{1b}'), "a control character in a name is never echoed: {err:?}");

    let store = Store::open(&data).unwrap();
    let reads = store.reads();
    let report = reads.import_report(ws.id(), &job, None, 100).unwrap();
    let outcome = |suffix: &str| {
        report
            .iter()
            .find(|l| l.path.ends_with(suffix))
            .unwrap_or_else(|| panic!("no outcome for {suffix}: {report:#?}"))
    };
    for f in [
        "note-latin1.txt",
        "interne.html",
        "rapport.pdf",
        "note.docx",
        "facture.eml",
        "boite.mbox",
        "image.png",
        "tronque.pdf",
    ] {
        assert_eq!(outcome(f).outcome, "imported", "{f}: {:?}", outcome(f));
    }
    assert_eq!(outcome("copie/note-latin1.txt").outcome, "duplicate");
    // The link inside the folder is followed (names in order: it comes first).
    assert_eq!(outcome("page.html").outcome, "duplicate");
    assert_eq!(outcome("copie/note-latin1.txt").evidence, outcome("dossier/note-latin1.txt").evidence);
    for (f, why) in [
        ("vide.txt", "empty"),
        ("gros.bin", "larger than the bound"),
        ("dehors", "outside the imported folder"),
        (".txt", "control characters"),
    ] {
        let l = outcome(f);
        assert_eq!(l.outcome, "refused", "{f}");
        assert!(l.reason.as_deref().unwrap_or("").contains(why), "{f}: {l:?}");
    }
    assert_eq!(report.len(), 14, "{report:#?}");

    let text = |suffix: &str| {
        let ev = outcome(suffix).evidence.unwrap();
        reads.excerpt(ws.id(), &ev, 0, 4000).unwrap().text
    };
    let latin = text("note-latin1.txt");
    assert!(latin.contains("président"), "Latin-1 decoded: {latin:?}");
    let page = text("page.html");
    assert!(page.contains("Siège") && !page.contains("caché"), "{page}");
    assert!(text("rapport.pdf").contains("Rapport sur Alpha"));
    assert!(text("note.docx").contains("marie@beta.example"));
    assert!(text("facture.eml").contains("Subject: Facture"));
    let summary = reads.evidence_summary(ws.id(), &outcome("page.html").evidence.unwrap()).unwrap();
    assert_eq!(summary.title, "Société Alpha");
    assert_eq!(summary.imports.len(), 2, "imported through the link, then found again");
    assert!(summary.imports[0].original_path.ends_with("dossier/interne.html"));
    assert!(summary.imports[1].original_path.ends_with("dossier/page.html"));
    assert_eq!(summary.imports[0].encoding.as_deref(), Some("windows-1252"));
    assert!(summary.original);

    // The attachment and the two messages are evidence of their own, and
    // extraction found the selectors in every text.
    let job_row = reads.job(ws.id(), &job).unwrap();
    assert_eq!(job_row.stats["embedded"], 3, "{:?}", job_row.stats);
    assert_eq!(job_row.status, "SUCCEEDED");
    let ov = reads.overview(ws.id(), &inv).unwrap();
    assert_eq!(ov.counts.evidence, 11, "8 files and 3 embedded documents");
    // A truncated PDF is kept, as binary, with the reason its text is not there.
    let broken = reads.evidence_summary(ws.id(), &outcome("tronque.pdf").evidence.unwrap()).unwrap();
    assert_eq!((broken.mime.as_str(), broken.char_len), ("application/pdf", 0));
    let notes = broken.imports[0].notes.as_array().unwrap();
    assert!(notes[0].as_str().unwrap().starts_with("text not extracted: PDF"), "{notes:?}");
    let found = reads.search(ws.id(), &inv, "FR7630006000011234567890189", 10).unwrap();
    assert!(!found.hits.is_empty(), "the attachment's text is indexed");
    drop(store);

    // The bundle carries the original bytes and verifies.
    let out = dir.path().join("bundle");
    let o = labfy(&["export", "--data-dir", data.to_str().unwrap(), &inv.to_string(), out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let pdf = fs::read(root.join("rapport.pdf")).unwrap();
    let sha = labfy_store::sha256_hex(&pdf);
    assert_eq!(fs::read(out.join("blobs").join(&sha)).unwrap(), pdf);
    let o = labfy(&["verify", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fingerprint = String::from_utf8_lossy(&o.stdout).trim().to_owned();

    // SPEC I4: another workstation receives it, verified, read-only, once.
    let other = dir.path().join("other");
    let receive = || {
        labfy(&[
            "import-bundle",
            "--data-dir",
            other.to_str().unwrap(),
            out.to_str().unwrap(),
            "--fingerprint",
            &fingerprint,
        ])
    };
    let o = receive();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), inv.to_string(), "the sender's reference");
    assert!(err.contains("verified") && err.contains("read-only") && err.contains(&fingerprint), "{err}");
    let theirs = Store::open(&other).unwrap();
    let ov = theirs.reads().overview(ws.id(), &inv).unwrap();
    assert_eq!(ov.counts.evidence, 11, "every piece, the embedded ones too");
    assert_eq!(ov.investigation.received.as_ref().map(|r| r.fingerprint.as_str()), Some(fingerprint.as_str()));
    let found = theirs.reads().search(ws.id(), &inv, "FR7630006000011234567890189", 10).unwrap();
    assert!(!found.hits.is_empty(), "searchable there too");
    drop(theirs);
    let o = receive();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("received already"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = labfy(&[
        "import",
        "--data-dir",
        other.to_str().unwrap(),
        "--investigation",
        &inv.to_string(),
        root.join("page.html").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("read-only"), "{err}");
    // A bundle whose verification fails is not received, with the reason.
    let text = fs::read_dir(out.join("evidence")).unwrap().next().unwrap().unwrap().path();
    fs::write(&text, "réécrit").unwrap();
    let third = dir.path().join("third");
    let o = labfy(&["import-bundle", "--data-dir", third.to_str().unwrap(), out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("not received") && err.contains("the manifest says"), "{err}");
}

#[test]
fn an_unknown_investigation_or_a_wrong_workspace_is_refused_before_anything_is_read() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (_ws, inv) = Store::open(&data).unwrap().create_real_workspace("A", "test").unwrap();
    let (ws2, _) = Store::open(&data).unwrap().create_real_workspace("B", "test").unwrap();
    let o = labfy(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--investigation",
        &inv.to_string(),
        "--workspace",
        &ws2.to_string(),
        "/nonexistent",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not in"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = labfy(&["import", "--data-dir", data.to_str().unwrap(), "--investigation", "workspace:x", "/tmp"]);
    assert!(!o.status.success());
}

/// What one look at a running worker of `labfy import` showed, from here.
struct Seen {
    worker: u32,
    /// (namespace, the worker's link, its parent's link).
    namespaces: Vec<(&'static str, String, String)>,
    /// `NSpid` of the worker and of its parent.
    nspid: (String, String),
    uid: String,
    /// What its root holds, and its network's interfaces.
    root: Vec<String>,
    interfaces: Vec<String>,
}

/// The running parser workers whose parent is `parent`, each looked at once
/// (`None` for one that exited meanwhile).
fn look_at_workers(parent: u32) -> Vec<Seen> {
    let status = |pid: u32, field: &str| {
        let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines().find_map(|l| l.strip_prefix(field)).map(|v| v.trim().to_owned())
    };
    let mut seen = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let is_worker = cmdline.split(|b| *b == 0).nth(1) == Some(labfy_parse::worker::WORKER_ARG.as_bytes());
        if !is_worker || status(pid, "PPid:").as_deref() != Some(&parent.to_string()) {
            continue;
        }
        let look = || -> Option<Seen> {
            let link =
                |p: u32, ns: &str| fs::read_link(format!("/proc/{p}/ns/{ns}")).ok().map(|l| l.display().to_string());
            let mut namespaces = Vec::new();
            for ns in ["pid", "net", "mnt", "ipc", "uts", "user"] {
                namespaces.push((ns, link(pid, ns)?, link(parent, ns)?));
            }
            let mut root: Vec<String> = fs::read_dir(format!("/proc/{pid}/root"))
                .ok()?
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect();
            root.sort();
            let dev = fs::read_to_string(format!("/proc/{pid}/net/dev")).ok()?;
            let interfaces = dev.lines().skip(2).filter_map(|l| Some(l.split(':').next()?.trim().to_owned())).collect();
            Some(Seen {
                worker: pid,
                namespaces,
                nspid: (status(pid, "NSpid:")?, status(parent, "NSpid:")?),
                uid: status(pid, "Uid:")?,
                root,
                interfaces,
            })
        };
        seen.extend(look());
    }
    seen
}

/// F4, reproduction P6 (SPEC V3): the parser worker `labfy import` starts
/// on the host is confined like every child — PID, network, mount, IPC and
/// UTS namespaces of its own (a user namespace too, or `nobody` under
/// root), PID 1 of its PID namespace, so no process of its parent's shows
/// there; a network with no interface but a loopback that is down; a root
/// without the host's tree. Looked at from here while it reads large HTML
/// pages.
#[test]
fn the_worker_of_labfy_import_has_namespaces_and_a_root_of_its_own() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (_ws, inv) = Store::open(&data).unwrap().create_real_workspace("Affaire Delta", "test").unwrap();
    let root = dir.path().join("dossier");
    fs::create_dir_all(&root).unwrap();
    for i in 0..PAGES {
        let page = format!("<html><body><h1>Page {i}</h1>{}</body></html>", "<div><p>mot</p></div>".repeat(DIVS));
        fs::write(root.join(format!("page-{i}.html")), page).unwrap();
    }
    let mut import = Command::new(BIN)
        .args(["import", "--data-dir", data.to_str().unwrap(), "--investigation", &inv.to_string()])
        .arg(&root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let parent = import.id();
    let mut seen = Vec::new();
    while import.try_wait().unwrap().is_none() {
        seen.extend(look_at_workers(parent));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let o = import.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("{PAGES} imported")), "{err}");
    assert!(!seen.is_empty(), "no worker seen while {PAGES} pages were read: {err}");
    let root_uid = fs::read_to_string("/proc/self/status").unwrap().lines().any(|l| l.starts_with("Uid:\t0\t"));
    for s in &seen {
        for (ns, worker, parent) in &s.namespaces {
            if *ns == "user" && root_uid {
                // Under root the worker drops to nobody instead.
                assert!(s.uid.starts_with("65534"), "worker {} runs as {}", s.worker, s.uid);
                continue;
            }
            assert_ne!(worker, parent, "worker {} shares its parent's {ns} namespace", s.worker);
        }
        // One more level of PID namespace than its parent, where it is 1:
        // it sees no process but its own.
        let (worker, parent) = (&s.nspid.0, &s.nspid.1);
        assert_eq!(worker.split_whitespace().count(), parent.split_whitespace().count() + 1, "{worker} / {parent}");
        assert_eq!(worker.split_whitespace().last(), Some("1"), "{worker}");
        assert_eq!(s.interfaces, ["lo"], "worker {} has a network", s.worker);
        // The program itself is bound where it lives (in CI the build
        // directory is under /var/cache): that one top directory may show.
        let program = fs::canonicalize(BIN).unwrap();
        let program_top = program.components().nth(1).map(|c| c.as_os_str().to_string_lossy().into_owned());
        for absent in ["home", "root", "run", "var", "sys", "proc", "srv", "opt"] {
            if program_top.as_deref() == Some(absent) {
                continue;
            }
            assert!(!s.root.iter().any(|e| e == absent), "/{absent} in the worker's root: {:?}", s.root);
        }
        assert!(s.root.iter().any(|e| e == "usr"), "{:?}", s.root);
    }
}

/// Pages of [`the_worker_of_labfy_import_has_namespaces_and_a_root_of_its_own`],
/// and `<div>`s in each: enough for a worker to run a while.
const PAGES: usize = 2;
const DIVS: usize = 100_000;

/// The worker under the confined workspace server (`labfy up`): the server
/// starts `/proc/self/exe` as the parser, which stacks its compute-only
/// filter on the server's and still reads an HTML page in its declared
/// charset; poppler and Tesseract, started the same way as document tools,
/// read every word of a ghostscript PDF and the words of a scanned page
/// inside the server's jail (SPEC A1); the upload is a
/// `multipart/form-data` request like the UI's.
#[test]
fn the_confined_server_parses_an_upload_in_its_worker() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (_guard, port) = support::start_up(BIN, &data);
    let run = support::runtime_dir(&data);
    let (cookie, csrf) = support::login(port, &run);
    let inv = support::first_investigation(port, &cookie);
    // The workspace `labfy up` serves is SPECIMEN: real files go into it
    // only when the analyst says so (SPEC I5).
    let (status, v) = support::post(
        port,
        &cookie,
        &csrf,
        &format!("/api/v1/investigations/{inv}/imports"),
        &serde_json::json!({"expected": 4}),
    );
    assert_eq!(status, 409, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("SPECIMEN (synthetic data)"), "{v}");
    let (status, v) = support::post(
        port,
        &cookie,
        &csrf,
        &format!("/api/v1/investigations/{inv}/imports"),
        &serde_json::json!({"expected": 4, "into_specimen": true}),
    );
    assert_eq!(status, 201, "{v}");
    let job = v["job"].as_str().unwrap().to_owned();
    let boundary = "labfy-b";
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pdf-corpus");
    let part = |name: &str, file: &str| {
        let mut p = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dossier/{name}\"\r\n\r\n"
        )
        .into_bytes();
        p.extend(fs::read(corpus.join(file)).unwrap());
        p.extend(b"\r\n");
        p
    };
    let text = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dossier/page.html\"\r\n\r\n\
         <html><head><meta charset=\"utf-8\"><title>Société Gamma</title></head><body><p>Écrire à contact@gamma.example</p></body></html>\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"dossier/note.txt\"\r\n\r\n\
         Serveur 203.0.113.77\r\n"
    );
    let mut body = text.into_bytes();
    body.extend(part("note.pdf", "ghostscript-enscript.pdf"));
    body.extend(part("scan.png", "scan-page-1.png"));
    body.extend(format!("--{boundary}--\r\n").into_bytes());
    let origin = format!("http://127.0.0.1:{port}");
    let ct = format!("multipart/form-data; boundary={boundary}");
    let a = support::http_bytes(
        port,
        "POST",
        &format!("/api/v1/imports/{job}/files"),
        &[("Authorization", &cookie), ("Origin", &origin), ("X-CSRF-Token", &csrf), ("Content-Type", &ct)],
        &body,
    )
    .unwrap();
    assert_eq!(a.status, 200, "{}", a.body);
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["files"][0]["outcome"], "imported", "{v}");
    assert_eq!(v["files"][1]["outcome"], "imported", "{v}");
    let ev = v["files"][0]["evidence"].as_str().unwrap();
    let (_, e) = support::get(port, &cookie, &format!("/api/v1/evidence/{ev}"));
    assert_eq!(e["title"], "Société Gamma", "the worker ran and read the page: {e}");
    assert_eq!(e["imports"][0]["format"], "html", "{e}");
    assert!(e["imports"][0]["notes"].as_array().unwrap().is_empty(), "{e}");
    assert!(e["entities"].as_array().unwrap().iter().any(|x| x["name"] == "contact@gamma.example"), "{e}");

    for f in &v["files"].as_array().unwrap()[2..] {
        assert_eq!(f["outcome"], "imported", "{v}");
    }
    let (_, pdf) =
        support::get(port, &cookie, &format!("/api/v1/evidence/{}", v["files"][2]["evidence"].as_str().unwrap()));
    assert!(pdf["imports"][0]["notes"].as_array().unwrap().is_empty(), "{pdf}");
    assert!(pdf["char_len"].as_u64().unwrap() > 4500, "every word of the ghostscript PDF: {pdf}");
    assert!(
        pdf["entities"].as_array().unwrap().iter().any(|x| x["name"] == "j.lemaitre@transports-lemaitre.fr"),
        "{pdf}"
    );
    let (_, scan) =
        support::get(port, &cookie, &format!("/api/v1/evidence/{}", v["files"][3]["evidence"].as_str().unwrap()));
    let notes = scan["imports"][0]["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().starts_with("text read by OCR")), "{scan}");
    assert_eq!(&v["files"][3]["notes"], &scan["imports"][0]["notes"], "the upload's answer says it: {v}");
    assert!(scan["char_len"].as_u64().unwrap() > 3000, "OCR read the scanned page: {scan}");
    // Read under a parser worker the governor admitted for the request, and
    // given back at its end (SPEC A1).
    let o = Command::new(BIN).args(["resources", "--json", "--runtime-dir", run.to_str().unwrap()]).output().unwrap();
    let state: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mine: Vec<&serde_json::Value> =
        state["decisions"].as_array().unwrap().iter().filter(|d| d["owner"] == job.as_str()).collect();
    assert!(mine.iter().any(|d| d["kind"] == "reading" && d["outcome"] == "admitted"), "{state}");
    support::wait_for("the reading given back", || {
        let o =
            Command::new(BIN).args(["resources", "--json", "--runtime-dir", run.to_str().unwrap()]).output().unwrap();
        let state: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        state["reservations"].as_array().unwrap().iter().all(|r| r["owner"] != job.as_str()).then_some(())
    });
}

/// SPEC I1: a `labfy import` killed halfway leaves its job `RUNNING` only
/// until the next import, which sees its process gone and ends it `FAILED`
/// with the reason; importing the same folder again takes the rest, the
/// files already stored coming back as duplicates by their hash.
#[test]
fn a_killed_import_is_settled_and_the_next_one_takes_the_rest() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (_ws, inv) = Store::open(&data).unwrap().create_real_workspace("Affaire Epsilon", "test").unwrap();
    let root = dir.path().join("dossier");
    fs::create_dir_all(&root).unwrap();
    const FILES: u64 = 4000;
    for i in 0..FILES {
        fs::write(
            root.join(format!("note-{i:04}.txt")),
            format!("Note {i} : virement vers le compte {i} de la société."),
        )
        .unwrap();
    }
    let args = |data: &Path, root: &Path| {
        vec![
            "import".to_owned(),
            "--data-dir".into(),
            data.to_str().unwrap().into(),
            "--investigation".into(),
            inv.to_string(),
            root.to_str().unwrap().into(),
        ]
    };
    let mut child = Command::new(BIN)
        .args(args(&data, &root))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once some files are recorded, well before the end.
    let store = Store::open(&data).unwrap();
    let ws = store.reads().workspace_of(&inv).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let first = loop {
        let jobs = store.reads().jobs(ws, &inv).unwrap();
        if let Some(j) = jobs.iter().find(|j| j.kind == "import" && j.stats["files"].as_u64().unwrap_or(0) >= 20) {
            child.kill().unwrap();
            child.wait().unwrap();
            break j.id;
        }
        assert!(std::time::Instant::now() < deadline, "no file recorded in 120 s: {jobs:?}");
        assert!(child.try_wait().unwrap().is_none(), "the import ended before it was killed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let job = |id: &ObjectRef| store.reads().job(ws, id).unwrap();
    let killed = job(&first);
    assert_eq!(killed.status, "RUNNING", "nothing has ended it yet");
    let recorded = killed.stats["imported"].as_u64().unwrap();
    assert!(recorded < FILES, "killed before the end: {killed:?}");

    let o = Command::new(BIN).args(args(&data, &root)).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("{first}, an earlier import, was interrupted")), "{err}");
    let killed = job(&first);
    assert_eq!(killed.status, "FAILED", "{killed:?}");
    assert!(killed.detail.contains("process (pid") && killed.detail.contains("is gone"), "{}", killed.detail);
    let second: ObjectRef = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let resumed = job(&second);
    assert_eq!(resumed.status, "SUCCEEDED");
    let (imported, duplicates) =
        (resumed.stats["imported"].as_u64().unwrap(), resumed.stats["duplicates"].as_u64().unwrap());
    assert!(duplicates >= recorded, "what the killed run stored comes back by its hash: {resumed:?}");
    // … without being read again (SPEC I1: it resumes where it stopped).
    let known: u64 = err
        .split("; ")
        .find_map(|part| {
            part.trim_end().strip_suffix(" already in the investigation, taken by their hash without being read again")
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count of files taken by their hash: {err}"));
    assert!(known >= recorded, "{known} taken by their hash, {recorded} recorded before the kill: {err}");
    assert_eq!(imported + duplicates, FILES, "{resumed:?}");
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, FILES as i64, "every file once");
}

/// SPEC I2: an archive is a container — a zip and a `.tar.gz` imported,
/// each member evidence derived from its archive with its path inside, its
/// selectors found; a member climbing out (`../`) left out and said.
#[test]
fn an_archive_is_opened_and_its_members_are_evidence_with_their_path() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (ws, inv) = Store::open(&data).unwrap().create_real_workspace("Affaire Zêta", "test").unwrap();
    let root = dir.path().join("dossier");
    fs::create_dir_all(&root).unwrap();
    fs::write(
        root.join("pieces.zip"),
        fixtures::zip(&[
            ("releves/mars.txt", b"Virement vers FR76 3000 6000 0112 3456 7890 189."),
            ("../evasion.txt", b"hors de l'archive"),
            ("lisez-moi.txt", b"Contact : zeta@exemple.example"),
        ]),
    )
    .unwrap();
    fs::write(root.join("journaux.tar.gz"), fixtures::tar_gz(&[("serveur/acces.log", b"198.51.100.77 GET /")]))
        .unwrap();
    let o = labfy(&[
        "import",
        "--data-dir",
        data.to_str().unwrap(),
        "--investigation",
        &inv.to_string(),
        root.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let job: ObjectRef = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let store = Store::open(&data).unwrap();
    let reads = store.reads();
    let stats = reads.job(ws.id(), &job).unwrap().stats;
    assert_eq!((stats["imported"].as_u64(), stats["embedded"].as_u64()), (Some(2), Some(3)), "{stats}");
    let report = reads.import_report(ws.id(), &job, None, 10).unwrap();
    let zip = report.iter().find(|l| l.path.ends_with("pieces.zip")).unwrap();
    assert!(zip.notes.iter().any(|n| n.contains("1 members left out") && n.contains("climbs out")), "{zip:?}");
    let archive = reads.evidence_summary(ws.id(), zip.evidence.as_ref().unwrap()).unwrap();
    assert_eq!(archive.imports[0].format, "archive");
    // The members: their path inside the archive, their selectors.
    let found = reads.search(ws.id(), &inv, "FR7630006000011234567890189", 10).unwrap();
    let member = reads.evidence_summary(ws.id(), &found.hits[0].id).unwrap();
    assert!(member.imports[0].original_path.ends_with("dossier/pieces.zip!releves/mars.txt"), "{member:?}");
    assert_eq!(member.imports[0].original_name, "mars.txt");
    let log = reads.search(ws.id(), &inv, "198.51.100.77", 10).unwrap();
    let log = reads.evidence_summary(ws.id(), &log.hits[0].id).unwrap();
    assert!(log.imports[0].original_path.ends_with("journaux.tar.gz!serveur/acces.log"), "{log:?}");
    assert_eq!(reads.overview(ws.id(), &inv).unwrap().counts.evidence, 5, "2 archives and 3 members, nothing else");
}

/// SPEC I1, V3: `labfy import`'s reading threads each keep one confined
/// worker for many documents — and bound what one document can leave to
/// the next: a worker retires after `MAX_DOCUMENTS_PER_WORKER` documents,
/// and a worker killed between two documents (from outside here, as a
/// document's damage would) leaves the next one read by a fresh worker,
/// with the same answer as a worker of its own would give.
#[test]
fn a_serving_worker_reads_many_documents_and_is_replaced_when_it_retires_or_dies() {
    use labfy_parse::session::Session;
    use labfy_parse::worker::MAX_DOCUMENTS_PER_WORKER;
    let dir = TempDir::new().unwrap();
    let wall = std::time::Duration::from_secs(30);
    let doc = |i: u32| {
        let p = dir.path().join(format!("note-{i}.txt"));
        let text = format!("Note {i} : écrire à personne{i}@societe.example depuis 198.51.100.{}.", i % 250);
        fs::write(&p, &text).unwrap();
        (fs::File::open(&p).unwrap(), text.len() as u64, text)
    };
    let mut session = Session::jailed(Path::new(BIN), 1 << 20);
    for i in 0..3 {
        let (f, len, text) = doc(i);
        let p = session.parse(f, len, &format!("note-{i}.txt"), None, wall);
        assert_eq!(p.text, text, "{:?}", p.notes);
    }
    assert_eq!(session.workers_started(), 1, "one worker for the first documents");
    let pid = session.worker_pid().expect("a live worker");
    // SAFETY: kill(2) on the pid of our own session's worker.
    #[allow(unsafe_code)]
    let killed = unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    assert_eq!(killed, 0);
    let (f, len, text) = doc(3);
    let p = session.parse(f, len, "note-3.txt", None, wall);
    assert_eq!(p.text, text, "read by a fresh worker: {:?}", p.notes);
    assert_eq!(session.workers_started(), 2);
    assert_ne!(session.worker_pid(), Some(pid));
    // The second worker retires after its quota; the next document starts
    // a third.
    for i in 4..(4 + MAX_DOCUMENTS_PER_WORKER) {
        let (f, len, text) = doc(i);
        let p = session.parse(f, len, "note.txt", None, wall);
        assert_eq!(p.text, text, "{:?}", p.notes);
    }
    assert_eq!(session.workers_started(), 3, "a worker serves {MAX_DOCUMENTS_PER_WORKER} documents at most");

    // PDFs go to the document tools' runner: one jail for both, each tool
    // a confined child of its own, every word there.
    assert_eq!(session.runners_started(), 0);
    for i in 0..2 {
        let p = dir.path().join(format!("rapport-{i}.pdf"));
        fs::write(&p, fixtures::pdf(&[&format!("Rapport {i}"), "Serveur 198.51.100.23"])).unwrap();
        let len = fs::metadata(&p).unwrap().len();
        let parsed = session.parse(fs::File::open(&p).unwrap(), len, "rapport.pdf", None, wall);
        assert!(parsed.text.contains(&format!("Rapport {i}")) && parsed.text.contains("198.51.100.23"), "{parsed:?}");
        assert_eq!(parsed.metadata.get("pdf_version").map(String::as_str), Some("1.4"), "{:?}", parsed.metadata);
    }
    assert_eq!(session.runners_started(), 1, "one runner for both PDFs");
}

/// SPEC I1: the files an import refused are imported again alone, once
/// the cause is fixed (here a bound raised): found where the first import
/// found them, with the same checks (a link leading out stays refused), the
/// others not read again.
#[test]
fn the_refused_files_alone_are_imported_again() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (ws, inv) = Store::open(&data).unwrap().create_real_workspace("Affaire Zêta", "test").unwrap();
    let root = dir.path().join("dossier");
    fs::create_dir_all(&root).unwrap();
    for i in 0..5 {
        fs::write(root.join(format!("note-{i}.txt")), format!("Note {i}")).unwrap();
    }
    fs::write(root.join("gros.txt"), "virement ".repeat(150_000)).unwrap();
    symlink("/etc/hostname", root.join("dehors")).unwrap();
    let import = |extra: &[&str]| {
        let mut args = vec!["import", "--data-dir", data.to_str().unwrap(), "--investigation"];
        let inv = inv.to_string();
        args.push(&inv);
        args.extend_from_slice(extra);
        let o = Command::new(BIN).args(&args).output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (ok, first, err) = import(&["--max-file-mib", "1", root.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(err.contains("5 imported") && err.contains("2 refused"), "{err}");
    let (ok, second, err) = import(&["--max-file-mib", "2", "--retry-failed", &first]);
    assert!(ok, "{err}");
    assert!(err.contains("refused 2 files: importing them again"), "{err}");
    assert!(err.contains("2 files in") && err.contains("1 imported") && err.contains("1 refused"), "{err}");
    assert!(err.contains("symbolic link pointing outside"), "{err}");
    let store = Store::open(&data).unwrap();
    let report = store.reads().import_report(ws.id(), &second.parse().unwrap(), None, 10).unwrap();
    let outcomes: Vec<(&str, &str)> = report.iter().map(|l| (l.path.as_str(), l.outcome.as_str())).collect();
    assert_eq!(outcomes, [("dossier/dehors", "refused"), ("dossier/gros.txt", "imported")]);
    assert_eq!(store.reads().overview(ws.id(), &inv).unwrap().counts.evidence, 6);
    // A job of another investigation, or no job, is refused.
    let (ok, _, err) = import(&["--retry-failed", &format!("job:{}", uuid::Uuid::now_v7())]);
    assert!(!ok && err.contains("is no import of"), "{err}");
}

/// SPEC A1, I1: the parser workers of `labfy import` — text, and OCR inside
/// them — are CPU work the governor of a running appliance admits. With its
/// one core held by another reading, the import is refused before anything
/// is read, with the governor's reason and who holds the core, and its job
/// ends `FAILED` saying so; once the core is free the same import is
/// admitted, reads under its reservation, and gives it back at its end.
#[test]
fn the_governor_admits_the_reading_of_an_import() {
    use labfy_ipc::client::Client;
    use labfy_ipc::messages::Boundary;
    use labfy_ipc::messages::governor::{
        DecisionOutcome, GovernorRequest as Req, GovernorResponse as Resp, ReadingAsk, ReservationKind,
    };

    let dir = TempDir::new().unwrap();
    let data = dir.path().join("data");
    let (ws, inv) = Store::open(&data).unwrap().create_real_workspace("Affaire Zêta", "test").unwrap();
    let root = dir.path().join("dossier");
    fs::create_dir_all(&root).unwrap();
    for i in 0..20 {
        fs::write(root.join(format!("note-{i}.txt")), format!("Note {i} : la société Zêta.")).unwrap();
    }
    fs::write(
        root.join("scan.png"),
        fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pdf-corpus/scan-page-1.png"))
            .unwrap(),
    )
    .unwrap();
    let run = dir.path().join("run");
    labfy_ipc::secret::create_private_dir(&run).unwrap();
    let secret = labfy_ipc::secret::create_secret(&run).unwrap();
    let governor = Path::new(BIN).with_file_name("labfy-governor");
    let child = Command::new(&governor)
        .args(["--runtime-dir", run.to_str().unwrap(), "--scratch-dir", dir.path().join("scratch").to_str().unwrap()])
        .args(["--no-rocm-smi", "--no-nvml", "--cores", "1"])
        .env("LABFY_LOG", "warn")
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", governor.display()));
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let operator = labfy_ipc::daemon::operator_socket(&run, Boundary::Governor);
    support::wait_for("the governor's operator socket", || operator.exists().then_some(()));
    let guard = Kill(child);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ask = |req: Req| -> Resp {
        rt.block_on(async {
            let mut c: Client<Req, Resp> = Client::connect(&operator, Boundary::Governor, &secret).await.unwrap();
            c.call(req).await.unwrap()
        })
    };
    // The governor admits once it has a sample: another reading takes the
    // one core it counts.
    let other: labfy_core::JobRef = format!("job:{}", uuid::Uuid::new_v4()).parse().unwrap();
    let held = support::wait_for("the first admission", || {
        match ask(Req::AdmitReading(ReadingAsk {
            job: other,
            workers: 2,
            min_workers: 1,
            ram_per_worker: 64 << 20,
            priority: 10,
        })) {
            Resp::AdmittedReading { reservation, workers } => Some((reservation, workers)),
            _ => None,
        }
    });
    assert_eq!(held.1, 1, "as many workers as cores, no more");

    let import = || {
        Command::new(BIN)
            .args(["import", "--data-dir", data.to_str().unwrap(), "--investigation", &inv.to_string()])
            .args(["--runtime-dir", run.to_str().unwrap(), root.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let o = import();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("import not admitted, nothing read: refused by the governor: CPU: 1 core asked, 0 admissible"),
        "{err}"
    );
    assert!(err.contains(&format!("held by {other}")), "who holds the core is named: {err}");
    let store = Store::open(&data).unwrap();
    let ws = ws.id();
    let refused: ObjectRef = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let job = store.reads().job(ws, &refused).unwrap();
    assert_eq!(job.status, "FAILED", "{job:?}");
    assert!(job.detail.contains("stopped: not admitted: refused by the governor: CPU"), "{}", job.detail);
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, 0, "nothing read, nothing recorded");

    assert!(matches!(ask(Req::Release { reservation: held.0 }), Resp::Released {}));
    let o = import();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("admitted by the governor: 1 parser worker ("), "{err}");
    assert_eq!(store.reads().overview(ws, &inv).unwrap().counts.evidence, 21, "every file, the scan by OCR");
    let done: ObjectRef = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let Resp::State(state) = ask(Req::State {}) else { panic!("no state") };
    assert!(state.reservations.is_empty(), "given back at the end: {:?}", state.reservations);
    let mine: Vec<_> = state.decisions.iter().filter(|d| d.owner == done.to_string()).collect();
    assert!(
        mine.iter().any(|d| d.kind == ReservationKind::Reading && d.outcome == DecisionOutcome::Admitted),
        "{mine:?}"
    );
    assert!(mine.iter().any(|d| d.outcome == DecisionOutcome::Released), "{mine:?}");
    drop(guard);
}
