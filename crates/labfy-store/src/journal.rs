//! The agent's journal (SPEC F4, schema V9): the turns, tool results and
//! events of the agent gateway and of the agent runtime, so that a restart
//! loses none of them.
//!
//! The store keeps each record as JSON it does not interpret (the gateway
//! and the runtime own their types); it orders, bounds and returns them.
//! Writes come in batches, one transaction each, upserting by `(layer, kind,
//! id)`: a turn's later snapshot replaces the earlier one. Each layer and
//! kind keeps at most [`JOURNAL_KEEP`] records per workspace, the oldest
//! going first.

use rusqlite::params;
use serde::Serialize;
use uuid::Uuid;

use crate::reads::Reads;
use crate::{Result, Store, StoreError};

/// Records of one layer and kind kept per workspace.
pub const JOURNAL_KEEP: usize = 1_000;
/// Largest body one record may have (a tool result is at most 256 KiB
/// serialised; with its envelope, less than this).
pub const MAX_JOURNAL_BODY_BYTES: usize = 512 * 1024;

/// Whose record it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum JournalLayer {
    /// The agent tool gateway (turns of the tool protocol).
    Gateway,
    /// The agent runtime (the turns the UI starts).
    Runtime,
}

impl JournalLayer {
    fn as_str(self) -> &'static str {
        match self {
            Self::Gateway => "gateway",
            Self::Runtime => "runtime",
        }
    }
}

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum JournalKind {
    /// A turn (its latest snapshot).
    Turn,
    /// A tool result.
    Result,
    /// An event.
    Event,
}

impl JournalKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Result => "result",
            Self::Event => "event",
        }
    }
}

/// One record of the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    /// The workspace it belongs to.
    pub workspace: Uuid,
    /// Gateway or runtime.
    pub layer: JournalLayer,
    /// Turn, result or event.
    pub kind: JournalKind,
    /// Its id within its layer and kind (a UUID, or an event's sequence).
    pub id: String,
    /// Its order within its layer and kind.
    pub seq: i64,
    /// The record, as JSON.
    pub body: String,
}

impl Store {
    /// Writes `records` in one transaction (a record with the same layer,
    /// kind and id replaces the earlier one), then drops what exceeds
    /// [`JOURNAL_KEEP`] for each workspace, layer and kind written. Invalid
    /// (nothing written) when a body is not JSON or is over
    /// [`MAX_JOURNAL_BODY_BYTES`].
    pub fn journal(&mut self, records: &[JournalRecord]) -> Result<()> {
        for r in records {
            if r.body.len() > MAX_JOURNAL_BODY_BYTES {
                return Err(StoreError::Invalid(format!(
                    "a journal record of {} bytes is over the bound of {MAX_JOURNAL_BODY_BYTES}",
                    r.body.len()
                )));
            }
            if serde_json::from_str::<serde::de::IgnoredAny>(&r.body).is_err() {
                return Err(StoreError::Invalid("a journal record's body is not JSON".into()));
            }
        }
        let now = crate::now_rfc3339();
        let tx = self.conn.transaction()?;
        {
            let mut put = tx.prepare_cached(
                "INSERT INTO agent_journal (workspace_id, layer, kind, id, seq, body, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (layer, kind, id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at
                 WHERE agent_journal.workspace_id = excluded.workspace_id",
            )?;
            for r in records {
                put.execute(params![
                    r.workspace.to_string(),
                    r.layer.as_str(),
                    r.kind.as_str(),
                    r.id,
                    r.seq,
                    r.body,
                    now
                ])?;
            }
            let mut written: Vec<(Uuid, JournalLayer, JournalKind)> =
                records.iter().map(|r| (r.workspace, r.layer, r.kind)).collect();
            written.sort_by_key(|(w, l, k)| (*w, l.as_str(), k.as_str()));
            written.dedup();
            let mut prune = tx.prepare_cached(
                "DELETE FROM agent_journal WHERE workspace_id = ?1 AND layer = ?2 AND kind = ?3 AND seq <
                   (SELECT seq FROM agent_journal WHERE workspace_id = ?1 AND layer = ?2 AND kind = ?3
                    ORDER BY seq DESC LIMIT 1 OFFSET ?4)",
            )?;
            for (ws, layer, kind) in written {
                prune.execute(params![ws.to_string(), layer.as_str(), kind.as_str(), JOURNAL_KEEP as i64 - 1])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

impl Reads<'_> {
    /// The newest `limit` records of `ws`'s `layer` and `kind`, oldest first.
    pub fn journal(
        &self,
        ws: Uuid,
        layer: JournalLayer,
        kind: JournalKind,
        limit: usize,
    ) -> Result<Vec<JournalRecord>> {
        let mut rows = self
            .conn
            .prepare_cached(
                "SELECT id, seq, body FROM agent_journal WHERE workspace_id = ?1 AND layer = ?2 AND kind = ?3
                 ORDER BY seq DESC LIMIT ?4",
            )?
            .query_map(params![ws.to_string(), layer.as_str(), kind.as_str(), limit.min(JOURNAL_KEEP) as i64], |r| {
                Ok(JournalRecord { workspace: ws, layer, kind, id: r.get(0)?, seq: r.get(1)?, body: r.get(2)? })
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        rows.reverse();
        Ok(rows)
    }

    /// The highest `seq` of `layer` and `kind` in any workspace (0 when
    /// none): event sequences go on from it after a restart.
    pub fn journal_last_seq(&self, layer: JournalLayer, kind: JournalKind) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM agent_journal WHERE layer = ?1 AND kind = ?2")?
            .query_row(params![layer.as_str(), kind.as_str()], |r| r.get(0))?)
    }
}
