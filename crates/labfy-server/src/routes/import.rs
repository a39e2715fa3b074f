//! Import from the browser (SPEC C2): an import job, then its files sent as
//! `multipart/form-data` in one or more requests, each part streamed into
//! the blob store (hashed, bounded, flushed, renamed), read by a parser
//! worker — this program started again, confining itself before it reads —
//! and recorded in one transaction; each part gets its outcome. The
//! original bytes of an item can be downloaded, always as an attachment.
//!
//! The writer is held only for each file's transaction, never while a
//! parser runs.

use std::path::PathBuf;

use axum::body::Body;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{DefaultBodyLimit, Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use labfy_core::RefKind;
use labfy_store::blobs::{Blob, BlobError, BlobStore};
use labfy_store::{
    ImportOutcome, ImportReportLine, ImportStats, ImportedFile, MAX_IMPORT_NAME_CHARS, MAX_IMPORT_PATH_CHARS,
    StoreError, check_import_path, import_tree,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery, path_ref};
use crate::security::CurrentSession;
use crate::state::AppState;

/// Largest file taken from the browser.
pub const MAX_UPLOAD_FILE_BYTES: u64 = 256 << 20;
pub use crate::MAX_UPLOAD_REQUEST_BYTES;
/// Most files in one request.
pub const MAX_UPLOAD_FILES: usize = 200;
/// How long a parser worker may take under the server (within the
/// request's own deadline).
pub const SERVER_PARSE_SECONDS: u64 = 20;
/// Files read at once, whatever the number of uploads (each worker may take
/// 1 GiB of address space and a core).
pub const MAX_PARSING_FILES: usize = 2;

/// The permits of [`MAX_PARSING_FILES`].
static PARSING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_PARSING_FILES);

/// The import routes (merged before the `/api` catch-all).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/investigations/{investigation}/imports", post(start))
        .route("/api/v1/imports/{job}/files", post(files).layer(DefaultBodyLimit::max(MAX_UPLOAD_REQUEST_BYTES)))
        .route("/api/v1/imports/{job}/finish", post(finish))
        .route("/api/v1/jobs/{job}/report", get(report))
        .route("/api/v1/evidence/{evidence}/original", get(original))
}

type Session = Extension<CurrentSession>;

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct StartImport {
    /// Files the browser is about to send (for the job's progress).
    #[serde(default)]
    expected: Option<u64>,
    /// Real files into a SPECIMEN workspace: only when the analyst said so
    /// (SPEC I5); refused otherwise.
    #[serde(default)]
    into_specimen: bool,
}

#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/imports",
    tag = "import",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    request_body = StartImport,
    responses((status = 201, description = "The import job (SPEC C2).", body = Object))
)]
async fn start(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiJson(body): ApiJson<StartImport>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let expected = body.expected.map(|n| n.min(1_000_000));
    let into = body.into_specimen;
    let job = st.db().write(move |store| store.start_import(ws, &inv, expected, into, crate::state::ANALYST)).await?;
    tracing::info!(%job, "import started");
    Ok((StatusCode::CREATED, Json(json!({ "job": job }))))
}

/// One part's outcome, as the browser shows it.
#[derive(Serialize)]
struct PartOutcome {
    path: String,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<labfy_core::ObjectRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// What the parser said of the file (text partial or absent, OCR).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    notes: Vec<String>,
}

/// The name and path of a part, from its `filename` (a folder dropped in the
/// browser sends `folder/sub/name`).
fn names(part_name: Option<&str>) -> Result<(String, String), String> {
    let path = part_name.unwrap_or("").trim().to_owned();
    check_import_path("path", &path, MAX_IMPORT_PATH_CHARS)?;
    let name = path.rsplit(['/', '\\']).next().unwrap_or(&path).to_owned();
    check_import_path("file name", &name, MAX_IMPORT_NAME_CHARS)?;
    Ok((name, path))
}

