//! Chain of custody out (SPEC C5): an investigation exported as a
//! self-contained directory that anyone can check offline.
//!
//! ```text
//! BUNDLE/
//!   manifest.json            format, what was exported, every other file with its SHA-256 and size
//!   SHA256SUMS               the same hashes, for `sha256sum -c`
//!   investigation.json       the investigation and its workspace
//!   evidence.jsonl           one item per line (no text); `text` names its file
//!   evidence/<uuid>.txt      the stored text, whose SHA-256 is the item's `sha256` (unless it has
//!                            original bytes)
//!   blobs/<sha256>           an imported item's original bytes (SPEC C2), whose SHA-256 is its `sha256`
//!   imports.jsonl  import_outcomes.jsonl   each file imported, and each import job's outcomes
//!   entities.jsonl  entity_aliases.jsonl  relations.jsonl  mentions.jsonl
//!   provenance.jsonl  provenance_inputs.jsonl  fetch_provenance.jsonl
//!   research_requests.jsonl  grants.jsonl  campaigns.jsonl  campaign_items.jsonl  jobs.jsonl
//!   audit.jsonl              the workspace's audit log
//!   graph.stix.json          the graph as a STIX 2.1 bundle (the OASIS validator passes it)
//!   graph.stix.coverage.json what the STIX graph holds, and where what STIX cannot say lies
//!   egress/grants.jsonl  egress/fetch_log.jsonl   egress's own ledger rows of those grants and its
//!                            fetch log (`labfy export` adds them; the UI's export cannot)
//! ```
//!
//! Every row is exported whole, column by column, as stored (JSON columns as
//! JSON): nothing is summarised, so nothing is lost. The export reads one
//! snapshot (one read transaction). [`verify`] recomputes every hash and
//! every cross-reference from the files alone and names the first thing that
//! does not match; the manifest's own SHA-256 — the bundle's fingerprint —
//! is what an analyst hands over out of band, so a bundle rewritten whole
//! with fresh hashes still fails against it.
//!
//! Every row above is the workspace server's record, and a compromised
//! server can rewrite its own database consistently (a page's body and its
//! hash together). Egress's fetch log is the one record it cannot write
//! (SPEC T2, V4): when the bundle carries it, [`verify`] requires each fetched
//! piece to match a `FETCHED` entry of it, one to one, and names every piece
//! that does not; without it the manifest's `fetched_evidence` says the
//! fetched pieces are the server's word, and [`verify`] reports them as
//! unverifiable against egress ([`FetchedCheck`]).

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use labfy_core::ObjectRef;
use rusqlite::Connection;
use rusqlite::types::ValueRef;
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The format written in `manifest.json`.
pub const BUNDLE_FORMAT: &str = "labfy.bundle.v1";
/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";
/// The `sha256sum -c` file's name.
pub const SHA256SUMS: &str = "SHA256SUMS";
/// Egress's fetch log in a bundle (`labfy export` adds it).
pub const EGRESS_FETCH_LOG: &str = "egress/fetch_log.jsonl";
/// The manifest's field saying whose word the fetched pieces are
/// ([`FetchedEvidence`]).
pub const FETCHED_EVIDENCE: &str = "fetched_evidence";

/// SHA-256 of no bytes: what a fetch without a body is stored with.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
/// How long before the end of a fetch — `started_at` + `elapsed_ms`, as the
/// piece records egress's answer — egress's log may stamp it: both times are
/// cut to the millisecond, and the end is measured on the monotonic clock.
const LOGGED_BEFORE_END_MS: i64 = 2_000;
/// How long after the end of a fetch egress's log may stamp it: egress writes
/// the entry as the fetch ends, before it answers the server.
const LOGGED_AFTER_END_MS: i64 = 60_000;

/// Whose word a bundle's fetched pieces are: the manifest's
/// `fetched_evidence`, written by [`BundleWriter::finish`] from what the
/// bundle holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum FetchedEvidence {
    /// The bundle carries egress's fetch log; [`verify`] checks every
    /// fetched piece against it.
    #[serde(rename = "checked_against_egress_fetch_log")]
    EgressFetchLog,
    /// No egress fetch log (the UI's export, whose server cannot read
    /// egress's ledger; or egress never ran): the fetched pieces are the
    /// workspace server's word, not checked against egress.
    #[serde(rename = "server_word_not_checked_against_egress")]
    ServerWord,
}

/// Why an export or a verification failed.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] crate::StoreError),
    /// The output exists and is not an empty directory.
    #[error("{0} already exists and is not empty; choose a new directory (nothing was written)")]
    Exists(PathBuf),
    /// A file's bytes are not those the manifest lists.
    #[error("{path}: SHA-256 {found}, the manifest says {expected}")]
    HashMismatch {
        /// The file, relative to the bundle.
        path: String,
        /// What the manifest says.
        expected: String,
        /// What the file hashes to.
        found: String,
    },
    /// A file the manifest lists is missing or not a plain file.
    #[error("{path}: listed in the manifest but {what}")]
    Missing {
        /// The file, relative to the bundle.
        path: String,
        /// Missing, a link, a directory…
        what: &'static str,
    },
    /// A file is in the bundle but not in the manifest.
    #[error("{0}: in the bundle but not in the manifest")]
    Unlisted(String),
    /// A row refers to something the bundle does not hold, or contradicts it.
    #[error("{file} line {line}: {detail}")]
    Reference {
        /// The file, relative to the bundle.
        file: String,
        /// 1-based line.
        line: usize,
        /// What does not match.
        detail: String,
    },
    /// Egress's ledger could not be opened.
    #[error("{path}: {message}")]
    Ledger {
        /// Egress's ledger file.
        path: PathBuf,
        /// What SQLite said.
        message: String,
    },
    /// The manifest is unreadable or of another format.
    #[error("manifest.json: {0}")]
    Manifest(String),
    /// Fetched pieces that egress's own fetch log does not back (SPEC V4):
    /// the workspace server altered them, or made them up.
    #[error(
        "{} fetched piece(s) not backed by egress's own fetch log (egress/fetch_log.jsonl): the workspace \
         server's record of them is not what egress fetched: {}",
        .0.len(),
        .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    NotInEgressLog(Vec<Unbacked>),
    /// The manifest is not the one the analyst was given.
    #[error("the bundle's fingerprint is {found}, expected {expected}: the manifest is not the one handed over")]
    Fingerprint {
        /// The fingerprint asked for.
        expected: String,
        /// The manifest's SHA-256.
        found: String,
    },
}

type Result<T> = std::result::Result<T, BundleError>;

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io { path: path.to_path_buf(), source }
}

/// One file of a bundle as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BundleFile {
    /// Path relative to the bundle, `/`-separated.
    pub path: String,
    /// SHA-256, lower-case hex.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct Exported {
    /// The bundle's directory.
    pub dir: PathBuf,
    /// SHA-256 of `manifest.json`: hand it over with the bundle.
    pub fingerprint: String,
    /// Rows per exported file.
    pub rows: Vec<(String, u64)>,
    /// Files listed in the manifest.
    pub files: usize,
    /// Bytes of those files.
    pub bytes: u64,
}

