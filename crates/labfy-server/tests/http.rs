//! Router tests without a socket (STYLE 7): every S1–S3 refusal, the read
//! routes and the error format.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use labfy_server::security::CSP;
use labfy_server::session::RateLimit;
use labfy_server::{AppState, app, db::Db};
use labfy_store::Store;
use labfy_store::specimen::{self, SpecimenSpec};
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

mod common;
use common::{HOST, PORT};
const ORIGIN: &str = "http://127.0.0.1:7345";

struct Fixture {
    _dir: TempDir,
    app: Router,
    state: AppState,
    workspace: String,
    investigation: String,
}

fn fixture_with(limit: RateLimit) -> Fixture {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let out = specimen::generate(&mut store, SpecimenSpec { seed: 4, size: 80 }, &mut |_, _| {}).unwrap();
    let specimen::SpecimenOutcome::Created { workspace, investigation, .. } = out else { panic!() };
    // A second workspace, to check isolation.
    specimen::generate(&mut store, SpecimenSpec { seed: 5, size: 10 }, &mut |_, _| {}).unwrap();
    let state = AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, workspace.id(), limit).unwrap();
    Fixture {
        _dir: dir,
        app: app(state.clone()),
        state,
        workspace: workspace.to_string(),
        investigation: investigation.to_string(),
    }
}

fn fixture() -> Fixture {
    fixture_with(RateLimit::default())
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn error_code(&self) -> String {
        self.json()["error"]["code"].as_str().unwrap_or_default().to_owned()
    }
}

async fn send(app: &Router, req: Request<Body>) -> Answer {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
    Answer { status, headers, body }
}

fn get(uri: &str) -> axum::http::request::Builder {
    Request::builder().method("GET").uri(uri).header(header::HOST, HOST)
}

