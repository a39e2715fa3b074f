//! Import of files (SPEC C2): an import job, one outcome per file, and for
//! each file read its evidence item (or the item those bytes already are),
//! its provenance record with the file's name, path, size and hash, its
//! mentions (extraction runs in the same transaction) and, for an embedded
//! document, its `derived_from` relation to its parent.
//!
//! The bytes are in the blob store before a row names them
//! ([`crate::blobs`]); each file is one transaction, so a crash mid-import
//! leaves the files before it whole and nothing of the one it was on.

use labfy_core::{ObjectRef, RefKind};
use labfy_parse::Parsed;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::blobs::Blob;
use crate::error::{Result, StoreError};
use crate::graph_edit::insert_provenance;
use crate::model::{ImportRecord, WorkspaceClass};
use crate::now_rfc3339;
use crate::primitives::{Inserted, TextEvidence, audit, index_evidence, insert_text_evidence};
use crate::reads::Reads;

/// `jobs.kind` of an import.
pub const IMPORT_JOB: &str = "import";
/// Producer of imported evidence and of their `derived_from` relations.
pub const IMPORT_PRODUCER: &str = "labfy-import";
/// Longest file name kept, in characters.
pub const MAX_IMPORT_NAME_CHARS: usize = 255;
/// Longest original path kept, in characters.
pub const MAX_IMPORT_PATH_CHARS: usize = 4096;
/// Longest refusal reason kept, in characters.
pub const MAX_IMPORT_REASON_CHARS: usize = 500;

/// An import job's figures.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportStats {
    /// Files announced by the client (the UI knows how many it drops).
    pub expected: Option<u64>,
    /// Files with an outcome (embedded documents not counted).
    pub files: u64,
    /// Files stored as new evidence.
    pub imported: u64,
    /// Files whose bytes were already evidence of the investigation.
    pub duplicates: u64,
    /// Files refused, each with its reason.
    pub refused: u64,
    /// Bytes of the files taken (imported or duplicate).
    pub bytes: u64,
    /// Embedded documents stored (attachments, messages of a mailbox).
    pub embedded: u64,
}

impl ImportStats {
    fn detail(&self) -> String {
        format!(
            "{} files: {} imported, {} duplicates, {} refused; {} embedded documents",
            self.files, self.imported, self.duplicates, self.refused, self.embedded
        )
    }

    fn progress(&self) -> f64 {
        match self.expected {
            Some(n) if n > 0 => (self.files as f64 / n as f64).min(1.0),
            _ => 0.0,
        }
    }
}

/// One file to record: where it came from, its stored bytes, what the
/// parser read.
#[derive(Debug, Clone, Copy)]
pub struct ImportedFile<'a> {
    /// Its file name.
    pub name: &'a str,
    /// Its path as given (relative to the folder imported, or the name of
    /// an upload; `parent!child` for an embedded document).
    pub path: &'a str,
    /// Its bytes, in the blob store.
    pub blob: &'a Blob,
    /// What the parser read (checked by the caller with `Reply::check`).
    pub parsed: &'a Parsed,
    /// The document it was embedded in.
    pub parent: Option<&'a ObjectRef>,
}

/// What became of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportOutcome {
    /// Stored as a new evidence item.
    Imported(ObjectRef),
    /// The same bytes already were this evidence item: one more provenance
    /// record.
    Duplicate(ObjectRef),
}

impl ImportOutcome {
    /// The evidence item.
    pub fn evidence(&self) -> &ObjectRef {
        match self {
            ImportOutcome::Imported(e) | ImportOutcome::Duplicate(e) => e,
        }
    }
}

/// What a failed-only re-import takes ([`Reads::import_refusals`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportRefusals {
    /// The files and folders the job was given, absolute.
    pub roots: Vec<String>,
    /// The paths it refused, in order, with why.
    pub refused: Vec<(String, String)>,
}

/// Why real files are not imported into a SPECIMEN workspace unasked.
pub const SPECIMEN_IMPORT_REFUSED: &str = "this workspace is SPECIMEN (synthetic data): real files belong in a real \
     workspace; to import into this one all the same, say so (`labfy import --into-specimen`, or the box of the \
     import form)";

/// An outcome as read back, for a job's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportReportLine {
    /// Order in the job.
    pub position: i64,
    /// The file's path as given.
    pub path: String,
    /// `imported`, `duplicate`, `refused`.
    pub outcome: String,
    /// Its evidence item.
    pub evidence: Option<ObjectRef>,
    /// Why it was refused.
    pub reason: Option<String>,
    /// What the parser said of the file (text partial or absent, read by
    /// OCR), from its import record.
    pub notes: Vec<String>,
}

