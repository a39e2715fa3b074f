//! Every word of every PDF (SPEC A1), measured: the corpus of
//! `tests/fixtures/pdf-corpus` — one French source text made into PDFs by
//! the programs analysts' documents come from (ghostscript through enscript
//! and groff, pdfTeX in two columns, Chromium's print to PDF in two
//! columns, LibreOffice Writer's export) and a scan of the ghostscript one
//! (image-only pages, and its first page as a PNG) — is imported by
//! `labfy import` (confined parser, poppler and Tesseract in their own
//! confined children), and each document's text is compared with the
//! source: words recovered (a multiset of lower-cased words) and words in
//! reading order (the longest common subsequence), printed with the
//! built-in reader's figures (`pdf-extract`, the fallback) beside them.
//! Two encrypted copies: one needs a password (kept, unread, said so), one
//! has an owner's password only (read whole).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use labfy_store::Store;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pdf-corpus")
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// Share of the source's words found in `got` (as a multiset), and share
/// found in the source's order (longest common subsequence).
fn completeness(source: &[String], got: &[String]) -> (f64, f64) {
    let mut have: HashMap<&str, usize> = HashMap::new();
    for w in got {
        *have.entry(w).or_default() += 1;
    }
    let mut found = 0usize;
    for w in source {
        if let Some(n) = have.get_mut(w.as_str()).filter(|n| **n > 0) {
            *n -= 1;
            found += 1;
        }
    }
    let mut prev = vec![0u32; got.len() + 1];
    for s in source {
        let mut cur = vec![0u32; got.len() + 1];
        for (j, g) in got.iter().enumerate() {
            cur[j + 1] = if s == g { prev[j] + 1 } else { prev[j + 1].max(cur[j]) };
        }
        prev = cur;
    }
    let n = source.len() as f64;
    (found as f64 / n, f64::from(prev[got.len()]) / n)
}

/// Share of `got`'s words that are words of the source (OCR's misreadings
/// lower it).
fn precision(source: &[String], got: &[String]) -> f64 {
    let known: std::collections::HashSet<&str> = source.iter().map(String::as_str).collect();
    got.iter().filter(|w| known.contains(w.as_str())).count() as f64 / got.len().max(1) as f64
}

#[test]
fn every_producers_pdf_keeps_its_words_in_order_and_a_scan_is_read_by_ocr() {
    let source = words(&fs::read_to_string(corpus().join("source/note.txt")).unwrap());
    let dir = TempDir::new().unwrap();
    let folder = dir.path().join("dossier");
    fs::create_dir_all(&folder).unwrap();
    let born_digital = ["ghostscript-enscript", "ghostscript-groff", "pdftex", "chromium", "libreoffice", "abiword"];
    for name in born_digital.iter().chain(&["scan", "encrypted-password", "encrypted-owner"]) {
        fs::copy(corpus().join(format!("{name}.pdf")), folder.join(format!("{name}.pdf"))).unwrap();
    }
    fs::copy(corpus().join("scan-page-1.png"), folder.join("scan-page-1.png")).unwrap();

    let data = dir.path().join("data");
    let (ws, inv) = Store::open(&data).unwrap().create_real_workspace("Corpus", "test").unwrap();
    let o = Command::new(BIN)
        .args(["import", "--data-dir", data.to_str().unwrap(), "--investigation", &inv.to_string()])
        .arg(&folder)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let job: labfy_core::ObjectRef = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    let store = Store::open(&data).unwrap();
    let reads = store.reads();
    let report = reads.import_report(ws.id(), &job, None, 100).unwrap();
    let evidence = |file: &str| {
        let line = report.iter().find(|l| l.path.ends_with(file)).unwrap_or_else(|| panic!("{file}: {report:#?}"));
        assert_eq!(line.outcome, "imported", "{line:?}");
        line.evidence.unwrap()
    };
    let text = |file: &str| reads.excerpt(ws.id(), &evidence(file), 0, 16_000).unwrap().text;
    let notes = |file: &str| {
        let s = reads.evidence_summary(ws.id(), &evidence(file)).unwrap();
        s.imports[0].notes.as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };

    println!("{:<22} {:>7} {:>9} {:>9} {:>12}", "producer", "words", "recovered", "in order", "pdf-extract");
    let mut short = Vec::new();
    for name in born_digital {
        let file = format!("{name}.pdf");
        let got = words(&text(&file));
        let (recall, order) = completeness(&source, &got);
        let builtin = labfy_parse::parse(&fs::read(corpus().join(&file)).unwrap(), &file);
        let (builtin_recall, _) = completeness(&source, &words(&builtin.text));
        println!("{name:<22} {:>7} {recall:>9.4} {order:>9.4} {builtin_recall:>12.4}", got.len());
        if recall < 0.99 || order < 0.99 {
            short.push(format!("{name}: {recall:.4} of the words, {order:.4} in order"));
        }
        assert!(notes(&file).iter().all(|n| !n.contains("OCR")), "{name} has a text layer: {:?}", notes(&file));
    }
    assert!(short.is_empty(), "born-digital PDFs below 0.99: {short:?}");

    // The scan: both image-only pages read by OCR, and said so.
    let scan = words(&text("scan.pdf"));
    let (recall, order) = completeness(&source, &scan);
    println!("{:<22} {:>7} {recall:>9.4} {order:>9.4} {:>12}", "scan (OCR)", scan.len(), "-");
    let n = notes("scan.pdf");
    assert!(n.iter().any(|n| n.starts_with("pages 1–2 have no text layer: read by OCR")), "{n:?}");
    // The import report and `labfy import`'s own report say it too.
    let line = report.iter().find(|l| l.path.ends_with("scan.pdf")).unwrap();
    assert!(line.notes.iter().any(|n| n.contains("read by OCR")), "{line:?}");
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.lines().any(|l| l.contains("note on") && l.contains("scan.pdf") && l.contains("read by OCR")),
        "{said}"
    );
    let summary = reads.evidence_summary(ws.id(), &evidence("scan.pdf")).unwrap();
    assert_eq!(summary.imports[0].metadata["ocr_pages"], "1–2", "{:?}", summary.imports[0].metadata);
    assert!(recall >= 0.85, "OCR of a clean 150 dpi scan recovers {recall:.4} of the words");
    // The PNG: page 1 only; what OCR read is nearly all words of the source.
    let png = words(&text("scan-page-1.png"));
    let p = precision(&source, &png);
    println!(
        "{:<22} {:>7} {:>9} {:>9} {:>12}  ({p:.4} of its words are the source's)",
        "scan page 1 (PNG)",
        png.len(),
        "-",
        "-",
        "-"
    );
    assert!(png.len() > 300 && p >= 0.9, "{} words, {p:.4} of them right", png.len());
    assert!(
        notes("scan-page-1.png").iter().any(|n| n.starts_with("text read by OCR")),
        "{:?}",
        notes("scan-page-1.png")
    );
}
