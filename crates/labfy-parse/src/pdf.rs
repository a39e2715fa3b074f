//! PDF text, every word of it (SPEC A1): poppler's `pdfinfo` and
//! `pdftotext -raw` in confined children ([`crate::tool`]), pages with no
//! text layer read by OCR, and notes that say what was and was not read.
//!
//! Why poppler, in raw mode: on the corpus of `tests/fixtures/pdf-corpus`
//! (one source text made into PDFs by ghostscript, groff, pdfTeX,
//! Chromium and LibreOffice) `pdftotext -raw` keeps every word of every
//! producer once line-end hyphens are joined ([`crate::text::dehyphenate`]); its default
//! mode reorders pdfTeX's columns and joins « ci-dessous » into
//! « cidessous »; the built-in `pdf-extract` — still the fallback where
//! poppler is not installed — loses most of a ghostscript PDF's text
//! (figures in `docs/PERFORMANCE.md`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::child::{Start, rewound, run_tool};
use crate::text::{dehyphenate, keep_printable, words};
use crate::tool::{self, Tool};
use crate::{Format, MAX_TEXT_BYTES, Parsed};

/// The note on a PDF read without poppler.
pub(crate) const NO_POPPLER: &str =
    "poppler-utils is not installed: the text was read by the built-in PDF reader, which can miss words";
/// Most pages of one PDF read by OCR (each takes seconds of CPU).
pub const MAX_OCR_PAGES: usize = 12;
/// Most bytes of one page rendered for OCR.
const MAX_PAGE_IMAGE_BYTES: u64 = 64 << 20;

/// Whether the stored file is a PDF (its signature, as [`crate::detect`]
/// tells formats apart).
pub(crate) fn is_pdf(input: &File) -> bool {
    let mut head = [0u8; 5];
    input.read_exact_at(&mut head, 0).is_ok() && &head == b"%PDF-"
}

/// Whether `pdfinfo` and `pdftotext` are installed.
pub(crate) fn tools_installed() -> bool {
    Tool::Pdf.installed()
}

/// Reads a PDF with poppler (and Tesseract for its pages without text).
/// Falls back to the built-in reader, with a note, where poppler cannot.
pub(crate) fn read(how: Start, program: &Path, input: File, input_len: u64, deadline: Instant) -> Parsed {
    let mut p = Parsed::binary("application/pdf");
    p.format = Format::Pdf;
    // One confined child: the information and the text.
    let max = MAX_HEAD_BYTES as u64 + MAX_TEXT_BYTES as u64 + 1;
    let out = rewound(&input).and_then(|f| run_tool(how, program, f, &Tool::Pdf, deadline, max));
    let (out, over) = match out {
        Ok(out) => out,
        Err(why) if why.contains("Incorrect password") => {
            p.metadata.insert("encrypted".into(), "yes (a password is needed to open it)".into());
            p.notes.push("text not extracted: the PDF is encrypted and needs a password to be opened".into());
            return crate::finish(p);
        }
        Err(why) => return fallback(how, program, input, input_len, deadline, &why),
    };
    let (head, text) = match split_html(&out) {
        Some(parts) => parts,
        None => {
            return fallback(
                how,
                program,
                input,
                input_len,
                deadline,
                "pdftotext's answer is not of the expected form",
            );
        }
    };
    metadata(&String::from_utf8_lossy(head), &mut p);
    file_facts(&input, &mut p);
    let over = over || text.len() > MAX_TEXT_BYTES;
    let text = String::from_utf8_lossy(&text[..text.len().min(MAX_TEXT_BYTES)]);
    let mut pages: Vec<String> = text.split('\u{c}').map(|page| dehyphenate(&keep_printable(page))).collect();
    // pdftotext ends every page with a form feed: the last piece is empty.
    if pages.len() > 1 && pages.last().is_some_and(|l| l.trim().is_empty()) {
        pages.pop();
    }
    if over {
        p.notes.push(format!("text cut at {MAX_TEXT_BYTES} bytes"));
    }
    let declared: usize = p.metadata.get("pages").and_then(|n| n.parse().ok()).unwrap_or(pages.len());
    ocr_pages(how, program, &input, &mut pages, &mut p, deadline);
    if !over && pages.len() < declared {
        p.notes.push(format!("{} of {declared} pages read", pages.len()));
    }
    p.metadata.insert("pages".into(), declared.to_string());
    p.text = pages.join("\n\u{c}\n").trim().to_owned();
    crate::finish(p)
}