/// What a verification checked.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// SHA-256 of `manifest.json`.
    pub fingerprint: String,
    /// Files whose hash was recomputed.
    pub files: usize,
    /// Bytes hashed.
    pub bytes: u64,
    /// Rows whose references were checked.
    pub rows: u64,
    /// The investigation.
    pub investigation: String,
    /// The fetched pieces against egress's own fetch log: matched, or
    /// unverifiable when the bundle holds none (never "verified" then).
    pub fetched: FetchedCheck,
}

/// A fetched piece that egress's fetch log does not back, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unbacked {
    /// The piece: `evidence:<uuid>`, as its provenance names it.
    pub piece: String,
    /// Its line in `fetch_provenance.jsonl` (1-based).
    pub line: usize,
    /// The URL it says was fetched.
    pub url: String,
    /// What differs from egress's log.
    pub differs: String,
}

impl std::fmt::Display for Unbacked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, fetch_provenance.jsonl line {}): {}", self.piece, self.url, self.line, self.differs)
    }
}

/// How a bundle's fetched pieces stand against egress's own fetch log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "against_egress", rename_all = "snake_case")]
pub enum FetchedCheck {
    /// The bundle carries egress's fetch log and every fetched piece matched
    /// a `FETCHED` entry of it of its own (URL, final URL, HTTP status,
    /// SHA-256, size, campaign and grant; logged as the fetch ended).
    Matched {
        /// Fetched pieces checked.
        pieces: u64,
        /// `FETCHED` entries of the log that no piece holds (a page the
        /// store refused, or one the server left out).
        unclaimed: u64,
    },
    /// The bundle holds no egress fetch log: these fetched pieces are the
    /// workspace server's word, unverifiable against egress.
    Unverifiable {
        /// Fetched pieces not checked.
        pieces: u64,
    },
}

impl FetchedCheck {
    /// The fetched pieces of the bundle.
    pub fn pieces(&self) -> u64 {
        match *self {
            FetchedCheck::Matched { pieces, .. } | FetchedCheck::Unverifiable { pieces } => pieces,
        }
    }

    /// The fetched pieces that could not be checked against egress.
    pub fn unverifiable(&self) -> u64 {
        match *self {
            FetchedCheck::Matched { .. } => 0,
            FetchedCheck::Unverifiable { pieces } => pieces,
        }
    }
}

/// A writer that hashes what goes through it.
struct Hashed {
    out: BufWriter<File>,
    hash: Sha256,
    bytes: u64,
}

impl Write for Hashed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes a bundle's files, remembering each one's hash for the manifest.
pub struct BundleWriter {
    dir: PathBuf,
    files: Vec<BundleFile>,
    rows: Vec<(String, u64)>,
}

impl BundleWriter {
    /// Creates the bundle directory (mode 0700); it must not exist, or be an
    /// empty directory.
    pub fn create(dir: &Path) -> Result<Self> {
        match fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(BundleError::Exists(dir.to_path_buf()));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::DirBuilder::new().mode(0o700).create(dir).map_err(io(dir))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(BundleError::Exists(dir.to_path_buf()));
            }
            Err(e) => return Err(BundleError::Io { path: dir.to_path_buf(), source: e }),
        }
        Ok(Self { dir: dir.to_path_buf(), files: Vec::new(), rows: Vec::new() })
    }

    fn open(&self, rel: &str) -> Result<Hashed> {
        let path = self.dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(io(parent))?;
        }
        let file = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(io(&path))?;
        Ok(Hashed { out: BufWriter::with_capacity(64 * 1024, file), hash: Sha256::new(), bytes: 0 })
    }

    fn close(&mut self, rel: &str, mut w: Hashed) -> Result<()> {
        let path = self.dir.join(rel);
        w.out.flush().map_err(io(&path))?;
        // No fsync per file (a journal commit each: 100,000 evidence files
        // would take minutes); the caller syncs the file system once the
        // manifest is written (`labfy export` calls syncfs).
        drop(w.out.into_inner().map_err(|e| BundleError::Io { path: path.clone(), source: e.into_error() })?);
        self.files.push(BundleFile { path: rel.to_owned(), sha256: hex::encode(w.hash.finalize()), bytes: w.bytes });
        Ok(())
    }

    /// Adds a file with these bytes.
    pub fn add_file(&mut self, rel: &str, bytes: &[u8]) -> Result<()> {
        check_rel(rel)?;
        let mut w = self.open(rel)?;
        w.write_all(bytes).map_err(io(&self.dir.join(rel)))?;
        self.close(rel, w)
    }

    /// Adds a JSON Lines file of the rows `sql` returns, streamed.
    fn add_query(&mut self, rel: &str, conn: &Connection, table: &str, sql: &str, args: &[&str]) -> Result<u64> {
        let path = self.dir.join(rel);
        let mut w = self.open(rel)?;
        let n = each_row(conn, table, sql, args, &[], |row| write_line(&mut w, &path, &Value::Object(row)))?;
        self.close(rel, w)?;
        self.rows.push((rel.to_owned(), n));
        Ok(n)
    }

    /// Adds a JSON Lines file, one line per value.
    pub fn add_jsonl(&mut self, rel: &str, rows: impl IntoIterator<Item = Value>) -> Result<u64> {
        check_rel(rel)?;
        let path = self.dir.join(rel);
        let mut w = self.open(rel)?;
        let mut n = 0;
        for row in rows {
            serde_json::to_writer(&mut w, &row)
                .map_err(|e| BundleError::Io { path: path.clone(), source: e.into() })?;
            w.write_all(b"\n").map_err(io(&path))?;
            n += 1;
        }
        self.close(rel, w)?;
        self.rows.push((rel.to_owned(), n));
        Ok(n)
    }

    /// Writes `SHA256SUMS` and `manifest.json` (with `header`'s fields and
    /// the file list) and returns the bundle's fingerprint. The files are
    /// written, not yet synced: the caller makes them durable at once (one
    /// `syncfs` rather than a journal commit per file).
    pub fn finish(mut self, header: Map<String, Value>) -> Result<Exported> {
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        let sums: String = self.files.iter().map(|f| format!("{}  {}\n", f.sha256, f.path)).collect();
        self.add_file(SHA256SUMS, sums.as_bytes())?;
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut manifest = header;
        // Said from what the bundle holds, whoever calls.
        let fetched = if self.files.iter().any(|f| f.path == EGRESS_FETCH_LOG) {
            FetchedEvidence::EgressFetchLog
        } else {
            FetchedEvidence::ServerWord
        };
        manifest.insert(FETCHED_EVIDENCE.into(), json!(fetched));
        manifest.insert("format".into(), json!(BUNDLE_FORMAT));
        manifest.insert("rows".into(), json!(self.rows.iter().cloned().collect::<HashMap<_, _>>()));
        manifest.insert("files".into(), json!(self.files));
        let mut text = serde_json::to_vec_pretty(&Value::Object(manifest))
            .map_err(|e| BundleError::Manifest(format!("cannot serialise: {e}")))?;
        text.push(b'\n');
        let path = self.dir.join(MANIFEST);
        let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(io(&path))?;
        f.write_all(&text).map_err(io(&path))?;
        let bytes = self.files.iter().map(|f| f.bytes).sum::<u64>() + text.len() as u64;
        Ok(Exported {
            dir: self.dir,
            fingerprint: hex::encode(Sha256::digest(&text)),
            rows: self.rows,
            files: self.files.len(),
            bytes,
        })
    }
}

