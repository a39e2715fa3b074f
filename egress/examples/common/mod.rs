//! What the bare arti-client reference does, shared by the examples
//! `bare_fetch` (the reference alone) and `bench_egress` (the reference next
//! to `labfy-egress`): the arti configuration read with egress's own loader,
//! a bootstrapped client, and one hand-written HTTP/1.1 `GET` on a new Tor
//! stream. No Labfy IPC, grants, checks or evidence store here.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arti_client::{TorClient, TorClientConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tor_rtcompat::PreferredRuntime;
use tracing_subscriber::EnvFilter;

/// Bound on bootstrapping (a ready private network takes well under 1 s).
pub const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound on one fetch: circuit, stream, request and the whole response.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest response read; a fetch of more is an error.
pub const MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
/// Default log filter: arti warns every second about the private network's
/// unmeasured bandwidth (`tor_netdir`), which is expected there.
pub const DEFAULT_LOG_FILTER: &str = "warn,tor_netdir=error";

/// Result type of the examples.
pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Logs to stderr, filtered by `RUST_LOG` or [`DEFAULT_LOG_FILTER`].
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

/// The configuration: arti's TOML read by egress's own loader (arti's
/// builder through serde; unknown keys and `[storage]` refused), then
/// `state_dir/state` and `state_dir/cache` forced in — what the daemon does,
/// minus Labfy's data directory.
pub fn tor_config(arti_config: &Path, state_dir: &Path) -> Result<TorClientConfig> {
    let builder = labfy_egress::builder_from_file(arti_config)?;
    Ok(labfy_egress::build(builder, &state_dir.join("state"), &state_dir.join("cache"), Some(arti_config))?)
}

/// A client bootstrapped with [`tor_config`], and how long
/// `TorClient::create_bootstrapped` took (configuration not included).
/// Needs a rustls provider ([`labfy_egress::install_crypto_provider`]).
pub async fn bootstrap(arti_config: &Path, state_dir: &Path) -> Result<(Arc<TorClient<PreferredRuntime>>, Duration)> {
    let config = tor_config(arti_config, state_dir)?;
    let started = Instant::now();
    let client = tokio::time::timeout(BOOTSTRAP_TIMEOUT, TorClient::create_bootstrapped(config))
        .await
        .map_err(|_| format!("bootstrap: no result after {} s", BOOTSTRAP_TIMEOUT.as_secs()))??;
    Ok((client, started.elapsed()))
}

/// Where to connect and what to ask for.
pub struct Target {
    /// Host as written in the URL (a name or an IP literal).
    pub host: String,
    /// TCP port (80 when the URL has none).
    pub port: u16,
    /// Path and query of the request line.
    pub path_and_query: String,
}

impl Target {
    /// The parts of an `http://` URL; anything else is refused.
    pub fn from_url(url: &url::Url) -> Result<Self> {
        if url.scheme() != "http" {
            return Err(format!("only http:// URLs are supported, not {}", url.scheme()).into());
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(a)) => a.to_string(),
            Some(h) => h.to_string(),
            None => return Err("URL without a host".into()),
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let mut path_and_query = url.path().to_owned();
        if let Some(q) = url.query() {
            path_and_query.push('?');
            path_and_query.push_str(q);
        }
        Ok(Self { host, port, path_and_query })
    }

    /// The `Host` header value (IPv6 literals in brackets).
    fn host_header(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// What one fetch got.
pub struct Fetched {
    /// HTTP status code.
    pub status: u16,
    /// Response size, head and body, in bytes.
    pub bytes: usize,
    /// From the call to the stream being open (the exit's `CONNECTED`).
    pub connected: Duration,
}

/// One fetch on a new Tor stream of `client` (its isolation: a client from
/// `isolated_client()` keeps its own circuits), under [`FETCH_TIMEOUT`],
/// read to the end of the stream.
pub async fn fetch<R: tor_rtcompat::Runtime>(client: &TorClient<R>, target: &Target) -> Result<Fetched> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_unbounded(client, target))
        .await
        .map_err(|_| format!("fetch: no result after {} s", FETCH_TIMEOUT.as_secs()))?
}

async fn fetch_unbounded<R: tor_rtcompat::Runtime>(client: &TorClient<R>, target: &Target) -> Result<Fetched> {
    let started = Instant::now();
    let mut stream = client.connect((target.host.as_str(), target.port)).await?;
    let connected = started.elapsed();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: bare_fetch\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        target.path_and_query,
        target.host_header()
    );
    stream.write_all(request.as_bytes()).await?;
    // A DataStream buffers writes: without a flush the request never leaves.
    stream.flush().await?;

    let mut response = Vec::new();
    (&mut stream).take(MAX_RESPONSE_BYTES + 1).read_to_end(&mut response).await?;
    if response.len() as u64 > MAX_RESPONSE_BYTES {
        return Err(format!("response larger than {MAX_RESPONSE_BYTES} bytes").into());
    }
    Ok(Fetched { status: status_code(&response)?, bytes: response.len(), connected })
}

/// Status code of an HTTP/1.x response (`HTTP/1.1 200 OK`).
fn status_code(response: &[u8]) -> Result<u16> {
    let line_end = response.iter().position(|&b| b == b'\n').unwrap_or(response.len());
    let line = String::from_utf8_lossy(&response[..line_end]);
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") => Ok(code.parse()?),
        _ => Err(format!("not an HTTP/1.x response: {:?}", line.trim_end()).into()),
    }
}

/// Nearest-rank percentile of sorted, non-empty values.
pub fn percentile(sorted: &[f64], pct: usize) -> f64 {
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

/// The head of one HTTP request on a benchmark's page server (read with a
/// 30 s timeout, at most 16 KiB), or `None` when the peer went first.
#[allow(dead_code)] // bare_fetch serves no page
pub fn request_head(s: &mut std::net::TcpStream) -> Option<String> {
    use std::io::Read;
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}
