//! Export from the UI (SPEC C5): the same bundle as `labfy export`, written
//! under `<data>/exports/` by a job that runs beside the requests, then
//! packed as one tar archive to download. The bundle's fingerprint is in
//! the job's figures, for the analyst to hand over out of band; the
//! directory stays for `labfy verify`. egress's own ledger is not readable
//! by the server (its state is masked from it, SPEC T3): the manifest says
//! so, and `labfy export` adds it.

use std::fs::File;
use std::path::{Path as FsPath, PathBuf};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use labfy_core::{ObjectRef, RefKind};
use labfy_store::bundle::BundleWriter;
use labfy_store::{EXPORT_JOB, ReadOnlyStore};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::path_ref;
use crate::security::CurrentSession;
use crate::state::AppState;

/// The export routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/investigations/{investigation}/export", post(start))
        .route("/api/v1/exports/{name}", get(archive))
}

type Session = Extension<CurrentSession>;

/// Where the UI's exports go.
pub fn export_dir(data_dir: &FsPath) -> PathBuf {
    data_dir.join("exports")
}

/// A bundle's name: the investigation and the time, nothing a request chose.
fn bundle_name(inv: &ObjectRef) -> String {
    format!("{}-{}", inv.id(), stamp())
}

fn stamp() -> String {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{}{:03}", d.as_secs(), d.subsec_millis())
}

#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/export",
    tag = "export",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    responses((status = 202, description = "The export job (SPEC C5).", body = Object))
)]
async fn start(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let job = st.db().write(move |store| store.start_job(ws, &inv, EXPORT_JOB, crate::state::ANALYST)).await?;
    let db = st.db().clone();
    tokio::task::spawn_blocking(move || {
        let outcome = write_bundle(db.data_dir(), &inv);
        let ended = match &outcome {
            Ok(stats) => db.write_blocking(|store| store.end_job(ws, &job, Ok(stats), crate::state::ANALYST)),
            Err(why) => db.write_blocking(|store| store.end_job(ws, &job, Err(why.as_str()), crate::state::ANALYST)),
        };
        match (outcome, ended) {
            (Ok(stats), Ok(())) => tracing::info!(%job, fingerprint = %stats["fingerprint"], "export written"),
            (Err(why), _) => tracing::warn!(%job, %why, "export failed"),
            (_, Err(e)) => tracing::error!(%job, error = %e, "export job not ended"),
        }
    });
    Ok((StatusCode::ACCEPTED, Json(json!({ "job": job }))))
}

/// Writes the bundle and its archive; the job's figures.
fn write_bundle(data_dir: &FsPath, inv: &ObjectRef) -> Result<Value, String> {
    let root = export_dir(data_dir);
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    let name = bundle_name(inv);
    let dir = root.join(&name);
    let store = ReadOnlyStore::open(data_dir).map_err(|e| e.to_string())?;
    let mut w = BundleWriter::create(&dir).map_err(|e| e.to_string())?;
    let mut header = store.export(inv, &mut w).map_err(|e| e.to_string())?;
    header.insert(
        "egress_ledger".into(),
        json!("not included: exported from the UI, whose server cannot read egress's ledger; `labfy export` adds it"),
    );
    let done = w.finish(header).map_err(|e| e.to_string())?;
    let tar_name = format!("{name}.tar");
    let tar_path = root.join(&tar_name);
    let tmp = root.join(format!(".{tar_name}.partial"));
    let pack = || -> std::io::Result<()> {
        let file = File::create(&tmp)?;
        let mut builder = tar::Builder::new(file);
        builder.follow_symlinks(false);
        builder.append_dir_all(&name, &dir)?;
        let file = builder.into_inner()?;
        file.sync_all()?;
        std::fs::rename(&tmp, &tar_path)
    };
    pack().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("archive {}: {e}", tar_path.display())
    })?;
    Ok(json!({
        "dir": done.dir,
        "archive": tar_name,
        "fingerprint": done.fingerprint,
        "files": done.files,
        "bytes": done.bytes,
    }))
}

/// The archive of an export of this workspace (its name as the job gave it).
#[utoipa::path(
    get,
    path = "/api/v1/exports/{name}",
    tag = "export",
    params(("name" = String, Path, description = "the package's file name, as the job reported it")),
    responses((status = 200, description = "The package (a tar archive).", content_type = "application/x-tar"))
)]
async fn archive(State(st): State<AppState>, Extension(s): Session, Path(name): Path<String>) -> ApiResult<Response> {
    // `<uuid>-<digits>.tar`, nothing else: no path, no other file.
    let inv = name
        .strip_suffix(".tar")
        .and_then(|stem| stem.rsplit_once('-'))
        .filter(|(_, stamp)| !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|(id, _)| uuid::Uuid::parse_str(id).ok())
        .map(|id| ObjectRef::new(RefKind::Investigation, id))
        .ok_or_else(|| ApiError::not_found("no such export"))?;
    let ws = s.session.workspace;
    // Another workspace's export is not there for this session.
    st.db().read(move |r| r.require_in_workspace(ws, &inv)).await?;
    let path = export_dir(st.db().data_dir()).join(&name);
    let file = tokio::fs::File::open(&path).await.map_err(|_| ApiError::not_found("no such export"))?;
    let len = file.metadata().await.map_err(|e| ApiError::internal(&e))?.len();
    let mut resp = Body::from_stream(tokio_util::io::ReaderStream::new(file)).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-tar"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"labfy-{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(start, archive))]
pub(crate) struct Doc;
