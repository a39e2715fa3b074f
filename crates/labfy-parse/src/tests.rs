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
