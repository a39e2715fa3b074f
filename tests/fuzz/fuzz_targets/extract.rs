//! The extractor set (SPEC C4; `labfy_extract::extract`) reads whatever
//! evidence holds: it never panics; the same text gives the same mentions;
//! every mention lies inside the text, in order, at most `MAX_MENTIONS` of
//! them; a value is non-empty, bounded, and — for the kinds whose value is
//! itself a selector as written — found again, unchanged, in itself; the
//! checksum-bearing kinds pass their own checksum.
//! Input: any bytes, read as UTF-8 with invalid sequences replaced.
#![no_main]

use std::collections::BTreeSet;

use labfy_extract::{
    Kind, MAX_MENTIONS, MAX_VALUE_BYTES, btc_address_is_valid, eth_address_is_valid, extract, iban_is_valid,
    onion_is_valid,
};
use libfuzzer_sys::fuzz_target;

/// The kinds whose value, alone in a text, is extracted again as itself.
///
/// Not `Url`: the value is the URL without its fragment, so a URL written
/// `http://a.fr/x.#haut` (or `…/x?#haut`, `…/x)#haut`) has the value
/// `http://a.fr/x.`, whose last character, in prose, ends the sentence and is
/// trimmed. Both readings are right; the value is no fixed point.
/// The other kinds' values are normal forms (a phone in E.164, an IBAN
/// without its spaces), not text as written; the checksum-bearing ones are
/// validated again below instead.
const FIXED_POINT: &[Kind] =
    &[Kind::Domain, Kind::Email, Kind::Ipv4, Kind::Ipv6, Kind::Onion, Kind::FileHash, Kind::EthAddress];

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let ex = extract(&text);
    assert_eq!(ex, extract(&text), "not deterministic");

    let chars = text.chars().count();
    assert!(ex.mentions.len() <= MAX_MENTIONS, "{} mentions kept", ex.mentions.len());
    assert!(ex.dropped == 0 || ex.mentions.len() == MAX_MENTIONS, "dropped {} below the bound", ex.dropped);
    let mut last_start = 0;
    let mut checked = BTreeSet::new();
    for m in &ex.mentions {
        assert!(m.len > 0, "an empty mention: {m:?}");
        assert!(m.start + m.len <= chars, "{m:?} past the end of a text of {chars} characters");
        assert!(m.start >= last_start, "{m:?} out of order");
        last_start = m.start;
        assert!(!m.value.is_empty(), "an empty value: {m:?}");
        assert!(m.value.len() <= MAX_VALUE_BYTES, "a value of {} bytes", m.value.len());

        match m.kind {
            Kind::Iban => assert!(iban_is_valid(&m.value), "{m:?} fails its checksum"),
            Kind::BtcAddress => assert!(btc_address_is_valid(&m.value), "{m:?} fails its checksum"),
            Kind::EthAddress => assert!(eth_address_is_valid(&m.value), "{m:?} fails its checksum"),
            Kind::Onion => {
                assert!(m.value.len() == 62 && m.value.ends_with(".onion"), "{m:?} is no v3 onion name");
                assert!(onion_is_valid(&m.value[..56]), "{m:?} fails its checksum");
            }
            _ => {}
        }

        // Each distinct value once: a text of repeated selectors costs one
        // re-extraction per value, not per mention.
        if FIXED_POINT.contains(&m.kind) && checked.insert((m.kind, m.value.as_str())) {
            let alone = format!(" {} ", m.value);
            let again = extract(&alone);
            assert!(
                again.mentions.iter().any(|n| n.kind == m.kind && n.value == m.value),
                "{:?} {:?}, alone, is not found again as itself: {:?}",
                m.kind,
                m.value,
                again.mentions
            );
        }
    }
});
