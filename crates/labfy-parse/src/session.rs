//! A parser worker that reads many documents, one after another (SPEC I1,
//! V3): starting a confined process per file — a jail, namespaces, a
//! filter — costs more than reading a small file, so `labfy import` keeps
//! one worker per reading thread and sends it each document in turn. The
//! worker is confined exactly as a one-document worker ([`crate::worker`]);
//! what changes is how long it lives, and that is bounded: it retires after
//! [`MAX_DOCUMENTS_PER_WORKER`] documents or [`RETIRE_CPU_SECONDS`] of CPU,
//! and a fresh one takes the next document.
//!
//! Each document is framed on the worker's input: a little-endian `u32`
//! length, a JSON [`Header`] (name, declared charset, byte length), the
//! bytes. Each reply on its output: one byte (1 when the worker retires
//! after it), a little-endian `u64` length, the [`Reply`] as JSON — checked
//! by the parent like any worker's ([`Reply::check`]). A worker that dies
//! on a document, after having read others, is asked once more in a fresh
//! process (what killed it may have been left by an earlier document); a
//! document that kills a fresh worker, or overruns its deadline, is kept
//! unread with the reason, as with a one-document worker.
//!
//! [`MAX_DOCUMENTS_PER_WORKER`]: crate::worker::MAX_DOCUMENTS_PER_WORKER
//! [`RETIRE_CPU_SECONDS`]: crate::worker::RETIRE_CPU_SECONDS

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::child::{MAX_ERR_BYTES, Start, UNREAD_MIME, Worker, death, rewound};
use crate::runner::tools_args;
use crate::worker::{Header, serve_args};
use crate::{MAX_TEXT_BYTES, Parsed, Reply};

/// What the reading thread saw on the worker's output.
enum Frame {
    /// A reply, and whether the worker retires after it.
    Reply { last: bool, body: Vec<u8> },
    /// The output ended or broke (the worker exited or died); why.
    End(String),
}

/// A live worker and the threads that feed and read it.
struct Live {
    worker: Worker,
    /// Frames to write on the worker's input (dropped: its input ends).
    requests: Option<mpsc::Sender<Vec<u8>>>,
    replies: mpsc::Receiver<Frame>,
    errors: Option<JoinHandle<String>>,
    served: u32,
}

impl Live {
    fn start(how: Start, program: &Path, max_input: u64, kind: Kind) -> Result<Self, String> {
        let (input, input_end) = labfy_sys::pipe().map_err(|e| format!("the parser could not start: {e}"))?;
        // The jail binds the program where it really lies: the runner starts
        // its tools from that path.
        let shown =
            std::fs::canonicalize(program).unwrap_or_else(|_| program.to_owned()).to_string_lossy().into_owned();
        let (mut worker, mut out, mut err) = match kind {
            Kind::Parser => Worker::start(how, program, input, &|i, o| serve_args(i, o, max_input))?,
            // The runner keeps each document in its jail's /tmp while its
            // tools read it.
            Kind::Tools => Worker::start_with_tmp(
                how,
                program,
                input,
                &|i, o| tools_args(i, o, max_input, &shown),
                Some(max_input.saturating_add(1 << 20)),
            )?,
        };
        let (requests, to_write) = mpsc::channel::<Vec<u8>>();
        let mut input_end = File::from(input_end);
        // The writer stops at the first failure: the worker is gone, and the
        // reader says why.
        std::thread::spawn(move || {
            for frame in to_write {
                if input_end.write_all(&frame).is_err() {
                    break;
                }
            }
        });
        let max_reply = max_reply(max_input);
        let (replies_in, replies) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let frame = read_frame(&mut out, max_reply);
                let end = matches!(frame, Frame::End(_));
                if replies_in.send(frame).is_err() || end {
                    break;
                }
            }
            // What the worker writes after a refused frame is read and
            // dropped, so that it is not left blocked on its output.
            let _ = io::copy(&mut out, &mut io::sink());
        });
        let errors = std::thread::spawn(move || {
            let mut kept = Vec::new();
            let _ = (&mut err).take(MAX_ERR_BYTES).read_to_end(&mut kept);
            let _ = io::copy(&mut err, &mut io::sink());
            String::from_utf8_lossy(&kept).into_owned()
        });
        if worker.try_wait().is_err() {
            let _ = worker.kill();
            return Err("the parser could not be watched".into());
        }
        Ok(Self { worker, requests: Some(requests), replies, errors: Some(errors), served: 0 })
    }

    /// Sends one document and waits for its reply until `deadline`.
    fn ask(&mut self, header: Vec<u8>, bytes: Vec<u8>, deadline: Instant) -> Asked {
        let sent = self.requests.as_ref().is_some_and(|r| r.send(header).is_ok() && r.send(bytes).is_ok());
        if !sent {
            return Asked::Died(self.end());
        }
        match self.replies.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Frame::Reply { last, body }) => {
                self.served += 1;
                Asked::Replied { last, body }
            }
            Ok(Frame::End(why)) => Asked::Died(self.end_after(why)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = self.worker.kill();
                Asked::TimedOut
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Asked::Died(self.end()),
        }
    }

    /// Why the worker is gone: how it ended (waited for a little, then
    /// killed).
    fn end(&mut self) -> String {
        self.end_after(String::new())
    }

    fn end_after(&mut self, seen: String) -> String {
        self.requests = None;
        let until = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.worker.try_wait() {
                Ok(Some(s)) => break Ok(s),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(2)),
                _ => break self.worker.kill(),
            }
        };
        let said = self.errors.take().and_then(|e| e.join().ok()).unwrap_or_default();
        let said = said.lines().map(str::trim).find(|l| !l.is_empty()).map(|l| crate::clean(l, 200));
        match (status, said) {
            (Ok(s), _) if !s.success() => death(s),
            (_, Some(line)) => format!("the parser stopped: {line}"),
            (Ok(_), None) if !seen.is_empty() => seen,
            (Ok(_), None) => "the parser ended without a reply".into(),
            (Err(e), _) => format!("the parser could not be waited for: {e}"),
        }
    }

    /// Ends the worker: its input closes, it exits; killed if it does not.
    fn close(mut self) {
        self.requests = None;
        let until = Instant::now() + Duration::from_secs(1);
        loop {
            match self.worker.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(1)),
                _ => {
                    let _ = self.worker.kill();
                    return;
                }
            }
        }
    }
}

