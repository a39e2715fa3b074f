//! The demo agent's path through the optional catalog (SPEC X2) and the
//! resume of a turn paused on a tool request.
//!
//! Asked to count words or find duplicates (and with the optional catalog
//! on), the deterministic demo agent finds a capability
//! (`tool.provision.search`), then takes the first step its standing still
//! needs: propose its installation (pause A), its integration here (pause
//! B), or run it (`capability.execute`) on the investigation's latest
//! evidence with its manifest's first test input. Each pause ends the
//! driving until a human decides; the resume rereads the standing through
//! the gateway and goes on from there — the same steps, in the same turn,
//! so A then B then the run is one turn with two human decisions. It never
//! decides anything itself: it has no tool that can.

use std::sync::Arc;

use labfy_core::ObjectRef;
use labfy_core::bounded::truncate_chars;
use labfy_store::ToolRequestKind;
use serde_json::{Value, json};

use crate::backend;
use crate::catalog::Environment;
use crate::driver::{DEMO_ACTOR, Driver, LOCAL_MODEL_ACTOR, artifact, refs_of};
use crate::error::GatewayError;
use crate::gateway::AgentGateway;
use crate::protocol::*;
use crate::services::{CallOrigin, Scope};

/// Evidence items the demo agent gives a capability, at most.
pub const DEMO_CAPABILITY_EVIDENCE: usize = 3;
/// Characters of a capability's output the demo's summary quotes.
const OUTPUT_QUOTED_CHARS: usize = 400;

/// True when a question asks for what a capability does (counting words,
/// finding duplicates) rather than for web research: the demo agent's one
/// deterministic trigger, case and accents aside.
pub fn asks_for_a_capability(question: &str) -> bool {
    let q = labfy_store::fold_word(question);
    let has = |w: &str| q.contains(w);
    (has("compt") && has("mot"))
        || (has("count") && has("word"))
        || has("doublon")
        || has("duplicate")
        || has("capacite")
        || has("capability")
}

fn step(r: Result<Arc<ToolResult>, GatewayError>) -> Result<Arc<ToolResult>, String> {
    let r = r.map_err(|e| e.to_string())?;
    match r.status {
        ResultStatus::Completed | ResultStatus::AuthorizationRequired => Ok(r),
        other => Err(format!("{} answered {:?}: {}", r.tool_id, other, r.diagnostic.clone().unwrap_or_default())),
    }
}

fn pause_label(kind: ToolRequestKind, fr: bool) -> &'static str {
    match (kind, fr) {
        (ToolRequestKind::Install, true) => "pause A, installation",
        (ToolRequestKind::Install, false) => "pause A, installation",
        (ToolRequestKind::Integrate, true) => "pause B, intégration à l'enquête",
        (ToolRequestKind::Integrate, false) => "pause B, integration in the investigation",
        (ToolRequestKind::Change, true) => "pause C1, essai d'une modification",
        (ToolRequestKind::Change, false) => "pause C1, trial of a change",
        (ToolRequestKind::Promote, true) => "pause C2, promotion au registre",
        (ToolRequestKind::Promote, false) => "pause C2, promotion into the registry",
    }
}

