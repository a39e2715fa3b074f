//! The server's side of the egress boundary (SPEC E, P3, P4): every question
//! the server asks `labfy-egress` — health, Tor bootstrap status, propose a
//! grant and ask where it stands, one fetch under a grant, its fetch log,
//! stop a grant, end a campaign — over `egress.sock` in the
//! supervisor's runtime directory. Each call connects, authenticates (the
//! per-boot secret) and asks once, under one deadline: a connection is never
//! kept between calls, so an egress restart costs nothing but the call in
//! flight.
//!
//! The server has no network of its own (P2): this client is its only way to
//! anything outside, and it never falls back to anything else. An absent,
//! silent or failing egress is an [`EgressError`], never a retry.

use std::path::PathBuf;
use std::time::Duration;

use labfy_core::{CampaignRef, GrantRef};
use labfy_ipc::client::Client;
use labfy_ipc::messages::egress::{
    BODY_CHUNK_BYTES, EgressRequest, EgressResponse, EgressStatus, FetchLogEntry, FetchOutcome, FetchRequest,
    GrantProposal, GrantRecord,
};
use labfy_ipc::messages::{Boundary, FailureCode, Health};
use uuid::Uuid;

/// Deadline of one fetch, connection included: egress bounds a fetch at
/// 120 s itself, and this leaves it time to say so.
pub const EGRESS_FETCH_TIMEOUT: Duration = Duration::from_secs(150);
/// Deadline of a stop or an end (connection included).
pub const EGRESS_CONTROL_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline of a status question for the UI (connection included).
pub const EGRESS_STATUS_TIMEOUT: Duration = Duration::from_millis(800);
/// Longest reason an [`EgressError`] carries.
pub const EGRESS_DETAIL_MAX_CHARS: usize = 300;

/// Why egress gave no answer of the kind asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// This server was not started by `labfy up`: there is no egress to ask.
    #[error("no egress daemon: this server was not started by `labfy up`")]
    Absent,
    /// The socket could not be reached or the connection broke.
    #[error("egress unreachable: {0}")]
    Unreachable(String),
    /// No answer within the deadline.
    #[error("egress did not answer within {0} ms")]
    Timeout(u128),
    /// Egress answered `Failed` (its code and message).
    #[error("egress answered {code}: {message}")]
    Failed {
        /// Egress's code.
        code: FailureCode,
        /// Its message, one bounded line.
        message: String,
    },
    /// Egress answered another message than the one asked for.
    #[error("egress gave an unexpected answer: {0}")]
    Unexpected(String),
}

impl EgressError {
    /// True when the fault is egress's reachability or its Tor client, not
    /// the request: no answer at all, or `Failed` with code `UNAVAILABLE`.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Absent | Self::Unreachable(_) | Self::Timeout(_) | Self::Unexpected(_) => true,
            Self::Failed { code, .. } => *code == FailureCode::Unavailable,
        }
    }
}

/// One line, bounded: what an error or a peer's text may become in an answer.
pub fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    labfy_core::bounded::truncate_chars(&line, EGRESS_DETAIL_MAX_CHARS)
}

/// Asks egress, one connection per call. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct EgressClient {
    runtime_dir: Option<PathBuf>,
}

impl EgressClient {
    /// A client for the egress of the supervisor's `runtime_dir`; `None`:
    /// no supervisor, so every call is [`EgressError::Absent`].
    pub fn new(runtime_dir: Option<PathBuf>) -> Self {
        Self { runtime_dir }
    }

    /// An authenticated connection to egress whose calls each have `deadline`.
    async fn connect(&self, deadline: Duration) -> Result<Client<EgressRequest, EgressResponse>, EgressError> {
        let Some(dir) = &self.runtime_dir else {
            return Err(EgressError::Absent);
        };
        let connected = async {
            let secret = labfy_ipc::secret::read_secret(dir)?;
            let socket = labfy_ipc::daemon::service_socket(dir, Boundary::Egress);
            Client::connect(&socket, Boundary::Egress, &secret).await
        };
        match tokio::time::timeout(deadline, connected).await {
            Ok(Ok(c)) => Ok(c.with_timeout(deadline)),
            Ok(Err(e)) => Err(EgressError::Unreachable(one_line(&e.to_string()))),
            Err(_) => Err(EgressError::Timeout(deadline.as_millis())),
        }
    }

