//! The only way out: an arti Tor client (SPEC E1, E4, E6, P4).
//!
//! [`Tor::start`] builds the client unbootstrapped (bootstrap behaviour
//! `Manual`: nothing is attempted behind egress's back), then bootstraps it
//! in the background, retrying with backoff, while a second task follows
//! arti's bootstrap events for the status. Streams are asked only once
//! bootstrap has completed, always by host name and port (the exit resolves
//! the name: egress never calls a resolver), always with the campaign's
//! isolation token.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arti_client::{BootstrapBehavior, IsolationToken, StreamPrefs, TorClient, TorClientConfig};
use futures::StreamExt;
use labfy_core::bounded::truncate_chars;
use tor_rtcompat::PreferredRuntime;

use crate::connector::{Bootstrap, BoxFuture, BoxIo, Connector};
use crate::http::bounded;

/// First wait before bootstrap is tried again after a failure.
pub const BOOTSTRAP_RETRY_FIRST: Duration = Duration::from_secs(5);
/// Longest wait between bootstrap attempts.
pub const BOOTSTRAP_RETRY_MAX: Duration = Duration::from_secs(300);
/// Longest phase line kept.
const MAX_PHASE_CHARS: usize = 200;

/// The Tor client and what is known of its bootstrap.
pub struct Tor {
    client: Option<Arc<TorClient<PreferredRuntime>>>,
    state: Arc<Mutex<Bootstrap>>,
}

impl Tor {
    /// Creates the client and starts bootstrapping it in the background.
    /// Must run inside a tokio runtime. A client that cannot be created
    /// (unusable state directory, lock held by another process) is not a
    /// crash: egress stays up, reports the error, and answers every fetch
    /// unavailable (E6).
    pub async fn start(config: TorClientConfig) -> Self {
        let tor = Self::create(config).await;
        if let Some(client) = &tor.client {
            tokio::spawn(bootstrap_until_done(client.clone(), tor.state.clone()));
        }
        tor
    }

    /// Creates the client and follows its events, without bootstrapping it
    /// (tests: nothing reaches the network).
    pub(crate) async fn create(config: TorClientConfig) -> Self {
        let state = Arc::new(Mutex::new(Bootstrap { phase: "starting the Tor client".into(), ..Bootstrap::default() }));
        let created = TorClient::builder()
            .config(config)
            .bootstrap_behavior(BootstrapBehavior::Manual)
            .create_unbootstrapped_async()
            .await;
        let client = match created {
            Ok(c) => c,
            Err(e) => {
                let why = bounded(&e);
                tracing::error!(error = %why, "the Tor client could not be created; every fetch is unavailable");
                let mut s = lock(&state);
                s.phase = "the Tor client could not start".into();
                s.last_error = Some(why);
                drop(s);
                return Self { client: None, state };
            }
        };
        tokio::spawn(follow_events(client.clone(), state.clone()));
        Self { client: Some(client), state }
    }
}

fn lock(state: &Mutex<Bootstrap>) -> std::sync::MutexGuard<'_, Bootstrap> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bootstraps, retrying with doubling waits until it succeeds once.
async fn bootstrap_until_done(client: Arc<TorClient<PreferredRuntime>>, state: Arc<Mutex<Bootstrap>>) {
    let started = Instant::now();
    let mut wait = BOOTSTRAP_RETRY_FIRST;
    loop {
        match client.bootstrap().await {
            Ok(()) => {
                let ms = started.elapsed().as_millis() as u64;
                tracing::info!(ms, "Tor bootstrapped");
                let mut s = lock(&state);
                s.ready = true;
                s.percent = 100;
                s.bootstrap_ms = Some(ms);
                return;
            }
            Err(e) => {
                let why = bounded(&e);
                tracing::warn!(error = %why, retry_in_s = wait.as_secs(), "Tor bootstrap failed");
                lock(&state).last_error = Some(format!("bootstrap: {why}"));
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(BOOTSTRAP_RETRY_MAX);
            }
        }
    }
}

/// Mirrors arti's bootstrap events into the status.
async fn follow_events(client: Arc<TorClient<PreferredRuntime>>, state: Arc<Mutex<Bootstrap>>) {
    let mut events = client.bootstrap_events();
    while let Some(ev) = events.next().await {
        let mut s = lock(&state);
        if !s.ready {
            s.percent = (ev.as_frac().clamp(0.0, 1.0) * 100.0).round() as u8;
        }
        s.phase = truncate_chars(&ev.to_string(), MAX_PHASE_CHARS);
        if let Some(blocked) = ev.blocked() {
            s.last_error = Some(truncate_chars(&blocked.to_string(), MAX_PHASE_CHARS));
        }
    }
}

impl Connector for Tor {
    fn bootstrap(&self) -> Bootstrap {
        lock(&self.state).clone()
    }

    fn connect<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        isolation: IsolationToken,
    ) -> BoxFuture<'a, Result<BoxIo, String>> {
        Box::pin(async move {
            let Some(client) = &self.client else {
                return Err("the Tor client could not start".to_owned());
            };
            if !lock(&self.state).ready {
                return Err("Tor is not bootstrapped".to_owned());
            }
            let mut prefs = StreamPrefs::new();
            prefs.set_isolation(isolation);
            // A host name goes to the exit as a name: arti never resolves it here.
            match client.connect_with_prefs((host, port), &prefs).await {
                Ok(stream) => Ok(Box::new(stream) as BoxIo),
                Err(e) => Err(format!("Tor: {}", bounded(&e))),
            }
        })
    }
}
