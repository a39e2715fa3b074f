//! The egress service: what `egress.sock` answers (SPEC E1–E6).
//!
//! A fetch goes, in this order: ids → Tor bootstrapped? → URL rules →
//! registration (so a stop finds it) → a place among the
//! [`crate::limits::MAX_IN_FLIGHT`] → for each hop: egress's own grant
//! ledger checks and counts it (a human approved the grant; unrevoked,
//! unexpired, campaign not ended; the first hop one of the exact URLs, a
//! redirect inside the hosts; budget left — SPEC T2) → a Tor stream on the
//! campaign's isolation token → one bounded HTTP exchange → the next hop
//! re-checked before its stream opens. A refusal happens before any stream
//! of its hop opens; a stop (revocation, end of campaign) wins at every
//! await. Every fetch of a grant the ledger knows is appended to its fetch
//! log.
//!
//! Two sockets reach [`Egress`]: the workspace server's (`egress.sock`,
//! [`Egress::handle`]), which may propose, revoke, end and fetch but never
//! decide; and the operator's (`operator/egress.operator.sock`, masked in
//! the server's root, [`Egress::handle_operator`]), where `labfy grant`
//! lists and decides.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use arti_client::IsolationToken;
use base64::Engine as _;
use hyper::header::{CONTENT_TYPE, HeaderMap, LOCATION};
use labfy_core::bounded::truncate_chars;
use labfy_core::{GrantRef, ObjectRef, RefKind};
use labfy_ipc::messages::egress::{
    EgressRequest, EgressResponse, EgressStatus, FetchMethod, FetchOutcome, FetchRequest, FetchStatus, GrantPhase,
    GrantRecord, MAX_KEPT_HEADERS, MAX_URL_BYTES,
};
use labfy_ipc::messages::{Failure, FailureCode, Health, Role};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::bodies::Bodies;
use crate::connector::{Bootstrap, Connector};
use crate::grants::FetchIds;
use crate::http::{self, ExchangeError, Response};
use crate::ledger::{HopTerms, Ledger};
use crate::limits::{Limits, MAX_HEADER_VALUE_CHARS};
use crate::target::{Target, check_url, shown};
use crate::tor::Tor;

/// Response headers kept in provenance, in this order (lower case).
pub const KEPT_HEADERS: [&str; 14] = [
    "content-type",
    "content-length",
    "content-language",
    "content-encoding",
    "content-disposition",
    "last-modified",
    "etag",
    "date",
    "expires",
    "cache-control",
    "server",
    "location",
    "x-robots-tag",
    "link",
];

/// Longest refusal or failure reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// The egress service. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Egress {
    inner: Arc<Inner>,
}

/// Makes a one-time link to egress's confirmation page for a grant (`None`
/// when the page makes none now: see [`crate::confirm::ConfirmPage::link`]).
pub type ConfirmLinks = Arc<dyn Fn(GrantRef) -> Option<String> + Send + Sync>;

struct Inner {
    ledger: Arc<Ledger>,
    /// The confirmation page's links, once it serves.
    confirm: std::sync::OnceLock<ConfirmLinks>,
    connector: Arc<dyn Connector>,
    bodies: Bodies,
    limits: Limits,
    custom_network: bool,
    permits: Semaphore,
    state: Mutex<State>,
    /// fetched, refused, unavailable, failed, stopped.
    counts: [AtomicU64; 5],
    in_flight: AtomicU32,
    started: Instant,
}

/// Live fetches of one grant, or of one campaign, and how to stop them.
struct Live {
    generation: u64,
    cancel: CancellationToken,
    count: u32,
}

/// A campaign's isolation (E4): its own token, created on first use,
/// forgotten at its end — or once idle for [`Limits::campaign_idle`], or
/// when [`Limits::max_campaigns`] are held and it is the longest idle
/// (SPEC E4; a campaign's fetches come in turn, seconds apart).
struct CampaignSlot {
    live: Live,
    token: IsolationToken,
    label: String,
    /// When its last fetch ended; `None` while one runs.
    idle_since: Option<Instant>,
}

#[derive(Default)]
struct State {
    generation: u64,
    /// Per (workspace, grant).
    grants: HashMap<(Uuid, Uuid), Live>,
    /// Per (workspace, campaign): one entry per campaign used recently and
    /// not ended (bounded: see [`CampaignSlot`]).
    campaigns: HashMap<(Uuid, Uuid), CampaignSlot>,
    /// Per grant: body bytes received by hops in flight, not yet added to
    /// the ledger (it gets them when each hop ends).
    pending_bytes: HashMap<Uuid, u64>,
}

