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

#[cfg(test)]
mod tests {
    use super::*;

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
