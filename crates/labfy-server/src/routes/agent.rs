//! Agent tool routes (SPEC G6) and the human decision on prepared research
//! (G11, W4). Every route is behind `security::guard`: exact Host and session
//! for all, plus Origin, CSRF and the rate limit for every POST. Gateway work
//! runs on the blocking pool: the gateway reaches the store synchronously
//! through the server's own connections.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use labfy_core::{GrantRef, RefKind};
use labfy_gateway::protocol::{CallRequest, EventPage, NewTurn, Turn, TurnMode};
use labfy_gateway::{DEMO_AGENT_LABEL, GatewayError};
use labfy_store::{GrantDecision, ResearchBudget, ResearchScope, WorkspaceClass};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery, path_ref, path_typed};
use crate::routes::runtime::EventsQuery;
use crate::state::AppState;

pub use crate::state::ANALYST;

/// The agent and research routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/agent-tools/catalog", get(catalog))
        .route("/api/v1/agent-tools/turns", post(start_turn))
        .route("/api/v1/agent-tools/turns/{turn_id}", get(turn))
        .route("/api/v1/agent-tools/turns/{turn_id}/resume", post(resume))
        .route("/api/v1/agent-tools/calls", post(call))
        .route("/api/v1/agent-tools/results/{result_id}", get(result))
        .route("/api/v1/agent-tools/results/{result_id}/keep-file", post(keep_file))
        .route("/api/v1/agent-tools/events", get(events))
        .route("/api/v1/research/requests", get(research_requests))
        .route("/api/v1/research/requests/{request}", get(research_request))
        .route("/api/v1/research/requests/{request}/grant", post(grant))
        .route("/api/v1/research/requests/{request}/refuse", post(refuse))
        .route("/api/v1/grants/{grant}", get(grant_detail))
        .route("/api/v1/grants/{grant}/revoke", post(revoke))
        .route("/api/v1/grants/{grant}/confirmation", get(confirmation))
        .route("/api/v1/grants/{grant}/fetch-log", get(fetch_log))
}

impl From<GatewayError> for ApiError {
    fn from(e: GatewayError) -> Self {
        match e {
            GatewayError::Store(s) => s.into(),
            // The one mapping from error kinds to statuses (`ApiError::of_kind`).
            other => ApiError::of_kind(other.kind(), other.to_string()),
        }
    }
}

/// Runs gateway work on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, GatewayError> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::internal(&e))?.map_err(ApiError::from)
}

fn uuid_param(name: &str, text: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(text).map_err(|_| ApiError::bad_request(format!("{name} must be a UUID")))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent-tools/catalog",
    tag = "agent",
    responses((status = 200, description = "The agent's closed tool catalog, as published.", body = Object))
)]
async fn catalog(State(st): State<AppState>) -> Json<Value> {
    let env = st.environment().await;
    let mut published = st.gateway().catalog().publish(st.scope().class, &env);
    if let Value::Object(map) = &mut published {
        map.insert("agent".into(), json!({"mode": "demo", "label": DEMO_AGENT_LABEL}));
        map.insert("environment".into(), json!(env));
    }
    Json(published)
}