/// Writes one whole file of a bundle and returns its entry.
fn write_whole(dir: &Path, rel: &str, bytes: &[u8]) -> Result<BundleFile> {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(io(parent))?;
    }
    let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(io(&path))?;
    f.write_all(bytes).map_err(io(&path))?;
    Ok(BundleFile { path: rel.to_owned(), sha256: hex::encode(Sha256::digest(bytes)), bytes: bytes.len() as u64 })
}

fn write_line(w: &mut impl Write, path: &Path, row: &Value) -> Result<()> {
    serde_json::to_writer(&mut *w, row).map_err(|e| BundleError::Io { path: path.to_path_buf(), source: e.into() })?;
    w.write_all(b"\n").map_err(io(path))
}

/// A bundle path: relative, `/`-separated, no `.`/`..`, no control character.
pub(crate) fn check_rel(rel: &str) -> Result<()> {
    let ok = !rel.is_empty()
        && !rel.starts_with('/')
        && rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        && !rel.chars().any(char::is_control)
        && rel != MANIFEST;
    if ok { Ok(()) } else { Err(BundleError::Manifest(format!("`{rel}` is not a bundle path"))) }
}

/// Columns stored as JSON text, per table: exported as JSON values.
fn json_columns(table: &str) -> &'static [&'static str] {
    match table {
        "entities" => &["attributes"],
        "grants" => &["scope", "budget", "contract_fingerprints"],
        "research_requests" => &["selection", "exclusions"],
        "fetch_provenance" => &["redirects", "headers"],
        "jobs" => &["stats"],
        "audit_log" => &["detail"],
        _ => &[],
    }
}

/// Egress's ledger rows for the grants the bundle holds (`egress/…`): its
/// own decisions and its fetch log, which the server cannot write (SPEC T2).
/// `ledger` is egress's SQLite file, opened read-only; without one nothing is
/// added. The grants are those of `grants.jsonl`, already written.
pub fn add_egress_ledger(w: &mut BundleWriter, ledger: &Path) -> Result<()> {
    if !ledger.exists() {
        return Ok(());
    }
    let bad = |e: rusqlite::Error| BundleError::Ledger { path: ledger.to_path_buf(), message: e.to_string() };
    let conn = Connection::open_with_flags(ledger, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(bad)?;
    // SQLite reads the file at the first statement: a file that is not
    // egress's ledger is named as such, not as the workspace's database.
    conn.query_row("SELECT count(*) FROM grants JOIN fetch_log ON 0", [], |_| Ok(())).map_err(bad)?;
    let written = w.dir.join("grants.jsonl");
    let grants: Vec<String> = fs::read_to_string(&written)
        .map_err(|source| BundleError::Io { path: written, source })?
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["id"].as_str().map(|id| format!("grant:{id}")))
        .collect();
    let ids = serde_json::to_string(&grants).unwrap_or_else(|_| "[]".into());
    let q = |sql: &str| rows(&conn, "", sql, &[&ids], &[]);
    let g = q("SELECT * FROM grants WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY proposed_at, id")?;
    let log = q("SELECT * FROM fetch_log WHERE grant_id IN (SELECT value FROM json_each(?1)) ORDER BY seq")?;
    w.add_jsonl("egress/grants.jsonl", g)?;
    w.add_jsonl("egress/fetch_log.jsonl", log)?;
    Ok(())
}

/// Runs `sql` and turns each row into a JSON object of all its columns but
/// `skip`, passed to `f` one at a time (nothing is held in memory).
fn each_row(
    conn: &Connection,
    table: &str,
    sql: &str,
    args: &[&str],
    skip: &[&str],
    mut f: impl FnMut(Map<String, Value>) -> Result<()>,
) -> Result<u64> {
    let mut stmt = conn.prepare(sql).map_err(crate::StoreError::from)?;
    let names: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let json_cols = json_columns(table);
    let mut q = stmt.query(rusqlite::params_from_iter(args)).map_err(crate::StoreError::from)?;
    let mut n = 0;
    while let Some(r) = q.next().map_err(crate::StoreError::from)? {
        let mut obj = Map::new();
        for (i, name) in names.iter().enumerate() {
            if skip.contains(&name.as_str()) {
                continue;
            }
            let v = match r.get_ref(i).map_err(crate::StoreError::from)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(x) => json!(x),
                ValueRef::Text(t) => {
                    let s = String::from_utf8_lossy(t).into_owned();
                    if json_cols.contains(&name.as_str()) {
                        serde_json::from_str(&s).unwrap_or(Value::String(s))
                    } else {
                        Value::String(s)
                    }
                }
                ValueRef::Blob(b) => json!(hex::encode(b)),
            };
            obj.insert(name.clone(), v);
        }
        f(obj)?;
        n += 1;
    }
    Ok(n)
}

fn rows(conn: &Connection, table: &str, sql: &str, args: &[&str], skip: &[&str]) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    each_row(conn, table, sql, args, skip, |o| {
        out.push(Value::Object(o));
        Ok(())
    })?;
    Ok(out)
}

/// Exports investigation `inv` (of workspace `ws`) into `w` from one read
/// snapshot of `conn`; the caller may add files, then [`BundleWriter::finish`].
pub(crate) fn export(
    conn: &Connection,
    blobs: &crate::blobs::BlobStore,
    ws: uuid::Uuid,
    inv: &ObjectRef,
    w: &mut BundleWriter,
) -> Result<()> {
    let inv_id = inv.id().to_string();
    let ws_id = ws.to_string();
    conn.execute_batch("BEGIN").map_err(crate::StoreError::from)?;
    let out = export_snapshot(conn, blobs, &ws_id, &inv_id, w);
    let _ = conn.execute_batch("COMMIT");
    out
}

