//! Router tests of `GET /api/v1/resources` (SPEC Q5): the governor's state
//! over its real service socket (a fake governor served in this process),
//! and every way it can be missing — no runtime directory, `Failed`, silence.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use labfy_ipc::messages::governor::{
    Amounts, Decision, DecisionOutcome, Gauge, GovernorRequest, GovernorResponse, GovernorState, GpuSample, GpuVendor,
    History, HistoryPoint, HostSample, Psi, Reservation, ReservationKind, Sample, ScratchSample,
};
use labfy_ipc::messages::{Boundary, Failure, FailureCode};
use labfy_server::session::RateLimit;
use labfy_server::state::{GOVERNOR_STATE_TIMEOUT, GOVERNOR_STATE_TTL};
use labfy_server::{AppState, app, db::Db};
use labfy_store::Store;
use labfy_store::specimen::{self, SpecimenSpec};
use serde_json::Value;
use tempfile::TempDir;
use tower::ServiceExt;

mod common;
use common::{GovernorLog, HOST, PORT, Run, get_req, runtime_dir, send};
const ORIGIN: &str = "http://127.0.0.1:7345";
const ROUTE: &str = "/api/v1/resources";
const GIB: u64 = 1024 * 1024 * 1024;

struct Fixture {
    _dir: TempDir,
    app: Router,
    cookie: String,
    csrf: String,
}

/// A server over a small SPECIMEN, supervised from `runtime_dir` when given,
/// with a session already open.
async fn fixture(runtime_dir: Option<PathBuf>) -> Fixture {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let out = specimen::generate(&mut store, SpecimenSpec { seed: 4, size: 10 }, &mut |_, _| {}).unwrap();
    let specimen::SpecimenOutcome::Created { workspace, .. } = out else { panic!() };
    let mut state =
        AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, workspace.id(), RateLimit::default()).unwrap();
    if let Some(run) = runtime_dir {
        state = state.with_runtime_dir(run);
    }
    let app = app(state.clone());
    let (cookie, csrf) = common::open_session(&app, &state).await;
    Fixture { _dir: dir, app, cookie, csrf }
}

impl Fixture {
    async fn resources(&self) -> (StatusCode, Value) {
        send(&self.app, get_req(ROUTE, Some(&self.cookie))).await
    }
}

/// A runtime directory with this boot's secret and the shared fake governor
/// on `governor.sock`, answering `State` with `handler` (and `History` with
/// the canned history); only this process may connect.
struct FakeGovernor {
    run: Run,
    log: Arc<Mutex<GovernorLog>>,
}

fn fake_governor<H, F>(handler: H) -> FakeGovernor
where
    H: Fn() -> F + Clone + Send + Sync + 'static,
    F: Future<Output = GovernorResponse> + Send + 'static,
{
    let run = runtime_dir();
    let log = common::fake_governor(&run, None, move |req: GovernorRequest| {
        let handler = handler.clone();
        async move {
            match req {
                GovernorRequest::History {} => GovernorResponse::History(Box::new(canned_history())),
                _ => handler().await,
            }
        }
    });
    FakeGovernor { run, log }
}

impl FakeGovernor {
    fn dir(&self) -> &Path {
        &self.run.dir
    }

    /// `State` requests it answered.
    fn asked(&self) -> u64 {
        self.log.lock().unwrap().states
    }
}