#[utoipa::path(
    post,
    path = "/api/v1/agent-tools/turns",
    tag = "agent",
    request_body = NewTurn,
    responses((status = 201, description = "The turn.", body = Object))
)]
async fn start_turn(State(st): State<AppState>, ApiJson(req): ApiJson<NewTurn>) -> ApiResult<(StatusCode, Json<Turn>)> {
    let env = st.environment().await;
    let (gw, scope) = (st.gateway().clone(), st.scope());
    let turn = blocking(move || match req.mode.unwrap_or(TurnMode::Demo) {
        TurnMode::Demo => gw.run_demo_turn(scope, &env, &req),
        TurnMode::Manual => gw.open_turn(scope, &req),
        TurnMode::LocalModel => Err(labfy_gateway::GatewayError::Invalid(
            "local-model turns start through /api/v1/agent-runtime/turns (M6)".into(),
        )),
    })
    .await?;
    Ok((StatusCode::CREATED, Json(turn)))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent-tools/turns/{turn_id}",
    tag = "agent",
    params(("turn_id" = uuid::Uuid, Path, description = "the turn's UUID")),
    responses((status = 200, description = "The turn.", body = Object))
)]
async fn turn(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Turn>> {
    let id = uuid_param("turn_id", &id)?;
    Ok(Json(st.gateway().turn(st.scope(), id)?))
}

#[utoipa::path(
    post,
    path = "/api/v1/agent-tools/turns/{turn_id}/resume",
    tag = "agent",
    params(("turn_id" = uuid::Uuid, Path, description = "the turn's UUID")),
    responses((status = 200, description = "The turn, resumed.", body = Object))
)]
async fn resume(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Turn>> {
    let id = uuid_param("turn_id", &id)?;
    let env = st.environment().await;
    let (gw, scope) = (st.gateway().clone(), st.scope());
    Ok(Json(blocking(move || gw.resume(scope, &env, id)).await?))
}

#[utoipa::path(
    post,
    path = "/api/v1/agent-tools/calls",
    tag = "agent",
    request_body = CallRequest,
    responses((status = 200, description = "The tool's result (G8), a refusal included.", body = Object))
)]
async fn call(State(st): State<AppState>, ApiJson(req): ApiJson<CallRequest>) -> ApiResult<Response> {
    let env = st.environment().await;
    let (gw, scope) = (st.gateway().clone(), st.scope());
    let result = blocking(move || gw.call(scope, &env, req)).await?;
    // Serialised straight from the shared result: no intermediate JSON tree.
    Ok(Json(&*result).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/agent-tools/results/{result_id}",
    tag = "agent",
    params(("result_id" = uuid::Uuid, Path, description = "the result's UUID")),
    responses((status = 200, description = "A stored result.", body = Object))
)]
async fn result(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let id = uuid_param("result_id", &id)?;
    let result = st.gateway().result(st.scope(), id)?;
    Ok(Json(&*result).into_response())
}

/// A file of a `sandbox.exec` run the analyst keeps as evidence (SPEC X1).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct KeepFile {
    /// The file's path under the run's `/work`, as the result lists it.
    name: String,
    /// The investigation the new evidence goes in: the run's inputs' own.
    #[schema(value_type = String, pattern = "^investigation:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
    investigation_id: String,
}

/// Keeps a file a `sandbox.exec` run left as evidence: the analyst's
/// decision (the model has no such tool). The file is the one the run's
/// recorded result lists, its text checked against the SHA-256 the
/// governor reported; its provenance names the run and its inputs. 201 the
/// first time, 200 with the same item after.
#[utoipa::path(
    post,
    path = "/api/v1/agent-tools/results/{result_id}/keep-file",
    tag = "agent",
    params(("result_id" = Uuid, Path, description = "a `sandbox.exec` result's id")),
    request_body = KeepFile,
    responses(
        (status = 201, description = "Kept: the new evidence item.", body = Object),
        (status = 200, description = "Kept before: the same evidence item.", body = Object)
    )
)]
async fn keep_file(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<KeepFile>,
) -> ApiResult<Response> {
    let id = uuid_param("result_id", &id)?;
    let inv = path_ref(&body.investigation_id, Some(RefKind::Investigation))?;
    let result = st.gateway().result(st.scope(), id)?;
    let file = run_file(&result, &body.name)?;
    let ws = st.workspace();
    let kept = st.db().write(move |store| store.keep_run_file(ws, &inv, &file, ANALYST)).await?;
    if kept.created {
        tracing::info!(evidence = %kept.evidence, result = %id, "a sandbox run's file kept as evidence");
    }
    let status = if kept.created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({"evidence_id": kept.evidence, "created": kept.created}))).into_response())
}

