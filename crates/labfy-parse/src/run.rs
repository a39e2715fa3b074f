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

use std::fs::File;
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
pub(crate) fn death(status: ExitStatus) -> String {
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
pub(crate) enum Start {
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
    /// Starts a child from `program` on `input`, with the arguments
    /// `child_args` makes from its input and output descriptors; returns it,
    /// the read end of its output and the read end of its standard error.
    fn start(
        how: Start,
        program: &Path,
        input: File,
        child_args: &dyn Fn(i32, i32) -> Vec<String>,
    ) -> Result<(Self, File, File), String> {
        match how {
            Start::Child => {
                let mut child = Command::new(program)
                    .args(child_args(0, 1))
                    .env_clear()
                    .stdin(Stdio::from(input))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("the parser could not start: {e}"))?;
                match (child.stdout.take(), child.stderr.take()) {
                    (Some(out), Some(err)) => {
                        Ok((Self::Child(child), File::from(OwnedFd::from(out)), File::from(OwnedFd::from(err))))
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        Err("the parser's output was not connected".into())
                    }
                }
            }
            Start::OwnJail => {
                let (reply, reply_end) = labfy_sys::pipe().map_err(|e| format!("the parser could not start: {e}"))?;
                let (err, err_end) = labfy_sys::pipe().map_err(|e| format!("the parser could not start: {e}"))?;
                let mut jail =
                    labfy_sys::worker::jail(program).map_err(|e| format!("the parser could not be confined: {e}"))?;
                jail.args(child_args(JAILED_INPUT_FD, 1))
                    .pass_fd(input.as_raw_fd(), JAILED_INPUT_FD)
                    .streams(reply_end.as_raw_fd(), err_end.as_raw_fd());
                // The child holds its own copies from here: ours close, so
                // the output's end comes when the child's does.
                let (child, _) = jail.spawn().map_err(|e| format!("the parser could not be confined: {e}"))?;
                drop((reply_end, err_end, input));
                Ok((Self::Jailed(child), reply, err))
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
/// `program` (a Labfy program that calls [`crate::run_if_child`]
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

/// What a child left: its output (at most the bound asked for, and
/// whether it wrote more), the first of its error output, how it ended.
pub(crate) struct Exchange {
    pub(crate) out: Vec<u8>,
    pub(crate) over: bool,
    pub(crate) err: String,
    pub(crate) status: ExitStatus,
}

/// Most of a child's error output kept (the first line says why a tool
/// failed: « Incorrect password »).
const MAX_ERR_BYTES: u64 = 4096;

/// Runs one child on `input` until it ends or `deadline` passes (then it is
/// killed: `Err`), reading at most `max_out` bytes of its output (the rest
/// is read and dropped, so the child is not left blocked).
pub(crate) fn exchange(
    how: Start,
    program: &Path,
    input: File,
    child_args: &dyn Fn(i32, i32) -> Vec<String>,
    deadline: Instant,
    max_out: u64,
) -> Result<Exchange, String> {
    let wall = deadline.saturating_duration_since(Instant::now());
    let (mut child, mut out, mut err) = Worker::start(how, program, input, child_args)?;
    // The watchdog owns the child: it kills it at the deadline (the reader
    // below then sees the end of its output), and reaps it.
    let (done, stop) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let timed_out = stop.recv_timeout(wall).is_err();
        // The output is closed: give the child until the deadline to exit.
        while !timed_out && Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => return (false, Ok(status)),
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => return (false, Err(e)),
            }
        }
        (true, child.kill())
    });
    let errors = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut err).take(MAX_ERR_BYTES).read_to_end(&mut kept);
        let _ = io::copy(&mut err, &mut io::sink());
        String::from_utf8_lossy(&kept).into_owned()
    });
    let mut bytes = Vec::new();
    let read = (&mut out).take(max_out).read_to_end(&mut bytes);
    let over = read.is_ok() && io::copy(&mut out, &mut io::sink()).is_ok_and(|n| n > 0);
    drop(out);
    let _ = done.send(());
    let Ok((timed_out, status)) = watchdog.join() else {
        return Err("the parser's watchdog failed".into());
    };
    let err = errors.join().unwrap_or_default();
    if timed_out {
        return Err(format!("the parser took longer than {} s and was stopped", wall.as_secs()));
    }
    if read.is_err() {
        return Err("the parser's output was unreadable".into());
    }
    let status = status.map_err(|e| format!("the parser could not be waited for: {e}"))?;
    Ok(Exchange { out: bytes, over, err, status })
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
    let deadline = Instant::now() + wall;
    if crate::pdf::is_pdf(&input) && crate::pdf::tools_installed() {
        return crate::pdf::read(how, program, input, input_len, deadline);
    }
    let again = input.try_clone().ok();
    let mut p = worker(how, program, input, input_len, name, charset, deadline);
    if p.format == crate::Format::Pdf {
        p.notes.push(crate::pdf::NO_POPPLER.into());
    }
    match (crate::ocr::wanted(&p), again) {
        (Some(tool), Some(again)) => crate::ocr::image(how, program, &again, p, tool, deadline),
        _ => p,
    }
}

/// The document read by the parser worker ([`crate::worker`]).
pub(crate) fn worker(
    how: Start,
    program: &Path,
    input: File,
    input_len: u64,
    name: &str,
    charset: Option<&str>,
    deadline: Instant,
) -> Parsed {
    let max_reply = MAX_TEXT_BYTES as u64 + input_len.saturating_mul(2) + (1 << 20);
    let child_args = |i, o| args(i, o, input_len, name, charset);
    let x = match exchange(how, program, input, &child_args, deadline, max_reply) {
        Ok(x) => x,
        Err(why) => return Parsed::unread(UNREAD_MIME, &why),
    };
    if x.over {
        return Parsed::unread(UNREAD_MIME, "the parser's reply was unreadable or too large");
    }
    if !x.status.success() {
        return Parsed::unread(UNREAD_MIME, &death(x.status));
    }
    match Reply::check(&x.out, input_len as usize) {
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
