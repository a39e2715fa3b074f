//! `AgentRuntime` for real (SPEC M1, M2, M5–M9): a real SQLite store with a
//! small SPECIMEN, the real gateway over it, and a fake OpenAI-compatible
//! provider on `127.0.0.1:0` answering `POST /v1/chat/completions` from a
//! script and recording every request body, so that each test can say what
//! the model was sent. Nothing of the runtime, the gateway or the client is
//! mocked. States are awaited with a bounded poll, never a fixed sleep.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly by design

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use labfy_core::{ObjectRef, RefKind};
use labfy_gateway::protocol::{EventType, Lang, TurnMode, TurnStatus};
use labfy_gateway::{AgentGateway, DEMO_AGENT_LABEL, DirectBackend, Environment, Scope, ToolId};
use labfy_runtime::client::{Endpoint, LocalModelClient, ModelConfig};
use labfy_runtime::protocol::CONTRACT;
use labfy_runtime::runtime::{
    AgentRuntime, Driver, MAX_QUEUE, MAX_ROUNDS, MAX_TOOL_CALLS, MAX_TURNS, MODEL_ACTOR, RuntimeError, RuntimeStatus,
    RuntimeTurn, StartTurn,
};
use labfy_store::specimen::{self, SpecimenOutcome, SpecimenSpec};
use labfy_store::{
    GrantDecision, GrantOutcome, ReadOnlyStore, ResearchBudget, ResearchRequest, ResearchScope, Store, WorkspaceClass,
};
use labfy_testkit::model::{Reply, ScriptedModel as Provider};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::net::TcpListener;
use uuid::Uuid;

/// How long a test waits for a state that should come at once.
const PATIENCE: Duration = Duration::from_secs(20);
/// SPECIMEN size: small, as in the gateway's tests.
const SPECIMEN_SIZE: u64 = 200;
/// What the analyst asks in most tests.
const QUESTION: &str = "Quels liens entre Tessera Logistique et Léa Martin ?";
/// The start of the runtime's system prompt (it must never reach an event).
const PROMPT_START: &str = "Tu es l'agent d'analyse de Labfy";

// ---------------------------------------------------------------------------
// The fake provider: the shared scripted model server (labfy-testkit).

/// The runtime's client of a provider.
trait ClientOf {
    fn client(&self) -> LocalModelClient;
}

impl ClientOf for Provider {
    fn client(&self) -> LocalModelClient {
        client_at(self.addr())
    }
}

fn client_at(addr: SocketAddr) -> LocalModelClient {
    let endpoint = Endpoint::from_socket_addr(addr).unwrap();
    LocalModelClient::new(ModelConfig::new(endpoint, "fake-model", Duration::from_secs(10)).unwrap())
}

// ---------------------------------------------------------------------------
// What the model says, and what it was sent.

fn tool_call(tool: &str, arguments: Value) -> String {
    json!({"contract": CONTRACT, "type": "tool_call", "tool_id": tool, "arguments": arguments}).to_string()
}

fn final_answer(text: &str) -> String {
    json!({"contract": CONTRACT, "type": "final", "text": text}).to_string()
}

fn messages(request: &Value) -> &[Value] {
    request["messages"].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn last_message(request: &Value) -> (&str, &str) {
    let m = messages(request).last().expect("a request has messages");
    (m["role"].as_str().unwrap(), m["content"].as_str().unwrap())
}

/// The investigation the first user message names (`Enquête : investigation:<uuid>`).
fn shown_investigation(request: &Value) -> String {
    let m = &messages(request)[1];
    assert_eq!(m["role"], "user");
    let text = m["content"].as_str().unwrap();
    let at = text.find("investigation:").expect("the first user message names the investigation");
    text[at..].split(|c: char| c.is_whitespace()).next().unwrap().to_owned()
}

/// The last message, a tool result: it must be a user message holding one
/// JSON object marked `UNTRUSTED_DATA` (M2).
fn tool_result(request: &Value) -> Value {
    let (role, content) = last_message(request);
    assert_eq!(role, "user", "tool results go back as user data");
    let v: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("not one JSON object ({e}): {content}"));
    assert_eq!(v["trust"], "UNTRUSTED_DATA", "{content}");
    v
}

fn result_refs(result: &Value) -> Vec<String> {
    result["object_refs"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_owned()).collect()
}

/// Every request asks for a constrained JSON answer, and never for reasoning.
fn assert_well_formed(request: &Value) {
    assert_eq!(request["model"], "fake-model");
    assert_eq!(request["stream"], false);
    assert_eq!(request["response_format"]["type"], "json_schema", "response_format missing: {request}");
    assert!(request["response_format"]["json_schema"]["schema"]["anyOf"].is_array());
    let system = messages(request)[0]["content"].as_str().unwrap().to_lowercase();
    assert_eq!(messages(request)[0]["role"], "system");
    for word in ["chain-of-thought", "chain of thought", "step by step", "étape par étape", "raisonnement"] {
        assert!(!system.contains(word), "the prompt asks for reasoning ({word})");
    }
}

// ---------------------------------------------------------------------------
// The fixture.

/// A store with a SPECIMEN (seed 1) and an empty REAL workspace, behind a
/// gateway.
struct Fx {
    dir: TempDir,
    gw: Arc<AgentGateway>,
    env: Environment,
    spec: Scope,
    real: Scope,
    inv: ObjectRef,
}

impl Fx {
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let out =
            specimen::generate(&mut store, SpecimenSpec { seed: 1, size: SPECIMEN_SIZE }, &mut |_, _| {}).unwrap();
        let SpecimenOutcome::Created { workspace, investigation, .. } = out else {
            panic!("specimen not created: {out:?}")
        };
        let (real_ws, _) = store.create_real_workspace("Enquête réelle de test", "analyst").unwrap();
        let gw = Arc::new(AgentGateway::new(Arc::new(DirectBackend::new(store))).unwrap());
        Self {
            dir,
            gw,
            env: Environment::offline("test: egress not ready"),
            spec: Scope { workspace: workspace.id(), class: WorkspaceClass::Specimen },
            real: Scope { workspace: real_ws.id(), class: WorkspaceClass::Real },
            inv: investigation,
        }
    }

    fn model(&self, provider: &Provider) -> AgentRuntime {
        AgentRuntime::start(self.gw.clone(), Some(provider.client()))
    }

    fn demo(&self) -> AgentRuntime {
        AgentRuntime::start(self.gw.clone(), None)
    }

    fn reads(&self) -> ReadOnlyStore {
        ReadOnlyStore::open(self.dir.path()).unwrap()
    }

    fn requests(&self) -> Vec<ResearchRequest> {
        self.reads().reads().research_requests(self.spec.workspace, &self.inv, 100).unwrap()
    }

    fn audit_actions(&self) -> Vec<String> {
        self.reads().reads().audit(self.spec.workspace, 1000).unwrap().into_iter().map(|a| a.action).collect()
    }

    /// A human grants `request` (the server's secured decision route).
    fn grant(&self, request: &ObjectRef) -> GrantOutcome {
        let decision = GrantDecision {
            scope: ResearchScope { hosts: vec!["news.example.org".into()] },
            budget: ResearchBudget { max_requests: 10, max_bytes: 1_000_000 },
            expires_in_minutes: 60,
            contract_fingerprints: self.gw.catalog().fingerprints(),
            current_prepare_fingerprint: self.gw.catalog().tool(ToolId::ResearchPrepare).fingerprint.clone(),
            decided_by: "analyst".into(),
            urls: vec![],
        };
        Store::open(self.dir.path()).unwrap().grant_research(self.spec.workspace, request, &decision).unwrap()
    }

    /// The gateway turn a runtime turn drives.
    fn gateway_turn(&self, scope: Scope, t: &RuntimeTurn) -> labfy_gateway::protocol::Turn {
        self.gw.turn(scope, t.gateway_turn_id.expect("a gateway turn was opened")).unwrap()
    }
}

fn start(rt: &AgentRuntime, fx: &Fx, scope: Scope, key: &str, question: &str) -> RuntimeTurn {
    rt.start_turn(
        scope,
        fx.env.clone(),
        StartTurn {
            question: question.into(),
            investigation_id: None,
            exclusions: vec![],
            idempotency_key: key.into(),
            tools: None,
            lang: Lang::Fr,
        },
    )
    .unwrap()
}

