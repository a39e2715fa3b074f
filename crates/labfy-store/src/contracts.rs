//! A contract change voids what was approved, or waits for approval, under
//! the old one — at once, not when someone next decides (SPEC R5; issue 45,
//! L3).
//!
//! The workspace server calls [`void_under_old_contracts`] at its start with
//! the fingerprints of the catalog it publishes. Under another fingerprint:
//! a pending research request (its `research.prepare`) and a pending tool
//! request (its proposing tool) become `VOID`; an active grant (the
//! `research.prepare` or `web.fetch` it was granted under) is revoked, its
//! unfinished campaigns stopped. Each with an audit row saying which
//! contract changed. A tool the catalog does not publish now (the optional
//! catalog off) voids nothing: its requests cannot be decided anyway.

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, params};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;
use crate::primitives::audit;

/// The tools a grant authorises: a change of either voids it.
const GRANT_TOOLS: [&str; 2] = ["research.prepare", "web.fetch"];

/// What a contract change voided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Voided {
    /// Research requests now `VOID`.
    pub research_requests: Vec<ObjectRef>,
    /// Tool requests now `VOID`.
    pub tool_requests: Vec<ObjectRef>,
    /// Grants revoked.
    pub grants: Vec<ObjectRef>,
}

impl Voided {
    /// Whether nothing was voided.
    pub fn is_empty(&self) -> bool {
        self.research_requests.is_empty() && self.tool_requests.is_empty() && self.grants.is_empty()
    }
}

/// The tool that proposes a tool request of `kind`.
fn proposing_tool(kind: &str) -> Option<&'static str> {
    match kind {
        "install" => Some("tool.provision.propose"),
        "integrate" => Some("tool.integration.propose"),
        "change" | "promote" => Some("code.change.propose"),
        _ => None,
    }
}

fn parse(kind: RefKind, id: &str) -> Result<ObjectRef> {
    Uuid::try_parse(id)
        .map(|u| ObjectRef::new(kind, u))
        .map_err(|e| StoreError::Damaged(format!("{kind} id {id}: {e}")))
}

/// See the module. `current(tool)` is the fingerprint the catalog publishes
/// for `tool` now, `None` when it publishes no such tool.
pub(crate) fn void_under_old_contracts(
    conn: &mut Connection,
    current: &dyn Fn(&str) -> Option<String>,
    actor: &str,
) -> Result<Voided> {
    let tx = conn.transaction()?;
    let now = now_rfc3339();
    let mut voided = Voided::default();

    if let Some(prepare) = current("research.prepare") {
        let stale: Vec<(String, String, String)> = tx
            .prepare(
                "SELECT id, workspace_id, contract_fingerprint FROM research_requests
                 WHERE status = 'PENDING' AND contract_fingerprint <> ?1
                   AND investigation_id IN (SELECT id FROM investigations WHERE received_at IS NULL)",
            )?
            .query_map([&prepare], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        for (id, ws, was) in stale {
            let note = "the contract of research.prepare changed since it was prepared (R5); prepare it again";
            tx.execute(
                "UPDATE research_requests SET status = 'VOID', decided_at = ?2, decided_by = ?3, decision_note = ?4
                 WHERE id = ?1 AND status = 'PENDING'",
                params![id, now, actor, note],
            )?;
            let r = parse(RefKind::ResearchRequest, &id)?;
            let ws = Uuid::try_parse(&ws).map_err(|e| StoreError::Damaged(format!("workspace id {ws}: {e}")))?;
            audit(
                &tx,
                actor,
                "research.void",
                Some(ws),
                Some(&r),
                &serde_json::json!({"prepared_under": was, "current": prepare}),
            )?;
            voided.research_requests.push(r);
        }
    }

    let pending: Vec<(String, String, String, String)> = tx
        .prepare(
            "SELECT id, workspace_id, kind, contract_fingerprint FROM tool_requests WHERE status = 'PENDING'
             AND investigation_id IN (SELECT id FROM investigations WHERE received_at IS NULL)",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, ws, kind, was) in pending {
        let Some(tool) = proposing_tool(&kind) else { continue };
        let Some(now_fp) = current(tool).filter(|fp| *fp != was) else { continue };
        let note = format!("the contract of {tool} changed since it was proposed (R5)");
        tx.execute(
            "UPDATE tool_requests SET status = 'VOID', decided_at = ?2, decided_by = ?3, decision_note = ?4
             WHERE id = ?1 AND status = 'PENDING'",
            params![id, now, actor, note],
        )?;
        let r = parse(RefKind::ToolRequest, &id)?;
        let ws = Uuid::try_parse(&ws).map_err(|e| StoreError::Damaged(format!("workspace id {ws}: {e}")))?;
        audit(
            &tx,
            actor,
            "tool_request.void",
            Some(ws),
            Some(&r),
            &serde_json::json!({"tool": tool, "proposed_under": was, "current": now_fp}),
        )?;
        voided.tool_requests.push(r);
    }

    let active: Vec<(String, String, String)> = tx
        .prepare(
            "SELECT id, workspace_id, contract_fingerprints FROM grants WHERE revoked_at IS NULL AND expires_at > ?1
             AND investigation_id IN (SELECT id FROM investigations WHERE received_at IS NULL)",
        )?
        .query_map([&now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, ws, fingerprints) in active {
        let fingerprints: serde_json::Value = serde_json::from_str(&fingerprints)
            .map_err(|e| StoreError::Damaged(format!("grant {id}'s contract fingerprints: {e}")))?;
        let changed: Vec<&str> = GRANT_TOOLS
            .into_iter()
            .filter(|tool| {
                // `{catalog, tools: {name: fp}}` as the server records it
                // (an older shape kept the names at the top).
                let was = fingerprints["tools"][*tool].as_str().or_else(|| fingerprints[*tool].as_str());
                was.is_some() && current(tool).is_some_and(|fp| Some(fp.as_str()) != was)
            })
            .collect();
        if changed.is_empty() {
            continue;
        }
        tx.execute(
            "UPDATE grants SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, now, actor],
        )?;
        let g = parse(RefKind::Grant, &id)?;
        let ws = Uuid::try_parse(&ws).map_err(|e| StoreError::Damaged(format!("workspace id {ws}: {e}")))?;
        audit(&tx, actor, "grant.revoke", Some(ws), Some(&g), &serde_json::json!({"contract_changed": changed}))?;
        crate::campaign::stop_campaigns_of_revoked_grant(&tx, ws, &g, actor)?;
        voided.grants.push(g);
    }
    tx.commit()?;
    Ok(voided)
}
