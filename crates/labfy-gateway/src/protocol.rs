//! The wire shapes of AGENT_TOOL_PROTOCOL_V1 (SPEC G6–G10): calls, results,
//! events and turns. Inputs are closed (`deny_unknown_fields`): a `grant`
//! slipped into a call's envelope or context is refused, not ignored.

use std::borrow::Cow;

use labfy_core::{ObjectRef, RiskLevel};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Results kept per server instance, FIFO (G10).
pub const MAX_RESULTS: usize = 64;
/// Largest serialised result, in bytes (G10). A larger one is refused with a
/// diagnostic, never cut silently.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;
/// Events kept per server instance, FIFO (G10).
pub const MAX_EVENTS: usize = 128;
/// Largest serialised event payload, in bytes (G9).
pub const MAX_EVENT_PAYLOAD_BYTES: usize = 4 * 1024;
/// Longest diagnostic of a result, in characters (G8).
pub const MAX_DIAGNOSTIC_CHARS: usize = 1_000;
/// Turns kept per server instance (finished ones are evicted first).
pub const MAX_TURNS: usize = 32;
/// Calls one turn may make (a policy budget).
pub const MAX_CALLS_PER_TURN: u32 = 32;
/// Longest idempotency key, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = labfy_store::MAX_IDEMPOTENCY_KEY_CHARS;
/// Most `object_refs` one call carries.
pub const MAX_CALL_OBJECT_REFS: usize = 16;
/// Longest `context.purpose`, in characters.
pub const MAX_PURPOSE_CHARS: usize = 256;
/// Longest turn question, in characters (the question a research request carries).
pub const MAX_QUESTION_CHARS: usize = labfy_store::MAX_RESEARCH_QUESTION_CHARS;
/// Most events one poll returns.
pub const MAX_EVENTS_PER_POLL: usize = MAX_EVENTS;

/// `POST /api/v1/agent-tools/calls` (G7).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// The turn the call belongs to.
    pub turn_id: Uuid,
    /// Chosen by the caller; distinct from the `result_id` the gateway makes.
    pub call_id: Uuid,
    /// A `tool_id` of the catalog.
    pub tool_id: String,
    /// The tool's input, validated against its published schema.
    pub input: Value,
    /// Where the call comes from (closed).
    pub context: CallContext,
    /// Objects the call is about; each is resolved exactly (G5).
    pub object_refs: Vec<String>,
    /// Same key and same intent: same result, no second effect (G7).
    pub idempotency_key: String,
}

/// The closed context of a call.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallContext {
    /// The investigation the caller is looking at.
    #[serde(default)]
    pub investigation_id: Option<String>,
    /// Why the call is made, in a few words (shown in the activity list).
    #[serde(default)]
    pub purpose: Option<String>,
}

/// Result statuses (G8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResultStatus {
    /// The service did the work.
    Completed,
    /// The service failed (e.g. the object vanished); the diagnostic says why.
    Failed,
    /// Refused by the capability check (unknown tool, schema, references) or
    /// by policy.
    Denied,
    /// Paused for a human decision.
    AuthorizationRequired,
    /// The tool cannot run now (egress not ready, no sandbox).
    Unavailable,
    /// Reserved for a cancellable contract; no V1 tool is cancellable.
    Cancelled,
}

/// The pipeline stage that produced a result (G13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Catalog entry and schema.
    Capability,
    /// Exact resolution of references against the snapshot.
    Resolution,
    /// Workspace class, availability, grants, budgets.
    Policy,
    /// The store's read models and commands.
    Service,
}

/// A piece of a result: a read model's output, marked for trust (M2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Artifact {
    /// What it is (`overview`, `excerpt`, …), as the output contract says.
    pub kind: Cow<'static, str>,
    /// `UNTRUSTED_DATA` when it carries evidence text, else `LABFY`.
    pub trust: Cow<'static, str>,
    /// The read model's JSON.
    pub data: Value,
}

/// Trust marks of artifacts.
pub mod trust {
    /// Text that came from evidence or the web: data, never instructions.
    pub const UNTRUSTED: &str = "UNTRUSTED_DATA";
    /// Labfy's own structured facts (counts, identifiers, statuses).
    pub const LABFY: &str = "LABFY";
}

/// A tool result (G8).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolResult {
    /// Made by the gateway (UUID v4), distinct from `call_id`.
    pub result_id: Uuid,
    /// The caller's call id.
    pub call_id: Uuid,
    /// The turn.
    pub turn_id: Uuid,
    /// The tool asked for (as received, bounded).
    pub tool_id: String,
    /// Outcome.
    pub status: ResultStatus,
    /// The stage that decided it.
    pub stage: Stage,
    /// Objects the result is about.
    pub object_refs: Vec<ObjectRef>,
    /// The read models' outputs.
    pub artifacts: Vec<Artifact>,
    /// Short factual lines.
    pub observations: Vec<String>,
    /// Provenance records involved.
    pub provenance_refs: Vec<ObjectRef>,
    /// Bounded human-readable reason, for anything but `COMPLETED`.
    pub diagnostic: Option<String>,
    /// The tool's static risk level, when the tool exists.
    pub risk_level: Option<RiskLevel>,
    /// The tool's contract fingerprint, when the tool exists.
    pub contract_fingerprint: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// Time spent in the gateway and service, in microseconds.
    pub elapsed_us: u64,
    #[serde(skip)]
    pub(crate) workspace: Uuid,
    /// The call's key, so evicting the result drops its idempotency record.
    #[serde(skip)]
    pub(crate) idempotency_key: String,
}

