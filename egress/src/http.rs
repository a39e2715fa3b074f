//! One HTTP/1.1 exchange over a stream egress was given: TLS when the URL
//! is `https` (rustls, webpki roots only, SNI = the host), then one request
//! with hyper's low-level client — no pool, no proxy, no cookie, no
//! authentication, no compression asked — and a bounded response.

use std::sync::{Arc, OnceLock};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, ACCEPT_ENCODING, CONNECTION, CONTENT_LENGTH, HOST, HeaderMap, USER_AGENT};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use labfy_core::bounded::truncate_chars;
use labfy_ipc::messages::egress::FetchMethod;
use rustls::pki_types::ServerName;

use crate::bodies::{Bodies, Spool};
use crate::connector::{BoxIo, IdleTimeout, Io};
use crate::limits::Limits;
use crate::target::Target;

/// The `User-Agent` every request carries: fixed and generic, the same for
/// every workspace and campaign, so it says nothing about the investigation.
pub const USER_AGENT_VALUE: &str = "Mozilla/5.0 (Windows NT 10.0; rv:128.0) Gecko/20100101 Firefox/128.0";

/// A response within bounds.
#[derive(Debug)]
pub(crate) struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Its headers.
    pub headers: HeaderMap,
    /// The body, streamed to egress's scratch directory (`None` for `HEAD`
    /// and for redirects, which are not read).
    pub body: Option<Spool>,
}

/// Why an exchange produced nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ExchangeError {
    /// The far side misbehaved: TLS, malformed HTTP, bounds, idle timeout.
    Failed(String),
    /// The grant's byte budget ran out during the body.
    Budget(String),
}

/// The TLS client configuration: ring, safe protocol versions, webpki roots
/// (never the system's), no client certificate, ALPN `http/1.1`.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let mut cfg =
                rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS configuration: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
            cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
            Ok(Arc::new(cfg))
        })
        .clone()
}

/// Runs one request on `io` and reads the response within `limits`, its
/// body streamed into a new file of `bodies` (redirects' bodies are never
/// read).
/// `take_bytes` is told of every body chunk before it is kept and refuses
/// when the grant's byte budget is spent.
pub(crate) async fn exchange(
    io: BoxIo,
    target: &Target,
    method: FetchMethod,
    limits: &Limits,
    bodies: &Bodies,
    mut take_bytes: impl FnMut(u64) -> Result<(), String> + Send,
) -> Result<Response, ExchangeError> {
    let io = IdleTimeout::new(io, limits.idle);
    let io: BoxIo = if target.tls {
        let cfg = tls_config().map_err(ExchangeError::Failed)?;
        let name = ServerName::try_from(target.host.clone())
            .map_err(|e| ExchangeError::Failed(format!("TLS: `{}` is not a server name: {e}", target.host)))?;
        let tls = tokio_rustls::TlsConnector::from(cfg)
            .connect(name, io)
            .await
            .map_err(|e| ExchangeError::Failed(format!("TLS handshake failed: {}", bounded(&e))))?;
        Box::new(tls)
    } else {
        Box::new(io)
    };
    request(io, target, method, limits, bodies, &mut take_bytes).await
}

async fn request(
    io: impl Io + 'static,
    target: &Target,
    method: FetchMethod,
    limits: &Limits,
    bodies: &Bodies,
    take_bytes: &mut (impl FnMut(u64) -> Result<(), String> + Send),
) -> Result<Response, ExchangeError> {
    let failed = |what: &str, e: &dyn std::error::Error| ExchangeError::Failed(format!("{what}: {}", bounded(e)));
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_headers(limits.max_headers)
        // hyper refuses (panics on) a buffer under 8 KiB.
        .max_buf_size(limits.max_header_bytes.max(8192))
        .handshake::<_, Empty<Bytes>>(TokioIo::new(io))
        .await
        .map_err(|e| failed("HTTP", &e))?;
    // The connection is driven beside the request and dies with it.
    let driver = AbortOnDrop(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let req = Request::builder()
        .method(match method {
            FetchMethod::Get => Method::GET,
            FetchMethod::Head => Method::HEAD,
        })
        .uri(target.origin_form())
        .header(HOST, target.host_header())
        .header(USER_AGENT, USER_AGENT_VALUE)
        .header(ACCEPT, "*/*")
        .header(ACCEPT_ENCODING, "identity")
        .header(CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| failed("request", &e))?;
    let resp = sender.send_request(req).await.map_err(|e| failed("malformed or interrupted HTTP response", &e))?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let read_body = method == FetchMethod::Get && !is_redirect(status);
    let mut body = None;
    if read_body {
        let declared =
            headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > limits.max_body) {
            return Err(too_large(limits));
        }
        let scratch = |e: std::io::Error| {
            ExchangeError::Failed(format!("the body could not be written to egress's scratch directory: {e}"))
        };
        // Dropped on any early return: the half-written file goes with it.
        let mut spool = bodies.spool().await.map_err(scratch)?;
        let mut incoming = resp.into_body();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| failed("body", &e))?;
            let Ok(chunk) = frame.into_data() else { continue };
            if spool.len() + chunk.len() as u64 > limits.max_body {
                return Err(too_large(limits));
            }
            take_bytes(chunk.len() as u64).map_err(ExchangeError::Budget)?;
            spool.write(&chunk).await.map_err(scratch)?;
        }
        spool.finish().await.map_err(scratch)?;
        body = Some(spool);
    }
    drop(driver);
    Ok(Response { status, headers, body })
}

fn too_large(limits: &Limits) -> ExchangeError {
    ExchangeError::Failed(format!("body larger than {} bytes; nothing kept", limits.max_body))
}

/// Statuses whose `Location` egress follows (each hop re-checked).
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// An error and its causes on one bounded line.
pub(crate) fn bounded(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = s.source();
    }
    truncate_chars(&line, 300)
}

/// Aborts a spawned task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