/// The built-in reader (the parser worker's `pdf-extract`), noting why
/// poppler was not used.
fn fallback(how: Start, program: &Path, input: File, input_len: u64, deadline: Instant, why: &str) -> Parsed {
    let mut p = match rewound(&input) {
        Ok(f) => crate::child::worker(how, program, f, input_len, "document.pdf", None, deadline),
        Err(e) => Parsed::unread("application/pdf", &e),
    };
    p.notes.push(crate::clean(
        &format!("poppler could not read it ({why}): the built-in PDF reader was used, which can miss words"),
        crate::MAX_METADATA_CHARS,
    ));
    p
}

/// Pages with no text layer read by OCR, in order, while the limits allow;
/// notes say which pages were read by OCR and which were not read at all.
fn ocr_pages(how: Start, program: &Path, input: &File, pages: &mut [String], p: &mut Parsed, deadline: Instant) {
    let empty: Vec<usize> = (0..pages.len()).filter(|i| words(&pages[*i]) < 2).collect();
    if empty.is_empty() {
        return;
    }
    let Some(ocr) = tool::ocr() else {
        p.notes.push(format!(
            "{} no text layer: not read (OCR, tesseract-ocr with French or English, is not installed)",
            page_list(&empty)
        ));
        return;
    };
    let mut read = Vec::new();
    let mut why_not = None;
    for &i in &empty {
        if read.len() >= MAX_OCR_PAGES {
            why_not = Some(format!("at most {MAX_OCR_PAGES} pages of a document are read by OCR"));
            break;
        }
        if Instant::now() >= deadline {
            why_not = Some("no time was left to read them".to_owned());
            break;
        }
        let page = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let image = rewound(input)
            .and_then(|f| run_tool(how, program, f, &Tool::PdfPage(page), deadline, MAX_PAGE_IMAGE_BYTES));
        match image.and_then(|(img, over)| {
            if over {
                return Err("page image too large".into());
            }
            crate::ocr::text(how, program, img, &ocr, deadline)
        }) {
            Ok(text) => {
                pages[i] = text;
                read.push(i);
            }
            Err(why) => {
                why_not.get_or_insert(why);
            }
        }
    }
    if !read.is_empty() {
        let Tool::Ocr(langs) = &ocr else { return };
        p.metadata.insert("ocr".into(), format!("tesseract ({langs})"));
        p.metadata.insert("ocr_pages".into(), numbers(&read));
        p.notes.push(format!(
            "{} no text layer: read by OCR (tesseract, {langs}), which can misread words",
            page_list(&read)
        ));
    }
    let left: Vec<usize> = empty.iter().copied().filter(|i| !read.contains(i)).collect();
    if !left.is_empty() {
        let why = why_not.unwrap_or_default();
        p.notes.push(format!("{} no text layer: not read ({why})", page_list(&left)));
    }
}

/// « page 3 has » / « pages 1–2, 5 have », 0-based indexes in.
fn page_list(pages: &[usize]) -> String {
    if pages.len() == 1 {
        return format!("page {} has", pages[0] + 1);
    }
    format!("pages {} have", numbers(pages))
}

/// `1–3, 5` for 0-based indexes 0, 1, 2, 4.
fn numbers(pages: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let mut j = i;
        while j + 1 < pages.len() && pages[j + 1] == pages[j] + 1 {
            j += 1;
        }
        parts.push(if j == i { format!("{}", pages[i] + 1) } else { format!("{}–{}", pages[i] + 1, pages[j] + 1) });
        i = j + 1;
    }
    parts.join(", ")
}

/// Most bytes of the HTML head `pdftotext -htmlmeta` writes before the text.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// `pdftotext -htmlmeta`'s answer split: its head (up to `<pre>`), and the
/// text (up to the last `</pre>`, which the text itself cannot fake: it
/// comes after it).
fn split_html(out: &[u8]) -> Option<(&[u8], &[u8])> {
    const OPEN: &[u8] = b"<pre>\n";
    const CLOSE: &[u8] = b"</pre>";
    let start = out.windows(OPEN.len()).take(MAX_HEAD_BYTES).position(|w| w == OPEN)?;
    let (head, rest) = out.split_at(start);
    let rest = &rest[OPEN.len()..];
    let end = rest.windows(CLOSE.len()).rposition(|w| w == CLOSE).unwrap_or(rest.len());
    Some((head, &rest[..end]))
}

