//! One log record, one line (SPEC U8).
//!
//! Under `labfy up` a child's stderr goes to the supervisor's log book,
//! which reads it line by line: a record whose message holds line breaks
//! (arti's "Tried to build a tunnel 7 times" with one `Attempt N: …` line
//! per try) would reach it as several lines, the continuations taken for
//! lines meant for the operator and printed on the terminal. Each process
//! hands its `tracing` output to [`stderr`] instead of `std::io::stderr`:
//! the formatter writes a whole record in one `write`, and the breaks inside
//! it become ` ⏎ `, so the record stays one line, whole.

use std::io::{self, Write};

/// What a line break inside a record becomes.
pub const BREAK: &str = " ⏎ ";

/// A writer that joins the lines of each buffer it is given into one.
#[derive(Debug)]
pub struct OneLine<W>(pub W);

/// The process's stderr, one line per record (for `with_writer`).
pub fn stderr() -> OneLine<io::Stderr> {
    OneLine(io::stderr())
}

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        if !body.contains(&b'\n') {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut joined = Vec::with_capacity(buf.len() + 16);
        for (i, part) in body.split(|&b| b == b'\n').enumerate() {
            if i > 0 {
                joined.extend_from_slice(BREAK.as_bytes());
            }
            joined.extend_from_slice(part.strip_suffix(b"\r").unwrap_or(part));
        }
        joined.extend_from_slice(end);
        self.0.write_all(&joined)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests fail loudly by design

    use std::io::Write;

    use super::OneLine;

    fn through(text: &str) -> String {
        let mut w = OneLine(Vec::new());
        w.write_all(text.as_bytes()).unwrap();
        String::from_utf8(w.0).unwrap()
    }

    #[test]
    fn a_record_with_breaks_becomes_one_line() {
        let record =
            "2026-12-07T14:00:00Z  WARN tor_circmgr: Tried 2 times\nAttempt 1: refused\r\nAttempt 2: timed out\n";
        assert_eq!(
            through(record),
            "2026-12-07T14:00:00Z  WARN tor_circmgr: Tried 2 times ⏎ Attempt 1: refused ⏎ Attempt 2: timed out\n"
        );
    }

    #[test]
    fn a_one_line_record_passes_unchanged() {
        for text in ["2026-12-07T14:00:00Z  INFO x: ready\n", "no end", ""] {
            assert_eq!(through(text), text);
        }
    }
}
