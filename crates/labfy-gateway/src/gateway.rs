//! `AgentGateway`: the pipeline capability → policy → service (G13) and the
//! bounded, in-memory transport state: turns, results, events and
//! idempotency records (G7–G10). Everything here disappears at shutdown.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use labfy_core::bounded::truncate_chars;
use labfy_core::{GrantRef, ObjectRef, RefKind};
use labfy_store::{JournalKind, JournalLayer, StoreError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::backend::{self, Backend};
use crate::canonical::canonical_json;
use crate::catalog::{Authorization, Catalog, Environment, Tool, ToolId};
use crate::error::GatewayError;
use crate::fetch::Fetcher;
use crate::journal::Journal;
use crate::protocol::*;
use crate::sandbox::Sandbox;
use crate::services::{self, CallOrigin, Outcome, Scope, Tools};

#[derive(Debug, Clone, PartialEq, Eq)]
enum CallState {
    InFlight,
    Done(Uuid),
}

#[derive(Debug, Clone)]
struct IdemRecord {
    intent: [u8; 32],
    state: CallState,
}

#[derive(Default)]
struct Memory {
    results: VecDeque<Arc<ToolResult>>,
    idem: HashMap<(Uuid, String), IdemRecord>,
    call_ids: HashSet<(Uuid, Uuid)>,
    events: VecDeque<Arc<Event>>,
    last_sequence: u64,
    turns: VecDeque<Turn>,
    /// Where every turn, result and event also goes (SPEC F4).
    journal: Option<Journal>,
}

impl Memory {
    fn turn_mut(&mut self, ws: Uuid, id: Uuid) -> Option<&mut Turn> {
        self.turns.iter_mut().find(|t| t.workspace == ws && t.turn_id == id)
    }

    /// Journals the turn's present state.
    fn journal_turn(&self, turn: &Turn) {
        if let Some(j) = &self.journal {
            let seq = crate::journal::created_seq(&turn.created_at);
            let id = turn.turn_id.to_string();
            j.record(turn.workspace, JournalLayer::Gateway, JournalKind::Turn, id, seq, turn.clone());
        }
    }

    fn push_event(
        &mut self,
        ws: Uuid,
        kind: EventType,
        turn: Uuid,
        call: Option<Uuid>,
        refs: Vec<ObjectRef>,
        payload: Value,
    ) {
        self.last_sequence += 1;
        let payload = bound_payload(payload);
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
        }
        let event = Arc::new(Event {
            sequence: self.last_sequence,
            timestamp: now(),
            kind,
            turn_id: turn,
            call_id: call,
            refs,
            payload,
            workspace: ws,
        });
        if let Some(j) = &self.journal {
            let id = event.sequence.to_string();
            j.record(ws, JournalLayer::Gateway, JournalKind::Event, id, event.sequence, ArcJson(event.clone()));
        }
        self.events.push_back(event);
        // A turn's status changes with these events (a call's count and
        // results are journaled with its result, in `seal`).
        let changes_turn = matches!(
            kind,
            EventType::TurnStarted | EventType::AuthorizationRequired | EventType::TurnCompleted | EventType::Error
        );
        if let Some(t) = self.turns.iter().find(|t| changes_turn && t.workspace == ws && t.turn_id == turn) {
            self.journal_turn(t);
        }
    }

    fn push_result(&mut self, result: Arc<ToolResult>, intent: [u8; 32]) {
        if let Some(j) = &self.journal {
            let (ws, id) = (result.workspace, result.result_id.to_string());
            let stored = StoredResult { result: result.clone(), intent };
            j.record(ws, JournalLayer::Gateway, JournalKind::Result, id, self.last_sequence, stored);
            // The turn's calls and results are read back from its results
            // (see `restore`): no snapshot of the turn per call.
        }
        if self.results.len() == MAX_RESULTS {
            if let Some(old) = self.results.pop_front() {
                // The idempotency record goes with its result (G10 bounds the
                // memory); a later replay of that key runs again, and the
                // store deduplicates durable effects by key (research.prepare).
                self.idem.remove(&(old.workspace, old.idempotency_key.clone()));
                self.call_ids.remove(&(old.workspace, old.call_id));
            }
        }
        self.results.push_back(result);
    }

    fn push_turn(&mut self, turn: Turn) {
        if self.turns.len() == MAX_TURNS {
            let finished = self
                .turns
                .iter()
                .position(|t| matches!(t.status, TurnStatus::Completed | TurnStatus::Failed))
                .unwrap_or(0);
            self.turns.remove(finished);
        }
        self.journal_turn(&turn);
        self.turns.push_back(turn);
    }
}

