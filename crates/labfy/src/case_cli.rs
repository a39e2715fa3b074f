//! `labfy extract`, `labfy export`, `labfy verify`: the analyst's commands
//! over a case's data, run against the data directory directly (SQLite
//! serialises them with a running server's writes).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use labfy::Failure;
use labfy_core::{ErrorKind, ObjectRef, RefKind};
use labfy_store::bundle::{self, BundleError, BundleWriter, FetchedCheck, Verified};
use labfy_store::{EXTRACTION_BATCH, Store};
use uuid::Uuid;

/// `labfy extract`.
#[derive(Args)]
pub struct ExtractArgs {
    /// Data directory.
    #[arg(long, env = "LABFY_DATA_DIR")]
    data_dir: PathBuf,
    /// The investigation to scan (`investigation:<uuid>`), or every
    /// investigation of a workspace (`workspace:<uuid>`).
    target: String,
}

/// The investigations `target` names, each with its workspace.
fn investigations_of(store: &Store, target: &str) -> Result<Vec<(Uuid, ObjectRef)>, Failure> {
    let r: ObjectRef = target.parse().map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("{target}: {e}")))?;
    if !matches!(r.kind(), RefKind::Workspace | RefKind::Investigation) {
        return Err(Failure::new(
            ErrorKind::InvalidInput,
            format!("expected an `investigation:` or `workspace:` reference, got a `{}:` one", r.kind().as_str()),
        ));
    }
    let mut out = Vec::new();
    for ws in store.reads().workspaces()? {
        let invs = store.reads().investigations(ws.id.id())?;
        let wanted = |i: &ObjectRef| if r.kind() == RefKind::Workspace { ws.id == r } else { *i == r };
        out.extend(invs.into_iter().filter(|i| wanted(&i.id)).map(|i| (ws.id.id(), i.id)));
    }
    if out.is_empty() {
        return Err(Failure::new(ErrorKind::NotFound, format!("{r} not found in this data directory")));
    }
    Ok(out)
}

/// Runs an extraction job over each investigation named (SPEC C4), with a
/// progress bar on a terminal and a summary line per investigation.
pub fn extract(args: ExtractArgs) -> Result<(), Failure> {
    let mut store = Store::open(&args.data_dir)?;
    for (ws, inv) in investigations_of(&store, &args.target)? {
        let started = Instant::now();
        let (job, created) = store.start_extraction(ws, &inv, "labfy extract")?;
        if !created {
            eprintln!("labfy: {inv}: an extraction is already running ({job}); following it here");
        }
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "extraction {bar:40} {human_pos}/{human_len} pièces · {per_sec} · reste {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        let stats = loop {
            let step = store.extraction_step(ws, &job, EXTRACTION_BATCH)?;
            if let Some(b) = &bar {
                b.set_length(step.stats.to_scan);
                b.set_position(step.stats.scanned);
            }
            if step.done {
                break step.stats;
            }
        };
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "labfy: {inv}: {} evidence items scanned in {secs:.1} s; {} mentions, {} new entities, {} new relations{}",
            stats.scanned,
            stats.mentions,
            stats.entities_created,
            stats.relations_created,
            if stats.dropped > 0 {
                format!(" ({} mentions over the per-item bound not kept)", stats.dropped)
            } else {
                String::new()
            }
        );
        println!("{job}");
    }
    Ok(())
}

/// An `investigation:` reference given on the command line, or why not.
pub(crate) fn investigation_ref(text: &str) -> Result<ObjectRef, Failure> {
    ObjectRef::parse_kind(text, RefKind::Investigation)
        .map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("{text}: {e}")))
}

/// `labfy export`.
#[derive(Args)]
pub struct ExportArgs {
    /// Data directory.
    #[arg(long, env = "LABFY_DATA_DIR")]
    data_dir: PathBuf,
    /// The investigation to export (`investigation:<uuid>`).
    investigation: String,
    /// A new (or empty) directory for the bundle.
    out: PathBuf,
}