/// Logs in with a fresh one-time link (SPEC T4): the answer is the page
/// carrying the session for its script, and sets no cookie (SPEC V1);
/// `/` carries none. (the `Authorization` value, csrf token).
async fn login(f: &Fixture) -> (String, String) {
    let code = f.state.mint_login_code();
    let a = send(&f.app, get(&format!("/login?code={code}")).body(Body::empty()).unwrap()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert!(a.headers.get(header::SET_COOKIE).is_none(), "a login sets no cookie");
    assert_eq!(a.headers[header::CACHE_CONTROL], "no-store");
    let token = labfy_ipc::login::session_in_page(&a.text()).expect("the page carries the session").to_owned();
    let cookie = format!("Bearer {token}");
    let s =
        send(&f.app, get("/api/v1/session").header(header::AUTHORIZATION, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(s.status, StatusCode::OK);
    let csrf = s.json()["csrf_token"].as_str().unwrap().to_owned();
    let page = send(&f.app, get("/").header(header::AUTHORIZATION, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(labfy_ipc::login::session_in_page(&page.text()).is_none(), "/ hands over no session");
    assert!(!page.text().contains(&csrf));
    (cookie, csrf)
}

async fn api(f: &Fixture, cookie: &str, uri: &str) -> Answer {
    send(&f.app, get(uri).header(header::AUTHORIZATION, cookie).body(Body::empty()).unwrap()).await
}

fn post_note(uri: &str, cookie: &str, origin: Option<&str>, csrf: Option<&str>, body: Value) -> Request<Body> {
    let mut b = Request::builder()
        .method("POST")
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, cookie)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(o) = origin {
        b = b.header(header::ORIGIN, o);
    }
    if let Some(t) = csrf {
        b = b.header("X-CSRF-Token", t);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

#[tokio::test]
async fn s1_wrong_or_missing_host_is_421_everywhere() {
    let f = fixture();
    for host in [
        None,
        Some("evil.example:7345"),
        Some("127.0.0.1:7346"),
        Some("127.0.0.1"),
        Some("LOCALHOST:7345"),
        Some("[::1]:7345"),
    ] {
        for uri in ["/", "/api/v1/session", "/static/app.js"] {
            let mut b = Request::builder().uri(uri);
            if let Some(h) = host {
                b = b.header(header::HOST, h);
            }
            let a = send(&f.app, b.body(Body::empty()).unwrap()).await;
            assert_eq!(a.status, StatusCode::MISDIRECTED_REQUEST, "{host:?} {uri}");
            assert_eq!(a.error_code(), "WRONG_HOST");
            assert_eq!(a.headers[header::CONTENT_SECURITY_POLICY], CSP);
        }
    }
    for host in ["127.0.0.1:7345", "localhost:7345"] {
        let a = send(&f.app, Request::builder().uri("/login").header(header::HOST, host).body(Body::empty()).unwrap())
            .await;
        // Past the Host check: the login page (no session yet).
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{host}");
    }
}

#[tokio::test]
async fn index_sets_strict_headers_and_carries_no_inline_script() {
    let f = fixture();
    let (cookie, _) = login(&f).await;
    let a = send(&f.app, get("/").header(header::AUTHORIZATION, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(a.headers[header::CONTENT_SECURITY_POLICY], CSP);
    assert!(CSP.contains("script-src 'self'") && !CSP.contains("unsafe-inline"));
    assert_eq!(a.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(a.headers[header::X_FRAME_OPTIONS], "DENY");
    let html = a.text();
    // Every <script> has a src and an empty body; no inline handlers or styles.
    for (i, _) in html.match_indices("<script") {
        let tag_end = html[i..].find('>').unwrap() + i;
        assert!(html[i..tag_end].contains("src=\"/static/"), "inline script at {i}");
        assert!(html[tag_end + 1..].starts_with("</script>"), "script with a body at {i}");
    }
    for forbidden in [" onload=", " onclick=", " onerror=", "<style", " style=", "javascript:"] {
        assert!(!html.to_lowercase().contains(forbidden), "index.html contains {forbidden}");
    }
    assert!(html.contains("lang=\"fr\""));
    let js = send(&f.app, get("/static/app.js").body(Body::empty()).unwrap()).await;
    assert_eq!(js.status, StatusCode::OK);
    assert!(js.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"));
    for sink in [".innerHTML", ".outerHTML", ".insertAdjacentHTML", "document.write(", "eval(", "new Function("] {
        assert!(!js.text().contains(sink), "app.js uses {sink}");
    }
    assert!(js.text().contains(".textContent"));
    // The modules app.js imports (SPEC U9): each is served and writes no
    // markup.
    let mut sources = vec![js.text().to_owned()];
    for module in [
        "/static/i18n.js",
        "/static/dom.js",
        "/static/api.js",
        "/static/page.js",
        "/static/resources.js",
        "/static/agent.js",
        "/static/egress.js",
        "/static/overview.js",
        "/static/cases.js",
        "/static/lists.js",
        "/static/forms.js",
        "/static/reader.js",
        "/static/node.js",
        "/static/provenance.js",
        "/static/graph.js",
    ] {
        // The browser loads the modules itself, without the session header:
        // they are public (the same code in every Labfy of this version).
        let served = send(&f.app, get(module).body(Body::empty()).unwrap()).await;
        assert_eq!(served.status, StatusCode::OK, "{module}");
        assert!(served.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"), "{module}");
        for sink in [".innerHTML", ".outerHTML", ".insertAdjacentHTML", "document.write(", "eval(", "new Function("] {
            assert!(!served.text().contains(sink), "{module} uses {sink}");
        }
        sources.push(served.text().to_owned());
    }
    // Each is imported by another (app.js is the page's one script).
    for name in ["i18n", "dom", "api", "page", "resources", "agent", "egress", "overview", "cases", "lists", "forms"]
        .into_iter()
        .chain(["reader", "node", "provenance", "graph"])
    {
        let import = format!("from './{name}.js'");
        assert!(sources.iter().any(|s| s.contains(&import)), "no module imports {name}.js");
    }
    let graph =
        send(&f.app, get("/static/graph.js").header(header::AUTHORIZATION, &cookie).body(Body::empty()).unwrap()).await;
    // The vendored graph library (SPEC U1, S4): served by Labfy, exactly the
    // file VENDOR.md names, cached for good under its versioned path.
    let lib = get("/static/vendor/cytoscape-3.35.0.esm.min.mjs").header(header::AUTHORIZATION, &cookie);
    let lib = send(&f.app, lib.body(Body::empty()).unwrap()).await;
    assert_eq!(lib.status, StatusCode::OK);
    assert!(lib.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/javascript"));
    assert!(lib.headers[header::CACHE_CONTROL].to_str().unwrap().contains("immutable"));
    assert!(lib.headers.contains_key("content-security-policy"));
    let sha = labfy_store::sha256_hex(lib.text().as_bytes());
    assert_eq!(sha, "aa33b0103bbdb721aeb1506000cb6e056692400baba7264c552d000b09da01f2", "the vendored file changed");
    let vendor = include_str!("../assets/vendor/cytoscape/VENDOR.md");
    assert!(
        vendor.contains(&sha) && vendor.contains("| Version | 3.35.0 |"),
        "VENDOR.md does not name the served file"
    );
    assert!(graph.text().contains("/static/vendor/cytoscape-3.35.0.esm.min.mjs"), "graph.js loads another path");
}

#[tokio::test]
async fn s2_api_without_a_valid_session_is_401() {
    let f = fixture();
    let bogus = format!("Bearer {}.{}", "0".repeat(32), "0".repeat(64));
    for auth in [None, Some("Bearer "), Some("Bearer"), Some(bogus.as_str()), Some("Basic YTpi"), Some("other=1")] {
        for uri in
            ["/api/v1/session", "/api/v1/workspaces", "/api/v1/nope", "//api/v1/session", "/nope", "/static/x.js"]
        {
            let mut b = get(uri);
            if let Some(c) = auth {
                b = b.header(header::AUTHORIZATION, c);
            }
            let a = send(&f.app, b.body(Body::empty()).unwrap()).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{auth:?} {uri}");
            assert_eq!(a.error_code(), "NO_SESSION");
        }
    }
    let (cookie, _) = login(&f).await;
    let s = api(&f, &cookie, "/api/v1/session").await.json();
    assert_eq!(s["workspace_id"], f.workspace);
    assert_eq!(s["csrf_token"].as_str().unwrap().len(), 64);
    // Reloading / keeps the session and its token.
    let again = send(&f.app, get("/").header(header::AUTHORIZATION, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(again.status, StatusCode::OK);
    assert!(again.headers.get(header::SET_COOKIE).is_none());
    // Two Authorization headers are no session, even if one is right.
    let two = get("/api/v1/session").header(header::AUTHORIZATION, &cookie).header(header::AUTHORIZATION, "Bearer x");
    assert_eq!(send(&f.app, two.body(Body::empty()).unwrap()).await.status, StatusCode::UNAUTHORIZED);
}

/// SPEC V1 (the red team's F1): cookies are not scoped by port, so whatever
/// the analyst's browser holds as cookies reaches every program listening
/// on another port of 127.0.0.1. The session is never one: the very token
/// of a live session, sent as a cookie (under the old name or any other),
/// reads nothing and changes nothing.
#[tokio::test]
async fn v1_a_session_sent_as_a_cookie_authorises_nothing() {
    let f = fixture();
    let (auth, csrf) = login(&f).await;
    let token = auth.strip_prefix("Bearer ").unwrap();
    for cookie in [format!("labfy_session={token}"), format!("session={token}"), token.to_owned()] {
        for uri in
            ["/api/v1/session", "/api/v1/workspaces", &format!("/api/v1/investigations/{}/overview", f.investigation)]
        {
            let a = send(&f.app, get(uri).header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
            assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{cookie} {uri}");
        }
        let uri = format!("/api/v1/investigations/{}/evidence", f.investigation);
        let write = Request::builder()
            .method("POST")
            .uri(&uri)
            .header(header::HOST, HOST)
            .header(header::COOKIE, &cookie)
            .header(header::ORIGIN, ORIGIN)
            .header("X-CSRF-Token", &csrf)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(json!({"title": "Note", "content": "texte"}).to_string()))
            .unwrap();
        assert_eq!(send(&f.app, write).await.status, StatusCode::UNAUTHORIZED, "{cookie}");
        // The page a cookie-only browser gets hands over no session either.
        let page = send(&f.app, get("/").header(header::COOKIE, &cookie).body(Body::empty()).unwrap()).await;
        assert!(labfy_ipc::login::session_in_page(&page.text()).is_none());
    }
    // Nothing was written.
    assert_eq!(api(&f, &auth, "/api/v1/session").await.status, StatusCode::OK);
}

#[tokio::test]
async fn t4_the_ui_opens_only_with_a_one_time_login_link() {
    let f = fixture();
    // Anonymous: the login page, in both languages, and no session issued —
    // as many times as anyone asks (nothing to evict).
    for _ in 0..(labfy_server::session::MAX_SESSIONS + 8) {
        let a = send(&f.app, get("/login").body(Body::empty()).unwrap()).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED);
        assert!(a.headers.get(header::SET_COOKIE).is_none());
        assert!(a.text().contains("Connexion requise") && a.text().contains("Login required"), "{}", a.text());
        assert!(!a.text().contains("<script"), "the login page runs no script");
    }
    // A link works once; then, and for anything not made by this server's
    // key, the page says why.
    let (cookie, _) = login(&f).await;
    let code = f.state.mint_login_code();
    let first = send(&f.app, get(&format!("/login?code={code}")).body(Body::empty()).unwrap()).await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(labfy_ipc::login::session_in_page(&first.text()).is_some());
    let replay = send(&f.app, get(&format!("/login?code={code}")).body(Body::empty()).unwrap()).await;
    assert_eq!(replay.status, StatusCode::FORBIDDEN);
    assert!(replay.headers.get(header::SET_COOKIE).is_none());
    assert!(replay.text().contains("déjà servi"), "{}", replay.text());
    let other = labfy_ipc::login::LoginKey::generate().mint_code(std::time::SystemTime::now());
    for bad in [other.as_str(), "", "x.y.z"] {
        let a = send(&f.app, get(&format!("/login?code={bad}")).body(Body::empty()).unwrap()).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{bad:?}");
        assert!(a.headers.get(header::SET_COOKIE).is_none());
        assert!(labfy_ipc::login::session_in_page(&a.text()).is_none(), "{bad:?}");
    }
    // A query that is not one code (two of them) gets the same page, not a
    // bare text 400.
    for bad in ["/login?code=a&code=b"] {
        let a = send(&f.app, get(bad).body(Body::empty()).unwrap()).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(a.text().contains("n’a pas été émis par ce Labfy"), "{bad}: {}", a.text());
        assert!(a.headers.get(header::SET_COOKIE).is_none());
    }
    // The first session still works after all that.
    assert_eq!(api(&f, &cookie, "/api/v1/session").await.status, StatusCode::OK);
}

#[tokio::test]
async fn s3_mutations_need_own_origin_and_csrf_token() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let uri = format!("/api/v1/investigations/{}/evidence", f.investigation);
    let note = json!({"title": "Note", "content": "texte"});
    for (origin, token, code) in [
        (None, Some(csrf.as_str()), "BAD_ORIGIN"),
        (Some("http://evil.example"), Some(csrf.as_str()), "BAD_ORIGIN"),
        (Some("http://localhost:7345"), Some(csrf.as_str()), "BAD_ORIGIN"),
        (Some("https://127.0.0.1:7345"), Some(csrf.as_str()), "BAD_ORIGIN"),
        (Some("null"), Some(csrf.as_str()), "BAD_ORIGIN"),
        (Some(ORIGIN), None, "BAD_CSRF_TOKEN"),
        (Some(ORIGIN), Some("deadbeef"), "BAD_CSRF_TOKEN"),
        (Some(ORIGIN), Some(""), "BAD_CSRF_TOKEN"),
    ] {
        let a = send(&f.app, post_note(&uri, &cookie, origin, token, note.clone())).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{origin:?} {token:?}");
        assert_eq!(a.error_code(), code);
    }
    // Another session's token is not this session's token.
    let (_, other_csrf) = login(&f).await;
    let a = send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&other_csrf), note.clone())).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    // Other methods are mutations too.
    let del =
        Request::builder().method("DELETE").uri(&uri).header(header::HOST, HOST).header(header::AUTHORIZATION, &cookie);
    assert_eq!(send(&f.app, del.body(Body::empty()).unwrap()).await.status, StatusCode::FORBIDDEN);
    // Nothing was stored by the refused calls.
    let before = api(&f, &cookie, &format!("/api/v1/investigations/{}/overview", f.investigation)).await.json();
    assert_eq!(before["counts"]["evidence"], 80);
    let ok = send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), note)).await;
    assert_eq!(ok.status, StatusCode::CREATED, "{}", ok.text());
    let id = ok.json()["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("evidence:"));
    let ev = api(&f, &cookie, &format!("/api/v1/evidence/{id}")).await.json();
    assert_eq!(ev["title"], "Note");
    // localhost origin works when the page was opened as localhost.
    let mut req =
        post_note(&uri, &cookie, Some("http://localhost:7345"), Some(&csrf), json!({"title": "L", "content": "x"}));
    req.headers_mut().insert(header::HOST, "localhost:7345".parse().unwrap());
    assert_eq!(send(&f.app, req).await.status, StatusCode::CREATED);
}

#[tokio::test]
async fn s3_mutations_are_rate_limited_with_retry_after() {
    let f = fixture_with(RateLimit { burst: 3, per_second: 0.2 });
    let (cookie, csrf) = login(&f).await;
    let uri = format!("/api/v1/investigations/{}/evidence", f.investigation);
    for i in 0..3 {
        let a = send(
            &f.app,
            post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), json!({"title": format!("n{i}"), "content": "x"})),
        )
        .await;
        assert_eq!(a.status, StatusCode::CREATED);
    }
    let a =
        send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), json!({"title": "n4", "content": "x"}))).await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.error_code(), "RATE_LIMITED");
    let retry: u64 = a.headers[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!((1..=5).contains(&retry), "{retry}");
    // Reads are not limited, and the refused note was not stored.
    let o = api(&f, &cookie, &format!("/api/v1/investigations/{}/overview", f.investigation)).await;
    assert_eq!(o.status, StatusCode::OK);
    assert_eq!(o.json()["counts"]["evidence"], 83);
}

#[tokio::test]
async fn read_routes_answer_for_the_session_workspace() {
    let f = fixture();
    let (cookie, _) = login(&f).await;
    let inv = &f.investigation;
    let st = api(&f, &cookie, "/api/v1/status").await.json();
    assert!(st["processes"].is_null(), "{st}");
    assert!(st["isolation"]["isolated"].is_boolean());
    let ws = api(&f, &cookie, "/api/v1/workspaces").await.json();
    assert_eq!(ws["workspaces"].as_array().unwrap().len(), 2);
    let invs = api(&f, &cookie, &format!("/api/v1/workspaces/{}/investigations", f.workspace)).await.json();
    assert_eq!(invs["investigations"][0]["id"], *inv);
    let o = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/overview")).await.json();
    assert_eq!(o["workspace"]["class"], "SPECIMEN");
    let hub = o["top_entities"][0]["id"].as_str().unwrap().to_owned();
    let name = o["top_entities"][0]["name"].as_str().unwrap().to_owned();
    let q: String = name.split(' ').next().unwrap().to_owned();
    let s = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/search?q={q}&limit=5")).await;
    assert_eq!(s.status, StatusCode::OK, "{}", s.text());
    let hits = s.json()["hits"].as_array().unwrap().clone();
    assert!(!hits.is_empty());
    let ev = hits[0]["id"].as_str().unwrap().to_owned();
    let c = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/correlations?limit=3")).await.json();
    assert!(c["correlations"].as_array().unwrap().len() <= 3);
    let focused = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/correlations?focus={ev}")).await;
    assert_eq!(focused.status, StatusCode::OK);
    let summary = api(&f, &cookie, &format!("/api/v1/evidence/{ev}")).await.json();
    assert_eq!(summary["sha256"].as_str().unwrap().len(), 64);
    let ex = api(&f, &cookie, &format!("/api/v1/evidence/{ev}/excerpt?offset=0&length=20")).await.json();
    assert_eq!(ex["length"], 20);
    let node = api(&f, &cookie, &format!("/api/v1/graph/nodes/{hub}")).await.json();
    assert_eq!(node["kind"], "entity");
    let n = api(&f, &cookie, &format!("/api/v1/graph/nodes/{hub}/neighbors?limit=4")).await.json();
    assert_eq!(n["neighbors"].as_array().unwrap().len(), 4);
    assert_eq!(n["total"], node["degree"]);
    // The ego graph (SPEC U1): bounded, every edge between drawn nodes.
    let g =
        api(&f, &cookie, &format!("/api/v1/graph/nodes/{hub}/ego?limit=12&kinds=evidence,person,organisation")).await;
    assert_eq!(g.status, StatusCode::OK, "{}", g.text());
    let g = g.json();
    assert_eq!(g["center"]["id"], hub.as_str());
    let nodes = g["nodes"].as_array().unwrap();
    assert!(!nodes.is_empty() && nodes.len() <= 12);
    assert!(
        nodes
            .iter()
            .all(|n| n["kind"] == "evidence" || ["person", "organisation"].contains(&n["subkind"].as_str().unwrap()))
    );
    let mut drawn: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    drawn.push(hub.as_str());
    assert!(g["edges"].as_array().unwrap().iter().all(|e| drawn.contains(&e["source"].as_str().unwrap())
        && drawn.contains(&e["target"].as_str().unwrap())
        && e["weight"].as_u64().unwrap() >= 1));
    assert!(g["left_out"].as_array().unwrap().iter().any(|l| l["relation"] == "mentions"), "a hub leaves pieces out");
    // The lists behind the counts (SPEC U2): keyset pages.
    let first =
        api(&f, &cookie, &format!("/api/v1/investigations/{inv}/lists/entities?kind=person&sort=name&limit=3")).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    let first = first.json();
    assert_eq!((first["sort"].as_str(), first["order"].as_str()), (Some("name"), Some("asc")));
    let names: Vec<&str> = first["items"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 3);
    let next = first["next"].as_str().unwrap();
    assert_eq!(next, first["items"][2]["id"].as_str().unwrap());
    let second = api(
        &f,
        &cookie,
        &format!("/api/v1/investigations/{inv}/lists/entities?kind=person&sort=name&limit=3&after={next}"),
    )
    .await
    .json();
    let after: Vec<&str> = second["items"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert!(after[0].to_lowercase() >= names[2].to_lowercase(), "{names:?} then {after:?}");
    let rels =
        api(&f, &cookie, &format!("/api/v1/investigations/{inv}/lists/relations?kind=works_for&limit=2")).await.json();
    assert!(
        rels["items"].as_array().unwrap().iter().all(|x| x["kind"] == "works_for" && x["src"]["label"].is_string())
    );
    let listed =
        api(&f, &cookie, &format!("/api/v1/investigations/{inv}/lists/evidence?prefix=Courriel&limit=5")).await.json();
    assert_eq!(listed["sort"], "title");
    assert!(!listed["items"].as_array().unwrap().is_empty());
    assert!(listed["items"].as_array().unwrap().iter().all(|x| x["title"].as_str().unwrap().starts_with("Courriel")));
    let p = api(&f, &cookie, &format!("/api/v1/provenance/{ev}?depth=3")).await.json();
    assert_eq!(p["root"], ev);
    assert!(!p["records"].as_array().unwrap().is_empty());
    let jobs = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/jobs")).await.json();
    let job = jobs["jobs"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(api(&f, &cookie, &format!("/api/v1/jobs/{job}")).await.json()["status"], "SUCCEEDED");
}

#[tokio::test]
async fn bad_input_gets_a_clear_json_error() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let inv = &f.investigation;
    let bare = inv.trim_start_matches("investigation:");
    let cases: Vec<(String, StatusCode, &str)> = vec![
        (format!("/api/v1/investigations/{bare}/overview"), StatusCode::BAD_REQUEST, "bare UUID"),
        (format!("/api/v1/investigations/document:{bare}/overview"), StatusCode::BAD_REQUEST, "unknown namespace"),
        (
            format!("/api/v1/investigations/evidence:{bare}/overview"),
            StatusCode::BAD_REQUEST,
            "expected a `investigation:`",
        ),
        (format!("/api/v1/investigations/investigation:{}/overview", uuid_other()), StatusCode::NOT_FOUND, "not found"),
        (format!("/api/v1/investigations/{inv}/search?q={}", "a".repeat(257)), StatusCode::BAD_REQUEST, "too long"),
        (format!("/api/v1/investigations/{inv}/search"), StatusCode::BAD_REQUEST, "q"),
        (format!("/api/v1/investigations/{inv}/search?q=x&limit=101"), StatusCode::BAD_REQUEST, "limit"),
        (format!("/api/v1/investigations/{inv}/search?q=x&evil=1"), StatusCode::BAD_REQUEST, "evil"),
        (format!("/api/v1/investigations/{inv}/search?q=x&limit=-1"), StatusCode::BAD_REQUEST, "limit"),
        (format!("/api/v1/graph/nodes/entity:{}/neighbors?limit=501", uuid_other()), StatusCode::BAD_REQUEST, "limit"),
        (format!("/api/v1/graph/nodes/entity:{}/ego?limit=501", uuid_other()), StatusCode::BAD_REQUEST, "limit"),
        (format!("/api/v1/graph/nodes/{inv}/ego?kinds=planet"), StatusCode::BAD_REQUEST, "unknown value `planet`"),
        (format!("/api/v1/graph/nodes/{inv}/ego?depth=2"), StatusCode::BAD_REQUEST, "depth"),
        (format!("/api/v1/graph/nodes/{inv}/ego"), StatusCode::BAD_REQUEST, "only an entity or a piece of evidence"),
        (format!("/api/v1/investigations/{inv}/lists/people"), StatusCode::NOT_FOUND, "no list `people`"),
        (format!("/api/v1/investigations/{inv}/lists/evidence?sort=size"), StatusCode::BAD_REQUEST, "unknown sort"),
        (format!("/api/v1/investigations/{inv}/lists/evidence?after=nope"), StatusCode::BAD_REQUEST, "reference"),
        (format!("/api/v1/investigations/{inv}/lists/entities?limit=201"), StatusCode::BAD_REQUEST, "limit"),
        (format!("/api/v1/provenance/{inv}?depth=17"), StatusCode::BAD_REQUEST, "depth"),
        ("/api/v1/evidence/evidence:zzz".to_owned(), StatusCode::BAD_REQUEST, "invalid UUID"),
        ("/api/v1/nothing-here".to_owned(), StatusCode::NOT_FOUND, "no such API route"),
    ];
    for (uri, status, needle) in cases {
        let a = api(&f, &cookie, &uri).await;
        assert_eq!(a.status, status, "{uri}: {}", a.text());
        let msg = a.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains(needle), "{uri}: {msg}");
    }
    // Objects of another workspace are invisible.
    let other_ws = labfy_store::specimen::workspace_id_for_seed(5);
    let a = api(&f, &cookie, &format!("/api/v1/workspaces/workspace:{other_ws}/investigations")).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    // Malformed bodies use the same format and store nothing.
    let uri = format!("/api/v1/investigations/{inv}/evidence");
    for body in [
        json!({"title": "t"}),
        json!({"title": "t", "content": "c", "extra": 1}),
        json!({"title": 3, "content": "c"}),
        json!({"title": "", "content": "c"}),
    ] {
        let a = send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), body.clone())).await;
        assert!(a.status.is_client_error(), "{body}: {}", a.status);
        assert!(!a.error_code().is_empty(), "{body}: {}", a.text());
    }
    let mut raw = post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), json!({}));
    *raw.body_mut() = Body::from("{not json");
    let a = send(&f.app, raw).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), "INVALID_INPUT");
    let big = "x".repeat(labfy_server::MAX_BODY_BYTES + 10);
    let a =
        send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), json!({"title": "t", "content": big}))).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    let o = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/overview")).await.json();
    assert_eq!(o["counts"]["evidence"], 80);
}

