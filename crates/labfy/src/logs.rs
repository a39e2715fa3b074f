//! The appliance's log book (SPEC U8): what the children write on stderr
//! goes to `<data>/logs/labfy.log`, not to the operator's terminal.
//!
//! The terminal keeps what is meant for the operator: the supervisor's own
//! lines (one per process state change), the children's plain lines (a
//! grant waiting for confirmation, printed by egress), and a summary of the
//! library warnings each child logged (how many, and the last reason): when
//! they start (within a [`SUMMARY_PERIOD`]), farther and farther apart while
//! they go on (up to [`MAX_SUMMARY_GAP`] periods), and when they stop. The
//! library lines themselves (arti's, hyper's, ours through `tracing`) are in
//! the log file only, whole.
//! Each child writes a record as one line (`labfy_core::one_line`: a
//! message's line breaks become ` ⏎ `): a continuation line would be read
//! here as a plain line meant for the operator.
//!
//! The file lives in `<data>/logs/`, which the workspace server's root
//! masks like egress's state (SPEC T3): a compromised server cannot write
//! or rewrite what the other processes logged. Its stderr comes here through
//! a pipe, like the others'; its lines are marked with its role.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use labfy::layout::{log_dir, log_file};
use labfy_ipc::daemon::role_name;
use labfy_ipc::messages::Role;

/// How often the terminal may get a summary of new warnings.
pub const SUMMARY_PERIOD: Duration = Duration::from_secs(60);
/// While a child's warnings go on, the periods between two summary lines
/// double up to this many (a failure lasting an hour: a line when it
/// starts, then at 3, 7, 12, 17 … minutes, and a line when it ends).
pub const MAX_SUMMARY_GAP: u32 = 5;
/// The log file is renamed `labfy.log.1` (replacing the previous one) past this size.
pub const MAX_LOG_BYTES: u64 = 32 << 20;
/// Longest line kept, bytes (a longer one is cut, with a mark).
pub const MAX_LINE_BYTES: usize = 8 * 1024;
/// Longest "last reason" kept for a summary or `labfy status`, characters.
pub const REASON_CHARS: usize = 200;
/// Plain lines of one child shown on the terminal per summary period; the
/// rest stay in the file, and the summary says how many.
pub const PLAIN_SHOWN: u64 = 100;
/// The workspace server's plain lines reach the terminal after this mark:
/// it parses hostile input and may be compromised, so it can neither pass
/// for the supervisor (`labfy: egress ready`, a login link) nor rewrite a
/// line with control characters (SPEC T3: it never lies to the operator).
pub const SERVER_MARK: &str = "labfy: the workspace server says: ";
/// Error records of one child shown on the terminal as they come, per
/// summary period (an error is rare and says why a child stops; beyond
/// this many, they are counted like warnings).
pub const ERRORS_SHOWN: u64 = 5;

/// Warnings one child logged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warnings {
    /// Since `labfy up` started.
    pub total: u64,
    /// Since the last summary printed on the terminal.
    pub unsummarised: u64,
    /// The last one's message (level and target stripped).
    pub last: Option<String>,
    /// Errors shown on the terminal since the last summary.
    errors_shown: u64,
    /// Plain lines shown on the terminal since the last summary.
    plain_shown: u64,
    /// Plain lines kept from the terminal (past [`PLAIN_SHOWN`]) since then.
    plain_held: u64,
    /// A run of summary periods with warnings: its warnings so far, how
    /// many wait for the next summary line, the periods between two lines
    /// now (1, 2, 4, … up to [`MAX_SUMMARY_GAP`]) and those since the last.
    run: Option<Run>,
}

/// A child's run of periods with warnings (a failure that repeats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Run {
    total: u64,
    pending: u64,
    gap: u32,
    waited: u32,
    periods: u32,
}

/// What one stderr line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// A `tracing` record at this level (`2026-…Z  WARN target: message`).
    Record(Level),
    /// Anything else: a line meant for the operator.
    Plain,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Quiet,
    Warn,
    Error,
}

