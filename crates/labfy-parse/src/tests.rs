//! Checks of the whole: detection to parser, and the parent's check of a
//! reply.

use super::*;

#[test]
fn parse_never_fails_and_keeps_bounds() {
    let p = parse(b"%PDF-1.4 truncated", "x.pdf");
    assert_eq!(p.format, Format::Binary);
    assert_eq!(p.mime, "application/pdf");
    assert!(p.notes[0].starts_with("text not extracted: PDF"), "{:?}", p.notes);
    let p = parse(b"", "empty.txt");
    assert_eq!(p.format, Format::Text);
    assert_eq!(p.text, "");
}

#[test]
fn text_longer_than_the_bound_is_cut_at_a_character() {
    let text = "é".repeat(MAX_TEXT_BYTES / 2 + 10);
    let p = parse(text.as_bytes(), "long.txt");
    assert!(p.text.len() <= MAX_TEXT_BYTES);
    assert!(p.notes.iter().any(|n| n.starts_with("text cut")), "{:?}", p.notes);
}

#[test]
fn a_reply_is_checked_again_by_the_parent() {
    let good = Reply::Parsed(parse(b"hello", "a.txt"));
    let json = serde_json::to_vec(&good).expect("json");
    assert_eq!(Reply::check(&json, 5).expect("good"), good);

    let mut p = parse(b"hello", "a.txt");
    p.children.push(Child { name: "x".into(), bytes: vec![0; 10] });
    let json = serde_json::to_vec(&Reply::Parsed(p)).expect("json");
    assert!(Reply::check(&json, 5).unwrap_err().0.contains("children of 10 bytes"));

    let mut p = parse(b"hello", "a.txt");
    p.title = Some("evil\u{1b}[2J".into());
    let json = serde_json::to_vec(&Reply::Parsed(p)).expect("json");
    assert!(Reply::check(&json, 5).unwrap_err().0.contains("control"));

    let mut p = parse(b"hello", "a.txt");
    p.mime = "text/html\r\nX-Evil: 1".into();
    let json = serde_json::to_vec(&Reply::Parsed(p)).expect("json");
    assert!(Reply::check(&json, 5).is_err());

    assert!(Reply::check(b"{\"parsed\":{}}", 5).is_err());
    assert!(Reply::check(b"not json", 5).is_err());
}

/// SPEC C3: the charset of a fetched page's `Content-Type` is found, made
/// canonical (safe on a worker's command line) and honoured.
#[test]
fn a_content_type_charset_is_found_and_honoured() {
    assert_eq!(charset_of("text/html; charset=ISO-8859-1"), Some("windows-1252"));
    assert_eq!(charset_of("text/plain;CHARSET=\"koi8-r\""), Some("KOI8-R"));
    assert_eq!(charset_of("text/html; boundary=x; charset='utf-8'"), Some("UTF-8"));
    assert_eq!(charset_of("text/html"), None);
    assert_eq!(charset_of("text/html; charset=x-no-such\0thing"), None);
    assert_eq!(charset_of("charset=utf-8"), None, "a parameter comes after the type");
    let page = b"<html><body><p>Soci\xe9t\xe9 G\xe9n\xe9rale</p></body></html>";
    let p = parse_declared(page, "page.html", charset_of("text/html; charset=iso-8859-1"));
    assert!(p.text.contains("Société Générale"), "{}", p.text);
    assert_eq!(p.encoding.as_deref(), Some("windows-1252"));
    // An unknown label is ignored, not an error.
    let p = parse_declared(b"plain words", "a.txt", Some("no-such-charset"));
    assert_eq!(p.text, "plain words");
}
