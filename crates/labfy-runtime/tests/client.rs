//! `LocalModelClient` against real HTTP servers on loopback (SPEC M3, M4).
//!
//! The fake provider is a `TcpListener` on `127.0.0.1:0` (or `[::1]:0`)
//! speaking raw HTTP/1.1 with scripted answers: nothing of the client is
//! mocked. No test ever connects to port 8080.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use labfy_runtime::client::{
    CHAT_PATH, CancelToken, ChatMessage, ChatRequest, ClientError, Endpoint, FORBIDDEN_PORT, FailureClass,
    FinishReason, HEALTH_PATH, LocalModelClient, MAX_DIAGNOSTIC_CHARS, MAX_REQUEST_BODY_BYTES, MAX_RESPONSE_BODY_BYTES,
    MAX_RESPONSE_HEAD_BYTES, ModelConfig, Readiness, Usage,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(10);
/// What a "huge" body weighs: far more than any socket buffer.
const HUGE: u64 = 256 * 1024 * 1024;
/// Marks the re-executed test binary of the proxy test.
const PROXY_CHILD_ENV: &str = "LABFY_CLIENT_TEST_PROXY_CHILD";

// ---------------------------------------------------------------------------
// The fake provider.

/// One request as the fake provider received it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    version: String,
    /// Lower-cased names, in order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// What the fake provider does once it has read a request.
enum Action {
    /// Write these bytes and close.
    Reply(Vec<u8>),
    /// Answer nothing; wait for the client to close.
    Hang,
    /// Close at once without answering.
    Close,
    /// Write `head`, then up to `total` body bytes (chunked or not) until the
    /// client stops reading.
    Stream { head: Vec<u8>, chunked: bool, total: u64 },
}

/// What the fake provider reports.
#[derive(Debug)]
enum Event {
    Request(Seen),
    /// The client closed a hanging connection.
    PeerClosed,
    /// A streamed body stopped after `written` bytes (`complete` if all).
    Streamed {
        written: u64,
        complete: bool,
    },
}

struct Fake {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Fake {
    fn start(listener: TcpListener, script: impl Fn(&Seen) -> Action + Send + Sync + 'static) -> Self {
        let addr = listener.local_addr().unwrap();
        assert_ne!(addr.port(), FORBIDDEN_PORT);
        let connections = Arc::new(AtomicUsize::new(0));
        let (tx, events) = mpsc::unbounded_channel();
        let script = Arc::new(script);
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let script = script.clone();
                let tx = tx.clone();
                tokio::spawn(async move { serve(stream, &*script, tx).await });
            }
        });
        Self { addr, connections, events }
    }

    /// A fake provider on `127.0.0.1` answering every request with `action`.
    async fn v4(script: impl Fn(&Seen) -> Action + Send + Sync + 'static) -> Self {
        Self::start(bind_v4().await, script)
    }

    fn client(&self, timeout: Duration) -> LocalModelClient {
        client_for(self.addr, timeout)
    }

    async fn next_event(&mut self) -> Event {
        tokio::time::timeout(PATIENCE, self.events.recv())
            .await
            .expect("the fake provider reported nothing in time")
            .expect("the fake provider stopped")
    }

    async fn next_request(&mut self) -> Seen {
        match self.next_event().await {
            Event::Request(seen) => seen,
            other => panic!("expected a request, got {other:?}"),
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut stream: TcpStream,
    script: &(dyn Fn(&Seen) -> Action + Send + Sync),
    tx: mpsc::UnboundedSender<Event>,
) {
    let Some(seen) = read_request(&mut stream).await else {
        return;
    };
    let action = script(&seen);
    let _ = tx.send(Event::Request(seen));
    match action {
        Action::Reply(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Action::Close => drop(stream),
        Action::Hang => {
            let mut buf = [0u8; 1024];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = tx.send(Event::PeerClosed);
        }
        Action::Stream { head, chunked, total } => {
            let chunk = vec![b'x'; 64 * 1024];
            let mut written = 0u64;
            let mut complete = false;
            if stream.write_all(&head).await.is_ok() {
                loop {
                    if written >= total {
                        complete = !chunked || stream.write_all(b"0\r\n\r\n").await.is_ok();
                        break;
                    }
                    let n = chunk.len().min((total - written) as usize);
                    let result = if chunked {
                        let mut framed = format!("{n:x}\r\n").into_bytes();
                        framed.extend_from_slice(&chunk[..n]);
                        framed.extend_from_slice(b"\r\n");
                        stream.write_all(&framed).await
                    } else {
                        stream.write_all(&chunk[..n]).await
                    };
                    if result.is_err() {
                        break;
                    }
                    written += n as u64;
                }
            }
            let _ = tx.send(Event::Streamed { written, complete });
        }
    }
}

/// Reads one HTTP/1.1 request (head bounded to 64 KiB, body by
/// `Content-Length`).
async fn read_request(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = stream.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let version = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.iter().find(|(n, _)| n == "content-length").map_or(0, |(_, v)| v.parse().unwrap_or(0));
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut byte).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&byte[..n]);
    }
    Some(Seen { method, path, version, headers, body })
}

