//! Tool requests (SPEC X2, the seed's pauses A, B, C1, C2): what an agent
//! proposes for a capability — install it in the workspace (A), make it
//! callable in an investigation (B), try a new or changed one there (C1),
//! promote a tried change into the registry (C2) — stored with the exact
//! manifest and fingerprint a human decides on, once, through a secured
//! route. The agent has no way to decide: the store takes a decision only
//! from [`crate::Store::decide_tool_request`], which the server calls from
//! the analyst's route.
//!
//! What is installed, integrated or on trial is *read* from the approved
//! rows, never kept anywhere else: a capability is installed in a workspace
//! with the fingerprint of its newest approved `install` or `promote`, and
//! integrated in an investigation with that of its newest approved
//! `integrate`. A decision is void (`VOID`, with why) when the proposing
//! tool's contract or the manifest changed since the proposal (SPEC R5).

use labfy_core::{ObjectRef, RefKind};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use crate::error::{Result, StoreError};
use crate::now_rfc3339;
use crate::primitives::{audit, check_text};
use crate::reads::Reads;
use crate::research::MAX_IDEMPOTENCY_KEY_CHARS;

/// Longest reason an agent gives for a tool request, in characters.
pub const MAX_TOOL_REASON_CHARS: usize = 1_000;
/// Largest manifest or detail a tool request stores, bytes of JSON.
pub const MAX_TOOL_REQUEST_JSON_BYTES: usize = 256 * 1024;
/// Tool requests listed at most by one read.
pub const MAX_TOOL_REQUEST_LIST: u32 = 100;
/// Longest note with a decision, in characters.
pub const MAX_TOOL_DECISION_NOTE_CHARS: usize = 500;

/// What a tool request asks a human to decide (the seed's pauses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolRequestKind {
    /// Pause A: install a capability of the registry in the workspace.
    Install,
    /// Pause B: make an installed capability callable in one investigation.
    Integrate,
    /// Pause C1: try a new or changed capability in one investigation.
    Change,
    /// Pause C2: promote a tried change into the workspace's registry.
    Promote,
}

impl ToolRequestKind {
    /// As stored and published.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Install => "install",
            Self::Integrate => "integrate",
            Self::Change => "change",
            Self::Promote => "promote",
        }
    }

    /// The seed's name of the pause.
    pub fn pause(self) -> &'static str {
        match self {
            Self::Install => "A",
            Self::Integrate => "B",
            Self::Change => "C1",
            Self::Promote => "C2",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::Install, Self::Integrate, Self::Change, Self::Promote].into_iter().find(|k| k.as_str() == text)
    }
}

/// A tool request as an agent's call prepared it.
#[derive(Debug, Clone)]
pub struct NewToolRequest {
    /// The investigation it is for.
    pub investigation: ObjectRef,
    /// What it asks.
    pub kind: ToolRequestKind,
    /// The capability's id.
    pub capability_id: String,
    /// Its version.
    pub capability_version: String,
    /// The exact manifest the human decides on.
    pub manifest: Value,
    /// Its fingerprint (SHA-256 of its canonical JSON, hex).
    pub manifest_fingerprint: String,
    /// Why, in the agent's words.
    pub reason: String,
    /// A change's diff and tests; a promotion's change.
    pub detail: Value,
    /// The turn that asked.
    pub turn_id: Uuid,
    /// The call that asked.
    pub call_id: Uuid,
    /// The call's idempotency key: a replay finds the same request.
    pub idempotency_key: String,
    /// `agent:demo`, `agent:local-model`, …
    pub requested_by: String,
    /// The proposing tool's contract fingerprint in force.
    pub contract_fingerprint: String,
}