/// Checks a file name or path given for an import: no control character
/// (a terminal escape in a report), no `..` component, within bounds.
pub fn check_import_path(what: &str, value: &str, max_chars: usize) -> std::result::Result<(), String> {
    if value.is_empty() {
        return Err(format!("empty {what}"));
    }
    if value.chars().count() > max_chars {
        return Err(format!("{what} longer than {max_chars} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("{what} contains control characters"));
    }
    if value.split(['/', '\\']).any(|c| c == "..") {
        return Err(format!("{what} contains a `..` component"));
    }
    Ok(())
}

fn stats_of(conn: &Connection, job: &str) -> Result<(String, String, ImportStats)> {
    let (inv, status, stats): (String, String, String) = conn
        .prepare_cached("SELECT investigation_id, status, stats FROM jobs WHERE id = ?1 AND kind = ?2")?
        .query_row(params![job, IMPORT_JOB], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("job:{job} (an import)")))?;
    let stats =
        serde_json::from_str(&stats).map_err(|e| StoreError::Damaged(format!("import job {job} stats: {e}")))?;
    Ok((inv, status, stats))
}

fn save_stats(conn: &Connection, job: &str, stats: &ImportStats, status: &str) -> Result<()> {
    let json = serde_json::to_string(stats).map_err(|e| StoreError::Invalid(format!("job stats: {e}")))?;
    let progress = if status == "SUCCEEDED" { 1.0 } else { stats.progress() };
    conn.prepare_cached(
        "UPDATE jobs SET status = ?2, progress = ?3, detail = ?4, stats = ?5, updated_at = ?6 WHERE id = ?1",
    )?
    .execute(params![job, status, progress, stats.detail(), json, now_rfc3339()])?;
    Ok(())
}

/// The running import job `job` of `ws`, with its investigation and figures.
fn running(conn: &Connection, ws: Uuid, job: &ObjectRef) -> Result<(String, ImportStats)> {
    if job.kind() != RefKind::Job {
        return Err(StoreError::Invalid(format!("expected a `job:` reference, got `{job}`")));
    }
    Reads { conn }.require_in_workspace(ws, job)?;
    let (inv, status, stats) = stats_of(conn, &job.id().to_string())?;
    if status != "RUNNING" {
        return Err(StoreError::Conflict(format!("{job} is {status}, not running")));
    }
    Ok((inv, stats))
}

fn outcome_row(
    conn: &Connection,
    job: &str,
    position: u64,
    path: &str,
    outcome: &str,
    ev: Option<&ObjectRef>,
    reason: Option<&str>,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO import_outcomes (job_id, position, path, outcome, evidence_id, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![job, position as i64, path, outcome, ev.map(|e| e.id().to_string()), reason])?;
    Ok(())
}

/// Starts an import job into an investigation.
pub(crate) fn start(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    expected: Option<u64>,
    into_specimen: bool,
    process: Option<(i32, u64, &[String])>,
    actor: &str,
) -> Result<ObjectRef> {
    if inv.kind() != RefKind::Investigation {
        return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
    }
    let tx = conn.transaction()?;
    let reads = Reads { conn: &tx };
    reads.require_in_workspace(ws, inv)?;
    if reads.workspace(ws)?.class == WorkspaceClass::Specimen && !into_specimen {
        return Err(StoreError::Conflict(SPECIMEN_IMPORT_REFUSED.into()));
    }
    let job = Uuid::now_v7();
    let now = now_rfc3339();
    let stats = ImportStats { expected, ..ImportStats::default() };
    tx.execute(
        "INSERT INTO jobs (id, investigation_id, kind, status, progress, detail, created_at, updated_at, stats)
         VALUES (?1, ?2, ?3, 'RUNNING', 0, ?4, ?5, ?5, '{}')",
        params![job.to_string(), inv.id().to_string(), IMPORT_JOB, stats.detail(), now],
    )?;
    save_stats(&tx, &job.to_string(), &stats, "RUNNING")?;
    let job_ref = ObjectRef::new(RefKind::Job, job);
    audit(
        &tx,
        actor,
        "import.start",
        Some(ws),
        Some(&job_ref),
        &match process {
            Some((pid, start, roots)) => serde_json::json!({
                "investigation": inv, "expected": expected, "process": {"pid": pid, "start": start}, "roots": roots
            }),
            None => serde_json::json!({"investigation": inv, "expected": expected}),
        },
    )?;
    tx.commit()?;
    Ok(job_ref)
}

/// Import jobs `actor` started from a process it recorded and that are
/// still `RUNNING`: (workspace, job, pid, start time), oldest first. Whether
/// that process still lives is the caller's question (SPEC I1).
pub(crate) fn running_with_process(conn: &Connection, actor: &str) -> Result<Vec<(Uuid, ObjectRef, i32, u64)>> {
    let rows: Vec<(String, i64, i64)> = conn
        .prepare(
            "SELECT j.id, json_extract(a.detail, '$.process.pid'), json_extract(a.detail, '$.process.start')
             FROM jobs j JOIN audit_log a ON a.object_ref = 'job:' || j.id AND a.action = 'import.start'
             WHERE j.kind = ?1 AND j.status = 'RUNNING' AND a.actor = ?2
               AND json_extract(a.detail, '$.process.pid') IS NOT NULL
             ORDER BY j.created_at",
        )?
        .query_map(params![IMPORT_JOB, actor], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    rows.into_iter()
        .map(|(id, pid, start)| {
            let job = ObjectRef::new(
                RefKind::Job,
                Uuid::try_parse(&id).map_err(|e| StoreError::Damaged(format!("job id {id}: {e}")))?,
            );
            let pid = i32::try_from(pid).map_err(|_| StoreError::Damaged(format!("{job}: pid {pid}")))?;
            let start = u64::try_from(start).map_err(|_| StoreError::Damaged(format!("{job}: start {start}")))?;
            Ok((Reads { conn }.workspace_of(&job)?, job, pid, start))
        })
        .collect()
}

/// Whether an embedded document already has its `derived_from` relation to
/// its parent: by the child's own relations (`relations_src`; the `+`
/// keeps the planner off the other indexes). Left alone, the planner walked
/// every relation of the investigation for each embedded document, and the
/// import slowed as the investigation grew.
pub(crate) const DERIVED_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM relations
     WHERE src = ?2 AND kind = 'derived_from' AND +dst = ?3 AND +investigation_id = ?1)";

/// One import record: a file read (or taken by its hash) into the job.
const INSERT_IMPORT: &str = "INSERT INTO imports (provenance_id, investigation_id, evidence_id, job_id, original_name,
         original_path, byte_len, sha256, format, parser_version, encoding, metadata, notes, imported_by, imported_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";

/// Records one file (and counts it in the job unless it is embedded), in
/// a transaction of its own.
pub(crate) fn record(
    conn: &mut Connection,
    ws: Uuid,
    job: &ObjectRef,
    file: &ImportedFile<'_>,
    actor: &str,
) -> Result<ImportOutcome> {
    let tx = conn.transaction()?;
    let outcome = record_in(&tx, ws, job, file, actor)?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::IMPORT_FILE_STORED);
    Ok(outcome)
}

