//! The human decisions on tool requests (SPEC X2, the seed's pauses A, B,
//! C1, C2): list, read, approve, refuse. Behind `security::guard` like every
//! route (Host and session; Origin, CSRF and the rate limit for each POST).
//! No agent tool reaches these routes: the model proposes through the
//! gateway, only the analyst's session decides here.
//!
//! An approval is taken against what is true *now*: the proposing tool's
//! contract fingerprint in the catalog in force and, for an installation or
//! an integration, the fingerprint of the manifest the registry holds under
//! that id now. Either changed since the proposal, the request becomes VOID
//! with why, and nothing is installed or integrated. While the governor
//! does not say its allow-list, an installation or integration cannot be
//! checked and is not decided (503).

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use labfy_core::RefKind;
use labfy_gateway::ToolId;
use labfy_store::{ToolDecision, ToolRequestKind};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery, path_ref};
use crate::routes::agent::{ANALYST, RefuseBody};
use crate::state::AppState;

/// The tool request routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tool-requests", get(list))
        .route("/api/v1/tool-requests/{request}", get(one))
        .route("/api/v1/tool-requests/{request}/approve", post(approve))
        .route("/api/v1/tool-requests/{request}/refuse", post(refuse))
}

/// The tool whose contract a request of `kind` was proposed under.
fn proposing_tool(kind: ToolRequestKind) -> ToolId {
    match kind {
        ToolRequestKind::Install => ToolId::ToolProvisionPropose,
        ToolRequestKind::Integrate => ToolId::ToolIntegrationPropose,
        ToolRequestKind::Change | ToolRequestKind::Promote => ToolId::CodeChangePropose,
    }
}

/// The proposing tool's contract fingerprint in force, or a value no
/// request holds when the optional catalog is off now (its requests void).
fn contract_now(st: &AppState, kind: ToolRequestKind) -> String {
    st.gateway().catalog().get(proposing_tool(kind)).map_or_else(|| "0".repeat(64), |t| t.fingerprint.clone())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// An investigation's requests, newest first; without it, the
    /// workspace's requests waiting for a human, oldest first.
    #[serde(default)]
    investigation: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/tool-requests",
    tag = "tools",
    params(ListQuery),
    responses((status = 200, description = "Tool requests (SPEC X2).", body = Object))
)]
async fn list(State(st): State<AppState>, ApiQuery(q): ApiQuery<ListQuery>) -> ApiResult<Json<Value>> {
    let ws = st.workspace();
    let requests = match q.investigation {
        Some(text) => {
            let inv = path_ref(&text, Some(RefKind::Investigation))?;
            st.db().read(move |r| r.tool_requests(ws, &inv, labfy_store::MAX_TOOL_REQUEST_LIST)).await?
        }
        None => st.db().read(move |r| r.pending_tool_requests(ws)).await?,
    };
    Ok(Json(json!({"requests": requests, "optional_catalog": st.gateway().catalog().has_optional()})))
}

#[utoipa::path(
    get,
    path = "/api/v1/tool-requests/{request}",
    tag = "tools",
    params(("request" = String, Path, pattern = "^tool_request:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`tool_request:<uuid>`")),
    responses((status = 200, description = "One tool request, with what holds now.", body = Object))
)]
async fn one(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let r = path_ref(&id, Some(RefKind::ToolRequest))?;
    let ws = st.workspace();
    let stored = st.db().read(move |reads| reads.tool_request(ws, &r)).await?;
    let env = st.environment().await;
    // Without the governor's allow-list the registry cannot be read as it
    // would be checked: said, rather than a manifest reported gone.
    let allow_list_known = !env.sandbox_programs.is_empty();
    let (gw, scope, cap) = (st.gateway().clone(), st.scope(), stored.capability_id.clone());
    let registry_now = tokio::task::spawn_blocking(move || gw.capability_fingerprint(scope, &env, &cap))
        .await
        .map_err(|e| ApiError::internal(&e))??;
    let contract = contract_now(&st, stored.kind);
    Ok(Json(json!({
        "request": stored,
        "now": {"contract_fingerprint": contract, "registry_fingerprint": registry_now,
                "allow_list_known": allow_list_known},
    })))
}

/// An approval: what the analyst saw is the request as read (`GET`); an
/// optional note goes with the decision.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    #[serde(default)]
    note: Option<String>,
}

#[utoipa::path(
    post,
    path = "/api/v1/tool-requests/{request}/approve",
    tag = "tools",
    params(("request" = String, Path, pattern = "^tool_request:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`tool_request:<uuid>`")),
    request_body = ApproveBody,
    responses(
        (status = 200, description = "Decided: APPROVED, or VOID with why when the contract or manifest changed since.", body = Object),
        (status = 503, description = "The sandbox's allow-list is not known now: an installation or integration cannot be checked.", body = Object),
    )
)]
async fn approve(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ApproveBody>,
) -> ApiResult<Json<Value>> {
    decide(st, &id, true, body.note).await
}

#[utoipa::path(
    post,
    path = "/api/v1/tool-requests/{request}/refuse",
    tag = "tools",
    params(("request" = String, Path, pattern = "^tool_request:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", description = "`tool_request:<uuid>`")),
    request_body = RefuseBody,
    responses((status = 200, description = "Refused.", body = Object))
)]
async fn refuse(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RefuseBody>,
) -> ApiResult<Json<Value>> {
    decide(st, &id, false, Some(body.reason)).await
}

async fn decide(st: AppState, id: &str, approve: bool, note: Option<String>) -> ApiResult<Json<Value>> {
    let r = path_ref(id, Some(RefKind::ToolRequest))?;
    let ws = st.workspace();
    let stored = st.db().read(move |reads| reads.tool_request(ws, &r)).await?;
    let manifest_now = match stored.kind {
        ToolRequestKind::Install | ToolRequestKind::Integrate if approve => {
            let env = st.environment().await;
            // The registry is read against the sandbox's allow-list; without
            // it (no governor answering) what the analyst approves cannot be
            // compared with what is there: refused for now, not voided.
            if env.sandbox_programs.is_empty() {
                return Err(ApiError::of_kind(
                    labfy_core::ErrorKind::Unavailable,
                    format!(
                        "the sandbox's allow-list is not known now ({}): the manifest cannot be checked; decide \
                         again when the governor answers",
                        env.sandbox.detail
                    ),
                ));
            }
            let (gw, scope, cap) = (st.gateway().clone(), st.scope(), stored.capability_id.clone());
            tokio::task::spawn_blocking(move || gw.capability_fingerprint(scope, &env, &cap))
                .await
                .map_err(|e| ApiError::internal(&e))??
        }
        _ => None,
    };
    let decision = ToolDecision {
        approve,
        note,
        decided_by: ANALYST.to_owned(),
        current_contract_fingerprint: contract_now(&st, stored.kind),
        current_manifest_fingerprint: manifest_now,
    };
    let decided = st.db().write(move |s| s.decide_tool_request(ws, &r, &decision)).await?;
    tracing::info!(request = %r, status = %decided.status, pause = decided.pause, "tool request decided");
    Ok(Json(json!({"request": decided})))
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(list, one, approve, refuse))]
pub(crate) struct Doc;