/// A stored tool request and its decision.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ToolRequest {
    /// `tool_request:<uuid>`.
    #[schema(value_type = String)]
    pub id: ObjectRef,
    /// Its investigation.
    #[schema(value_type = String)]
    pub investigation_id: ObjectRef,
    /// What it asks.
    pub kind: ToolRequestKind,
    /// The seed's pause: A, B, C1 or C2.
    pub pause: &'static str,
    /// The capability.
    pub capability_id: String,
    /// Its version.
    pub capability_version: String,
    /// The exact manifest decided on.
    #[schema(value_type = Object)]
    pub manifest: Value,
    /// Its fingerprint.
    pub manifest_fingerprint: String,
    /// Why, in the agent's words (untrusted).
    pub reason: String,
    /// A change's diff and tests; a promotion's change.
    #[schema(value_type = Object)]
    pub detail: Value,
    /// PENDING, APPROVED, REFUSED or VOID.
    pub status: String,
    /// The turn that asked.
    pub turn_id: Uuid,
    /// The call that asked.
    pub call_id: Uuid,
    /// Who asked.
    pub requested_by: String,
    /// The proposing tool's contract fingerprint then.
    pub contract_fingerprint: String,
    /// When.
    pub created_at: String,
    /// When decided.
    pub decided_at: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// The note with the decision (a refusal's reason, why void).
    pub decision_note: Option<String>,
}

/// A human's decision on a pending tool request.
#[derive(Debug, Clone)]
pub struct ToolDecision {
    /// Approve (else refuse).
    pub approve: bool,
    /// A note (required to refuse).
    pub note: Option<String>,
    /// Who decides.
    pub decided_by: String,
    /// The proposing tool's contract fingerprint now; another one voids the
    /// request (R5).
    pub current_contract_fingerprint: String,
    /// For `install` and `integrate`: the fingerprint of the manifest the
    /// registry holds now under this id (`None`: gone). Another one voids
    /// the request: the human would approve what is no longer there.
    pub current_manifest_fingerprint: Option<String>,
}

/// Where a capability stands in a workspace and one investigation, read
/// from the approved requests.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CapabilityStanding {
    /// The fingerprint it is installed with in the workspace.
    pub installed: Option<String>,
    /// The fingerprint it is integrated with in the investigation.
    pub integrated: Option<String>,
    /// Requests about it still waiting for a human, in this investigation.
    pub pending: Vec<ObjectRef>,
}

/// A manifest promoted into a workspace's registry (pause C2 approved).
#[derive(Debug, Clone)]
pub struct PromotedManifest {
    /// The manifest.
    pub manifest: Value,
    /// Its fingerprint.
    pub fingerprint: String,
    /// The promotion.
    pub request: ObjectRef,
}

fn check_fingerprint(name: &str, fp: &str) -> Result<()> {
    if fp.len() != 64 || !fp.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(StoreError::Invalid(format!("{name} must be 64 lower-case hex characters")));
    }
    Ok(())
}

fn json_bounded(name: &str, v: &Value) -> Result<String> {
    let text = v.to_string();
    if text.len() > MAX_TOOL_REQUEST_JSON_BYTES {
        return Err(StoreError::Invalid(format!(
            "{name} of {} bytes refused: at most {MAX_TOOL_REQUEST_JSON_BYTES}",
            text.len()
        )));
    }
    Ok(text)
}

