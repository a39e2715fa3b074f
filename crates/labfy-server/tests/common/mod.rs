//! What every router test of the server shares: the one way a test opens a
//! session — a fresh one-time login code of the state, exchanged at `/login`
//! (SPEC T4), exactly as a browser does — and the one way it sends a request
//! and reads a JSON answer — and the one way a test stands in for a daemon:
//! a private runtime directory with this boot's secret, and a fake served
//! on a daemon's socket there with its handler — and the one fake governor.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use labfy_ipc::auth::{AllowedPids, HANDSHAKE_TIMEOUT, Peer, PeerPolicy};
use labfy_ipc::messages::governor::{CampaignAsk, GovernorRequest, GovernorResponse, Refusal};
use labfy_ipc::messages::{Boundary, Failure, FailureCode};
use labfy_ipc::secret::Secret;
use labfy_ipc::server::{self, Stats};
use labfy_server::AppState;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tempfile::TempDir;
use tower::ServiceExt;

/// The port every router test's state is built for.
pub const PORT: u16 = 7345;
/// Its Host header.
pub const HOST: &str = "127.0.0.1:7345";

/// Logs in to `app` (built from `state`); returns (the `Authorization` value, csrf token).
pub async fn open_session(app: &Router, state: &AppState) -> (String, String) {
    let code = state.mint_login_code();
    let req = Request::get(format!("/login?code={code}")).header(header::HOST, HOST).body(Body::empty()).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "login refused");
    assert!(res.headers().get(header::SET_COOKIE).is_none(), "the login set a cookie");
    let page = res.into_body().collect().await.unwrap().to_bytes();
    let token = labfy_ipc::login::session_in_page(std::str::from_utf8(&page).unwrap()).expect("a session").to_owned();
    let cookie = format!("Bearer {token}");
    let req = Request::get("/api/v1/session").header(header::HOST, HOST).header(header::AUTHORIZATION, &cookie);
    let res = app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    (cookie, v["csrf_token"].as_str().unwrap().to_owned())
}

/// Sends `req` to `app`: the status and the JSON body (`null` when none).
pub async fn send(app: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let body = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// A GET of `uri` with the right Host, with the session (`Authorization`) if any.
pub fn get_req(uri: &str, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::get(uri).header(header::HOST, HOST);
    if let Some(c) = cookie {
        b = b.header(header::AUTHORIZATION, c);
    }
    b.body(Body::empty()).unwrap()
}

/// A private runtime directory with this boot's secret, as the supervisor
/// makes it; removed when dropped.
pub struct Run {
    _base: TempDir,
    /// The directory.
    pub dir: PathBuf,
    /// This boot's secret in it.
    pub secret: Secret,
}

/// A fresh [`Run`].
pub fn runtime_dir() -> Run {
    let base = TempDir::new().unwrap();
    let dir = base.path().join("run");
    labfy_ipc::secret::create_private_dir(&dir).unwrap();
    let secret = labfy_ipc::secret::create_secret(&dir).unwrap();
    Run { _base: base, dir, secret }
}

/// Serves a fake of the daemon behind `boundary` (the governor, egress) on
/// its socket in `run`, answering each request with `handler`. Only this
/// process may connect, with the run's secret — the server under test runs
/// in this process, as a real daemon would admit only the server's pid.
pub fn serve_fake<Req, Resp, H, F>(run: &Run, boundary: Boundary, handler: H)
where
    Req: DeserializeOwned + Send + 'static,
    Resp: Serialize + Send + Sync + 'static,
    H: Fn(Req, Peer) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Resp> + Send + 'static,
{
    let me = AllowedPids::default();
    me.insert(std::process::id() as i32);
    let policy = PeerPolicy {
        boundary,
        uid: labfy_ipc::daemon::euid(),
        pids: Some(me),
        secret: run.secret.clone(),
        handshake_timeout: HANDSHAKE_TIMEOUT,
    };
    let listener = server::bind(&labfy_ipc::daemon::service_socket(&run.dir, boundary)).unwrap();
    tokio::spawn(server::serve(listener, policy, Arc::new(Stats::default()), handler));
}

/// What the fake governor was asked, and how it answers leases.
#[derive(Default)]
pub struct GovernorLog {
    /// Campaign admissions asked, in order.
    pub asks: Vec<CampaignAsk>,
    /// Reservations released, in order.
    pub released: Vec<String>,
    /// Lease renewals, in order (SPEC F5).
    pub renewals: Vec<String>,
    /// After this many renewals, the next ones answer that the reservation
    /// went, with this reason (the pressure reaction released it).
    pub revoke_after: Option<(usize, String)>,
    /// `State` requests asked.
    pub states: u64,
}

/// The one fake governor of the server's tests, on `governor.sock` in
/// `run`: admits every campaign (`refuse: None`, reservations `res-1`,
/// `res-2`…) or refuses it with that reason; logs asks, releases and
/// renewals; answers `State` and `History` with `views` (a test's own
/// future: a canned state, a hang, a wrong answer); anything else is
/// `INVALID_INPUT`.
pub fn fake_governor<H, F>(run: &Run, refuse: Option<&'static str>, views: H) -> Arc<Mutex<GovernorLog>>
where
    H: Fn(GovernorRequest) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = GovernorResponse> + Send + 'static,
{
    let log: Arc<Mutex<GovernorLog>> = Arc::default();
    let l = log.clone();
    serve_fake(run, Boundary::Governor, move |req: GovernorRequest, _peer| {
        let (l, views) = (l.clone(), views.clone());
        async move {
            match req {
                GovernorRequest::AdmitCampaign(ask) => {
                    let n = {
                        let mut log = l.lock().unwrap();
                        log.asks.push(ask);
                        log.asks.len()
                    };
                    match refuse {
                        None => GovernorResponse::Admitted { reservation: format!("res-{n}") },
                        Some(reason) => GovernorResponse::Refused(Refusal {
                            reason: reason.into(),
                            blocked_by: vec!["model:qwen.gguf".into()],
                        }),
                    }
                }
                GovernorRequest::Release { reservation } => {
                    l.lock().unwrap().released.push(reservation);
                    GovernorResponse::Released {}
                }
                GovernorRequest::Renew { reservation } => {
                    let mut log = l.lock().unwrap();
                    log.renewals.push(reservation);
                    match &log.revoke_after {
                        Some((after, why)) if log.renewals.len() > *after => {
                            GovernorResponse::Failed(Failure { code: FailureCode::NotFound, message: why.clone() })
                        }
                        _ => GovernorResponse::Renewed { lease_expires_ms: 1 },
                    }
                }
                req @ GovernorRequest::State {} => {
                    l.lock().unwrap().states += 1;
                    views(req).await
                }
                req @ GovernorRequest::History {} => views(req).await,
                other => GovernorResponse::Failed(Failure {
                    code: FailureCode::InvalidInput,
                    message: format!("the test governor does not answer {other:?}"),
                }),
            }
        }
    });
    log
}

/// `views` for a governor whose state no test reads.
pub async fn no_views(req: GovernorRequest) -> GovernorResponse {
    GovernorResponse::Failed(Failure {
        code: FailureCode::InvalidInput,
        message: format!("the test governor does not answer {req:?}"),
    })
}