/// Why a stop happened.
#[derive(Debug, Clone, Copy)]
enum StopReason {
    Revoked,
    CampaignEnded,
}

/// How a fetch ended without a response.
struct End(FetchStatus, String);

fn refused(why: impl Into<String>) -> End {
    End(FetchStatus::Refused, why.into())
}
fn unavailable(why: impl Into<String>) -> End {
    End(FetchStatus::Unavailable, why.into())
}
fn failed(why: impl Into<String>) -> End {
    End(FetchStatus::Failed, why.into())
}

impl Egress {
    /// The service over arti: the only constructor outside this crate, so
    /// every `Egress` a program can build goes out through Tor (P4).
    /// Bodies wait in `bodies` until the server reads them (SPEC C3).
    pub fn new(ledger: Arc<Ledger>, tor: Tor, bodies: Bodies, limits: Limits, custom_network: bool) -> Self {
        Self::with_connector(ledger, Arc::new(tor), bodies, limits, custom_network)
    }

    pub(crate) fn with_connector(
        ledger: Arc<Ledger>,
        connector: Arc<dyn Connector>,
        bodies: Bodies,
        limits: Limits,
        custom_network: bool,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                ledger,
                confirm: std::sync::OnceLock::new(),
                connector,
                bodies,
                permits: Semaphore::new(limits.max_in_flight.max(1)),
                limits,
                custom_network,
                state: Mutex::new(State::default()),
                counts: Default::default(),
                in_flight: AtomicU32::new(0),
                started: Instant::now(),
            }),
        }
    }

    /// Takes one place among the fetches in flight (tests: a full house).
    #[cfg(test)]
    pub(crate) async fn hold_a_place(&self) -> tokio::sync::SemaphorePermit<'_> {
        #[allow(clippy::expect_used)]
        self.inner.permits.acquire().await.expect("the semaphore is never closed")
    }

    /// From now on, records waiting for a human carry a link to the
    /// confirmation page made by `links` (set once; later calls are ignored).
    pub fn set_confirm_links(&self, links: ConfirmLinks) {
        let _ = self.inner.confirm.set(links);
    }

    /// Where fetched bodies wait for the server.
    pub fn bodies(&self) -> &Bodies {
        &self.inner.bodies
    }

    /// The grant ledger.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.inner.ledger
    }

    /// Answers one request on the operator's socket: everything the server
    /// may ask, and the human's decisions (`labfy grant`).
    pub async fn handle_operator(&self, req: EgressRequest) -> EgressResponse {
        match req {
            EgressRequest::Grants {} => {
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.list(chrono::Utc::now())).await {
                    Ok(grants) => {
                        EgressResponse::Grants { grants: grants.into_iter().map(|g| self.linked(g)).collect() }
                    }
                    Err(e) => failed_response(FailureCode::Storage, e),
                }
            }
            EgressRequest::Decide { grant_id: grant, approve } => {
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.decide(grant, approve, "terminal", chrono::Utc::now())).await {
                    Ok(r) => {
                        tracing::info!(%grant, phase = ?r.phase, "grant decided on the terminal");
                        EgressResponse::Grant(Box::new(r))
                    }
                    Err(e) => failed_response(FailureCode::Conflict, e),
                }
            }
            other => self.handle(other).await,
        }
    }

    /// Answers one request of the server. A human's decision is refused
    /// here: the server's socket can only propose (SPEC T2).
    pub async fn handle(&self, req: EgressRequest) -> EgressResponse {
        match req {
            EgressRequest::Grants {} | EgressRequest::Decide { .. } => EgressResponse::Failed(Failure {
                code: FailureCode::Forbidden,
                message: "a grant is decided by a human on the terminal (labfy grant) or on egress's confirmation \
                          page, never through the workspace server"
                    .into(),
            }),
            EgressRequest::Propose(p) => {
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.propose(&p, chrono::Utc::now())).await {
                    Ok(r) => {
                        let r = self.linked(r);
                        if r.phase == GrantPhase::Proposed {
                            // On the operator's terminal, where the server
                            // cannot write: what waits for a human, and where.
                            let page = r.confirm_url.as_deref().map(|u| format!(" or open {u}")).unwrap_or_default();
                            eprintln!(
                                "labfy-egress: {} asks to fetch {} URL(s) through Tor; nothing leaves until a human \
                                 confirms it: labfy grant approve {}{page}",
                                r.grant_id,
                                r.urls.len(),
                                r.grant_id
                            );
                        }
                        EgressResponse::Grant(Box::new(r))
                    }
                    Err(e) => invalid(e),
                }
            }
            EgressRequest::GrantState { workspace_id: ws, grant_id: grant } => {
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.get_in(ws, grant, chrono::Utc::now())).await {
                    Ok(Some(r)) => EgressResponse::Grant(Box::new(self.linked(r))),
                    Ok(None) => failed_response(FailureCode::NotFound, format!("egress has no record of {grant}")),
                    Err(e) => failed_response(FailureCode::Storage, e),
                }
            }
            EgressRequest::FetchLog { workspace_id: ws, grant_id: grant } => {
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.fetch_log(ws, grant)).await {
                    Ok(entries) => EgressResponse::FetchLog { entries },
                    Err(e) => failed_response(FailureCode::Storage, e),
                }
            }
            EgressRequest::Health {} => EgressResponse::Health(self.health_report()),
            EgressRequest::Status {} => EgressResponse::Status(self.status()),
            EgressRequest::Fetch(f) => EgressResponse::Fetched(Box::new(self.fetch(f).await)),
            EgressRequest::ReadBody { workspace_id: ws, handle, offset } => {
                let bodies = self.inner.bodies.clone();
                match blocking(move || bodies.read(ws, &handle, offset)).await {
                    Ok((data, eof)) => EgressResponse::BodyChunk {
                        data_base64: base64::engine::general_purpose::STANDARD.encode(data),
                        eof,
                    },
                    Err(e) => failed_response(FailureCode::NotFound, e),
                }
            }
            EgressRequest::ReleaseBody { workspace_id: ws, handle } => {
                EgressResponse::BodyReleased { released: self.inner.bodies.release(ws, &handle) }
            }
            // Both only take authority away: the server may ask them.
            EgressRequest::StopGrant { workspace_id: ws, grant_id: grant } => {
                // Its fetches stop first, whatever the ledger says next.
                let stopped = self.stop_grant(ws, grant.id());
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.revoke(ws, grant, chrono::Utc::now())).await {
                    Ok(_) => EgressResponse::Stopped { stopped },
                    Err(e) => failed_response(FailureCode::Storage, e),
                }
            }
            EgressRequest::EndCampaign { workspace_id: ws, campaign_id: campaign } => {
                let stopped = self.end_campaign(ws, campaign.id());
                let ledger = self.inner.ledger.clone();
                match blocking(move || ledger.end_campaign(ws, campaign, chrono::Utc::now())).await {
                    Ok(_) => EgressResponse::Stopped { stopped },
                    Err(e) => failed_response(FailureCode::Storage, e),
                }
            }
        }
    }

    /// A record with a live confirmation link while it waits for a human.
    fn linked(&self, mut r: GrantRecord) -> GrantRecord {
        if r.phase == GrantPhase::Proposed {
            if let Some(links) = self.inner.confirm.get() {
                r.confirm_url = links(r.grant_id);
            }
        }
        r
    }

    /// Where Tor's bootstrap stands (the confirmation page says it).
    pub fn bootstrap(&self) -> Bootstrap {
        self.inner.connector.bootstrap()
    }

    /// `(ready, detail)` for health checks: ready once Tor is bootstrapped.
    pub fn health(&self) -> (bool, String) {
        let b = self.inner.connector.bootstrap();
        let detail = if b.ready {
            format!(
                "Tor bootstrapped{}; {} fetch(es) in flight",
                b.bootstrap_ms.map(|ms| format!(" in {ms} ms")).unwrap_or_default(),
                self.inner.in_flight.load(Ordering::Relaxed)
            )
        } else {
            let mut d = format!("Tor not bootstrapped ({}%: {}): every fetch is unavailable", b.percent, b.phase);
            if let Some(e) = &b.last_error {
                d.push_str("; last error: ");
                d.push_str(e);
            }
            truncate_chars(&d, MAX_REASON_CHARS)
        };
        (b.ready, detail)
    }

    fn health_report(&self) -> Health {
        let (ready, detail) = self.health();
        Health {
            role: Role::Egress,
            pid: std::process::id(),
            uptime_ms: self.inner.started.elapsed().as_millis() as u64,
            ready,
            detail,
            switch_to: None,
        }
    }

    /// Bootstrap state and activity (E1).
    pub fn status(&self) -> EgressStatus {
        let Bootstrap { ready, percent, phase, last_error, bootstrap_ms } = self.inner.connector.bootstrap();
        EgressStatus {
            ready,
            bootstrap_percent: percent.min(100),
            phase,
            last_error,
            bootstrap_ms,
            custom_network: self.inner.custom_network,
            max_body_bytes: self.inner.limits.max_body,
            in_flight: self.inner.in_flight.load(Ordering::Relaxed),
            campaigns: u32::try_from(self.inner.lock().campaigns.len()).unwrap_or(u32::MAX),
            counts: std::array::from_fn(|i| self.inner.counts[i].load(Ordering::Relaxed)),
        }
    }

    /// Stops every fetch of a grant, in flight or queued; returns how many.
    pub fn stop_grant(&self, ws: Uuid, grant: Uuid) -> u32 {
        let live = self.inner.lock().grants.remove(&(ws, grant));
        let n = live.map_or(0, |l| {
            l.cancel.cancel();
            l.count
        });
        tracing::info!(grant = %ObjectRef::new(RefKind::Grant, grant), stopped = n, "grant stopped");
        n
    }

    /// Ends a campaign: stops its fetches still running and forgets its
    /// isolation token (a later fetch of it would get a new one).
    pub fn end_campaign(&self, ws: Uuid, campaign: Uuid) -> u32 {
        let slot = self.inner.lock().campaigns.remove(&(ws, campaign));
        let n = slot.map_or(0, |s| {
            s.live.cancel.cancel();
            s.live.count
        });
        tracing::info!(campaign = %ObjectRef::new(RefKind::Campaign, campaign), stopped = n, "campaign ended");
        n
    }

    /// One fetch (E2–E5). Never fails: every end is an outcome with its
    /// reason.
    pub async fn fetch(&self, req: FetchRequest) -> FetchOutcome {
        let t0 = Instant::now();
        let mut out = FetchOutcome {
            status: FetchStatus::Refused,
            reason: None,
            url: truncate_bytes(&req.url, MAX_URL_BYTES),
            final_url: None,
            redirects: Vec::new(),
            http_status: None,
            headers: Vec::new(),
            content_type: None,
            body_handle: None,
            body_bytes: 0,
            body_sha256: None,
            started_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            elapsed_ms: 0,
            isolation: String::new(),
        };
        let mut trail = Vec::new();
        let result = self.run(&req, &mut out.isolation, &mut trail).await;
        out.redirects = trail;
        match result {
            Ok((target, resp)) => {
                let workspace = req.workspace_id;
                fill(&mut out, &target, resp, |spool| self.inner.bodies.keep(workspace, spool));
            }
            Err(End(status, why)) => {
                out.status = status;
                out.reason = Some(truncate_chars(&why, MAX_REASON_CHARS));
            }
        }
        out.elapsed_ms = t0.elapsed().as_millis() as u64;
        let slot = match out.status {
            FetchStatus::Fetched => 0,
            FetchStatus::Refused => 1,
            FetchStatus::Unavailable => 2,
            FetchStatus::Failed => 3,
            FetchStatus::Stopped => 4,
        };
        self.inner.counts[slot].fetch_add(1, Ordering::Relaxed);
        // The fetch log (SPEC T2): every fetch of a grant the ledger knows.
        let (ids, ledger, logged) = (FetchIds::of_fetch(&req), self.inner.ledger.clone(), strip_body(&out));
        if let Err(e) = blocking(move || ledger.log_fetch(&ids, &logged, chrono::Utc::now())).await {
            tracing::error!(error = %e, "the fetch log could not be written");
        }
        tracing::info!(
            status = ?out.status,
            grant = %req.grant_id,
            http_status = out.http_status,
            bytes = out.body_bytes,
            hops = out.redirects.len(),
            elapsed_ms = out.elapsed_ms,
            "fetch done"
        );
        tracing::debug!(reason = out.reason.as_deref().unwrap_or(""), "fetch detail");
        out
    }

    async fn run(
        &self,
        req: &FetchRequest,
        isolation: &mut String,
        trail: &mut Vec<String>,
    ) -> Result<(Target, Response), End> {
        let ids = FetchIds::of_fetch(req);
        let boot = self.inner.connector.bootstrap();
        if !boot.ready {
            return Err(unavailable(format!(
                "Tor is not bootstrapped ({}%: {}); there is no clear-net fallback",
                boot.percent, boot.phase
            )));
        }
        let first = check_url(&req.url).map_err(refused)?;
        let reg = self.inner.register(&ids);
        isolation.clone_from(&reg.label);
        let stop = reg.stopped();
        // The deadline covers the whole fetch, the wait for a place included,
        // so the server (which waits a little longer) always gets an answer.
        let deadline = self.inner.limits.deadline;
        let queued = AtomicBool::new(true);
        let work = async {
            let _permit = self.inner.permits.acquire().await.map_err(|_| failed("egress is shutting down"))?;
            queued.store(false, Ordering::Relaxed);
            let _flight = InFlight::enter(&self.inner.in_flight);
            self.hops(&ids, first, req.method, reg.token, trail).await
        };
        tokio::select! {
            biased;
            why = stop => Err(End(FetchStatus::Stopped, match why {
                StopReason::Revoked => format!("stopped: {} was revoked", ids.grant),
                StopReason::CampaignEnded => format!("stopped: {} ended", ids.campaign),
            })),
            r = tokio::time::timeout(deadline, work) => r.unwrap_or_else(|_| Err(if queued.load(Ordering::Relaxed) {
                unavailable(format!(
                    "egress is busy: no place among the {} fetches in flight within {} s",
                    self.inner.limits.max_in_flight,
                    deadline.as_secs_f64()
                ))
            } else {
                failed(format!("the fetch took longer than {} s", deadline.as_secs_f64()))
            })),
        }
    }

    async fn hops(
        &self,
        ids: &FetchIds,
        mut target: Target,
        method: FetchMethod,
        isolation: IsolationToken,
        trail: &mut Vec<String>,
    ) -> Result<(Target, Response), End> {
        let limits = &self.inner.limits;
        // The port the analyst granted: a redirect may go to it or to its
        // scheme's default port, never elsewhere (E2: no port probing by a
        // hostile in-scope page), and never from https down to http.
        let granted_port = target.port;
        loop {
            let hop = |why: String| match trail.len() {
                0 => why,
                n => format!("redirect hop {n} to `{}` refused: {why}", shown(target.url.as_str())),
            };
            let terms = self.start_request(ids, &target, trail.is_empty()).await.map_err(|w| refused(hop(w)))?;
            let io = match tokio::time::timeout(
                limits.connect,
                self.inner.connector.connect(&target.host, target.port, isolation),
            )
            .await
            {
                Ok(Ok(io)) => io,
                Ok(Err(why)) => return Err(unavailable(why)),
                Err(_) => {
                    return Err(unavailable(format!("no Tor stream within {} s", limits.connect.as_secs_f64())));
                }
            };
            let grant = ids.grant;
            let mut hop_bytes = Bytes { inner: &self.inner, grant, n: 0 };
            let take = |n: u64| {
                hop_bytes.n = hop_bytes.n.saturating_add(n);
                self.inner.take_bytes(grant, &terms, n)
            };
            let exchanged = http::exchange(io, &target, method, limits, &self.inner.bodies, take).await;
            drop(hop_bytes);
            let resp = exchanged.map_err(|e| match e {
                ExchangeError::Failed(m) | ExchangeError::Budget(m) => failed(m),
            })?;
            let location = http::is_redirect(resp.status).then(|| location(&resp.headers)).flatten();
            let Some(location) = location else { return Ok((target, resp)) };
            if trail.len() >= usize::from(limits.max_redirects) {
                return Err(failed(format!("more than {} redirects", limits.max_redirects)));
            }
            let next = target
                .url
                .join(&location)
                .map_err(|e| failed(format!("redirect to an invalid Location `{}`: {e}", shown(&location))))?;
            let n = trail.len() + 1;
            let next = check_url(next.as_str())
                .map_err(|why| refused(format!("redirect hop {n} to `{}` refused: {why}", shown(next.as_str()))))?;
            if let Some(why) = redirect_refusal(&target, &next, granted_port) {
                return Err(refused(format!("redirect hop {n} to `{}` refused: {why}", shown(next.url.as_str()))));
            }
            trail.push(next.url.to_string());
            target = next;
        }
    }

    /// Checks one hop against the ledger and counts it, off the async thread.
    async fn start_request(&self, ids: &FetchIds, target: &Target, first: bool) -> Result<HopTerms, String> {
        let (ledger, ids, target) = (self.inner.ledger.clone(), *ids, target.clone());
        blocking(move || ledger.start_request(&ids, &target, first, chrono::Utc::now())).await
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a fetch under its grant and campaign (creating the
    /// campaign's isolation token on first use).
    fn register(self: &Arc<Self>, ids: &FetchIds) -> Registration {
        let mut s = self.lock();
        s.generation += 1;
        let generation = s.generation;
        let (ws, grant, campaign) = (ids.workspace, ids.grant.id(), ids.campaign.id());
        let g = s.grants.entry((ws, grant)).or_insert_with(|| Live {
            generation,
            cancel: CancellationToken::new(),
            count: 0,
        });
        g.count += 1;
        let (grant_gen, grant_cancel) = (g.generation, g.cancel.clone());
        forget_idle_campaigns(&mut s.campaigns, (ws, campaign), &self.limits);
        let c = s.campaigns.entry((ws, campaign)).or_insert_with(|| CampaignSlot {
            live: Live { generation, cancel: CancellationToken::new(), count: 0 },
            token: IsolationToken::new(),
            label: format!("workspace:{ws}/campaign:{campaign}#{generation}"),
            idle_since: None,
        });
        c.live.count += 1;
        c.idle_since = None;
        Registration {
            inner: self.clone(),
            ws,
            grant: (grant, grant_gen, grant_cancel),
            campaign: (campaign, c.live.generation, c.live.cancel.clone()),
            token: c.token,
            label: c.label.clone(),
        }
    }

    /// Counts body bytes received under a grant; refuses past its budget:
    /// what the ledger had when the hop started, plus what every hop of the
    /// grant in flight has received since.
    fn take_bytes(&self, grant: GrantRef, terms: &HopTerms, n: u64) -> Result<(), String> {
        let mut s = self.lock();
        let pending = s.pending_bytes.entry(grant.id()).or_default();
        *pending = pending.saturating_add(n);
        if terms.bytes_used.saturating_add(*pending) > terms.max_bytes {
            return Err(format!(
                "the byte budget of {grant} ran out during the body ({} bytes); nothing kept",
                terms.max_bytes
            ));
        }
        Ok(())
    }
}

/// The body bytes of one hop: added to the ledger when the hop ends, then
/// no longer pending.
struct Bytes<'a> {
    inner: &'a Inner,
    grant: GrantRef,
    n: u64,
}

