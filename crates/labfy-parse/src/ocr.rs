//! OCR (SPEC A1): images, and PDF pages with no text layer
//! ([`crate::pdf`]), read by Tesseract in a confined child
//! ([`crate::tool`]); the text is marked as read by OCR in the document's
//! metadata and notes.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use crate::child::{Start, rewound, run_tool};
use crate::text::{dehyphenate, keep_printable};
use crate::tool::{self, Tool};
use crate::{Format, MAX_TEXT_BYTES, Parsed};

/// Media types Tesseract's image library (Leptonica, as Debian builds it)
/// reads.
const IMAGES: [&str; 6] = ["image/png", "image/jpeg", "image/tiff", "image/bmp", "image/gif", "image/webp"];

/// The OCR tool, when `p` is an image with no text and OCR is installed.
pub(crate) fn wanted(p: &Parsed) -> Option<Tool> {
    (p.format == Format::Binary && p.text.is_empty() && IMAGES.contains(&p.mime.as_str())).then(tool::ocr).flatten()
}

/// The text of an image, `input` (a stored file), added to `p` with its
/// marks; a failure is noted and `p` kept as it was.
pub(crate) fn image(how: Start, program: &Path, input: &File, mut p: Parsed, tool: Tool, deadline: Instant) -> Parsed {
    let text = rewound(input).and_then(|f| run_tool(how, program, f, &tool, deadline, MAX_TEXT_BYTES as u64 + 1));
    match text {
        Ok((text, over)) => {
            p.text = dehyphenate(&keep_printable(&String::from_utf8_lossy(&text))).trim().to_owned();
            let Tool::Ocr(langs) = &tool else { return crate::finish(p) };
            p.metadata.insert("ocr".into(), format!("tesseract ({langs})"));
            p.notes.push(if p.text.is_empty() {
                format!("read by OCR (tesseract, {langs}): no text found")
            } else {
                format!("text read by OCR (tesseract, {langs}), which can misread words")
            });
            if over {
                p.notes.push(format!("text cut at {MAX_TEXT_BYTES} bytes"));
            }
        }
        Err(why) => p.notes.push(crate::clean(&format!("not read by OCR: {why}"), crate::MAX_METADATA_CHARS)),
    }
    crate::finish(p)
}

/// The text of an image held in memory (a page rendered by `pdftoppm`),
/// given to Tesseract through a pipe.
pub(crate) fn text(
    how: Start,
    program: &Path,
    image: Vec<u8>,
    tool: &Tool,
    deadline: Instant,
) -> Result<String, String> {
    let (read, write) = labfy_sys::pipe().map_err(|e| format!("OCR could not start: {e}"))?;
    let writer = std::thread::spawn(move || {
        let mut w = File::from(write);
        // A reader that stopped early (it died, or was killed) ends the
        // write with EPIPE: nothing more to do.
        let _ = w.write_all(&image);
    });
    let result = run_tool(how, program, read, tool, deadline, MAX_TEXT_BYTES as u64);
    let _ = writer.join();
    let (text, _) = result?;
    Ok(dehyphenate(&keep_printable(&String::from_utf8_lossy(&text))).trim().to_owned())
}
