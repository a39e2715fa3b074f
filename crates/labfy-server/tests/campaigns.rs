//! The campaign runner and the egress routes (SPEC E1–E6, Q2, W4) through
//! the whole guarded application: a REAL workspace, a fake governor and a
//! fake egress served on their real sockets (labfy-ipc, per-boot secret,
//! peer check) in a private runtime directory, answering scripted outcomes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use labfy_core::ObjectRef;
use labfy_ipc::messages::egress::{
    BODY_CHUNK_BYTES, DEFAULT_MAX_BODY_BYTES, EgressRequest, EgressResponse, EgressStatus, FetchMethod, FetchOutcome,
    FetchRequest, FetchStatus, GrantPhase, GrantProposal, GrantRecord,
};
use labfy_ipc::messages::{Boundary, Failure, FailureCode};
use labfy_server::campaigns::{CAMPAIGN_CONCURRENCY, MAX_RUNNING_CAMPAIGNS};
use labfy_server::session::RateLimit;
use labfy_server::{AppState, app, db::Db};
use labfy_store::{NewNote, NewResearchRequest, Store};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

mod common;
use common::{GovernorLog, HOST, PORT, Run, get_req, no_views, runtime_dir, send, serve_fake};
const ORIGIN: &str = "http://127.0.0.1:7345";
/// Longest a test waits for a campaign to end.
const WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------
// A private runtime directory with this boot's secret, and the fakes on it.

/// What the fake egress does with one fetch.
#[derive(Clone)]
enum Step {
    /// Answers this outcome at once.
    Answer(FetchOutcome),
    /// Answers after a delay.
    Slow(Duration, FetchOutcome),
    /// Waits until its grant is stopped, then answers `STOPPED`.
    UntilStopped,
    /// Answers `Failed` (no outcome).
    Fail(FailureCode, &'static str),
}

/// Bodies the fake egress holds "in scratch", by handle (SPEC C3), shared
/// by every fake: an outcome made by [`page`] registers its body here.
static BODIES: LazyLock<Mutex<HashMap<String, Vec<u8>>>> = LazyLock::new(Mutex::default);

#[derive(Default)]
struct EgressLog {
    /// Handles released.
    released: Vec<String>,
    fetches: Vec<FetchRequest>,
    stops: Vec<(String, String)>,
    ends: Vec<(String, String)>,
    proposals: Vec<GrantProposal>,
    in_flight: usize,
    max_in_flight: usize,
    /// `Status` requests answered.
    statuses: usize,
}

#[derive(Clone)]
struct FakeEgress {
    log: Arc<Mutex<EgressLog>>,
    stopped: CancellationToken,
    /// What a human decided on every grant (SPEC T2); approved by default.
    phase: Arc<Mutex<GrantPhase>>,
    /// What `Status` answers (`Failed` when `None`).
    status: Arc<Mutex<Option<EgressStatus>>>,
}

/// The fake's record of a proposal, in `phase`.
fn record(p: &GrantProposal, phase: GrantPhase) -> GrantRecord {
    GrantRecord {
        grant_id: p.grant_id,
        workspace_id: p.workspace_id,
        campaign_id: p.campaign_id,
        urls: p.urls.clone(),
        hosts: p.hosts.clone(),
        max_requests: p.max_requests,
        max_bytes: p.max_bytes,
        summary: p.summary.clone(),
        phase,
        proposed_at: chrono::Utc::now().to_rfc3339(),
        expires_at: chrono::Utc::now().to_rfc3339(),
        decided_at: None,
        decided_via: (phase == GrantPhase::Approved).then(|| "terminal".to_owned()),
        revoked_at: None,
        campaign_ended_at: None,
        requests_used: 0,
        bytes_used: 0,
        confirm_url: (phase == GrantPhase::Proposed).then(|| "http://127.0.0.1:9/login?code=x".to_owned()),
    }
}

type Script = Arc<dyn Fn(&FetchRequest) -> Step + Send + Sync>;

/// Serves `egress.sock`: fetches follow `script`, `Status` answers `status`
/// (or `Failed` when `None`), stops and ends are logged.
fn fake_egress(run: &Run, script: Script, status: Option<EgressStatus>) -> FakeEgress {
    let fake = FakeEgress {
        log: Arc::default(),
        stopped: CancellationToken::new(),
        phase: Arc::new(Mutex::new(GrantPhase::Approved)),
        status: Arc::new(Mutex::new(status)),
    };
    let f = fake.clone();
    serve_fake(run, Boundary::Egress, move |req: EgressRequest, _peer| {
        let (f, script) = (f.clone(), script.clone());
        async move {
            match req {
                EgressRequest::Fetch(r) => {
                    let step = script(&r);
                    {
                        let mut log = f.log.lock().unwrap();
                        log.fetches.push(r.clone());
                        log.in_flight += 1;
                        log.max_in_flight = log.max_in_flight.max(log.in_flight);
                    }
                    let answer = match step {
                        Step::Answer(o) => EgressResponse::Fetched(Box::new(o)),
                        Step::Slow(d, o) => {
                            tokio::time::sleep(d).await;
                            EgressResponse::Fetched(Box::new(o))
                        }
                        Step::UntilStopped => {
                            f.stopped.cancelled().await;
                            EgressResponse::Fetched(Box::new(outcome(&r.url, FetchStatus::Stopped, "grant revoked")))
                        }
                        Step::Fail(code, message) => EgressResponse::Failed(Failure::new(code, message)),
                    };
                    f.log.lock().unwrap().in_flight -= 1;
                    answer
                }
                EgressRequest::StopGrant { workspace_id, grant_id } => {
                    f.log.lock().unwrap().stops.push((workspace_id.to_string(), grant_id.to_string()));
                    f.stopped.cancel();
                    EgressResponse::Stopped { stopped: 1 }
                }
                EgressRequest::EndCampaign { workspace_id, campaign_id } => {
                    f.log.lock().unwrap().ends.push((workspace_id.to_string(), campaign_id.to_string()));
                    EgressResponse::Stopped { stopped: 0 }
                }
                EgressRequest::Status {} => match f.count_status() {
                    Some(s) => EgressResponse::Status(s),
                    None => EgressResponse::Failed(Failure {
                        code: FailureCode::Unavailable,
                        message: "arti is\nnot configured".into(),
                    }),
                },
                EgressRequest::ReadBody { handle, offset, .. } => {
                    let bodies = BODIES.lock().unwrap();
                    match bodies.get(&handle) {
                        Some(b) if offset <= b.len() as u64 => {
                            let end = (offset + BODY_CHUNK_BYTES).min(b.len() as u64);
                            EgressResponse::BodyChunk {
                                data_base64: base64::engine::general_purpose::STANDARD
                                    .encode(&b[offset as usize..end as usize]),
                                eof: end == b.len() as u64,
                            }
                        }
                        _ => EgressResponse::Failed(Failure {
                            code: FailureCode::NotFound,
                            message: "no such body: it was released, expired or never kept".into(),
                        }),
                    }
                }
                EgressRequest::ReleaseBody { handle, .. } => {
                    let released = BODIES.lock().unwrap().remove(&handle).is_some();
                    f.log.lock().unwrap().released.push(handle);
                    EgressResponse::BodyReleased { released }
                }
                EgressRequest::Propose(p) => {
                    let phase = *f.phase.lock().unwrap();
                    f.log.lock().unwrap().proposals.push((*p).clone());
                    EgressResponse::Grant(Box::new(record(&p, phase)))
                }
                EgressRequest::GrantState { grant_id, .. } => {
                    let phase = *f.phase.lock().unwrap();
                    let log = f.log.lock().unwrap();
                    match log.proposals.iter().find(|p| p.grant_id == grant_id) {
                        Some(p) => EgressResponse::Grant(Box::new(record(p, phase))),
                        None => EgressResponse::Failed(Failure {
                            code: FailureCode::NotFound,
                            message: format!("egress has no record of {grant_id}"),
                        }),
                    }
                }
                other => EgressResponse::Failed(Failure {
                    code: FailureCode::InvalidInput,
                    message: format!("the test egress does not answer {other:?}"),
                }),
            }
        }
    });
    fake
}

impl FakeEgress {
    fn fetched_urls(&self) -> Vec<String> {
        self.log.lock().unwrap().fetches.iter().map(|f| f.url.clone()).collect()
    }