fn canned_state() -> GovernorState {
    GovernorState {
        sample: Some(Sample {
            at_ms: 1_700_000_000_000,
            host: HostSample {
                ram_total: 64 * GIB,
                ram_used: 20 * GIB,
                ram_available: 44 * GIB,
                swap_total: 8 * GIB,
                swap_used: GIB / 2,
                psi: Some(Psi { some_avg10: 1.25, full_avg10: 0.5 }),
            },
            scratch: Some(ScratchSample {
                path: "/var/lib/labfy/scratch".into(),
                total: 500 * GIB,
                free: 300 * GIB,
                labfy_used: 3 * GIB,
            }),
            gpus: vec![GpuSample {
                id: "card0".into(),
                vendor: GpuVendor::Amd,
                name: "0000:03:00.0".into(),
                uma: false,
                vram_total: Some(16 * GIB),
                vram_used: Some(2 * GIB),
                gtt_total: Some(32 * GIB),
                gtt_used: None,
                busy_percent: Some(7),
                temperature_mc: Some(45_000),
                power_uw: Some(30_000_000),
                source: "amdgpu sysfs".into(),
            }],
            facts: vec!["NVML not loaded: libnvidia-ml.so.1 not found".into()],
        }),
        admissible: Amounts { vram: 12 * GIB, ram: 30 * GIB, swap: 0, scratch: 200 * GIB },
        reservations: vec![Reservation {
            id: "res-1".into(),
            owner: "model:qwen.gguf".into(),
            kind: ReservationKind::Model,
            reserved: Amounts { vram: 6 * GIB, ram: GIB, swap: 0, scratch: 0 },
            cores: 0,
            measured_peak: Some(Amounts { vram: 5 * GIB, ram: GIB / 2, swap: 0, scratch: 0 }),
            priority: 100,
            lease_expires_ms: None,
            admitted_ms: 1_699_999_990_000,
        }],
        decisions: vec![Decision {
            at_ms: 1_699_999_995_000,
            owner: "campaign:0190f1a2-0000-7000-8000-000000000001".into(),
            kind: ReservationKind::Campaign,
            asked: Amounts { vram: 0, ram: 40 * GIB, swap: 0, scratch: GIB },
            outcome: DecisionOutcome::Refused,
            reason: "not enough RAM <b>after</b> headroom".into(),
            blocked_by: vec!["model:qwen.gguf".into(), "usage outside Labfy".into()],
        }],
        pressure: Some("swap use 6 % is above 5 %".into()),
        model: None,
        sample_period_ms: 2000,
        sandbox: Default::default(),
        confinement: Default::default(),
    }
}

#[tokio::test]
async fn without_a_runtime_dir_the_governor_is_unavailable_with_a_reason() {
    let f = fixture(None).await;
    let (status, body) = f.resources().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["available"], false, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("labfy up"), "{detail}");
    assert!(!detail.contains('\n'));
    assert!(body.get("state").is_none(), "{body}");
}

fn canned_history() -> History {
    History {
        step_ms: 5_000,
        points: vec![HistoryPoint {
            at_ms: 1_699_999_990_000,
            ram: Some(Gauge { used: 20 * GIB, total: 64 * GIB }),
            swap: Some(Gauge { used: 0, total: 8 * GIB }),
            vram: None,
            gtt: None,
            scratch: Some(Gauge { used: GIB, total: 500 * GIB }),
            ahead: Amounts { vram: 0, ram: 2 * GIB, swap: 0, scratch: 0 },
        }],
    }
}

#[tokio::test]
async fn the_governor_history_is_served_for_the_chart() {
    let gov = fake_governor(|| async { GovernorResponse::State(Box::new(canned_state())) });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    let (status, body) = send(&f.app, get_req("/api/v1/resources/history", Some(&f.cookie))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["available"], true, "{body}");
    let back: History = serde_json::from_value(body["history"].clone()).unwrap();
    assert_eq!(back, canned_history());
    // No governor: unavailable, with the reason.
    let f = fixture(None).await;
    let (status, body) = send(&f.app, get_req("/api/v1/resources/history", Some(&f.cookie))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["available"], false);
    assert!(body["detail"].as_str().unwrap().contains("not started by `labfy up`"), "{body}");
}

#[tokio::test]
async fn the_governor_state_is_served_as_it_answered() {
    let gov = fake_governor(|| async { GovernorResponse::State(Box::new(canned_state())) });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    let (status, body) = f.resources().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["available"], true, "{body}");
    assert!(body.get("detail").is_none(), "{body}");
    // The exact wire form of the governor's state, closed types included.
    let back: GovernorState = serde_json::from_value(body["state"].clone()).unwrap();
    assert_eq!(back, canned_state());
    assert_eq!(body["state"]["sample"]["gpus"][0]["vendor"], "amd");
    assert_eq!(body["state"]["decisions"][0]["outcome"], "refused");
    assert_eq!(body["state"]["reservations"][0]["kind"], "model");
    // Answers are reused for at most GOVERNOR_STATE_TTL, then asked again.
    let asked = gov.asked();
    assert_eq!(asked, 1);
    tokio::time::sleep(GOVERNOR_STATE_TTL + Duration::from_millis(100)).await;
    let (_, again) = f.resources().await;
    assert_eq!(again["available"], true);
    assert_eq!(gov.asked(), 2, "a state older than the TTL was served");
}

#[tokio::test]
async fn concurrent_polls_share_one_call() {
    let gov = fake_governor(|| async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        GovernorResponse::State(Box::new(canned_state()))
    });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    let (a, b, c) = tokio::join!(f.resources(), f.resources(), f.resources());
    for (status, body) in [a, b, c] {
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["available"], true, "{body}");
    }
    assert_eq!(gov.asked(), 1);
}

