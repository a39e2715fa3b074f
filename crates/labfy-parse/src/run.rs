//! The parent's side of the worker: start it on one stored file, wait for
//! its reply within the caller's deadline, read at most a bounded reply,
//! check it ([`Reply::check`]). Whatever happens to the worker, the caller
//! gets a [`Parsed`]: a worker that died, overran or answered nonsense
//! leaves the document kept as binary with the reason in its notes.
//!
//! Two ways to start it (SPEC V3): [`parse_confined`], a plain child of a
//! caller that is confined already (the workspace server: the worker shares
//! its jail), and [`parse_jailed`], a child in a jail of its own
//! ([`labfy_sys::worker::jail`]: namespaces, a minimal root, no network) for
//! a caller that is not (`labfy import` on the host). Either way the worker
//! then confines itself ([`labfy_sys::worker::confine_self`]) and speaks the
//! same protocol ([`crate::worker::args`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use labfy_sys::ConfinedChild;

use crate::worker::args;
use crate::{MAX_TEXT_BYTES, Parsed, Reply};

/// Media type of a document no worker could read.
const UNREAD_MIME: &str = "application/octet-stream";
/// The descriptor a jailed worker reads its document on (its stdin is
/// `/dev/null`; its stdout is the reply pipe, as for a plain child).
const JAILED_INPUT_FD: i32 = 3;

/// Why a worker gave no usable reply, in words for the import report
/// (Linux signal numbers: SIGSYS 31 from seccomp, SIGKILL 9 from the
/// watchdog or the kernel, SIGXCPU 24 from `RLIMIT_CPU`, SIGABRT 6 from a
/// failed allocation under `RLIMIT_AS` — SIGSEGV 11 for a jailed worker,
/// which is PID 1 of its namespace: the kernel ignores its own SIGABRT, and
/// `abort()` then faults).
fn death(status: ExitStatus) -> String {
    match status.signal() {
        Some(31) => "the parser made a forbidden system call and was stopped".into(),
        Some(9) => "the parser ran out of time or memory and was stopped".into(),
        Some(24) => "the parser used up its CPU time and was stopped".into(),
        Some(6) => "the parser aborted (memory limit?)".into(),
        Some(11) => "the parser crashed or aborted (memory limit?)".into(),
        Some(s) => format!("the parser was stopped by signal {s}"),
        None => format!("the parser exited with status {}", status.code().unwrap_or(-1)),
    }
}

/// How a worker is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// A plain child, in the caller's own jail.
    Child,
    /// A child in a jail of its own.
    OwnJail,
}

/// A started worker: a plain child or a jailed one.
enum Worker {
    Child(Child),
    Jailed(ConfinedChild),
}

