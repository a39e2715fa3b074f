//! `labfy import`: files and folders into an investigation (SPEC C2), run
//! against the data directory directly like `labfy extract`. Each file is
//! copied into the blob store (hashed, flushed, renamed), read by a parser
//! worker (this program, started again in a jail of its own — namespaces, a
//! minimal root, no network, as every child, SPEC V3 — where it confines
//! itself further: no file, no socket, no program, no signal but to itself,
//! bounded memory and time), and recorded with its provenance in one
//! transaction. Every file gets an outcome — imported,
//! duplicate, refused with its reason — and the rest of the batch goes on.

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::fs::{self, File};
use std::io::IsTerminal;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::reading::Reading;
use clap::Args;
use labfy::Failure;
use labfy_core::process::Holder;
use labfy_core::{ErrorKind, JobRef, ObjectRef, RefKind};
use labfy_parse::session::Session;
use labfy_store::blobs::{Blob, BlobError, BlobStore};
use labfy_store::{
    MAX_IMPORT_NAME_CHARS, MAX_IMPORT_PATH_CHARS, ReadTree, Store, StoreError, check_import_path, read_tree,
    record_tree,
};

/// Default bound on one imported file, in MiB.
pub const DEFAULT_MAX_FILE_MIB: u64 = 256;

/// `labfy import`.
#[derive(Args)]
pub struct ImportArgs {
    /// Data directory.
    #[arg(long, env = "LABFY_DATA_DIR")]
    data_dir: PathBuf,
    /// The investigation the files join (`investigation:<uuid>`).
    #[arg(long)]
    investigation: String,
    /// Its workspace (`workspace:<uuid>`), checked when given.
    #[arg(long)]
    workspace: Option<String>,
    /// Largest file taken, in MiB; larger ones are refused.
    #[arg(long, default_value_t = DEFAULT_MAX_FILE_MIB, value_parser = clap::value_parser!(u64).range(1..=4096))]
    max_file_mib: u64,
    /// Import into a SPECIMEN workspace (synthetic data) all the same;
    /// without it such an import is refused before anything is read.
    #[arg(long)]
    into_specimen: bool,
    /// Import again only the files an earlier `labfy import` of this
    /// investigation refused (`job:<uuid>`, printed at its end), found again
    /// where it found them (SPEC I1): after a fix (a file made readable, a
    /// larger `--max-file-mib`), the rest is not read again.
    #[arg(long, value_name = "JOB", conflicts_with = "paths")]
    retry_failed: Option<String>,
    /// Runtime directory of a running `labfy up`, whose governor admits
    /// the reading (default: the supervisor's; none running: not governed).
    #[arg(long, env = "LABFY_RUNTIME_DIR")]
    runtime_dir: Option<PathBuf>,
    /// Files and folders (folders are walked recursively).
    #[arg(required_unless_present = "retry_failed")]
    paths: Vec<PathBuf>,
}

/// A file found by the walk: where it is, the path recorded, or why it is
/// refused before it is read.
struct Found {
    path: PathBuf,
    shown: String,
    refused: Option<String>,
}

