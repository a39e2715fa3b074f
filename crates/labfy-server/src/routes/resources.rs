//! `GET /api/v1/resources`: the Resource Governor's state (SPEC Q5) for the
//! UI's live chart — samples, reservations, the admission log, the local
//! model — asked over the governor's service socket; `GET
//! /api/v1/resources/history`: the governor's last hour of points, which the
//! chart starts from (SPEC U6).
//!
//! An absent, silent or failing governor is a normal answer (`200`,
//! `available: false` with one line saying why), never a 5xx: the server runs
//! without a supervisor too. A state is at most
//! [`GOVERNOR_STATE_TTL`](crate::state::GOVERNOR_STATE_TTL) old, and an
//! earlier one never stands in for a missing answer.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::state::{AppState, GovernorView};

/// The resources route (the session is checked before, by `security::guard`).
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/resources", get(resources)).route("/api/v1/resources/history", get(history))
}

/// `{available: true, history: {step_ms, points}}` or `{available: false,
/// detail}` (SPEC U6): the chart's past, kept by the governor.
#[utoipa::path(
    get,
    path = "/api/v1/resources/history",
    tag = "resources",
    responses((status = 200, description = "The governor's sample history (SPEC U6).", body = Object))
)]
async fn history(State(st): State<AppState>) -> Json<Value> {
    match st.governor_history().await {
        Ok(h) => Json(json!({"available": true, "history": h})),
        Err(detail) => Json(json!({"available": false, "detail": detail})),
    }
}

/// `{available: true, state}` or `{available: false, detail}`.
#[utoipa::path(
    get,
    path = "/api/v1/resources",
    tag = "resources",
    responses((status = 200, description = "The governor's state (SPEC Q5).", body = Object))
)]
async fn resources(State(st): State<AppState>) -> Json<Value> {
    match st.governor_state().await {
        GovernorView::Available(state) => Json(json!({"available": true, "state": &*state})),
        GovernorView::Unavailable(detail) => Json(json!({"available": false, "detail": detail})),
    }
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(resources, history))]
pub(crate) struct Doc;
