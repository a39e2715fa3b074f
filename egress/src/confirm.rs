//! The confirmation page (SPEC T2): where a human confirms or refuses a
//! grant the workspace server proposed, on a page egress draws itself on
//! its own loopback port — as Qubes OS draws the qrexec `ask` dialog in
//! dom0, out of reach of the qube that asks.
//!
//! The workspace server lives in its own network namespace and cannot
//! connect to this port. It does control the analyst's UI pages in the same
//! browser, so the page refuses, in this order, before any route runs:
//!
//! 1. a `Host` other than exactly `127.0.0.1:<port>` or `localhost:<port>`
//!    — 400 (DNS rebinding);
//! 2. any request without a valid `labfy_egress` session cookie — 401 —
//!    except `GET /login`, which exchanges a one-time link
//!    ([`ConfirmPage::link`]) for that cookie. Codes and sessions are MACs
//!    under a key egress generates at start and keeps in memory only;
//! 3. any change (`POST`) whose `Origin` is missing or not the page's own
//!    — 403 (cross-origin form posts from the server's pages);
//!
//! and the decision route then requires the session's CSRF token in the
//! form (compared in constant time; 403), a bounded body (413) and exactly
//! the form's two fields (400). Every answer, refusals included, forbids
//! framing (`frame-ancestors 'none'`, `X-Frame-Options: DENY`, against
//! clickjacking), scripts (`default-src 'none'`: the page has none), caching
//! and referrers to other sites. Everything the server supplied — URLs, hosts, its
//! summary — is HTML-escaped and shown as the server's words.
//!
//! Cookies are not scoped by port: the browser also sends `labfy_egress` to
//! the server's UI on `127.0.0.1`. That discloses nothing the server can
//! use — it cannot reach this port, and a change also needs the page's own
//! `Origin` and the CSRF token, which only this key can compute — and a
//! cookie the server's pages plant under the same name cannot hide the
//! real one: every `labfy_egress` value is tried.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use labfy_core::GrantRef;
use labfy_core::bounded::truncate_chars;
use labfy_ipc::login::{LoginError, LoginKey, SpentCodes};
use labfy_ipc::messages::egress::{GrantPhase, GrantRecord};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::ledger::Ledger;
use crate::limits::PAGE_LIMITS;

/// Name of the page's session cookie.
pub const SESSION_COOKIE: &str = "labfy_egress";
/// Most sessions alive at once; the oldest is forgotten beyond it (its
/// cookie then no longer opens the page).
pub const MAX_SESSIONS: usize = 64;
/// How long a session opens the page after its login.
pub const MAX_SESSION_AGE: Duration = Duration::from_secs(12 * 60 * 60);
/// Most one-time codes remembered as used, each until its expiry; a login
/// beyond it is refused (forgetting one early would let it work twice).
pub const MAX_USED_CODES: usize = 256;
/// Largest decision form accepted, in bytes.
pub const MAX_FORM_BYTES: usize = 4096;
/// Where a decision made here is recorded as taken (`decided_via`).
pub const DECIDED_VIA: &str = "confirmation page";
/// Most decided grants listed on the index page, below the waiting ones.
pub const MAX_DECIDED_SHOWN: usize = 20;
/// Characters of a summary shown on the index page (the grant's page shows
/// it whole).
const SUMMARY_EXCERPT_CHARS: usize = 160;

/// The page's `Content-Security-Policy`: no script, no request of any kind
/// but its own inline style, forms posting only to itself, never framed.
pub const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Headers set on every answer, refusals included. `same-origin`, not
/// `no-referrer`: under `no-referrer` a browser sends `Origin: null` with the
/// page's own form (Fetch standard, "serializing a request origin"), and the
/// decision's `Origin` check would refuse the human's click; `same-origin`
/// still sends nothing to any other site (found by the browser scenario).
const RESPONSE_HEADERS: [(HeaderName, &str); 6] = [
    (header::CONTENT_SECURITY_POLICY, CSP),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "same-origin"),
    (header::CACHE_CONTROL, "no-store"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::CONTENT_TYPE, "text/html; charset=utf-8"),
];

/// Egress's confirmation page: a small HTTP server on `127.0.0.1`.
pub struct ConfirmPage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ConfirmPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfirmPage").field("port", &self.inner.port).finish_non_exhaustive()
    }
}

impl ConfirmPage {
    /// Binds 127.0.0.1:`port` (0: any free port) and serves the page on a
    /// task until `shutdown` is cancelled.
    pub async fn start(ledger: Arc<Ledger>, port: u16, shutdown: CancellationToken) -> std::io::Result<Arc<Self>> {
        // Loopback only: the workspace server's network namespace has its
        // own loopback, so it cannot connect here.
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await?;
        let port = listener.local_addr()?.port();
        let inner = Arc::new(Inner {
            ledger,
            key: LoginKey::generate(),
            port,
            hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            used_codes: SpentCodes::new(MAX_USED_CODES),
            sessions: Mutex::new(VecDeque::new()),
        });
        let app = router(inner.clone());
        tokio::spawn(async move {
            // Bounded connections (SPEC T5, V2): a cap far below egress's
            // descriptors, deadlines, a drain of at most 5 s at shutdown.
            let serve = labfy_http::serve(listener, app, PAGE_LIMITS, shutdown.cancelled_owned());
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "the confirmation page stopped");
            }
        });
        tracing::info!(port, "confirmation page listening on 127.0.0.1");
        Ok(Arc::new(Self { inner }))
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// A fresh one-time link that opens the page of `grant`:
    /// `http://127.0.0.1:<port>/login?code=<code>&grant=<grant:uuid>`. It
    /// works once, for `LOGIN_CODE_TTL`.
    pub fn link(&self, grant: GrantRef) -> String {
        let code = self.inner.key.mint_code(SystemTime::now());
        // The code is hex and dots, the reference `grant:` and a UUID:
        // nothing to percent-encode.
        format!("http://127.0.0.1:{}/login?code={code}&grant={grant}", self.inner.port)
    }
}

/// The state shared by the page's routes.
struct Inner {
    ledger: Arc<Ledger>,
    /// Mints and checks the codes, session cookies and CSRF tokens; never
    /// leaves this process.
    key: LoginKey,
    port: u16,
    /// The exact `Host` values accepted.
    hosts: [String; 2],
    /// Nonces of the codes already used, with their expiry (Unix seconds).
    used_codes: SpentCodes,
    /// Live session ids with their login time, oldest first.
    sessions: Mutex<VecDeque<(String, Instant)>>,
}