enum Asked {
    Replied { last: bool, body: Vec<u8> },
    Died(String),
    TimedOut,
}

/// The largest reply a worker may write for inputs of at most `max_input`
/// bytes: the text, and children as base64 (4 bytes for 3) — the input's
/// own bytes, or an archive's members within its bounds.
fn max_reply(max_input: u64) -> u64 {
    let children = max_input.max(crate::archive::max_inflated(max_input));
    MAX_TEXT_BYTES as u64 + children.saturating_mul(2) + (1 << 20)
}

fn read_frame(out: &mut File, max_reply: u64) -> Frame {
    let mut head = [0u8; 9];
    if let Err(e) = out.read_exact(&mut head) {
        return Frame::End(match e.kind() {
            io::ErrorKind::UnexpectedEof => String::new(),
            _ => format!("the parser's output was unreadable: {e}"),
        });
    }
    let last = match head[0] {
        0 => false,
        1 => true,
        _ => return Frame::End("the parser's reply was unreadable".into()),
    };
    let len = u64::from_le_bytes(head[1..].try_into().unwrap_or([0xff; 8]));
    if len > max_reply {
        return Frame::End("the parser's reply was unreadable or too large".into());
    }
    let mut body = Vec::new();
    match out.take(len).read_to_end(&mut body) {
        Ok(n) if n as u64 == len => Frame::Reply { last, body },
        _ => Frame::End("the parser's reply was cut short".into()),
    }
}

/// What the document tools' runner keeps of a document's time for its own
/// answer, so that it stops its tools before the parent stops it.
const RUNNER_MARGIN: Duration = Duration::from_millis(500);
/// Largest document asked of a fresh worker again when the one that had
/// read others died on it (a copy is kept meanwhile).
const MAX_RETRIED_BYTES: usize = 16 << 20;

/// Reads documents in a serving worker, started when first needed and
/// again after each one that retires or dies.
pub struct Session {
    how: Start,
    program: PathBuf,
    max_input: u64,
    /// The parser worker, and the document tools' runner (PDFs).
    live: [Option<Live>; 2],
    started: [u32; 2],
}

/// The two kinds of serving process of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The parser worker ([`crate::worker`], compute only).
    Parser = 0,
    /// The document tools' runner ([`crate::worker::TOOLS_ARG`]): PDFs
    /// read by poppler (and Tesseract for pages without text), each tool a
    /// confined child of its own, in one jail for many documents.
    Tools = 1,
}

impl Session {
    /// Workers started in a jail of their own ([`labfy_sys::worker::jail`]),
    /// for a caller that is not confined (`labfy import` on the host), from
    /// `program` (a Labfy program that calls [`crate::run_if_child`] first),
    /// for documents of at most `max_input` bytes.
    pub fn jailed(program: &Path, max_input: u64) -> Self {
        Self { how: Start::OwnJail, program: program.to_owned(), max_input, live: [None, None], started: [0, 0] }
    }

    /// Workers started as plain children of a caller confined already.
    pub fn confined(program: &Path, max_input: u64) -> Self {
        Self { how: Start::Child, program: program.to_owned(), max_input, live: [None, None], started: [0, 0] }
    }

    /// How many parser workers this session has started.
    pub fn workers_started(&self) -> u32 {
        self.started[Kind::Parser as usize]
    }

