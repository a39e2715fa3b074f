//! Which parser reads a file: its signature first, its name's extension
//! second (an extension is a claim; a signature is what the bytes are).

use crate::Format;
use crate::filename::{OFFICE, extension};

const MAIL_HEADERS: &[&str] =
    &["return-path:", "received:", "from:", "message-id:", "date:", "mime-version:", "delivered-to:", "subject:"];

/// The first bytes, past a UTF-8 BOM and white space, lower-cased.
fn head(bytes: &[u8], n: usize) -> String {
    let b = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    String::from_utf8_lossy(&b[start..b.len().min(start + n)]).to_ascii_lowercase()
}

/// Whether the bytes look like text: no NUL in the first 8 KiB (unless a
/// UTF-16 BOM says the NULs are half of each character).
pub(crate) fn is_text(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        return true;
    }
    !bytes[..bytes.len().min(8192)].contains(&0)
}

/// The format to read `bytes` as.
pub(crate) fn format(bytes: &[u8], name: &str) -> Format {
    let ext = extension(name);
    if bytes.starts_with(b"%PDF-") {
        return Format::Pdf;
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return if OFFICE.contains(&ext.as_str()) { Format::Office } else { Format::Archive };
    }
    if crate::archive::kind(bytes, name).is_some() {
        return Format::Archive;
    }
    if infer::get(bytes).is_some_and(|t| !matches!(t.matcher_type(), infer::MatcherType::Text)) || !is_text(bytes) {
        return Format::Binary;
    }
    let h = head(bytes, 1024);
    if ext == "mbox" || (bytes.starts_with(b"From ") && ext != "eml") {
        return Format::Mbox;
    }
    if ext == "eml" || MAIL_HEADERS.iter().any(|m| h.starts_with(m)) && h.contains("\nsubject:") {
        return Format::Email;
    }
    if matches!(ext.as_str(), "html" | "htm" | "xhtml")
        || h.starts_with("<!doctype html")
        || h.starts_with("<html")
        || (h.starts_with("<?xml") && h.contains("<html"))
    {
        return Format::Html;
    }
    Format::Text
}

/// Media type of a binary file, from its signature.
pub(crate) fn binary_mime(bytes: &[u8]) -> String {
    infer::get(bytes).map_or_else(|| "application/octet-stream".to_owned(), |t| t.mime_type().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_wins_over_the_extension() {
        assert_eq!(format(b"%PDF-1.7\n...", "notes.txt"), Format::Pdf);
        assert_eq!(format(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "page.html"), Format::Binary);
        assert_eq!(format(b"PK\x03\x04rest", "archive.zip"), Format::Archive);
        assert_eq!(format(b"PK\x03\x04rest", "rapport.docx"), Format::Office);
    }

    #[test]
    fn text_formats_are_told_apart() {
        assert_eq!(format(b"From a@b Mon Jan  1 00:00:00 2024\nSubject: x\n\nhi\n", "box"), Format::Mbox);
        assert_eq!(format(b"From: a@b.example\nSubject: x\n\nhi\n", "message"), Format::Email);
        assert_eq!(format(b"  <!DOCTYPE html><html></html>", "page"), Format::Html);
        assert_eq!(format(b"hello", "page.htm"), Format::Html);
        assert_eq!(format(b"Subject: not a mail header first", "a.txt"), Format::Text);
        assert_eq!(format(b"plain words", "a.txt"), Format::Text);
        assert_eq!(format(b"a\0b", "a.txt"), Format::Binary);
        assert_eq!(format(b"\xFF\xFEh\0i\0", "a.txt"), Format::Text);
    }

    #[test]
    fn extensions_are_read_from_the_last_component() {
        assert_eq!(extension("dir.d/Rapport.DOCX"), "docx");
        assert_eq!(extension(".bashrc"), "");
        assert_eq!(extension("noext"), "");
    }
}
