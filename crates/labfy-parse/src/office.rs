//! Office documents: OOXML (`.docx`, `.xlsx`, `.pptx`) and OpenDocument
//! (`.odt`, `.ods`, `.odp`) are zip archives of XML; their text is the text
//! of the parts that hold it. Every read is bounded (entries, bytes
//! inflated), so a zip bomb yields a cut text and a note, not an exhausted
//! worker.

use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::{Format, Parsed};

/// Most bytes inflated from one archive, all parts together.
const MAX_INFLATED: u64 = 64 << 20;
/// Most entries looked at.
const MAX_ENTRIES: usize = 10_000;

/// Elements after which a line ends (paragraphs, headings, rows, slides' text
/// paragraphs) and after which a tab goes (table cells).
const LINE_ENDS: &[&[u8]] = &[b"w:p", b"a:p", b"text:p", b"text:h", b"row", b"table:table-row", b"si"];
const CELL_ENDS: &[&[u8]] = &[b"w:tc", b"c", b"table:table-cell"];
/// Elements whose text is the document's (and no other element's is).
const TEXT_ELEMENTS: &[&[u8]] = &[b"w:t", b"a:t", b"t", b"v", b"text:p", b"text:h", b"text:span", b"text:s"];

fn mime(ext: &str) -> &'static str {
    match ext {
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "odt" => "application/vnd.oasis.opendocument.text",
        "ods" => "application/vnd.oasis.opendocument.spreadsheet",
        _ => "application/vnd.oasis.opendocument.presentation",
    }
}

/// Whether `part` holds the document's text.
fn is_text_part(part: &str) -> bool {
    part == "word/document.xml"
        || (part.starts_with("word/") && (part.contains("/header") || part.contains("/footer")))
        || part == "xl/sharedStrings.xml"
        || (part.starts_with("ppt/slides/slide") && part.ends_with(".xml"))
        || part == "content.xml"
}

/// The text of one XML part.
fn xml_text(xml: &[u8], out: &mut String) -> Result<(), String> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut depth_in_text = 0usize;
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) if TEXT_ELEMENTS.contains(&e.name().as_ref()) => depth_in_text += 1,
            Ok(Event::Empty(e)) => match e.name().as_ref() {
                b"w:tab" | b"text:tab" => out.push('\t'),
                b"w:br" | b"text:line-break" | b"a:br" => out.push('\n'),
                b"text:s" => out.push(' '),
                _ => {}
            },
            Ok(Event::Text(t)) if depth_in_text > 0 => {
                let s = t.xml10_content().map_err(|e| e.to_string())?;
                out.push_str(&s);
            }
            Ok(Event::GeneralRef(r)) if depth_in_text > 0 => {
                let name = String::from_utf8_lossy(r.as_ref()).into_owned();
                out.push_str(match name.as_str() {
                    "amp" => "&",
                    "lt" => "<",
                    "gt" => ">",
                    "quot" => "\"",
                    "apos" => "'",
                    _ => "",
                });
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    out.push(c);
                }
            }
            Ok(Event::End(e)) => {
                let name = e.name();
                if TEXT_ELEMENTS.contains(&name.as_ref()) {
                    depth_in_text = depth_in_text.saturating_sub(1);
                }
                if LINE_ENDS.contains(&name.as_ref()) {
                    out.push('\n');
                } else if CELL_ENDS.contains(&name.as_ref()) {
                    out.push('\t');
                }
            }
            Ok(Event::Eof) => return Ok(()),
            Err(e) => return Err(format!("XML at byte {}: {e}", reader.error_position())),
            _ => {}
        }
        buf.clear();
    }
}

/// The `dc:title` of a document's core properties.
fn core_title(xml: &[u8]) -> Option<String> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut inside = false;
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) if e.name().as_ref() == b"dc:title" => inside = true,
            Ok(Event::Text(t)) if inside => return t.xml10_content().ok().map(|s| s.trim().to_owned()),
            Ok(Event::Eof) | Err(_) => return None,
            _ => {}
        }
        buf.clear();
    }
}