/// Classifies a line the way `tracing-subscriber`'s default format writes
/// records: an RFC 3339 UTC timestamp, then the level.
fn classify(line: &str) -> Line {
    let mut words = line.split_whitespace();
    let (Some(time), Some(level)) = (words.next(), words.next()) else { return Line::Plain };
    let timestamp = time.len() >= 20
        && time.as_bytes()[..4].iter().all(u8::is_ascii_digit)
        && time.as_bytes()[4] == b'-'
        && time.as_bytes()[10] == b'T'
        && time.ends_with('Z');
    if !timestamp {
        return Line::Plain;
    }
    match level {
        "WARN" => Line::Record(Level::Warn),
        "ERROR" => Line::Record(Level::Error),
        "TRACE" | "DEBUG" | "INFO" => Line::Record(Level::Quiet),
        _ => Line::Plain,
    }
}

/// A record's message: what follows `target: `, else the line after the level.
fn reason(line: &str) -> String {
    let after_level = ["ERROR", "WARN"]
        .iter()
        .find_map(|l| line.split_once(&format!(" {l} ")).map(|(_, rest)| rest.trim_start()))
        .unwrap_or(line);
    let message = after_level.split_once(": ").map_or(after_level, |(_, m)| m);
    let mut out: String = message.chars().take(REASON_CHARS).collect();
    if message.chars().count() > REASON_CHARS {
        out.push('…');
    }
    out
}

/// ANSI escape sequences removed (a library that colours regardless).
/// A line made safe for a terminal: no control character (a carriage
/// return could hide a mark, an escape could redraw the screen) and no
/// invisible format character (a bidirectional override could make the
/// line read as other text), each shown as U+FFFD (SPEC T3, V6).
fn terminal_safe(text: &str) -> String {
    text.chars()
        .map(
            |c| {
                if (c.is_control() && c != '\t') || labfy_core::bounded::is_invisible_format(c) {
                    '\u{FFFD}'
                } else {
                    c
                }
            },
        )
        .collect()
}

/// Columns a server's line may take on the terminal, its mark included: on
/// a terminal of this width or wider it stays one row, so no text of the
/// server's can start a row of its own, where it would read as the
/// supervisor's (SPEC V6, the red team's wrapping forgery). The whole line
/// is in the log file.
const SERVER_ROW_COLUMNS: usize = 80;