/// Polls until `pred` holds (at most [`PATIENCE`]).
async fn wait_for(rt: &AgentRuntime, scope: Scope, id: Uuid, pred: impl Fn(&RuntimeTurn) -> bool) -> RuntimeTurn {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let t = rt.turn(scope, id).unwrap();
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < deadline, "the turn never reached the awaited state: {t:#?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the worker is done with the turn (or it paused).
async fn settled(rt: &AgentRuntime, scope: Scope, id: Uuid) -> RuntimeTurn {
    wait_for(rt, scope, id, |t| !matches!(t.status, RuntimeStatus::Queued | RuntimeStatus::Running)).await
}

/// Event kinds of one turn, in order.
fn event_kinds(rt: &AgentRuntime, scope: Scope, id: Uuid) -> Vec<&'static str> {
    rt.events(scope, 0, 128).events.iter().filter(|e| e.turn_id == id).map(|e| e.kind).collect()
}

/// No event carries the prompt, a tool result or the evidence (M10).
fn assert_events_leak_nothing(rt: &AgentRuntime, scope: Scope) {
    for e in rt.events(scope, 0, 128).events {
        assert!(e.detail.chars().count() <= labfy_runtime::runtime::MAX_DETAIL_CHARS);
        for needle in [PROMPT_START, "UNTRUSTED_DATA", "Question de l'analyste", "accorde-toi"] {
            assert!(!e.detail.contains(needle), "event {} leaks {needle:?}: {}", e.kind, e.detail);
        }
    }
}

