#![doc = include_str!("../README.md")]

pub mod blobs;
pub mod bundle;
mod campaign;
mod candidates;
mod cases;
mod contracts;
mod db;
mod error;
mod extraction;
mod grants;
mod graph;
mod graph_edit;
mod hosts;
mod import;
mod journal;
mod lists;
mod migrations;
mod model;
mod notes;
mod primitives;
mod reads;
mod received;
mod research;
mod search;
pub mod specimen;
mod timeline;
mod tool_requests;
mod variants;

use std::path::{Path, PathBuf};

use labfy_core::{CampaignRef, GrantRef, ObjectRef};
use rusqlite::Connection;
use uuid::Uuid;

pub use campaign::{
    Campaign, CampaignItem, CampaignStatus, FALLBACK_MIME, FetchedBody, FetchedPage, GrantUsage, ItemStatus,
    MAX_CAMPAIGN_DETAIL_CHARS, MAX_CAMPAIGN_URLS, MAX_FETCH_BODY_BYTES, MAX_FETCH_HEADERS, MAX_FETCH_REDIRECTS,
    MAX_HEADER_NAME_CHARS, MAX_HEADER_VALUE_CHARS, MAX_ISOLATION_CHARS, MAX_ITEM_REASON_CHARS, MAX_MIME_CHARS,
    MAX_UNFINISHED_CAMPAIGNS, MAX_URL_BYTES, check_campaign_url, host_in_scope, mime_of,
};
pub use candidates::{
    CANDIDATE_SCAN_CHARS, CandidateOrigin, CandidateUrl, MAX_CANDIDATES, MAX_SKIPPED_LISTED, Refusal,
    ResearchCandidates, Screened, SkipReason, SkippedCandidate, screen_candidate,
};
pub use cases::{
    EXPORT_JOB, MAX_INVESTIGATION_SUMMARY_CHARS, MAX_INVESTIGATION_TITLE_CHARS, MAX_WORKSPACE_NAME_CHARS,
    check_openable,
};
pub use contracts::Voided;
pub use db::{BUSY_TIMEOUT, DB_FILE};
pub use error::{Result, StoreError};
pub use extraction::{EXTRACTION_BATCH, EXTRACTION_JOB, EXTRACTION_PRODUCER, ExtractionStats, ExtractionStep};
pub use grants::NewGrant;
pub use graph::{
    CO_MENTION, CO_MENTION_BASIS, CoMentionBasis, EGO_RELATION_SCAN, EVIDENCE_KIND, EgoGraph, EgoQuery, GraphEdge,
    GraphNode, LeftOut, MAX_EGO_NODES,
};
pub use graph_edit::{
    ANALYST_EXTRACTOR, ENTITY_KINDS, MAX_ALIASES, MAX_ENTITY_NAME_CHARS, MAX_MARKED_CHARS, Marked, NewEntity,
    NewMarked, NewRelation, RELATION_KINDS,
};
pub use hosts::{MAX_HOST_CHARS, check_host_pattern};
pub use import::{
    IMPORT_JOB, IMPORT_PRODUCER, ImportBatch, ImportOutcome, ImportRefusals, ImportReportLine, ImportStats,
    ImportedFile, MAX_EMBED_DEPTH, MAX_IMPORT_NAME_CHARS, MAX_IMPORT_PATH_CHARS, ReadDocument, ReadTree,
    SPECIMEN_IMPORT_REFUSED, check_import_path, import_tree, read_tree, record_tree,
};
pub use journal::{
    JOURNAL_APPLICATION_ID, JOURNAL_FILE, JOURNAL_KEEP, JournalKind, JournalLayer, JournalRecord, JournalStore,
    MAX_JOURNAL_BODY_BYTES,
};
pub use lists::{EntityRow, EvidenceRow, ListPage, ListQuery, MAX_LIST_LIMIT, MAX_LIST_PREFIX_CHARS, RelationRow};
pub use migrations::{APPLICATION_ID, LATEST as SCHEMA_VERSION};
pub use model::*;
pub use notes::{
    KeptFile, MAX_NOTE_CONTENT_BYTES, MAX_NOTE_SOURCE_CHARS, MAX_NOTE_TITLE_CHARS, MAX_RUN_FILE_NAME_CHARS, NewNote,
    RunFile,
};
pub use primitives::sha256_hex;
pub use reads::*;
pub use received::Received;
pub use research::{
    GrantDecision, GrantOutcome, MAX_CAMPAIGN_EVIDENCE, MAX_DECISION_NOTE_CHARS, MAX_EXCLUSION_CHARS, MAX_GRANT_BYTES,
    MAX_GRANT_MINUTES, MAX_GRANT_REQUESTS, MAX_IDEMPOTENCY_KEY_CHARS, MAX_RESEARCH_EXCLUSIONS, MAX_RESEARCH_LIST,
    MAX_RESEARCH_QUESTION_CHARS, MAX_RESEARCH_SELECTION, MAX_SCOPE_HOSTS, MIN_RESEARCH_SELECTION, NewResearchRequest,
    ResearchRequest, SELECTABLE_KINDS, SYNTHETIC_PAGES,
};
pub use search::fold as fold_word;
pub use timeline::{MAX_TIMELINE_PAGE, TimelineItem, TimelinePage, TimelineQuery};
pub use tool_requests::{
    CapabilityStanding, MAX_TOOL_DECISION_NOTE_CHARS, MAX_TOOL_REASON_CHARS, MAX_TOOL_REQUEST_JSON_BYTES,
    MAX_TOOL_REQUEST_LIST, NewToolRequest, PromotedManifest, ToolDecision, ToolRequest, ToolRequestKind,
};
pub use variants::{MAX_VARIANT_NAMES, NameVariantList, NameVariants};

