//! Bundles received from another appliance (SPEC I4): how a team shares a
//! case between workstations with no network service. `labfy import-bundle`
//! copies a bundle — the directory `labfy export` writes, or the `.tar` the
//! UI downloads — into a private directory of the data directory, verifies
//! the copy as `labfy verify` does (every hash, every reference, the
//! fetched pieces against egress's own log when it is there), then writes
//! its rows in one transaction, as they were exported: the same ids, times
//! and decisions, so that « evidence:… » names the same piece on both
//! workstations. What the local schema has no table for — the sender's
//! audit log, egress's ledger of the bundle's grants and fetches — is kept
//! as it came in `received_records`. Last, the investigation is marked
//! received with the bundle's fingerprint; from then on the triggers of
//! schema version 10 refuse any change to it, and the sweeps that settle
//! this appliance's own jobs, campaigns and requests leave it alone.
//!
//! The same bundle twice is one investigation (its fingerprint is known).
//! A bundle of an investigation this data directory already holds — its own,
//! or received from another bundle — is refused with the reason.

use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File};
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::blobs::BlobStore;
use crate::bundle::{BundleError, MANIFEST, Verified, check_rel, each_line, io, verify};
use crate::error::StoreError;
use crate::now_rfc3339;
use crate::primitives::{audit, index_evidence, recount_derived};

type Result<T, E = BundleError> = std::result::Result<T, E>;

/// What `labfy import-bundle` did.
#[derive(Debug, Clone, Serialize)]
pub struct Received {
    /// The investigation, as the sender named it.
    pub investigation: ObjectRef,
    /// Its workspace here (the sender's, created when absent).
    pub workspace: ObjectRef,
    /// SHA-256 of the bundle's manifest.
    pub fingerprint: String,
    /// True when this bundle had been received before: nothing was written.
    pub already: bool,
    /// The verification, when the bundle was read this time.
    pub verified: Option<Verified>,
    /// Rows written (evidence, graph, provenance, campaigns, records).
    pub rows: u64,
}

/// The tables of a bundle, in an order their references allow: file, table.
const TABLES: [(&str, &str); 14] = [
    ("entities.jsonl", "entities"),
    ("entity_aliases.jsonl", "entity_aliases"),
    ("relations.jsonl", "relations"),
    ("mentions.jsonl", "mentions"),
    ("provenance.jsonl", "provenance"),
    ("provenance_inputs.jsonl", "provenance_inputs"),
    ("jobs.jsonl", "jobs"),
    ("import_outcomes.jsonl", "import_outcomes"),
    ("imports.jsonl", "imports"),
    ("grants.jsonl", "grants"),
    ("research_requests.jsonl", "research_requests"),
    ("campaigns.jsonl", "campaigns"),
    ("campaign_items.jsonl", "campaign_items"),
    ("fetch_provenance.jsonl", "fetch_provenance"),
];

/// What is kept as it came: file, source.
const RECORDS: [(&str, &str); 3] = [
    ("audit.jsonl", "audit"),
    ("egress/grants.jsonl", "egress_grant"),
    (crate::bundle::EGRESS_FETCH_LOG, "egress_fetch"),
];

/// Columns of an investigation row that say how this appliance holds it,
/// never taken from a bundle.
const LOCAL_COLUMNS: [&str; 5] =
    ["received_fingerprint", "received_at", "evidence_count", "relation_count", "provenance_count"];

