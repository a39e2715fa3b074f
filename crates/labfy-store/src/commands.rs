//! Command handlers: every durable change goes through here, each in one
//! transaction together with its audit row.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, params};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::model::WorkspaceClass;
use crate::now_rfc3339;
use crate::reads::Reads;

/// Longest title of an analyst note, in characters.
pub const MAX_NOTE_TITLE_CHARS: usize = 200;
/// Largest content of an analyst note, in bytes.
pub const MAX_NOTE_CONTENT_BYTES: usize = 1024 * 1024;
/// Longest source of an analyst note, in characters.
pub const MAX_NOTE_SOURCE_CHARS: usize = 500;
/// Longest workspace name, in characters.
pub const MAX_WORKSPACE_NAME_CHARS: usize = 200;

/// An analyst's note, stored as a new evidence item.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewNote {
    /// Title (1–200 characters).
    pub title: String,
    /// Text (1 byte – 1 MiB).
    pub content: String,
    /// Where it comes from; defaults to "analyst note".
    #[serde(default)]
    pub source: Option<String>,
}

/// A human decision to allow outbound work (SPEC W4).
#[derive(Debug, Clone)]
pub struct NewGrant {
    /// The investigation it is for.
    pub investigation: ObjectRef,
    /// Hosts / URL patterns.
    pub scope: crate::ResearchScope,
    /// Requests and bytes.
    pub budget: crate::ResearchBudget,
    /// RFC 3339 expiry.
    pub expires_at: String,
    /// Tool contract fingerprints the decision was made under.
    pub contract_fingerprints: serde_json::Value,
    /// Who decided.
    pub decided_by: String,
}

fn json_text(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Internal(e.to_string()))
}

pub(crate) fn check_text(name: &str, value: &str, max_chars: usize) -> Result<()> {
    let n = value.chars().count();
    if value.trim().is_empty() {
        return Err(StoreError::Invalid(format!("{name} must not be empty")));
    }
    if n > max_chars {
        return Err(StoreError::Invalid(format!("{name} too long ({n} characters, at most {max_chars})")));
    }
    if value.chars().any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r') {
        return Err(StoreError::Invalid(format!("{name} contains control characters")));
    }
    Ok(())
}

/// Appends one row to the audit log (inside the caller's transaction).
pub(crate) fn audit(
    conn: &Connection,
    actor: &str,
    action: &str,
    workspace: Option<Uuid>,
    object: Option<&ObjectRef>,
    detail: &serde_json::Value,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO audit_log (at, actor, action, workspace_id, object_ref, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        now_rfc3339(),
        actor,
        action,
        workspace.map(|w| w.to_string()),
        object.map(ToString::to_string),
        detail.to_string()
    ])?;
    Ok(())
}

/// Adds evidence rows with `seq` in `from..=to` to the full-text index. Every
/// command that inserts evidence calls it in the same transaction (the index
/// has no insert trigger; see migration V1).
pub(crate) fn index_evidence(conn: &Connection, from: i64, to: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO evidence_fts(rowid, title, content) SELECT seq, title, content FROM evidence WHERE seq BETWEEN ?1 AND ?2",
    )?
    .execute(params![from, to])?;
    Ok(())
}

/// Media type of evidence written as plain text (notes, synthetic pages).
pub(crate) const TEXT_PLAIN: &str = "text/plain";

/// A text document to store as evidence.
pub(crate) struct TextEvidence<'a> {
    /// The investigation it joins.
    pub(crate) investigation: Uuid,
    /// Title.
    pub(crate) title: &'a str,
    /// The text; its SHA-256 and sizes are computed here.
    pub(crate) content: &'a str,
    /// Where it comes from (a person, a URL).
    pub(crate) source: &'a str,
    /// Media type, already bounded and sanitised by the caller.
    pub(crate) mime: &'a str,
    /// Collection time, RFC 3339.
    pub(crate) at: &'a str,
    /// The original bytes it was read from, when they are kept (SPEC C2):
    /// then `sha256` and `byte_len` are theirs, not the text's.
    pub(crate) original: Option<&'a crate::blobs::Blob>,
}

/// What [`insert_text_evidence`] wrote.
pub(crate) struct Inserted {
    /// The new evidence item.
    pub(crate) evidence: ObjectRef,
    /// Its `seq`, for [`index_evidence`].
    pub(crate) seq: i64,
    /// Id of its provenance record.
    pub(crate) provenance: String,
}

