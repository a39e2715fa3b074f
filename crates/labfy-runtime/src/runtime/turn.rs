//! One local-model turn's conversation as a state machine (issue 14 item 4;
//! SPEC M5, M8, M9, M10). [`ModelTurn`] holds what the turn has said and
//! seen — the messages, the ids shown, the calls answered, whether the last
//! answer was repaired, whether the model was told to conclude, whether the
//! context overflowed, the last failing call — and its transitions say what
//! to send the model next ([`ModelTurn::round`]), what its answer means
//! ([`ModelTurn::answer`]) and what a tool's result changes
//! ([`ModelTurn::result`]). No I/O: the runtime's driver
//! (`AgentRuntime::run_model`) asks the model and the gateway, records the
//! events and the counters, and follows; each transition is unit-tested
//! here without a model server.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use labfy_core::ObjectRef;
use labfy_core::bounded::truncate_chars;
use labfy_gateway::protocol::{ResultStatus, ToolResult};
use labfy_gateway::{Catalog, GatewayError, Tool};
use serde_json::{Value, json};

use super::{
    MAX_CONTEXT_BYTES, MAX_DETAIL_CHARS, MAX_RESULT_BYTES_TO_MODEL, MAX_ROUNDS, MAX_TOOL_CALLS, RuntimeStatus,
};
use crate::client::{ChatMessage, Role};
use crate::protocol::{self, Action, ActionSchema, ProtocolError, ToolCall};

/// Put in place of the tool result that made the conversation outgrow the
/// model's context window.
pub(super) const CONTEXT_FULL_NOTE: &str = "Résultat omis : il ne tient plus dans le contexte du modèle.";

/// Said once when the turn's tool calls or rounds are spent.
pub(super) const CONCLUDE_MESSAGE: &str = "Le budget d'outils de ce tour est épuisé. Réponds maintenant par un objet \
                                            final fondé sur ce que tu as lu, en recopiant les identifiants utiles.";

/// What the turn has used, as the runtime counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Spent {
    /// Model rounds asked.
    pub(super) rounds: u32,
    /// Tool calls run.
    pub(super) tool_calls: u32,
}

/// What to send the model this round.
#[derive(Debug)]
pub(super) struct Round {
    pub(super) messages: Vec<ChatMessage>,
    pub(super) schema: ActionSchema,
    /// Only `final` is offered: the budget is spent, or the context full.
    pub(super) closing: bool,
}

/// What the model's answer means.
#[derive(Debug)]
pub(super) enum Answer {
    /// Refused (the activity line); the model is told why and asked again.
    Repair { refused: String, code: &'static str },
    /// Refused a second time in a row: the turn ends, no tool run.
    Broken { refused: String, why: String },
    /// The turn's answer and the objects it cites that the turn has seen.
    Final { summary: String, refs: Vec<ObjectRef> },
    /// Run this call.
    Call(ToolCall),
    /// A call the turn's budget no longer allows.
    Spent(String),
}

/// What a tool's result does to the turn.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AfterResult {
    /// The model is shown the result and asked again.
    Continue,
    /// A prepared research request: the turn pauses for a human (M8).
    Paused(ObjectRef),
    /// The same failing call twice in a row: the turn ends (M9).
    Repeated(String),
}

/// A local-model turn's conversation (see the module's documentation).
pub(super) struct ModelTurn<'c> {
    catalog: &'c Catalog,
    offered: Vec<&'c Tool>,
    /// The tools the analyst narrowed the turn to, if they did.
    allowed: Option<Vec<Cow<'static, str>>>,
    known: HashSet<String>,
    messages: Vec<ChatMessage>,
    answered: protocol::Answered,
    repaired: bool,
    told_to_conclude: bool,
    context_full: bool,
    last_failure: Option<(String, String)>,
}

impl<'c> ModelTurn<'c> {
    /// A turn over `investigation` offering `offered` (already narrowed to
    /// `allowed`), opening with `opening` (the system prompt and the
    /// question).
    pub(super) fn new(
        catalog: &'c Catalog,
        offered: Vec<&'c Tool>,
        allowed: Option<Vec<Cow<'static, str>>>,
        investigation: &str,
        opening: Vec<ChatMessage>,
    ) -> Self {
        Self {
            catalog,
            offered,
            allowed,
            known: HashSet::from([investigation.to_owned()]),
            messages: opening,
            answered: protocol::Answered::new(),
            repaired: false,
            told_to_conclude: false,
            context_full: false,
            last_failure: None,
        }
    }