/// A server's line (its mark already first) as one terminal row: made safe,
/// runs of blanks (padding towards the next row) squeezed to one, cut to
/// [`SERVER_ROW_COLUMNS`] counting every character outside ASCII as two
/// columns (wide characters), with `…` when cut.
fn server_row(text: &str) -> String {
    let width = |c: char| if c.is_ascii() { 1 } else { 2 };
    let mut squeezed = String::with_capacity(text.len());
    let mut blank = false;
    for c in terminal_safe(text).chars() {
        let is_blank = c.is_whitespace();
        if !(is_blank && blank) {
            squeezed.push(if is_blank { ' ' } else { c });
        }
        blank = is_blank;
    }
    if squeezed.chars().map(width).sum::<usize>() <= SERVER_ROW_COLUMNS {
        return squeezed;
    }
    // Cut, leaving two columns for the ellipsis.
    let mut out = String::with_capacity(4 * SERVER_ROW_COLUMNS);
    let mut columns = 0;
    for c in squeezed.chars() {
        if columns + width(c) > SERVER_ROW_COLUMNS - 2 {
            break;
        }
        columns += width(c);
        out.push(c);
    }
    out.push('…');
    out
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for n in chars.by_ref() {
                    if ('@'..='~').contains(&n) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

struct Book {
    file: File,
    written: u64,
    /// By source name (`server`, `governor`, `egress`).
    warnings: Vec<(&'static str, Warnings)>,
}

/// The log book of one `labfy up`.
pub struct LogBook {
    path: PathBuf,
    book: Mutex<Book>,
    /// Plain lines go here (the operator's terminal; a buffer in tests).
    terminal: Mutex<Terminal>,
}

/// The terminal, and the one status line kept in place at its bottom.
struct Terminal {
    out: Box<dyn Write + Send>,
    /// Whether a status line may be drawn (a terminal, not a file or a pipe).
    live: bool,
    /// The status line shown now, if any.
    status: Option<String>,
}

/// Longest status line, in characters: within an 80-column terminal, so it
/// never wraps (a wrapped line cannot be rewritten in place).
pub const STATUS_CHARS: usize = 79;

/// Erases the terminal's current line and returns to its start.
const ERASE_LINE: &str = "\r\u{1b}[2K";

impl LogBook {
    /// [`LogBook::open_with`] with no status line (the tests' terminal).
    #[cfg(test)]
    pub fn open(data_dir: &Path, terminal: Box<dyn Write + Send>) -> io::Result<Arc<Self>> {
        Self::open_with(data_dir, terminal, false)
    }

    /// Opens (creating, 0700/0600 whatever the umask) `<data>/logs/labfy.log`
    /// for appending; a file already past [`MAX_LOG_BYTES`] is rotated first.
    /// A status line is kept in place on `terminal` when `live` — it is a
    /// terminal (SPEC U8).
    pub fn open_with(data_dir: &Path, terminal: Box<dyn Write + Send>, live: bool) -> io::Result<Arc<Self>> {
        let dir = log_dir(data_dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let path = log_file(data_dir);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
            std::fs::rename(&path, dir.join("labfy.log.1"))?;
        }
        let file = open_log(&path)?;
        let written = file.metadata()?.len();
        Ok(Arc::new(Self {
            path,
            book: Mutex::new(Book { file, written, warnings: Vec::new() }),
            terminal: Mutex::new(Terminal { out: terminal, live, status: None }),
        }))
    }

    /// Reads `stream` (a child's stderr) line by line on a thread of its
    /// own until EOF: every line into the file, marked with `role`; plain
    /// lines to the terminal too; warnings counted.
    pub fn follow(self: &Arc<Self>, role: Role, stream: impl Read + Send + 'static) {
        let me = self.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut raw = Vec::new();
            loop {
                raw.clear();
                match (&mut reader).take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut raw) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let cut = raw.len() > MAX_LINE_BYTES && raw.last() != Some(&b'\n');
                let mut line = strip_ansi(String::from_utf8_lossy(&raw).trim_end());
                if cut {
                    line.push_str(" [line cut]");
                    // The rest of an over-long line is dropped, a buffer at a
                    // time: a child writing without end costs no memory.
                    if skip_line(&mut reader).is_err() {
                        break;
                    }
                }
                me.record(role_name(role), &line);
            }
        });
    }

    /// One line of `source`'s (a child's role, or `labfy`).
    fn record(&self, source: &'static str, line: &str) {
        let kind = classify(line);
        let mut shown = None;
        {
            let mut b = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            // Records carry their own time; plain lines get one.
            let entry = match kind {
                Line::Record(_) => format!("{source:<8} | {line}\n"),
                Line::Plain => {
                    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                    format!("{source:<8} | {now}  {line}\n")
                }
            };
            if b.written + entry.len() as u64 > MAX_LOG_BYTES {
                self.rotate(&mut b);
            }
            if b.file.write_all(entry.as_bytes()).is_ok() {
                b.written += entry.len() as u64;
            }
            if !b.warnings.iter().any(|(r, _)| *r == source) {
                b.warnings.push((source, Warnings::default()));
            }
            let w = b.warnings.iter_mut().find(|(r, _)| *r == source).map(|(_, w)| w);
            if let (Line::Plain, Some(w)) = (kind, w) {
                if source == "labfy" {
                    shown = Some(line.to_owned());
                } else if w.plain_shown < PLAIN_SHOWN {
                    w.plain_shown += 1;
                    shown = Some(if source == "server" { format!("{SERVER_MARK}{line}") } else { line.to_owned() });
                } else {
                    w.plain_held += 1;
                }
            } else if let Line::Record(level @ (Level::Warn | Level::Error)) = kind {
                if let Some((_, w)) = b.warnings.iter_mut().find(|(r, _)| *r == source) {
                    let why = reason(line);
                    w.total += 1;
                    if level == Level::Error && w.errors_shown < ERRORS_SHOWN {
                        w.errors_shown += 1;
                        shown = Some(format!("labfy: {source}: error: {why}"));
                    } else {
                        w.unsummarised += 1;
                    }
                    w.last = Some(why);
                }
            }
        }
        if let Some(text) = shown {
            let clean = if source == "server" { server_row(&text) } else { terminal_safe(&text) };
            self.say(&clean);
        }
    }

    /// One of the supervisor's own lines (a process state change): on the
    /// terminal and in the file.
    pub fn event(&self, line: &str) {
        self.record("labfy", line);
    }

    /// A line on the terminal (and nothing else), above the status line.
    pub fn say(&self, line: &str) {
        let mut t = self.terminal.lock().unwrap_or_else(PoisonError::into_inner);
        let Terminal { out, status, .. } = &mut *t;
        match status {
            Some(shown) => {
                let _ = write!(out, "{ERASE_LINE}{line}\n{shown}");
            }
            None => {
                let _ = writeln!(out, "{line}");
            }
        }
        let _ = out.flush();
    }

    /// The status line kept in place at the terminal's bottom (Tor's
    /// bootstrap while it goes on, SPEC U8): drawn again over itself, one
    /// line, cut to [`STATUS_CHARS`]; `None` erases it. Nothing when the
    /// terminal is not one (a file, the journal: the state changes are lines
    /// of their own there).
    pub fn status(&self, line: Option<&str>) {
        let mut t = self.terminal.lock().unwrap_or_else(PoisonError::into_inner);
        if !t.live {
            return;
        }
        let line = line.map(|l| {
            let clean = terminal_safe(l).replace('\n', " ");
            if clean.chars().count() > STATUS_CHARS {
                let mut cut: String = clean.chars().take(STATUS_CHARS - 1).collect();
                cut.push('…');
                cut
            } else {
                clean
            }
        });
        if line == t.status {
            return;
        }
        let Terminal { out, status, .. } = &mut *t;
        let _ = write!(out, "{ERASE_LINE}{}", line.as_deref().unwrap_or(""));
        let _ = out.flush();
        *status = line;
    }

    fn rotate(&self, b: &mut Book) {
        let _ = b.file.flush();
        let older = self.path.with_extension("log.1");
        if std::fs::rename(&self.path, &older).is_ok() {
            if let Ok(file) = open_log(&self.path) {
                b.file = file;
                b.written = 0;
            }
        }
    }

    /// `role`'s warnings so far.
    pub fn warnings(&self, role: Role) -> Warnings {
        let b = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        b.warnings.iter().find(|(r, _)| *r == role_name(role)).map(|(_, w)| w.clone()).unwrap_or_default()
    }

    /// Called once a [`SUMMARY_PERIOD`]: for each child, a line when its
    /// warnings start (how many, the last reason, where the rest is), then
    /// while they go on a line after 2, 4, … up to [`MAX_SUMMARY_GAP`]
    /// periods counting those held meanwhile, and a line when a period
    /// passes without one. Returns how many lines it printed.
    pub fn summarise(&self) -> usize {
        self.summary(false)
    }

    /// At the stop: what is held is printed now.
    pub fn summarise_final(&self) -> usize {
        self.summary(true)
    }

    fn summary(&self, last: bool) -> usize {
        let lines: Vec<String> = {
            let mut b = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            let mut lines = Vec::new();
            for (source, w) in b.warnings.iter_mut() {
                w.errors_shown = 0;
                w.plain_shown = 0;
                let n = std::mem::take(&mut w.unsummarised);
                let line = |count: u64, w: &Warnings, tail: &str| {
                    format!(
                        "labfy: {source}: {count} warning{} logged (last: {}{tail}); details in {}",
                        if count == 1 { "" } else { "s" },
                        w.last.as_deref().unwrap_or("?"),
                        self.path.display()
                    )
                };
                if n > 0 {
                    let run = w.run.get_or_insert(Run { gap: 1, ..Run::default() });
                    run.total += n;
                    run.pending += n;
                    run.waited += 1;
                    run.periods += 1;
                    if run.waited >= run.gap || last {
                        let (pending, periods, total) = (run.pending, run.periods, run.total);
                        run.pending = 0;
                        run.waited = 0;
                        run.gap = (run.gap * 2).min(MAX_SUMMARY_GAP);
                        let tail = if periods > 1 { format!("; {total} in {periods} min") } else { String::new() };
                        lines.push(line(pending, w, &tail));
                    }
                } else if let Some(run) = w.run.take().filter(|_| !last) {
                    let held = if run.pending > 0 {
                        format!("{} more (last: {}), then ", run.pending, w.last.as_deref().unwrap_or("?"))
                    } else {
                        String::new()
                    };
                    lines.push(format!(
                        "labfy: {source}: {held}no more warnings ({} in {} min); details in {}",
                        run.total,
                        run.periods,
                        self.path.display()
                    ));
                }
                if let Some(run) = w.run.as_mut().filter(|r| last && r.pending > 0) {
                    let (pending, total, periods) = (std::mem::take(&mut run.pending), run.total, run.periods);
                    lines.push(line(pending, w, &format!("; {total} in {periods} min")));
                }
                let held = std::mem::take(&mut w.plain_held);
                if held > 0 {
                    lines.push(format!(
                        "labfy: {source}: {held} more line{} kept from the terminal; in {}",
                        if held == 1 { "" } else { "s" },
                        self.path.display()
                    ));
                }
            }
            lines
        };
        for l in &lines {
            self.say(l);
        }
        lines.len()
    }
}

