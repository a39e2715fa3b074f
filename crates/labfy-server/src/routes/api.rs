//! `/api/v1/…`: read routes over the store's read models and the one mutation
//! of this version (an analyst's note). Every route is scoped to the session's
//! workspace; references in paths are namespaced (`evidence:<uuid>`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Json, Router};
use labfy_core::{ObjectRef, RefKind};
use labfy_store::{
    EgoGraph, EgoQuery, EvidenceSummary, Excerpt, InvestigationSummary, Job, ListQuery, Neighbors, NewEntity,
    NewMarked, NewNote, NewRelation, Node, Overview, ProvenanceTrace, SearchResult, WorkspaceSummary,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery, path_ref};
use crate::security::CurrentSession;
use crate::state::AppState;

/// Every `/api/` route (the session is checked before, by `security::guard`).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/session", get(session))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/status", get(status))
        .route("/api/v1/workspaces", get(workspaces))
        .route(
            "/api/v1/workspaces/{workspace}/investigations",
            get(investigations).post(crate::routes::cases::create_investigation),
        )
        .route("/api/v1/investigations/{investigation}/overview", get(overview))
        .route("/api/v1/investigations/{investigation}/search", get(search))
        .route("/api/v1/investigations/{investigation}/correlations", get(correlations))
        .route("/api/v1/investigations/{investigation}/timeline", get(timeline))
        .route("/api/v1/investigations/{investigation}/name-variants", get(name_variants))
        .route("/api/v1/investigations/{investigation}/jobs", get(jobs))
        .route("/api/v1/investigations/{investigation}/lists/{list}", get(list))
        .route("/api/v1/investigations/{investigation}/evidence", axum::routing::post(add_note))
        .route("/api/v1/investigations/{investigation}/extraction", axum::routing::post(start_extraction))
        .route("/api/v1/investigations/{investigation}/entities", axum::routing::post(create_entity))
        .route("/api/v1/investigations/{investigation}/relations", axum::routing::post(create_relation))
        .route("/api/v1/evidence/{evidence}/mentions", axum::routing::post(mark_mention))
        .route("/api/v1/entities/{entity}", axum::routing::delete(delete_entity))
        .route("/api/v1/entities/{entity}/rename", axum::routing::post(rename_entity))
        .route("/api/v1/entities/{entity}/merge", axum::routing::post(merge_entity))
        .route("/api/v1/entities/{entity}/apart", axum::routing::post(set_apart))
        .route("/api/v1/relations/{relation}", axum::routing::delete(delete_relation))
        .route("/api/v1/evidence/{evidence}", get(evidence))
        .route("/api/v1/evidence/{evidence}/excerpt", get(excerpt))
        .route("/api/v1/graph/nodes/{node}", get(node))
        .route("/api/v1/graph/nodes/{node}/neighbors", get(neighbors))
        .route("/api/v1/graph/nodes/{node}/ego", get(ego))
        .route("/api/v1/provenance/{object}", get(provenance))
        .route("/api/v1/jobs/{job}", get(job))
        .route("/api/{*rest}", axum::routing::any(|| async { ApiError::not_found("no such API route") }))
}

type Session = Extension<CurrentSession>;

#[utoipa::path(
    get,
    path = "/api/v1/session",
    tag = "session",
    responses((status = 200, description = "The session's CSRF token, its workspace and the server's isolation.", body = Object))
)]
async fn session(State(st): State<AppState>, Extension(s): Session) -> Json<Value> {
    Json(json!({
        "csrf_token": &*s.session.csrf_token,
        "workspace_id": ObjectRef::new(RefKind::Workspace, s.session.workspace),
        "isolation": st.isolation(),
    }))
}

/// The API as an OpenAPI 3.1 document (`crate::routes::openapi`), behind the same
/// guards as every route.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "session",
    responses((status = 200, description = "This document.", body = Object))
)]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(crate::routes::openapi())
}

