//! Campaigns that run through egress (SPEC E3, E5, W4): the URLs a human
//! grants, the campaign's life, and what each fetch produced.
//!
//! A REAL grant plans one *item* per URL the human decided, in the grant's
//! transaction. The server's campaign runner then moves the campaign
//! `PENDING → ADMITTED` (the governor admitted it) `→ RUNNING`, records one
//! outcome per item — a fetched page becomes evidence with provenance, any
//! other outcome a reason — and ends it `COMPLETED`, `FAILED` or `STOPPED`.
//! Revoking the grant stops the campaign in the revocation's transaction.
//! Every step is one transaction with its audit row; an illegal step is a
//! [`StoreError::Conflict`] that says why, and changes nothing.
//!
//! A fetched body is text evidence when it is valid UTF-8 (HTML stays raw,
//! untrusted text: the UI renders it with `textContent`). The evidence model
//! holds text only, so a body that is not UTF-8 is not stored: its item ends
//! `FAILED` with the body's size and SHA-256 in the reason.

use chrono::{DateTime, Utc};
use labfy_core::{CampaignRef, GrantRef, ObjectRef, RefKind};
use labfy_parse::Parsed;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::Serialize;
use url::Url;
use uuid::Uuid;

use crate::blobs::Blob;
use crate::error::{Result, StoreError};
use crate::model::grant_is_active;
use crate::model::{FetchProvenance, TorRoute};
use crate::now_rfc3339;
use crate::primitives::{Inserted, TextEvidence, audit, check_text, index_evidence, insert_text_evidence, sha256_hex};
use crate::reads::Reads;

/// A campaign as the UI and `research.get_state` see it.
#[derive(Debug, Clone, Serialize)]
pub struct Campaign {
    /// `campaign:<uuid>`.
    pub id: CampaignRef,
    /// The grant it runs under.
    pub grant_id: GrantRef,
    /// PENDING, ADMITTED, RUNNING, COMPLETED, FAILED, STOPPED
    /// ([`crate::CampaignStatus`] spells them).
    pub status: String,
    /// One short line.
    pub detail: String,
    /// True in a SPECIMEN workspace: deterministic pages, no network.
    pub synthetic: bool,
    /// Items planned.
    pub items_total: i64,
    /// Items fetched and stored.
    pub items_done: i64,
    /// Items that ended otherwise (failed, refused, unavailable, stopped).
    pub items_failed: i64,
    /// Body bytes received by its items.
    pub bytes: i64,
    /// Evidence it produced (first 64).
    pub evidence: Vec<ObjectRef>,
    /// Its URLs and how each ended, by position (at most
    /// [`crate::MAX_CAMPAIGN_URLS`]).
    pub items: Vec<CampaignItem>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// When it started running (RFC 3339).
    pub started_at: Option<String>,
    /// When it ended (RFC 3339).
    pub finished_at: Option<String>,
}

/// Most URLs one campaign fetches (a REAL grant names 1 to this many).
pub const MAX_CAMPAIGN_URLS: usize = 32;
/// Longest URL a campaign may name, in bytes (the egress protocol's bound).
pub const MAX_URL_BYTES: usize = 2048;
/// Largest fetched body the store accepts, in bytes (1 GiB, the ceiling of
/// the operator's bound in egress). Egress bounds bodies lower (8 MiB by
/// default); this is the store's own limit, not a promise to fetch this much.
pub const MAX_FETCH_BODY_BYTES: u64 = 1024 * 1024 * 1024;
/// Most redirects one fetch may report.
pub const MAX_FETCH_REDIRECTS: usize = 10;
/// Most response headers one fetch may report.
pub const MAX_FETCH_HEADERS: usize = 32;
/// Longest header name, in characters.
pub const MAX_HEADER_NAME_CHARS: usize = 64;
/// Header values (and the raw `content-type`) are cut to this many characters.
pub const MAX_HEADER_VALUE_CHARS: usize = 512;
/// Longest media type kept on evidence, in characters (RFC 6838: 127).
pub const MAX_MIME_CHARS: usize = 127;
/// Media type of a fetched page whose `content-type` is missing or malformed.
pub const FALLBACK_MIME: &str = "application/octet-stream";
/// Item reasons are cut to this many characters.
pub const MAX_ITEM_REASON_CHARS: usize = 500;
/// Longest campaign detail line, in characters.
pub const MAX_CAMPAIGN_DETAIL_CHARS: usize = 300;
/// Longest isolation label, in characters.
pub const MAX_ISOLATION_CHARS: usize = 128;
/// Most campaigns [`Reads::unfinished_real_campaigns`] returns.
pub const MAX_UNFINISHED_CAMPAIGNS: u32 = 100;

/// Where a campaign is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CampaignStatus {
    /// Granted; waiting for the governor's admission.
    Pending,
    /// Admitted by the governor; not started.
    Admitted,
    /// Fetching through egress.
    Running,
    /// Every item ended.
    Completed,
    /// Ended by a failure (admission refused, egress lost, …).
    Failed,
    /// Stopped (revocation, shutdown, the analyst).
    Stopped,
}

impl CampaignStatus {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Admitted => "ADMITTED",
            Self::Running => "RUNNING",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
            Self::Stopped => "STOPPED",
        }
    }

    /// The status spelled `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PENDING" => Self::Pending,
            "ADMITTED" => Self::Admitted,
            "RUNNING" => Self::Running,
            "COMPLETED" => Self::Completed,
            "FAILED" => Self::Failed,
            "STOPPED" => Self::Stopped,
            _ => return None,
        })
    }

    /// True once the campaign has ended (it never changes again).
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Stopped)
    }
}

/// How one planned URL ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ItemStatus {
    /// Not fetched yet.
    Planned,
    /// Fetched; its page is evidence.
    Fetched,
    /// Egress reached the far side (or tried to) and it failed, or the body
    /// could not be stored.
    Failed,
    /// Refused before any stream opened (grant, scope, budget).
    Refused,
    /// Tor was down or not bootstrapped.
    Unavailable,
    /// Stopped before or while it ran (revocation, the campaign's end).
    Stopped,
}

