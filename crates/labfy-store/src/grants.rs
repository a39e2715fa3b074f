//! The grant aggregate (SPEC W4, T2): a human's decision recorded, and its
//! revocation, which stops the grant's unfinished campaigns in the same
//! transaction.

use labfy_core::{ObjectRef, RefKind};
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
