//! Import from the browser (SPEC C2) through the router: a job, a
//! `multipart/form-data` batch streamed part by part into the blob store,
//! each part read by the real parser worker (the built `labfy-server`
//! started as the worker) and given its outcome; the report; the original
//! bytes downloaded as an attachment only.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::PathBuf;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use labfy_parse::fixtures;
use labfy_server::session::RateLimit;
use labfy_server::{AppState, app, db::Db};
use labfy_store::Store;
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

mod common;
use common::{HOST, PORT, open_session};
const ORIGIN: &str = "http://127.0.0.1:7345";
const BOUNDARY: &str = "labfy-test-boundary-7d1e";

struct Fixture {
    _dir: TempDir,
    app: Router,
    cookie: String,
    csrf: String,
    investigation: String,
}

async fn fixture() -> Fixture {
    fixture_with(None).await
}

/// A REAL workspace served with the runtime directory `run` (its governor
/// admits the reading), or none (no supervisor: not governed).
async fn fixture_with(run: Option<&std::path::Path>) -> Fixture {
    let dir = TempDir::new().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Affaire Alpha", "test").unwrap();
    let mut state = AppState::new(Db::new(store, dir.path().to_path_buf()), PORT, ws.id(), RateLimit::default())
        .unwrap()
        .with_parser(PathBuf::from(env!("CARGO_BIN_EXE_labfy-server")));
    if let Some(run) = run {
        state = state.with_runtime_dir(run.to_path_buf());
    }
    let app = app(state.clone());
    let (cookie, csrf) = open_session(&app, &state).await;
    Fixture { _dir: dir, app, cookie, csrf, investigation: inv.to_string() }
}

impl Fixture {
    fn request(&self, method: &str, uri: &str) -> axum::http::request::Builder {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, HOST)
            .header(header::AUTHORIZATION, &self.cookie)
            .header(header::ORIGIN, ORIGIN)
            .header("X-CSRF-Token", &self.csrf)
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
        let res = self.app.clone().oneshot(req).await.unwrap();
        let (status, headers) = (res.status(), res.headers().clone());
        (status, headers, res.into_body().collect().await.unwrap().to_bytes().to_vec())
    }

    async fn json(&self, req: Request<Body>) -> (StatusCode, Value) {
        let (status, _, body) = self.send(req).await;
        (status, serde_json::from_slice(&body).unwrap_or_else(|_| json!(String::from_utf8_lossy(&body))))
    }
}

fn uuid_of(r: &str) -> &str {
    r.split_once(':').unwrap().1
}

