//! The parser worker: a child process started by the workspace server (in
//! the server's jail) or by `labfy import` (in a jail of its own,
//! `labfy_sys::worker::jail`, SPEC V3) with its own program and
//! [`WORKER_ARG`]. It confines itself before reading (`labfy_sys::worker`:
//! limits, no new privileges, a compute-only seccomp filter that lets it
//! signal nothing but itself), reads one document on its input descriptor,
//! and writes one [`Reply`] as JSON on its output descriptor.
//! A panic, an allocation over the limit, a system call outside the filter:
//! the process dies, and the parent reports the document unread.

use std::io::{self, Read, Write};
use std::os::fd::RawFd;
use std::panic::{AssertUnwindSafe, catch_unwind};

use labfy_sys::worker::{WorkerLimits, confine_self, inherited};

use serde::{Deserialize, Serialize};

use crate::{Reply, parse_declared};

/// First argument that makes a Labfy program the parser worker.
pub const WORKER_ARG: &str = "__labfy-parse-worker";
/// Address space of a worker.
pub const WORKER_MEMORY_BYTES: u64 = 1 << 30;
/// RAM the governor reserves for one parser worker and the tool it runs
/// (SPEC A1, I1): what they hold, not their address-space bounds — measured
/// here under 80 MiB resident for Tesseract on a 300 dpi page and 11 MiB for
/// `pdftotext`, the worker itself some tens of MiB.
pub const RAM_PER_WORKER_BYTES: u64 = 512 << 20;
/// CPU time of a worker, in seconds (the parent's wall-clock deadline is
/// [`WORKER_WALL_SECONDS`]).
pub const WORKER_CPU_SECONDS: u64 = 20;
/// How long the parent waits for a worker's reply.
pub const WORKER_WALL_SECONDS: u64 = 30;

/// The arguments a parent gives: `WORKER_ARG <input fd> <output fd> <max
/// input bytes> <file name> [<charset>]` — the charset its transport
/// declared, a canonical name from [`crate::charset_of`].
pub fn args(input: RawFd, output: RawFd, max_input: u64, name: &str, charset: Option<&str>) -> Vec<String> {
    let mut args =
        vec![WORKER_ARG.to_owned(), input.to_string(), output.to_string(), max_input.to_string(), name.to_owned()];
    args.extend(charset.map(str::to_owned));
    args
}

/// Second argument of a worker that serves documents one after another
/// ([`crate::session`]): `WORKER_ARG SERVE_ARG <input fd> <output fd> <max
/// input bytes>`.
pub const SERVE_ARG: &str = "serve";

/// The arguments of a serving worker ([`SERVE_ARG`]).
pub fn serve_args(input: RawFd, output: RawFd, max_input: u64) -> Vec<String> {
    vec![WORKER_ARG.to_owned(), SERVE_ARG.to_owned(), input.to_string(), output.to_string(), max_input.to_string()]
}

/// Documents one serving worker reads before it retires (a fresh process
/// then takes the next): what one document leaves in a process — its heap's
/// shape, a parser's state — reaches a bounded number of others.
pub const MAX_DOCUMENTS_PER_WORKER: u32 = 256;

/// CPU time past which a serving worker retires after its reply, so that
/// each document keeps at least `WORKER_CPU_SECONDS - RETIRE_CPU_SECONDS`
/// of its `RLIMIT_CPU`.
pub const RETIRE_CPU_SECONDS: u64 = 5;

/// If this process was started as a worker (`argv[1]` is [`WORKER_ARG`]),
/// runs it and exits; otherwise returns. Call it first in `main`.
pub fn run_if_worker() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some(WORKER_ARG) {
        return;
    }
    if argv.get(2).map(String::as_str) == Some(SERVE_ARG) {
        std::process::exit(serve(&argv[3..]));
    }
    std::process::exit(run(&argv[2..]));
}

/// Takes the two descriptors and confines this process; the exit status on
/// failure (2: bad arguments, 3: not confined).
fn take_and_confine(input: &str, output: &str) -> Result<(std::fs::File, std::fs::File), i32> {
    let (Ok(input), Ok(output)) = (input.parse::<RawFd>(), output.parse::<RawFd>()) else {
        eprintln!("labfy parser worker: bad descriptor");
        return Err(2);
    };
    // Both descriptors are taken before the filter forbids `fcntl`.
    let (input, output) = match (inherited(input), inherited(output)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("labfy parser worker: {e}");
            return Err(2);
        }
    };
    if let Err(e) = confine_self(WorkerLimits { memory_bytes: WORKER_MEMORY_BYTES, cpu_seconds: WORKER_CPU_SECONDS }) {
        eprintln!("labfy parser worker: {e}");
        return Err(3);
    }
    Ok((input, output))
}

