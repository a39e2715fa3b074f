//! Plain text and HTML: the character encoding found (BOM, declaration,
//! UTF-8, else Mozilla's detector), then the text.

use encoding_rs::{Encoding, UTF_8};

use crate::{Format, Parsed};

/// Decodes `bytes`: a BOM first, then `declared` (an HTML page's charset),
/// then UTF-8 if the bytes are valid UTF-8, else the detector's guess.
pub(crate) fn decode(bytes: &[u8], declared: Option<&'static Encoding>) -> (String, &'static Encoding) {
    if let Some((enc, _)) = Encoding::for_bom(bytes) {
        let (text, _) = enc.decode_with_bom_removal(bytes);
        return (text.into_owned(), enc);
    }
    let enc = match declared {
        Some(e) => e,
        None if std::str::from_utf8(bytes).is_ok() => UTF_8,
        None => {
            let mut det = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
            det.feed(bytes, true);
            det.guess(None, chardetng::Utf8Detection::Allow)
        }
    };
    let (text, _, _) = enc.decode(bytes);
    (text.into_owned(), enc)
}

/// A plain-text document; `transport`: the charset its transport declared.
pub(crate) fn plain(bytes: &[u8], transport: Option<&'static Encoding>) -> Parsed {
    let (text, enc) = decode(bytes, transport);
    let mut p = Parsed::binary("text/plain");
    p.format = Format::Text;
    p.text = text;
    p.encoding = Some(enc.name().to_owned());
    p
}

/// The charset an HTML page declares in its first 1024 bytes
/// (`<meta charset=…>` or `content="…; charset=…"`), as the HTML standard's
/// prescan would find it in the common cases.
fn declared_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1024)]).to_ascii_lowercase();
    let at = head.find("charset")?;
    let rest = head[at + "charset".len()..].trim_start().strip_prefix('=')?.trim_start();
    let rest = rest.trim_start_matches(['"', '\'']);
    let label: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || "-_:.".contains(*c)).collect();
    let enc = Encoding::for_label(label.as_bytes())?;
    // A page that says UTF-16 in ASCII is not UTF-16 (the standard's rule).
    Some(if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE { UTF_8 } else { enc })
}

/// The text of a page's `<title>`.
fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let t = html.get(start..end)?;
    let t = html2text::config::plain().string_from_read(t.as_bytes(), usize::MAX / 4).ok()?;
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then_some(t)
}

/// An HTML page: its text as a reader sees it (no markup, no script), its
/// title. `transport` (the charset its HTTP answer declared) comes before
/// the page's own declaration.
pub(crate) fn html(bytes: &[u8], transport: Option<&'static Encoding>) -> Parsed {
    let (source, enc) = decode(bytes, transport.or_else(|| declared_charset(bytes)));
    let mut p = Parsed::binary("text/html");
    p.format = Format::Html;
    p.encoding = Some(enc.name().to_owned());
    p.title = title(&source);
    match html2text::config::plain().string_from_read(source.as_bytes(), 10_000) {
        Ok(t) => p.text = t.lines().map(str::trim_end).collect::<Vec<_>>().join("\n").trim().to_owned(),
        Err(e) => p.notes.push(format!("text not extracted: HTML: {e}")),
    }
    p
}

/// Alphanumeric runs in `s`.
pub(crate) fn words(s: &str) -> usize {
    s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).count()
}

/// `s` without control characters but line breaks and tabs (a tool's
/// output is as untrusted as the file), and with the typographic ligatures
/// a typesetter drew as one glyph (`ﬁ`, `ﬀ`, `ﬃ`… U+FB00–U+FB06) written
/// as their letters (their Unicode compatibility decomposition): a PDF from
/// AbiWord, or Tesseract's reading, says `ﬁnancière`, and the analyst
/// searches `financière` (SPEC A1).
pub(crate) fn keep_printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if ('\u{fb00}'..='\u{fb06}').contains(&c) {
            unicode_normalization::char::decompose_compatible(c, |d| out.push(d));
        } else if !c.is_control() || c == '\n' || c == '\t' {
            out.push(c);
        }
    }
    out
}