impl ItemStatus {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Planned => "PLANNED",
            Self::Fetched => "FETCHED",
            Self::Failed => "FAILED",
            Self::Refused => "REFUSED",
            Self::Unavailable => "UNAVAILABLE",
            Self::Stopped => "STOPPED",
        }
    }

    /// The status spelled `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PLANNED" => Self::Planned,
            "FETCHED" => Self::Fetched,
            "FAILED" => Self::Failed,
            "REFUSED" => Self::Refused,
            "UNAVAILABLE" => Self::Unavailable,
            "STOPPED" => Self::Stopped,
            _ => return None,
        })
    }
}

/// One URL of a campaign and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CampaignItem {
    /// 0 for the first URL the human listed.
    pub position: u32,
    /// The URL, normalised (WHATWG) when the grant was decided.
    pub url: String,
    /// How it ended (or `PLANNED`).
    pub status: ItemStatus,
    /// Why, when it did not end `FETCHED` (bounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// HTTP status of the final response, when one was received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Body bytes received.
    pub bytes: u64,
    /// The evidence it became, when `FETCHED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<ObjectRef>,
}

/// One fetched page as egress returned it (the server maps its `FetchOutcome`
/// into this).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPage {
    /// The URL asked: the item's URL.
    pub url: String,
    /// The URL of the response, after redirects.
    pub final_url: String,
    /// Every hop followed, in order.
    pub redirects: Vec<String>,
    /// HTTP status of the final response (100–999).
    pub http_status: u16,
    /// Selected response headers (names are lower-cased here).
    pub headers: Vec<(String, String)>,
    /// The `content-type` header as received.
    pub content_type: Option<String>,
    /// The body, kept in the blob store, and what the confined parser read
    /// of it (SPEC C3); `None` for an empty body.
    pub body: Option<FetchedBody>,
    /// SHA-256 of the body as egress computed it (hex); checked here
    /// against the blob's.
    pub body_sha256: String,
    /// RFC 3339: when the fetch began.
    pub started_at: String,
    /// Milliseconds from the request to the end of the body.
    pub elapsed_ms: u64,
    /// The campaign's Tor isolation label.
    pub isolation: String,
    /// Who asked for this fetch when it was not the campaign's own run: the
    /// agent's `web.fetch` call (SPEC F2), recorded in the audit log.
    pub asked_by: Option<String>,
}

/// A fetched body as the server kept it: its bytes in the blob store
/// (written while they came from egress, hashed as written) and what the
/// confined parser worker read of them — the same path as an imported file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedBody {
    /// The stored bytes.
    pub blob: Blob,
    /// What the parser read (text, title, media type); empty text for a
    /// binary document, which is kept all the same.
    pub parsed: Parsed,
}

/// What a grant's campaigns consumed (egress checks it against the budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GrantUsage {
    /// Items that reached egress's far side: `FETCHED` or `FAILED`.
    pub requests: u64,
    /// Body bytes received by every item of every campaign of the grant.
    pub bytes: u64,
}

fn invalid(msg: impl Into<String>) -> StoreError {
    StoreError::Invalid(msg.into())
}

fn truncate(s: &str, max: usize) -> String {
    labfy_core::bounded::truncate_chars(s, max)
}

/// One line of text from outside: control characters become U+FFFD and it is
/// cut to `max` characters.
fn sanitize_line(s: &str, max: usize) -> String {
    let clean: String = s.chars().map(|c| if c.is_control() { '\u{FFFD}' } else { c }).collect();
    truncate(&clean, max)
}

/// True when `host` (as [`Url::host_str`] spells it: lower case, punycode,
/// dotted IPv4, bracketed IPv6) is inside a scope of host patterns
/// ([`crate::hosts::check_host_pattern`]): `*.x.org` covers the sub-domains of
/// `x.org`, not `x.org`; any other pattern, an IPv4 literal included, covers
/// exactly itself (a wildcard never covers an address). IPv6 hosts are
/// inside no scope. The one copy of the rule: the gateway (through
/// [`check_campaign_url`]) and egress's ledger apply it too.
pub fn host_in_scope(host: &str, scope_hosts: &[String]) -> bool {
    if host.is_empty() || host.starts_with('[') {
        return false;
    }
    let address = host.parse::<std::net::Ipv4Addr>().is_ok();
    scope_hosts.iter().any(|p| match p.strip_prefix("*.") {
        Some(base) => {
            !address
                && !base.is_empty()
                && host.strip_suffix(base).and_then(|rest| rest.strip_suffix('.')).is_some_and(|l| !l.is_empty())
        }
        None => p == host,
    })
}

/// The authority of `text` as written (`scheme://AUTHORITY/…`), if any.
fn written_authority(text: &str) -> Option<&str> {
    let rest = text.split_once("://")?.1;
    rest.split(['/', '\\', '?', '#']).next()
}