#[utoipa::path(
    post,
    path = "/api/v1/imports/{job}/files",
    tag = "import",
    params(("job" = String, Path, pattern = "^job:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`job:<uuid>`")),
    request_body(content = Object, content_type = "multipart/form-data", description = "One or more files, each a part with its file name."),
    responses(
        (status = 200, description = "What became of each file.", body = Object),
        (status = 503, description = "The governor did not admit the reading (SPEC A1), with its reason.", body = Object)
    )
)]
async fn files(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(job): Path<String>,
    multipart: Result<Multipart, MultipartRejection>,
) -> ApiResult<Json<Value>> {
    // A body that is not multipart (no boundary, another type) is refused
    // in the one error format, like every refusal.
    let mut multipart = multipart.map_err(|e| ApiError::bad_request(format!("multipart body: {}", e.body_text())))?;
    let job = path_ref(&job, Some(RefKind::Job))?;
    let ws = s.session.workspace;
    // The job must be this workspace's, and running, before a byte is kept.
    st.db().read(move |r| r.job(ws, &job)).await.and_then(|j| {
        if j.kind == labfy_store::IMPORT_JOB && j.status == "RUNNING" {
            Ok(())
        } else {
            Err(ApiError::new(StatusCode::CONFLICT, "NOT_RUNNING", format!("{job} is not a running import")))
        }
    })?;
    // Its documents are read — text, OCR — by a parser worker the governor
    // admits as the CPU work it is (SPEC A1, I1), before a byte is kept.
    let mut reading = match st.runtime_dir() {
        Some(dir) => {
            let job = labfy_core::JobRef::try_from(job).map_err(|e| ApiError::internal(&e))?;
            Some(crate::governor::admit_reading(dir, job).await.map_err(not_admitted)?)
        }
        None => None,
    };
    let blobs = BlobStore::at(st.db().data_dir());
    let mut outcomes = Vec::new();
    loop {
        if let Some(r) = &mut reading {
            r.keep().await.map_err(not_admitted)?;
        }
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(ApiError::bad_request(format!("multipart body: {e}"))),
        };
        if outcomes.len() == MAX_UPLOAD_FILES {
            return Err(ApiError::bad_request(format!("at most {MAX_UPLOAD_FILES} files per request")));
        }
        let shown: String = field.file_name().unwrap_or("").chars().take(MAX_IMPORT_PATH_CHARS).collect();
        let (name, path) = match names(field.file_name()) {
            Ok(n) => n,
            Err(why) => {
                outcomes.push(refuse(&st, ws, job, shown, why).await?);
                continue;
            }
        };
        let stored = store_part(&blobs, field).await;
        let outcome = match stored {
            Ok(blob) => record(&st, &blobs, ws, job, name, path, blob).await?,
            Err(Stored::Refused(why)) => refuse(&st, ws, job, path, why).await?,
            Err(Stored::Body(e)) => return Err(ApiError::bad_request(format!("multipart body: {e}"))),
        };
        outcomes.push(outcome);
    }
    Ok(Json(json!({ "job": job, "files": outcomes })))
}

/// The governor did not admit the reading (or took it back): `503`, with
/// its reason; the files already answered are recorded.
fn not_admitted(why: String) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "NOT_ADMITTED", format!("not admitted: {why}"))
}

enum Stored {
    /// The file is refused (too large, disk full): its outcome.
    Refused(String),
    /// The request itself broke off.
    Body(String),
}

/// Streams one part into the blob store, within [`MAX_UPLOAD_FILE_BYTES`].
async fn store_part(blobs: &BlobStore, mut field: axum::extract::multipart::Field<'_>) -> Result<Blob, Stored> {
    let blobs = blobs.clone();
    let mut writer = tokio::task::spawn_blocking(move || blobs.writer(MAX_UPLOAD_FILE_BYTES))
        .await
        .map_err(|e| Stored::Body(e.to_string()))?
        .map_err(|e| Stored::Refused(e.to_string()))?;
    let mut too_large = None;
    loop {
        match field.chunk().await {
            Ok(Some(chunk)) => {
                if too_large.is_some() {
                    continue; // read the rest of the part, keep none of it
                }
                // A page-cache write of one chunk: short enough for an async worker.
                match writer.write(&chunk) {
                    Ok(()) => {}
                    Err(BlobError::TooLarge { max }) => {
                        too_large = Some(format!("larger than the bound of {max} bytes"))
                    }
                    Err(e) => return Err(Stored::Refused(e.to_string())),
                }
            }
            Ok(None) => break,
            Err(e) => return Err(Stored::Body(e.to_string())),
        }
    }
    if let Some(why) = too_large {
        return Err(Stored::Refused(why));
    }
    // Dropped uncommitted, an empty part leaves nothing in the store.
    if writer.is_empty() {
        return Err(Stored::Refused("empty file (0 bytes)".into()));
    }
    tokio::task::spawn_blocking(move || writer.commit())
        .await
        .map_err(|e| Stored::Body(e.to_string()))?
        .map_err(|e| Stored::Refused(e.to_string()))
}

async fn refuse(
    st: &AppState,
    ws: uuid::Uuid,
    job: labfy_core::ObjectRef,
    path: String,
    why: String,
) -> ApiResult<PartOutcome> {
    let (p, w) = (path.clone(), why.clone());
    st.db().write(move |store| store.import_refused(ws, &job, &p, &w)).await?;
    let path = path.chars().map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    Ok(PartOutcome { path, outcome: "refused", evidence: None, reason: Some(why), notes: Vec::new() })
}