    /// Counts one `Status` request; what it answers.
    fn count_status(&self) -> Option<EgressStatus> {
        self.log.lock().unwrap().statuses += 1;
        self.status.lock().unwrap().clone()
    }
}

/// An outcome of `status` with `reason`, no page.
fn outcome(url: &str, status: FetchStatus, reason: &str) -> FetchOutcome {
    FetchOutcome {
        status,
        reason: Some(reason.into()),
        url: url.into(),
        final_url: None,
        redirects: vec![],
        http_status: None,
        headers: vec![],
        content_type: None,
        body_handle: None,
        body_bytes: 0,
        body_sha256: None,
        started_at: chrono::Utc::now().to_rfc3339(),
        elapsed_ms: 3,
        isolation: "test-isolation".into(),
    }
}

/// A `FETCHED` outcome: `body` with HTTP `http_status`.
fn page(url: &str, body: &str, http_status: u16) -> FetchOutcome {
    document(url, body.as_bytes(), "text/html; charset=utf-8", http_status)
}

/// A `FETCHED` outcome of any type, its body waiting in the fake egress.
fn document(url: &str, body: &[u8], content_type: &str, http_status: u16) -> FetchOutcome {
    let handle = Uuid::new_v4().to_string();
    if !body.is_empty() {
        BODIES.lock().unwrap().insert(handle.clone(), body.to_vec());
    }
    FetchOutcome {
        status: FetchStatus::Fetched,
        reason: None,
        url: url.into(),
        final_url: Some(url.into()),
        redirects: vec![],
        http_status: Some(http_status),
        headers: vec![("content-type".into(), content_type.into()), ("server".into(), "test".into())],
        content_type: Some(content_type.into()),
        body_handle: (!body.is_empty()).then_some(handle),
        body_bytes: body.len() as u64,
        body_sha256: Some(labfy_store::sha256_hex(body)),
        started_at: chrono::Utc::now().to_rfc3339(),
        elapsed_ms: 42,
        isolation: "test-isolation".into(),
    }
}

/// The shared fake governor, its state unread.
fn fake_governor(run: &Run, refuse: Option<&'static str>) -> Arc<Mutex<GovernorLog>> {
    common::fake_governor(run, refuse, no_views)
}

// ---------------------------------------------------------------------------
// A server over a REAL workspace, with research requests ready to grant.

struct Fixture {
    dir: TempDir,
    db: Db,
    state: AppState,
    app: Router,
    workspace: Uuid,
    evidence: ObjectRef,
    cookie: String,
    csrf: String,
}

/// A REAL workspace with one note, served with the runtime directory `run`
/// (none: no supervisor, so no governor and no egress).
async fn fixture(run: Option<&Path>) -> Fixture {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Enquête réelle", "analyst").unwrap();
    let note = NewNote {
        title: "Société Durand".into(),
        content: "La société Durand possède le domaine durand.example.".into(),
        source: None,
        dated_at: None,
    };
    let evidence = store.add_note(ws.id(), &inv, &note, "analyst").unwrap();
    let db = Db::new(store, dir.path().to_path_buf());
    let limit = RateLimit { burst: 1000, per_second: 1000.0 };
    // Fetched bodies are read by the confined parser worker: the built server.
    let mut state = AppState::new(db.clone(), PORT, ws.id(), limit)
        .unwrap()
        .with_parser(PathBuf::from(env!("CARGO_BIN_EXE_labfy-server")));
    if let Some(run) = run {
        state = state.with_runtime_dir(run.to_path_buf());
    }
    let app = app(state.clone());
    let (cookie, csrf) = common::open_session(&app, &state).await;
    Fixture { dir, db, state, app, workspace: ws.id(), evidence, cookie, csrf }
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

    /// A research request prepared (as `research.prepare` would) under the
    /// catalog in force, waiting for a decision.
    fn prepare(&self, question: &str) -> String {
        let catalog = self.state.gateway().catalog();
        let req = NewResearchRequest {
            selection: vec![self.evidence],
            question: question.into(),
            exclusions: vec![],
            turn_id: Uuid::new_v4(),
            call_id: Uuid::new_v4(),
            idempotency_key: Uuid::new_v4().to_string(),
            requested_by: "agent:demo".into(),
            contract_fingerprint: catalog.tool(labfy_gateway::ToolId::ResearchPrepare).fingerprint.clone(),
            catalog_fingerprint: catalog.fingerprint().to_owned(),
        };
        let ws = self.workspace;
        let (r, created) = self.db.write_blocking(|s| s.prepare_research(ws, &req)).unwrap();
        assert!(created);
        r.to_string()
    }

    async fn grant(&self, request: &str, urls: &[&str]) -> (StatusCode, Value) {
        let body = json!({"scope": {"hosts": ["example.org", "*.example.org"]},
                          "budget": {"max_requests": 32, "max_bytes": 1_048_576},
                          "expires_in_minutes": 60, "urls": urls});
        self.post(&format!("/api/v1/research/requests/{request}/grant"), body).await
    }

    /// Grants `request` with `urls`; returns (grant, campaign).
    async fn granted(&self, request: &str, urls: &[&str]) -> (String, String) {
        let (s, g) = self.grant(request, urls).await;
        assert_eq!(s, StatusCode::CREATED, "{g}");
        (g["grant"].as_str().unwrap().to_owned(), g["campaign"].as_str().unwrap().to_owned())
    }

    /// The request as the API shows it, campaign included.
    async fn request(&self, request: &str) -> Value {
        let (s, r) = self.get(&format!("/api/v1/research/requests/{request}")).await;
        assert_eq!(s, StatusCode::OK, "{r}");
        r["request"].clone()
    }

    /// Waits until the campaign of `request` has ended and its task has
    /// left (egress told, reservation released); returns the campaign.
    async fn ended(&self, request: &str) -> Value {
        let started = Instant::now();
        loop {
            let c = self.request(request).await["campaign"].clone();
            if ["COMPLETED", "FAILED", "STOPPED"].contains(&c["status"].as_str().unwrap_or("")) {
                assert!(self.state.campaigns().idle(WAIT).await, "the campaign's task did not leave");
                return c;
            }
            assert!(started.elapsed() < WAIT, "the campaign did not end: {c}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn count(&self, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(self.dir.path().join(labfy_store::DB_FILE)).unwrap();
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

fn statuses(c: &Value) -> Vec<String> {
    c["items"].as_array().unwrap().iter().map(|i| i["status"].as_str().unwrap().to_owned()).collect()
}

const A: &str = "https://example.org/a";
const B: &str = "https://www.example.org/b?x=1";
const C: &str = "https://example.org/c";

/// Pages for A and B, a refusal for C.
fn two_pages_and_a_refusal() -> Script {
    Arc::new(|r: &FetchRequest| match r.url.as_str() {
        A => Step::Answer(page(A, "<html><body>Durand <b>page A</b></body></html>", 200)),
        B => Step::Answer(page(B, "Durand, page B (404 is still a page)", 404)),
        _ => Step::Answer(outcome(&r.url, FetchStatus::Refused, "over the grant's byte budget")),
    })
}

// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_real_grant_fetches_its_urls_through_egress_and_stores_evidence_with_provenance() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    // Egress keeps bodies of up to 2 MiB (the operator's bound).
    let status = EgressStatus { ready: true, max_body_bytes: 2 << 20, ..bootstrapping() };
    let egress = fake_egress(&run, two_pages_and_a_refusal(), Some(status));
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    let (grant, campaign) = f.granted(&request, &[A, B, C]).await;

    let c = f.ended(&request).await;
    assert_eq!(c["id"], campaign.as_str());
    assert_eq!(c["status"], "COMPLETED", "{c}");
    assert_eq!(c["synthetic"], false);
    assert_eq!(
        (c["items_total"].as_i64(), c["items_done"].as_i64(), c["items_failed"].as_i64()),
        (Some(3), Some(2), Some(1))
    );
    assert_eq!(statuses(&c), ["FETCHED", "FETCHED", "REFUSED"]);
    assert!(c["started_at"].is_string() && c["finished_at"].is_string(), "{c}");
    assert!(c["detail"].as_str().unwrap().contains("2 of 3"), "{c}");
    let items = c["items"].as_array().unwrap();
    assert_eq!(items[1]["http_status"], 404);
    assert_eq!(items[2]["reason"], "over the grant's byte budget");
    assert!(items[2].get("evidence").is_none());

    // Each page is evidence whose provenance names the fetch (E5).
    for (i, url) in [(0, A), (1, B)] {
        let ev = items[i]["evidence"].as_str().unwrap();
        assert!(c["evidence"].as_array().unwrap().iter().any(|e| e == ev));
        let (s, e) = f.get(&format!("/api/v1/evidence/{ev}")).await;
        assert_eq!(s, StatusCode::OK, "{e}");
        assert_eq!(e["source"], url);
        let fetch = &e["fetch"];
        assert_eq!(fetch["campaign"], campaign.as_str());
        assert_eq!(fetch["grant"], grant.as_str());
        assert_eq!(fetch["position"], i);
        assert_eq!(fetch["url"], url);
        assert_eq!(fetch["isolation"], "test-isolation");
        assert_eq!(fetch["body_sha256"].as_str().unwrap().len(), 64);
        let (s, p) = f.get(&format!("/api/v1/provenance/{ev}")).await;
        assert_eq!(s, StatusCode::OK, "{p}");
        assert!(p.to_string().contains(&campaign), "{p}");
    }
    let (_, ex) = f.get(&format!("/api/v1/evidence/{}/excerpt", items[0]["evidence"].as_str().unwrap())).await;
    let text = ex["text"].as_str().unwrap();
    assert!(text.contains("page A") && !text.contains("<b>"), "the page's text, as the parser read it: {ex}");

    // Egress was asked once per URL, in order, under the grant, GET only.
    let log = egress.log.lock().unwrap();
    assert_eq!(log.fetches.iter().map(|r| r.url.as_str()).collect::<Vec<_>>(), [A, B, C]);
    for r in &log.fetches {
        assert_eq!(r.workspace_id, f.workspace);
        assert_eq!(r.campaign_id.to_string(), campaign);
        assert_eq!(r.grant_id.to_string(), grant);
        assert_eq!(r.method, FetchMethod::Get);
    }
    assert_eq!(log.ends, [(f.workspace.to_string(), campaign.clone())], "egress forgets the campaign once");
    assert!(log.stops.is_empty());
    assert_eq!(log.released.len(), 2, "each body read is released at once");
    drop(log);
    // The governor admitted it (scratch for every item, one at a time) and
    // got its reservation back.
    let gov = gov.lock().unwrap();
    assert_eq!(gov.asks.len(), 1);
    assert_eq!(gov.asks[0].campaign.to_string(), campaign);
    assert_eq!(gov.asks[0].scratch_bytes, 3 * (2 << 20), "scratch for 3 bodies of egress's bound");
    assert_eq!(gov.asks[0].concurrency, CAMPAIGN_CONCURRENCY);
    assert_eq!(gov.released, ["res-1"]);
    assert_eq!(gov.renewals, ["res-1", "res-1", "res-1"], "the lease is renewed before each item (F5)");
    assert_eq!(f.count("SELECT count(*) FROM audit_log WHERE action = 'campaign.admit'"), 1);
}

/// SPEC F5: once the governor's pressure reaction has released a running
/// campaign's reservation, the runner's next renewal is told so, with the
/// reason: the campaign ends `STOPPED` with it, its planned items
/// `STOPPED`, and nothing more is fetched. Nothing is released that the
/// governor no longer holds.
#[tokio::test]
async fn a_reservation_the_governor_released_stops_the_campaign_at_its_next_renewal() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let why = "res-1 was released: stopped under pressure after 3 samples: swap 91 % used (threshold 50 %)";
    gov.lock().unwrap().revoke_after = Some((1, why.to_owned()));
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B, C]).await;

    let c = f.ended(&request).await;
    assert_eq!(c["status"], "STOPPED", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.starts_with("stopped by the resource governor: res-1 was released"), "{detail}");
    assert!(detail.contains("swap 91 %"), "{detail}");
    assert_eq!(statuses(&c), ["FETCHED", "STOPPED", "STOPPED"]);
    assert_eq!(egress.fetched_urls(), [A], "nothing is fetched once the governor said so");
    assert_eq!(egress.log.lock().unwrap().ends.len(), 1, "egress forgets the campaign");
    let gov = gov.lock().unwrap();
    assert_eq!(gov.renewals, ["res-1", "res-1"]);
    assert!(gov.released.is_empty(), "the governor no longer held the reservation");
}

/// SPEC F4: a server just restarted resumes its campaigns before the
/// supervisor has told the governor the server's new pid, so the governor
/// does not take the call yet. The runner asks again for a while instead
/// of failing the campaign.
#[tokio::test]
async fn an_admission_the_governor_does_not_take_yet_is_asked_again() {
    let run = runtime_dir();
    let _egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(f.request(&request).await["campaign"]["status"], "PENDING", "not admitted without a governor");
    let gov = fake_governor(&run, None);
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "COMPLETED", "{c}");
    assert_eq!(gov.lock().unwrap().asks.len(), 1);
}