// ---------------------------------------------------------------------------
// 1. A tool call, its untrusted result, a final answer.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_goes_through_the_gateway_and_a_final_answer_completes_the_turn() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    assert_eq!(rt.driver(), Driver::LocalModel);
    let status = rt.status().await;
    assert!(status.ready, "{status:?}");
    assert_eq!(status.label, "Agent local · fake-model");

    let queued = start(&rt, &fx, fx.spec, "k1", QUESTION);
    assert_eq!(queued.status, RuntimeStatus::Queued);
    assert_eq!((queued.driver, queued.model.as_deref()), (Driver::LocalModel, Some("fake-model")));

    // The model reads the overview of the investigation it was shown.
    let first = provider.nth(1, PATIENCE).await;
    assert_well_formed(&first);
    let inv = shown_investigation(&first);
    assert_eq!(inv, fx.inv.to_string());
    assert!(messages(&first)[1]["content"].as_str().unwrap().contains(QUESTION));
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": inv})));

    // Its result comes back wrapped as untrusted data.
    let second = provider.nth(2, PATIENCE).await;
    assert_well_formed(&second);
    let ms = messages(&second);
    assert_eq!(ms.len(), 4, "system, question, the model's call, the result");
    assert_eq!(ms[2]["role"], "assistant");
    let replayed: Value = serde_json::from_str(ms[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(replayed["tool_id"], "investigation.get_overview");
    let result = tool_result(&second);
    assert_eq!(
        (result["tool_id"].as_str(), result["status"].as_str()),
        (Some("investigation.get_overview"), Some("COMPLETED"))
    );
    assert!(result_refs(&result).contains(&inv));
    assert!(!result["data"].as_array().unwrap().is_empty(), "the overview's data is shown");
    provider.answer(final_answer("Synthèse : trois pièces relient les deux entités."));

    let done = settled(&rt, fx.spec, queued.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!(done.summary.as_deref(), Some("Synthèse : trois pièces relient les deux entités."));
    assert_eq!((done.rounds, done.tool_calls, done.repairs), (2, 1, 0));
    assert!(done.error.is_none() && done.research_request.is_none());
    assert_eq!(provider.count(), 2);

    // The gateway's turn ran the call and ended with the same summary.
    let gw = fx.gateway_turn(fx.spec, &done);
    assert_eq!(gw.status, TurnStatus::Completed);
    assert_eq!(gw.mode, TurnMode::LocalModel);
    assert_eq!(gw.calls, 1);
    assert_eq!(gw.summary, done.summary);
    let tools: Vec<String> = fx
        .gw
        .events(fx.spec, 0, 128)
        .events
        .iter()
        .filter(|e| e.turn_id == gw.turn_id && e.kind == EventType::ToolCompleted)
        .map(|e| e.payload["tool_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools, ["investigation.get_overview"]);

    let kinds = event_kinds(&rt, fx.spec, done.turn_id);
    assert_eq!(kinds.first(), Some(&"turn.queued"));
    assert_eq!(kinds.last(), Some(&"turn.completed"));
    assert!(kinds.contains(&"tool.call") && kinds.contains(&"tool.result"), "{kinds:?}");
    assert_events_leak_nothing(&rt, fx.spec);
    // Nothing was prepared, nothing granted.
    assert!(fx.requests().is_empty());
}

// ---------------------------------------------------------------------------
// 2. One repair, then MODEL_PROTOCOL_ERROR.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_answer_gets_one_repair_and_the_turn_goes_on() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let good_call = tool_call("investigation.get_overview", json!({"investigation_id": fx.inv.to_string()}));
    let bad: [(&str, Reply); 5] = [
        ("MARKDOWN", Reply::Answer(format!("```json\n{good_call}\n```"))),
        (
            "DUPLICATE_KEY",
            Reply::Answer(format!(r#"{{"contract":"{CONTRACT}","type":"final","text":"a","text":"b"}}"#)),
        ),
        ("UNKNOWN_TOOL", Reply::Answer(tool_call("shell.exec", json!({"cmd": "id"})))),
        ("TEXT_BEFORE_JSON", Reply::Answer(format!("Voici ma réponse : {good_call}"))),
        ("TRUNCATED", Reply::Cut(good_call[..good_call.len() / 2].to_owned())),
    ];
    for (i, (code, reply)) in bad.into_iter().enumerate() {
        let before = provider.count();
        let t = start(&rt, &fx, fx.spec, &format!("repair-{i}"), QUESTION);
        provider.push(reply);
        let repair = provider.nth(before + 2, PATIENCE).await;
        assert_well_formed(&repair);
        let ms = messages(&repair);
        assert_eq!(ms.len(), 4, "{code}: system, question, the bad answer, the repair");
        assert_eq!(ms[2]["role"], "assistant");
        let (role, text) = last_message(&repair);
        assert_eq!(role, "user");
        assert!(text.starts_with("Your previous answer was refused"), "{code}: {text}");
        assert!(text.contains(CONTRACT));
        // Good now: the turn goes on, through the gateway.
        provider.answer(good_call.clone());
        let third = provider.nth(before + 3, PATIENCE).await;
        assert_eq!(tool_result(&third)["status"], "COMPLETED");
        provider.answer(final_answer("Réparé."));
        let done = settled(&rt, fx.spec, t.turn_id).await;
        assert_eq!(done.status, RuntimeStatus::Completed, "{code}: {done:#?}");
        assert_eq!((done.rounds, done.tool_calls, done.repairs), (3, 1, 1), "{code}");
        assert_eq!(fx.gateway_turn(fx.spec, &done).calls, 1, "{code}");
        let details: Vec<String> = rt
            .events(fx.spec, 0, 128)
            .events
            .iter()
            .filter(|e| e.turn_id == t.turn_id && e.kind == "model.repair")
            .map(|e| e.detail.clone())
            .collect();
        assert_eq!(details, [code], "the repair event names the refusal");
    }
    // One repair per bad answer: a later bad answer after a good one is
    // repaired again rather than ending the turn.
    let before = provider.count();
    let t = start(&rt, &fx, fx.spec, "repair-twice", QUESTION);
    for reply in [
        Reply::Answer("pas du JSON".into()),
        Reply::Answer(good_call.clone()),
        Reply::Answer("toujours pas".into()),
        Reply::Answer(final_answer("Fin.")),
    ] {
        provider.push(reply);
    }
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!((done.rounds, done.tool_calls, done.repairs), (4, 1, 2));
    assert_eq!(provider.count(), before + 4);
    assert_events_leak_nothing(&rt, fx.spec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bad_answers_in_a_row_end_the_turn_with_no_tool_run() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let good_call = tool_call("investigation.get_overview", json!({"investigation_id": fx.inv.to_string()}));
    // The second bad answer holds a valid call inside a fence: it must not run.
    provider.answer(tool_call("shell.exec", json!({"cmd": "id"})));
    provider.answer(format!("```json\n{good_call}\n```"));
    let t = start(&rt, &fx, fx.spec, "k", QUESTION);
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::ModelProtocolError, "{done:#?}");
    assert_eq!((done.rounds, done.tool_calls, done.repairs), (2, 0, 1));
    assert!(done.error.as_deref().unwrap().contains("MARKDOWN"), "{:?}", done.error);
    assert!(done.summary.is_none());
    assert_eq!(provider.count(), 2, "no third request");
    let gw = fx.gateway_turn(fx.spec, &done);
    assert_eq!(gw.calls, 0, "no tool was executed");
    assert_eq!(gw.status, TurnStatus::Failed);
    assert_eq!(event_kinds(&rt, fx.spec, t.turn_id).last(), Some(&"turn.failed"));
}

// ---------------------------------------------------------------------------
// 3. research.prepare pauses; only a human grant resumes.

/// Drives a model turn to its research.prepare pause: overview, then
/// prepare on the first evidence the overview showed. Returns the paused
/// turn.
async fn prepare(rt: &AgentRuntime, fx: &Fx, provider: &Provider, key: &str) -> RuntimeTurn {
    let before = provider.count();
    let t = start(rt, fx, fx.spec, key, QUESTION);
    let first = provider.nth(before + 1, PATIENCE).await;
    let inv = shown_investigation(&first);
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": inv})));
    let second = provider.nth(before + 2, PATIENCE).await;
    let evidence =
        result_refs(&tool_result(&second)).into_iter().find(|r| r.starts_with("evidence:")).expect("evidence shown");
    provider.answer(tool_call(
        "research.prepare",
        json!({"selection_ids": [evidence], "question": QUESTION, "exclusions": ["réseaux sociaux"]}),
    ));
    let paused = settled(rt, fx.spec, t.turn_id).await;
    assert_eq!(paused.status, RuntimeStatus::AuthorizationRequired, "{paused:#?}");
    paused
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_prepare_pauses_and_a_granted_resume_asks_the_model_for_a_final_only() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let paused = prepare(&rt, &fx, &provider, "k").await;
    let request = paused.research_request.expect("the request it paused on");
    assert_eq!(request.kind(), RefKind::ResearchRequest);
    assert_eq!((paused.rounds, paused.tool_calls), (2, 2));
    assert!(paused.summary.is_none());
    // The gateway turn paused on the same request.
    let gw = fx.gateway_turn(fx.spec, &paused);
    assert_eq!((gw.status, gw.research_request), (TurnStatus::AuthorizationRequired, Some(request)));
    // Prepared by the model, nothing more: no grant, no campaign.
    let stored = fx.requests();
    assert_eq!(stored.len(), 1);
    assert_eq!((stored[0].id, stored[0].status.as_str()), (request, "PENDING"));
    assert_eq!(stored[0].requested_by, MODEL_ACTOR);
    assert_eq!(stored[0].exclusions, ["réseaux sociaux"]);
    assert!(stored[0].grant.is_none() && stored[0].campaign.is_none());
    assert_eq!(event_kinds(&rt, fx.spec, paused.turn_id).last(), Some(&"turn.paused"));

    // No further model request while paused.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(provider.count(), 2, "the pause asked the model nothing more");

    // A resume without a grant never completes: it is refused, or it goes
    // back to waiting.
    match rt.resume(fx.spec, fx.env.clone(), paused.turn_id) {
        Err(RuntimeError::Forbidden(_)) => {}
        Ok(t) => assert!(matches!(t.status, RuntimeStatus::Queued | RuntimeStatus::AuthorizationRequired)),
        Err(e) => panic!("resume without a grant: {e:?}"),
    }
    let waiting = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(waiting.status, RuntimeStatus::AuthorizationRequired, "{waiting:#?}");
    assert_eq!(waiting.research_request, Some(request));
    assert!(event_kinds(&rt, fx.spec, paused.turn_id).contains(&"turn.resume_refused"));
    assert_eq!(provider.count(), 2);
    assert_eq!(fx.gateway_turn(fx.spec, &waiting).status, TurnStatus::AuthorizationRequired);
    assert!(fx.requests()[0].grant.is_none());
    // Other workspaces cannot resume it.
    assert!(matches!(rt.resume(fx.real, fx.env.clone(), paused.turn_id), Err(RuntimeError::NotFound(_))));

    // A human grants; the SPECIMEN campaign runs synthetically.
    let granted = fx.grant(&request);
    let resumed = rt.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    assert_eq!(resumed.status, RuntimeStatus::Queued);
    let third = provider.nth(3, PATIENCE).await;
    assert_well_formed(&third);
    let branches = third["response_format"]["json_schema"]["schema"]["anyOf"].as_array().unwrap();
    assert_eq!(branches.len(), 1, "only `final` is offered after a grant");
    assert_eq!(branches[0]["properties"]["type"]["const"], "final");
    // What it is shown is the state the gateway reread, as untrusted data.
    let (role, text) = last_message(&third);
    assert_eq!(role, "user");
    assert!(text.contains("UNTRUSTED_DATA") && text.contains(&granted.grant.to_string()), "{text}");
    provider.answer(final_answer("La campagne synthétique a ajouté des pièces à vérifier."));

    let done = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!(done.summary.as_deref(), Some("La campagne synthétique a ajouté des pièces à vérifier."));
    for r in [request, granted.grant.into(), granted.campaign.into()] {
        assert!(done.summary_refs.contains(&r), "summary_refs lacks {r}");
    }
    assert_eq!(provider.count(), 3);
    let gw = fx.gateway_turn(fx.spec, &done);
    assert_eq!(gw.status, TurnStatus::Completed);
    assert_eq!(gw.calls, 3, "the resume reread research.get_state through the gateway");
    // Resumed once only.
    assert!(matches!(rt.resume(fx.spec, fx.env.clone(), done.turn_id), Err(RuntimeError::Conflict(_))));
    // The model never made a grant: exactly the human's one.
    let stored = fx.requests();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].decided_by.as_deref(), Some("analyst"));
    assert_events_leak_nothing(&rt, fx.spec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_final_after_a_resume_leaves_the_gateway_summary() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let paused = prepare(&rt, &fx, &provider, "k").await;
    let request = paused.research_request.unwrap();
    let granted = fx.grant(&request);
    // A tool call after a grant is not allowed: the gateway's summary stands.
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": fx.inv.to_string()})));
    rt.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    let done = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    let summary = done.summary.as_deref().unwrap();
    assert!(summary.contains("SPECIMEN") && summary.contains(&granted.grant.to_string()), "{summary}");
    assert_eq!(provider.count(), 3, "one request, no repair after a resume");
    let gw = fx.gateway_turn(fx.spec, &done);
    assert_eq!((gw.status, gw.calls), (TurnStatus::Completed, 3), "no tool ran after the grant");

    // A summary citing an object the resume never showed: the gateway's stands too.
    let paused = prepare(&rt, &fx, &provider, "k2").await;
    fx.grant(&paused.research_request.unwrap());
    let invented = "evidence:0a000000-0000-4000-8000-0000000000ff";
    provider.answer(final_answer(&format!("Voir {invented}.")));
    rt.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    let done = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    let summary = done.summary.as_deref().unwrap();
    assert!(summary.contains("SPECIMEN") && !summary.contains(invented), "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_ends_the_turn_without_asking_the_model() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let paused = prepare(&rt, &fx, &provider, "k").await;
    let request = paused.research_request.unwrap();
    Store::open(fx.dir.path())
        .unwrap()
        .refuse_research(fx.spec.workspace, &request, "pas de recherche externe", "analyst")
        .unwrap();
    rt.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    let done = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    let summary = done.summary.as_deref().unwrap();
    assert!(summary.contains("refusée") && summary.contains("pas de recherche externe"), "{summary}");
    // The model is not told a refused research was authorized.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(provider.count(), 2, "no model request after a refusal");
}

// ---------------------------------------------------------------------------
// 4. Invented or altered ids.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invented_or_altered_ids_are_refused_before_the_gateway() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let inv = fx.inv.to_string();
    // Altered: the investigation's id with its last digit changed.
    let last = inv.chars().last().unwrap();
    let altered = format!("{}{}", &inv[..inv.len() - 1], if last == '0' { '1' } else { '0' });
    // Invented: an entity nobody showed, of the right form.
    let invented = format!("entity:{}", Uuid::new_v4());

    let t = start(&rt, &fx, fx.spec, "invented", QUESTION);
    provider.answer(tool_call("graph.get_node", json!({"node_id": invented})));
    let repair = provider.nth(2, PATIENCE).await;
    let (_, text) = last_message(&repair);
    assert!(text.contains("UNKNOWN_REFERENCE") || text.contains("never shown"), "{text}");
    provider.answer(final_answer("Je n'ai rien trouvé."));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!((done.tool_calls, done.repairs), (0, 1));
    assert_eq!(fx.gateway_turn(fx.spec, &done).calls, 0, "the invented id never reached the gateway");

    let t = start(&rt, &fx, fx.spec, "altered", QUESTION);
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": altered})));
    provider.answer(tool_call("graph.get_neighbors", json!({"node_id": invented})));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::ModelProtocolError, "{done:#?}");
    assert!(done.error.as_deref().unwrap().contains("UNKNOWN_REFERENCE"), "{:?}", done.error);
    assert_eq!(fx.gateway_turn(fx.spec, &done).calls, 0);
    let refused: Vec<String> = rt
        .events(fx.spec, 0, 128)
        .events
        .iter()
        .filter(|e| e.turn_id == t.turn_id && e.kind == "model.answer")
        .map(|e| e.detail.clone())
        .collect();
    assert_eq!(refused.len(), 2);
    for r in &refused {
        assert!(r.starts_with("refused: UNKNOWN_REFERENCE — ") && r.contains("copy object ids exactly"), "{r}");
    }
}

// ---------------------------------------------------------------------------
// 5. The same failing call twice in a row.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_failing_call_twice_in_a_row_ends_the_turn() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    // No sandbox in this environment (no governor): the gateway answers UNAVAILABLE.
    let failing = tool_call("sandbox.exec", json!({"program": "python3", "code": "print(1)"}));
    let other = tool_call("research.get_state", json!({"investigation_id": fx.inv.to_string()}));

    // Not in a row: another call in between resets the rule.
    let t = start(&rt, &fx, fx.spec, "apart", QUESTION);
    for a in [&failing, &other, &failing] {
        provider.answer(a.clone());
    }
    provider.answer(final_answer("Pas de bac à sable."));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!(done.tool_calls, 3);
    // The failure was given back as its bounded diagnostic only.
    let shown = tool_result(&provider.request(3));
    assert_eq!((shown["tool_id"].as_str(), shown["status"].as_str()), (Some("sandbox.exec"), Some("UNAVAILABLE")));
    assert!(shown["diagnostic"].as_str().is_some_and(|d| !d.is_empty() && d.chars().count() <= 1_000));
    assert!(shown["data"].as_array().is_none_or(Vec::is_empty));
    // The activity names the failure with the same bounded diagnostic.
    let results: Vec<String> = rt
        .events(fx.spec, 0, 128)
        .events
        .iter()
        .filter(|e| e.turn_id == t.turn_id && e.kind == "tool.result")
        .map(|e| e.detail.clone())
        .collect();
    let diagnostic = shown["diagnostic"].as_str().unwrap();
    assert!(results[0].starts_with("sandbox.exec: Unavailable — ") && results[0].contains(diagnostic), "{results:?}");
    assert_eq!(results[1], "research.get_state: Completed");

    let before = provider.count();
    let t = start(&rt, &fx, fx.spec, "in-a-row", QUESTION);
    provider.answer(failing.clone());
    provider.answer(failing.clone());
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Failed, "{done:#?}");
    assert!(done.error.as_deref().unwrap().contains("repeated"), "{:?}", done.error);
    assert_eq!(done.tool_calls, 2);
    assert_eq!(provider.count(), before + 2, "the turn ended instead of asking again");
    assert_eq!(fx.gateway_turn(fx.spec, &done).status, TurnStatus::Failed);
}

// ---------------------------------------------------------------------------
// 6. Budgets.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_and_round_budgets_end_the_turn() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let call = tool_call("research.get_state", json!({"investigation_id": fx.inv.to_string()}));

    // MAX_TOOL_CALLS calls run; the next one is refused by the budget.
    let t = start(&rt, &fx, fx.spec, "calls", QUESTION);
    for _ in 0..=MAX_TOOL_CALLS {
        provider.answer(call.clone());
    }
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::BudgetExhausted, "{done:#?}");
    assert!(done.error.as_deref().unwrap().contains("tool calls"), "{:?}", done.error);
    assert_eq!(done.tool_calls, MAX_TOOL_CALLS);
    assert_eq!(done.rounds, MAX_TOOL_CALLS + 1);
    let gw = fx.gateway_turn(fx.spec, &done);
    assert_eq!((gw.calls, gw.status), (MAX_TOOL_CALLS, TurnStatus::Failed));
    // The last request offered `final` alone and said why, once: a server
    // that ignores the schema still meets the budget above.
    let requests = provider.requests();
    let closing = &requests[requests.len() - 1];
    assert_eq!(offered(closing), ["final"], "{closing:#}");
    let said = closing["messages"].as_array().unwrap();
    assert!(said.last().unwrap()["content"].as_str().unwrap().contains("budget d'outils"), "{said:#?}");
    let before_last = &requests[requests.len() - 2];
    assert!(offered(before_last).iter().any(|t| t != "final"), "{before_last:#}");

    // A model that follows the schema concludes: the turn completes.
    let t = start(&rt, &fx, fx.spec, "calls-then-final", QUESTION);
    for _ in 0..MAX_TOOL_CALLS {
        provider.answer(call.clone());
    }
    provider.answer(final_answer("Synthèse après lecture."));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!((done.tool_calls, done.rounds), (MAX_TOOL_CALLS, MAX_TOOL_CALLS + 1));

    // MAX_ROUNDS rounds (repairs included), then no further request.
    let before = provider.count();
    let t = start(&rt, &fx, fx.spec, "rounds", QUESTION);
    for i in 0..MAX_ROUNDS + 2 {
        provider.answer(if i % 2 == 0 { "pas du JSON".to_owned() } else { call.clone() });
    }
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::BudgetExhausted, "{done:#?}");
    assert!(done.error.as_deref().unwrap().contains("rounds"), "{:?}", done.error);
    assert_eq!(done.rounds, MAX_ROUNDS);
    assert_eq!((done.tool_calls, done.repairs), (MAX_ROUNDS / 2, MAX_ROUNDS / 2));
    assert_eq!(provider.count(), before + MAX_ROUNDS as usize);
    provider.clear_script();
}