/// The document information an analyst reads (title, author, subject,
/// keywords, creator and producer programs, dates), from the head
/// `pdftotext -htmlmeta` writes.
fn metadata(head: &str, p: &mut Parsed) {
    if let Some(t) = between(head, "<title>", "</title>").map(unescape).filter(|t| !t.trim().is_empty()) {
        p.title = Some(t.trim().to_owned());
    }
    for line in head.lines() {
        let Some(name) = between(line, "<meta name=\"", "\"") else { continue };
        let Some(value) = between(line, "content=\"", "\"/>").map(unescape) else { continue };
        let value = value.trim();
        let key = match name {
            "Author" => "author",
            "Subject" => "subject",
            "Keywords" => "keywords",
            "Creator" => "creator",
            "Producer" => "producer",
            "CreationDate" => "created",
            "ModDate" => "modified",
            _ => continue,
        };
        if !value.is_empty() {
            p.metadata.insert(key.into(), value.to_owned());
        }
    }
}

fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = s.find(open)? + open.len();
    let len = s[start..].find(close)?;
    Some(&s[start..start + len])
}

/// The entities poppler writes in the head.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

/// What the file's own bytes say: its PDF version (its header), and
/// whether it is encrypted (an `/Encrypt` entry in its trailer, near its
/// end).
fn file_facts(input: &File, p: &mut Parsed) {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 16];
    if input.read_at(&mut head, 0).is_ok()
        && let Some(v) = head.strip_prefix(b"%PDF-")
    {
        let v: String = v.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').map(|b| *b as char).collect();
        if !v.is_empty() {
            p.metadata.insert("pdf_version".into(), v);
        }
    }
    // The trailer is at the end, or — a linearised file — at the start.
    let len = input.metadata().map(|m| m.len()).unwrap_or(0);
    let ends = [(0, len.min(TRAILER_BYTES)), (len.saturating_sub(TRAILER_BYTES), len)];
    let encrypted = ends.iter().any(|&(from, to)| {
        let mut part = vec![0u8; (to - from) as usize];
        input.read_exact_at(&mut part, from).is_ok() && part.windows(8).any(|w| w == b"/Encrypt")
    });
    if encrypted {
        p.metadata.insert("encrypted".into(), "yes".into());
    }
}

/// How much of each end of a PDF is searched for its trailer's `/Encrypt`.
const TRAILER_BYTES: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_information_and_the_text_come_apart() {
        let out = "<!DOCTYPE html><html>\n<head>\n<title>Rapport &amp; annexes</title>\n\
                   <meta name=\"Author\" content=\"H&eacute;l&amp;ne &lt;HM&gt;\"/>\n\
                   <meta name=\"Producer\" content=\"GPL Ghostscript 10.00.0\"/>\n</head>\n<body>\n<pre>\n\
                   Texte avec </pre> dedans\n\u{c}\n</pre>\n</body>\n</html>\n";
        let (head, text) = split_html(out.as_bytes()).unwrap();
        assert_eq!(std::str::from_utf8(text).unwrap(), "Texte avec </pre> dedans\n\u{c}\n");
        let mut p = Parsed::binary("application/pdf");
        metadata(std::str::from_utf8(head).unwrap(), &mut p);
        assert_eq!(p.title.as_deref(), Some("Rapport & annexes"));
        assert_eq!(p.metadata["author"], "H&eacute;l&ne <HM>");
        assert_eq!(p.metadata["producer"], "GPL Ghostscript 10.00.0");
        assert!(split_html(b"no pre here").is_none());
    }

    #[test]
    fn page_lists_read_as_ranges() {
        assert_eq!(numbers(&[0, 1, 2, 4]), "1–3, 5");
        assert_eq!(page_list(&[2]), "page 3 has");
        assert_eq!(page_list(&[0, 1]), "pages 1–2 have");
    }
}