/// SPEC V8: a grant confirmed while Tor bootstraps is not spent for
/// nothing — its campaign waits for Tor (nothing admitted, nothing asked of
/// egress's fetches), then runs.
#[tokio::test]
async fn a_confirmed_campaign_waits_for_tor_then_runs() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), Some(bootstrapping()));
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B, C]).await;
    // Asked twice: the runner has seen Tor not ready, waited, and asked again.
    let started = Instant::now();
    while egress.log.lock().unwrap().statuses < 2 {
        assert!(started.elapsed() < WAIT, "the runner never asked egress whether Tor is ready");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let c = f.request(&request).await["campaign"].clone();
    assert_eq!(c["status"], "PENDING", "{c}");
    assert_eq!(statuses(&c), ["PLANNED", "PLANNED", "PLANNED"]);
    assert!(egress.fetched_urls().is_empty(), "a fetch before Tor was ready");
    assert!(gov.lock().unwrap().asks.is_empty(), "admitted before Tor was ready");
    // Tor ready: the campaign runs as any other.
    *egress.status.lock().unwrap() = Some(EgressStatus { ready: true, bootstrap_percent: 100, ..bootstrapping() });
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "COMPLETED", "{c}");
    assert_eq!(statuses(&c), ["FETCHED", "FETCHED", "REFUSED"]);
    assert_eq!(gov.lock().unwrap().asks.len(), 1);
}

