//! Research requests, human decisions and campaigns (SPEC G11, W4, R5).
//!
//! An agent *prepares* a research request (`research.prepare`); nothing else
//! happens until a human grants or refuses it through a secured route. A grant
//! names the exact URLs the campaign fetches and creates the campaign. In a
//! `SPECIMEN` workspace the campaign is synthetic: it writes deterministic
//! evidence with provenance in the same transaction and touches no network
//! (W1). In a `REAL` workspace its URLs are planned as items and it waits for
//! the server's campaign runner and the egress daemon (see `campaign.rs`).
//! Every step writes its audit row in the same transaction.

use chrono::{Duration as ChronoDuration, SecondsFormat, Utc};
use labfy_core::{CampaignRef, GrantRef, ObjectRef, RefKind};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::Serialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::campaign::{
    Campaign, EndedItem, ItemStatus, PageOrigin, bump_investigation, check_campaign_urls, insert_campaign_page,
    insert_ended_item, plan_items,
};
use crate::candidates::{ResearchCandidates, gather, parse_stored};
use crate::error::{Result, StoreError};
use crate::grants::{GrantRow, insert_grant};
use crate::hosts::check_host_pattern;
use crate::model::{Grant, ResearchBudget, ResearchScope, WorkspaceClass, grant_is_active};
use crate::now_rfc3339;
use crate::primitives::{TEXT_PLAIN, TextEvidence, audit, check_text, index_evidence};
use crate::reads::Reads;

/// Longest research question, in characters (SPEC G4).
pub const MAX_RESEARCH_QUESTION_CHARS: usize = 512;
/// Fewest objects a research request selects (SPEC G4).
pub const MIN_RESEARCH_SELECTION: usize = 1;
/// Most objects a research request selects (SPEC G4).
pub const MAX_RESEARCH_SELECTION: usize = 8;
/// Most exclusions of a research request (SPEC G4).
pub const MAX_RESEARCH_EXCLUSIONS: usize = 8;
/// Longest exclusion, in characters.
pub const MAX_EXCLUSION_CHARS: usize = 200;
/// Longest idempotency key, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 128;
/// Most host patterns in a grant's scope.
pub const MAX_SCOPE_HOSTS: usize = 16;
/// Most requests a grant may allow.
pub const MAX_GRANT_REQUESTS: u32 = 1_000;
/// Most bytes a grant may allow (1 GiB).
pub const MAX_GRANT_BYTES: u64 = 1 << 30;
/// Longest a grant may last, in minutes (7 days).
pub const MAX_GRANT_MINUTES: u32 = 7 * 24 * 60;
/// Longest refusal reason, in characters.
pub const MAX_DECISION_NOTE_CHARS: usize = 500;
/// Pages a synthetic campaign writes at most (fewer when the budget is smaller).
pub const SYNTHETIC_PAGES: u32 = 3;
/// Research requests listed at most by one read.
pub const MAX_RESEARCH_LIST: u32 = 100;
/// Evidence references a campaign read lists at most.
pub const MAX_CAMPAIGN_EVIDENCE: u32 = 64;

/// Kinds of objects a research request may select.
pub const SELECTABLE_KINDS: [RefKind; 3] = [RefKind::Evidence, RefKind::Entity, RefKind::Relation];

/// What an agent asks to research, as `research.prepare` received it.
#[derive(Debug, Clone)]
pub struct NewResearchRequest {
    /// Objects the research is about (1–8, one investigation).
    pub selection: Vec<ObjectRef>,
    /// The question (1–512 characters).
    pub question: String,
    /// What must stay out of the research (0–8 strings).
    pub exclusions: Vec<String>,
    /// The agent turn that prepared it.
    pub turn_id: Uuid,
    /// The call that prepared it.
    pub call_id: Uuid,
    /// The call's idempotency key: a replay finds the same request.
    pub idempotency_key: String,
    /// Who prepared it (`agent:demo`, `agent:local-model`, …).
    pub requested_by: String,
    /// Contract fingerprint of `research.prepare` in force.
    pub contract_fingerprint: String,
    /// Fingerprint of the whole catalog in force.
    pub catalog_fingerprint: String,
}