    /// The next round, or why the turn ends before it.
    ///
    /// Reference fields offer exactly the ids shown so far (M9); until the
    /// model has read something through a tool, `final` is not offered,
    /// steering it to ground its answer in the investigation. This is
    /// steering, not protocol: a `final` is a valid action (M5), and one
    /// sent by a server that ignores the schema stands. Once the tool calls
    /// are spent, or on the last round, or once the context overflowed,
    /// only `final` is offered (and said once): the turn ends with an answer
    /// grounded in what was read, not in BUDGET_EXHAUSTED. A tool whose only
    /// argument is one reference is not offered again with an id it has
    /// answered: the same result is already in the conversation (a small
    /// model otherwise repeats its last call until the budget is spent).
    pub(super) fn round(&mut self, spent: Spent) -> Result<Round, (RuntimeStatus, String)> {
        if spent.rounds >= MAX_ROUNDS {
            return Err((RuntimeStatus::BudgetExhausted, format!("{MAX_ROUNDS} model rounds used")));
        }
        if context_bytes(&self.messages) > MAX_CONTEXT_BYTES {
            return Err((RuntimeStatus::BudgetExhausted, format!("the conversation passed {MAX_CONTEXT_BYTES} bytes")));
        }
        let read_first = spent.tool_calls == 0;
        let closing = spent.tool_calls >= MAX_TOOL_CALLS || spent.rounds + 1 >= MAX_ROUNDS || self.context_full;
        if closing && !self.told_to_conclude {
            self.told_to_conclude = true;
            self.messages.push(ChatMessage::user(CONCLUDE_MESSAGE.to_owned()));
        }
        let schema = if closing {
            ActionSchema::final_only()
        } else {
            ActionSchema::for_round(self.offered.iter().copied(), &self.known, &self.answered, !read_first)
        };
        Ok(Round { messages: self.messages.clone(), schema, closing })
    }

    /// The server said the conversation outgrew the model's context window.
    /// Once, when the round was not already closing and the model has read
    /// something, the last result gives way to a note and the model is asked
    /// to conclude from what it read before (true); otherwise the turn ends
    /// (false).
    pub(super) fn context_overflowed(&mut self, closing: bool) -> bool {
        if closing || self.messages.len() <= 2 {
            return false;
        }
        self.context_full = true;
        if let Some(last) = self.messages.last_mut().filter(|m| m.role == Role::User) {
            last.content = CONTEXT_FULL_NOTE.to_owned();
        }
        true
    }

    /// What the model answered (`truncated`: cut by the token limit).
    pub(super) fn answer(&mut self, content: &str, truncated: bool, spent: Spent) -> Answer {
        let parsed = if truncated {
            Err(ProtocolError::Truncated)
        } else {
            protocol::parse_action(content, self.catalog)
                .and_then(|a| protocol::check_refs(&a, &self.known).map(|()| a))
                .and_then(|a| match &a {
                    // A tool this turn does not offer (narrowed by the
                    // analyst): refused here even if the server let it
                    // through the schema.
                    Action::ToolCall(call)
                        if self
                            .allowed
                            .as_ref()
                            .is_some_and(|allowed| !allowed.iter().any(|a| a == call.tool_id().as_str())) =>
                    {
                        Err(ProtocolError::UnknownTool { tool_id: format!("`{}`", call.tool_id().as_str()) })
                    }
                    _ => Ok(a),
                })
        };
        let action = match parsed {
            Ok(a) => a,
            Err(e) => {
                // The code and Labfy's own reason (bounded; model text in it
                // is escaped): what the analyst's activity shows.
                let refused = truncate_chars(&format!("refused: {} — {}", e.code(), e.reason()), MAX_DETAIL_CHARS);
                if self.repaired {
                    let why = format!("the model broke the protocol twice ({}); no tool was run", e.code());
                    return Answer::Broken { refused, why };
                }
                self.repaired = true;
                self.messages.push(ChatMessage::assistant(truncate_chars(content, 2_000)));
                self.messages.push(ChatMessage::user(protocol::repair_message(&e)));
                return Answer::Repair { refused, code: e.code() };
            }
        };
        self.repaired = false;
        self.messages.push(ChatMessage::assistant(action.to_text()));
        match action {
            Action::Final(f) => {
                Answer::Final { refs: refs_in_text(f.text(), &self.known), summary: f.text().to_owned() }
            }
            Action::ToolCall(_) if spent.tool_calls >= MAX_TOOL_CALLS => {
                Answer::Spent(format!("{MAX_TOOL_CALLS} tool calls used"))
            }
            Action::ToolCall(call) => Answer::Call(call),
        }
    }

