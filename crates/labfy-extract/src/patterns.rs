//! One function per extractor: a pattern finds candidates, then the rules of
//! its kind keep or drop each one (boundaries, checksums, known suffixes,
//! context). Each rule is named where it is applied.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

use crate::checks::{btc_address_is_valid, eth_checksummed, iban_is_valid, onion_is_valid};
use crate::{Found, Kind, MAX_VALUE_BYTES};

#[allow(clippy::expect_used)] // the patterns are constants, checked by every test
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("extractor pattern compiles")
}

static URL: LazyLock<Regex> = LazyLock::new(|| re(r#"(?i)\b(?:https?|ftp)://[^\s<>"'`{}|\\^\x00-\x1f\x7f]+"#));
static EMAIL: LazyLock<Regex> =
    LazyLock::new(|| re(r"[A-Za-z0-9._%+\-]+@(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?\.)+[\p{L}\p{N}\-]{2,63}"));
static DOMAIN: LazyLock<Regex> = LazyLock::new(|| re(r"[\p{L}\p{N}_\-]+(?:\.[\p{L}\p{N}_\-]+)+"));
static IPV4: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(?-u:\b)"));
static IPV6: LazyLock<Regex> = LazyLock::new(|| re(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*"));
static PHONE_INTL: LazyLock<Regex> = LazyLock::new(|| re(r"\+\d[\d \t\u{a0}().\-]{5,22}\d"));
static PHONE_FR: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)0[1-9](?:[ .\-]?\d{2}){4}(?-u:\b)"));
static IBAN: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u:\b)[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?-u:\b)"));
static BTC: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?-u:\b)(?:[13][1-9A-HJ-NP-Za-km-z]{25,34}|(?i:bc1)[02-9ac-hj-np-zAC-HJ-NP-Z]{6,87})(?-u:\b)")
});
static ETH: LazyLock<Regex> = LazyLock::new(|| re(r"(?-u:\b)0x[0-9a-fA-F]{40}(?-u:\b)"));
static ONION: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)(?-u:\b)[a-z2-7]{56}\.onion(?-u:\b)"));
static HASH: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?-u:\b)(?:[0-9a-fA-F]{64}|[0-9a-fA-F]{40}|[0-9a-fA-F]{32})(?-u:\b)"));

/// Top-level domains that are also common file extensions: `report.zip`,
/// `install.sh`, `main.py`, `README.md` are file names, not hosts. A URL's
/// host is a domain whatever its suffix; these only stop free-text matches.
const FILE_LIKE_TLDS: &[&str] = &["zip", "mov", "sh", "py", "rs", "md", "pm", "so", "cab", "pl"];

/// Special-use top-level domains (RFC 2606, RFC 6761) that are not in the
/// Public Suffix List but name hosts in documents: synthetic data (SPECIMEN
/// writes `.example`), test fixtures, lab networks.
const SPECIAL_USE_TLDS: &[&str] = &["example", "test"];

/// Words that, just before a dotted quad, make it a version number.
const VERSION_WORDS: &[&str] = &["v", "version", "ver", "build", "release", "firmware", "fw", "rev", "revision"];

fn prev_char(text: &str, at: usize) -> Option<char> {
    text[..at].chars().next_back()
}

fn next_char(text: &str, at: usize) -> Option<char> {
    text[at..].chars().next()
}

fn push(out: &mut BTreeSet<Found>, start: usize, end: usize, kind: Kind, value: String) {
    if value.len() <= MAX_VALUE_BYTES {
        out.insert(Found { start, end, kind, value, recogniser: kind.extractor(), confidence: 100 });
    }
}

