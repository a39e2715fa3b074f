//! Router tests of the agent runtime routes (SPEC M4, M6–M10, S2–S3): the
//! demo agent and a local model (a scripted OpenAI-compatible provider on
//! loopback) driven through the runtime, through the whole guarded
//! application with no socket of the server's own.
//!
//! The runtime works in the background (one worker), so every test polls a
//! turn until it settles, within a bounded wait; the tests run on a
//! multi-threaded runtime so that a stuck worker fails the wait rather than
//! hanging the test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use labfy_runtime::client::{AgentFlags, AgentMode};
use labfy_server::session::RateLimit;
use labfy_server::{AppState, app, db::Db};
use labfy_store::Store;
use labfy_store::specimen::{self, SpecimenSpec};
use labfy_testkit::model::{Reply, ScriptedModel};
use serde_json::{Value, json};
use tempfile::TempDir;

mod common;
use common::{HOST, PORT, get_req, send};
const ORIGIN: &str = "http://127.0.0.1:7345";
const DEMO_LABEL: &str = "Agent de démonstration déterministe";
const MODEL: &str = "test-model";
/// Longest wait for a turn to settle.
const SETTLE: Duration = Duration::from_secs(20);
/// Statuses a turn leaves on its own.
const MOVING: [&str; 2] = ["QUEUED", "RUNNING"];

struct Fixture {
    dir: TempDir,
    app: Router,
    state: AppState,
    investigation: String,
    cookie: String,
    csrf: String,
}

async fn fixture() -> Fixture {
    fixture_with(&AgentMode::Demo).await
}

async fn fixture_with(agent: &AgentMode) -> Fixture {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let out = specimen::generate(&mut store, SpecimenSpec { seed: 4, size: 120 }, &mut |_, _| {}).unwrap();
    let specimen::SpecimenOutcome::Created { workspace, investigation, .. } = out else { panic!() };
    // Generous limits: these tests exercise the runtime, not the rate limiter.
    let limit = RateLimit { burst: 1000, per_second: 1000.0 };
    let db = Db::new(store, dir.path().to_path_buf());
    let state = AppState::with_agent(db, PORT, workspace.id(), limit, agent).unwrap();
    let app = app(state.clone());
    let (cookie, csrf) = common::open_session(&app, &state).await;
    Fixture { dir, app, state, investigation: investigation.to_string(), cookie, csrf }
}

fn local_model(endpoint: &str) -> AgentMode {
    let flags = AgentFlags {
        mode: Some("local-model".into()),
        endpoint: Some(endpoint.into()),
        model: Some(MODEL.into()),
        timeout: Some("30".into()),
    };
    AgentMode::from_env_and_flags(&flags, |_| None).unwrap()
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

    /// Starts a turn: 202 with the turn, queued.
    async fn start(&self, question: &str, key: &str) -> Value {
        let (s, turn) = self
            .post(
                "/api/v1/agent-runtime/turns",
                json!({"question": question, "investigation_id": self.investigation, "idempotency_key": key}),
            )
            .await;
        assert_eq!(s, StatusCode::ACCEPTED, "{turn}");
        turn
    }

    async fn turn(&self, id: &str) -> Value {
        let (s, t) = self.get(&format!("/api/v1/agent-runtime/turns/{id}")).await;
        assert_eq!(s, StatusCode::OK, "{t}");
        t
    }

    /// Polls the turn until `done` holds, within [`SETTLE`].
    async fn wait_until(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let t = self.turn(id).await;
            if done(&t) {
                return t;
            }
            assert!(tokio::time::Instant::now() < deadline, "turn never became {what} within {SETTLE:?}: {t}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls the turn until it leaves QUEUED and RUNNING.
    async fn settle(&self, id: &str) -> Value {
        self.wait_until(id, "settled", |t| !MOVING.contains(&t["status"].as_str().unwrap())).await
    }

    fn grants(&self) -> i64 {
        let conn = rusqlite::Connection::open(self.dir.path().join(labfy_store::DB_FILE)).unwrap();
        conn.query_row("SELECT count(*) FROM grants", [], |r| r.get(0)).unwrap()
    }

    async fn event_kinds(&self, turn: &str) -> Vec<String> {
        let (s, page) = self.get("/api/v1/agent-runtime/events?cursor=0").await;
        assert_eq!(s, StatusCode::OK, "{page}");
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["turn_id"] == turn)
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn id_of(turn: &Value) -> String {
    turn["turn_id"].as_str().unwrap().to_owned()
}

fn grant_body() -> Value {
    json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 3, "max_bytes": 1_048_576},
           "expires_in_minutes": 60})
}