    /// The gateway's answer to `call`: the ids it showed become citable, a
    /// completed single-reference call is not offered again with that id,
    /// and the model is shown the result as untrusted data. Returns the
    /// activity line (a failure names the gateway's bounded diagnostic) and
    /// what follows.
    pub(super) fn result(
        &mut self,
        call: &ToolCall,
        result: &Result<Arc<ToolResult>, GatewayError>,
    ) -> (String, AfterResult) {
        let tool = call.tool_id().as_str();
        let (shown, failure) = match result {
            Ok(r) => {
                collect_refs(r, &mut self.known);
                let input = self.catalog.get(call.tool_id()).and_then(|t| t.contract.get("input_schema"));
                if r.status == ResultStatus::Completed && input.and_then(protocol::single_ref_field).is_some() {
                    if let Some(first) = call.refs().first() {
                        self.answered.entry(call.tool_id()).or_default().insert(first.value.to_string());
                    }
                }
                (untrusted(tool, r), failure_of(r))
            }
            Err(e) => {
                let d = truncate_chars(&e.to_string(), 300);
                let shown = json!({"trust": "UNTRUSTED_DATA", "tool_id": tool, "status": "REFUSED", "diagnostic": d});
                (shown.to_string(), Some(d))
            }
        };
        let line = truncate_chars(
            &match result {
                Ok(r) if failure.is_some() => {
                    format!("{tool}: {:?} — {}", r.status, r.diagnostic.as_deref().unwrap_or(""))
                }
                Ok(r) => format!("{tool}: {:?}", r.status),
                Err(e) => format!("{tool}: refused — {e}"),
            },
            MAX_DETAIL_CHARS,
        );
        // Only a prepared research request pauses the turn (M8); the
        // gateway pauses its turn on the same condition.
        if let Some(request) = result.as_ref().ok().and_then(|r| paused_on(r)) {
            return (line, AfterResult::Paused(request));
        }
        if let Some(f) = failure {
            let this = (format!("{tool} {}", Value::Object(call.arguments().clone())), f);
            if self.last_failure.as_ref() == Some(&this) {
                return (line, AfterResult::Repeated(format!("the model repeated the same failing call to {tool}")));
            }
            self.last_failure = Some(this);
        } else {
            self.last_failure = None;
        }
        self.messages.push(ChatMessage::user(shown));
        (line, AfterResult::Continue)
    }
}

fn context_bytes(messages: &[ChatMessage]) -> usize {
    messages.iter().map(|m| m.content.len()).sum()
}

/// A tool result as the model sees it (M2): marked untrusted, bounded.
pub(super) fn untrusted(tool: &str, r: &ToolResult) -> String {
    let data: Vec<&Value> = r.artifacts.iter().map(|a| &a.data).collect();
    let mut text = json!({
        "trust": "UNTRUSTED_DATA",
        "tool_id": tool,
        "status": r.status,
        "object_refs": r.object_refs,
        "diagnostic": r.diagnostic,
        "data": data,
    })
    .to_string();
    if text.len() > MAX_RESULT_BYTES_TO_MODEL {
        let mut cut = MAX_RESULT_BYTES_TO_MODEL;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" …[tronqué]");
    }
    text
}

/// The request a result pauses the turn on: `research.prepare`'s (or, with
/// the optional catalog, a tool request's: X2) `AUTHORIZATION_REQUIRED` with
/// the request as its first reference.
fn paused_on(r: &ToolResult) -> Option<ObjectRef> {
    let first = r.object_refs.first().copied()?;
    (r.status == ResultStatus::AuthorizationRequired && labfy_gateway::waits_on_human(&first)).then_some(first)
}

/// Why a result failed, or `None` when it did not. An
/// `AUTHORIZATION_REQUIRED` that is no prepared request (a fetch without a
/// grant) is a failure the model is told about.
fn failure_of(r: &ToolResult) -> Option<String> {
    match r.status {
        ResultStatus::Completed => None,
        ResultStatus::AuthorizationRequired if paused_on(r).is_some() => None,
        other => Some(format!("{other:?}: {}", r.diagnostic.clone().unwrap_or_default())),
    }
}

/// Every `kind:uuid` the model was shown, so it may name them (M9).
fn collect_refs(r: &ToolResult, known: &mut HashSet<String>) {
    for o in &r.object_refs {
        known.insert(o.to_string());
    }
    fn walk(v: &Value, known: &mut HashSet<String>) {
        match v {
            Value::String(s) if s.parse::<ObjectRef>().is_ok() => {
                known.insert(s.clone());
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, known)),
            Value::Object(o) => o.values().for_each(|x| walk(x, known)),
            _ => {}
        }
    }
    for a in &r.artifacts {
        walk(&a.data, known);
    }
}

