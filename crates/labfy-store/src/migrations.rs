//! Versioned schema migrations (SPEC W1).
//!
//! The schema version is SQLite's `user_version`; each migration runs in one
//! transaction together with the version bump, so a crash leaves either the old
//! or the new schema, never half of one. Migrations are append-only: a released
//! migration is never edited, a change is a new entry.

/// `PRAGMA application_id` of every Labfy database: "LABF" in ASCII. A SQLite
/// file with another id (and tables) is foreign and refused.
pub const APPLICATION_ID: i32 = 0x4C41_4246;

/// All migrations, in order. Index `i` brings the schema to version `i + 1`.
pub const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11];

/// Newest schema version this build knows.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

/// Version 1: the model of SPEC W1–W4.
const V1: &str = r#"
CREATE TABLE workspaces (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    class         TEXT NOT NULL CHECK (class IN ('SPECIMEN', 'REAL')),
    -- GENERATING while a SPECIMEN is being written; READY once complete.
    status        TEXT NOT NULL CHECK (status IN ('GENERATING', 'READY')),
    specimen_seed INTEGER,
    specimen_size INTEGER,
    created_at    TEXT NOT NULL,
    CHECK ((class = 'SPECIMEN') = (specimen_seed IS NOT NULL))
);

CREATE TABLE investigations (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    title            TEXT NOT NULL,
    summary          TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    -- Row counts of the large tables, so the overview needs no index scan
    -- (330 ms for relations at 1,000,000 evidence items). Written only by the
    -- store's commands, in the transaction that changes the rows:
    -- `recount_derived` after a bulk load, exact increments in single-row
    -- commands. Tests compare them with count(*).
    evidence_count   INTEGER NOT NULL DEFAULT 0,
    relation_count   INTEGER NOT NULL DEFAULT 0,
    provenance_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX investigations_workspace ON investigations(workspace_id);

-- `seq` is the stable integer key the full-text index points at (an implicit
-- rowid could be renumbered by VACUUM).
CREATE TABLE evidence (
    seq              INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    title            TEXT NOT NULL,
    content          TEXT NOT NULL,
    sha256           TEXT NOT NULL CHECK (length(sha256) = 64),
    source           TEXT NOT NULL,
    mime             TEXT NOT NULL,
    byte_len         INTEGER NOT NULL CHECK (byte_len >= 0),
    char_len         INTEGER NOT NULL CHECK (char_len >= 0),
    collected_at     TEXT NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX evidence_investigation ON evidence(investigation_id, collected_at);

CREATE VIRTUAL TABLE evidence_fts USING fts5(
    title, content,
    content = 'evidence', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
-- Inserts are indexed by the store's commands in bulk (`index_evidence`), not
-- by a row trigger: FTS5 flushes its pending terms at every statement
-- savepoint, so a per-row trigger writes one tiny segment per document.
-- Deletes (cascades included) are kept in step by this trigger.
CREATE TRIGGER evidence_fts_delete AFTER DELETE ON evidence BEGIN
    INSERT INTO evidence_fts(evidence_fts, rowid, title, content) VALUES ('delete', old.seq, old.title, old.content);
END;
-- Evidence is immutable once stored: its SHA-256 is a promise.
CREATE TRIGGER evidence_immutable BEFORE UPDATE ON evidence BEGIN
    SELECT RAISE(ABORT, 'evidence is immutable');
END;

CREATE TABLE entities (
    id               TEXT PRIMARY KEY,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('person', 'organisation', 'domain', 'email', 'location', 'phone')),
    name             TEXT NOT NULL,
    attributes       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes)),
    -- Number of `mentions` relations pointing at the entity, so correlations
    -- (entities shared across evidence) need no full scan. Recomputed by the
    -- store's `recount_derived` in every command that writes mentions (a row
    -- trigger made bulk loads 40 % slower; see docs/PERFORMANCE.md).
    mention_count    INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL
);
CREATE INDEX entities_investigation ON entities(investigation_id, kind);
CREATE INDEX entities_mentions ON entities(investigation_id, mention_count DESC);