impl AgentGateway {
    /// The demo agent's capability steps, from where the capability stands
    /// now (a new turn, or a resumed one).
    pub(crate) fn demo_capability_steps(&self, d: &mut Driver<'_>, turn: &Turn) -> Result<(), String> {
        let fr = turn.lang == Lang::Fr;
        let inv = turn.investigation_id.to_string();
        let plan: Vec<String> = if fr {
            vec![
                "Chercher une capacité dans le registre local".into(),
                "Faire installer la capacité (pause A : décision humaine)".into(),
                "La faire intégrer à l'enquête (pause B : décision humaine)".into(),
                "L'exécuter dans le bac à sable sur les pièces récentes".into(),
            ]
        } else {
            vec![
                "Find a capability in the local registry".into(),
                "Have it installed (pause A: a human decides)".into(),
                "Have it integrated in the investigation (pause B: a human decides)".into(),
                "Run it in the sandbox on the latest evidence".into(),
            ]
        };
        d.plan(&plan, 0);
        let found = step(d.call(
            "tool.provision.search",
            json!({"investigation_id": inv, "query": truncate_chars(&turn.question, 200), "limit": 3}),
            ("chercher une capacité", "find a capability"),
        ))?;
        let Some(cap) = artifact(&found).and_then(|v| v.pointer("/capabilities/0")).cloned() else {
            return Err("no capability of the registry answers this question (tool.provision.search found none)".into());
        };
        let id = cap["capability_id"].as_str().unwrap_or_default().to_owned();
        let reason = if fr {
            format!("L'analyste demande : « {} »", truncate_chars(&turn.question, 300))
        } else {
            format!("The analyst asks: \"{}\"", truncate_chars(&turn.question, 300))
        };
        d.plan(&plan, 1);
        if cap["installed"] != "yes" {
            let r = step(d.call(
                "tool.provision.propose",
                json!({"investigation_id": inv, "capability_id": id, "reason": reason}),
                ("proposer l'installation", "propose the installation"),
            ))?;
            if r.status == ResultStatus::AuthorizationRequired {
                return Ok(());
            }
        }
        d.plan(&plan, 2);
        if cap["integrated"] != "yes" {
            let r = step(d.call(
                "tool.integration.propose",
                json!({"investigation_id": inv, "capability_id": id, "reason": reason}),
                ("proposer l'intégration", "propose the integration"),
            ))?;
            if r.status == ResultStatus::AuthorizationRequired {
                return Ok(());
            }
        }
        d.plan(&plan, 3);
        let overview = step(d.call(
            "investigation.get_overview",
            json!({"investigation_id": inv}),
            ("vue d'ensemble", "overview"),
        ))?;
        let evidence: Vec<ObjectRef> =
            refs_of(artifact(&overview), "/recent_evidence", "id").into_iter().take(DEMO_CAPABILITY_EVIDENCE).collect();
        let example = cap.get("example_input").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        let ran = step(d.call(
            "capability.execute",
            json!({"investigation_id": inv, "capability_id": id, "input": example,
                   "evidence_ids": evidence.iter().map(ToString::to_string).collect::<Vec<_>>()}),
            ("exécuter la capacité", "run the capability"),
        ))?;
        d.plan(&plan, 4);
        let data = artifact(&ran).cloned().unwrap_or(Value::Null);
        let output = match data.pointer("/output/value") {
            Some(v) => v.to_string(),
            None => data.pointer("/output/text").and_then(Value::as_str).unwrap_or_default().to_owned(),
        };
        let ms = data.pointer("/run/duration_ms").and_then(Value::as_u64).unwrap_or(0);
        let ended = match (data.pointer("/run/end/kind").and_then(Value::as_str), fr) {
            (Some("exited"), true) => format!(
                "code de sortie {}, {ms} ms",
                data.pointer("/run/end/code").and_then(Value::as_i64).unwrap_or(-1)
            ),
            (Some("exited"), false) => {
                format!("exit code {}, {ms} ms", data.pointer("/run/end/code").and_then(Value::as_i64).unwrap_or(-1))
            }
            (_, true) => format!("arrêtée au bout de {ms} ms"),
            (_, false) => format!("stopped after {ms} ms"),
        };
        let quoted = truncate_chars(&output, OUTPUT_QUOTED_CHARS);
        let n = evidence.len();
        let summary = if fr {
            format!(
                "La capacité {id} a tourné dans le bac à sable, sans réseau, sur {n} pièce{} ({ended}). Sortie \
                 (données non fiables, rien n'est enregistré) : {quoted}",
                if n > 1 { "s" } else { "" }
            )
        } else {
            format!(
                "The capability {id} ran in the sandbox, with no network, on {n} evidence item{} ({ended}). Output \
                 (untrusted data, nothing stored): {quoted}",
                if n == 1 { "" } else { "s" }
            )
        };
        self.complete_turn(d.scope, d.turn, summary, evidence).map(|_| ()).map_err(|e| e.to_string())
    }