/// A host name as the analyst pivots on it: ASCII (IDNA) lower-case form, no
/// trailing dot, a letter-only top-level label, a suffix the Public Suffix
/// List knows with at least one label registered under it (or a special-use
/// `.example` / `.test` name). `.onion` names are the onion extractor's.
pub(crate) fn normalise_domain(name: &str, free_text: bool) -> Option<String> {
    let name = name.trim_end_matches('.');
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() < 2 || name.contains('_') {
        return None;
    }
    if labels.iter().any(|l| l.is_empty() || l.starts_with('-') || l.ends_with('-')) {
        return None;
    }
    let tld = labels[labels.len() - 1];
    let tld_ok = tld.chars().all(char::is_alphabetic) || tld.to_ascii_lowercase().starts_with("xn--");
    if !tld_ok || tld.chars().count() < 2 {
        return None;
    }
    let ascii = match url::Host::parse(name) {
        Ok(url::Host::Domain(d)) => d,
        _ => return None,
    };
    if ascii.len() > 253 || ascii.split('.').any(|l| l.len() > 63) {
        return None;
    }
    // A host name's labels are letters, digits and inner hyphens (RFC 1123),
    // also after the IDNA mapping: `⑽.fr` maps to `(10).fr`, which the URL
    // standard lets through and no DNS name is (found by the fuzzer).
    if ascii
        .split('.')
        .any(|l| !l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') || l.starts_with('-') || l.ends_with('-'))
    {
        return None;
    }
    let top = ascii.rsplit('.').next().unwrap_or_default();
    if top == "onion" || (free_text && FILE_LIKE_TLDS.contains(&top)) {
        return None;
    }
    if SPECIAL_USE_TLDS.contains(&top) {
        return Some(ascii);
    }
    let suffix = psl::suffix(ascii.as_bytes())?;
    if !suffix.is_known() || suffix.as_bytes().len() >= ascii.len() {
        return None;
    }
    Some(ascii)
}

/// `http`, `https` and `ftp` URLs. Trailing punctuation that closes the
/// sentence (or an unbalanced bracket) is not part of the URL. The value is
/// the WHATWG serialisation without the fragment.
pub(crate) fn urls(text: &str, out: &mut BTreeSet<Found>) {
    for m in URL.find_iter(text) {
        let mut s = m.as_str();
        // A `]` that closes nothing opened in the URL ends it: Markdown's
        // reference links write `[https://site/][2]` (the walk's
        // « https://www.azur-transit.fr/][2 »); an IPv6 host's brackets pair.
        let mut depth = 0i32;
        if let Some(cut) = s.char_indices().find_map(|(i, c)| {
            depth += match c {
                '[' => 1,
                ']' => -1,
                _ => 0,
            };
            (depth < 0).then_some(i)
        }) {
            s = &s[..cut];
        }
        // The brackets are counted once and the closing count kept up to date
        // as they are trimmed: counting them again for each trimmed character
        // made a URL followed by n `)` cost n² (64 KiB of them: seconds).
        let count = |c: u8| s.bytes().filter(|&b| b == c).count();
        let (open_paren, mut close_paren) = (count(b'('), count(b')'));
        let (open_bracket, mut close_bracket) = (count(b'['), count(b']'));
        while let Some(last) = s.chars().next_back() {
            let unbalanced = match last {
                ')' => open_paren < close_paren,
                ']' => open_bracket < close_bracket,
                _ => false,
            };
            if matches!(last, '.' | ',' | ';' | ':' | '!' | '?' | '*' | '\'' | '"') || unbalanced {
                s = &s[..s.len() - last.len_utf8()];
                match last {
                    ')' => close_paren -= 1,
                    ']' => close_bracket -= 1,
                    _ => {}
                }
            } else {
                break;
            }
        }
        let Ok(mut url) = url::Url::parse(s) else { continue };
        if url.host().is_none() {
            continue;
        }
        url.set_fragment(None);
        push(out, m.start(), m.start() + s.len(), Kind::Url, url.into());
    }
}

/// E-mail addresses: a local part without leading, trailing or doubled dots,
/// and a domain [`normalise_domain`] accepts. Lower-case.
pub(crate) fn emails(text: &str, out: &mut BTreeSet<Found>) {
    for m in EMAIL.find_iter(text) {
        let s = m.as_str();
        let Some((local, domain)) = s.split_once('@') else { continue };
        if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
            continue;
        }
        // `ÉLODIE@…` is not `LODIE@…`: an address glued to a word is none.
        if prev_char(text, m.start()).is_some_and(char::is_alphanumeric)
            || next_char(text, m.end()).is_some_and(|c| c.is_alphanumeric() || c == '@')
        {
            continue;
        }
        // A message's identifier has an address's shape but names a
        // message, not a mailbox (the walk took one for an e-mail).
        if on_message_id_line(text, m.start()) {
            continue;
        }
        let Some(domain) = normalise_domain(domain, false) else { continue };
        push(out, m.start(), m.end(), Kind::Email, format!("{}@{domain}", local.to_ascii_lowercase()));
    }
}

