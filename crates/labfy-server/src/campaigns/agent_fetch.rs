//! The agent's own fetch (SPEC F2): `web.fetch` runs under the campaign of
//! the grant it names, through the same egress, governor admission, blob
//! store, confined parser and store records as the campaign's items.
//!
//! A grant is confirmed at egress for exactly one campaign, with its exact
//! URLs (SPEC T2), so an agent's fetch is one of three things:
//!
//! - **`GET` of a granted URL** — an item of the campaign. Fetched already:
//!   the evidence is answered, no new request. Planned while the campaign
//!   runs: the agent's fetch claims the item and fetches it now (the
//!   campaign's task skips it), or waits for the task that has it. Ended
//!   without a page: that outcome. The page is recorded as the item's, with
//!   the agent's call in the audit log.
//! - **`HEAD`, or a URL that is no item** — one more request under the
//!   campaign, counted by egress against the grant's budget; egress refuses
//!   a URL that is not one of the granted ones, and a campaign that ended
//!   (the server does not pre-empt it: egress is the authority). A `HEAD`
//!   stores nothing.
//! - **A campaign that ended** — nothing more is fetched under its grant:
//!   the agent is told a human must grant a new research request.
//!
//! A campaign not running yet (waiting for a human's confirmation at egress,
//! or for its admission) is waited for, at most
//! [`labfy_gateway::fetch::MAX_AGENT_FETCH_SECONDS`] in all.

use std::time::Duration;

use labfy_core::GrantRef;
use labfy_core::bounded::truncate_chars;
use labfy_gateway::fetch::{AgentFetch, FetchMethod, Fetched, FetchedHead, FetchedPage, MAX_AGENT_FETCH_SECONDS};
use labfy_ipc::messages::egress::{FetchMethod as EgressMethod, FetchRequest, FetchStatus};
use labfy_store::{Campaign, CampaignItem, CampaignStatus, ItemStatus, StoreError};
use tokio::time::Instant;

use super::{AGENT_FETCH_POLL, CampaignRunner, Run, campaign_status};
use crate::egress::one_line;