fn uuid_other() -> String {
    "0b6a9c2e-5a51-4f55-9a3e-8a8c1d0e7f11".to_owned()
}

/// A POST of the session, every header a change needs, body still to give.
fn change(uri: &str, cookie: &str, csrf: &str) -> axum::http::request::Builder {
    Request::builder()
        .method("POST")
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, cookie)
        .header(header::ORIGIN, ORIGIN)
        .header("X-CSRF-Token", csrf)
        .header(header::CONTENT_TYPE, "application/json")
}

/// A POST with a raw body (what `post_note` cannot express: duplicate keys).
fn post_raw(uri: &str, cookie: &str, csrf: &str, body: &str) -> Request<Body> {
    change(uri, cookie, csrf).body(Body::from(body.to_owned())).unwrap()
}

#[tokio::test]
async fn t5_host_follows_rfc_9112() {
    let f = fixture();
    // Two Host lines: 400, whichever comes first.
    for pair in [[HOST, "evil.example"], ["evil.example", HOST], [HOST, HOST]] {
        let req = Request::builder()
            .uri("/")
            .header(header::HOST, pair[0])
            .header(header::HOST, pair[1])
            .body(Body::empty())
            .unwrap();
        let a = send(&f.app, req).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{pair:?}");
        assert_eq!(a.error_code(), "DUPLICATE_HOST");
        assert_eq!(a.headers[header::CONTENT_SECURITY_POLICY], CSP);
    }
    // An absolute-form target must name the Host's authority.
    let a = send(&f.app, get("http://evil.example/").body(Body::empty()).unwrap()).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), "HOST_MISMATCH");
    let a = send(&f.app, get(&format!("http://{HOST}/login")).body(Body::empty()).unwrap()).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "past the Host check: {}", a.text());
}