-- Typed edges between objects, written as namespaced refs (`evidence:<uuid>`).
CREATE TABLE relations (
    id               TEXT PRIMARY KEY,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('mentions', 'works_for', 'owns_domain', 'uses_email', 'uses_phone', 'located_in', 'linked_to', 'derived_from')),
    src              TEXT NOT NULL,
    dst              TEXT NOT NULL,
    confidence       REAL NOT NULL CHECK (confidence BETWEEN 0.0 AND 1.0),
    created_at       TEXT NOT NULL,
    CHECK (src <> dst)
);
CREATE INDEX relations_src ON relations(src, kind);
CREATE INDEX relations_dst ON relations(dst, kind);
CREATE INDEX relations_investigation ON relations(investigation_id);

CREATE TABLE provenance (
    id               TEXT PRIMARY KEY,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    object_ref       TEXT NOT NULL,
    producer         TEXT NOT NULL,
    activity         TEXT NOT NULL,
    created_at       TEXT NOT NULL
);
CREATE INDEX provenance_object ON provenance(object_ref);
CREATE INDEX provenance_investigation ON provenance(investigation_id);
CREATE TABLE provenance_inputs (
    provenance_id TEXT NOT NULL REFERENCES provenance(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    input_ref     TEXT NOT NULL,
    PRIMARY KEY (provenance_id, position)
) WITHOUT ROWID;

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED')),
    progress         REAL NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0.0 AND 1.0),
    detail           TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX jobs_investigation ON jobs(investigation_id, created_at);

-- Human decisions (SPEC W4). Immutable once decided, except revocation.
CREATE TABLE grants (
    id                    TEXT PRIMARY KEY,
    workspace_id          TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    investigation_id      TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    scope                 TEXT NOT NULL CHECK (json_valid(scope)),
    budget                TEXT NOT NULL CHECK (json_valid(budget)),
    expires_at            TEXT NOT NULL,
    contract_fingerprints TEXT NOT NULL CHECK (json_valid(contract_fingerprints)),
    decided_by            TEXT NOT NULL CHECK (length(decided_by) > 0),
    decided_at            TEXT NOT NULL,
    revoked_at            TEXT,
    revoked_by            TEXT,
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
CREATE INDEX grants_workspace ON grants(workspace_id);
CREATE TRIGGER grants_decision_immutable BEFORE UPDATE ON grants
WHEN new.id IS NOT old.id OR new.workspace_id IS NOT old.workspace_id
  OR new.investigation_id IS NOT old.investigation_id OR new.scope IS NOT old.scope
  OR new.budget IS NOT old.budget OR new.expires_at IS NOT old.expires_at
  OR new.contract_fingerprints IS NOT old.contract_fingerprints
  OR new.decided_by IS NOT old.decided_by OR new.decided_at IS NOT old.decided_at
  OR old.revoked_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'a grant is immutable once decided; only an unrevoked grant can be revoked');
END;