    /// Resumes a turn paused on a tool request: only once a human decided
    /// it. Approved, the demo agent goes on from where the capability
    /// stands (it may pause again at the next decision); another driver's
    /// turn rereads the standing through `tool.provision.search` and ends
    /// with it. Refused or void, the turn ends saying so.
    pub(crate) fn resume_tool(
        &self,
        scope: Scope,
        env: &Environment,
        turn: &Turn,
        request: ObjectRef,
    ) -> Result<Turn, GatewayError> {
        let stored = backend::read(self.backend(), |r| r.tool_request(scope.workspace, &request))?;
        let fr = turn.lang == Lang::Fr;
        let what = format!("{} {} ({})", stored.capability_id, stored.capability_version, pause_label(stored.kind, fr));
        match stored.status.as_str() {
            "APPROVED" => {}
            "REFUSED" | "VOID" => {
                let why = truncate_chars(&stored.decision_note.clone().unwrap_or_default(), 200);
                let refused = stored.status == "REFUSED";
                let summary = if fr {
                    format!(
                        "La demande {what} a été {} ({why}). Rien n'a été installé, intégré ni exécuté.",
                        if refused { "refusée par l'analyste" } else { "annulée (manifeste ou contrat modifié)" }
                    )
                } else {
                    format!(
                        "The request {what} was {} ({why}). Nothing was installed, integrated or run.",
                        if refused { "refused by the analyst" } else { "voided (the manifest or contract changed)" }
                    )
                };
                return self.complete_turn(scope, turn.turn_id, summary, vec![request]);
            }
            _ => {
                return Err(GatewayError::Forbidden(format!(
                    "{request} has no human decision yet: a human must approve or refuse it before the turn resumes"
                )));
            }
        }
        self.claim_resume(scope, turn.turn_id)?;
        if turn.mode == TurnMode::Demo {
            // Its calls go on after the ones the turn made (their keys are unique).
            let mut d = Driver::of(self, scope, env, turn);
            if let Err(reason) = self.demo_capability_steps(&mut d, turn) {
                self.fail_turn(scope, turn.turn_id, &reason);
            }
            return self.turn(scope, turn.turn_id);
        }
        let actor = if turn.mode == TurnMode::LocalModel { LOCAL_MODEL_ACTOR } else { DEMO_ACTOR };
        let r = self.call_as(
            scope,
            env,
            CallRequest {
                turn_id: turn.turn_id,
                call_id: uuid::Uuid::new_v4(),
                tool_id: "tool.provision.search".into(),
                input: json!({"investigation_id": turn.investigation_id.to_string(),
                              "query": stored.capability_id, "limit": 1}),
                context: CallContext {
                    investigation_id: None,
                    purpose: Some(
                        (if fr { "reprise après décision humaine" } else { "resume after a human decision" }).into(),
                    ),
                },
                object_refs: vec![],
                idempotency_key: format!("resume:{}:{request}", turn.turn_id),
            },
            CallOrigin { actor },
        );
        let r = match r {
            Ok(r) if r.status == ResultStatus::Completed => r,
            Ok(r) => {
                let reason = format!(
                    "tool.provision.search answered {:?}: {}",
                    r.status,
                    r.diagnostic.clone().unwrap_or_default()
                );
                self.fail_turn(scope, turn.turn_id, &reason);
                return self.turn(scope, turn.turn_id);
            }
            Err(e) => {
                self.fail_turn(scope, turn.turn_id, &e.to_string());
                return Err(e);
            }
        };
        let cap = artifact(&r)
            .and_then(|v| v.pointer("/capabilities/0"))
            .filter(|c| c["capability_id"] == stored.capability_id.as_str());
        let yes = |field: &str| cap.is_some_and(|c| c[field] == "yes");
        let standing = match (yes("installed"), yes("integrated"), fr) {
            (_, true, true) => "elle est intégrée à cette enquête (capability.execute)",
            (_, true, false) => "it is integrated in this investigation (capability.execute)",
            (true, false, true) => "elle est installée ; son intégration à l'enquête reste à approuver (pause B)",
            (true, false, false) => "it is installed; its integration in the investigation awaits approval (pause B)",
            (false, false, true) => "elle n'est ni installée ni intégrée ici",
            (false, false, false) => "it is neither installed nor integrated here",
        };
        let summary = if fr {
            format!("L'analyste a approuvé la demande {what}. État relu par la passerelle : {standing}.")
        } else {
            format!("The analyst approved the request {what}. State reread by the gateway: {standing}.")
        };
        self.complete_turn(scope, turn.turn_id, summary, vec![request])
    }
}
