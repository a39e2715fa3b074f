//! The security of the HTTP surface (SPEC S1–S4) as one linear function,
//! [`guard`], run before every route, in this order:
//!
//! 1. exact `Host` — `127.0.0.1:<port>` or `localhost:<port>` — else 421
//!    (defeats DNS rebinding);
//! 2. every path but the UI's own few ([`PUBLIC_PATHS`]) needs a valid
//!    session sent as `Authorization: Bearer <session>` — one this server's
//!    login key made, given only for a one-time login link (SPEC T4, V1) —
//!    else 401: deny by default, so an odd spelling of an API path
//!    (`//api/…`) cannot slip past. The session is never a cookie: cookies
//!    are not scoped by port, so every program on another port of
//!    127.0.0.1 that the analyst's browser visits would receive it. The
//!    page keeps it in its origin's storage (scheme, host *and* port) and
//!    sends it itself; a cookie, whatever its name, authorises nothing;
//! 3. every non-GET needs `Origin` equal to the server's own origin
//!    and `X-CSRF-Token` equal to the session's token, else 403;
//! 4. then takes a token from the session's bucket, else 429 with `Retry-After`;
//! 5. and every answer, refusals included, gets the security headers (strict
//!    CSP, no sniffing, no framing, no referrer, `no-store` by default).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::session::Session;
use crate::state::AppState;

/// The Content-Security-Policy of every response: only same-origin scripts,
/// styles and requests; no inline script or style, no framing, no forms
/// posting elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Header carrying the CSRF token on mutations.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The only paths served without a session, with the UI's static files
/// ([`crate::assets::is_asset`]): the page (which, without a session,
/// goes to `/login`), the login link's target, and the favicon. Only
/// GET/HEAD reach them without one. The page and its scripts are the same
/// for every Labfy of this version and carry no secret; the browser loads
/// the page's modules itself, without the session header, so they must be
/// public.
pub const PUBLIC_PATHS: [&str; 3] = ["/", "/login", "/favicon.ico"];

/// The session attached to a request by [`guard`].
#[derive(Clone)]
pub struct CurrentSession {
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

/// Steps 1–5 of the module docs, for every request. A request that passes
/// takes a slot in its pool — reads apart from changes, so requests whose
/// bodies are slow to arrive can fill only the changes' pool, never starve
/// the pages and reads (SPEC T5).
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = match check(&state, request) {
        Ok(request) => {
            let pool = if is_read_only(request.method()) { state.read_pool() } else { state.change_pool() };
            match pool.clone().try_acquire_owned() {
                Ok(_slot) => next.run(request).await,
                Err(_) => {
                    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "OVERLOADED", "server busy; retry").into_response()
                }
            }
        }
        Err(refusal) => refusal.into_response(),
    };
    let h = response.headers_mut();
    h.reserve(RESPONSE_HEADERS.len() + 1);
    for (name, value) in RESPONSE_HEADERS {
        // A handler's own policy (a download's `sandbox`) is kept beside
        // the global one: a browser enforces every policy it is sent, so
        // the two together are stricter than either.
        if name == header::CONTENT_SECURITY_POLICY && h.contains_key(&name) {
            h.append(name, HeaderValue::from_static(value));
        } else {
            h.insert(name, HeaderValue::from_static(value));
        }
    }
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Steps 1–4: the request, with its session attached, or the refusal.
fn check(state: &AppState, mut request: Request) -> Result<Request, ApiError> {
    // RFC 9112 §3.2: a request with more than one Host line is invalid, and
    // an absolute-form target names the authority Host must agree with.
    if request.headers().get_all(header::HOST).iter().nth(1).is_some() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "DUPLICATE_HOST",
            "a request carries one Host header, not several",
        ));
    }
    let Some(host) = allowed_host(state, request.headers()) else {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "WRONG_HOST",
            "this server answers only to its own loopback address (Host must be 127.0.0.1:<port> or localhost:<port>)",
        ));
    };
    if request.uri().authority().is_some_and(|a| a.as_str() != host) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "HOST_MISMATCH",
            "the request target's authority differs from its Host header",
        ));
    }
    // A body announced larger than any route accepts is refused before a
    // byte of it is read (its connection slot is not held for it).
    let announced =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let bound = if is_upload(request.uri().path()) { crate::MAX_UPLOAD_REQUEST_BYTES } else { crate::MAX_BODY_BYTES };
    if announced.is_some_and(|n| n > bound as u64) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "BODY_TOO_LARGE",
            format!("a request body is at most {bound} bytes"),
        ));
    }
    let path = request.uri().path();
    if is_read_only(request.method()) && (PUBLIC_PATHS.contains(&path) || crate::assets::is_asset(path)) {
        return Ok(request);
    }
    let Some((id, session)) = session_token(request.headers()).and_then(|c| state.sessions().get(c)) else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "NO_SESSION",
            "no valid session: open a login link from `labfy up` or `labfy open` in this browser first",
        ));
    };
    if !is_read_only(request.method()) {
        // The Host was checked exactly, so the own origin is its http:// form.
        let origin_ok = request
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| o == host);
        if !origin_ok {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "BAD_ORIGIN",
                "changes must come from the Labfy page itself (Origin header missing or foreign)",
            ));
        }
        let csrf_ok = request
            .headers()
            .get(CSRF_HEADER)
            .is_some_and(|t| bool::from(t.as_bytes().ct_eq(session.csrf_token.as_bytes())));
        if !csrf_ok {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "BAD_CSRF_TOKEN",
                "missing or wrong X-CSRF-Token header; reload the page",
            ));
        }
        if let Err(wait) = state.sessions().take_token(&id) {
            return Err(ApiError::rate_limited(wait.as_secs_f64().ceil().max(1.0) as u64));
        }
    }
    crate::http::prove_connection(&request);
    request.extensions_mut().insert(CurrentSession { session });
    Ok(request)
}

/// The session sent as `Authorization: Bearer <session>`, if exactly one
/// `Authorization` header says so (SPEC V1). Cookies are never read.
pub fn session_token(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    (scheme.eq_ignore_ascii_case(SESSION_SCHEME) && !token.is_empty()).then_some(token)
}

/// The `Authorization` scheme of the session.
pub const SESSION_SCHEME: &str = "Bearer";

fn is_read_only(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD)
}
/// Whether `path` is the one route that takes files (`POST
/// /api/v1/imports/{job}/files`), whose bodies may be larger.
fn is_upload(path: &str) -> bool {
    path.strip_prefix("/api/v1/imports/")
        .and_then(|rest| rest.strip_suffix("/files"))
        .is_some_and(|job| !job.is_empty() && !job.contains('/'))
}
