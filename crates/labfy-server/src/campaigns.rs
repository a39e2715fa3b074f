//! The campaign runner (SPEC E3–E6, Q2, W4; DESIGN "A research, end to
//! end", steps 5–6): it runs the campaigns of a REAL workspace that a human
//! granted, through the governor's admission and egress's fetches, and
//! records every outcome in the store.
//!
//! One task per campaign, at most [`MAX_RUNNING_CAMPAIGNS`] running at once
//! (the others wait their turn, first come first served). A campaign's life,
//! top to bottom:
//!
//! 1. **Confirmation** (SPEC T2): the grant is egress's to allow, not the
//!    server's. The analyst's decision was relayed to egress as a proposal
//!    (again here if egress never got it); the campaign stays `PENDING`
//!    until a human confirms it on the terminal (`labfy grant approve`) or
//!    on egress's confirmation page, polling egress every
//!    [`CONFIRM_POLL`]. A refusal, a revocation or the grant's expiry there
//!    ends it `FAILED` with the reason; so does an egress that does not
//!    answer (E6: no retry), or a run without egress. A confirmed campaign
//!    then waits while egress says Tor is not ready (SPEC V8), asking every
//!    [`TOR_POLL`], holding nothing; the grant's expiry ends that wait
//!    `FAILED`, nothing fetched.
//! 2. **Admission** (Q2): the governor is asked to admit it (scratch: the
//!    largest body egress keeps — the operator's bound, which egress's
//!    status tells — per item; a modest RAM bound; one fetch at a time).
//!    Refused — or a governor that does not answer — ends it `FAILED` with
//!    the reason, once: no retry loop. (Without a supervisor
//!    there is no governor to ask — but no egress either, so such a
//!    campaign already failed at its confirmation; [`NO_GOVERNOR`] would
//!    name the admission otherwise.)
//!    A governor that does not take the call (a server just restarted,
//!    whose new pid the supervisor has not told the governor yet) is asked
//!    again for [`ADMISSION_PATIENCE`] first (SPEC F4).
//! 3. **Items**, in the order the analyst listed them: egress fetches each
//!    over Tor under the grant (E3) and answers an outcome. A page's body
//!    waits in egress's scratch directory; the runner streams it into the
//!    blob store (checking egress's SHA-256), has the confined parser worker
//!    read it — exactly as an imported file (SPEC C3) — and records it as
//!    evidence with provenance (E5), whatever its type (a body left unread,
//!    on a stop, expires in egress). A refusal, a failure or a stop becomes
//!    the item's reason. Tor down, not bootstrapped, or egress unreachable
//!    (E6) ends the campaign `FAILED` at once — the item `UNAVAILABLE`, the
//!    rest `STOPPED`: no retry, no other path, nothing fetched in clear.
//!    The governor's lease is renewed before each item and every
//!    [`LEASE_RENEW_EVERY`] while a fetch lasts (SPEC F5). A reservation the
//!    governor no longer holds — released by its pressure reaction, or
//!    lapsed — ends the campaign `STOPPED`: its planned items `STOPPED`,
//!    the governor's reason in its detail. A campaign never runs on
//!    unaccounted.
//! 4. **End**: `COMPLETED` (or `FAILED` when no item was fetched), egress
//!    forgets the campaign's isolation token, the governor's reservation is
//!    released — always, whichever way the campaign ended.
//!
//! A revocation stops the grant's campaigns in the store first (one
//! transaction), then [`CampaignRunner::stop_grant`] cancels their tasks: a
//! stopped task records nothing more, and an answer arriving after the stop
//! is dropped. A server shutdown ([`CampaignRunner::close`]) leaves the
//! campaigns as they stand — a `RUNNING` one keeps its `PLANNED` items —
//! and [`CampaignRunner::resume_unfinished`] picks them up at the next start.
//!
//! Every store error is logged and ends the campaign `FAILED` with the
//! reason (unless a revocation already ended it): no result is lost
//! silently. Logs name campaigns, positions and statuses, never a target's
//! URL (STYLE 13).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use labfy_core::bounded::truncate_chars;
use labfy_core::{CampaignRef, GrantRef};
use labfy_ipc::messages::FailureCode;
use labfy_ipc::messages::egress::{
    DEFAULT_MAX_BODY_BYTES, FetchMethod, FetchOutcome, FetchRequest, FetchStatus, GrantPhase, GrantProposal,
    GrantRecord, MAX_BODY_BYTES_CEILING,
};
use labfy_ipc::messages::governor::{CampaignAsk, GovernorRequest, GovernorResponse};
use labfy_store::blobs::{Blob, BlobStore};
use labfy_store::{
    Campaign, CampaignStatus, FetchedBody, FetchedPage, Grant, ItemStatus, MAX_CAMPAIGN_DETAIL_CHARS, Store, StoreError,
};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::db::Db;
use crate::egress::{EgressClient, EgressError, one_line};

mod agent_fetch;