/// An `Arc`'d value serialised as itself (serde's `rc` feature is off).
struct ArcJson<T>(Arc<T>);

impl<T: serde::Serialize> serde::Serialize for ArcJson<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        T::serialize(&self.0, s)
    }
}

/// A result as the journal keeps it: with the idempotency record it closes.
struct StoredResult {
    result: Arc<ToolResult>,
    intent: [u8; 32],
}

impl serde::Serialize for StoredResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("StoredResult", 3)?;
        st.serialize_field("result", &*self.result)?;
        st.serialize_field("idempotency_key", &self.result.idempotency_key)?;
        st.serialize_field("intent", &hex(&self.intent))?;
        st.end()
    }
}

/// [`StoredResult`] as read back.
#[derive(serde::Deserialize)]
struct ReadResult {
    result: ToolResult,
    idempotency_key: String,
    intent: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// What [`AgentGateway::restore`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Turns read back.
    pub turns: usize,
    /// Of them, those that were running and ended `FAILED` "interrupted by
    /// restart".
    pub interrupted: Vec<Uuid>,
    /// Of them, those still paused on a research request (resumable).
    pub paused: usize,
    /// Results read back (their idempotency records with them).
    pub results: usize,
    /// Events read back.
    pub events: usize,
}

/// The reason a turn the restart interrupted ends with.
pub const INTERRUPTED_BY_RESTART: &str = "interrupted by restart";

/// Cuts a payload to [`MAX_EVENT_PAYLOAD_BYTES`], saying so.
fn bound_payload(payload: Value) -> Value {
    let text = payload.to_string();
    if text.len() <= MAX_EVENT_PAYLOAD_BYTES {
        return payload;
    }
    json!({"truncated": true, "bytes": text.len(), "excerpt": truncate_chars(&text, 512)})
}

pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn bounded(text: &str) -> String {
    truncate_chars(text, MAX_DIAGNOSTIC_CHARS)
}

/// A stage's verdict before the service runs.
struct Refusal {
    status: ResultStatus,
    stage: Stage,
    diagnostic: String,
}

impl Refusal {
    fn denied(stage: Stage, diagnostic: impl Into<String>) -> Self {
        Self { status: ResultStatus::Denied, stage, diagnostic: diagnostic.into() }
    }
}

/// The agent tool gateway of one server instance (G1).
pub struct AgentGateway {
    catalog: Catalog,
    backend: Arc<dyn Backend>,
    /// The runner of the agent's fetches, once the server lends it (F2).
    fetcher: std::sync::OnceLock<Arc<dyn Fetcher>>,
    /// The governor's sandbox runs, once the server lends them (X1).
    sandbox: std::sync::OnceLock<Arc<dyn Sandbox>>,
    /// The operator's folder of installed capability manifests (X2).
    capability_dir: Option<std::path::PathBuf>,
    memory: Mutex<Memory>,
}

impl std::fmt::Debug for AgentGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentGateway").field("catalog", &self.catalog).finish_non_exhaustive()
    }
}

impl AgentGateway {
    /// A gateway over `backend` with the built-in catalog.
    pub fn new(backend: Arc<dyn Backend>) -> Result<Self, crate::catalog::CatalogError> {
        Ok(Self {
            catalog: Catalog::build()?,
            fetcher: std::sync::OnceLock::new(),
            sandbox: std::sync::OnceLock::new(),
            capability_dir: None,
            memory: Mutex::new(Memory::default()),
            backend,
        })
    }

    /// Turns the optional catalog on (SPEC X2; the operator's `[agent]
    /// optional_catalog = true`): the five tools of capabilities join the
    /// catalog (its fingerprint changes with them), and `installed` is the
    /// operator's folder of manifests beside the shipped ones.
    pub fn with_optional_catalog(
        mut self,
        installed: Option<std::path::PathBuf>,
    ) -> Result<Self, crate::catalog::CatalogError> {
        self.catalog = Catalog::build_with(true)?;
        self.capability_dir = installed;
        Ok(self)
    }

    /// Journals every turn, result and event of this gateway in `store` (the
    /// data directory's journal file, SPEC F4) from now on. Without it the
    /// gateway keeps them in memory only (tests, benchmarks of the bare
    /// pipeline).
    pub fn with_journal(self, store: labfy_store::JournalStore) -> Self {
        self.memory().journal = Some(Journal::start(store));
        self
    }