/// Parses an http(s) URL coming from outside and refuses what no campaign may
/// name: too long, spaces or control characters, not absolute, another scheme,
/// credentials, no host, a host outside the scope. Fragments are the caller's
/// rule. Returns the WHATWG-normalised URL.
fn parse_scoped_url(text: &str, scope_hosts: &[String]) -> std::result::Result<Url, String> {
    if text.is_empty() {
        return Err("is empty".into());
    }
    if text.len() > MAX_URL_BYTES {
        return Err(format!("is {} bytes, longer than {MAX_URL_BYTES}", text.len()));
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("contains spaces or control characters".into());
    }
    let url = Url::parse(text).map_err(|e| format!("is not an absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("has scheme `{}`; only http and https are fetched", truncate(url.scheme(), 16)));
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || written_authority(text).is_some_and(|a| a.contains('@'))
    {
        return Err("carries credentials (user:password@); a campaign never sends any".into());
    }
    let Some(host) = url.host_str() else {
        return Err("has no host".into());
    };
    if !host_in_scope(host, scope_hosts) {
        let why = if host.starts_with('[') { " (IPv6 hosts are in no scope)" } else { "" };
        return Err(format!("host `{}` is outside the grant's scope{why}", truncate(host, 64)));
    }
    if url.as_str().len() > MAX_URL_BYTES {
        return Err(format!("is longer than {MAX_URL_BYTES} bytes once normalised"));
    }
    Ok(url)
}

/// Checks one URL a human grants a campaign: an absolute http(s) URL of at
/// most [`MAX_URL_BYTES`] bytes, without spaces, control characters,
/// credentials or fragment, whose host is inside `scope_hosts` (see
/// [`host_in_scope`]). Returns it WHATWG-normalised — the form stored and
/// fetched (host lower-cased and punycoded, default port dropped, path
/// percent-encoded).
pub fn check_campaign_url(url: &str, scope_hosts: &[String]) -> Result<String> {
    let parsed = parse_scoped_url(url, scope_hosts).map_err(|why| invalid(format!("URL {why}")))?;
    if parsed.fragment().is_some() {
        return Err(invalid("URL has a fragment (#…); fragments are never sent, remove it"));
    }
    Ok(parsed.into())
}

/// Checks the URLs of a grant decision ([`check_campaign_url`] each, at most
/// [`MAX_CAMPAIGN_URLS`], no more than the budget's requests, no duplicate
/// once normalised) and returns them normalised, in order.
pub(crate) fn check_campaign_urls(urls: &[String], scope_hosts: &[String], max_requests: u32) -> Result<Vec<String>> {
    if urls.len() > MAX_CAMPAIGN_URLS {
        return Err(invalid(format!("a campaign fetches at most {MAX_CAMPAIGN_URLS} URLs, got {}", urls.len())));
    }
    if urls.len() as u64 > u64::from(max_requests) {
        return Err(invalid(format!(
            "{} URLs, but the budget allows {max_requests} requests; raise max_requests or list fewer URLs",
            urls.len()
        )));
    }
    let mut out: Vec<String> = Vec::with_capacity(urls.len());
    for (i, u) in urls.iter().enumerate() {
        let normal = check_campaign_url(u, scope_hosts).map_err(|e| match e {
            StoreError::Invalid(why) => invalid(format!("urls[{i}]: {why}")),
            other => other,
        })?;
        if let Some(j) = out.iter().position(|o| *o == normal) {
            return Err(invalid(format!("urls[{i}] repeats urls[{j}]")));
        }
        out.push(normal);
    }
    Ok(out)
}

/// A URL egress reports (final URL, redirect hop): same rules as a granted
/// URL except that a fragment is allowed (a `Location` may carry one).
fn check_reported_url(what: &str, text: &str, scope_hosts: &[String]) -> Result<String> {
    parse_scoped_url(text, scope_hosts).map(String::from).map_err(|why| invalid(format!("{what} {why}")))
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The media type of a `content-type` value: `type/subtype`, lower case, no
/// parameters; [`FALLBACK_MIME`] when it is missing or malformed.
pub fn mime_of(content_type: Option<&str>) -> String {
    let Some(ct) = content_type else { return FALLBACK_MIME.to_owned() };
    let essence = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let ok = essence.len() <= MAX_MIME_CHARS
        && essence
            .split_once('/')
            .is_some_and(|(t, s)| !t.is_empty() && !s.is_empty() && t.bytes().all(is_tchar) && s.bytes().all(is_tchar));
    if ok { essence } else { FALLBACK_MIME.to_owned() }
}

/// A fetched page, checked and bounded: what is stored of it.
struct CheckedPage {
    url: String,
    final_url: String,
    redirects: Vec<String>,
    headers: Vec<(String, String)>,
    content_type: Option<String>,
    mime: String,
    sha256: String,
    bytes: i64,
    elapsed_ms: i64,
}

/// Checks what can be checked of a page without the database.
fn check_page_shape(page: &FetchedPage) -> Result<()> {
    let len = page.body.as_ref().map_or(0, |b| b.blob.len);
    if len > MAX_FETCH_BODY_BYTES {
        return Err(invalid(format!("body of {len} bytes is larger than the store accepts ({MAX_FETCH_BODY_BYTES})")));
    }
    if page.body.as_ref().is_some_and(|b| b.blob.len == 0) {
        return Err(invalid("an empty body is no body (None), not an empty blob"));
    }
    let computed = page.body.as_ref().map_or_else(|| sha256_hex(&[]), |b| b.blob.sha256.clone());
    if !page.body_sha256.eq_ignore_ascii_case(&computed) {
        return Err(invalid(format!(
            "body SHA-256 mismatch: egress reported `{}`, the body's is {computed}; nothing stored",
            truncate(&page.body_sha256, 64)
        )));
    }
    if !(100..=999).contains(&page.http_status) {
        return Err(invalid(format!("HTTP status {} is not 100–999", page.http_status)));
    }
    if page.redirects.len() > MAX_FETCH_REDIRECTS {
        return Err(invalid(format!("{} redirects, at most {MAX_FETCH_REDIRECTS}", page.redirects.len())));
    }
    if page.headers.len() > MAX_FETCH_HEADERS {
        return Err(invalid(format!("{} headers, at most {MAX_FETCH_HEADERS}", page.headers.len())));
    }
    for (name, _) in &page.headers {
        if name.is_empty() || name.len() > MAX_HEADER_NAME_CHARS || !name.bytes().all(is_tchar) {
            return Err(invalid(format!(
                "header name `{}` is not an HTTP token of 1–{MAX_HEADER_NAME_CHARS} characters",
                sanitize_line(name, 64)
            )));
        }
    }
    DateTime::parse_from_rfc3339(&page.started_at).map_err(|e| invalid(format!("started_at is not RFC 3339: {e}")))?;
    i64::try_from(page.elapsed_ms).map_err(|_| invalid("elapsed_ms is out of range"))?;
    check_text("isolation", &page.isolation, MAX_ISOLATION_CHARS)
}

/// The rest of the checks, against the grant's scope; bounds and sanitises.
fn check_page(page: &FetchedPage, scope_hosts: &[String]) -> Result<CheckedPage> {
    let url = check_reported_url("url", &page.url, scope_hosts)?;
    let final_url = check_reported_url("final_url", &page.final_url, scope_hosts)?;
    let redirects = page
        .redirects
        .iter()
        .enumerate()
        .map(|(i, r)| check_reported_url(&format!("redirects[{i}]"), r, scope_hosts))
        .collect::<Result<Vec<_>>>()?;
    let headers =
        page.headers.iter().map(|(n, v)| (n.to_ascii_lowercase(), sanitize_line(v, MAX_HEADER_VALUE_CHARS))).collect();
    Ok(CheckedPage {
        url,
        final_url,
        redirects,
        headers,
        content_type: page.content_type.as_deref().map(|c| sanitize_line(c, MAX_HEADER_VALUE_CHARS)),
        mime: mime_of(page.content_type.as_deref()),
        sha256: page.body.as_ref().map_or_else(|| sha256_hex(&[]), |b| b.blob.sha256.clone()),
        bytes: page.body.as_ref().map_or(0, |b| b.blob.len as i64),
        elapsed_ms: i64::try_from(page.elapsed_ms).map_err(|_| invalid("elapsed_ms is out of range"))?,
    })
}

/// A campaign row, as the commands need it.
pub(crate) struct CampaignRow {
    pub(crate) investigation: Uuid,
    pub(crate) grant: GrantRef,
    pub(crate) request: Option<ObjectRef>,
    pub(crate) status: CampaignStatus,
}

/// The host of a checked URL, for a title.
fn host_of(url: &str) -> String {
    Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_else(|| url.to_owned())
}

fn parse_uuid(what: &str, s: &str) -> Result<Uuid> {
    Uuid::try_parse(s).map_err(|_| StoreError::Internal(format!("stored {what} `{s}` is not a UUID")))
}

/// The campaign `campaign` of workspace `ws` (`NotFound` when it is another
/// workspace's, exactly like one that does not exist).
pub(crate) fn load_campaign(conn: &Connection, ws: Uuid, campaign: &ObjectRef) -> Result<CampaignRow> {
    if campaign.kind() != RefKind::Campaign {
        return Err(invalid(format!("expected a `campaign:` reference, got `{campaign}`")));
    }
    let row: Option<(String, String, Option<String>, String)> = conn
        .prepare_cached(
            "SELECT investigation_id, grant_id, research_request_id, status FROM campaigns
             WHERE id = ?1 AND workspace_id = ?2",
        )?
        .query_row(params![campaign.id().to_string(), ws.to_string()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()?;
    let (inv, grant, request, status) = row.ok_or_else(|| StoreError::NotFound(campaign.to_string()))?;
    Ok(CampaignRow {
        investigation: parse_uuid("investigation id", &inv)?,
        grant: GrantRef::new(parse_uuid("grant id", &grant)?),
        request: request
            .map(|r| parse_uuid("research request id", &r).map(|id| ObjectRef::new(RefKind::ResearchRequest, id)))
            .transpose()?,
        status: CampaignStatus::parse(&status)
            .ok_or_else(|| StoreError::Internal(format!("unknown campaign status `{status}`")))?,
    })
}

/// The objects a research request selected.
pub(crate) fn selection_of(conn: &Connection, request: &ObjectRef) -> Result<Vec<ObjectRef>> {
    let text: String = conn
        .prepare_cached("SELECT selection FROM research_requests WHERE id = ?1")?
        .query_row([request.id().to_string()], |r| r.get(0))?;
    serde_json::from_str(&text).map_err(|e| StoreError::Internal(format!("stored selection is invalid: {e}")))
}

/// The host patterns of a grant's scope.
fn scope_hosts_of(conn: &Connection, grant: &ObjectRef) -> Result<Vec<String>> {
    let text: String = conn
        .prepare_cached("SELECT scope FROM grants WHERE id = ?1")?
        .query_row([grant.id().to_string()], |r| r.get(0))?;
    let scope: crate::ResearchScope =
        serde_json::from_str(&text).map_err(|e| StoreError::Internal(format!("stored scope is invalid: {e}")))?;
    Ok(scope.hosts)
}

/// What a campaign's pages derive from: the page's provenance inputs are the
/// grant, the request and the selection, in that order, and it gets a
/// `derived_from` relation to each selected evidence item and entity.
pub(crate) struct PageOrigin<'a> {
    pub(crate) investigation: Uuid,
    pub(crate) campaign: &'a ObjectRef,
    pub(crate) grant: &'a ObjectRef,
    pub(crate) request: Option<&'a ObjectRef>,
    pub(crate) selection: &'a [ObjectRef],
}

/// Stores one page of a campaign (synthetic or fetched) as evidence with its
/// provenance (producer: the campaign) and `derived_from` relations, in the
/// caller's transaction. Returns what was inserted and the relations added;
/// the caller indexes the evidence and moves the counters
/// ([`bump_investigation`]).
pub(crate) fn insert_campaign_page(
    tx: &Transaction<'_>,
    origin: &PageOrigin<'_>,
    doc: &TextEvidence<'_>,
    activity: &str,
) -> Result<(Inserted, i64)> {
    let inputs: Vec<ObjectRef> =
        [*origin.grant].into_iter().chain(origin.request.copied()).chain(origin.selection.iter().copied()).collect();
    let inserted = insert_text_evidence(tx, doc, &origin.campaign.to_string(), activity, &inputs)?;
    let mut relations = 0;
    let mut stmt = tx.prepare_cached(
        "INSERT INTO relations (id, investigation_id, kind, src, dst, confidence, created_at)
         VALUES (?1, ?2, 'derived_from', ?3, ?4, 1.0, ?5)",
    )?;
    for target in origin.selection.iter().filter(|r| matches!(r.kind(), RefKind::Evidence | RefKind::Entity)) {
        stmt.execute(params![
            Uuid::now_v7().to_string(),
            origin.investigation.to_string(),
            inserted.evidence.to_string(),
            target.to_string(),
            doc.at
        ])?;
        relations += 1;
    }
    Ok((inserted, relations))
}

/// Moves an investigation's counters by `pages` evidence items (each with one
/// provenance record) and `relations` relations.
pub(crate) fn bump_investigation(tx: &Transaction<'_>, investigation: &str, pages: i64, relations: i64) -> Result<()> {
    tx.prepare_cached(
        "UPDATE investigations SET evidence_count = evidence_count + ?2, provenance_count = provenance_count + ?2,
                                   relation_count = relation_count + ?3
         WHERE id = ?1",
    )?
    .execute(params![investigation, pages, relations])?;
    Ok(())
}

/// Plans the items of a campaign (one per URL, `PLANNED`).
pub(crate) fn plan_items(tx: &Transaction<'_>, campaign: &ObjectRef, urls: &[String]) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO campaign_items (campaign_id, position, url, status) VALUES (?1, ?2, ?3, 'PLANNED')",
    )?;
    for (i, url) in urls.iter().enumerate() {
        stmt.execute(params![campaign.id().to_string(), i as i64, url])?;
    }
    tx.prepare_cached("UPDATE campaigns SET items_total = ?2 WHERE id = ?1")?
        .execute(params![campaign.id().to_string(), urls.len() as i64])?;
    Ok(())
}

/// An item that ended in the same statement it was planned (synthetic pages).
pub(crate) struct EndedItem<'a> {
    pub(crate) position: u32,
    pub(crate) url: &'a str,
    pub(crate) status: ItemStatus,
    pub(crate) reason: Option<&'a str>,
    pub(crate) bytes: u64,
    pub(crate) evidence: Option<&'a ObjectRef>,
    pub(crate) at: &'a str,
}

/// Inserts an item that has already ended.
pub(crate) fn insert_ended_item(tx: &Transaction<'_>, campaign: &ObjectRef, item: &EndedItem<'_>) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO campaign_items (campaign_id, position, url, status, reason, bytes, evidence_id, started_at,
                                     finished_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
    )?
    .execute(params![
        campaign.id().to_string(),
        item.position,
        item.url,
        item.status.as_str(),
        item.reason,
        item.bytes as i64,
        item.evidence.map(|e| e.id().to_string()),
        item.at
    ])?;
    Ok(())
}

/// The URL and status of item `position`, which must exist.
fn load_item(tx: &Transaction<'_>, campaign: &ObjectRef, position: u32) -> Result<(String, ItemStatus)> {
    let row: Option<(String, String)> = tx
        .prepare_cached("SELECT url, status FROM campaign_items WHERE campaign_id = ?1 AND position = ?2")?
        .query_row(params![campaign.id().to_string(), position], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (url, status) = row.ok_or_else(|| invalid(format!("{campaign} has no item at position {position}")))?;
    let status =
        ItemStatus::parse(&status).ok_or_else(|| StoreError::Internal(format!("unknown item status `{status}`")))?;
    Ok((url, status))
}

/// Fails with a conflict unless the campaign is `RUNNING` and item `position`
/// is still `PLANNED`; returns the item's URL.
fn require_running_item(
    tx: &Transaction<'_>,
    row: &CampaignRow,
    campaign: &ObjectRef,
    position: u32,
) -> Result<String> {
    if row.status != CampaignStatus::Running {
        return Err(StoreError::Conflict(format!(
            "{campaign} is {}; outcomes are recorded only while it is RUNNING",
            row.status.as_str()
        )));
    }
    let (url, status) = load_item(tx, campaign, position)?;
    if status != ItemStatus::Planned {
        return Err(StoreError::Conflict(format!(
            "item {position} of {campaign} already ended ({}); an item ends once",
            status.as_str()
        )));
    }
    Ok(url)
}

/// The values an item ends with.
struct ItemEnd<'a> {
    status: ItemStatus,
    reason: Option<&'a str>,
    http_status: Option<u16>,
    bytes: i64,
    evidence: Option<&'a ObjectRef>,
    started_at: Option<&'a str>,
}

/// Ends a `PLANNED` item and moves its campaign's counters.
fn end_item(tx: &Transaction<'_>, campaign: &ObjectRef, position: u32, end: &ItemEnd<'_>, now: &str) -> Result<()> {
    let changed = tx
        .prepare_cached(
            "UPDATE campaign_items SET status = ?3, reason = ?4, http_status = ?5, bytes = ?6, evidence_id = ?7,
                                       started_at = ?8, finished_at = ?9
             WHERE campaign_id = ?1 AND position = ?2 AND status = 'PLANNED'",
        )?
        .execute(params![
            campaign.id().to_string(),
            position,
            end.status.as_str(),
            end.reason,
            end.http_status,
            end.bytes,
            end.evidence.map(|e| e.id().to_string()),
            end.started_at.unwrap_or(now),
            now
        ])?;
    if changed != 1 {
        return Err(StoreError::Internal(format!("item {position} of {campaign} was not PLANNED any more")));
    }
    let (done, failed) = if end.status == ItemStatus::Fetched { (1, 0) } else { (0, 1) };
    tx.prepare_cached(
        "UPDATE campaigns SET items_done = items_done + ?2, items_failed = items_failed + ?3, bytes = bytes + ?4,
                              updated_at = ?5
         WHERE id = ?1",
    )?
    .execute(params![campaign.id().to_string(), done, failed, end.bytes, now])?;
    Ok(())
}

/// `PENDING → ADMITTED`: the governor admitted the campaign. Its grant must
/// still be active.
pub(crate) fn admitted(conn: &mut Connection, ws: Uuid, campaign: &ObjectRef, detail: &str) -> Result<()> {
    check_text("detail", detail, MAX_CAMPAIGN_DETAIL_CHARS)?;
    let tx = conn.transaction()?;
    let row = load_campaign(&tx, ws, campaign)?;
    step(&tx, ws, campaign, &row, CampaignStatus::Pending, CampaignStatus::Admitted, detail)?;
    audit(&tx, "labfy", "campaign.admit", Some(ws), Some(campaign), &serde_json::json!({"detail": detail}))?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::CAMPAIGN_ADMITTED);
    Ok(())
}