/// Campaigns running at once; the others wait for a slot.
pub const MAX_RUNNING_CAMPAIGNS: usize = 2;
/// RAM a campaign asks the governor for: one body in flight, decoded and
/// stored, with room to spare.
pub const CAMPAIGN_RAM_BYTES: u64 = 64 * 1024 * 1024;
/// Fetches a campaign has in flight at once.
pub const CAMPAIGN_CONCURRENCY: u32 = 1;
/// A campaign's priority in the governor's ledger (a model run has 100).
pub const CAMPAIGN_PRIORITY: u8 = 50;
/// Deadline of one governor call (admission, release), connection included.
pub const GOVERNOR_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The admission detail when this run has no governor (no supervisor).
pub const NO_GOVERNOR: &str = "no governor in this run";
/// How often a campaign waiting for a human's confirmation asks egress.
pub const CONFIRM_POLL: Duration = Duration::from_secs(1);
/// How often a confirmed campaign waiting for Tor's bootstrap asks egress.
pub const TOR_POLL: Duration = Duration::from_secs(2);
/// Longest the confined parser may read one fetched body.
pub const FETCH_PARSE_SECONDS: u64 = 30;
/// How often a running campaign renews its governor lease while one fetch
/// lasts (it renews before each item too): well inside the governor's
/// 10-minute lease, so one missed renewal does not lapse it (SPEC F5).
pub const LEASE_RENEW_EVERY: Duration = Duration::from_secs(60);
/// How long an admission waits for a governor that does not take the call
/// yet: a server just restarted asks before the supervisor has told the
/// governor its new pid (SPEC F4); the call is tried again every
/// [`ADMISSION_RETRY`] until then.
pub const ADMISSION_PATIENCE: Duration = Duration::from_secs(30);
/// Pause between two admission calls the governor did not take.
pub const ADMISSION_RETRY: Duration = Duration::from_millis(500);
/// How often an agent's fetch looks at the campaign it waits for, and a
/// campaign at the agent's fetches it waits for before it ends (SPEC F2).
pub const AGENT_FETCH_POLL: Duration = Duration::from_millis(200);

/// The campaign runner lent to the gateway as the runner of the agent's
/// `web.fetch` (SPEC F2). Its calls block: the gateway runs on the blocking
/// pool.
pub struct AgentFetcher {
    runner: CampaignRunner,
    handle: tokio::runtime::Handle,
}

impl AgentFetcher {
    /// A fetcher over `runner`, driving its futures on the current tokio
    /// runtime. Call inside one.
    pub fn new(runner: CampaignRunner) -> Self {
        Self { runner, handle: tokio::runtime::Handle::current() }
    }
}

impl labfy_gateway::Fetcher for AgentFetcher {
    fn fetch(&self, ask: &labfy_gateway::AgentFetch) -> Result<labfy_gateway::Fetched, String> {
        self.handle.block_on(self.runner.agent_fetch(ask))
    }
}

/// Runs the REAL campaigns of one workspace. Cheap to clone; one per server.
#[derive(Clone)]
pub struct CampaignRunner {
    inner: Arc<Inner>,
}

struct Inner {
    db: Db,
    workspace: Uuid,
    egress: EgressClient,
    /// The supervisor's runtime directory: where the governor is.
    runtime_dir: Option<PathBuf>,
    /// Where fetched bodies are kept (the data directory's blob store).
    blobs: BlobStore,
    /// The confined parser worker's program.
    parser: PathBuf,
    slots: Arc<Semaphore>,
    /// Campaigns with a task (queued or running), by campaign id.
    live: Mutex<HashMap<Uuid, Live>>,
    /// Items being fetched now, by campaign id: claimed by the campaign's
    /// task or by an agent's `web.fetch` (SPEC F2), so that each item is
    /// fetched once.
    claims: Mutex<HashMap<Uuid, HashSet<u32>>>,
    /// How many tasks are alive (for [`CampaignRunner::idle`]).
    tasks: watch::Sender<usize>,
    /// Server shutdown: every task leaves, recording nothing.
    closing: CancellationToken,
}

struct Live {
    grant: GrantRef,
    stop: CancellationToken,
}

impl CampaignRunner {
    /// A runner for `workspace`, asking the governor and egress of the
    /// supervisor's `runtime_dir` (none: no governor, and no egress — every
    /// fetch is unavailable). Fetched bodies are read by the confined parser
    /// worker started from `parser` (SPEC C3).
    pub fn new(db: Db, workspace: Uuid, runtime_dir: Option<PathBuf>, parser: &Path) -> Self {
        Self {
            inner: Arc::new(Inner {
                blobs: BlobStore::at(db.data_dir()),
                parser: parser.to_owned(),
                db,
                workspace,
                egress: EgressClient::new(runtime_dir.clone()),
                runtime_dir,
                slots: Arc::new(Semaphore::new(MAX_RUNNING_CAMPAIGNS)),
                live: Mutex::new(HashMap::new()),
                claims: Mutex::new(HashMap::new()),
                tasks: watch::Sender::new(0),
                closing: CancellationToken::new(),
            }),
        }
    }

    /// Runs `campaign` (of `grant`, in this runner's workspace) on a task of
    /// its own, once a slot is free; true when it did. A campaign that
    /// already has a task, or a runner that is closed, changes nothing. Call
    /// inside a tokio runtime.
    pub fn submit(&self, campaign: CampaignRef, grant: GrantRef) -> bool {
        if self.inner.closing.is_cancelled() {
            tracing::warn!(%campaign, "the server is stopping: the campaign is left for the next start");
            return false;
        }
        let stop = CancellationToken::new();
        {
            let mut live = self.inner.live.lock().unwrap_or_else(PoisonError::into_inner);
            if live.contains_key(&campaign.id()) {
                return false;
            }
            live.insert(campaign.id(), Live { grant, stop: stop.clone() });
        }
        self.inner.tasks.send_modify(|n| *n += 1);
        tokio::spawn(task(self.inner.clone(), campaign, grant, stop));
        true
    }

    /// Cancels the tasks of `grant`'s campaigns (after its revocation was
    /// stored): they record nothing more. Returns how many it cancelled.
    pub fn stop_grant(&self, grant: GrantRef) -> usize {
        let live = self.inner.live.lock().unwrap_or_else(PoisonError::into_inner);
        let mut n = 0;
        for l in live.values().filter(|l| l.grant == grant) {
            l.stop.cancel();
            n += 1;
        }
        n
    }