/// The file `name` of a completed `sandbox.exec` result, with what its
/// provenance needs; refused when the result is another tool's, did not
/// run, or did not carry the file's text.
fn run_file(result: &labfy_gateway::protocol::ToolResult, name: &str) -> ApiResult<labfy_store::RunFile> {
    let conflict = |m: String| ApiError::of_kind(labfy_core::ErrorKind::Conflict, m);
    if result.tool_id != "sandbox.exec" {
        return Err(conflict(format!("result {} is {}'s, not a sandbox run's", result.result_id, result.tool_id)));
    }
    let Some(run) = result.artifacts.iter().find(|a| a.kind == "sandbox_output").map(|a| &a.data["run"]) else {
        return Err(conflict(format!("result {} has no run: nothing was written", result.result_id)));
    };
    let files = run["files"].as_array().map(Vec::as_slice).unwrap_or_default();
    let Some(file) = files.iter().find(|f| f["name"].as_str() == Some(name)) else {
        return Err(ApiError::not_found(format!("the run of result {} left no file named {name:?}", result.result_id)));
    };
    let Some(text) = file["text"].as_str() else {
        return Err(conflict(format!(
            "the run's report does not carry the text of {name:?} (not UTF-8 text, or past the report's bound): it cannot be kept"
        )));
    };
    let field = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    Ok(labfy_store::RunFile {
        name: name.to_owned(),
        text: text.to_owned(),
        sha256: field(&file["sha256"]),
        program: field(&run["program"]),
        reservation: field(&run["reservation"]),
        result_id: result.result_id,
        inputs: result.object_refs.iter().filter(|r| r.kind() == RefKind::Evidence).copied().collect(),
    })
}

#[utoipa::path(
    get,
    path = "/api/v1/agent-tools/events",
    tag = "agent",
    params(EventsQuery),
    responses((status = 200, description = "A page of the activity events.", body = Object))
)]
async fn events(State(st): State<AppState>, ApiQuery(q): ApiQuery<EventsQuery>) -> ApiResult<Json<EventPage>> {
    let cursor = q.cursor()?;
    let limit = q.limit_or(labfy_gateway::protocol::MAX_EVENTS_PER_POLL);
    Ok(Json(st.gateway().events(st.scope(), cursor, limit)))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ResearchQuery {
    /// `pending` (default) or an investigation's requests with `investigation`.
    #[serde(default)]
    investigation: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/research/requests",
    tag = "research",
    params(ResearchQuery),
    responses((status = 200, description = "Research requests.", body = Object))
)]
async fn research_requests(State(st): State<AppState>, ApiQuery(q): ApiQuery<ResearchQuery>) -> ApiResult<Json<Value>> {
    let ws = st.workspace();
    let fingerprint = prepare_fingerprint(&st);
    let list = match q.investigation {
        Some(text) => {
            let inv = path_ref(&text, Some(RefKind::Investigation))?;
            st.db().read(move |r| r.research_requests(ws, &inv, labfy_store::MAX_RESEARCH_LIST)).await?
        }
        None => st.db().read(move |r| r.pending_research(ws)).await?,
    };
    Ok(Json(json!({"requests": list, "current_contract_fingerprint": fingerprint,
                   "risk_level": st.gateway().catalog().tool(labfy_gateway::ToolId::ResearchPrepare).risk})))
}

fn prepare_fingerprint(st: &AppState) -> String {
    st.gateway().catalog().tool(labfy_gateway::ToolId::ResearchPrepare).fingerprint.clone()
}

#[utoipa::path(
    get,
    path = "/api/v1/research/requests/{request}",
    tag = "research",
    params(("request" = String, Path, pattern = "^research_request:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`research_request:<uuid>`")),
    responses((status = 200, description = "One research request.", body = Object))
)]
async fn research_request(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let r = path_ref(&id, Some(RefKind::ResearchRequest))?;
    let ws = st.workspace();
    let stored = st.db().read(move |reads| reads.research_request(ws, &r)).await?;
    Ok(Json(json!({"request": stored, "current_contract_fingerprint": prepare_fingerprint(&st)})))
}

