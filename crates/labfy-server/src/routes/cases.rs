//! Cases from the UI (SPEC C1): investigations of the served workspace
//! created, renamed, described, archived and brought back; the workspace
//! renamed; a new REAL workspace created; another workspace archived,
//! brought back or opened. One server serves one workspace: opening another
//! asks the supervisor, which checks the wish and restarts the server on it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Extension, Json, Router};
use labfy_core::{ErrorKind, ObjectRef, RefKind};
use labfy_store::{InvestigationSummary, WorkspaceClass};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, path_ref};
use crate::security::CurrentSession;
use crate::state::AppState;

/// The case routes (the investigations list's POST is in `api`).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/workspaces", post(create_workspace))
        .route("/api/v1/workspaces/{workspace}/rename", post(rename_workspace))
        .route("/api/v1/workspaces/{workspace}/archive", post(archive_workspace))
        .route("/api/v1/workspaces/{workspace}/open", post(open_workspace))
        .route("/api/v1/investigations/{investigation}/update", post(update_investigation))
        .route("/api/v1/investigations/{investigation}/archive", post(archive_investigation))
}

type Session = Extension<CurrentSession>;

/// The session's own workspace, or 404 (another one is not there for it).
fn own_workspace(s: &CurrentSession, text: &str) -> Result<ObjectRef, ApiError> {
    let ws = path_ref(text, Some(RefKind::Workspace))?;
    if ws.id() != s.session.workspace {
        return Err(ApiError::not_found(format!("{ws} not found")));
    }
    Ok(ws)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewInvestigation {
    title: String,
    #[serde(default)]
    summary: String,
}

/// `POST /api/v1/workspaces/{ws}/investigations`.
#[utoipa::path(
    post,
    path = "/api/v1/workspaces/{workspace}/investigations",
    tag = "cases",
    params(("workspace" = String, Path, pattern = "^workspace:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`workspace:<uuid>`")),
    request_body = NewInvestigation,
    responses((status = 201, description = "The investigation.", body = Object))
)]
pub(crate) async fn create_investigation(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ws): Path<String>,
    ApiJson(body): ApiJson<NewInvestigation>,
) -> ApiResult<(StatusCode, Json<InvestigationSummary>)> {
    let ws = own_workspace(&s, &ws)?.id();
    let created = st
        .db()
        .write(move |store| {
            let inv = store.create_investigation(ws, &body.title, &body.summary, "analyst")?;
            let list = store.reads().investigations(ws)?;
            list.into_iter()
                .find(|i| i.id == inv)
                .ok_or_else(|| labfy_store::StoreError::Internal(format!("{inv} not found after its creation")))
        })
        .await?;
    tracing::info!(investigation = %created.id, "investigation created");
    Ok((StatusCode::CREATED, Json(created)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct InvestigationChange {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    summary: Option<String>,
}

#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/update",
    tag = "cases",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    request_body = InvestigationChange,
    responses((status = 204, description = "Changed."))
)]
async fn update_investigation(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiJson(body): ApiJson<InvestigationChange>,
) -> ApiResult<StatusCode> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    st.db()
        .write(move |store| {
            store.update_investigation(ws, &inv, body.title.as_deref(), body.summary.as_deref(), "analyst")
        })
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Archive {
    archived: bool,
}

#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/archive",
    tag = "cases",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    request_body = Archive,
    responses((status = 204, description = "Archived or restored."))
)]
async fn archive_investigation(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiJson(body): ApiJson<Archive>,
) -> ApiResult<StatusCode> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    st.db().write(move |store| store.archive_investigation(ws, &inv, body.archived, "analyst")).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Name {
    name: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/workspaces/{workspace}/rename",
    tag = "cases",
    params(("workspace" = String, Path, pattern = "^workspace:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`workspace:<uuid>`")),
    request_body = Name,
    responses((status = 204, description = "Renamed."))
)]
async fn rename_workspace(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ws): Path<String>,
    ApiJson(body): ApiJson<Name>,
) -> ApiResult<StatusCode> {
    let ws = own_workspace(&s, &ws)?.id();
    st.db().write(move |store| store.rename_workspace(ws, &body.name, "analyst")).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/workspaces/{ws}/archive`: another workspace than the open
/// one archived or brought back (the open one is switched away from first).
#[utoipa::path(
    post,
    path = "/api/v1/workspaces/{workspace}/archive",
    tag = "cases",
    params(("workspace" = String, Path, pattern = "^workspace:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`workspace:<uuid>`")),
    request_body = Archive,
    responses((status = 204, description = "Archived or restored."))
)]
async fn archive_workspace(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ws): Path<String>,
    ApiJson(body): ApiJson<Archive>,
) -> ApiResult<StatusCode> {
    let ws = path_ref(&ws, Some(RefKind::Workspace))?;
    if ws.id() == s.session.workspace {
        return Err(ApiError::of_kind(
            ErrorKind::Conflict,
            format!("{ws} is the open workspace; open another one before archiving it"),
        ));
    }
    st.db().write(move |store| store.archive_workspace(ws.id(), body.archived, "analyst")).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/workspaces/{ws}/open` (SPEC C1): asks the supervisor to
/// restart this server on `ws`. Checked here for a clear answer (ready, in
/// use, and a REAL one only from an isolated server) and audited; the
/// supervisor checks it again before acting, since this process is the one
/// that parses hostile bytes. `202`: the UI waits for the new server.
#[utoipa::path(
    post,
    path = "/api/v1/workspaces/{workspace}/open",
    tag = "cases",
    params(("workspace" = String, Path, pattern = "^workspace:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`workspace:<uuid>`")),
    responses((status = 202, description = "The supervisor serves it next (SPEC C1).", body = Object))
)]
async fn open_workspace(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ws): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let ws = path_ref(&ws, Some(RefKind::Workspace))?;
    let Some(wish) = st.workspace_wish().cloned() else {
        return Err(ApiError::of_kind(
            ErrorKind::Unavailable,
            format!("this server runs without the supervisor; serve the workspace with `labfy up --workspace {ws}`"),
        ));
    };
    if ws.id() == s.session.workspace {
        return Err(ApiError::of_kind(ErrorKind::Conflict, format!("{ws} is already open")));
    }
    let target = st.db().read(move |r| r.workspace(ws.id())).await?;
    labfy_store::check_openable(&target)?;
    if target.class == WorkspaceClass::Real && !st.isolation().isolated {
        return Err(ApiError::of_kind(
            ErrorKind::Forbidden,
            format!("{ws} is a REAL workspace and this server is not isolated (SPEC P2)"),
        ));
    }
    let from = s.session.workspace;
    let target = st.db().write(move |store| store.request_workspace_open(from, ws.id(), "analyst")).await?;
    wish.set(ws.id());
    tracing::info!(workspace = %ws, "the analyst asked to open another workspace");
    Ok((StatusCode::ACCEPTED, Json(json!({ "workspace": target }))))
}

/// A new REAL workspace with its first investigation; the answer says how
/// to serve it (this server serves one workspace).
#[utoipa::path(
    post,
    path = "/api/v1/workspaces",
    tag = "cases",
    request_body = Name,
    responses((status = 201, description = "The new REAL workspace.", body = Object))
)]
async fn create_workspace(
    State(st): State<AppState>,
    ApiJson(body): ApiJson<Name>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let (ws, inv) = st.db().write(move |store| store.create_real_workspace(&body.name, "analyst")).await?;
    tracing::info!(workspace = %ws, "REAL workspace created");
    Ok((
        StatusCode::CREATED,
        Json(json!({ "workspace": ws, "investigation": inv, "serve": format!("labfy up --workspace {ws}") })),
    ))
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    create_workspace,
    create_investigation,
    rename_workspace,
    archive_workspace,
    open_workspace,
    update_investigation,
    archive_investigation
))]
pub(crate) struct Doc;