/// Stores a tool request (or finds the one an identical earlier call made);
/// `true` when created now.
pub(crate) fn propose(conn: &mut Connection, ws: Uuid, req: &NewToolRequest) -> Result<(ObjectRef, bool)> {
    check_text("reason", &req.reason, MAX_TOOL_REASON_CHARS)?;
    check_text("idempotency key", &req.idempotency_key, MAX_IDEMPOTENCY_KEY_CHARS)?;
    if req.capability_id.is_empty() || req.capability_id.len() > 64 {
        return Err(StoreError::Invalid("capability id must be 1 to 64 characters".into()));
    }
    if !(5..=20).contains(&req.capability_version.len()) {
        return Err(StoreError::Invalid("capability version must be 5 to 20 characters".into()));
    }
    check_fingerprint("manifest fingerprint", &req.manifest_fingerprint)?;
    check_fingerprint("contract fingerprint", &req.contract_fingerprint)?;
    if req.investigation.kind() != RefKind::Investigation {
        return Err(StoreError::Invalid(format!(
            "expected an `investigation:` reference, got `{}`",
            req.investigation
        )));
    }
    let manifest = json_bounded("manifest", &req.manifest)?;
    let detail = json_bounded("detail", &req.detail)?;
    let tx = conn.transaction()?;
    Reads { conn: &tx }.require_in_workspace(ws, &req.investigation)?;
    let existing: Option<(String, String, String, String, String, String)> = tx
        .prepare_cached(
            "SELECT id, kind, capability_id, manifest_fingerprint, turn_id, call_id FROM tool_requests
             WHERE workspace_id = ?1 AND idempotency_key = ?2",
        )?
        .query_row(params![ws.to_string(), req.idempotency_key], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        })
        .optional()?;
    if let Some((id, kind, cap, fp, turn, call)) = existing {
        let same = kind == req.kind.as_str()
            && cap == req.capability_id
            && fp == req.manifest_fingerprint
            && turn == req.turn_id.to_string()
            && call == req.call_id.to_string();
        if !same {
            return Err(StoreError::Conflict("this idempotency key already prepared a different tool request".into()));
        }
        let id =
            Uuid::try_parse(&id).map_err(|_| StoreError::Internal("stored tool request id is not a UUID".into()))?;
        return Ok((ObjectRef::new(RefKind::ToolRequest, id), false));
    }
    let id = Uuid::now_v7();
    let r = ObjectRef::new(RefKind::ToolRequest, id);
    tx.execute(
        "INSERT INTO tool_requests (id, workspace_id, investigation_id, kind, capability_id, capability_version,
                                    manifest, manifest_fingerprint, reason, detail, turn_id, call_id,
                                    idempotency_key, requested_by, contract_fingerprint, status, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, 'PENDING', ?16)",
        params![
            id.to_string(),
            ws.to_string(),
            req.investigation.id().to_string(),
            req.kind.as_str(),
            req.capability_id,
            req.capability_version,
            manifest,
            req.manifest_fingerprint,
            req.reason,
            detail,
            req.turn_id.to_string(),
            req.call_id.to_string(),
            req.idempotency_key,
            req.requested_by,
            req.contract_fingerprint,
            now_rfc3339(),
        ],
    )?;
    audit(
        &tx,
        &req.requested_by,
        &format!("tool_request.{}", req.kind.as_str()),
        Some(ws),
        Some(&r),
        &serde_json::json!({"capability_id": req.capability_id, "version": req.capability_version,
                            "manifest_fingerprint": req.manifest_fingerprint, "pause": req.kind.pause(),
                            "investigation": req.investigation}),
    )?;
    tx.commit()?;
    Ok((r, true))
}

/// Decides a pending tool request, once: APPROVED, REFUSED, or VOID when
/// what it was proposed under changed (the answer says so; the caller shows
/// the stored row).
pub(crate) fn decide(conn: &mut Connection, ws: Uuid, request: &ObjectRef, d: &ToolDecision) -> Result<ToolRequest> {
    if request.kind() != RefKind::ToolRequest {
        return Err(StoreError::Invalid(format!("expected a `tool_request:` reference, got `{request}`")));
    }
    let note = d.note.as_deref().map(str::trim).filter(|n| !n.is_empty());
    if let Some(n) = note {
        check_text("note", n, MAX_TOOL_DECISION_NOTE_CHARS)?;
    }
    if !d.approve && note.is_none() {
        return Err(StoreError::Invalid("a refusal needs a reason (note)".into()));
    }
    let tx = conn.transaction()?;
    let reads = Reads { conn: &tx };
    let stored = reads.tool_request(ws, request)?;
    if stored.status != "PENDING" {
        return Err(StoreError::Conflict(format!("{request} is already decided ({})", stored.status)));
    }
    let inv = stored.investigation_id;
    let void = if !d.approve {
        None
    } else if stored.contract_fingerprint != d.current_contract_fingerprint {
        Some("the proposing tool's contract changed since the proposal (R5): ask the agent again".to_owned())
    } else {
        match stored.kind {
            ToolRequestKind::Install | ToolRequestKind::Integrate => match d.current_manifest_fingerprint.as_deref() {
                None => Some(format!("{} is no longer in the registry", stored.capability_id)),
                Some(fp) if fp != stored.manifest_fingerprint => Some(format!(
                    "the manifest of {} changed since the proposal (fingerprint {} then, {} now)",
                    stored.capability_id,
                    &stored.manifest_fingerprint[..12],
                    &fp[..fp.len().min(12)]
                )),
                Some(_) if stored.kind == ToolRequestKind::Integrate => {
                    let standing = reads.capability_standing(ws, &inv, &stored.capability_id)?;
                    (standing.installed.as_deref() != Some(stored.manifest_fingerprint.as_str()))
                        .then(|| format!("{} is not installed with this manifest any more", stored.capability_id))
                }
                Some(_) => None,
            },
            ToolRequestKind::Change => None,
            ToolRequestKind::Promote => {
                let change = stored
                    .detail
                    .get("change")
                    .and_then(Value::as_str)
                    .and_then(|t| ObjectRef::parse_kind(t, RefKind::ToolRequest).ok());
                match change.map(|c| reads.tool_request(ws, &c)).transpose()? {
                    Some(c) if c.status == "APPROVED" && c.manifest_fingerprint == stored.manifest_fingerprint => None,
                    _ => Some("the change it promotes is not an approved trial of this manifest".to_owned()),
                }
            }
        }
    };
    let (status, note_stored) = match (&void, d.approve) {
        (Some(why), _) => ("VOID", Some(why.clone())),
        (None, true) => ("APPROVED", note.map(str::to_owned)),
        (None, false) => ("REFUSED", note.map(str::to_owned)),
    };
    tx.execute(
        "UPDATE tool_requests SET status = ?1, decided_at = ?2, decided_by = ?3, decision_note = ?4
         WHERE id = ?5 AND workspace_id = ?6 AND status = 'PENDING'",
        params![status, now_rfc3339(), d.decided_by, note_stored, request.id().to_string(), ws.to_string()],
    )?;
    audit(
        &tx,
        &d.decided_by,
        &format!("tool_request.{}", status.to_ascii_lowercase()),
        Some(ws),
        Some(request),
        &serde_json::json!({"kind": stored.kind, "pause": stored.kind.pause(), "capability_id": stored.capability_id,
                            "manifest_fingerprint": stored.manifest_fingerprint, "note": note_stored}),
    )?;
    let decided = Reads { conn: &tx }.tool_request(ws, request)?;
    tx.commit()?;
    labfy_core::crash::point(labfy_core::crash::TOOL_REQUEST_DECIDED);
    Ok(decided)
}