/// Current time as RFC 3339 UTC with millisecond precision.
pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The read-write store of one data directory. Opening it checks the file is
/// Labfy's, switches to WAL with foreign keys on and applies migrations.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) `<data_dir>/labfy.sqlite3`.
    pub fn open(data_dir: &Path) -> Result<Self> {
        let (conn, path) = db::open_read_write(data_dir)?;
        Ok(Self { conn, path })
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Read models over this connection.
    pub fn reads(&self) -> Reads<'_> {
        Reads { conn: &self.conn }
    }

    /// Schema version of the open file.
    pub fn schema_version(&self) -> Result<i64> {
        db::schema_version(&self.conn)
    }

    /// Runs SQLite's full integrity check.
    pub fn integrity_check(&self) -> Result<()> {
        db::integrity_check(&self.conn, &self.path)
    }

    /// Creates a `REAL` workspace with one investigation.
    pub fn create_real_workspace(&mut self, name: &str, actor: &str) -> Result<(ObjectRef, ObjectRef)> {
        cases::create_real_workspace(&mut self.conn, name, actor)
    }

    /// Stores an analyst's note as a new evidence item.
    pub fn add_note(&mut self, ws: Uuid, inv: &ObjectRef, note: &NewNote, actor: &str) -> Result<ObjectRef> {
        notes::add_note(&mut self.conn, ws, inv, note, actor)
    }

    /// Keeps a file a `sandbox.exec` run left as a new evidence item (SPEC
    /// X1), with provenance naming the run, or finds it kept already.
    pub fn keep_run_file(&mut self, ws: Uuid, inv: &ObjectRef, file: &RunFile, actor: &str) -> Result<KeptFile> {
        notes::keep_run_file(&mut self.conn, ws, inv, file, actor)
    }

    /// Starts an extraction job over an investigation (SPEC C4), or finds the
    /// one already running (`false`); [`Store::extraction_step`] runs it.
    pub fn start_extraction(&mut self, ws: Uuid, inv: &ObjectRef, actor: &str) -> Result<(ObjectRef, bool)> {
        extraction::start(&mut self.conn, ws, inv, actor)
    }

    /// Scans the next `batch` evidence items of a running extraction job in
    /// one transaction; `done` once the job has `SUCCEEDED`.
    pub fn extraction_step(&mut self, ws: Uuid, job: &ObjectRef, batch: u32) -> Result<ExtractionStep> {
        extraction::step(&mut self.conn, ws, job, batch)
    }

    /// Extraction jobs of a workspace left `RUNNING` (the server resumes them).
    pub fn running_extractions(&self, ws: Uuid) -> Result<Vec<ObjectRef>> {
        extraction::running(&self.conn, ws)
    }

    /// Creates an investigation in a workspace (SPEC C1).
    pub fn create_investigation(&mut self, ws: Uuid, title: &str, summary: &str, actor: &str) -> Result<ObjectRef> {
        cases::create_investigation(&mut self.conn, ws, title, summary, actor)
    }

    /// Changes an investigation's title and/or summary (SPEC C1).
    pub fn update_investigation(
        &mut self,
        ws: Uuid,
        inv: &ObjectRef,
        title: Option<&str>,
        summary: Option<&str>,
        actor: &str,
    ) -> Result<()> {
        cases::update_investigation(&mut self.conn, ws, inv, title, summary, actor)
    }

    /// Archives an investigation, or brings it back (SPEC C1).
    pub fn archive_investigation(&mut self, ws: Uuid, inv: &ObjectRef, archived: bool, actor: &str) -> Result<()> {
        cases::archive_investigation(&mut self.conn, ws, inv, archived, actor)
    }

    /// Renames a workspace (SPEC C1).
    pub fn rename_workspace(&mut self, ws: Uuid, name: &str, actor: &str) -> Result<()> {
        cases::rename_workspace(&mut self.conn, ws, name, actor)
    }

    /// Archives a workspace, or brings it back (SPEC C1).
    pub fn archive_workspace(&mut self, ws: Uuid, archived: bool, actor: &str) -> Result<()> {
        cases::archive_workspace(&mut self.conn, ws, archived, actor)
    }

    /// Asks, from workspace `from`, to open `to` (SPEC C1): checked and
    /// audited here; the supervisor restarts the server on it.
    pub fn request_workspace_open(&mut self, from: Uuid, to: Uuid, actor: &str) -> Result<WorkspaceSummary> {
        cases::request_open(&mut self.conn, from, to, actor)
    }

    /// Ends the import and export jobs of `ws` left running with no progress
    /// since `stale_before` (a server stopped mid-job); how many.
    pub fn abandon_stale_jobs(&mut self, ws: Uuid, stale_before: &str) -> Result<usize> {
        cases::abandon_stale_jobs(&mut self.conn, ws, stale_before)
    }

    /// Starts a job of `kind` over an investigation (an export from the UI).
    pub fn start_job(&mut self, ws: Uuid, inv: &ObjectRef, kind: &str, actor: &str) -> Result<ObjectRef> {
        cases::start_job(&mut self.conn, ws, inv, kind, actor)
    }

    /// Ends a running job: its figures, or why it failed.
    pub fn end_job(
        &mut self,
        ws: Uuid,
        job: &ObjectRef,
        outcome: std::result::Result<&serde_json::Value, &str>,
        actor: &str,
    ) -> Result<()> {
        cases::end_job(&mut self.conn, ws, job, outcome, actor)
    }

    /// Starts an import job into an investigation (SPEC C2); `expected`:
    /// the number of files announced, for its progress. A SPECIMEN
    /// workspace (synthetic data) takes real files only when the analyst
    /// said so, `into_specimen` (SPEC I5); otherwise the import is refused
    /// before anything is read.
    pub fn start_import(
        &mut self,
        ws: Uuid,
        inv: &ObjectRef,
        expected: Option<u64>,
        into_specimen: bool,
        actor: &str,
    ) -> Result<ObjectRef> {
        import::start(&mut self.conn, ws, inv, expected, into_specimen, None, actor)
    }

    /// [`Store::start_import`] by a process that records itself on the job
    /// (`labfy import`: its pid and start time), so that a later import can
    /// tell the job of a killed process from one still running
    /// ([`Store::running_imports_with_process`], SPEC I1), and the files and
    /// folders it was given (`roots`, absolute), so that the files it
    /// refuses can be imported again alone ([`Reads::import_refusals`]).
    #[allow(clippy::too_many_arguments)]
    pub fn start_import_as_process(
        &mut self,
        ws: Uuid,
        inv: &ObjectRef,
        expected: Option<u64>,
        into_specimen: bool,
        process: (i32, u64),
        roots: &[String],
        actor: &str,
    ) -> Result<ObjectRef> {
        import::start(&mut self.conn, ws, inv, expected, into_specimen, Some((process.0, process.1, roots)), actor)
    }

    /// Import jobs `actor` started as a process (pid, start time) that are
    /// still `RUNNING`: (workspace, job, pid, start time).
    pub fn running_imports_with_process(&self, actor: &str) -> Result<Vec<(Uuid, ObjectRef, i32, u64)>> {
        import::running_with_process(&self.conn, actor)
    }

    /// Ends an import job `FAILED` with `why` (its process is gone: the
    /// files it recorded stay, its figures are kept).
    pub fn fail_import(&mut self, ws: Uuid, job: &ObjectRef, why: &str, actor: &str) -> Result<()> {
        import::finish(&mut self.conn, ws, job, Some(why), actor).map(drop)
    }

    /// Records one imported file, its bytes already in the blob store.
    pub fn import_file(
        &mut self,
        ws: Uuid,
        job: &ObjectRef,
        file: &ImportedFile<'_>,
        actor: &str,
    ) -> Result<ImportOutcome> {
        import::record(&mut self.conn, ws, job, file, actor)
    }

    /// A batch of files of the running import job `job`, recorded in one
    /// transaction (`labfy import`, SPEC I1): see [`ImportBatch`].
    pub fn import_batch(&mut self, ws: Uuid, job: &ObjectRef, actor: &str) -> Result<ImportBatch<'_>> {
        ImportBatch::begin(&mut self.conn, ws, job, actor)
    }

    /// Records a file an import refused, with why.
    pub fn import_refused(&mut self, ws: Uuid, job: &ObjectRef, path: &str, reason: &str) -> Result<()> {
        import::refuse(&mut self.conn, ws, job, path, reason)
    }

    /// Ends an import job (`failure`: why the batch stopped early).
    pub fn finish_import(
        &mut self,
        ws: Uuid,
        job: &ObjectRef,
        failure: Option<&str>,
        actor: &str,
    ) -> Result<ImportStats> {
        import::finish(&mut self.conn, ws, job, failure, actor)
    }

    /// Receives a bundle exported by another appliance (SPEC I4): verified,
    /// then opened as a read-only investigation with its whole provenance,
    /// in workspace `into` (of the bundle's class) or the sender's; the same
    /// bundle twice is one investigation. See `received`.
    pub fn receive_bundle(
        &mut self,
        bundle: &Path,
        fingerprint: Option<&str>,
        into: Option<Uuid>,
        actor: &str,
    ) -> std::result::Result<Received, bundle::BundleError> {
        let data_dir = self.path.parent().map(Path::to_path_buf).unwrap_or_default();
        // Not `open`: the server or `labfy import` may be writing blobs now.
        let blobs = blobs::BlobStore::at(&data_dir);
        received::receive(&mut self.conn, &blobs, &data_dir, bundle, fingerprint, into, actor)
    }

    /// Voids what waits for a decision, and revokes what was granted, under
    /// a contract the catalog no longer publishes (SPEC R5): `current(tool)`
    /// is the fingerprint published now. Audited; see `contracts`.
    pub fn void_under_old_contracts(
        &mut self,
        current: &dyn Fn(&str) -> Option<String>,
        actor: &str,
    ) -> Result<contracts::Voided> {
        contracts::void_under_old_contracts(&mut self.conn, current, actor)
    }

    /// Ends the import and export jobs `actor` left running (a server that
    /// stopped mid-upload or mid-export, SPEC K3): `FAILED` with `why`, an
    /// import's files kept.
    pub fn settle_interrupted_jobs(&mut self, actor: &str, why: &str) -> Result<Vec<ObjectRef>> {
        let mut jobs = import::settle_interrupted(&mut self.conn, actor, why)?;
        jobs.extend(cases::settle_interrupted_exports(&mut self.conn, actor, why)?);
        Ok(jobs)
    }

    /// Creates an entity drawn by the analyst (SPEC C4).
    pub fn create_entity(&mut self, ws: Uuid, inv: &ObjectRef, e: &NewEntity, actor: &str) -> Result<ObjectRef> {
        graph_edit::create_entity(&mut self.conn, ws, inv, e, actor)
    }

    /// Marks a name the analyst read in evidence `ev` (SPEC A3): the entity
    /// (found or made) and its mention at those offsets.
    pub fn mark_mention(&mut self, ws: Uuid, ev: &ObjectRef, m: &NewMarked, actor: &str) -> Result<Marked> {
        graph_edit::mark_mention(&mut self.conn, ws, ev, m, actor)
    }

    /// Renames an entity; the former name becomes an alias.
    pub fn rename_entity(&mut self, ws: Uuid, ent: &ObjectRef, name: &str, actor: &str) -> Result<()> {
        graph_edit::rename_entity(&mut self.conn, ws, ent, name, actor)
    }

    /// Records that entities `a` and `b` are two (SPEC A3): a proposed
    /// merge the analyst refused, never proposed again.
    pub fn set_apart(&mut self, ws: Uuid, a: &ObjectRef, b: &ObjectRef, actor: &str) -> Result<()> {
        graph_edit::set_apart(&mut self.conn, ws, a, b, actor)
    }

    /// Merges entity `gone` into `keep` (same kind and investigation).
    pub fn merge_entities(&mut self, ws: Uuid, gone: &ObjectRef, keep: &ObjectRef, actor: &str) -> Result<()> {
        graph_edit::merge_entities(&mut self.conn, ws, gone, keep, actor)
    }

    /// Deletes an entity with its relations, mentions and provenance.
    pub fn delete_entity(&mut self, ws: Uuid, ent: &ObjectRef, actor: &str) -> Result<()> {
        graph_edit::delete_entity(&mut self.conn, ws, ent, actor)
    }

    /// Draws a relation between two objects of an investigation.
    pub fn create_relation(&mut self, ws: Uuid, inv: &ObjectRef, rel: &NewRelation, actor: &str) -> Result<ObjectRef> {
        graph_edit::create_relation(&mut self.conn, ws, inv, rel, actor)
    }

    /// Deletes a relation with its provenance.
    pub fn delete_relation(&mut self, ws: Uuid, rel: &ObjectRef, actor: &str) -> Result<()> {
        graph_edit::delete_relation(&mut self.conn, ws, rel, actor)
    }

    /// Persists a human grant.
    pub fn record_grant(&mut self, ws: Uuid, grant: &NewGrant) -> Result<GrantRef> {
        grants::record_grant(&mut self.conn, ws, grant)
    }

    /// Revokes a grant and, in the same transaction, stops its unfinished
    /// campaigns (`STOPPED`, planned items `STOPPED`).
    pub fn revoke_grant(&mut self, ws: Uuid, grant: &GrantRef, by: &str) -> Result<()> {
        grants::revoke_grant(&mut self.conn, ws, &grant.object_ref(), by)
    }

    /// Stores a research request prepared by an agent (or finds the one an
    /// identical earlier call prepared); `true` when created now.
    pub fn prepare_research(&mut self, ws: Uuid, req: &NewResearchRequest) -> Result<(ObjectRef, bool)> {
        research::prepare(&mut self.conn, ws, req)
    }

    /// Grants a pending research request: grant, campaign and its items —
    /// planned (REAL) or run synthetically (SPECIMEN) — in one transaction.
    pub fn grant_research(&mut self, ws: Uuid, request: &ObjectRef, d: &GrantDecision) -> Result<GrantOutcome> {
        research::grant(&mut self.conn, ws, request, d)
    }

    /// Stores a tool request an agent prepared (SPEC X2: pauses A, B, C1,
    /// C2), or finds the one an identical earlier call prepared; `true` when
    /// created now.
    pub fn propose_tool_request(&mut self, ws: Uuid, req: &NewToolRequest) -> Result<(ObjectRef, bool)> {
        tool_requests::propose(&mut self.conn, ws, req)
    }

    /// A human's decision on a pending tool request, once; VOID (with why)
    /// when the proposing contract or the manifest changed since.
    pub fn decide_tool_request(&mut self, ws: Uuid, request: &ObjectRef, d: &ToolDecision) -> Result<ToolRequest> {
        tool_requests::decide(&mut self.conn, ws, request, d)
    }

    /// Refuses a pending research request.
    pub fn refuse_research(&mut self, ws: Uuid, request: &ObjectRef, reason: &str, by: &str) -> Result<()> {
        research::refuse(&mut self.conn, ws, request, reason, by)
    }

    /// `PENDING → ADMITTED`: the governor admitted the campaign (`detail`: one
    /// line, e.g. what it reserved). Conflict unless PENDING with an active grant.
    pub fn campaign_admitted(&mut self, ws: Uuid, campaign: &CampaignRef, detail: &str) -> Result<()> {
        campaign::admitted(&mut self.conn, ws, &campaign.object_ref(), detail)
    }

    /// `ADMITTED → RUNNING`, setting `started_at`. Conflict unless ADMITTED
    /// with an active grant.
    pub fn campaign_started(&mut self, ws: Uuid, campaign: &CampaignRef) -> Result<()> {
        campaign::started(&mut self.conn, ws, &campaign.object_ref())
    }

    /// Records the page egress fetched for item `position` (0 first) of a
    /// RUNNING campaign: evidence with provenance and fetch metadata, its
    /// original bytes and the text the parser read (SPEC C3) — whatever the
    /// body's type; answers the evidence item. Invalid
    /// (nothing stored) when egress's SHA-256 is not the blob's, a URL is
    /// outside the grant's scope, or a bound is exceeded; Conflict when the
    /// item already ended or its URL is not `page.url`.
    pub fn record_fetch(
        &mut self,
        ws: Uuid,
        campaign: &CampaignRef,
        position: u32,
        page: &FetchedPage,
    ) -> Result<ObjectRef> {
        campaign::record_fetch(&mut self.conn, ws, &campaign.object_ref(), position, page)
    }

    /// Records how item `position` of a RUNNING campaign ended without a page:
    /// `FAILED`, `REFUSED`, `UNAVAILABLE` or `STOPPED`, with a reason (cut to
    /// [`MAX_ITEM_REASON_CHARS`]) and the body bytes received, if any.
    pub fn record_item_outcome(
        &mut self,
        ws: Uuid,
        campaign: &CampaignRef,
        position: u32,
        status: ItemStatus,
        reason: &str,
        bytes: u64,
    ) -> Result<()> {
        campaign::record_item_outcome(&mut self.conn, ws, &campaign.object_ref(), position, status, reason, bytes)
    }

    /// Ends a campaign, setting `finished_at`: `COMPLETED` from RUNNING once
    /// no item is planned; `FAILED` or `STOPPED` from any unfinished status,
    /// its planned items becoming `STOPPED`.
    pub fn campaign_finished(
        &mut self,
        ws: Uuid,
        campaign: &CampaignRef,
        status: CampaignStatus,
        detail: &str,
    ) -> Result<()> {
        campaign::finished(&mut self.conn, ws, &campaign.object_ref(), status, detail)
    }

    pub(crate) fn conn_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    #[cfg(test)]
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }
}