    /// Reads back what the journal kept of `scope`'s workspace (SPEC F4):
    /// the newest turns, results (with their idempotency records: a replay
    /// after the restart answers the same result) and events, within the
    /// memory's bounds; event sequences go on after the last one journaled,
    /// so a UI's cursor stays valid. A turn that was running ends `FAILED`
    /// [`INTERRUPTED_BY_RESTART`] (event `agent.error`); a paused one can
    /// still resume. Call once, at the server's start, before any turn.
    pub fn restore(&self, scope: Scope) -> Result<Restored, GatewayError> {
        let ws = scope.workspace;
        let Some(journal) = self.journal() else { return Ok(Restored::default()) };
        let (turns, results, events, last) = journal.read(|j| {
            let turns = j.read(ws, JournalLayer::Gateway, JournalKind::Turn, MAX_TURNS)?;
            let results = j.read(ws, JournalLayer::Gateway, JournalKind::Result, MAX_RESULTS)?;
            let events = j.read(ws, JournalLayer::Gateway, JournalKind::Event, MAX_EVENTS)?;
            Ok((turns, results, events, j.last_seq(JournalLayer::Gateway, JournalKind::Event)?))
        })?;
        let mut out = Restored::default();
        let mut interrupted = Vec::new();
        {
            let mut mem = self.memory();
            mem.last_sequence = mem.last_sequence.max(u64::try_from(last).unwrap_or(0));
            for rec in events {
                match serde_json::from_str::<Event>(&rec.body) {
                    Ok(mut e) if !mem.events.iter().any(|x| x.sequence == e.sequence) => {
                        e.workspace = ws;
                        if mem.events.len() == MAX_EVENTS {
                            mem.events.pop_front();
                        }
                        mem.events.push_back(Arc::new(e));
                        out.events += 1;
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, id = %rec.id, "a journaled event does not read; skipped"),
                }
            }
            for rec in results {
                let stored = match serde_json::from_str::<ReadResult>(&rec.body) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, id = %rec.id, "a journaled result does not read; skipped");
                        continue;
                    }
                };
                let (Some(intent), mut result) = (unhex(&stored.intent), stored.result) else { continue };
                result.workspace = ws;
                result.idempotency_key = stored.idempotency_key;
                let key = (ws, result.idempotency_key.clone());
                mem.call_ids.insert((ws, result.call_id));
                mem.idem.insert(key, IdemRecord { intent, state: CallState::Done(result.result_id) });
                if mem.results.len() == MAX_RESULTS {
                    mem.results.pop_front();
                }
                mem.results.push_back(Arc::new(result));
                out.results += 1;
            }
            let results: Vec<(Uuid, Uuid)> = mem.results.iter().map(|r| (r.turn_id, r.result_id)).collect();
            for rec in turns {
                let mut turn = match serde_json::from_str::<Turn>(&rec.body) {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::warn!(error = %e, id = %rec.id, "a journaled turn does not read; skipped");
                        continue;
                    }
                };
                if mem.turns.iter().any(|t| t.turn_id == turn.turn_id) {
                    continue;
                }
                turn.workspace = ws;
                // Calls after the turn's last snapshot were journaled with
                // their results only: its results are those, in order.
                for (_, id) in results.iter().filter(|(t, _)| *t == turn.turn_id) {
                    if !turn.result_ids.contains(id) && turn.result_ids.len() <= MAX_CALLS_PER_TURN as usize {
                        turn.result_ids.push(*id);
                    }
                }
                turn.calls = turn.calls.max(u32::try_from(turn.result_ids.len()).unwrap_or(u32::MAX));
                match turn.status {
                    TurnStatus::Running => interrupted.push(turn.turn_id),
                    TurnStatus::AuthorizationRequired => out.paused += 1,
                    TurnStatus::Completed | TurnStatus::Failed => {}
                }
                if mem.turns.len() == MAX_TURNS {
                    mem.turns.pop_front();
                }
                mem.turns.push_back(turn);
                out.turns += 1;
            }
        }
        for id in &interrupted {
            self.fail_turn(scope, *id, INTERRUPTED_BY_RESTART);
        }
        out.interrupted = interrupted;
        Ok(out)
    }

    /// Waits until the journal has written everything recorded so far (a
    /// server's shutdown); false when it did not within its bound.
    pub fn flush_journal(&self) -> bool {
        let journal = self.memory().journal.clone();
        journal.is_some_and(|j| j.flush())
    }

    /// Lends the gateway the runner of the agent's fetches (SPEC F2): the
    /// server's campaign runner. Once; a second call changes nothing and
    /// answers false.
    pub fn set_fetcher(&self, fetcher: Arc<dyn Fetcher>) -> bool {
        self.fetcher.set(fetcher).is_ok()
    }

    /// Whether a runner of the agent's fetches was lent.
    pub fn has_fetcher(&self) -> bool {
        self.fetcher.get().is_some()
    }

    pub(crate) fn fetcher(&self) -> Option<&dyn Fetcher> {
        self.fetcher.get().map(|f| f.as_ref())
    }

    /// Lends the gateway the sandbox runs (SPEC X1): the governor's, asked
    /// by the server. Once; a second call answers false.
    pub fn set_sandbox(&self, sandbox: Arc<dyn Sandbox>) -> bool {
        self.sandbox.set(sandbox).is_ok()
    }

    /// Whether sandbox runs were lent.
    pub fn has_sandbox(&self) -> bool {
        self.sandbox.get().is_some()
    }

    pub(crate) fn sandbox(&self) -> Option<&dyn Sandbox> {
        self.sandbox.get().map(|s| s.as_ref())
    }

    /// The fingerprint of the manifest the workspace's registry holds under
    /// `capability` now (`None`: none, or refused), checked against the
    /// sandbox's allow-list in `env`: what the analyst's approval of an
    /// installation or integration is compared with (SPEC X2).
    pub fn capability_fingerprint(
        &self,
        scope: Scope,
        env: &Environment,
        capability: &str,
    ) -> Result<Option<String>, GatewayError> {
        Ok(crate::provision::registry_fingerprint(&self.tools(), scope.workspace, env, capability)?)
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// What the tools' services reach, for one call.
    pub(crate) fn tools(&self) -> Tools<'_> {
        Tools {
            backend: self.backend(),
            catalog: &self.catalog,
            fetcher: self.fetcher(),
            sandbox: self.sandbox(),
            capability_dir: self.capability_dir.as_deref(),
        }
    }

    /// The journal this gateway writes (SPEC F4): the agent runtime records
    /// its turns and events in it too.
    pub fn journal(&self) -> Option<Journal> {
        self.memory().journal.clone()
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        // Memory holds only bounded transport state; after a panic elsewhere
        // its content is still consistent (every update is one assignment).
        self.memory.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a turn. The demo agent's turns are opened and driven by
    /// [`AgentGateway::run_demo_turn`]; manual turns are driven by `/calls`.
    pub fn open_turn(&self, scope: Scope, req: &NewTurn) -> Result<Turn, GatewayError> {
        let question = req.question.trim();
        if question.is_empty() || req.question.chars().count() > MAX_QUESTION_CHARS {
            return Err(GatewayError::Invalid(format!("question must be 1 to {MAX_QUESTION_CHARS} characters")));
        }
        if req.question.chars().any(|c| c.is_control() && c != '\n') {
            return Err(GatewayError::Invalid("question contains control characters".into()));
        }
        if req.exclusions.len() > labfy_store::MAX_RESEARCH_EXCLUSIONS {
            return Err(GatewayError::Invalid(format!("at most {} exclusions", labfy_store::MAX_RESEARCH_EXCLUSIONS)));
        }
        for e in &req.exclusions {
            let n = e.chars().count();
            if e.trim().is_empty() || n > labfy_store::MAX_EXCLUSION_CHARS || e.chars().any(char::is_control) {
                return Err(GatewayError::Invalid(format!(
                    "each exclusion must be 1 to {} printable characters",
                    labfy_store::MAX_EXCLUSION_CHARS
                )));
            }
        }
        let investigation = match &req.investigation_id {
            Some(text) => {
                let r = ObjectRef::parse_kind(text, RefKind::Investigation)
                    .map_err(|e| GatewayError::Invalid(format!("investigation_id: {e}")))?;
                backend::read(self.backend(), |reads| reads.require_in_workspace(scope.workspace, &r))
                    .map_err(|_| GatewayError::NotFound(format!("{r} does not exist in this workspace")))?;
                r
            }
            None => backend::read(self.backend(), |reads| reads.investigations(scope.workspace))?
                .first()
                .map(|i| i.id)
                .ok_or_else(|| GatewayError::NotFound("this workspace has no investigation".into()))?,
        };
        let stamp = now();
        let turn = Turn {
            turn_id: Uuid::new_v4(),
            mode: req.mode.unwrap_or(TurnMode::Demo),
            status: TurnStatus::Running,
            question: question.to_owned(),
            exclusions: req.exclusions.clone(),
            lang: req.lang,
            investigation_id: investigation,
            calls: 0,
            result_ids: Vec::new(),
            research_request: None,
            summary: None,
            summary_refs: Vec::new(),
            error: None,
            created_at: stamp.clone(),
            updated_at: stamp,
            workspace: scope.workspace,
        };
        let mut mem = self.memory();
        mem.push_event(
            scope.workspace,
            EventType::TurnStarted,
            turn.turn_id,
            None,
            vec![investigation],
            json!({"question": truncate_chars(question, 512), "mode": turn.mode, "exclusions": turn.exclusions}),
        );
        mem.push_turn(turn.clone());
        Ok(turn)
    }

    /// A turn of this workspace.
    pub fn turn(&self, scope: Scope, id: Uuid) -> Result<Turn, GatewayError> {
        self.memory().turn_mut(scope.workspace, id).map(|t| t.clone()).ok_or_else(|| {
            GatewayError::NotFound(format!("no turn {id} in this workspace (finished turns are evicted)"))
        })
    }

    /// A result of this workspace, while it is kept (G10).
    pub fn result(&self, scope: Scope, id: Uuid) -> Result<Arc<ToolResult>, GatewayError> {
        self.memory()
            .results
            .iter()
            .find(|r| r.workspace == scope.workspace && r.result_id == id)
            .cloned()
            .ok_or_else(|| GatewayError::NotFound(format!("no result {id} in this workspace (evicted or never made)")))
    }

    /// Events of this workspace after `cursor` (G9), at most `limit`.
    pub fn events(&self, scope: Scope, cursor: u64, limit: usize) -> EventPage {
        let mem = self.memory();
        let limit = limit.clamp(1, MAX_EVENTS_PER_POLL);
        let oldest = mem.events.front().map_or(mem.last_sequence + 1, |e| e.sequence);
        // A cursor ahead of every sequence handed out cannot be honoured (a
        // client of a server that lost its last events, K2): it is said, and
        // the page starts again from the oldest event kept.
        let ahead = cursor > mem.last_sequence;
        let cursor = if ahead { 0 } else { cursor };
        let missed = ahead || (cursor.saturating_add(1) < oldest && cursor < mem.last_sequence);
        let events: Vec<Event> = mem
            .events
            .iter()
            .filter(|e| e.sequence > cursor && e.workspace == scope.workspace)
            .take(limit)
            .map(|e| Event::clone(e))
            .collect();
        // The cursor moves past other workspaces' events too; they are never
        // shown here, and skipping them keeps polling cheap.
        let next_cursor = match events.last() {
            Some(e) if events.len() == limit => e.sequence,
            _ => mem.last_sequence.max(cursor),
        };
        EventPage { events, next_cursor, missed }
    }

    /// Records an event from a driver (the demo agent's plan, a turn's end).
    pub(crate) fn emit(&self, scope: Scope, kind: EventType, turn: Uuid, refs: Vec<ObjectRef>, payload: Value) {
        self.memory().push_event(scope.workspace, kind, turn, None, refs, payload);
    }

    /// Updates a turn in place.
    pub(crate) fn update_turn(&self, scope: Scope, id: Uuid, f: impl FnOnce(&mut Turn)) {
        if let Some(t) = self.memory().turn_mut(scope.workspace, id) {
            f(t);
            t.updated_at = now();
        }
    }

    /// One call through the whole pipeline (G7, G13). `Err` is a refusal of
    /// the request itself (400/404/409); every tool outcome, refusals by
    /// capability or policy included, is an `Ok` result with its status.
    pub fn call(&self, scope: Scope, env: &Environment, req: CallRequest) -> Result<Arc<ToolResult>, GatewayError> {
        self.call_as(scope, env, req, CallOrigin { actor: "agent:api" })
    }

    /// [`AgentGateway::call`] on behalf of a named agent (`agent:local-model`),
    /// the actor recorded for its durable effects. The same pipeline.
    pub fn call_by(
        &self,
        scope: Scope,
        env: &Environment,
        req: CallRequest,
        actor: &'static str,
    ) -> Result<Arc<ToolResult>, GatewayError> {
        self.call_as(scope, env, req, CallOrigin { actor })
    }

    pub(crate) fn call_as(
        &self,
        scope: Scope,
        env: &Environment,
        req: CallRequest,
        origin: CallOrigin<'_>,
    ) -> Result<Arc<ToolResult>, GatewayError> {
        let started = Instant::now();
        check_envelope(&req)?;
        let intent = intent_of(&req);
        let ws = scope.workspace;
        let key = (ws, req.idempotency_key.clone());
        let calls_so_far = {
            let mut mem = self.memory();
            if let Some(rec) = mem.idem.get(&key) {
                if rec.intent != intent {
                    return Err(GatewayError::Conflict(
                        "this idempotency key was used for a different call (G7)".into(),
                    ));
                }
                return match rec.state {
                    CallState::InFlight => {
                        Err(GatewayError::Conflict("the call with this idempotency key is still in flight".into()))
                    }
                    CallState::Done(id) => mem
                        .results
                        .iter()
                        .find(|r| r.result_id == id)
                        .cloned()
                        .ok_or_else(|| GatewayError::Conflict("the replayed result is gone".into())),
                };
            }
            if mem.call_ids.contains(&(ws, req.call_id)) {
                return Err(GatewayError::Conflict(format!(
                    "call_id {} was already used with another idempotency key",
                    req.call_id
                )));
            }
            let turn = mem
                .turn_mut(ws, req.turn_id)
                .ok_or_else(|| GatewayError::NotFound(format!("no turn {} in this workspace", req.turn_id)))?;
            if turn.status != TurnStatus::Running {
                return Err(GatewayError::Conflict(format!(
                    "turn {} is {}: it takes no calls now",
                    req.turn_id, turn.status
                )));
            }
            turn.calls += 1;
            let calls = turn.calls;
            mem.idem.insert(key.clone(), IdemRecord { intent, state: CallState::InFlight });
            mem.call_ids.insert((ws, req.call_id));
            mem.push_event(
                ws,
                EventType::ToolRequested,
                req.turn_id,
                Some(req.call_id),
                vec![],
                json!({"tool_id": truncate_chars(&req.tool_id, 64), "purpose": req.context.purpose}),
            );
            calls
        };

        let tool = ToolId::from_name(&req.tool_id).and_then(|id| self.catalog.get(id));
        let outcome = match self.check(scope, env, tool, &req, calls_so_far) {
            Err(refusal) => Err(refusal),
            Ok(tool) => {
                self.memory().push_event(
                    ws,
                    EventType::ToolStarted,
                    req.turn_id,
                    Some(req.call_id),
                    vec![],
                    json!({"tool_id": tool.id.as_str()}),
                );
                Ok(self.serve(scope, env, tool, &req, origin))
            }
        };

        let mut result = ToolResult {
            result_id: Uuid::new_v4(),
            call_id: req.call_id,
            turn_id: req.turn_id,
            tool_id: truncate_chars(&req.tool_id, 64),
            status: ResultStatus::Completed,
            stage: Stage::Service,
            object_refs: vec![],
            artifacts: vec![],
            observations: vec![],
            provenance_refs: vec![],
            diagnostic: None,
            risk_level: tool.map(|t| t.risk),
            contract_fingerprint: tool.map(|t| t.fingerprint.clone()),
            created_at: now(),
            elapsed_us: 0,
            workspace: ws,
            idempotency_key: req.idempotency_key.clone(),
        };
        match outcome {
            Err(r) => {
                result.status = r.status;
                result.stage = r.stage;
                result.diagnostic = Some(bounded(&r.diagnostic));
            }
            Ok(o) => {
                result.status = o.status;
                result.object_refs = o.object_refs;
                result.artifacts = o.artifacts;
                result.observations = o.observations;
                result.provenance_refs = o.provenance_refs;
                result.diagnostic = o.diagnostic.map(|d| bounded(&d));
            }
        }
        result.elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        Ok(self.seal(scope, key, result))
    }

    /// Capability, resolution and policy. On success, the tool to serve.
    fn check<'c>(
        &'c self,
        scope: Scope,
        env: &Environment,
        tool: Option<&'c Tool>,
        req: &CallRequest,
        calls_so_far: u32,
    ) -> Result<&'c Tool, Refusal> {
        // 1. Capability: a catalog entry and its published schema (G4).
        let Some(tool) = tool else {
            return Err(Refusal::denied(
                Stage::Capability,
                format!(
                    "unknown tool `{}`: the catalog (tool.catalog) lists every tool",
                    truncate_chars(&req.tool_id, 64)
                ),
            ));
        };
        tool.validate(&req.input).map_err(|d| Refusal::denied(Stage::Capability, d))?;

        // 2. Resolution: every reference exactly, in this workspace (G5).
        let mut refs: Vec<(String, ObjectRef)> = Vec::new();
        for field in &tool.refs {
            let texts: Vec<(String, &str)> = match req.input.get(field.name) {
                None | Some(Value::Null) => vec![],
                Some(Value::String(s)) => vec![(format!("input.{}", field.name), s.as_str())],
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.as_str().map(|s| (format!("input.{}[{i}]", field.name), s)))
                    .collect(),
                Some(_) => vec![],
            };
            for (at, text) in texts {
                let r: ObjectRef =
                    text.parse().map_err(|e| Refusal::denied(Stage::Resolution, format!("{at}: {e}")))?;
                if !field.kinds.contains(&r.kind()) {
                    let allowed: Vec<&str> = field.kinds.iter().map(|k| k.as_str()).collect();
                    return Err(Refusal::denied(
                        Stage::Resolution,
                        format!(
                            "{at}: a `{}:` reference is not accepted here (expected {})",
                            r.kind(),
                            allowed.join(", ")
                        ),
                    ));
                }
                refs.push((at, r));
            }
        }
        if let Some(text) = &req.context.investigation_id {
            let r = ObjectRef::parse_kind(text, RefKind::Investigation)
                .map_err(|e| Refusal::denied(Stage::Resolution, format!("context.investigation_id: {e}")))?;
            refs.push(("context.investigation_id".into(), r));
        }
        for (i, text) in req.object_refs.iter().enumerate() {
            let r: ObjectRef =
                text.parse().map_err(|e| Refusal::denied(Stage::Resolution, format!("object_refs[{i}]: {e}")))?;
            refs.push((format!("object_refs[{i}]"), r));
        }
        let ws = scope.workspace;
        let missing = backend::read(self.backend(), |reads| {
            for (at, r) in &refs {
                match reads.require_in_workspace(ws, r) {
                    Ok(()) => {}
                    Err(StoreError::NotFound(_)) => {
                        return Ok(Some(format!("{at}: {r} does not exist in this workspace")));
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(None)
        })
        .map_err(|e| Refusal {
            status: ResultStatus::Failed,
            stage: Stage::Resolution,
            diagnostic: format!("references could not be checked: {e}"),
        })?;
        if let Some(d) = missing {
            return Err(Refusal::denied(Stage::Resolution, d));
        }

        // 3. Policy: availability, workspace class, budget, grants (G13).
        let availability = tool.availability(scope.class, env);
        if !availability.is_available() {
            return Err(Refusal {
                status: ResultStatus::Unavailable,
                stage: Stage::Policy,
                diagnostic: availability.reason.unwrap_or_default(),
            });
        }
        if calls_so_far > MAX_CALLS_PER_TURN {
            return Err(Refusal::denied(
                Stage::Policy,
                format!("turn budget exhausted: at most {MAX_CALLS_PER_TURN} calls per turn"),
            ));
        }
        if tool.authorization == Authorization::ActiveGrant {
            let grant = refs.iter().find_map(|(_, r)| GrantRef::try_from(*r).ok());
            let url = req.input.get("url").and_then(Value::as_str).unwrap_or_default();
            if let Some(reason) = self.grant_refusal(ws, grant, url) {
                return Err(Refusal {
                    status: ResultStatus::AuthorizationRequired,
                    stage: Stage::Policy,
                    diagnostic: reason,
                });
            }
        }
        Ok(tool)
    }

    /// Why a grant does not cover a network call, or `None` when it does.
    pub(crate) fn grant_refusal(&self, ws: Uuid, grant: Option<GrantRef>, url: &str) -> Option<String> {
        let Some(grant) = grant else {
            return Some("an active human grant is required; prepare the research with research.prepare".into());
        };
        let stored = match backend::read(self.backend(), |r| r.grant(ws, &grant)) {
            Ok(g) => g,
            Err(e) => return Some(format!("{grant} cannot be used: {e}")),
        };
        if !labfy_store::grant_is_active(&stored, chrono::Utc::now()) {
            return Some(format!("{grant} is revoked or expired; a human must grant a new research request"));
        }
        let hosts = &stored.scope.hosts;
        // The one URL rule of a grant (WHATWG parsing, then the scope),
        // `labfy-store`'s, which egress's ledger also applies: a URL whose
        // host cannot be checked (credentials, another scheme, no host) is
        // outside every scope.
        match labfy_store::check_campaign_url(url, hosts) {
            Ok(_) => None,
            Err(labfy_store::StoreError::Invalid(why)) => Some(format!("{grant} does not cover it: {why}")),
            Err(e) => Some(format!("{grant} does not cover it: {e}")),
        }
    }

    fn serve(
        &self,
        scope: Scope,
        env: &Environment,
        tool: &Tool,
        req: &CallRequest,
        origin: CallOrigin<'_>,
    ) -> Outcome {
        let tools = self.tools();
        let served = crate::provision::run(&tools, scope.workspace, env, tool, req, origin)
            .unwrap_or_else(|| services::run(&tools, scope, env, tool, req, origin));
        match served {
            Ok(o) => o,
            Err(e) => {
                let diagnostic = match e.kind() {
                    labfy_core::ErrorKind::Internal | labfy_core::ErrorKind::Storage => {
                        tracing::error!(tool = tool.id.as_str(), error = %e, "tool service failed");
                        "the service failed; see the server log".to_owned()
                    }
                    _ => e.to_string(),
                };
                Outcome::failed(diagnostic)
            }
        }
    }

    /// Bounds, stores and announces a result; ends the call's in-flight state.
    fn seal(&self, scope: Scope, key: (Uuid, String), mut result: ToolResult) -> Arc<ToolResult> {
        let size = serialized_len(&result);
        if size > MAX_RESULT_BYTES {
            result.status = ResultStatus::Failed;
            result.object_refs.clear();
            result.artifacts.clear();
            result.observations.clear();
            result.provenance_refs.clear();
            result.diagnostic = Some(format!(
                "result of {size} bytes refused: the bound is {MAX_RESULT_BYTES} bytes (256 KiB); ask for less (a smaller limit or length)"
            ));
        }
        let result = Arc::new(result);
        let ws = scope.workspace;
        let mut mem = self.memory();
        let intent = mem.idem.get(&key).map_or([0; 32], |rec| rec.intent);
        mem.push_result(result.clone(), intent);
        if let Some(rec) = mem.idem.get_mut(&key) {
            rec.state = CallState::Done(result.result_id);
        }
        let paused = result.status == ResultStatus::AuthorizationRequired
            && result.object_refs.first().is_some_and(waits_on_human);
        if let Some(turn) = mem.turn_mut(ws, result.turn_id) {
            if turn.result_ids.len() < MAX_CALLS_PER_TURN as usize + 1 {
                turn.result_ids.push(result.result_id);
            }
            if paused {
                turn.status = TurnStatus::AuthorizationRequired;
                turn.research_request = result.object_refs.first().copied();
            }
            turn.updated_at = now();
        }
        mem.push_event(
            ws,
            EventType::ToolCompleted,
            result.turn_id,
            Some(result.call_id),
            result.object_refs.iter().take(16).copied().collect(),
            json!({
                "tool_id": result.tool_id, "status": result.status, "result_id": result.result_id,
                "stage": result.stage, "diagnostic": result.diagnostic.as_deref().map(|d| truncate_chars(d, 300)),
                "observations": result.observations.iter().take(4).collect::<Vec<_>>(),
            }),
        );
        if paused {
            let request = result.object_refs.first().copied();
            let message = if request.is_some_and(|r| r.kind() == RefKind::ToolRequest) {
                "Une décision humaine est requise : examinez la demande d'outil et approuvez-la ou refusez-la."
            } else {
                "Une décision humaine est requise : examinez et accordez ou refusez la recherche préparée."
            };
            let key = if request.is_some_and(|r| r.kind() == RefKind::ToolRequest) {
                "tool_request"
            } else {
                "research_request"
            };
            mem.push_event(
                ws,
                EventType::AuthorizationRequired,
                result.turn_id,
                Some(result.call_id),
                result.object_refs.clone(),
                json!({
                    key: request,
                    "risk_level": result.risk_level,
                    "contract_fingerprint": result.contract_fingerprint,
                    "message": message,
                }),
            );
        }
        result
    }
}

/// Bytes `value` takes serialised, counted without building the text.
fn serialized_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // A result that cannot be serialised cannot be sent either.
        Err(_) => usize::MAX,
    }
}