/// Exports an investigation as a bundle (SPEC C5), with egress's own record
/// of its grants and fetches when egress has one, and prints the bundle's
/// fingerprint to hand over with it.
pub fn export(args: ExportArgs) -> Result<(), Failure> {
    let inv = investigation_ref(&args.investigation)?;
    let started = Instant::now();
    // Migrates an older file first; the export itself reads one snapshot.
    drop(Store::open(&args.data_dir)?);
    let store = labfy_store::ReadOnlyStore::open(&args.data_dir)?;
    store.reads().workspace_of(&inv)?;
    let mut w = BundleWriter::create(&args.out).map_err(bundle_failure)?;
    let header = store.export(&inv, &mut w).map_err(bundle_failure)?;
    bundle::add_egress_ledger(&mut w, &labfy::layout::egress_state_dir(&args.data_dir).join("ledger.sqlite3"))
        .map_err(bundle_failure)?;
    let done = w.finish(header).map_err(bundle_failure)?;
    sync_file_system(&done.dir)?;
    eprintln!(
        "labfy: {inv} exported to {}: {} files, {:.1} MB, in {:.1} s",
        done.dir.display(),
        done.files,
        done.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    eprintln!("labfy: check it anywhere with `labfy verify {} --fingerprint {}`", done.dir.display(), done.fingerprint);
    println!("{}", done.fingerprint);
    Ok(())
}

/// Makes every file of the bundle durable with one `syncfs(2)` of the file
/// system that holds it, rather than one journal commit per file.
fn sync_file_system(dir: &std::path::Path) -> Result<(), Failure> {
    labfy_core::durable::sync_file_system(dir)
        .map_err(|e| Failure::new(ErrorKind::Unavailable, format!("{}: cannot sync: {e}", dir.display())))
}

/// `labfy verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The bundle's directory.
    bundle: PathBuf,
    /// The fingerprint handed over with the bundle (`labfy export` printed
    /// it): the manifest must be that one.
    #[arg(long)]
    fingerprint: Option<String>,
    /// Fail when fetched pieces cannot be checked against egress's own
    /// fetch log, because the bundle holds none (the UI's export).
    #[arg(long)]
    require_egress_log: bool,
}

/// Checks a bundle offline; the first mismatch is the error, and every
/// fetched piece that egress's own fetch log does not back is named. Fetched
/// pieces of a bundle without that log are said to be unverifiable against
/// egress, never verified (an error with `--require-egress-log`).
pub fn verify(args: VerifyArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let v = bundle::verify(&args.bundle, args.fingerprint.as_deref()).map_err(|e| {
        Failure::new(ErrorKind::Conflict, format!("{}: verification FAILED: {e}", args.bundle.display()))
    })?;
    let shown = args.bundle.display().to_string();
    let (summary, unverifiable) =
        verify_report(&shown, &v, started.elapsed().as_secs_f64(), args.fingerprint.is_some());
    eprintln!("labfy: {summary}");
    if let Some(why) = unverifiable {
        if args.require_egress_log {
            return Err(Failure::new(
                ErrorKind::Conflict,
                format!("{shown}: verification FAILED (--require-egress-log): {why}"),
            ));
        }
        eprintln!("labfy: warning: {why}");
    }
    println!("{}", v.fingerprint);
    Ok(())
}

/// `labfy import-bundle`.
#[derive(Args)]
pub struct ImportBundleArgs {
    /// Data directory.
    #[arg(long, env = "LABFY_DATA_DIR")]
    data_dir: PathBuf,
    /// The bundle: the directory `labfy export` wrote, or the `.tar` the
    /// UI's export downloads.
    bundle: PathBuf,
    /// The fingerprint handed over with the bundle: the manifest must be
    /// that one.
    #[arg(long)]
    fingerprint: Option<String>,
    /// A workspace of this data directory to receive it in
    /// (`workspace:<uuid>`, of the bundle's class); without it, the
    /// sender's workspace, created when absent.
    #[arg(long)]
    workspace: Option<String>,
}

/// Receives a bundle (SPEC I4) and prints the investigation's reference; a
/// bundle that fails verification is not received, with the reason.
pub fn import_bundle(args: ImportBundleArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let mut store = Store::open(&args.data_dir)?;
    let shown = args.bundle.display().to_string();
    let into = args
        .workspace
        .as_deref()
        .map(|w| ObjectRef::parse_kind(w, RefKind::Workspace).map(|r| r.id()))
        .transpose()
        .map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("--workspace: {e}")))?;
    let r =
        store.receive_bundle(&args.bundle, args.fingerprint.as_deref(), into, "labfy import-bundle").map_err(|e| {
            let kind = match &e {
                BundleError::Store(s) => s.kind(),
                BundleError::Io { .. } => ErrorKind::Unavailable,
                _ => ErrorKind::Conflict,
            };
            Failure::new(kind, format!("{shown}: not received: {e}"))
        })?;
    if r.already {
        eprintln!(
            "labfy: {shown} was received already (fingerprint {}): it is {} of {}; nothing written",
            r.fingerprint, r.investigation, r.workspace
        );
    } else if let Some(v) = &r.verified {
        let (summary, unverifiable) =
            verify_report(&shown, v, started.elapsed().as_secs_f64(), args.fingerprint.is_some());
        eprintln!("labfy: {summary}");
        if let Some(why) = unverifiable {
            eprintln!("labfy: warning: {why}");
        }
        eprintln!(
            "labfy: received as {} in {} ({} rows, read-only, fingerprint {}); open it with `labfy up --workspace {}`",
            r.investigation, r.workspace, r.rows, r.fingerprint, r.workspace
        );
    }
    println!("{}", r.investigation);
    Ok(())
}

