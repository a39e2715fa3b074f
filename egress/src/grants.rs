//! The grant re-check (SPEC E3): before every stream — the first hop and
//! each redirect — egress reads the grant afresh from the store, read-only,
//! and refuses unless it belongs to the workspace, is unrevoked and
//! unexpired, covers the host, and has budget left.
//!
//! Budget: egress counts, per grant, the HTTP requests it started (every
//! hop is one) and the body bytes it received since this process started,
//! and reads what the store has recorded for the grant's campaigns
//! (`Reads::grant_usage`, written by the server). The larger of the two is
//! what has been used: neither an egress restart nor a fetch the server has
//! not recorded yet gives budget back.

use std::path::Path;

use chrono::{DateTime, Utc};
use labfy_core::bounded::truncate_chars;
use labfy_core::{ObjectRef, RefKind};
use labfy_store::{Grant, ReadOnlyStore, StoreError, WorkspaceClass};
use uuid::Uuid;

use crate::target::{Target, scope_refusal};

/// What a grant allows, as read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantTerms {
    /// Host patterns of its scope.
    pub hosts: Vec<String>,
    /// Requests allowed in all.
    pub max_requests: u64,
    /// Body bytes allowed in all.
    pub max_bytes: u64,
    /// When it ends.
    pub expires_at: DateTime<Utc>,
    /// What the store has recorded as used under it.
    pub recorded: Usage,
}

/// What a grant has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Requests started (every redirect hop is one).
    pub requests: u64,
    /// Body bytes received.
    pub bytes: u64,
}

impl Usage {
    /// The larger of two accounts, field by field.
    pub fn max(self, other: Usage) -> Usage {
        Usage { requests: self.requests.max(other.requests), bytes: self.bytes.max(other.bytes) }
    }
}

/// The ids of one fetch, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchIds {
    /// The workspace.
    pub workspace: Uuid,
    /// `campaign:<uuid>`.
    pub campaign: ObjectRef,
    /// `grant:<uuid>`.
    pub grant: ObjectRef,
}

impl FetchIds {
    /// Parses the workspace (a UUID or `workspace:<uuid>`), the campaign
    /// (`campaign:<uuid>`) and the grant (`grant:<uuid>`).
    pub fn parse(workspace: &str, campaign: &str, grant: &str) -> Result<Self, String> {
        let ws = match Uuid::try_parse(workspace) {
            Ok(u) => u,
            Err(_) => ObjectRef::parse_kind(workspace, RefKind::Workspace)
                .map_err(|e| format!("workspace `{}`: {e}", truncate_chars(workspace, 64)))?
                .id(),
        };
        let campaign = ObjectRef::parse_kind(campaign, RefKind::Campaign)
            .map_err(|e| format!("campaign `{}`: {e}", truncate_chars(campaign, 64)))?;
        let grant = ObjectRef::parse_kind(grant, RefKind::Grant)
            .map_err(|e| format!("grant `{}`: {e}", truncate_chars(grant, 64)))?;
        Ok(Self { workspace: ws, campaign, grant })
    }
}

/// Reads the grant's terms afresh (a new read-only connection each time)
/// and checks what does not depend on the URL: the workspace is REAL, the
/// grant is in it and active, the campaign is in it and runs under it.
pub fn read_terms(data_dir: &Path, ids: &FetchIds, now: DateTime<Utc>) -> Result<GrantTerms, String> {
    let store = ReadOnlyStore::open(data_dir).map_err(|e| {
        tracing::warn!(error = %e, "the store cannot be opened read-only");
        "the grant cannot be checked: the store is unavailable".to_owned()
    })?;
    let reads = store.reads();
    let grant_ref = ids.grant;
    let unknown = |e: StoreError| match e {
        StoreError::NotFound(_) => format!("{grant_ref} does not exist in this workspace"),
        other => {
            tracing::warn!(error = %other, "grant read failed");
            format!("{grant_ref} cannot be checked: {}", truncate_chars(&other.to_string(), 200))
        }
    };
    let ws = reads.workspace(ids.workspace).map_err(unknown)?;
    if ws.class != WorkspaceClass::Real {
        return Err("a SPECIMEN workspace's research is synthetic and never reaches the network".into());
    }
    let grant = reads.grant(ids.workspace, &ids.grant).map_err(unknown)?;
    let mut terms = terms(&grant, now)?;
    let recorded = reads.grant_usage(ids.workspace, &ids.grant).map_err(unknown)?;
    terms.recorded = Usage { requests: recorded.requests, bytes: recorded.bytes };
    let campaign = reads.campaign(ids.workspace, &ids.campaign).map_err(|e| match e {
        StoreError::NotFound(_) => format!("{} does not exist in this workspace", ids.campaign),
        other => unknown(other),
    })?;
    if campaign.grant_id != ids.grant {
        return Err(format!("{} does not run under {grant_ref}", ids.campaign));
    }
    Ok(terms)
}

/// The terms of an active grant, or why it allows nothing.
pub fn terms(grant: &Grant, now: DateTime<Utc>) -> Result<GrantTerms, String> {
    let id = grant.id;
    if grant.revoked_at.is_some() {
        return Err(format!("{id} is revoked"));
    }
    if !labfy_store::grant_is_active(grant, now) {
        return Err(format!("{id} has expired"));
    }
    let expires_at = DateTime::parse_from_rfc3339(&grant.expires_at)
        .map_err(|_| format!("{id} has an unreadable expiry"))?
        .with_timezone(&Utc);
    let hosts: Vec<String> = grant
        .scope
        .get("hosts")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().filter_map(|h| h.as_str()).filter(|h| labfy_store::check_host_pattern(h).is_ok()))
        .into_iter()
        .flatten()
        .map(str::to_owned)
        .collect();
    let budget = |key: &str| grant.budget.get(key).and_then(serde_json::Value::as_u64);
    let (Some(max_requests), Some(max_bytes)) = (budget("max_requests"), budget("max_bytes")) else {
        return Err(format!("{id} has no readable budget (max_requests, max_bytes)"));
    };
    Ok(GrantTerms { hosts, max_requests, max_bytes, expires_at, recorded: Usage::default() })
}