/// The session a request was admitted with (set by [`guard`]).
#[derive(Debug, Clone)]
struct SessionId(String);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a request panicked mid-update of a plain
    // collection, which is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// Exchanges a one-time code for a new session's cookie value.
    fn login(&self, code: &str, now: SystemTime) -> Result<String, LoginError> {
        self.used_codes.redeem(&self.key, code, now)?;
        let (cookie, _csrf) = self.key.mint_session();
        if let Some(id) = self.key.check_session(&cookie) {
            let mut sessions = lock(&self.sessions);
            while sessions.len() >= MAX_SESSIONS {
                sessions.pop_front();
            }
            sessions.push_back((id.to_owned(), Instant::now()));
        }
        Ok(cookie)
    }

    /// The live session of one of the request's `labfy_egress` cookies:
    /// made by this key, still in the table, not too old.
    fn session(&self, headers: &HeaderMap) -> Option<SessionId> {
        let sessions = lock(&self.sessions);
        cookie_values(headers).filter_map(|c| self.key.check_session(c)).find_map(|id| {
            sessions
                .iter()
                .any(|(live, at)| live == id && at.elapsed() < MAX_SESSION_AGE)
                .then(|| SessionId(id.to_owned()))
        })
    }

    /// Runs a ledger call on the blocking pool (the ledger is SQLite behind
    /// a mutex). `Err` is the 500 page when the task itself failed.
    async fn ledger<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Ledger) -> Result<T, String> + Send + 'static,
    ) -> Result<Result<T, String>, Response> {
        let ledger = self.ledger.clone();
        tokio::task::spawn_blocking(move || f(&ledger)).await.map_err(|e| {
            tracing::warn!(error = %e, "a ledger call of the confirmation page failed");
            internal_error()
        })
    }
}

/// Every value of a `labfy_egress` cookie in the request.
fn cookie_values(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

fn router(inner: Arc<Inner>) -> Router {
    Router::new()
        .route("/login", get(login))
        .route("/", get(index))
        .route("/grants/{grant}", get(grant_page))
        .route("/grants/{grant}/decision", post(decide))
        .fallback(|| async { not_found() })
        .layer(middleware::from_fn_with_state(inner.clone(), guard))
        .with_state(inner)
}

/// Steps 1–3 of the module docs, for every request (unknown paths and
/// methods included), then the headers of every answer.
async fn guard(State(page): State<Arc<Inner>>, mut request: Request, next: Next) -> Response {
    let mut response = match refusal(&page, &mut request) {
        None => next.run(request).await,
        Some(refused) => refused,
    };
    let h = response.headers_mut();
    for (name, value) in RESPONSE_HEADERS {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The refusal of a request, if any; else the request goes on, with its
/// session attached.
fn refusal(page: &Inner, request: &mut Request) -> Option<Response> {
    // 1. The exact Host, once; an absolute-form target must agree with it.
    let hosts = request.headers().get_all(header::HOST);
    let host = match (hosts.iter().next(), hosts.iter().nth(1)) {
        (Some(h), None) => h.to_str().ok().filter(|h| page.hosts.iter().any(|a| a == h)),
        _ => None,
    };
    let Some(host) = host.map(str::to_owned) else {
        return Some(message(
            StatusCode::BAD_REQUEST,
            "Adresse refusée",
            "Cette page ne répond qu'à sa propre adresse locale (127.0.0.1 et son port).",
            "This page answers only to its own loopback address (127.0.0.1 and its port).",
        ));
    };
    if request.uri().authority().is_some_and(|a| a.as_str() != host) {
        return Some(message(
            StatusCode::BAD_REQUEST,
            "Adresse refusée",
            "La cible de la requête ne correspond pas à son en-tête Host.",
            "The request target differs from its Host header.",
        ));
    }
    let read_only = matches!(*request.method(), Method::GET | Method::HEAD);
    // Only a GET spends a code (a HEAD, as link checkers send, does not).
    if request.method() == Method::GET && request.uri().path() == "/login" {
        return None;
    }
    // 2. A live session, for everything else.
    let Some(session) = page.session(request.headers()) else {
        return Some(login_required(None));
    };
    // 3. Changes come from this page only. Host was checked exactly, so the
    // page's own origin is its http:// form.
    if !read_only {
        let own = request
            .headers()
            .get(header::ORIGIN)
            .and_then(|o| o.to_str().ok())
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| o == host);
        if !own {
            return Some(message(
                StatusCode::FORBIDDEN,
                "Demande refusée",
                "Une décision ne peut venir que de cette page elle-même (en-tête Origin absent ou étranger). \
                 Rouvrez la page et décidez-y.",
                "A decision can only come from this page itself (Origin header missing or foreign). \
                 Reopen the page and decide there.",
            ));
        }
    }
    request.extensions_mut().insert(session);
    None
}

/// `GET /login?code=…&grant=…`: a valid unused code gives a session and
/// sends the browser to the grant's page (the code leaves the address bar).
async fn login(State(page): State<Arc<Inner>>, method: Method, uri: Uri) -> Response {
    if method != Method::GET {
        return login_required(None);
    }
    let mut codes = Vec::new();
    let mut grant = None;
    for (name, value) in url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        match &*name {
            "code" => codes.push(value.into_owned()),
            "grant" => grant = value.parse::<GrantRef>().ok(),
            _ => {}
        }
    }
    let result = match codes.as_slice() {
        [code] => page.login(code, SystemTime::now()),
        _ => Err(LoginError::Malformed),
    };
    match result {
        Ok(cookie) => {
            let to = grant.map_or_else(|| "/".to_owned(), |g| format!("/grants/{g}"));
            let mut response = StatusCode::SEE_OTHER.into_response();
            let h = response.headers_mut();
            // Both values are hex, dots, `grant:` and a UUID: always valid.
            if let Ok(v) = HeaderValue::from_str(&to) {
                h.insert(header::LOCATION, v);
            }
            let cookie = format!("{SESSION_COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/");
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                h.insert(header::SET_COOKIE, v);
            }
            response
        }
        Err(e) => {
            tracing::info!(refused = %e, "a confirmation page login was refused");
            login_required(Some(&e))
        }
    }
}

