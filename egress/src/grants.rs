//! The ids a fetch names. What a grant allows is egress's own record, the
//! ledger ([`crate::ledger`], SPEC T2): egress no longer reads grants from
//! the store the workspace server writes.

use labfy_core::bounded::truncate_chars;
use labfy_core::{ObjectRef, RefKind};
use uuid::Uuid;

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

#[cfg(test)]
mod tests {
    use super::*;

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
