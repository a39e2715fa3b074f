//! The parent's side of the worker: start it on one stored file, wait for
//! its reply within the caller's deadline, read at most a bounded reply,
//! check it ([`Reply::check`]). Whatever happens to the worker, the caller
//! gets a [`Parsed`]: a worker that died, overran or answered nonsense
//! leaves the document kept as binary with the reason in its notes.

use std::fs::File;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::worker::args;
use crate::{MAX_TEXT_BYTES, Parsed, Reply};

/// Media type of a document no worker could read.
const UNREAD_MIME: &str = "application/octet-stream";

/// Why a worker gave no usable reply, in words for the import report
/// (Linux signal numbers: SIGSYS 31 from seccomp, SIGKILL 9 from the
/// watchdog or the kernel, SIGXCPU 24 from `RLIMIT_CPU`, SIGABRT 6 from a
/// failed allocation under `RLIMIT_AS`).
fn death(status: std::process::ExitStatus) -> String {
    match status.signal() {
        Some(31) => "the parser made a forbidden system call and was stopped".into(),
        Some(9) => "the parser ran out of time or memory and was stopped".into(),
        Some(24) => "the parser used up its CPU time and was stopped".into(),
        Some(6) => "the parser aborted (memory limit?)".into(),
        Some(s) => format!("the parser was stopped by signal {s}"),
        None => format!("the parser exited with status {}", status.code().unwrap_or(-1)),
    }
}

/// Parses `input` (a stored file of `input_len` bytes, named `name`, with
/// the `charset` its transport declared, if any) in a
/// worker started from `program` (a Labfy program that calls
/// [`crate::worker::run_if_worker`] first), waiting at most `wall`
/// ([`crate::worker::WORKER_WALL_SECONDS`] for `labfy import`; the workspace server's is
/// shorter than its requests' own deadline).
pub fn parse_confined(
    program: &Path,
    input: File,
    input_len: u64,
    name: &str,
    charset: Option<&str>,
    wall: Duration,
) -> Parsed {
    let mut child = match Command::new(program)
        .args(args(0, 1, input_len, name, charset))
        .env_clear()
        .stdin(Stdio::from(input))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Parsed::unread(UNREAD_MIME, &format!("the parser could not start: {e}")),
    };
    let Some(mut out) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Parsed::unread(UNREAD_MIME, "the parser's output was not connected");
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
        let _ = child.kill();
        (true, child.wait())
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
