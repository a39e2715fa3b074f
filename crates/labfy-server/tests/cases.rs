//! Cases from the UI (SPEC C1) through the router: an investigation
//! created, renamed, archived and brought back in the served workspace; the
//! workspace renamed; a REAL workspace created; nothing of another
//! workspace reachable.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use labfy_server::session::RateLimit;
use labfy_server::{AppState, app, db::Db};
use labfy_store::Store;
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;
use common::{HOST, PORT, open_session};
const ORIGIN: &str = "http://127.0.0.1:7345";

async fn call(
    app: &Router,
    cookie: &str,
    csrf: &str,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut b = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, cookie)
        .header(header::ORIGIN, ORIGIN)
        .header("X-CSRF-Token", csrf);
    if body.is_some() {
        b = b.header(header::CONTENT_TYPE, "application/json");
    }
    let req = b.body(body.map_or_else(Body::empty, |v| Body::from(v.to_string()))).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn c1_investigations_are_managed_from_the_ui() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, _) = store.create_real_workspace("Dossier Durand", "test").unwrap();
    let (other, other_inv) = store.create_real_workspace("Autre", "test").unwrap();
    let state = AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, ws.id(), RateLimit::default()).unwrap();
    let app = app(state.clone());
    let (cookie, csrf) = open_session(&app, &state).await;
    let c = |m: &'static str, u: String, b: Option<Value>| {
        let (app, cookie, csrf) = (app.clone(), cookie.clone(), csrf.clone());
        async move { call(&app, &cookie, &csrf, m, &u, b).await }
    };

    let list = format!("/api/v1/workspaces/{ws}/investigations");
    let (s, v) =
        c("POST", list.clone(), Some(json!({"title": "Piste des comptes", "summary": "Virements 2025"}))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!((v["title"].as_str(), v["summary"].as_str()), (Some("Piste des comptes"), Some("Virements 2025")));
    let inv = v["id"].as_str().unwrap().to_owned();
    let (s, v) = c("POST", list.clone(), Some(json!({"title": ""}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");

    let (s, _) = c("POST", format!("/api/v1/investigations/{inv}/update"), Some(json!({"title": "Piste B"}))).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = c("POST", format!("/api/v1/investigations/{inv}/archive"), Some(json!({"archived": true}))).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, v) = c("GET", list.clone(), None).await;
    let mine = v["investigations"].as_array().unwrap().iter().find(|i| i["id"] == inv.as_str()).unwrap().clone();
    assert_eq!(mine["title"], "Piste B");
    assert!(mine["archived_at"].is_string(), "{mine}");

    let (s, _) =
        c("POST", format!("/api/v1/workspaces/{ws}/rename"), Some(json!({"name": "Dossier Durand (2026)"}))).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (_, v) = c("GET", "/api/v1/workspaces".into(), None).await;
    assert!(v["workspaces"].as_array().unwrap().iter().any(|w| w["name"] == "Dossier Durand (2026)"), "{v}");

    // Another workspace's investigation and the other workspace itself are
    // not there for this session.
    let (s, _) = c("POST", format!("/api/v1/investigations/{other_inv}/update"), Some(json!({"title": "x"}))).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = c("POST", format!("/api/v1/workspaces/{other}/rename"), Some(json!({"name": "x"}))).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = c("POST", format!("/api/v1/workspaces/{other}/investigations"), Some(json!({"title": "x"}))).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    let (s, v) = c("POST", "/api/v1/workspaces".into(), Some(json!({"name": "Nouveau dossier"}))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert!(v["serve"].as_str().unwrap().starts_with("labfy up --workspace workspace:"), "{v}");
}

/// SPEC C1: opening another workspace is a wish the control plane reports to
/// the supervisor; the server checks it first for a clear answer (ready, in
/// use, a REAL one only from an isolated process) and audits it.
#[tokio::test]
async fn c1_another_workspace_is_asked_for_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, _) = store.create_real_workspace("Dossier Durand", "test").unwrap();
    let (real, _) = store.create_real_workspace("Dossier Martin", "test").unwrap();
    let spec = labfy_store::specimen::SpecimenSpec { seed: 3, size: 20 };
    let labfy_store::specimen::SpecimenOutcome::Created { workspace: specimen, .. } =
        labfy_store::specimen::generate(&mut store, spec, &mut |_, _| {}).unwrap()
    else {
        panic!("no SPECIMEN")
    };
    let state = AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, ws.id(), RateLimit::default()).unwrap();
    let app = app(state.clone());
    let (cookie, csrf) = open_session(&app, &state).await;
    let c = |u: String, b: Option<Value>| {
        let (app, cookie, csrf) = (app.clone(), cookie.clone(), csrf.clone());
        async move { call(&app, &cookie, &csrf, "POST", &u, b).await }
    };

    // Without a supervisor there is no one to restart the server.
    let (s, v) = c(format!("/api/v1/workspaces/{specimen}/open"), None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("labfy up --workspace"), "{v}");

    let wish = labfy_ipc::daemon::WorkspaceWish::default();
    state.set_workspace_wish(wish.clone());
    let (s, _) = c(format!("/api/v1/workspaces/{ws}/open"), None).await;
    assert_eq!(s, StatusCode::CONFLICT, "the open workspace");
    let unknown = format!("workspace:{}", uuid::Uuid::new_v4());
    let (s, _) = c(format!("/api/v1/workspaces/{unknown}/open"), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = c(format!("/api/v1/workspaces/{ws}/archive"), Some(json!({"archived": true}))).await;
    assert_eq!(s, StatusCode::CONFLICT, "the open workspace is not archived");
    let (s, _) = c(format!("/api/v1/workspaces/{specimen}/archive"), Some(json!({"archived": true}))).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, v) = c(format!("/api/v1/workspaces/{specimen}/open"), None).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("archived"), "{v}");
    assert_eq!(wish.get(), None, "a refused wish is not passed on");
    let (s, _) = c(format!("/api/v1/workspaces/{specimen}/archive"), Some(json!({"archived": false}))).await;
    assert_eq!(s, StatusCode::NO_CONTENT);

    // A REAL workspace only from an isolated process (SPEC P2).
    let (s, v) = c(format!("/api/v1/workspaces/{real}/open"), None).await;
    if state.isolation().isolated {
        assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    } else {
        assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
        assert_eq!(wish.get(), None);
    }

    let (s, v) = c(format!("/api/v1/workspaces/{specimen}/open"), None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["workspace"]["id"], specimen.to_string());
    assert_eq!(wish.get(), Some(specimen.id()));
    let audit = state.db().read(move |r| r.audit(ws.id(), 20)).await.unwrap();
    assert!(audit.iter().any(|a| a.action == "workspace.open"), "{audit:?}");
}