#[tokio::test]
async fn t5_duplicate_keys_are_refused_in_every_body_at_any_depth() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let notes = format!("/api/v1/investigations/{}/evidence", f.investigation);
    // Top level.
    let a = send(&f.app, post_raw(&notes, &cookie, &csrf, r#"{"title":"a","title":"b","content":"x"}"#)).await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text());
    // Inside a gateway call's free-form input (red team H23: last won).
    let turn =
        send(&f.app, post_raw("/api/v1/agent-tools/turns", &cookie, &csrf, r#"{"question":"manuel","mode":"manual"}"#))
            .await
            .json();
    let call = format!(
        r#"{{"turn_id":"{}","call_id":"{}","tool_id":"evidence.search","input":{{"query":"zalgo","query":"Brise"}},
            "context":{{}},"object_refs":[],"idempotency_key":"dup-1"}}"#,
        turn["turn_id"].as_str().unwrap(),
        uuid::Uuid::new_v4()
    );
    let a = send(&f.app, post_raw("/api/v1/agent-tools/calls", &cookie, &csrf, &call)).await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text());
    assert!(a.json()["error"]["message"].as_str().unwrap().contains("duplicate key `query`"), "{}", a.text());
    // The same body without the duplicate is not refused for its shape.
    let ok = r#"{"title":"t","content":"x"}"#;
    let a = send(&f.app, post_raw(&notes, &cookie, &csrf, ok)).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text());
}

