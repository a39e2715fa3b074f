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
    cmd.arg("--data-dir").arg(dir.path()).env("LISTEN_FDS", count).stdout(Stdio::null()).stderr(Stdio::piped());
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

#[test]
fn serves_an_inherited_loopback_listener() {
    let dir = data_dir();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _child = spawn_inheriting(&listener, "1", &dir);
    // Our copy stays open, but only the child accepts on it.
    let answer = wait_for("the inherited socket to answer", || http(port, "GET", "/", &[], "").ok());
    assert_eq!(answer.status, 200);
    assert!(answer.header("set-cookie").unwrap().starts_with("labfy_session="));
    // The Host check uses the inherited socket's own port.
    let (cookie, _) = login(port);
    let s = http(port, "GET", "/api/v1/session", &[("Cookie", &cookie)], "").unwrap();
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