CREATE TABLE campaigns (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    grant_id         TEXT NOT NULL REFERENCES grants(id),
    status           TEXT NOT NULL CHECK (status IN ('PENDING', 'ADMITTED', 'RUNNING', 'COMPLETED', 'FAILED', 'STOPPED')),
    detail           TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX campaigns_grant ON campaigns(grant_id);

-- Append-only, enforced by the database itself. No foreign keys: the log
-- outlives what it talks about.
CREATE TABLE audit_log (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    at           TEXT NOT NULL,
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    workspace_id TEXT,
    object_ref   TEXT,
    detail       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
"#;

/// Version 2: research requests prepared by an agent and decided by a human
/// (SPEC G11, W4), and what a campaign reports about its progress.
const V2: &str = r#"
CREATE TABLE research_requests (
    id                   TEXT PRIMARY KEY,
    workspace_id         TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    investigation_id     TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    question             TEXT NOT NULL CHECK (length(question) BETWEEN 1 AND 512),
    selection            TEXT NOT NULL CHECK (json_valid(selection)),
    exclusions           TEXT NOT NULL CHECK (json_valid(exclusions)),
    -- The agent turn and call that prepared it (transport ids of the gateway).
    turn_id              TEXT NOT NULL,
    call_id              TEXT NOT NULL,
    -- A replay of the same call finds this row instead of preparing twice,
    -- even after the gateway's in-memory record of the call is evicted.
    idempotency_key      TEXT NOT NULL,
    requested_by         TEXT NOT NULL,
    -- Contract of `research.prepare` and of the whole catalog in force when it
    -- was prepared: a decision under another contract is void (SPEC R5).
    contract_fingerprint TEXT NOT NULL CHECK (length(contract_fingerprint) = 64),
    catalog_fingerprint  TEXT NOT NULL CHECK (length(catalog_fingerprint) = 64),
    status               TEXT NOT NULL CHECK (status IN ('PENDING', 'GRANTED', 'REFUSED', 'VOID')),
    decided_at           TEXT,
    decided_by           TEXT,
    decision_note        TEXT,
    grant_id             TEXT REFERENCES grants(id),
    created_at           TEXT NOT NULL,
    UNIQUE (workspace_id, idempotency_key),
    CHECK ((status = 'PENDING') = (decided_at IS NULL)),
    CHECK ((status = 'GRANTED') = (grant_id IS NOT NULL))
);
CREATE INDEX research_requests_investigation ON research_requests(investigation_id, created_at);
-- A request is decided once: only a PENDING row changes, and only its decision.
CREATE TRIGGER research_requests_decided_once BEFORE UPDATE ON research_requests
WHEN old.status <> 'PENDING' OR new.id IS NOT old.id OR new.workspace_id IS NOT old.workspace_id
  OR new.investigation_id IS NOT old.investigation_id OR new.question IS NOT old.question
  OR new.selection IS NOT old.selection OR new.exclusions IS NOT old.exclusions
  OR new.turn_id IS NOT old.turn_id OR new.call_id IS NOT old.call_id
  OR new.idempotency_key IS NOT old.idempotency_key OR new.requested_by IS NOT old.requested_by
  OR new.contract_fingerprint IS NOT old.contract_fingerprint
  OR new.catalog_fingerprint IS NOT old.catalog_fingerprint OR new.created_at IS NOT old.created_at
BEGIN
    SELECT RAISE(ABORT, 'a research request is decided once; its content never changes');
END;

ALTER TABLE campaigns ADD COLUMN research_request_id TEXT REFERENCES research_requests(id);
ALTER TABLE campaigns ADD COLUMN synthetic INTEGER NOT NULL DEFAULT 0 CHECK (synthetic IN (0, 1));
ALTER TABLE campaigns ADD COLUMN items_total INTEGER NOT NULL DEFAULT 0 CHECK (items_total >= 0);
ALTER TABLE campaigns ADD COLUMN items_done INTEGER NOT NULL DEFAULT 0 CHECK (items_done >= 0);
ALTER TABLE campaigns ADD COLUMN items_failed INTEGER NOT NULL DEFAULT 0 CHECK (items_failed >= 0);
ALTER TABLE campaigns ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0);
CREATE INDEX campaigns_request ON campaigns(research_request_id);

-- What a campaign produced is found through its provenance records.
CREATE INDEX provenance_producer ON provenance(producer);
"#;

/// Version 3: what a REAL campaign fetches and what each fetch produced
/// (SPEC E3, E5, W4). The URLs are the human's decision: planned once in the
/// grant's transaction, each item ends once. A fetched page is evidence whose
/// provenance record carries the fetch's metadata in `fetch_provenance`.
const V3: &str = r#"
ALTER TABLE campaigns ADD COLUMN started_at TEXT;
ALTER TABLE campaigns ADD COLUMN finished_at TEXT;
-- Campaigns of version 2 that already ended (synthetic ones end in the grant's
-- transaction) get the times they ran.
UPDATE campaigns SET started_at = created_at WHERE status IN ('RUNNING', 'COMPLETED', 'FAILED', 'STOPPED');
UPDATE campaigns SET finished_at = updated_at WHERE status IN ('COMPLETED', 'FAILED', 'STOPPED');
CREATE INDEX campaigns_status ON campaigns(status, created_at);
-- A finished campaign never changes again; its identity never changes at all.
CREATE TRIGGER campaigns_finished_once BEFORE UPDATE ON campaigns
WHEN old.status IN ('COMPLETED', 'FAILED', 'STOPPED')
  OR new.id IS NOT old.id OR new.workspace_id IS NOT old.workspace_id
  OR new.investigation_id IS NOT old.investigation_id OR new.grant_id IS NOT old.grant_id
  OR new.research_request_id IS NOT old.research_request_id OR new.synthetic IS NOT old.synthetic
  OR new.created_at IS NOT old.created_at
BEGIN
    SELECT RAISE(ABORT, 'a finished campaign never changes; a campaign''s identity never changes');
END;

-- One row per URL a campaign fetches (position 0 first).
CREATE TABLE campaign_items (
    campaign_id  TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    position     INTEGER NOT NULL CHECK (position BETWEEN 0 AND 1023),
    url          TEXT NOT NULL CHECK (length(CAST(url AS BLOB)) BETWEEN 1 AND 2048),
    status       TEXT NOT NULL CHECK (status IN ('PLANNED', 'FETCHED', 'FAILED', 'REFUSED', 'UNAVAILABLE', 'STOPPED')),
    reason       TEXT,
    http_status  INTEGER CHECK (http_status BETWEEN 100 AND 999),
    bytes        INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    evidence_id  TEXT REFERENCES evidence(id),
    started_at   TEXT,
    finished_at  TEXT,
    PRIMARY KEY (campaign_id, position),
    CHECK ((status = 'FETCHED') = (evidence_id IS NOT NULL)),
    CHECK ((status = 'PLANNED') = (finished_at IS NULL)),
    CHECK (status IN ('PLANNED', 'FETCHED') OR reason IS NOT NULL)
) WITHOUT ROWID;
-- An item is planned once and ends once: only a PLANNED row changes, and
-- never its campaign, position or URL.
CREATE TRIGGER campaign_items_end_once BEFORE UPDATE ON campaign_items
WHEN old.status <> 'PLANNED' OR new.campaign_id IS NOT old.campaign_id
  OR new.position IS NOT old.position OR new.url IS NOT old.url
BEGIN
    SELECT RAISE(ABORT, 'a campaign item ends once; its URL never changes');
END;

-- The fetch behind a `tor_fetch` provenance record (SPEC E5): URL asked and
-- reached, redirects, status, selected headers, body digest and size, timing,
-- the Tor isolation label, grant and campaign. Immutable like the evidence.
CREATE TABLE fetch_provenance (
    provenance_id TEXT PRIMARY KEY REFERENCES provenance(id) ON DELETE CASCADE,
    campaign_id   TEXT NOT NULL,
    position      INTEGER NOT NULL,
    grant_id      TEXT NOT NULL,
    url           TEXT NOT NULL,
    final_url     TEXT NOT NULL,
    redirects     TEXT NOT NULL CHECK (json_valid(redirects)),
    http_status   INTEGER NOT NULL CHECK (http_status BETWEEN 100 AND 999),
    headers       TEXT NOT NULL CHECK (json_valid(headers)),
    content_type  TEXT,
    body_sha256   TEXT NOT NULL CHECK (length(body_sha256) = 64),
    body_bytes    INTEGER NOT NULL CHECK (body_bytes >= 0),
    started_at    TEXT NOT NULL,
    elapsed_ms    INTEGER NOT NULL CHECK (elapsed_ms >= 0),
    isolation     TEXT NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER fetch_provenance_immutable BEFORE UPDATE ON fetch_provenance BEGIN
    SELECT RAISE(ABORT, 'fetch provenance is immutable');
END;
"#;

/// Version 4: extraction fills the graph (SPEC C4). Entities gain the kinds of
/// `labfy-extract` (SQLite cannot change a CHECK, so the table is rebuilt
/// with the same rows); every mention keeps its offset, length, extractor and
/// version; each evidence item records the extractor version it was scanned
/// with, so a run is idempotent and a new version scans again; a relation
/// names who made it.
const V4: &str = r#"
CREATE TABLE entities_v4 (
    id               TEXT PRIMARY KEY,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('person', 'organisation', 'domain', 'email', 'location', 'phone',
                                                   'url', 'ipv4', 'ipv6', 'iban', 'btc_address', 'eth_address',
                                                   'onion', 'file_hash')),
    name             TEXT NOT NULL,
    attributes       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(attributes)),
    mention_count    INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL
);
INSERT INTO entities_v4 (id, investigation_id, kind, name, attributes, mention_count, created_at)
    SELECT id, investigation_id, kind, name, attributes, mention_count, created_at FROM entities;