fn export_snapshot(
    conn: &Connection,
    blobs: &crate::blobs::BlobStore,
    ws: &str,
    inv: &str,
    w: &mut BundleWriter,
) -> Result<()> {
    let a = [inv];
    let investigation = rows(conn, "investigations", "SELECT * FROM investigations WHERE id = ?1", &a, &[])?;
    let workspace = rows(conn, "workspaces", "SELECT * FROM workspaces WHERE id = ?1", &[ws], &[])?;
    let head = json!({"investigation": investigation.first(), "workspace": workspace.first()});
    let mut text = serde_json::to_vec_pretty(&head).map_err(|e| BundleError::Manifest(e.to_string()))?;
    text.push(b'\n');
    w.add_file("investigation.json", &text)?;

    // Evidence: the row without its text, which goes to a file of its own.
    let rel = "evidence.jsonl";
    let path = w.dir.join(rel);
    let mut lines = w.open(rel)?;
    let mut texts = Vec::new();
    let mut originals = std::collections::BTreeSet::new();
    let dir = w.dir.clone();
    let n = each_row(
        conn,
        "evidence",
        "SELECT * FROM evidence WHERE investigation_id = ?1 ORDER BY seq",
        &a,
        &[],
        |mut ev| {
            let id = ev.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let content = match ev.remove("content") {
                Some(Value::String(c)) => c,
                _ => String::new(),
            };
            let text = format!("evidence/{id}.txt");
            texts.push(write_whole(&dir, &text, content.as_bytes())?);
            ev.insert("text".into(), json!(text));
            if let Some(sha) = ev.get("blob_sha256").and_then(Value::as_str).map(str::to_owned) {
                ev.insert("original".into(), json!(format!("blobs/{sha}")));
                originals.insert(sha);
            }
            write_line(&mut lines, &path, &Value::Object(ev))
        },
    )?;
    w.close(rel, lines)?;
    w.files.extend(texts);
    w.rows.push((rel.to_owned(), n));
    // The original bytes of imported items, each blob once.
    for sha in originals {
        let src = blobs.path(&sha);
        let mut from = File::open(&src).map_err(io(&src))?;
        let rel = format!("blobs/{sha}");
        let mut to = w.open(&rel)?;
        std::io::copy(&mut from, &mut to).map_err(io(&src))?;
        w.close(&rel, to)?;
    }

    let by_inv =
        |table: &str, order: &str| format!("SELECT * FROM {table} WHERE investigation_id = ?1 ORDER BY {order}");
    for (table, file, order) in [
        ("entities", "entities.jsonl", "id"),
        ("entity_aliases", "entity_aliases.jsonl", "kind, name"),
        ("relations", "relations.jsonl", "id"),
        ("provenance", "provenance.jsonl", "id"),
        ("research_requests", "research_requests.jsonl", "created_at, id"),
        ("grants", "grants.jsonl", "decided_at, id"),
        ("campaigns", "campaigns.jsonl", "created_at, id"),
        ("jobs", "jobs.jsonl", "created_at, id"),
        ("imports", "imports.jsonl", "imported_at, provenance_id"),
    ] {
        w.add_query(file, conn, table, &by_inv(table, order), &a)?;
    }
    for (table, file, sql) in [
        (
            "mentions",
            "mentions.jsonl",
            "SELECT m.* FROM mentions m JOIN evidence e ON e.id = m.evidence_id WHERE e.investigation_id = ?1
             ORDER BY e.seq, m.start, m.entity_id",
        ),
        (
            "import_outcomes",
            "import_outcomes.jsonl",
            "SELECT o.* FROM import_outcomes o JOIN jobs j ON j.id = o.job_id WHERE j.investigation_id = ?1
             ORDER BY o.job_id, o.position",
        ),
        (
            "provenance_inputs",
            "provenance_inputs.jsonl",
            "SELECT i.* FROM provenance_inputs i JOIN provenance p ON p.id = i.provenance_id
             WHERE p.investigation_id = ?1 ORDER BY i.provenance_id, i.position",
        ),
        (
            "fetch_provenance",
            "fetch_provenance.jsonl",
            "SELECT f.* FROM fetch_provenance f JOIN provenance p ON p.id = f.provenance_id
             WHERE p.investigation_id = ?1 ORDER BY f.campaign_id, f.position",
        ),
        (
            "campaign_items",
            "campaign_items.jsonl",
            "SELECT i.* FROM campaign_items i JOIN campaigns c ON c.id = i.campaign_id
             WHERE c.investigation_id = ?1 ORDER BY i.campaign_id, i.position",
        ),
    ] {
        w.add_query(file, conn, table, sql, &a)?;
    }
    w.add_query(
        "audit.jsonl",
        conn,
        "audit_log",
        "SELECT * FROM audit_log WHERE workspace_id = ?1 ORDER BY seq",
        &[ws],
    )?;
    stix(conn, inv, w)
}

/// OpenCTI's extension for the observables STIX 2.1 lacks (bank accounts,
/// phone numbers, cryptocurrency wallets): OpenCTI reads these types under
/// it (SPEC I3).
const OPENCTI_NEW_SCO: &str = "extension-definition--f93e2c80-4231-4f9a-af8b-95c9bd566a82";

/// STIX's namespace for the UUIDv5 of cyber-observables (STIX 2.1, 2.9).
const STIX_SCO_NAMESPACE: uuid::Uuid = uuid::uuid!("00abedb4-aa42-466c-9c01-fed23315a9b7");

/// The file where the bundle says what its STIX graph holds and what STIX
/// cannot say (SPEC I3: nothing left out silently).
pub const STIX_COVERAGE: &str = "graph.stix.coverage.json";

/// STIX 2.1 type of an entity kind: a cyber-observable (`value`, `iban`,
/// `hashes`), an identity, or a Labfy custom object for what neither STIX
/// nor OpenCTI models (a location with a name only).
fn stix_type(kind: &str) -> &'static str {
    match kind {
        "domain" | "onion" => "domain-name",
        "url" => "url",
        "email" => "email-addr",
        "ipv4" => "ipv4-addr",
        "ipv6" => "ipv6-addr",
        "file_hash" => "file",
        "person" | "organisation" => "identity",
        "iban" => "bank-account",
        "phone" => "phone-number",
        "btc_address" | "eth_address" => "cryptocurrency-wallet",
        _ => "x-labfy-selector",
    }
}

/// An observable's id: UUIDv5 of its id-contributing properties in STIX's
/// namespace, as the specification asks (the same value, the same id, in
/// any tool).
fn sco_id(t: &str, contributing: &Value) -> String {
    let canonical = labfy_core::json::canonical(contributing);
    format!("{t}--{}", uuid::Uuid::new_v5(&STIX_SCO_NAMESPACE, canonical.as_bytes()))
}