/// A human's grant of a prepared research request.
#[derive(Debug, Clone)]
pub struct GrantDecision {
    /// Where the campaign may go.
    pub scope: ResearchScope,
    /// How much it may fetch.
    pub budget: ResearchBudget,
    /// How long the grant lasts, from now (1 minute – 7 days).
    pub expires_in_minutes: u32,
    /// The catalog's fingerprints in force now (stored with the grant, W4).
    pub contract_fingerprints: serde_json::Value,
    /// The current fingerprint of `research.prepare`; a request prepared under
    /// another one is void (R5).
    pub current_prepare_fingerprint: String,
    /// Who decides.
    pub decided_by: String,
    /// The exact URLs the campaign fetches, in order: absolute http(s), inside
    /// the scope, no credentials or fragment, at most 2048 bytes each, no
    /// duplicate. REAL: 1 to [`crate::MAX_CAMPAIGN_URLS`], required. SPECIMEN:
    /// optional; when given they are the synthetic pages' simulated addresses.
    pub urls: Vec<String>,
}

/// What a grant decision produced.
#[derive(Debug, Clone, Serialize)]
pub struct GrantOutcome {
    /// The new grant.
    pub grant: GrantRef,
    /// The campaign it started.
    pub campaign: CampaignRef,
}

/// A prepared research request with its decision, grant and campaign.
#[derive(Debug, Clone, Serialize)]
pub struct ResearchRequest {
    /// `research_request:<uuid>`.
    pub id: ObjectRef,
    /// Its investigation.
    pub investigation_id: ObjectRef,
    /// The question, as asked.
    pub question: String,
    /// The selected objects.
    pub selection: Vec<ObjectRef>,
    /// The exclusions.
    pub exclusions: Vec<String>,
    /// PENDING, GRANTED, REFUSED or VOID.
    pub status: String,
    /// The turn that prepared it.
    pub turn_id: Uuid,
    /// The call that prepared it.
    pub call_id: Uuid,
    /// Who prepared it.
    pub requested_by: String,
    /// Contract fingerprint of `research.prepare` it was prepared under.
    pub contract_fingerprint: String,
    /// Catalog fingerprint it was prepared under.
    pub catalog_fingerprint: String,
    /// RFC 3339.
    pub created_at: String,
    /// When decided.
    pub decided_at: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// A refusal's reason or why it became void.
    pub decision_note: Option<String>,
    /// The grant, when granted.
    pub grant: Option<Grant>,
    /// True when the grant is unrevoked and unexpired now.
    pub grant_active: bool,
    /// The campaign, when granted.
    pub campaign: Option<Campaign>,
    /// The URLs `research.prepare` proposed for the human to edit, with why
    /// (SPEC F1); `None` for a request prepared before they existed.
    pub candidates: Option<ResearchCandidates>,
}

fn validate_new(req: &NewResearchRequest) -> Result<()> {
    let n = req.selection.len();
    if !(MIN_RESEARCH_SELECTION..=MAX_RESEARCH_SELECTION).contains(&n) {
        return Err(StoreError::Invalid(format!(
            "selection must hold {MIN_RESEARCH_SELECTION} to {MAX_RESEARCH_SELECTION} objects, got {n}"
        )));
    }
    for (i, r) in req.selection.iter().enumerate() {
        if !SELECTABLE_KINDS.contains(&r.kind()) {
            return Err(StoreError::Invalid(format!(
                "selection[{i}]: `{}:` objects cannot be researched (evidence, entity or relation)",
                r.kind()
            )));
        }
        if req.selection[..i].contains(r) {
            return Err(StoreError::Invalid(format!("selection[{i}] repeats {r}")));
        }
    }
    check_text("question", &req.question, MAX_RESEARCH_QUESTION_CHARS)?;
    if req.exclusions.len() > MAX_RESEARCH_EXCLUSIONS {
        return Err(StoreError::Invalid(format!(
            "at most {MAX_RESEARCH_EXCLUSIONS} exclusions, got {}",
            req.exclusions.len()
        )));
    }
    for (i, e) in req.exclusions.iter().enumerate() {
        check_text(&format!("exclusions[{i}]"), e, MAX_EXCLUSION_CHARS)?;
    }
    check_text("idempotency key", &req.idempotency_key, MAX_IDEMPOTENCY_KEY_CHARS)?;
    check_text("requested_by", &req.requested_by, 200)?;
    for (name, fp) in [("contract", &req.contract_fingerprint), ("catalog", &req.catalog_fingerprint)] {
        if !is_fingerprint(fp) {
            return Err(StoreError::Invalid(format!("{name} fingerprint must be 64 lower-case hex characters")));
        }
    }
    Ok(())
}