    /// How many document tools' runners this session has started.
    pub fn runners_started(&self) -> u32 {
        self.started[Kind::Tools as usize]
    }

    /// The live parser worker's host pid, if one is live (tests end it
    /// from outside).
    pub fn worker_pid(&self) -> Option<u32> {
        self.live[Kind::Parser as usize].as_ref().and_then(|l| match &l.worker {
            Worker::Child(c) => Some(c.id()),
            Worker::Jailed(c) => c.id(),
        })
    }

    /// Reads `input` (a stored file of `input_len` bytes, named `name`,
    /// with the `charset` its transport declared) within `wall`, as
    /// [`crate::run::parse_jailed`] does — PDFs through poppler, images
    /// with no text through OCR, each in a child of its own — but with
    /// this session's worker for everything else.
    pub fn parse(&mut self, input: File, input_len: u64, name: &str, charset: Option<&str>, wall: Duration) -> Parsed {
        let deadline = Instant::now() + wall;
        let pdf = crate::pdf::is_pdf(&input) && crate::pdf::tools_installed();
        if pdf && self.how == Start::Child {
            // Confined already: each tool is a plain child.
            return crate::pdf::read(self.how, &self.program, input, input_len, deadline);
        }
        let mut bytes = Vec::new();
        let read = rewound(&input).and_then(|f| {
            f.take(input_len.min(self.max_input) + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("the document could not be read: {e}"))
        });
        let mut p = match read {
            Err(why) => Parsed::unread(UNREAD_MIME, &why),
            Ok(n) if n as u64 > self.max_input => {
                Parsed::unread(UNREAD_MIME, &format!("larger than {} bytes", self.max_input))
            }
            Ok(_) => self.read(if pdf { Kind::Tools } else { Kind::Parser }, bytes, name, charset, wall, deadline),
        };
        if pdf {
            return p;
        }
        if p.format == crate::Format::Pdf {
            p.notes.push(crate::pdf::NO_POPPLER.into());
        }
        match crate::ocr::wanted(&p) {
            Some(tool) => crate::ocr::image(self.how, &self.program, &input, p, tool, deadline),
            None => p,
        }
    }

    /// The reading of `bytes` by the serving process of `kind`.
    fn read(
        &mut self,
        kind: Kind,
        bytes: Vec<u8>,
        name: &str,
        charset: Option<&str>,
        wall: Duration,
        deadline: Instant,
    ) -> Parsed {
        let input_len = bytes.len();
        let mut bytes = Some(bytes);
        loop {
            // The time left, as of this try (a jail to start, a first try
            // spent): the runner stops its tools before the parent stops it.
            let left = deadline.saturating_duration_since(Instant::now()).saturating_sub(RUNNER_MARGIN);
            let header = Header {
                name: name.to_owned(),
                charset: charset.map(str::to_owned),
                len: input_len as u64,
                wall_ms: u64::try_from(left.as_millis()).unwrap_or(u64::MAX),
            };
            let Ok(header) = serde_json::to_vec(&header) else {
                return Parsed::unread(UNREAD_MIME, "the document's name could not be framed");
            };
            let mut frame = (header.len() as u32).to_le_bytes().to_vec();
            frame.extend_from_slice(&header);
            let slot = kind as usize;
            let mut live = match self.live[slot].take() {
                Some(live) => live,
                None => match Live::start(self.how, &self.program, self.max_input, kind) {
                    Ok(live) => {
                        self.started[slot] += 1;
                        live
                    }
                    Err(why) => return Parsed::unread(UNREAD_MIME, &why),
                },
            };
            let fresh = live.served == 0;
            // The bytes are kept for a second try only when one may come
            // (and not for a large document: it is not tried twice).
            let body = if fresh || input_len > MAX_RETRIED_BYTES {
                bytes.take().unwrap_or_default()
            } else {
                bytes.clone().unwrap_or_default()
            };
            match live.ask(frame.clone(), body, deadline) {
                Asked::Replied { last, body } => {
                    if last {
                        live.close();
                    } else {
                        self.live[slot] = Some(live);
                    }
                    return match Reply::check(&body, input_len) {
                        Ok(Reply::Parsed(p)) => p,
                        Ok(Reply::Refused(why)) => Parsed::unread(UNREAD_MIME, &why),
                        Err(e) => Parsed::unread(UNREAD_MIME, &e.to_string()),
                    };
                }
                Asked::TimedOut => {
                    return Parsed::unread(
                        UNREAD_MIME,
                        &format!("the parser took longer than {} s and was stopped", wall.as_secs()),
                    );
                }
                // A worker that had read others may have died of what they
                // left: once more, in a fresh one.
                Asked::Died(_) if !fresh && bytes.is_some() && Instant::now() < deadline => continue,
                Asked::Died(why) => return Parsed::unread(UNREAD_MIME, &why),
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for live in &mut self.live {
            if let Some(live) = live.take() {
                live.close();
            }
        }
    }
}
