//! Router tests of the agent tool routes and the human decision (SPEC G6–G11,
//! R5, S3, W4), through the whole guarded application with no socket.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use labfy_server::session::RateLimit;
use labfy_server::{AppState, app, db::Db};
use labfy_store::Store;
use labfy_store::specimen::{self, SpecimenSpec};
use serde_json::{Value, json};
use tempfile::TempDir;
use uuid::Uuid;

mod common;
use common::{HOST, PORT, get_req, send};
const ORIGIN: &str = "http://127.0.0.1:7345";

struct Fixture {
    dir: TempDir,
    app: Router,
    state: AppState,
    investigation: String,
    other_evidence: String,
    cookie: String,
    csrf: String,
}

async fn fixture() -> Fixture {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let out = specimen::generate(&mut store, SpecimenSpec { seed: 4, size: 120 }, &mut |_, _| {}).unwrap();
    let specimen::SpecimenOutcome::Created { workspace, investigation, .. } = out else { panic!() };
    let other = specimen::generate(&mut store, SpecimenSpec { seed: 5, size: 10 }, &mut |_, _| {}).unwrap();
    let specimen::SpecimenOutcome::Created { workspace: other_ws, investigation: other_inv, .. } = other else {
        panic!()
    };
    let other_evidence = store.reads().overview(other_ws.id(), &other_inv).unwrap().recent_evidence[0].id.to_string();
    // Generous limits: these tests exercise the protocol, not the rate limiter.
    let limit = RateLimit { burst: 1000, per_second: 1000.0 };
    let state = AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, workspace.id(), limit).unwrap();
    let app = app(state.clone());
    let (cookie, csrf) = common::open_session(&app, &state).await;
    Fixture { dir, app, state, investigation: investigation.to_string(), other_evidence, cookie, csrf }
}

impl Fixture {
    async fn get(&self, uri: &str) -> (StatusCode, Value) {
        send(&self.app, get_req(uri, Some(&self.cookie))).await
    }

    async fn post(&self, uri: &str, body: Value) -> (StatusCode, Value) {
        let req = Request::post(uri)
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, &self.cookie)
            .header(header::ORIGIN, ORIGIN)
            .header("X-CSRF-Token", &self.csrf)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        send(&self.app, req).await
    }

    async fn demo_turn(&self, question: &str) -> Value {
        let (s, turn) = self.post("/api/v1/agent-tools/turns", json!({"question": question})).await;
        assert_eq!(s, StatusCode::CREATED, "{turn}");
        turn
    }

    fn grants(&self) -> i64 {
        let conn = rusqlite::Connection::open(self.dir.path().join(labfy_store::DB_FILE)).unwrap();
        conn.query_row("SELECT count(*) FROM grants", [], |r| r.get(0)).unwrap()
    }
}

fn grant_body() -> Value {
    json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 3, "max_bytes": 1_048_576},
           "expires_in_minutes": 60})
}