fn is_fingerprint(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn validate_decision(d: &GrantDecision) -> Result<()> {
    let n = d.scope.hosts.len();
    if n == 0 || n > MAX_SCOPE_HOSTS {
        return Err(StoreError::Invalid(format!("scope must name 1 to {MAX_SCOPE_HOSTS} hosts, got {n}")));
    }
    for (i, h) in d.scope.hosts.iter().enumerate() {
        check_host_pattern(h)?;
        if d.scope.hosts[..i].contains(h) {
            return Err(StoreError::Invalid(format!("scope repeats host `{h}`")));
        }
    }
    if d.budget.max_requests == 0 || d.budget.max_requests > MAX_GRANT_REQUESTS {
        return Err(StoreError::Invalid(format!("max_requests must be 1 to {MAX_GRANT_REQUESTS}")));
    }
    if d.budget.max_bytes == 0 || d.budget.max_bytes > MAX_GRANT_BYTES {
        return Err(StoreError::Invalid(format!("max_bytes must be 1 to {MAX_GRANT_BYTES}")));
    }
    if d.expires_in_minutes == 0 || d.expires_in_minutes > MAX_GRANT_MINUTES {
        return Err(StoreError::Invalid(format!("expires_in_minutes must be 1 to {MAX_GRANT_MINUTES}")));
    }
    if !d.contract_fingerprints.is_object() {
        return Err(StoreError::Invalid("contract fingerprints must be a JSON object".into()));
    }
    check_text("decided_by", &d.decided_by, 200)
}

fn ref_list(refs: &[ObjectRef]) -> String {
    serde_json::Value::from(refs.iter().map(ToString::to_string).collect::<Vec<_>>()).to_string()
}

/// Stores a prepared research request, or finds the one an identical earlier
/// call prepared (same idempotency key). Returns the request and whether it
/// was created now. The same key with other content is a conflict.
pub(crate) fn prepare(conn: &mut Connection, ws: Uuid, req: &NewResearchRequest) -> Result<(ObjectRef, bool)> {
    validate_new(req)?;
    let tx = conn.transaction()?;
    let reads = Reads { conn: &tx };
    let mut investigation: Option<Uuid> = None;
    for r in &req.selection {
        reads.require_in_workspace(ws, r)?;
        let inv = reads.investigation_of(r)?.ok_or_else(|| StoreError::NotFound(r.to_string()))?;
        match investigation {
            None => investigation = Some(inv),
            Some(first) if first != inv => {
                return Err(StoreError::Invalid("selected objects belong to different investigations".into()));
            }
            Some(_) => {}
        }
    }
    let inv = investigation.ok_or_else(|| StoreError::Invalid("empty selection".into()))?;
    let selection = ref_list(&req.selection);
    let exclusions = serde_json::Value::from(req.exclusions.clone()).to_string();
    let existing: Option<(String, String, String, String, String, String)> = tx
        .prepare_cached(
            "SELECT id, question, selection, exclusions, turn_id, call_id FROM research_requests
             WHERE workspace_id = ?1 AND idempotency_key = ?2",
        )?
        .query_row(params![ws.to_string(), req.idempotency_key], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .optional()?;
    if let Some((id, question, sel, exc, turn, call)) = existing {
        let same = question == req.question
            && sel == selection
            && exc == exclusions
            && turn == req.turn_id.to_string()
            && call == req.call_id.to_string();
        if !same {
            return Err(StoreError::Conflict(
                "this idempotency key already prepared a different research request".into(),
            ));
        }
        let id = Uuid::try_parse(&id).map_err(|_| StoreError::Internal("stored request id is not a UUID".into()))?;
        return Ok((ObjectRef::new(RefKind::ResearchRequest, id), false));
    }
    let id = Uuid::now_v7();
    let r = ObjectRef::new(RefKind::ResearchRequest, id);
    // What a human might grant, found in the selection (F1): proposals only.
    let candidates = gather(&tx, &req.selection, &req.exclusions)?;
    let proposed = candidates.urls.len();
    let candidates = serde_json::to_string(&candidates).map_err(|e| StoreError::Internal(e.to_string()))?;
    tx.execute(
        "INSERT INTO research_requests (id, workspace_id, investigation_id, question, selection, exclusions, turn_id,
                                        call_id, idempotency_key, requested_by, contract_fingerprint,
                                        catalog_fingerprint, status, created_at, candidates)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 'PENDING', ?13, ?14)",
        params![
            id.to_string(),
            ws.to_string(),
            inv.to_string(),
            req.question,
            selection,
            exclusions,
            req.turn_id.to_string(),
            req.call_id.to_string(),
            req.idempotency_key,
            req.requested_by,
            req.contract_fingerprint,
            req.catalog_fingerprint,
            now_rfc3339(),
            candidates
        ],
    )?;
    audit(
        &tx,
        &req.requested_by,
        "research.prepare",
        Some(ws),
        Some(&r),
        &serde_json::json!({"selection": req.selection.len(), "exclusions": req.exclusions.len(),
                            "candidate_urls": proposed, "contract_fingerprint": req.contract_fingerprint}),
    )?;
    tx.commit()?;
    Ok((r, true))
}

