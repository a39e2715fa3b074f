//! Cases as the analyst manages them (SPEC C1): investigations created,
//! renamed, described, archived and brought back; workspaces renamed and
//! archived; a `REAL` workspace created with its first investigation. Each
//! change is one transaction with its audit row; archiving deletes nothing.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, params};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::model::WorkspaceClass;
use crate::now_rfc3339;
use crate::primitives::{audit, check_text};
use crate::reads::Reads;

/// Longest workspace name, in characters.
pub const MAX_WORKSPACE_NAME_CHARS: usize = 200;
/// Longest investigation title, in characters.
pub const MAX_INVESTIGATION_TITLE_CHARS: usize = 200;
/// Longest investigation summary, in characters.
pub const MAX_INVESTIGATION_SUMMARY_CHARS: usize = 2000;

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

fn check_summary(summary: &str) -> Result<()> {
    if summary.is_empty() {
        return Ok(());
    }
    check_text("summary", summary, MAX_INVESTIGATION_SUMMARY_CHARS)
}

/// Creates an investigation in workspace `ws`.
pub(crate) fn create_investigation(
    conn: &mut Connection,
    ws: Uuid,
    title: &str,
    summary: &str,
    actor: &str,
) -> Result<ObjectRef> {
    check_text("title", title, MAX_INVESTIGATION_TITLE_CHARS)?;
    check_summary(summary)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.workspace(ws)?;
    let inv = Uuid::now_v7();
    tx.execute(
        "INSERT INTO investigations (id, workspace_id, title, summary, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![inv.to_string(), ws.to_string(), title.trim(), summary.trim(), now_rfc3339()],
    )?;
    let r = ObjectRef::new(RefKind::Investigation, inv);
    audit(&tx, actor, "investigation.create", Some(ws), Some(&r), &serde_json::json!({"title": title.trim()}))?;
    tx.commit()?;
    Ok(r)
}

/// Changes an investigation's title and/or summary.
pub(crate) fn update_investigation(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    title: Option<&str>,
    summary: Option<&str>,
    actor: &str,
) -> Result<()> {
    require_investigation(inv)?;
    if let Some(t) = title {
        check_text("title", t, MAX_INVESTIGATION_TITLE_CHARS)?;
    }
    if let Some(s) = summary {
        check_summary(s)?;
    }
    if title.is_none() && summary.is_none() {
        return Err(StoreError::Invalid("nothing to change: give a title, a summary or both".into()));
    }
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let id = inv.id().to_string();
    if let Some(t) = title {
        tx.execute("UPDATE investigations SET title = ?2 WHERE id = ?1", params![id, t.trim()])?;
    }
    if let Some(s) = summary {
        tx.execute("UPDATE investigations SET summary = ?2 WHERE id = ?1", params![id, s.trim()])?;
    }
    audit(
        &tx,
        actor,
        "investigation.update",
        Some(ws),
        Some(inv),
        &serde_json::json!({"title": title.map(str::trim), "summary": summary.map(str::trim)}),
    )?;
    tx.commit()?;
    Ok(())
}

/// Archives an investigation (`archived`), or brings it back.
pub(crate) fn archive_investigation(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    archived: bool,
    actor: &str,
) -> Result<()> {
    require_investigation(inv)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let at = archived.then(now_rfc3339);
    tx.execute("UPDATE investigations SET archived_at = ?2 WHERE id = ?1", params![inv.id().to_string(), at])?;
    let action = if archived { "investigation.archive" } else { "investigation.unarchive" };
    audit(&tx, actor, action, Some(ws), Some(inv), &serde_json::json!({}))?;
    tx.commit()?;
    Ok(())
}

/// Renames a workspace.
pub(crate) fn rename_workspace(conn: &mut Connection, ws: Uuid, name: &str, actor: &str) -> Result<()> {
    check_text("workspace name", name, MAX_WORKSPACE_NAME_CHARS)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.workspace(ws)?;
    tx.execute("UPDATE workspaces SET name = ?2 WHERE id = ?1", params![ws.to_string(), name.trim()])?;
    let r = ObjectRef::new(RefKind::Workspace, ws);
    audit(&tx, actor, "workspace.rename", Some(ws), Some(&r), &serde_json::json!({"name": name.trim()}))?;
    tx.commit()?;
    Ok(())
}