#[tokio::test]
async fn tor_unavailable_fails_the_campaign_and_stops_the_rest_without_retry() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let script: Script = Arc::new(|r: &FetchRequest| match r.url.as_str() {
        A => Step::Answer(page(A, "page A", 200)),
        _ => Step::Answer(outcome(&r.url, FetchStatus::Unavailable, "Tor is not bootstrapped (45 %)")),
    });
    let egress = fake_egress(&run, script, None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    let (_, campaign) = f.granted(&request, &[A, B, C]).await;

    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.starts_with("Tor unavailable: Tor is not bootstrapped (45 %)"), "{detail}");
    assert!(detail.ends_with("nothing was fetched in clear"), "{detail}");
    assert_eq!(statuses(&c), ["FETCHED", "UNAVAILABLE", "STOPPED"]);
    assert_eq!(c["items"][1]["reason"], "Tor is not bootstrapped (45 %)");
    // Two fetches asked, no third, no second try.
    assert_eq!(egress.fetched_urls(), [A, B]);
    assert_eq!(egress.log.lock().unwrap().ends.len(), 1);
    assert_eq!(gov.lock().unwrap().released, ["res-1"]);
    assert_eq!(c["id"], campaign.as_str());
}

#[tokio::test]
async fn an_unreachable_egress_is_unavailable_too() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    // No egress socket at all.
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "{c}");
    // Without egress no human can confirm the grant (SPEC T2): it fails at
    // once (E6), before the governor is asked anything.
    assert!(c["detail"].as_str().unwrap().starts_with("egress unreachable: the grant cannot be confirmed"), "{c}");
    assert_eq!(statuses(&c), ["STOPPED", "STOPPED"]);
    assert!(gov.lock().unwrap().asks.is_empty());
    assert_eq!(f.count("SELECT count(*) FROM evidence WHERE source LIKE 'https://%'"), 0);
    // The blob of the page whose digest lied stays an unreferenced file at
    // most; no blob row, and no temporary file is left behind.
    assert_eq!(f.count("SELECT count(*) FROM blobs"), 0);
    let tmp = f.dir.path().join("blobs").join("tmp");
    assert!(!tmp.exists() || std::fs::read_dir(&tmp).unwrap().count() == 0, "a half blob was left");
}