/// The human decision to grant (closed: nothing else is accepted). `urls`
/// are the exact pages the campaign may fetch: required in a REAL workspace
/// (1–32, each inside the scope; the store checks them), optional in a
/// SPECIMEN one (the synthetic pages' simulated addresses).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    scope: ResearchScope,
    budget: ResearchBudget,
    expires_in_minutes: u32,
    #[serde(default)]
    urls: Vec<String>,
}

#[utoipa::path(
    post,
    path = "/api/v1/research/requests/{request}/grant",
    tag = "research",
    params(("request" = String, Path, pattern = "^research_request:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`research_request:<uuid>`")),
    request_body = GrantBody,
    responses((status = 201, description = "The grant and its campaign; in a REAL workspace, where a human confirms it.", body = Object))
)]
async fn grant(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<GrantBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let r = path_ref(&id, Some(RefKind::ResearchRequest))?;
    let ws = st.workspace();
    let catalog = st.gateway().catalog();
    let decision = GrantDecision {
        scope: body.scope,
        budget: body.budget,
        expires_in_minutes: body.expires_in_minutes,
        contract_fingerprints: catalog.fingerprints(),
        current_prepare_fingerprint: prepare_fingerprint(&st),
        decided_by: ANALYST.to_owned(),
        urls: body.urls,
    };
    let outcome = st.db().write(move |s| s.grant_research(ws, &r, &decision)).await?;
    tracing::info!(grant = %outcome.grant, campaign = %outcome.campaign, "research granted");
    // A SPECIMEN campaign already ran, synthetically, in the grant's
    // transaction. A REAL one runs through the governor and egress (E3–E6)
    // once a human confirms it where this server cannot reach (T2): the
    // decision is relayed to egress as a proposal, and the answer says where
    // to confirm it.
    if st.class() != WorkspaceClass::Real {
        return Ok((StatusCode::CREATED, Json(json!(outcome))));
    }
    let question = st.db().read(move |reads| reads.research_request(ws, &r)).await?.question;
    let confirmation = match st.campaigns().propose(outcome.campaign, outcome.grant, &question).await {
        Ok(record) => json!({"required": true, "phase": record.phase, "confirm_url": record.confirm_url,
                             "command": format!("labfy grant approve {}", outcome.grant)}),
        Err(e) => {
            tracing::warn!(grant = %outcome.grant, error = %e, "egress did not record the proposal (the runner retries)");
            json!({"required": true, "phase": null, "confirm_url": null,
                   "command": format!("labfy grant approve {}", outcome.grant), "detail": e.to_string()})
        }
    };
    if !st.campaigns().submit(outcome.campaign, outcome.grant) {
        tracing::warn!(campaign = %outcome.campaign, "the campaign waits for the next start of the server");
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({"grant": outcome.grant, "campaign": outcome.campaign,
                                         "confirmation": confirmation})),
    ))
}

/// `GET /api/v1/grants/{grant}/confirmation`: where the grant stands in
/// egress's ledger (SPEC T2), with a fresh one-time link to egress's
/// confirmation page while it waits for a human. What egress says is shown
/// as egress says it; the server cannot confirm anything.
#[utoipa::path(
    get,
    path = "/api/v1/grants/{grant}/confirmation",
    tag = "research",
    params(("grant" = labfy_core::GrantRef, Path, description = "`grant:<uuid>`")),
    responses((status = 200, description = "Where the grant stands in egress's ledger (SPEC T2).", body = Object))
)]
async fn confirmation(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let g: GrantRef = path_typed(&id)?;
    let ws = st.workspace();
    // The grant must be this workspace's (the store says so, or 404).
    st.db().read(move |r| r.grant(ws, &g)).await?;
    Ok(Json(match st.egress().grant_state(ws, g).await {
        Ok(r) => json!({"available": true, "phase": r.phase, "confirm_url": r.confirm_url,
                        "decided_at": r.decided_at, "decided_via": r.decided_via, "expires_at": r.expires_at,
                        "urls": r.urls, "requests_used": r.requests_used, "bytes_used": r.bytes_used,
                        "command": format!("labfy grant approve {g}")}),
        Err(e) => json!({"available": false, "detail": e.to_string(), "command": format!("labfy grant approve {g}")}),
    }))
}

