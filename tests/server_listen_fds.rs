//! `labfy-server` serves a listening socket it inherits (systemd `LISTEN_FDS`
//! convention, fd 3), as the supervisor will pass it into the server's own
//! network namespace — and refuses an inherited socket that is not loopback.
//! (Attached to the `labfy-server` package for `CARGO_BIN_EXE_labfy-server`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod support;

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use support::*;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_labfy-server");

fn data_dir() -> TempDir {
    let dir = TempDir::new().unwrap();
    let mut store = labfy_store::Store::open(dir.path()).unwrap();
    labfy_store::specimen::generate(
        &mut store,
        labfy_store::specimen::SpecimenSpec { seed: 2, size: 20 },
        &mut |_, _| {},
    )
    .unwrap();
    dir
}

/// Spawns `labfy-server` with `listener` as fd 3 and `LISTEN_FDS=<count>`.
fn spawn_inheriting(listener: &TcpListener, count: &str, dir: &TempDir) -> Guard {
    let fd = listener.as_raw_fd();
    let mut cmd = Command::new(BIN);
    cmd.arg("--data-dir").arg(dir.path()).env("LISTEN_FDS", count).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: between fork and exec only async-signal-safe calls are made:
    // dup2 places the listener at fd 3 without FD_CLOEXEC; when it already is
    // fd 3, dup2 would be a no-op that keeps FD_CLOEXEC, so the flag is cleared.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            let rc = if fd == 3 { libc::fcntl(3, libc::F_SETFD, 0) } else { libc::dup2(fd, 3) };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Guard(cmd.spawn().unwrap())
}

/// The one-time login link a server started by hand prints on stdout.
fn printed_link(child: &mut Guard) -> String {
    use std::io::BufRead;
    let out = child.0.stdout.take().unwrap();
    std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("http://127.0.0.1:"))
        .expect("a login link on stdout")
}

#[test]
fn serves_an_inherited_loopback_listener() {
    let dir = data_dir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut child = spawn_inheriting(&listener, "1", &dir);
    let link = printed_link(&mut child);
    assert!(link.starts_with(&format!("http://127.0.0.1:{port}/login?code=")), "{link}");
    // Our copy stays open, but only the child accepts on it; without a
    // login the page issues no session.
    let answer = wait_for("the inherited socket to answer", || http(port, "GET", "/api/v1/session", &[], "").ok());
    assert_eq!(answer.status, 401);
    assert!(answer.header("set-cookie").is_none());
    // The Host check uses the inherited socket's own port.
    let (cookie, _) = login_with(port, &link);
    let s = http(port, "GET", "/api/v1/session", &[("Authorization", &cookie)], "").unwrap();
    assert_eq!(s.status, 200);
}

#[test]
fn refuses_an_inherited_socket_that_is_not_loopback() {
    let dir = data_dir();
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let child = spawn_inheriting(&listener, "1", &dir);
    let out = child_output(child);
    assert!(!out.0.success());
    assert!(out.1.contains("only on loopback"), "{}", out.1);
}

#[test]
fn refuses_a_wrong_listen_fds_count() {
    let dir = data_dir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_inheriting(&listener, "2", &dir);
    let out = child_output(child);
    assert!(!out.0.success());
    assert!(out.1.contains("exactly one inherited listening socket"), "{}", out.1);
}

fn child_output(mut guard: Guard) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let status = wait_for("labfy-server to exit", || guard.0.try_wait().unwrap());
    let mut err = String::new();
    guard.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status, err)
}