DROP TABLE entities;
ALTER TABLE entities_v4 RENAME TO entities;
CREATE INDEX entities_investigation ON entities(investigation_id, kind);
CREATE INDEX entities_mentions ON entities(investigation_id, mention_count DESC);
-- Extraction finds an entity by its normalised value.
CREATE INDEX entities_name ON entities(investigation_id, kind, name);

-- Names an entity lost (renamed, merged away), so extraction and the
-- analyst's duplicate check still find it by them.
CREATE TABLE entity_aliases (
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL,
    name             TEXT NOT NULL,
    entity_id        TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    PRIMARY KEY (investigation_id, kind, name)
) WITHOUT ROWID;
CREATE INDEX entity_aliases_entity ON entity_aliases(entity_id);

-- Who made a relation: NULL for those written before version 4 (SPECIMEN),
-- `labfy-extract` for a mention found by the extractors, `analyst` by hand.
-- Extraction removes only the relations it made.
ALTER TABLE relations ADD COLUMN producer TEXT;

-- Where an extractor found an entity in an evidence item: offset and length
-- in characters of the stored text, the extractor and the set's version.
CREATE TABLE mentions (
    evidence_id TEXT NOT NULL REFERENCES evidence(id) ON DELETE CASCADE,
    start       INTEGER NOT NULL CHECK (start >= 0),
    length      INTEGER NOT NULL CHECK (length > 0),
    entity_id   TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    extractor   TEXT NOT NULL,
    version     INTEGER NOT NULL CHECK (version > 0),
    PRIMARY KEY (evidence_id, start, entity_id)
) WITHOUT ROWID;
CREATE INDEX mentions_entity ON mentions(entity_id);