impl Drop for Bytes<'_> {
    /// Runs whichever way the hop ends (a stop drops it mid-body): the
    /// bytes received count, always. One short write, on this thread.
    fn drop(&mut self) {
        let n = std::mem::take(&mut self.n);
        if n == 0 {
            return;
        }
        if let Err(e) = self.inner.ledger.add_bytes(self.grant, n) {
            tracing::error!(grant = %self.grant, error = %e, "the ledger did not record the bytes received");
        }
        let mut s = self.inner.lock();
        if let Some(p) = s.pending_bytes.get_mut(&self.grant.id()) {
            *p = p.saturating_sub(n);
            if *p == 0 {
                s.pending_bytes.remove(&self.grant.id());
            }
        }
    }
}

/// A ledger operation off the async thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| Err(format!("the ledger task failed: {e}")))
}

/// The outcome without its body, for the log.
fn strip_body(out: &FetchOutcome) -> FetchOutcome {
    FetchOutcome { body_handle: None, headers: Vec::new(), ..out.clone() }
}

fn failed_response(code: FailureCode, message: String) -> EgressResponse {
    EgressResponse::Failed(Failure::new(code, truncate_chars(&message, MAX_REASON_CHARS)))
}

/// A fetch known to the stop map; unregisters itself when dropped.
struct Registration {
    inner: Arc<Inner>,
    ws: Uuid,
    grant: (Uuid, u64, CancellationToken),
    campaign: (Uuid, u64, CancellationToken),
    token: IsolationToken,
    label: String,
}