// --- demo mode ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_deterministic_demo_agent() {
    let f = fixture().await;
    let (s, st) = f.get("/api/v1/agent-runtime/status").await;
    assert_eq!(s, StatusCode::OK, "{st}");
    assert_eq!(st["driver"], "demo");
    assert_eq!(st["label"], DEMO_LABEL);
    assert_eq!(st["ready"], true);
    assert_eq!(st["detail"], Value::Null);
    assert_eq!(st["closed"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_turn_pauses_resumes_only_after_a_grant_and_completes() {
    let f = fixture().await;
    let started = f.start("Quels liens entre les sociétés et les domaines ?", "demo-1").await;
    assert_eq!(started["status"], "QUEUED", "{started}");
    assert_eq!(started["driver"], "demo");
    assert_eq!(started["model"], Value::Null);
    let id = id_of(&started);

    let paused = f.wait_until(&id, "AUTHORIZATION_REQUIRED", |t| t["status"] == "AUTHORIZATION_REQUIRED").await;
    let request = paused["research_request"].as_str().unwrap().to_owned();
    assert!(request.starts_with("research_request:"), "{paused}");
    assert!(paused["gateway_turn_id"].is_string());
    assert!(paused["tool_calls"].as_u64().unwrap() >= 4, "{paused}");
    assert_eq!(paused["summary"], Value::Null);
    assert_eq!(f.grants(), 0, "research.prepare creates no grant (M8)");

    // Resume without a grant: accepted for the worker, which asks the
    // gateway; the turn goes back to waiting, and never completes.
    let (s, r) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert!(s == StatusCode::ACCEPTED || s == StatusCode::FORBIDDEN, "{s} {r}");
    let back = f.settle(&id).await;
    if s == StatusCode::ACCEPTED {
        assert!(f.event_kinds(&id).await.iter().any(|k| k == "turn.resume_refused"));
    }
    assert_eq!(back["status"], "AUTHORIZATION_REQUIRED", "no grant, no completion: {back}");
    assert_eq!(back["summary"], Value::Null);
    assert_eq!(back["research_request"], request.as_str(), "{back}");
    assert_eq!(f.grants(), 0);

    // The human grants through the existing route; the same turn resumes.
    let (s, g) = f.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let (s, r) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{r}");
    assert_eq!(r["turn_id"], id.as_str());
    let done = f.settle(&id).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert!(!done["summary"].as_str().unwrap().is_empty(), "{done}");
    assert_eq!(done["error"], Value::Null);

    // Finished: no second resume, no cancel.
    let (s, r) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{r}");
    assert_eq!(r["error"]["code"], "CONFLICT");
    let (s, r) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{r}");

    let kinds = f.event_kinds(&id).await;
    assert_eq!(kinds.first().map(String::as_str), Some("turn.queued"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "turn.paused"), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("turn.completed"), "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_is_idempotent_on_the_key() {
    let f = fixture().await;
    let first = f.start("Quelles sociétés ?", "same-key").await;
    let again = f.start("Quelles sociétés ?", "same-key").await;
    assert_eq!(again["turn_id"], first["turn_id"], "same key, same body: the same turn");

    let body = json!({"question": "Une autre question ?", "investigation_id": f.investigation,
                      "idempotency_key": "same-key"});
    let (s, e) = f.post("/api/v1/agent-runtime/turns", body).await;
    assert_eq!(s, StatusCode::CONFLICT, "{e}");
    assert_eq!(e["error"]["code"], "CONFLICT");

    // A replay once the turn moved on still answers the same turn.
    let id = id_of(&first);
    f.settle(&id).await;
    let late = f.start("Quelles sociétés ?", "same-key").await;
    assert_eq!(late["turn_id"], id.as_str());
    assert_ne!(late["status"], "QUEUED", "{late}");

    // Refused input: an empty key or question.
    for body in [
        json!({"question": "Q ?", "idempotency_key": ""}),
        json!({"question": "  ", "idempotency_key": "k"}),
        json!({"question": "Q ?", "idempotency_key": "k".repeat(129)}),
        // The demo agent follows its own steps: no tools to narrow.
        json!({"question": "Q ?", "idempotency_key": "k", "tools": ["investigation.get_overview"]}),
    ] {
        let (s, e) = f.post("/api/v1/agent-runtime/turns", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
        assert_eq!(e["error"]["code"], "INVALID_INPUT");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_live_turn_and_refuses_a_finished_one() {
    let f = fixture().await;
    // Queued, running or paused: all live, all cancellable.
    let id = id_of(&f.start("Quels domaines ?", "cancel-1").await);
    let (s, c) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["status"], "CANCELLED", "{c}");
    // Whatever the worker was doing, the cancel stands.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = f.turn(&id).await;
    assert_eq!(t["status"], "CANCELLED", "{t}");
    assert_eq!(t["summary"], Value::Null);
    let (s, c) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{c}");
    let (s, c) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "{c}");
    assert!(f.event_kinds(&id).await.iter().any(|k| k == "turn.cancelled"));

    // A paused turn is cancelled too; it can then never resume.
    let id = id_of(&f.start("Quelles sociétés ?", "cancel-2").await);
    let paused = f.settle(&id).await;
    assert_eq!(paused["status"], "AUTHORIZATION_REQUIRED", "{paused}");
    let (s, c) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["status"], "CANCELLED");
    let request = paused["research_request"].as_str().unwrap();
    let (s, _) = f.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, c) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert_eq!(s, StatusCode::CONFLICT, "a cancelled turn never resumes: {c}");

    // Unknown and malformed ids.
    let (s, _) = f.post(&format!("/api/v1/agent-runtime/turns/{}/cancel", uuid::Uuid::new_v4()), json!({})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, e) = f.get("/api/v1/agent-runtime/turns/not-a-uuid").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let (s, _) = f.get(&format!("/api/v1/agent-runtime/turns/{}", uuid::Uuid::new_v4())).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_are_behind_the_guards_and_bodies_are_closed() {
    let f = fixture().await;
    // No session: 401, for GET and POST alike.
    let req = Request::get("/api/v1/agent-runtime/status").header(header::HOST, HOST).body(Body::empty()).unwrap();
    let (s, e) = send(&f.app, req).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{e}");
    let req = Request::post("/api/v1/agent-runtime/turns")
        .header(header::HOST, HOST)
        .header(header::ORIGIN, ORIGIN)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"question": "Q ?", "idempotency_key": "k"}).to_string()))
        .unwrap();
    assert_eq!(send(&f.app, req).await.0, StatusCode::UNAUTHORIZED);
    // Wrong Host.
    let req = Request::get("/api/v1/agent-runtime/status")
        .header(header::HOST, "evil.example:7345")
        .header(header::AUTHORIZATION, &f.cookie)
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&f.app, req).await.0, StatusCode::MISDIRECTED_REQUEST);
    // A session but no CSRF token, or no Origin: 403, and no turn started.
    let post_without = |csrf: bool, origin: bool| {
        let mut b = Request::post("/api/v1/agent-runtime/turns")
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, &f.cookie)
            .header(header::CONTENT_TYPE, "application/json");
        if csrf {
            b = b.header("X-CSRF-Token", &f.csrf);
        }
        if origin {
            b = b.header(header::ORIGIN, ORIGIN);
        }
        b.body(Body::from(json!({"question": "Q ?", "idempotency_key": "guarded"}).to_string())).unwrap()
    };
    let (s, e) = send(&f.app, post_without(false, true)).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
    assert_eq!(e["error"]["code"], "BAD_CSRF_TOKEN");
    let (s, e) = send(&f.app, post_without(true, false)).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{e}");
    assert_eq!(e["error"]["code"], "BAD_ORIGIN");
    let (_, page) = f.get("/api/v1/agent-runtime/events?cursor=0").await;
    assert!(page["events"].as_array().unwrap().is_empty(), "a refused POST starts nothing: {page}");

    // Closed bodies: an unknown field is refused by the extractor (422, the
    // one error format), before the runtime sees anything.
    let (s, e) = f
        .post(
            "/api/v1/agent-runtime/turns",
            json!({"question": "Q ?", "idempotency_key": "k", "grant": "grant:00000000-0000-0000-0000-000000000000"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{e}");
    assert_eq!(e["error"]["code"], "INVALID_INPUT");
    let (s, e) = f.post("/api/v1/agent-runtime/turns", json!({"question": "Q ?"})).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "no idempotency key: {e}");
    let id = id_of(&f.start("Quels domaines ?", "closed").await);
    for action in ["resume", "cancel"] {
        let (s, e) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/{action}"), json!({"scope": "all"})).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{action}: {e}");
    }
    // Unknown query parameters too.
    let (s, e) = f.get("/api/v1/agent-runtime/events?cursor=0&since=1").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_page_forward_from_a_cursor() {
    let f = fixture().await;
    let id = id_of(&f.start("Quels liens ?", "events").await);
    f.settle(&id).await;

    let (s, all) = f.get("/api/v1/agent-runtime/events?cursor=0").await;
    assert_eq!(s, StatusCode::OK, "{all}");
    let all = all["events"].as_array().unwrap().clone();
    assert!(all.len() >= 4, "queued, running, tool calls, paused: {all:?}");
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(all[0]["kind"], "turn.queued");
    assert_eq!(all.last().unwrap()["kind"], "turn.paused");

    // Two at a time, following next_cursor, gives the same events.
    let mut cursor = 0;
    let mut paged = Vec::new();
    for _ in 0..all.len() {
        let (s, page) = f.get(&format!("/api/v1/agent-runtime/events?cursor={cursor}&limit=2")).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!(page["missed"], false);
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 2);
        if events.is_empty() {
            assert_eq!(page["next_cursor"], cursor, "an empty page keeps the cursor");
            break;
        }
        cursor = page["next_cursor"].as_u64().unwrap();
        assert_eq!(events.last().unwrap()["seq"], cursor);
        paged.extend(events.iter().cloned());
    }
    assert_eq!(paged, all);
    // Past the end: nothing, same cursor.
    let last = *seqs.last().unwrap();
    let (_, page) = f.get(&format!("/api/v1/agent-runtime/events?cursor={last}")).await;
    assert!(page["events"].as_array().unwrap().is_empty());
    assert_eq!(page["next_cursor"], last);
    // Cursors stay integers a browser can hold exactly (2^53 - 1).
    let top = (1u64 << 53) - 1;
    let (s, page) = f.get(&format!("/api/v1/agent-runtime/events?cursor={top}")).await;
    assert_eq!(s, StatusCode::OK, "{page}");
    // A cursor ahead of every sequence handed out is not honoured silently
    // (SPEC K2): `missed`, and the page starts again from the oldest kept.
    assert_eq!(page["missed"], true, "{page}");
    assert_eq!(page["events"][0]["seq"], all[0]["seq"], "{page}");
    for cursor in [top + 1, u64::MAX] {
        let (s, e) = f.get(&format!("/api/v1/agent-runtime/events?cursor={cursor}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    }
    let (s, e) = f.get("/api/v1/agent-runtime/events?cursor=-1").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_runtime_refuses_new_turns_with_503() {
    let f = fixture().await;
    f.state.agent_runtime().close();
    let (_, st) = f.get("/api/v1/agent-runtime/status").await;
    assert_eq!(st["closed"], true, "{st}");
    assert_eq!(st["ready"], false, "{st}");
    let body = json!({"question": "Q ?", "idempotency_key": "late"});
    let (s, e) = f.post("/api/v1/agent-runtime/turns", body).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{e}");
    assert_eq!(e["error"]["code"], "UNAVAILABLE");
}

// --- local model ----------------------------------------------------------

/// A loopback port with nothing listening (never 8080, M3).
fn closed_port() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        if port != 8080 {
            return port;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_model_is_shown_unavailable_and_never_replaced_by_the_demo() {
    let port = closed_port();
    let f = fixture_with(&local_model(&format!("http://127.0.0.1:{port}"))).await;
    let (s, st) = f.get("/api/v1/agent-runtime/status").await;
    assert_eq!(s, StatusCode::OK, "{st}");
    assert_eq!(st["driver"], "local_model");
    assert_eq!(st["ready"], false, "{st}");
    assert!(!st["detail"].as_str().unwrap().is_empty(), "{st}");
    assert!(st["label"].as_str().unwrap().starts_with(&format!("Agent local · {MODEL}")), "{st}");
    assert_ne!(st["label"], DEMO_LABEL);

    let started = f.start("Quelles sociétés ?", "down").await;
    assert_eq!(started["driver"], "local_model");
    assert_eq!(started["model"], MODEL);
    let t = f.settle(&id_of(&started)).await;
    assert_eq!(t["status"], "MODEL_UNAVAILABLE", "{t}");
    assert_eq!(t["summary"], Value::Null, "no demo summary in its place: {t}");
    assert_eq!(t["research_request"], Value::Null);
    assert_eq!(t["tool_calls"], 0);
    assert!(!t["error"].as_str().unwrap().is_empty());
}

/// The shared scripted model server (labfy-testkit) answering `script` in
/// order; a request past its script is a 500 at once, which the client
/// reports.
async fn fake_provider(script: Vec<Reply>) -> (String, ScriptedModel) {
    let provider = ScriptedModel::with_patience(Duration::ZERO).await;
    push_all(&provider, script);
    (provider.endpoint(), provider)
}

fn push_all(provider: &ScriptedModel, replies: impl IntoIterator<Item = Reply>) {
    for reply in replies {
        provider.push(reply);
    }
}

fn action(v: Value) -> Reply {
    Reply::Answer(v.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_model_turn_reads_through_the_gateway_and_completes_with_its_final() {
    let (endpoint, provider) = fake_provider(vec![]).await;
    let f = fixture_with(&local_model(&endpoint)).await;
    let text = "L'enquête compte des sociétés et des domaines liés.";
    push_all(
        &provider,
        [
            action(json!({"contract": "labfy.agent_model_action.v1", "type": "tool_call",
                      "tool_id": "investigation.get_overview",
                      "arguments": {"investigation_id": f.investigation}})),
            action(json!({"contract": "labfy.agent_model_action.v1", "type": "final", "text": text})),
        ],
    );

    let (_, st) = f.get("/api/v1/agent-runtime/status").await;
    assert_eq!(st["ready"], true, "{st}");
    assert_eq!(st["label"], format!("Agent local · {MODEL}"));

    let started = f.start("Que contient l'enquête ?", "model-1").await;
    let id = id_of(&started);
    let t = f.settle(&id).await;
    // What the provider saw for this turn, before the narrowed turn below
    // (cancelled, but it may reach the provider first) adds its request.
    let seen = provider.requests();
    assert_eq!(t["status"], "COMPLETED", "{t}");
    assert_eq!(t["summary"], text);
    assert_eq!(t["driver"], "local_model");
    assert!(t.get("tools").is_none(), "not narrowed: {t}");
    // A narrowed turn says so; a name outside the catalog is refused.
    let (s, narrowed) = f
        .post(
            "/api/v1/agent-runtime/turns",
            json!({"question": "Q ?", "idempotency_key": "narrow", "tools": ["research.prepare", "investigation.search"]}),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{narrowed}");
    assert_eq!(narrowed["tools"], json!(["investigation.search", "research.prepare"]));
    f.post(&format!("/api/v1/agent-runtime/turns/{}/cancel", id_of(&narrowed)), json!({})).await;
    let (s, e) = f
        .post(
            "/api/v1/agent-runtime/turns",
            json!({"question": "Q ?", "idempotency_key": "bad", "tools": ["shell.exec"]}),
        )
        .await;
    assert_eq!((s, e["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("INVALID_INPUT")), "{e}");
    assert_eq!(t["model"], MODEL);
    assert_eq!(t["tool_calls"], 1, "{t}");
    assert_eq!(t["rounds"], 2, "{t}");
    assert_eq!(t["repairs"], 0, "{t}");

    // The model saw the tool's result, marked untrusted (M2), and the
    // question; it was asked with the configured model id.
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0]["model"], MODEL);
    assert_eq!(seen[0]["stream"], false);
    let second = seen[1]["messages"].to_string();
    assert!(second.contains("UNTRUSTED_DATA"), "{second}");
    assert!(second.contains("investigation.get_overview"), "{second}");
    assert!(seen[0]["messages"].to_string().contains("Que contient l'enquête ?"));

    // The gateway recorded the call in its own turn (M1: every tool_call
    // goes through it).
    let gw = t["gateway_turn_id"].as_str().unwrap();
    let (s, g) = f.get(&format!("/api/v1/agent-tools/turns/{gw}")).await;
    assert_eq!(s, StatusCode::OK, "{g}");
    assert_eq!(g["status"], "COMPLETED", "{g}");
    let kinds = f.event_kinds(&id).await;
    for k in ["turn.queued", "turn.running", "tool.call", "tool.result", "turn.completed"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in {kinds:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_local_model_turn_in_flight_drops_its_answer() {
    let (endpoint, provider) = fake_provider(vec![Reply::Hang]).await;
    let f = fixture_with(&local_model(&endpoint)).await;
    let id = id_of(&f.start("Que contient l'enquête ?", "hang").await);
    // Running, its first model request in flight.
    f.wait_until(&id, "RUNNING with a request in flight", |t| {
        t["status"] == "RUNNING" && t["rounds"].as_u64().unwrap_or(0) >= 1
    })
    .await;
    let deadline = tokio::time::Instant::now() + SETTLE;
    while provider.count() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the model was never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, c) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/cancel"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["status"], "CANCELLED");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = f.turn(&id).await;
    assert_eq!(t["status"], "CANCELLED", "{t}");
    assert_eq!(t["summary"], Value::Null);
    assert_eq!(t["tool_calls"], 0);
    assert_eq!(provider.count(), 1, "no further model call after a cancel");
    let (_, st) = f.get("/api/v1/agent-runtime/status").await;
    assert_eq!(st["queued"], 0, "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_model_turn_pauses_on_research_and_resumes_only_after_a_human_grant() {
    let (endpoint, provider) = fake_provider(vec![]).await;
    let f = fixture_with(&local_model(&endpoint)).await;
    let (_, overview) = f.get(&format!("/api/v1/investigations/{}/overview", f.investigation)).await;
    let evidence = overview["recent_evidence"][0]["id"].as_str().unwrap().to_owned();
    let text = "La recherche autorisée est terminée : voici le bilan.";
    push_all(
        &provider,
        [
            action(json!({"contract": "labfy.agent_model_action.v1", "type": "tool_call",
                      "tool_id": "investigation.get_overview",
                      "arguments": {"investigation_id": f.investigation}})),
            action(json!({"contract": "labfy.agent_model_action.v1", "type": "tool_call",
                      "tool_id": "research.prepare",
                      "arguments": {"selection_ids": [evidence], "question": "Qui héberge ce domaine ?",
                                    "exclusions": []}})),
            action(json!({"contract": "labfy.agent_model_action.v1", "type": "final", "text": text})),
        ],
    );

    let id = id_of(&f.start("Faut-il chercher sur le web ?", "model-research").await);
    let paused = f.settle(&id).await;
    assert_eq!(paused["status"], "AUTHORIZATION_REQUIRED", "{paused}");
    let request = paused["research_request"].as_str().unwrap().to_owned();
    assert_eq!(paused["tool_calls"], 2, "{paused}");
    assert_eq!(provider.count(), 2, "research.prepare stops the loop: no further model call (M8)");
    assert_eq!(f.grants(), 0, "the model never creates a grant (M8)");

    // No grant yet: the turn does not complete, and the model is not asked.
    let (s, _) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert!(s == StatusCode::ACCEPTED || s == StatusCode::FORBIDDEN);
    let back = f.settle(&id).await;
    assert_eq!(back["status"], "AUTHORIZATION_REQUIRED", "{back}");
    assert_eq!(provider.count(), 2);

    let (s, g) = f.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let (s, r) = f.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{r}");
    let done = f.settle(&id).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
    assert_eq!(done["summary"], text);
    let seen = provider.requests();
    assert_eq!(seen.len(), 3, "one model call to write the final summary");
    assert!(seen[2]["messages"].to_string().contains("UNTRUSTED_DATA"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_investigation_or_exclusions_never_runs_the_agent() {
    let f = fixture().await;
    let bodies = [
        json!({"question": "Q ?", "idempotency_key": "a",
               "investigation_id": "investigation:00000000-0000-4000-8000-000000000000"}),
        json!({"question": "Q ?", "idempotency_key": "b", "investigation_id": "nope"}),
        json!({"question": "Q ?", "idempotency_key": "c", "exclusions": vec!["x"; 9]}),
    ];
    for body in bodies {
        let (s, t) = f.post("/api/v1/agent-runtime/turns", body.clone()).await;
        // Refused at once, or accepted and then failed by the gateway
        // (today: the runtime leaves these checks to the gateway).
        if s == StatusCode::ACCEPTED {
            let t = f.settle(&id_of(&t)).await;
            assert_eq!(t["status"], "FAILED", "{body}: {t}");
            assert!(!t["error"].as_str().unwrap().is_empty());
            assert_eq!(t["tool_calls"], 0);
        } else {
            assert!(s == StatusCode::BAD_REQUEST || s == StatusCode::NOT_FOUND, "{body}: {s} {t}");
        }
    }
}

// --- restart (F4) -----------------------------------------------------------

/// A paused demo turn outlives the server: the next server over the same
/// data directory shows it with its events, and it resumes after a grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_turn_outlives_a_restart_and_resumes() {
    let f = fixture().await;
    let id = id_of(&f.start("Quels liens entre les sociétés et les domaines ?", "restart-1").await);
    let paused = f.wait_until(&id, "AUTHORIZATION_REQUIRED", |t| t["status"] == "AUTHORIZATION_REQUIRED").await;
    let request = paused["research_request"].as_str().unwrap().to_owned();
    let kinds_before = f.event_kinds(&id).await;
    f.state.agent_runtime().close();
    assert!(f.state.gateway().flush_journal());

    // The next start: a new state over the same file, journal read back.
    let store = Store::open(f.dir.path()).unwrap();
    let ws = f.state.workspace();
    let limit = RateLimit { burst: 1000, per_second: 1000.0 };
    let state =
        AppState::with_agent(Db::new(store, f.dir.path().to_path_buf()), PORT, ws, limit, &AgentMode::Demo).unwrap();
    state.restore_agent_journal();
    let app = app(state.clone());
    let (cookie, csrf) = common::open_session(&app, &state).await;
    let g = Fixture { dir: f.dir, app, state, investigation: f.investigation, cookie, csrf };

    let back = g.turn(&id).await;
    assert_eq!(back["status"], "AUTHORIZATION_REQUIRED", "{back}");
    assert_eq!(back["research_request"], request.as_str());
    assert_eq!(g.event_kinds(&id).await, kinds_before, "the same events, in order");
    let gw_turn = back["gateway_turn_id"].as_str().unwrap();
    let (s, t) = g.get(&format!("/api/v1/agent-tools/turns/{gw_turn}")).await;
    assert_eq!((s, t["status"].as_str()), (StatusCode::OK, Some("AUTHORIZATION_REQUIRED")), "{t}");

    let (s, r) = g.post(&format!("/api/v1/research/requests/{request}/grant"), grant_body()).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = g.post(&format!("/api/v1/agent-runtime/turns/{id}/resume"), json!({})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{r}");
    let done = g.settle(&id).await;
    assert_eq!(done["status"], "COMPLETED", "{done}");
}