/// The appliance's processes, as the supervisor reports them, and this
/// server's own isolation.
#[utoipa::path(
    get,
    path = "/api/v1/status",
    tag = "session",
    responses((status = 200, description = "The appliance's processes as the supervisor reports them.", body = Object))
)]
async fn status(State(st): State<AppState>) -> Json<Value> {
    use labfy_ipc::client::Client;
    use labfy_ipc::messages::Boundary;
    use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
    let Some(dir) = st.runtime_dir() else {
        return Json(json!({"isolation": st.isolation(), "processes": null, "detail": "not started by a supervisor"}));
    };
    let asked = async {
        let secret = labfy_ipc::secret::read_secret(dir)?;
        let mut c: Client<ControlRequest, ControlResponse> =
            Client::connect(&labfy_ipc::daemon::supervisor_socket(dir), Boundary::Control, &secret).await?;
        c.call(ControlRequest::Status {}).await
    };
    match asked.await {
        Ok(ControlResponse::Status { children }) => {
            Json(json!({"isolation": st.isolation(), "processes": children, "detail": "from the supervisor"}))
        }
        Ok(other) => Json(
            json!({"isolation": st.isolation(), "processes": null, "detail": format!("unexpected answer: {other:?}")}),
        ),
        Err(e) => Json(
            json!({"isolation": st.isolation(), "processes": null, "detail": format!("supervisor unreachable: {e}")}),
        ),
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/workspaces",
    tag = "cases",
    responses((status = 200, description = "The workspaces.", body = Object))
)]
async fn workspaces(State(st): State<AppState>) -> ApiResult<Json<Value>> {
    let list: Vec<WorkspaceSummary> = st.db().read(|r| r.workspaces()).await?;
    Ok(Json(json!({ "workspaces": list })))
}

#[utoipa::path(
    get,
    path = "/api/v1/workspaces/{workspace}/investigations",
    tag = "cases",
    params(("workspace" = String, Path, pattern = "^workspace:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`workspace:<uuid>`")),
    responses((status = 200, description = "The workspace's investigations (the session's workspace only).", body = Object))
)]
async fn investigations(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ws): Path<String>,
) -> ApiResult<Json<Value>> {
    let ws = path_ref(&ws, Some(RefKind::Workspace))?;
    // Only the session's workspace can be browsed.
    if ws.id() != s.session.workspace {
        return Err(ApiError::not_found(format!("{ws} not found")));
    }
    let list: Vec<InvestigationSummary> = st.db().read(move |r| r.investigations(ws.id())).await?;
    Ok(Json(json!({ "investigations": list })))
}

#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/overview",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    responses((status = 200, description = "Counts, top entities, recent evidence.", body = Object))
)]
async fn overview(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
) -> ApiResult<Json<Overview>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.overview(ws, &inv)).await?))
}

fn default_search_limit() -> u32 {
    20
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct SearchParams {
    q: String,
    #[serde(default = "default_search_limit")]
    limit: u32,
}

#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/search",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace"), SearchParams),
    responses((status = 200, description = "Full-text hits with highlighted excerpts.", body = Object))
)]
async fn search(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiQuery(p): ApiQuery<SearchParams>,
) -> ApiResult<Json<SearchResult>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.search(ws, &inv, &p.q, p.limit)).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct TimelineParams {
    /// Only the pieces that mention this entity (`entity:<uuid>`).
    #[serde(default)]
    entity: Option<String>,
    /// `asc` (oldest first, the default) or `desc`.
    #[serde(default)]
    order: Option<String>,
    /// The previous page's `next`.
    #[serde(default)]
    after: Option<String>,
    /// 1–200 (50).
    #[serde(default)]
    limit: Option<u32>,
}

/// The investigation's pieces in the order of what they date (issue 44).
#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/timeline",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace"), TimelineParams),
    responses((status = 200, description = "A page of the timeline.", body = Object))
)]
async fn timeline(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiQuery(p): ApiQuery<TimelineParams>,
) -> ApiResult<Json<labfy_store::TimelinePage>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let entity = p.entity.as_deref().map(|e| path_ref(e, Some(RefKind::Entity))).transpose()?;
    let newest_first = match p.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(other) => return Err(ApiError::bad_request(format!("order: `asc` or `desc`, not `{other}`"))),
    };
    let q = labfy_store::TimelineQuery { entity, newest_first, after: p.after, limit: p.limit.unwrap_or(50) };
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.timeline(ws, &inv, &q)).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct CorrelationParams {
    #[serde(default = "default_search_limit")]
    limit: u32,
    focus: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/correlations",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace"), CorrelationParams),
    responses((status = 200, description = "Pieces that share entities.", body = Object))
)]
async fn correlations(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiQuery(p): ApiQuery<CorrelationParams>,
) -> ApiResult<Json<Value>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let focus = p.focus.as_deref().map(|f| path_ref(f, Some(RefKind::Evidence))).transpose()?;
    let ws = s.session.workspace;
    let list = st.db().read(move |r| r.correlations(ws, &inv, focus.as_ref(), p.limit)).await?;
    Ok(Json(json!({ "correlations": list })))
}