impl Registration {
    /// Resolves when the fetch must stop.
    fn stopped(&self) -> impl std::future::Future<Output = StopReason> + Send + 'static {
        let (g, c) = (self.grant.2.clone(), self.campaign.2.clone());
        async move {
            tokio::select! {
                _ = g.cancelled() => StopReason::Revoked,
                _ = c.cancelled() => StopReason::CampaignEnded,
            }
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut s = self.inner.lock();
        let key = (self.ws, self.grant.0);
        if let Some(l) = s.grants.get_mut(&key).filter(|l| l.generation == self.grant.1) {
            l.count = l.count.saturating_sub(1);
            if l.count == 0 {
                s.grants.remove(&key);
            }
        }
        if let Some(c) =
            s.campaigns.get_mut(&(self.ws, self.campaign.0)).filter(|c| c.live.generation == self.campaign.1)
        {
            c.live.count = c.live.count.saturating_sub(1);
            if c.live.count == 0 {
                c.idle_since = Some(Instant::now());
            }
        }
    }
}

/// Forgets the campaign slots idle for longer than the limits allow and,
/// when `next` would be one slot too many, the longest idle one.
fn forget_idle_campaigns(campaigns: &mut HashMap<(Uuid, Uuid), CampaignSlot>, next: (Uuid, Uuid), limits: &Limits) {
    let now = Instant::now();
    campaigns.retain(|_, c| c.idle_since.is_none_or(|t| now.duration_since(t) < limits.campaign_idle));
    if campaigns.len() >= limits.max_campaigns && !campaigns.contains_key(&next) {
        let oldest = campaigns.iter().filter_map(|(k, c)| c.idle_since.map(|t| (t, *k))).min();
        if let Some((_, k)) = oldest {
            campaigns.remove(&k);
        }
    }
}