/// Parses (no lock held) and records (the writer held per transaction) a
/// stored file and what is embedded in it.
async fn record(
    st: &AppState,
    blobs: &BlobStore,
    ws: uuid::Uuid,
    job: labfy_core::ObjectRef,
    name: String,
    path: String,
    blob: Blob,
) -> ApiResult<PartOutcome> {
    let (db, blobs, parser) = (st.db().clone(), blobs.clone(), st.parser().to_path_buf());
    let shown = path.clone();
    let _permit = PARSING.acquire().await.map_err(|e| ApiError::internal(&e))?;
    let done = tokio::task::spawn_blocking(move || {
        let wall = std::time::Duration::from_secs(SERVER_PARSE_SECONDS);
        // The notes of the file itself (the first document read), not of
        // what it embeds.
        let mut notes: Option<Vec<String>> = None;
        let mut parse = |b: &Blob, n: &str| {
            let p = blobs.parse_confined(&parser, b, n, None, wall);
            notes.get_or_insert_with(|| p.notes.clone());
            p
        };
        let mut write = |f: &ImportedFile<'_>| db.write_blocking(|s| s.import_file(ws, &job, f, crate::state::ANALYST));
        import_tree(&blobs, &name, &path, &blob, &mut parse, &mut write).map(|o| (o, notes.unwrap_or_default()))
    })
    .await
    .map_err(|e| ApiError::internal(&e))?;
    match done {
        Ok((o, notes)) => {
            let outcome = if matches!(o, ImportOutcome::Imported(_)) { "imported" } else { "duplicate" };
            Ok(PartOutcome { path: shown, outcome, evidence: Some(*o.evidence()), reason: None, notes })
        }
        Err(StoreError::Invalid(why)) => refuse(st, ws, job, shown, why).await,
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/imports/{job}/finish",
    tag = "import",
    params(("job" = String, Path, pattern = "^job:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`job:<uuid>`")),
    responses((status = 200, description = "The import's figures.", body = Object))
)]
async fn finish(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(job): Path<String>,
) -> ApiResult<Json<ImportStats>> {
    let job = path_ref(&job, Some(RefKind::Job))?;
    let ws = s.session.workspace;
    let stats = st.db().write(move |store| store.finish_import(ws, &job, None, crate::state::ANALYST)).await?;
    tracing::info!(%job, files = stats.files, imported = stats.imported, refused = stats.refused, "import finished");
    Ok(Json(stats))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ReportQuery {
    #[serde(default)]
    after: Option<i64>,
    #[serde(default)]
    limit: Option<u32>,
}

#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job}/report",
    tag = "import",
    params(("job" = String, Path, pattern = "^job:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`job:<uuid>`"), ReportQuery),
    responses((status = 200, description = "The import's report lines.", body = [Object]))
)]
async fn report(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(job): Path<String>,
    ApiQuery(q): ApiQuery<ReportQuery>,
) -> ApiResult<Json<Vec<ImportReportLine>>> {
    let job = path_ref(&job, Some(RefKind::Job))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.import_report(ws, &job, q.after, q.limit.unwrap_or(200))).await?))
}

/// The original bytes, as an attachment that no browser renders in this
/// origin (`application/octet-stream`, `nosniff`, a sandboxing CSP).
#[utoipa::path(
    get,
    path = "/api/v1/evidence/{evidence}/original",
    tag = "import",
    params(("evidence" = String, Path, pattern = "^evidence:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`evidence:<uuid>`")),
    responses((status = 200, description = "The original bytes, as a download.", content_type = "application/octet-stream"))
)]
async fn original(State(st): State<AppState>, Extension(s): Session, Path(ev): Path<String>) -> ApiResult<Response> {
    let ev = path_ref(&ev, Some(RefKind::Evidence))?;
    let ws = s.session.workspace;
    let (sha, name) = st
        .db()
        .read(move |r| {
            let blob =
                r.blob_of(ws, &ev)?.ok_or_else(|| StoreError::NotFound(format!("{ev} has no original bytes")))?;
            let name = r.imports_of(ws, &ev)?.first().map(|i| i.original_name.clone());
            Ok((blob.0, name))
        })
        .await?;
    let path: PathBuf = BlobStore::at(st.db().data_dir()).path(&sha);
    let file = tokio::fs::File::open(&path).await.map_err(|e| ApiError::internal(&e))?;
    let len = file.metadata().await.map_err(|e| ApiError::internal(&e))?.len();
    // The name in ASCII only (RFC 6266's plain form); the hash says the rest.
    let safe: String = name
        .unwrap_or_else(|| sha.clone())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .take(120)
        .collect();
    let mut resp = Body::from_stream(tokio_util::io::ReaderStream::new(file)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox; default-src 'none'"));
    if let Ok(v) = HeaderValue::from_str(&format!("sha-256={sha}")) {
        h.insert("x-labfy-sha256", v);
    }
    Ok(resp)
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(start, files, finish, report, original))]
pub(crate) struct Doc;