-- The extractor version each evidence item was last scanned with.
CREATE TABLE extraction_state (
    evidence_id  TEXT PRIMARY KEY REFERENCES evidence(id) ON DELETE CASCADE,
    version      INTEGER NOT NULL CHECK (version > 0),
    mentions     INTEGER NOT NULL CHECK (mentions >= 0),
    dropped      INTEGER NOT NULL CHECK (dropped >= 0),
    extracted_at TEXT NOT NULL
) WITHOUT ROWID;

-- A job's figures and cursor, so it resumes where it stopped.
ALTER TABLE jobs ADD COLUMN stats TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(stats));
-- One extraction at a time per investigation.
CREATE UNIQUE INDEX jobs_one_extraction ON jobs(investigation_id)
    WHERE kind = 'extraction' AND status IN ('QUEUED', 'RUNNING');
"#;

/// Version 5: imported files (SPEC C2). Their original bytes lie in the
/// content-addressed blob store (`blobs`, one row per stored blob) and the
/// evidence item names its blob; its `sha256` is then the hash of those
/// bytes, so the same bytes imported twice are found as one item. Each
/// import is a provenance record with its file's name, path, size and hash
/// (`imports`); each file of an import job has an outcome.
const V5: &str = r#"
CREATE TABLE blobs (
    sha256     TEXT PRIMARY KEY CHECK (length(sha256) = 64),
    byte_len   INTEGER NOT NULL CHECK (byte_len >= 0),
    created_at TEXT NOT NULL
) WITHOUT ROWID;
ALTER TABLE evidence ADD COLUMN blob_sha256 TEXT REFERENCES blobs(sha256);
CREATE INDEX evidence_sha256 ON evidence(investigation_id, sha256);

CREATE TABLE imports (
    provenance_id    TEXT PRIMARY KEY REFERENCES provenance(id) ON DELETE CASCADE,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    evidence_id      TEXT NOT NULL REFERENCES evidence(id) ON DELETE CASCADE,
    job_id           TEXT,
    original_name    TEXT NOT NULL,
    original_path    TEXT NOT NULL,
    byte_len         INTEGER NOT NULL CHECK (byte_len >= 0),
    sha256           TEXT NOT NULL CHECK (length(sha256) = 64),
    format           TEXT NOT NULL,
    parser_version   INTEGER NOT NULL,
    encoding         TEXT,
    metadata         TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    notes            TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(notes)),
    imported_by      TEXT NOT NULL,
    imported_at      TEXT NOT NULL
);
CREATE INDEX imports_evidence ON imports(evidence_id);
CREATE INDEX imports_investigation ON imports(investigation_id);