/// Objects a summary names that the turn has seen (existing objects only, M10).
fn refs_in_text(text: &str, known: &HashSet<String>) -> Vec<ObjectRef> {
    let mut out = Vec::new();
    for r in protocol::cited_refs(text) {
        if known.contains(&r.to_string()) && !out.contains(&r) {
            out.push(r);
        }
    }
    out.truncate(16);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use labfy_core::RefKind;
    use labfy_gateway::ToolId;
    use labfy_gateway::protocol::Stage;
    use uuid::Uuid;

    use super::*;
    use crate::protocol::CONTRACT;

    const INVESTIGATION: &str = "investigation:00000000-0000-7000-8000-0000000000a1";
    const ENTITY: &str = "entity:00000000-0000-7000-8000-0000000000b2";
    const NOBODY: &str = "entity:00000000-0000-7000-8000-0000000000c3";

    fn spent(rounds: u32, tool_calls: u32) -> Spent {
        Spent { rounds, tool_calls }
    }

    fn machine(catalog: &Catalog) -> ModelTurn<'_> {
        let opening = vec![ChatMessage::system("système"), ChatMessage::user("question")];
        ModelTurn::new(catalog, catalog.tools().iter().collect(), None, INVESTIGATION, opening)
    }

    fn overview_call() -> String {
        json!({"contract": CONTRACT, "type": "tool_call", "tool_id": "investigation.get_overview",
               "arguments": {"investigation_id": INVESTIGATION}})
        .to_string()
    }

    fn final_text(text: &str) -> String {
        json!({"contract": CONTRACT, "type": "final", "text": text}).to_string()
    }

    fn call_of(m: &mut ModelTurn<'_>, at: Spent) -> ToolCall {
        match m.answer(&overview_call(), false, at) {
            Answer::Call(call) => call,
            other => panic!("{other:?}"),
        }
    }

    /// A result as the gateway makes it (its fields of its own stay private:
    /// through its wire form).
    fn result(status: ResultStatus, refs: Vec<ObjectRef>, diagnostic: Option<&str>) -> Arc<ToolResult> {
        let wire = json!({
            "result_id": Uuid::new_v4(), "call_id": Uuid::new_v4(), "turn_id": Uuid::new_v4(),
            "tool_id": "investigation.get_overview", "status": status, "stage": Stage::Service,
            "object_refs": refs, "artifacts": [], "observations": [], "provenance_refs": [],
            "diagnostic": diagnostic, "risk_level": null, "contract_fingerprint": null,
            "created_at": "", "elapsed_us": 0,
        });
        Arc::new(serde_json::from_value(wire).unwrap())
    }

    #[test]
    fn a_broken_answer_is_repaired_once_and_a_second_in_a_row_ends_the_turn() {
        let catalog = Catalog::build().unwrap();
        let mut m = machine(&catalog);
        let Answer::Repair { refused, code } = m.answer("pas du JSON", false, spent(1, 0)) else { panic!() };
        assert!(refused.starts_with(&format!("refused: {code} — ")), "{refused}");
        // The model sees what it said and why it was refused.
        let r = m.round(spent(1, 0)).unwrap();
        assert_eq!(r.messages.len(), 4);
        assert_eq!((r.messages[2].role, r.messages[2].content.as_str()), (Role::Assistant, "pas du JSON"));
        // A valid answer in between resets the count…
        assert!(matches!(m.answer(&overview_call(), false, spent(2, 0)), Answer::Call(_)));
        assert!(matches!(m.answer("encore", false, spent(3, 1)), Answer::Repair { .. }));
        // …two in a row end the turn, no tool run.
        let Answer::Broken { why, .. } = m.answer(&overview_call()[..20], false, spent(4, 1)) else { panic!() };
        assert!(why.contains("broke the protocol twice"), "{why}");
        // A cut answer is refused as such, whatever it holds.
        let mut m = machine(&catalog);
        assert!(matches!(m.answer(&overview_call(), true, spent(1, 0)), Answer::Repair { code: "TRUNCATED", .. }));
    }

    #[test]
    fn the_spent_budget_offers_final_alone_said_once_then_ends_the_turn() {
        let catalog = Catalog::build().unwrap();
        let mut m = machine(&catalog);
        // Nothing read yet: tools only, not closing.
        let first = m.round(spent(0, 0)).unwrap();
        assert!(!first.closing);
        assert_ne!(first.schema, ActionSchema::final_only());
        // The last round: final alone, and the model is told so once.
        let last = m.round(spent(MAX_ROUNDS - 1, 1)).unwrap();
        assert!(last.closing);
        assert_eq!(last.schema, ActionSchema::final_only());
        assert_eq!(last.messages.last().unwrap().content, CONCLUDE_MESSAGE);
        let again = m.round(spent(MAX_ROUNDS - 1, 1)).unwrap();
        assert_eq!(again.messages.iter().filter(|x| x.content == CONCLUDE_MESSAGE).count(), 1);
        // The tool calls spent: a call is refused by the budget, not run.
        assert!(m.round(spent(2, MAX_TOOL_CALLS)).unwrap().closing);
        assert!(matches!(m.answer(&overview_call(), false, spent(2, MAX_TOOL_CALLS)), Answer::Spent(_)));
        // No round past the last.
        let (status, why) = m.round(spent(MAX_ROUNDS, 1)).unwrap_err();
        assert_eq!(status, RuntimeStatus::BudgetExhausted);
        assert!(why.contains("model rounds"), "{why}");
    }

    #[test]
    fn the_same_failing_call_twice_ends_the_turn_and_a_prepared_request_pauses_it() {
        let catalog = Catalog::build().unwrap();
        let mut m = machine(&catalog);
        let call = call_of(&mut m, spent(1, 0));
        let failed = Ok(result(ResultStatus::Failed, vec![], Some("base indisponible")));
        let (line, next) = m.result(&call, &failed);
        assert_eq!(next, AfterResult::Continue);
        assert!(line.contains("Failed — base indisponible"), "{line}");
        // The model was shown the failure, as untrusted data.
        let shown = m.round(spent(2, 1)).unwrap().messages.last().unwrap().content.clone();
        assert!(shown.contains("UNTRUSTED_DATA") && shown.contains("base indisponible"), "{shown}");
        let (_, next) = m.result(&call, &failed);
        assert!(matches!(next, AfterResult::Repeated(ref why) if why.contains("investigation.get_overview")));
        // A success in between forgets the failure.
        let mut m = machine(&catalog);
        let call = call_of(&mut m, spent(1, 0));
        assert_eq!(m.result(&call, &failed).1, AfterResult::Continue);
        assert_eq!(m.result(&call, &Ok(result(ResultStatus::Completed, vec![], None))).1, AfterResult::Continue);
        assert_eq!(m.result(&call, &failed).1, AfterResult::Continue);
        // research.prepare's answer: the turn pauses on the request (M8).
        let request = ObjectRef::new(RefKind::ResearchRequest, Uuid::new_v4());
        let prepared = Ok(result(ResultStatus::AuthorizationRequired, vec![request], None));
        assert_eq!(m.result(&call, &prepared).1, AfterResult::Paused(request));
    }

    #[test]
    fn a_final_cites_only_what_the_turn_was_shown() {
        let catalog = Catalog::build().unwrap();
        let mut m = machine(&catalog);
        let call = call_of(&mut m, spent(1, 0));
        let shown: ObjectRef = ENTITY.parse().unwrap();
        m.result(&call, &Ok(result(ResultStatus::Completed, vec![shown], None)));
        let text = format!("Voir {ENTITY} et {INVESTIGATION}.");
        let Answer::Final { summary, refs } = m.answer(&final_text(&text), false, spent(2, 1)) else { panic!() };
        assert_eq!(summary, text);
        assert_eq!(refs, [shown, INVESTIGATION.parse().unwrap()]);
        // An id nobody showed: the answer is refused and repaired (M9).
        let unknown = m.answer(&final_text(&format!("Et {NOBODY}.")), false, spent(3, 1));
        assert!(matches!(unknown, Answer::Repair { .. }), "{unknown:?}");
        // A completed single-reference call is not offered again with that id.
        assert!(m.answered.get(&ToolId::InvestigationGetOverview).is_some_and(|ids| ids.contains(INVESTIGATION)));
    }

    #[test]
    fn a_context_overflow_replaces_the_last_result_once_and_closes_the_turn() {
        let catalog = Catalog::build().unwrap();
        let mut m = machine(&catalog);
        // Nothing read yet: the turn ends.
        assert!(!m.context_overflowed(false));
        let call = call_of(&mut m, spent(1, 0));
        m.result(&call, &Ok(result(ResultStatus::Completed, vec![], None)));
        assert!(m.context_overflowed(false));
        let r = m.round(spent(2, 1)).unwrap();
        assert!(r.closing, "the model concludes from what it read");
        let n = r.messages.len();
        assert_eq!(
            (r.messages[n - 2].content.as_str(), r.messages[n - 1].content.as_str()),
            (CONTEXT_FULL_NOTE, CONCLUDE_MESSAGE)
        );
        // Once: overflowing again while closing ends the turn.
        assert!(!m.context_overflowed(r.closing));
    }
}