#[tokio::test]
async fn fetched_documents_of_any_type_are_kept_with_their_original_and_their_text() {
    // SPEC C3: a PDF, a page in Latin-1 and an image, each larger than one
    // IPC frame where it can be, all through the blob store and the parser.
    let run = runtime_dir();
    fake_governor(&run, None);
    let filler: Vec<String> =
        (0..20_000).map(|i| format!("Ligne {i} du rapport annuel de la societe Durand, exercice 2025.")).collect();
    let mut lines = vec!["Rapport annuel de la société Durand"];
    lines.extend(filler.iter().take(40).map(String::as_str));
    let pdf = labfy_parse::fixtures::pdf(&lines);
    let mut latin1 =
        b"<html><head><meta charset=\"iso-8859-1\"><title>Soci\xe9t\xe9 Durand</title></head><body>".to_vec();
    for l in &filler {
        latin1.extend_from_slice(l.as_bytes());
        latin1.extend_from_slice(b" \xe9t\xe9<br>");
    }
    latin1.extend_from_slice(b"</body></html>");
    assert!(latin1.len() as u64 > 2 * BODY_CHUNK_BYTES, "read in several chunks");
    let png = [&b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..], &[7u8; 3000][..]].concat();
    let (p, l, i) = (pdf.clone(), latin1.clone(), png.clone());
    let script: Script = Arc::new(move |r: &FetchRequest| match r.url.as_str() {
        A => Step::Answer(document(A, &p, "application/pdf", 200)),
        B => Step::Answer(document(B, &l, "text/html", 200)),
        _ => Step::Answer(document(C, &i, "image/png", 200)),
    });
    let egress = fake_egress(&run, script, None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B, C]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "COMPLETED", "{c}");
    assert_eq!(statuses(&c), ["FETCHED", "FETCHED", "FETCHED"], "{c}");
    let items = c["items"].as_array().unwrap();
    for (i, (bytes, mime, has_text)) in
        [(&pdf, "application/pdf", "Rapport annuel"), (&latin1, "text/html", "Ligne 0 "), (&png, "image/png", "")]
            .into_iter()
            .enumerate()
    {
        let ev = items[i]["evidence"].as_str().unwrap();
        let (s, e) = f.get(&format!("/api/v1/evidence/{ev}")).await;
        assert_eq!(s, StatusCode::OK, "{e}");
        assert_eq!(e["mime"], mime, "{e}");
        assert_eq!(e["byte_len"], bytes.len(), "{e}");
        assert_eq!(e["fetch"]["body_sha256"], labfy_store::sha256_hex(bytes));
        // The original, byte for byte, from the blob store.
        let stored =
            std::fs::read(labfy_store::blobs::BlobStore::at(f.dir.path()).path(&labfy_store::sha256_hex(bytes)))
                .unwrap();
        assert!(stored == *bytes, "item {i}: the original bytes differ");
        let (_, ex) = f.get(&format!("/api/v1/evidence/{ev}/excerpt")).await;
        let text = ex["text"].as_str().unwrap_or_default();
        if has_text.is_empty() {
            assert!(text.is_empty(), "an image has no text: {ex}");
        } else {
            assert!(text.contains(has_text), "item {i}: {has_text} not in {}", &text[..text.len().min(300)]);
        }
    }
    let (_, e) = f.get(&format!("/api/v1/evidence/{}", items[1]["evidence"].as_str().unwrap())).await;
    assert_eq!(e["title"], "Société Durand — www.example.org", "the charset honoured: {e}");
    let (_, ex) = f.get(&format!("/api/v1/evidence/{}/excerpt", items[1]["evidence"].as_str().unwrap())).await;
    assert!(ex["text"].as_str().unwrap().contains("été"), "Latin-1 decoded: {ex}");
    assert_eq!(f.count("SELECT count(*) FROM evidence WHERE content LIKE '%Ligne 19999 du rapport%'"), 1, "all of it");
    assert_eq!(egress.log.lock().unwrap().released.len(), 3, "every body released");
    assert!(BODIES.lock().unwrap().keys().all(|h| !egress.log.lock().unwrap().released.contains(h)));
}

#[tokio::test]
async fn without_a_supervisor_there_is_no_governor_and_no_egress() {
    let f = fixture(None).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "{c}");
    assert!(c["detail"].as_str().unwrap().contains("no egress in this run"), "{c}");
    assert_eq!(statuses(&c), ["STOPPED"]);
    // Nothing was admitted: there was nothing a human could confirm.
    assert_eq!(f.count("SELECT count(*) FROM audit_log WHERE action = 'campaign.admit'"), 0);
}

/// SPEC T2: a REAL grant is only a proposal to egress; the campaign waits,
/// asking nothing of the governor and fetching nothing, until a human
/// confirms it outside the server — and the UI is told where.
#[tokio::test]
async fn a_real_campaign_waits_for_a_human_to_confirm_it_outside_the_server() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    *egress.phase.lock().unwrap() = GrantPhase::Proposed;
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    let (s, g) = f.grant(&request, &[A, B]).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let grant = g["grant"].as_str().unwrap().to_owned();
    assert_eq!(g["confirmation"]["phase"], "PROPOSED", "{g}");
    assert_eq!(g["confirmation"]["confirm_url"], "http://127.0.0.1:9/login?code=x", "{g}");
    assert_eq!(g["confirmation"]["command"], format!("labfy grant approve {grant}"), "{g}");
    // What egress was asked to record: the exact URLs, the scope, the
    // budget and the question the analyst saw.
    let p = egress.log.lock().unwrap().proposals[0].clone();
    assert_eq!(
        (p.grant_id.to_string().as_str(), p.urls.as_slice()),
        (grant.as_str(), [A.to_owned(), B.to_owned()].as_slice())
    );
    assert_eq!((p.max_requests, p.max_bytes, p.summary.as_str()), (32, 1_048_576, "Que publie la société Durand ?"));
    assert!((59..=60).contains(&p.expires_in_minutes), "{}", p.expires_in_minutes);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(f.request(&request).await["campaign"]["status"], "PENDING");
    assert!(egress.fetched_urls().is_empty() && gov.lock().unwrap().asks.is_empty());
    let (s, state) = f.get(&format!("/api/v1/grants/{grant}/confirmation")).await;
    assert_eq!((s, state["phase"].as_str()), (StatusCode::OK, Some("PROPOSED")), "{state}");
    // The human confirms: the campaign runs.
    *egress.phase.lock().unwrap() = GrantPhase::Approved;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "COMPLETED", "{c}");
    assert_eq!(egress.fetched_urls(), [A, B]);
}

#[tokio::test]
async fn a_grant_refused_at_its_confirmation_fails_its_campaign() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    *egress.phase.lock().unwrap() = GrantPhase::Refused;
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "{c}");
    assert!(c["detail"].as_str().unwrap().contains("refused at its confirmation"), "{c}");
    assert!(egress.fetched_urls().is_empty() && gov.lock().unwrap().asks.is_empty());
}

