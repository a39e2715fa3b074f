//! The browser UI: `GET /` issues the session cookie and carries the CSRF token
//! in a meta tag; static assets are embedded in the binary.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::security::session_cookie;
use crate::session::SESSION_COOKIE;
use crate::state::AppState;

const INDEX_HTML: &str = include_str!("../../assets/index.html");
const APP_JS: &str = include_str!("../../assets/app.js");
const APP_CSS: &str = include_str!("../../assets/app.css");
/// Placeholder in `index.html` replaced by the session's CSRF token.
pub const CSRF_PLACEHOLDER: &str = "{{CSRF_TOKEN}}";

/// `/`, `/static/app.js`, `/static/app.css`.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/static/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/static/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        // Browsers ask for it on their own; answer "nothing" rather than a 404.
        .route("/favicon.ico", get(|| async { axum::http::StatusCode::NO_CONTENT }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    // Reuse a live session (a reload keeps its token); otherwise issue one.
    let existing = session_cookie(&headers).and_then(|id| state.sessions().get(id).map(|s| s.csrf_token.to_string()));
    let (cookie, csrf) = match existing {
        Some(csrf) => (None, csrf),
        None => {
            let (id, csrf) = state.sessions().create(state.workspace());
            (Some(id), csrf)
        }
    };
    // The token is hex, so it cannot break out of the attribute.
    let body = INDEX_HTML.replace(CSRF_PLACEHOLDER, &csrf);
    let mut response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    if let Some(id) = cookie {
        let value = format!("{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(v) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    response
}