/// `GET /`: the grants waiting for a decision, then the latest decided.
async fn index(State(page): State<Arc<Inner>>) -> Response {
    let now = Utc::now();
    let grants = match page.ledger(move |l| l.list(now)).await {
        Ok(Ok(grants)) => grants,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the confirmation page cannot list the grants");
            return internal_error();
        }
        Err(response) => return response,
    };
    let (waiting, decided): (Vec<_>, Vec<_>) = grants.iter().partition(|g| g.phase == GrantPhase::Proposed);
    let mut body = String::from(
        "<h1>Recherches sortantes <span lang=\"en\">Outbound research</span></h1>\n\
         <h2>En attente de votre décision <span lang=\"en\">Waiting for your decision</span></h2>\n",
    );
    if waiting.is_empty() {
        body.push_str("<p class=\"muted\">Aucune. <span lang=\"en\">None.</span></p>\n");
    } else {
        body.push_str("<ul class=\"grants\">\n");
        for g in &waiting {
            let n = g.urls.len();
            body.push_str(&format!(
                "<li><a href=\"/grants/{id}\">{n} adresse{s} <span lang=\"en\">{n} address{es}</span></a> — <code>{id}</code>, \
                 proposée le <span lang=\"en\">proposed</span> {at}<br><span class=\"muted\">«&nbsp;<bdi>{summary}</bdi>&nbsp;» \
                 (description du serveur, non vérifiée <span lang=\"en\">server's description, unverified</span>)</span></li>\n",
                id = esc(&g.grant_id.to_string()),
                s = if n == 1 { "" } else { "s" },
                es = if n == 1 { "" } else { "es" },
                at = esc(&shown_time(&g.proposed_at)),
                summary = esc(&truncate_chars(&g.summary, SUMMARY_EXCERPT_CHARS)),
            ));
        }
        body.push_str("</ul>\n");
    }
    body.push_str("<h2>Dernières demandes traitées <span lang=\"en\">Latest handled requests</span></h2>\n");
    if decided.is_empty() {
        body.push_str("<p class=\"muted\">Aucune. <span lang=\"en\">None.</span></p>\n");
    } else {
        body.push_str("<ul class=\"grants\">\n");
        for g in decided.iter().take(MAX_DECIDED_SHOWN) {
            let (fr, en) = phase_words(g.phase);
            body.push_str(&format!(
                "<li><a href=\"/grants/{id}\"><code>{id}</code></a> — {fr} <span lang=\"en\">{en}</span>{when}</li>\n",
                id = esc(&g.grant_id.to_string()),
                when = g.decided_at.as_deref().map(|t| format!(", {}", esc(&shown_time(t)))).unwrap_or_default(),
            ));
        }
        body.push_str("</ul>\n");
    }
    html(StatusCode::OK, &body)
}

/// `GET /grants/<grant:uuid>`: the grant, drawn by egress.
async fn grant_page(
    State(page): State<Arc<Inner>>,
    Extension(session): Extension<SessionId>,
    grant: Result<Path<String>, PathRejection>,
) -> Response {
    let Some(grant) = grant.ok().and_then(|Path(g)| g.parse::<GrantRef>().ok()) else {
        return not_found();
    };
    let now = Utc::now();
    match page.ledger(move |l| l.get(grant, now)).await {
        Ok(Ok(Some(record))) => html(StatusCode::OK, &grant_body(&record, &page.key.csrf_token(&session.0), now)),
        Ok(Ok(None)) => not_found(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the confirmation page cannot read a grant");
            internal_error()
        }
        Err(response) => response,
    }
}

/// The body of a grant's page; `csrf` goes into its form.
fn grant_body(g: &GrantRecord, csrf: &str, now: DateTime<Utc>) -> String {
    let id = esc(&g.grant_id.to_string());
    let n = g.urls.len();
    let (phase_fr, phase_en) = phase_words(g.phase);
    let (heading_fr, heading_en) = if n == 1 {
        ("L'adresse exacte qui sera demandée".to_owned(), "The exact address that will be fetched".to_owned())
    } else {
        (
            format!("Les {n} adresses exactes qui seront demandées"),
            format!("The {n} exact addresses that will be fetched"),
        )
    };
    let mut b = format!(
        "<h1>Recherche sortante <span lang=\"en\">Outbound research</span></h1>\n\
         <p class=\"phase phase-{class}\">État : {phase_fr} <span lang=\"en\">State: {phase_en}</span></p>\n\
         <section>\n<h2>{heading_fr}, par Tor <span lang=\"en\">{heading_en}, through Tor</span></h2>\n\
         <ol class=\"urls\">\n",
        class = phase_class(g.phase),
    );
    for u in &g.urls {
        b.push_str(&format!("<li><code>{}</code></li>\n", esc(u)));
    }
    b.push_str(
        "</ol>\n<p>Si l'une d'elles redirige, la redirection ne peut mener qu'à ces hôtes : \
         <span lang=\"en\">If one of them redirects, the redirect may only reach these hosts:</span></p>\n\
         <ul class=\"hosts\">\n",
    );
    for h in &g.hosts {
        b.push_str(&format!("<li><code>{}</code></li>\n", esc(h)));
    }
    b.push_str("</ul>\n</section>\n<dl>\n");
    let row = |b: &mut String, fr: &str, en: &str, value: String| {
        b.push_str(&format!("<dt>{fr} <span lang=\"en\">{en}</span></dt><dd>{value}</dd>\n"));
    };
    row(&mut b, "Demande", "Grant", format!("<code>{id}</code>"));
    row(&mut b, "Espace de travail", "Workspace", format!("<code>{}</code>", esc(&g.workspace_id.to_string())));
    row(&mut b, "Campagne", "Campaign", format!("<code>{}</code>", esc(&g.campaign_id.to_string())));
    row(
        &mut b,
        "Requêtes au plus",
        "Requests at most",
        format!(
            "{} (chaque redirection en est une) <span lang=\"en\">(every redirect is one)</span>",
            digits(g.max_requests)
        ),
    );
    row(&mut b, "Octets reçus au plus", "Bytes received at most", bytes_words(g.max_bytes));
    let (span_fr, span_en) = match (parse_time(&g.proposed_at), parse_time(&g.expires_at)) {
        (Some(from), Some(to)) => minutes_words((to - from).num_minutes()),
        _ => ("?".to_owned(), "?".to_owned()),
    };
    let left = match parse_time(&g.expires_at) {
        Some(to) if to > now && matches!(g.phase, GrantPhase::Proposed | GrantPhase::Approved) => {
            let (fr, en) = minutes_words((to - now).num_minutes().max(1));
            format!(" ; il reste {fr} <span lang=\"en\">({en} left)</span>")
        }
        _ => String::new(),
    };
    row(
        &mut b,
        "Durée",
        "Duration",
        format!(
            "{span_fr} <span lang=\"en\">({span_en})</span>, jusqu'au <span lang=\"en\">until</span> {}{left}",
            esc(&shown_time(&g.expires_at))
        ),
    );
    row(&mut b, "Proposée le", "Proposed at", esc(&shown_time(&g.proposed_at)));
    if let Some(at) = &g.decided_at {
        let via = g.decided_via.as_deref().map(|v| format!(" — {}", esc(v))).unwrap_or_default();
        row(&mut b, "Décidée le", "Decided at", format!("{}{via}", esc(&shown_time(at))));
    }
    if let Some(at) = &g.revoked_at {
        row(&mut b, "Révoquée le", "Revoked at", esc(&shown_time(at)));
    }
    if let Some(at) = &g.campaign_ended_at {
        row(&mut b, "Campagne terminée le", "Campaign ended at", esc(&shown_time(at)));
    }
    if g.phase != GrantPhase::Proposed {
        row(
            &mut b,
            "Utilisé",
            "Used",
            format!(
                "{} requêtes <span lang=\"en\">requests</span>, {}",
                digits(g.requests_used),
                bytes_words(g.bytes_used)
            ),
        );
    }
    b.push_str(&format!(
        "</dl>\n<section class=\"summary\">\n<h2>Objet — description fournie par le serveur de l'espace de travail \
         (non vérifiée) <span lang=\"en\">Purpose — description supplied by the workspace server (unverified)</span></h2>\n\
         <blockquote><bdi>{}</bdi></blockquote>\n\
         <p class=\"muted\">Seules les adresses ci-dessus comptent : c'est exactement ce qui quittera la machine. \
         <span lang=\"en\">Only the addresses above count: they are exactly what will leave the machine.</span></p>\n\
         </section>\n",
        esc(&g.summary)
    ));
    if g.phase == GrantPhase::Proposed {
        let (allow_fr, allow_en) = if n == 1 {
            ("Autoriser cette adresse".to_owned(), "Allow this address".to_owned())
        } else {
            (format!("Autoriser ces {n} adresses"), format!("Allow these {n} addresses"))
        };
        // The token is hex: it cannot break out of the attribute.
        b.push_str(&format!(
            "<form method=\"post\" action=\"/grants/{id}/decision\">\n\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\n\
             <button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">{allow_fr}\
             <span lang=\"en\">{allow_en}</span></button>\n\
             <button type=\"submit\" name=\"decision\" value=\"refuse\" class=\"refuse\">Refuser\
             <span lang=\"en\">Refuse</span></button>\n</form>\n",
            csrf = esc(csrf),
        ));
    }
    b.push_str("<p><a href=\"/\">Toutes les demandes <span lang=\"en\">All requests</span></a></p>\n");
    b
}