#[tokio::test]
async fn revoking_during_a_slow_fetch_stops_the_campaign_and_tells_egress() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let script: Script = Arc::new(|_: &FetchRequest| Step::UntilStopped);
    let egress = fake_egress(&run, script, None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    let (grant, campaign) = f.granted(&request, &[A, B]).await;
    // Wait for the first fetch to be in flight.
    let started = Instant::now();
    while egress.log.lock().unwrap().in_flight == 0 {
        assert!(started.elapsed() < WAIT, "no fetch in flight");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (s, r) = f.post(&format!("/api/v1/grants/{grant}/revoke"), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["campaigns_stopped"], 1);
    assert_eq!(r["egress"]["told"], true, "{r}");

    let c = f.ended(&request).await;
    assert_eq!(c["status"], "STOPPED", "{c}");
    assert!(c["detail"].as_str().unwrap().contains("revoked"), "{c}");
    assert_eq!(statuses(&c), ["STOPPED", "STOPPED"]);
    assert_eq!(c["items_done"], 0);
    assert!(c["evidence"].as_array().unwrap().is_empty());
    let log = egress.log.lock().unwrap();
    assert_eq!(log.stops, [(f.workspace.to_string(), grant.clone())]);
    assert_eq!(log.fetches.len(), 1, "nothing was asked after the stop");
    drop(log);
    assert_eq!(gov.lock().unwrap().released, ["res-1"]);
    // Nothing was recorded after the stop: no item outcome, no fetch.
    assert_eq!(f.count("SELECT count(*) FROM audit_log WHERE action IN ('campaign.item', 'campaign.fetch')"), 0);
    assert_eq!(f.count("SELECT count(*) FROM audit_log WHERE action = 'campaign.finish'"), 0);
    assert_eq!(c["id"], campaign.as_str());
}

#[tokio::test]
async fn a_governor_refusal_fails_the_campaign_with_its_reason() {
    let run = runtime_dir();
    let gov = fake_governor(&run, Some("not enough scratch space after headroom"));
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.contains("refused by the governor: not enough scratch space after headroom"), "{detail}");
    assert!(detail.contains("model:qwen.gguf"), "{detail}");
    assert_eq!(statuses(&c), ["STOPPED", "STOPPED"]);
    assert!(egress.fetched_urls().is_empty(), "nothing is fetched without admission");
    assert!(egress.log.lock().unwrap().ends.is_empty());
    let gov = gov.lock().unwrap();
    assert_eq!(gov.asks.len(), 1, "no retry loop");
    assert!(gov.released.is_empty(), "nothing was reserved");
}

#[tokio::test]
async fn at_most_two_campaigns_run_at_once_and_the_others_wait() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let script: Script = Arc::new(|r: &FetchRequest| Step::Slow(Duration::from_secs(1), page(&r.url, "lent", 200)));
    let egress = fake_egress(&run, script, None);
    let f = fixture(Some(&run.dir)).await;
    let requests: Vec<String> = (0..3).map(|i| f.prepare(&format!("Question {i} sur Durand"))).collect();
    for r in &requests {
        f.granted(r, &[A]).await;
    }
    for r in &requests {
        assert_eq!(f.ended(r).await["status"], "COMPLETED");
    }
    let log = egress.log.lock().unwrap();
    assert_eq!(log.fetches.len(), 3);
    assert_eq!(log.max_in_flight, MAX_RUNNING_CAMPAIGNS);
    assert_eq!(gov.lock().unwrap().released.len(), 3);
}

#[tokio::test]
async fn a_page_the_store_refuses_fails_its_item_and_the_campaign_goes_on() {
    let run = runtime_dir();
    fake_governor(&run, None);
    let script: Script = Arc::new(|r: &FetchRequest| match r.url.as_str() {
        A => {
            let mut o = page(A, "page A", 200);
            o.body_sha256 = Some("0".repeat(64));
            Step::Answer(o)
        }
        B => {
            // A body egress no longer has (expired): nothing half-kept.
            let mut o = page(B, "page B", 200);
            BODIES.lock().unwrap().remove(o.body_handle.as_ref().unwrap());
            o.body_handle = Some(Uuid::new_v4().to_string());
            Step::Answer(o)
        }
        _ => Step::Fail(FailureCode::InvalidInput, "method not allowed"),
    });
    fake_egress(&run, script, None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B, C]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "no page fetched: {c}");
    assert_eq!(statuses(&c), ["FAILED", "FAILED", "REFUSED"]);
    assert!(c["items"][0]["reason"].as_str().unwrap().contains("SHA-256"), "{c}");
    assert!(c["items"][1]["reason"].as_str().unwrap().contains("could not be read from egress"), "{c}");
    assert!(c["items"][2]["reason"].as_str().unwrap().contains("INVALID_INPUT"), "{c}");
    assert_eq!(f.count("SELECT count(*) FROM evidence WHERE source LIKE 'https://%'"), 0);
}

#[tokio::test]
async fn unfinished_campaigns_resume_at_start_and_planned_items_continue() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    // Two campaigns granted by a previous run (straight in the store): one
    // still PENDING, one RUNNING with its first item done.
    let ws = f.workspace;
    let decision = |urls: &[&str]| labfy_store::GrantDecision {
        scope: labfy_store::ResearchScope { hosts: vec!["example.org".into(), "*.example.org".into()] },
        budget: labfy_store::ResearchBudget { max_requests: 10, max_bytes: 1_048_576 },
        expires_in_minutes: 60,
        contract_fingerprints: f.state.gateway().catalog().fingerprints(),
        current_prepare_fingerprint: f
            .state
            .gateway()
            .catalog()
            .tool(labfy_gateway::ToolId::ResearchPrepare)
            .fingerprint
            .clone(),
        decided_by: "analyst".into(),
        urls: urls.iter().map(|u| (*u).to_owned()).collect(),
    };
    let pending = f.prepare("Première question");
    let running = f.prepare("Seconde question");
    let p: ObjectRef = pending.parse().unwrap();
    let r: ObjectRef = running.parse().unwrap();
    let d1 = decision(&[A]);
    f.db.write_blocking(|s| s.grant_research(ws, &p, &d1)).unwrap();
    let d2 = decision(&[C, A]);
    let out = f.db.write_blocking(|s| s.grant_research(ws, &r, &d2)).unwrap();
    f.db.write_blocking(|s| {
        let campaign = out.campaign;
        s.campaign_admitted(ws, &campaign, "admitted before the restart")?;
        s.campaign_started(ws, &campaign)?;
        s.record_item_outcome(ws, &campaign, 0, labfy_store::ItemStatus::Refused, "refused before", 0)
    })
    .unwrap();

    assert_eq!(f.state.campaigns().resume_unfinished().await.unwrap(), 2);
    let c1 = f.ended(&pending).await;
    assert_eq!(c1["status"], "COMPLETED", "{c1}");
    assert_eq!(statuses(&c1), ["FETCHED"]);
    let c2 = f.ended(&running).await;
    assert_eq!(c2["status"], "COMPLETED", "{c2}");
    assert_eq!(statuses(&c2), ["REFUSED", "FETCHED"]);
    assert_eq!(c2["items"][0]["reason"], "refused before", "an ended item is not fetched again");
    let mut urls = egress.fetched_urls();
    urls.sort();
    assert_eq!(urls, [A, A], "only the planned items were fetched");
    assert_eq!(gov.lock().unwrap().released.len(), 2);
    // Nothing unfinished is left to resume.
    assert_eq!(f.state.campaigns().resume_unfinished().await.unwrap(), 0);
}