/// Reads one document with every parser, a panic caught.
fn read_document(bytes: &[u8], name: &str, charset: Option<&str>) -> crate::Parsed {
    match catch_unwind(AssertUnwindSafe(|| parse_declared(bytes, name, charset))) {
        Ok(p) => p,
        Err(_) => crate::Parsed::unread(&crate::detect::binary_mime(bytes), "the parser stopped on this file (panic)"),
    }
}

/// Serves documents framed by [`crate::session`] until its input ends
/// (exit 0), or until it retires after [`MAX_DOCUMENTS_PER_WORKER`] or
/// [`RETIRE_CPU_SECONDS`] (exit 0, its last reply saying so); a frame out
/// of bounds ends it (exit 2), as does a reply it cannot write (exit 4).
fn serve(args: &[String]) -> i32 {
    let [input, output, max] = args else {
        eprintln!("labfy parser worker: expected serve <input fd> <output fd> <max bytes>");
        return 2;
    };
    let Ok(max) = max.parse::<u64>() else {
        eprintln!("labfy parser worker: bad bound");
        return 2;
    };
    let (mut input, mut output) = match take_and_confine(input, output) {
        Ok(fds) => fds,
        Err(code) => return code,
    };
    let mut served = 0u32;
    loop {
        let request = match read_request(&mut input, max) {
            Ok(Some(r)) => r,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("labfy parser worker: {e}");
                return 2;
            }
        };
        let parsed = read_document(&request.bytes, &request.name, request.charset.as_deref());
        served += 1;
        let last =
            served >= MAX_DOCUMENTS_PER_WORKER || labfy_sys::worker::cpu_time_used().as_secs() >= RETIRE_CPU_SECONDS;
        if write_reply(&mut output, last, &Reply::Parsed(parsed)).is_err() {
            return 4;
        }
        if last {
            return 0;
        }
    }
}

fn run(args: &[String]) -> i32 {
    let (input, output, max, name, charset) = match args {
        [i, o, m, n] => (i, o, m, n, None),
        [i, o, m, n, c] => (i, o, m, n, Some(c.as_str())),
        _ => {
            eprintln!("labfy parser worker: expected <input fd> <output fd> <max bytes> <name> [<charset>]");
            return 2;
        }
    };
    let Ok(max) = max.parse::<u64>() else {
        eprintln!("labfy parser worker: bad bound");
        return 2;
    };
    let (mut input, mut output) = match take_and_confine(input, output) {
        Ok(fds) => fds,
        Err(code) => return code,
    };
    let mut bytes = Vec::new();
    let reply = match (&mut input).take(max + 1).read_to_end(&mut bytes) {
        Err(e) => Reply::Refused(format!("input unreadable: {e}")),
        Ok(n) if n as u64 > max => Reply::Refused(format!("larger than {max} bytes")),
        Ok(_) => Reply::Parsed(read_document(&bytes, name, charset)),
    };
    match serde_json::to_vec(&reply) {
        Ok(json) if output.write_all(&json).is_ok() => 0,
        _ => 4,
    }
}

/// Longest header a worker takes.
const MAX_HEADER_BYTES: u32 = 64 << 10;

/// What the parent says of a document before its bytes, when the worker
/// serves ([`crate::session`]).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Header {
    pub(crate) name: String,
    pub(crate) charset: Option<String>,
    pub(crate) len: u64,
    /// How long the document may take, in milliseconds (the tools'
    /// runner: its tools are killed past it).
    #[serde(default)]
    pub(crate) wall_ms: u64,
}

/// A document as the worker received it.
pub(crate) struct Request {
    pub(crate) name: String,
    pub(crate) charset: Option<String>,
    pub(crate) bytes: Vec<u8>,
    pub(crate) wall_ms: u64,
}

/// Reads the next request (`None` at the end of the input, between two
/// requests); a frame out of bounds is an error.
pub(crate) fn read_request(input: &mut impl Read, max: u64) -> io::Result<Option<Request>> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_HEADER_BYTES {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("header of {len} bytes")));
    }
    let mut header = vec![0u8; len as usize];
    input.read_exact(&mut header)?;
    let header: Header = serde_json::from_slice(&header)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("header: {e}")))?;
    if header.len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("document of {} bytes > {max}", header.len)));
    }
    let mut bytes = Vec::new();
    input.take(header.len).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != header.len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "document cut short"));
    }
    Ok(Some(Request { name: header.name, charset: header.charset, bytes, wall_ms: header.wall_ms }))
}

/// Writes one reply frame.
pub(crate) fn write_reply(output: &mut impl Write, last: bool, reply: &Reply) -> io::Result<()> {
    let json = serde_json::to_vec(reply).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(json.len() + 9);
    frame.push(u8::from(last));
    frame.extend_from_slice(&(json.len() as u64).to_le_bytes());
    frame.extend_from_slice(&json);
    output.write_all(&frame)?;
    output.flush()
}