/// Receives `bundle` into the store whose connection is `conn` and whose
/// data directory is `data_dir` (see the module). `fingerprint`: the one
/// the sender handed over, when given; the manifest must be that one.
/// `into`: a workspace of this data directory to place it in (of the
/// bundle's class); without it, the sender's workspace (created when
/// absent).
pub(crate) fn receive(
    conn: &mut Connection,
    blobs: &BlobStore,
    data_dir: &Path,
    bundle: &Path,
    fingerprint: Option<&str>,
    into: Option<Uuid>,
    actor: &str,
) -> Result<Received> {
    let work = Workdir::new(data_dir)?;
    let dir = work.path.join("bundle");
    copy_bundle(bundle, &dir)?;
    // The same bundle again: one investigation.
    let manifest_bytes = fs::read(dir.join(MANIFEST)).map_err(io(&dir.join(MANIFEST)))?;
    let found = hex::encode(Sha256::digest(&manifest_bytes));
    if let Some(expected) = fingerprint
        && !expected.eq_ignore_ascii_case(&found)
    {
        return Err(BundleError::Fingerprint { expected: expected.to_owned(), found });
    }
    if let Some((inv, ws)) = received_as(conn, &found)? {
        return Ok(Received {
            investigation: inv,
            workspace: ws,
            fingerprint: found,
            already: true,
            verified: None,
            rows: 0,
        });
    }
    let verified = verify(&dir, Some(&found))?;
    let manifest: Value =
        serde_json::from_slice(&manifest_bytes).map_err(|e| BundleError::Manifest(format!("not JSON: {e}")))?;
    let schema = manifest["schema_version"].as_i64().unwrap_or(0);
    if schema > crate::migrations::LATEST {
        return Err(BundleError::Manifest(format!(
            "made by a newer Labfy (schema version {schema}; this one knows up to {}): update Labfy to receive it",
            crate::migrations::LATEST
        )));
    }
    let inv = reference(&manifest, "investigation", RefKind::Investigation)?;
    let sender_ws = reference(&manifest, "workspace", RefKind::Workspace)?;
    let ws = ObjectRef::new(RefKind::Workspace, into.unwrap_or(sender_ws.id()));
    let tx = conn.transaction().map_err(StoreError::from)?;
    refuse_if_held(&tx, &inv)?;
    let mut writer = Writer {
        tx: &tx,
        inv: inv.id().to_string(),
        sender_ws: sender_ws.id().to_string(),
        ws: ws.id().to_string(),
        rows: 0,
    };
    writer.heads(&dir)?;
    writer.evidence(&dir, blobs)?;
    for (file, table) in TABLES {
        if dir.join(file).is_file() {
            writer.table(&dir, file, table)?;
        }
    }
    for (file, source) in RECORDS {
        if dir.join(file).is_file() {
            writer.records(&dir, file, source)?;
        }
    }
    let rows = writer.rows;
    let inv_id = inv.id().to_string();
    recount_derived(&tx, &inv_id)?;
    let now = now_rfc3339();
    tx.execute(
        "UPDATE investigations SET received_fingerprint = ?2, received_at = ?3 WHERE id = ?1",
        params![inv_id, found, now],
    )
    .map_err(StoreError::from)?;
    audit(
        &tx,
        actor,
        "bundle.receive",
        Some(ws.id()),
        Some(&inv),
        &serde_json::json!({
            "fingerprint": found,
            "files": verified.files,
            "bytes": verified.bytes,
            "rows": rows,
            "exported_at": manifest["exported_at"],
            "software": manifest["software"],
            "fetched": verified.fetched,
        }),
    )?;
    tx.commit().map_err(StoreError::from)?;
    Ok(Received {
        investigation: inv,
        workspace: ws,
        fingerprint: found,
        already: false,
        verified: Some(verified),
        rows,
    })
}