/// `ADMITTED → RUNNING`, with `started_at`. Its grant must still be active.
pub(crate) fn started(conn: &mut Connection, ws: Uuid, campaign: &ObjectRef) -> Result<()> {
    let tx = conn.transaction()?;
    let row = load_campaign(&tx, ws, campaign)?;
    let detail = "fetching through egress (Tor)";
    step(&tx, ws, campaign, &row, CampaignStatus::Admitted, CampaignStatus::Running, detail)?;
    tx.prepare_cached("UPDATE campaigns SET started_at = updated_at WHERE id = ?1")?
        .execute([campaign.id().to_string()])?;
    audit(&tx, "labfy", "campaign.start", Some(ws), Some(campaign), &serde_json::json!({}))?;
    tx.commit()?;
    Ok(())
}

/// One forward step of an unfinished campaign whose grant is still active.
fn step(
    tx: &Transaction<'_>,
    ws: Uuid,
    campaign: &ObjectRef,
    row: &CampaignRow,
    from: CampaignStatus,
    to: CampaignStatus,
    detail: &str,
) -> Result<()> {
    if row.status != from {
        return Err(StoreError::Conflict(format!(
            "{campaign} is {}; it must be {} to become {}",
            row.status.as_str(),
            from.as_str(),
            to.as_str()
        )));
    }
    let grant = Reads { conn: tx }.grant(ws, &row.grant)?;
    if !grant_is_active(&grant, Utc::now()) {
        return Err(StoreError::Conflict(format!(
            "{} is revoked or expired; {campaign} cannot become {} — end it",
            row.grant,
            to.as_str()
        )));
    }
    tx.prepare_cached("UPDATE campaigns SET status = ?2, detail = ?3, updated_at = ?4 WHERE id = ?1")?
        .execute(params![campaign.id().to_string(), to.as_str(), detail, now_rfc3339()])?;
    Ok(())
}

