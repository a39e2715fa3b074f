//! The grant ledger (SPEC T2): egress's own record of what a human granted
//! and of every fetch it made, in `<data>/egress/ledger.sqlite3` — a
//! directory the confined workspace server's root masks, so the server can
//! neither read nor write it.
//!
//! A grant enters the ledger as a **proposal** relayed by the server (the
//! analyst's decision in the UI as the server says it was) and allows
//! nothing until a human **decides** it where the server cannot reach: on
//! the terminal (`labfy grant approve`, over egress's operator socket, whose
//! directory the server's root masks) or on egress's confirmation page (its
//! own loopback port, outside the server's network namespace). The server
//! may revoke a grant or end its campaign — both only take authority away.
//!
//! Every fetch is checked here, in one transaction with the count it adds:
//! the grant is approved, unrevoked, unexpired, its campaign has not ended,
//! the workspace and campaign are the ones approved, the first hop's URL is
//! one of the exact URLs the human saw, a redirect hop stays inside the
//! scope's hosts, and budget is left. Usage is persisted, so neither an
//! egress restart nor the server's own records give budget back.
//!
//! The database refuses, by trigger, any change to a grant's terms, a
//! second decision, a decrease of its usage, and any update or deletion of
//! the fetch log: the log is append-only.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, SecondsFormat, Utc};
use labfy_core::bounded::truncate_chars;
use labfy_core::{CampaignRef, GrantRef};
use labfy_ipc::messages::egress::{
    FetchLogEntry, FetchOutcome, FetchStatus, GrantPhase, GrantProposal, GrantRecord, MAX_GRANT_HOSTS, MAX_GRANT_URLS,
    MAX_LISTED_GRANTS, MAX_LOG_ENTRIES, MAX_PROPOSAL_SUMMARY_CHARS,
};
use rusqlite::{Connection, OptionalExtension, params};
use uuid::Uuid;

use crate::grants::FetchIds;
use crate::target::{Target, check_url, scope_refusal, shown};

/// The ledger's file name in egress's directory.
pub const LEDGER_FILE: &str = "ledger.sqlite3";
/// Longest a grant may last, in minutes (7 days, the store's bound).
pub const MAX_GRANT_MINUTES: u32 = 7 * 24 * 60;
/// Most requests a grant may allow (the store's bound).
pub const MAX_GRANT_REQUESTS: u64 = 1000;
/// Most body bytes a grant may allow (1 GiB, the store's bound).
pub const MAX_GRANT_BYTES: u64 = 1 << 30;
/// Most log lines kept per grant for fetches that fetched nothing (refused,
/// unavailable, failed, stopped): a compromised server asking again and
/// again cannot fill the disk. Fetched ones are bounded by the budget.
pub const MAX_REFUSALS_LOGGED: u64 = 1000;
/// Most proposals waiting for a human at once (undecided, unexpired).
pub const MAX_PENDING_PROPOSALS: u64 = 32;
/// Most proposals recorded in any hour: with [`MAX_PENDING_PROPOSALS`], what
/// keeps a compromised server from growing the ledger without end.
pub const MAX_PROPOSALS_PER_HOUR: u64 = 60;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS grants (
    id                 TEXT PRIMARY KEY,
    workspace          TEXT NOT NULL,
    campaign           TEXT NOT NULL UNIQUE,
    urls               TEXT NOT NULL,
    hosts              TEXT NOT NULL,
    max_requests       INTEGER NOT NULL,
    max_bytes          INTEGER NOT NULL,
    minutes            INTEGER NOT NULL,
    summary            TEXT NOT NULL,
    proposed_at        TEXT NOT NULL,
    expires_at         TEXT NOT NULL,
    decision           TEXT CHECK (decision IN ('APPROVED', 'REFUSED')),
    decided_at         TEXT,
    decided_via        TEXT,
    revoked_at         TEXT,
    campaign_ended_at  TEXT,
    requests_used      INTEGER NOT NULL DEFAULT 0,
    bytes_used         INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE TRIGGER IF NOT EXISTS grants_terms_fixed BEFORE UPDATE OF
    id, workspace, campaign, urls, hosts, max_requests, max_bytes, minutes, summary, proposed_at, expires_at
    ON grants BEGIN SELECT RAISE(ABORT, 'a grant''s terms never change'); END;
CREATE TRIGGER IF NOT EXISTS grants_decided_once BEFORE UPDATE OF decision, decided_at, decided_via ON grants
    WHEN OLD.decision IS NOT NULL BEGIN SELECT RAISE(ABORT, 'a grant is decided once'); END;
CREATE TRIGGER IF NOT EXISTS grants_revoked_once BEFORE UPDATE OF revoked_at ON grants
    WHEN OLD.revoked_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'a grant is revoked once'); END;
CREATE TRIGGER IF NOT EXISTS grants_ended_once BEFORE UPDATE OF campaign_ended_at ON grants
    WHEN OLD.campaign_ended_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'a campaign ends once'); END;