#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/jobs",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    responses((status = 200, description = "The investigation's jobs.", body = Object))
)]
async fn jobs(State(st): State<AppState>, Extension(s): Session, Path(inv): Path<String>) -> ApiResult<Json<Value>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let list: Vec<Job> = st.db().read(move |r| r.jobs(ws, &inv)).await?;
    Ok(Json(json!({ "jobs": list })))
}

/// The query of `…/lists/{list}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListParams {
    sort: Option<String>,
    order: Option<String>,
    kind: Option<String>,
    prefix: Option<String>,
    after: Option<String>,
    #[serde(default = "default_list_limit")]
    limit: u32,
}

fn default_list_limit() -> u32 {
    50
}

/// A page of one of the lists behind the counts (SPEC U2): `evidence`,
/// `entities` or `relations`, keyset-paginated (`after` is the last item of
/// the previous page; the answer's `next` is the next page's).
#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/lists/{list}",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace"), ("list" = String, Path, description = "evidence, entities, relations, jobs, requests, grants or campaigns"), ListParams),
    responses((status = 200, description = "One keyset page of the list (SPEC U2).", body = Object))
)]
async fn list(
    State(st): State<AppState>,
    Extension(s): Session,
    Path((inv, which)): Path<(String, String)>,
    ApiQuery(p): ApiQuery<ListParams>,
) -> ApiResult<Json<Value>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let after = p.after.as_deref().map(|a| path_ref(a, None)).transpose()?;
    let q = ListQuery { sort: p.sort, order: p.order, kind: p.kind, prefix: p.prefix, after, limit: p.limit };
    let page = match which.as_str() {
        "evidence" => json!(st.db().read(move |r| r.list_evidence(ws, &inv, &q)).await?),
        "entities" => json!(st.db().read(move |r| r.list_entities(ws, &inv, &q)).await?),
        "relations" => json!(st.db().read(move |r| r.list_relations(ws, &inv, &q)).await?),
        other => {
            return Err(ApiError::not_found(format!("no list `{other}` (evidence, entities or relations)")));
        }
    };
    Ok(Json(page))
}

/// Starts an extraction over the investigation (SPEC C4), or answers the one
/// already running: `202` with the job either way, to follow at
/// `/api/v1/jobs/{job}`.
#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/extraction",
    tag = "edit",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    responses((status = 202, description = "The extraction job (SPEC C4).", body = Object))
)]
async fn start_extraction(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
) -> ApiResult<(StatusCode, Json<Job>)> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let (job, created) = st.db().write(move |store| store.start_extraction(ws, &inv, "analyst")).await?;
    if created {
        tracing::info!(%job, "extraction started");
        crate::extraction::spawn(st.db().clone(), ws, job);
    }
    Ok((StatusCode::ACCEPTED, Json(st.db().read(move |r| r.job(ws, &job)).await?)))
}

/// The analyst draws an entity (SPEC C4): `201` with its node.
#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/entities",
    tag = "edit",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    request_body = NewEntity,
    responses((status = 201, description = "The entity.", body = Object))
)]
async fn create_entity(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiJson(e): ApiJson<NewEntity>,
) -> ApiResult<(StatusCode, Json<Node>)> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let node = st
        .db()
        .write(move |store| {
            let r = store.create_entity(ws, &inv, &e, "analyst")?;
            store.reads().node(ws, &r)
        })
        .await?;
    Ok((StatusCode::CREATED, Json(node)))
}