/// Counts a fetch holding a place among the in-flight ones.
struct InFlight<'a>(&'a AtomicU32);

impl<'a> InFlight<'a> {
    fn enter(n: &'a AtomicU32) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Self(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn location(headers: &HeaderMap) -> Option<String> {
    headers.get(LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

/// Writes a response into the outcome (E5: provenance); its body, if any,
/// is handed to `keep`, which answers the handle the server reads it by.
fn fill(
    out: &mut FetchOutcome,
    target: &Target,
    resp: Response,
    keep: impl FnOnce(&mut crate::bodies::Spool) -> Option<String>,
) {
    out.status = FetchStatus::Fetched;
    out.final_url = Some(target.url.to_string());
    out.http_status = Some(resp.status);
    out.headers = kept_headers(&resp.headers);
    out.content_type = resp
        .headers
        .get(CONTENT_TYPE)
        .map(|v| truncate_chars(&String::from_utf8_lossy(v.as_bytes()), MAX_HEADER_VALUE_CHARS));
    if let Some(mut spool) = resp.body {
        out.body_bytes = spool.len();
        out.body_sha256 = Some(spool.sha256());
        if spool.len() > 0 {
            out.body_handle = keep(&mut spool);
            if out.body_handle.is_none() {
                out.status = FetchStatus::Failed;
                out.reason = Some("the body could not be kept for the server; nothing stored".to_owned());
            }
        }
    }
}

/// The kept headers, lower-case names, bounded values, at most
/// [`MAX_KEPT_HEADERS`].
pub fn kept_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    KEPT_HEADERS
        .iter()
        .flat_map(|name| {
            headers.get_all(*name).iter().map(move |v| {
                ((*name).to_owned(), truncate_chars(&String::from_utf8_lossy(v.as_bytes()), MAX_HEADER_VALUE_CHARS))
            })
        })
        .take(MAX_KEPT_HEADERS)
        .collect()
}

fn truncate_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

fn invalid(message: String) -> EgressResponse {
    EgressResponse::Failed(Failure {
        code: FailureCode::InvalidInput,
        message: truncate_chars(&message, MAX_REASON_CHARS),
    })
}

/// Why a redirect from `from` to `to` is refused whatever the scope says:
/// a downgrade from https to http, or a port other than the granted one or
/// the scheme's default (a hostile page must not steer egress to other
/// services of an in-scope host, SPEC E2).
pub(crate) fn redirect_refusal(from: &Target, to: &Target, granted_port: u16) -> Option<String> {
    if from.tls && !to.tls {
        return Some("a redirect from https to http is not followed".into());
    }
    let default = if to.tls { 443 } else { 80 };
    (to.port != granted_port && to.port != default).then(|| {
        format!("port {} is neither the granted port {granted_port} nor the scheme's default {default}", to.port)
    })
}
