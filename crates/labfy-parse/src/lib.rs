#![doc = include_str!("../README.md")]

pub mod archive;
mod child;
mod detect;
mod filename;
#[doc(hidden)]
pub mod fixtures;
mod mail;
mod ocr;
mod office;
pub mod pdf;
pub mod run;
pub mod runner;
pub mod session;
mod text;
pub mod tool;
pub mod worker;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the parser set, recorded with each import: a document parsed
/// by an older set can be told apart. 2: PDFs read by poppler, OCR. 3:
/// typographic ligatures written as their letters.
pub const VERSION: u32 = 3;
/// Name recorded as the parser in provenance.
pub const PRODUCER: &str = "labfy-parse";
/// Most text kept from one document, in bytes; the rest is cut at a
/// character boundary and the cut is noted.
pub const MAX_TEXT_BYTES: usize = 16 << 20;
/// Most embedded documents (attachments, mbox messages) taken from one.
pub const MAX_CHILDREN: usize = 256;
/// Longest title or child name, in characters.
pub const MAX_NAME_CHARS: usize = 300;
/// Most metadata fields, and the longest value, in characters.
pub const MAX_METADATA: usize = 32;
/// Longest metadata value, in characters.
pub const MAX_METADATA_CHARS: usize = 2000;
/// Most notes on one document.
pub const MAX_NOTES: usize = 16;

/// What kind of document the bytes were read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Plain text.
    Text,
    /// An HTML page.
    Html,
    /// A PDF document.
    Pdf,
    /// An archive (zip, tar, compressed with gzip, xz or zstd): its members
    /// are its children (SPEC I2).
    Archive,
    /// One e-mail message (RFC 5322).
    Email,
    /// A mailbox of messages (mbox).
    Mbox,
    /// An office document (OOXML or OpenDocument).
    Office,
    /// Anything else: kept, not read.
    Binary,
}

impl Format {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Html => "html",
            Format::Pdf => "pdf",
            Format::Archive => "archive",
            Format::Email => "email",
            Format::Mbox => "mbox",
            Format::Office => "office",
            Format::Binary => "binary",
        }
    }
}

/// An embedded document: an e-mail's attachment, a mailbox's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Child {
    /// Its name (the attachment's file name, `message-0001.eml`).
    pub name: String,
    /// Its bytes, as base64 on the wire.
    #[serde(with = "b64")]
    pub bytes: Vec<u8>,
}

/// What a parser read from one document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Parsed {
    /// How it was read.
    pub format: Format,
    /// Its media type.
    pub mime: String,
    /// Its title, where the format has one.
    pub title: Option<String>,
    /// Its text (empty for binary documents).
    pub text: String,
    /// The character encoding the text was decoded from, where it was one.
    pub encoding: Option<String>,
    /// Format fields (e-mail headers, page count, office title).
    pub metadata: BTreeMap<String, String>,
    /// Embedded documents, to import as children of this one.
    pub children: Vec<Child>,
    /// What the analyst should know (text cut, parser error, children left).
    pub notes: Vec<String>,
}

impl Parsed {
    fn binary(mime: &str) -> Self {
        Parsed {
            format: Format::Binary,
            mime: mime.to_owned(),
            title: None,
            text: String::new(),
            encoding: None,
            metadata: BTreeMap::new(),
            children: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A document whose parser failed: kept as binary, with the reason.
    pub fn unread(mime: &str, reason: &str) -> Self {
        let mut p = Parsed::binary(mime);
        p.notes.push(format!("text not extracted: {}", bounded(reason, MAX_METADATA_CHARS)));
        p
    }

    /// Cuts the text at [`MAX_TEXT_BYTES`] (a character boundary) and notes it.
    fn bound_text(&mut self) {
        if self.text.len() > MAX_TEXT_BYTES {
            let mut cut = MAX_TEXT_BYTES;
            while !self.text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.notes.push(format!("text cut at {cut} bytes of {}", self.text.len()));
            self.text.truncate(cut);
        }
    }
}

/// The worker's answer: what it read, or why it could not read anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum Reply {
    /// The document, read.
    Parsed(Parsed),
    /// The input could not be taken (too large, unreadable).
    Refused(String),
}

/// Why a worker's reply is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadReply(pub String);

impl std::fmt::Display for BadReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the parser's reply was refused: {}", self.0)
    }
}

fn ok_name(what: &str, s: &str) -> Result<(), BadReply> {
    if s.chars().count() > MAX_NAME_CHARS {
        return Err(BadReply(format!("{what} longer than {MAX_NAME_CHARS} characters")));
    }
    if s.chars().any(char::is_control) {
        return Err(BadReply(format!("{what} contains control characters")));
    }
    Ok(())
}