/// `text` with Labfy's search-highlight markers (U+E000, U+E001, which the
/// full-text snippets wrap matches in) replaced by U+FFFD: a document that
/// carries them would otherwise highlight what it likes in search results
/// (issue 19's injection corpus). Same length in characters and bytes, so
/// offsets into the text hold; an original file keeps its bytes in the blob
/// store.
pub(crate) fn without_snippet_markers(text: &str) -> std::borrow::Cow<'_, str> {
    use crate::reads::{SNIPPET_CLOSE, SNIPPET_OPEN};
    if text.contains([SNIPPET_OPEN, SNIPPET_CLOSE]) {
        std::borrow::Cow::Owned(text.replace([SNIPPET_OPEN, SNIPPET_CLOSE], "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Inserts one text evidence item and its provenance record (`producer`,
/// `activity`, `inputs` in order), in the caller's transaction. Returns the
/// new reference, its `seq` and its provenance record: the caller indexes the
/// range it inserted ([`index_evidence`]) and moves the investigation's
/// counters, once per command rather than once per row.
pub(crate) fn insert_text_evidence(
    conn: &Connection,
    doc: &TextEvidence<'_>,
    producer: &str,
    activity: &str,
    inputs: &[ObjectRef],
) -> Result<Inserted> {
    let ev = ObjectRef::new(RefKind::Evidence, Uuid::now_v7());
    let inv = doc.investigation.to_string();
    let content = without_snippet_markers(doc.content);
    conn.prepare_cached(
        "INSERT INTO evidence (id, investigation_id, title, content, sha256, source, mime, byte_len, char_len,
                               collected_at, created_at, blob_sha256)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11)",
    )?
    .execute(params![
        ev.id().to_string(),
        inv,
        doc.title,
        content.as_ref(),
        doc.original.map_or_else(|| sha256_hex(content.as_bytes()), |b| b.sha256.clone()),
        doc.source,
        doc.mime,
        doc.original.map_or(content.len() as i64, |b| b.len as i64),
        content.chars().count() as i64,
        doc.at,
        doc.original.map(|b| b.sha256.as_str()),
    ])?;
    let seq = conn.last_insert_rowid();
    let prov = Uuid::now_v7().to_string();
    conn.prepare_cached(
        "INSERT INTO provenance (id, investigation_id, object_ref, producer, activity, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![prov, inv, ev.to_string(), producer, activity, doc.at])?;
    for (pos, input) in inputs.iter().enumerate() {
        conn.prepare_cached("INSERT INTO provenance_inputs (provenance_id, position, input_ref) VALUES (?1, ?2, ?3)")?
            .execute(params![prov, pos as i64, input.to_string()])?;
    }
    Ok(Inserted { evidence: ev, seq, provenance: prov })
}

/// Recomputes the derived figures of an investigation from their source rows:
/// `entities.mention_count` (one index range count per entity) and the row
/// counts kept on `investigations`. Every bulk command calls it in the same
/// transaction as its writes; single-row commands increment exactly instead.
pub(crate) fn recount_derived(conn: &Connection, investigation: &str) -> Result<()> {
    conn.prepare_cached(
        "UPDATE entities SET mention_count =
             (SELECT count(*) FROM relations r WHERE r.dst = 'entity:' || entities.id AND r.kind = 'mentions')
         WHERE investigation_id = ?1",
    )?
    .execute([investigation])?;
    conn.prepare_cached(
        "UPDATE investigations SET
             evidence_count = (SELECT count(*) FROM evidence WHERE investigation_id = ?1),
             relation_count = (SELECT count(*) FROM relations WHERE investigation_id = ?1),
             provenance_count = (SELECT count(*) FROM provenance WHERE investigation_id = ?1)
         WHERE id = ?1",
    )?
    .execute([investigation])?;
    Ok(())
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Creates a `REAL` workspace with one empty investigation.
pub(crate) fn create_real_workspace(conn: &mut Connection, name: &str, actor: &str) -> Result<(ObjectRef, ObjectRef)> {
    check_text("workspace name", name, MAX_WORKSPACE_NAME_CHARS)?;
    let tx = conn.transaction()?;
    let ws = Uuid::now_v7();
    let inv = Uuid::now_v7();
    let now = now_rfc3339();
    tx.execute(
        "INSERT INTO workspaces (id, name, class, status, created_at) VALUES (?1, ?2, ?3, 'READY', ?4)",
        params![ws.to_string(), name, WorkspaceClass::Real.as_str(), now],
    )?;
    tx.execute(
        "INSERT INTO investigations (id, workspace_id, title, summary, created_at) VALUES (?1, ?2, ?3, '', ?4)",
        params![inv.to_string(), ws.to_string(), name, now],
    )?;
    let ws_ref = ObjectRef::new(RefKind::Workspace, ws);
    audit(&tx, actor, "workspace.create", Some(ws), Some(&ws_ref), &serde_json::json!({"class": "REAL"}))?;
    tx.commit()?;
    Ok((ws_ref, ObjectRef::new(RefKind::Investigation, inv)))
}

/// Stores an analyst's note as evidence, with its provenance and audit row.
pub(crate) fn add_note(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    note: &NewNote,
    actor: &str,
) -> Result<ObjectRef> {
    if inv.kind() != RefKind::Investigation {
        return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
    }
    check_text("title", &note.title, MAX_NOTE_TITLE_CHARS)?;
    if note.content.is_empty() {
        return Err(StoreError::Invalid("content must not be empty".into()));
    }
    if note.content.len() > MAX_NOTE_CONTENT_BYTES {
        return Err(StoreError::Invalid(format!(
            "content too large ({} bytes, at most {MAX_NOTE_CONTENT_BYTES})",
            note.content.len()
        )));
    }
    let source = note.source.clone().unwrap_or_else(|| "analyst note".to_owned());
    check_text("source", &source, MAX_NOTE_SOURCE_CHARS)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let text = TextEvidence {
        investigation: inv.id(),
        title: &note.title,
        content: &note.content,
        source: &source,
        mime: TEXT_PLAIN,
        at: &now_rfc3339(),
        original: None,
    };
    let Inserted { evidence: ev, seq, .. } = insert_text_evidence(&tx, &text, actor, "note", &[])?;
    index_evidence(&tx, seq, seq)?;
    crate::extraction::scan_new_evidence(&tx, &inv.id().to_string(), &ev, &note.content, text.at)?;
    // Exactly one evidence row and one provenance row were added above.
    tx.execute(
        "UPDATE investigations SET evidence_count = evidence_count + 1, provenance_count = provenance_count + 1
         WHERE id = ?1",
        [inv.id().to_string()],
    )?;
    audit(&tx, actor, "evidence.add_note", Some(ws), Some(&ev), &serde_json::json!({"bytes": note.content.len()}))?;
    tx.commit()?;
    Ok(ev)
}

/// Persists a human grant with its audit row.
pub(crate) fn record_grant(conn: &mut Connection, ws: Uuid, grant: &NewGrant) -> Result<ObjectRef> {
    check_text("decided_by", &grant.decided_by, 200)?;
    chrono::DateTime::parse_from_rfc3339(&grant.expires_at)
        .map_err(|e| StoreError::Invalid(format!("expires_at is not RFC 3339: {e}")))?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, &grant.investigation)?;
    let id = Uuid::now_v7();
    let r = ObjectRef::new(RefKind::Grant, id);
    tx.execute(
        "INSERT INTO grants (id, workspace_id, investigation_id, scope, budget, expires_at, contract_fingerprints,
                             decided_by, decided_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            id.to_string(),
            ws.to_string(),
            grant.investigation.id().to_string(),
            json_text(&grant.scope)?,
            json_text(&grant.budget)?,
            grant.expires_at,
            grant.contract_fingerprints.to_string(),
            grant.decided_by,
            now_rfc3339()
        ],
    )?;
    audit(
        &tx,
        &grant.decided_by,
        "grant.decide",
        Some(ws),
        Some(&r),
        &serde_json::json!({"expires_at": grant.expires_at}),
    )?;
    tx.commit()?;
    Ok(r)
}

/// Revokes a grant and, in the same transaction, stops its unfinished
/// campaigns (their planned items with them). Revoking twice is a conflict,
/// not a silent no-op.
pub(crate) fn revoke_grant(conn: &mut Connection, ws: Uuid, grant: &ObjectRef, by: &str) -> Result<()> {
    check_text("revoked_by", by, 200)?;
    if grant.kind() != RefKind::Grant {
        return Err(StoreError::Invalid(format!("expected a `grant:` reference, got `{grant}`")));
    }
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, grant)?;
    let changed = tx.execute(
        "UPDATE grants SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1 AND revoked_at IS NULL",
        params![grant.id().to_string(), now_rfc3339(), by],
    )?;
    if changed == 0 {
        return Err(StoreError::Conflict(format!("{grant} is already revoked")));
    }
    audit(&tx, by, "grant.revoke", Some(ws), Some(grant), &serde_json::json!({}))?;
    crate::campaign::stop_campaigns_of_revoked_grant(&tx, ws, grant, by)?;
    tx.commit()?;
    Ok(())
}