/// SPEC T5, for real, over sockets: a header that never ends and an idle
/// keep-alive connection are closed by the server; past the connection cap
/// the oldest unproven connections are closed while one that proved itself
/// with a session keeps being served; slow request bodies fill the changes'
/// pool only — the page and the reads still answer. (An announced oversized
/// body: `tests/http.rs`; a reconnecting flood from another uid:
/// `another_uid_s_reconnecting_flood_leaves_the_analyst_served`.)
#[test]
fn the_http_surface_keeps_serving_under_abuse() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    let dir = data_dir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut child = spawn_inheriting(&listener, "1", &dir);
    let link = printed_link(&mut child);
    wait_for("the server to answer", || http(port, "GET", "/", &[], "").ok());
    let open = || {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s
    };
    // How long until the server closes `s` (reads to EOF or an error).
    let closed_after = |mut s: TcpStream| {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        start.elapsed()
    };

    // 1. A header that never ends.
    let mut partial = open();
    partial.write_all(format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ").as_bytes()).unwrap();
    let slow_header = std::thread::spawn(move || closed_after(partial));
    // 2. An idle keep-alive connection after one answered request.
    let mut idle = open();
    // 3. The connection cap: one keep-alive connection held first and
    //    proven with the analyst's session, then more connections than the
    //    cap.
    let (cookie, csrf) = login_with(port, &link);
    let mut held = open();
    // One request (204 for the favicon; a HEAD of the session) on `s`, with
    // `extra` header lines: its status line.
    let ask_with = |s: &mut TcpStream, target: &str, extra: &str| -> std::io::Result<String> {
        s.write_all(format!("{target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}\r\n").as_bytes())?;
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            head.push(b[0]);
        }
        Ok(String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned())
    };
    let ask = |s: &mut TcpStream| ask_with(s, "GET /favicon.ico", "");
    let session = format!("Authorization: {cookie}\r\n");
    assert_eq!(ask_with(&mut held, "HEAD /api/v1/session", &session).unwrap(), "HTTP/1.1 200 OK");
    assert_eq!(ask(&mut idle).unwrap(), "HTTP/1.1 204 No Content");
    let idle_close = std::thread::spawn(move || closed_after(idle));
    let flood: Vec<TcpStream> = (0..labfy_server::http::MAX_CONNECTIONS + 40).map(|_| open()).collect();
    std::thread::sleep(Duration::from_millis(500));
    // The oldest unproven connections made room for the newest: the first
    // 40 of the flood (and the idle and never-ending ones before them).
    let closed: Vec<bool> = flood
        .iter()
        .map(|s| {
            s.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            matches!((&*s).read(&mut b), Ok(0))
        })
        .collect();
    let displaced = closed.iter().filter(|c| **c).count();
    assert!(closed[..40].iter().all(|c| *c), "the oldest connections were not the ones closed ({displaced} closed)");
    assert!(!closed[closed.len() - 1], "the newest connection was closed");
    assert_eq!(ask(&mut held).expect("the proven connection is still served"), "HTTP/1.1 204 No Content");
    drop(flood);

    // 4. Slow bodies: more never-finishing POSTs with the session than the
    //    changes' pool holds.
    let inv = first_investigation(port, &cookie);
    let mut slow = Vec::new();
    for _ in 0..labfy_server::MAX_CONCURRENT_CHANGES + 8 {
        let mut s = open();
        s.write_all(
            format!(
                "POST /api/v1/investigations/{inv}/evidence HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
                 Authorization: {cookie}\r\nOrigin: http://127.0.0.1:{port}\r\nX-CSRF-Token: {csrf}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{"
            )
            .as_bytes(),
        )
        .unwrap();
        slow.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    for path in ["/", "/api/v1/session"] {
        let a = http(port, "GET", path, &[("Authorization", &cookie)], "").unwrap();
        assert_eq!(a.status, 200, "{path} starved by slow bodies: {}", a.body);
    }
    drop(slow);

    // The two timers, bounded (not measured: a generous upper bound).
    let header = slow_header.join().unwrap();
    assert!(
        header < labfy_server::http::HEADER_READ_TIMEOUT + Duration::from_secs(10),
        "a never-ending header held its connection {header:?}"
    );
    // An unproven keep-alive connection waiting for its next request closes
    // at the first-request deadline, or when the cap needs its place.
    let idle = idle_close.join().unwrap();
    assert!(
        idle < labfy_server::http::HEADER_READ_TIMEOUT + Duration::from_secs(10),
        "an idle keep-alive connection lived {idle:?}"
    );
}

/// SPEC V2 (red team 3, F2 and D6): another local uid keeps 600, then 4,500
/// idle connections to the UI's port, reopening each one as soon as the
/// server closes it, while the analyst makes one request with a valid
/// session per fresh connection, as a browser's new connections do. Every
/// one of them is answered, and the server never holds more than its cap.
/// The analyst's p50 latency under each flood is printed beside the idle one
/// (measured, not asserted). Needs root, to open the flood as uid 65534.
#[test]
fn another_uid_s_reconnecting_flood_leaves_the_analyst_served() {
    use std::time::{Duration, Instant};

    use labfy_testkit::flood::{Flood, held_connections};

    assert!(is_root(), "this test opens its flood as another uid (65534): run it as root");
    let dir = data_dir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut child = spawn_inheriting(&listener, "1", &dir);
    let link = printed_link(&mut child);
    wait_for("the server to answer", || http(port, "GET", "/", &[], "").ok());
    let (cookie, _) = login_with(port, &link);
    let server = child.0.id();
    let cap = labfy_server::http::MAX_CONNECTIONS;

    // `n` requests, one fresh connection each, 100 ms apart: their latencies
    // and the most connections the server held meanwhile.
    let analyst = |n: usize| -> (Vec<Duration>, usize) {
        let mut took = Vec::new();
        let mut most_held = 0;
        for _ in 0..n {
            let start = Instant::now();
            let (status, session) = get(port, &cookie, "/api/v1/session");
            took.push(start.elapsed());
            assert_eq!(status, 200, "the analyst's request {} was not answered: {session}", took.len());
            most_held = most_held.max(held_connections(server, port));
            std::thread::sleep(Duration::from_millis(100));
        }
        took.sort();
        (took, most_held)
    };
    let (idle, _) = analyst(20);
    let mut figures = vec![format!("idle: p50 {:?} (20 requests)", idle[idle.len() / 2])];
    for n in [600, 4_500] {
        let flood = Flood::start(port, n, Some(65534)).unwrap();
        let n64 = n as u64;
        flood.wait_until("the flood is up and pressing on the cap", Duration::from_secs(120), |opened, closed| {
            opened >= n64 && closed >= n64
        });
        let (start, opened) = (Instant::now(), flood.opened());
        let (took, most_held) = analyst(30);
        let rate = (flood.opened() - opened) as f64 / start.elapsed().as_secs_f64();
        // The count read from /proc here is a figure, not a proof: it has
        // been seen well under the cap while the flood pressed on it. The
        // cap itself is proven by labfy-http's own test
        // (`at_the_cap_a_fresh_connection_that_proves_itself_is_always_served`).
        figures.push(format!(
            "{n} connections from uid 65534: p50 {:?}, max {:?} (30 requests; the flood reopened {rate:.0} connections/s; \
             connections seen held: at most {most_held}, cap {cap})",
            took[took.len() / 2],
            took[took.len() - 1]
        ));
    }
    println!("the analyst's fresh-connection GET /api/v1/session — {}", figures.join("; "));
}