/// Joins words a typesetter cut at the end of a line (`Kowal-` / `czyk`),
/// as a reader does: a line ending in a letter and a hyphen, followed by
/// one starting with a lower-case letter. The hyphen goes (`Kowalczyk`)
/// unless the document shows the pair hyphenated elsewhere
/// (`ci-dessous`), or the cut word is an address, a domain or a number
/// (`transports-lemaitre.fr`); it stays too where the document never shows
/// the joined word but shows its first half, four letters or more, alone
/// as a word (`quatre-vingt`).
pub(crate) fn dehyphenate(page: &str) -> String {
    let lines: Vec<&str> = page.split('\n').collect();
    if !lines.iter().any(|l| l.trim_end().ends_with('-')) {
        return page.to_owned();
    }
    let mut seen = std::collections::HashSet::new();
    let mut compounds = std::collections::HashSet::new();
    for line in &lines {
        for token in line.split_whitespace() {
            let token = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '-');
            if token.ends_with('-') {
                continue;
            }
            let parts: Vec<&str> = token.split('-').collect();
            if let [one] = parts.as_slice() {
                seen.extend(one.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase));
            }
            for pair in parts.windows(2) {
                compounds.insert(format!("{}-{}", pair[0].to_lowercase(), pair[1].to_lowercase()));
            }
        }
    }
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    let mut current = lines[0].to_owned();
    loop {
        if let Some(next) = lines.get(i + 1).map(|n| n.trim_start()) {
            if let Some((joined, rest)) = join_cut(&current, next, &seen, &compounds) {
                current = joined;
                i += 1;
                if rest.is_empty() {
                    // The next line was one word: the joined line goes on.
                    continue;
                }
                out.push(std::mem::replace(&mut current, rest));
                continue;
            }
        }
        out.push(current);
        i += 1;
        match lines.get(i) {
            Some(l) => current = (*l).to_owned(),
            None => break,
        }
    }
    out.join("\n")
}

