//! Turns: the deterministic demo agent (G11) and the resume after a human
//! decision. The demo agent is an ordinary gateway client: every step is a
//! call through the same pipeline as any other caller's, with its own
//! idempotency key. Nothing it reads can steer it: it never interprets
//! evidence text, and it has no tool that grants.

use std::sync::Arc;

use labfy_core::ObjectRef;
use labfy_core::bounded::truncate_chars;
use labfy_store::WorkspaceClass;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::backend;
use crate::catalog::Environment;
use crate::driver::{DEMO_ACTOR, Driver, LOCAL_MODEL_ACTOR, artifact, refs_of};
use crate::error::GatewayError;
use crate::gateway::AgentGateway;
use crate::protocol::*;
use crate::services::{CallOrigin, Scope};

/// Search terms the demo agent takes from a question, at most.
pub const DEMO_MAX_TERMS: usize = 4;
/// Evidence items the demo agent opens, at most.
pub const DEMO_OPENED_EVIDENCE: usize = 2;

/// Words too common to search for (French and English).
const STOPWORDS: &[&str] = &[
    "avec", "dans", "pour", "sont", "quel", "quelle", "quels", "quelles", "entre", "cette", "leurs", "nous", "vous",
    "elle", "elles", "plus", "moins", "comme", "mais", "donc", "quand", "sous", "vers", "chez", "depuis", "tout",
    "tous", "toutes", "autre", "autres", "être", "avoir", "fait", "font", "what", "which", "with", "from", "that",
    "this", "where", "there", "about", "have", "does", "their", "they", "into", "when", "were", "will", "would",
];

/// Search terms of a question: words of four characters or more, lower
/// case, without stop words, first occurrences, at most [`DEMO_MAX_TERMS`].
pub fn keywords(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in question.split(|c: char| !c.is_alphanumeric()) {
        let w = w.to_lowercase();
        if w.chars().count() >= 4 && !STOPWORDS.contains(&w.as_str()) && !out.contains(&w) {
            out.push(w);
        }
        if out.len() == DEMO_MAX_TERMS {
            break;
        }
    }
    out
}

/// The queries the demo agent tries, in order: all terms, then fewer, then
/// each term alone; the first one with hits wins.
fn queries(terms: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for n in (1..=terms.len()).rev() {
        out.push(terms[..n].join(" "));
    }
    for t in terms.iter().skip(1) {
        out.push(t.clone());
    }
    out
}

impl AgentGateway {
    /// Runs the deterministic demo agent for a new turn (G11):
    /// USER → AGENT → PLAN → TOOL_REQUEST → TOOL_RESULT →
    /// AUTHORIZATION_REQUIRED. It reads the overview, searches, opens the
    /// best evidence, reads the research state, then prepares a research
    /// request and stops. Returns the turn as it ends (normally
    /// `AUTHORIZATION_REQUIRED`).
    pub fn run_demo_turn(&self, scope: Scope, env: &Environment, req: &NewTurn) -> Result<Turn, GatewayError> {
        let mut new = req.clone();
        new.mode = Some(TurnMode::Demo);
        let turn = self.open_turn(scope, &new)?;
        let mut d = Driver::of(self, scope, env, &turn);
        if self.catalog().has_optional() && crate::demo_capability::asks_for_a_capability(&turn.question) {
            if let Err(reason) = self.demo_capability_steps(&mut d, &turn) {
                self.fail_turn(scope, turn.turn_id, &reason);
            }
            return self.turn(scope, turn.turn_id);
        }
        let terms = keywords(&turn.question);
        let fr = turn.lang == Lang::Fr;
        let searched = if terms.is_empty() {
            (if fr { "(entités principales)" } else { "(top entities)" }).to_owned()
        } else {
            terms.join(", ")
        };
        let mut plan = if fr {
            vec![
                "Lire la vue d'ensemble de l'enquête".to_owned(),
                format!("Chercher dans les pièces : {searched}"),
                "Ouvrir les pièces les plus pertinentes".to_owned(),
                "Consulter l'état des recherches".to_owned(),
                "Préparer une recherche web (décision humaine requise)".to_owned(),
            ]
        } else {
            vec![
                "Read the investigation's overview".to_owned(),
                format!("Search the evidence: {searched}"),
                "Open the most relevant evidence".to_owned(),
                "Check the state of the research".to_owned(),
                "Prepare a web research (a human decides)".to_owned(),
            ]
        };
        d.plan(&plan, 0);
        match self.demo_steps(&mut d, &turn, &terms, &mut plan) {
            Ok(()) => {}
            Err(reason) => self.fail_turn(scope, turn.turn_id, &reason),
        }
        self.turn(scope, turn.turn_id)
    }