/// The analyst marks a name read in a piece (SPEC A3): the entity it names,
/// found or made, and the mention at its place in the text. `201` with the
/// entity's node and whether it was made now.
#[utoipa::path(
    post,
    path = "/api/v1/evidence/{evidence}/mentions",
    tag = "edit",
    params(("evidence" = String, Path, pattern = "^evidence:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`evidence:<uuid>` of the session's workspace")),
    request_body = NewMarked,
    responses((status = 201, description = "The entity named, and whether it was made now.", body = Object))
)]
async fn mark_mention(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ev): Path<String>,
    ApiJson(m): ApiJson<NewMarked>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let ev = path_ref(&ev, Some(RefKind::Evidence))?;
    let ws = s.session.workspace;
    let (node, marked) = st
        .db()
        .write(move |store| {
            let marked = store.mark_mention(ws, &ev, &m, "analyst")?;
            Ok((store.reads().node(ws, &marked.entity)?, marked))
        })
        .await?;
    Ok((StatusCode::CREATED, Json(json!({ "entity": node, "created": marked.created, "text": marked.text }))))
}

/// The analyst draws a relation: `201` with its node.
#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/relations",
    tag = "edit",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    request_body = NewRelation,
    responses((status = 201, description = "The relation.", body = Object))
)]
async fn create_relation(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiJson(rel): ApiJson<NewRelation>,
) -> ApiResult<(StatusCode, Json<Node>)> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let node = st
        .db()
        .write(move |store| {
            let r = store.create_relation(ws, &inv, &rel, "analyst")?;
            store.reads().node(ws, &r)
        })
        .await?;
    Ok((StatusCode::CREATED, Json(node)))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Rename {
    name: String,
}

/// Renames an entity (its former name becomes an alias): its node.
#[utoipa::path(
    post,
    path = "/api/v1/entities/{entity}/rename",
    tag = "edit",
    params(("entity" = String, Path, pattern = "^entity:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`entity:<uuid>`")),
    request_body = Rename,
    responses((status = 200, description = "The renamed entity.", body = Object))
)]
async fn rename_entity(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ent): Path<String>,
    ApiJson(body): ApiJson<Rename>,
) -> ApiResult<Json<Node>> {
    let ent = path_ref(&ent, Some(RefKind::Entity))?;
    let ws = s.session.workspace;
    let node = st
        .db()
        .write(move |store| {
            store.rename_entity(ws, &ent, &body.name, "analyst")?;
            store.reads().node(ws, &ent)
        })
        .await?;
    Ok(Json(node))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Merge {
    into: ObjectRef,
}

/// Merges the entity into `into`: the node kept.
#[utoipa::path(
    post,
    path = "/api/v1/entities/{entity}/merge",
    tag = "edit",
    params(("entity" = String, Path, pattern = "^entity:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`entity:<uuid>`")),
    request_body = Merge,
    responses((status = 200, description = "The entity it was merged into.", body = Object))
)]
async fn merge_entity(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ent): Path<String>,
    ApiJson(body): ApiJson<Merge>,
) -> ApiResult<Json<Node>> {
    let ent = path_ref(&ent, Some(RefKind::Entity))?;
    let ws = s.session.workspace;
    let node = st
        .db()
        .write(move |store| {
            store.merge_entities(ws, &ent, &body.into, "analyst")?;
            store.reads().node(ws, &body.into)
        })
        .await?;
    Ok(Json(node))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct Apart {
    from: ObjectRef,
}

/// Records that the entity and `from` are two (SPEC A3): a proposed merge
/// refused, never proposed again. `204`.
#[utoipa::path(
    post,
    path = "/api/v1/entities/{entity}/apart",
    tag = "edit",
    params(("entity" = String, Path, pattern = "^entity:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`entity:<uuid>`")),
    request_body = Apart,
    responses((status = 204, description = "Recorded."))
)]
async fn set_apart(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ent): Path<String>,
    ApiJson(body): ApiJson<Apart>,
) -> ApiResult<StatusCode> {
    let ent = path_ref(&ent, Some(RefKind::Entity))?;
    let ws = s.session.workspace;
    st.db().write(move |store| store.set_apart(ws, &ent, &body.from, "analyst")).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes an entity with its relations and mentions: `204`.
#[utoipa::path(
    delete,
    path = "/api/v1/entities/{entity}",
    tag = "edit",
    params(("entity" = String, Path, pattern = "^entity:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`entity:<uuid>`")),
    responses((status = 204, description = "Deleted."))
)]
async fn delete_entity(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ent): Path<String>,
) -> ApiResult<StatusCode> {
    let ent = path_ref(&ent, Some(RefKind::Entity))?;
    let ws = s.session.workspace;
    st.db().write(move |store| store.delete_entity(ws, &ent, "analyst")).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a relation: `204`.
#[utoipa::path(
    delete,
    path = "/api/v1/relations/{relation}",
    tag = "edit",
    params(("relation" = String, Path, pattern = "^relation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`relation:<uuid>`")),
    responses((status = 204, description = "Deleted."))
)]
async fn delete_relation(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(rel): Path<String>,
) -> ApiResult<StatusCode> {
    let rel = path_ref(&rel, Some(RefKind::Relation))?;
    let ws = s.session.workspace;
    st.db().write(move |store| store.delete_relation(ws, &rel, "analyst")).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job}",
    tag = "read",
    params(("job" = String, Path, pattern = "^job:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`job:<uuid>`")),
    responses((status = 200, description = "The job.", body = Object))
)]
async fn job(State(st): State<AppState>, Extension(s): Session, Path(job): Path<String>) -> ApiResult<Json<Job>> {
    let job = path_ref(&job, Some(RefKind::Job))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.job(ws, &job)).await?))
}

