//! The agent's own fetch (SPEC F2): `web.fetch` asks the process that runs
//! campaigns to fetch one URL under a human grant. The gateway holds no
//! network and no campaign: the server lends a [`Fetcher`], as it lends a
//! [`crate::Backend`], and the gateway maps its answer onto the protocol's
//! result statuses.
//!
//! Egress, not the fetcher, is the authority (SPEC T2): the fetcher sends a
//! URL it was asked for under the grant's campaign, and egress checks it
//! against the list a human confirmed — a URL in the scope but not in that
//! list comes back [`Fetched::Refused`] with egress's reason.

use labfy_core::{CampaignRef, GrantRef, ObjectRef};
use serde::Serialize;
use uuid::Uuid;

/// `GET` reads a page (it becomes evidence); `HEAD` reads its headers only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FetchMethod {
    /// The page.
    #[serde(rename = "GET")]
    Get,
    /// Its status and headers; nothing is stored.
    #[serde(rename = "HEAD")]
    Head,
}

/// One fetch the agent asked for.
#[derive(Debug, Clone)]
pub struct AgentFetch {
    /// The workspace it runs in (the server's).
    pub workspace: Uuid,
    /// The grant it runs under (resolved in the workspace, active, its scope
    /// holding the URL: the gateway's policy checked these).
    pub grant: GrantRef,
    /// The URL as the agent wrote it.
    pub url: String,
    /// `GET` or `HEAD`.
    pub method: FetchMethod,
    /// The turn and call that asked: recorded with what it produced.
    pub turn_id: Uuid,
    /// The call.
    pub call_id: Uuid,
    /// The agent (`agent:demo`, `agent:local-model`, `agent:api`).
    pub actor: String,
}

/// What came of an agent's fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// A page stored as evidence (now, or earlier by the grant's campaign).
    Page(FetchedPage),
    /// A `HEAD`'s answer: nothing stored.
    Head(FetchedHead),
    /// Egress (or the campaign's terms) refused it: the reason.
    Refused(String),
    /// It ran and failed: the reason.
    Failed(String),
    /// Tor or egress is unavailable (SPEC E6): the reason.
    Unavailable(String),
    /// The grant allows no more fetches (its campaign ended): a human must
    /// grant a new research request. The reason.
    GrantSpent(String),
}

/// A page of the grant's campaign, as evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchedPage {
    /// The granted URL (normalised).
    pub url: String,
    /// The evidence it became.
    pub evidence: ObjectRef,
    /// The campaign it belongs to.
    pub campaign: CampaignRef,
    /// Its item's position in the campaign (0 first).
    pub position: u32,
    /// True when this call fetched it; false when the campaign had already
    /// fetched it (no new request was made).
    pub fetched_now: bool,
    /// HTTP status of the final answer.
    pub http_status: Option<u16>,
    /// Body bytes.
    pub bytes: u64,
}

/// The answer to a `HEAD`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchedHead {
    /// The URL asked.
    pub url: String,
    /// The URL answered, after redirects.
    pub final_url: String,
    /// HTTP status.
    pub http_status: u16,
    /// `content-type`, when sent.
    pub content_type: Option<String>,
    /// Selected headers egress kept (names lower-cased).
    pub headers: Vec<(String, String)>,
    /// The campaign it was counted under.
    pub campaign: CampaignRef,
}

/// The process that runs campaigns, lent to the gateway. Calls block (the
/// server runs the gateway on its blocking pool) for at most
/// [`MAX_AGENT_FETCH_SECONDS`].
pub trait Fetcher: Send + Sync {
    /// Runs `ask` under its grant's campaign. `Err` is a failure of the
    /// fetcher itself (its store), not of the fetch.
    fn fetch(&self, ask: &AgentFetch) -> Result<Fetched, String>;
}

/// Longest an agent's fetch waits — for a human's confirmation at egress,
/// for the campaign to reach the item, for Tor — before it answers `FAILED`
/// (the campaign goes on; `research.get_state` shows it later).
pub const MAX_AGENT_FETCH_SECONDS: u64 = 120;