/// The eight event types (G9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    /// A turn began.
    #[serde(rename = "agent.turn.started")]
    TurnStarted,
    /// The agent's plan changed.
    #[serde(rename = "agent.plan.updated")]
    PlanUpdated,
    /// A call was received.
    #[serde(rename = "agent.tool.requested")]
    ToolRequested,
    /// A call passed capability and policy; its service runs.
    #[serde(rename = "agent.tool.started")]
    ToolStarted,
    /// A call has its result (any status).
    #[serde(rename = "agent.tool.completed")]
    ToolCompleted,
    /// The turn waits for a human decision.
    #[serde(rename = "agent.authorization.required")]
    AuthorizationRequired,
    /// The turn ended with its summary.
    #[serde(rename = "agent.turn.completed")]
    TurnCompleted,
    /// The turn failed.
    #[serde(rename = "agent.error")]
    Error,
}

/// One event (G9).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Strictly increasing per server instance, from 1.
    pub sequence: u64,
    /// RFC 3339.
    pub timestamp: String,
    /// Event type.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// The turn.
    pub turn_id: Uuid,
    /// The call, when the event is about one.
    pub call_id: Option<Uuid>,
    /// Objects involved.
    pub refs: Vec<ObjectRef>,
    /// Bounded payload (at most 4 KiB serialised).
    pub payload: Value,
    #[serde(skip)]
    pub(crate) workspace: Uuid,
}

/// One page of events.
#[derive(Debug, Clone, Serialize)]
pub struct EventPage {
    /// Events with `sequence > cursor`, oldest first.
    pub events: Vec<Event>,
    /// Pass it as the next `cursor`.
    pub next_cursor: u64,
    /// True when events after `cursor` were evicted before this poll.
    pub missed: bool,
}

/// The language the analyst works in (the UI's choice, SPEC U4): the demo
/// agent plans and sums up in it. French unless said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lang {
    /// Français (the default).
    #[default]
    Fr,
    /// English.
    En,
}

/// Who drives a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnMode {
    /// The deterministic demo agent (G11).
    Demo,
    /// Calls posted by an outside client to `/calls`.
    Manual,
    /// The local model, driven by the agent runtime (M1): started only
    /// through `/api/v1/agent-runtime/turns`.
    LocalModel,
}

/// Turn statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TurnStatus {
    /// Calls may be made.
    Running,
    /// Paused on a prepared research request.
    AuthorizationRequired,
    /// Ended with a summary.
    Completed,
    /// Ended with an error.
    Failed,
}

impl TurnStatus {
    /// Every status.
    pub const ALL: [Self; 4] = [Self::Running, Self::AuthorizationRequired, Self::Completed, Self::Failed];

    /// Its name on the wire (`AUTHORIZATION_REQUIRED`), the one a refusal
    /// names too.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::AuthorizationRequired => "AUTHORIZATION_REQUIRED",
            Self::Completed => "COMPLETED",
            Self::Failed => "FAILED",
        }
    }
}

impl std::fmt::Display for TurnStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A turn as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Turn {
    /// The turn.
    pub turn_id: Uuid,
    /// Who drives it.
    pub mode: TurnMode,
    /// Where it stands.
    pub status: TurnStatus,
    /// The analyst's question.
    pub question: String,
    /// Exclusions the analyst asked for.
    pub exclusions: Vec<String>,
    /// The analyst's language: the demo agent's plan and summary are in it.
    pub lang: Lang,
    /// The investigation.
    pub investigation_id: ObjectRef,
    /// Calls made so far.
    pub calls: u32,
    /// Their results, in order.
    pub result_ids: Vec<Uuid>,
    /// The request it paused on: a `research_request:` (G11) or, with the
    /// optional catalog, a `tool_request:` (X2's pauses A, B, C1, C2). The
    /// field keeps its first name for the clients that read it.
    pub research_request: Option<ObjectRef>,
    /// The final summary.
    pub summary: Option<String>,
    /// Objects the summary is about.
    pub summary_refs: Vec<ObjectRef>,
    /// Why it failed.
    pub error: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    #[serde(skip)]
    pub(crate) workspace: Uuid,
}

/// `POST /api/v1/agent-tools/turns`.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTurn {
    /// The analyst's question (1–512 characters).
    pub question: String,
    /// The investigation (defaults to the workspace's first).
    #[serde(default)]
    pub investigation_id: Option<String>,
    /// What the research must leave out (0–8).
    #[serde(default)]
    pub exclusions: Vec<String>,
    /// `demo` (default) or `manual`.
    #[serde(default)]
    pub mode: Option<TurnMode>,
    /// The analyst's language (`fr` by default).
    #[serde(default)]
    pub lang: Lang,
}

/// A turn paused on `r` waits for a human's decision on it: a research
/// request (G11) or a tool request (X2's pauses A, B, C1, C2).
pub fn waits_on_human(r: &labfy_core::ObjectRef) -> bool {
    matches!(r.kind(), labfy_core::RefKind::ResearchRequest | labfy_core::RefKind::ToolRequest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests fail loudly by design

    /// A refusal names a status as the wire does: the two cannot drift.
    #[test]
    fn a_turn_status_is_named_as_on_the_wire() {
        for s in super::TurnStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str(), "{s:?}");
        }
    }
}