/// A listener on `127.0.0.1`, never on port 8080.
async fn bind_v4() -> TcpListener {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        if listener.local_addr().unwrap().port() != FORBIDDEN_PORT {
            return listener;
        }
    }
}

/// A listener that only counts the connections it receives.
async fn counting_listener() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = bind_v4().await;
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (addr, count)
}

fn client_for(addr: SocketAddr, timeout: Duration) -> LocalModelClient {
    let endpoint = Endpoint::from_socket_addr(addr).unwrap();
    LocalModelClient::new(ModelConfig::new(endpoint, "test-model", timeout).unwrap())
}

fn response(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn json_response(status: &str, body: &serde_json::Value) -> Vec<u8> {
    response(status, "application/json", body.to_string().as_bytes())
}

/// A llama-server style completion.
fn completion(content: &str, finish_reason: &str) -> serde_json::Value {
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "/models/test.gguf",
        "choices": [{
            "index": 0,
            "finish_reason": finish_reason,
            "message": {"role": "assistant", "content": content}
        }],
        "usage": {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28},
        "timings": {"prompt_n": 21, "predicted_n": 7, "predicted_per_second": 55.5}
    })
}

fn loading_body() -> serde_json::Value {
    json!({"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::system("Answer with one JSON object."), ChatMessage::user("List the evidence.")],
        max_tokens: Some(256),
        temperature: Some(0.0),
        ..ChatRequest::default()
    }
}

const T5: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// Answers.

#[tokio::test]
async fn a_normal_answer_is_parsed_and_the_request_is_plain() {
    let mut fake =
        Fake::v4(|_| Action::Reply(json_response("200 OK", &completion(r#"{"kind":"final"}"#, "stop")))).await;
    let client = fake.client(T5);
    let answer = client.chat(&request()).await.unwrap();
    assert_eq!(answer.content, r#"{"kind":"final"}"#);
    assert_eq!(answer.finish_reason, FinishReason::Stop);
    assert!(!answer.is_truncated());
    assert_eq!(answer.usage, Some(Usage { prompt_tokens: 21, completion_tokens: 7 }));

    let seen = fake.next_request().await;
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, CHAT_PATH);
    assert_eq!(seen.version, "HTTP/1.1");
    assert_eq!(seen.header("host"), Some(format!("127.0.0.1:{}", fake.addr.port()).as_str()));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.header("content-length"), Some(seen.body.len().to_string().as_str()));
    // No Authorization, Cookie, Proxy-Authorization or anything implicit:
    // the head holds exactly these headers.
    let mut names: Vec<&str> = seen.headers.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["accept", "content-length", "content-type", "host"], "{:?}", seen.headers);
    assert!(seen.header("authorization").is_none());
    assert!(seen.header("cookie").is_none());

    let body = seen.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], false);
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "Answer with one JSON object."}));
    assert_eq!(body["messages"][1], json!({"role": "user", "content": "List the evidence."}));
    assert_eq!(fake.connections(), 1);
}