/// Archives a workspace (`archived`), or brings it back.
pub(crate) fn archive_workspace(conn: &mut Connection, ws: Uuid, archived: bool, actor: &str) -> Result<()> {
    let tx = conn.transaction()?;
    Reads { conn: &tx }.workspace(ws)?;
    let at = archived.then(now_rfc3339);
    tx.execute("UPDATE workspaces SET archived_at = ?2 WHERE id = ?1", params![ws.to_string(), at])?;
    let r = ObjectRef::new(RefKind::Workspace, ws);
    let action = if archived { "workspace.archive" } else { "workspace.unarchive" };
    audit(&tx, actor, action, Some(ws), Some(&r), &serde_json::json!({}))?;
    tx.commit()?;
    Ok(())
}

/// Whether `ws` may be opened: ready and in use. The supervisor asks the
/// same before it restarts the server on it (SPEC C1).
pub fn check_openable(w: &crate::WorkspaceSummary) -> Result<()> {
    if w.status != "READY" {
        return Err(StoreError::Conflict(format!("{} is not ready ({})", w.id, w.status)));
    }
    if w.archived_at.is_some() {
        return Err(StoreError::Conflict(format!("{} is archived; bring it back first", w.id)));
    }
    Ok(())
}

/// Records that the analyst browsing `from` asked to open `to` (SPEC C1):
/// checked, audited in both workspaces; the switch itself is the
/// supervisor's. Answers the workspace to open.
pub(crate) fn request_open(
    conn: &mut Connection,
    from: Uuid,
    to: Uuid,
    actor: &str,
) -> Result<crate::WorkspaceSummary> {
    let tx = conn.transaction()?;
    let reads = Reads { conn: &tx };
    reads.workspace(from)?;
    let target = reads.workspace(to)?;
    if from == to {
        return Err(StoreError::Conflict(format!("{} is already open", target.id)));
    }
    check_openable(&target)?;
    let detail = serde_json::json!({"from": ObjectRef::new(RefKind::Workspace, from), "to": target.id});
    audit(&tx, actor, "workspace.open", Some(from), Some(&target.id), &detail)?;
    audit(&tx, actor, "workspace.open", Some(to), Some(&target.id), &detail)?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::WORKSPACE_OPEN_REQUESTED);
    Ok(target)
}

fn require_investigation(inv: &ObjectRef) -> Result<()> {
    if inv.kind() != RefKind::Investigation {
        return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
    }
    Ok(())
}

/// `jobs.kind` of an export from the UI.
pub const EXPORT_JOB: &str = "export";

/// Starts a job of `kind` over an investigation (an export from the UI):
/// `RUNNING`, ended by [`end_job`].
pub(crate) fn start_job(
    conn: &mut Connection,
    ws: Uuid,
    inv: &ObjectRef,
    kind: &str,
    actor: &str,
) -> Result<ObjectRef> {
    require_investigation(inv)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, inv)?;
    let job = Uuid::now_v7();
    let now = now_rfc3339();
    tx.execute(
        "INSERT INTO jobs (id, investigation_id, kind, status, progress, detail, created_at, updated_at, stats)
         VALUES (?1, ?2, ?3, 'RUNNING', 0, '', ?4, ?4, '{}')",
        params![job.to_string(), inv.id().to_string(), kind, now],
    )?;
    let r = ObjectRef::new(RefKind::Job, job);
    audit(&tx, actor, &format!("{kind}.start"), Some(ws), Some(&r), &serde_json::json!({"investigation": inv}))?;
    tx.commit()?;
    Ok(r)
}