/// The investigation (and its workspace) received from the bundle whose
/// fingerprint is `fingerprint`, if any.
fn received_as(conn: &Connection, fingerprint: &str) -> Result<Option<(ObjectRef, ObjectRef)>> {
    let row: Option<(String, String)> = conn
        .query_row(
            "SELECT id, workspace_id FROM investigations WHERE received_fingerprint = ?1",
            [fingerprint.to_ascii_lowercase()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(StoreError::from)?;
    row.map(|(inv, ws)| Ok((id_ref(RefKind::Investigation, &inv)?, id_ref(RefKind::Workspace, &ws)?))).transpose()
}

/// Refuses a bundle of an investigation this data directory holds already.
fn refuse_if_held(conn: &Connection, inv: &ObjectRef) -> Result<()> {
    let held: Option<Option<String>> = conn
        .query_row("SELECT received_fingerprint FROM investigations WHERE id = ?1", [inv.id().to_string()], |r| {
            r.get(0)
        })
        .optional()
        .map_err(StoreError::from)?;
    let why = match held {
        None => return Ok(()),
        Some(Some(fp)) => format!(
            "{inv} was received already, from another bundle (fingerprint {fp}); one copy of an investigation is \
             kept: nothing was written"
        ),
        Some(None) => format!(
            "{inv} is this data directory's own (the bundle was exported from here, or from a copy of it): nothing \
             was written"
        ),
    };
    Err(BundleError::Store(StoreError::Conflict(why)))
}

fn id_ref(kind: RefKind, id: &str) -> Result<ObjectRef> {
    Uuid::try_parse(id)
        .map(|u| ObjectRef::new(kind, u))
        .map_err(|e| BundleError::Store(StoreError::Damaged(format!("{kind} id {id}: {e}"))))
}

fn reference(manifest: &Value, field: &str, kind: RefKind) -> Result<ObjectRef> {
    manifest[field]
        .as_str()
        .and_then(|s| s.parse::<ObjectRef>().ok())
        .filter(|r| r.kind() == kind)
        .ok_or_else(|| BundleError::Manifest(format!("`{field}` is not a `{kind}:` reference")))
}

/// Writes a bundle's rows in one transaction.
struct Writer<'a> {
    tx: &'a Connection,
    inv: String,
    /// The workspace the rows name.
    sender_ws: String,
    /// The workspace they are placed in here.
    ws: String,
    rows: u64,
}

impl Writer<'_> {
    /// The workspace (created as the sender's when absent) and the
    /// investigation, from `investigation.json`.
    fn heads(&mut self, dir: &Path) -> Result<()> {
        let path = dir.join("investigation.json");
        let head: Value = serde_json::from_slice(&fs::read(&path).map_err(io(&path))?)
            .map_err(|e| BundleError::Manifest(format!("investigation.json: {e}")))?;
        let (Some(Value::Object(inv)), Some(Value::Object(ws))) = (head.get("investigation"), head.get("workspace"))
        else {
            return Err(BundleError::Manifest("investigation.json: no investigation or workspace row".into()));
        };
        let class: Option<String> = self
            .tx
            .query_row("SELECT class FROM workspaces WHERE id = ?1", [&self.ws], |r| r.get(0))
            .optional()
            .map_err(StoreError::from)?;
        let theirs = ws.get("class").and_then(Value::as_str).unwrap_or_default();
        match class {
            None if self.ws == self.sender_ws => self.insert("investigation.json", 1, "workspaces", ws, &[])?,
            None => return Err(BundleError::Store(StoreError::NotFound(format!("workspace:{}", self.ws)))),
            Some(ours) if ours != theirs => {
                return Err(BundleError::Store(StoreError::Conflict(format!(
                    "the bundle's investigation is {theirs}, workspace:{} is {ours}: a {theirs} investigation goes \
                     into a {theirs} workspace (or its own)",
                    self.ws
                ))));
            }
            Some(_) => {}
        }
        self.insert("investigation.json", 1, "investigations", inv, &LOCAL_COLUMNS)
    }

    /// Evidence with its text, and the original bytes into the blob store.
    fn evidence(&mut self, dir: &Path, blobs: &BlobStore) -> Result<()> {
        let mut stored: BTreeSet<String> = BTreeSet::new();
        let mut first_seq: Option<i64> = None;
        let mut last_seq = 0;
        let now = now_rfc3339();
        each_line(dir, "evidence.jsonl", |line, row| {
            let text_rel = row.get("text").and_then(Value::as_str).unwrap_or_default();
            check_rel(text_rel)?;
            let text_path = dir.join(text_rel);
            let content = fs::read_to_string(&text_path).map_err(io(&text_path))?;
            if let Some(original) = row.get("original").and_then(Value::as_str) {
                check_rel(original)?;
                let sha = original.strip_prefix("blobs/").unwrap_or_default();
                if stored.insert(sha.to_owned()) {
                    let path = dir.join(original);
                    let mut f = File::open(&path).map_err(io(&path))?;
                    let blob = blobs.put(&mut f, u64::MAX).map_err(|e| BundleError::Io {
                        path: path.clone(),
                        source: std::io::Error::other(e.to_string()),
                    })?;
                    if blob.sha256 != sha {
                        return Err(BundleError::HashMismatch {
                            path: original.to_owned(),
                            expected: sha.to_owned(),
                            found: blob.sha256,
                        });
                    }
                    self.tx
                        .execute(
                            "INSERT OR IGNORE INTO blobs (sha256, byte_len, created_at) VALUES (?1, ?2, ?3)",
                            params![blob.sha256, blob.len as i64, now],
                        )
                        .map_err(StoreError::from)?;
                }
            }
            // An item names the original the bundle carries, or none: never
            // a blob of the receiver's it did not bring.
            let original = row.get("original").and_then(Value::as_str).and_then(|o| o.strip_prefix("blobs/"));
            if let Some(named) = row.get("blob_sha256").and_then(Value::as_str)
                && original != Some(named)
            {
                return Err(BundleError::Reference {
                    file: "evidence.jsonl".into(),
                    line,
                    detail: format!("`blob_sha256` {named} is not the original the bundle carries for it"),
                });
            }
            let mut row = row.clone();
            row.insert("content".into(), Value::String(content));
            self.insert("evidence.jsonl", line, "evidence", &row, &["seq", "text", "original"])?;
            let seq = self.tx.last_insert_rowid();
            first_seq.get_or_insert(seq);
            last_seq = seq;
            Ok(())
        })?;
        if let Some(first) = first_seq {
            index_evidence(self.tx, first, last_seq)?;
        }
        Ok(())
    }

    fn table(&mut self, dir: &Path, file: &str, table: &str) -> Result<()> {
        each_line(dir, file, |line, row| self.insert(file, line, table, row, &[]))?;
        Ok(())
    }

    /// Rows kept as they came.
    fn records(&mut self, dir: &Path, file: &str, source: &str) -> Result<()> {
        let mut position = 0i64;
        each_line(dir, file, |_, row| {
            let record = serde_json::to_string(row).map_err(|e| BundleError::Manifest(format!("{file}: {e}")))?;
            self.tx
                .prepare_cached(
                    "INSERT INTO received_records (investigation_id, source, position, record) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![self.inv, source, position, record]))
                .map_err(StoreError::from)?;
            position += 1;
            self.rows += 1;
            Ok(())
        })?;
        Ok(())
    }

    /// Inserts one exported row into `table`: its columns must be the
    /// table's (less `skip`), and a row naming an investigation or a
    /// workspace must name the bundle's.
    fn insert(&mut self, file: &str, line: usize, table: &str, row: &Map<String, Value>, skip: &[&str]) -> Result<()> {
        let columns = columns_of(self.tx, table)?;
        let bad = |detail: String| BundleError::Reference { file: file.into(), line, detail };
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (name, value) in row {
            if skip.contains(&name.as_str()) {
                continue;
            }
            if !columns.contains(name) {
                return Err(bad(format!("`{name}` is no column of {table} here")));
            }
            let (expected, placed) = match (table, name.as_str()) {
                ("investigations", "id") | (_, "investigation_id") => (Some(&self.inv), None),
                ("workspaces", "id") | (_, "workspace_id") => (Some(&self.sender_ws), Some(&self.ws)),
                _ => (None, None),
            };
            if let Some(expected) = expected
                && value.as_str() != Some(expected.as_str())
            {
                return Err(bad(format!("`{name}` is {value}, not the bundle's {expected}")));
            }
            // A row pointing at another row points inside this
            // investigation: ids are shared between appliances, and a
            // forged row must not hang on the receiver's own.
            if let Some((_, parent)) = parents(table).iter().find(|(c, _)| *c == name.as_str())
                && let Some(id) = value.as_str()
            {
                let inside: bool = self
                    .tx
                    .prepare_cached(&format!(
                        "SELECT EXISTS (SELECT 1 FROM {parent} WHERE id = ?1 AND investigation_id = ?2)"
                    ))
                    .and_then(|mut st| st.query_row(params![id, self.inv], |r| r.get(0)))
                    .map_err(StoreError::from)?;
                if !inside {
                    return Err(bad(format!("`{name}` {id} is no {parent} row of the bundle's investigation")));
                }
            }
            names.push(format!("\"{name}\""));
            // A row names the sender's workspace; here it is in `ws`.
            values.push(match placed {
                Some(ws) => rusqlite::types::Value::Text(ws.clone()),
                None => sql_value(value),
            });
        }
        let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
        let sql = format!("INSERT INTO {table} ({}) VALUES ({})", names.join(", "), marks.join(", "));
        self.tx
            .prepare_cached(&sql)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(values)))
            .map_err(|e| bad(format!("not written into {table}: {e}")))?;
        self.rows += 1;
        Ok(())
    }
}