#[tokio::test]
async fn finish_reason_length_is_surfaced() {
    let fake = Fake::v4(|_| Action::Reply(json_response("200 OK", &completion(r#"{"kind":"fi"#, "length")))).await;
    let answer = fake.client(T5).chat(&request()).await.unwrap();
    assert_eq!(answer.finish_reason, FinishReason::Length);
    assert!(answer.is_truncated());
    assert_eq!(answer.content, r#"{"kind":"fi"#);
}

#[tokio::test]
async fn each_request_uses_a_fresh_connection() {
    let fake = Fake::v4(|_| Action::Reply(json_response("200 OK", &completion("a", "stop")))).await;
    let client = fake.client(T5);
    for _ in 0..3 {
        client.chat(&request()).await.unwrap();
    }
    assert_eq!(fake.connections(), 3);
}

#[tokio::test]
async fn malformed_json_is_a_protocol_error_with_a_bounded_diagnostic() {
    let secret = "S3CRET-EVIDENCE-".repeat(4096);
    let body = format!(r#"{{"choices": [{{"message": {{"content": {secret}"#);
    let fake = Fake::v4(move |_| Action::Reply(response("200 OK", "application/json", body.as_bytes()))).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err.class(), FailureClass::Protocol);
    let ClientError::Malformed { reason } = &err else { panic!("{err:?}") };
    assert!(reason.chars().count() <= MAX_DIAGNOSTIC_CHARS, "{reason}");
    let shown = err.to_string();
    assert!(shown.len() < 400 && !shown.contains(&secret[..200]), "{shown}");

    // Well-formed JSON of the wrong shape, and a null content.
    for body in [json!({"object": "error"}), json!({"choices": [{"message": {"content": null}}]})] {
        let fake = Fake::v4(move |_| Action::Reply(json_response("200 OK", &body))).await;
        let err = fake.client(T5).chat(&request()).await.unwrap_err();
        assert!(matches!(err, ClientError::Malformed { .. }), "{err:?}");
    }
}

// ---------------------------------------------------------------------------
// Statuses.

#[tokio::test]
async fn loading_503_is_unavailable() {
    let fake = Fake::v4(|_| Action::Reply(json_response("503 Service Unavailable", &loading_body()))).await;
    let client = fake.client(T5);
    let err = client.chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::NotReady { message: Some("Loading model".into()) });
    assert_eq!(err.class(), FailureClass::Unavailable);
    assert_eq!(client.status().await, Readiness::Loading);
}

#[tokio::test]
async fn server_errors_are_unavailable_and_client_errors_are_protocol() {
    let fake = Fake::v4(|_| Action::Reply(response("500 Internal Server Error", "text/plain", b"boom"))).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::ServerError { status: 500, message: None });
    assert_eq!(err.class(), FailureClass::Unavailable);

    let long = format!("invalid grammar\n{}", "q".repeat(10_000));
    let body = json!({"error": {"message": long, "type": "invalid_request_error", "code": 400}});
    let fake = Fake::v4(move |_| Action::Reply(json_response("400 Bad Request", &body))).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err.class(), FailureClass::Protocol);
    let ClientError::Rejected { status: 400, message: Some(message) } = &err else { panic!("{err:?}") };
    assert!(message.starts_with("invalid grammar "), "{message}");
    assert_eq!(message.chars().count(), MAX_DIAGNOSTIC_CHARS);
    assert!(!message.contains('\n'));

    let fake = Fake::v4(|_| Action::Reply(response("204 No Content", "text/plain", b""))).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::UnexpectedStatus { status: 204 });
    assert_eq!(err.class(), FailureClass::Protocol);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let (elsewhere, elsewhere_connections) = counting_listener().await;
    for status in
        ["301 Moved Permanently", "302 Found", "303 See Other", "307 Temporary Redirect", "308 Permanent Redirect"]
    {
        let location = format!("http://{elsewhere}{CHAT_PATH}");
        let fake = Fake::v4(move |_| {
            Action::Reply(
                format!("HTTP/1.1 {status}\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .into_bytes(),
            )
        })
        .await;
        let err = fake.client(T5).chat(&request()).await.unwrap_err();
        let code: u16 = status[..3].parse().unwrap();
        assert_eq!(err, ClientError::Redirect { status: code });
        assert_eq!(err.class(), FailureClass::Protocol);
        assert!(err.to_string().contains(&code.to_string()));
        assert_eq!(fake.connections(), 1);
    }
    // Give a follow-up connection every chance to show up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(elsewhere_connections.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------
// Size bounds.

#[tokio::test]
async fn a_declared_body_over_the_bound_is_refused_without_reading_it() {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {HUGE}\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    let mut fake = Fake::v4(move |_| Action::Stream { head: head.clone(), chunked: false, total: HUGE }).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::ResponseTooLarge { max: MAX_RESPONSE_BODY_BYTES });
    assert_eq!(err.class(), FailureClass::Protocol);
    fake.next_request().await;
    match fake.next_event().await {
        Event::Streamed { written, complete } => {
            assert!(!complete && written < HUGE / 4, "the server wrote {written} bytes")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_chunked_body_over_the_bound_stops_the_read() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut fake = Fake::v4(move |_| Action::Stream { head: head.clone(), chunked: true, total: HUGE }).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::ResponseTooLarge { max: MAX_RESPONSE_BODY_BYTES });
    fake.next_request().await;
    match fake.next_event().await {
        Event::Streamed { written, complete } => {
            assert!(!complete && written < HUGE / 4, "the server wrote {written} bytes")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_body_at_the_bound_is_read() {
    // A valid completion padded with spaces to exactly the bound.
    let mut body = completion("ok", "stop").to_string().into_bytes();
    body.resize(MAX_RESPONSE_BODY_BYTES, b' ');
    let at = response("200 OK", "application/json", &body);
    let fake = Fake::v4(move |_| Action::Reply(at.clone())).await;
    assert_eq!(fake.client(T5).chat(&request()).await.unwrap().content, "ok");

    body.push(b' ');
    let over = response("200 OK", "application/json", &body);
    let fake = Fake::v4(move |_| Action::Reply(over.clone())).await;
    assert_eq!(
        fake.client(T5).chat(&request()).await.unwrap_err(),
        ClientError::ResponseTooLarge { max: MAX_RESPONSE_BODY_BYTES }
    );
}

#[tokio::test]
async fn an_error_body_is_read_only_in_part() {
    let head =
        format!("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {HUGE}\r\n\r\n").into_bytes();
    let mut fake = Fake::v4(move |_| Action::Stream { head: head.clone(), chunked: false, total: HUGE }).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert_eq!(err, ClientError::Rejected { status: 400, message: None });
    fake.next_request().await;
    match fake.next_event().await {
        Event::Streamed { written, complete } => assert!(!complete && written < HUGE / 4, "{written}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_request_over_the_bound_is_not_sent() {
    let fake = Fake::v4(|_| Action::Reply(json_response("200 OK", &completion("a", "stop")))).await;
    let big =
        ChatRequest { messages: vec![ChatMessage::user("x".repeat(MAX_REQUEST_BODY_BYTES))], ..ChatRequest::default() };
    let err = fake.client(T5).chat(&big).await.unwrap_err();
    assert!(matches!(err, ClientError::RequestTooLarge { max: MAX_REQUEST_BODY_BYTES, .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::InvalidRequest);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(fake.connections(), 0);
}

// ---------------------------------------------------------------------------
// Time and availability.

#[tokio::test]
async fn a_closed_port_is_unavailable_at_once() {
    let listener = bind_v4().await;
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = client_for(addr, Duration::from_secs(30));
    let started = Instant::now();
    let err = client.chat(&request()).await.unwrap_err();
    assert!(matches!(err, ClientError::Connect { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Unavailable);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(matches!(client.status().await, Readiness::Unavailable { .. }));
}

#[tokio::test]
async fn a_silent_server_times_out_within_the_bound() {
    let mut fake = Fake::v4(|_| Action::Hang).await;
    let client = fake.client(Duration::from_secs(1));
    let started = Instant::now();
    let err = client.chat(&request()).await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err, ClientError::Timeout { after: Duration::from_secs(1) });
    assert_eq!(err.class(), FailureClass::Unavailable);
    assert!(elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(5), "{elapsed:?}");
    // The connection was closed, not left behind.
    fake.next_request().await;
    assert!(matches!(fake.next_event().await, Event::PeerClosed));
}

#[tokio::test]
async fn a_connection_closed_without_answer_is_unavailable() {
    let fake = Fake::v4(|_| Action::Close).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert!(matches!(err, ClientError::Transport { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Unavailable);
}

#[tokio::test]
async fn an_answer_that_is_not_http_is_a_protocol_error() {
    let fake = Fake::v4(|_| Action::Reply(b"SSH-2.0-OpenSSH_9.6\r\n".to_vec())).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert!(matches!(err, ClientError::Malformed { .. }), "{err:?}");
    assert_eq!(err.class(), FailureClass::Protocol);

    // A response head over the bound.
    let head =
        format!("HTTP/1.1 200 OK\r\nX-Pad: {}\r\nContent-Length: 0\r\n\r\n", "p".repeat(MAX_RESPONSE_HEAD_BYTES * 2));
    let fake = Fake::v4(move |_| Action::Reply(head.clone().into_bytes())).await;
    let err = fake.client(T5).chat(&request()).await.unwrap_err();
    assert!(matches!(err, ClientError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().len() < 400);
}

#[tokio::test]
async fn status_reads_health() {
    let mut fake = Fake::v4(|seen| match seen.path.as_str() {
        HEALTH_PATH => Action::Reply(json_response("200 OK", &json!({"status": "ok"}))),
        _ => Action::Close,
    })
    .await;
    assert_eq!(fake.client(T5).status().await, Readiness::Ready);
    let seen = fake.next_request().await;
    assert_eq!((seen.method.as_str(), seen.path.as_str()), ("GET", HEALTH_PATH));
    assert!(seen.header("authorization").is_none() && seen.header("cookie").is_none());

    let fake = Fake::v4(|_| Action::Reply(response("404 Not Found", "text/plain", b"no"))).await;
    match fake.client(T5).status().await {
        Readiness::Unavailable { reason } => assert!(reason.contains("404"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let fake = Fake::v4(|_| Action::Hang).await;
    assert!(matches!(fake.client(Duration::from_secs(1)).status().await, Readiness::Unavailable { .. }));
}

// ---------------------------------------------------------------------------
// Cancellation (M8).

#[tokio::test]
async fn cancelling_in_flight_ends_the_request_and_closes_the_connection() {
    let mut fake = Fake::v4(|_| Action::Hang).await;
    let client = fake.client(Duration::from_secs(60));
    let cancel = CancelToken::new();
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move { client.chat_cancellable(&request(), &cancel).await }
    });
    fake.next_request().await; // the request is in flight
    let started = Instant::now();
    cancel.cancel();
    let result = tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
    assert_eq!(result, Err(ClientError::Cancelled));
    assert_eq!(ClientError::Cancelled.class(), FailureClass::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(fake.next_event().await, Event::PeerClosed));
}

#[tokio::test]
async fn a_cancelled_token_sends_nothing() {
    let fake = Fake::v4(|_| Action::Reply(json_response("200 OK", &completion("a", "stop")))).await;
    let cancel = CancelToken::new();
    cancel.cancel();
    let result = fake.client(T5).chat_cancellable(&request(), &cancel).await;
    assert_eq!(result, Err(ClientError::Cancelled));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(fake.connections(), 0);
}

#[tokio::test]
async fn an_uncancelled_token_lets_the_answer_through() {
    let fake = Fake::v4(|_| Action::Reply(json_response("200 OK", &completion("a", "stop")))).await;
    let answer = fake.client(T5).chat_cancellable(&request(), &CancelToken::new()).await;
    assert_eq!(answer.unwrap().content, "a");
}

// ---------------------------------------------------------------------------
// IPv6 loopback.

#[tokio::test]
async fn ipv6_loopback_works() {
    let listener = match TcpListener::bind("[::1]:0").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIPPED ipv6_loopback_works: cannot bind [::1]:0 here ({e})");
            return;
        }
    };
    let mut fake = Fake::start(listener, |_| Action::Reply(json_response("200 OK", &completion("v6", "stop"))));
    let endpoint = Endpoint::parse(&format!("http://[::1]:{}", fake.addr.port())).unwrap();
    assert_eq!(endpoint.socket_addr(), Some(fake.addr));
    let client = LocalModelClient::new(ModelConfig::new(endpoint, "test-model", T5).unwrap());
    assert_eq!(client.chat(&request()).await.unwrap().content, "v6");
    let seen = fake.next_request().await;
    assert_eq!(seen.header("host"), Some(format!("[::1]:{}", fake.addr.port()).as_str()));
}

/// The governed model's transport (SPEC D1): the same exchange on a Unix
/// socket, with `Host: localhost` (a name never resolved), and a socket
/// nobody listens on is a connection failure, said as one.
#[tokio::test]
async fn a_unix_socket_endpoint_carries_the_same_exchange() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let seen = read_request(&mut stream).await.unwrap();
        stream.write_all(&json_response("200 OK", &completion("over unix", "stop"))).await.unwrap();
        stream.shutdown().await.unwrap();
        seen
    });
    let endpoint = Endpoint::parse(&format!("unix:{}", path.display())).unwrap();
    let client = LocalModelClient::new(ModelConfig::new(endpoint, "test-model", T5).unwrap());
    assert_eq!(client.chat(&request()).await.unwrap().content, "over unix");
    let seen = tokio::time::timeout(PATIENCE, server).await.unwrap().unwrap();
    assert_eq!(seen.path, CHAT_PATH);
    assert_eq!(seen.header("host"), Some("localhost"));
    assert_eq!(seen.json()["model"], "test-model");

    let gone = Endpoint::parse(&format!("unix:{}", dir.path().join("nobody.sock").display())).unwrap();
    let client = LocalModelClient::new(ModelConfig::new(gone, "test-model", T5).unwrap());
    let err = client.chat(&request()).await.unwrap_err();
    assert!(matches!(err, ClientError::Connect { .. }), "{err:?}");
    assert!(matches!(client.status().await, Readiness::Unavailable { .. }));
}

// ---------------------------------------------------------------------------
// Ambient proxies (M3). The variables are set only in a child process (this
// same test binary, re-executed), so this process's environment is never
// modified.

#[tokio::test]
async fn ambient_proxy_variables_are_ignored() {
    if std::env::var_os(PROXY_CHILD_ENV).is_some() {
        return; // in the child, only `proxy_child_makes_a_direct_request` runs
    }
    let (proxy, proxy_connections) = counting_listener().await;
    let http_proxy = format!("http://{proxy}");
    let socks_proxy = format!("socks5h://{proxy}");
    let output = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["proxy_child_makes_a_direct_request", "--exact", "--nocapture", "--test-threads=1"])
        .env(PROXY_CHILD_ENV, "1")
        .env("HTTP_PROXY", &http_proxy)
        .env("http_proxy", &http_proxy)
        .env("HTTPS_PROXY", &http_proxy)
        .env("https_proxy", &http_proxy)
        .env("ALL_PROXY", &socks_proxy)
        .env("all_proxy", &socks_proxy)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("proxy child: direct answer received"), "the child did not run:\n{stdout}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(proxy_connections.load(Ordering::SeqCst), 0, "the proxy was contacted");
}

/// Runs only in the child started by `ambient_proxy_variables_are_ignored`.
#[tokio::test]
async fn proxy_child_makes_a_direct_request() {
    if std::env::var_os(PROXY_CHILD_ENV).is_none() {
        return;
    }
    assert!(std::env::var("HTTP_PROXY").is_ok() && std::env::var("all_proxy").is_ok());
    let mut fake = Fake::v4(|_| Action::Reply(json_response("200 OK", &completion("direct", "stop")))).await;
    let client = fake.client(T5);
    assert_eq!(client.chat(&request()).await.unwrap().content, "direct");
    assert_eq!(client.status().await, Readiness::Ready);
    let seen = fake.next_request().await;
    // A request through a proxy would carry an absolute URI.
    assert_eq!(seen.path, CHAT_PATH);
    assert!(seen.header("proxy-authorization").is_none());
    println!("proxy child: direct answer received");
}

/// The runtime spawns model requests on a multi-threaded runtime.
#[test]
fn client_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let client = client_for("127.0.0.1:1".parse().unwrap(), T5);
    let request = request();
    let cancel = CancelToken::new();
    assert_send(&client.chat(&request));
    assert_send(&client.chat_cancellable(&request, &cancel));
    assert_send(&client.status());
}