#[tokio::test]
async fn a_real_grant_with_bad_urls_is_refused_and_stores_nothing() {
    let run = runtime_dir();
    fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    let too_many: Vec<String> = (0..33).map(|i| format!("https://example.org/{i}")).collect();
    let too_many: Vec<&str> = too_many.iter().map(String::as_str).collect();
    for (urls, needle) in [
        (vec![], "URLs"),
        (vec!["https://elsewhere.test/x"], "outside the grant's scope"),
        (vec!["ftp://example.org/x"], "scheme"),
        (vec!["https://user:pw@example.org/x"], "credentials"),
        (vec![A, A], "repeats"),
        (too_many, "at most 32"),
    ] {
        let (s, e) = f.grant(&request, &urls).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{urls:?}: {e}");
        assert_eq!(e["error"]["code"], "INVALID_INPUT");
        assert!(e["error"]["message"].as_str().unwrap().contains(needle), "{urls:?}: {e}");
    }
    // Not an array of strings: the closed body refuses it.
    let body = json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 3, "max_bytes": 1000},
                      "expires_in_minutes": 60, "urls": "https://example.org/a"});
    let (s, _) = f.post(&format!("/api/v1/research/requests/{request}/grant"), body).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(f.count("SELECT count(*) FROM grants"), 0);
    assert_eq!(f.count("SELECT count(*) FROM campaigns"), 0);
    assert_eq!(f.request(&request).await["status"], "PENDING");
    assert!(egress.fetched_urls().is_empty());
    assert_eq!(f.state.campaigns().live(), 0);
}

// ---------------------------------------------------------------------------
// GET /api/v1/egress

fn bootstrapping() -> EgressStatus {
    EgressStatus {
        ready: false,
        bootstrap_percent: 45,
        phase: "loading\ndirectory".into(),
        last_error: Some("connection to guard refused".into()),
        bootstrap_ms: None,
        custom_network: true,
        max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        in_flight: 2,
        campaigns: 1,
        counts: [5, 4, 3, 2, 1],
    }
}

#[tokio::test]
async fn the_egress_route_shows_tor_bootstrap_as_egress_reports_it() {
    let run = runtime_dir();
    fake_egress(&run, two_pages_and_a_refusal(), Some(bootstrapping()));
    let f = fixture(Some(&run.dir)).await;
    let (s, e) = f.get("/api/v1/egress").await;
    assert_eq!(s, StatusCode::OK, "{e}");
    assert_eq!(e["available"], true);
    assert_eq!(e["ready"], false);
    assert_eq!(e["bootstrap_percent"], 45);
    assert_eq!(e["phase"], "loading directory", "one line");
    assert_eq!(e["last_error"], "connection to guard refused");
    assert_eq!(e["custom_network"], true);
    assert_eq!(e["in_flight"], 2);
    assert_eq!(e["counts"], json!({"fetched": 5, "refused": 4, "unavailable": 3, "failed": 2, "stopped": 1}));
    assert!(e.get("detail").is_none());
}

#[tokio::test]
async fn an_absent_or_failing_egress_is_unavailable_with_a_reason() {
    // No supervisor.
    let f = fixture(None).await;
    let (s, e) = f.get("/api/v1/egress").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(e, json!({"available": false, "detail": "no egress daemon: this server was not started by `labfy up`"}));
    // A runtime directory without egress.
    let run = runtime_dir();
    let f = fixture(Some(&run.dir)).await;
    let (_, e) = f.get("/api/v1/egress").await;
    assert_eq!(e["available"], false);
    assert!(e["detail"].as_str().unwrap().starts_with("egress unreachable"), "{e}");
    // An egress that answers Failed.
    let run = runtime_dir();
    fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let (_, e) = f.get("/api/v1/egress").await;
    assert_eq!(e["available"], false);
    assert_eq!(e["detail"], "egress answered UNAVAILABLE: arti is not configured");
}

#[tokio::test]
async fn the_egress_route_is_guarded_like_every_api_get() {
    let run = runtime_dir();
    fake_egress(&run, two_pages_and_a_refusal(), Some(bootstrapping()));
    let f = fixture(Some(&run.dir)).await;
    let (s, e) = send(&f.app, get_req("/api/v1/egress", None)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(e["error"]["code"], "NO_SESSION");
    let req = Request::get("/api/v1/egress")
        .header(header::HOST, "evil.example:7345")
        .header(header::AUTHORIZATION, &f.cookie)
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&f.app, req).await.0, StatusCode::MISDIRECTED_REQUEST);
}