/// [`record`]'s writes, in the caller's transaction.
fn record_in(
    tx: &Connection,
    ws: Uuid,
    job: &ObjectRef,
    file: &ImportedFile<'_>,
    actor: &str,
) -> Result<ImportOutcome> {
    check_import_path("file name", file.name, MAX_IMPORT_NAME_CHARS).map_err(StoreError::Invalid)?;
    check_import_path("path", file.path, MAX_IMPORT_PATH_CHARS).map_err(StoreError::Invalid)?;
    let (inv, mut stats) = running(tx, ws, job)?;
    let job_id = job.id().to_string();
    let now = now_rfc3339();
    let p = file.parsed;
    tx.prepare_cached("INSERT OR IGNORE INTO blobs (sha256, byte_len, created_at) VALUES (?1, ?2, ?3)")?
        .execute(params![file.blob.sha256, file.blob.len as i64, now])?;
    let existing: Option<String> = tx
        .prepare_cached("SELECT id FROM evidence WHERE investigation_id = ?1 AND sha256 = ?2 ORDER BY seq LIMIT 1")?
        .query_row(params![inv, file.blob.sha256], |r| r.get(0))
        .optional()?;
    let activity = if file.parent.is_some() { "import.embedded" } else { "import" };
    let inputs: Vec<String> = file.parent.map(ToString::to_string).into_iter().collect();
    let (outcome, provenance, new_relations) = match existing {
        Some(id) => {
            let ev = ObjectRef::new(
                RefKind::Evidence,
                Uuid::parse_str(&id).map_err(|e| StoreError::Damaged(format!("evidence id {id}: {e}")))?,
            );
            let prov = insert_provenance(tx, &inv, &ev.to_string(), actor, activity, &inputs)?;
            tx.prepare_cached("UPDATE investigations SET provenance_count = provenance_count + 1 WHERE id = ?1")?
                .execute([&inv])?;
            (ImportOutcome::Duplicate(ev), prov, 0)
        }
        None => {
            let title = p.title.clone().unwrap_or_else(|| file.name.to_owned());
            let source = format!("import: {}", file.path);
            let source: String = source.chars().take(crate::MAX_NOTE_SOURCE_CHARS).collect();
            let doc = TextEvidence {
                investigation: Uuid::parse_str(&inv)
                    .map_err(|e| StoreError::Damaged(format!("investigation id {inv}: {e}")))?,
                title: &title,
                content: &p.text,
                source: &source,
                mime: &p.mime,
                at: &now,
                original: Some(file.blob),
                dated_at: None,
            };
            let Inserted { evidence: ev, seq, provenance } =
                insert_text_evidence(tx, &doc, actor, activity, &file.parent.copied().into_iter().collect::<Vec<_>>())?;
            index_evidence(tx, seq, seq)?;
            if !p.text.is_empty() {
                crate::extraction::scan_new_evidence(tx, &inv, &ev, &p.text, &now)?;
            }
            tx.prepare_cached(
                "UPDATE investigations SET evidence_count = evidence_count + 1, provenance_count = provenance_count + 1 WHERE id = ?1",
            )?
            .execute([&inv])?;
            (ImportOutcome::Imported(ev), provenance, 1)
        }
    };
    let mut relations = 0;
    if let Some(parent) = file.parent {
        let ev = outcome.evidence().to_string();
        let exists: bool =
            tx.prepare_cached(DERIVED_EXISTS)?.query_row(params![inv, ev, parent.to_string()], |r| r.get(0))?;
        if !exists && ev != parent.to_string() {
            tx.prepare_cached(
                "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at, producer)
                 VALUES (?1, ?2, 'derived_from', ?3, ?4, 1.0, ?5, ?6)",
            )?
            .execute(params![
                Uuid::now_v7().to_string(),
                inv,
                ev,
                parent.to_string(),
                now,
                IMPORT_PRODUCER
            ])?;
            relations = 1;
        }
    }
    if relations > 0 {
        tx.prepare_cached("UPDATE investigations SET relation_count = relation_count + ?2 WHERE id = ?1")?
            .execute(params![inv, relations])?;
    }
    let metadata = serde_json::to_string(&p.metadata).map_err(|e| StoreError::Invalid(format!("metadata: {e}")))?;
    let notes = serde_json::to_string(&p.notes).map_err(|e| StoreError::Invalid(format!("notes: {e}")))?;
    tx.prepare_cached(INSERT_IMPORT)?.execute(params![
        provenance,
        inv,
        outcome.evidence().id().to_string(),
        job_id,
        file.name,
        file.path,
        file.blob.len as i64,
        file.blob.sha256,
        p.format.as_str(),
        labfy_parse::VERSION,
        p.encoding,
        metadata,
        notes,
        actor,
        now
    ])?;
    if file.parent.is_some() {
        if new_relations > 0 {
            stats.embedded += 1;
        }
    } else {
        let (label, count) = match &outcome {
            ImportOutcome::Imported(_) => ("imported", &mut stats.imported),
            ImportOutcome::Duplicate(_) => ("duplicate", &mut stats.duplicates),
        };
        *count += 1;
        outcome_row(tx, &job_id, stats.files, file.path, label, Some(outcome.evidence()), None)?;
        stats.files += 1;
        stats.bytes += file.blob.len;
    }
    save_stats(tx, &job_id, &stats, "RUNNING")?;
    Ok(outcome)
}