/// The columns of `table` that name a row of `parent` (a table with an
/// `investigation_id`), which must be the bundle's investigation's.
fn parents(table: &str) -> &'static [(&'static str, &'static str)] {
    match table {
        "entity_aliases" => &[("entity_id", "entities")],
        "mentions" => &[("evidence_id", "evidence"), ("entity_id", "entities")],
        "provenance_inputs" | "fetch_provenance" => &[("provenance_id", "provenance")],
        "import_outcomes" => &[("job_id", "jobs"), ("evidence_id", "evidence")],
        "imports" => &[("evidence_id", "evidence"), ("provenance_id", "provenance"), ("job_id", "jobs")],
        "research_requests" => &[("grant_id", "grants")],
        "campaigns" => &[("grant_id", "grants"), ("research_request_id", "research_requests")],
        "campaign_items" => &[("campaign_id", "campaigns"), ("evidence_id", "evidence")],
        _ => &[],
    }
}

/// The columns of `table` (a name of this module's constants).
fn columns_of(conn: &Connection, table: &str) -> Result<HashSet<String>> {
    let mut stmt = conn.prepare_cached(&format!("PRAGMA table_info({table})")).map_err(StoreError::from)?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(1))
        .and_then(|rows| rows.collect::<rusqlite::Result<HashSet<String>>>())
        .map_err(StoreError::from)?;
    Ok(names)
}