    /// Submits the unfinished REAL campaigns of this runner's workspace (at
    /// server start): `PENDING` and `ADMITTED` ones start from admission, a
    /// `RUNNING` one interrupted by a restart is admitted again and goes on
    /// with its `PLANNED` items. Returns how many got a task.
    pub async fn resume_unfinished(&self) -> Result<usize, StoreError> {
        let db = self.inner.db.clone();
        let all = tokio::task::spawn_blocking(move || db.read_blocking(|r| r.unfinished_real_campaigns()))
            .await
            .map_err(|e| StoreError::Internal(format!("the store task failed: {e}")))??;
        let ws = self.inner.workspace;
        let (ours, others): (Vec<_>, Vec<_>) = all.into_iter().partition(|(w, _)| *w == ws);
        if !others.is_empty() {
            tracing::info!(campaigns = others.len(), "unfinished campaigns of other workspaces wait for their server");
        }
        let mut resumed = 0;
        for (_, c) in &ours {
            if self.submit(c.id, c.grant_id) {
                tracing::info!(campaign = %c.id, status = %c.status, "resuming an unfinished campaign");
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Relays `grant` (with its campaign) to egress's ledger as a proposal
    /// that a human must confirm outside the server (SPEC T2); `summary` is
    /// what the research is for. Idempotent. The record has the one-time
    /// link to egress's confirmation page.
    pub async fn propose(
        &self,
        campaign: CampaignRef,
        grant: GrantRef,
        summary: &str,
    ) -> Result<GrantRecord, EgressError> {
        let (db, ws) = (self.inner.db.clone(), self.inner.workspace);
        let read = tokio::task::spawn_blocking(move || {
            db.read_blocking(|r| Ok((r.grant(ws, &grant)?, r.campaign(ws, &campaign)?)))
        })
        .await
        .unwrap_or_else(|e| Err(StoreError::Internal(format!("the store task failed: {e}"))));
        let (g, c) = read.map_err(|e| EgressError::Unexpected(one_line(&format!("the store: {e}"))))?;
        let proposal =
            proposal(ws, &g, &c, summary, chrono::Utc::now()).map_err(|why| EgressError::Unexpected(one_line(&why)))?;
        self.inner.egress.propose(proposal).await
    }

    /// Campaigns with a task now (queued or running).
    pub fn live(&self) -> usize {
        *self.inner.tasks.borrow()
    }

    /// Server shutdown: no campaign starts any more, and running ones stop
    /// where they are without recording anything (the next start resumes
    /// them); their reservations are released.
    pub fn close(&self) {
        self.inner.closing.cancel();
    }

    /// Waits until no campaign has a task, at most `deadline`; true when idle.
    pub async fn idle(&self, deadline: Duration) -> bool {
        let mut rx = self.inner.tasks.subscribe();
        tokio::time::timeout(deadline, rx.wait_for(|n| *n == 0)).await.is_ok_and(|r| r.is_ok())
    }
}

/// The life of one campaign's task: a slot, the run, the cleanup.
async fn task(inner: Arc<Inner>, campaign: CampaignRef, grant: GrantRef, stop: CancellationToken) {
    let permit = tokio::select! {
        biased;
        _ = stop.cancelled() => None,
        _ = inner.closing.cancelled() => None,
        p = inner.slots.clone().acquire_owned() => p.ok(),
    };
    if let Some(_slot) = permit {
        let mut run =
            Run { inner: &inner, campaign, grant, stop: &stop, reservation: None, asked_egress: false, asked_by: None };
        let _ = run.drive().await;
        run.cleanup().await;
    }
    inner.live.lock().unwrap_or_else(PoisonError::into_inner).remove(&campaign.id());
    inner.tasks.send_modify(|n| *n = n.saturating_sub(1));
}

/// The run stopped driving: what had to be recorded is recorded (or the
/// campaign was stopped, or the server is stopping).
struct Halt;

/// One campaign being driven.
struct Run<'a> {
    inner: &'a Inner,
    campaign: CampaignRef,
    grant: GrantRef,
    stop: &'a CancellationToken,
    /// The governor's reservation, released at the end.
    reservation: Option<String>,
    /// Whether egress was asked anything for this campaign.
    asked_egress: bool,
    /// The agent's call this run fetches for (an agent's `web.fetch`, F2);
    /// `None` for the campaign's own task.
    asked_by: Option<String>,
}

impl Run<'_> {
    async fn drive(&mut self) -> Result<(), Halt> {
        let c = self.read().await?;
        let status = campaign_status(&c);
        if c.synthetic || status.is_finished() {
            return Ok(());
        }
        self.check_stop()?;
        // A grant that expired meanwhile (a campaign resumed after a long
        // stop): nothing is asked of the governor or egress. (A revoked one
        // ended its campaigns in the revocation's transaction.)
        if !self.grant_active().await? {
            let why = format!("{} expired before the campaign could run its planned items", self.grant);
            tracing::warn!(campaign = %self.campaign, grant = %self.grant, "grant expired: the campaign fails");
            self.fail(&why).await;
            return Err(Halt);
        }
        if status == CampaignStatus::Pending {
            self.confirmed(&c).await?;
        }
        self.tor_ready().await?;
        let admission = self.admit(&c).await?;
        self.check_stop()?;
        let (ws, id) = (self.inner.workspace, self.campaign);
        if status == CampaignStatus::Pending {
            let detail = truncate_chars(&admission, MAX_CAMPAIGN_DETAIL_CHARS);
            self.write("recording the admission", move |s| s.campaign_admitted(ws, &id, &detail)).await?;
        }
        if status != CampaignStatus::Running {
            self.write("starting the campaign", move |s| s.campaign_started(ws, &id)).await?;
        }
        tracing::info!(campaign = %self.campaign, items = c.items_total, %admission, "campaign running");
        let planned: Vec<(u32, String)> = self
            .read()
            .await?
            .items
            .into_iter()
            .filter(|i| i.status == ItemStatus::Planned)
            .map(|i| (i.position, i.url))
            .collect();
        let id = self.campaign.id();
        for (position, url) in planned {
            self.check_stop()?;
            self.renew().await?;
            // An agent's `web.fetch` that has this item fetches it (F2).
            if !self.inner.claim(id, position) {
                continue;
            }
            let still_planned = self
                .read()
                .await
                .map(|c| c.items.iter().any(|i| i.position == position && i.status == ItemStatus::Planned));
            let fetched = match still_planned {
                Ok(true) => self.fetch_item(position, url).await,
                Ok(false) => Ok(()),
                Err(halt) => Err(halt),
            };
            self.inner.unclaim(id, position);
            fetched?;
        }
        self.agent_fetches_done().await?;
        self.check_stop()?;
        self.finish().await
    }

    /// Waits until no agent's fetch holds an item of this campaign, so that
    /// the campaign ends (and egress forgets it) after them. Bounded by the
    /// agent's own deadline.
    async fn agent_fetches_done(&self) -> Result<(), Halt> {
        while self.inner.claimed(self.campaign.id()) {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Err(Halt),
                _ = self.inner.closing.cancelled() => return Err(Halt),
                () = tokio::time::sleep(AGENT_FETCH_POLL) => {}
            }
        }
        Ok(())
    }

