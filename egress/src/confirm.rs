//! The confirmation page (SPEC T2): where a human confirms or refuses a
//! grant the workspace server proposed, on a page egress draws itself on
//! its own loopback port — as Qubes OS draws the qrexec `ask` dialog in
//! dom0, out of reach of the qube that asks.
//!
//! The workspace server lives in its own network namespace and cannot
//! connect to this port. It does control the analyst's UI pages in the same
//! browser, and another local user may run a server of its own on another
//! port of 127.0.0.1 that the browser visits, so the page refuses, in this
//! order, before any route runs:
//!
//! 1. a `Host` other than exactly `127.0.0.1:<port>` or `localhost:<port>`
//!    — 400 (DNS rebinding);
//! 2. any request whose path does not start with a live session's
//!    capability, `/s/<session>/` — 401 — except `GET /login`, which
//!    exchanges a one-time link ([`ConfirmPage::link`]) for a session and
//!    redirects (303) to `/s/<session>/grants/<grant>`. Codes, sessions and
//!    form tokens are MACs under a key egress generates at start and keeps
//!    in memory only;
//! 3. any change (`POST`) whose `Origin` is missing or not the page's own
//!    — 403 (cross-origin form posts from the server's pages);
//!
//! and the decision route then requires the form's token — a MAC of the
//! session, the grant and the time the page was drawn, compared in constant
//! time (403) — at least [`ARM_DELAY`] after that time (else the page is
//! drawn again and nothing is decided), a bounded body (413) and exactly
//! the form's two fields (400). Every answer, refusals included, forbids
//! framing (`frame-ancestors 'none'`, `X-Frame-Options: DENY`, against
//! clickjacking), scripts (`default-src 'none'`: the page has none), caching
//! and referrers to other sites. Everything the server supplied — URLs, hosts, its
//! summary — is HTML-escaped and shown as the server's words.
//!
//! No cookie: cookies are not scoped by port, so a cookie would reach the
//! server's UI and any other local user's server on 127.0.0.1 the browser
//! visits, which could then read and decide with it (red team 3, F1). The
//! session travels in the path of the page's own links and forms, which the
//! browser sends to this origin only (`Referrer-Policy: same-origin`; the
//! page links nowhere else), so another port learns nothing usable.
//!
//! A link is bound to its grant: a session opens that grant's page and
//! decides it, nothing else (the index lists the others without opening
//! them). The server cannot mint links without bound: a grant has at most
//! [`CODES_PER_GRANT`] live codes (asking again gives the same link until
//! half its life is gone), and at most [`MAX_LINKED_GRANTS`] grants have
//! one. The page shows a short code of its grant (its first
//! [`GRANT_CODE_CHARS`] hex digits, as the UI and `labfy grant` show the
//! whole id), and says plainly when Tor is not ready (SPEC V8).

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
use labfy_ipc::login::{LOGIN_CODE_TTL, LoginError, LoginKey, SpentCodes};
use labfy_ipc::messages::egress::{GrantPhase, GrantRecord};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use crate::connector::Bootstrap;
use crate::ledger::{Ledger, MAX_PENDING_PROPOSALS};
use crate::limits::PAGE_LIMITS;

/// Most sessions alive at once; the oldest is forgotten beyond it (its
/// path then no longer opens the page).
pub const MAX_SESSIONS: usize = 64;
/// How long a session opens the page after its login.
pub const MAX_SESSION_AGE: Duration = Duration::from_secs(12 * 60 * 60);
/// Most one-time codes remembered as used, each until its expiry; a login
/// beyond it is refused (forgetting one early would let it work twice).
pub const MAX_USED_CODES: usize = 256;
/// Live login codes of one grant at most: the newest, and the one it
/// replaced until that one expires (a link the UI still shows keeps
/// working).
pub const CODES_PER_GRANT: usize = 2;
/// Most grants with live login codes at once (twice the proposals the
/// ledger lets wait); beyond it no link is made until one is used or
/// expires.
pub const MAX_LINKED_GRANTS: usize = 2 * MAX_PENDING_PROPOSALS as usize;
/// How long after a grant's page is drawn its form may decide: the
/// « Autoriser » button appears then (the page's CSS), and egress refuses
/// an earlier decision, so that a click already on its way when a window
/// opens under the pointer decides nothing (SPEC V5).
pub const ARM_DELAY: Duration = Duration::from_millis(800);
/// Hex digits of the short grant code the page shows (the start of its id).
pub const GRANT_CODE_CHARS: usize = 8;
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

/// What egress knows of Tor's bootstrap, asked each time a page is drawn.
pub type TorState = Arc<dyn Fn() -> Bootstrap + Send + Sync>;

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
    /// task until `shutdown` is cancelled; `tor` tells whether Tor is ready.
    pub async fn start(
        ledger: Arc<Ledger>,
        tor: TorState,
        port: u16,
        shutdown: CancellationToken,
    ) -> std::io::Result<Arc<Self>> {
        Self::start_armed(ledger, tor, port, shutdown, ARM_DELAY).await
    }

    /// [`ConfirmPage::start`] with another delay before a form may decide
    /// (tests).
    async fn start_armed(
        ledger: Arc<Ledger>,
        tor: TorState,
        port: u16,
        shutdown: CancellationToken,
        arm: Duration,
    ) -> std::io::Result<Arc<Self>> {
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
            codes: Mutex::new(HashMap::new()),
            sessions: Mutex::new(VecDeque::new()),
            tor,
            arm,
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

    /// A one-time link that opens the page of `grant` and no other:
    /// `http://127.0.0.1:<port>/login?code=<code>&grant=<grant:uuid>`. It
    /// works once, until the code's expiry (`LOGIN_CODE_TTL`). Asked again,
    /// the same link while more than half its life is left; a new one
    /// (the previous still valid) after. `None` when [`MAX_LINKED_GRANTS`]
    /// other grants have live codes: the server cannot make egress mint
    /// codes without bound.
    pub fn link(&self, grant: GrantRef) -> Option<String> {
        let code = self.inner.live_code(grant, SystemTime::now())?;
        // The code is hex and dots, the reference `grant:` and a UUID:
        // nothing to percent-encode.
        Some(format!("http://127.0.0.1:{}/login?code={code}&grant={grant}", self.inner.port))
    }
}

/// A login code egress gave out and that nobody used yet.
#[derive(Debug, Clone)]
struct LiveCode {
    nonce: String,
    /// Unix seconds.
    expires: u64,
    code: String,
}

/// Why a login link is refused: the code's own checks, or its grant's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refused {
    Code(LoginError),
    /// A live code, minted for another grant than the link names.
    OtherGrant,
    /// A code this key made that is no longer live (replaced, forgotten).
    NotLive,
}

impl From<LoginError> for Refused {
    fn from(e: LoginError) -> Self {
        Self::Code(e)
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Code(e) => std::fmt::Display::fmt(e, f),
            Self::OtherGrant => f.write_str("a login code minted for another grant"),
            Self::NotLive => f.write_str("a login code no longer live"),
        }
    }
}