    fn demo_steps(&self, d: &mut Driver<'_>, turn: &Turn, terms: &[String], plan: &mut [String]) -> Result<(), String> {
        let inv = turn.investigation_id.to_string();
        let step = |r: Result<Arc<ToolResult>, GatewayError>| -> Result<Arc<ToolResult>, String> {
            let r = r.map_err(|e| e.to_string())?;
            match r.status {
                ResultStatus::Completed | ResultStatus::AuthorizationRequired => Ok(r),
                other => {
                    Err(format!("{} answered {:?}: {}", r.tool_id, other, r.diagnostic.clone().unwrap_or_default()))
                }
            }
        };
        let overview = step(d.call(
            "investigation.get_overview",
            json!({"investigation_id": inv}),
            ("vue d'ensemble", "overview"),
        ))?;
        let top_entity = refs_of(artifact(&overview), "/top_entities", "id").into_iter().next();
        let top_entity_name = artifact(&overview)
            .and_then(|v| v.pointer("/top_entities/0/name"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        d.plan(plan, 1);

        let mut hits = Vec::new();
        let mut tries = queries(terms);
        if let Some(name) = &top_entity_name {
            tries.push(truncate_chars(name, 200));
        }
        for q in tries.into_iter().take(DEMO_MAX_TERMS + 2) {
            if q.split(|c: char| !c.is_alphanumeric()).all(str::is_empty) {
                continue;
            }
            let r = step(d.call(
                "investigation.search",
                json!({"investigation_id": inv, "query": q, "limit": 5}),
                ("recherche", "search"),
            ))?;
            hits = refs_of(artifact(&r), "/hits", "id");
            if !hits.is_empty() {
                break;
            }
        }
        plan[2] = match turn.lang {
            Lang::Fr => format!("Ouvrir les pièces les plus pertinentes ({} trouvées)", hits.len()),
            Lang::En => format!("Open the most relevant evidence ({} found)", hits.len()),
        };
        d.plan(plan, 2);

        for ev in hits.iter().take(DEMO_OPENED_EVIDENCE) {
            step(d.call(
                "evidence.get_summary",
                json!({"evidence_id": ev.to_string()}),
                ("résumé de pièce", "evidence summary"),
            ))?;
        }
        if let Some(first) = hits.first() {
            step(d.call(
                "evidence.read_excerpt",
                json!({"evidence_id": first.to_string(), "offset": 0, "length": 600}),
                ("extrait", "excerpt"),
            ))?;
        }
        d.plan(plan, 3);
        step(d.call(
            "research.get_state",
            json!({"investigation_id": inv}),
            ("état des recherches", "research state"),
        ))?;
        d.plan(plan, 4);

        let mut selection: Vec<ObjectRef> = hits.iter().take(DEMO_OPENED_EVIDENCE).copied().collect();
        if let Some(e) = top_entity {
            if !selection.contains(&e) {
                selection.push(e);
            }
        }
        if selection.is_empty() {
            return Err("nothing to research: the investigation has no evidence and no entity".into());
        }
        let prepared = step(d.call(
            "research.prepare",
            json!({
                "selection_ids": selection.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "question": turn.question,
                "exclusions": turn.exclusions,
            }),
            ("préparer la recherche", "prepare the research"),
        ))?;
        if prepared.status != ResultStatus::AuthorizationRequired {
            return Err(format!("research.prepare answered {:?}", prepared.status));
        }
        d.plan(plan, 5);
        Ok(())
    }

    /// Ends a turn as failed with a bounded reason (its driver gave up:
    /// the runtime's model was unavailable, broke the protocol, ran out of
    /// budget or was cancelled).
    pub fn fail_turn(&self, scope: Scope, turn: Uuid, reason: &str) {
        let reason = truncate_chars(reason, MAX_DIAGNOSTIC_CHARS);
        self.update_turn(scope, turn, |t| {
            t.status = TurnStatus::Failed;
            t.error = Some(reason.clone());
        });
        self.emit(scope, EventType::Error, turn, vec![], json!({"message": reason}));
    }

    /// Resumes a turn paused on a research request (G11, M8): only when a
    /// human has granted it and the grant is still active. Rereads
    /// `research.get_state` through the gateway and publishes the summary.
    /// A refused or void request ends the turn with that outcome.
    pub fn resume(&self, scope: Scope, env: &Environment, turn_id: Uuid) -> Result<Turn, GatewayError> {
        let turn = self.turn(scope, turn_id)?;
        if turn.status != TurnStatus::AuthorizationRequired {
            return Err(GatewayError::Conflict(format!(
                "turn {turn_id} is {}: only a turn waiting for authorization can resume",
                turn.status
            )));
        }
        let request = turn
            .research_request
            .ok_or_else(|| GatewayError::Conflict("the turn waits on no research request".into()))?;
        if request.kind() == labfy_core::RefKind::ToolRequest {
            return self.resume_tool(scope, env, &turn, request);
        }
        let stored = backend::read(self.backend(), |r| r.research_request(scope.workspace, &request))?;
        match stored.status.as_str() {
            "GRANTED" if stored.grant_active => {}
            "REFUSED" | "VOID" => {
                let why = truncate_chars(&stored.decision_note.clone().unwrap_or_default(), 200);
                let refused = stored.status == "REFUSED";
                let summary = match turn.lang {
                    Lang::Fr => format!(
                        "La recherche préparée a été {} ({why}). Aucune requête n'a quitté la machine.",
                        if refused { "refusée par l'analyste" } else { "annulée (contrat modifié)" }
                    ),
                    Lang::En => format!(
                        "The prepared research was {} ({why}). No request left the machine.",
                        if refused { "refused by the analyst" } else { "voided (the contract changed)" }
                    ),
                };
                return self.finish(scope, turn_id, summary, vec![request]);
            }
            "GRANTED" => {
                return Err(GatewayError::Forbidden(format!(
                    "the grant of {request} is revoked or expired: the turn cannot resume"
                )));
            }
            _ => {
                return Err(GatewayError::Forbidden(format!(
                    "{request} has no active grant yet: a human must grant it before the turn resumes"
                )));
            }
        }
        self.claim_resume(scope, turn_id)?;
        let r = self.call_as(
            scope,
            env,
            CallRequest {
                turn_id,
                call_id: Uuid::new_v4(),
                tool_id: "research.get_state".into(),
                input: json!({"investigation_id": turn.investigation_id.to_string(),
                              "research_request_id": request.to_string()}),
                context: CallContext {
                    investigation_id: None,
                    purpose: Some(
                        (if turn.lang == Lang::Fr {
                            "reprise après décision humaine"
                        } else {
                            "resume after a human decision"
                        })
                        .into(),
                    ),
                },
                object_refs: vec![],
                idempotency_key: format!("resume:{turn_id}:{request}"),
            },
            CallOrigin { actor: if turn.mode == TurnMode::LocalModel { LOCAL_MODEL_ACTOR } else { DEMO_ACTOR } },
        );
        // The turn was claimed (Running): any refusal ends it rather than
        // leaving it running with no driver.
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                self.fail_turn(scope, turn_id, &e.to_string());
                return Err(e);
            }
        };
        if r.status != ResultStatus::Completed {
            let reason =
                format!("research.get_state answered {:?}: {}", r.status, r.diagnostic.clone().unwrap_or_default());
            self.fail_turn(scope, turn_id, &reason);
            return self.turn(scope, turn_id);
        }
        let data = artifact(&r).and_then(|v| v.get(0)).cloned().unwrap_or(Value::Null);
        let (summary, refs) = summarize(&data, scope.class, request, turn.lang);
        self.finish(scope, turn_id, summary, refs)
    }