/// Records a file whose bytes are already evidence of the job's
/// investigation without reading it again (SPEC I1: an import run again
/// after a kill takes what is stored by its hash): a duplicate, with its
/// provenance and an import record whose reading is the first import's of
/// that evidence. `None` when those bytes are not evidence there (the
/// caller then reads the file).
fn record_known_in(
    tx: &Connection,
    ws: Uuid,
    job: &ObjectRef,
    name: &str,
    path: &str,
    blob: &Blob,
    actor: &str,
) -> Result<Option<ImportOutcome>> {
    check_import_path("file name", name, MAX_IMPORT_NAME_CHARS).map_err(StoreError::Invalid)?;
    check_import_path("path", path, MAX_IMPORT_PATH_CHARS).map_err(StoreError::Invalid)?;
    let (inv, mut stats) = running(tx, ws, job)?;
    let existing: Option<String> = tx
        .prepare_cached("SELECT id FROM evidence WHERE investigation_id = ?1 AND sha256 = ?2 ORDER BY seq LIMIT 1")?
        .query_row(params![inv, blob.sha256], |r| r.get(0))
        .optional()?;
    let Some(id) = existing else { return Ok(None) };
    let ev = ObjectRef::new(
        RefKind::Evidence,
        Uuid::parse_str(&id).map_err(|e| StoreError::Damaged(format!("evidence id {id}: {e}")))?,
    );
    let now = now_rfc3339();
    let provenance = insert_provenance(tx, &inv, &ev.to_string(), actor, "import", &[])?;
    tx.prepare_cached("UPDATE investigations SET provenance_count = provenance_count + 1 WHERE id = ?1")?
        .execute([&inv])?;
    let job_id = job.id().to_string();
    // The reading is the first import's; evidence that came another way
    // (a note, a fetch) was never read from a file: recorded as such.
    let first: Option<(String, i64, Option<String>, String, String)> = tx
        .prepare_cached(
            "SELECT format, parser_version, encoding, metadata, notes FROM imports
             WHERE evidence_id = ?1 ORDER BY imported_at, provenance_id LIMIT 1",
        )?
        .query_row([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .optional()?;
    let (format, version, encoding, metadata, notes) =
        first.unwrap_or_else(|| ("binary".into(), i64::from(labfy_parse::VERSION), None, "{}".into(), "[]".into()));
    tx.prepare_cached(INSERT_IMPORT)?.execute(params![
        provenance,
        inv,
        id,
        job_id,
        name,
        path,
        blob.len as i64,
        blob.sha256,
        format,
        version,
        encoding,
        metadata,
        notes,
        actor,
        now
    ])?;
    outcome_row(tx, &job_id, stats.files, path, "duplicate", Some(&ev), None)?;
    stats.files += 1;
    stats.duplicates += 1;
    stats.bytes += blob.len;
    save_stats(tx, &job_id, &stats, "RUNNING")?;
    Ok(Some(ImportOutcome::Duplicate(ev)))
}

/// Records a file refused, with its reason.
pub(crate) fn refuse(conn: &mut Connection, ws: Uuid, job: &ObjectRef, path: &str, reason: &str) -> Result<()> {
    let tx = conn.transaction()?;
    refuse_in(&tx, ws, job, path, reason)?;
    tx.commit()?;
    Ok(())
}

/// [`refuse`]'s writes, in the caller's transaction.
fn refuse_in(tx: &Connection, ws: Uuid, job: &ObjectRef, path: &str, reason: &str) -> Result<()> {
    let (_, mut stats) = running(tx, ws, job)?;
    let job_id = job.id().to_string();
    // The path is shown as given, made printable: it may be the very reason.
    let path: String =
        path.chars().take(MAX_IMPORT_PATH_CHARS).map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    let reason: String =
        reason.chars().take(MAX_IMPORT_REASON_CHARS).map(|c| if c.is_control() { ' ' } else { c }).collect();
    outcome_row(tx, &job_id, stats.files, &path, "refused", None, Some(&reason))?;
    stats.files += 1;
    stats.refused += 1;
    save_stats(tx, &job_id, &stats, "RUNNING")?;
    Ok(())
}

/// Several files of one import job recorded in one transaction (`labfy
/// import`, SPEC I1): a WAL commit, and the pages every file touches (the
/// job's figures, the indexes), written once for many files. Each file is
/// a savepoint of its own, so a file refused midway leaves nothing and the
/// batch goes on. Nothing is committed until [`ImportBatch::commit`]; a
/// batch dropped, or a crash, loses its files (their blobs stay, and
/// importing again takes them).
pub struct ImportBatch<'a> {
    tx: rusqlite::Transaction<'a>,
    ws: Uuid,
    job: ObjectRef,
    actor: String,
    files: usize,
    /// `files` when the file begun ([`ImportBatch::begin_file`]) began.
    file_start: usize,
}

impl<'a> ImportBatch<'a> {
    pub(crate) fn begin(conn: &'a mut Connection, ws: Uuid, job: &ObjectRef, actor: &str) -> Result<Self> {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        Ok(Self { tx, ws, job: *job, actor: actor.to_owned(), files: 0, file_start: 0 })
    }

    /// Records one file (see [`crate::Store::import_file`]).
    pub fn record(&mut self, file: &ImportedFile<'_>) -> Result<ImportOutcome> {
        let sp = self.tx.savepoint()?;
        let outcome = record_in(&sp, self.ws, &self.job, file, &self.actor)?;
        sp.commit()?;
        self.files += 1;
        Ok(outcome)
    }

    /// Records a file known by its hash without reading it, or `None` when
    /// its bytes are not evidence of the investigation (see
    /// `record_known_in`).
    pub fn record_known(&mut self, name: &str, path: &str, blob: &Blob) -> Result<Option<ImportOutcome>> {
        let sp = self.tx.savepoint()?;
        let outcome = record_known_in(&sp, self.ws, &self.job, name, path, blob, &self.actor)?;
        sp.commit()?;
        if outcome.is_some() {
            self.files += 1;
        }
        Ok(outcome)
    }

    /// Begins one file: what [`ImportBatch::end_file`] keeps or undoes
    /// whole (the file and every document it embeds).
    pub fn begin_file(&mut self) -> Result<()> {
        self.tx.execute_batch("SAVEPOINT import_file")?;
        self.file_start = self.files;
        Ok(())
    }

    /// Ends the file begun: kept, or undone whole (`keep` false: it was
    /// refused midway, or the import stops).
    pub fn end_file(&mut self, keep: bool) -> Result<()> {
        if keep {
            self.tx.execute_batch("RELEASE import_file")?;
        } else {
            self.tx.execute_batch("ROLLBACK TO import_file; RELEASE import_file")?;
            self.files = self.file_start;
        }
        Ok(())
    }

    /// Records a file refused (see [`crate::Store::import_refused`]).
    pub fn refuse(&mut self, path: &str, reason: &str) -> Result<()> {
        let sp = self.tx.savepoint()?;
        refuse_in(&sp, self.ws, &self.job, path, reason)?;
        sp.commit()?;
        self.files += 1;
        Ok(())
    }

    /// Documents recorded (refusals and embedded documents counted).
    pub fn len(&self) -> usize {
        self.files
    }

    /// Whether nothing is recorded yet.
    pub fn is_empty(&self) -> bool {
        self.files == 0
    }

    /// Commits every file recorded.
    pub fn commit(self) -> Result<()> {
        self.tx.commit()?;
        labfy_core::crash::point(labfy_core::crash::IMPORT_FILE_STORED);
        Ok(())
    }
}

/// Ends an import job: `SUCCEEDED` (every file has its outcome), or
/// `FAILED` with `failure` (the batch stopped: the files recorded stay).
pub(crate) fn finish(
    conn: &mut Connection,
    ws: Uuid,
    job: &ObjectRef,
    failure: Option<&str>,
    actor: &str,
) -> Result<ImportStats> {
    let tx = conn.transaction()?;
    let (_, stats) = running(&tx, ws, job)?;
    let job_id = job.id().to_string();
    save_stats(&tx, &job_id, &stats, if failure.is_some() { "FAILED" } else { "SUCCEEDED" })?;
    if let Some(f) = failure {
        let detail: String = format!("{} — stopped: {f}", stats.detail()).chars().take(1000).collect();
        tx.execute("UPDATE jobs SET detail = ?2 WHERE id = ?1", params![job_id, detail])?;
    }
    audit(&tx, actor, "import.finish", Some(ws), Some(job), &serde_json::to_value(&stats).unwrap_or_default())?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::IMPORT_ENDED);
    Ok(stats)
}