/// Whether the line holding byte `at` is a header that names messages
/// (`Message-ID:`, `In-Reply-To:`, `References:`, any case), the way
/// mail readers write them.
fn on_message_id_line(text: &str, at: usize) -> bool {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..at].trim_start();
    ["message-id:", "in-reply-to:", "references:", "resent-message-id:"]
        .iter()
        .any(|h| line.len() >= h.len() && line.is_char_boundary(h.len()) && line[..h.len()].eq_ignore_ascii_case(h))
}

/// Domains in free text. A dotted word just before `@` is an address's local
/// part (`jean.dupont@…`), not a host; file names are not domains.
pub(crate) fn domains(text: &str, out: &mut BTreeSet<Found>) {
    for m in DOMAIN.find_iter(text) {
        let mut s = m.as_str();
        if next_char(text, m.end()) == Some('@') {
            continue;
        }
        // Sentence-ending and leading hyphens belong to the prose.
        s = s.trim_end_matches(['-', '.']);
        let lead = s.len() - s.trim_start_matches('-').len();
        let s = &s[lead..];
        let start = m.start() + lead;
        if let Some(domain) = normalise_domain(s, true) {
            push(out, start, start + s.len(), Kind::Domain, domain);
        }
    }
}

/// Dotted quads with octets 0–255 and no leading zeros, not part of a longer
/// dotted number and not after a version word (`version 1.2.3.4`).
pub(crate) fn ipv4(text: &str, out: &mut BTreeSet<Found>) {
    for m in IPV4.find_iter(text) {
        let before = &text[..m.start()];
        if before.ends_with('.') && prev_char(before, before.len() - 1).is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        let after = &text[m.end()..];
        if after.starts_with('.') && after[1..].starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let word: String = before
            .trim_end_matches([' ', ':', '\t'])
            .chars()
            .rev()
            .take_while(|c| c.is_alphabetic())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<String>()
            .to_lowercase();
        if VERSION_WORDS.contains(&word.as_str()) {
            continue;
        }
        let s = m.as_str();
        if s.split('.').any(|o| o.len() > 1 && o.starts_with('0')) {
            continue;
        }
        if let Ok(addr) = s.parse::<Ipv4Addr>() {
            push(out, m.start(), m.end(), Kind::Ipv4, addr.to_string());
        }
    }
}

/// IPv6 addresses (the unspecified `::` aside), not glued to a word; a colon
/// or dot that ends the sentence is dropped. RFC 5952 form.
pub(crate) fn ipv6(text: &str, out: &mut BTreeSet<Found>) {
    for m in IPV6.find_iter(text) {
        if prev_char(text, m.start()).is_some_and(|c| c.is_alphanumeric() || c == '_')
            || next_char(text, m.end()).is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let mut s = m.as_str();
        let mut addr = s.parse::<Ipv6Addr>();
        while addr.is_err() && (s.ends_with('.') || (s.ends_with(':') && !s.ends_with("::"))) {
            s = &s[..s.len() - 1];
            addr = s.parse::<Ipv6Addr>();
        }
        if let Ok(addr) = addr
            && !addr.is_unspecified()
        {
            push(out, m.start(), m.start() + s.len(), Kind::Ipv6, addr.to_string());
        }
    }
}