CREATE TABLE import_outcomes (
    job_id      TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    position    INTEGER NOT NULL CHECK (position >= 0),
    path        TEXT NOT NULL,
    outcome     TEXT NOT NULL CHECK (outcome IN ('imported', 'duplicate', 'refused')),
    evidence_id TEXT,
    reason      TEXT,
    PRIMARY KEY (job_id, position)
) WITHOUT ROWID;
"#;

/// Version 6: cases managed by the analyst (SPEC C1). An investigation or a
/// workspace can be archived (kept whole, set aside in lists) and brought
/// back.
const V6: &str = r#"
ALTER TABLE investigations ADD COLUMN archived_at TEXT;
ALTER TABLE workspaces ADD COLUMN archived_at TEXT;
"#;

/// Version 7: a research request keeps the candidate URLs `research.prepare`
/// proposed, with why each was proposed and what was left out (SPEC F1), so
/// the authorization screen shows the same proposals at every read. `NULL`
/// for a request prepared before.
const V7: &str = r#"
ALTER TABLE research_requests ADD COLUMN candidates TEXT CHECK (candidates IS NULL OR json_valid(candidates));
"#;

/// Version 8: the lists of the UI (SPEC U2) walk an index in the order they
/// show, so a page at 1,000,000 items reads one page of rows: evidence by
/// title, entities by name (ASCII case folded) and by mentions (within a kind
/// or not), and the typed relations by kind (partial: the 86 % that are `mentions` are
/// dense enough in `relations_investigation`).
const V8: &str = r#"
CREATE INDEX evidence_title ON evidence(investigation_id, title COLLATE NOCASE);
CREATE INDEX entities_name_nocase ON entities(investigation_id, name COLLATE NOCASE);
CREATE INDEX entities_kind_name_nocase ON entities(investigation_id, kind, name COLLATE NOCASE);
CREATE INDEX entities_kind_mentions ON entities(investigation_id, kind, mention_count);
-- Ascending, unlike `entities_mentions`: a list breaks ties by rowid in the
-- key's direction, which a mixed-direction index cannot give.
CREATE INDEX entities_mention_order ON entities(investigation_id, mention_count);
CREATE INDEX relations_typed ON relations(investigation_id, kind) WHERE kind <> 'mentions';
"#;

