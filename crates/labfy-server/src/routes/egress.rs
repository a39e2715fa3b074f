//! `GET /api/v1/egress`: Tor's bootstrap and egress's activity (SPEC E1), for
//! the UI's status line — asked over egress's service socket.
//!
//! An absent, silent or failing egress is a normal answer (`200`,
//! `available: false` with one line saying why), never a 5xx. A status is at
//! most [`EGRESS_STATUS_TTL`](crate::state::EGRESS_STATUS_TTL) old, and an
//! earlier one never stands in for a missing answer.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::egress::one_line;
use crate::state::{AppState, EgressView};

/// The egress route (the session is checked before, by `security::guard`).
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/egress", get(egress))
}

/// `{available: true, ready, bootstrap_percent, phase, last_error,
/// bootstrap_ms, custom_network, in_flight, campaigns, counts: {fetched, refused,
/// unavailable, failed, stopped}}` or `{available: false, detail}`.
#[utoipa::path(
    get,
    path = "/api/v1/egress",
    tag = "resources",
    responses((status = 200, description = "Tor's bootstrap and egress's activity (SPEC E1).", body = Object))
)]
async fn egress(State(st): State<AppState>) -> Json<Value> {
    match st.egress_status().await {
        EgressView::Available(s) => {
            let [fetched, refused, unavailable, failed, stopped] = s.counts;
            Json(json!({
                "available": true,
                "ready": s.ready,
                "bootstrap_percent": s.bootstrap_percent.min(100),
                "phase": one_line(&s.phase),
                "last_error": s.last_error.as_deref().map(one_line),
                "bootstrap_ms": s.bootstrap_ms,
                "custom_network": s.custom_network,
                "in_flight": s.in_flight,
                "campaigns": s.campaigns,
                "counts": {"fetched": fetched, "refused": refused, "unavailable": unavailable,
                           "failed": failed, "stopped": stopped},
            }))
        }
        EgressView::Unavailable(detail) => Json(json!({"available": false, "detail": detail})),
    }
}

/// This module's routes in the OpenAPI document (`crate::openapi`).
#[derive(utoipa::OpenApi)]
#[openapi(paths(egress))]
pub(crate) struct Doc;