/// The status of a pending request, or the conflict that says it is decided.
fn require_pending(tx: &Transaction<'_>, ws: Uuid, request: &ObjectRef) -> Result<(String, String)> {
    if request.kind() != RefKind::ResearchRequest {
        return Err(StoreError::Invalid(format!("expected a `research_request:` reference, got `{request}`")));
    }
    let row: Option<(String, String, String)> = tx
        .prepare_cached(
            "SELECT status, contract_fingerprint, investigation_id FROM research_requests
             WHERE id = ?1 AND workspace_id = ?2",
        )?
        .query_row(params![request.id().to_string(), ws.to_string()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let (status, fingerprint, inv) = row.ok_or_else(|| StoreError::NotFound(request.to_string()))?;
    if status != "PENDING" {
        return Err(StoreError::Conflict(format!("{request} is already decided ({status})")));
    }
    Ok((fingerprint, inv))
}

/// Grants a pending request: persists the grant (with the contract
/// fingerprints in force), marks the request, creates the campaign and, in a
/// SPECIMEN workspace, runs it synthetically — all in one transaction with
/// its audit rows. A request prepared under another `research.prepare`
/// contract is made void instead (R5) and the grant is refused.
pub(crate) fn grant(conn: &mut Connection, ws: Uuid, request: &ObjectRef, d: &GrantDecision) -> Result<GrantOutcome> {
    validate_decision(d)?;
    let urls = check_campaign_urls(&d.urls, &d.scope.hosts, d.budget.max_requests)?;
    let tx = conn.transaction()?;
    let (fingerprint, inv) = require_pending(&tx, ws, request)?;
    let class = Reads { conn: &tx }.workspace(ws)?.class;
    if class == WorkspaceClass::Real && urls.is_empty() {
        return Err(StoreError::Invalid(format!(
            "a REAL campaign fetches the URLs the analyst lists: name 1 to {} URLs",
            crate::MAX_CAMPAIGN_URLS
        )));
    }
    let now = now_rfc3339();
    if fingerprint != d.current_prepare_fingerprint {
        let note = "prepared under another contract of research.prepare; prepare it again";
        tx.execute(
            "UPDATE research_requests SET status = 'VOID', decided_at = ?2, decided_by = ?3, decision_note = ?4
             WHERE id = ?1",
            params![request.id().to_string(), now, d.decided_by, note],
        )?;
        audit(
            &tx,
            &d.decided_by,
            "research.void",
            Some(ws),
            Some(request),
            &serde_json::json!({"prepared_under": fingerprint, "current": d.current_prepare_fingerprint}),
        )?;
        tx.commit()?;
        return Err(StoreError::Conflict(format!("{request} is void: {note}")));
    }
    let expires = (Utc::now() + ChronoDuration::minutes(i64::from(d.expires_in_minutes)))
        .to_rfc3339_opts(SecondsFormat::Millis, true);
    let scope = serde_json::to_value(&d.scope).map_err(|e| StoreError::Internal(e.to_string()))?;
    let budget = serde_json::to_value(d.budget).map_err(|e| StoreError::Internal(e.to_string()))?;
    let typed_grant = insert_grant(
        &tx,
        ws,
        &GrantRow {
            investigation: &inv,
            scope: &scope.to_string(),
            budget: &budget.to_string(),
            expires_at: &expires,
            contract_fingerprints: &d.contract_fingerprints,
            decided_by: &d.decided_by,
            decided_at: &now,
        },
    )?;
    let (grant, grant_id) = (typed_grant.object_ref(), typed_grant.id());
    tx.execute(
        "UPDATE research_requests SET status = 'GRANTED', decided_at = ?2, decided_by = ?3, grant_id = ?4
         WHERE id = ?1",
        params![request.id().to_string(), now, d.decided_by, grant_id.to_string()],
    )?;
    audit(
        &tx,
        &d.decided_by,
        "grant.decide",
        Some(ws),
        Some(&grant),
        &serde_json::json!({"research_request": request, "scope": scope, "budget": budget, "expires_at": expires,
                            "contract_fingerprints": d.contract_fingerprints, "urls": urls}),
    )?;
    let campaign_id = Uuid::now_v7();
    let campaign = ObjectRef::new(RefKind::Campaign, campaign_id);
    let (status, detail) = match class {
        WorkspaceClass::Specimen => ("ADMITTED", "synthetic campaign (SPECIMEN): no network"),
        WorkspaceClass::Real => ("PENDING", "waiting for the egress daemon (Tor); nothing has left this machine"),
    };
    tx.execute(
        "INSERT INTO campaigns (id, workspace_id, investigation_id, grant_id, status, detail, created_at, updated_at,
                                research_request_id, synthetic)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9)",
        params![
            campaign_id.to_string(),
            ws.to_string(),
            inv,
            grant_id.to_string(),
            status,
            detail,
            now,
            request.id().to_string(),
            class == WorkspaceClass::Specimen
        ],
    )?;
    audit(
        &tx,
        "labfy",
        "campaign.create",
        Some(ws),
        Some(&campaign),
        &serde_json::json!({"status": status, "urls": urls.len()}),
    )?;
    match class {
        WorkspaceClass::Specimen => {
            run_synthetic(&tx, ws, &inv, request, &grant, &campaign, &d.scope, d.budget, &urls)?
        }
        WorkspaceClass::Real => plan_items(&tx, &campaign, &urls)?,
    }
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::GRANT_RECORDED);
    Ok(GrantOutcome { grant: typed_grant, campaign: CampaignRef::new(campaign_id) })
}

