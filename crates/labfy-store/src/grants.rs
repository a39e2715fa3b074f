//! The grant aggregate (SPEC W4, T2): a human's decision recorded, and its
//! revocation, which stops the grant's unfinished campaigns in the same
//! transaction.

use labfy_core::{GrantRef, ObjectRef, RefKind};
use rusqlite::{Connection, params};
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;
use crate::reads::Reads;

use crate::primitives::{audit, check_text, json_text};

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

/// A grant's row as stored, its JSON columns already written by the caller
/// (their exact text is what the audit row and the bundle carry).
pub(crate) struct GrantRow<'a> {
    pub(crate) investigation: &'a str,
    pub(crate) scope: &'a str,
    pub(crate) budget: &'a str,
    pub(crate) expires_at: &'a str,
    pub(crate) contract_fingerprints: &'a serde_json::Value,
    pub(crate) decided_by: &'a str,
    pub(crate) decided_at: &'a str,
}

/// The one INSERT of a grant (SPEC W4), in the caller's transaction: a
/// grant recorded by itself ([`record_grant`]) or decided on a research
/// request (`research::grant`).
pub(crate) fn insert_grant(tx: &Connection, ws: Uuid, row: &GrantRow<'_>) -> Result<GrantRef> {
    let id = Uuid::now_v7();
    tx.execute(
        "INSERT INTO grants (id, workspace_id, investigation_id, scope, budget, expires_at, contract_fingerprints,
                             decided_by, decided_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            id.to_string(),
            ws.to_string(),
            row.investigation,
            row.scope,
            row.budget,
            row.expires_at,
            row.contract_fingerprints.to_string(),
            row.decided_by,
            row.decided_at
        ],
    )?;
    Ok(GrantRef::new(id))
}

/// Persists a human grant with its audit row.
pub(crate) fn record_grant(conn: &mut Connection, ws: Uuid, grant: &NewGrant) -> Result<GrantRef> {
    check_text("decided_by", &grant.decided_by, 200)?;
    chrono::DateTime::parse_from_rfc3339(&grant.expires_at)
        .map_err(|e| StoreError::Invalid(format!("expires_at is not RFC 3339: {e}")))?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, &grant.investigation)?;
    let r = insert_grant(
        &tx,
        ws,
        &GrantRow {
            investigation: &grant.investigation.id().to_string(),
            scope: &json_text(&grant.scope)?,
            budget: &json_text(&grant.budget)?,
            expires_at: &grant.expires_at,
            contract_fingerprints: &grant.contract_fingerprints,
            decided_by: &grant.decided_by,
            decided_at: &now_rfc3339(),
        },
    )?;
    audit(
        &tx,
        &grant.decided_by,
        "grant.decide",
        Some(ws),
        Some(&r.object_ref()),
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
