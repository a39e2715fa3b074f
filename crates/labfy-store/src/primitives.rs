//! The store's primitives, beneath every aggregate (issue 14 item 3): text
//! checks, the audit row every command writes in its transaction, the
//! full-text index, a text evidence item with its provenance, the derived
//! counters, SHA-256. They import no aggregate module.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;

pub(crate) fn json_text(v: &impl serde::Serialize) -> Result<String> {
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
    /// When what it tells happened, as the analyst gave it (UTC,
    /// `YYYY-MM-DD HH:MM:SS`): evidence is immutable, so it is written with
    /// the row (issue 44's timeline).
    pub(crate) dated_at: Option<&'a str>,
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
    use crate::search::{SNIPPET_CLOSE, SNIPPET_OPEN};
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
                               collected_at, created_at, blob_sha256, dated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?12)",
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
        doc.dated_at,
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
