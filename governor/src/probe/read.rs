//! Bounded reads of small kernel files (sysfs, procfs) for the probes (SPEC Q1).
//!
//! Every value is read with a size bound, parsed strictly and checked against
//! a range; whatever fails becomes `None` plus a short fact, never a guess.

use std::fmt::Display;
use std::fs::File;
use std::io::{self, Read};
use std::ops::RangeInclusive;
use std::path::Path;
use std::str::FromStr;

/// Most bytes read from one sysfs/procfs file; a longer file is refused.
pub const MAX_READ_BYTES: usize = 4096;

/// Most characters of a bad value quoted in a fact.
pub const MAX_QUOTED_CHARS: usize = 32;

/// Why a small file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The file does not exist.
    Absent,
    /// Longer than [`MAX_READ_BYTES`].
    TooLong,
    /// Any other I/O error (permission, a directory, EIO from a driver).
    Io(String),
}

impl Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Absent => f.write_str("absent"),
            Self::TooLong => write!(f, "unreadable (longer than {MAX_READ_BYTES} bytes)"),
            Self::Io(e) => write!(f, "unreadable ({e})"),
        }
    }
}

/// Reads at most [`MAX_READ_BYTES`] of `path` as (lossy) UTF-8.
pub(crate) fn read_bounded(path: &Path) -> Result<String, ReadError> {
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ReadError::Absent,
        _ => ReadError::Io(e.to_string()),
    })?;
    let mut buf = Vec::with_capacity(64);
    // One byte more than the bound tells a full file from a truncated one.
    file.take(MAX_READ_BYTES as u64 + 1).read_to_end(&mut buf).map_err(|e| ReadError::Io(e.to_string()))?;
    if buf.len() > MAX_READ_BYTES {
        return Err(ReadError::TooLong);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Quotes a bad value for a fact: trimmed, escaped, at most [`MAX_QUOTED_CHARS`].
pub(crate) fn quote(text: &str) -> String {
    let trimmed = text.trim();
    let mut short: String = trimmed.chars().take(MAX_QUOTED_CHARS).collect();
    if trimmed.chars().count() > MAX_QUOTED_CHARS {
        short.push('…');
    }
    format!("{short:?}")
}

/// Parses one number and checks its range; the error is the fact's tail.
pub(crate) fn parse_in<T>(text: &str, range: &RangeInclusive<T>) -> Result<T, String>
where
    T: FromStr + PartialOrd + Display,
{
    let value: T = text.trim().parse().map_err(|_| format!("unreadable ({})", quote(text)))?;
    if range.contains(&value) { Ok(value) } else { Err(format!("out of range ({value})")) }
}

/// Reads `path` as one number in `range`. A failure pushes
/// `"<who>: <field> <why>"` onto `facts` and gives `None`.
pub(crate) fn read_number<T>(
    path: &Path,
    who: &str,
    field: &str,
    range: &RangeInclusive<T>,
    facts: &mut Vec<String>,
) -> Option<T>
where
    T: FromStr + PartialOrd + Display,
{
    let outcome = read_bounded(path).map_err(|e| e.to_string()).and_then(|text| parse_in(&text, range));
    match outcome {
        Ok(value) => Some(value),
        Err(why) => {
            facts.push(format!("{who}: {field} {why}"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parse_in_accepts_range_edges_and_refuses_outside() {
        assert_eq!(parse_in::<u64>("0\n", &(0..=100)), Ok(0));
        assert_eq!(parse_in::<u64>(" 100 ", &(0..=100)), Ok(100));
        assert_eq!(parse_in::<u64>("101", &(0..=100)), Err("out of range (101)".to_owned()));
        assert_eq!(parse_in::<u64>("-1", &(0..=100)), Err("unreadable (\"-1\")".to_owned()));
        assert_eq!(parse_in::<u64>("", &(0..=100)), Err("unreadable (\"\")".to_owned()));
        assert_eq!(parse_in::<i64>("-1", &(-5..=5)), Ok(-1));
    }

    #[test]
    fn quote_truncates_and_escapes() {
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\"");
        let long = "x".repeat(MAX_QUOTED_CHARS + 1);
        assert_eq!(quote(&long), format!("\"{}…\"", "x".repeat(MAX_QUOTED_CHARS)));
        assert_eq!(quote(&"x".repeat(MAX_QUOTED_CHARS)), format!("\"{}\"", "x".repeat(MAX_QUOTED_CHARS)));
    }

    #[test]
    fn read_bounded_refuses_one_byte_over_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("at");
        let over = dir.path().join("over");
        std::fs::write(&at, vec![b'1'; MAX_READ_BYTES]).unwrap();
        std::fs::write(&over, vec![b'1'; MAX_READ_BYTES + 1]).unwrap();
        assert_eq!(read_bounded(&at).unwrap().len(), MAX_READ_BYTES);
        assert_eq!(read_bounded(&over), Err(ReadError::TooLong));
        assert_eq!(read_bounded(&dir.path().join("none")), Err(ReadError::Absent));
        assert!(matches!(read_bounded(dir.path()), Err(ReadError::Io(_))));
    }

    #[test]
    fn read_number_pushes_a_fact_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gpu_busy_percent");
        std::fs::write(&p, "abc\n").unwrap();
        let mut facts = Vec::new();
        assert_eq!(read_number::<u64>(&p, "card1", "gpu_busy_percent", &(0..=100), &mut facts), None);
        assert_eq!(facts, vec!["card1: gpu_busy_percent unreadable (\"abc\")".to_owned()]);
    }
}