/// Records a fetched page of item `position`: evidence with provenance
/// (`tor_fetch`, fetch metadata), its original bytes (a blob), the text the
/// parser read (indexed and scanned for selectors), relations and counters.
pub(crate) fn record_fetch(
    conn: &mut Connection,
    ws: Uuid,
    campaign: &ObjectRef,
    position: u32,
    page: &FetchedPage,
) -> Result<ObjectRef> {
    check_page_shape(page)?;
    let tx = conn.transaction()?;
    let row = load_campaign(&tx, ws, campaign)?;
    let planned_url = require_running_item(&tx, &row, campaign, position)?;
    let scope = scope_hosts_of(&tx, &row.grant.object_ref())?;
    let checked = check_page(page, &scope)?;
    if checked.url != planned_url {
        return Err(StoreError::Conflict(format!(
            "the page's URL is not the URL planned at position {position} of {campaign}"
        )));
    }
    let now = now_rfc3339();
    let selection = match &row.request {
        Some(r) => selection_of(&tx, r)?,
        None => Vec::new(),
    };
    let grant = row.grant.object_ref();
    let origin = PageOrigin {
        investigation: row.investigation,
        campaign,
        grant: &grant,
        request: row.request.as_ref(),
        selection: &selection,
    };
    let (text, mime, original) = match &page.body {
        Some(b) => {
            tx.prepare_cached("INSERT OR IGNORE INTO blobs (sha256, byte_len, created_at) VALUES (?1, ?2, ?3)")?
                .execute(params![b.blob.sha256, b.blob.len as i64, now])?;
            // The parser's media type for what it recognised; the server's
            // header for plain text (it names the dialect: CSV, JSON…).
            let mime = match b.parsed.format {
                labfy_parse::Format::Text => checked.mime.clone(),
                _ => sanitize_line(&b.parsed.mime, 100),
            };
            (b.parsed.text.as_str(), mime, Some(&b.blob))
        }
        None => ("", checked.mime.clone(), None),
    };
    let title = match page.body.as_ref().and_then(|b| b.parsed.title.as_deref()).map(str::trim) {
        Some(t) if !t.is_empty() => {
            format!("{} — {}", truncate(&sanitize_line(t, 200), 200), host_of(&checked.final_url))
        }
        _ => format!("{} — HTTP {}", truncate(&checked.final_url, 180), page.http_status),
    };
    let doc = TextEvidence {
        investigation: row.investigation,
        title: &title,
        content: text,
        source: &checked.final_url,
        mime: &mime,
        at: &now,
        original,
        dated_at: None,
    };
    let (inserted, relations) = insert_campaign_page(&tx, &origin, &doc, "tor_fetch")?;
    insert_fetch_provenance(&tx, &inserted.provenance, campaign, position, &grant, page, &checked)?;
    index_evidence(&tx, inserted.seq, inserted.seq)?;
    bump_investigation(&tx, &row.investigation.to_string(), 1, relations)?;
    if !text.is_empty() {
        crate::extraction::scan_new_evidence(&tx, &row.investigation.to_string(), &inserted.evidence, text, &now)?;
    }
    let end = ItemEnd {
        status: ItemStatus::Fetched,
        reason: None,
        http_status: Some(page.http_status),
        bytes: checked.bytes,
        evidence: Some(&inserted.evidence),
        started_at: Some(&page.started_at),
    };
    end_item(&tx, campaign, position, &end, &now)?;
    audit(
        &tx,
        "labfy",
        "campaign.fetch",
        Some(ws),
        Some(campaign),
        &serde_json::json!({"position": position, "http_status": page.http_status, "bytes": checked.bytes,
                            "evidence": inserted.evidence, "mime": mime,
                            "asked_by": page.asked_by.as_deref().map(|a| truncate(a, 200))}),
    )?;
    let outcome = inserted.evidence;
    tx.commit()?;
    Ok(outcome)
}

