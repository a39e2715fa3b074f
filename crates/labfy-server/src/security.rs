//! The security layers of the HTTP surface (SPEC S1–S4), in the order they run:
//!
//! 1. response headers on everything (CSP, no sniffing, no framing, no referrer),
//! 2. exact `Host` check (both in [`guard`]) — `127.0.0.1:<port>` or `localhost:<port>` — else 421
//!    (defeats DNS rebinding);
//! 3. `/api/…` needs a valid `labfy_session` cookie, else 401;
//! 4. every non-GET needs `Origin` equal to the server's own origin and
//!    `X-CSRF-Token` equal to the session's token, else 403; then it takes a
//!    token from the session's bucket, else 429 with `Retry-After`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::session::{SESSION_COOKIE, Session};
use crate::state::AppState;

/// The Content-Security-Policy of every response: only same-origin scripts,
/// styles and requests; no inline script or style, no framing, no forms
/// posting elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Header carrying the CSRF token on mutations.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The session attached to an `/api/` request by [`require_session`].
#[derive(Clone)]
pub struct CurrentSession {
    /// Cookie value (the session id).
    pub id: Arc<str>,
    /// Session data.
    pub session: Session,
}

/// Headers set on every response, errors included.
const RESPONSE_HEADERS: [(header::HeaderName, &str); 6] = [
    (header::CONTENT_SECURITY_POLICY, CSP),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::HeaderName::from_static("cross-origin-opener-policy"), "same-origin"),
    (header::HeaderName::from_static("cross-origin-resource-policy"), "same-origin"),
];

/// The `Host` header, if it is one of the exact allowed values.
fn allowed_host<'h>(state: &AppState, headers: &'h HeaderMap) -> Option<&'h str> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    state.allowed_hosts().iter().any(|a| a == host).then_some(host)
}

/// Layers 1 and 2: the exact Host check (421 Misdirected Request otherwise),
/// and the security headers on every response, refusals included.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = if allowed_host(&state, request.headers()).is_some() {
        next.run(request).await
    } else {
        ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "WRONG_HOST",
            "this server answers only to its own loopback address (Host must be 127.0.0.1:<port> or localhost:<port>)",
        )
        .into_response()
    };
    let h = response.headers_mut();
    h.reserve(RESPONSE_HEADERS.len() + 1);
    for (name, value) in RESPONSE_HEADERS {
        h.insert(name, HeaderValue::from_static(value));
    }
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The value of the `labfy_session` cookie, if present.
pub fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

fn is_read_only(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}

/// Layers 3 and 4 for `/api/`: session, then Origin + CSRF + rate limit on mutations.
pub async fn require_session(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let Some((id, session)) =
        session_cookie(request.headers()).and_then(|id| state.sessions().get(id).map(|s| (Arc::<str>::from(id), s)))
    else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "NO_SESSION",
            "no valid session: open the Labfy page (GET /) in this browser first",
        )
        .into_response();
    };
    if !is_read_only(request.method()) {
        // The Host was already checked exactly, so the expected origin is its http:// form.
        let host = allowed_host(&state, request.headers()).unwrap_or_default();
        let expected_origin = format!("http://{host}");
        let origin_ok =
            request.headers().get(header::ORIGIN).and_then(|o| o.to_str().ok()).is_some_and(|o| o == expected_origin);
        if !origin_ok {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "BAD_ORIGIN",
                "changes must come from the Labfy page itself (Origin header missing or foreign)",
            )
            .into_response();
        }
        let csrf_ok = request
            .headers()
            .get(CSRF_HEADER)
            .is_some_and(|t| bool::from(t.as_bytes().ct_eq(session.csrf_token.as_bytes())));
        if !csrf_ok {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "BAD_CSRF_TOKEN",
                "missing or wrong X-CSRF-Token header; reload the page",
            )
            .into_response();
        }
        if let Err(wait) = state.sessions().take_token(&id) {
            return ApiError::rate_limited(wait.as_secs_f64().ceil().max(1.0) as u64).into_response();
        }
    }
    request.extensions_mut().insert(CurrentSession { id, session });
    next.run(request).await
}