#[tokio::test]
async fn catalog_publishes_sixteen_tools_with_fingerprints_and_real_availability() {
    let f = fixture().await;
    let (s, c) = f.get("/api/v1/agent-tools/catalog").await;
    assert_eq!(s, StatusCode::OK);
    let tools = c["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 16);
    assert_eq!(c["catalog_fingerprint"].as_str().unwrap().len(), 64);
    let tool = |id: &str| tools.iter().find(|t| t["tool_id"] == id).unwrap().clone();
    assert_eq!(tool("web.fetch")["risk_level"], "high");
    assert_eq!(tool("web.fetch")["availability"]["status"], "UNAVAILABLE");
    assert_eq!(tool("sandbox.exec")["availability"]["status"], "UNAVAILABLE");
    assert_eq!(tool("research.prepare")["risk_level"], "medium");
    assert_eq!(tool("research.prepare")["availability"]["status"], "AVAILABLE");
    assert_eq!(tool("investigation.search")["input_schema"]["additionalProperties"], false);
    assert_eq!(c["agent"]["label"], "Agent de démonstration déterministe");
    // Not supervised: no egress to ask.
    assert_eq!(c["environment"]["egress"]["ready"], false);
}

#[tokio::test]
async fn the_whole_demo_round_trip_over_http() {
    let f = fixture().await;
    let turn = f.demo_turn("Quels liens entre les sociétés et les domaines ?").await;
    assert_eq!(turn["status"], "AUTHORIZATION_REQUIRED", "{turn}");
    assert!(turn["calls"].as_u64().unwrap() >= 4);
    let turn_id = turn["turn_id"].as_str().unwrap().to_owned();
    let request = turn["research_request"].as_str().unwrap().to_owned();
    assert!(request.starts_with("research_request:"));
    assert_eq!(f.grants(), 0, "research.prepare creates no grant (G11)");

    // The events tell the same story, in order (G9, G11).
    let (_, page) = f.get("/api/v1/agent-tools/events?cursor=0").await;
    let kinds: Vec<&str> = page["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "agent.turn.started");
    assert_eq!(kinds[1], "agent.plan.updated");
    let pos = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k} in {kinds:?}"));
    assert!(pos("agent.tool.requested") < pos("agent.tool.started"));
    assert!(pos("agent.tool.started") < pos("agent.tool.completed"));
    assert_eq!(*kinds.last().unwrap(), "agent.plan.updated");
    assert!(kinds.contains(&"agent.authorization.required"));
    let seqs: Vec<u64> = page["events"].as_array().unwrap().iter().map(|e| e["sequence"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let cursor = page["next_cursor"].as_u64().unwrap();
    let (_, empty) = f.get(&format!("/api/v1/agent-tools/events?cursor={cursor}")).await;
    assert!(empty["events"].as_array().unwrap().is_empty());

    // Each result is fetchable; call_id and result_id differ (G7).
    let rid = turn["result_ids"][0].as_str().unwrap();
    let (s, r) = f.get(&format!("/api/v1/agent-tools/results/{rid}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_ne!(r["result_id"], r["call_id"]);

    // Resume before a decision: refused.
    let resume = format!("/api/v1/agent-tools/turns/{turn_id}/resume");
    let (s, e) = f.post(&resume, json!({})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");

    // The human review lists it with the contract in force.
    let (_, pending) = f.get("/api/v1/research/requests").await;
    let listed = &pending["requests"][0];
    assert_eq!(listed["id"], request.as_str());
    assert_eq!(listed["status"], "PENDING");
    assert_eq!(listed["contract_fingerprint"], pending["current_contract_fingerprint"]);

    // Grant: grant + campaign; SPECIMEN runs it synthetically.
    let (s, g) = f.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    assert_eq!(f.grants(), 1);
    let grant = g["grant"].as_str().unwrap().to_owned();
    let (_, detail) = f.get(&format!("/api/v1/grants/{grant}")).await;
    assert_eq!(detail["active"], true);
    assert_eq!(detail["grant"]["contract_fingerprints"]["tools"]["research.prepare"], listed["contract_fingerprint"]);
    // Deciding twice is a conflict.
    let (s, _) = f.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    assert_eq!(s, StatusCode::CONFLICT);

    let (s, done) = f.post(&resume, json!({})).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "COMPLETED");
    assert!(done["summary"].as_str().unwrap().contains("campagne synthétique"), "{done}");
    let evidence: Vec<&str> = done["summary_refs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|r| r.starts_with("evidence:"))
        .collect();
    assert_eq!(evidence.len(), 3);
    let (s, ev) = f.get(&format!("/api/v1/evidence/{}", evidence[0])).await;
    assert_eq!(s, StatusCode::OK);
    assert!(ev["source"].as_str().unwrap().starts_with("https://example.org/labfy-synthetic/"));
    // A finished turn does not resume again.
    let (s, _) = f.post(&resume, json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT);
}

#[tokio::test]
async fn resume_is_refused_for_unknown_malformed_and_revoked() {
    let f = fixture().await;
    let (s, _) = f.post(&format!("/api/v1/agent-tools/turns/{}/resume", Uuid::new_v4()), json!({})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = f.post("/api/v1/agent-tools/turns/not-a-uuid/resume", json!({})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    let turn = f.demo_turn("Quels liens entre les sociétés et les domaines ?").await;
    let request = turn["research_request"].as_str().unwrap();
    let (_, g) = f.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    let grant = g["grant"].as_str().unwrap();
    let (s, _) = f.post(&format!("/api/v1/grants/{grant}/revoke"), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = f.post(&format!("/api/v1/grants/{grant}/revoke"), json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "revoking twice is not a silent no-op");
    let (s, e) =
        f.post(&format!("/api/v1/agent-tools/turns/{}/resume", turn["turn_id"].as_str().unwrap()), json!({})).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
}

#[tokio::test]
async fn refused_request_ends_the_turn_without_a_grant() {
    let f = fixture().await;
    let turn = f.demo_turn("Quels liens entre les sociétés et les domaines ?").await;
    let request = turn["research_request"].as_str().unwrap();
    let (s, _) =
        f.post(&format!("/api/v1/research/requests/{request}/refuse"), json!({"reason": "hors périmètre"})).await;
    assert_eq!(s, StatusCode::OK);
    let (s, done) =
        f.post(&format!("/api/v1/agent-tools/turns/{}/resume", turn["turn_id"].as_str().unwrap()), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert!(done["summary"].as_str().unwrap().contains("refusée"));
    assert_eq!(f.grants(), 0);
}

#[tokio::test]
async fn a_grant_cannot_come_from_a_call_its_context_or_a_widened_body() {
    let f = fixture().await;
    let (s, turn) = f.post("/api/v1/agent-tools/turns", json!({"question": "manuel", "mode": "manual"})).await;
    assert_eq!(s, StatusCode::CREATED);
    let t = turn["turn_id"].as_str().unwrap();
    let call = |tool: &str, input: Value, context: Value, key: &str| {
        json!({"turn_id": t, "call_id": Uuid::new_v4(), "tool_id": tool, "input": input, "context": context,
               "object_refs": [], "idempotency_key": key})
    };
    // No grant tool exists.
    let (s, r) = f.post("/api/v1/agent-tools/calls", call("grant.create", json!({}), json!({}), "k1")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["status"], "DENIED");
    assert_eq!(r["stage"], "capability");
    // An extra `grant` inside a tool's input is refused by the closed schema.
    let input = json!({"selection_ids": [], "question": "q", "exclusions": [], "grant": {"hosts": ["*"]}});
    let (_, r) = f.post("/api/v1/agent-tools/calls", call("research.prepare", input, json!({}), "k2")).await;
    assert_eq!(r["status"], "DENIED");
    // A `grant` in the context is not a context field: the envelope is refused.
    let (s, _) =
        f.post("/api/v1/agent-tools/calls", call("tool.catalog", json!({}), json!({"grant": "grant:x"}), "k3")).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    // The grant route accepts only scope, budget and expiry.
    let turn = f.demo_turn("Quels liens entre les sociétés et les domaines ?").await;
    let request = turn["research_request"].as_str().unwrap();
    let mut body = grant_body();
    body["expires_at"] = json!("2099-01-01T00:00:00Z");
    let (s, _) = f.post(&format!("/api/v1/research/requests/{request}/grant"), body).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let mut body = grant_body();
    body["scope"]["hosts"] = json!(["Example.org:443"]);
    let (s, e) = f.post(&format!("/api/v1/research/requests/{request}/grant"), body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert_eq!(f.grants(), 0);
}

#[tokio::test]
async fn calls_are_idempotent_and_conflicts_are_409() {
    let f = fixture().await;
    let (_, turn) = f.post("/api/v1/agent-tools/turns", json!({"question": "manuel", "mode": "manual"})).await;
    let t = turn["turn_id"].as_str().unwrap();
    let call_id = Uuid::new_v4();
    let body = |input: Value| {
        json!({"turn_id": t, "call_id": call_id, "tool_id": "investigation.get_overview", "input": input,
               "context": {}, "object_refs": [], "idempotency_key": "same"})
    };
    let inv = json!({"investigation_id": f.investigation});
    let (s1, a) = f.post("/api/v1/agent-tools/calls", body(inv.clone())).await;
    let (s2, b) = f.post("/api/v1/agent-tools/calls", body(inv)).await;
    assert_eq!((s1, s2), (StatusCode::OK, StatusCode::OK));
    assert_eq!(a["status"], "COMPLETED");
    assert_eq!(a["result_id"], b["result_id"]);
    let (s, e) = f.post("/api/v1/agent-tools/calls", body(json!({"investigation_id": "investigation:x"}))).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
}

#[tokio::test]
async fn references_resolve_exactly_in_the_session_workspace() {
    let f = fixture().await;
    let (_, turn) = f.post("/api/v1/agent-tools/turns", json!({"question": "manuel", "mode": "manual"})).await;
    let t = turn["turn_id"].as_str().unwrap();
    let mut n = 0;
    let mut call = |evidence: &str| {
        n += 1;
        json!({"turn_id": t, "call_id": Uuid::new_v4(), "tool_id": "evidence.get_summary",
               "input": {"evidence_id": evidence}, "context": {}, "object_refs": [], "idempotency_key": format!("k{n}")})
    };
    let bare = Uuid::new_v4().to_string();
    let (_, r) = f.post("/api/v1/agent-tools/calls", call(&bare)).await;
    assert_eq!(r["status"], "DENIED");
    assert!(r["diagnostic"].as_str().unwrap().contains("bare UUID"), "{r}");
    let (_, r) = f.post("/api/v1/agent-tools/calls", call(&f.other_evidence)).await;
    assert_eq!(r["status"], "DENIED");
    assert!(r["diagnostic"].as_str().unwrap().contains("does not exist in this workspace"), "{r}");
}

#[tokio::test]
async fn agent_mutations_need_origin_and_csrf_like_every_mutation() {
    let f = fixture().await;
    for uri in ["/api/v1/agent-tools/turns", "/api/v1/agent-tools/calls", "/api/v1/grants/grant:x/revoke"] {
        let req = Request::post(uri)
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, &f.cookie)
            .header(header::ORIGIN, ORIGIN)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap();
        let (s, _) = send(&f.app, req).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{uri} without CSRF");
    }
    let req = Request::get("/api/v1/agent-tools/events").header(header::HOST, HOST).body(Body::empty()).unwrap();
    assert_eq!(send(&f.app, req).await.0, StatusCode::UNAUTHORIZED);
}

/// A sandbox that "ran" and left two files: a text one and one whose bytes
/// the report does not carry.
struct FileSandbox;

impl labfy_gateway::Sandbox for FileSandbox {
    fn run(&self, ask: &labfy_gateway::SandboxAsk) -> Result<labfy_gateway::SandboxOutcome, String> {
        use labfy_gateway::sandbox::{SandboxEnded, SandboxFileOut, SandboxRan, SandboxStreamText};
        let text = format!("entrée,caractères\n{},{}\n", ask.inputs[0].name, ask.inputs[0].text.chars().count());
        let stream = SandboxStreamText { text: String::new(), bytes: 0, truncated: false };
        Ok(labfy_gateway::SandboxOutcome::Ran(Box::new(SandboxRan {
            program: "python3".into(),
            end: SandboxEnded::Exited { code: 0 },
            stdout: stream.clone(),
            stderr: stream,
            files: vec![
                SandboxFileOut {
                    name: "compte.csv".into(),
                    size: text.len() as u64,
                    sha256: labfy_store::sha256_hex(text.as_bytes()),
                    text: Some(text),
                },
                SandboxFileOut { name: "image.png".into(), size: 4, sha256: "0".repeat(64), text: None },
            ],
            files_unlisted: 0,
            duration_ms: 12,
            peak_memory_bytes: 1 << 20,
            cpu_ms: 3,
            reservation: "sandbox-test-1".into(),
            confinement: vec!["no network".into()],
            missing: vec![],
        })))
    }
}

/// SPEC X1: a run's file becomes evidence only by the analyst's POST (CSRF
/// and all), checked against the run's report, with provenance naming the
/// run and its input; once.
#[tokio::test]
async fn the_analyst_keeps_a_sandbox_runs_file_as_evidence() {
    let f = fixture().await;
    assert!(f.state.gateway().set_sandbox(std::sync::Arc::new(FileSandbox)));
    let (_, overview) = f.get(&format!("/api/v1/investigations/{}/overview", f.investigation)).await;
    let input = overview["recent_evidence"][0]["id"].as_str().unwrap().to_owned();
    let (_, turn) = f.post("/api/v1/agent-tools/turns", json!({"question": "compter", "mode": "manual"})).await;
    let turn_id = Uuid::parse_str(turn["turn_id"].as_str().unwrap()).unwrap();
    let ready = labfy_gateway::Environment {
        sandbox: labfy_gateway::Readiness { ready: true, detail: "python3".into() },
        ..labfy_gateway::Environment::offline("test")
    };
    let req = |tool: &str, input: Value, key: &str| labfy_gateway::protocol::CallRequest {
        turn_id,
        call_id: Uuid::new_v4(),
        tool_id: tool.into(),
        input,
        context: Default::default(),
        object_refs: vec![],
        idempotency_key: key.into(),
    };
    let run = f
        .state
        .gateway()
        .call(
            f.state.scope(),
            &ready,
            req("sandbox.exec", json!({"program": "python3", "code": "print(1)", "evidence_ids": [input]}), "run"),
        )
        .unwrap();
    assert_eq!(run.status, labfy_gateway::protocol::ResultStatus::Completed, "{:?}", run.diagnostic);
    let keep = format!("/api/v1/agent-tools/results/{}/keep-file", run.result_id);
    let body = |name: &str| json!({"name": name, "investigation_id": f.investigation});

    let (s, kept) = f.post(&keep, body("compte.csv")).await;
    assert_eq!(s, StatusCode::CREATED, "{kept}");
    assert_eq!(kept["created"], true);
    let ev = kept["evidence_id"].as_str().unwrap().to_owned();
    let (s, again) = f.post(&keep, body("compte.csv")).await;
    assert_eq!((s, &again["evidence_id"], &again["created"]), (StatusCode::OK, &json!(ev), &json!(false)), "once");
    let (_, trace) = f.get(&format!("/api/v1/provenance/{ev}")).await;
    let rec = &trace["records"][0];
    assert_eq!(
        (&rec["producer"], &rec["activity"]),
        (&json!("sandbox.exec:python3"), &json!("sandbox_run")),
        "{trace}"
    );
    assert_eq!(rec["inputs"][0]["id"], json!(input));
    let (_, summary) = f.get(&format!("/api/v1/evidence/{ev}")).await;
    assert!(summary["source"].as_str().unwrap().contains("run sandbox-test-1"), "{summary}");

    // Refusals, each with its reason; nothing kept.
    let (s, e) = f.post(&keep, body("absent.csv")).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{e}");
    let (s, e) = f.post(&keep, body("image.png")).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("does not carry the text"), "{e}");
    let (s, _) = f.post(&keep, json!({"name": "compte.csv", "investigation_id": f.investigation, "as": "x"})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "unknown fields");
    let overview_run = f
        .state
        .gateway()
        .call(
            f.state.scope(),
            &ready,
            req("investigation.get_overview", json!({"investigation_id": f.investigation}), "o"),
        )
        .unwrap();
    let (s, e) =
        f.post(&format!("/api/v1/agent-tools/results/{}/keep-file", overview_run.result_id), body("compte.csv")).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    let (s, _) = f.post(&format!("/api/v1/agent-tools/results/{}/keep-file", Uuid::new_v4()), body("compte.csv")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // Without the CSRF token: refused by the guard.
    let req = Request::post(&keep)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, &f.cookie)
        .header(header::ORIGIN, ORIGIN)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body("compte.csv").to_string()))
        .unwrap();
    let (s, _) = send(&f.app, req).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
}

/// The human decisions on tool requests (SPEC X2): listed, read with what
/// holds now, approved or refused once behind the guard; an installation
/// cannot be approved while the sandbox's allow-list is unknown (no
/// governor); no agent call reaches these routes.
#[tokio::test]
async fn tool_requests_are_decided_by_the_analyst_behind_the_guard() {
    let f = fixture().await;
    let ws = f.state.workspace();
    let inv: labfy_core::ObjectRef = f.investigation.parse().unwrap();
    let propose = |kind: labfy_store::ToolRequestKind, key: &str| labfy_store::NewToolRequest {
        investigation: inv,
        kind,
        capability_id: "text.count_words".into(),
        capability_version: "1.1.0".into(),
        manifest: json!({"id": "text.count_words", "version": "1.1.0"}),
        manifest_fingerprint: "1".repeat(64),
        reason: "compter les mots".into(),
        detail: json!({"diff": "-a\n+b\n", "tests": []}),
        turn_id: Uuid::new_v4(),
        call_id: Uuid::new_v4(),
        idempotency_key: key.into(),
        requested_by: "agent:demo".into(),
        contract_fingerprint: "2".repeat(64),
    };
    let mut writer = Store::open(f.dir.path()).unwrap();
    let (change, _) = writer.propose_tool_request(ws, &propose(labfy_store::ToolRequestKind::Change, "c")).unwrap();
    let (install, _) = writer.propose_tool_request(ws, &propose(labfy_store::ToolRequestKind::Install, "i")).unwrap();

    let (s, pending) = f.get("/api/v1/tool-requests").await;
    assert_eq!(s, StatusCode::OK, "{pending}");
    assert_eq!(pending["requests"].as_array().unwrap().len(), 2);
    assert_eq!(pending["optional_catalog"], false);
    let (s, one) = f.get(&format!("/api/v1/tool-requests/{change}")).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!((&one["request"]["pause"], &one["request"]["status"]), (&json!("C1"), &json!("PENDING")));
    assert_eq!(one["request"]["detail"]["diff"], "-a\n+b\n");
    assert_eq!(one["now"]["allow_list_known"], false, "no governor here: {one}");
    let (s, _) = f.get(&format!("/api/v1/tool-requests/{}", f.investigation)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "another namespace");
    let (s, _) = f.get(&format!("/api/v1/tool-requests/tool_request:{}", Uuid::new_v4())).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // The optional catalog is off in this server: the proposing contract is
    // not in force, so an approval voids (R5) — and says why.
    let (s, d) = f.post(&format!("/api/v1/tool-requests/{change}/approve"), json!({"note": "essai"})).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["request"]["status"], "VOID");
    assert!(d["request"]["decision_note"].as_str().unwrap().contains("contract changed"), "{d}");
    let (s, _) = f.post(&format!("/api/v1/tool-requests/{change}/refuse"), json!({"reason": "non"})).await;
    assert_eq!(s, StatusCode::CONFLICT, "decided once");
    // An installation while the governor's allow-list is unknown: 503, undecided.
    let (s, e) = f.post(&format!("/api/v1/tool-requests/{install}/approve"), json!({})).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("allow-list"), "{e}");
    // Bad bodies; no CSRF.
    let (s, _) = f.post(&format!("/api/v1/tool-requests/{install}/refuse"), json!({})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "a refusal needs its reason field");
    let (s, _) = f.post(&format!("/api/v1/tool-requests/{install}/approve"), json!({"approved": true})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "unknown fields");
    let (s, _) = f.post(&format!("/api/v1/tool-requests/{install}/refuse"), json!({"reason": " "})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "an empty reason");
    let bare = Request::post(format!("/api/v1/tool-requests/{install}/refuse"))
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, &f.cookie)
        .header(header::ORIGIN, ORIGIN)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"reason": "non"}).to_string()))
        .unwrap();
    let (s, _) = send(&f.app, bare).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (s, d) = f.post(&format!("/api/v1/tool-requests/{install}/refuse"), json!({"reason": "pas utile"})).await;
    assert_eq!((s, &d["request"]["status"]), (StatusCode::OK, &json!("REFUSED")), "{d}");
    let (_, pending) = f.get("/api/v1/tool-requests").await;
    assert!(pending["requests"].as_array().unwrap().is_empty());
    let (_, listed) = f.get(&format!("/api/v1/tool-requests?investigation={}", f.investigation)).await;
    assert_eq!(listed["requests"].as_array().unwrap().len(), 2);
}
