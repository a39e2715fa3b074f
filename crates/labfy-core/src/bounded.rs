//! Bounded text: every diagnostic and excerpt that leaves a crate is cut to a
//! named bound, on a `char` boundary, with a visible marker when cut.

/// Marker appended when text was cut.
pub const ELLIPSIS: char = '…';

/// Returns `text` cut to at most `max_chars` characters. When it had to be cut,
/// the last kept character is replaced by [`ELLIPSIS`] so the reader sees it.
pub fn truncate_chars(text: &str, max_chars: usize) -> String {
    if max_chars == 0 {
        return String::new();
    }
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some(_) => {
            let mut out: String = text.chars().take(max_chars - 1).collect();
            out.push(ELLIPSIS);
            out
        }
    }
}

/// Byte offset of the `n`th character of `text` (or `text.len()` past the end).
pub fn char_offset(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Whether `c` is a Unicode *format* character (General Category Cf): the
/// bidirectional controls (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
/// U+061C), zero-width characters and joiners, the byte order mark, tags
/// and the like. They draw nothing themselves but change how the text
/// around them reads — a right-to-left override makes a line say what its
/// bytes do not — so text of untrusted origin shown to a person (a terminal
/// line, a page) drops or replaces them.
pub fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_characters_are_told_from_visible_ones() {
        for c in ['\u{202E}', '\u{2066}', '\u{200B}', '\u{200D}', '\u{FEFF}', '\u{061C}', '\u{E0041}', '\u{00AD}'] {
            assert!(is_invisible_format(c), "{:04X}", c as u32);
        }
        for c in ['a', 'é', ' ', '\u{00A0}', '→', '中', '\n', '\u{2028}'] {
            assert!(!is_invisible_format(c), "{:04X}", c as u32);
        }
    }

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(truncate_chars("abc", 3), "abc");
        assert_eq!(truncate_chars("", 3), "");
    }

    #[test]
    fn long_text_is_cut_with_a_marker_on_a_char_boundary() {
        assert_eq!(truncate_chars("abcd", 3), "ab…");
        assert_eq!(truncate_chars("ééééé", 2), "é…");
        assert_eq!(truncate_chars("abcd", 3).chars().count(), 3);
        assert_eq!(truncate_chars("abcd", 0), "");
    }

    #[test]
    fn char_offset_counts_characters_not_bytes() {
        assert_eq!(char_offset("héllo", 2), 3);
        assert_eq!(char_offset("hé", 9), 3);
    }
}