/// Ends every import job `actor` started that is still `RUNNING` — the
/// workspace server's, at its start: their uploads died with the server
/// that took them (SPEC K3). Each ends `FAILED` with `why`, the files it
/// recorded kept, audited like any end. Another actor's jobs (`labfy
/// import`, a process that may still be running) are left alone.
pub(crate) fn settle_interrupted(conn: &mut Connection, actor: &str, why: &str) -> Result<Vec<ObjectRef>> {
    let jobs = crate::cases::running_jobs_of(conn, IMPORT_JOB, actor)?;
    for (ws, job) in &jobs {
        finish(conn, *ws, job, Some(why), "labfy-server")?;
    }
    Ok(jobs.into_iter().map(|(_, job)| job).collect())
}

impl Reads<'_> {
    /// The outcomes of an import job, in order, from `after` (exclusive).
    pub fn import_report(
        &self,
        ws: Uuid,
        job: &ObjectRef,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<ImportReportLine>> {
        if job.kind() != RefKind::Job {
            return Err(StoreError::Invalid(format!("expected a `job:` reference, got `{job}`")));
        }
        self.require_in_workspace(ws, job)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT o.position, o.path, o.outcome, o.evidence_id, o.reason,
                    (SELECT i.notes FROM imports i
                     WHERE i.job_id = o.job_id AND i.evidence_id = o.evidence_id AND i.original_path = o.path
                     LIMIT 1)
             FROM import_outcomes o
             WHERE o.job_id = ?1 AND o.position > ?2 ORDER BY o.position LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![job.id().to_string(), after.unwrap_or(-1), limit.clamp(1, 1000)], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (position, path, outcome, ev, reason, notes) = row?;
            let notes: Vec<String> = match notes {
                Some(json) => {
                    serde_json::from_str(&json).map_err(|e| StoreError::Damaged(format!("import record notes: {e}")))?
                }
                None => Vec::new(),
            };
            let evidence = ev
                .map(|id| Uuid::parse_str(&id).map(|u| ObjectRef::new(RefKind::Evidence, u)))
                .transpose()
                .map_err(|e| StoreError::Damaged(format!("import outcome evidence: {e}")))?;
            out.push(ImportReportLine { position, path, outcome, evidence, reason, notes });
        }
        Ok(out)
    }

    /// What a failed-only re-import of job `job` takes (SPEC I1): the
    /// files and folders it was started on (as `labfy import` recorded them,
    /// absolute) and the paths it refused, in order, with why. Only a job
    /// of `labfy import` has its roots.
    pub fn import_refusals(&self, ws: Uuid, job: &ObjectRef) -> Result<ImportRefusals> {
        if job.kind() != RefKind::Job {
            return Err(StoreError::Invalid(format!("expected a `job:` reference, got `{job}`")));
        }
        self.require_in_workspace(ws, job)?;
        let roots: Option<String> = self
            .conn
            .prepare_cached(
                "SELECT json_extract(detail, '$.roots') FROM audit_log
                 WHERE object_ref = ?1 AND action = 'import.start' ORDER BY seq LIMIT 1",
            )?
            .query_row([job.to_string()], |r| r.get(0))
            .optional()?
            .flatten();
        let roots: Vec<String> = match roots {
            Some(json) => serde_json::from_str(&json).map_err(|e| StoreError::Damaged(format!("{job} roots: {e}")))?,
            None => Vec::new(),
        };
        let refused = self
            .conn
            .prepare_cached(
                "SELECT path, coalesce(reason, '') FROM import_outcomes WHERE job_id = ?1 AND outcome = 'refused'
                 ORDER BY position",
            )?
            .query_map([job.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(ImportRefusals { roots, refused })
    }

    /// The SHA-256 of the evidence of `inv` imported as files of their own
    /// (an import that starts takes the files already there by their hash,
    /// SPEC I1).
    pub fn evidence_hashes(&self, ws: Uuid, inv: &ObjectRef) -> Result<std::collections::HashSet<String>> {
        self.require_in_workspace(ws, inv)?;
        // Only bytes imported as a file of their own: those were read, with
        // what they embed, the first time (a note, a fetched page or an
        // attachment with the same bytes is read as a file now).
        let mut stmt = self.conn.prepare_cached(
            "SELECT DISTINCT e.sha256 FROM evidence e
             WHERE e.investigation_id = ?1
               AND EXISTS (SELECT 1 FROM imports i WHERE i.evidence_id = e.id AND instr(i.original_path, '!') = 0)",
        )?;
        let rows = stmt.query_map([inv.id().to_string()], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The import records of an evidence item (one per time its bytes were
    /// imported), oldest first.
    pub fn imports_of(&self, ws: Uuid, ev: &ObjectRef) -> Result<Vec<ImportRecord>> {
        self.require_in_workspace(ws, ev)?;
        let mut stmt = self.conn.prepare_cached(
            "SELECT original_name, original_path, byte_len, sha256, format, parser_version, encoding, metadata, notes,
                    imported_by, imported_at, job_id
             FROM imports WHERE evidence_id = ?1 ORDER BY imported_at, provenance_id",
        )?;
        let rows = stmt.query_map([ev.id().to_string()], |r| {
            let json = |i: usize| -> rusqlite::Result<serde_json::Value> {
                let s: String = r.get(i)?;
                Ok(serde_json::from_str(&s).unwrap_or(serde_json::Value::Null))
            };
            let job: Option<String> = r.get(11)?;
            Ok(ImportRecord {
                original_name: r.get(0)?,
                original_path: r.get(1)?,
                byte_len: r.get(2)?,
                sha256: r.get(3)?,
                format: r.get(4)?,
                parser_version: r.get(5)?,
                encoding: r.get(6)?,
                metadata: json(7)?,
                notes: json(8)?,
                imported_by: r.get(9)?,
                imported_at: r.get(10)?,
                job: job.and_then(|j| Uuid::parse_str(&j).ok()).map(|u| ObjectRef::new(RefKind::Job, u)),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The blob an evidence item was read from, if its bytes are kept.
    pub fn blob_of(&self, ws: Uuid, ev: &ObjectRef) -> Result<Option<(String, String, i64)>> {
        self.require_in_workspace(ws, ev)?;
        Ok(self
            .conn
            .query_row(
                "SELECT blob_sha256, mime, byte_len FROM evidence WHERE id = ?1 AND blob_sha256 IS NOT NULL",
                [ev.id().to_string()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?)
    }
}

/// How deep embedded documents are followed (a message in a mailbox, its
/// attachment, a message attached to that).
pub const MAX_EMBED_DEPTH: usize = 3;

/// One document of a file read with what it embeds ([`read_tree`]).
#[derive(Debug)]
pub struct ReadDocument {
    /// Its file name.
    pub name: String,
    /// Its path (`parent!child` for an embedded document).
    pub path: String,
    /// Its bytes, in the blob store.
    pub blob: Blob,
    /// What the parser read.
    pub parsed: Parsed,
    /// The document it is embedded in (an index into [`ReadTree::documents`]).
    pub parent: Option<usize>,
}

/// A file and every document embedded in it, down to [`MAX_EMBED_DEPTH`],
/// read and stored as blobs, not yet recorded: the file first, then the
/// embedded documents, each after its parent.
#[derive(Debug)]
pub struct ReadTree {
    /// The documents, the file first.
    pub documents: Vec<ReadDocument>,
}

/// Reads one file whose bytes are already in `blobs` with `parse` (the
/// caller's confined worker), then each document embedded in it, stored as
/// blobs, down to [`MAX_EMBED_DEPTH`]: everything a file needs read before
/// anything of it is written, so that a caller can read on several threads
/// and record on one ([`record_tree`]).
pub fn read_tree(
    blobs: &crate::blobs::BlobStore,
    name: &str,
    path: &str,
    blob: &Blob,
    parse: &mut dyn FnMut(&Blob, &str) -> Parsed,
) -> Result<ReadTree> {
    let parsed = parse(blob, name);
    let mut documents =
        vec![ReadDocument { name: name.to_owned(), path: path.to_owned(), blob: blob.clone(), parsed, parent: None }];
    // Depth first, as a stack: (document, depth).
    let mut stack: Vec<(usize, usize)> = vec![(0, 1)];
    while let Some((parent, depth)) = stack.pop() {
        let children = std::mem::take(&mut documents[parent].parsed.children);
        let parent_path = documents[parent].path.clone();
        for child in children {
            // An archive's member keeps its path inside (`pieces.zip!dossier/
            // note.txt`, SPEC I2); its name is the path's last part. A name
            // that is no clean path (an attachment called
            // `../../../etc/passwd`) is kept flat, its separators made `_`,
            // so its hostile spelling stays visible and nothing climbs out.
            let inner = child.name.replace('\\', "/");
            let clean = !inner.is_empty() && inner.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
            let (name, child_path) = if child.name.is_empty() {
                ("(sans nom)".to_owned(), format!("{parent_path}!(sans nom)"))
            } else if clean {
                let last = inner.rsplit('/').next().unwrap_or(&inner).to_owned();
                (last, format!("{parent_path}!{inner}"))
            } else {
                let flat = child.name.replace(['/', '\\'], "_");
                (flat.clone(), format!("{parent_path}!{flat}"))
            };
            if check_import_path("path", &child_path, MAX_IMPORT_PATH_CHARS)
                .and_then(|()| check_import_path("file name", &name, MAX_IMPORT_NAME_CHARS))
                .is_err()
            {
                continue;
            }
            let child_blob = blobs
                .put(&mut &child.bytes[..], child.bytes.len() as u64)
                .map_err(|e| StoreError::Invalid(format!("embedded document {child_path}: {e}")))?;
            let child_parsed = parse(&child_blob, &name);
            documents.push(ReadDocument {
                name,
                path: child_path,
                blob: child_blob,
                parsed: child_parsed,
                parent: Some(parent),
            });
            if depth < MAX_EMBED_DEPTH {
                stack.push((documents.len() - 1, depth + 1));
            }
        }
    }
    Ok(ReadTree { documents })
}

/// Records a file read by [`read_tree`] with `record` (the caller's
/// [`crate::Store::import_file`], or an [`ImportBatch`]'s): the file, then
/// its embedded documents — those of the file always, those of an
/// embedded document only when it was new evidence (a document already
/// known brought its own the first time).
pub fn record_tree(
    tree: &ReadTree,
    record: &mut dyn FnMut(&ImportedFile<'_>) -> Result<ImportOutcome>,
) -> Result<ImportOutcome> {
    let mut outcomes: Vec<Option<ImportOutcome>> = Vec::with_capacity(tree.documents.len());
    for (i, d) in tree.documents.iter().enumerate() {
        let parent = match d.parent {
            None => None,
            Some(p) => match &outcomes[p] {
                Some(o @ ImportOutcome::Imported(_)) => Some(*o.evidence()),
                Some(o @ ImportOutcome::Duplicate(_)) if p == 0 => Some(*o.evidence()),
                _ => {
                    outcomes.push(None);
                    continue;
                }
            },
        };
        let file =
            ImportedFile { name: &d.name, path: &d.path, blob: &d.blob, parsed: &d.parsed, parent: parent.as_ref() };
        let outcome = record(&file)?;
        debug_assert_eq!(outcomes.len(), i);
        outcomes.push(Some(outcome));
    }
    outcomes.into_iter().next().flatten().ok_or_else(|| StoreError::Invalid("nothing was read".into()))
}

/// Imports one file whose bytes are already in `blobs`: [`read_tree`] with
/// `parse` (the caller's confined worker), then [`record_tree`] with
/// `record` (the caller's [`crate::Store::import_file`] for its job —
/// called once per document, so a caller holds its writer only for each
/// transaction, never while a parser runs).
pub fn import_tree(
    blobs: &crate::blobs::BlobStore,
    name: &str,
    path: &str,
    blob: &Blob,
    parse: &mut dyn FnMut(&Blob, &str) -> Parsed,
    record: &mut dyn FnMut(&ImportedFile<'_>) -> Result<ImportOutcome>,
) -> Result<ImportOutcome> {
    record_tree(&read_tree(blobs, name, path, blob, parse)?, record)
}