/// An exported JSON value as SQLite stores it: JSON columns as their text.
fn sql_value(v: &Value) -> rusqlite::types::Value {
    use rusqlite::types::Value as Sql;
    match v {
        Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Sql::Integer(i),
            None => Sql::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Sql::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => Sql::Text(v.to_string()),
    }
}

/// A private directory under the data directory for one bundle, removed
/// when done.
struct Workdir {
    path: PathBuf,
}

impl Workdir {
    fn new(data_dir: &Path) -> Result<Self> {
        let base = data_dir.join("receiving");
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&base).map_err(io(&base))?;
        // What a receive that was killed left (a day old: another one may
        // be copying now).
        let stale = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
        for e in fs::read_dir(&base).map_err(io(&base))?.flatten() {
            if e.metadata().and_then(|m| m.modified()).is_ok_and(|m| m < stale) {
                let _ = fs::remove_dir_all(e.path());
            }
        }
        let path = base.join(Uuid::now_v7().to_string());
        fs::DirBuilder::new().mode(0o700).create(&path).map_err(io(&path))?;
        Ok(Self { path })
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Copies a bundle — a directory, or a tar file holding one (the UI's
/// download: one top folder) — into `to`. Only plain files and folders are
/// taken; a link, a device or a path leaving the bundle is refused.
fn copy_bundle(from: &Path, to: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(from).map_err(io(from))?;
    if meta.is_dir() {
        copy_dir(from, to)
    } else if meta.is_file() {
        untar(from, to)
    } else {
        Err(BundleError::Manifest(format!("{} is neither a bundle directory nor a tar file", from.display())))
    }
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    fs::DirBuilder::new().mode(0o700).create(to).map_err(io(to))?;
    for entry in fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let t = entry.file_type().map_err(io(&src))?;
        if t.is_dir() {
            copy_dir(&src, &dst)?;
        } else if t.is_file() {
            fs::copy(&src, &dst).map_err(io(&src))?;
        } else {
            return Err(BundleError::Unlisted(format!("{} (not a plain file)", src.display())));
        }
    }
    Ok(())
}

fn untar(from: &Path, to: &Path) -> Result<()> {
    let file = File::open(from).map_err(io(from))?;
    let mut archive = tar::Archive::new(file);
    let tmp = to.with_extension("tar-out");
    fs::DirBuilder::new().mode(0o700).create(&tmp).map_err(io(&tmp))?;
    let bad = |what: String| BundleError::Manifest(format!("{}: {what}", from.display()));
    for entry in archive.entries().map_err(io(from))? {
        let mut entry = entry.map_err(io(from))?;
        let path = entry.path().map_err(io(from))?.into_owned();
        if !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(bad(format!("member `{}` is not a plain relative path", path.display())));
        }
        let dst = tmp.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                fs::DirBuilder::new().recursive(true).mode(0o700).create(&dst).map_err(io(&dst))?;
            }
            tar::EntryType::Regular => {
                if let Some(parent) = dst.parent() {
                    fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(io(parent))?;
                }
                let mut out = File::create_new(&dst).map_err(io(&dst))?;
                std::io::copy(&mut (&mut entry).take(u64::MAX), &mut out).map_err(io(&dst))?;
            }
            other => return Err(bad(format!("member `{}` is a {other:?}, not a file", path.display()))),
        }
    }
    // The bundle is the archive's top, or its one top folder.
    let top = if tmp.join(MANIFEST).is_file() {
        tmp.clone()
    } else {
        let mut dirs = fs::read_dir(&tmp).map_err(io(&tmp))?.filter_map(|e| e.ok()).map(|e| e.path());
        match (dirs.next(), dirs.next()) {
            (Some(d), None) if d.join(MANIFEST).is_file() => d,
            _ => return Err(bad(format!("no {MANIFEST} at its top or in its one top folder"))),
        }
    };
    fs::rename(&top, to).map_err(io(&top))?;
    Ok(())
}
