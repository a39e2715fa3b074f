#![doc = include_str!("../README.md")]

pub mod assets;
pub mod campaigns;
pub mod db;
pub mod durable;
pub mod egress;
pub mod error;
pub mod extract;
pub mod extraction;
pub mod governor;
pub mod http;
pub mod isolation;
pub mod listener;
pub mod openapi;
pub mod routes;
pub mod sandbox;
pub mod security;
pub mod session;
pub mod state;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use tower::ServiceBuilder;

pub use state::AppState;

/// Largest request body accepted (an analyst note is at most 1 MiB of text).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Largest `multipart` upload request (its files together; the UI sends
/// batches): the one route whose bound is above [`MAX_BODY_BYTES`].
pub const MAX_UPLOAD_REQUEST_BYTES: usize = 512 << 20;
/// Longest a request may take before it is answered 503.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Most requests served at once.
pub const MAX_CONCURRENT_REQUESTS: usize = 64;
/// Most reads (GET, HEAD) served at once: their own pool (SPEC T5).
pub const MAX_CONCURRENT_READS: usize = 48;
/// Most changes (requests with a body) served at once, body reading
/// included: slow bodies fill this pool and no other.
pub const MAX_CONCURRENT_CHANGES: usize = 16;
/// Longest a shutdown waits for the campaign runner's tasks to leave (they
/// release their governor reservations on the way out).
pub const CAMPAIGN_SHUTDOWN_GRACE: Duration = Duration::from_secs(6);

/// The whole application with its security layers, ready to serve or to be
/// called with `oneshot` in tests.
///
/// The guard layers wrap the routed application once, as one service (not
/// route by route, which is what `Router::layer` does): the concurrency limit
/// is global and unknown paths get the same headers and Host check.
pub fn app(state: AppState) -> Router {
    let routed = Router::new()
        .merge(routes::ui::router())
        .merge(routes::agent::router())
        .merge(routes::tools::router())
        .merge(routes::runtime::router())
        .merge(routes::resources::router())
        .merge(routes::egress::router())
        .merge(routes::import::router())
        .merge(routes::cases::router())
        .merge(routes::export::router())
        .merge(routes::api::router())
        .fallback(|| async { error::ApiError::not_found("no such page") })
        // Inside the guard: no answer leaves before the journal holds what
        // it tells (SPEC K1).
        .layer(middleware::from_fn_with_state(state.clone(), durable::barrier))
        .with_state(state.clone());
    let guarded = ServiceBuilder::new()
        // Outermost first: the whole of SPEC S1–S4 (Host, session, Origin,
        // CSRF, rate limit, response headers), then resource bounds, then the
        // body limit.
        .layer(middleware::from_fn_with_state(state, security::guard))
        .layer(axum::error_handling::HandleErrorLayer::new(|e: tower::BoxError| async move {
            if e.is::<tower::timeout::error::Elapsed>() {
                error::ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "TIMEOUT", "request took too long")
            } else {
                error::ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "OVERLOADED", "server busy; retry")
            }
        }))
        .load_shed()
        .concurrency_limit(MAX_CONCURRENT_REQUESTS)
        .timeout(REQUEST_TIMEOUT)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .service(routed);
    Router::new().fallback_service(guarded)
}

/// Serves `app` on `listener` until `shutdown` resolves.
///
/// Server shutdown closes the agent runtime (SPEC M8): as soon as `shutdown`
/// resolves — before the connections in flight are drained — no turn starts
/// or resumes any more and the running ones are cancelled; and again when
/// serving ends for any other reason (closing twice is harmless). The
/// campaign runner closes at the same moment: its campaigns stop where they
/// are, recording nothing (the next start resumes them), and serving returns
/// once their tasks have left — at most [`CAMPAIGN_SHUTDOWN_GRACE`] later.
pub async fn serve(
    listener: std::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let agent = state.agent_runtime().clone();
    let campaigns = state.campaigns().clone();
    let gateway = state.gateway().clone();
    let (closing, stopping) = (agent.clone(), campaigns.clone());
    let shutdown = async move {
        shutdown.await;
        closing.close();
        stopping.close();
        tracing::info!("agent runtime and campaign runner closed");
    };
    let served = async {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        http::serve_connections(listener, app(state), shutdown).await
    }
    .await;
    agent.close();
    campaigns.close();
    if !campaigns.idle(CAMPAIGN_SHUTDOWN_GRACE).await {
        tracing::warn!(campaigns = campaigns.live(), "campaign tasks still running at shutdown");
    }
    // The agent's journal is written before the process leaves (SPEC F4).
    let flushed = tokio::task::spawn_blocking(move || gateway.flush_journal()).await.unwrap_or(false);
    if !flushed {
        tracing::warn!("the agent journal was not fully written at shutdown");
    }
    served
}