fn shown(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Walks `root` (a file or a folder); paths are recorded from the folder's
/// own name down. A symbolic link is followed only to a file inside the
/// folder imported; anything that is not a regular file is refused.
fn walk(root: &Path, out: &mut Vec<Found>) {
    let base = root.parent().unwrap_or(Path::new(""));
    let rel = |p: &Path| shown(p.strip_prefix(base).unwrap_or(p));
    let meta = match fs::metadata(root) {
        Ok(m) => m,
        Err(e) => {
            out.push(Found { path: root.into(), shown: shown(root), refused: Some(format!("unreadable: {e}")) });
            return;
        }
    };
    if meta.is_file() {
        out.push(Found { path: root.into(), shown: rel(root), refused: None });
        return;
    }
    let Ok(top) = fs::canonicalize(root) else {
        out.push(Found { path: root.into(), shown: shown(root), refused: Some("unreadable folder".into()) });
        return;
    };
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = match fs::read_dir(&dir) {
            Ok(e) => e.filter_map(Result::ok).collect(),
            Err(e) => {
                out.push(Found {
                    path: dir.clone(),
                    shown: rel(&dir),
                    refused: Some(format!("unreadable folder: {e}")),
                });
                continue;
            }
        };
        entries.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in entries {
            let path = e.path();
            let shown = rel(&path);
            let refuse = |why: &str| Found { path: path.clone(), shown: shown.clone(), refused: Some(why.to_owned()) };
            let Ok(ft) = e.file_type() else {
                out.push(refuse("unreadable"));
                continue;
            };
            if ft.is_dir() {
                subdirs.push(path);
            } else if ft.is_file() {
                out.push(Found { path, shown, refused: None });
            } else if ft.is_symlink() {
                match fs::canonicalize(&path) {
                    Ok(t) if !t.starts_with(&top) => {
                        out.push(refuse("symbolic link pointing outside the imported folder"))
                    }
                    Ok(t) if t.is_file() => out.push(Found { path: t, shown, refused: None }),
                    Ok(_) => out.push(refuse("symbolic link to something other than a file (not followed)")),
                    Err(_) => out.push(refuse("broken symbolic link")),
                }
            } else if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() {
                out.push(refuse("not a regular file (device, pipe or socket)"));
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
}

/// The files job `job` (an earlier `labfy import` of `inv`) refused, found
/// again by walking the files and folders it was given, as it walked them
/// (the same checks: a link leading out is refused again), with those
/// roots.
fn refused_again(
    store: &Store,
    ws: uuid::Uuid,
    inv: &ObjectRef,
    job: &str,
) -> Result<(Vec<PathBuf>, Vec<Found>), Failure> {
    let job = ObjectRef::parse_kind(job, RefKind::Job)
        .map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("--retry-failed {job}: {e}")))?;
    if !store.reads().jobs(ws, inv)?.iter().any(|j| j.id == job && j.kind == labfy_store::IMPORT_JOB) {
        return Err(Failure::new(ErrorKind::InvalidInput, format!("{job} is no import of {inv}")));
    }
    let labfy_store::ImportRefusals { roots, refused } = store.reads().import_refusals(ws, &job)?;
    if roots.is_empty() {
        return Err(Failure::new(
            ErrorKind::InvalidInput,
            format!("{job} was not a `labfy import` that recorded what it was given (an upload, or an older one)"),
        ));
    }
    let wanted: std::collections::HashSet<&str> = refused.iter().map(|(p, _)| p.as_str()).collect();
    let roots: Vec<PathBuf> = roots.into_iter().map(PathBuf::from).collect();
    let mut all = Vec::new();
    for r in &roots {
        walk(r, &mut all);
    }
    // A refused file, or the files of a refused folder (unreadable then).
    let refused_here = |shown: &str| {
        wanted.contains(shown) || wanted.iter().any(|w| shown.strip_prefix(w).is_some_and(|rest| rest.starts_with('/')))
    };
    let mut found: Vec<Found> = all.into_iter().filter(|f| refused_here(&f.shown)).collect();
    // What is no longer where it was is said, not silently dropped.
    let seen = |path: &str| {
        found.iter().any(|f| f.shown == path || f.shown.strip_prefix(path).is_some_and(|rest| rest.starts_with('/')))
    };
    let gone: Vec<String> = refused.iter().map(|(p, _)| p.clone()).filter(|p| !seen(p)).collect();
    for path in gone {
        found.push(Found {
            path: PathBuf::from(&path),
            shown: path,
            refused: Some("no longer found where the first import found it".into()),
        });
    }
    eprintln!("labfy: {job} refused {} files: importing them again", refused.len());
    Ok((roots, found))
}

/// Who `labfy import` is in the audit log and on its jobs.
const IMPORT_ACTOR: &str = "labfy import";

/// Ends `FAILED` the jobs of earlier `labfy import` runs whose process is
/// gone (killed, the machine stopped): the files they recorded stay, and
/// importing the same files again takes the rest — those already stored
/// come back as duplicates, by their hash (SPEC I1). A job whose process
/// still runs is left alone.
fn settle_killed_imports(store: &mut Store) -> Result<(), Failure> {
    for (ws, job, pid, start) in store.running_imports_with_process(IMPORT_ACTOR)? {
        if (Holder { pid, start }).alive() {
            continue;
        }
        let why = format!(
            "interrupted: the `labfy import` process (pid {pid}) is gone; the files it recorded are kept, \
             importing the same files again takes the rest"
        );
        store.fail_import(ws, &job, &why, IMPORT_ACTOR)?;
        eprintln!("labfy: {job}, an earlier import, was interrupted (its process is gone): marked FAILED");
    }
    Ok(())
}

/// Runs an import job over `args.paths`, with a progress bar on a terminal,
/// and prints its summary and each refusal.
pub fn import(args: ImportArgs) -> Result<(), Failure> {
    let inv = crate::case_cli::investigation_ref(&args.investigation)?;
    let worker = std::env::current_exe()
        .map_err(|e| Failure::new(ErrorKind::Internal, format!("cannot find this program for the parser: {e}")))?;
    let mut store = Store::open(&args.data_dir)?;
    let ws = store.reads().workspace_of(&inv)?;
    if let Some(w) = &args.workspace {
        let w: ObjectRef =
            w.parse().map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("--workspace {w}: {e}")))?;
        if w.kind() != RefKind::Workspace || w.id() != ws {
            return Err(Failure::new(ErrorKind::InvalidInput, format!("{inv} is not in {w}")));
        }
    }
    // Blobs are flushed together before each batch of rows that names them
    // is committed, not one by one (SPEC I1).
    let blobs = BlobStore::open(&args.data_dir)
        .map_err(|e| Failure::new(ErrorKind::Storage, format!("blob store of {}: {e}", args.data_dir.display())))?
        .deferring_sync();
    let flushed = |blobs: &BlobStore| {
        blobs.sync().map_err(|e| Failure::new(ErrorKind::Storage, format!("blob store: cannot flush: {e}")))
    };
    let (roots, found) = match &args.retry_failed {
        None => {
            let roots: Vec<PathBuf> =
                args.paths.iter().map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())).collect();
            let mut found = Vec::new();
            for p in &roots {
                walk(p, &mut found);
            }
            (roots, found)
        }
        Some(job) => refused_again(&store, ws, &inv, job)?,
    };
    let roots: Vec<String> = roots.iter().map(|r| r.to_string_lossy().into_owned()).collect();
    let max = args.max_file_mib << 20;
    settle_killed_imports(&mut store)?;
    // What the investigation holds already is taken by its hash, not read
    // again: an import run again after a kill goes on where it stopped.
    let known = store.reads().evidence_hashes(ws, &inv)?;
    let started = Instant::now();
    let expected = Some(found.len() as u64);
    // The job names this process, so a later import can tell it was killed
    // (SPEC I1).
    let job = match Holder::current() {
        Some(me) => store.start_import_as_process(
            ws,
            &inv,
            expected,
            args.into_specimen,
            (me.pid, me.start),
            &roots,
            IMPORT_ACTOR,
        )?,
        None => store.start_import(ws, &inv, expected, args.into_specimen, IMPORT_ACTOR)?,
    };
    // The parser workers are CPU work the governor admits (SPEC A1, I1).
    let job_ref = JobRef::try_from(job).map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?;
    let reading = match Reading::ask(args.runtime_dir.clone(), job_ref, PARALLEL_READS) {
        Ok(r) => r,
        Err(why) => {
            store.fail_import(ws, &job, &format!("not admitted: {why}"), IMPORT_ACTOR)?;
            println!("{job}");
            return Err(Failure::new(ErrorKind::Unavailable, format!("import not admitted, nothing read: {why}")));
        }
    };
    eprintln!("labfy: {}", reading.detail);
    let stages = Stages::default();
    let mut progress = Progress::new(found.len() as u64);
    let wall = std::time::Duration::from_secs(labfy_parse::worker::WORKER_WALL_SECONDS);
    let mut refusals = Vec::new();
    let mut noted: Vec<(String, Vec<String>)> = Vec::new();
    let mut failure = None;
    // Files are taken and read by a few threads at once, and recorded by
    // this one, in the walk's order — so a duplicate is always the later of
    // two — several to a transaction. This process runs on the host,
    // unconfined: workers get a jail of their own, and each reading thread
    // keeps one that reads document after document (`labfy_parse::session`).
    let stop = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    // The index of the next file the recorder takes: the readers stay at
    // most READ_AHEAD files ahead of it (what waits is held in memory).
    let taken = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let recorded = std::thread::scope(|scope| -> Result<(), Failure> {
        // The reservation is renewed while the import reads; taken back, it
        // stops the readers (and the recorder, below).
        scope.spawn(|| reading.keep(&done, &stop));
        // However the recorder ends, the renewing thread ends with it.
        let _done = SetOnDrop(&done);
        let (tx, rx) = mpsc::sync_channel::<(usize, Prepared)>(READ_AHEAD);
        for _ in 0..reading.workers {
            let tx = tx.clone();
            let (found, blobs, stop, next, worker, known, stages, taken) =
                (&found, &blobs, &stop, &next, &worker, &known, &stages, &taken);
            scope.spawn(move || {
                let mut session = Session::jailed(worker, max);
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(f) = found.get(i) else { break };
                    while i >= taken.load(Ordering::Acquire) + READ_AHEAD && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let prepared = prepare(f, blobs, max, known, stages, &mut |b: &Blob, n: &str| {
                        blobs.parse_in(&mut session, b, n, None, wall)
                    });
                    if tx.send((i, prepared)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut waiting = BTreeMap::new();
        let mut due = 0usize;
        'batches: while let Some(first) = next_due(&rx, &mut waiting, due, None) {
            // A batch's files are gathered with no transaction open (the
            // workspace server may be writing), for at most BATCH_FILES
            // files or BATCH_TIME; the blobs they name are made durable;
            // then they are recorded in one transaction.
            let opened = Instant::now();
            let mut items = vec![first];
            taken.store(due + 1, Ordering::Release);
            while items.len() < BATCH_FILES {
                match next_due(&rx, &mut waiting, due + items.len(), Some(opened + BATCH_TIME)) {
                    Some(p) => {
                        items.push(p);
                        taken.store(due + items.len(), Ordering::Release);
                    }
                    None => break,
                }
            }
            flushed(&blobs)?;
            let mut batch = store.import_batch(ws, &job, IMPORT_ACTOR)?;
            for prepared in items {
                let f = &found[due];
                due += 1;
                // A file and what it embeds are recorded whole or not at all.
                batch.begin_file()?;
                let outcome = match prepared {
                    Prepared::Refused(why) => Err(why),
                    Prepared::Failed(why) => {
                        failure = Some(why);
                        stop.store(true, Ordering::Relaxed);
                        Ok(())
                    }
                    Prepared::Known { name, blob } => match batch.record_known(&name, &f.shown, &blob) {
                        Ok(Some(_)) => Ok(()),
                        // Evidence is never deleted: this cannot be.
                        Ok(None) => Err("its bytes were in the investigation when the import began, and are no \
                                         longer: import it again"
                            .to_owned()),
                        Err(e) => stopped(e, &mut failure, &stop),
                    },
                    Prepared::Ready(tree) => {
                        let top = &tree.documents[0].parsed;
                        if !top.notes.is_empty() {
                            noted.push((f.shown.clone(), top.notes.clone()));
                        }
                        record_tree(&tree, &mut |file| batch.record(file))
                            .map(drop)
                            .or_else(|e| stopped(e, &mut failure, &stop))
                    }
                };
                batch.end_file(outcome.is_ok() && failure.is_none())?;
                if let Err(why) = outcome {
                    batch.refuse(&f.shown, &why)?;
                    refusals.push((f.shown.clone(), why));
                }
                if failure.is_some() {
                    batch.commit()?;
                    break 'batches;
                }
                stages.recorded.fetch_add(1, Ordering::Relaxed);
                progress.show(&stages);
            }
            batch.commit()?;
        }
        Ok(())
    });
    let lost = reading.lost();
    reading.release();
    recorded?;
    // Taken back by the governor: what was read is recorded, the rest is
    // for the same command again.
    if failure.is_none() {
        failure = lost;
    }
    progress.finish();
    let stats = store.finish_import(ws, &job, failure.as_deref(), IMPORT_ACTOR)?;
    let secs = started.elapsed().as_secs_f64();
    for (path, why) in &refusals {
        eprintln!("labfy: refused {}: {why}", path.escape_debug());
    }
    // Text partial or absent, read by OCR: said for each file (SPEC A1).
    for (path, notes) in &noted {
        eprintln!("labfy: note on {}: {}", path.escape_debug(), notes.join("; ").escape_debug());
    }
    eprintln!(
        "labfy: {inv}: {} files in {secs:.1} s ({:.0} files/s, {:.1} MB/s): {} imported, {} duplicates, {} refused; \
         {} embedded documents; {} already in the investigation, taken by their hash without being read again",
        stats.files,
        stats.files as f64 / secs.max(1e-9),
        stats.bytes as f64 / 1e6 / secs.max(1e-9),
        stats.imported,
        stats.duplicates,
        stats.refused,
        stats.embedded,
        stages.known.load(Ordering::Relaxed)
    );
    println!("{job}");
    match failure {
        Some(f) => Err(Failure::new(ErrorKind::Storage, format!("import stopped: {f}"))),
        None => Ok(()),
    }
}

/// A found file, taken into the blob store and read (with what it
/// embeds), known by its hash, or refused — or the import stops.
enum Prepared {
    Refused(String),
    Failed(String),
    Known { name: String, blob: Blob },
    Ready(Box<ReadTree>),
}

/// Sets its flag when dropped.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Files taken and read at once (each reading thread keeps a worker).
const PARALLEL_READS: usize = 3;
/// Files read ahead of the one recorded next (a slow PDF does not hold
/// the other readers back).
const READ_AHEAD: usize = 256;
/// Most files recorded in one transaction.
const BATCH_FILES: usize = 512;
/// Longest a transaction stays open for more files (the workspace server
/// waits for it to write).
const BATCH_TIME: Duration = Duration::from_millis(1000);

/// How far each stage has gone: files stored in the blob store, read by a
/// parser (with what they embed), recorded with their extraction.
#[derive(Default)]
struct Stages {
    stored: AtomicU64,
    read: AtomicU64,
    recorded: AtomicU64,
    /// Of those read, taken by their hash without a parser.
    known: AtomicU64,
}

/// Takes one found file: into the blob store, then — unless the
/// investigation has its bytes already — read with what it embeds.
fn prepare(
    f: &Found,
    blobs: &BlobStore,
    max: u64,
    known: &HashSet<String>,
    stages: &Stages,
    parse: &mut dyn FnMut(&Blob, &str) -> labfy_parse::Parsed,
) -> Prepared {
    let (name, blob) = match take(f, blobs, max) {
        Ok(taken) => taken,
        Err(why) => return Prepared::Refused(why),
    };
    stages.stored.fetch_add(1, Ordering::Relaxed);
    if known.contains(&blob.sha256) {
        stages.read.fetch_add(1, Ordering::Relaxed);
        stages.known.fetch_add(1, Ordering::Relaxed);
        return Prepared::Known { name, blob };
    }
    let prepared = match read_tree(blobs, &name, &f.shown, &blob, parse) {
        Ok(tree) => Prepared::Ready(Box::new(tree)),
        Err(StoreError::Invalid(why)) => Prepared::Refused(why),
        Err(e) => Prepared::Failed(e.to_string()),
    };
    stages.read.fetch_add(1, Ordering::Relaxed);
    prepared
}

/// The file due next, in the walk's order: waiting already, or as the
/// readers send it; `None` when they are done, or at `until`.
fn next_due(
    rx: &mpsc::Receiver<(usize, Prepared)>,
    waiting: &mut BTreeMap<usize, Prepared>,
    due: usize,
    until: Option<Instant>,
) -> Option<Prepared> {
    loop {
        if let Some(p) = waiting.remove(&due) {
            return Some(p);
        }
        let (i, p) = match until {
            None => rx.recv().ok()?,
            Some(t) => rx.recv_timeout(t.saturating_duration_since(Instant::now())).ok()?,
        };
        waiting.insert(i, p);
    }
}

/// A store error while recording: a file refused (`Invalid`), or the import
/// stops (recorded in `failure`).
fn stopped(e: StoreError, failure: &mut Option<String>, stop: &AtomicBool) -> Result<(), String> {
    match e {
        StoreError::Invalid(why) => Err(why),
        e => {
            *failure = Some(e.to_string());
            stop.store(true, Ordering::Relaxed);
            Ok(())
        }
    }
}

/// What `labfy import` shows while it runs: a bar on a terminal, a line
/// every [`PROGRESS_EVERY`] otherwise (a log, a pipe) — each stage, files/s
/// and the time left.
struct Progress {
    total: u64,
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
    last_line: Instant,
}

/// How often a progress line is written when stderr is no terminal.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

impl Progress {
    fn new(total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(total);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "import {bar:30} {human_pos}/{human_len} enregistrés · {msg} · {per_sec} · reste {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Self { total, bar, started: Instant::now(), last_line: Instant::now() }
    }

    fn show(&mut self, stages: &Stages) {
        let (stored, read, recorded) = (
            stages.stored.load(Ordering::Relaxed),
            stages.read.load(Ordering::Relaxed),
            stages.recorded.load(Ordering::Relaxed),
        );
        if let Some(bar) = &self.bar {
            bar.set_position(recorded);
            bar.set_message(format!("stockés {stored} · lus {read}"));
            return;
        }
        if self.last_line.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last_line = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = recorded as f64 / secs;
        let left = if rate > 0.0 { (self.total.saturating_sub(recorded)) as f64 / rate } else { f64::NAN };
        eprintln!(
            "labfy: import: {recorded}/{} files recorded (stored {stored}, read {read}) · {rate:.0} files/s · \
             about {left:.0} s left",
            self.total
        );
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Checks one found file and copies it into the blob store.
fn take(f: &Found, blobs: &BlobStore, max: u64) -> Result<(String, Blob), String> {
    if let Some(why) = &f.refused {
        return Err(why.clone());
    }
    let name = f
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| "file name is not valid UTF-8".to_owned())?
        .to_owned();
    check_import_path("file name", &name, MAX_IMPORT_NAME_CHARS)?;
    check_import_path("path", &f.shown, MAX_IMPORT_PATH_CHARS)?;
    let mut file = File::open(&f.path).map_err(|e| format!("unreadable: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("unreadable: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() == 0 {
        return Err("empty file (0 bytes)".into());
    }
    if meta.len() > max {
        return Err(format!("larger than the bound ({} bytes > {max})", meta.len()));
    }
    let blob = blobs.put(&mut file, max).map_err(|e| match e {
        BlobError::TooLarge { max } => format!("grew past the bound of {max} bytes while read"),
        e => e.to_string(),
    })?;
    Ok((name, blob))
}