const COLUMNS: &str = "id, investigation_id, kind, capability_id, capability_version, manifest, manifest_fingerprint,
     reason, detail, status, turn_id, call_id, requested_by, contract_fingerprint, created_at, decided_at,
     decided_by, decision_note";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolRequest> {
    let uuid = |i: usize| -> rusqlite::Result<Uuid> {
        let text: String = r.get(i)?;
        Uuid::try_parse(&text)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
    };
    let json = |i: usize| -> rusqlite::Result<Value> {
        let text: String = r.get(i)?;
        serde_json::from_str(&text)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
    };
    let kind_text: String = r.get(2)?;
    let kind = ToolRequestKind::parse(&kind_text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, format!("kind {kind_text}").into())
    })?;
    Ok(ToolRequest {
        id: ObjectRef::new(RefKind::ToolRequest, uuid(0)?),
        investigation_id: ObjectRef::new(RefKind::Investigation, uuid(1)?),
        kind,
        pause: kind.pause(),
        capability_id: r.get(3)?,
        capability_version: r.get(4)?,
        manifest: json(5)?,
        manifest_fingerprint: r.get(6)?,
        reason: r.get(7)?,
        detail: json(8)?,
        status: r.get(9)?,
        turn_id: uuid(10)?,
        call_id: uuid(11)?,
        requested_by: r.get(12)?,
        contract_fingerprint: r.get(13)?,
        created_at: r.get(14)?,
        decided_at: r.get(15)?,
        decided_by: r.get(16)?,
        decision_note: r.get(17)?,
    })
}