#[tokio::test]
async fn specimen_grants_stay_synthetic_with_or_without_urls() {
    use labfy_store::specimen::{self, SpecimenSpec};
    let run = runtime_dir();
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let out = specimen::generate(&mut store, SpecimenSpec { seed: 4, size: 120 }, &mut |_, _| {}).unwrap();
    let specimen::SpecimenOutcome::Created { workspace, .. } = out else { panic!() };
    let limit = RateLimit { burst: 1000, per_second: 1000.0 };
    let state = AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, workspace.id(), limit)
        .unwrap()
        .with_runtime_dir(run.dir.clone());
    let app = app(state.clone());
    let (cookie, csrf) = common::open_session(&app, &state).await;
    let post = |uri: String, body: Value| {
        Request::post(uri)
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, &cookie)
            .header(header::ORIGIN, ORIGIN)
            .header("X-CSRF-Token", &csrf)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    let mut by_urls: HashMap<bool, Value> = HashMap::new();
    for with_urls in [false, true] {
        let (s, turn) = send(
            &app,
            post(
                "/api/v1/agent-tools/turns".into(),
                json!({"question": "Quels liens entre les sociétés et les domaines ?"}),
            ),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{turn}");
        let request = turn["research_request"].as_str().unwrap().to_owned();
        let mut body = json!({"scope": {"hosts": ["example.org"]}, "budget": {"max_requests": 3, "max_bytes": 1_048_576},
                              "expires_in_minutes": 60});
        if with_urls {
            body["urls"] = json!([A, C]);
        }
        let (s, g) = send(&app, post(format!("/api/v1/research/requests/{request}/grant"), body)).await;
        assert_eq!(s, StatusCode::CREATED, "{g}");
        let (_, r) = send(&app, get_req(&format!("/api/v1/research/requests/{request}"), Some(&cookie))).await;
        by_urls.insert(with_urls, r["request"]["campaign"].clone());
    }
    let plain = &by_urls[&false];
    assert_eq!(plain["status"], "COMPLETED", "{plain}");
    assert_eq!(plain["synthetic"], true);
    assert_eq!(plain["items_done"], 3);
    let listed = &by_urls[&true];
    assert_eq!(listed["status"], "COMPLETED", "{listed}");
    assert_eq!(listed["items"][0]["url"], A);
    assert_eq!(listed["items"][1]["url"], C);
    // Synthetic: the runner and egress were never involved.
    assert!(egress.fetched_urls().is_empty());
    assert_eq!(state.campaigns().live(), 0);
}

#[tokio::test]
async fn a_demo_turn_resumed_after_a_real_campaign_summarises_the_fetched_evidence() {
    let run = runtime_dir();
    fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let (s, turn) = f.post("/api/v1/agent-tools/turns", json!({"question": "Que possède la société Durand ?"})).await;
    assert_eq!(s, StatusCode::CREATED, "{turn}");
    assert_eq!(turn["status"], "AUTHORIZATION_REQUIRED", "{turn}");
    let request = turn["research_request"].as_str().unwrap().to_owned();
    assert!(egress.fetched_urls().is_empty(), "research.prepare contacts nothing");
    f.granted(&request, &[A, B, C]).await;
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "COMPLETED", "{c}");

    let (s, done) =
        f.post(&format!("/api/v1/agent-tools/turns/{}/resume", turn["turn_id"].as_str().unwrap()), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "COMPLETED", "{done}");
    let summary = done["summary"].as_str().unwrap();
    assert!(summary.contains("via Tor est terminée : 2 page(s) récupérée(s)"), "{summary}");
    // The fetched pages are among the objects the summary is about.
    let refs: Vec<&str> = done["summary_refs"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for item in c["items"].as_array().unwrap().iter().take(2) {
        assert!(refs.contains(&item["evidence"].as_str().unwrap()), "{refs:?}");
    }
    // research.get_state reads the campaign with its items (what the summary is made from).
    let (_, page) = f.get("/api/v1/agent-tools/events?cursor=0").await;
    let state_result = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .filter(|e| e["type"] == "agent.tool.completed" && e["payload"]["tool_id"] == "research.get_state")
        .find_map(|e| e["payload"]["result_id"].as_str())
        .unwrap()
        .to_owned();
    let (_, r) = f.get(&format!("/api/v1/agent-tools/results/{state_result}")).await;
    let text = r.to_string();
    assert!(text.contains("\"items\"") && text.contains("FETCHED") && text.contains("REFUSED"), "{text}");
}

#[tokio::test]
async fn a_campaign_whose_grant_expired_meanwhile_fails_without_asking_anyone() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let egress = fake_egress(&run, two_pages_and_a_refusal(), None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    let ws = f.workspace;
    let catalog = f.state.gateway().catalog();
    let d = labfy_store::GrantDecision {
        scope: labfy_store::ResearchScope { hosts: vec!["example.org".into()] },
        budget: labfy_store::ResearchBudget { max_requests: 10, max_bytes: 1_048_576 },
        expires_in_minutes: 1,
        contract_fingerprints: catalog.fingerprints(),
        current_prepare_fingerprint: catalog.tool(labfy_gateway::ToolId::ResearchPrepare).fingerprint.clone(),
        decided_by: "analyst".into(),
        urls: vec![A.into()],
    };
    let r: ObjectRef = request.parse().unwrap();
    f.db.write_blocking(|s| s.grant_research(ws, &r, &d)).unwrap();
    // The server was down while the grant expired (the test ages it by hand).
    let conn = rusqlite::Connection::open(f.dir.path().join(labfy_store::DB_FILE)).unwrap();
    conn.execute_batch(
        "DROP TRIGGER grants_decision_immutable;
         UPDATE grants SET expires_at = '2000-01-01T00:00:00.000Z';",
    )
    .unwrap();
    drop(conn);
    assert_eq!(f.state.campaigns().resume_unfinished().await.unwrap(), 1);
    let c = f.ended(&request).await;
    assert_eq!(c["status"], "FAILED", "{c}");
    assert!(c["detail"].as_str().unwrap().contains("expired"), "{c}");
    assert_eq!(statuses(&c), ["STOPPED"]);
    assert!(gov.lock().unwrap().asks.is_empty());
    assert!(egress.fetched_urls().is_empty());
}

#[tokio::test]
async fn a_shutdown_leaves_a_running_campaign_as_it_stands_for_the_next_start() {
    let run = runtime_dir();
    let gov = fake_governor(&run, None);
    let script: Script = Arc::new(|_: &FetchRequest| Step::UntilStopped);
    let egress = fake_egress(&run, script, None);
    let f = fixture(Some(&run.dir)).await;
    let request = f.prepare("Que publie la société Durand ?");
    f.granted(&request, &[A, B]).await;
    let started = Instant::now();
    while egress.log.lock().unwrap().in_flight == 0 {
        assert!(started.elapsed() < WAIT, "no fetch in flight");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f.state.campaigns().close();
    assert!(f.state.campaigns().idle(WAIT).await);
    let c = f.request(&request).await["campaign"].clone();
    assert_eq!(c["status"], "RUNNING", "{c}");
    assert_eq!(statuses(&c), ["PLANNED", "PLANNED"], "nothing recorded: the next start fetches both");
    assert!(c["finished_at"].is_null());
    assert_eq!(gov.lock().unwrap().released, ["res-1"], "the reservation is released on the way out");
    assert!(egress.log.lock().unwrap().ends.is_empty(), "egress keeps the campaign's isolation for its resumption");
    // A closed runner starts nothing.
    assert_eq!(f.state.campaigns().resume_unfinished().await.unwrap(), 0);
    assert_eq!(f.state.campaigns().live(), 0);
}