impl Reply {
    /// Decodes and checks a worker's output. The worker has read a hostile
    /// file and may have been taken over by it: every bound the parsers keep
    /// is checked again here, in the parent.
    pub fn check(output: &[u8], input_len: usize) -> Result<Reply, BadReply> {
        let reply: Reply = serde_json::from_slice(output).map_err(|e| BadReply(format!("not a reply: {e}")))?;
        let Reply::Parsed(p) = &reply else { return Ok(reply) };
        if p.text.len() > MAX_TEXT_BYTES {
            return Err(BadReply(format!("text of {} bytes", p.text.len())));
        }
        let well_formed = p.mime.len() <= 127
            && p.mime.split_once('/').is_some_and(|(t, sub)| {
                !t.is_empty()
                    && !sub.is_empty()
                    && !sub.contains('/')
                    && p.mime.bytes().all(|b| b.is_ascii_alphanumeric() || b"/+-.".contains(&b))
            });
        if !well_formed {
            return Err(BadReply("media type not of the form type/subtype".into()));
        }
        if let Some(t) = &p.title {
            ok_name("title", t)?;
        }
        if let Some(e) = &p.encoding {
            ok_name("encoding", e)?;
        }
        if p.metadata.len() > MAX_METADATA
            || p.metadata.iter().any(|(k, v)| k.len() > 64 || v.chars().count() > MAX_METADATA_CHARS)
        {
            return Err(BadReply("metadata beyond its bounds".into()));
        }
        if p.notes.len() > MAX_NOTES || p.notes.iter().any(|n| n.chars().count() > MAX_METADATA_CHARS) {
            return Err(BadReply("notes beyond their bounds".into()));
        }
        if p.children.len() > MAX_CHILDREN {
            return Err(BadReply(format!("{} children", p.children.len())));
        }
        let mut total = 0usize;
        for c in &p.children {
            ok_name("child name", &c.name)?;
            total += c.bytes.len();
        }
        // Children are parts of the input (decoded: base64 shrinks, never
        // grows), so together they cannot exceed it — unless they were
        // inflated from an archive, within the archive's bounds.
        let bound = if p.format == Format::Archive {
            usize::try_from(archive::max_inflated(input_len as u64)).unwrap_or(usize::MAX)
        } else {
            input_len
        };
        if total > bound {
            return Err(BadReply(format!("children of {total} bytes from an input of {input_len}")));
        }
        Ok(reply)
    }
}

/// `s` cut to `max` characters.
fn bounded(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// `s` cut to `max` characters, control characters replaced by spaces.
fn clean(s: &str, max: usize) -> String {
    s.chars().take(max).map(|c| if c.is_control() { ' ' } else { c }).collect::<String>().trim().to_owned()
}

/// If this process was started as a parser worker or a document tool (by
/// [`run`]), becomes it and never returns; otherwise returns. Call it
/// first in the `main` of every program a parser is started from.
pub fn run_if_child() {
    runner::run_if_runner();
    worker::run_if_worker();
    tool::run_if_tool();
}

/// Reads `bytes` (the file named `name`) as the document it is. Never
/// fails: what cannot be read is binary evidence with a note saying why.
pub fn parse(bytes: &[u8], name: &str) -> Parsed {
    parse_declared(bytes, name, None)
}

/// [`parse`], with the charset its transport declared (an HTTP
/// `Content-Type`'s, through [`charset_of`]): for text and HTML it comes
/// after a byte-order mark and before the page's own `<meta>`, as the HTML
/// standard orders them (SPEC C2, C3). An unknown label is ignored.
pub fn parse_declared(bytes: &[u8], name: &str, charset: Option<&str>) -> Parsed {
    let transport = charset.and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()));
    let p = match detect::format(bytes, name) {
        Format::Text => text::plain(bytes, transport),
        Format::Html => text::html(bytes, transport),
        Format::Pdf => pdf(bytes),
        Format::Archive => match archive::kind(bytes, name) {
            Some(kind) => archive::read(bytes, name, kind),
            None => Parsed::binary(&detect::binary_mime(bytes)),
        },
        Format::Email => mail::message(bytes),
        Format::Mbox => mail::mbox(bytes),
        Format::Office => office::document(bytes, name),
        Format::Binary => Parsed::binary(&detect::binary_mime(bytes)),
    };
    finish(p)
}

/// Bounds and cleans what a parser read: the text cut at
/// [`MAX_TEXT_BYTES`], title, metadata, children's names and notes without
/// control characters and within their bounds.
fn finish(mut p: Parsed) -> Parsed {
    p.bound_text();
    if let Some(t) = p.title.take() {
        let t = clean(&t, MAX_NAME_CHARS);
        p.title = (!t.is_empty()).then_some(t);
    }
    p.metadata = std::mem::take(&mut p.metadata)
        .into_iter()
        .take(MAX_METADATA)
        .map(|(k, v)| (bounded(&k, 64), clean(&v, MAX_METADATA_CHARS)))
        .filter(|(_, v)| !v.is_empty())
        .collect();
    for c in &mut p.children {
        c.name = clean(&c.name, MAX_NAME_CHARS);
    }
    p.notes.truncate(MAX_NOTES);
    p.notes = p.notes.iter().map(|n| clean(n, MAX_METADATA_CHARS)).collect();
    p
}

/// The canonical name of the charset a `Content-Type` value declares
/// (`text/html; charset="ISO-8859-1"` → `windows-1252`), if the encoding
/// standard knows it: what is safe to hand to [`parse_declared`] and to a
/// worker's command line.
pub fn charset_of(content_type: &str) -> Option<&'static str> {
    content_type.split(';').skip(1).find_map(|param| {
        let (key, value) = param.split_once('=')?;
        if !key.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        let label = value.trim().trim_matches(['"', '\'']).trim();
        encoding_rs::Encoding::for_label(label.as_bytes()).map(encoding_rs::Encoding::name)
    })
}

fn pdf(bytes: &[u8]) -> Parsed {
    match pdf_extract::extract_text_from_mem_by_pages(bytes) {
        Ok(pages) => {
            let mut p = Parsed::binary("application/pdf");
            p.format = Format::Pdf;
            p.metadata.insert("pages".into(), pages.len().to_string());
            let pages: Vec<String> = pages.iter().map(|page| crate::text::keep_printable(page)).collect();
            p.text = pages.join("\n\u{c}\n").trim().to_owned();
            if p.text.is_empty() {
                p.notes.push("no text layer (a scan?)".into());
            }
            p
        }
        Err(e) => Parsed::unread("application/pdf", &format!("PDF: {e}")),
    }
}

mod b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