    /// A revocation or a shutdown: stop here, recording nothing.
    fn check_stop(&self) -> Result<(), Halt> {
        if self.stop.is_cancelled() || self.inner.closing.is_cancelled() { Err(Halt) } else { Ok(()) }
    }

    /// Waits until a human has confirmed the grant where the server cannot
    /// reach (SPEC T2), asking egress every [`CONFIRM_POLL`]; proposes it
    /// again if egress has no record of it. Anything but an approval ends
    /// the campaign `FAILED` with the reason; a stop ends the wait.
    async fn confirmed(&mut self, c: &Campaign) -> Result<(), Halt> {
        let mut told = false;
        loop {
            self.check_stop()?;
            let why = match self.inner.egress.grant_state(self.inner.workspace, self.grant).await {
                Ok(r) => match r.phase {
                    GrantPhase::Approved => {
                        let via = r.decided_via.unwrap_or_default();
                        tracing::info!(campaign = %self.campaign, grant = %self.grant, %via, "grant confirmed by a human");
                        return Ok(());
                    }
                    GrantPhase::Proposed => {
                        if !told {
                            tracing::info!(campaign = %self.campaign, grant = %self.grant,
                                           "waiting for a human to confirm the grant outside the server");
                            told = true;
                        }
                        None
                    }
                    GrantPhase::Refused => Some(format!("{} was refused at its confirmation", self.grant)),
                    GrantPhase::Revoked => Some(format!("{} was revoked", self.grant)),
                    GrantPhase::Expired => Some(format!("{} expired before a human confirmed it", self.grant)),
                    GrantPhase::Ended => Some(format!("egress has ended {}", self.campaign)),
                },
                Err(EgressError::Failed { code: FailureCode::NotFound, .. }) => {
                    match self.inner.runner_propose(self.campaign, self.grant, c).await {
                        Ok(()) => None,
                        Err(e) => Some(format!("egress refused the grant's proposal: {e}")),
                    }
                }
                Err(EgressError::Absent) => {
                    Some("no egress in this run: a grant cannot be confirmed, nothing is fetched".to_owned())
                }
                // E6: no retry, no other path.
                Err(e) => Some(format!("egress unreachable: the grant cannot be confirmed ({e})")),
            };
            if let Some(why) = why {
                tracing::warn!(campaign = %self.campaign, reason = %why, "grant not confirmed: the campaign fails");
                self.fail(&why).await;
                return Err(Halt);
            }
            if !self.grant_active().await? {
                let why = format!("{} expired before a human confirmed it", self.grant);
                self.fail(&why).await;
                return Err(Halt);
            }
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Err(Halt),
                _ = self.inner.closing.cancelled() => return Err(Halt),
                _ = tokio::time::sleep(CONFIRM_POLL) => {}
            }
        }
    }

    /// Waits until egress says Tor is ready (SPEC V8), asking every
    /// [`TOR_POLL`]: a campaign confirmed while Tor bootstraps waits for it,
    /// before its admission and holding nothing, instead of failing at its
    /// first item. The grant's expiry ends the wait `FAILED`, nothing
    /// fetched; a stop ends it. An egress whose status cannot be read is
    /// not waited for: its fetches answer for it (E6).
    async fn tor_ready(&self) -> Result<(), Halt> {
        let mut told = false;
        loop {
            self.check_stop()?;
            match self.inner.egress.status().await {
                Ok(s) if !s.ready => {
                    if !told {
                        tracing::info!(campaign = %self.campaign, percent = s.bootstrap_percent,
                                       "confirmed; waiting for Tor to bootstrap before the campaign runs");
                        told = true;
                    }
                }
                _ => return Ok(()),
            }
            if !self.grant_active().await? {
                let why = format!("Tor was not ready before {} expired: nothing was fetched", self.grant);
                tracing::warn!(campaign = %self.campaign, grant = %self.grant, "Tor not ready within the grant: the campaign fails");
                self.fail(&why).await;
                return Err(Halt);
            }
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Err(Halt),
                _ = self.inner.closing.cancelled() => return Err(Halt),
                _ = tokio::time::sleep(TOR_POLL) => {}
            }
        }
    }

    /// Asks the governor to admit the campaign; a refusal ends it `FAILED`.
    /// Returns the admission's detail.
    async fn admit(&mut self, c: &Campaign) -> Result<String, Halt> {
        let Some(dir) = self.inner.runtime_dir.clone() else {
            return Ok(NO_GOVERNOR.to_owned());
        };
        let items = u64::try_from(c.items_total).unwrap_or(0).max(1);
        // The operator's body bound, as egress applies it (SPEC C3): each
        // body waits in scratch, then is copied to the blob store.
        let max_body = match self.inner.egress.status().await {
            Ok(s) if s.max_body_bytes > 0 => s.max_body_bytes.min(MAX_BODY_BYTES_CEILING),
            _ => DEFAULT_MAX_BODY_BYTES,
        };
        let ask = CampaignAsk {
            campaign: self.campaign,
            scratch_bytes: items.saturating_mul(max_body),
            ram_bytes: CAMPAIGN_RAM_BYTES,
            concurrency: CAMPAIGN_CONCURRENCY,
            priority: CAMPAIGN_PRIORITY,
        };
        // Not raced against a stop: an admission in flight is waited for
        // (bounded), so that its reservation is known and released. A
        // governor that does not take the call yet is asked again (F4).
        let patience = tokio::time::Instant::now() + ADMISSION_PATIENCE;
        let answer = loop {
            match governor_call(&dir, GovernorRequest::AdmitCampaign(ask.clone())).await {
                Err(e) if tokio::time::Instant::now() < patience && self.check_stop().is_ok() => {
                    tracing::info!(campaign = %self.campaign, error = %e, "the governor does not take the call yet");
                    tokio::time::sleep(ADMISSION_RETRY).await;
                }
                answer => break answer,
            }
        };
        let why = match answer {
            Ok(GovernorResponse::Admitted { reservation }) => {
                let detail = format!("admitted by the governor (reservation {})", one_line(&reservation));
                self.reservation = Some(reservation);
                return Ok(detail);
            }
            Ok(GovernorResponse::Refused(r)) => r.said(),
            Ok(GovernorResponse::Failed(f)) => format!("the governor could not admit it: {}: {}", f.code, f.message),
            Ok(_) => "the governor answered the admission with another message".to_owned(),
            Err(e) => e,
        };
        tracing::warn!(campaign = %self.campaign, reason = %why, "campaign not admitted");
        self.fail(&why).await;
        Err(Halt)
    }

    /// Fetches item `position` through egress and records its outcome.
    async fn fetch_item(&mut self, position: u32, url: String) -> Result<(), Halt> {
        let request = FetchRequest {
            workspace_id: self.inner.workspace,
            campaign_id: self.campaign,
            grant_id: self.grant,
            url: url.clone(),
            method: FetchMethod::Get,
        };
        self.asked_egress = true;
        let (inner, stop) = (self.inner, self.stop);
        let fetch = inner.egress.fetch(request);
        tokio::pin!(fetch);
        let answer = loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Err(Halt),
                _ = inner.closing.cancelled() => return Err(Halt),
                a = &mut fetch => break a,
                // A long fetch keeps the lease (F5).
                () = tokio::time::sleep(LEASE_RENEW_EVERY) => self.renew().await?,
            }
        };
        // A stop that came with the answer wins: nothing more is recorded.
        self.check_stop()?;
        let outcome = match answer {
            Ok(o) => o,
            Err(e) if e.is_unavailable() => return self.unavailable(position, &e.to_string()).await,
            Err(e) => {
                let why = format!("egress refused the request: {e}");
                return self.item(position, ItemStatus::Refused, &why, 0).await;
            }
        };
        if outcome.url != url {
            let why = "egress answered for another URL than the one asked; nothing stored";
            return self.item(position, ItemStatus::Failed, why, 0).await;
        }
        let reason = |default: &str| outcome.reason.clone().unwrap_or_else(|| default.to_owned());
        match outcome.status {
            FetchStatus::Fetched => self.record_page(position, outcome).await,
            FetchStatus::Refused => {
                self.item(position, ItemStatus::Refused, &reason("refused by egress"), outcome.body_bytes).await
            }
            FetchStatus::Failed => {
                self.item(position, ItemStatus::Failed, &reason("the fetch failed"), outcome.body_bytes).await
            }
            FetchStatus::Stopped => {
                self.item(position, ItemStatus::Stopped, &reason("stopped by egress"), outcome.body_bytes).await
            }
            FetchStatus::Unavailable => self.unavailable(position, &reason("Tor is unavailable")).await,
        }
    }

    /// A page egress fetched: its body streamed from egress into the blob
    /// store, read by the confined parser, then evidence with provenance —
    /// or, when the page cannot be stored as it came, the item `FAILED` with
    /// why.
    async fn record_page(&mut self, position: u32, o: FetchOutcome) -> Result<(), Halt> {
        let malformed = if o.http_status.is_none() {
            Some("egress reported a page without an HTTP status; nothing stored".to_owned())
        } else if o.body_sha256.is_none() && o.body_bytes > 0 {
            Some("egress reported a body without its SHA-256; nothing stored".to_owned())
        } else if o.body_bytes > MAX_BODY_BYTES_CEILING {
            Some(format!("egress announced {} bytes, more than any body bound; nothing stored", o.body_bytes))
        } else if o.body_bytes > 0 && o.body_handle.is_none() {
            Some(format!("egress announced {} bytes and kept none; nothing stored", o.body_bytes))
        } else {
            None
        };
        if let Some(why) = malformed {
            return self.item(position, ItemStatus::Failed, &why, o.body_bytes).await;
        }
        let bytes = o.body_bytes;
        let body = match (&o.body_handle, o.body_bytes) {
            (Some(handle), n) if n > 0 => {
                let blob = tokio::select! {
                    biased;
                    _ = self.stop.cancelled() => return Err(Halt),
                    _ = self.inner.closing.cancelled() => return Err(Halt),
                    b = self.take_body(handle, n) => b,
                };
                let blob = match blob {
                    Ok(b) => b,
                    Err(why) => return self.item(position, ItemStatus::Failed, &why, bytes).await,
                };
                let name = name_hint(o.final_url.as_deref().unwrap_or(&o.url), o.content_type.as_deref());
                // The answer's charset, which comes before the page's own (C3).
                let charset = o.content_type.as_deref().and_then(labfy_parse::charset_of);
                let (blobs, parser, b) = (self.inner.blobs.clone(), self.inner.parser.clone(), blob.clone());
                let parsed = tokio::task::spawn_blocking(move || {
                    blobs.parse_confined(&parser, &b, &name, charset, Duration::from_secs(FETCH_PARSE_SECONDS))
                })
                .await
                .unwrap_or_else(|e| labfy_parse::Parsed::unread("application/octet-stream", &e.to_string()));
                Some(FetchedBody { blob, parsed })
            }
            _ => None,
        };
        self.check_stop()?;
        let page = FetchedPage {
            final_url: o.final_url.clone().unwrap_or_else(|| o.url.clone()),
            url: o.url,
            redirects: o.redirects,
            http_status: o.http_status.unwrap_or_default(),
            headers: o.headers,
            content_type: o.content_type,
            body_sha256: o.body_sha256.unwrap_or_else(|| labfy_store::sha256_hex(&[])),
            body,
            started_at: o.started_at,
            elapsed_ms: o.elapsed_ms,
            isolation: o.isolation,
            asked_by: self.asked_by.clone(),
        };
        let (ws, id) = (self.inner.workspace, self.campaign);
        match self.store(move |s| s.record_fetch(ws, &id, position, &page)).await {
            Ok(evidence) => {
                tracing::info!(campaign = %self.campaign, position, %evidence, bytes, "page stored as evidence");
                Ok(())
            }
            // The store refused the page itself (SHA-256, scope, bounds):
            // the item says why, and the campaign goes on.
            Err(StoreError::Invalid(why)) => {
                tracing::warn!(campaign = %self.campaign, position, reason = %why, "page refused by the store");
                let why = format!("the page was not stored: {why}");
                self.item(position, ItemStatus::Failed, &why, bytes).await
            }
            Err(e) => Err(self.store_failed(&format!("storing the page of item {position}"), e).await),
        }
    }

    /// Streams a body waiting in egress into the blob store: `len` bytes,
    /// no more, hashed as written. The reason when it could not be kept.
    async fn take_body(&self, handle: &str, len: u64) -> Result<Blob, String> {
        let blobs = self.inner.blobs.clone();
        let mut writer = tokio::task::spawn_blocking(move || blobs.writer(len))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the body could not be kept: {e}; nothing stored"))?;
        // A page-cache write of one chunk: short enough for an async worker.
        let mut sink = |chunk: &[u8]| writer.write(chunk).map_err(|e| e.to_string());
        if let Err(e) = self.inner.egress.read_body(self.inner.workspace, handle, len, &mut sink).await {
            // Dropped uncommitted: no half blob.
            return Err(format!("the body could not be read from egress: {e}; nothing stored"));
        }
        tokio::task::spawn_blocking(move || writer.commit())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the body could not be kept: {e}; nothing stored"))
    }

    /// Records how item `position` ended without a page.
    async fn item(&mut self, position: u32, status: ItemStatus, reason: &str, bytes: u64) -> Result<(), Halt> {
        tracing::info!(campaign = %self.campaign, position, status = status.as_str(), "item ended without a page");
        let (ws, id, reason) = (self.inner.workspace, self.campaign, one_line(reason));
        self.write(&format!("recording the outcome of item {position}"), move |s| {
            s.record_item_outcome(ws, &id, position, status, &reason, bytes)
        })
        .await
    }

    /// Tor (or egress) is unavailable (E6): the item `UNAVAILABLE`, the
    /// campaign `FAILED` and its other items `STOPPED`. Never a retry.
    async fn unavailable(&mut self, position: u32, reason: &str) -> Result<(), Halt> {
        tracing::warn!(campaign = %self.campaign, position, %reason, "Tor unavailable: the campaign ends");
        self.item(position, ItemStatus::Unavailable, reason, 0).await?;
        const HEAD: &str = "Tor unavailable: ";
        const TAIL: &str = "; nothing was fetched in clear";
        let room = MAX_CAMPAIGN_DETAIL_CHARS - HEAD.len() - TAIL.len();
        let detail = format!("{HEAD}{}{TAIL}", truncate_chars(&one_line(reason), room));
        let (ws, id) = (self.inner.workspace, self.campaign);
        self.write("ending the campaign", move |s| s.campaign_finished(ws, &id, CampaignStatus::Failed, &detail))
            .await?;
        Err(Halt)
    }

    /// Renews the governor's lease (SPEC F5). A reservation the governor no
    /// longer holds ends the campaign `STOPPED` with the governor's reason
    /// (its planned items `STOPPED`). A governor that does not answer is
    /// logged and the campaign goes on: were it to stay silent past the
    /// lease, the lease lapses there and the next answer stops the campaign.
    async fn renew(&mut self) -> Result<(), Halt> {
        let (Some(reservation), Some(dir)) = (self.reservation.clone(), self.inner.runtime_dir.as_ref()) else {
            return Ok(());
        };
        let why = match governor_call(dir, GovernorRequest::Renew { reservation: reservation.clone() }).await {
            Ok(GovernorResponse::Renewed { .. }) => return Ok(()),
            Ok(GovernorResponse::Failed(f)) if f.code == FailureCode::NotFound => f.message,
            Ok(other) => {
                tracing::warn!(campaign = %self.campaign, %reservation, answer = ?other,
                               "the governor did not renew the lease");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(campaign = %self.campaign, %reservation, error = %e, "the lease was not renewed");
                return Ok(());
            }
        };
        // Gone: nothing to release at the end.
        self.reservation = None;
        self.check_stop()?;
        tracing::warn!(campaign = %self.campaign, %reservation, reason = %why,
                       "the governor no longer holds the reservation: the campaign stops");
        let detail =
            truncate_chars(&one_line(&format!("stopped by the resource governor: {why}")), MAX_CAMPAIGN_DETAIL_CHARS);
        let (ws, id) = (self.inner.workspace, self.campaign);
        self.write("stopping the campaign", move |s| s.campaign_finished(ws, &id, CampaignStatus::Stopped, &detail))
            .await?;
        Err(Halt)
    }

    /// Every item ended: `COMPLETED`, or `FAILED` when none was fetched.
    async fn finish(&mut self) -> Result<(), Halt> {
        let c = self.read().await?;
        if campaign_status(&c).is_finished() {
            return Ok(());
        }
        let (status, detail) = if c.items_total > 0 && c.items_done == 0 {
            (
                CampaignStatus::Failed,
                format!("no page fetched: every one of its {} items failed or was refused", c.items_total),
            )
        } else {
            (
                CampaignStatus::Completed,
                format!(
                    "{} of {} pages fetched over Tor and stored as evidence, {} not, {} bytes",
                    c.items_done, c.items_total, c.items_failed, c.bytes
                ),
            )
        };
        tracing::info!(campaign = %self.campaign, status = status.as_str(), done = c.items_done,
                       failed = c.items_failed, bytes = c.bytes, "campaign ended");
        let (ws, id) = (self.inner.workspace, self.campaign);
        self.write("ending the campaign", move |s| s.campaign_finished(ws, &id, status, &detail)).await
    }

    /// After the run, whichever way it ended: egress forgets the campaign
    /// (unless the server is stopping: the campaign resumes at the next
    /// start), and the governor's reservation is released.
    async fn cleanup(&mut self) {
        if self.asked_egress && !self.inner.closing.is_cancelled() {
            if let Err(e) = self.inner.egress.end_campaign(self.inner.workspace, self.campaign).await {
                tracing::warn!(campaign = %self.campaign, error = %e, "egress did not end the campaign");
            }
        }
        if let (Some(reservation), Some(dir)) = (self.reservation.take(), self.inner.runtime_dir.as_ref()) {
            match governor_call(dir, GovernorRequest::Release { reservation: reservation.clone() }).await {
                Ok(GovernorResponse::Released {}) => {
                    tracing::info!(campaign = %self.campaign, %reservation, "reservation released");
                }
                Ok(other) => tracing::warn!(campaign = %self.campaign, %reservation, answer = ?other,
                                            "the governor did not release the reservation"),
                Err(e) => tracing::warn!(campaign = %self.campaign, %reservation, error = %e,
                                         "the governor did not release the reservation"),
            }
        }
    }

    /// The campaign as stored now.
    async fn read(&self) -> Result<Campaign, Halt> {
        match self.read_campaign().await {
            Ok(c) => Ok(c),
            Err(e) => Err(self.store_failed("reading the campaign", e).await),
        }
    }

    /// Whether the campaign's grant is unrevoked and unexpired now.
    async fn grant_active(&self) -> Result<bool, Halt> {
        let (db, ws, g) = (self.inner.db.clone(), self.inner.workspace, self.grant);
        let read = tokio::task::spawn_blocking(move || db.read_blocking(|r| r.grant(ws, &g)))
            .await
            .unwrap_or_else(|e| Err(StoreError::Internal(format!("the store task failed: {e}"))));
        match read {
            Ok(grant) => Ok(labfy_store::grant_is_active(&grant, chrono::Utc::now())),
            Err(e) => Err(self.store_failed("reading the grant", e).await),
        }
    }

    async fn read_campaign(&self) -> Result<Campaign, StoreError> {
        let (db, ws, id) = (self.inner.db.clone(), self.inner.workspace, self.campaign);
        tokio::task::spawn_blocking(move || db.read_blocking(|r| r.campaign(ws, &id)))
            .await
            .unwrap_or_else(|e| Err(StoreError::Internal(format!("the store task failed: {e}"))))
    }

    /// One write; a store error ends the campaign (see [`Run::store_failed`]).
    async fn write<T: Send + 'static>(
        &self,
        doing: &str,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Halt> {
        match self.store(f).await {
            Ok(v) => Ok(v),
            Err(e) => Err(self.store_failed(doing, e).await),
        }
    }

    async fn store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.inner.db.clone();
        tokio::task::spawn_blocking(move || db.write_blocking(f))
            .await
            .unwrap_or_else(|e| Err(StoreError::Internal(format!("the store task failed: {e}"))))
    }

    /// A store error while `doing`: logged, and the campaign ends `FAILED`
    /// with the reason — unless it was stopped meanwhile (a revocation ended
    /// it in the store, or the server is stopping), when nothing more is
    /// recorded.
    async fn store_failed(&self, doing: &str, e: StoreError) -> Halt {
        if self.check_stop().is_err() {
            tracing::info!(campaign = %self.campaign, doing, error = %e, "campaign stopped meanwhile");
            return Halt;
        }
        if let Ok(c) = self.read_campaign().await {
            if campaign_status(&c).is_finished() {
                tracing::info!(campaign = %self.campaign, status = %c.status, doing, error = %e,
                               "campaign already ended; nothing more recorded");
                return Halt;
            }
        }
        tracing::error!(campaign = %self.campaign, doing, error = %e, "store error: the campaign fails");
        self.fail(&format!("store error while {doing}: {e}")).await;
        Halt
    }

    /// Ends the campaign `FAILED` with `why` (one line, bounded); a failure
    /// to record even that is logged.
    async fn fail(&self, why: &str) {
        let detail = truncate_chars(&one_line(why), MAX_CAMPAIGN_DETAIL_CHARS);
        let (ws, id) = (self.inner.workspace, self.campaign);
        let ended = self.store(move |s| s.campaign_finished(ws, &id, CampaignStatus::Failed, &detail)).await;
        if let Err(e) = ended {
            tracing::error!(campaign = %self.campaign, error = %e, reason = %why,
                            "could not record the campaign's failure");
        }
    }
}