/// Why `target` may not be fetched under these terms with this usage (this
/// process's count; the store's recorded usage is taken into account too),
/// or `None` when one more request may start.
pub fn refusal(terms: &GrantTerms, grant: &ObjectRef, target: &Target, used: Usage) -> Option<String> {
    let used = used.max(terms.recorded);
    if let Some(why) = scope_refusal(target, &terms.hosts, &grant.to_string()) {
        return Some(why);
    }
    if used.requests >= terms.max_requests {
        return Some(format!(
            "the request budget of {grant} is spent ({} of {} requests)",
            used.requests, terms.max_requests
        ));
    }
    if used.bytes >= terms.max_bytes {
        return Some(format!("the byte budget of {grant} is spent ({} of {} bytes)", used.bytes, terms.max_bytes));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(scope: serde_json::Value, budget: serde_json::Value, expires_at: &str, revoked: bool) -> Grant {
        Grant {
            id: ObjectRef::new(RefKind::Grant, Uuid::from_u128(1)),
            workspace_id: ObjectRef::new(RefKind::Workspace, Uuid::from_u128(2)),
            investigation_id: ObjectRef::new(RefKind::Investigation, Uuid::from_u128(3)),
            scope,
            budget,
            expires_at: expires_at.into(),
            contract_fingerprints: serde_json::json!({}),
            decided_by: "analyst".into(),
            decided_at: "2026-01-01T00:00:00Z".into(),
            revoked_at: revoked.then(|| "2026-01-01T00:00:01Z".to_owned()),
            revoked_by: revoked.then(|| "analyst".to_owned()),
        }
    }

    #[test]
    fn terms_come_from_an_active_grant_only() {
        let now = Utc::now();
        let later = (now + chrono::Duration::hours(1)).to_rfc3339();
        let earlier = (now - chrono::Duration::seconds(1)).to_rfc3339();
        let scope = serde_json::json!({"hosts": ["*.example.org", "Not A Host", "10.0.0.5"]});
        let budget = serde_json::json!({"max_requests": 2, "max_bytes": 100});
        let t = terms(&grant(scope.clone(), budget.clone(), &later, false), now).unwrap();
        // An invalid pattern in the stored scope covers nothing.
        assert_eq!(t.hosts, ["*.example.org", "10.0.0.5"]);
        assert_eq!((t.max_requests, t.max_bytes), (2, 100));
        assert!(terms(&grant(scope.clone(), budget.clone(), &later, true), now).unwrap_err().contains("revoked"));
        assert!(terms(&grant(scope.clone(), budget.clone(), &earlier, false), now).unwrap_err().contains("expired"));
        let e = terms(&grant(scope, serde_json::json!({"max_requests": 2}), &later, false), now).unwrap_err();
        assert!(e.contains("no readable budget"), "{e}");
    }

    #[test]
    fn budgets_are_checked_at_the_edge() {
        let t = GrantTerms {
            hosts: vec!["a.example.org".into()],
            max_requests: 3,
            max_bytes: 1000,
            expires_at: Utc::now(),
            recorded: Usage::default(),
        };
        let g = ObjectRef::new(RefKind::Grant, Uuid::from_u128(9));
        let target = crate::target::check_url("https://a.example.org/").unwrap();
        assert_eq!(refusal(&t, &g, &target, Usage { requests: 2, bytes: 999 }), None);
        let e = refusal(&t, &g, &target, Usage { requests: 3, bytes: 0 }).unwrap();
        assert!(e.contains("request budget") && e.contains("3 of 3"), "{e}");
        let e = refusal(&t, &g, &target, Usage { requests: 0, bytes: 1000 }).unwrap();
        assert!(e.contains("byte budget"), "{e}");
        // What the store recorded counts as much as this process's count.
        let recorded = GrantTerms { recorded: Usage { requests: 3, bytes: 0 }, ..t.clone() };
        assert!(refusal(&recorded, &g, &target, Usage::default()).unwrap().contains("3 of 3"));
        let recorded = GrantTerms { recorded: Usage { requests: 0, bytes: 1000 }, ..t.clone() };
        assert!(refusal(&recorded, &g, &target, Usage::default()).unwrap().contains("byte budget"));
        let other = crate::target::check_url("https://b.example.org/").unwrap();
        assert!(refusal(&t, &g, &other, Usage::default()).unwrap().contains("outside the scope"));
    }

    #[test]
    fn ids_parse_strictly() {
        let ws = Uuid::from_u128(5);
        let c = ObjectRef::new(RefKind::Campaign, Uuid::from_u128(6)).to_string();
        let g = ObjectRef::new(RefKind::Grant, Uuid::from_u128(7)).to_string();
        let ids = FetchIds::parse(&ws.to_string(), &c, &g).unwrap();
        assert_eq!(ids.workspace, ws);
        let ids2 = FetchIds::parse(&format!("workspace:{ws}"), &c, &g).unwrap();
        assert_eq!(ids, ids2);
        assert!(FetchIds::parse(&ws.to_string(), &g, &g).is_err(), "a grant is not a campaign");
        assert!(FetchIds::parse(&ws.to_string(), &c, &Uuid::from_u128(7).to_string()).is_err(), "bare grant uuid");
        assert!(FetchIds::parse("nope", &c, &g).is_err());
    }
}
