//! `labfy-bench import`: `labfy import` of a folder of mixed small files
//! (text, HTML, e-mail with an attachment, a few PDFs and `.docx`), with
//! extraction, end to end as a process; against the bare reference of
//! reading and hashing the same files (SPEC C2, docs/PERFORMANCE.md).

use std::fs;
use std::io::Read;
use std::process::Command;
use std::time::Instant;

use clap::Args;
use labfy::Failure;
use labfy_core::ErrorKind;
use labfy_parse::fixtures;
use labfy_store::Store;
use sha2::{Digest, Sha256};

/// `labfy-bench import`.
#[derive(Args)]
pub struct ImportBenchArgs {
    /// Number of files.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    files: u64,
    /// Write the files into this new folder and keep it (to profile
    /// `labfy import` on them); by default a temporary one.
    #[arg(long)]
    keep: Option<std::path::PathBuf>,
    /// Runtime directory of a running governor (`labfy up`'s, or a
    /// `labfy-governor --runtime-dir` of its own): the import asks it to
    /// admit its parser workers, as under the appliance (SPEC A1, I1).
    /// Without it no governor is asked.
    #[arg(long)]
    runtime_dir: Option<std::path::PathBuf>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::Internal, format!("{what}: {e}"))
}

/// One file of the mix: 55 % text, 20 % HTML, 15 % e-mail, 5 % PDF, 5 % docx.
fn file(i: u64) -> (String, Vec<u8>) {
    let who = format!("personne{}@societe{}.example", i % 997, i % 89);
    let ip = format!("198.51.100.{}", i % 250);
    match i % 20 {
        0 => (format!("rapport-{i}.pdf"), fixtures::pdf(&[&format!("Rapport {i}"), &format!("Contact {who}, serveur {ip}")])),
        1 => (format!("note-{i}.docx"), fixtures::docx(&format!("Note {i}"), &[&format!("Joindre {who}")])),
        2..=4 => (
            format!("courriel-{i}.eml"),
            fixtures::eml(&who, &format!("Dossier {i}"), &format!("Voir https://site{}.example/page/{i}", i % 311), ("releve.txt", &format!("Virement depuis {ip}"))),
        ),
        5..=8 => (
            format!("page-{i}.html"),
            format!("<html><head><title>Page {i}</title></head><body><p>Le site de {who} est hébergé sur {ip}.</p></body></html>").into_bytes(),
        ),
        _ => (
            format!("texte-{i}.txt"),
            format!("Pièce {i}. Écrit par {who}; paiement vers FR76 3000 6000 0112 3456 7890 189; hôte {ip}.\n").repeat(3).into_bytes(),
        ),
    }
}

/// Writes the files, times `labfy import` over them and the bare
/// reference, and prints one line each.
pub fn import(args: ImportBenchArgs) -> Result<(), Failure> {
    let tmp = tempfile::tempdir().map_err(|e| failed("temporary directory", e))?;
    let data = tmp.path().join("data");
    let root = args.keep.clone().unwrap_or_else(|| tmp.path().join("dossier"));
    let mut bytes = 0u64;
    for i in 0..args.files {
        let (name, b) = file(i);
        let dir = root.join(format!("{:03}", i / 1000));
        fs::create_dir_all(&dir).map_err(|e| failed("fixture folder", e))?;
        bytes += b.len() as u64;
        fs::write(dir.join(name), b).map_err(|e| failed("fixture file", e))?;
    }
    let (_, inv) = Store::open(&data)?.create_real_workspace("Banc d'import", "labfy-bench import")?;
    // The fixtures written are flushed first: otherwise the import's first
    // flush of its blobs (one `syncfs` a batch) would write them out too.
    labfy_core::durable::sync_file_system(&root).map_err(|e| failed("flush the fixtures", e))?;

    // Bare reference: read and hash every file.
    let started = Instant::now();
    let mut n = 0u64;
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(|e| failed("walk", e))? {
            let p = e.map_err(|e| failed("walk", e))?.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let mut buf = Vec::new();
            fs::File::open(&p).and_then(|mut f| f.read_to_end(&mut buf)).map_err(|e| failed("read", e))?;
            std::hint::black_box(Sha256::digest(&buf));
            n += 1;
        }
    }
    let bare = started.elapsed().as_secs_f64();

    let exe = crate::common::sibling("labfy")?;
    let started = Instant::now();
    let out = Command::new(exe)
        .args(["import", "--data-dir"])
        .arg(&data)
        .args(["--investigation", &inv.to_string()])
        .arg("--runtime-dir")
        // No runtime directory given: one where no governor runs, so the
        // import is not admitted by whatever `labfy up` this machine runs.
        .arg(args.runtime_dir.clone().unwrap_or_else(|| tmp.path().join("no-governor")))
        .arg(&root)
        .output()
        .map_err(|e| failed("labfy import", e))?;
    let took = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(failed("labfy import", String::from_utf8_lossy(&out.stderr)));
    }
    let mb = bytes as f64 / 1e6;
    // How many parser workers read, and whether a governor admitted them.
    let said = String::from_utf8_lossy(&out.stderr);
    if let Some(line) = said.lines().find(|l| l.contains("parser worker")) {
        println!("# {}", line.trim_start_matches("labfy: "));
    }
    println!(
        "{:<28} {} files, {mb:.1} MB in {took:.2} s: {:.0} files/s, {:.2} MB/s",
        "labfy import (+extraction)",
        args.files,
        args.files as f64 / took,
        mb / took
    );
    println!(
        "{:<28} {n} files in {bare:.3} s: {:.0} files/s (import/bare: {:.0}×)",
        "bare read + SHA-256",
        n as f64 / bare,
        took / bare
    );
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}