/// `POST /grants/<grant:uuid>/decision`: the human's decision.
async fn decide(
    State(page): State<Arc<Inner>>,
    Extension(session): Extension<SessionId>,
    grant: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(grant) = grant.ok().and_then(|Path(g)| g.parse::<GrantRef>().ok()) else {
        return not_found();
    };
    let form = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
    });
    if !form {
        return bad_form();
    }
    let Ok(body) = axum::body::to_bytes(body, MAX_FORM_BYTES).await else {
        return message(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Demande refusée",
            &format!("Le formulaire dépasse {MAX_FORM_BYTES} octets."),
            &format!("The form is over {MAX_FORM_BYTES} bytes."),
        );
    };
    let Some((csrf, approve)) = parse_form(&body) else {
        return bad_form();
    };
    let expected = page.key.csrf_token(&session.0);
    if !bool::from(csrf.as_bytes().ct_eq(expected.as_bytes())) {
        return message(
            StatusCode::FORBIDDEN,
            "Demande refusée",
            "Le jeton du formulaire ne correspond pas à votre session. Rouvrez la page et décidez-y.",
            "The form's token does not match your session. Reopen the page and decide there.",
        );
    }
    let now = Utc::now();
    match page.ledger(move |l| l.decide(grant, approve, DECIDED_VIA, now)).await {
        Ok(Ok(record)) => {
            tracing::info!(grant = %record.grant_id, approve, "a grant was decided on the confirmation page");
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("/grants/{grant}")) {
                response.headers_mut().insert(header::LOCATION, v);
            }
            response
        }
        Ok(Err(reason)) => message(
            StatusCode::CONFLICT,
            "Décision impossible",
            &format!("Egress n'a pas enregistré cette décision : {reason}"),
            "Egress did not record this decision (reason above, from the ledger).",
        ),
        Err(response) => response,
    }
}

/// The decision form: exactly one `csrf` and one `decision` (`approve` or
/// `refuse`), nothing else. Returns the token and whether to approve.
fn parse_form(body: &[u8]) -> Option<(String, bool)> {
    let (mut csrf, mut decision) = (None, None);
    for (name, value) in url::form_urlencoded::parse(body) {
        let slot = match &*name {
            "csrf" => &mut csrf,
            "decision" => &mut decision,
            _ => return None,
        };
        if slot.replace(value.into_owned()).is_some() {
            return None;
        }
    }
    let approve = match decision?.as_str() {
        "approve" => true,
        "refuse" => false,
        _ => return None,
    };
    Some((csrf?, approve))
}

fn bad_form() -> Response {
    message(
        StatusCode::BAD_REQUEST,
        "Demande refusée",
        "Ce formulaire n'est pas celui de la page (champs attendus : csrf et decision=approve|refuse).",
        "This is not the page's form (expected fields: csrf and decision=approve|refuse).",
    )
}

/// The 401 page: no valid session, or a refused code.
fn login_required(refused: Option<&LoginError>) -> Response {
    let (fr, en) = match refused {
        None => ("Cette page demande une session.", "This page needs a session."),
        Some(LoginError::Malformed | LoginError::BadSignature) => (
            "Ce lien n'a pas été émis par ce démon egress (autre démarrage, ou lien altéré).",
            "This link was not made by this egress daemon (another start, or altered).",
        ),
        Some(LoginError::Expired) => ("Ce lien a expiré.", "This link has expired."),
        Some(LoginError::Used) => {
            ("Ce lien a déjà servi : il ne s'ouvre qu'une fois.", "This link was already used: it opens once.")
        }
        Some(LoginError::TooMany) => (
            "Trop de liens ouverts en peu de temps ; attendez quelques minutes.",
            "Too many links opened in a short time; wait a few minutes.",
        ),
        Some(LoginError::Unrecorded) => (
            "Ce lien n'a pas pu être enregistré comme utilisé ; demandez-en un nouveau.",
            "This link could not be recorded as used; get a fresh one.",
        ),
    };
    html(
        StatusCode::UNAUTHORIZED,
        &format!(
            "<h1>Connexion requise <span lang=\"en\">Login required</span></h1>\n\
             <p>{fr} Cette page ne s'ouvre que par un lien à usage unique. Obtenez-en un nouveau dans \
             l'interface de Labfy, ou dans un terminal, sous le compte qui exécute Labfy : <code>labfy grant list</code>.</p>\n\
             <p lang=\"en\">{en} This page opens only through a one-time link. Get a fresh one from the Labfy UI, \
             or in a terminal, as the user that runs Labfy: <code>labfy grant list</code>.</p>\n"
        ),
    )
}