/// What `labfy verify` says of a bundle that passed: its summary line — no
/// "verified" for the whole when fetched pieces could not be checked against
/// egress — and, for those pieces, why they are unverifiable.
fn verify_report(bundle: &str, v: &Verified, secs: f64, fingerprint: bool) -> (String, Option<String>) {
    let fetched = match v.fetched {
        FetchedCheck::Matched { pieces, unclaimed } => format!(
            "{pieces} fetched piece{} matched against egress's own fetch log{}",
            plural(pieces),
            if unclaimed > 0 {
                let es = if unclaimed == 1 { "" } else { "es" };
                format!(" (egress logged {unclaimed} more fetch{es} that no piece holds)")
            } else {
                String::new()
            }
        ),
        FetchedCheck::Unverifiable { pieces: 0 } => "no fetched piece".to_owned(),
        FetchedCheck::Unverifiable { pieces } => format!("{pieces} fetched piece{} NOT verified", plural(pieces)),
    };
    let unverifiable = v.fetched.unverifiable();
    let summary = format!(
        "{bundle} {}: {} files ({:.1} MB) hashed, {} rows cross-checked, {fetched}, in {secs:.1} s{}",
        if unverifiable > 0 { "integrity verified" } else { "verified" },
        v.files,
        v.bytes as f64 / 1e6,
        v.rows,
        if fingerprint { ", fingerprint as handed over" } else { "" }
    );
    let why = (unverifiable > 0).then(|| {
        format!(
            "{unverifiable} fetched piece{} UNVERIFIABLE against egress: the bundle holds no fetch log of egress (the \
             UI's export has none; `labfy export` adds it), so what {} say was fetched is the workspace server's word",
            plural(unverifiable),
            if unverifiable == 1 { "it" } else { "they" }
        )
    });
    (summary, why)
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn bundle_failure(e: BundleError) -> Failure {
    match e {
        BundleError::Store(s) => s.into(),
        other => {
            let kind = match other {
                BundleError::Exists(_) => ErrorKind::Conflict,
                BundleError::Io { .. } | BundleError::Ledger { .. } => ErrorKind::Unavailable,
                _ => ErrorKind::Internal,
            };
            Failure::new(kind, other.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verified(fetched: FetchedCheck) -> Verified {
        Verified {
            fingerprint: "f".repeat(64),
            files: 12,
            bytes: 3_400_000,
            rows: 560,
            investigation: "investigation:0190a000-0000-7000-8000-000000000001".into(),
            fetched,
        }
    }

    /// SPEC V4: pieces matched with egress's log are said so; pieces of a
    /// bundle without it are UNVERIFIABLE and the bundle is not called
    /// verified; a bundle that fetched nothing is verified.
    #[test]
    fn verify_says_whether_fetched_pieces_were_checked_against_egress() {
        let (line, why) = verify_report("B", &verified(FetchedCheck::Matched { pieces: 3, unclaimed: 1 }), 0.2, true);
        assert_eq!(
            line,
            "B verified: 12 files (3.4 MB) hashed, 560 rows cross-checked, 3 fetched pieces matched against \
             egress's own fetch log (egress logged 1 more fetch that no piece holds), in 0.2 s, fingerprint as handed over"
        );
        assert_eq!(why, None);

        let (line, why) = verify_report("B", &verified(FetchedCheck::Unverifiable { pieces: 2 }), 0.2, false);
        assert!(line.starts_with("B integrity verified: ") && line.contains("2 fetched pieces NOT verified"), "{line}");
        assert!(!line.starts_with("B verified"), "{line}");
        let why = why.unwrap();
        assert!(why.starts_with("2 fetched pieces UNVERIFIABLE against egress"), "{why}");
        assert!(why.contains("the workspace server's word"), "{why}");

        let (line, why) = verify_report("B", &verified(FetchedCheck::Unverifiable { pieces: 0 }), 0.2, false);
        assert!(line.starts_with("B verified: ") && line.contains("no fetched piece"), "{line}");
        assert_eq!(why, None);
    }
}
