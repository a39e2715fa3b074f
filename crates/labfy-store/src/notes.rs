//! Analyst notes (SPEC W): a note is stored as a new evidence item, with
//! its provenance and audit row.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, OptionalExtension};
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
    /// When what it tells happened (`YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]`,
    /// with `Z` or an offset; UTC without): the timeline places the note
    /// there rather than at its writing (issue 44).
    #[serde(default)]
    pub dated_at: Option<String>,
}

/// One text evidence item added inside the caller's transaction: its row and
/// provenance, its search index entry, its selectors, and the counts the
/// commands keep on the investigation (one evidence row, one provenance row).
fn add_one(
    tx: &Connection,
    text: &TextEvidence<'_>,
    producer: &str,
    activity: &str,
    inputs: &[ObjectRef],
) -> Result<ObjectRef> {
    let Inserted { evidence: ev, seq, .. } = insert_text_evidence(tx, text, producer, activity, inputs)?;
    index_evidence(tx, seq, seq)?;
    let inv = text.investigation.to_string();
    crate::extraction::scan_new_evidence(tx, &inv, &ev, text.content, text.at)?;
    tx.execute(
        "UPDATE investigations SET evidence_count = evidence_count + 1, provenance_count = provenance_count + 1
         WHERE id = ?1",
        [inv],
    )?;
    Ok(ev)
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
    // The event's date as SQLite reads a date, in UTC; anything else is
    // refused.
    let dated_at = match &note.dated_at {
        None => None,
        Some(at) => {
            let utc: Option<String> = tx.query_row("SELECT datetime(?1)", [at.trim()], |r| r.get(0))?;
            Some(utc.filter(|_| at.len() <= 40).ok_or_else(|| {
                StoreError::Invalid(format!(
                    "dated_at `{}` is not a date (YYYY-MM-DD, or with a time)",
                    at.chars().take(40).collect::<String>()
                ))
            })?)
        }
    };
    let text = TextEvidence {
        investigation: inv.id(),
        title: &note.title,
        content: &note.content,
        source: &source,
        mime: TEXT_PLAIN,
        at: &now_rfc3339(),
        original: None,
        dated_at: dated_at.as_deref(),
    };
    let ev = add_one(&tx, &text, actor, "note", &[])?;
    audit(&tx, actor, "evidence.add_note", Some(ws), Some(&ev), &serde_json::json!({"bytes": note.content.len()}))?;
    tx.commit()?;
    Ok(ev)
}

/// A file a `sandbox.exec` run left in its `/work`, as the governor reported
/// it (SPEC X1: files written may be offered to the analyst, who decides
/// whether they become evidence, with provenance naming the run).
#[derive(Debug, Clone)]
pub struct RunFile {
    /// Its path under the run's `/work`.
    pub name: String,
    /// Its whole text.
    pub text: String,
    /// Its SHA-256 as the governor reported it (hex); must be the text's.
    pub sha256: String,
    /// The allow-listed program that ran.
    pub program: String,
    /// The governor's reservation the run held.
    pub reservation: String,
    /// The tool result that reported it.
    pub result_id: Uuid,
    /// The evidence the run was given: the new item's provenance inputs.
    pub inputs: Vec<ObjectRef>,
}

/// What keeping a run's file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptFile {
    /// The evidence item holding it.
    pub evidence: ObjectRef,
    /// False when this file of this run was kept before (the same item).
    pub created: bool,
}

/// Longest name of a run's file kept, in characters.
pub const MAX_RUN_FILE_NAME_CHARS: usize = 200;

/// Stores a run's file as evidence in `inv` — provenance `sandbox_run` by
/// `sandbox.exec:<program>` from the run's inputs, an audit row naming the
/// analyst — or finds it kept already (same run, same file, same bytes).
pub(crate) fn keep_run_file(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    file: &RunFile,
    actor: &str,
) -> Result<KeptFile> {
    if inv.kind() != RefKind::Investigation {
        return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
    }
    check_text("file name", &file.name, MAX_RUN_FILE_NAME_CHARS)?;
    check_text("program", &file.program, 64)?;
    check_text("reservation", &file.reservation, 128)?;
    if file.text.is_empty() {
        return Err(StoreError::Invalid("the file is empty: there is nothing to keep".into()));
    }
    if file.text.len() > MAX_NOTE_CONTENT_BYTES {
        return Err(StoreError::Invalid(format!(
            "the file is too large to keep as evidence ({} bytes, at most {MAX_NOTE_CONTENT_BYTES})",
            file.text.len()
        )));
    }
    if crate::primitives::sha256_hex(file.text.as_bytes()) != file.sha256 {
        return Err(StoreError::Invalid(format!(
            "the text given is not the file the run reported (SHA-256 {})",
            file.sha256
        )));
    }
    let source = format!(
        "sandbox.exec {} · /work/{} · run {} · result {}",
        file.program, file.name, file.reservation, file.result_id
    );
    check_text("source", &source, MAX_NOTE_SOURCE_CHARS)?;
    let tx = conn.transaction()?;
    let reads = Reads { conn: &tx };
    reads.require_in_workspace(ws, inv)?;
    for input in &file.inputs {
        reads.require_kind(input, RefKind::Evidence)?;
        reads.require_in_workspace(ws, input)?;
        let of: String =
            tx.query_row("SELECT investigation_id FROM evidence WHERE id = ?1", [input.id().to_string()], |r| {
                r.get(0)
            })?;
        if of != inv.id().to_string() {
            return Err(StoreError::Invalid(format!(
                "the run's input {input} belongs to another investigation than {inv}"
            )));
        }
    }
    // Kept before: the same source (run, result and file) and the same
    // stored bytes (as stored: a marker in the file is stored as U+FFFD).
    let stored = crate::primitives::sha256_hex(crate::primitives::without_snippet_markers(&file.text).as_bytes());
    let kept: Option<String> = tx
        .query_row(
            "SELECT id FROM evidence WHERE investigation_id = ?1 AND sha256 = ?2 AND source = ?3",
            rusqlite::params![inv.id().to_string(), stored, source],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(id) = kept {
        return Ok(KeptFile { evidence: crate::reads::parse_ref(RefKind::Evidence, &id)?, created: false });
    }
    let title = format!("{} · sandbox.exec {}", file.name, file.program);
    let text = TextEvidence {
        investigation: inv.id(),
        title: &title,
        content: &file.text,
        source: &source,
        mime: TEXT_PLAIN,
        at: &now_rfc3339(),
        original: None,
        dated_at: None,
    };
    let producer = format!("sandbox.exec:{}", file.program);
    let ev = add_one(&tx, &text, &producer, "sandbox_run", &file.inputs)?;
    audit(
        &tx,
        actor,
        "evidence.keep_run_file",
        Some(ws),
        Some(&ev),
        &serde_json::json!({"file": file.name, "sha256": file.sha256, "result_id": file.result_id,
                            "reservation": file.reservation, "bytes": file.text.len()}),
    )?;
    tx.commit()?;
    Ok(KeptFile { evidence: ev, created: true })
}