/// A domain or relationship object's id: a version-4 UUID drawn from the
/// object's Labfy reference, so one export and the next name it alike.
fn sdo_id(t: &str, labfy_ref: &str) -> String {
    let digest = Sha256::digest(format!("labfy-stix:{labfy_ref}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    format!("{t}--{}", uuid::Builder::from_random_bytes(bytes).into_uuid())
}

/// A timestamp as STIX writes it: UTC, to the millisecond
/// (`2026-01-05T08:00:00.000Z`).
fn stix_time(t: &str) -> String {
    let Some(body) = t.strip_suffix('Z') else { return t.to_owned() };
    let (whole, fraction) = body.split_once('.').unwrap_or((body, ""));
    let mut ms: String = fraction.chars().take_while(char::is_ascii_digit).take(3).collect();
    while ms.len() < 3 {
        ms.push('0');
    }
    format!("{whole}.{ms}Z")
}

fn stix_entity(id: &str, kind: &str, name: &str, created: &str) -> Value {
    let t = stix_type(kind);
    let labfy_ref = format!("entity:{id}");
    let created = stix_time(created);
    let opencti = json!({ OPENCTI_NEW_SCO: {"extension_type": "new-sco"} });
    match t {
        "identity" => json!({
            "type": t, "spec_version": "2.1", "id": sdo_id(t, &labfy_ref), "created": created, "modified": created,
            "name": name, "identity_class": if kind == "person" { "individual" } else { "organization" },
            "x_labfy_ref": labfy_ref,
        }),
        "file" => {
            let algo = match name.len() {
                32 => "MD5",
                40 => "SHA-1",
                _ => "SHA-256",
            };
            let hashes = json!({ algo: name });
            json!({"type": t, "spec_version": "2.1", "id": sco_id(t, &json!({"hashes": hashes})), "hashes": hashes,
                   "x_labfy_ref": labfy_ref})
        }
        "bank-account" => json!({
            "type": t, "spec_version": "2.1", "id": sco_id(t, &json!({"iban": name})), "iban": name,
            "extensions": opencti, "x_labfy_ref": labfy_ref,
        }),
        "phone-number" | "cryptocurrency-wallet" => json!({
            "type": t, "spec_version": "2.1", "id": sco_id(t, &json!({"value": name})), "value": name,
            "extensions": opencti, "x_labfy_ref": labfy_ref,
        }),
        "x-labfy-selector" => json!({
            "type": t, "spec_version": "2.1", "id": sdo_id(t, &labfy_ref), "created": created, "modified": created,
            "x_labfy_kind": kind, "name": name, "x_labfy_ref": labfy_ref,
        }),
        _ => json!({"type": t, "spec_version": "2.1", "id": sco_id(t, &json!({"value": name})), "value": name,
                    "x_labfy_ref": labfy_ref}),
    }
}

/// `graph.stix.json`: evidence as `file` objects (title, SHA-256, size, media
/// type), entities by kind, relations as `relationship` objects whose ends
/// are in the bundle, each object with its Labfy reference
/// (`x_labfy_ref`). Streamed, one object at a time. Then
/// [`STIX_COVERAGE`]: how many objects of each type, the relations left
/// out and why, and where in the bundle lies what STIX cannot say.
fn stix(conn: &Connection, inv: &str, w: &mut BundleWriter) -> Result<()> {
    let rel = "graph.stix.json";
    let path = w.dir.join(rel);
    let mut out = w.open(rel)?;
    let mut first = true;
    let mut counts: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let mut put = |out: &mut Hashed, o: &Value| -> Result<()> {
        out.write_all(if first { b"\n" } else { b",\n" }).map_err(io(&path))?;
        first = false;
        *counts.entry(o["type"].as_str().unwrap_or_default().to_owned()).or_default() += 1;
        serde_json::to_writer(&mut *out, o).map_err(|e| BundleError::Io { path: path.clone(), source: e.into() })
    };
    write!(out, "{{\"type\":\"bundle\",\"id\":\"{}\",\"objects\":[", sdo_id("bundle", inv)).map_err(io(&path))?;
    let mut ids: HashMap<String, String> = HashMap::new();
    each_row(
        conn,
        "evidence",
        "SELECT id, title, sha256, byte_len, mime FROM evidence WHERE investigation_id = ?1 ORDER BY seq",
        &[inv],
        &[],
        |e| {
            let labfy_ref = format!("evidence:{}", e["id"].as_str().unwrap_or_default());
            let hashes = json!({"SHA-256": e["sha256"]});
            let sid = sco_id("file", &json!({"hashes": hashes, "name": e["title"]}));
            ids.insert(labfy_ref.clone(), sid.clone());
            put(
                &mut out,
                &json!({"type": "file", "spec_version": "2.1", "id": sid, "name": e["title"],
                        "hashes": hashes, "size": e["byte_len"], "mime_type": e["mime"], "x_labfy_ref": labfy_ref}),
            )
        },
    )?;
    each_row(
        conn,
        "",
        "SELECT id, kind, name, created_at FROM entities WHERE investigation_id = ?1 ORDER BY id",
        &[inv],
        &[],
        |e| {
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
            let o = stix_entity(text("id"), text("kind"), text("name"), text("created_at"));
            ids.insert(format!("entity:{}", text("id")), o["id"].as_str().unwrap_or_default().to_owned());
            put(&mut out, &o)
        },
    )?;
    let mut left_out = 0u64;
    each_row(
        conn,
        "",
        "SELECT id, kind, src, dst, confidence, created_at FROM relations WHERE investigation_id = ?1 ORDER BY id",
        &[inv],
        &[],
        |r| {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
            let (Some(s), Some(d)) = (ids.get(text("src")), ids.get(text("dst"))) else {
                left_out += 1;
                return Ok(());
            };
            let confidence = r.get("confidence").and_then(Value::as_f64).unwrap_or(1.0);
            let created = stix_time(text("created_at"));
            put(
                &mut out,
                &json!({
                    "type": "relationship", "spec_version": "2.1",
                    "id": sdo_id("relationship", &format!("relation:{}", text("id"))),
                    "created": created, "modified": created,
                    "relationship_type": text("kind").replace('_', "-"),
                    "source_ref": s, "target_ref": d, "confidence": (confidence * 100.0).round() as i64,
                    "x_labfy_ref": format!("relation:{}", text("id")),
                }),
            )
        },
    )?;
    out.write_all(b"\n]}\n").map_err(io(&path))?;
    w.close(rel, out)?;
    let coverage = json!({
        "graph": rel,
        "objects": counts,
        "relations_left_out": {
            "count": left_out,
            "why": "an end of the relation is neither an evidence item nor an entity of the investigation",
        },
        "identifiers": "observables: UUIDv5 of their value in STIX's namespace; other objects: a UUID drawn from \
                        their Labfy reference, which each object carries as `x_labfy_ref`",
        "opencti": format!("bank accounts, phone numbers and cryptocurrency wallets as OpenCTI's observables \
                            (`bank-account`, `phone-number`, `cryptocurrency-wallet`, extension {OPENCTI_NEW_SCO})"),
        "not_in_stix": {
            "evidence text": "evidence/<id>.txt, evidence.jsonl",
            "originals": "blobs/<sha256>",
            "mentions (offset, length, rule)": "mentions.jsonl",
            "provenance": "provenance.jsonl, provenance_inputs.jsonl",
            "fetches through Tor": "fetch_provenance.jsonl, campaigns.jsonl, campaign_items.jsonl, grants.jsonl",
            "imports": "imports.jsonl, import_outcomes.jsonl",
            "aliases": "entity_aliases.jsonl",
            "audit": "audit.jsonl",
            "locations (a name without coordinates or country)": "x-labfy-selector objects",
        },
    });
    let mut text = serde_json::to_vec_pretty(&coverage).map_err(|e| BundleError::Manifest(e.to_string()))?;
    text.push(b'\n');
    w.add_file(STIX_COVERAGE, &text)
}

fn sha256_file(path: &Path) -> Result<(String, u64)> {
    let mut f = File::open(path).map_err(io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(io(path))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex::encode(h.finalize()), n))
}

/// Every plain file under `dir`, as bundle paths; a link or anything else
/// that is not a file or directory is an error.
fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
        let t = entry.file_type().map_err(io(&path))?;
        if t.is_dir() {
            walk(root, &path, out)?;
        } else if t.is_file() {
            out.push(rel);
        } else {
            return Err(BundleError::Unlisted(format!("{rel} (not a plain file)")));
        }
    }
    Ok(())
}

/// Reads a JSON Lines file of the bundle, calling `f` with each line number
/// (1-based) and object.
pub(crate) fn each_line(
    dir: &Path,
    rel: &str,
    mut f: impl FnMut(usize, &Map<String, Value>) -> Result<()>,
) -> Result<u64> {
    let path = dir.join(rel);
    let reader = BufReader::new(File::open(&path).map_err(io(&path))?);
    let mut n = 0;
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(io(&path))?;
        let v: Value = serde_json::from_str(&line).map_err(|e| BundleError::Reference {
            file: rel.into(),
            line: i + 1,
            detail: format!("not JSON: {e}"),
        })?;
        let Value::Object(obj) = v else {
            return Err(BundleError::Reference { file: rel.into(), line: i + 1, detail: "not a JSON object".into() });
        };
        f(i + 1, &obj)?;
        n += 1;
    }
    Ok(n)
}

