//! Real documents made on the spot, for tests and `labfy-bench import`
//! (no fixture is fetched): a PDF with a text layer, a `.docx`, an e-mail
//! with an attachment, a mailbox, a zip and a `.tar.gz`.

use std::io::{Cursor, Write};

/// A one-page PDF whose text layer holds `lines` (ASCII, Helvetica).
pub fn pdf(lines: &[&str]) -> Vec<u8> {
    let mut content = String::from("BT /F1 12 Tf 72 720 Td 14 TL\n");
    for l in lines {
        let esc = l.replace('\\', "\\\\").replace('(', "\\(").replace(')', "\\)");
        content.push_str(&format!("({esc}) Tj T*\n"));
    }
    content.push_str("ET\n");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>"
            .to_owned(),
        format!("<< /Length {} >>\nstream\n{content}endstream", content.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{o}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!("trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1).as_bytes(),
    );
    out
}

/// A `.docx` whose body holds `paragraphs`, titled `title`.
pub fn docx(title: &str, paragraphs: &[&str]) -> Vec<u8> {
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body: String = paragraphs
        .iter()
        .map(|p| format!("<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>", esc(p)))
        .collect();
    let document = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}</w:body></w:document>"
    );
    let core = format!(
        "<?xml version=\"1.0\"?><cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\"><dc:title>{}</dc:title></cp:coreProperties>",
        esc(title)
    );
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in [
        ("[Content_Types].xml", "<?xml version=\"1.0\"?><Types/>".to_owned()),
        ("word/document.xml", document),
        ("docProps/core.xml", core),
    ] {
        // Writing into memory cannot fail.
        let _ = out.start_file(name, opts);
        let _ = out.write_all(bytes.as_bytes());
    }
    out.finish().map(Cursor::into_inner).unwrap_or_default()
}

/// An e-mail from `from` with `subject`, a plain body and one text
/// attachment named `attachment`.
pub fn eml(from: &str, subject: &str, body: &str, attachment: (&str, &str)) -> Vec<u8> {
    format!(
        "From: {from}\r\nTo: enquete@labfy.example\r\nSubject: {subject}\r\nDate: Tue, 3 Mar 2026 10:00:00 +0100\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"sep\"\r\n\r\n--sep\r\n\
         Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n--sep\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Disposition: attachment; filename=\"{}\"\r\n\r\n{}\r\n--sep--\r\n",
        attachment.0, attachment.1
    )
    .into_bytes()
}

/// A mailbox of `messages` (from, subject, body).
pub fn mbox(messages: &[(&str, &str, &str)]) -> Vec<u8> {
    let mut out = String::new();
    for (i, (from, subject, body)) in messages.iter().enumerate() {
        out.push_str(&format!(
            "From {from} Mon Mar  2 10:00:{:02} 2026\nFrom: {from}\nSubject: {subject}\nDate: Mon, 2 Mar 2026 10:00:{:02} +0000\n\n{body}\n\n",
            i % 60,
            i % 60
        ));
    }
    out.into_bytes()
}

/// A zip archive of `files` (names as given, `..` included: a test's hostile
/// archive).
pub fn zip(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in files {
        // Writing into memory cannot fail.
        let _ = z.start_file(*name, opts);
        let _ = z.write_all(data);
    }
    z.finish().map(Cursor::into_inner).unwrap_or_default()
}

/// A tar archive of `files`.
pub fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        // Writing into memory cannot fail.
        let _ = b.append_data(&mut h, name, *data);
    }
    b.into_inner().unwrap_or_default()
}

/// A gzip-compressed tar archive of `files`.
pub fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into memory cannot fail.
    let _ = gz.write_all(&tar(files));
    gz.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Format, parse};

    #[test]
    fn each_fixture_reads_back() {
        let p = parse(&pdf(&["Rapport Alpha", "IBAN FR76 3000 6000 0112 3456 7890 189"]), "r.pdf");
        assert_eq!(p.format, Format::Pdf, "{:?}", p.notes);
        assert!(p.text.contains("Rapport Alpha"), "{:?}", p.text);
        assert_eq!(p.metadata["pages"], "1");
        let p = parse(&docx("Note", &["Un", "Deux"]), "n.docx");
        assert_eq!((p.title.as_deref(), p.text.as_str()), (Some("Note"), "Un\nDeux"));
        let p = parse(&eml("a@b.example", "Objet", "Corps", ("x.txt", "pièce")), "m.eml");
        assert_eq!(p.children.len(), 1);
        let p = parse(&mbox(&[("a@b.example", "Un", "1"), ("c@d.example", "Deux", "2")]), "boite.mbox");
        assert_eq!(p.children.len(), 2);
    }
}