    /// Sends `request` and waits for its answer, all within `deadline`.
    async fn call(&self, request: EgressRequest, deadline: Duration) -> Result<EgressResponse, EgressError> {
        let asked = async {
            let mut c = self.connect(deadline).await?;
            ask(&mut c, request, deadline).await
        };
        tokio::time::timeout(deadline, asked).await.unwrap_or(Err(EgressError::Timeout(deadline.as_millis())))
    }

    /// Reads a fetched body waiting in egress's scratch directory (SPEC
    /// C3), chunk by chunk on one connection, handing each to `sink`, then
    /// releases it — whether or not the read went to its end. Egress may
    /// not send more than `len` bytes (what it announced), nor fewer.
    /// Each chunk has [`EGRESS_CONTROL_TIMEOUT`].
    pub async fn read_body(
        &self,
        workspace: Uuid,
        handle: &str,
        len: u64,
        sink: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
    ) -> Result<(), EgressError> {
        let mut c = self.connect(EGRESS_CONTROL_TIMEOUT).await?;
        let read = read_chunks(&mut c, workspace, handle, len, sink).await;
        let release = EgressRequest::ReleaseBody { workspace_id: workspace, handle: handle.to_owned() };
        match ask(&mut c, release, EGRESS_CONTROL_TIMEOUT).await {
            Ok(EgressResponse::BodyReleased { .. }) => {}
            Ok(other) => tracing::warn!(answer = ?unexpected(&other), "egress did not release a body"),
            Err(e) => tracing::warn!(error = %e, "egress did not release a body (it expires there)"),
        }
        read
    }

    /// Egress's health (its readiness for the gateway's tool availability).
    pub async fn health(&self, deadline: Duration) -> Result<Health, EgressError> {
        match self.call(EgressRequest::Health {}, deadline).await? {
            EgressResponse::Health(h) => Ok(h),
            other => Err(unexpected(&other)),
        }
    }

    /// Tor's bootstrap and egress's activity (SPEC E1), within
    /// [`EGRESS_STATUS_TIMEOUT`].
    pub async fn status(&self) -> Result<EgressStatus, EgressError> {
        match self.call(EgressRequest::Status {}, EGRESS_STATUS_TIMEOUT).await? {
            EgressResponse::Status(s) => Ok(s),
            other => Err(unexpected(&other)),
        }
    }

    /// One passive fetch under a grant (E2, E3), within
    /// [`EGRESS_FETCH_TIMEOUT`]. Refusals are outcomes too (`REFUSED`,
    /// `UNAVAILABLE`, …); an error means egress gave no outcome at all.
    pub async fn fetch(&self, request: FetchRequest) -> Result<FetchOutcome, EgressError> {
        match self.call(EgressRequest::Fetch(request), EGRESS_FETCH_TIMEOUT).await? {
            EgressResponse::Fetched(outcome) => Ok(*outcome),
            other => Err(unexpected(&other)),
        }
    }

    /// A grant was revoked: egress stops its fetches in flight and in queue
    /// now (E3). Returns how many it stopped.
    pub async fn stop_grant(&self, workspace: Uuid, grant: GrantRef) -> Result<u32, EgressError> {
        let request = EgressRequest::StopGrant { workspace_id: workspace, grant_id: grant };
        match self.call(request, EGRESS_CONTROL_TIMEOUT).await? {
            EgressResponse::Stopped { stopped } => Ok(stopped),
            other => Err(unexpected(&other)),
        }
    }

    /// Relays the analyst's grant to egress's ledger as a proposal (SPEC
    /// T2): it allows nothing until a human confirms it outside the server.
    /// Idempotent. The record carries a one-time confirmation link.
    pub async fn propose(&self, proposal: GrantProposal) -> Result<GrantRecord, EgressError> {
        match self.call(EgressRequest::Propose(Box::new(proposal)), EGRESS_CONTROL_TIMEOUT).await? {
            EgressResponse::Grant(r) => Ok(*r),
            other => Err(unexpected(&other)),
        }
    }