/// `GET /api/v1/grants/{grant}/fetch-log`: egress's own append-only log of
/// the grant's fetches (SPEC T2), oldest first.
#[utoipa::path(
    get,
    path = "/api/v1/grants/{grant}/fetch-log",
    tag = "research",
    params(("grant" = labfy_core::GrantRef, Path, description = "`grant:<uuid>`")),
    responses((status = 200, description = "Egress's fetch log of the grant.", body = Object))
)]
async fn fetch_log(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let g: GrantRef = path_typed(&id)?;
    let ws = st.workspace();
    st.db().read(move |r| r.grant(ws, &g)).await?;
    Ok(Json(match st.egress().fetch_log(ws, g).await {
        Ok(entries) => json!({"available": true, "entries": entries}),
        Err(e) => json!({"available": false, "detail": e.to_string(), "entries": []}),
    }))
}

/// A refusal and its reason (closed), for a research or a tool request.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RefuseBody {
    pub(crate) reason: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/research/requests/{request}/refuse",
    tag = "research",
    params(("request" = String, Path, pattern = "^research_request:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`research_request:<uuid>`")),
    request_body = RefuseBody,
    responses((status = 200, description = "Refused.", body = Object))
)]
async fn refuse(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RefuseBody>,
) -> ApiResult<Json<Value>> {
    let r = path_ref(&id, Some(RefKind::ResearchRequest))?;
    let ws = st.workspace();
    st.db().write(move |s| s.refuse_research(ws, &r, &body.reason, ANALYST)).await?;
    Ok(Json(json!({"refused": r})))
}

#[utoipa::path(
    get,
    path = "/api/v1/grants/{grant}",
    tag = "research",
    params(("grant" = labfy_core::GrantRef, Path, description = "`grant:<uuid>`")),
    responses((status = 200, description = "The grant.", body = Object))
)]
async fn grant_detail(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let g: GrantRef = path_typed(&id)?;
    let ws = st.workspace();
    let stored = st.db().read(move |r| r.grant(ws, &g)).await?;
    let active = labfy_store::grant_is_active(&stored, chrono::Utc::now());
    Ok(Json(json!({"grant": stored, "active": active})))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct RevokeBody {}

#[utoipa::path(
    post,
    path = "/api/v1/grants/{grant}/revoke",
    tag = "research",
    params(("grant" = labfy_core::GrantRef, Path, description = "`grant:<uuid>`")),
    request_body = RevokeBody,
    responses((status = 200, description = "Revoked; its campaigns stopped.", body = Object))
)]
async fn revoke(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(_): ApiJson<RevokeBody>,
) -> ApiResult<Json<Value>> {
    let g: GrantRef = path_typed(&id)?;
    let ws = st.workspace();
    // The store first: the revocation and the stop of the grant's campaigns
    // are one transaction, and egress re-checks the grant there (E3). Then
    // the runner records nothing more for them, and egress drops their
    // fetches in flight and in queue.
    st.db().write(move |s| s.revoke_grant(ws, &g, ANALYST)).await?;
    let cancelled = st.campaigns().stop_grant(g);
    let egress = match st.egress().stop_grant(ws, g).await {
        Ok(stopped) => json!({"told": true, "stopped": stopped}),
        Err(e) => {
            // Not an error of the revocation: egress refuses every fetch of a
            // revoked grant anyway, from the store.
            tracing::info!(grant = %g, error = %e, "egress not told of the revocation");
            json!({"told": false, "detail": e.to_string()})
        }
    };
    tracing::info!(grant = %g, campaigns = cancelled, "grant revoked");
    Ok(Json(json!({"revoked": g, "campaigns_stopped": cancelled, "egress": egress})))
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(
    catalog,
    start_turn,
    turn,
    resume,
    call,
    result,
    keep_file,
    events,
    research_requests,
    research_request,
    grant,
    refuse,
    grant_detail,
    revoke,
    confirmation,
    fetch_log
))]
pub(crate) struct Doc;