fn multipart(parts: &[(&str, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, bytes) in parts {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

#[tokio::test]
async fn c2_files_dropped_in_the_browser_are_imported_with_an_outcome_each() {
    let f = fixture().await;
    let inv = &f.investigation;
    let start = f
        .request("POST", &format!("/api/v1/investigations/{inv}/imports"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({"expected": 5}).to_string()))
        .unwrap();
    let (status, v) = f.json(start).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let job = v["job"].as_str().unwrap().to_owned();

    let text = "Écrit par jean@alpha.example depuis 198.51.100.9".as_bytes();
    let pdf = fixtures::pdf(&["Rapport Alpha", "IBAN FR76 3000 6000 0112 3456 7890 189"]);
    let body = multipart(&[
        ("dossier/a.txt", text),
        ("dossier/rapport.pdf", &pdf),
        ("dossier/vide.txt", b""),
        ("../dehors.txt", b"x"),
        ("dossier/copie.txt", text),
    ]);
    let upload = f
        .request("POST", &format!("/api/v1/imports/{job}/files"))
        .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"))
        .header(header::CONTENT_LENGTH, body.len())
        .body(Body::from(body))
        .unwrap();
    let (status, v) = f.json(upload).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let outcomes: Vec<(&str, &str)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["path"].as_str().unwrap(), o["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("dossier/a.txt", "imported"),
            ("dossier/rapport.pdf", "imported"),
            ("dossier/vide.txt", "refused"),
            ("../dehors.txt", "refused"),
            ("dossier/copie.txt", "duplicate"),
        ],
        "{v}"
    );
    assert!(v["files"][3]["reason"].as_str().unwrap().contains(".."), "{v}");
    let pdf_ev = v["files"][1]["evidence"].as_str().unwrap().to_owned();
    assert_eq!(v["files"][4]["evidence"], v["files"][0]["evidence"]);

    let (status, stats) =
        f.json(f.request("POST", &format!("/api/v1/imports/{job}/finish")).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(
        (stats["files"].as_u64(), stats["imported"].as_u64(), stats["refused"].as_u64()),
        (Some(5), Some(2), Some(2))
    );
    let (_, report) =
        f.json(f.request("GET", &format!("/api/v1/jobs/{job}/report")).body(Body::empty()).unwrap()).await;
    assert_eq!(report.as_array().unwrap().len(), 5);

    // The PDF was read by the worker: its text and its selectors.
    let (_, ev) = f.json(f.request("GET", &format!("/api/v1/evidence/{pdf_ev}")).body(Body::empty()).unwrap()).await;
    assert_eq!(ev["mime"], "application/pdf");
    assert_eq!(ev["original"], true);
    assert_eq!(ev["imports"][0]["format"], "pdf", "{ev}");
    assert!(ev["entities"].as_array().unwrap().iter().any(|e| e["kind"] == "iban"), "{ev}");

    // The original, byte for byte, as an attachment that is never rendered.
    let (status, headers, bytes) =
        f.send(f.request("GET", &format!("/api/v1/evidence/{pdf_ev}/original")).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(bytes, pdf);
    assert_eq!(headers[header::CONTENT_TYPE], "application/octet-stream");
    assert_eq!(headers[header::CONTENT_DISPOSITION], "attachment; filename=\"rapport.pdf\"");
    let policies: Vec<&str> =
        headers.get_all(header::CONTENT_SECURITY_POLICY).iter().map(|v| v.to_str().unwrap()).collect();
    assert!(policies.iter().any(|p| p.starts_with("sandbox")), "{policies:?}");
    assert!(policies.contains(&labfy_server::security::CSP), "the global policy still applies: {policies:?}");

    // The investigation exported from the UI: a job, then a bundle that
    // verifies against its fingerprint, and its archive.
    let (status, v) =
        f.json(f.request("POST", &format!("/api/v1/investigations/{inv}/export")).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    let export_job = v["job"].as_str().unwrap().to_owned();
    let mut row = Value::Null;
    for _ in 0..200 {
        row = f.json(f.request("GET", &format!("/api/v1/jobs/{export_job}")).body(Body::empty()).unwrap()).await.1;
        if row["status"] != "RUNNING" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(row["status"], "SUCCEEDED", "{row}");
    let dir = PathBuf::from(row["stats"]["dir"].as_str().unwrap());
    let fingerprint = row["stats"]["fingerprint"].as_str().unwrap();
    let checked = labfy_store::bundle::verify(&dir, Some(fingerprint)).expect("the UI's bundle verifies");
    assert!(checked.files > 10, "{checked:?}");
    let manifest: Value = serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["egress_ledger"].as_str().unwrap().contains("labfy export"), "the manifest says what is missing");
    let archive = row["stats"]["archive"].as_str().unwrap();
    let (status, headers, tar) =
        f.send(f.request("GET", &format!("/api/v1/exports/{archive}")).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/x-tar");
    let mut names: Vec<String> = tar::Archive::new(&tar[..])
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.iter().any(|n| n.ends_with("/manifest.json")), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(&format!("/blobs/{}", labfy_store::sha256_hex(&pdf)))), "{names:?}");
    for bad in ["../labfy.sqlite3", "x.tar", &format!("{}-1.tar", uuid_of(inv))] {
        let (status, _, _) =
            f.send(f.request("GET", &format!("/api/v1/exports/{bad}")).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{bad}");
    }

    // A finished job takes no more files.
    let body = multipart(&[("b.txt", b"more")]);
    let late = f
        .request("POST", &format!("/api/v1/imports/{job}/files"))
        .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"))
        .body(Body::from(body))
        .unwrap();
    let (status, v) = f.json(late).await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
}

#[tokio::test]
async fn c2_an_upload_announced_over_the_bound_is_refused_before_it_is_read() {
    let f = fixture().await;
    let inv = &f.investigation;
    let start = f
        .request("POST", &format!("/api/v1/investigations/{inv}/imports"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{}"))
        .unwrap();
    let (_, v) = f.json(start).await;
    let job = v["job"].as_str().unwrap().to_owned();
    let req = f
        .request("POST", &format!("/api/v1/imports/{job}/files"))
        .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"))
        .header(header::CONTENT_LENGTH, (labfy_server::routes::import::MAX_UPLOAD_REQUEST_BYTES + 1).to_string())
        .body(Body::empty())
        .unwrap();
    let (status, v) = f.json(req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    // Anything but the upload route keeps the small bound.
    let req = f
        .request("POST", &format!("/api/v1/investigations/{inv}/imports"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, (labfy_server::MAX_BODY_BYTES + 1).to_string())
        .body(Body::empty())
        .unwrap();
    assert_eq!(f.json(req).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

/// SPEC A1, I1: under a supervisor, an upload's documents are read by a
/// parser worker the governor admits — asked again while it refuses (the
/// cores held by another import), given back when the request ends; a
/// governor that cannot admit it answers `503 NOT_ADMITTED` with its reason
/// before a byte is kept.
#[tokio::test]
async fn the_governor_admits_the_reading_of_an_upload() {
    use labfy_ipc::messages::Boundary;
    use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse, Refusal};
    use labfy_ipc::messages::{Failure, FailureCode};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Seen {
        asks: Vec<(String, u32)>,
        released: Vec<String>,
    }
    let run = common::runtime_dir();
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let s = seen.clone();
    common::serve_fake(&run, Boundary::Governor, move |req: GovernorRequest, _peer| {
        let s = s.clone();
        async move {
            let mut s = s.lock().unwrap();
            match req {
                GovernorRequest::AdmitReading(ask) => {
                    s.asks.push((ask.job.to_string(), ask.workers));
                    match s.asks.len() {
                        1 => GovernorResponse::Refused(Refusal {
                            reason: "CPU: 1 core asked, 0 admissible (2 cores counted − 2 held)".into(),
                            blocked_by: vec!["job:other (res-0)".into()],
                        }),
                        2 => GovernorResponse::AdmittedReading { reservation: "res-1".into(), workers: 1 },
                        _ => GovernorResponse::Failed(Failure {
                            code: FailureCode::Unavailable,
                            message: "memory pressure: swap 80 % used".into(),
                        }),
                    }
                }
                GovernorRequest::Release { reservation } => {
                    s.released.push(reservation);
                    GovernorResponse::Released {}
                }
                other => GovernorResponse::Failed(Failure {
                    code: FailureCode::InvalidInput,
                    message: format!("the test governor does not answer {other:?}"),
                }),
            }
        }
    });
    let f = fixture_with(Some(&run.dir)).await;
    let inv = &f.investigation;
    let start = f
        .request("POST", &format!("/api/v1/investigations/{inv}/imports"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(json!({}).to_string()))
        .unwrap();
    let (status, v) = f.json(start).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let job = v["job"].as_str().unwrap().to_owned();
    let upload = |name: &str| {
        let body = multipart(&[(name, "Écrit par zeta@zeta.example".as_bytes())]);
        f.request("POST", &format!("/api/v1/imports/{job}/files"))
            .header(header::CONTENT_TYPE, format!("multipart/form-data; boundary={BOUNDARY}"))
            .header(header::CONTENT_LENGTH, body.len())
            .body(Body::from(body))
            .unwrap()
    };
    let (status, v) = f.json(upload("a.txt")).await;
    assert_eq!(status, StatusCode::OK, "refused once, asked again, admitted: {v}");
    assert_eq!(v["files"][0]["outcome"], "imported", "{v}");
    // Given back when the request ended (by a task of its own).
    for _ in 0..100 {
        if !seen.lock().unwrap().released.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(seen.lock().unwrap().released, ["res-1"]);
    assert_eq!(seen.lock().unwrap().asks, [(job.clone(), 1), (job.clone(), 1)]);

    let (status, v) = f.json(upload("b.txt")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
    assert_eq!(v["error"]["code"], "NOT_ADMITTED", "{v}");
    assert_eq!(
        v["error"]["message"],
        "not admitted: the governor could not admit it: UNAVAILABLE: memory pressure: swap 80 % used",
        "{v}"
    );
    let report = f.request("GET", &format!("/api/v1/jobs/{job}/report")).body(Body::empty()).unwrap();
    let (_, lines) = f.json(report).await;
    assert_eq!(lines.as_array().unwrap().len(), 1, "the refused request kept nothing: {lines}");
}