#[utoipa::path(
    get,
    path = "/api/v1/evidence/{evidence}",
    tag = "read",
    params(("evidence" = String, Path, pattern = "^evidence:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`evidence:<uuid>`")),
    responses((status = 200, description = "The evidence item.", body = Object))
)]
async fn evidence(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ev): Path<String>,
) -> ApiResult<Json<EvidenceSummary>> {
    let ev = path_ref(&ev, Some(RefKind::Evidence))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.evidence_summary(ws, &ev)).await?))
}

fn default_excerpt_length() -> u32 {
    4000
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ExcerptParams {
    #[serde(default)]
    offset: u64,
    #[serde(default = "default_excerpt_length")]
    length: u32,
}

#[utoipa::path(
    get,
    path = "/api/v1/evidence/{evidence}/excerpt",
    tag = "read",
    params(("evidence" = String, Path, pattern = "^evidence:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`evidence:<uuid>`"), ExcerptParams),
    responses((status = 200, description = "A bounded excerpt of its text.", body = Object))
)]
async fn excerpt(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(ev): Path<String>,
    ApiQuery(p): ApiQuery<ExcerptParams>,
) -> ApiResult<Json<Excerpt>> {
    let ev = path_ref(&ev, Some(RefKind::Evidence))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.excerpt(ws, &ev, p.offset, p.length)).await?))
}

#[utoipa::path(
    get,
    path = "/api/v1/graph/nodes/{node}",
    tag = "read",
    params(("node" = labfy_core::ObjectRef, Path, description = "an entity, evidence item or other object (`<namespace>:<uuid>`)")),
    responses((status = 200, description = "The node.", body = Object))
)]
async fn node(State(st): State<AppState>, Extension(s): Session, Path(node): Path<String>) -> ApiResult<Json<Node>> {
    let node = path_ref(&node, None)?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.node(ws, &node)).await?))
}

fn default_neighbors_limit() -> u32 {
    50
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct NeighborParams {
    #[serde(default = "default_neighbors_limit")]
    limit: u32,
}

#[utoipa::path(
    get,
    path = "/api/v1/graph/nodes/{node}/neighbors",
    tag = "read",
    params(("node" = labfy_core::ObjectRef, Path, description = "an entity, evidence item or other object (`<namespace>:<uuid>`)"), NeighborParams),
    responses((status = 200, description = "Its neighbours.", body = Object))
)]
async fn neighbors(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(node): Path<String>,
    ApiQuery(p): ApiQuery<NeighborParams>,
) -> ApiResult<Json<Neighbors>> {
    let node = path_ref(&node, None)?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.neighbors(ws, &node, p.limit)).await?))
}