/// Version 9: tool requests (SPEC X2, the seed's pauses A, B, C1, C2): an
/// agent proposes to install a capability in the workspace (`install`), to
/// make an installed one callable in an investigation (`integrate`), to try
/// a new or changed one there (`change`, after its tests ran in the sandbox),
/// or to promote a tried change into the registry (`promote`). Each holds the
/// exact manifest and its fingerprint a human approves or refuses, once; what
/// is installed, integrated or on trial is read from the approved rows.
const V9: &str = r#"
CREATE TABLE tool_requests (
    id                   TEXT PRIMARY KEY,
    workspace_id         TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    investigation_id     TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind                 TEXT NOT NULL CHECK (kind IN ('install', 'integrate', 'change', 'promote')),
    capability_id        TEXT NOT NULL CHECK (length(capability_id) BETWEEN 1 AND 64),
    capability_version   TEXT NOT NULL CHECK (length(capability_version) BETWEEN 5 AND 20),
    manifest             TEXT NOT NULL CHECK (json_valid(manifest)),
    manifest_fingerprint TEXT NOT NULL CHECK (length(manifest_fingerprint) = 64),
    -- Why the agent asks (its own words: untrusted).
    reason               TEXT NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
    -- For a change: the diff against what it changes and its tests' results;
    -- for a promotion: the change it promotes.
    detail               TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail)),
    turn_id              TEXT NOT NULL,
    call_id              TEXT NOT NULL,
    idempotency_key      TEXT NOT NULL,
    requested_by         TEXT NOT NULL,
    -- The proposing tool's contract in force (SPEC R5): a decision under
    -- another one is void.
    contract_fingerprint TEXT NOT NULL CHECK (length(contract_fingerprint) = 64),
    status               TEXT NOT NULL CHECK (status IN ('PENDING', 'APPROVED', 'REFUSED', 'VOID')),
    decided_at           TEXT,
    decided_by           TEXT,
    decision_note        TEXT,
    created_at           TEXT NOT NULL,
    UNIQUE (workspace_id, idempotency_key),
    CHECK ((status = 'PENDING') = (decided_at IS NULL))
);
CREATE INDEX tool_requests_investigation ON tool_requests(investigation_id, created_at);
CREATE INDEX tool_requests_capability ON tool_requests(workspace_id, capability_id, status);
CREATE TRIGGER tool_requests_decided_once BEFORE UPDATE ON tool_requests
WHEN old.status <> 'PENDING' OR new.id IS NOT old.id OR new.workspace_id IS NOT old.workspace_id
  OR new.investigation_id IS NOT old.investigation_id OR new.kind IS NOT old.kind
  OR new.capability_id IS NOT old.capability_id OR new.capability_version IS NOT old.capability_version
  OR new.manifest IS NOT old.manifest OR new.manifest_fingerprint IS NOT old.manifest_fingerprint
  OR new.reason IS NOT old.reason OR new.detail IS NOT old.detail
  OR new.turn_id IS NOT old.turn_id OR new.call_id IS NOT old.call_id
  OR new.idempotency_key IS NOT old.idempotency_key OR new.requested_by IS NOT old.requested_by
  OR new.contract_fingerprint IS NOT old.contract_fingerprint OR new.created_at IS NOT old.created_at
BEGIN
    SELECT RAISE(ABORT, 'a tool request is decided once; its content never changes');
END;
"#;

/// The triggers that keep a received investigation's rows as they came, for
/// a table with an `investigation_id` column.
macro_rules! received_read_only {
    ($table:literal) => {
        received_read_only!(
            $table,
            "SELECT received_at FROM investigations WHERE id = new.investigation_id",
            "SELECT received_at FROM investigations WHERE id = old.investigation_id"
        )
    };
    ($table:literal, $new:expr, $old:expr) => {
        concat!(
            "CREATE TRIGGER ",
            $table,
            "_received_insert BEFORE INSERT ON ",
            $table,
            " WHEN (",
            $new,
            ") IS NOT NULL\n",
            "BEGIN SELECT RAISE(ABORT, 'read-only: a received investigation is kept as it came (",
            $table,
            ")'); END;\n",
            "CREATE TRIGGER ",
            $table,
            "_received_update BEFORE UPDATE ON ",
            $table,
            " WHEN (",
            $old,
            ") IS NOT NULL\n",
            "BEGIN SELECT RAISE(ABORT, 'read-only: a received investigation is kept as it came (",
            $table,
            ")'); END;\n",
            "CREATE TRIGGER ",
            $table,
            "_received_delete BEFORE DELETE ON ",
            $table,
            " WHEN (",
            $old,
            ") IS NOT NULL\n",
            "BEGIN SELECT RAISE(ABORT, 'read-only: a received investigation is kept as it came (",
            $table,
            ")'); END;\n",
        )
    };
}

/// The same, for a table whose investigation is its parent's (`$parent`
/// rows, joined on `$column`).
macro_rules! received_read_only_child {
    ($table:literal, $parent:literal, $column:literal) => {
        received_read_only!(
            $table,
            concat!(
                "SELECT i.received_at FROM ",
                $parent,
                " p JOIN investigations i ON i.id = p.investigation_id WHERE p.id = new.",
                $column
            ),
            concat!(
                "SELECT i.received_at FROM ",
                $parent,
                " p JOIN investigations i ON i.id = p.investigation_id WHERE p.id = old.",
                $column
            )
        )
    };
}