/// Consumes up to and including the next newline (or to EOF), holding no
/// more than the reader's buffer.
fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

fn open_log(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A terminal that keeps what it is given.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    const ARTI_WARN: &str = "2026-12-02T03:25:34.265709Z  WARN tor_guardmgr::guard: Problem with guard [scrubbed]: \
                             Connection timed out";

    #[test]
    fn tracing_records_are_told_from_the_operators_lines() {
        assert_eq!(classify(ARTI_WARN), Line::Record(Level::Warn));
        assert_eq!(classify("2026-12-02T03:25:34Z ERROR labfy_egress: gone"), Line::Record(Level::Error));
        assert_eq!(classify("2026-12-02T03:25:34.1Z  INFO labfy_egress: up"), Line::Record(Level::Quiet));
        assert_eq!(classify("labfy-egress: grant 0192 proposed: confirm with labfy grant approve"), Line::Plain);
        assert_eq!(classify("WARN but not a record"), Line::Plain);
        assert_eq!(classify(""), Line::Plain);
        assert_eq!(reason(ARTI_WARN), "Problem with guard [scrubbed]: Connection timed out");
        let long = format!("2026-12-02T03:25:34Z  WARN x: {}", "é".repeat(500));
        assert_eq!(reason(&long).chars().count(), REASON_CHARS + 1);
    }

    #[test]
    fn colour_codes_are_stripped() {
        let coloured =
            "\u{1b}[2m2026-12-02T03:25:34.265709Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m \u{1b}[2mtor\u{1b}[0m: x";
        let plain = strip_ansi(coloured);
        assert_eq!(plain, "2026-12-02T03:25:34.265709Z  WARN tor: x");
        assert_eq!(classify(&plain), Line::Record(Level::Warn));
    }

    /// U8: on a terminal, Tor's bootstrap is one line redrawn in place;
    /// the lines of state changes go above it, and it goes at the end.
    /// Not a terminal: nothing of it.
    #[test]
    fn a_status_line_is_kept_in_place_under_the_events() {
        let dir = tempfile::tempdir().unwrap();
        let screen = Screen::default();
        let book = LogBook::open_with(dir.path(), Box::new(screen.clone()), true).unwrap();
        book.status(Some("labfy: Tor: 5 %"));
        book.status(Some("labfy: Tor: 5 %")); // the same: not drawn again
        book.event("labfy: server ready");
        book.status(Some(&format!("labfy: Tor: 40 % {}\u{1b}[31m", "x".repeat(200))));
        book.status(None);
        book.event("labfy: egress ready");
        let erase = "\r\u{1b}[2K";
        let long = format!("labfy: Tor: 40 % {}…", "x".repeat(STATUS_CHARS - 18));
        assert_eq!(
            screen.text(),
            format!(
                "{erase}labfy: Tor: 5 %{erase}labfy: server ready\nlabfy: Tor: 5 %{erase}{long}{erase}labfy: egress ready\n"
            )
        );
        assert_eq!(long.chars().count(), STATUS_CHARS, "cut to fit, the escape shown as text, never sent");
        let plain = Screen::default();
        let book = LogBook::open(dir.path(), Box::new(plain.clone())).unwrap();
        book.status(Some("labfy: Tor: 5 %"));
        book.event("labfy: server ready");
        assert_eq!(plain.text(), "labfy: server ready\n");
    }

    /// U8: a failure that repeats for minutes is a line when it starts,
    /// lines farther and farther apart while it lasts (each counting what it
    /// held), and a line when it ends; at the stop what is held is said.
    #[test]
    fn a_repeated_failure_is_summarised_farther_and_farther_apart() {
        let dir = tempfile::tempdir().unwrap();
        let screen = Screen::default();
        let book = LogBook::open(dir.path(), Box::new(screen.clone())).unwrap();
        let printed: Vec<usize> = (0..8)
            .map(|_| {
                book.record("egress", ARTI_WARN);
                book.summarise()
            })
            .collect();
        assert_eq!(printed, [1, 0, 1, 0, 0, 0, 1, 0], "{}", screen.text());
        let text = screen.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("labfy: egress: 1 warning logged (last: "), "{text}");
        assert!(lines[1].starts_with("labfy: egress: 2 warnings logged (last: ") && lines[1].contains("; 3 in 3 min)"));
        assert!(lines[2].starts_with("labfy: egress: 4 warnings logged (last: ") && lines[2].contains("; 7 in 7 min)"));
        assert_eq!(book.summarise(), 1, "the period without a warning ends the run");
        let end = screen.text();
        assert!(end.lines().last().unwrap().starts_with("labfy: egress: 1 more (last: "), "{end}");
        assert!(end.lines().last().unwrap().contains("then no more warnings (8 in 8 min)"), "{end}");
        assert_eq!(book.summarise(), 0);
        // A new run starts over; the stop says what it held.
        book.record("egress", ARTI_WARN);
        assert_eq!(book.summarise(), 1);
        book.record("egress", ARTI_WARN);
        assert_eq!(book.summarise_final(), 1);
        assert!(screen.text().lines().last().unwrap().contains("1 warning logged"), "{}", screen.text());
    }

    #[test]
    fn lines_go_to_the_file_warnings_are_counted_and_summarised() {
        let dir = tempfile::tempdir().unwrap();
        let screen = Screen::default();
        let book = LogBook::open(dir.path(), Box::new(screen.clone())).unwrap();
        let stderr = format!(
            "{ARTI_WARN}\n{ARTI_WARN}\nlabfy-egress: grant proposed; confirm it\n\u{1b}[33m2026-12-02T03:25:35Z ERROR \
             labfy_egress::tor: bootstrap failed\u{1b}[0m\n"
        );
        book.follow(Role::Egress, io::Cursor::new(stderr.into_bytes()));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while book.warnings(Role::Egress).total < 3 {
            assert!(std::time::Instant::now() < deadline, "the lines were not read");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(50));
        let w = book.warnings(Role::Egress);
        assert_eq!(w.total, 3);
        assert_eq!(w.last.as_deref(), Some("bootstrap failed"));
        assert_eq!(book.warnings(Role::Server), Warnings::default());
        // The operator's line and the error reached the terminal; the library warnings did not.
        assert_eq!(screen.text(), "labfy-egress: grant proposed; confirm it\nlabfy: egress: error: bootstrap failed\n");
        // Everything is in the file, marked, without colour codes, 0600 in a 0700 directory.
        let logged = std::fs::read_to_string(log_file(dir.path())).unwrap();
        assert_eq!(logged.lines().count(), 4, "{logged}");
        assert!(logged.lines().all(|l| l.starts_with("egress   | 20")), "every line with its time: {logged}");
        assert!(!logged.contains('\u{1b}'), "{logged}");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&log_file(dir.path())), 0o600);
        assert_eq!(mode(&log_dir(dir.path())), 0o700);
        // One summary line per child with news, then nothing until more come.
        assert_eq!(book.summarise(), 1);
        let text = screen.text();
        let summary = text.lines().last().unwrap();
        assert!(
            summary.starts_with("labfy: egress: 2 warnings logged (last: bootstrap failed); details in "),
            "{summary}"
        );
        // A period without one ends the run, with a line; then nothing.
        assert_eq!(book.summarise(), 1);
        let text = screen.text();
        assert!(text.lines().last().unwrap().starts_with("labfy: egress: no more warnings (2 in 1 min)"), "{text}");
        assert_eq!(book.summarise(), 0);
        assert_eq!(book.warnings(Role::Egress).total, 3, "the total survives a summary");
    }

    /// The server may be compromised: its lines are marked, rid of control
    /// characters, and bounded per period; the others are not marked.
    #[test]
    fn the_servers_lines_cannot_pass_for_the_supervisors() {
        let dir = tempfile::tempdir().unwrap();
        let screen = Screen::default();
        let book = LogBook::open(dir.path(), Box::new(screen.clone())).unwrap();
        book.record("server", "labfy: egress ready (pid 1): Tor bootstrapped");
        book.record("server", "innocent\rlabfy: Open http://127.0.0.1:1/login?code=forged");
        book.record("egress", "labfy-egress: grant proposed");
        book.event("labfy: governor ready");
        let text = screen.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("{SERVER_MARK}labfy: egress ready (pid 1): Tor bootstrapped"));
        assert!(lines[1].starts_with(&format!("{SERVER_MARK}innocent\u{FFFD}labfy: Open http://")), "{}", lines[1]);
        assert!(lines[1].ends_with('…'), "cut to one row: {}", lines[1]);
        assert_eq!(lines[2], "labfy-egress: grant proposed");
        assert_eq!(lines[3], "labfy: governor ready");
        // A flood: PLAIN_SHOWN lines, then the rest only counted.
        for i in 0..PLAIN_SHOWN + 7 {
            book.record("server", &format!("line {i}"));
        }
        let shown = screen.text().lines().filter(|l| l.starts_with(SERVER_MARK)).count() as u64;
        assert_eq!(shown, PLAIN_SHOWN, "the first two count too");
        assert_eq!(book.summarise(), 1);
        assert!(
            screen.text().lines().last().unwrap().starts_with("labfy: server: 9 more lines kept from the terminal")
        );
        // The period starts again.
        book.record("server", "after");
        assert!(screen.text().ends_with(&format!("{SERVER_MARK}after\n")));
    }

    /// The red team's F7: a server line padded to the terminal's width
    /// (its forged text would start a row of its own, unmarked) or carrying
    /// a right-to-left override (it would read as other text) reaches the
    /// terminal as one marked row, the override replaced; the file keeps
    /// the whole line.
    #[test]
    fn a_server_line_stays_one_marked_row_without_format_characters() {
        let dir = tempfile::tempdir().unwrap();
        let screen = Screen::default();
        let book = LogBook::open(dir.path(), Box::new(screen.clone())).unwrap();
        let padded = format!("ok{}labfy: Open http://127.0.0.1:1/login?code=forged", " ".repeat(200));
        book.record("server", &padded);
        book.record("server", &format!("x{}labfy: governor ready", "y".repeat(300)));
        book.record("server", "labfy: \u{202E}ydaer ssergE\u{2066}\u{200B}");
        book.event("labfy: egress ready \u{202E}x");
        let text = screen.text();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 4, "{text}");
        for row in &rows[..3] {
            assert!(row.starts_with(SERVER_MARK), "{row}");
            let columns: usize = row.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum();
            assert!(columns <= SERVER_ROW_COLUMNS, "{columns} columns: {row}");
            assert!(!row.chars().any(labfy_core::bounded::is_invisible_format), "{row:?}");
        }
        assert!(rows[0].contains("ok labfy: Open") || rows[0].ends_with('…'), "{}", rows[0]);
        assert!(!rows[0].contains("  "), "blank padding kept: {}", rows[0]);
        assert!(rows[1].ends_with('…') && !rows[1].contains("governor ready"), "{}", rows[1]);
        assert!(rows[2].contains('\u{FFFD}'), "{}", rows[2]);
        // The supervisor's own lines are made safe too, but not cut.
        assert_eq!(rows[3], "labfy: egress ready \u{FFFD}x");
        let file = std::fs::read_to_string(log_file(dir.path())).unwrap();
        assert!(file.contains(&padded), "the file keeps the whole line");
    }

    #[test]
    fn an_over_long_line_is_cut_and_a_full_file_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let book = LogBook::open(dir.path(), Box::new(Screen::default())).unwrap();
        let long = format!("{}\nnext\n", "x".repeat(MAX_LINE_BYTES * 3));
        book.follow(Role::Server, io::Cursor::new(long.into_bytes()));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let logged = std::fs::read_to_string(log_file(dir.path())).unwrap();
            if logged.contains("next") {
                let first = logged.lines().next().unwrap();
                assert!(first.ends_with(" [line cut]"), "{}", &first[first.len() - 40..]);
                assert!(first.len() < MAX_LINE_BYTES + 64);
                assert_eq!(logged.lines().count(), 2, "the rest of the long line is dropped");
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the lines were not read");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Rotation: a book whose file is past the bound starts a new one.
        {
            let mut b = book.book.lock().unwrap();
            b.written = MAX_LOG_BYTES;
        }
        book.record("server", "after rotation");
        let fresh = std::fs::read_to_string(log_file(dir.path())).unwrap();
        assert!(fresh.starts_with("server   | 20") && fresh.ends_with("Z  after rotation\n"), "{fresh}");
        assert!(std::fs::read_to_string(dir.path().join("logs/labfy.log.1")).unwrap().contains("[line cut]"));
    }
}
