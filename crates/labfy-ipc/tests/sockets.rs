//! Real Unix sockets: authentication, refusals, bad frames — and the daemon
//! keeps serving others after each.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use labfy_ipc::auth::{AllowedPids, PeerPolicy};
use labfy_ipc::client::Client;
use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
use labfy_ipc::messages::{Boundary, Health, Role};
use labfy_ipc::secret::{self, Secret};
use labfy_ipc::server::{self, Stats};
use labfy_ipc::{IpcError, MAX_FRAME_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Daemon {
    _dir: tempfile::TempDir,
    path: PathBuf,
    secret: Secret,
    stats: Arc<Stats>,
}

fn my_uid() -> u32 {
    std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m)).unwrap()
}

async fn daemon(uid: u32, pids: Option<AllowedPids>) -> Daemon {
    let dir = tempfile::TempDir::new().unwrap();
    let run = dir.path().join("run");
    secret::create_private_dir(&run).unwrap();
    let secret = secret::create_secret(&run).unwrap();
    let path = run.join("control.sock");
    let listener = server::bind(&path).unwrap();
    let stats = Arc::new(Stats::default());
    let policy = PeerPolicy {
        boundary: Boundary::Control,
        uid,
        pids,
        secret: secret::read_secret(&run).unwrap(),
        handshake_timeout: Duration::from_millis(300),
    };
    tokio::spawn(server::serve(listener, policy, stats.clone(), |req: ControlRequest, _peer| async move {
        match req {
            ControlRequest::Health {} => ControlResponse::Health(Health {
                role: Role::Governor,
                pid: std::process::id(),
                uptime_ms: 1,
                ready: true,
                detail: "ok".into(),
                switch_to: None,
            }),
            ControlRequest::Shutdown {} => ControlResponse::ShuttingDown {},
            ControlRequest::SetPeers { .. } => ControlResponse::PeersSet {},
            ControlRequest::Status {} => ControlResponse::Status { children: Vec::new() },
        }
    }));
    Daemon { _dir: dir, path, secret, stats }
}

async fn healthy(d: &Daemon) {
    let mut c: Client<ControlRequest, ControlResponse> =
        Client::connect(&d.path, Boundary::Control, &d.secret).await.unwrap();
    for _ in 0..3 {
        assert!(matches!(c.call(ControlRequest::Health {}).await.unwrap(), ControlResponse::Health(h) if h.ready));
    }
}

#[tokio::test]
async fn an_authenticated_peer_gets_answers() {
    let d = daemon(my_uid(), None).await;
    healthy(&d).await;
    let mode = std::fs::metadata(&d.path).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions())).unwrap();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(d.stats.accepted.load(Ordering::Relaxed), 1);
    assert_eq!(d.stats.answered.load(Ordering::Relaxed), 3);
}

#[tokio::test]
async fn wrong_secret_boundary_uid_or_pid_is_refused_and_others_still_served() {
    let d = daemon(my_uid(), None).await;
    let err = Client::<ControlRequest, ControlResponse>::connect(&d.path, Boundary::Control, &Secret::generate())
        .await
        .err()
        .unwrap();
    assert!(matches!(&err, IpcError::Refused(r) if r == "wrong secret"), "{err}");
    let err =
        Client::<ControlRequest, ControlResponse>::connect(&d.path, Boundary::Egress, &d.secret).await.err().unwrap();
    assert!(matches!(&err, IpcError::Refused(r) if r.contains("serves Control")), "{err}");
    healthy(&d).await;
    assert_eq!(d.stats.refused.load(Ordering::Relaxed), 2);

    let other_uid = daemon(my_uid() + 1, None).await;
    let err = Client::<ControlRequest, ControlResponse>::connect(&other_uid.path, Boundary::Control, &other_uid.secret)
        .await
        .err()
        .unwrap();
    assert!(matches!(&err, IpcError::Refused(r) if r.contains("uid")), "{err}");

    let pids = AllowedPids::default();
    pids.insert(1); // not us
    let d = daemon(my_uid(), Some(pids.clone())).await;
    let err =
        Client::<ControlRequest, ControlResponse>::connect(&d.path, Boundary::Control, &d.secret).await.err().unwrap();
    assert!(matches!(&err, IpcError::Refused(r) if r.contains("not a process Labfy started")), "{err}");
    pids.insert(std::process::id() as i32);
    healthy(&d).await;
}