/// Ends a running job: `SUCCEEDED` with its figures, or `FAILED` with why.
pub(crate) fn end_job(
    conn: &mut Connection,
    ws: Uuid,
    job: &ObjectRef,
    outcome: std::result::Result<&serde_json::Value, &str>,
    actor: &str,
) -> Result<()> {
    if job.kind() != RefKind::Job {
        return Err(StoreError::Invalid(format!("expected a `job:` reference, got `{job}`")));
    }
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, job)?;
    let (status, progress, detail, stats) = match outcome {
        Ok(stats) => ("SUCCEEDED", 1.0, String::new(), stats.to_string()),
        Err(why) => ("FAILED", 0.0, why.chars().take(1000).collect(), "{}".to_owned()),
    };
    let n = tx.execute(
        "UPDATE jobs SET status = ?2, progress = ?3, detail = ?4, stats = ?5, updated_at = ?6
         WHERE id = ?1 AND status = 'RUNNING'",
        params![job.id().to_string(), status, progress, detail, stats, now_rfc3339()],
    )?;
    if n == 0 {
        return Err(StoreError::Conflict(format!("{job} is not running")));
    }
    let kind: String = tx.query_row("SELECT kind FROM jobs WHERE id = ?1", [job.id().to_string()], |r| r.get(0))?;
    audit(
        &tx,
        actor,
        &format!("{kind}.end"),
        Some(ws),
        Some(job),
        &serde_json::json!({"status": status, "detail": detail}),
    )?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::JOB_ENDED);
    Ok(())
}

/// The jobs of `kind` (`import`, `export`) that `actor` started and that are
/// still `RUNNING`, oldest first, each with its workspace: at the workspace
/// server's start, those its previous run left (SPEC K3, K4).
pub(crate) fn running_jobs_of(conn: &Connection, kind: &str, actor: &str) -> Result<Vec<(Uuid, ObjectRef)>> {
    let ids: Vec<String> = conn
        .prepare(
            "SELECT j.id FROM jobs j WHERE j.kind = ?1 AND j.status = 'RUNNING' AND EXISTS (
                 SELECT 1 FROM audit_log a WHERE a.action = ?1 || '.start' AND a.actor = ?2
                 AND a.object_ref = 'job:' || j.id)
             ORDER BY j.created_at",
        )?
        .query_map(params![kind, actor], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    ids.into_iter()
        .map(|id| {
            let job = ObjectRef::new(
                RefKind::Job,
                Uuid::try_parse(&id).map_err(|e| StoreError::Damaged(format!("job id {id}: {e}")))?,
            );
            Ok((Reads { conn }.workspace_of(&job)?, job))
        })
        .collect()
}

/// Ends every export job `actor` started that is still `RUNNING` — the
/// workspace server's, at its start: an export runs inside the server, so
/// one left running died with it (SPEC K3, K4). Each ends `FAILED` with
/// `why`, audited like any end.
pub(crate) fn settle_interrupted_exports(conn: &mut Connection, actor: &str, why: &str) -> Result<Vec<ObjectRef>> {
    let jobs = running_jobs_of(conn, EXPORT_JOB, actor)?;
    for (ws, job) in &jobs {
        end_job(conn, *ws, job, Err(why), "labfy-server")?;
    }
    Ok(jobs.into_iter().map(|(_, job)| job).collect())
}