/// The call envelope's own bounds (G7): key, ids, references, purpose, tool id.
fn check_envelope(req: &CallRequest) -> Result<(), GatewayError> {
    let key = &req.idempotency_key;
    if key.trim().is_empty() || key.chars().count() > MAX_IDEMPOTENCY_KEY_CHARS || key.chars().any(char::is_control) {
        return Err(GatewayError::Invalid(format!(
            "idempotency_key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} printable characters"
        )));
    }
    if req.call_id == req.turn_id {
        return Err(GatewayError::Invalid("call_id must differ from turn_id".into()));
    }
    if req.object_refs.len() > MAX_CALL_OBJECT_REFS {
        return Err(GatewayError::Invalid(format!("at most {MAX_CALL_OBJECT_REFS} object_refs")));
    }
    if req.context.purpose.as_ref().is_some_and(|p| p.chars().count() > MAX_PURPOSE_CHARS) {
        return Err(GatewayError::Invalid(format!("context.purpose is at most {MAX_PURPOSE_CHARS} characters")));
    }
    if req.tool_id.len() > 256 {
        return Err(GatewayError::Invalid("tool_id is at most 256 bytes".into()));
    }
    Ok(())
}

/// SHA-256 of everything that makes a call what it is (G7).
fn intent_of(req: &CallRequest) -> [u8; 32] {
    let v = json!({
        "turn_id": req.turn_id, "call_id": req.call_id, "tool_id": req.tool_id, "input": req.input,
        "context": req.context, "object_refs": req.object_refs,
    });
    Sha256::digest(canonical_json(&v).as_bytes()).into()
}