#[allow(clippy::too_many_arguments)]
fn insert_fetch_provenance(
    tx: &Transaction<'_>,
    provenance: &str,
    campaign: &ObjectRef,
    position: u32,
    grant: &ObjectRef,
    page: &FetchedPage,
    checked: &CheckedPage,
) -> Result<()> {
    let json = |v: serde_json::Value| v.to_string();
    tx.prepare_cached(
        "INSERT INTO fetch_provenance (provenance_id, campaign_id, position, grant_id, url, final_url, redirects,
                                       http_status, headers, content_type, body_sha256, body_bytes, started_at,
                                       elapsed_ms, isolation)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    )?
    .execute(params![
        provenance,
        campaign.id().to_string(),
        position,
        grant.id().to_string(),
        checked.url,
        checked.final_url,
        json(serde_json::json!(checked.redirects)),
        page.http_status,
        json(serde_json::json!(checked.headers)),
        checked.content_type,
        checked.sha256,
        checked.bytes,
        page.started_at,
        checked.elapsed_ms,
        page.isolation
    ])?;
    Ok(())
}

/// Records how item `position` ended when it produced no page.
pub(crate) fn record_item_outcome(
    conn: &mut Connection,
    ws: Uuid,
    campaign: &ObjectRef,
    position: u32,
    status: ItemStatus,
    reason: &str,
    bytes: u64,
) -> Result<()> {
    if !matches!(status, ItemStatus::Failed | ItemStatus::Refused | ItemStatus::Unavailable | ItemStatus::Stopped) {
        return Err(invalid(format!(
            "an item outcome is FAILED, REFUSED, UNAVAILABLE or STOPPED, not {} (a page is recorded with record_fetch)",
            status.as_str()
        )));
    }
    if reason.trim().is_empty() {
        return Err(invalid("reason must not be empty"));
    }
    let reason = sanitize_line(reason, MAX_ITEM_REASON_CHARS);
    let bytes = i64::try_from(bytes).map_err(|_| invalid("bytes is out of range"))?;
    let tx = conn.transaction()?;
    let row = load_campaign(&tx, ws, campaign)?;
    require_running_item(&tx, &row, campaign, position)?;
    let now = now_rfc3339();
    let end = ItemEnd { status, reason: Some(&reason), http_status: None, bytes, evidence: None, started_at: None };
    end_item(&tx, campaign, position, &end, &now)?;
    audit(
        &tx,
        "labfy",
        "campaign.item",
        Some(ws),
        Some(campaign),
        &serde_json::json!({"position": position, "status": status.as_str(), "bytes": bytes}),
    )?;
    tx.commit()?;
    Ok(())
}