    /// Ends a turn with its summary (bounded) and the objects it is about.
    pub fn complete_turn(
        &self,
        scope: Scope,
        turn_id: Uuid,
        summary: String,
        refs: Vec<ObjectRef>,
    ) -> Result<Turn, GatewayError> {
        self.finish(scope, turn_id, summary, refs)
    }

    /// Claims a turn paused for a human to resume it: of two concurrent
    /// resumes, one runs; the other is a conflict.
    pub(crate) fn claim_resume(&self, scope: Scope, turn_id: Uuid) -> Result<(), GatewayError> {
        let mut claimed = false;
        self.update_turn(scope, turn_id, |t| {
            if t.status == TurnStatus::AuthorizationRequired {
                t.status = TurnStatus::Running;
                claimed = true;
            }
        });
        if claimed { Ok(()) } else { Err(GatewayError::Conflict(format!("turn {turn_id} is already resuming"))) }
    }

    fn finish(&self, scope: Scope, turn_id: Uuid, summary: String, refs: Vec<ObjectRef>) -> Result<Turn, GatewayError> {
        let summary = truncate_chars(&summary, 2_000);
        self.update_turn(scope, turn_id, |t| {
            t.status = TurnStatus::Completed;
            t.summary = Some(summary.clone());
            t.summary_refs = refs.clone();
        });
        self.emit(scope, EventType::TurnCompleted, turn_id, refs, json!({"summary": summary}));
        self.turn(scope, turn_id)
    }
}