fn field<'a>(file: &str, line: usize, o: &'a Map<String, Value>, name: &str) -> Result<&'a str> {
    o.get(name).and_then(Value::as_str).ok_or_else(|| BundleError::Reference {
        file: file.into(),
        line,
        detail: format!("no `{name}`"),
    })
}

fn int(file: &str, line: usize, o: &Map<String, Value>, name: &str) -> Result<i64> {
    o.get(name).and_then(Value::as_i64).ok_or_else(|| BundleError::Reference {
        file: file.into(),
        line,
        detail: format!("no integer `{name}`"),
    })
}

/// Checks a bundle offline: the manifest's format; every listed file's size
/// and SHA-256; no file unlisted; each evidence item's text hashing to its
/// `sha256`; every relation, mention, provenance record and fetch pointing at
/// rows the bundle holds; the STIX graph's relationships at its objects; and,
/// when `fingerprint` is given, the manifest being that one. Stops at the
/// first thing that does not match and names it.
///
/// Then the fetched pieces against egress's own fetch log (SPEC V4): when the
/// bundle carries it, each piece must match a `FETCHED` entry of its own —
/// same grant, campaign, URL, final URL, HTTP status, SHA-256 and size, and
/// stamped as the piece's fetch ended (from [`LOGGED_BEFORE_END_MS`] before
/// `started_at` + `elapsed_ms` to [`LOGGED_AFTER_END_MS`] after) — or the
/// error names every piece that does not and what differs. Without the log
/// the pieces are [`FetchedCheck::Unverifiable`], and the manifest must say
/// so.
pub fn verify(dir: &Path, fingerprint: Option<&str>) -> Result<Verified> {
    let manifest_path = dir.join(MANIFEST);
    let text = fs::read(&manifest_path).map_err(io(&manifest_path))?;
    let found = hex::encode(Sha256::digest(&text));
    if let Some(expected) = fingerprint {
        if !expected.eq_ignore_ascii_case(&found) {
            return Err(BundleError::Fingerprint { expected: expected.to_owned(), found });
        }
    }
    let manifest: Value = serde_json::from_slice(&text).map_err(|e| BundleError::Manifest(format!("not JSON: {e}")))?;
    if manifest["format"] != BUNDLE_FORMAT {
        return Err(BundleError::Manifest(format!("format {} is not {BUNDLE_FORMAT}", manifest["format"])));
    }
    let files: Vec<BundleFile> = serde_json::from_value(manifest["files"].clone())
        .map_err(|e| BundleError::Manifest(format!("`files`: {e}")))?;
    let mut listed = HashMap::new();
    for f in &files {
        check_rel(&f.path)?;
        listed.insert(f.path.clone(), f.sha256.clone());
    }
    // Every file present is listed…
    let mut present = Vec::new();
    walk(dir, dir, &mut present)?;
    present.sort();
    for p in &present {
        if p != MANIFEST && !listed.contains_key(p) {
            return Err(BundleError::Unlisted(p.clone()));
        }
    }
    // …and every listed file is there with its bytes.
    let mut bytes = 0;
    for f in &files {
        let path = dir.join(&f.path);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => {}
            Ok(_) => return Err(BundleError::Missing { path: f.path.clone(), what: "not a plain file" }),
            Err(_) => return Err(BundleError::Missing { path: f.path.clone(), what: "missing" }),
        }
        let (sha, n) = sha256_file(&path)?;
        if sha != f.sha256 || n != f.bytes {
            return Err(BundleError::HashMismatch { path: f.path.clone(), expected: f.sha256.clone(), found: sha });
        }
        bytes += n;
    }
    let refs = check_references(dir, &listed, &manifest)?;
    let fetched = match refs.egress_log {
        Some(log) => against_egress(&refs.fetches, &log)?,
        None => FetchedCheck::Unverifiable { pieces: refs.fetches.len() as u64 },
    };
    let investigation = manifest["investigation"].as_str().unwrap_or_default().to_owned();
    Ok(Verified { fingerprint: found, files: files.len(), bytes, rows: refs.rows, investigation, fetched })
}

/// A fetched piece as the server recorded it (`fetch_provenance.jsonl`).
struct Fetch {
    line: usize,
    piece: String,
    grant: String,
    campaign: String,
    url: String,
    final_url: String,
    http_status: i64,
    sha256: String,
    bytes: i64,
    started_at: String,
    elapsed_ms: i64,
}

type Time = chrono::DateTime<chrono::FixedOffset>;

impl Fetch {
    /// When the fetch ended, by its own record.
    fn end(&self) -> Option<Time> {
        chrono::DateTime::parse_from_rfc3339(&self.started_at)
            .ok()
            .and_then(|t| t.checked_add_signed(chrono::TimeDelta::milliseconds(self.elapsed_ms)))
    }

    /// The grant, campaign and URL egress's log names a fetch by.
    fn key(&self) -> (&str, &str, &str) {
        (&self.grant, &self.campaign, &self.url)
    }
}

/// A `FETCHED` entry of egress's fetch log (`egress/fetch_log.jsonl`).
struct Logged {
    line: usize,
    at: String,
    at_time: Option<Time>,
    grant: String,
    campaign: String,
    url: String,
    final_url: String,
    http_status: Option<i64>,
    sha256: String,
    bytes: i64,
}

impl Logged {
    /// What differs between this entry and `p`, besides the time; empty when
    /// nothing does.
    fn differences(&self, p: &Fetch) -> Vec<String> {
        let mut out = Vec::new();
        if self.final_url != p.final_url {
            out.push(format!("final URL {} here, {} in egress's log", p.final_url, self.final_url));
        }
        if self.http_status != Some(p.http_status) {
            let logged = self.http_status.map_or_else(|| "none".to_owned(), |s| s.to_string());
            out.push(format!("HTTP status {} here, {logged} in egress's log", p.http_status));
        }
        if self.sha256 != p.sha256 {
            out.push(format!("SHA-256 {} here, {} in egress's log", p.sha256, self.sha256));
        }
        if self.bytes != p.bytes {
            out.push(format!("{} bytes here, {} in egress's log", p.bytes, self.bytes));
        }
        out
    }

    /// Milliseconds from the end of a fetch (`end`) to this entry's stamp.
    fn after(&self, end: Option<Time>) -> Option<i64> {
        Some((self.at_time? - end?).num_milliseconds())
    }

    /// Whether the entry was stamped as a fetch ending at `end` ended.
    fn stamped_at_end(&self, end: Option<Time>) -> bool {
        self.after(end).is_some_and(|ms| (-LOGGED_BEFORE_END_MS..=LOGGED_AFTER_END_MS).contains(&ms))
    }
}