#[tokio::test]
async fn a_governor_that_fails_is_unavailable_with_its_message() {
    let gov = fake_governor(|| async {
        GovernorResponse::Failed(Failure {
            code: FailureCode::Unavailable,
            message: "probes are not built\nyet".into(),
        })
    });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    let (status, body) = f.resources().await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["available"], false, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("probes are not built yet"), "{detail}");
    assert!(detail.contains("UNAVAILABLE"), "{detail}");
    assert!(!detail.contains('\n'), "{detail}");
    assert!(body.get("state").is_none());
}

#[tokio::test]
async fn a_governor_that_answers_something_else_is_unavailable() {
    let gov = fake_governor(|| async { GovernorResponse::Released {} });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    let (status, body) = f.resources().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["available"], false, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("released"), "{body}");
}

#[tokio::test]
async fn a_silent_governor_is_unavailable_within_the_timeout() {
    let gov = fake_governor(std::future::pending::<GovernorResponse>);
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    let started = Instant::now();
    let (status, body) = f.resources().await;
    let took = started.elapsed();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["available"], false, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("did not answer"), "{body}");
    assert!(took >= GOVERNOR_STATE_TIMEOUT, "answered in {took:?}");
    assert!(took < GOVERNOR_STATE_TIMEOUT + Duration::from_millis(700), "took {took:?}");
    assert!(GOVERNOR_STATE_TIMEOUT <= Duration::from_secs(1));
}

#[tokio::test]
async fn a_governor_that_went_away_is_not_replaced_by_its_last_state() {
    let gov = fake_governor(|| async { GovernorResponse::State(Box::new(canned_state())) });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    assert_eq!(f.resources().await.1["available"], true);
    // The socket disappears (the governor stopped): the next ask after the
    // TTL says so instead of repeating the last state.
    std::fs::remove_file(labfy_ipc::daemon::service_socket(gov.dir(), Boundary::Governor)).unwrap();
    tokio::time::sleep(GOVERNOR_STATE_TTL + Duration::from_millis(100)).await;
    let (status, body) = f.resources().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["available"], false, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("unreachable"), "{body}");
    assert!(body.get("state").is_none());
}

#[tokio::test]
async fn the_route_is_guarded_like_every_api_get() {
    let gov = fake_governor(|| async { GovernorResponse::State(Box::new(canned_state())) });
    let f = fixture(Some(gov.dir().to_path_buf())).await;
    // No session, a bogus one: 401, and the governor is not asked.
    let bogus = format!("Bearer {}.{}", "0".repeat(32), "0".repeat(64));
    for cookie in [None, Some("Bearer "), Some(bogus.as_str())] {
        let (status, body) = send(&f.app, get_req(ROUTE, cookie)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{cookie:?}");
        assert_eq!(body["error"]["code"], "NO_SESSION");
    }
    // Wrong Host (DNS rebinding): 421, even with a valid session.
    let req = Request::get(ROUTE)
        .header(header::HOST, "evil.example:7345")
        .header(header::AUTHORIZATION, &f.cookie)
        .body(Body::empty())
        .unwrap();
    let (status, body) = send(&f.app, req).await;
    assert_eq!(status, StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(body["error"]["code"], "WRONG_HOST");
    // A non-GET is a mutation: refused without Origin and CSRF token (403),
    // and with them it is not a method of this route (405).
    let post = |origin: Option<&str>, csrf: Option<&str>| {
        let mut b = Request::post(ROUTE).header(header::HOST, HOST).header(header::AUTHORIZATION, &f.cookie);
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        if let Some(t) = csrf {
            b = b.header("X-CSRF-Token", t);
        }
        b.body(Body::empty()).unwrap()
    };
    assert_eq!(send(&f.app, post(None, None)).await.0, StatusCode::FORBIDDEN);
    assert_eq!(send(&f.app, post(Some(ORIGIN), None)).await.0, StatusCode::FORBIDDEN);
    assert_eq!(send(&f.app, post(Some(ORIGIN), Some(&f.csrf))).await.0, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(gov.asked(), 0, "the governor was asked for a refused request");
    // With the session: the state, with the security headers.
    let res = f.app.clone().oneshot(get_req(ROUTE, Some(&f.cookie))).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()[header::CACHE_CONTROL], "no-store");
    assert_eq!(res.headers()[header::CONTENT_SECURITY_POLICY], labfy_server::security::CSP);
    assert_eq!(gov.asked(), 1);
}
