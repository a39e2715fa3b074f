//! The accept loop over real sockets (SPEC T5, V2; red team 3, F2 and F3):
//! a tiny router whose handler proves its connection when the request says
//! `X-Prove`, as the server's guard does once a session checks out.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::routing::get;
use labfy_http::{Limits, prove_connection};
use labfy_testkit::flood::{Flood, held_connections};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn limits(max_connections: usize, first_request: Duration) -> Limits {
    Limits {
        max_connections,
        first_request_timeout: first_request,
        header_read_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        drain_timeout: Duration::from_secs(1),
        max_header_buffer: 16 * 1024,
        eviction_grace: Duration::from_millis(100),
    }
}

/// Serves the tiny router under `limits` on a free port until the test ends.
async fn start(limits: Limits) -> u16 {
    let app = Router::new().route(
        "/",
        get(|request: Request| async move {
            if request.headers().contains_key("x-prove") {
                prove_connection(&request);
            }
            "ok"
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(labfy_http::serve(listener, app, limits, std::future::pending()));
    port
}

/// One `GET /` on `s` (keep-alive unless `close`), proving the connection
/// if `prove`: the answer's status line, once its body has arrived.
async fn ask(s: &mut TcpStream, prove: bool, close: bool) -> std::io::Result<String> {
    let mut head = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n".to_owned();
    if prove {
        head.push_str("X-Prove: 1\r\n");
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        answer.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned())
}

/// Reads `s` until the server closes it, for at most `limit`: whether it did.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 256];
    let read_to_end = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read_to_end).await.is_ok()
}

/// Whether `s` is still open with nothing to read.
fn still_open(s: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// F2: another process keeps 4× the cap of idle connections, reopening each
/// one as soon as it is closed; a fresh connection that proves itself is
/// still answered every time, and the loop never holds more than the cap
/// (plus the one connection waiting for the displaced one's descriptor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_fresh_connection_that_proves_itself_is_always_served() {
    const CAP: usize = 16;
    let port = start(limits(CAP, Duration::from_secs(2))).await;
    let flood = Flood::start(port, 4 * CAP, None).unwrap();
    flood.wait_until("the cap is pressed", Duration::from_secs(30), |opened, closed| {
        opened >= 4 * CAP as u64 && closed >= 4 * CAP as u64
    });
    let before = flood.closed();
    // The analyst's browser is another process: its requests are written
    // by a thread of their own as soon as each connection is up.
    let most_held = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut most_held = 0;
        for i in 0..40 {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let asked = s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Prove: 1\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            let read = asked.and_then(|()| s.read_to_string(&mut answer));
            assert!(
                read.is_ok() && answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("ok"),
                "fresh connection {i} was not served under the flood: {read:?} {answer:?}"
            );
            most_held = most_held.max(held_connections(std::process::id(), port));
        }
        most_held
    })
    .await
    .unwrap();
    assert!(most_held <= CAP + 1, "the loop held {most_held} connections (cap {CAP})");
    assert!(flood.closed() > before, "the flood was not pressing on the cap");
    println!(
        "40 fresh connections served while the flood's connections were closed {} times; at most {most_held} held",
        flood.closed() - before
    );
}

/// At the cap the oldest *unproven* connection goes: proven keep-alive
/// connections stay and keep being served, the newest idle ones stay too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proven_keep_alive_connections_are_never_displaced() {
    const CAP: usize = 8;
    // A first-request deadline far away: only the cap closes anything here.
    let port = start(limits(CAP, Duration::from_secs(60))).await;
    let mut proven = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        assert_eq!(ask(&mut s, true, false).await.unwrap(), "HTTP/1.1 200 OK");
        proven.push(s);
    }
    // Each idle connection is accepted before the next is opened (the
    // order of the loop's table is the order of connects).
    let mut idle = Vec::new();
    for _ in 0..20 {
        let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        idle.push(s);
    }
    // 3 proven + 5 idle fit; the 15 oldest idle ones were displaced.
    let room = CAP - proven.len();
    let displaced = idle.len() - room;
    for (i, s) in idle.iter_mut().enumerate().take(displaced) {
        assert!(closed_within(s, Duration::from_secs(10)).await, "idle connection {i} was not displaced");
    }
    for (i, s) in idle.iter().enumerate().skip(displaced) {
        assert!(still_open(s), "the newer idle connection {i} was closed");
    }
    for (i, s) in proven.iter_mut().enumerate() {
        assert_eq!(ask(s, false, false).await.expect("a proven connection is kept"), "HTTP/1.1 200 OK", "{i}");
    }
}

/// An unproven connection closes at its first-request deadline — one that
/// sends nothing, and one whose request was answered without proving it —
/// while a proven keep-alive connection waits on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unproven_connection_closes_at_its_first_request_deadline() {
    const FIRST: Duration = Duration::from_millis(300);
    let port = start(limits(8, FIRST)).await;
    let connected = Instant::now();
    let mut silent = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut anonymous = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(ask(&mut anonymous, false, false).await.unwrap(), "HTTP/1.1 200 OK");
    let mut proven = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    assert_eq!(ask(&mut proven, true, false).await.unwrap(), "HTTP/1.1 200 OK");
    let answered = Instant::now();

    // Far below hyper's 30 s header timer: the first-request deadline.
    assert!(closed_within(&mut silent, Duration::from_secs(15)).await, "a silent connection stayed open");
    let silent_for = connected.elapsed();
    assert!(silent_for >= FIRST - Duration::from_millis(10), "closed before its deadline: {silent_for:?}");
    assert!(closed_within(&mut anonymous, Duration::from_secs(15)).await, "an unproven idle connection stayed open");
    println!("a silent connection closed after {silent_for:?} (first-request deadline {FIRST:?})");

    tokio::time::sleep((answered + 5 * FIRST).saturating_duration_since(Instant::now())).await;
    assert_eq!(ask(&mut proven, false, false).await.expect("the proven connection waited"), "HTTP/1.1 200 OK");
}