/// Ends a campaign: its planned items become `STOPPED` with a reason, and the
/// campaign gets its status, detail and `finished_at`. Returns the items
/// stopped.
fn close(tx: &Transaction<'_>, campaign: &ObjectRef, status: CampaignStatus, detail: &str, now: &str) -> Result<i64> {
    let reason = truncate(&format!("campaign {}: {detail}", status.as_str()), MAX_ITEM_REASON_CHARS);
    let stopped = tx
        .prepare_cached(
            "UPDATE campaign_items SET status = 'STOPPED', reason = ?2, finished_at = ?3
             WHERE campaign_id = ?1 AND status = 'PLANNED'",
        )?
        .execute(params![campaign.id().to_string(), reason, now])? as i64;
    tx.prepare_cached(
        "UPDATE campaigns SET status = ?2, detail = ?3, finished_at = ?4, updated_at = ?4,
                              items_failed = items_failed + ?5
         WHERE id = ?1",
    )?
    .execute(params![campaign.id().to_string(), status.as_str(), detail, now, stopped])?;
    Ok(stopped)
}

/// Ends a campaign `COMPLETED` (from `RUNNING`, every item ended), `FAILED`
/// or `STOPPED` (from any unfinished status; planned items become `STOPPED`).
pub(crate) fn finished(
    conn: &mut Connection,
    ws: Uuid,
    campaign: &ObjectRef,
    status: CampaignStatus,
    detail: &str,
) -> Result<()> {
    if !status.is_finished() {
        return Err(invalid(format!(
            "a campaign ends COMPLETED, FAILED or STOPPED, not {} (use campaign_admitted / campaign_started)",
            status.as_str()
        )));
    }
    check_text("detail", detail, MAX_CAMPAIGN_DETAIL_CHARS)?;
    let tx = conn.transaction()?;
    let row = load_campaign(&tx, ws, campaign)?;
    if row.status.is_finished() {
        return Err(StoreError::Conflict(format!("{campaign} already ended ({}); it ends once", row.status.as_str())));
    }
    if status == CampaignStatus::Completed {
        if row.status != CampaignStatus::Running {
            return Err(StoreError::Conflict(format!(
                "{campaign} is {}; only a RUNNING campaign completes (end it FAILED or STOPPED)",
                row.status.as_str()
            )));
        }
        let planned: i64 = tx
            .prepare_cached("SELECT count(*) FROM campaign_items WHERE campaign_id = ?1 AND status = 'PLANNED'")?
            .query_row([campaign.id().to_string()], |r| r.get(0))?;
        if planned > 0 {
            return Err(StoreError::Conflict(format!(
                "{campaign} still has {planned} planned items; record their outcomes or end it STOPPED"
            )));
        }
    }
    let stopped = close(&tx, campaign, status, detail, &now_rfc3339())?;
    audit(
        &tx,
        "labfy",
        "campaign.finish",
        Some(ws),
        Some(campaign),
        &serde_json::json!({"status": status.as_str(), "detail": detail, "items_stopped": stopped}),
    )?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::CAMPAIGN_ENDED);
    Ok(())
}

/// Stops every unfinished campaign of a grant being revoked (in the
/// revocation's transaction).
pub(crate) fn stop_campaigns_of_revoked_grant(
    tx: &Transaction<'_>,
    ws: Uuid,
    grant: &ObjectRef,
    by: &str,
) -> Result<()> {
    let ids: Vec<String> = tx
        .prepare_cached(
            "SELECT id FROM campaigns WHERE grant_id = ?1 AND workspace_id = ?2
               AND status IN ('PENDING', 'ADMITTED', 'RUNNING')
             ORDER BY created_at, id",
        )?
        .query_map(params![grant.id().to_string(), ws.to_string()], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let now = now_rfc3339();
    for id in ids {
        let campaign = ObjectRef::new(RefKind::Campaign, parse_uuid("campaign id", &id)?);
        let detail = format!("grant revoked by {}", truncate(by, 200));
        let stopped = close(tx, &campaign, CampaignStatus::Stopped, &detail, &now)?;
        audit(
            tx,
            by,
            "campaign.stop",
            Some(ws),
            Some(&campaign),
            &serde_json::json!({"grant": grant, "reason": "grant revoked", "items_stopped": stopped}),
        )?;
    }
    Ok(())
}

/// A stored non-negative integer column as `u64`.
fn col_u64(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<u64> {
    let v: i64 = r.get(i)?;
    u64::try_from(v)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Integer, Box::new(e)))
}