/// Matches each fetched piece with a `FETCHED` entry of egress's log of its
/// own (the one stamped nearest its end when several fit); names every piece
/// none backs.
fn against_egress(fetches: &[Fetch], log: &[Logged]) -> Result<FetchedCheck> {
    let mut by_url: HashMap<(&str, &str, &str), Vec<usize>> = HashMap::new();
    for (i, e) in log.iter().enumerate() {
        by_url.entry((&e.grant, &e.campaign, &e.url)).or_default().push(i);
    }
    let mut claimed = vec![false; log.len()];
    let mut unbacked = Vec::new();
    for p in fetches {
        let end = p.end();
        let same_url = by_url.get(&p.key()).map(Vec::as_slice).unwrap_or_default();
        let distance = |i: usize| log[i].after(end).map_or(u64::MAX, i64::unsigned_abs);
        let found = same_url
            .iter()
            .copied()
            .filter(|&i| !claimed[i] && log[i].differences(p).is_empty() && log[i].stamped_at_end(end))
            .min_by_key(|&i| distance(i));
        if let Some(i) = found {
            claimed[i] = true;
            continue;
        }
        // None fits: say why against the nearest entry of the same URL.
        let nearest = same_url.iter().copied().min_by_key(|&i| (claimed[i], log[i].differences(p).len(), distance(i)));
        let differs = match nearest {
            None => format!("egress's log holds no FETCHED entry of this URL under {} of {}", p.campaign, p.grant),
            Some(i) => {
                let e = &log[i];
                let mut d = e.differences(p);
                if !e.stamped_at_end(end) {
                    d.push(format!(
                        "started {} and took {} ms here, egress logged it at {}",
                        p.started_at, p.elapsed_ms, e.at
                    ));
                }
                if d.is_empty() {
                    format!("egress's log entry of it (line {}) is claimed by another piece", e.line)
                } else {
                    format!("{} (egress's log, line {})", d.join(", "), e.line)
                }
            }
        };
        unbacked.push(Unbacked { piece: p.piece.clone(), line: p.line, url: p.url.clone(), differs });
    }
    if !unbacked.is_empty() {
        return Err(BundleError::NotInEgressLog(unbacked));
    }
    let unclaimed = claimed.iter().filter(|c| !**c).count() as u64;
    Ok(FetchedCheck::Matched { pieces: fetches.len() as u64, unclaimed })
}

/// `Ok` when the bundle holds `r`; else the reference error of `file:line`.
fn held(set: &HashSet<String>, r: &str, file: &str, line: usize) -> Result<()> {
    if set.contains(r) {
        Ok(())
    } else {
        Err(BundleError::Reference { file: file.into(), line, detail: format!("{r} is not in the bundle") })
    }
}

/// What [`check_references`] read for the check against egress.
struct Refs {
    /// Rows whose references were checked.
    rows: u64,
    /// The fetched pieces.
    fetches: Vec<Fetch>,
    /// The `FETCHED` entries of egress's fetch log, when the bundle has it.
    egress_log: Option<Vec<Logged>>,
}