/// Version 10: investigations received from another appliance (SPEC I4).
/// `labfy import-bundle` writes a verified bundle's rows as they were
/// exported — ids, times, decisions — then marks the investigation
/// received with the bundle's fingerprint; from then on nothing of it
/// changes (triggers on every table that holds its rows). What the local
/// schema has no table for — the sender's audit log and egress's own
/// ledger of the bundle's grants and fetches — is kept as it came, one
/// JSON record per row, in `received_records`.
const V10: &str = concat!(
    "ALTER TABLE investigations ADD COLUMN received_fingerprint TEXT
    CHECK (received_fingerprint IS NULL OR length(received_fingerprint) = 64);
ALTER TABLE investigations ADD COLUMN received_at TEXT;
CREATE UNIQUE INDEX investigations_received ON investigations(received_fingerprint)
    WHERE received_fingerprint IS NOT NULL;
CREATE TABLE received_records (
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    source           TEXT NOT NULL CHECK (source IN ('audit', 'egress_grant', 'egress_fetch')),
    position         INTEGER NOT NULL CHECK (position >= 0),
    record           TEXT NOT NULL CHECK (json_valid(record)),
    PRIMARY KEY (investigation_id, source, position)
) WITHOUT ROWID;
CREATE TRIGGER investigations_received_update BEFORE UPDATE ON investigations WHEN old.received_at IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'read-only: a received investigation is kept as it came (investigations)'); END;
CREATE TRIGGER investigations_received_delete BEFORE DELETE ON investigations WHEN old.received_at IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'read-only: a received investigation is kept as it came (investigations)'); END;
",
    received_read_only!("evidence"),
    received_read_only!("entities"),
    received_read_only!("entity_aliases"),
    received_read_only!("relations"),
    received_read_only!("provenance"),
    received_read_only!("jobs"),
    received_read_only!("grants"),
    received_read_only!("campaigns"),
    received_read_only!("research_requests"),
    received_read_only!("imports"),
    received_read_only!("tool_requests"),
    received_read_only!("received_records"),
    received_read_only_child!("mentions", "evidence", "evidence_id"),
    received_read_only_child!("extraction_state", "evidence", "evidence_id"),
    received_read_only_child!("provenance_inputs", "provenance", "provenance_id"),
    received_read_only_child!("fetch_provenance", "provenance", "provenance_id"),
    received_read_only_child!("import_outcomes", "jobs", "job_id"),
    received_read_only_child!("campaign_items", "campaigns", "campaign_id"),
);

/// Version 11: relations from a message's structure (SPEC A4) — a message
/// `sent_by` its sender's address, `sent_to` and `copied_to` its
/// recipients', `sent_from` the address its first relay saw. SQLite cannot change a CHECK, so the table is rebuilt with
/// the same rows, its indexes and its received read-only triggers. And a
/// piece's event date (`evidence.dated_at`, issue 44).
const V11: &str = concat!(
    "CREATE TABLE relations_v11 (
    id               TEXT PRIMARY KEY,
    investigation_id TEXT NOT NULL REFERENCES investigations(id) ON DELETE CASCADE,
    kind             TEXT NOT NULL CHECK (kind IN ('mentions', 'works_for', 'owns_domain', 'uses_email', 'uses_phone',
                                                   'located_in', 'linked_to', 'derived_from', 'sent_by', 'sent_to',
                                                   'copied_to', 'sent_from')),
    src              TEXT NOT NULL,
    dst              TEXT NOT NULL,
    confidence       REAL NOT NULL CHECK (confidence BETWEEN 0.0 AND 1.0),
    created_at       TEXT NOT NULL,
    producer         TEXT,
    CHECK (src <> dst)
);
INSERT INTO relations_v11 (id, investigation_id, kind, src, dst, confidence, created_at, producer)
    SELECT id, investigation_id, kind, src, dst, confidence, created_at, producer FROM relations;
DROP TABLE relations;
ALTER TABLE relations_v11 RENAME TO relations;
CREATE INDEX relations_src ON relations(src, kind);
CREATE INDEX relations_dst ON relations(dst, kind);
CREATE INDEX relations_investigation ON relations(investigation_id);
CREATE INDEX relations_typed ON relations(investigation_id, kind) WHERE kind <> 'mentions';
-- When what a piece tells happened, as the analyst gave it (a note of an
-- event): the timeline places the piece there (issue 44).
ALTER TABLE evidence ADD COLUMN dated_at TEXT CHECK (dated_at IS NULL OR datetime(dated_at) IS NOT NULL);
",
    received_read_only!("relations"),
);