/// An office document.
pub(crate) fn document(bytes: &[u8], name: &str) -> Parsed {
    let ext = crate::filename::extension(name);
    let mime = mime(&ext);
    let mut archive = match zip::ZipArchive::new(Cursor::new(bytes)) {
        Ok(a) => a,
        Err(e) => return Parsed::unread(mime, &format!("office archive: {e}")),
    };
    let mut p = Parsed::binary(mime);
    p.format = Format::Office;
    let mut budget = MAX_INFLATED;
    let mut names: Vec<String> = archive.file_names().take(MAX_ENTRIES).map(str::to_owned).collect();
    // Slides and sheets in their order (slide2 before slide10).
    names.sort_by_key(|n| (n.len(), n.clone()));
    let mut text = String::new();
    for part in names {
        let wanted_title = part == "docProps/core.xml" || part == "meta.xml";
        if !is_text_part(&part) && !wanted_title {
            continue;
        }
        let mut xml = Vec::new();
        let read = archive
            .by_name(&part)
            .map_err(|e| e.to_string())
            .and_then(|entry| entry.take(budget + 1).read_to_end(&mut xml).map_err(|e| e.to_string()));
        if let Err(e) = read {
            p.notes.push(format!("part {part} unreadable: {e}"));
            continue;
        }
        if xml.len() as u64 > budget {
            p.notes.push(format!("inflated size above {MAX_INFLATED} bytes: text cut"));
            break;
        }
        budget -= xml.len() as u64;
        if wanted_title {
            p.title = core_title(&xml).filter(|t| !t.is_empty());
            continue;
        }
        if let Err(e) = xml_text(&xml, &mut text) {
            p.notes.push(format!("part {part}: {e}"));
        }
    }
    p.text = text.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
    p
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;

    /// A zip archive of `parts`, deflated.
    pub(crate) fn archive(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in parts {
            out.start_file(*name, opts).expect("entry");
            out.write_all(bytes).expect("write");
        }
        out.finish().expect("finish").into_inner()
    }

    #[test]
    fn a_docx_gives_its_paragraphs_and_title() {
        let doc = archive(&[
            (
                "word/document.xml",
                br#"<w:document><w:body><w:p><w:r><w:t>Soci&#233;t&#233; Alpha &amp; fils</w:t></w:r></w:p><w:p><w:r><w:t xml:space="preserve">IBAN </w:t></w:r><w:r><w:t>FR76</w:t></w:r></w:p></w:body></w:document>"#,
            ),
            ("docProps/core.xml", b"<cp:coreProperties><dc:title>Rapport</dc:title></cp:coreProperties>"),
        ]);
        let p = document(&doc, "rapport.docx");
        assert_eq!(p.format, Format::Office);
        assert_eq!(p.text, "Société Alpha & fils\nIBAN FR76");
        assert_eq!(p.title.as_deref(), Some("Rapport"));
    }

    #[test]
    fn an_odt_gives_its_paragraphs() {
        let doc = archive(&[(
            "content.xml",
            b"<office:document-content><office:body><office:text><text:h>Titre</text:h><text:p>Un<text:s/>deux</text:p></office:text></office:body></office:document-content>",
        )]);
        assert_eq!(document(&doc, "note.odt").text, "Titre\nUn deux");
    }

    #[test]
    fn a_bomb_is_cut_not_inflated() {
        let big = vec![b'a'; (MAX_INFLATED + 10) as usize];
        let mut xml = b"<w:document><w:p><w:t>".to_vec();
        xml.extend_from_slice(&big);
        xml.extend_from_slice(b"</w:t></w:p></w:document>");
        let doc = archive(&[("word/document.xml", &xml)]);
        assert!(doc.len() < 1 << 20, "the fixture is a bomb: {} bytes", doc.len());
        let p = document(&doc, "bomb.docx");
        assert!(p.notes.iter().any(|n| n.contains("text cut")), "{:?}", p.notes);
        assert!(p.text.is_empty());
    }

    #[test]
    fn a_broken_archive_is_binary_with_its_reason() {
        let p = document(b"PK\x03\x04 truncated", "x.docx");
        assert_eq!(p.format, Format::Binary);
        assert!(p.notes[0].starts_with("text not extracted: office archive"), "{:?}", p.notes);
    }
}
