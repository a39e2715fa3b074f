//! The parent's check of a parser worker's reply (SPEC C2;
//! `labfy_parse::Reply::check`): the worker has read a hostile file and may
//! answer anything. The check never panics; a reply it accepts keeps every
//! bound (text size, children no larger than the input, names and title
//! without control characters, a media type of the form type/subtype), and
//! is accepted again, unchanged, once written back out.
//! Input: the first 4 bytes are the input length the parent claims, the rest
//! the reply.
#![no_main]

use labfy_parse::{MAX_CHILDREN, MAX_TEXT_BYTES, Reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let input_len = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let Ok(reply) = Reply::check(&data[4..], input_len) else { return };
    if let Reply::Parsed(p) = &reply {
        assert!(p.text.len() <= MAX_TEXT_BYTES);
        assert!(p.children.len() <= MAX_CHILDREN);
        assert!(p.children.iter().map(|c| c.bytes.len()).sum::<usize>() <= input_len);
        assert!(p.children.iter().all(|c| !c.name.chars().any(char::is_control)));
        assert!(p.title.as_deref().is_none_or(|t| !t.chars().any(char::is_control)));
        let (t, sub) = p.mime.split_once('/').expect("type/subtype");
        assert!(!t.is_empty() && !sub.is_empty() && !sub.contains('/'), "{}", p.mime);
    }
    let again = serde_json::to_vec(&reply).expect("a checked reply serialises");
    assert_eq!(Reply::check(&again, input_len).expect("accepted again"), reply);
});
