//! The parser worker: a child process started by the workspace server (in
//! the server's jail) or by `labfy import` (in a jail of its own,
//! `labfy_sys::worker::jail`, SPEC V3) with its own program and
//! [`WORKER_ARG`]. It confines itself before reading (`labfy_sys::worker`:
//! limits, no new privileges, a compute-only seccomp filter that lets it
//! signal nothing but itself), reads one document on its input descriptor,
//! and writes one [`Reply`] as JSON on its output descriptor.
//! A panic, an allocation over the limit, a system call outside the filter:
//! the process dies, and the parent reports the document unread.

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::panic::{AssertUnwindSafe, catch_unwind};

use labfy_sys::worker::{WorkerLimits, confine_self, inherited};

use crate::{Reply, parse_declared};

/// First argument that makes a Labfy program the parser worker.
pub const WORKER_ARG: &str = "__labfy-parse-worker";
/// Address space of a worker.
pub const WORKER_MEMORY_BYTES: u64 = 1 << 30;
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

/// If this process was started as a worker (`argv[1]` is [`WORKER_ARG`]),
/// runs it and exits; otherwise returns. Call it first in `main`.
pub fn run_if_worker() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) != Some(WORKER_ARG) {
        return;
    }
    std::process::exit(run(&argv[2..]));
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
    let (Ok(input), Ok(output), Ok(max)) = (input.parse::<RawFd>(), output.parse::<RawFd>(), max.parse::<u64>()) else {
        eprintln!("labfy parser worker: bad descriptor or bound");
        return 2;
    };
    // Both descriptors are taken before the filter forbids `fcntl`.
    let (mut input, mut output) = match (inherited(input), inherited(output)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("labfy parser worker: {e}");
            return 2;
        }
    };
    if let Err(e) = confine_self(WorkerLimits { memory_bytes: WORKER_MEMORY_BYTES, cpu_seconds: WORKER_CPU_SECONDS }) {
        eprintln!("labfy parser worker: {e}");
        return 3;
    }
    let mut bytes = Vec::new();
    let reply = match (&mut input).take(max + 1).read_to_end(&mut bytes) {
        Err(e) => Reply::Refused(format!("input unreadable: {e}")),
        Ok(n) if n as u64 > max => Reply::Refused(format!("larger than {max} bytes")),
        Ok(_) => match catch_unwind(AssertUnwindSafe(|| parse_declared(&bytes, name, charset))) {
            Ok(p) => Reply::Parsed(p),
            Err(_) => Reply::Parsed(crate::Parsed::unread(
                &crate::detect::binary_mime(&bytes),
                "the parser stopped on this file (panic)",
            )),
        },
    };
    match serde_json::to_vec(&reply) {
        Ok(json) if output.write_all(&json).is_ok() => 0,
        _ => 4,
    }
}
