//! `labfy-bench cases`: a real case's extraction, export and verification
//! over a SPECIMEN investigation (SPEC C4, C5), each against a bare
//! reference in the same run: the extractors alone over the same texts
//! (read back from the bundle), a raw copy of the database file, `sha256sum -c` over the same bundle.

use std::process::Command;

use clap::Args;
use labfy::Failure;
use labfy_core::ErrorKind;
use labfy_store::bundle::{self, BundleWriter};
use labfy_store::{EXTRACTION_BATCH, ReadOnlyStore};

use crate::common::{BenchSpecimen, SpecimenArgs, time};

/// `labfy-bench cases`.
#[derive(Args)]
pub struct CasesBenchArgs {
    #[command(flatten)]
    specimen: SpecimenArgs,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::Internal, format!("{what}: {e}"))
}

/// Runs the three measurements and prints one line each with its reference.
pub fn cases(args: CasesBenchArgs) -> Result<(), Failure> {
    let BenchSpecimen { _tmp, dir, mut store, workspace, investigation: inv } =
        BenchSpecimen::open("cases", &args.specimen)?;
    let ws = workspace.id();

    let (job, _) = store.start_extraction(ws, &inv, "labfy-bench cases")?;
    let (stats, took) = time(|| -> Result<_, Failure> {
        loop {
            let step = store.extraction_step(ws, &job, EXTRACTION_BATCH)?;
            if step.done {
                return Ok(step.stats);
            }
        }
    });
    let stats = stats?;
    println!(
        "{:<28} {} items in {:.2} s ({:.0} items/s); {} mentions, {} new entities, {} new relations",
        "extraction job",
        stats.scanned,
        took.as_secs_f64(),
        stats.scanned as f64 / took.as_secs_f64(),
        stats.mentions,
        stats.entities_created,
        stats.relations_created
    );
    let job_took = took;

    // Export, against a raw copy of the database file (synced).
    let out = tempfile::TempDir::new_in(&dir)?;
    let bundle_dir = out.path().join("bundle");
    let ro = ReadOnlyStore::open(&dir)?;
    let (exported, took) = time(|| -> Result<_, Failure> {
        let mut w = BundleWriter::create(&bundle_dir).map_err(|e| failed("export", e))?;
        let header = ro.export(&inv, &mut w).map_err(|e| failed("export", e))?;
        let done = w.finish(header).map_err(|e| failed("export", e))?;
        Command::new("sync").arg("-f").arg(&bundle_dir).status()?;
        Ok(done)
    });
    let exported = exported?;
    let copy = out.path().join("copy.sqlite3");
    let (copied, raw) = time(|| -> std::io::Result<u64> {
        let n = std::fs::copy(ro.path(), &copy)?;
        std::fs::File::open(&copy)?.sync_all()?;
        Ok(n)
    });
    let copied = copied?;
    println!(
        "{:<28} {} files, {:.1} MB in {:.2} s",
        "export",
        exported.files,
        exported.bytes as f64 / 1e6,
        took.as_secs_f64()
    );
    println!(
        "{:<28} {:.1} MB in {:.2} s; export / copy = {:.1}",
        "  raw copy of the database",
        copied as f64 / 1e6,
        raw.as_secs_f64(),
        took.as_secs_f64() / raw.as_secs_f64()
    );

    // Verify, against sha256sum over the same files.
    let (verified, took) = time(|| bundle::verify(&bundle_dir, Some(&exported.fingerprint)));
    let verified = verified.map_err(|e| failed("verify", e))?;
    let (status, sums) = time(|| {
        Command::new("sha256sum").args(["--quiet", "-c", bundle::SHA256SUMS]).current_dir(&bundle_dir).status()
    });
    let status = status?;
    println!(
        "{:<28} {} files, {:.1} MB, {} rows cross-checked in {:.2} s",
        "verify",
        verified.files,
        verified.bytes as f64 / 1e6,
        verified.rows,
        took.as_secs_f64()
    );
    println!(
        "{:<28} {} in {:.2} s; verify / sha256sum = {:.2}",
        "  sha256sum -c (hashes only)",
        if status.success() { "ok" } else { "FAILED" },
        sums.as_secs_f64(),
        took.as_secs_f64() / sums.as_secs_f64()
    );

    // Reference for the extraction: the extractors alone over the same
    // texts (read from the bundle first), nothing written.
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(bundle_dir.join("evidence"))? {
        texts.push(std::fs::read_to_string(entry?.path())?);
    }
    let bytes: usize = texts.iter().map(String::len).sum();
    let (found, bare) = time(|| texts.iter().map(|t| labfy_extract::extract(t).mentions.len()).sum::<usize>());
    println!(
        "{:<28} {} texts, {:.1} MB, {found} mentions in {:.2} s ({:.1} MB/s); job / bare = {:.2}",
        "  bare extractors",
        texts.len(),
        bytes as f64 / 1e6,
        bare.as_secs_f64(),
        bytes as f64 / 1e6 / bare.as_secs_f64(),
        job_took.as_secs_f64() / bare.as_secs_f64()
    );
    Ok(())
}