/// The state shared by the page's routes.
struct Inner {
    ledger: Arc<Ledger>,
    /// Mints and checks the codes, session tokens and form tokens; never
    /// leaves this process.
    key: LoginKey,
    port: u16,
    /// The exact `Host` values accepted.
    hosts: [String; 2],
    /// Nonces of the codes already used, with their expiry (Unix seconds).
    used_codes: SpentCodes,
    /// The codes given out and not used, per grant, oldest first.
    codes: Mutex<HashMap<GrantRef, Vec<LiveCode>>>,
    /// Live sessions, oldest first.
    sessions: Mutex<VecDeque<Session>>,
    /// Whether Tor is ready, for the page's notice.
    tor: TorState,
    /// How long after a page is drawn its form may decide ([`ARM_DELAY`]).
    arm: Duration,
}

/// A session: its id, the capability in its paths, the grant its link
/// named and its login time. Attached to a request by [`guard`].
#[derive(Debug, Clone)]
struct Session {
    id: String,
    token: String,
    grant: GrantRef,
    at: Instant,
}

impl Session {
    /// The prefix of every path of this session: `/s/<token>`.
    fn base(&self) -> String {
        format!("/s/{}", self.token)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a request panicked mid-update of a plain
    // collection, which is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    /// A live code of `grant`: the newest if more than half its life is
    /// left, else a fresh one. `None` when [`MAX_LINKED_GRANTS`] other
    /// grants have live codes.
    fn live_code(&self, grant: GrantRef, now: SystemTime) -> Option<String> {
        let now_unix = unix_secs(now);
        let mut codes = lock(&self.codes);
        codes.retain(|_, live| {
            live.retain(|c| c.expires >= now_unix);
            !live.is_empty()
        });
        if !codes.contains_key(&grant) && codes.len() >= MAX_LINKED_GRANTS {
            tracing::warn!(%grant, "no confirmation link made: too many grants have live ones");
            return None;
        }
        let live = codes.entry(grant).or_default();
        if let Some(newest) = live.last().filter(|c| c.expires > now_unix + LOGIN_CODE_TTL.as_secs() / 2) {
            return Some(newest.code.clone());
        }
        let code = self.key.mint_code(now);
        let (nonce, expires) = self.key.check_code(&code, now).ok()?;
        while live.len() >= CODES_PER_GRANT {
            live.remove(0);
        }
        live.push(LiveCode { nonce, expires, code: code.clone() });
        Some(code)
    }

    /// Exchanges a one-time code, live for `grant`, for a new session's
    /// token (the capability in its paths).
    fn login(&self, code: &str, grant: GrantRef, now: SystemTime) -> Result<String, Refused> {
        let (nonce, _) = self.key.check_code(code, now)?;
        let mut codes = lock(&self.codes);
        let owner = codes.iter().find(|(_, live)| live.iter().any(|c| c.nonce == nonce)).map(|(g, _)| *g);
        let Some(owner) = owner else {
            // Spent before (`Used`), or replaced and forgotten: spent now
            // in either case.
            self.used_codes.redeem(&self.key, code, now)?;
            return Err(Refused::NotLive);
        };
        if grant != owner {
            return Err(Refused::OtherGrant);
        }
        self.used_codes.redeem(&self.key, code, now)?;
        if let Some(live) = codes.get_mut(&owner) {
            live.retain(|c| c.nonce != nonce);
        }
        drop(codes);
        let (token, _csrf) = self.key.mint_session();
        let id = self.key.check_session(&token).ok_or(Refused::Code(LoginError::BadSignature))?.to_owned();
        let mut sessions = lock(&self.sessions);
        while sessions.len() >= MAX_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(Session { id, token: token.clone(), grant: owner, at: Instant::now() });
        Ok(token)
    }

    /// The live session whose capability is `token`: made by this key,
    /// still in the table, not too old.
    fn session(&self, token: &str) -> Option<Session> {
        let id = self.key.check_session(token)?;
        lock(&self.sessions).iter().find(|s| s.id == id && s.at.elapsed() < MAX_SESSION_AGE).cloned()
    }

    /// The decision form's token for `session`'s page of `grant` drawn at
    /// `drawn` (Unix milliseconds): `<drawn>.<MAC of the three>`.
    fn form_token(&self, session: &Session, grant: GrantRef, drawn: u64) -> String {
        // A session id is hex: the separators keep the three apart.
        format!("{drawn}.{}", self.key.csrf_token(&format!("{}/{grant}/{drawn}", session.id)))
    }

    /// When the page whose form carried `token` was drawn (Unix
    /// milliseconds), if this key made it for `session` and `grant`.
    fn form_drawn(&self, token: &str, session: &Session, grant: GrantRef) -> Option<u64> {
        let (drawn, _) = token.split_once('.')?;
        let drawn: u64 =
            drawn.parse().ok().filter(|_| drawn.len() <= 20 && drawn.bytes().all(|b| b.is_ascii_digit()))?;
        let expected = self.form_token(session, grant, drawn);
        bool::from(token.as_bytes().ct_eq(expected.as_bytes())).then_some(drawn)
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

/// Seconds since the Unix epoch.
fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch.
fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn router(inner: Arc<Inner>) -> Router {
    Router::new()
        .route("/login", get(login))
        .route("/s/{session}/", get(index))
        .route("/s/{session}/grants/{grant}", get(grant_page))
        .route("/s/{session}/grants/{grant}/decision", post(decide))
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
/// [`Session`] attached.
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
    // 2. A live session's capability, first in the path, for everything
    // else. Nothing the browser sends to another port (a cookie) counts.
    let session = request
        .uri()
        .path()
        .strip_prefix("/s/")
        .and_then(|rest| rest.split('/').next())
        .and_then(|token| page.session(token));
    let Some(session) = session else {
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
    // A connection that carried a live session is the human's: the
    // bounded loop never displaces it for a flood's (SPEC V2).
    labfy_http::prove_connection(request);
    request.extensions_mut().insert(session);
    None
}

/// `GET /login?code=…&grant=…`: a valid unused code, live for that grant,
/// gives a session and sends the browser to the grant's page under the
/// session's capability (the code leaves the address bar).
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
    // A link names its grant: one without is not one egress made.
    let result = match (codes.as_slice(), grant) {
        ([code], Some(grant)) => page.login(code, grant, SystemTime::now()).map(|token| (token, grant)),
        _ => Err(Refused::Code(LoginError::Malformed)),
    };
    match result {
        Ok((token, grant)) => {
            let mut response = StatusCode::SEE_OTHER.into_response();
            // Hex, dots, `grant:` and a UUID: always a valid value.
            if let Ok(v) = HeaderValue::from_str(&format!("/s/{token}/grants/{grant}")) {
                response.headers_mut().insert(header::LOCATION, v);
            }
            response
        }
        Err(e) => {
            tracing::info!(refused = %e, "a confirmation page login was refused");
            login_required(Some(&e))
        }
    }
}

/// `GET /s/<session>/`: the grants waiting for a decision, then the latest
/// decided. Only the session's own grant is a link: another grant's page
/// opens through its own link.
async fn index(State(page): State<Arc<Inner>>, Extension(session): Extension<Session>) -> Response {
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
        body.push_str(
            "<p class=\"muted\">Chaque demande s'ouvre par son propre lien (interface de Labfy, ou \
             <code>labfy grant list</code>). <span lang=\"en\">Each grant opens through its own link (Labfy's UI, \
             or <code>labfy grant list</code>).</span></p>\n<ul class=\"grants\">\n",
        );
        for g in &waiting {
            let n = g.urls.len();
            let what = format!(
                "{n} adresse{s} <span lang=\"en\">{n} address{es}</span>",
                s = if n == 1 { "" } else { "s" },
                es = if n == 1 { "" } else { "es" },
            );
            body.push_str(&format!(
                "<li>{what} — <code>{id}</code>, \
                 proposée le <span lang=\"en\">proposed</span> {at}<br><span class=\"muted\">«&nbsp;<bdi>{summary}</bdi>&nbsp;» \
                 (description du serveur, non vérifiée <span lang=\"en\">server's description, unverified</span>)</span></li>\n",
                what = own_link(&session, g.grant_id, &what),
                id = esc(&g.grant_id.to_string()),
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
                "<li>{id} — {fr} <span lang=\"en\">{en}</span>{when}</li>\n",
                id = own_link(&session, g.grant_id, &format!("<code>{}</code>", esc(&g.grant_id.to_string()))),
                when = g.decided_at.as_deref().map(|t| format!(", {}", esc(&shown_time(t)))).unwrap_or_default(),
            ));
        }
        body.push_str("</ul>\n");
    }
    html(StatusCode::OK, &body)
}

/// `text` (already HTML) as a link to `grant`'s page when the session's
/// link named it; as is otherwise.
fn own_link(session: &Session, grant: GrantRef, text: &str) -> String {
    if grant == session.grant {
        format!("<a href=\"{}/grants/{grant}\">{text}</a>", session.base())
    } else {
        text.to_owned()
    }
}

/// `GET /s/<session>/grants/<grant:uuid>`: the grant, drawn by egress.
async fn grant_page(
    State(page): State<Arc<Inner>>,
    Extension(session): Extension<Session>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Response {
    match own_grant(&session, path) {
        Ok(grant) => draw(&page, &session, grant, StatusCode::OK, None).await,
        Err(refused) => *refused,
    }
}

/// The grant of a path, if it is the one the session's link named: 404 when
/// it is no grant, 403 when it is another.
fn own_grant(
    session: &Session,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<GrantRef, Box<Response>> {
    let Some(grant) = path.ok().and_then(|Path((_, g))| g.parse::<GrantRef>().ok()) else {
        return Err(Box::new(not_found()));
    };
    if grant != session.grant {
        return Err(Box::new(message(
            StatusCode::FORBIDDEN,
            "Autre demande",
            &format!(
                "Cette session n'ouvre que la demande {} : chaque demande s'ouvre par son propre lien.",
                grant_code(session.grant)
            ),
            &format!(
                "This session opens only grant {}: each grant opens through its own link.",
                grant_code(session.grant)
            ),
        )));
    }
    Ok(grant)
}

/// A notice above a grant's page, in French and English (plain text).
type Notice = (String, String);

/// Draws `grant`'s page for `session` now, with a fresh form token and
/// `notice` on top.
async fn draw(
    page: &Inner,
    session: &Session,
    grant: GrantRef,
    status: StatusCode,
    notice: Option<Notice>,
) -> Response {
    let now = Utc::now();
    match page.ledger(move |l| l.get(grant, now)).await {
        Ok(Ok(Some(record))) => {
            let view = View {
                base: session.base(),
                form_token: page.form_token(session, grant, unix_millis(SystemTime::now())),
                tor: (page.tor)(),
                notice,
            };
            html(status, &grant_body(&record, &view, now))
        }
        Ok(Ok(None)) => not_found(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the confirmation page cannot read a grant");
            internal_error()
        }
        Err(response) => response,
    }
}

/// What a grant's page shows besides the grant.
struct View {
    /// The session's path prefix (`/s/<token>`).
    base: String,
    /// The decision form's token (render time and MAC).
    form_token: String,
    /// Tor's bootstrap when the page was drawn.
    tor: Bootstrap,
    notice: Option<Notice>,
}

/// The short code of a grant: the first [`GRANT_CODE_CHARS`] hex digits of
/// its id (the UI and `labfy grant` show the whole id, which starts with
/// them).
fn grant_code(grant: GrantRef) -> String {
    grant.id().simple().to_string().chars().take(GRANT_CODE_CHARS).collect()
}

/// The body of a grant's page; `view.form_token` goes into its form.
fn grant_body(g: &GrantRecord, view: &View, now: DateTime<Utc>) -> String {
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
    let mut b = String::new();
    if let Some((fr, en)) = &view.notice {
        b.push_str(&format!(
            "<p class=\"notice\" role=\"alert\">{} <span lang=\"en\">{}</span></p>\n",
            esc(fr),
            esc(en)
        ));
    }
    b.push_str(&format!(
        "<h1>Recherche sortante <span lang=\"en\">Outbound research</span></h1>\n\
         <p class=\"grant-code\">Code de la demande <span lang=\"en\">Grant code</span> \
         <strong><code>{code}</code></strong> <span class=\"muted\">— le début de <code>{id}</code>, tel que \
         l'interface de Labfy et <code>labfy grant</code> le montrent ; vérifiez qu'il est le même. \
         <span lang=\"en\">the start of the grant id as Labfy's UI and <code>labfy grant</code> show it; \
         check it is the same.</span></span></p>\n\
         <p class=\"phase phase-{class}\">État : {phase_fr} <span lang=\"en\">State: {phase_en}</span></p>\n\
         <section>\n<h2>{heading_fr}, par Tor <span lang=\"en\">{heading_en}, through Tor</span></h2>\n\
         <ol class=\"urls\">\n",
        code = grant_code(g.grant_id),
        class = phase_class(g.phase),
    ));
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
        if !view.tor.ready {
            b.push_str(&tor_notice(&view.tor));
        }
        // The token is digits, a dot and hex; the base hex and a dot: they
        // cannot break out of the attribute.
        b.push_str(&format!(
            "<form method=\"post\" action=\"{base}/grants/{id}/decision\">\n\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\n\
             <button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">{allow_fr}\
             <span lang=\"en\">{allow_en}</span></button>\n\
             <button type=\"submit\" name=\"decision\" value=\"refuse\" class=\"refuse\">Refuser\
             <span lang=\"en\">Refuse</span></button>\n</form>\n",
            base = esc(&view.base),
            csrf = esc(&view.form_token),
        ));
    }
    b.push_str(&format!(
        "<p><a href=\"{}/\">Toutes les demandes <span lang=\"en\">All requests</span></a></p>\n",
        esc(&view.base)
    ));
    b
}

/// What the page says above the decision while Tor is not ready (SPEC V8):
/// an approval now makes the campaign wait for Tor, until the grant's
/// expiry at most.
fn tor_notice(tor: &Bootstrap) -> String {
    let why = tor.last_error.as_deref().map(|e| format!(" — {}", esc(e))).unwrap_or_default();
    format!(
        "<p class=\"notice tor-not-ready\" role=\"alert\">Tor n'est pas prêt : egress ne peut encore rien \
         récupérer (démarrage à {percent} %, <span lang=\"en\">{phase}{why}</span>). {fr} \
         <span lang=\"en\">Tor is not ready: egress cannot fetch anything yet (bootstrap at {percent}%). {en}</span></p>\n",
        percent = tor.percent.min(100),
        phase = esc(&tor.phase),
        fr = TOR_WAIT_FR,
        en = TOR_WAIT_EN,
    )
}

/// `POST /s/<session>/grants/<grant:uuid>/decision`: the human's decision.
/// An approval less than [`ARM_DELAY`] after its page was drawn is refused
/// and the page drawn again (a refusal needs no delay: the server may end a
/// grant itself).
async fn decide(
    State(page): State<Arc<Inner>>,
    Extension(session): Extension<Session>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let grant = match own_grant(&session, path) {
        Ok(grant) => grant,
        Err(refused) => return *refused,
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
    let Some(drawn) = page.form_drawn(&csrf, &session, grant) else {
        return message(
            StatusCode::FORBIDDEN,
            "Demande refusée",
            "Le jeton du formulaire ne correspond pas à votre session. Rouvrez la page et décidez-y.",
            "The form's token does not match your session. Reopen the page and decide there.",
        );
    };
    let armed = drawn.saturating_add(u64::try_from(page.arm.as_millis()).unwrap_or(u64::MAX));
    if approve && unix_millis(SystemTime::now()) < armed {
        tracing::info!(%grant, "an approval came too soon after its page was drawn: nothing decided");
        let notice = (
            "Décision trop rapide : rien n'a été décidé. Une autorisation n'est acceptée qu'un instant après \
             l'affichage de la page (un clic déjà lancé quand une fenêtre s'ouvre sous le pointeur ne doit rien \
             décider). Relisez la demande ci-dessous, puis décidez."
                .to_owned(),
            "Too quick: nothing was decided. An approval is accepted only a moment after the page is shown (a click \
             already on its way when a window opens under the pointer must decide nothing). Read the grant below, \
             then decide."
                .to_owned(),
        );
        return draw(&page, &session, grant, StatusCode::CONFLICT, Some(notice)).await;
    }
    let now = Utc::now();
    match page.ledger(move |l| l.decide(grant, approve, DECIDED_VIA, now)).await {
        Ok(Ok(record)) => {
            tracing::info!(grant = %record.grant_id, approve, "a grant was decided on the confirmation page");
            let mut response = StatusCode::SEE_OTHER.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("{}/grants/{grant}", session.base())) {
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
fn login_required(refused: Option<&Refused>) -> Response {
    let (fr, en) = match refused {
        None => ("Cette page demande une session.", "This page needs a session."),
        Some(Refused::OtherGrant) => (
            "Ce lien a été émis pour une autre demande que celle qu'il nomme.",
            "This link was made for another grant than the one it names.",
        ),
        Some(Refused::NotLive) => {
            ("Ce lien a été remplacé par un plus récent.", "This link was replaced by a newer one.")
        }
        Some(Refused::Code(LoginError::Malformed | LoginError::BadSignature)) => (
            "Ce lien n'a pas été émis par ce démon egress (autre démarrage, ou lien altéré).",
            "This link was not made by this egress daemon (another start, or altered).",
        ),
        Some(Refused::Code(LoginError::Expired)) => ("Ce lien a expiré.", "This link has expired."),
        Some(Refused::Code(LoginError::Used)) => {
            ("Ce lien a déjà servi : il ne s'ouvre qu'une fois.", "This link was already used: it opens once.")
        }
        Some(Refused::Code(LoginError::TooMany)) => (
            "Trop de liens ouverts en peu de temps ; attendez quelques minutes.",
            "Too many links opened in a short time; wait a few minutes.",
        ),
        Some(Refused::Code(LoginError::Unrecorded)) => (
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
    html(status, &format!("<h1>{}</h1>\n<p>{}</p>\n<p lang=\"en\">{}</p>\n", esc(title), esc(fr), esc(en)))
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

/// What the Tor notice says an approval does while Tor is not ready.
const TOR_WAIT_FR: &str = "Si vous autorisez, la campagne attendra que Tor soit prêt, jusqu'à l'expiration de la \
     demande au plus, sans rien dépenser ; rien ne sort avant.";
const TOR_WAIT_EN: &str = "If you allow it, the campaign waits for Tor, until the grant expires at most, spending nothing; nothing leaves before.";

/// The page's only style: calm, readable, no external resource. « Autoriser »
/// appears [`ARM_DELAY`] after the page (a CSS animation: the page has no
/// script), so that a click already on its way when a window opens under
/// the pointer — a page of the server may open this one in a new window —
/// decides nothing (clickjacking by window, which `frame-ancestors` cannot
/// stop); egress refuses an approval sooner than that after drawing the
/// page, whatever the browser shows.
const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;color:#222;background:#f7f7f4;margin:0}\
header,footer{padding:.6em 1.2em;color:#555;font-size:.9em}\
main{max-width:46em;margin:0 auto;padding:1em 1.2em;background:#fff;border:1px solid #ddd;border-radius:6px}\
h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}\
[lang=en]{color:#666;font-style:italic}h1 [lang=en],h2 [lang=en],button [lang=en]{display:block;font-size:.85em}\
code{font:.95em ui-monospace,monospace;word-break:break-all}\
ol.urls li{margin:.3em 0;padding:.2em .4em;background:#fffbe6;border-left:3px solid #e0b000}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3em 1em}dt{font-weight:600}dd{margin:0}\
.grant-code{font-size:1.2em}.grant-code strong code{font-size:1.3em;padding:.1em .4em;background:#eef;border:1px solid #99c}\
.notice{padding:.6em 1em;background:#fff4e5;border-left:4px solid #c60;font-weight:600}\
blockquote{margin:.5em 0;padding:.5em 1em;background:#f2f2f2;border-left:3px solid #aaa;white-space:pre-wrap}\
.muted{color:#666}.phase{font-weight:600}.phase-proposed{color:#8a5a00}.phase-approved{color:#1f6f2a}\
form{display:flex;gap:1em;margin:1.5em 0}\
button{font:inherit;padding:.6em 1.2em;border-radius:5px;border:1px solid #888;background:#fff;cursor:pointer}\
button.approve{border-color:#1f6f2a}button.refuse{border-color:#a33}\
button.approve{visibility:hidden;animation:arm 0s linear 800ms forwards}@keyframes arm{to{visibility:visible}}";

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
    use std::sync::atomic::{AtomicBool, Ordering};

    use labfy_core::CampaignRef;
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
        tor_ready: Arc<AtomicBool>,
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

    /// A fixture whose forms may decide at once (the delay has its own
    /// tests), with Tor ready.
    async fn fixture(summary: &str) -> Fixture {
        armed(summary, Duration::ZERO).await
    }

    async fn armed(summary: &str, arm: Duration) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Arc::new(Ledger::open(dir.path()).unwrap());
        let p = proposal(1, &["https://a.example.org/x?q=1", "https://b.example.net/y"], summary);
        ledger.propose(&p, Utc::now()).unwrap();
        let grant = p.grant_id;
        let shutdown = CancellationToken::new();
        let tor_ready = Arc::new(AtomicBool::new(true));
        let ready = tor_ready.clone();
        let tor: TorState = Arc::new(move || {
            if ready.load(Ordering::SeqCst) {
                Bootstrap { ready: true, percent: 100, phase: "done".into(), ..Bootstrap::default() }
            } else {
                Bootstrap {
                    ready: false,
                    percent: 45,
                    phase: "fetching a consensus".into(),
                    last_error: Some("<no relay>".into()),
                    bootstrap_ms: None,
                }
            }
        });
        let page = ConfirmPage::start_armed(ledger.clone(), tor, 0, shutdown.clone(), arm).await.unwrap();
        Fixture { _dir: dir, ledger, page, grant, tor_ready, shutdown }
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

    async fn get(port: u16, path: &str) -> Reply {
        send(port, "GET", path, None, &[], "").await
    }

    /// The path and query of a link.
    fn path_of(link: &str) -> &str {
        let rest = link.strip_prefix("http://127.0.0.1:").unwrap();
        &rest[rest.find('/').unwrap()..]
    }

    /// The page's link to `grant`.
    fn link(f: &Fixture, grant: GrantRef) -> String {
        f.page.link(grant).unwrap()
    }

    /// Logs in with a link to `grant`: the session's path prefix,
    /// `/s/<token>`.
    async fn login_to(f: &Fixture, grant: GrantRef) -> String {
        let r = get(f.page.port(), path_of(&link(f, grant))).await;
        assert_eq!(r.status, 303, "{r:?}");
        assert_eq!(r.header("set-cookie"), None, "no cookie: it would reach other ports");
        let to = r.header("location").unwrap();
        to.strip_suffix(&format!("/grants/{grant}")).unwrap().to_owned()
    }

    async fn login(f: &Fixture) -> String {
        login_to(f, f.grant).await
    }

    /// The token in a grant page's form.
    fn token_in(page: &str) -> String {
        let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
        page[at..at + page[at..].find('"').unwrap()].to_owned()
    }

    /// Every `href` and `action` of a page.
    fn targets(page: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for attr in ["href=\"", "action=\""] {
            for (at, _) in page.match_indices(attr) {
                let rest = &page[at + attr.len()..];
                out.push(&rest[..rest.find('"').unwrap()]);
            }
        }
        out
    }

    async fn post_decision(f: &Fixture, base: &str, origin: Option<&str>, body: &str) -> Reply {
        post_to(f, &format!("{base}/grants/{}/decision", f.grant), &[], origin, body).await
    }

    async fn post_to(f: &Fixture, path: &str, extra: &[(&str, &str)], origin: Option<&str>, body: &str) -> Reply {
        let mut h = vec![("Content-Type", "application/x-www-form-urlencoded")];
        h.extend_from_slice(extra);
        if let Some(o) = origin {
            h.push(("Origin", o));
        }
        send(f.page.port(), "POST", path, None, &h, body).await
    }

    fn own_origin(f: &Fixture) -> String {
        format!("http://127.0.0.1:{}", f.page.port())
    }

    fn phase(f: &Fixture) -> GrantPhase {
        phase_of(f, f.grant)
    }

    fn phase_of(f: &Fixture, grant: GrantRef) -> GrantPhase {
        f.ledger.get(grant, Utc::now()).unwrap().unwrap().phase
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
    async fn a_link_opens_a_session_of_its_grant_once() {
        let f = fixture("Qui possède Durand ?").await;
        let port = f.page.port();
        let l = link(&f, f.grant);
        assert!(l.starts_with(&format!("http://127.0.0.1:{port}/login?code=")), "{l}");
        assert!(l.ends_with(&format!("&grant={}", f.grant)), "{l}");
        // A HEAD spends no code.
        assert_eq!(send(port, "HEAD", path_of(&l), None, &[], "").await.status, 401);
        let r = get(port, path_of(&l)).await;
        assert_eq!(r.status, 303);
        let to = r.header("location").unwrap();
        let token = to.strip_prefix("/s/").unwrap().strip_suffix(&format!("/grants/{}", f.grant)).unwrap();
        assert!(f.page.inner.session(token).is_some(), "{to}");
        assert_eq!(r.header("set-cookie"), None);
        assert_security_headers(&r);
        assert_eq!(get(port, to).await.status, 200);
        // The same link again: refused, and says where a fresh one comes from.
        let again = get(port, path_of(&l)).await;
        assert_eq!(again.status, 401);
        assert!(again.body.contains("déjà servi") && again.body.contains("already used"), "{}", again.body);
        assert!(again.body.contains("labfy grant list"));
        // A link without (or with a bad) grant is no link of egress's.
        let code = link(&f, f.grant);
        let code = code.split("code=").nth(1).unwrap().split('&').next().unwrap().to_owned();
        for path in [format!("/login?code={code}"), format!("/login?code={code}&grant=campaign:{}", Uuid::nil())] {
            assert_eq!(get(port, &path).await.status, 401, "{path}");
        }
        // Forged, altered or missing codes.
        let other = LoginKey::generate().mint_code(SystemTime::now());
        for path in [format!("/login?code={other}&grant={}", f.grant), "/login?code=x".into(), "/login".into()] {
            let r = get(port, &path).await;
            assert_eq!(r.status, 401, "{path}");
            assert!(r.body.contains("labfy grant list"), "{path}");
        }
        // The refusals above spent nothing: the code still opens its grant.
        assert_eq!(get(port, &format!("/login?code={code}&grant={}", f.grant)).await.status, 303);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn without_a_session_in_the_path_nothing_is_served() {
        let f = fixture("x").await;
        let port = f.page.port();
        let (minted, _) = f.page.inner.key.mint_session();
        let forged = format!("{}.{}", "0".repeat(32), "0".repeat(64));
        let g = f.grant;
        for path in [
            "/".to_owned(),
            format!("/grants/{g}"),
            "/nowhere".into(),
            "/s/junk/".into(),
            format!("/s/{forged}/grants/{g}"),
            // Made by this key, but never logged in.
            format!("/s/{minted}/grants/{g}"),
        ] {
            let r = get(port, &path).await;
            assert_eq!(r.status, 401, "{path}");
            assert!(r.body.contains("Connexion requise") && r.body.contains("Login required"));
            assert_security_headers(&r);
        }
        let r =
            post_to(&f, &format!("/grants/{g}/decision"), &[], Some(&own_origin(&f)), "csrf=x&decision=approve").await;
        assert_eq!(r.status, 401);
        assert_eq!(phase(&f), GrantPhase::Proposed);
        f.shutdown.cancel();
    }

    /// Red team 3, F1: what the browser sends to another port of
    /// 127.0.0.1 — cookies — is all another local user's server gets.
    /// Nothing of the session is in one, and even the session's own token
    /// replayed as a cookie (or any cookie) reads nothing and decides
    /// nothing; only the path, which the browser sends to this origin
    /// alone, does.
    #[tokio::test]
    async fn what_the_browser_sends_to_another_port_opens_nothing() {
        let f = fixture("x").await;
        let port = f.page.port();
        let g = f.grant;
        let base = login(&f).await;
        let page = get(port, &format!("{base}/grants/{g}")).await;
        assert_eq!((page.status, page.header("set-cookie")), (200, None));
        let token = base.strip_prefix("/s/").unwrap();
        let form = format!("csrf={}&decision=approve", token_in(&page.body));
        let origin = own_origin(&f);
        for cookie in [format!("labfy_egress={token}"), format!("labfy_session={token}; labfy_egress={token}")] {
            let c = [("Cookie", cookie.as_str())];
            for path in ["/".to_owned(), format!("/grants/{g}"), "/s/".into()] {
                let r = send(port, "GET", &path, None, &c, "").await;
                assert_eq!(r.status, 401, "{path} {cookie}");
                assert!(!r.body.contains(&g.to_string()), "{path}: {}", r.body);
            }
            // A decision with the page's own Origin and form token, as a
            // curl by another uid would forge it.
            for path in [format!("/grants/{g}/decision"), format!("/s//grants/{g}/decision")] {
                let r = post_to(&f, &path, &c, Some(&origin), &form).await;
                assert_eq!(r.status, 401, "{path} {cookie}");
            }
        }
        assert_eq!(phase(&f), GrantPhase::Proposed);
        // The path is the credential: the same form there decides.
        let r = post_decision(&f, &base, Some(&origin), &form).await;
        assert_eq!(r.status, 303, "{r:?}");
        assert_eq!(phase(&f), GrantPhase::Approved);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn the_page_s_links_and_form_carry_the_session_s_path() {
        let f = fixture("x").await;
        let port = f.page.port();
        let g = f.grant;
        let base = login(&f).await;
        let page = get(port, &format!("{base}/grants/{g}")).await;
        let index = get(port, &format!("{base}/")).await;
        assert_eq!((page.status, index.status), (200, 200));
        assert!(page.body.contains(&format!("<form method=\"post\" action=\"{base}/grants/{g}/decision\">")));
        assert!(page.body.contains(&format!("href=\"{base}/\"")), "{}", page.body);
        assert!(index.body.contains(&format!("href=\"{base}/grants/{g}\"")), "{}", index.body);
        for body in [&page.body, &index.body] {
            let t = targets(body);
            assert!(!t.is_empty());
            assert!(t.iter().all(|t| t.starts_with(&format!("{base}/"))), "{t:?}");
        }
        // Another session's path opens the same grant with its own token.
        let other = login(&f).await;
        assert_ne!(other, base);
        assert_eq!(get(port, &format!("{other}/grants/{g}")).await.status, 200);
        f.shutdown.cancel();
    }

    /// Red team 3, B12: a link opens the grant it was minted for, and its
    /// session no other.
    #[tokio::test]
    async fn a_code_for_one_grant_opens_no_other() {
        let f = fixture("first").await;
        let port = f.page.port();
        let b = proposal(2, &["https://a.example.org/z"], "second");
        f.ledger.propose(&b, Utc::now()).unwrap();
        let b = b.grant_id;
        // A's code, with B named in the link: refused, and not spent.
        let a_link = link(&f, f.grant);
        let swapped = a_link.replace(&f.grant.to_string(), &b.to_string());
        let r = get(port, path_of(&swapped)).await;
        assert_eq!(r.status, 401);
        assert!(r.body.contains("autre demande") && r.body.contains("another grant"), "{}", r.body);
        let r = get(port, path_of(&a_link)).await;
        assert_eq!(r.status, 303);
        // A's session neither shows nor decides B.
        let base = r.header("location").unwrap().strip_suffix(&format!("/grants/{}", f.grant)).unwrap().to_owned();
        let r = get(port, &format!("{base}/grants/{b}")).await;
        assert_eq!(r.status, 403);
        assert!(!r.body.contains("second"), "{}", r.body);
        let form = format!("csrf={}&decision=approve", f.page.inner.form_token(&session_of(&f, &base), b, 0));
        let r = post_to(&f, &format!("{base}/grants/{b}/decision"), &[], Some(&own_origin(&f)), &form).await;
        assert_eq!(r.status, 403);
        assert_eq!(phase_of(&f, b), GrantPhase::Proposed);
        // Its index lists B without a way into it.
        let index = get(port, &format!("{base}/")).await;
        assert!(index.body.contains(&b.to_string()) && !index.body.contains(&format!("/grants/{b}")), "{}", index.body);
        f.shutdown.cancel();
    }

    fn session_of(f: &Fixture, base: &str) -> Session {
        f.page.inner.session(base.strip_prefix("/s/").unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_foreign_host_is_refused() {
        let f = fixture("x").await;
        let port = f.page.port();
        let base = login(&f).await;
        let path = format!("{base}/grants/{}", f.grant);
        let other_port = format!("127.0.0.1:{}", port.wrapping_add(1));
        for host in ["evil.example", &format!("evil.example:{port}"), other_port.as_str(), "127.0.0.1", ""] {
            let r = send(port, "GET", &path, Some(host), &[], "").await;
            assert_eq!(r.status, 400, "{host:?}");
            assert_security_headers(&r);
        }
        // A login link through a rebound name is refused before the code is even read.
        let l = link(&f, f.grant);
        let r = send(port, "GET", path_of(&l), Some("evil.example"), &[], "").await;
        assert_eq!((r.status, r.header("location")), (400, None));
        assert_eq!(get(port, path_of(&l)).await.status, 303, "not spent");
        let r = send(port, "GET", &path, Some(&format!("localhost:{port}")), &[], "").await;
        assert_eq!(r.status, 200);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_decision_needs_the_page_s_own_origin() {
        let f = fixture("x").await;
        let port = f.page.port();
        let base = login(&f).await;
        let page = get(port, &format!("{base}/grants/{}", f.grant)).await;
        let body = format!("csrf={}&decision=approve", token_in(&page.body));
        let foreign = format!("http://127.0.0.1:{}", port.wrapping_add(1));
        for origin in [None, Some("null"), Some(foreign.as_str()), Some("https://evil.example")] {
            let r = post_decision(&f, &base, origin, &body).await;
            assert_eq!(r.status, 403, "{origin:?}");
            assert!(r.body.contains("Origin"), "{origin:?}");
            assert_security_headers(&r);
        }
        assert_eq!(phase(&f), GrantPhase::Proposed);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_decision_needs_the_token_of_its_session_and_grant() {
        let f = fixture("x").await;
        let port = f.page.port();
        let origin = own_origin(&f);
        let base = login(&f).await;
        let other = login(&f).await;
        let other_page = get(port, &format!("{other}/grants/{}", f.grant)).await;
        let own = token_in(&get(port, &format!("{base}/grants/{}", f.grant)).await.body);
        let (drawn, tag) = own.split_once('.').unwrap();
        let later = format!("{}.{tag}", drawn.parse::<u64>().unwrap() - 10_000);
        let session = session_of(&f, &base);
        let for_another_grant = f.page.inner.form_token(&session, GrantRef::new(Uuid::from_u128(9)), 0);
        for token in ["", "00", &"0".repeat(64), &token_in(&other_page.body), &later, &for_another_grant, tag] {
            let r = post_decision(&f, &base, Some(&origin), &format!("csrf={token}&decision=approve")).await;
            assert_eq!(r.status, 403, "{token:?}");
        }
        assert_eq!(phase(&f), GrantPhase::Proposed);
        f.shutdown.cancel();
    }

    /// Red team 3, B14: the delay before « Autoriser » is egress's, not only
    /// the page's CSS.
    #[tokio::test]
    async fn an_approval_sooner_than_the_delay_after_the_page_is_refused() {
        // A delay no test machine reaches: the page's own form, at once.
        let f = armed("x", Duration::from_secs(3600)).await;
        let port = f.page.port();
        let origin = own_origin(&f);
        let base = login(&f).await;
        let page = get(port, &format!("{base}/grants/{}", f.grant)).await;
        let token = token_in(&page.body);
        // The form token carries its drawing time to the millisecond: the
        // page drawn again must be drawn in a later one to differ.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let r = post_decision(&f, &base, Some(&origin), &format!("csrf={token}&decision=approve")).await;
        assert_eq!(r.status, 409, "{r:?}");
        assert!(r.body.contains("Décision trop rapide") && r.body.contains("Too quick"), "{}", r.body);
        // The page again, with the exact addresses and a fresh form.
        assert!(r.body.contains("https://a.example.org/x?q=1") && r.body.contains("<form"));
        assert!(r.body.find("Décision trop rapide").unwrap() < r.body.find("<form").unwrap());
        assert_ne!(token_in(&r.body), token);
        assert_security_headers(&r);
        assert_eq!(phase(&f), GrantPhase::Proposed, "nothing decided");
        // A refusal needs no delay.
        let r = post_decision(&f, &base, Some(&origin), &format!("csrf={token}&decision=refuse")).await;
        assert_eq!(r.status, 303, "{r:?}");
        assert_eq!(phase(&f), GrantPhase::Refused);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn an_approval_after_the_delay_is_accepted() {
        let f = armed("x", ARM_DELAY).await;
        let port = f.page.port();
        let base = login(&f).await;
        let page = get(port, &format!("{base}/grants/{}", f.grant)).await;
        // The page's own button appears after the same delay.
        assert!(page.body.contains(&format!("animation:arm 0s linear {}ms forwards", ARM_DELAY.as_millis())));
        tokio::time::sleep(ARM_DELAY).await;
        let body = format!("csrf={}&decision=approve", token_in(&page.body));
        let r = post_decision(&f, &base, Some(&own_origin(&f)), &body).await;
        assert_eq!(r.status, 303, "{r:?}");
        assert_eq!(phase(&f), GrantPhase::Approved);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn malformed_decisions_are_refused() {
        let f = fixture("x").await;
        let port = f.page.port();
        let origin = own_origin(&f);
        let base = login(&f).await;
        let token = token_in(&get(port, &format!("{base}/grants/{}", f.grant)).await.body);
        for body in [
            format!("csrf={token}&decision=yes"),
            format!("csrf={token}"),
            format!("csrf={token}&decision=approve&decision=refuse"),
            format!("csrf={token}&decision=approve&extra=1"),
            "decision=approve".to_owned(),
        ] {
            let r = post_decision(&f, &base, Some(&origin), &body).await;
            assert_eq!(r.status, 400, "{body}");
        }
        // Another content type.
        let path = format!("{base}/grants/{}/decision", f.grant);
        let json = [("Origin", origin.as_str()), ("Content-Type", "application/json")];
        let r = send(port, "POST", &path, None, &json, "{}").await;
        assert_eq!(r.status, 400);
        // The bound on the body: N accepted as a size, N + 1 refused.
        let at_limit = format!("csrf={token}&decision=yes&");
        let at_limit = format!("{at_limit}{}", "x".repeat(MAX_FORM_BYTES - at_limit.len()));
        assert_eq!(post_decision(&f, &base, Some(&origin), &at_limit).await.status, 400);
        let over = format!("{at_limit}x");
        assert_eq!(post_decision(&f, &base, Some(&origin), &over).await.status, 413);
        assert_eq!(phase(&f), GrantPhase::Proposed);
        // A grant the ledger does not know (a link to it can be made):
        // no page, and no decision.
        let unknown = GrantRef::new(Uuid::from_u128(999));
        let base = login_to(&f, unknown).await;
        assert_eq!(get(port, &format!("{base}/grants/{unknown}")).await.status, 404);
        let form = format!("csrf={}&decision=approve", f.page.inner.form_token(&session_of(&f, &base), unknown, 0));
        let r = post_to(&f, &format!("{base}/grants/{unknown}/decision"), &[], Some(&origin), &form).await;
        assert_eq!(r.status, 409);
        assert!(r.body.contains("no proposal"), "{}", r.body);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_valid_decision_approves_the_grant_once() {
        let f = fixture("x").await;
        let port = f.page.port();
        let origin = own_origin(&f);
        let base = login(&f).await;
        let page = get(port, &format!("{base}/grants/{}", f.grant)).await;
        assert!(page.body.contains("Autoriser ces 2 adresses"), "{}", page.body);
        let body = format!("csrf={}&decision=approve", token_in(&page.body));
        let r = post_decision(&f, &base, Some(&origin), &body).await;
        assert_eq!(r.status, 303, "{r:?}");
        assert_eq!(r.header("location"), Some(format!("{base}/grants/{}", f.grant).as_str()));
        assert_security_headers(&r);
        let record = f.ledger.get(f.grant, Utc::now()).unwrap().unwrap();
        assert_eq!((record.phase, record.decided_via.as_deref()), (GrantPhase::Approved, Some(DECIDED_VIA)));
        // Decided: the page shows it, with no form; a second decision is refused.
        let page = get(port, &format!("{base}/grants/{}", f.grant)).await;
        assert!(page.body.contains("autorisée") && page.body.contains(DECIDED_VIA));
        assert!(!page.body.contains("<form"));
        let r = post_decision(&f, &base, Some(&origin), &body.replace("approve", "refuse")).await;
        assert_eq!(r.status, 409);
        assert!(r.body.contains("decided already"), "{}", r.body);
        assert_eq!(phase(&f), GrantPhase::Approved);
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn the_page_shows_the_exact_terms_and_escapes_the_server_s_words() {
        let f = fixture("<script>alert('x')</script> & \u{202E}evil").await;
        let port = f.page.port();
        let base = login(&f).await;
        let r = get(port, &format!("{base}/grants/{}", f.grant)).await;
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
        let r = get(port, &format!("{base}/")).await;
        assert!(r.body.contains(&format!("href=\"{base}/grants/{}\"", f.grant)), "{}", r.body);
        assert!(r.body.contains("&lt;script&gt;") && !r.body.contains("<script"));
        // A malformed grant: 404.
        let r = get(port, &format!("{base}/grants/nope")).await;
        assert_eq!(r.status, 404);
        assert_security_headers(&r);
        f.shutdown.cancel();
    }

    /// Red team 3, F8: a short code of the grant, prominent, that the UI's
    /// and `labfy grant`'s whole id starts with.
    #[tokio::test]
    async fn the_page_shows_its_grant_s_short_code() {
        let f = fixture("x").await;
        let base = login(&f).await;
        let r = get(f.page.port(), &format!("{base}/grants/{}", f.grant)).await;
        let code = grant_code(f.grant);
        assert_eq!(code.len(), GRANT_CODE_CHARS);
        assert!(f.grant.to_string().starts_with(&format!("grant:{code}")), "{code}");
        let shown = format!(
            "<p class=\"grant-code\">Code de la demande <span lang=\"en\">Grant code</span> <strong><code>{code}</code></strong>"
        );
        let at = r.body.find(&shown).unwrap_or_else(|| panic!("{}", r.body));
        assert!(at < r.body.find("<section>").unwrap(), "above the addresses");
        assert_eq!(grant_code(GrantRef::new(Uuid::from_u128(0xabcd_ef01 << 96))), "abcdef01");
        f.shutdown.cancel();
    }

    /// SPEC V8: while Tor is not ready the page says so above the decision.
    #[tokio::test]
    async fn the_page_says_when_tor_is_not_ready() {
        let f = fixture("x").await;
        let port = f.page.port();
        let base = login(&f).await;
        let path = format!("{base}/grants/{}", f.grant);
        let ready = get(port, &path).await;
        assert!(!ready.body.contains("tor-not-ready"), "{}", ready.body);
        f.tor_ready.store(false, Ordering::SeqCst);
        let r = get(port, &path).await;
        assert_eq!(r.status, 200);
        let b = &r.body;
        let notice = b
            .find("<p class=\"notice tor-not-ready\" role=\"alert\">Tor n'est pas prêt")
            .unwrap_or_else(|| panic!("{b}"));
        assert!(notice < b.find("<form").unwrap(), "above the decision: {b}");
        assert!(
            b.contains("démarrage à 45 %") && b.contains("Tor is not ready") && b.contains("bootstrap at 45%"),
            "{b}"
        );
        assert!(b.contains(TOR_WAIT_FR) && b.contains(TOR_WAIT_EN), "{b}");
        assert!(b.contains("fetching a consensus — &lt;no relay&gt;"), "escaped: {b}");
        // Approving stays possible (the campaign waits for Tor).
        assert!(b.contains("value=\"approve\""));
        // A decided grant has no decision to warn about.
        f.ledger.decide(f.grant, false, "terminal", Utc::now()).unwrap();
        assert!(!get(port, &path).await.body.contains("tor-not-ready"));
        f.shutdown.cancel();
    }

    #[tokio::test]
    async fn the_index_puts_waiting_grants_before_decided_ones() {
        let f = fixture("first").await;
        let second = proposal(2, &["https://a.example.org/z"], "second");
        f.ledger.propose(&second, Utc::now()).unwrap();
        f.ledger.decide(second.grant_id, false, "terminal", Utc::now()).unwrap();
        let base = login(&f).await;
        let r = get(f.page.port(), &format!("{base}/")).await;
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
            codes: Mutex::new(HashMap::new()),
            sessions: Mutex::new(VecDeque::new()),
            tor: Arc::new(Bootstrap::default),
            arm: ARM_DELAY,
        }
    }

    fn grant(n: u128) -> GrantRef {
        GrantRef::new(Uuid::from_u128(n))
    }

    /// Red team 3, B12: the server asks for links as often as it likes; it
    /// gets at most [`CODES_PER_GRANT`] live ones per grant, for at most
    /// [`MAX_LINKED_GRANTS`] grants.
    #[test]
    fn the_server_cannot_mint_codes_without_bound() {
        let p = inner();
        let now = SystemTime::now();
        let g = grant(1);
        let first = p.live_code(g, now).unwrap();
        for _ in 0..1000 {
            assert_eq!(p.live_code(g, now).unwrap(), first, "the same code while it is young");
        }
        let young = now + LOGIN_CODE_TTL / 2 - Duration::from_secs(1);
        assert_eq!(p.live_code(g, young).unwrap(), first, "over half its life left: still the same");
        let later = now + LOGIN_CODE_TTL / 2 + Duration::from_secs(1);
        let second = p.live_code(g, later).unwrap();
        assert_ne!(second, first);
        assert_eq!(lock(&p.codes)[&g].len(), CODES_PER_GRANT);
        // The one it replaced still works until its own expiry.
        assert!(p.login(&first, g, later).is_ok());
        // A third (the second half-spent) forgets the oldest.
        let third = p.live_code(g, later + LOGIN_CODE_TTL / 2 + Duration::from_secs(1)).unwrap();
        assert_eq!(p.live_code(g, later).unwrap(), third);
        assert!(lock(&p.codes)[&g].len() <= CODES_PER_GRANT);
        // A used code is gone: the next ask gives another.
        assert!(p.login(&third, g, later).is_ok());
        assert_ne!(p.live_code(g, later).unwrap(), third);
        assert_eq!(p.login(&third, g, later), Err(Refused::Code(LoginError::Used)));
        // N grants linked; N + 1 refused until one's codes are used or expire.
        let q = inner();
        for n in 0..MAX_LINKED_GRANTS as u128 {
            assert!(q.live_code(grant(100 + n), now).is_some(), "{n}");
        }
        assert_eq!(q.live_code(grant(99), now), None);
        let code = q.live_code(grant(100), now).unwrap();
        assert!(q.login(&code, grant(100), now).is_ok());
        assert!(q.live_code(grant(99), now).is_some(), "one slot freed");
        let expired = now + LOGIN_CODE_TTL + Duration::from_secs(1);
        assert!(q.live_code(grant(98), expired).is_some(), "the expired ones are forgotten");
        assert_eq!(lock(&q.codes).len(), 1);
    }

    #[test]
    fn only_a_live_code_of_the_named_grant_logs_in() {
        let p = inner();
        let now = SystemTime::now();
        let code = p.live_code(grant(1), now).unwrap();
        assert_eq!(p.login(&code, grant(2), now), Err(Refused::OtherGrant));
        assert!(p.login(&code, grant(1), now).is_ok());
        assert_eq!(p.login(&code, grant(1), now), Err(Refused::Code(LoginError::Used)));
        // Made by this key, never given out (or forgotten): spent, refused.
        let stray = p.key.mint_code(now);
        assert_eq!(p.login(&stray, grant(1), now), Err(Refused::NotLive));
        assert_eq!(p.login(&stray, grant(1), now), Err(Refused::Code(LoginError::Used)));
    }

    #[test]
    fn sessions_are_bounded_and_the_oldest_goes() {
        let p = inner();
        let now = SystemTime::now();
        let g = grant(1);
        let login = || p.login(&p.live_code(g, now).unwrap(), g, now).unwrap();
        let tokens: Vec<String> = (0..MAX_SESSIONS).map(|_| login()).collect();
        let newest = login();
        assert!(p.session(&tokens[1]).is_some());
        assert_eq!(lock(&p.sessions).len(), MAX_SESSIONS);
        assert!(p.session(&tokens[0]).is_none(), "the oldest is forgotten");
        assert!(p.session(&tokens[1]).is_some());
        assert_eq!(p.session(&newest).map(|s| s.grant), Some(g));
        // A token this key made but that never logged in opens nothing.
        let (minted, _) = p.key.mint_session();
        assert!(p.session(&minted).is_none());
    }

    #[test]
    fn used_codes_are_bounded_and_expire() {
        let p = inner();
        let now = SystemTime::now();
        let g = grant(1);
        for _ in 0..MAX_USED_CODES {
            p.login(&p.live_code(g, now).unwrap(), g, now).unwrap();
        }
        let code = p.live_code(g, now).unwrap();
        assert_eq!(p.login(&code, g, now), Err(Refused::Code(LoginError::TooMany)));
        assert_eq!(p.live_code(g, now).unwrap(), code, "a refused login spends nothing");
        let later = now + LOGIN_CODE_TTL + Duration::from_secs(1);
        let code = p.live_code(g, later).unwrap();
        assert!(p.login(&code, g, later).is_ok(), "the remembered ones expired");
        assert_eq!(p.login(&code, g, later), Err(Refused::Code(LoginError::Used)));
    }

    #[test]
    fn a_form_token_binds_its_session_grant_and_time() {
        let p = inner();
        let now = SystemTime::now();
        let g = grant(1);
        let token = p.login(&p.live_code(g, now).unwrap(), g, now).unwrap();
        let s = p.session(&token).unwrap();
        let t = p.form_token(&s, g, 1234);
        assert!(t.starts_with("1234."), "{t}");
        assert_eq!(p.form_drawn(&t, &s, g), Some(1234));
        assert_eq!(p.form_drawn(&t.replacen("1234", "1233", 1), &s, g), None);
        assert_eq!(p.form_drawn(&t, &s, grant(2)), None);
        let other = p.session(&p.login(&p.live_code(g, now).unwrap(), g, now).unwrap()).unwrap();
        assert_eq!(p.form_drawn(&t, &other, g), None);
        for bad in ["", ".", "1234", "+1234.00", &format!("{t}0")] {
            assert_eq!(p.form_drawn(bad, &s, g), None, "{bad:?}");
        }
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