#[tokio::test]
async fn t5_an_oversized_body_is_refused_from_its_announced_length() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let notes = format!("/api/v1/investigations/{}/evidence", f.investigation);
    // Announced 10^12 bytes, none sent: refused at once, nothing read.
    let req =
        change(&notes, &cookie, &csrf).header(header::CONTENT_LENGTH, "1000000000000").body(Body::empty()).unwrap();
    let a = send(&f.app, req).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(a.error_code(), "BODY_TOO_LARGE");
}

#[tokio::test]
async fn t5_changes_in_flight_cannot_starve_reads() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let notes = format!("/api/v1/investigations/{}/evidence", f.investigation);
    // Every change slot held by a request whose body never finishes.
    let mut held = Vec::new();
    for _ in 0..labfy_server::MAX_CONCURRENT_CHANGES {
        let (tx, body) = tokio::sync::mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(1);
        tx.send(Ok(axum::body::Bytes::from_static(b"{"))).await.unwrap();
        let body = Body::from_stream(tokio_stream(body));
        let req = change(&notes, &cookie, &csrf).body(body).unwrap();
        let app = f.app.clone();
        held.push((tx, tokio::spawn(async move { app.oneshot(req).await })));
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // One more change: the pool is full.
    let a = send(&f.app, post_raw(&notes, &cookie, &csrf, r#"{"title":"t","content":"x"}"#)).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text());
    // Reads and the page still answer.
    let page = send(&f.app, get("/").header(header::AUTHORIZATION, &cookie).body(Body::empty()).unwrap()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(api(&f, &cookie, "/api/v1/session").await.status, StatusCode::OK);
    drop(held);
}

/// A stream of the channel's chunks (the body of a client that stalls).
fn tokio_stream(
    mut rx: tokio::sync::mpsc::Receiver<Result<axum::body::Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<axum::body::Bytes, std::io::Error>> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// SPEC C4: the analyst starts an extraction; it runs in the background and
/// is followed as a job; the graph and the overview then show what it found.
#[tokio::test]
async fn c4_extraction_runs_as_a_job_and_fills_the_graph() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let inv = &f.investigation;
    let uri = format!("/api/v1/investigations/{inv}/extraction");
    let a = send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), json!({}))).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text());
    let job = a.json();
    assert_eq!(job["kind"], "extraction");
    let id = job["id"].as_str().unwrap().to_owned();
    let mut done = Value::Null;
    for _ in 0..400 {
        done = api(&f, &cookie, &format!("/api/v1/jobs/{id}")).await.json();
        if done["status"] != "RUNNING" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(done["progress"], 1.0);
    assert!(done["detail"].as_str().unwrap().starts_with("80/80 evidence items scanned"), "{done}");
    let jobs = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/jobs")).await.json();
    assert_eq!(jobs["jobs"][0]["id"], id.as_str());
    // Nothing left to scan: a second run ends at once and finds nothing new.
    let again = send(&f.app, post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), json!({}))).await.json();
    assert_ne!(again["id"], id.as_str());
    // Another workspace's investigation is not found, and nothing starts.
    let other = labfy_store::specimen::workspace_id_for_seed(5);
    let invs = f.state.db().read(move |r| r.investigations(other)).await.unwrap();
    let foreign = format!("/api/v1/investigations/{}/extraction", invs[0].id);
    let a = send(&f.app, post_note(&foreign, &cookie, Some(ORIGIN), Some(&csrf), json!({}))).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
}