CREATE TRIGGER IF NOT EXISTS grants_usage_grows BEFORE UPDATE OF requests_used, bytes_used ON grants
    WHEN NEW.requests_used < OLD.requests_used OR NEW.bytes_used < OLD.bytes_used
    BEGIN SELECT RAISE(ABORT, 'usage never decreases'); END;
CREATE TRIGGER IF NOT EXISTS grants_kept BEFORE DELETE ON grants
    BEGIN SELECT RAISE(ABORT, 'grants are kept'); END;
CREATE TABLE IF NOT EXISTS fetch_log (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    at           TEXT NOT NULL,
    grant_id     TEXT NOT NULL REFERENCES grants(id),
    campaign     TEXT NOT NULL,
    url          TEXT NOT NULL,
    final_url    TEXT,
    status       TEXT NOT NULL,
    http_status  INTEGER,
    bytes        INTEGER NOT NULL,
    sha256       TEXT,
    reason       TEXT
) STRICT;
CREATE INDEX IF NOT EXISTS fetch_log_grant ON fetch_log(grant_id, seq);
CREATE TRIGGER IF NOT EXISTS fetch_log_no_update BEFORE UPDATE ON fetch_log
    BEGIN SELECT RAISE(ABORT, 'the fetch log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS fetch_log_no_delete BEFORE DELETE ON fetch_log
    BEGIN SELECT RAISE(ABORT, 'the fetch log is append-only'); END;
"#;

/// Why the ledger cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("the grant ledger {path} cannot be opened: {message}")]
pub struct LedgerError {
    path: PathBuf,
    message: String,
}

/// What a hop may use, once it passed the ledger's checks and was counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopTerms {
    /// Host patterns the next redirect hop may reach.
    pub hosts: Vec<String>,
    /// Body bytes allowed in all.
    pub max_bytes: u64,
    /// Body bytes already received under the grant (persisted).
    pub bytes_used: u64,
}

/// The ledger. One connection behind a mutex: every operation is a short
/// transaction.
pub struct Ledger {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("path", &self.path).finish_non_exhaustive()
    }
}

fn now_text(now: DateTime<Utc>) -> String {
    now.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_time(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|d| d.with_timezone(&Utc))
}