/// A read-only connection to an existing store: for readers in other
/// processes (the egress daemon re-checks grants through one) and for the
/// server's pool of readers.
pub struct ReadOnlyStore {
    conn: Connection,
    path: PathBuf,
}

impl ReadOnlyStore {
    /// Exports investigation `inv` into a bundle from one read snapshot
    /// (SPEC C5); the caller may add files, then finishes the bundle.
    /// Returns the manifest's header fields (what was exported, when, by
    /// which schema and software), for [`bundle::BundleWriter::finish`].
    pub fn export(
        &self,
        inv: &ObjectRef,
        w: &mut bundle::BundleWriter,
    ) -> std::result::Result<serde_json::Map<String, serde_json::Value>, bundle::BundleError> {
        let ws = self.reads().workspace_of(inv)?;
        let data_dir = self.path.parent().unwrap_or(Path::new("."));
        bundle::export(&self.conn, &blobs::BlobStore::at(data_dir), ws, inv, w)?;
        let mut header = serde_json::Map::new();
        header.insert("investigation".into(), serde_json::json!(inv));
        header.insert("workspace".into(), serde_json::json!(ObjectRef::new(labfy_core::RefKind::Workspace, ws)));
        header.insert("exported_at".into(), serde_json::json!(now_rfc3339()));
        header.insert("schema_version".into(), serde_json::json!(migrations::LATEST));
        header.insert("software".into(), serde_json::json!(format!("labfy {}", env!("CARGO_PKG_VERSION"))));
        Ok(header)
    }

    /// Opens `<data_dir>/labfy.sqlite3` read-only; it must exist and be migrated.
    pub fn open(data_dir: &Path) -> Result<Self> {
        let (conn, path) = db::open_read_only(data_dir)?;
        Ok(Self { conn, path })
    }

    /// Read models over this connection.
    pub fn reads(&self) -> Reads<'_> {
        Reads { conn: &self.conn }
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod bundle_tests;
#[cfg(test)]
mod campaign_tests;
#[cfg(test)]
mod candidates_tests;
#[cfg(test)]
mod extraction_tests;
#[cfg(test)]
mod graph_edit_tests;
#[cfg(test)]
mod graph_tests;
#[cfg(test)]
mod import_tests;
#[cfg(test)]
mod lists_tests;
#[cfg(test)]
mod received_tests;
#[cfg(test)]
mod research_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tool_requests_tests;