fn delete(uri: &str, cookie: &str, csrf: &str) -> Request<Body> {
    Request::builder()
        .method("DELETE")
        .uri(uri)
        .header(header::HOST, HOST)
        .header(header::AUTHORIZATION, cookie)
        .header(header::ORIGIN, ORIGIN)
        .header("X-CSRF-Token", csrf)
        .body(Body::empty())
        .unwrap()
}

/// SPEC C4: the analyst draws, renames, merges and deletes entities and
/// relations through the API; bad input is a 400 that says why, a
/// duplicate a 409, and each change is in the audit log.
#[tokio::test]
async fn c4_the_analyst_edits_the_graph_through_the_api() {
    let f = fixture();
    let (cookie, csrf) = login(&f).await;
    let inv = &f.investigation;
    let post = |uri: String, body: Value| post_note(&uri, &cookie, Some(ORIGIN), Some(&csrf), body);
    let ents = format!("/api/v1/investigations/{inv}/entities");
    let a = send(&f.app, post(ents.clone(), json!({"kind": "domain", "name": "Zeta-Holding.FR"}))).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text());
    let zeta = a.json();
    assert_eq!((zeta["label"].as_str(), zeta["subkind"].as_str()), (Some("zeta-holding.fr"), Some("domain")));
    let a = send(&f.app, post(ents.clone(), json!({"kind": "domain", "name": "zeta-holding.fr"}))).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    for body in [
        json!({"kind": "domain", "name": "rapport.pdf"}),
        json!({"kind": "planet", "name": "Mars"}),
        json!({"kind": "person", "name": "x", "extra": 1}),
    ] {
        let a = send(&f.app, post(ents.clone(), body.clone())).await;
        // A rule broken is 400; a body of the wrong shape 422, as for notes.
        assert!(
            a.status == StatusCode::BAD_REQUEST || a.status == StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            a.text()
        );
        assert!(a.error_code() == "INVALID_INPUT", "{body}: {}", a.text());
    }
    let other = send(&f.app, post(ents.clone(), json!({"kind": "domain", "name": "zeta.fr"}))).await.json();
    // A relation from an evidence item to the new entity.
    let ov = api(&f, &cookie, &format!("/api/v1/investigations/{inv}/overview")).await.json();
    let ev = ov["recent_evidence"][0]["id"].as_str().unwrap().to_owned();
    let rels = format!("/api/v1/investigations/{inv}/relations");
    let a = send(&f.app, post(rels.clone(), json!({"kind": "mentions", "src": ev, "dst": other["id"]}))).await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.text());
    let rel = a.json()["id"].as_str().unwrap().to_owned();
    let a = send(&f.app, post(rels.clone(), json!({"kind": "mentions", "src": ev, "dst": ev}))).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    // Rename, merge, delete.
    let zid = zeta["id"].as_str().unwrap().to_owned();
    let a = send(&f.app, post(format!("/api/v1/entities/{zid}/rename"), json!({"name": "zeta-group.fr"}))).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_eq!(a.json()["details"]["aliases"], json!(["zeta-holding.fr"]));
    let oid = other["id"].as_str().unwrap().to_owned();
    let a = send(&f.app, post(format!("/api/v1/entities/{oid}/merge"), json!({"into": zid}))).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text());
    assert_eq!(a.json()["details"]["evidence_count"], 1, "the relation moved to the kept entity");
    assert_eq!(api(&f, &cookie, &format!("/api/v1/graph/nodes/{oid}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(api(&f, &cookie, &format!("/api/v1/graph/nodes/{rel}")).await.status, StatusCode::OK);
    let a = send(&f.app, delete(&format!("/api/v1/relations/{rel}"), &cookie, &csrf)).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text());
    let a = send(&f.app, delete(&format!("/api/v1/entities/{zid}"), &cookie, &csrf)).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert_eq!(
        send(&f.app, delete(&format!("/api/v1/entities/{zid}"), &cookie, &csrf)).await.status,
        StatusCode::NOT_FOUND
    );
    let audit: Vec<String> = f
        .state
        .db()
        .read({
            let ws: uuid::Uuid = f.workspace.trim_start_matches("workspace:").parse().unwrap();
            move |r| r.audit(ws, 20)
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for action in
        ["entity.create", "relation.create", "entity.rename", "entity.merge", "relation.delete", "entity.delete"]
    {
        assert!(audit.contains(&action.to_owned()), "{action} missing from {audit:?}");
    }
}

/// Issue 19: the API's OpenAPI document is served behind the session like
/// every route, and every operation it names reaches a handler of its own
/// (never the `/api` catch-all nor a 405), answering its documented success
/// status or the one refusal format.
#[tokio::test]
async fn the_openapi_document_is_guarded_and_every_operation_reaches_its_handler() {
    let f = fixture();
    let anonymous = send(&f.app, get("/api/v1/openapi.json").body(Body::empty()).unwrap()).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let (cookie, csrf) = login(&f).await;
    let doc = api(&f, &cookie, "/api/v1/openapi.json").await;
    assert_eq!(doc.status, StatusCode::OK);
    let doc = doc.json();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut reached = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        // A well-formed reference of the documented kind that nobody has:
        // each handler refuses it as not found — never as an unknown route.
        let mut uri = path.clone();
        for op in item.as_object().unwrap().values() {
            for param in op["parameters"].as_array().into_iter().flatten() {
                let name = param["name"].as_str().unwrap();
                let schema = match param["schema"]["$ref"].as_str() {
                    Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
                    None => &param["schema"],
                };
                let value = match schema["pattern"].as_str().and_then(|p| p.strip_prefix('^')) {
                    Some(p) if p.contains('|') => "evidence:0190a4f1-0000-7000-8000-000000000000".to_owned(),
                    Some(p) => format!(
                        "{}:0190a4f1-0000-7000-8000-000000000000",
                        p.split(':').next().unwrap().trim_matches(['(', ')'])
                    ),
                    None if schema["format"] == "uuid" => "0190a4f1-0000-7000-8000-000000000000".to_owned(),
                    None => if name == "list" { "evidence" } else { "nothing.tar" }.to_owned(),
                };
                uri = uri.replace(&format!("{{{name}}}"), &value);
            }
        }
        assert!(!uri.contains('{'), "{path}: a path parameter is not documented");
        for (method, op) in item.as_object().unwrap() {
            let mut b = Request::builder()
                .method(method.to_uppercase().as_str())
                .uri(&uri)
                .header(header::HOST, HOST)
                .header(header::AUTHORIZATION, &cookie);
            if method != "get" {
                b = b.header(header::ORIGIN, ORIGIN).header("X-CSRF-Token", &csrf);
            }
            let body = if op.get("requestBody").is_some_and(|r| r["content"].get("application/json").is_some()) {
                b = b.header(header::CONTENT_TYPE, "application/json");
                Body::from("{}")
            } else {
                Body::empty()
            };
            let a = send(&f.app, b.body(body).unwrap()).await;
            let what = format!("{method} {uri}: {} {}", a.status, a.text());
            assert_ne!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{what}");
            assert!(!a.text().contains("no such API route"), "{what}");
            assert!(!a.status.is_server_error(), "{what}");
            let documented = op["responses"].as_object().unwrap().contains_key(a.status.as_str());
            if !documented {
                assert!(!a.error_code().is_empty(), "an undocumented status must be a refusal: {what}");
            }
            reached += 1;
        }
    }
    assert!(reached > 50, "only {reached} operations");
}

/// Found by schemathesis (issue 19): both event feeds refuse a cursor no
/// browser holds exactly (past 2^53 - 1), in the one refusal format; the
/// largest one it holds is a cursor like any other.
#[tokio::test]
async fn event_cursors_past_what_a_browser_holds_are_refused() {
    let f = fixture();
    let (cookie, _) = login(&f).await;
    for feed in ["/api/v1/agent-tools/events", "/api/v1/agent-runtime/events"] {
        let a = api(&f, &cookie, &format!("{feed}?cursor=9007199254740992")).await;
        assert_eq!((a.status, a.error_code().as_str()), (StatusCode::BAD_REQUEST, "INVALID_INPUT"), "{feed}");
        assert!(a.text().contains("at most 9007199254740991"), "{feed}: {}", a.text());
        let a = api(&f, &cookie, &format!("{feed}?cursor=9007199254740991")).await;
        assert_eq!(a.status, StatusCode::OK, "{feed}: {}", a.text());
    }
}