impl Worker {
    /// Starts a worker from `program` on `input`; returns it and the read
    /// end of its reply.
    fn start(
        how: Start,
        program: &Path,
        input: File,
        input_len: u64,
        name: &str,
        charset: Option<&str>,
    ) -> Result<(Self, File), String> {
        match how {
            Start::Child => {
                let mut child = Command::new(program)
                    .args(args(0, 1, input_len, name, charset))
                    .env_clear()
                    .stdin(Stdio::from(input))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| format!("the parser could not start: {e}"))?;
                match child.stdout.take() {
                    Some(out) => Ok((Self::Child(child), File::from(OwnedFd::from(out)))),
                    None => {
                        let _ = child.kill();
                        let _ = child.wait();
                        Err("the parser's output was not connected".into())
                    }
                }
            }
            Start::OwnJail => {
                let (reply, reply_end) = labfy_sys::pipe().map_err(|e| format!("the parser could not start: {e}"))?;
                let null = OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .map_err(|e| format!("the parser could not start: /dev/null: {e}"))?;
                let mut jail =
                    labfy_sys::worker::jail(program).map_err(|e| format!("the parser could not be confined: {e}"))?;
                jail.args(args(JAILED_INPUT_FD, 1, input_len, name, charset))
                    .pass_fd(input.as_raw_fd(), JAILED_INPUT_FD)
                    .streams(reply_end.as_raw_fd(), null.as_raw_fd());
                // The child holds its own copies from here: ours close, so
                // the reply's end comes when the worker's does.
                let (child, _) = jail.spawn().map_err(|e| format!("the parser could not be confined: {e}"))?;
                drop((reply_end, null, input));
                Ok((Self::Jailed(child), reply))
            }
        }
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Self::Child(c) => c.try_wait(),
            Self::Jailed(c) => c.try_wait(),
        }
    }

    /// SIGKILL, then the exit.
    fn kill(&mut self) -> io::Result<ExitStatus> {
        match self {
            Self::Child(c) => {
                let _ = c.kill();
                c.wait()
            }
            Self::Jailed(c) => {
                c.start_kill()?;
                loop {
                    if let Some(status) = c.try_wait()? {
                        return Ok(status);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

/// Parses `input` (a stored file of `input_len` bytes, named `name`, with
/// the `charset` its transport declared, if any) in a worker started from
/// `program` (a Labfy program that calls [`crate::worker::run_if_worker`]
/// first) as a plain child of the caller, which is confined already (the
/// workspace server: the worker keeps its namespaces, root and filter, and
/// stacks its own on them), waiting at most `wall` (the workspace server's
/// is shorter than its requests' own deadline). A caller that is not
/// confined uses [`parse_jailed`].
pub fn parse_confined(
    program: &Path,
    input: File,
    input_len: u64,
    name: &str,
    charset: Option<&str>,
    wall: Duration,
) -> Parsed {
    parse(Start::Child, program, input, input_len, name, charset, wall)
}

/// [`parse_confined`] for a caller that is not confined itself (`labfy
/// import` on the host, SPEC V3; `wall` is
/// [`crate::worker::WORKER_WALL_SECONDS`] there): the worker starts in a
/// jail of its own ([`labfy_sys::worker::jail`]). A worker that cannot be
/// jailed is not started: the document is kept unread, with the step that
/// failed.
pub fn parse_jailed(
    program: &Path,
    input: File,
    input_len: u64,
    name: &str,
    charset: Option<&str>,
    wall: Duration,
) -> Parsed {
    parse(Start::OwnJail, program, input, input_len, name, charset, wall)
}

fn parse(
    how: Start,
    program: &Path,
    input: File,
    input_len: u64,
    name: &str,
    charset: Option<&str>,
    wall: Duration,
) -> Parsed {
    let (mut child, mut out) = match Worker::start(how, program, input, input_len, name, charset) {
        Ok(started) => started,
        Err(why) => return Parsed::unread(UNREAD_MIME, &why),
    };
    // The watchdog owns the worker: it kills it at the deadline (the reader
    // below then sees the end of its output), and reaps it.
    let deadline = Instant::now() + wall;
    let (done, stop) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let timed_out = stop.recv_timeout(wall).is_err();
        // The output is closed: give the worker until the deadline to exit.
        while !timed_out && Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => return (false, Ok(status)),
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => return (false, Err(e)),
            }
        }
        (true, child.kill())
    });
    let max_reply = MAX_TEXT_BYTES as u64 + input_len.saturating_mul(2) + (1 << 20);
    let mut reply = Vec::new();
    let read = (&mut out).take(max_reply + 1).read_to_end(&mut reply);
    drop(out);
    let _ = done.send(());
    let Ok((timed_out, status)) = watchdog.join() else {
        return Parsed::unread(UNREAD_MIME, "the parser's watchdog failed");
    };
    if timed_out {
        return Parsed::unread(
            UNREAD_MIME,
            &format!("the parser took longer than {} s and was stopped", wall.as_secs()),
        );
    }
    if read.is_err() || reply.len() as u64 > max_reply {
        return Parsed::unread(UNREAD_MIME, "the parser's reply was unreadable or too large");
    }
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => return Parsed::unread(UNREAD_MIME, &death(s)),
        Err(e) => return Parsed::unread(UNREAD_MIME, &format!("the parser could not be waited for: {e}")),
    }
    match Reply::check(&reply, input_len as usize) {
        Ok(Reply::Parsed(p)) => p,
        Ok(Reply::Refused(why)) => Parsed::unread(UNREAD_MIME, &why),
        Err(e) => Parsed::unread(UNREAD_MIME, &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A stand-in worker: a shell script that does `body`.
    fn worker(dir: &Path, body: &str) -> std::path::PathBuf {
        let path = dir.join("worker.sh");
        let mut f = File::create(&path).expect("script");
        writeln!(f, "#!/bin/sh\n{body}").expect("write");
        drop(f);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    fn input(dir: &Path) -> File {
        let p = dir.join("input");
        std::fs::write(&p, b"hello").expect("input");
        File::open(p).expect("open")
    }

    fn note(p: &Parsed) -> &str {
        p.notes.first().map(String::as_str).unwrap_or("")
    }

    #[test]
    fn a_worker_past_its_deadline_is_killed_and_the_file_kept_unread() {
        let dir = tempfile::tempdir().expect("tmp");
        let w = worker(dir.path(), "exec sleep 30");
        let started = Instant::now();
        let p = parse_confined(&w, input(dir.path()), 5, "a.txt", None, Duration::from_millis(300));
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(p.format, crate::Format::Binary);
        assert!(note(&p).contains("took longer than"), "{:?}", p.notes);
    }

    #[test]
    fn a_worker_that_lies_or_dies_leaves_the_file_unread_with_the_reason() {
        let dir = tempfile::tempdir().expect("tmp");
        let lies = worker(
            dir.path(),
            r#"printf '{"parsed":{"format":"text","mime":"text/plain","title":"\u001b[2J","text":"x","encoding":null,"metadata":{},"children":[],"notes":[]}}'"#,
        );
        let p = parse_confined(&lies, input(dir.path()), 5, "a.txt", None, Duration::from_secs(10));
        assert!(note(&p).contains("control characters"), "{:?}", p.notes);
        let dir = tempfile::tempdir().expect("tmp");
        let dies = worker(dir.path(), "kill -SYS $$");
        let p = parse_confined(&dies, input(dir.path()), 5, "a.txt", None, Duration::from_secs(10));
        assert!(note(&p).contains("forbidden system call"), "{:?}", p.notes);
        let dir = tempfile::tempdir().expect("tmp");
        let exits = worker(dir.path(), "exit 3");
        let p = parse_confined(&exits, input(dir.path()), 5, "a.txt", None, Duration::from_secs(10));
        assert!(note(&p).contains("status 3"), "{:?}", p.notes);
        let p = parse_confined(&dir.path().join("absent"), input(dir.path()), 5, "a.txt", None, Duration::from_secs(1));
        assert!(note(&p).contains("could not start"), "{:?}", p.notes);
    }
}
