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
//! A PDF goes to poppler instead ([`crate::pdf`]) where it is installed,
//! and an image the worker found no text in to OCR ([`crate::ocr`]).

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Parsed;
use crate::child::{Start, worker};

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