/// `line` joined with the first word of `next` when `line` ends with a
/// word cut by a hyphen ([`dehyphenate`]); the joined line and what is left
/// of `next`.
fn join_cut(
    line: &str,
    next: &str,
    seen: &std::collections::HashSet<String>,
    compounds: &std::collections::HashSet<String>,
) -> Option<(String, String)> {
    let head = line.trim_end().strip_suffix('-')?;
    if !head.chars().last().is_some_and(char::is_alphabetic) || !next.chars().next().is_some_and(char::is_lowercase) {
        return None;
    }
    let (first, rest) = next.split_once(char::is_whitespace).unwrap_or((next, ""));
    let head_token = head.rsplit(char::is_whitespace).next().unwrap_or(head);
    let mut head_word: Vec<char> = head_token.chars().rev().take_while(|c| c.is_alphanumeric()).collect();
    head_word.reverse();
    let head_word: String = head_word.into_iter().collect::<String>().to_lowercase();
    let tail_word: String = first.chars().take_while(|c| c.is_alphanumeric()).collect::<String>().to_lowercase();
    let address = head_token.chars().any(|c| matches!(c, '@' | '.' | '/' | ':') || c.is_ascii_digit());
    let keep = address
        || compounds.contains(&format!("{head_word}-{tail_word}"))
        || (head_word.chars().count() >= 4
            && !seen.contains(&format!("{head_word}{tail_word}"))
            && seen.contains(&head_word));
    let joined = if keep { format!("{head}-{first}") } else { format!("{head}{first}") };
    Some((joined, rest.trim_start().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ligatures_are_written_as_their_letters_and_controls_dropped() {
        assert_eq!(
            keep_printable("A\u{fb00}aire \u{fb01}nanci\u{e8}re, o\u{fb03}ce, \u{fb02}ux\u{1b}[2J\n\tfin"),
            "Affaire financière, office, flux[2J\n\tfin"
        );
        assert_eq!(keep_printable("\u{fb04} \u{fb05} \u{fb06}"), "ffl st st");
        // Other compatibility characters are the document's: kept.
        assert_eq!(keep_printable("n° ½ ２"), "n° ½ ２");
    }

    #[test]
    fn a_latin1_text_is_detected_and_decoded() {
        let bytes = b"Le pr\xe9sident de l'association a d\xe9clar\xe9 que les fonds \xe9taient \xe0 l'\xe9tranger.";
        let p = plain(bytes, None);
        assert!(p.text.contains("président"), "{}", p.text);
        assert_eq!(p.encoding.as_deref(), Some("windows-1252"));
    }

    #[test]
    fn utf16_with_a_bom_is_decoded() {
        let mut bytes = vec![0xFF, 0xFE];
        for u in "Élodie".encode_utf16() {
            bytes.extend(u.to_le_bytes());
        }
        let p = plain(&bytes, None);
        assert_eq!(p.text, "Élodie");
        assert_eq!(p.encoding.as_deref(), Some("UTF-16LE"));
    }

    #[test]
    fn a_page_declared_in_latin1_is_read_in_latin1() {
        let page = b"<html><head><meta charset=\"iso-8859-1\"><title>Soci\xe9t\xe9 &amp; fils</title>\
            <script>var secret = 1;</script></head><body><p>Caf\xe9 cr\xe8me</p></body></html>";
        let p = html(page, None);
        assert_eq!(p.title.as_deref(), Some("Société & fils"));
        assert!(p.text.contains("Café crème"), "{}", p.text);
        assert!(!p.text.contains("secret"), "scripts are not text: {}", p.text);
        assert_eq!(p.encoding.as_deref(), Some("windows-1252"));
    }

    #[test]
    fn an_http_equiv_charset_is_honoured() {
        let page =
            b"<meta http-equiv='Content-Type' content='text/html; charset=koi8-r'><p>\xf0\xd2\xc9\xd7\xc5\xd4</p>";
        assert!(html(page, None).text.contains("Привет"));
    }

    /// SPEC C3: the charset of the HTTP answer comes before the page's own
    /// `<meta>` (the HTML standard's order), and a BOM before both.
    #[test]
    fn the_transport_charset_comes_before_the_page_declaration() {
        let page = b"<meta charset='utf-8'><p>\xf0\xd2\xc9\xd7\xc5\xd4</p>";
        let koi8 = Encoding::for_label(b"koi8-r");
        let p = html(page, koi8);
        assert!(p.text.contains("Привет"), "{}", p.text);
        assert_eq!(p.encoding.as_deref(), Some("KOI8-R"));
        let bom = b"\xEF\xBB\xBF<p>caf\xC3\xA9</p>";
        assert_eq!(html(bom, koi8).text, "café");
        let latin = plain(b"r\xe9sum\xe9", Encoding::for_label(b"latin1"));
        assert_eq!((latin.text.as_str(), latin.encoding.as_deref()), ("résumé", Some("windows-1252")));
    }

    #[test]
    fn a_typesetters_cut_is_joined_and_a_compound_keeps_its_hyphen() {
        let page = "le compte de Mme Kowal-\nczyk, ouvert en\nPologne ; voir ci-dessous et ci-\ndessous encore\nj.lemaitre@transports-\nlemaitre.fr écrit à Jean-\nPierre";
        let d = dehyphenate(page);
        assert!(d.contains("Kowalczyk,"), "{d}");
        assert_eq!(d.matches("ci-dessous").count(), 2, "{d}");
        assert!(d.contains("j.lemaitre@transports-lemaitre.fr"), "{d}");
        assert!(d.contains("Jean-\nPierre"), "an upper-case continuation is a name: {d}");
        assert_eq!(words(&d), words(page) - 1, "one cut word joined, the others kept: {d}");
    }

    #[test]
    fn the_first_half_seen_alone_keeps_the_hyphen() {
        let d = dehyphenate("quatre chats et quatre-\nvingts chiens\nune sé-\nance");
        assert!(d.contains("quatre-vingts\nchiens"), "{d}");
        assert!(d.contains("séance"), "{d}");
    }

    #[test]
    fn a_page_without_cuts_is_unchanged() {
        let page = "a line\n\nanother - with a dash -\nNext";
        assert_eq!(dehyphenate(page), page);
    }
}