/// The final summary of a resumed turn, from the research state the gateway
/// reread, in the analyst's language.
fn summarize(data: &Value, class: WorkspaceClass, request: ObjectRef, lang: Lang) -> (String, Vec<ObjectRef>) {
    let fr = lang == Lang::Fr;
    let campaign = data.get("campaign").filter(|c| !c.is_null());
    let grant = data.pointer("/grant/id").and_then(Value::as_str).unwrap_or("?");
    let mut refs = vec![request];
    if let Ok(g) = grant.parse() {
        refs.push(g);
    }
    let granted = if fr { format!("Recherche accordée ({grant})") } else { format!("Research granted ({grant})") };
    let Some(c) = campaign else {
        let text = if fr {
            format!("{granted}, mais aucune campagne n'est enregistrée.")
        } else {
            format!("{granted}, but no campaign is recorded.")
        };
        return (text, refs);
    };
    let n = |k: &str| c.get(k).and_then(Value::as_i64).unwrap_or(0);
    let status = c.get("status").and_then(Value::as_str).unwrap_or("?");
    let evidence: Vec<ObjectRef> = c
        .get("evidence")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|e| e.as_str()?.parse().ok()).collect())
        .unwrap_or_default();
    if let Some(id) = c.get("id").and_then(Value::as_str).and_then(|s| s.parse().ok()) {
        refs.push(id);
    }
    refs.extend(evidence.iter().copied());
    let question = truncate_chars(data.get("question").and_then(Value::as_str).unwrap_or_default(), 200);
    let (done, failed, total, bytes) = (n("items_done"), n("items_failed"), n("items_total"), n("bytes"));
    let text = match (class, status, fr) {
        (WorkspaceClass::Specimen, "COMPLETED", true) => format!(
            "{granted}. La campagne synthétique (SPECIMEN, aucun réseau) est terminée : {done} page(s) \
             enregistrée(s) comme pièces avec leur provenance, {failed} en échec, {bytes} octets. \
             Question : « {question} ». Les nouvelles pièces sont à vérifier par l'analyste."
        ),
        (WorkspaceClass::Specimen, "COMPLETED", false) => format!(
            "{granted}. The synthetic campaign (SPECIMEN, no network) is complete: {done} page(s) stored as \
             evidence with their provenance, {failed} failed, {bytes} bytes. Question: “{question}”. The \
             analyst should check the new evidence."
        ),
        (_, "COMPLETED", true) => format!(
            "{granted}. La campagne via Tor est terminée : {done} page(s) récupérée(s) et enregistrée(s) comme \
             pièces avec leur provenance, {failed} en échec, {bytes} octets reçus. Question : « {question} ». \
             Les nouvelles pièces viennent du web : données non fiables, à vérifier par l'analyste."
        ),
        (_, "COMPLETED", false) => format!(
            "{granted}. The campaign through Tor is complete: {done} page(s) fetched and stored as evidence \
             with their provenance, {failed} failed, {bytes} bytes received. Question: “{question}”. The new \
             evidence comes from the web: untrusted data, for the analyst to check."
        ),
        (_, "PENDING" | "ADMITTED" | "RUNNING", true) => format!(
            "{granted}. La campagne est en cours ({status}) : {done} page(s) enregistrée(s) sur {total}, \
             {failed} en échec. Reprenez ce tour quand elle sera terminée."
        ),
        (_, "PENDING" | "ADMITTED" | "RUNNING", false) => format!(
            "{granted}. The campaign is under way ({status}): {done} page(s) of {total} stored, {failed} \
             failed. Resume this turn once it has ended."
        ),
        (_, other, _) => {
            let detail = c.get("detail").and_then(Value::as_str).unwrap_or_default();
            let kept = match (done, fr) {
                (0, true) => "Rien n'a été récupéré.".to_owned(),
                (0, false) => "Nothing was fetched.".to_owned(),
                (_, true) => format!("{done} page(s) enregistrée(s) avant l'arrêt, {failed} en échec."),
                (_, false) => format!("{done} page(s) stored before it stopped, {failed} failed."),
            };
            if fr {
                format!("{granted}. La campagne s'est arrêtée ({other}) : {detail}. {kept}")
            } else {
                format!("{granted}. The campaign stopped ({other}): {detail}. {kept}")
            }
        }
    };
    (text, refs)
}

#[cfg(test)]
mod tests {
    use super::{keywords, queries};

    #[test]
    fn keywords_skip_short_and_common_words_and_keep_order() {
        assert_eq!(
            keywords("Quels liens entre Société Durand et le domaine durand-conseil.example ?"),
            ["liens", "société", "durand", "domaine"]
        );
        assert!(keywords("a b c de la").is_empty());
    }

    #[test]
    fn queries_go_from_all_terms_to_single_terms() {
        let t: Vec<String> = ["a1a1", "b2b2", "c3c3"].iter().map(|s| s.to_string()).collect();
        assert_eq!(queries(&t), ["a1a1 b2b2 c3c3", "a1a1 b2b2", "a1a1", "b2b2", "c3c3"]);
    }
}