fn not_found() -> Response {
    message(
        StatusCode::NOT_FOUND,
        "Introuvable",
        "Egress n'a pas de demande ni de page à cette adresse.",
        "Egress has no grant or page at this address.",
    )
}

fn internal_error() -> Response {
    message(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Erreur interne",
        "Egress n'a pas pu lire son registre ; le détail est dans son journal. Rien n'a été autorisé.",
        "Egress could not read its ledger; the detail is in its log. Nothing was allowed.",
    )
}

/// A short page: a title and one sentence in each language. `fr` and `en`
/// are escaped (a ledger's reason may quote the server's input).
fn message(status: StatusCode, title: &str, fr: &str, en: &str) -> Response {
    html(
        status,
        &format!(
            "<h1>{}</h1>\n<p>{}</p>\n<p lang=\"en\">{}</p>\n\
             <p><a href=\"/\">Toutes les demandes <span lang=\"en\">All requests</span></a></p>\n",
            esc(title),
            esc(fr),
            esc(en)
        ),
    )
}

/// A whole page around `main`, which is already HTML.
fn html(status: StatusCode, main: &str) -> Response {
    let page = format!(
        "<!doctype html>\n<html lang=\"fr\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Labfy — confirmation d'une recherche sortante</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <header>Labfy · egress — confirmation d'une recherche sortante \
         <span lang=\"en\">outbound research confirmation</span></header>\n<main>\n{main}</main>\n\
         <footer>Cette page est dessinée par le démon egress de Labfy, hors de portée du serveur de l'espace de travail. \
         <span lang=\"en\">This page is drawn by Labfy's egress daemon, out of the workspace server's reach.</span>\
         </footer>\n</body>\n</html>\n"
    );
    (status, page).into_response()
}