/// Ends as `FAILED` the import and export jobs of workspace `ws` left
/// `RUNNING` with no progress since `stale_before` (RFC 3339): a server that
/// stopped mid-upload or mid-export. An import that `labfy import` is
/// running moves after every file, so it is not stale. Returns how many.
pub(crate) fn abandon_stale_jobs(conn: &mut Connection, ws: Uuid, stale_before: &str) -> Result<usize> {
    let tx = conn.transaction()?;
    let jobs: Vec<String> = tx
        .prepare(
            "SELECT j.id FROM jobs j JOIN investigations i ON i.id = j.investigation_id
             WHERE i.workspace_id = ?1 AND j.status = 'RUNNING' AND j.kind IN ('import', 'export')
               AND j.updated_at < ?2 AND i.received_at IS NULL",
        )?
        .query_map(params![ws.to_string(), stale_before], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let now = now_rfc3339();
    for id in &jobs {
        tx.execute(
            "UPDATE jobs SET status = 'FAILED', updated_at = ?2,
                 detail = substr(detail || ' — interrupted: the server stopped before it ended', 1, 1000)
             WHERE id = ?1",
            params![id, now],
        )?;
        let job = ObjectRef::new(
            RefKind::Job,
            Uuid::parse_str(id).map_err(|e| StoreError::Damaged(format!("job id {id}: {e}")))?,
        );
        audit(&tx, "labfy-server", "job.interrupted", Some(ws), Some(&job), &serde_json::json!({}))?;
    }
    tx.commit()?;
    Ok(jobs.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[test]
    fn an_investigation_is_created_renamed_archived_and_brought_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let (ws, _) = store.create_real_workspace("Dossier", "t").unwrap();
        let ws = ws.id();
        let inv = store.create_investigation(ws, "  Piste B ", "Les comptes", "analyste").unwrap();
        let find = |s: &Store| s.reads().investigations(ws).unwrap().into_iter().find(|i| i.id == inv).unwrap();
        let i = find(&store);
        assert_eq!((i.title.as_str(), i.summary.as_str(), i.archived_at.is_none()), ("Piste B", "Les comptes", true));
        store.update_investigation(ws, &inv, Some("Piste C"), None, "analyste").unwrap();
        assert_eq!(find(&store).title, "Piste C");
        assert_eq!(find(&store).summary, "Les comptes", "an absent field is left as it was");
        store.archive_investigation(ws, &inv, true, "analyste").unwrap();
        assert!(find(&store).archived_at.is_some());
        store.archive_investigation(ws, &inv, false, "analyste").unwrap();
        assert!(find(&store).archived_at.is_none());
        store.rename_workspace(ws, "Dossier Durand", "analyste").unwrap();
        assert_eq!(store.reads().workspace(ws).unwrap().name, "Dossier Durand");
        store.archive_workspace(ws, true, "analyste").unwrap();
        assert!(store.reads().workspace(ws).unwrap().archived_at.is_some());
        let actions: Vec<String> = store
            .conn
            .prepare("SELECT action FROM audit_log WHERE action LIKE 'investigation.%' OR action LIKE 'workspace.%' ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            actions,
            [
                "workspace.create",
                "investigation.create",
                "investigation.update",
                "investigation.archive",
                "investigation.unarchive",
                "workspace.rename",
                "workspace.archive"
            ]
        );
    }

    #[test]
    fn bad_titles_and_foreign_investigations_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let (a, inv_a) = store.create_real_workspace("A", "t").unwrap();
        let (b, _) = store.create_real_workspace("B", "t").unwrap();
        for bad in ["", "   ", "a\u{1b}b", &"x".repeat(201)] {
            assert!(matches!(store.create_investigation(a.id(), bad, "", "t"), Err(StoreError::Invalid(_))), "{bad:?}");
        }
        assert!(matches!(
            store.update_investigation(b.id(), &inv_a, Some("x"), None, "t"),
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(store.archive_investigation(b.id(), &inv_a, true, "t"), Err(StoreError::NotFound(_))));
        assert!(matches!(store.update_investigation(a.id(), &inv_a, None, None, "t"), Err(StoreError::Invalid(_))));
        assert!(store.create_investigation(Uuid::now_v7(), "x", "", "t").is_err());
    }

    #[test]
    fn a_stale_import_is_ended_at_the_next_start_and_a_moving_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let (ws, inv) = store.create_real_workspace("A", "t").unwrap();
        let stale = store.start_import(ws.id(), &inv, None, false, "t").unwrap();
        let moving = store.start_import(ws.id(), &inv, None, false, "t").unwrap();
        store
            .conn
            .execute("UPDATE jobs SET updated_at = '2020-01-01T00:00:00.000Z' WHERE id = ?1", [stale.id().to_string()])
            .unwrap();
        assert_eq!(store.abandon_stale_jobs(ws.id(), "2025-01-01T00:00:00.000Z").unwrap(), 1);
        let status = |s: &Store, j: &ObjectRef| s.reads().job(ws.id(), j).unwrap().status;
        assert_eq!(status(&store, &stale), "FAILED");
        assert_eq!(status(&store, &moving), "RUNNING");
        assert!(store.reads().job(ws.id(), &stale).unwrap().detail.contains("interrupted"));
    }
}
