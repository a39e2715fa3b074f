//! Agent runtime routes (SPEC M6): the status line of the agent (M10), and
//! turns the runtime's one worker drives — the deterministic demo agent or
//! the local model (M4) — started, polled, resumed after a human grant and
//! cancelled. Behind `security::guard` like every route: exact Host and
//! session for all, plus Origin, CSRF and the rate limit for every POST.
//! Bodies are closed (`ApiJson` over `deny_unknown_fields` types).
//!
//! The runtime's own methods touch only its bounded memory and the gateway's
//! (no SQLite), so they run on the async threads; the worker does the store
//! and model work off them.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use labfy_runtime::runtime::{EventPage, MAX_EVENTS_PER_POLL, RuntimeError, RuntimeState, RuntimeTurn, StartTurn};
use serde::Deserialize;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiQuery};
use crate::state::AppState;

/// The agent runtime routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/agent-runtime/status", get(status))
        .route("/api/v1/agent-runtime/turns", post(start_turn))
        .route("/api/v1/agent-runtime/turns/{turn_id}", get(turn))
        .route("/api/v1/agent-runtime/turns/{turn_id}/resume", post(resume))
        .route("/api/v1/agent-runtime/turns/{turn_id}/cancel", post(cancel))
        .route("/api/v1/agent-runtime/events", get(events))
}

impl From<RuntimeError> for ApiError {
    fn from(e: RuntimeError) -> Self {
        use labfy_core::ErrorKind;
        // The status is the kind's (`ApiError::of_kind`, the one mapping).
        let (kind, message) = match e {
            RuntimeError::Invalid(m) => (ErrorKind::InvalidInput, m),
            RuntimeError::NotFound(m) => (ErrorKind::NotFound, m),
            RuntimeError::Conflict(m) => (ErrorKind::Conflict, m),
            RuntimeError::Forbidden(m) => (ErrorKind::Forbidden, m),
            // A 5xx body stays generic (STYLE 6): the detail may quote the
            // gateway; it goes to the log.
            RuntimeError::Unavailable(m) => {
                tracing::warn!(detail = %m, "agent runtime unavailable");
                let generic =
                    "the agent runtime is unavailable (closed, or the server is stopping); see the server log";
                (ErrorKind::Unavailable, generic.to_owned())
            }
            // A bug: `of_kind` answers 500 with a generic body and logs it.
            RuntimeError::Internal(m) => (ErrorKind::Internal, m),
        };
        ApiError::of_kind(kind, message)
    }
}

fn uuid_param(name: &str, text: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(text).map_err(|_| ApiError::bad_request(format!("{name} must be a UUID")))
}

/// The body of resume and cancel: nothing (closed, so nothing can be slipped
/// in — no grant, no scope).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct EmptyBody {}

#[utoipa::path(
    get,
    path = "/api/v1/agent-runtime/status",
    tag = "agent",
    responses((status = 200, description = "The agent runtime's state.", body = Object))
)]
async fn status(State(st): State<AppState>) -> Json<RuntimeState> {
    Json(st.agent_runtime().status().await)
}

/// 202: the turn is queued for the worker (or, for a replay of the same
/// idempotency key with the same body, the same turn as it stands now).
#[utoipa::path(
    post,
    path = "/api/v1/agent-runtime/turns",
    tag = "agent",
    request_body = StartTurn,
    responses((status = 202, description = "The turn, queued.", body = Object))
)]
async fn start_turn(
    State(st): State<AppState>,
    ApiJson(req): ApiJson<StartTurn>,
) -> ApiResult<(StatusCode, Json<RuntimeTurn>)> {
    let env = st.environment().await;
    let turn = st.agent_runtime().start_turn(st.scope(), env, req)?;
    Ok((StatusCode::ACCEPTED, Json(turn)))
}

#[utoipa::path(
    get,
    path = "/api/v1/agent-runtime/turns/{turn_id}",
    tag = "agent",
    params(("turn_id" = uuid::Uuid, Path, description = "the turn's UUID")),
    responses((status = 200, description = "The turn.", body = Object))
)]
async fn turn(State(st): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<RuntimeTurn>> {
    let id = uuid_param("turn_id", &id)?;
    Ok(Json(st.agent_runtime().turn(st.scope(), id)?))
}

/// 202: queued; the worker checks the grant through the gateway.
#[utoipa::path(
    post,
    path = "/api/v1/agent-runtime/turns/{turn_id}/resume",
    tag = "agent",
    params(("turn_id" = uuid::Uuid, Path, description = "the turn's UUID")),
    request_body = EmptyBody,
    responses((status = 202, description = "The turn, queued again.", body = Object))
)]
async fn resume(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(EmptyBody {}): ApiJson<EmptyBody>,
) -> ApiResult<(StatusCode, Json<RuntimeTurn>)> {
    let id = uuid_param("turn_id", &id)?;
    let env = st.environment().await;
    let turn = st.agent_runtime().resume(st.scope(), env, id)?;
    Ok((StatusCode::ACCEPTED, Json(turn)))
}

#[utoipa::path(
    post,
    path = "/api/v1/agent-runtime/turns/{turn_id}/cancel",
    tag = "agent",
    params(("turn_id" = uuid::Uuid, Path, description = "the turn's UUID")),
    request_body = EmptyBody,
    responses((status = 200, description = "The turn, cancelled.", body = Object))
)]
async fn cancel(
    State(st): State<AppState>,
    Path(id): Path<String>,
    ApiJson(EmptyBody {}): ApiJson<EmptyBody>,
) -> ApiResult<Json<RuntimeTurn>> {
    let id = uuid_param("turn_id", &id)?;
    Ok(Json(st.agent_runtime().cancel(st.scope(), id)?))
}

/// Largest cursor accepted: the largest integer a browser holds exactly
/// (2^53 - 1). Sequence numbers never come near it; a larger cursor is a
/// client bug, refused rather than passed on.
pub const MAX_EVENT_CURSOR: u64 = (1 << 53) - 1;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    /// The last sequence number seen (0: from the start).
    #[serde(default)]
    #[param(maximum = 9_007_199_254_740_991_i64)]
    cursor: u64,
    #[serde(default)]
    limit: Option<usize>,
}

impl EventsQuery {
    /// The cursor, refused past what a browser holds exactly
    /// ([`MAX_EVENT_CURSOR`]); the one rule of both event feeds.
    pub(crate) fn cursor(&self) -> ApiResult<u64> {
        if self.cursor > MAX_EVENT_CURSOR {
            return Err(ApiError::bad_request(format!("cursor must be at most {MAX_EVENT_CURSOR}")));
        }
        Ok(self.cursor)
    }

    /// The page size asked, or `default`.
    pub(crate) fn limit_or(&self, default: usize) -> usize {
        self.limit.unwrap_or(default)
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/agent-runtime/events",
    tag = "agent",
    params(EventsQuery),
    responses((status = 200, description = "A page of the runtime's events.", body = Object))
)]
async fn events(State(st): State<AppState>, ApiQuery(q): ApiQuery<EventsQuery>) -> ApiResult<Json<EventPage>> {
    let cursor = q.cursor()?;
    Ok(Json(st.agent_runtime().events(st.scope(), cursor, q.limit_or(MAX_EVENTS_PER_POLL))))
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(status, start_turn, turn, resume, cancel, events))]
pub(crate) struct Doc;