#[tokio::test]
async fn wrong_protocol_and_malformed_hello_are_refused() {
    let d = daemon(my_uid(), None).await;
    for hello in [
        format!(r#"{{"protocol":99,"boundary":"control","secret":"{}"}}"#, d.secret.to_hex()),
        format!(r#"{{"protocol":1,"boundary":"control","secret":"{}","admin":true}}"#, d.secret.to_hex()),
        "[1,2,3]".to_owned(),
    ] {
        let mut s = tokio::net::UnixStream::connect(&d.path).await.unwrap();
        s.write_all(&(hello.len() as u32).to_be_bytes()).await.unwrap();
        s.write_all(hello.as_bytes()).await.unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).await.unwrap();
        let text = String::from_utf8_lossy(&reply[4..]).into_owned();
        assert!(text.contains("\"refused\""), "{hello}: {text}");
    }
    healthy(&d).await;
    assert_eq!(d.stats.refused.load(Ordering::Relaxed), 3);
}

#[tokio::test]
async fn oversized_malformed_and_silent_peers_lose_only_their_connection() {
    let d = daemon(my_uid(), None).await;
    // Oversized announcement after authentication.
    let mut c: Client<ControlRequest, ControlResponse> =
        Client::connect(&d.path, Boundary::Control, &d.secret).await.unwrap();
    c.stream_mut().write_all(&(MAX_FRAME_BYTES + 1).to_be_bytes()).await.unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(c.stream_mut().read(&mut buf).await.unwrap(), 0, "connection should be closed");
    // Malformed request.
    let mut c: Client<ControlRequest, ControlResponse> =
        Client::connect(&d.path, Boundary::Control, &d.secret).await.unwrap();
    let junk = br#"{"id":1,"body":{"type":"format_disk"}}"#;
    c.stream_mut().write_all(&(junk.len() as u32).to_be_bytes()).await.unwrap();
    c.stream_mut().write_all(junk).await.unwrap();
    assert_eq!(c.stream_mut().read(&mut buf).await.unwrap(), 0, "connection should be closed");
    // Silent before Hello: closed after the handshake timeout.
    let mut s = tokio::net::UnixStream::connect(&d.path).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await.unwrap().unwrap();
    assert_eq!(n, 0);
    healthy(&d).await;
    assert_eq!(d.stats.dropped.load(Ordering::Relaxed), 2);
    assert_eq!(d.stats.refused.load(Ordering::Relaxed), 1);
}

/// The log lines a test's tasks write (one current-thread runtime: the
/// serving task runs on the test's thread).
#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// SPEC V6: a process that can reach the socket makes as many refused
/// connections as it likes; the log says so once, then counts, instead of
/// one warning each (the refusals themselves are all counted in the stats).
#[tokio::test]
async fn a_flood_of_refused_peers_is_logged_once_then_counted() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let d = daemon(my_uid(), None).await;
    for _ in 0..40 {
        let err = Client::<ControlRequest, ControlResponse>::connect(&d.path, Boundary::Control, &Secret::generate())
            .await
            .err()
            .unwrap();
        assert!(matches!(&err, IpcError::Refused(r) if r == "wrong secret"), "{err}");
    }
    healthy(&d).await;
    // Let the serving tasks finish logging their connections.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(d.stats.refused.load(Ordering::Relaxed), 40);
    let log = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert_eq!(log.matches("IPC connection closed").count(), 1, "{log}");
}
