//! `labfy extract`: the analyst's commands over a case's data, run against
//! the data directory directly (SQLite serialises them with a running
//! server's writes).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use labfy_core::{ErrorKind, ObjectRef, RefKind};
use labfy_store::{EXTRACTION_BATCH, Store};
use uuid::Uuid;

use crate::cli::Failure;

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
    let mut out = Vec::new();
    for ws in store.reads().workspaces()? {
        let invs = store.reads().investigations(ws.id.id())?;
        match r.kind() {
            RefKind::Workspace if ws.id == r => out.extend(invs.into_iter().map(|i| (ws.id.id(), i.id))),
            RefKind::Investigation => out.extend(invs.into_iter().filter(|i| i.id == r).map(|i| (ws.id.id(), i.id))),
            RefKind::Workspace => {}
            other => {
                return Err(Failure::new(
                    ErrorKind::InvalidInput,
                    format!("expected an `investigation:` or `workspace:` reference, got a `{}:` one", other.as_str()),
                ));
            }
        }
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