impl Inner {
    /// Claims item `position` of `campaign` for one fetch; false when
    /// another fetch has it.
    fn claim(&self, campaign: Uuid, position: u32) -> bool {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner).entry(campaign).or_default().insert(position)
    }

    fn unclaim(&self, campaign: Uuid, position: u32) {
        let mut claims = self.claims.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(set) = claims.get_mut(&campaign) {
            set.remove(&position);
            if set.is_empty() {
                claims.remove(&campaign);
            }
        }
    }

    /// Whether a fetch holds an item of `campaign` now.
    fn claimed(&self, campaign: Uuid) -> bool {
        self.claims.lock().unwrap_or_else(PoisonError::into_inner).contains_key(&campaign)
    }

    /// Proposes again a grant egress has no record of (egress was down when
    /// the analyst granted it).
    async fn runner_propose(&self, campaign: CampaignRef, grant: GrantRef, c: &Campaign) -> Result<(), EgressError> {
        let (db, ws) = (self.db.clone(), self.workspace);
        let g = tokio::task::spawn_blocking(move || db.read_blocking(|r| r.grant(ws, &grant)))
            .await
            .unwrap_or_else(|e| Err(StoreError::Internal(format!("the store task failed: {e}"))))
            .map_err(|e| EgressError::Unexpected(one_line(&format!("the store: {e}"))))?;
        debug_assert_eq!(c.id, campaign);
        let p = proposal(ws, &g, c, "", chrono::Utc::now()).map_err(|why| EgressError::Unexpected(one_line(&why)))?;
        self.egress.propose(p).await.map(|_| ())
    }
}

