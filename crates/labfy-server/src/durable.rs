//! No answer before what it tells is on disk (SPEC K1).
//!
//! The agent's turns, results and events live in memory and reach the
//! journal file on the journal's own thread ([`labfy_gateway::journal`]).
//! A client told « paused, waiting for your decision » by an answer, or
//! shown event 229 by a poll, must find that state again after a `kill -9`
//! one millisecond later. So every answer waits, before it leaves, until
//! everything the journal was given so far is written: usually nothing is
//! pending and the check is two atomic loads; otherwise the journal writes
//! at once and the answers waiting meanwhile share its transaction. An
//! answer whose state could not be written is replaced by a 503
//! `NOT_DURABLE`: the client is never told what a crash could take back.
//!
//! The store's own changes (SQLite, one transaction per change) are
//! committed before their handler returns; this barrier is for the journal,
//! whose writes are batched.

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use labfy_gateway::journal::NotDurable;

use crate::error::ApiError;
use crate::state::AppState;

/// Longest an answer waits for the journal before it is refused.
pub const DURABLE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The barrier, as an axum middleware over every route.
pub async fn barrier(State(state): State<AppState>, req: Request, next: Next) -> Response {
    // SPEC K4: a test build armed for this route's answer point crashes
    // once the answer's state is durable, before the answer leaves.
    let crash_point = labfy_core::crash::armed().then(|| {
        let route = req.extensions().get::<MatchedPath>().map_or("", MatchedPath::as_str);
        labfy_core::crash::answer_point(req.method().as_str(), route)
    });
    // SPEC K5: a test build may be asked to leak, to prove the soak's
    // leak check fails on one.
    labfy_core::leak::per_request();
    let answer = durable(&state, next.run(req).await).await;
    if let Some(name) = crash_point {
        labfy_core::crash::point(&name);
    }
    answer
}

async fn durable(state: &AppState, answer: Response) -> Response {
    let Some(journal) = state.gateway().journal() else { return answer };
    if journal.is_durable() {
        return answer;
    }
    let ticket = journal.ticket();
    let waited = tokio::task::spawn_blocking(move || journal.wait_durable(ticket, DURABLE_WAIT)).await;
    match waited {
        Ok(Ok(())) => answer,
        Ok(Err(e)) => refuse(&e),
        Err(e) => ApiError::internal(&format!("the durability wait did not finish: {e}")).into_response(),
    }
}

fn refuse(e: &NotDurable) -> Response {
    tracing::error!(error = %e, "an answer was withheld: its state is not on disk");
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "NOT_DURABLE",
        format!("{e}: the change may be lost if the server stops now; read the state again before retrying"),
    )
    .into_response()
}