/// A stored JSON column, decoded.
fn col_json<T: serde::de::DeserializeOwned>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

/// A stored UUID column as a reference of `kind`.
fn col_ref(r: &rusqlite::Row<'_>, i: usize, kind: RefKind) -> rusqlite::Result<ObjectRef> {
    let text: String = r.get(i)?;
    Uuid::try_parse(&text)
        .map(|id| ObjectRef::new(kind, id))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

const FETCH_COLUMNS: &str = "f.campaign_id, f.position, f.grant_id, f.url, f.final_url, f.redirects, f.http_status,
                             f.headers, f.content_type, f.body_sha256, f.body_bytes, f.started_at, f.elapsed_ms,
                             f.isolation";

fn fetch_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<FetchProvenance> {
    let final_url: String = r.get(4)?;
    Ok(FetchProvenance {
        route: TorRoute::of_url(&final_url),
        campaign: col_ref(r, 0, RefKind::Campaign)?,
        position: r.get(1)?,
        grant: col_ref(r, 2, RefKind::Grant)?,
        url: r.get(3)?,
        final_url,
        redirects: col_json(r, 5)?,
        http_status: r.get(6)?,
        headers: col_json(r, 7)?,
        content_type: r.get(8)?,
        body_sha256: r.get(9)?,
        body_bytes: col_u64(r, 10)?,
        started_at: r.get(11)?,
        elapsed_ms: col_u64(r, 12)?,
        isolation: r.get(13)?,
    })
}

impl Reads<'_> {
    /// The items of a campaign, by position (a campaign has at most
    /// [`MAX_CAMPAIGN_URLS`]).
    pub(crate) fn campaign_items(&self, campaign: &ObjectRef) -> Result<Vec<CampaignItem>> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT position, url, status, reason, http_status, bytes, evidence_id FROM campaign_items
                 WHERE campaign_id = ?1 ORDER BY position LIMIT ?2",
            )?
            .query_map(params![campaign.id().to_string(), MAX_CAMPAIGN_URLS as i64], |r| {
                let status: String = r.get(2)?;
                let evidence: Option<String> = r.get(6)?;
                Ok((r.get(0)?, r.get(1)?, status, r.get(3)?, r.get(4)?, col_u64(r, 5)?, evidence))
            })?
            .collect::<std::result::Result<Vec<(u32, String, String, Option<String>, Option<u16>, u64, Option<String>)>, _>>()?;
        rows.into_iter()
            .map(|(position, url, status, reason, http_status, bytes, evidence)| {
                Ok(CampaignItem {
                    position,
                    url,
                    status: ItemStatus::parse(&status)
                        .ok_or_else(|| StoreError::Internal(format!("unknown item status `{status}`")))?,
                    reason,
                    http_status,
                    bytes,
                    evidence: evidence
                        .map(|e| parse_uuid("evidence id", &e).map(|id| ObjectRef::new(RefKind::Evidence, id)))
                        .transpose()?,
                })
            })
            .collect()
    }

    /// What the campaigns of a grant consumed: requests that reached the far
    /// side (`FETCHED` or `FAILED` items) and body bytes received.
    pub fn grant_usage(&self, ws: Uuid, grant: &GrantRef) -> Result<GrantUsage> {
        let grant = &grant.object_ref();
        self.require_in_workspace(ws, grant)?;
        let (requests, bytes): (i64, i64) = self
            .conn
            .prepare_cached(
                "SELECT coalesce(sum(i.status IN ('FETCHED', 'FAILED')), 0), coalesce(sum(i.bytes), 0)
                 FROM campaigns c JOIN campaign_items i ON i.campaign_id = c.id
                 WHERE c.grant_id = ?1",
            )?
            .query_row([grant.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let to_u64 = |v: i64| u64::try_from(v).map_err(|_| StoreError::Internal(format!("negative usage {v}")));
        Ok(GrantUsage { requests: to_u64(requests)?, bytes: to_u64(bytes)? })
    }

    /// REAL campaigns not yet ended (`PENDING`, `ADMITTED`, `RUNNING`) in every
    /// workspace, oldest first, at most [`MAX_UNFINISHED_CAMPAIGNS`]: what the
    /// campaign runner resumes or closes when the server starts.
    pub fn unfinished_real_campaigns(&self) -> Result<Vec<(Uuid, Campaign)>> {
        let rows: Vec<(String, String)> = self
            .conn
            .prepare_cached(
                "SELECT workspace_id, id FROM campaigns
                 WHERE status IN ('PENDING', 'ADMITTED', 'RUNNING') AND synthetic = 0
                   AND investigation_id IN (SELECT id FROM investigations WHERE received_at IS NULL)
                 ORDER BY created_at, id LIMIT ?1",
            )?
            .query_map([MAX_UNFINISHED_CAMPAIGNS], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<std::result::Result<_, _>>()?;
        rows.into_iter()
            .map(|(ws, id)| {
                let ws = parse_uuid("workspace id", &ws)?;
                let campaign = CampaignRef::new(parse_uuid("campaign id", &id)?);
                Ok((ws, self.campaign(ws, &campaign)?))
            })
            .collect()
    }

    /// The fetch behind provenance record `provenance_id`, if it was one.
    pub(crate) fn fetch_of_provenance(&self, provenance_id: &str) -> Result<Option<FetchProvenance>> {
        let sql = format!("SELECT {FETCH_COLUMNS} FROM fetch_provenance f WHERE f.provenance_id = ?1");
        Ok(self.conn.prepare_cached(&sql)?.query_row([provenance_id], fetch_from_row).optional()?)
    }

    /// The fetch an evidence item came from, if it was fetched.
    pub(crate) fn fetch_of_evidence(&self, ev: &ObjectRef) -> Result<Option<FetchProvenance>> {
        let sql = format!(
            "SELECT {FETCH_COLUMNS} FROM provenance p JOIN fetch_provenance f ON f.provenance_id = p.id
             WHERE p.object_ref = ?1 ORDER BY p.created_at, p.id LIMIT 1"
        );
        Ok(self.conn.prepare_cached(&sql)?.query_row([ev.to_string()], fetch_from_row).optional()?)
    }
}