impl Ledger {
    /// Opens (creating if needed, 0600) the ledger in egress's own directory.
    pub fn open(egress_dir: &Path) -> Result<Self, LedgerError> {
        let path = egress_dir.join(LEDGER_FILE);
        let err = |message: String| LedgerError { path: path.clone(), message };
        // Create it 0600 before SQLite does, whatever the umask (SPEC T4).
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o600)))
            .map_err(|e| err(e.to_string()))?;
        let conn = Connection::open(&path).map_err(|e| err(e.to_string()))?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(|e| err(e.to_string()))?;
        // NORMAL for the hot path (a hop's check and count, its bytes, its
        // log line): durable across a crash of egress, not always across a
        // power loss. Decisions, revocations and ends are made FULL
        // ([`Ledger::durable`]).
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(|e| err(e.to_string()))?;
        conn.pragma_update(None, "foreign_keys", true).map_err(|e| err(e.to_string()))?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(|e| err(e.to_string()))?;
        conn.execute_batch(SCHEMA).map_err(|e| err(e.to_string()))?;
        Ok(Self { conn: Mutex::new(conn), path })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` with `synchronous = FULL`: what it commits survives a power
    /// loss (a human's decision, a revocation, a campaign's end).
    fn durable<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, String>) -> Result<T, String> {
        let mut conn = self.conn();
        conn.pragma_update(None, "synchronous", "FULL").map_err(db)?;
        let out = f(&mut conn);
        let back = conn.pragma_update(None, "synchronous", "NORMAL").map_err(db);
        let out = out?;
        back?;
        Ok(out)
    }

    /// Records the server's proposal (validated whole: nothing is stored
    /// when one part is refused). The same proposal again answers the
    /// stored record; a different one under the same grant or campaign id
    /// is refused.
    pub fn propose(&self, p: &GrantProposal, now: DateTime<Utc>) -> Result<GrantRecord, String> {
        let checked = check_proposal(p)?;
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db)?;
        if let Some(old) = read_row(&tx, checked.grant)? {
            let same = old.workspace_id == checked.workspace
                && old.campaign_id == checked.campaign
                && old.urls == checked.urls
                && old.hosts == checked.hosts
                && old.max_requests == p.max_requests
                && old.max_bytes == p.max_bytes
                && old.summary == checked.summary;
            if !same {
                return Err(format!("{} was proposed already with other terms", checked.grant));
            }
            return Ok(old.record(now));
        }
        let taken: Option<String> = tx
            .query_row("SELECT id FROM grants WHERE campaign = ?1", [checked.campaign.to_string()], |r| r.get(0))
            .optional()
            .map_err(db)?;
        if let Some(other) = taken {
            return Err(format!("{} runs under {other} already", checked.campaign));
        }
        let count = |sql: &str, since: &str| -> Result<u64, String> {
            tx.query_row(sql, [since], |r| r.get::<_, i64>(0)).map(|n| n.max(0) as u64).map_err(db)
        };
        let waiting = count("SELECT count(*) FROM grants WHERE decision IS NULL AND expires_at > ?1", &now_text(now))?;
        if waiting >= MAX_PENDING_PROPOSALS {
            return Err(format!(
                "{waiting} proposals already wait for a human (at most {MAX_PENDING_PROPOSALS}): decide or let them expire"
            ));
        }
        let hour_ago = now_text(now - chrono::Duration::hours(1));
        let recent = count("SELECT count(*) FROM grants WHERE proposed_at > ?1", &hour_ago)?;
        if recent >= MAX_PROPOSALS_PER_HOUR {
            return Err(format!(
                "{recent} proposals in the last hour (at most {MAX_PROPOSALS_PER_HOUR}): try again later"
            ));
        }
        let expires = now + chrono::Duration::minutes(i64::from(p.expires_in_minutes));
        tx.execute(
            "INSERT INTO grants (id, workspace, campaign, urls, hosts, max_requests, max_bytes, minutes, summary, \
             proposed_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                checked.grant.to_string(),
                checked.workspace.to_string(),
                checked.campaign.to_string(),
                json(&checked.urls),
                json(&checked.hosts),
                p.max_requests as i64,
                p.max_bytes as i64,
                i64::from(p.expires_in_minutes),
                checked.summary,
                now_text(now),
                now_text(expires),
            ],
        )
        .map_err(db)?;
        let row = read_row(&tx, checked.grant)?.ok_or_else(|| "the proposal vanished".to_owned())?;
        tx.commit().map_err(db)?;
        Ok(row.record(now))
    }

    /// One grant's record, whatever its workspace (the operator's view).
    pub fn get(&self, grant: GrantRef, now: DateTime<Utc>) -> Result<Option<GrantRecord>, String> {
        Ok(read_row(&self.conn(), grant)?.map(|r| r.record(now)))
    }

    /// One grant's record in `ws` (the server's view: other workspaces'
    /// grants do not exist for it).
    pub fn get_in(&self, ws: Uuid, grant: GrantRef, now: DateTime<Utc>) -> Result<Option<GrantRecord>, String> {
        Ok(self.get(grant, now)?.filter(|r| r.workspace_id == ws))
    }

    /// The grants, newest first, at most [`MAX_LISTED_GRANTS`].
    pub fn list(&self, now: DateTime<Utc>) -> Result<Vec<GrantRecord>, String> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!("SELECT {COLUMNS} FROM grants ORDER BY proposed_at DESC, id LIMIT {MAX_LISTED_GRANTS}"))
            .map_err(db)?;
        let rows = stmt.query_map([], Row::from_sql).map_err(db)?;
        rows.map(|r| r.map_err(db).map(|r| r.record(now))).collect()
    }

    /// A human's decision on a proposal, taken where the server cannot
    /// reach (`via` says where). Refused unless it is still a proposal.
    pub fn decide(&self, grant: GrantRef, approve: bool, via: &str, now: DateTime<Utc>) -> Result<GrantRecord, String> {
        self.durable(|conn| {
            let tx = conn.transaction().map_err(db)?;
            let row = read_row(&tx, grant)?.ok_or_else(|| format!("egress has no proposal {grant}"))?;
            match row.phase(now) {
                GrantPhase::Proposed => {}
                GrantPhase::Expired => return Err(format!("{grant} expired before it was confirmed")),
                other => return Err(format!("{grant} is decided already ({other:?})")),
            }
            let decision = if approve { "APPROVED" } else { "REFUSED" };
            tx.execute(
                "UPDATE grants SET decision = ?2, decided_at = ?3, decided_via = ?4 WHERE id = ?1",
                params![grant.to_string(), decision, now_text(now), via],
            )
            .map_err(db)?;
            let row = read_row(&tx, grant)?.ok_or_else(|| "the grant vanished".to_owned())?;
            tx.commit().map_err(db)?;
            Ok(row.record(now))
        })
    }

    /// Revokes a grant of `ws` (a proposal is refused instead). True when
    /// this changed anything.
    pub fn revoke(&self, ws: Uuid, grant: GrantRef, now: DateTime<Utc>) -> Result<bool, String> {
        let t = now_text(now);
        let (id, ws) = (grant.to_string(), ws.to_string());
        self.durable(|conn| {
            let tx = conn.transaction().map_err(db)?;
            let refused = tx
                .execute(
                    "UPDATE grants SET decision = 'REFUSED', decided_at = ?3, \
                     decided_via = 'revoked before confirmation' \
                     WHERE id = ?1 AND workspace = ?2 AND decision IS NULL",
                    params![id, ws, t],
                )
                .map_err(db)?;
            let revoked = tx
                .execute(
                    "UPDATE grants SET revoked_at = ?3 WHERE id = ?1 AND workspace = ?2 AND decision = 'APPROVED' \
                     AND revoked_at IS NULL",
                    params![id, ws, t],
                )
                .map_err(db)?;
            tx.commit().map_err(db)?;
            Ok(refused + revoked > 0)
        })
    }

    /// Ends a campaign of `ws`: every later fetch of it is refused. True
    /// when this changed anything.
    pub fn end_campaign(&self, ws: Uuid, campaign: CampaignRef, now: DateTime<Utc>) -> Result<bool, String> {
        let n = self.durable(|conn| {
            conn.execute(
                "UPDATE grants SET campaign_ended_at = ?3 WHERE campaign = ?1 AND workspace = ?2 \
                 AND campaign_ended_at IS NULL",
                params![campaign.to_string(), ws.to_string(), now_text(now)],
            )
            .map_err(db)
        })?;
        Ok(n > 0)
    }

    /// Checks one hop against the ledger and counts it, in one transaction.
    /// `first` is the URL the fetch asked (it must be one of the exact URLs);
    /// a redirect hop must stay inside the scope's hosts.
    pub fn start_request(
        &self,
        ids: &FetchIds,
        target: &Target,
        first: bool,
        now: DateTime<Utc>,
    ) -> Result<HopTerms, String> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(db)?;
        let grant = ids.grant;
        let row = read_row(&tx, grant)?
            .ok_or_else(|| format!("{grant} was never confirmed by a human: egress has no record of it (SPEC T2)"))?;
        if row.workspace_id != ids.workspace {
            return Err(format!("{grant} was never confirmed by a human for this workspace"));
        }
        if row.campaign_id != ids.campaign {
            return Err(format!("{} does not run under {grant}", ids.campaign));
        }
        match row.phase(now) {
            GrantPhase::Approved => {}
            GrantPhase::Proposed => {
                return Err(format!("{grant} waits for a human's confirmation (labfy grant approve {grant})"));
            }
            GrantPhase::Refused => return Err(format!("{grant} was refused by a human")),
            GrantPhase::Revoked => return Err(format!("{grant} is revoked")),
            GrantPhase::Expired => return Err(format!("{grant} has expired")),
            GrantPhase::Ended => return Err(format!("{} has ended: its grant allows nothing more", ids.campaign)),
        }
        if let Some(why) = scope_refusal(target, &row.hosts, &grant.to_string()) {
            return Err(why);
        }
        if first && !row.urls.iter().any(|u| u == target.url.as_str()) {
            return Err(format!(
                "`{}` is not one of the {} URLs a human granted under {grant}",
                shown(target.url.as_str()),
                row.urls.len()
            ));
        }
        if row.requests_used >= row.max_requests {
            return Err(format!(
                "the request budget of {grant} is spent ({} of {} requests)",
                row.requests_used, row.max_requests
            ));
        }
        if row.bytes_used >= row.max_bytes {
            return Err(format!("the byte budget of {grant} is spent ({} of {} bytes)", row.bytes_used, row.max_bytes));
        }
        tx.execute("UPDATE grants SET requests_used = requests_used + 1 WHERE id = ?1", [grant.to_string()])
            .map_err(db)?;
        tx.commit().map_err(db)?;
        Ok(HopTerms { hosts: row.hosts, max_bytes: row.max_bytes, bytes_used: row.bytes_used })
    }

    /// Adds body bytes received under a grant.
    pub fn add_bytes(&self, grant: GrantRef, n: u64) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        self.conn()
            .execute(
                "UPDATE grants SET bytes_used = bytes_used + ?2 WHERE id = ?1",
                params![grant.to_string(), n.min(i64::MAX as u64) as i64],
            )
            .map_err(db)?;
        Ok(())
    }

    /// Appends one fetch to the log — when its grant is in the ledger (a
    /// fetch naming an unknown grant is only traced), and for fetches that
    /// fetched nothing at most [`MAX_REFUSALS_LOGGED`] per grant.
    pub fn log_fetch(&self, ids: &FetchIds, out: &FetchOutcome, now: DateTime<Utc>) -> Result<bool, String> {
        let conn = self.conn();
        let grant = ids.grant.to_string();
        let known: Option<i64> =
            conn.query_row("SELECT 1 FROM grants WHERE id = ?1", [&grant], |r| r.get(0)).optional().map_err(db)?;
        if known.is_none() {
            return Ok(false);
        }
        if out.status != FetchStatus::Fetched {
            let refusals: i64 = conn
                .query_row(
                    "SELECT count(*) FROM fetch_log WHERE grant_id = ?1 AND status <> 'FETCHED'",
                    [&grant],
                    |r| r.get(0),
                )
                .map_err(db)?;
            if refusals as u64 >= MAX_REFUSALS_LOGGED {
                return Ok(false);
            }
        }
        conn.execute(
            "INSERT INTO fetch_log (at, grant_id, campaign, url, final_url, status, http_status, bytes, sha256, reason) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                now_text(now),
                grant,
                ids.campaign.to_string(),
                out.url,
                out.final_url,
                status_text(out.status),
                out.http_status,
                out.body_bytes as i64,
                out.body_sha256,
                out.reason,
            ],
        )
        .map_err(db)?;
        Ok(true)
    }

    /// A grant's fetch log in `ws`, oldest first: the newest
    /// [`MAX_LOG_ENTRIES`]. Empty for a grant egress does not know.
    pub fn fetch_log(&self, ws: Uuid, grant: GrantRef) -> Result<Vec<FetchLogEntry>, String> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT seq, at, campaign, url, final_url, status, http_status, bytes, sha256, reason FROM fetch_log \
                 WHERE grant_id = ?1 AND EXISTS (SELECT 1 FROM grants WHERE id = ?1 AND workspace = ?2) \
                 ORDER BY seq DESC LIMIT {MAX_LOG_ENTRIES}"
            ))
            .map_err(db)?;
        let rows = stmt
            .query_map(params![grant.to_string(), ws.to_string()], |r| {
                Ok(FetchLogEntry {
                    seq: r.get::<_, i64>(0)? as u64,
                    at: r.get(1)?,
                    campaign_id: parsed(r, 2)?,
                    url: r.get(3)?,
                    final_url: r.get(4)?,
                    status: parse_status(&r.get::<_, String>(5)?),
                    http_status: r.get(6)?,
                    bytes: r.get::<_, i64>(7)? as u64,
                    sha256: r.get(8)?,
                    reason: r.get(9)?,
                })
            })
            .map_err(db)?;
        let mut entries = rows.collect::<Result<Vec<_>, _>>().map_err(db)?;
        entries.reverse();
        Ok(entries)
    }
}

fn db(e: rusqlite::Error) -> String {
    format!("the grant ledger failed: {e}")
}

fn json(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".to_owned())
}

fn status_text(s: FetchStatus) -> &'static str {
    match s {
        FetchStatus::Fetched => "FETCHED",
        FetchStatus::Refused => "REFUSED",
        FetchStatus::Unavailable => "UNAVAILABLE",
        FetchStatus::Failed => "FAILED",
        FetchStatus::Stopped => "STOPPED",
    }
}

fn parse_status(s: &str) -> FetchStatus {
    match s {
        "FETCHED" => FetchStatus::Fetched,
        "UNAVAILABLE" => FetchStatus::Unavailable,
        "FAILED" => FetchStatus::Failed,
        "STOPPED" => FetchStatus::Stopped,
        _ => FetchStatus::Refused,
    }
}

/// A proposal, validated and normalised.
struct Checked {
    workspace: Uuid,
    grant: GrantRef,
    campaign: CampaignRef,
    urls: Vec<String>,
    hosts: Vec<String>,
    summary: String,
}

/// Validates a proposal whole: ids, 1–32 URLs each passing egress's own URL
/// rules and inside the hosts, 1–16 host patterns, bounded budget and
/// duration, a bounded one-line summary.
fn check_proposal(p: &GrantProposal) -> Result<Checked, String> {
    let ids = FetchIds::of_proposal(p);
    if p.hosts.is_empty() || p.hosts.len() > MAX_GRANT_HOSTS {
        return Err(format!("a grant names 1 to {MAX_GRANT_HOSTS} host patterns, not {}", p.hosts.len()));
    }
    for h in &p.hosts {
        labfy_store::check_host_pattern(h).map_err(|e| format!("host pattern `{}`: {e}", truncate_chars(h, 100)))?;
    }
    if p.urls.is_empty() || p.urls.len() > MAX_GRANT_URLS {
        return Err(format!("a grant names 1 to {MAX_GRANT_URLS} URLs, not {}", p.urls.len()));
    }
    let mut urls = Vec::with_capacity(p.urls.len());
    for u in &p.urls {
        let t = check_url(u)?;
        if let Some(why) = scope_refusal(&t, &p.hosts, "the proposed grant") {
            return Err(format!("`{}`: {why}", shown(u)));
        }
        let normal = t.url.to_string();
        if urls.contains(&normal) {
            return Err(format!("`{}` is named twice", shown(u)));
        }
        urls.push(normal);
    }
    if !(1..=MAX_GRANT_REQUESTS).contains(&p.max_requests) {
        return Err(format!("max_requests must be 1 to {MAX_GRANT_REQUESTS}"));
    }
    if !(1..=MAX_GRANT_BYTES).contains(&p.max_bytes) {
        return Err(format!("max_bytes must be 1 to {MAX_GRANT_BYTES}"));
    }
    if !(1..=MAX_GRANT_MINUTES).contains(&p.expires_in_minutes) {
        return Err(format!("expires_in_minutes must be 1 to {MAX_GRANT_MINUTES}"));
    }
    let summary: String =
        p.summary.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_owned();
    Ok(Checked {
        workspace: ids.workspace,
        grant: ids.grant,
        campaign: ids.campaign,
        urls,
        hosts: p.hosts.clone(),
        summary: truncate_chars(&summary, MAX_PROPOSAL_SUMMARY_CHARS),
    })
}

const COLUMNS: &str = "id, workspace, campaign, urls, hosts, max_requests, max_bytes, summary, proposed_at, \
                       expires_at, decision, decided_at, decided_via, revoked_at, campaign_ended_at, requests_used, \
                       bytes_used";

/// One row of `grants`.
struct Row {
    grant_id: GrantRef,
    workspace_id: Uuid,
    campaign_id: CampaignRef,
    urls: Vec<String>,
    hosts: Vec<String>,
    max_requests: u64,
    max_bytes: u64,
    summary: String,
    proposed_at: String,
    expires_at: String,
    decision: Option<String>,
    decided_at: Option<String>,
    decided_via: Option<String>,
    revoked_at: Option<String>,
    campaign_ended_at: Option<String>,
    requests_used: u64,
    bytes_used: u64,
}

impl Row {
    fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        let list = |i: usize| -> rusqlite::Result<Vec<String>> {
            let text: String = r.get(i)?;
            Ok(serde_json::from_str(&text).unwrap_or_default())
        };
        Ok(Self {
            grant_id: parsed(r, 0)?,
            workspace_id: parsed(r, 1)?,
            campaign_id: parsed(r, 2)?,
            urls: list(3)?,
            hosts: list(4)?,
            max_requests: r.get::<_, i64>(5)? as u64,
            max_bytes: r.get::<_, i64>(6)? as u64,
            summary: r.get(7)?,
            proposed_at: r.get(8)?,
            expires_at: r.get(9)?,
            decision: r.get(10)?,
            decided_at: r.get(11)?,
            decided_via: r.get(12)?,
            revoked_at: r.get(13)?,
            campaign_ended_at: r.get(14)?,
            requests_used: r.get::<_, i64>(15)? as u64,
            bytes_used: r.get::<_, i64>(16)? as u64,
        })
    }

    /// Where it stands as of `now`; an unreadable expiry counts as expired.
    fn phase(&self, now: DateTime<Utc>) -> GrantPhase {
        let expired = parse_time(&self.expires_at).is_none_or(|t| now >= t);
        match self.decision.as_deref() {
            Some("REFUSED") => GrantPhase::Refused,
            Some(_) if self.revoked_at.is_some() => GrantPhase::Revoked,
            Some(_) if self.campaign_ended_at.is_some() => GrantPhase::Ended,
            _ if expired => GrantPhase::Expired,
            Some(_) => GrantPhase::Approved,
            None => GrantPhase::Proposed,
        }
    }

    /// The record as of `now`.
    fn record(self, now: DateTime<Utc>) -> GrantRecord {
        let phase = self.phase(now);
        GrantRecord {
            grant_id: self.grant_id,
            workspace_id: self.workspace_id,
            campaign_id: self.campaign_id,
            urls: self.urls,
            hosts: self.hosts,
            max_requests: self.max_requests,
            max_bytes: self.max_bytes,
            summary: self.summary,
            phase,
            proposed_at: self.proposed_at,
            expires_at: self.expires_at,
            decided_at: self.decided_at,
            decided_via: self.decided_via,
            revoked_at: self.revoked_at,
            campaign_ended_at: self.campaign_ended_at,
            requests_used: self.requests_used,
            bytes_used: self.bytes_used,
            confirm_url: None,
        }
    }
}

/// Column `i` parsed by its type's own rules: a row that does not parse is
/// an error, never a value of another kind.
fn parsed<T>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<T>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let text: String = r.get(i)?;
    text.parse().map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

fn read_row(conn: &Connection, grant: GrantRef) -> Result<Option<Row>, String> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM grants WHERE id = ?1"), [grant.to_string()], Row::from_sql)
        .optional()
        .map_err(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u128) -> FetchIds {
        FetchIds {
            workspace: Uuid::from_u128(1),
            campaign: CampaignRef::new(Uuid::from_u128(100 + n)),
            grant: GrantRef::new(Uuid::from_u128(200 + n)),
        }
    }

    fn proposal(i: &FetchIds, urls: &[&str]) -> GrantProposal {
        GrantProposal {
            workspace_id: i.workspace,
            grant_id: i.grant,
            campaign_id: i.campaign,
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            hosts: vec!["a.example.org".into(), "*.example.net".into()],
            max_requests: 3,
            max_bytes: 1000,
            expires_in_minutes: 30,
            summary: "Qui possède\nDurand ?".into(),
        }
    }

    fn target(u: &str) -> Target {
        check_url(u).unwrap()
    }

    #[test]
    fn a_proposal_allows_nothing_until_a_human_approves_it() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(LEDGER_FILE)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let now = Utc::now();
        let i = ids(1);
        let r = l.propose(&proposal(&i, &["https://a.example.org/x#frag", "https://b.example.net/y"]), now).unwrap();
        assert_eq!(r.phase, GrantPhase::Proposed);
        assert_eq!(r.urls, ["https://a.example.org/x", "https://b.example.net/y"], "normalised, no fragment");
        assert_eq!(r.summary, "Qui possède Durand ?", "one line");
        let e = l.start_request(&i, &target("https://a.example.org/x"), true, now).unwrap_err();
        assert!(e.contains("waits for a human"), "{e}");
        // The same proposal again: the same record; other terms: refused.
        assert_eq!(l.propose(&proposal(&i, &["https://a.example.org/x", "https://b.example.net/y"]), now).unwrap(), r);
        let e = l.propose(&proposal(&i, &["https://a.example.org/other"]), now).unwrap_err();
        assert!(e.contains("other terms"), "{e}");
        let r = l.decide(i.grant, true, "terminal", now).unwrap();
        assert_eq!((r.phase, r.decided_via.as_deref()), (GrantPhase::Approved, Some("terminal")));
        assert!(l.decide(i.grant, false, "terminal", now).unwrap_err().contains("decided already"));
        let terms = l.start_request(&i, &target("https://a.example.org/x"), true, now).unwrap();
        assert_eq!(terms.max_bytes, 1000);
        assert_eq!(l.get(i.grant, now).unwrap().unwrap().requests_used, 1);
    }

    #[test]
    fn every_hop_is_checked_against_the_exact_terms() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(dir.path()).unwrap();
        let now = Utc::now();
        let i = ids(2);
        l.propose(&proposal(&i, &["https://a.example.org/x"]), now).unwrap();
        l.decide(i.grant, true, "terminal", now).unwrap();
        // The first hop: only one of the exact URLs, even on an in-scope host.
        let e = l.start_request(&i, &target("https://a.example.org/other"), true, now).unwrap_err();
        assert!(e.contains("not one of the 1 URLs"), "{e}");
        // A redirect hop: inside the hosts.
        l.start_request(&i, &target("https://deep.example.net/z"), false, now).unwrap();
        let e = l.start_request(&i, &target("https://evil.example/"), false, now).unwrap_err();
        assert!(e.contains("outside the scope"), "{e}");
        // Another campaign or workspace than the approved ones.
        let other = FetchIds { campaign: ids(9).campaign, ..i };
        assert!(
            l.start_request(&other, &target("https://a.example.org/x"), true, now)
                .unwrap_err()
                .contains("does not run")
        );
        let other = FetchIds { workspace: Uuid::from_u128(7), ..i };
        assert!(l.start_request(&other, &target("https://a.example.org/x"), true, now).is_err());
        // An unknown grant (forged by the server in its own database).
        let forged = ids(3);
        let e = l.start_request(&forged, &target("https://a.example.org/x"), true, now).unwrap_err();
        assert!(e.contains("never confirmed by a human"), "{e}");
        // Budget: 3 requests in all (the redirect hop above was one), persisted.
        l.start_request(&i, &target("https://a.example.org/x"), true, now).unwrap();
        l.start_request(&i, &target("https://a.example.org/x"), true, now).unwrap();
        let e = l.start_request(&i, &target("https://a.example.org/x"), true, now).unwrap_err();
        assert!(e.contains("3 of 3"), "{e}");
        drop(l);
        let l = Ledger::open(dir.path()).unwrap();
        assert!(l.start_request(&i, &target("https://a.example.org/x"), true, now).unwrap_err().contains("3 of 3"));
    }

    #[test]
    fn revocation_end_and_expiry_stop_a_grant() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(dir.path()).unwrap();
        let now = Utc::now();
        let u = "https://a.example.org/x";
        let (a, b, c, d) = (ids(4), ids(5), ids(6), ids(7));
        for i in [&a, &b, &c, &d] {
            l.propose(&proposal(i, &[u]), now).unwrap();
        }
        for i in [&a, &b, &c] {
            l.decide(i.grant, true, "confirmation page", now).unwrap();
        }
        assert!(l.end_campaign(a.workspace, a.campaign, now).unwrap());
        assert!(l.start_request(&a, &target(u), true, now).unwrap_err().contains("has ended"));
        assert!(l.revoke(b.workspace, b.grant, now).unwrap());
        assert!(!l.revoke(b.workspace, b.grant, now).unwrap(), "revoked once");
        assert!(l.start_request(&b, &target(u), true, now).unwrap_err().contains("revoked"));
        let later = now + chrono::Duration::minutes(31);
        assert!(l.start_request(&c, &target(u), true, later).unwrap_err().contains("expired"));
        // A proposal revoked before its confirmation is refused, and can no
        // longer be approved.
        assert!(l.revoke(d.workspace, d.grant, now).unwrap());
        assert_eq!(l.get(d.grant, now).unwrap().unwrap().phase, GrantPhase::Refused);
        assert!(l.decide(d.grant, true, "terminal", now).is_err());
        // A proposal whose time ran out cannot be approved.
        let e = ids(8);
        l.propose(&proposal(&e, &[u]), now).unwrap();
        assert!(l.decide(e.grant, true, "terminal", later).unwrap_err().contains("expired"));
    }

    #[test]
    fn bad_proposals_are_refused_whole() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(dir.path()).unwrap();
        let now = Utc::now();
        let i = ids(10);
        let cases: Vec<(GrantProposal, &str)> = vec![
            (proposal(&i, &[]), "1 to 32 URLs"),
            (proposal(&i, &["https://elsewhere.example/"]), "outside the scope of the proposed grant"),
            (proposal(&i, &["ftp://a.example.org/"]), "scheme"),
            (proposal(&i, &["https://a.example.org/x", "https://a.example.org/x#y"]), "named twice"),
            (GrantProposal { hosts: vec![], ..proposal(&i, &["https://a.example.org/"]) }, "host patterns"),
            (GrantProposal { max_requests: 0, ..proposal(&i, &["https://a.example.org/"]) }, "max_requests"),
            (GrantProposal { max_bytes: 0, ..proposal(&i, &["https://a.example.org/"]) }, "max_bytes"),
            (GrantProposal { expires_in_minutes: 0, ..proposal(&i, &["https://a.example.org/"]) }, "expires"),
        ];
        for (p, why) in cases {
            let e = l.propose(&p, now).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        assert!(l.list(now).unwrap().is_empty(), "nothing stored");
        // One campaign, one grant.
        l.propose(&proposal(&i, &["https://a.example.org/"]), now).unwrap();
        let other = FetchIds { grant: ids(11).grant, ..i };
        assert!(l.propose(&proposal(&other, &["https://a.example.org/"]), now).unwrap_err().contains("runs under"));
    }

    /// A compromised server proposing without end is stopped: so many may
    /// wait for a human, so many may come in an hour.
    #[test]
    fn proposals_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(dir.path()).unwrap();
        let now = Utc::now();
        for n in 0..MAX_PENDING_PROPOSALS as u128 {
            l.propose(&proposal(&ids(1000 + n), &["https://a.example.org/"]), now).unwrap();
        }
        let e = l.propose(&proposal(&ids(2000), &["https://a.example.org/"]), now).unwrap_err();
        assert!(e.contains("wait for a human"), "{e}");
        // Decided ones no longer wait; the hourly bound still holds.
        for n in 0..MAX_PENDING_PROPOSALS as u128 {
            l.decide(ids(1000 + n).grant, false, "terminal", now).unwrap();
        }
        for n in 0..(MAX_PROPOSALS_PER_HOUR - MAX_PENDING_PROPOSALS) as u128 {
            let g = ids(3000 + n);
            l.propose(&proposal(&g, &["https://a.example.org/"]), now).unwrap();
            l.decide(g.grant, false, "terminal", now).unwrap();
        }
        let e = l.propose(&proposal(&ids(4000), &["https://a.example.org/"]), now).unwrap_err();
        assert!(e.contains("in the last hour"), "{e}");
        let later = now + chrono::Duration::minutes(61);
        l.propose(&proposal(&ids(4001), &["https://a.example.org/"]), later).unwrap();
    }

    #[test]
    fn the_log_is_append_only_and_the_terms_are_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let l = Ledger::open(dir.path()).unwrap();
        let now = Utc::now();
        let i = ids(12);
        l.propose(&proposal(&i, &["https://a.example.org/"]), now).unwrap();
        let out = FetchOutcome {
            status: FetchStatus::Fetched,
            reason: None,
            url: "https://a.example.org/".into(),
            final_url: Some("https://a.example.org/".into()),
            redirects: vec![],
            http_status: Some(200),
            headers: vec![],
            content_type: None,
            body_handle: None,
            body_bytes: 5,
            body_sha256: Some("ab".into()),
            started_at: now_text(now),
            elapsed_ms: 1,
            isolation: String::new(),
        };
        assert!(l.log_fetch(&i, &out, now).unwrap());
        assert!(!l.log_fetch(&ids(13), &out, now).unwrap(), "an unknown grant is not logged");
        let log = l.fetch_log(i.workspace, i.grant).unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!((log[0].status, log[0].http_status, log[0].bytes), (FetchStatus::Fetched, Some(200), 5));
        assert!(l.fetch_log(Uuid::from_u128(99), i.grant).unwrap().is_empty(), "another workspace sees nothing");
        let conn = l.conn();
        for sql in [
            "UPDATE fetch_log SET status = 'REFUSED'",
            "DELETE FROM fetch_log",
            "UPDATE grants SET urls = '[\"https://evil.example/\"]'",
            "UPDATE grants SET max_requests = 1000",
            "UPDATE grants SET requests_used = requests_used - 1",
            "DELETE FROM grants",
        ] {
            assert!(conn.execute(sql, []).is_err(), "{sql} was allowed");
        }
        conn.execute("UPDATE grants SET decision = 'APPROVED'", []).unwrap();
        assert!(conn.execute("UPDATE grants SET decision = 'REFUSED'", []).is_err(), "decided once");
    }
}
