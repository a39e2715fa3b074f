//! The browser UI: `GET /login?code=…` exchanges a one-time login link for
//! a session (SPEC T4) and answers the application's page with the session
//! token in a meta tag; the page moves it into its origin's storage, sends
//! it on every request (`Authorization: Bearer …`) and takes the code out
//! of the address bar. No cookie is ever set: cookies are not scoped by
//! port, the origin's storage is (SPEC V1). `GET /` serves the same page
//! with no token; without one stored, it goes to `/login`, which says how
//! to log in. Static assets are embedded in the binary.

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use labfy_ipc::login::LoginError;

use crate::assets::{APP_CSS, APP_CSS_PATH, CYTOSCAPE_JS, CYTOSCAPE_PATH, INDEX_HTML, MODULES};
use crate::state::AppState;

/// Placeholder in `index.html` replaced by a new session's token on the
/// answer to a login link, and by nothing on `/`.
pub const SESSION_PLACEHOLDER: &str = "{{SESSION}}";

/// `/`, `/login`, the application's static files and the vendored graph
/// library.
pub fn router() -> Router<AppState> {
    let mut router = Router::new()
        .route("/", get(index))
        .route("/login", get(login))
        .route(APP_CSS_PATH, get(|| async { asset("text/css; charset=utf-8", APP_CSS) }));
    for (path, body) in MODULES {
        router = router.route(path, get(move || async move { asset("text/javascript; charset=utf-8", body) }));
    }
    router
        .route(
            CYTOSCAPE_PATH,
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                        (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
                    ],
                    CYTOSCAPE_JS,
                )
                    .into_response()
            }),
        )
        // Browsers ask for it on their own; answer "nothing" rather than a 404.
        .route("/favicon.ico", get(|| async { axum::http::StatusCode::NO_CONTENT }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

async fn index() -> Response {
    page(&INDEX_HTML.replace(SESSION_PLACEHOLDER, ""))
}

fn page(body: &str) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body.to_owned()).into_response()
}

/// The query of `/login`.
#[derive(serde::Deserialize)]
struct LoginQuery {
    code: Option<String>,
}

async fn login(State(state): State<AppState>, query: Result<Query<LoginQuery>, QueryRejection>) -> Response {
    // A query that is not one `code` (two of them, bad percent-encoding) is
    // not a link this Labfy made: the login page says so, like any other.
    let Ok(Query(q)) = query else {
        return login_page(StatusCode::BAD_REQUEST, Some(&LoginError::Malformed));
    };
    // No code: the page asked for a session it does not have.
    let Some(code) = q.code else {
        return login_page(StatusCode::UNAUTHORIZED, None);
    };
    match state.sessions().login(&code, std::time::SystemTime::now()) {
        // The application's page, carrying the new session's token for its
        // script to keep in this origin's storage. The answer is never
        // stored (`no-store`, the guard's default) nor sent on as a
        // referrer; the script replaces the address with `/`.
        Ok((token, _csrf)) => page(&INDEX_HTML.replace(SESSION_PLACEHOLDER, &token)),
        Err(e) => login_page(StatusCode::FORBIDDEN, Some(&e)),
    }
}

/// The page shown without a session (401) or for a refused link (403), in
/// French and English; plain text in a static page (no script).
fn login_page(status: StatusCode, refused: Option<&LoginError>) -> Response {
    let reason = match refused {
        None => String::new(),
        Some(e) => {
            let (fr, en) = match e {
                LoginError::Malformed | LoginError::BadSignature => (
                    "Ce lien de connexion n’a pas été émis par ce Labfy (autre démarrage, ou lien altéré).",
                    "This login link was not made by this Labfy (another start, or altered).",
                ),
                LoginError::Expired => ("Ce lien de connexion a expiré.", "This login link has expired."),
                LoginError::Used => ("Ce lien de connexion a déjà servi.", "This login link was already used."),
                LoginError::TooMany => (
                    "Trop de connexions en peu de temps ; attendez quelques minutes.",
                    "Too many logins in a short time; wait a few minutes.",
                ),
                LoginError::Unrecorded => (
                    "Cette connexion n’a pas pu être enregistrée ; demandez un nouveau lien avec labfy open.",
                    "This login could not be recorded; get a fresh link with labfy open.",
                ),
            };
            format!("<p class=\"login-refused\">{fr}</p><p class=\"login-refused\" lang=\"en\">{en}</p>")
        }
    };
    let body = LOGIN_HTML.replace("{{REASON}}", &reason);
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// The login page; `{{REASON}}` is replaced by fixed text only.
const LOGIN_HTML: &str = r#"<!doctype html>
<html lang="fr">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Labfy — connexion</title>
<link rel="stylesheet" href="/static/app.css">
</head>
<body>
<main class="login-page" data-testid="login-page">
<h1>Labfy</h1>
{{REASON}}
<p>Connexion requise. Ouvrez le lien de connexion affiché par <code>labfy up</code>,
ou obtenez-en un nouveau dans un terminal, sous le compte qui exécute Labfy :</p>
<pre>labfy open</pre>
<p lang="en">Login required. Open the login link printed by <code>labfy up</code>,
or get a fresh one in a terminal, as the user that runs Labfy: <code>labfy open</code>.</p>
</main>
</body>
</html>
"#;