/// The page's only style: calm, readable, no external resource. « Autoriser »
/// appears 0.8 s after the page (a CSS animation: the page has no script),
/// so that a click already on its way when a window opens under the pointer
/// — a page of the server may open this one in a new window — decides
/// nothing (clickjacking by window, which `frame-ancestors` cannot stop).
const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;color:#222;background:#f7f7f4;margin:0}\
header,footer{padding:.6em 1.2em;color:#555;font-size:.9em}\
main{max-width:46em;margin:0 auto;padding:1em 1.2em;background:#fff;border:1px solid #ddd;border-radius:6px}\
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\
[lang=en]{color:#666;font-style:italic}h1 [lang=en],h2 [lang=en],button [lang=en]{display:block;font-size:.85em}\
code{font:.95em ui-monospace,monospace;word-break:break-all}\
ol.urls li{margin:.3em 0;padding:.2em .4em;background:#fffbe6;border-left:3px solid #e0b000}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3em 1em}dt{font-weight:600}dd{margin:0}\
blockquote{margin:.5em 0;padding:.5em 1em;background:#f2f2f2;border-left:3px solid #aaa;white-space:pre-wrap}\
.muted{color:#666}.phase{font-weight:600}.phase-proposed{color:#8a5a00}.phase-approved{color:#1f6f2a}\
form{display:flex;gap:1em;margin:1.5em 0}\
button{font:inherit;padding:.6em 1.2em;border-radius:5px;border:1px solid #888;background:#fff;cursor:pointer}\
button.approve{border-color:#1f6f2a}button.refuse{border-color:#a33}\
button.approve{visibility:hidden;animation:arm 0s linear .8s forwards}@keyframes arm{to{visibility:visible}}";

/// HTML-escapes `text`; control and bidirectional-override characters
/// become U+FFFD, so the server's text cannot reorder what surrounds it.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {
                out.push('\u{FFFD}');
            }
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn phase_words(phase: GrantPhase) -> (&'static str, &'static str) {
    match phase {
        GrantPhase::Proposed => ("en attente de votre décision", "waiting for your decision"),
        GrantPhase::Approved => ("autorisée", "approved"),
        GrantPhase::Refused => ("refusée", "refused"),
        GrantPhase::Revoked => ("révoquée", "revoked"),
        GrantPhase::Expired => ("expirée", "expired"),
        GrantPhase::Ended => ("terminée (campagne close)", "ended (campaign closed)"),
    }
}

fn phase_class(phase: GrantPhase) -> &'static str {
    match phase {
        GrantPhase::Proposed => "proposed",
        GrantPhase::Approved => "approved",
        GrantPhase::Refused => "refused",
        GrantPhase::Revoked => "revoked",
        GrantPhase::Expired => "expired",
        GrantPhase::Ended => "ended",
    }
}

fn parse_time(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|d| d.with_timezone(&Utc))
}

/// An RFC 3339 time as `YYYY-MM-DD HH:MM:SS UTC` (as stored when unreadable).
fn shown_time(t: &str) -> String {
    parse_time(t).map_or_else(|| t.to_owned(), |d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
}

/// `n` with its thousands separated by a narrow no-break space.
fn digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3 * 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push('\u{202F}');
        }
        out.push(c);
    }
    out
}

/// A byte count, exact and in binary units: `1 048 576 octets (1,0 Mio)
/// bytes (1.0 MiB)`.
fn bytes_words(n: u64) -> String {
    const UNITS: [(&str, &str); 3] = [("Gio", "GiB"), ("Mio", "MiB"), ("Kio", "KiB")];
    let exact = digits(n);
    for (i, (fr, en)) in UNITS.iter().enumerate() {
        let size = 1u64 << (10 * (3 - i));
        if n >= size {
            let value = format!("{:.1}", n as f64 / size as f64);
            return format!(
                "{exact} octets ({} {fr}) <span lang=\"en\">bytes ({value} {en})</span>",
                value.replace('.', ",")
            );
        }
    }
    format!("{exact} octets <span lang=\"en\">bytes</span>")
}

/// A number of minutes in French and English words (`2 j 3 h 5 min`, `2 d 3 h 5 min`).
fn minutes_words(minutes: i64) -> (String, String) {
    let m = minutes.max(0);
    let (d, h, min) = (m / (24 * 60), m / 60 % 24, m % 60);
    let mut fr = Vec::new();
    let mut en = Vec::new();
    if d > 0 {
        fr.push(format!("{d} j"));
        en.push(format!("{d} d"));
    }
    if h > 0 {
        fr.push(format!("{h} h"));
        en.push(format!("{h} h"));
    }
    if min > 0 || (d == 0 && h == 0) {
        fr.push(format!("{min} min"));
        en.push(format!("{min} min"));
    }
    (fr.join(" "), en.join(" "))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use labfy_core::CampaignRef;
    use labfy_ipc::login::LOGIN_CODE_TTL;
    use labfy_ipc::messages::egress::GrantProposal;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use uuid::Uuid;

    use super::*;

    /// A page on a free port over a fresh ledger, with one proposal.
    struct Fixture {
        _dir: tempfile::TempDir,
        ledger: Arc<Ledger>,
        page: Arc<ConfirmPage>,
        grant: GrantRef,
        shutdown: CancellationToken,
    }

    fn proposal(n: u128, urls: &[&str], summary: &str) -> GrantProposal {
        GrantProposal {
            workspace_id: Uuid::from_u128(1),
            grant_id: GrantRef::new(Uuid::from_u128(200 + n)),
            campaign_id: CampaignRef::new(Uuid::from_u128(100 + n)),
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            hosts: vec!["a.example.org".into(), "*.example.net".into()],
            max_requests: 3,
            max_bytes: 5 << 20,
            expires_in_minutes: 90,
            summary: summary.into(),
        }
    }

    async fn fixture(summary: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Arc::new(Ledger::open(dir.path()).unwrap());
        let p = proposal(1, &["https://a.example.org/x?q=1", "https://b.example.net/y"], summary);
        ledger.propose(&p, Utc::now()).unwrap();
        let grant = p.grant_id;
        let shutdown = CancellationToken::new();
        let page = ConfirmPage::start(ledger.clone(), 0, shutdown.clone()).await.unwrap();
        Fixture { _dir: dir, ledger, page, grant, shutdown }
    }

    /// One parsed HTTP answer.
    #[derive(Debug)]
    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Reply {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }
    }

    /// Sends one raw HTTP/1.1 request (`Connection: close`) and reads the
    /// whole answer. `host: None` sends the page's own.
    async fn send(
        port: u16,
        method: &str,
        path: &str,
        host: Option<&str>,
        extra: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        let own = format!("127.0.0.1:{port}");
        let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", host.unwrap_or(&own));
        for (n, v) in extra {
            raw.push_str(&format!("{n}: {v}\r\n"));
        }
        if method == "POST" {
            raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        raw.push_str("\r\n");
        raw.push_str(body);
        let mut stream = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.unwrap();
        stream.write_all(raw.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap();
                (n.trim().to_owned(), v.trim().to_owned())
            })
            .collect();
        Reply { status, headers, body: body.to_owned() }
    }

    async fn get(port: u16, path: &str, cookie: Option<&str>) -> Reply {
        let c = cookie.map(|c| format!("{SESSION_COOKIE}={c}"));
        let extra: Vec<(&str, &str)> = c.iter().map(|c| ("Cookie", c.as_str())).collect();
        send(port, "GET", path, None, &extra, "").await
    }

    /// The path and query of a link.
    fn path_of(link: &str) -> &str {
        let rest = link.strip_prefix("http://127.0.0.1:").unwrap();
        &rest[rest.find('/').unwrap()..]
    }

    /// Logs in with a fresh link to `grant`: the session cookie's value.
    async fn login(f: &Fixture) -> String {
        let r = get(f.page.port(), path_of(&f.page.link(f.grant)), None).await;
        assert_eq!(r.status, 303, "{r:?}");
        let set = r.header("set-cookie").unwrap();
        set.strip_prefix(&format!("{SESSION_COOKIE}=")).unwrap().split(';').next().unwrap().to_owned()
    }

    /// The CSRF token in a grant page's form.
    fn csrf_in(page: &str) -> String {
        let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
        page[at..at + 64].to_owned()
    }

    async fn post_decision(f: &Fixture, cookie: &str, origin: Option<&str>, body: &str) -> Reply {
        let port = f.page.port();
        let c = format!("{SESSION_COOKIE}={cookie}");
        let mut extra = vec![("Cookie", c.as_str()), ("Content-Type", "application/x-www-form-urlencoded")];
        if let Some(o) = origin {
            extra.push(("Origin", o));
        }
        send(port, "POST", &format!("/grants/{}/decision", f.grant), None, &extra, body).await
    }

    fn phase(f: &Fixture) -> GrantPhase {
        f.ledger.get(f.grant, Utc::now()).unwrap().unwrap().phase
    }

    fn assert_security_headers(r: &Reply) {
        assert_eq!(r.header("content-security-policy"), Some(CSP), "{r:?}");
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
        assert_eq!(r.header("referrer-policy"), Some("same-origin"));
        assert_eq!(r.header("cache-control"), Some("no-store"));
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    }

    #[tokio::test]
    async fn a_link_opens_a_strict_session_once() {
        let f = fixture("Qui possède Durand ?").await;
        let port = f.page.port();
        let link = f.page.link(f.grant);
        assert!(link.starts_with(&format!("http://127.0.0.1:{port}/login?code=")), "{link}");
        assert!(link.ends_with(&format!("&grant={}", f.grant)), "{link}");
        let r = get(port, path_of(&link), None).await;
        assert_eq!(r.status, 303);
        assert_eq!(r.header("location"), Some(format!("/grants/{}", f.grant).as_str()));
        let set = r.header("set-cookie").unwrap();
        assert!(set.starts_with(&format!("{SESSION_COOKIE}=")), "{set}");
        for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(set.contains(attr), "{set} lacks {attr}");
        }
        assert_security_headers(&r);
        // A HEAD spends no code.
        let other = f.page.link(f.grant);
        assert_eq!(send(port, "HEAD", path_of(&other), None, &[], "").await.status, 401);
        assert_eq!(get(port, path_of(&other), None).await.status, 303);
        // The same link again: refused, and says where a fresh one comes from.
        let again = get(port, path_of(&link), None).await;
        assert_eq!(again.status, 401);
        assert!(again.body.contains("déjà servi") && again.body.contains("already used"), "{}", again.body);
        assert!(again.body.contains("labfy grant list"));
        // A link without (or with a bad) grant goes to the index.
        let code = f.page.link(f.grant);
        let code = code.split("code=").nth(1).unwrap().split('&').next().unwrap();
        let r = get(port, &format!("/login?code={code}&grant=campaign:{}", Uuid::nil()), None).await;
        assert_eq!((r.status, r.header("location")), (303, Some("/")));
        // Forged, altered or missing codes.
        let other = LoginKey::generate().mint_code(SystemTime::now());
        for path in [format!("/login?code={other}"), "/login?code=x".into(), "/login".into()] {
            let r = get(port, &path, None).await;
            assert_eq!(r.status, 401, "{path}");
            assert!(r.body.contains("labfy grant list"), "{path}");
        }
        // The session opens the page.
        let cookie = login(&f).await;
        assert_eq!(get(port, &format!("/grants/{}", f.grant), Some(&cookie)).await.status, 200);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn without_a_session_nothing_is_served() {
        let f = fixture("x").await;
        let port = f.page.port();
        let forged = format!("{}.{}", "0".repeat(32), "0".repeat(64));
        for cookie in [None, Some("junk"), Some(forged.as_str())] {
            for path in ["/".to_owned(), format!("/grants/{}", f.grant), "/nowhere".into()] {
                let r = get(port, &path, cookie).await;
                assert_eq!(r.status, 401, "{path} {cookie:?}");
                assert!(r.body.contains("Connexion requise") && r.body.contains("Login required"));
                assert_security_headers(&r);
            }
        }
        let r = send(
            port,
            "POST",
            &format!("/grants/{}/decision", f.grant),
            None,
            &[("Origin", &format!("http://127.0.0.1:{port}")), ("Content-Type", "application/x-www-form-urlencoded")],
            "csrf=x&decision=approve",
        )
        .await;
        assert_eq!(r.status, 401);
        assert_eq!(phase(&f), GrantPhase::Proposed);
        // A cookie planted under the same name does not hide the real one.
        let cookie = login(&f).await;
        let both = format!("{SESSION_COOKIE}=planted; {SESSION_COOKIE}={cookie}");
        let r = send(port, "GET", "/", None, &[("Cookie", &both)], "").await;
        assert_eq!(r.status, 200);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_foreign_host_is_refused() {
        let f = fixture("x").await;
        let port = f.page.port();
        let cookie = format!("{SESSION_COOKIE}={}", login(&f).await);
        let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
        for host in ["evil.example", &format!("evil.example:{port}"), other_port.as_str(), "127.0.0.1", ""] {
            let r = send(port, "GET", "/", Some(host), &[("Cookie", &cookie)], "").await;
            assert_eq!(r.status, 400, "{host:?}");
            assert_security_headers(&r);
        }
        // A login link through a rebound name is refused before the code is even read.
        let r = send(port, "GET", path_of(&f.page.link(f.grant)), Some("evil.example"), &[], "").await;
        assert_eq!((r.status, r.header("set-cookie")), (400, None));
        let r = send(port, "GET", "/", Some(&format!("localhost:{port}")), &[("Cookie", &cookie)], "").await;
        assert_eq!(r.status, 200);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_decision_needs_the_page_s_own_origin() {
        let f = fixture("x").await;
        let port = f.page.port();
        let cookie = login(&f).await;
        let page = get(port, &format!("/grants/{}", f.grant), Some(&cookie)).await;
        let body = format!("csrf={}&decision=approve", csrf_in(&page.body));
        let foreign = format!("http://127.0.0.1:{}", port.wrapping_add(1));
        for origin in [None, Some("null"), Some(foreign.as_str()), Some("https://evil.example")] {
            let r = post_decision(&f, &cookie, origin, &body).await;
            assert_eq!(r.status, 403, "{origin:?}");
            assert!(r.body.contains("Origin"), "{origin:?}");
            assert_security_headers(&r);
        }
        assert_eq!(phase(&f), GrantPhase::Proposed);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_decision_needs_the_session_s_token() {
        let f = fixture("x").await;
        let port = f.page.port();
        let origin = format!("http://127.0.0.1:{port}");
        let cookie = login(&f).await;
        let other = login(&f).await;
        let other_page = get(port, &format!("/grants/{}", f.grant), Some(&other)).await;
        for csrf in ["", "00", &"0".repeat(64), &csrf_in(&other_page.body)] {
            let r = post_decision(&f, &cookie, Some(&origin), &format!("csrf={csrf}&decision=approve")).await;
            assert_eq!(r.status, 403, "{csrf:?}");
        }
        assert_eq!(phase(&f), GrantPhase::Proposed);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn malformed_decisions_are_refused() {
        let f = fixture("x").await;
        let port = f.page.port();
        let origin = format!("http://127.0.0.1:{port}");
        let cookie = login(&f).await;
        let csrf = csrf_in(&get(port, &format!("/grants/{}", f.grant), Some(&cookie)).await.body);
        for body in [
            format!("csrf={csrf}&decision=yes"),
            format!("csrf={csrf}"),
            format!("csrf={csrf}&decision=approve&decision=refuse"),
            format!("csrf={csrf}&decision=approve&extra=1"),
            "decision=approve".to_owned(),
        ] {
            let r = post_decision(&f, &cookie, Some(&origin), &body).await;
            assert_eq!(r.status, 400, "{body}");
        }
        // Another content type.
        let c = format!("{SESSION_COOKIE}={cookie}");
        let path = format!("/grants/{}/decision", f.grant);
        let json = [("Cookie", c.as_str()), ("Origin", origin.as_str()), ("Content-Type", "application/json")];
        let r = send(port, "POST", &path, None, &json, "{}").await;
        assert_eq!(r.status, 400);
        // The bound on the body: N accepted as a size, N + 1 refused.
        let at_limit = format!("csrf={csrf}&decision=yes&");
        let at_limit = format!("{at_limit}{}", "x".repeat(MAX_FORM_BYTES - at_limit.len()));
        assert_eq!(post_decision(&f, &cookie, Some(&origin), &at_limit).await.status, 400);
        let over = format!("{at_limit}x");
        assert_eq!(post_decision(&f, &cookie, Some(&origin), &over).await.status, 413);
        // An unknown grant.
        let unknown = GrantRef::new(Uuid::from_u128(999));
        let form = [
            ("Cookie", c.as_str()),
            ("Origin", origin.as_str()),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        let r = send(
            port,
            "POST",
            &format!("/grants/{unknown}/decision"),
            None,
            &form,
            &format!("csrf={csrf}&decision=approve"),
        )
        .await;
        assert_eq!(r.status, 409);
        assert!(r.body.contains("no proposal"), "{}", r.body);
        assert_eq!(phase(&f), GrantPhase::Proposed);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_valid_decision_approves_the_grant_once() {
        let f = fixture("x").await;
        let port = f.page.port();
        let origin = format!("http://127.0.0.1:{port}");
        let cookie = login(&f).await;
        let page = get(port, &format!("/grants/{}", f.grant), Some(&cookie)).await;
        assert!(page.body.contains("Autoriser ces 2 adresses"), "{}", page.body);
        assert!(page.body.contains(&format!("action=\"/grants/{}/decision\"", f.grant)));
        let body = format!("csrf={}&decision=approve", csrf_in(&page.body));
        let r = post_decision(&f, &cookie, Some(&origin), &body).await;
        assert_eq!(r.status, 303, "{r:?}");
        assert_eq!(r.header("location"), Some(format!("/grants/{}", f.grant).as_str()));
        assert_security_headers(&r);
        let record = f.ledger.get(f.grant, Utc::now()).unwrap().unwrap();
        assert_eq!((record.phase, record.decided_via.as_deref()), (GrantPhase::Approved, Some(DECIDED_VIA)));
        // Decided: the page shows it, with no form; a second decision is refused.
        let page = get(port, &format!("/grants/{}", f.grant), Some(&cookie)).await;
        assert!(page.body.contains("autorisée") && page.body.contains(DECIDED_VIA));
        assert!(!page.body.contains("<form"));
        let r = post_decision(&f, &cookie, Some(&origin), &body.replace("approve", "refuse")).await;
        assert_eq!(r.status, 409);
        assert!(r.body.contains("decided already"), "{}", r.body);
        assert_eq!(phase(&f), GrantPhase::Approved);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn the_page_shows_the_exact_terms_and_escapes_the_server_s_words() {
        let f = fixture("<script>alert('x')</script> & \u{202E}evil").await;
        let port = f.page.port();
        let cookie = login(&f).await;
        let r = get(port, &format!("/grants/{}", f.grant), Some(&cookie)).await;
        assert_eq!(r.status, 200);
        assert_security_headers(&r);
        let b = &r.body;
        assert!(b.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; \u{FFFD}evil"), "{b}");
        assert!(!b.contains("<script") && !b.contains('\u{202E}'), "{b}");
        assert!(b.contains("description fournie par le serveur de l'espace de travail (non vérifiée)"));
        assert!(b.contains(
            "<li><code>https://a.example.org/x?q=1</code></li>\n<li><code>https://b.example.net/y</code></li>"
        ));
        assert!(b.contains("<code>*.example.net</code>"));
        assert!(b.contains(&Uuid::from_u128(1).to_string()) && b.contains(&Uuid::from_u128(101).to_string()));
        assert!(b.contains("5\u{202F}242\u{202F}880 octets (5,0 Mio)"), "{b}");
        assert!(b.contains("1 h 30 min"), "{b}");
        assert!(b.contains("Refuser"));
        assert!(b.contains("<title>Labfy — confirmation d'une recherche sortante</title>"));
        // The index lists it as waiting, and escapes it too.
        let r = get(port, "/", Some(&cookie)).await;
        assert!(r.body.contains(&format!("href=\"/grants/{}\"", f.grant)), "{}", r.body);
        assert!(r.body.contains("&lt;script&gt;") && !r.body.contains("<script"));
        // An unknown or malformed grant: 404.
        for path in [format!("/grants/{}", GrantRef::new(Uuid::from_u128(9))), "/grants/nope".into()] {
            let r = get(port, &path, Some(&cookie)).await;
            assert_eq!(r.status, 404, "{path}");
            assert_security_headers(&r);
        }
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn the_index_puts_waiting_grants_before_decided_ones() {
        let f = fixture("first").await;
        let second = proposal(2, &["https://a.example.org/z"], "second");
        f.ledger.propose(&second, Utc::now()).unwrap();
        f.ledger.decide(second.grant_id, false, "terminal", Utc::now()).unwrap();
        let cookie = login(&f).await;
        let r = get(f.page.port(), "/", Some(&cookie)).await;
        assert_eq!(r.status, 200);
        let waiting = r.body.find(&f.grant.to_string()).unwrap();
        let decided = r.body.find(&second.grant_id.to_string()).unwrap();
        let heading = r.body.find("Dernières demandes traitées").unwrap();
        assert!(waiting < heading && heading < decided, "{}", r.body);
        assert!(r.body.contains("refusée"));
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn shutdown_closes_the_port() {
        let f = fixture("x").await;
        let port = f.page.port();
        f.shutdown.cancel();
        for _ in 0..100 {
            if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the page still listens after shutdown");
    }

    fn inner() -> Inner {
        let dir = tempfile::tempdir().unwrap();
        Inner {
            ledger: Arc::new(Ledger::open(dir.path()).unwrap()),
            key: LoginKey::generate(),
            port: 1,
            hosts: ["127.0.0.1:1".into(), "localhost:1".into()],
            used_codes: SpentCodes::new(MAX_USED_CODES),
            sessions: Mutex::new(VecDeque::new()),
        }
    }

    fn with_cookie(cookie: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, HeaderValue::from_str(&format!("{SESSION_COOKIE}={cookie}")).unwrap());
        h
    }

    #[test]
    fn sessions_are_bounded_and_the_oldest_goes() {
        let p = inner();
        let now = SystemTime::now();
        let cookies: Vec<String> = (0..MAX_SESSIONS).map(|_| p.login(&p.key.mint_code(now), now).unwrap()).collect();
        assert!(cookies.iter().all(|c| p.session(&with_cookie(c)).is_some()), "N sessions live");
        let newest = p.login(&p.key.mint_code(now), now).unwrap();
        assert_eq!(lock(&p.sessions).len(), MAX_SESSIONS);
        assert!(p.session(&with_cookie(&cookies[0])).is_none(), "the oldest is forgotten");
        assert!(p.session(&with_cookie(&cookies[1])).is_some());
        assert!(p.session(&with_cookie(&newest)).is_some());
        // A cookie this key made but that never logged in opens nothing.
        let (minted, _) = p.key.mint_session();
        assert!(p.session(&with_cookie(&minted)).is_none());
    }

    #[test]
    fn used_codes_are_bounded_and_expire() {
        let p = inner();
        let now = SystemTime::now();
        for _ in 0..MAX_USED_CODES {
            p.login(&p.key.mint_code(now), now).unwrap();
        }
        assert_eq!(p.login(&p.key.mint_code(now), now), Err(LoginError::TooMany));
        let later = now + LOGIN_CODE_TTL + Duration::from_secs(1);
        let code = p.key.mint_code(later);
        assert!(p.login(&code, later).is_ok(), "the remembered ones expired");
        assert_eq!(p.login(&code, later), Err(LoginError::Used));
    }

    #[test]
    fn words_for_numbers_and_escapes() {
        assert_eq!(digits(0), "0");
        assert_eq!(digits(999), "999");
        assert_eq!(digits(1000), "1\u{202F}000");
        assert_eq!(digits(1_073_741_824), "1\u{202F}073\u{202F}741\u{202F}824");
        assert_eq!(bytes_words(1023), "1\u{202F}023 octets <span lang=\"en\">bytes</span>");
        assert!(bytes_words(1024).contains("(1,0 Kio)") && bytes_words(1024).contains("(1.0 KiB)"));
        assert!(bytes_words(1 << 30).contains("(1,0 Gio)"));
        assert_eq!(minutes_words(0).0, "0 min");
        assert_eq!(minutes_words(7 * 24 * 60), ("7 j".to_owned(), "7 d".to_owned()));
        assert_eq!(minutes_words(24 * 60 + 61).1, "1 d 1 h 1 min");
        assert_eq!(esc("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(esc("a\u{2066}b\u{0007}c"), "a\u{FFFD}b\u{FFFD}c");
        assert_eq!(parse_form(b"csrf=t&decision=refuse"), Some(("t".to_owned(), false)));
    }
}