/// Refuses a pending request, with the analyst's reason.
pub(crate) fn refuse(conn: &mut Connection, ws: Uuid, request: &ObjectRef, reason: &str, by: &str) -> Result<()> {
    check_text("reason", reason, MAX_DECISION_NOTE_CHARS)?;
    check_text("decided_by", by, 200)?;
    let tx = conn.transaction()?;
    require_pending(&tx, ws, request)?;
    tx.execute(
        "UPDATE research_requests SET status = 'REFUSED', decided_at = ?2, decided_by = ?3, decision_note = ?4
         WHERE id = ?1",
        params![request.id().to_string(), now_rfc3339(), by, reason],
    )?;
    audit(
        &tx,
        by,
        "research.refuse",
        Some(ws),
        Some(request),
        &serde_json::json!({"reason_chars": reason.chars().count()}),
    )?;
    tx.commit()?;
    Ok(())
}

/// Seeds the synthetic pages of a request: SHA-256 over its content, so the
/// same request always yields the same pages.
fn synthetic_seed(question: &str, selection: &[ObjectRef], exclusions: &[String]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(question.as_bytes());
    for r in selection {
        h.update([0]);
        h.update(r.to_string().as_bytes());
    }
    for e in exclusions {
        h.update([1]);
        h.update(e.as_bytes());
    }
    h.finalize().into()
}