/// The cross-references of a bundle whose files all hash as listed.
fn check_references(dir: &Path, listed: &HashMap<String, String>, manifest: &Value) -> Result<Refs> {
    let bad = |file: &str, line: usize, detail: String| BundleError::Reference { file: file.into(), line, detail };
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut evidence: HashMap<String, i64> = HashMap::new();
    let f = "evidence.jsonl";
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let id = field(f, line, o, "id")?;
            let text = field(f, line, o, "text")?;
            let sha = field(f, line, o, "sha256")?;
            // An imported item's hash is its original bytes'; its text is
            // derived from them (and hashed in the manifest like any file).
            let hashed = match o.get("blob_sha256").and_then(Value::as_str) {
                Some(_) => field(f, line, o, "original")?,
                None => text,
            };
            if !listed.contains_key(text) {
                return Err(bad(f, line, format!("{text} is not in the bundle")));
            }
            match listed.get(hashed) {
                Some(h) if h == sha => {}
                Some(h) => return Err(bad(f, line, format!("{hashed} hashes to {h}, the item's sha256 is {sha}"))),
                None => return Err(bad(f, line, format!("{hashed} is not in the bundle"))),
            }
            evidence.insert(format!("evidence:{id}"), int(f, line, o, "char_len")?);
            Ok(())
        })?,
    );
    let mut objects: HashSet<String> = evidence.keys().cloned().collect();
    // The investigation and its workspace, as `investigation.json` names them.
    let head: Value =
        serde_json::from_slice(&fs::read(dir.join("investigation.json")).map_err(io(&dir.join("investigation.json")))?)
            .map_err(|e| bad("investigation.json", 1, format!("not JSON: {e}")))?;
    for (kind, key) in [("investigation", "investigation"), ("workspace", "workspace")] {
        if let Some(id) = head[key]["id"].as_str() {
            objects.insert(format!("{kind}:{id}"));
        }
    }
    let declared = manifest["investigation"].as_str().unwrap_or_default();
    if !objects.contains(declared) {
        return Err(BundleError::Manifest(format!("names {declared}, but investigation.json holds another")));
    }
    let f = "entities.jsonl";
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            objects.insert(format!("entity:{}", field(f, line, o, "id")?));
            Ok(())
        })?,
    );
    let f = "entity_aliases.jsonl";
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let e = format!("entity:{}", field(f, line, o, "entity_id")?);
            held(&objects, &e, f, line)
        })?,
    );
    let f = "relations.jsonl";
    let mut relations = HashSet::new();
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            for end in ["src", "dst"] {
                let r = field(f, line, o, end)?;
                let kind = r.split(':').next().unwrap_or_default();
                if matches!(kind, "evidence" | "entity") && !objects.contains(r) {
                    return Err(bad(f, line, format!("`{end}` {r} is not in the bundle")));
                }
            }
            relations.insert(format!("relation:{}", field(f, line, o, "id")?));
            Ok(())
        })?,
    );
    let f = "mentions.jsonl";
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let ev = format!("evidence:{}", field(f, line, o, "evidence_id")?);
            let Some(chars) = evidence.get(&ev) else {
                return Err(bad(f, line, format!("{ev} is not in the bundle")));
            };
            let ent = format!("entity:{}", field(f, line, o, "entity_id")?);
            held(&objects, &ent, f, line)?;
            let (start, len) = (int(f, line, o, "start")?, int(f, line, o, "length")?);
            if start < 0 || len <= 0 || start + len > *chars {
                return Err(bad(f, line, format!("characters {start}+{len} lie outside {ev} ({chars} characters)")));
            }
            Ok(())
        })?,
    );
    objects.extend(relations);
    let mut ids = |file: &str, prefix: &str, set: &mut HashSet<String>| -> Result<()> {
        let n = each_line(dir, file, |line, o| {
            set.insert(format!("{prefix}:{}", field(file, line, o, "id")?));
            Ok(())
        })?;
        counts.insert(file.into(), n);
        Ok(())
    };
    let mut grants = HashSet::new();
    let mut campaigns = HashSet::new();
    let mut requests = HashSet::new();
    let mut jobs = HashSet::new();
    ids("grants.jsonl", "grant", &mut grants)?;
    ids("campaigns.jsonl", "campaign", &mut campaigns)?;
    ids("research_requests.jsonl", "research_request", &mut requests)?;
    ids("jobs.jsonl", "job", &mut jobs)?;
    objects.extend(grants.iter().cloned());
    objects.extend(campaigns.iter().cloned());
    objects.extend(requests);
    objects.extend(jobs);
    let f = "campaigns.jsonl";
    each_line(dir, f, |line, o| {
        let g = format!("grant:{}", field(f, line, o, "grant_id")?);
        held(&grants, &g, f, line)
    })?;
    let f = "campaign_items.jsonl";
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let c = format!("campaign:{}", field(f, line, o, "campaign_id")?);
            held(&campaigns, &c, f, line)?;
            if let Some(ev) = o.get("evidence_id").and_then(Value::as_str) {
                if !evidence.contains_key(&format!("evidence:{ev}")) {
                    return Err(bad(f, line, format!("evidence:{ev} is not in the bundle")));
                }
            }
            Ok(())
        })?,
    );
    let f = "provenance.jsonl";
    // Each provenance record and the object it describes.
    let mut provenance = HashMap::new();
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let obj = field(f, line, o, "object_ref")?;
            if !objects.contains(obj) {
                return Err(bad(f, line, format!("describes {obj}, which is not in the bundle")));
            }
            provenance.insert(field(f, line, o, "id")?.to_owned(), obj.to_owned());
            Ok(())
        })?,
    );
    let f = "provenance_inputs.jsonl";
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let p = field(f, line, o, "provenance_id")?;
            if !provenance.contains_key(p) {
                return Err(bad(f, line, format!("provenance {p} is not in the bundle")));
            }
            let input = field(f, line, o, "input_ref")?;
            let kind = input.split(':').next().unwrap_or_default();
            // Evidence, grants and campaigns are never deleted: an input naming
            // one must be here. An entity or relation input may be gone (merged
            // away, deleted by the analyst: the audit log says so).
            if matches!(kind, "evidence" | "grant" | "campaign") && !objects.contains(input) {
                return Err(bad(f, line, format!("input {input} is not in the bundle")));
            }
            Ok(())
        })?,
    );
    let f = "fetch_provenance.jsonl";
    let mut fetches = Vec::new();
    counts.insert(
        f.into(),
        each_line(dir, f, |line, o| {
            let p = field(f, line, o, "provenance_id")?;
            let Some(piece) = provenance.get(p) else {
                return Err(bad(f, line, format!("provenance {p} is not in the bundle")));
            };
            let campaign = format!("campaign:{}", field(f, line, o, "campaign_id")?);
            held(&campaigns, &campaign, f, line)?;
            let grant = format!("grant:{}", field(f, line, o, "grant_id")?);
            held(&grants, &grant, f, line)?;
            fetches.push(Fetch {
                line,
                piece: piece.clone(),
                grant,
                campaign,
                url: field(f, line, o, "url")?.to_owned(),
                final_url: field(f, line, o, "final_url")?.to_owned(),
                http_status: int(f, line, o, "http_status")?,
                sha256: field(f, line, o, "body_sha256")?.to_owned(),
                bytes: int(f, line, o, "body_bytes")?,
                started_at: field(f, line, o, "started_at")?.to_owned(),
                elapsed_ms: int(f, line, o, "elapsed_ms")?,
            });
            Ok(())
        })?,
    );
    // The manifest's row counts are the files' lines.
    if let Some(Value::Object(declared)) = manifest.get("rows") {
        for (file, n) in declared {
            let actual = match counts.get(file) {
                Some(n) => *n,
                None => each_line(dir, file, |_, _| Ok(()))?,
            };
            if n.as_u64() != Some(actual) {
                return Err(BundleError::Manifest(format!("{file} has {actual} rows, the manifest says {n}")));
            }
        }
    }
    // Egress's own record of the grants, when the export found it; the
    // manifest says whether it did.
    let f = EGRESS_FETCH_LOG;
    let has_log = listed.contains_key(f);
    if let Some(said) = manifest.get(FETCHED_EVIDENCE) {
        let expected = if has_log { FetchedEvidence::EgressFetchLog } else { FetchedEvidence::ServerWord };
        if serde_json::from_value::<FetchedEvidence>(said.clone()).ok() != Some(expected) {
            return Err(BundleError::Manifest(format!(
                "`{FETCHED_EVIDENCE}` is {said}, but the bundle {} {f}",
                if has_log { "holds" } else { "has no" }
            )));
        }
    }
    let mut egress_log = None;
    if has_log {
        let mut ledger = HashSet::new();
        each_line(dir, "egress/grants.jsonl", |line, o| {
            let g = field("egress/grants.jsonl", line, o, "id")?;
            if !grants.contains(g) {
                return Err(bad("egress/grants.jsonl", line, format!("{g} is not a grant of the bundle")));
            }
            ledger.insert(g.to_owned());
            Ok(())
        })?;
        let mut log = Vec::new();
        counts.insert(
            f.into(),
            each_line(dir, f, |line, o| {
                let g = field(f, line, o, "grant_id")?;
                if !ledger.contains(g) {
                    return Err(bad(f, line, format!("{g} is not in egress/grants.jsonl")));
                }
                if field(f, line, o, "status")? != "FETCHED" {
                    return Ok(());
                }
                let text = |name: &str| o.get(name).and_then(Value::as_str).map(str::to_owned);
                let url = field(f, line, o, "url")?.to_owned();
                let at = field(f, line, o, "at")?.to_owned();
                log.push(Logged {
                    line,
                    at_time: chrono::DateTime::parse_from_rfc3339(&at).ok(),
                    at,
                    grant: g.to_owned(),
                    campaign: field(f, line, o, "campaign")?.to_owned(),
                    final_url: text("final_url").unwrap_or_else(|| url.clone()),
                    url,
                    http_status: o.get("http_status").and_then(Value::as_i64),
                    // A fetch with no body is logged without a hash.
                    sha256: text("sha256").unwrap_or_else(|| EMPTY_SHA256.to_owned()),
                    bytes: int(f, line, o, "bytes")?,
                });
                Ok(())
            })?,
        );
        egress_log = Some(log);
    }
    check_stix(dir)?;
    Ok(Refs { rows: counts.values().sum(), fetches, egress_log })
}

/// Every relationship of `graph.stix.json` joins two of its objects.
fn check_stix(dir: &Path) -> Result<()> {
    let f = "graph.stix.json";
    let path = dir.join(f);
    let v: Value = serde_json::from_reader(BufReader::new(File::open(&path).map_err(io(&path))?))
        .map_err(|e| BundleError::Reference { file: f.into(), line: 1, detail: format!("not JSON: {e}") })?;
    let objects = v["objects"].as_array().ok_or_else(|| BundleError::Reference {
        file: f.into(),
        line: 1,
        detail: "not a STIX bundle (no `objects`)".into(),
    })?;
    let ids: HashSet<&str> = objects.iter().filter_map(|o| o["id"].as_str()).collect();
    for o in objects {
        if o["type"] == "relationship" {
            for end in ["source_ref", "target_ref"] {
                let r = o[end].as_str().unwrap_or_default();
                if !ids.contains(r) {
                    return Err(BundleError::Reference {
                        file: f.into(),
                        line: 1,
                        detail: format!("{} `{end}` {r} is not an object of the bundle", o["id"]),
                    });
                }
            }
        }
    }
    Ok(())
}