impl Reads<'_> {
    /// The investigation an evidence item, entity or relation belongs to
    /// (`None` for another kind or an unknown one).
    pub fn investigation_of_object(&self, r: &ObjectRef) -> Result<Option<Uuid>> {
        self.investigation_of(r)
    }

    /// One tool request of the workspace.
    pub fn tool_request(&self, ws: Uuid, request: &ObjectRef) -> Result<ToolRequest> {
        if request.kind() != RefKind::ToolRequest {
            return Err(StoreError::Invalid(format!("expected a `tool_request:` reference, got `{request}`")));
        }
        self.conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM tool_requests WHERE id = ?1 AND workspace_id = ?2"))?
            .query_row(params![request.id().to_string(), ws.to_string()], row)
            .optional()?
            .ok_or_else(|| StoreError::NotFound(request.to_string()))
    }

    /// Tool requests of an investigation, newest first.
    pub fn tool_requests(&self, ws: Uuid, inv: &ObjectRef, limit: u32) -> Result<Vec<ToolRequest>> {
        if inv.kind() != RefKind::Investigation {
            return Err(StoreError::Invalid(format!("expected an `investigation:` reference, got `{inv}`")));
        }
        if limit == 0 || limit > MAX_TOOL_REQUEST_LIST {
            return Err(StoreError::Invalid(format!(
                "limit must be between 1 and {MAX_TOOL_REQUEST_LIST}, got {limit}"
            )));
        }
        self.require_in_workspace(ws, inv)?;
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM tool_requests WHERE workspace_id = ?1 AND investigation_id = ?2
                 ORDER BY created_at DESC, id DESC LIMIT ?3"
            ))?
            .query_map(params![ws.to_string(), inv.id().to_string(), limit], row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Tool requests of the workspace waiting for a human, oldest first.
    pub fn pending_tool_requests(&self, ws: Uuid) -> Result<Vec<ToolRequest>> {
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM tool_requests WHERE workspace_id = ?1 AND status = 'PENDING'
                 ORDER BY created_at ASC, id ASC LIMIT ?2"
            ))?
            .query_map(params![ws.to_string(), MAX_TOOL_REQUEST_LIST], row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Where `capability` stands in the workspace and in `inv`.
    pub fn capability_standing(&self, ws: Uuid, inv: &ObjectRef, capability: &str) -> Result<CapabilityStanding> {
        let newest = |kinds: &str, inv_filter: bool| -> Result<Option<String>> {
            let sql = format!(
                "SELECT manifest_fingerprint FROM tool_requests
                 WHERE workspace_id = ?1 AND capability_id = ?2 AND status = 'APPROVED' AND kind IN ({kinds})
                   {} ORDER BY decided_at DESC, id DESC LIMIT 1",
                if inv_filter { "AND investigation_id = ?3" } else { "AND ?3 = ?3" }
            );
            Ok(self
                .conn
                .prepare_cached(&sql)?
                .query_row(params![ws.to_string(), capability, inv.id().to_string()], |r| r.get(0))
                .optional()?)
        };
        let pending = self
            .conn
            .prepare_cached(
                "SELECT id FROM tool_requests WHERE workspace_id = ?1 AND capability_id = ?2
                   AND investigation_id = ?3 AND status = 'PENDING' ORDER BY created_at, id LIMIT 16",
            )?
            .query_map(params![ws.to_string(), capability, inv.id().to_string()], |r| r.get::<_, String>(0))?
            .map(|id| {
                let id = id?;
                Uuid::try_parse(&id)
                    .map(|u| ObjectRef::new(RefKind::ToolRequest, u))
                    .map_err(|_| StoreError::Internal(format!("bad tool request id `{id}`")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(CapabilityStanding {
            installed: newest("'install', 'promote'", false)?,
            integrated: newest("'integrate'", true)?,
            pending,
        })
    }

    /// The manifests promoted into the workspace's registry (C2 approved),
    /// the newest promotion of each capability id, in id order.
    pub fn promoted_manifests(&self, ws: Uuid) -> Result<Vec<PromotedManifest>> {
        let rows: Vec<(String, String, String)> = self
            .conn
            .prepare_cached(
                "SELECT t.id, t.manifest, t.manifest_fingerprint FROM tool_requests t
                 WHERE t.workspace_id = ?1 AND t.kind = 'promote' AND t.status = 'APPROVED'
                   AND NOT EXISTS (SELECT 1 FROM tool_requests n WHERE n.workspace_id = t.workspace_id
                                     AND n.kind = 'promote' AND n.status = 'APPROVED'
                                     AND n.capability_id = t.capability_id
                                     AND (n.decided_at, n.id) > (t.decided_at, t.id))
                 ORDER BY t.capability_id LIMIT 256",
            )?
            .query_map(params![ws.to_string()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(id, manifest, fingerprint)| {
                let id =
                    Uuid::try_parse(&id).map_err(|_| StoreError::Internal(format!("bad tool request id `{id}`")))?;
                Ok(PromotedManifest {
                    manifest: serde_json::from_str(&manifest).map_err(|e| StoreError::Internal(e.to_string()))?,
                    fingerprint,
                    request: ObjectRef::new(RefKind::ToolRequest, id),
                })
            })
            .collect()
    }
}
