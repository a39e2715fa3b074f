//! The agent's journal (SPEC F4): the turns, tool results and events of the
//! agent gateway and of the agent runtime, so that a restart loses none of
//! them.
//!
//! It is a file of its own beside the database (`agent-journal.sqlite3`),
//! with its own connection: the journal is written all the time an agent
//! works, and a commit to the investigations' database would make every
//! reader drop its page cache and queue behind the one writer (imports,
//! decisions). Its durability is the process's: WAL with `synchronous =
//! NORMAL` survives a crash or a `kill -9` of the server, not a power loss
//! in its last moments — what a turn journal needs, unlike grants.
//!
//! The store keeps each record as JSON it does not interpret (the gateway
//! and the runtime own their types); it orders, bounds and returns them.
//! Writes come in batches, one transaction each, upserting by `(layer, kind,
//! id)`: a turn's later snapshot replaces the earlier one.
//! [`JournalStore::prune`] keeps [`JOURNAL_KEEP`] records of each layer and
//! kind per workspace.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};
use serde::Serialize;
use uuid::Uuid;

use crate::db::{BUSY_TIMEOUT, check_identity_of, classify_open_error, private_file};
use crate::{Result, StoreError};

/// File name of the journal inside a data directory.
pub const JOURNAL_FILE: &str = "agent-journal.sqlite3";
/// Records of one layer and kind kept per workspace.
pub const JOURNAL_KEEP: usize = 1_000;
/// Largest body one record may have (a tool result is at most 256 KiB
/// serialised; with its envelope, less than this).
pub const MAX_JOURNAL_BODY_BYTES: usize = 512 * 1024;
/// The journal file's `application_id` ("LABJ").
pub const JOURNAL_APPLICATION_ID: i32 = 0x4C41_424A;
/// Its schema version.
const JOURNAL_VERSION: i64 = 1;

const SCHEMA: &str = r#"
CREATE TABLE agent_journal (
    workspace_id TEXT NOT NULL,
    layer        TEXT NOT NULL CHECK (layer IN ('gateway', 'runtime')),
    kind         TEXT NOT NULL CHECK (kind IN ('turn', 'result', 'event')),
    id           TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    body         TEXT NOT NULL CHECK (json_valid(body)),
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (layer, kind, id)
) WITHOUT ROWID;
CREATE INDEX agent_journal_order ON agent_journal(workspace_id, layer, kind, seq);
CREATE INDEX agent_journal_seq ON agent_journal(layer, kind, seq);
"#;

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

/// The journal file, read and written through one connection.
pub struct JournalStore {
    conn: Connection,
}

impl std::fmt::Debug for JournalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalStore").finish_non_exhaustive()
    }
}

impl JournalStore {
    /// Opens (creating if needed) `<data_dir>/agent-journal.sqlite3`, mode
    /// 0600 in a 0700 directory (SPEC T4). A file that is not a Labfy journal
    /// is refused and left untouched.
    pub fn open(data_dir: &Path) -> Result<Self> {
        let path = private_file(data_dir, JOURNAL_FILE)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let err = |e| classify_open_error(&path, e);
        let mut conn = Connection::open_with_flags(&path, flags).map_err(err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        let version = check_identity_of(&conn, &path, JOURNAL_APPLICATION_ID, JOURNAL_VERSION)?;
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(err)?;
        conn.set_transaction_behavior(rusqlite::TransactionBehavior::Immediate);
        if version == 0 {
            let tx = conn.transaction()?;
            tx.execute_batch(SCHEMA)?;
            tx.pragma_update(None, "application_id", JOURNAL_APPLICATION_ID)?;
            tx.pragma_update(None, "user_version", JOURNAL_VERSION)?;
            tx.commit()?;
        }
        Ok(Self { conn })
    }

    /// Writes `records` in one transaction (a record with the same layer,
    /// kind and id replaces the earlier one). Invalid (nothing written) when
    /// a body is not JSON (the table checks it) or is over
    /// [`MAX_JOURNAL_BODY_BYTES`].
    pub fn write(&mut self, records: &[JournalRecord]) -> Result<()> {
        if let Some(r) = records.iter().find(|r| r.body.len() > MAX_JOURNAL_BODY_BYTES) {
            return Err(StoreError::Invalid(format!(
                "journal record {} has {} bytes, over the bound of {MAX_JOURNAL_BODY_BYTES}",
                r.id,
                r.body.len()
            )));
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
                let row = params![r.workspace.to_string(), r.layer.as_str(), r.kind.as_str(), r.id, r.seq, r.body, now];
                match put.execute(row) {
                    Ok(_) => {}
                    // The table's CHECK (json_valid): the body was not JSON;
                    // the transaction goes, nothing is written.
                    Err(rusqlite::Error::SqliteFailure(e, _))
                        if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_CHECK =>
                    {
                        return Err(StoreError::Invalid(format!("journal record {} is not JSON", r.id)));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Drops, for every workspace, layer and kind, the records beyond the
    /// newest [`JOURNAL_KEEP`]; returns how many went. The journal's writer
    /// calls it now and then, not with every batch (it reads an index).
    pub fn prune(&mut self) -> Result<usize> {
        let tx = self.conn.transaction()?;
        let groups: Vec<(String, String, String)> = tx
            .prepare_cached("SELECT DISTINCT workspace_id, layer, kind FROM agent_journal")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<std::result::Result<_, _>>()?;
        let mut gone = 0;
        {
            let mut prune = tx.prepare_cached(
                "DELETE FROM agent_journal WHERE workspace_id = ?1 AND layer = ?2 AND kind = ?3 AND seq <
                   (SELECT seq FROM agent_journal WHERE workspace_id = ?1 AND layer = ?2 AND kind = ?3
                    ORDER BY seq DESC LIMIT 1 OFFSET ?4)",
            )?;
            for (ws, layer, kind) in groups {
                gone += prune.execute(params![ws, layer, kind, JOURNAL_KEEP as i64 - 1])?;
            }
        }
        tx.commit()?;
        Ok(gone)
    }

    /// The newest `limit` records of `ws`'s `layer` and `kind`, oldest first.
    pub fn read(&self, ws: Uuid, layer: JournalLayer, kind: JournalKind, limit: usize) -> Result<Vec<JournalRecord>> {
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
    pub fn last_seq(&self, layer: JournalLayer, kind: JournalKind) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached("SELECT coalesce(max(seq), 0) FROM agent_journal WHERE layer = ?1 AND kind = ?2")?
            .query_row(params![layer.as_str(), kind.as_str()], |r| r.get(0))?)
    }
}