/// The proposal egress records for a stored grant and its campaign: the
/// exact URLs of its items, the scope's hosts, the budget, the time left.
pub fn proposal(
    ws: Uuid,
    g: &Grant,
    c: &Campaign,
    summary: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<GrantProposal, String> {
    if c.grant_id != g.id {
        return Err(format!("{} does not run under {}", c.id, g.id));
    }
    let hosts = g.scope.hosts.clone();
    let (max_requests, max_bytes) = (u64::from(g.budget.max_requests), g.budget.max_bytes);
    let expires = chrono::DateTime::parse_from_rfc3339(&g.expires_at)
        .map_err(|_| format!("{} has an unreadable expiry", g.id))?
        .with_timezone(&chrono::Utc);
    let left = (expires - now).num_seconds();
    if left <= 0 {
        return Err(format!("{} has expired", g.id));
    }
    let minutes = u32::try_from((left + 59) / 60).unwrap_or(u32::MAX).clamp(1, 7 * 24 * 60);
    Ok(GrantProposal {
        workspace_id: ws,
        grant_id: c.grant_id,
        campaign_id: c.id,
        urls: c.items.iter().map(|i| i.url.clone()).collect(),
        hosts,
        max_requests,
        max_bytes,
        expires_in_minutes: minutes,
        summary: summary.to_owned(),
    })
}

fn campaign_status(c: &Campaign) -> CampaignStatus {
    // An unknown status is treated as ended: nothing is done to it.
    CampaignStatus::parse(&c.status).unwrap_or(CampaignStatus::Failed)
}

/// A file name for the parser's format detection: the URL's last path
/// segment when it has an extension, else one the media type implies.
fn name_hint(url: &str, content_type: Option<&str>) -> String {
    let last = url::Url::parse(url)
        .ok()
        .and_then(|u| u.path_segments().and_then(|mut s| s.next_back().map(str::to_owned)))
        .unwrap_or_default();
    if last.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && (1..=5).contains(&ext.len())) {
        return last;
    }
    let mime = content_type.unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let ext = match mime.as_str() {
        "text/html" | "application/xhtml+xml" => "html",
        "application/pdf" => "pdf",
        "message/rfc822" => "eml",
        "application/mbox" => "mbox",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation" => "pptx",
        "application/vnd.oasis.opendocument.text" => "odt",
        _ => "bin",
    };
    format!("page.{ext}")
}

/// One governor call over its service socket, within [`GOVERNOR_CALL_TIMEOUT`]
/// (the server's one way to call the governor, [`crate::governor::ask_governor_at`]);
/// the error is one line saying why there is no answer.
async fn governor_call(dir: &std::path::Path, request: GovernorRequest) -> Result<GovernorResponse, String> {
    crate::governor::ask_governor_at(dir, request, GOVERNOR_CALL_TIMEOUT).await
}

#[cfg(test)]
mod tests {
    use super::name_hint;

    #[test]
    fn the_parser_is_told_a_name_from_the_url_or_the_media_type() {
        assert_eq!(name_hint("https://a.example.org/rapport-2025.pdf?x=1", None), "rapport-2025.pdf");
        assert_eq!(name_hint("https://a.example.org/fil/8812", Some("text/html; charset=ISO-8859-1")), "page.html");
        assert_eq!(name_hint("https://a.example.org/", Some("application/pdf")), "page.pdf");
        assert_eq!(name_hint("https://a.example.org/v1.2.3/x", Some("image/png")), "page.bin");
        assert_eq!(name_hint("pas une URL", None), "page.bin");
    }
}