/// Telephone numbers: international (`+`, 8–15 digits, spaces, dots, dashes
/// and brackets between; a trunk `(0)` dropped) and the French national
/// ten-digit form (`06 12 34 56 78` → `+33612345678`), the analysts' own.
pub(crate) fn phones(text: &str, out: &mut BTreeSet<Found>) {
    for m in PHONE_INTL.find_iter(text) {
        if prev_char(text, m.start()).is_some_and(|c| c.is_alphanumeric() || c == '+')
            || next_char(text, m.end()).is_some_and(|c| c.is_ascii_digit())
        {
            continue;
        }
        let digits: String = m.as_str().replace("(0)", "").chars().filter(char::is_ascii_digit).collect();
        if (8..=15).contains(&digits.len()) {
            push(out, m.start(), m.end(), Kind::Phone, format!("+{digits}"));
        }
    }
    for m in PHONE_FR.find_iter(text) {
        if prev_char(text, m.start()).is_some_and(|c| c == '+' || c == ')' || c == '.' || c == '-') {
            continue;
        }
        let digits: String = m.as_str().chars().filter(char::is_ascii_digit).collect();
        push(out, m.start(), m.end(), Kind::Phone, format!("+33{}", &digits[1..]));
    }
}

/// IBANs, compact or in groups of four, whose country length and check
/// digits hold; a following upper-case word is not taken as a last group.
pub(crate) fn ibans(text: &str, out: &mut BTreeSet<Found>) {
    for m in IBAN.find_iter(text) {
        let s = m.as_str();
        // Try the longest prefix ending at a group boundary first.
        let mut ends: Vec<usize> = s.match_indices(' ').map(|(i, _)| i).collect();
        ends.push(s.len());
        for &end in ends.iter().rev() {
            let candidate: String = s[..end].chars().filter(|c| *c != ' ').collect();
            if candidate.len() < 15 {
                break;
            }
            if iban_is_valid(&candidate) {
                push(out, m.start(), m.start() + end, Kind::Iban, candidate);
                break;
            }
        }
    }
}

/// Bitcoin addresses whose checksum holds; bech32 ones lower-case.
pub(crate) fn btc(text: &str, out: &mut BTreeSet<Found>) {
    for m in BTC.find_iter(text) {
        let s = m.as_str();
        if btc_address_is_valid(s) {
            let value = if s[..3].eq_ignore_ascii_case("bc1") { s.to_ascii_lowercase() } else { s.to_owned() };
            push(out, m.start(), m.end(), Kind::BtcAddress, value);
        }
    }
}

/// Ethereum addresses (EIP-55 checked when mixed-case), lower-case.
pub(crate) fn eth(text: &str, out: &mut BTreeSet<Found>) {
    for m in ETH.find_iter(text) {
        if let Some(value) = eth_checksummed(m.as_str()) {
            push(out, m.start(), m.end(), Kind::EthAddress, value);
        }
    }
}

/// v3 onion addresses whose checksum holds, lower-case (`….onion`).
pub(crate) fn onions(text: &str, out: &mut BTreeSet<Found>) {
    for m in ONION.find_iter(text) {
        let s = m.as_str();
        if onion_is_valid(&s[..56]) {
            push(out, m.start(), m.end(), Kind::Onion, s.to_ascii_lowercase());
        }
    }
}

/// MD5, SHA-1 and SHA-256 digests: a whole hex word of 32, 40 or 64 digits
/// with at least one letter and one digit (a run of one kind is a number or
/// a word, not a digest). Lower-case.
pub(crate) fn hashes(text: &str, out: &mut BTreeSet<Found>) {
    for m in HASH.find_iter(text) {
        let s = m.as_str();
        if s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic()) {
            push(out, m.start(), m.end(), Kind::FileHash, s.to_ascii_lowercase());
        }
    }
}
