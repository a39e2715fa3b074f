//! The ids a fetch names. What a grant allows is egress's own record, the
//! ledger ([`crate::ledger`], SPEC T2): egress no longer reads grants from
//! the store the workspace server writes.

use labfy_core::{CampaignRef, GrantRef};
use labfy_ipc::messages::egress::{FetchRequest, GrantProposal};
use uuid::Uuid;

/// The ids of one fetch. Their kinds are the message's types: a frame that
/// names a campaign where a grant belongs never decodes (issue 14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchIds {
    /// The workspace.
    pub workspace: Uuid,
    /// `campaign:<uuid>`.
    pub campaign: CampaignRef,
    /// `grant:<uuid>`.
    pub grant: GrantRef,
}

impl FetchIds {
    /// The ids a fetch names.
    pub fn of_fetch(req: &FetchRequest) -> Self {
        Self { workspace: req.workspace_id, campaign: req.campaign_id, grant: req.grant_id }
    }

    /// The ids a proposal names.
    pub fn of_proposal(p: &GrantProposal) -> Self {
        Self { workspace: p.workspace_id, campaign: p.campaign_id, grant: p.grant_id }
    }
}