    /// Egress's record of a grant (with a fresh confirmation link while it
    /// waits for a human).
    pub async fn grant_state(&self, workspace: Uuid, grant: GrantRef) -> Result<GrantRecord, EgressError> {
        let request = EgressRequest::GrantState { workspace_id: workspace, grant_id: grant };
        match self.call(request, EGRESS_CONTROL_TIMEOUT).await? {
            EgressResponse::Grant(r) => Ok(*r),
            other => Err(unexpected(&other)),
        }
    }

    /// Egress's own fetch log of a grant, oldest first.
    pub async fn fetch_log(&self, workspace: Uuid, grant: GrantRef) -> Result<Vec<FetchLogEntry>, EgressError> {
        let request = EgressRequest::FetchLog { workspace_id: workspace, grant_id: grant };
        match self.call(request, EGRESS_CONTROL_TIMEOUT).await? {
            EgressResponse::FetchLog { entries } => Ok(entries),
            other => Err(unexpected(&other)),
        }
    }

    /// A campaign ended: egress forgets its isolation token (E4).
    pub async fn end_campaign(&self, workspace: Uuid, campaign: CampaignRef) -> Result<u32, EgressError> {
        let request = EgressRequest::EndCampaign { workspace_id: workspace, campaign_id: campaign };
        match self.call(request, EGRESS_CONTROL_TIMEOUT).await? {
            EgressResponse::Stopped { stopped } => Ok(stopped),
            other => Err(unexpected(&other)),
        }
    }
}

/// One call on an open connection, within `deadline`.
async fn ask(
    c: &mut Client<EgressRequest, EgressResponse>,
    request: EgressRequest,
    deadline: Duration,
) -> Result<EgressResponse, EgressError> {
    match tokio::time::timeout(deadline, c.call(request)).await {
        Ok(Ok(EgressResponse::Failed(f))) => Err(EgressError::Failed { code: f.code, message: one_line(&f.message) }),
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(EgressError::Unreachable(one_line(&e.to_string()))),
        Err(_) => Err(EgressError::Timeout(deadline.as_millis())),
    }
}

async fn read_chunks(
    c: &mut Client<EgressRequest, EgressResponse>,
    workspace: Uuid,
    handle: &str,
    len: u64,
    sink: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
) -> Result<(), EgressError> {
    use base64::Engine as _;
    let short = |got: u64| EgressError::Unexpected(format!("a body of {got} bytes where {len} were announced"));
    let mut got = 0u64;
    loop {
        let request = EgressRequest::ReadBody { workspace_id: workspace, handle: handle.to_owned(), offset: got };
        let (data, eof) = match ask(c, request, EGRESS_CONTROL_TIMEOUT).await? {
            EgressResponse::BodyChunk { data_base64, eof } => (data_base64, eof),
            other => return Err(unexpected(&other)),
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| EgressError::Unexpected(format!("a body chunk that is not base64: {e}")))?;
        if data.len() as u64 > BODY_CHUNK_BYTES || got + data.len() as u64 > len {
            return Err(short(got + data.len() as u64));
        }
        if data.is_empty() && !eof {
            return Err(EgressError::Unexpected("an empty body chunk before the end".into()));
        }
        got += data.len() as u64;
        sink(&data).map_err(|why| EgressError::Unexpected(one_line(&why)))?;
        if eof {
            return if got == len { Ok(()) } else { Err(short(got)) };
        }
    }
}

/// The `type` tag of an answer, for a message (never its content).
fn unexpected(r: &EgressResponse) -> EgressError {
    let tag = serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned());
    EgressError::Unexpected(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_runtime_dir_every_call_is_absent() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let c = EgressClient::new(None);
        assert_eq!(rt.block_on(c.status()), Err(EgressError::Absent));
        assert!(EgressError::Absent.is_unavailable());
        assert!(EgressError::Failed { code: FailureCode::Unavailable, message: String::new() }.is_unavailable());
        assert!(!EgressError::Failed { code: FailureCode::InvalidInput, message: String::new() }.is_unavailable());
    }

    #[test]
    fn one_line_folds_and_bounds() {
        assert_eq!(one_line("a\n  b\tc"), "a b c");
        assert_eq!(one_line(&"x".repeat(1000)).chars().count(), EGRESS_DETAIL_MAX_CHARS);
    }
}
