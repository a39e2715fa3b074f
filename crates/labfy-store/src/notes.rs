//! Analyst notes (SPEC W): a note is stored as a new evidence item, with
//! its provenance and audit row.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::Connection;
use serde::Deserialize;
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;
use crate::reads::Reads;

use crate::primitives::{Inserted, TEXT_PLAIN, TextEvidence, audit, check_text, index_evidence, insert_text_evidence};

/// Longest title of an analyst note, in characters.
pub const MAX_NOTE_TITLE_CHARS: usize = 200;
/// Largest content of an analyst note, in bytes.
pub const MAX_NOTE_CONTENT_BYTES: usize = 1024 * 1024;
/// Longest source of an analyst note, in characters.
pub const MAX_NOTE_SOURCE_CHARS: usize = 500;

/// An analyst's note, stored as a new evidence item.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
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
