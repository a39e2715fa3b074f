//! `labfy extract`, `labfy export`, `labfy verify`: the analyst's commands
//! over a case's data, run against the data directory directly (SQLite
//! serialises them with a running server's writes).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use labfy::Failure;
use labfy_core::{ErrorKind, ObjectRef, RefKind};
use labfy_store::bundle::{self, BundleError, BundleWriter};
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
    use std::os::fd::AsRawFd;
    let d = std::fs::File::open(dir)
        .map_err(|e| Failure::new(ErrorKind::Unavailable, format!("{}: {e}", dir.display())))?;
    // SAFETY: syncfs takes a file descriptor this function owns for the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::syncfs(d.as_raw_fd()) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Failure::new(ErrorKind::Unavailable, format!("{}: cannot sync: {e}", dir.display())));
    }
    Ok(())
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
}

/// Checks a bundle offline; the first mismatch is the error.
pub fn verify(args: VerifyArgs) -> Result<(), Failure> {
    let started = Instant::now();
    let v = bundle::verify(&args.bundle, args.fingerprint.as_deref()).map_err(|e| {
        Failure::new(ErrorKind::Conflict, format!("{}: verification FAILED: {e}", args.bundle.display()))
    })?;
    eprintln!(
        "labfy: {} verified: {} files ({:.1} MB) hashed, {} rows cross-checked, in {:.1} s{}",
        args.bundle.display(),
        v.files,
        v.bytes as f64 / 1e6,
        v.rows,
        started.elapsed().as_secs_f64(),
        if args.fingerprint.is_some() { ", fingerprint as handed over" } else { "" }
    );
    println!("{}", v.fingerprint);
    Ok(())
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
