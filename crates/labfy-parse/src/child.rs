//! One confined child of the parser, started and watched: the parser
//! worker ([`crate::worker`]) or a document tool ([`crate::tool`]), as a
//! plain child of a caller confined already or in a jail of its own
//! ([`Start`]); its output read within bounds, its error output's first
//! line kept, killed at the caller's deadline ([`exchange`]).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use labfy_sys::ConfinedChild;

use crate::tool::Tool;
use crate::worker::args;
use crate::{MAX_TEXT_BYTES, Parsed, Reply};

/// Media type of a document no worker could read.
pub(crate) const UNREAD_MIME: &str = "application/octet-stream";
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
pub(crate) enum Worker {
    Child(Child),
    Jailed(ConfinedChild),
}

impl Worker {
    /// Starts a child from `program` on `input`, with the arguments
    /// `child_args` makes from its input and output descriptors; returns it,
    /// the read end of its output and the read end of its standard error.
    pub(crate) fn start(
        how: Start,
        program: &Path,
        input: File,
        child_args: &dyn Fn(i32, i32) -> Vec<String>,
    ) -> Result<(Self, File, File), String> {
        Self::start_with_tmp(how, program, input, child_args, None)
    }

    /// [`Worker::start`]; a jailed child gets a `/tmp` of `tmp_bytes` when
    /// given (the document tools' runner, [`crate::session`]).
    pub(crate) fn start_with_tmp(
        how: Start,
        program: &Path,
        input: File,
        child_args: &dyn Fn(i32, i32) -> Vec<String>,
        tmp_bytes: Option<u64>,
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
                let jail = match tmp_bytes {
                    Some(bytes) => labfy_sys::worker::jail_with_tmp(program, bytes),
                    None => labfy_sys::worker::jail(program),
                };
                let mut jail = jail.map_err(|e| format!("the parser could not be confined: {e}"))?;
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

    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Self::Child(c) => c.try_wait(),
            Self::Jailed(c) => c.try_wait(),
        }
    }

    /// SIGKILL, then the exit.
    pub(crate) fn kill(&mut self) -> io::Result<ExitStatus> {
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
pub(crate) const MAX_ERR_BYTES: u64 = 4096;

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
    // Children travel as base64 (4 bytes for 3): the input's own bytes, or
    // an archive's members within its bounds.
    let children = input_len.max(crate::archive::max_inflated(input_len));
    let max_reply = MAX_TEXT_BYTES as u64 + children.saturating_mul(2) + (1 << 20);
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

/// What one tool answered on `input`, and whether it wrote more than
/// `max_out` bytes; or why it did not answer (its error output's first
/// line, or how it died).
pub(crate) fn run_tool(
    how: Start,
    program: &Path,
    input: File,
    tool: &Tool,
    deadline: Instant,
    max_out: u64,
) -> Result<(Vec<u8>, bool), String> {
    let x = exchange(how, program, input, &|i, o| crate::tool::args(i, o, tool), deadline, max_out)?;
    if !x.status.success() {
        let said = x.err.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("Syntax Warning"));
        return Err(match (x.status.code(), said) {
            (Some(_), Some(line)) => format!("{}: {}", tool.program(), crate::clean(line, 200)),
            _ => format!("{}: {}", tool.program(), death(x.status)),
        });
    }
    Ok((x.out, x.over))
}

/// `input` again from its first byte, for one more child (children read
/// their document through a shared offset).
pub(crate) fn rewound(input: &File) -> Result<File, String> {
    let mut f = input.try_clone().map_err(|e| format!("the document could not be read again: {e}"))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| format!("the document could not be read again: {e}"))?;
    Ok(f)
}