/// The synthetic campaign of a SPECIMEN workspace: one deterministic page
/// per granted URL (its simulated address), or without URLs up to
/// [`SYNTHETIC_PAGES`] pages on the scope's hosts — never more than the
/// budget's requests, and a page over the byte budget is not written (its
/// item ends `REFUSED`). Each page is stored like a fetched one
/// ([`insert_campaign_page`]: provenance producer the campaign, inputs grant,
/// request and selection, `derived_from` the selected evidence and entities),
/// with activity `synthetic_fetch`. Runs inside the grant's transaction:
/// either the whole campaign is stored or none of it.
#[allow(clippy::too_many_arguments)]
fn run_synthetic(
    tx: &Transaction<'_>,
    ws: Uuid,
    inv: &str,
    request: &ObjectRef,
    grant: &ObjectRef,
    campaign: &ObjectRef,
    scope: &ResearchScope,
    budget: ResearchBudget,
    urls: &[String],
) -> Result<()> {
    let inv_id = Uuid::try_parse(inv).map_err(|_| StoreError::Internal(format!("stored investigation id `{inv}`")))?;
    let (question, selection, exclusions): (String, String, String) = tx
        .prepare_cached("SELECT question, selection, exclusions FROM research_requests WHERE id = ?1")?
        .query_row([request.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let selection: Vec<ObjectRef> = serde_json::from_str(&selection)
        .map_err(|e| StoreError::Internal(format!("stored selection is invalid: {e}")))?;
    let exclusions: Vec<String> = serde_json::from_str(&exclusions)
        .map_err(|e| StoreError::Internal(format!("stored exclusions are invalid: {e}")))?;
    let seed = synthetic_seed(&question, &selection, &exclusions);
    let tag = hex::encode(&seed[..6]);
    // (host, simulated address) of each page.
    let pages: Vec<(String, String)> = if urls.is_empty() {
        (0..SYNTHETIC_PAGES.min(budget.max_requests) as usize)
            .map(|i| {
                let host = &scope.hosts[i % scope.hosts.len()];
                let host = host.strip_prefix("*.").map_or_else(|| host.clone(), |h| format!("www.{h}"));
                let url = format!("https://{host}/labfy-synthetic/{tag}/{}", i + 1);
                (host, url)
            })
            .collect()
    } else {
        urls.iter()
            .map(|u| {
                let host = url::Url::parse(u).ok().and_then(|p| p.host_str().map(str::to_owned)).unwrap_or_default();
                (host, u.clone())
            })
            .collect()
    };
    let planned = pages.len();
    let now = now_rfc3339();
    tx.execute(
        "UPDATE campaigns SET status = 'RUNNING', items_total = ?2, updated_at = ?3, started_at = ?3 WHERE id = ?1",
        params![campaign.id().to_string(), planned as i64, now],
    )?;
    let reads = Reads { conn: tx };
    let labels: Vec<String> = selection
        .iter()
        .map(|r| reads.node(ws, r).map(|n| format!("{} ({})", n.label, r.kind())))
        .collect::<Result<_>>()?;
    let origin = PageOrigin { investigation: inv_id, campaign, grant, request: Some(request), selection: &selection };
    let (mut done, mut failed, mut bytes, mut relations) = (0i64, 0i64, 0u64, 0i64);
    let (mut first_seq, mut last_seq) = (None, 0);
    for (i, (host, url)) in pages.iter().enumerate() {
        // Two seed bytes per page; the first three pages read bytes 8–11 as
        // they always did, later ones wrap around the seed.
        let figure = u32::from_be_bytes([seed[(8 + i) % seed.len()], seed[(9 + i) % seed.len()], 0, 0]) >> 16;
        let content = format!(
            "Page synthétique {n}/{planned} d'une campagne SPECIMEN : aucun réseau n'a été contacté.\n\
             Adresse simulée : {url}\n\
             Question de recherche : {question}\n\
             Objets sélectionnés : {labels}\n\
             Exclusions respectées : {excl}\n\
             Constat simulé n° {figure} : la source mentionne à nouveau les objets sélectionnés \
             dans un contexte daté, à vérifier par l'analyste.",
            n = i + 1,
            labels = labels.join(" ; "),
            excl = if exclusions.is_empty() { "aucune".to_owned() } else { exclusions.join(" ; ") },
        );
        let len = content.len() as u64;
        let mut item = EndedItem {
            position: i as u32,
            url,
            status: ItemStatus::Refused,
            reason: Some("synthetic page over the grant's byte budget; not written"),
            bytes: 0,
            evidence: None,
            at: &now,
        };
        if bytes + len > budget.max_bytes {
            failed += 1;
            insert_ended_item(tx, campaign, &item)?;
            continue;
        }
        bytes += len;
        let title = format!("Résultat synthétique {}/{planned} — {host}", i + 1);
        let page = TextEvidence {
            investigation: inv_id,
            title: &title,
            content: &content,
            source: url,
            mime: TEXT_PLAIN,
            at: &now,
            original: None,
            dated_at: None,
        };
        let (inserted, added) = insert_campaign_page(tx, &origin, &page, "synthetic_fetch")?;
        first_seq.get_or_insert(inserted.seq);
        last_seq = inserted.seq;
        relations += added;
        done += 1;
        item.status = ItemStatus::Fetched;
        item.reason = None;
        item.bytes = len;
        item.evidence = Some(&inserted.evidence);
        insert_ended_item(tx, campaign, &item)?;
    }
    if let Some(first) = first_seq {
        index_evidence(tx, first, last_seq)?;
    }
    bump_investigation(tx, inv, done, relations)?;
    let detail = format!("synthetic campaign (SPECIMEN): {done} pages written, {failed} over budget, no network");
    let finished = now_rfc3339();
    tx.execute(
        "UPDATE campaigns SET status = 'COMPLETED', items_done = ?2, items_failed = ?3, bytes = ?4, detail = ?5,
                              updated_at = ?6, finished_at = ?6
         WHERE id = ?1",
        params![campaign.id().to_string(), done, failed, bytes as i64, detail, finished],
    )?;
    audit(
        tx,
        "labfy",
        "campaign.complete",
        Some(ws),
        Some(campaign),
        &serde_json::json!({"synthetic": true, "done": done, "failed": failed, "bytes": bytes}),
    )
}

/// A stored UUID column; anything else is a conversion failure of that column.
fn col_uuid(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Uuid> {
    let text: String = r.get(i)?;
    Uuid::try_parse(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

/// A stored JSON column, decoded.
fn col_json<T: serde::de::DeserializeOwned>(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
}

impl Reads<'_> {
    /// The investigation an evidence item, entity or relation belongs to.
    pub(crate) fn investigation_of(&self, r: &ObjectRef) -> Result<Option<Uuid>> {
        let sql = match r.kind() {
            RefKind::Evidence => "SELECT investigation_id FROM evidence WHERE id = ?1",
            RefKind::Entity => "SELECT investigation_id FROM entities WHERE id = ?1",
            RefKind::Relation => "SELECT investigation_id FROM relations WHERE id = ?1",
            RefKind::Investigation => "SELECT id FROM investigations WHERE id = ?1",
            _ => return Ok(None),
        };
        let id: Option<String> =
            self.conn.prepare_cached(sql)?.query_row([r.id().to_string()], |row| row.get(0)).optional()?;
        id.map(|s| Uuid::try_parse(&s).map_err(|_| StoreError::Internal(format!("bad investigation id `{s}`"))))
            .transpose()
    }

    /// One research request with its decision, grant and campaign.
    pub fn research_request(&self, ws: Uuid, request: &ObjectRef) -> Result<ResearchRequest> {
        if request.kind() != RefKind::ResearchRequest {
            return Err(StoreError::Invalid(format!("expected a `research_request:` reference, got `{request}`")));
        }
        let mut list = self.research_list(ws, "id = ?2", &request.id().to_string(), "ASC", 1)?;
        list.pop().ok_or_else(|| StoreError::NotFound(request.to_string()))
    }

    /// Research requests of an investigation, newest first (at most 100).
    pub fn research_requests(&self, ws: Uuid, inv: &ObjectRef, limit: u32) -> Result<Vec<ResearchRequest>> {
        if inv.kind() != RefKind::Investigation {
            return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
        }
        if limit == 0 || limit > MAX_RESEARCH_LIST {
            return Err(StoreError::Invalid(format!("limit must be between 1 and {MAX_RESEARCH_LIST}, got {limit}")));
        }
        self.require_in_workspace(ws, inv)?;
        self.research_list(ws, "investigation_id = ?2", &inv.id().to_string(), "DESC", limit)
    }

    /// Research requests of a workspace waiting for a decision, oldest first.
    pub fn pending_research(&self, ws: Uuid) -> Result<Vec<ResearchRequest>> {
        self.research_list(ws, "status = ?2", "PENDING", "ASC", MAX_RESEARCH_LIST)
    }

    fn research_list(
        &self,
        ws: Uuid,
        filter: &str,
        value: &str,
        order: &str,
        limit: u32,
    ) -> Result<Vec<ResearchRequest>> {
        let sql = format!(
            "SELECT id, investigation_id, question, selection, exclusions, status, turn_id, call_id, requested_by,
                    contract_fingerprint, catalog_fingerprint, created_at, decided_at, decided_by, decision_note,
                    grant_id, candidates
             FROM research_requests WHERE workspace_id = ?1 AND {filter} ORDER BY created_at {order}, id {order} LIMIT ?3"
        );
        let rows: Vec<(ResearchRequest, Option<String>, Option<String>)> = self
            .conn
            .prepare_cached(&sql)?
            .query_map(params![ws.to_string(), value, limit], |r| {
                let request = ResearchRequest {
                    id: ObjectRef::new(RefKind::ResearchRequest, col_uuid(r, 0)?),
                    investigation_id: ObjectRef::new(RefKind::Investigation, col_uuid(r, 1)?),
                    question: r.get(2)?,
                    selection: col_json(r, 3)?,
                    exclusions: col_json(r, 4)?,
                    status: r.get(5)?,
                    turn_id: col_uuid(r, 6)?,
                    call_id: col_uuid(r, 7)?,
                    requested_by: r.get(8)?,
                    contract_fingerprint: r.get(9)?,
                    catalog_fingerprint: r.get(10)?,
                    created_at: r.get(11)?,
                    decided_at: r.get(12)?,
                    decided_by: r.get(13)?,
                    decision_note: r.get(14)?,
                    grant: None,
                    grant_active: false,
                    campaign: None,
                    candidates: None,
                };
                Ok((request, r.get(15)?, r.get(16)?))
            })?
            .collect::<std::result::Result<_, _>>()?;
        let now = Utc::now();
        let mut out = Vec::with_capacity(rows.len());
        for (mut request, grant_id, candidates) in rows {
            request.candidates = parse_stored(candidates)?;
            if let Some(g) = grant_id {
                let id = Uuid::try_parse(&g).map_err(|_| StoreError::Internal(format!("stored grant id `{g}`")))?;
                let grant = self.grant(ws, &GrantRef::new(id))?;
                request.grant_active = grant_is_active(&grant, now);
                request.grant = Some(grant);
            }
            request.campaign = self.campaign_of_request(ws, &request.id)?;
            out.push(request);
        }
        Ok(out)
    }

    /// The campaign started for a request, if any.
    fn campaign_of_request(&self, ws: Uuid, request: &ObjectRef) -> Result<Option<Campaign>> {
        let id: Option<String> = self
            .conn
            .prepare_cached("SELECT id FROM campaigns WHERE research_request_id = ?1 AND workspace_id = ?2")?
            .query_row(params![request.id().to_string(), ws.to_string()], |r| r.get(0))
            .optional()?;
        match id {
            Some(id) => {
                let id = Uuid::try_parse(&id).map_err(|_| StoreError::Internal("stored campaign id".into()))?;
                Ok(Some(self.campaign(ws, &CampaignRef::new(id))?))
            }
            None => Ok(None),
        }
    }

    /// The campaign that runs under `grant` (one per grant: egress confirms
    /// a grant for exactly one campaign, SPEC T2). NotFound when the grant
    /// has none (or is not of `ws`).
    pub fn campaign_of_grant(&self, ws: Uuid, grant: &GrantRef) -> Result<Campaign> {
        let id: Option<String> = self
            .conn
            .prepare_cached(
                "SELECT id FROM campaigns WHERE grant_id = ?1 AND workspace_id = ?2 ORDER BY created_at, id LIMIT 1",
            )?
            .query_row(params![grant.id().to_string(), ws.to_string()], |r| r.get(0))
            .optional()?;
        let id = id.ok_or_else(|| StoreError::NotFound(format!("no campaign runs under {grant} in this workspace")))?;
        let id = Uuid::try_parse(&id).map_err(|_| StoreError::Internal("stored campaign id".into()))?;
        self.campaign(ws, &CampaignRef::new(id))
    }

    /// One campaign with the evidence it produced.
    pub fn campaign(&self, ws: Uuid, campaign: &CampaignRef) -> Result<Campaign> {
        let typed = *campaign;
        let campaign = &campaign.object_ref();
        self.require_in_workspace(ws, campaign)?;
        let mut found = self
            .conn
            .prepare_cached(
                "SELECT grant_id, status, detail, synthetic, items_total, items_done, items_failed, bytes, created_at,
                        updated_at, started_at, finished_at FROM campaigns WHERE id = ?1",
            )?
            .query_row([campaign.id().to_string()], |r| {
                Ok(Campaign {
                    id: typed,
                    grant_id: GrantRef::new(col_uuid(r, 0)?),
                    status: r.get(1)?,
                    detail: r.get(2)?,
                    synthetic: r.get(3)?,
                    items_total: r.get(4)?,
                    items_done: r.get(5)?,
                    items_failed: r.get(6)?,
                    bytes: r.get(7)?,
                    evidence: Vec::new(),
                    items: Vec::new(),
                    created_at: r.get(8)?,
                    updated_at: r.get(9)?,
                    started_at: r.get(10)?,
                    finished_at: r.get(11)?,
                })
            })?;
        // The campaign's evidence is what its provenance records name.
        let evidence: Vec<String> = self
            .conn
            .prepare_cached(
                "SELECT object_ref FROM provenance WHERE producer = ?1 ORDER BY created_at, object_ref LIMIT ?2",
            )?
            .query_map(params![campaign.to_string(), MAX_CAMPAIGN_EVIDENCE], |r| r.get(0))?
            .collect::<std::result::Result<_, _>>()?;
        found.evidence = evidence
            .iter()
            .map(|e| e.parse().map_err(|e| StoreError::Internal(format!("stored evidence ref: {e}"))))
            .collect::<Result<_>>()?;
        found.items = self.campaign_items(campaign)?;
        Ok(found)
    }
}