/// llama-server's answer when a prompt outgrows its context (build 11434).
const CONTEXT_FULL: Reply = Reply::Status(
    "400 Bad Request",
    r#"{"error":{"code":400,"message":"request (10229 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":10229,"n_ctx":8192}}"#,
);

/// The `tool_id`s a request's schema offers (`final` for the final branch).
fn offered(body: &Value) -> Vec<String> {
    body["response_format"]["json_schema"]["schema"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["properties"]["tool_id"]["const"].as_str().unwrap_or("final").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_context_window_drops_the_last_result_and_the_model_concludes() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let inv = fx.inv.to_string();

    // The second request outgrows the model's context: the result it
    // carried is replaced by a note, and only `final` is offered.
    let t = start(&rt, &fx, fx.spec, "full", QUESTION);
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": inv})));
    provider.push(CONTEXT_FULL);
    provider.answer(final_answer("Synthèse de ce qui a été lu."));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!((done.rounds, done.tool_calls, done.repairs), (3, 1, 0));
    let third = provider.request(2);
    assert_eq!(offered(&third), ["final"], "{third:#}");
    let ms = messages(&third);
    assert!(ms[ms.len() - 2]["content"].as_str().unwrap().starts_with("Résultat omis"), "{ms:#?}");
    assert!(ms[ms.len() - 1]["content"].as_str().unwrap().contains("budget d'outils"), "{ms:#?}");
    assert!(!ms[1..].iter().any(|m| m["content"].as_str().unwrap().contains("UNTRUSTED_DATA")), "{ms:#?}");
    assert!(event_kinds(&rt, fx.spec, t.turn_id).contains(&"model.context"));

    // Still too long once concluding: the turn ends, named, not MODEL_UNAVAILABLE.
    let t = start(&rt, &fx, fx.spec, "full-twice", QUESTION);
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": inv})));
    provider.push(CONTEXT_FULL);
    provider.push(CONTEXT_FULL);
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::BudgetExhausted, "{done:#?}");
    assert!(done.error.as_deref().unwrap().contains("context"), "{:?}", done.error);

    // On the first request (nothing to drop), the turn ends at once.
    let before = provider.count();
    let t = start(&rt, &fx, fx.spec, "full-first", QUESTION);
    provider.push(CONTEXT_FULL);
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::BudgetExhausted, "{done:#?}");
    assert_eq!(provider.count(), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_reference_tool_is_not_offered_again_with_an_id_it_answered() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let inv = fx.inv.to_string();
    let t = start(&rt, &fx, fx.spec, "once", QUESTION);
    let first = provider.nth(1, PATIENCE).await;
    assert!(offered(&first).contains(&"investigation.get_overview".to_owned()));
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": inv})));
    // Its only known investigation is answered: the tool is gone; a tool
    // with other arguments (a search) is still offered.
    let second = provider.nth(2, PATIENCE).await;
    let tools = offered(&second);
    assert!(!tools.contains(&"investigation.get_overview".to_owned()), "{tools:?}");
    assert!(tools.contains(&"investigation.search".to_owned()), "{tools:?}");
    // A node it was shown is offered to graph.get_node, and once read, not again.
    let node = result_refs(&tool_result(&second)).into_iter().find(|r| r.starts_with("entity:")).unwrap();
    provider.answer(tool_call("graph.get_node", json!({"node_id": node})));
    let third = provider.nth(3, PATIENCE).await;
    let node_branch = third["response_format"]["json_schema"]["schema"]["anyOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["properties"]["tool_id"]["const"] == "graph.get_node")
        .cloned()
        .unwrap();
    let ids = node_branch["properties"]["arguments"]["properties"]["node_id"]["enum"].as_array().unwrap();
    assert!(!ids.is_empty() && !ids.contains(&Value::from(node.as_str())), "{ids:?}");
    provider.answer(final_answer("Fin."));
    assert_eq!(settled(&rt, fx.spec, t.turn_id).await.status, RuntimeStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_analyst_can_narrow_a_turns_tools_and_bad_lists_are_refused() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let narrowed = |key: &str, tools: &[&str]| StartTurn {
        question: QUESTION.into(),
        investigation_id: None,
        exclusions: vec![],
        idempotency_key: key.into(),
        tools: Some(tools.iter().map(|t| (*t).to_owned()).collect()),
        lang: Lang::Fr,
    };
    let t = rt
        .start_turn(fx.spec, fx.env.clone(), narrowed("narrow", &["research.prepare", "investigation.get_overview"]))
        .unwrap();
    assert_eq!(t.tools.as_deref(), Some(&["investigation.get_overview".into(), "research.prepare".into()][..]));
    // Only those are offered and listed; research.prepare once ids are known.
    let first = provider.nth(1, PATIENCE).await;
    assert_eq!(offered(&first), ["investigation.get_overview"]);
    let system = messages(&first)[0]["content"].as_str().unwrap();
    assert!(system.contains("- investigation.get_overview :") && !system.contains("- investigation.search :"));
    provider.answer(tool_call("investigation.get_overview", json!({"investigation_id": fx.inv.to_string()})));
    let second = provider.nth(2, PATIENCE).await;
    assert_eq!(offered(&second), ["research.prepare", "final"], "{second:#}");
    // A tool outside the list is refused by the parser, never run.
    provider.answer(tool_call("investigation.search", json!({"investigation_id": fx.inv.to_string(), "query": "x"})));
    provider.answer(final_answer("Fin."));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!((done.status, done.tool_calls, done.repairs), (RuntimeStatus::Completed, 1, 1), "{done:#?}");

    // Same key, other tools: a different turn (M6).
    let e = rt.start_turn(fx.spec, fx.env.clone(), narrowed("narrow", &["investigation.get_overview"])).unwrap_err();
    assert!(matches!(e, RuntimeError::Conflict(_)), "{e:?}");
    for (tools, why) in [
        (&[][..], "1 to 16"),
        (&["investigation.lookup"][..], "not in the catalog"),
        (&["tool.catalog", "tool.catalog"][..], "twice"),
    ] {
        let e = rt.start_turn(fx.spec, fx.env.clone(), narrowed("bad", tools)).unwrap_err();
        assert!(matches!(&e, RuntimeError::Invalid(m) if m.contains(why)), "{tools:?}: {e:?}");
    }
    // The demo agent has no tools to narrow.
    let demo = fx.demo();
    let e = demo.start_turn(fx.spec, fx.env.clone(), narrowed("demo", &["tool.catalog"])).unwrap_err();
    assert!(matches!(&e, RuntimeError::Invalid(m) if m.contains("demo agent")), "{e:?}");
}

// ---------------------------------------------------------------------------
// 7. Cancel.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_in_flight_ends_the_turn_and_the_late_answer_is_ignored() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let delay = Duration::from_secs(2);
    provider.push(Reply::Late(
        delay,
        tool_call(
            "research.prepare",
            json!({"selection_ids": [fx.inv.to_string()], "question": "x", "exclusions": []}),
        ),
    ));
    let t = start(&rt, &fx, fx.spec, "k", QUESTION);
    provider.nth(1, PATIENCE).await;
    wait_for(&rt, fx.spec, t.turn_id, |t| t.status == RuntimeStatus::Running).await;

    let cancelled = rt.cancel(fx.spec, t.turn_id).unwrap();
    assert_eq!(cancelled.status, RuntimeStatus::Cancelled);
    // The worker is free at once: a next turn runs while the late answer is
    // still on its way.
    let next = start(&rt, &fx, fx.spec, "next", QUESTION);
    provider.answer(final_answer("Suivant."));
    let next = settled(&rt, fx.spec, next.turn_id).await;
    assert_eq!(next.status, RuntimeStatus::Completed, "{next:#?}");
    assert_eq!(provider.late_done(), 0, "the next turn did not wait for the late answer");

    // Once the late answer has come, nothing came of it.
    let deadline = Instant::now() + PATIENCE;
    while provider.late_done() == 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = rt.turn(fx.spec, t.turn_id).unwrap();
    assert_eq!(t.status, RuntimeStatus::Cancelled);
    assert_eq!((t.tool_calls, t.research_request), (0, None));
    let gw = fx.gateway_turn(fx.spec, &t);
    assert_eq!((gw.status, gw.calls), (TurnStatus::Failed, 0), "no tool ran after the cancel");
    assert!(fx.requests().is_empty(), "the late research.prepare was not executed");
    let kinds = event_kinds(&rt, fx.spec, t.turn_id);
    assert!(!kinds.contains(&"tool.call"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "turn.cancelled").count(), 1, "{kinds:?}");
    assert!(!kinds.contains(&"turn.completed") && !kinds.contains(&"turn.failed"), "{kinds:?}");

    // A finished turn cannot be cancelled, nor cancelled twice.
    assert!(matches!(rt.cancel(fx.spec, next.turn_id), Err(RuntimeError::Conflict(_))));
    assert!(matches!(rt.cancel(fx.spec, t.turn_id), Err(RuntimeError::Conflict(_))));
    assert!(matches!(rt.cancel(fx.spec, Uuid::new_v4()), Err(RuntimeError::NotFound(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_of_a_queued_or_paused_turn_blocks_every_later_effect() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    // A paused turn, cancelled: its grant does not bring it back.
    let paused = prepare(&rt, &fx, &provider, "paused").await;
    let cancelled = rt.cancel(fx.spec, paused.turn_id).unwrap();
    assert_eq!(cancelled.status, RuntimeStatus::Cancelled);
    fx.grant(&paused.research_request.unwrap());
    assert!(matches!(rt.resume(fx.spec, fx.env.clone(), paused.turn_id), Err(RuntimeError::Conflict(_))));
    assert_eq!(fx.gateway_turn(fx.spec, &cancelled).status, TurnStatus::Failed);

    // A queued turn, cancelled behind a running one: it never runs.
    let before = provider.count();
    provider.push(Reply::Late(Duration::from_millis(300), final_answer("Premier.")));
    let first = start(&rt, &fx, fx.spec, "first", QUESTION);
    let second = start(&rt, &fx, fx.spec, "second", QUESTION);
    assert_eq!(second.status, RuntimeStatus::Queued);
    rt.cancel(fx.spec, second.turn_id).unwrap();
    let first = settled(&rt, fx.spec, first.turn_id).await;
    assert_eq!(first.status, RuntimeStatus::Completed, "{first:#?}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = rt.turn(fx.spec, second.turn_id).unwrap();
    assert_eq!((second.status, second.gateway_turn_id, second.rounds), (RuntimeStatus::Cancelled, None, 0));
    assert_eq!(provider.count(), before + 1, "the cancelled turn asked nothing");
    assert_eq!(rt.status().await.queued, 0);
}

// ---------------------------------------------------------------------------
// 8. The endpoint fails: MODEL_UNAVAILABLE, never the demo agent.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_or_busy_endpoint_is_model_unavailable_never_the_demo() {
    let fx = Fx::new();
    // A port nobody listens on any more.
    let gone = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap()
    };
    let closed_rt = AgentRuntime::start(fx.gw.clone(), Some(client_at(gone)));
    let status = closed_rt.status().await;
    assert!(!status.ready && status.detail.is_some(), "{status:?}");
    assert!(status.label.contains("fake-model") && status.label.contains("indisponible"), "{}", status.label);
    assert_ne!(status.label, DEMO_AGENT_LABEL);
    let t = start(&closed_rt, &fx, fx.spec, "gone", QUESTION);
    let done = settled(&closed_rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::ModelUnavailable, "{done:#?}");
    assert_eq!(done.driver, Driver::LocalModel);

    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let mut turns = vec![done];
    for (key, reply) in [("busy", Reply::Busy), ("close", Reply::Close)] {
        provider.push(reply);
        let t = start(&rt, &fx, fx.spec, key, QUESTION);
        let done = settled(&rt, fx.spec, t.turn_id).await;
        assert_eq!(done.status, RuntimeStatus::ModelUnavailable, "{key}: {done:#?}");
        assert!(done.error.as_deref().is_some_and(|e| !e.is_empty() && e.chars().count() <= 300), "{key}");
        turns.push(done);
    }
    for t in &turns {
        assert!(t.summary.is_none() && t.tool_calls == 0);
        let gw = fx.gateway_turn(fx.spec, t);
        assert_eq!((gw.mode, gw.status, gw.calls), (TurnMode::LocalModel, TurnStatus::Failed, 0));
    }
    // The demo agent never stepped in: no plan, no prepared research.
    assert!(fx.gw.events(fx.spec, 0, 128).events.iter().all(|e| e.kind != EventType::PlanUpdated));
    assert!(fx.requests().is_empty());
}

// ---------------------------------------------------------------------------
// 9. Idempotent start, bounds, isolation.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_is_idempotent_per_workspace() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    provider.answer(final_answer("Une."));
    let a = start(&rt, &fx, fx.spec, "same-key", QUESTION);
    let again = start(&rt, &fx, fx.spec, "same-key", QUESTION);
    assert_eq!(again.turn_id, a.turn_id);
    let other = rt.start_turn(
        fx.spec,
        fx.env.clone(),
        StartTurn {
            question: "Une autre question ?".into(),
            investigation_id: None,
            exclusions: vec![],
            idempotency_key: "same-key".into(),
            tools: None,
            lang: Lang::Fr,
        },
    );
    assert!(matches!(other, Err(RuntimeError::Conflict(_))), "{other:?}");
    let done = settled(&rt, fx.spec, a.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed);
    // Still the same turn once finished; one model request in all.
    assert_eq!(start(&rt, &fx, fx.spec, "same-key", QUESTION).turn_id, a.turn_id);
    assert_eq!(provider.count(), 1);
    // Another workspace's key space is its own.
    provider.answer(final_answer("Deux."));
    let b = start(&rt, &fx, fx.real, "same-key", QUESTION);
    assert_ne!(b.turn_id, a.turn_id);
    settled(&rt, fx.real, b.turn_id).await;

    // Bad input is refused at once.
    for (question, key) in [("", "k"), ("q", ""), ("q", &"k".repeat(129)), (&"q".repeat(513) as &str, "k")] {
        let r = rt.start_turn(
            fx.spec,
            fx.env.clone(),
            StartTurn {
                question: question.into(),
                investigation_id: None,
                exclusions: vec![],
                idempotency_key: key.into(),
                tools: None,
                lang: Lang::Fr,
            },
        );
        assert!(matches!(r, Err(RuntimeError::Invalid(_))), "{question:?} {key:?}: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_is_bounded_at_the_edge() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    provider.push(Reply::Late(Duration::from_secs(3), final_answer("Lent.")));
    let running = start(&rt, &fx, fx.spec, "running", QUESTION);
    provider.nth(1, PATIENCE).await;
    wait_for(&rt, fx.spec, running.turn_id, |t| t.status == RuntimeStatus::Running).await;
    let queued: Vec<RuntimeTurn> =
        (0..MAX_QUEUE).map(|i| start(&rt, &fx, fx.spec, &format!("q{i}"), QUESTION)).collect();
    assert!(queued.iter().all(|t| t.status == RuntimeStatus::Queued));
    assert_eq!(rt.status().await.queued, MAX_QUEUE);
    let full = rt.start_turn(
        fx.spec,
        fx.env.clone(),
        StartTurn {
            question: QUESTION.into(),
            investigation_id: None,
            exclusions: vec![],
            idempotency_key: "over".into(),
            tools: None,
            lang: Lang::Fr,
        },
    );
    assert!(matches!(full, Err(RuntimeError::Conflict(_))), "{full:?}");
    // A refused start leaves no turn behind: the key is free for a retry.
    assert_eq!(rt.events(fx.spec, 0, 128).events.iter().filter(|e| e.kind == "turn.queued").count(), MAX_QUEUE + 1);
    for t in queued.iter().chain([&running]) {
        rt.cancel(fx.spec, t.turn_id).unwrap();
    }
    let retry = start(&rt, &fx, fx.spec, "over", QUESTION);
    provider.answer(final_answer("Enfin."));
    let retry = settled(&rt, fx.spec, retry.turn_id).await;
    assert_eq!(retry.status, RuntimeStatus::Completed, "{retry:#?}");
    assert_eq!(rt.status().await.queued, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_table_is_bounded_at_the_edge_and_evicts_finished_turns_only() {
    let fx = Fx::new();
    let rt = fx.demo();
    // MAX_TURNS live turns, each paused on its research request.
    let mut live = Vec::new();
    for i in 0..MAX_TURNS {
        let t = start(&rt, &fx, fx.spec, &format!("t{i}"), QUESTION);
        let t = settled(&rt, fx.spec, t.turn_id).await;
        assert_eq!(t.status, RuntimeStatus::AuthorizationRequired, "{t:#?}");
        live.push(t);
    }
    let over = rt.start_turn(
        fx.spec,
        fx.env.clone(),
        StartTurn {
            question: QUESTION.into(),
            investigation_id: None,
            exclusions: vec![],
            idempotency_key: "over".into(),
            tools: None,
            lang: Lang::Fr,
        },
    );
    assert!(matches!(over, Err(RuntimeError::Conflict(_))), "{over:?}");
    // One finishes: the next start evicts it, and only it.
    rt.cancel(fx.spec, live[5].turn_id).unwrap();
    let next = start(&rt, &fx, fx.spec, "over", QUESTION);
    assert!(matches!(rt.turn(fx.spec, live[5].turn_id), Err(RuntimeError::NotFound(_))));
    for (i, t) in live.iter().enumerate().filter(|(i, _)| *i != 5) {
        assert_eq!(rt.turn(fx.spec, t.turn_id).unwrap().status, RuntimeStatus::AuthorizationRequired, "turn {i}");
    }
    assert_eq!(settled(&rt, fx.spec, next.turn_id).await.status, RuntimeStatus::AuthorizationRequired);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_are_isolated() {
    let fx = Fx::new();
    let rt = fx.demo();
    let spec = start(&rt, &fx, fx.spec, "k", QUESTION);
    let spec = settled(&rt, fx.spec, spec.turn_id).await;
    assert_eq!(spec.status, RuntimeStatus::AuthorizationRequired);
    // The REAL workspace has nothing to research: its demo turn fails.
    let real = start(&rt, &fx, fx.real, "k", QUESTION);
    let real = settled(&rt, fx.real, real.turn_id).await;
    assert_eq!(real.status, RuntimeStatus::Failed, "{real:#?}");

    assert!(matches!(rt.turn(fx.real, spec.turn_id), Err(RuntimeError::NotFound(_))));
    assert!(matches!(rt.cancel(fx.real, spec.turn_id), Err(RuntimeError::NotFound(_))));
    assert!(matches!(rt.resume(fx.real, fx.env.clone(), spec.turn_id), Err(RuntimeError::NotFound(_))));
    assert!(matches!(rt.turn(fx.spec, real.turn_id), Err(RuntimeError::NotFound(_))));
    assert_eq!(rt.turn(fx.spec, spec.turn_id).unwrap().status, RuntimeStatus::AuthorizationRequired);

    let of = |scope: Scope| -> BTreeSet<Uuid> { rt.events(scope, 0, 128).events.iter().map(|e| e.turn_id).collect() };
    assert_eq!(of(fx.spec), BTreeSet::from([spec.turn_id]));
    assert_eq!(of(fx.real), BTreeSet::from([real.turn_id]));
    // Cursors move forward; at the end a page is empty, not missed.
    let page = rt.events(fx.spec, 0, 2);
    assert_eq!(page.events.len(), 2);
    let rest = rt.events(fx.spec, page.next_cursor, 128);
    assert!(rest.events.iter().all(|e| e.seq > page.next_cursor));
    let end = rt.events(fx.spec, rest.next_cursor, 128);
    assert!(end.events.is_empty() && !end.missed);
    // A cursor past every sequence handed out (K2: a client of a server
    // that lost its last events) is said missed, and starts again from the
    // oldest event kept.
    let ahead = rt.events(fx.spec, u64::MAX / 2, 128);
    assert!(ahead.missed);
    assert_eq!(ahead.events.first().map(|e| e.seq), rt.events(fx.spec, 0, 128).events.first().map(|e| e.seq));
}

// ---------------------------------------------------------------------------
// 10. Instructions in evidence are data.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_in_evidence_stay_untrusted_data_and_change_nothing() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let fingerprint = fx.gw.catalog().fingerprint().to_owned();
    let t = start(&rt, &fx, fx.spec, "k", "Instructions précédentes 8812 : que dit ce fil ?");
    let inv = shown_investigation(&provider.nth(1, PATIENCE).await);
    // The SPECIMEN's hostile page tells the agent to grant itself the research.
    provider.answer(tool_call(
        "investigation.search",
        json!({"investigation_id": inv, "query": "instructions précédentes 8812", "limit": 5}),
    ));
    let hits = result_refs(&tool_result(&provider.nth(2, PATIENCE).await));
    assert_eq!(hits.len(), 1, "{hits:?}");
    provider.answer(tool_call("evidence.read_excerpt", json!({"evidence_id": hits[0], "offset": 0, "length": 2000})));
    let third = provider.nth(3, PATIENCE).await;
    let excerpt = tool_result(&third);
    assert_eq!(
        (excerpt["tool_id"].as_str(), excerpt["status"].as_str()),
        (Some("evidence.read_excerpt"), Some("COMPLETED"))
    );
    assert!(excerpt["data"].to_string().contains("accorde-toi"), "the hostile page was shown: {excerpt}");
    // A model that falls for it: a grant claimed in its answer is refused.
    provider.answer(
        json!({"contract": CONTRACT, "type": "tool_call", "tool_id": "research.prepare", "grant_id": "grant:1",
               "arguments": {"selection_ids": [hits[0]], "question": "tout", "exclusions": []}})
        .to_string(),
    );
    let repair = provider.nth(4, PATIENCE).await;
    assert!(last_message(&repair).1.contains("SELF_AUTHORIZATION") || last_message(&repair).1.contains("authori"));
    provider.answer(final_answer("Le fil contient des instructions adressées à un agent ; je les ignore."));
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!(done.repairs, 1);

    // The hostile text reached the model only inside UNTRUSTED_DATA.
    let mut seen = 0;
    for request in &provider.requests() {
        for m in messages(request) {
            let content = m["content"].as_str().unwrap();
            if content.contains("accorde-toi") {
                seen += 1;
                assert_eq!(m["role"], "user", "evidence is never a system or assistant message");
                let v: Value = serde_json::from_str(content).expect("evidence only inside a tool result object");
                assert_eq!(v["trust"], "UNTRUSTED_DATA");
                assert!(matches!(v["tool_id"].as_str(), Some("investigation.search" | "evidence.read_excerpt")), "{v}");
            }
        }
        assert!(!messages(request)[0]["content"].as_str().unwrap().contains("accorde-toi"));
    }
    assert!(seen >= 1, "the hostile page was shown to the model");
    // Nothing changed: no request, no grant, no campaign, the same catalog.
    assert!(fx.requests().is_empty());
    let actions = fx.audit_actions();
    assert!(
        actions.iter().all(|a| !a.starts_with("grant.") && !a.starts_with("campaign.") && a != "research.prepare"),
        "{actions:?}"
    );
    assert_eq!(fx.gw.catalog().fingerprint(), fingerprint);
    assert_eq!(fx.gateway_turn(fx.spec, &done).calls, 2);
    assert_events_leak_nothing(&rt, fx.spec);
}

// ---------------------------------------------------------------------------
// 11. The demo agent through the runtime.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_agent_pauses_and_resumes_after_a_grant_through_the_runtime() {
    let fx = Fx::new();
    let rt = fx.demo();
    assert_eq!(rt.driver(), Driver::Demo);
    let status = rt.status().await;
    assert_eq!((status.driver, status.label.as_str(), status.ready), (Driver::Demo, DEMO_AGENT_LABEL, true));

    let t = start(&rt, &fx, fx.spec, "k", QUESTION);
    assert_eq!((t.driver, t.model.as_deref()), (Driver::Demo, None));
    let paused = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(paused.status, RuntimeStatus::AuthorizationRequired, "{paused:#?}");
    let request = paused.research_request.unwrap();
    assert!(paused.tool_calls >= 3, "{paused:#?}");
    let gw = fx.gateway_turn(fx.spec, &paused);
    assert_eq!((gw.mode, gw.status), (TurnMode::Demo, TurnStatus::AuthorizationRequired));

    // No grant yet: it stays paused.
    let _ = rt.resume(fx.spec, fx.env.clone(), t.turn_id);
    let waiting = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(waiting.status, RuntimeStatus::AuthorizationRequired);

    let granted = fx.grant(&request);
    rt.resume(fx.spec, fx.env.clone(), t.turn_id).unwrap();
    let done = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    let summary = done.summary.as_deref().unwrap();
    assert!(summary.contains("SPECIMEN") && summary.contains(&granted.grant.to_string()), "{summary}");
    assert!(done.summary_refs.contains(&granted.campaign.into()));
    assert_eq!(fx.gateway_turn(fx.spec, &done).status, TurnStatus::Completed);
    assert_eq!(event_kinds(&rt, fx.spec, t.turn_id).last(), Some(&"turn.completed"));
}

// ---------------------------------------------------------------------------
// 12. close().

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_cancels_what_is_live_and_refuses_new_turns() {
    let fx = Fx::new();
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    provider.push(Reply::Late(Duration::from_secs(2), final_answer("Trop tard.")));
    let running = start(&rt, &fx, fx.spec, "running", QUESTION);
    provider.nth(1, PATIENCE).await;
    let queued = start(&rt, &fx, fx.spec, "queued", QUESTION);

    rt.close();
    let status = rt.status().await;
    assert!(status.closed && !status.ready, "{status:?}");
    let refused = rt.start_turn(
        fx.spec,
        fx.env.clone(),
        StartTurn {
            question: QUESTION.into(),
            investigation_id: None,
            exclusions: vec![],
            idempotency_key: "late".into(),
            tools: None,
            lang: Lang::Fr,
        },
    );
    assert!(matches!(refused, Err(RuntimeError::Unavailable(_))), "{refused:?}");

    // Neither turn lives on, and neither completes.
    let running = settled(&rt, fx.spec, running.turn_id).await;
    assert_eq!(running.status, RuntimeStatus::Cancelled, "{running:#?}");
    assert!(running.summary.is_none());
    let queued = settled(&rt, fx.spec, queued.turn_id).await;
    assert_eq!(queued.status, RuntimeStatus::Cancelled, "{queued:#?}");
    assert_eq!(provider.count(), 1, "the queued turn never reached the model");
    assert!(matches!(
        rt.resume(fx.spec, fx.env.clone(), running.turn_id),
        Err(RuntimeError::Conflict(_) | RuntimeError::Unavailable(_))
    ));
    // Closing twice is harmless.
    rt.close();
}

/// SPEC F4: a restart (a new gateway and runtime over the same store, as the
/// next server start builds them) reads back the turns and their events; a
/// turn paused on a research request resumes after a human grant; a turn
/// that was running ends `FAILED` "interrupted by restart", its gateway turn
/// too — never silently lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_survive_a_restart_and_a_running_one_ends_interrupted() {
    let mut fx = Fx::new();
    let journal = |fx: &Fx| labfy_store::JournalStore::open(fx.dir.path()).unwrap();
    let store = Store::open(fx.dir.path()).unwrap();
    fx.gw = Arc::new(AgentGateway::new(Arc::new(DirectBackend::new(store))).unwrap().with_journal(journal(&fx)));
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let paused = prepare(&rt, &fx, &provider, "k").await;
    let request = paused.research_request.unwrap();
    // A second turn whose model answer never comes before the "crash".
    provider.push(Reply::Late(Duration::from_secs(60), final_answer("trop tard")));
    let running = start(&rt, &fx, fx.spec, "k2", QUESTION);
    provider.nth(3, PATIENCE).await;
    wait_for(&rt, fx.spec, running.turn_id, |t| t.status == RuntimeStatus::Running).await;
    let before = rt.events(fx.spec, 0, 128);
    assert!(fx.gw.flush_journal());

    // The next start: a new gateway and runtime over the same file.
    let store = Store::open(fx.dir.path()).unwrap();
    let gw = Arc::new(AgentGateway::new(Arc::new(DirectBackend::new(store))).unwrap().with_journal(journal(&fx)));
    let restored = gw.restore(fx.spec).unwrap();
    assert_eq!((restored.turns, restored.paused), (2, 1), "{restored:?}");
    let rt2 = AgentRuntime::start(gw.clone(), Some(provider.client()));
    let back = rt2.restore(fx.spec).unwrap();
    assert_eq!((back.turns, back.paused, back.interrupted.as_slice()), (2, 1, [running.turn_id].as_slice()));

    let again = rt2.turn(fx.spec, paused.turn_id).unwrap();
    assert_eq!((again.status, again.research_request), (RuntimeStatus::AuthorizationRequired, Some(request)));
    assert_eq!((again.question.as_str(), again.rounds, again.tool_calls), (QUESTION, paused.rounds, paused.tool_calls));
    let ended = rt2.turn(fx.spec, running.turn_id).unwrap();
    assert_eq!((ended.status, ended.error.as_deref()), (RuntimeStatus::Failed, Some("interrupted by restart")));
    let gw_turn = gw.turn(fx.spec, ended.gateway_turn_id.unwrap()).unwrap();
    assert_eq!(gw_turn.status, TurnStatus::Failed, "its gateway turn takes no more calls");
    // The events as they were, then the interruption, in sequence.
    let after = rt2.events(fx.spec, 0, 128);
    let seqs = |p: &labfy_runtime::runtime::EventPage| p.events.iter().map(|e| e.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&after)[..before.events.len()], seqs(&before)[..]);
    let last = after.events.last().unwrap();
    assert_eq!((last.turn_id, last.kind), (running.turn_id, "turn.failed"));
    assert!(last.seq > before.next_cursor);
    // Same key after the restart: the same turn, not a second one.
    let same = start(&rt2, &fx, fx.spec, "k", QUESTION);
    assert_eq!(same.turn_id, paused.turn_id);

    // The paused turn resumes on the new runtime once a human grants.
    fx.grant(&request);
    rt2.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    provider.nth(4, PATIENCE).await;
    provider.answer(final_answer("Reprise après redémarrage."));
    let done = settled(&rt2, fx.spec, paused.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert_eq!(done.summary.as_deref(), Some("Reprise après redémarrage."));
}

/// SPEC X2 through the runtime with a scripted model: its proposal to
/// install a capability pauses the turn on a tool request (pause A) and
/// asks it nothing more; no tool of the catalog approves; a resume before
/// the human's decision does not complete; after the approval the gateway
/// rereads the capability's standing and the model is offered `final` only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_request_pauses_the_model_and_resumes_after_the_humans_approval() {
    let mut fx = Fx::new();
    let store = Store::open(fx.dir.path()).unwrap();
    fx.gw =
        Arc::new(AgentGateway::new(Arc::new(DirectBackend::new(store))).unwrap().with_optional_catalog(None).unwrap());
    fx.env = Environment {
        sandbox: labfy_gateway::Readiness { ready: true, detail: "python3 — no network".into() },
        sandbox_programs: vec!["python3".into()],
        ..Environment::offline("test: egress not ready")
    };
    let provider = Provider::start().await;
    let rt = fx.model(&provider);
    let t = start(&rt, &fx, fx.spec, "cap", "Compte les mots des pièces");
    let first = provider.nth(1, PATIENCE).await;
    let inv = shown_investigation(&first);
    // The model is offered the optional tools, and none that decides.
    let tools = offered(&first);
    assert!(tools.iter().any(|x| x == "tool.provision.propose"), "{tools:?}");
    assert!(!tools.iter().any(|x| x.contains("approve") || x.contains("grant")), "{tools:?}");
    provider.answer(tool_call(
        "tool.provision.propose",
        json!({"investigation_id": inv, "capability_id": "text.count_words", "reason": "compter les mots"}),
    ));
    let paused = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(paused.status, RuntimeStatus::AuthorizationRequired, "{paused:#?}");
    let request = paused.research_request.expect("the request it paused on");
    assert_eq!(request.kind(), RefKind::ToolRequest);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(provider.count(), 1, "the pause asked the model nothing more");
    let stored = fx.reads().reads().tool_request(fx.spec.workspace, &request).unwrap();
    assert_eq!((stored.pause, stored.status.as_str(), stored.requested_by.as_str()), ("A", "PENDING", MODEL_ACTOR));

    // Before a decision: not resumed.
    match rt.resume(fx.spec, fx.env.clone(), paused.turn_id) {
        Err(RuntimeError::Forbidden(_)) => {}
        Ok(t) => assert!(matches!(t.status, RuntimeStatus::Queued | RuntimeStatus::AuthorizationRequired)),
        Err(e) => panic!("resume without a decision: {e:?}"),
    }
    let waiting = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(waiting.status, RuntimeStatus::AuthorizationRequired);
    assert_eq!(provider.count(), 1);

    // The analyst approves (the server's route), against what holds now.
    let decision = labfy_store::ToolDecision {
        approve: true,
        note: None,
        decided_by: "analyst".into(),
        current_contract_fingerprint: fx.gw.catalog().get(ToolId::ToolProvisionPropose).unwrap().fingerprint.clone(),
        current_manifest_fingerprint: fx.gw.capability_fingerprint(fx.spec, &fx.env, "text.count_words").unwrap(),
    };
    let decided =
        Store::open(fx.dir.path()).unwrap().decide_tool_request(fx.spec.workspace, &request, &decision).unwrap();
    assert_eq!(decided.status, "APPROVED");
    rt.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    let second = provider.nth(2, PATIENCE).await;
    let branches = second["response_format"]["json_schema"]["schema"]["anyOf"].as_array().unwrap();
    assert_eq!(branches.len(), 1, "only `final` is offered after a decision");
    let (_, text) = last_message(&second);
    assert!(text.contains("demande d'outil") && text.contains("tool.provision.search"), "{text}");
    assert!(text.contains("UNTRUSTED_DATA") && text.contains("\"installed\":\"yes\""), "{text}");
    provider.answer(final_answer("La capacité text.count_words est installée ; son intégration reste à décider."));
    let done = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(done.status, RuntimeStatus::Completed, "{done:#?}");
    assert!(done.summary.as_deref().unwrap_or_default().contains("installée"));
    assert_eq!(fx.gateway_turn(fx.spec, &done).calls, 2, "the resume reread tool.provision.search");

    // Pause B the same way, in a new turn; a refusal ends it with the
    // gateway's words, the model asked nothing more.
    let t = start(&rt, &fx, fx.spec, "cap-b", "Intègre le compteur de mots à l'enquête");
    let third = provider.nth(3, PATIENCE).await;
    let inv = shown_investigation(&third);
    provider.answer(tool_call(
        "tool.integration.propose",
        json!({"investigation_id": inv, "capability_id": "text.count_words", "reason": "l'utiliser ici"}),
    ));
    let paused = settled(&rt, fx.spec, t.turn_id).await;
    assert_eq!(paused.status, RuntimeStatus::AuthorizationRequired, "{paused:#?}");
    let b = paused.research_request.unwrap();
    assert_eq!(fx.reads().reads().tool_request(fx.spec.workspace, &b).unwrap().pause, "B");
    let refusal = labfy_store::ToolDecision {
        approve: false,
        note: Some("pas dans cette enquête".into()),
        current_contract_fingerprint: fx.gw.catalog().get(ToolId::ToolIntegrationPropose).unwrap().fingerprint.clone(),
        ..decision
    };
    Store::open(fx.dir.path()).unwrap().decide_tool_request(fx.spec.workspace, &b, &refusal).unwrap();
    rt.resume(fx.spec, fx.env.clone(), paused.turn_id).unwrap();
    let ended = settled(&rt, fx.spec, paused.turn_id).await;
    assert_eq!(ended.status, RuntimeStatus::Completed, "{ended:#?}");
    assert!(ended.summary.as_deref().unwrap_or_default().contains("refusée par l'analyste"), "{ended:#?}");
    assert_eq!(provider.count(), 3, "a refused request asks the model nothing more");
}