fn default_ego_limit() -> u32 {
    150
}

/// The query of `…/ego`: `kinds` and `relations` are comma-separated lists.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct EgoParams {
    #[serde(default = "default_ego_limit")]
    limit: u32,
    kinds: Option<String>,
    relations: Option<String>,
}

fn comma_list(value: Option<String>) -> Option<Vec<String>> {
    value.map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
}

/// The ego graph of an entity or a piece of evidence (SPEC U1).
#[utoipa::path(
    get,
    path = "/api/v1/graph/nodes/{node}/ego",
    tag = "read",
    params(("node" = labfy_core::ObjectRef, Path, description = "an entity, evidence item or other object (`<namespace>:<uuid>`)"), EgoParams),
    responses((status = 200, description = "Its ego graph (SPEC U1).", body = Object))
)]
async fn ego(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(node): Path<String>,
    ApiQuery(p): ApiQuery<EgoParams>,
) -> ApiResult<Json<EgoGraph>> {
    let node = path_ref(&node, None)?;
    let ws = s.session.workspace;
    let q = EgoQuery { limit: p.limit, kinds: comma_list(p.kinds), relations: comma_list(p.relations) };
    Ok(Json(st.db().read(move |r| r.ego_graph(ws, &node, &q)).await?))
}

fn default_depth() -> u32 {
    8
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ProvenanceParams {
    #[serde(default = "default_depth")]
    depth: u32,
}

#[utoipa::path(
    get,
    path = "/api/v1/provenance/{object}",
    tag = "read",
    params(("object" = labfy_core::ObjectRef, Path, description = "any object (`<namespace>:<uuid>`)"), ProvenanceParams),
    responses((status = 200, description = "Its provenance trace.", body = Object))
)]
async fn provenance(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(object): Path<String>,
    ApiQuery(p): ApiQuery<ProvenanceParams>,
) -> ApiResult<Json<ProvenanceTrace>> {
    let object = path_ref(&object, None)?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.provenance_trace(ws, &object, p.depth)).await?))
}

#[utoipa::path(
    post,
    path = "/api/v1/investigations/{investigation}/evidence",
    tag = "edit",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace")),
    request_body = NewNote,
    responses((status = 201, description = "The note, stored as evidence.", body = Object))
)]
async fn add_note(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiJson(note): ApiJson<NewNote>,
) -> ApiResult<(StatusCode, Json<EvidenceSummary>)> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    let summary = st
        .db()
        .write(move |store| {
            let ev = store.add_note(ws, &inv, &note, "analyst")?;
            store.reads().evidence_summary(ws, &ev)
        })
        .await?;
    tracing::info!(evidence = %summary.id, "analyst note stored");
    Ok((StatusCode::CREATED, Json(summary)))
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct VariantParams {
    #[serde(default = "default_search_limit")]
    limit: u32,
}

#[utoipa::path(
    get,
    path = "/api/v1/investigations/{investigation}/name-variants",
    tag = "read",
    params(("investigation" = String, Path, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`investigation:<uuid>` of the session's workspace"), VariantParams),
    responses((status = 200, description = "People and organisations whose names may be one entity's, proposed for a merge (SPEC A2).", body = Object))
)]
async fn name_variants(
    State(st): State<AppState>,
    Extension(s): Session,
    Path(inv): Path<String>,
    ApiQuery(p): ApiQuery<VariantParams>,
) -> ApiResult<Json<labfy_store::NameVariantList>> {
    let inv = path_ref(&inv, Some(RefKind::Investigation))?;
    let ws = s.session.workspace;
    Ok(Json(st.db().read(move |r| r.name_variants(ws, &inv, p.limit)).await?))
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(
    session,
    status,
    openapi,
    workspaces,
    investigations,
    overview,
    search,
    correlations,
    timeline,
    name_variants,
    jobs,
    list,
    add_note,
    start_extraction,
    create_entity,
    mark_mention,
    create_relation,
    delete_entity,
    rename_entity,
    merge_entity,
    set_apart,
    delete_relation,
    evidence,
    excerpt,
    node,
    neighbors,
    ego,
    provenance,
    job
))]
pub(crate) struct Doc;
