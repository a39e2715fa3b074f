//! The document tools' runner (SPEC I1, V3): under `labfy import`, PDFs
//! are read in one jail for many documents rather than a jail per tool.
//! Started by [`crate::session`] in a jail of its own, it reads each framed
//! PDF as the workspace server does ([`crate::pdf::read`]), every tool a
//! confined child of its own.

use std::io::{self, Write};
use std::os::fd::RawFd;

use labfy_sys::worker::inherited;

use crate::Reply;
use crate::worker::{MAX_DOCUMENTS_PER_WORKER, WORKER_ARG, read_request, write_reply};

/// Second argument of the document tools' runner ([`crate::session`]):
/// `WORKER_ARG TOOLS_ARG <input fd> <output fd> <max input bytes>
/// <program>` — in a jail of its own, it reads PDFs as the workspace server
/// does, each tool a confined child of its own started from `<program>`
/// (this program, bound at the same path in the jail).
pub const TOOLS_ARG: &str = "tools";

/// The arguments of the document tools' runner ([`TOOLS_ARG`]).
pub fn tools_args(input: RawFd, output: RawFd, max_input: u64, program: &str) -> Vec<String> {
    vec![
        WORKER_ARG.to_owned(),
        TOOLS_ARG.to_owned(),
        input.to_string(),
        output.to_string(),
        max_input.to_string(),
        program.to_owned(),
    ]
}

/// If this process was started as the document tools' runner
/// (`argv[1..3]` are [`WORKER_ARG`] [`TOOLS_ARG`]), runs it and exits;
/// otherwise returns ([`crate::run_if_child`]).
pub fn run_if_runner() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(WORKER_ARG) && argv.get(2).map(String::as_str) == Some(TOOLS_ARG) {
        std::process::exit(serve_tools(&argv[3..]));
    }
}

/// Where the tools' runner puts each document for its tools (its jail's
/// private `/tmp`), removed once read.
const TOOLS_DOCUMENT: &str = "/tmp/document.pdf";

/// The document tools' runner: for each framed PDF, what
/// [`crate::pdf::read`] finds with confined tool children, as a reply. It
/// does not confine itself to computation (it starts programs); its jail
/// confines it, and each tool confines itself further
/// ([`labfy_sys::worker::confine_tool`]). It parses nothing of the
/// document itself: what the tools write is read by the same code as
/// under the workspace server, and its reply checked by the parent.
fn serve_tools(args: &[String]) -> i32 {
    let [input, output, max, program] = args else {
        eprintln!("labfy document tools: expected tools <input fd> <output fd> <max bytes> <program>");
        return 2;
    };
    let (Ok(input), Ok(output), Ok(max)) = (input.parse::<RawFd>(), output.parse::<RawFd>(), max.parse::<u64>()) else {
        eprintln!("labfy document tools: bad descriptor or bound");
        return 2;
    };
    let (mut input, mut output) = match (inherited(input), inherited(output)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("labfy document tools: {e}");
            return 2;
        }
    };
    let program = std::path::Path::new(program);
    let mut served = 0u32;
    loop {
        let request = match read_request(&mut input, max) {
            Ok(Some(r)) => r,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("labfy document tools: {e}");
                return 2;
            }
        };
        let started = std::time::Instant::now();
        let deadline = started + std::time::Duration::from_millis(request.wall_ms.max(1));
        let parsed = match document_file(&request.bytes) {
            Ok(file) => {
                crate::pdf::read(crate::child::Start::Child, program, file, request.bytes.len() as u64, deadline)
            }
            Err(e) => {
                crate::Parsed::unread("application/pdf", &format!("the document could not be handed to its tools: {e}"))
            }
        };
        served += 1;
        let last = served >= MAX_DOCUMENTS_PER_WORKER;
        if write_reply(&mut output, last, &Reply::Parsed(parsed)).is_err() {
            return 4;
        }
        if last {
            return 0;
        }
    }
}

/// `bytes` in a file of the jail's `/tmp`, unlinked at once: the tools
/// read it through the descriptor.
fn document_file(bytes: &[u8]) -> io::Result<std::fs::File> {
    let _ = std::fs::remove_file(TOOLS_DOCUMENT);
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(TOOLS_DOCUMENT)?;
    std::fs::remove_file(TOOLS_DOCUMENT)?;
    f.write_all(bytes)?;
    Ok(f)
}