impl CampaignRunner {
    /// Runs an agent's `web.fetch` under its grant's campaign (see the
    /// module's documentation). `Err` is a store failure.
    pub async fn agent_fetch(&self, ask: &AgentFetch) -> Result<Fetched, String> {
        let inner = &self.inner;
        if ask.workspace != inner.workspace {
            return Ok(Fetched::Refused("the grant is not of this server's workspace".to_owned()));
        }
        let Ok(url) = url::Url::parse(&ask.url).map(String::from) else {
            return Ok(Fetched::Refused("the URL does not parse (WHATWG)".to_owned()));
        };
        let asked_by = format!("{} web.fetch (turn {}, call {})", ask.actor, ask.turn_id, ask.call_id);
        let deadline = Instant::now() + Duration::from_secs(MAX_AGENT_FETCH_SECONDS);
        let mut fetched_now = false;
        loop {
            let c = match self.campaign_of_grant(ask.grant).await {
                Ok(c) => c,
                Err(StoreError::NotFound(why)) => return Ok(Fetched::Refused(why)),
                Err(e) => return Err(format!("reading the grant's campaign: {e}")),
            };
            let status = campaign_status(&c);
            let item = c.items.iter().find(|i| i.url == url);
            if ask.method == FetchMethod::Get {
                if let Some(i) = item.filter(|i| i.status != ItemStatus::Planned) {
                    return Ok(item_outcome(&c, i, fetched_now));
                }
            }
            if status.is_finished() {
                return Ok(Fetched::GrantSpent(format!(
                    "{} has ended ({}: {}): egress allows nothing more under {}",
                    c.id,
                    c.status,
                    truncate_chars(&c.detail, 160),
                    ask.grant
                )));
            }
            let stop = inner
                .live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&c.id.id())
                .map(|l| l.stop.clone());
            if let (CampaignStatus::Running, Some(stop)) = (status, stop) {
                match (ask.method, item) {
                    (FetchMethod::Get, Some(i)) => {
                        if inner.claim(c.id.id(), i.position) {
                            let mut run = Run {
                                inner,
                                campaign: c.id,
                                grant: c.grant_id,
                                stop: &stop,
                                reservation: None,
                                asked_egress: true,
                                asked_by: Some(asked_by.clone()),
                            };
                            let planned = run.read().await.map(|now| {
                                now.items.iter().any(|x| x.position == i.position && x.status == ItemStatus::Planned)
                            });
                            if let Ok(true) = planned {
                                tracing::info!(campaign = %c.id, position = i.position, actor = %ask.actor,
                                               "an agent's web.fetch fetches a planned item");
                                // Whatever it recorded (or a stop) is read
                                // back on the next turn of the loop.
                                let _ = run.fetch_item(i.position, url.clone()).await;
                                fetched_now = true;
                            }
                            inner.unclaim(c.id.id(), i.position);
                            continue;
                        }
                        // The campaign's task has it: its outcome is waited for.
                    }
                    _ => return Ok(self.extra_request(&c, ask, &url, deadline).await),
                }
            }
            if Instant::now() >= deadline {
                return Ok(Fetched::Failed(format!(
                    "{} ({}) did not get to it within {MAX_AGENT_FETCH_SECONDS} s; the campaign goes on \
                     (research.get_state shows it later)",
                    c.id, c.status
                )));
            }
            tokio::select! {
                biased;
                _ = inner.closing.cancelled() => return Ok(Fetched::Failed("the server is stopping".to_owned())),
                () = tokio::time::sleep(AGENT_FETCH_POLL) => {}
            }
        }
    }

    /// One request under a running campaign that is none of its items: a
    /// `HEAD`, or a URL egress will refuse unless a human granted it.
    async fn extra_request(&self, c: &Campaign, ask: &AgentFetch, url: &str, deadline: Instant) -> Fetched {
        let inner = &self.inner;
        let request = FetchRequest {
            workspace_id: inner.workspace,
            campaign_id: c.id,
            grant_id: c.grant_id,
            url: url.to_owned(),
            method: match ask.method {
                FetchMethod::Get => EgressMethod::Get,
                FetchMethod::Head => EgressMethod::Head,
            },
        };
        tracing::info!(campaign = %c.id, method = ?ask.method, actor = %ask.actor, "an agent's web.fetch asks egress");
        let answer = tokio::select! {
            biased;
            _ = inner.closing.cancelled() => return Fetched::Failed("the server is stopping".to_owned()),
            () = tokio::time::sleep_until(deadline) => {
                return Fetched::Failed(format!("egress did not answer within {MAX_AGENT_FETCH_SECONDS} s"));
            }
            a = inner.egress.fetch(request) => a,
        };
        let o = match answer {
            Ok(o) => o,
            Err(e) if e.is_unavailable() => return Fetched::Unavailable(one_line(&e.to_string())),
            Err(e) => return Fetched::Refused(one_line(&format!("egress refused the request: {e}"))),
        };
        let reason = |default: &str| one_line(o.reason.as_deref().unwrap_or(default));
        match o.status {
            FetchStatus::Fetched if ask.method == FetchMethod::Head => Fetched::Head(FetchedHead {
                url: o.url.clone(),
                final_url: o.final_url.clone().unwrap_or_else(|| o.url.clone()),
                http_status: o.http_status.unwrap_or_default(),
                content_type: o.content_type.clone(),
                headers: o.headers.clone(),
                campaign: c.id,
            }),
            // Egress answers a GET only for a granted URL, and every granted
            // URL is an item: this is no page of the campaign.
            FetchStatus::Fetched => {
                Fetched::Failed(format!("egress fetched a URL that is no item of {}; nothing stored", c.id))
            }
            FetchStatus::Refused => Fetched::Refused(format!("refused by egress: {}", reason("no reason given"))),
            FetchStatus::Failed => Fetched::Failed(reason("the fetch failed")),
            FetchStatus::Stopped => Fetched::Failed(reason("stopped by egress")),
            FetchStatus::Unavailable => Fetched::Unavailable(reason("Tor is unavailable")),
        }
    }

    async fn campaign_of_grant(&self, grant: GrantRef) -> Result<Campaign, StoreError> {
        let (db, ws) = (self.inner.db.clone(), self.inner.workspace);
        tokio::task::spawn_blocking(move || db.read_blocking(|r| r.campaign_of_grant(ws, &grant)))
            .await
            .unwrap_or_else(|e| Err(StoreError::Internal(format!("the store task failed: {e}"))))
    }
}

/// How an item that is no longer planned answers a `GET`.
fn item_outcome(c: &Campaign, i: &CampaignItem, fetched_now: bool) -> Fetched {
    let why = || format!("item {} of {}: {}", i.position, c.id, i.reason.as_deref().unwrap_or("no reason recorded"));
    match (i.status, i.evidence) {
        (ItemStatus::Fetched, Some(evidence)) => Fetched::Page(FetchedPage {
            url: i.url.clone(),
            evidence,
            campaign: c.id,
            position: i.position,
            fetched_now,
            http_status: i.http_status,
            bytes: i.bytes,
        }),
        (ItemStatus::Refused, _) => Fetched::Refused(why()),
        (ItemStatus::Unavailable, _) => Fetched::Unavailable(why()),
        _ => Fetched::Failed(why()),
    }
}
