#![doc = include_str!("../README.md")]

mod checks;
mod names;
mod patterns;
mod structure;

use std::collections::BTreeSet;

use serde::Serialize;

pub use checks::{btc_address_is_valid, eth_address_is_valid, iban_is_valid, onion_is_valid};
pub use names::is_legal_form;
pub use structure::{Addressed, Role, Signed, message_origin, message_roles, signatures};

/// Version of the extractor set. A stored mention names it; evidence scanned by
/// an older version is scanned again when the version changes (SPEC C4). Bump
/// it whenever a change can add, drop or move a mention.
pub const VERSION: u32 = 4;

/// Name of the extractor set in provenance records (`labfy-extract/1`).
pub const PRODUCER: &str = "labfy-extract";

/// Most mentions kept from one text; the rest are counted, not stored.
pub const MAX_MENTIONS: usize = 10_000;

/// Longest value kept (URLs above it are dropped, with a count).
pub const MAX_VALUE_BYTES: usize = 2048;

/// What a mention is: the kinds of selector an analyst pivots on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A host name under a known public suffix, in ASCII (IDNA) form.
    Domain,
    /// An `http`, `https` or `ftp` URL, WHATWG-normalised, without fragment.
    Url,
    /// An e-mail address, lower-case, its domain in ASCII form.
    Email,
    /// A dotted-quad IPv4 address.
    Ipv4,
    /// An IPv6 address in its RFC 5952 form.
    Ipv6,
    /// A telephone number in E.164 form (`+` and digits).
    Phone,
    /// An IBAN whose ISO 7064 checksum holds, without spaces.
    Iban,
    /// A Bitcoin address whose checksum holds (base58check or bech32/bech32m).
    BtcAddress,
    /// An Ethereum address in its EIP-55 checksum case (checked when
    /// written mixed-case; computed when written in one case).
    EthAddress,
    /// A v3 onion service address whose checksum holds, lower-case.
    Onion,
    /// An MD5, SHA-1 or SHA-256 digest in lower-case hex (its length says which).
    FileHash,
    /// A person, by an honorific, a known given name or an e-mail display
    /// name (SPEC A2); the name as written.
    Person,
    /// A company or body, by its legal form or a word that announces it
    /// (SPEC A2); the name as written, legal form included.
    Organisation,
}

impl Kind {
    /// Every kind, in a stable order.
    pub const ALL: [Kind; 13] = [
        Kind::Domain,
        Kind::Url,
        Kind::Email,
        Kind::Ipv4,
        Kind::Ipv6,
        Kind::Phone,
        Kind::Iban,
        Kind::BtcAddress,
        Kind::EthAddress,
        Kind::Onion,
        Kind::FileHash,
        Kind::Person,
        Kind::Organisation,
    ];

    /// The stored spelling (an entity kind).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Domain => "domain",
            Kind::Url => "url",
            Kind::Email => "email",
            Kind::Ipv4 => "ipv4",
            Kind::Ipv6 => "ipv6",
            Kind::Phone => "phone",
            Kind::Iban => "iban",
            Kind::BtcAddress => "btc_address",
            Kind::EthAddress => "eth_address",
            Kind::Onion => "onion",
            Kind::FileHash => "file_hash",
            Kind::Person => "person",
            Kind::Organisation => "organisation",
        }
    }

    /// Whether the kind is a selector (a value with one written form an
    /// analyst pivots on), not a name (a person, an organisation).
    pub fn is_selector(self) -> bool {
        !matches!(self, Kind::Person | Kind::Organisation)
    }

    /// The kind a stored spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The extractor that finds this kind, as named in provenance.
    pub fn extractor(self) -> &'static str {
        self.as_str()
    }
}

/// One selector found in a text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mention {
    /// What it is.
    pub kind: Kind,
    /// The normalised value: the name of the entity it points at.
    pub value: String,
    /// First character of the mention in the text (Unicode scalar values, as
    /// the store's excerpts count).
    pub start: usize,
    /// Length of the mention in characters, as written in the text.
    pub len: usize,
    /// The rule that found it (`iban`, `person/given_name`,
    /// `organisation/legal_form`…), stored as the mention's extractor.
    pub recogniser: &'static str,
    /// How sure that rule is, in per cent (100 for a selector whose form or
    /// checksum holds).
    pub confidence: u8,
}

/// What one text yielded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Extraction {
    /// Mentions by position, then kind, then value; at most [`MAX_MENTIONS`].
    pub mentions: Vec<Mention>,
    /// Mentions found beyond [`MAX_MENTIONS`] and not kept.
    pub dropped: usize,
}

/// A mention before offsets are counted in characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
    pub(crate) value: String,
    pub(crate) recogniser: &'static str,
    pub(crate) confidence: u8,
}

/// Runs every extractor over `text`.
///
/// Deterministic: the same text and [`VERSION`] give the same mentions in the
/// same order. Linear in the text (the patterns are finite automata, the
/// checks bounded per candidate).
pub fn extract(text: &str) -> Extraction {
    let mut found = BTreeSet::new();
    patterns::urls(text, &mut found);
    patterns::emails(text, &mut found);
    patterns::domains(text, &mut found);
    patterns::ipv4(text, &mut found);
    patterns::ipv6(text, &mut found);
    patterns::phones(text, &mut found);
    patterns::ibans(text, &mut found);
    patterns::btc(text, &mut found);
    patterns::eth(text, &mut found);
    patterns::onions(text, &mut found);
    patterns::hashes(text, &mut found);
    names::organisations(text, &mut found);
    names::headed(text, &mut found);
    names::people(text, &mut found);
    names::settle(&mut found);

    let dropped = found.len().saturating_sub(MAX_MENTIONS);
    let mut mentions = Vec::with_capacity(found.len().min(MAX_MENTIONS));
    // One walk over the text turns byte offsets into character offsets.
    let mut byte = 0;
    let mut chars = 0;
    for f in found.into_iter().take(MAX_MENTIONS) {
        chars += text[byte..f.start].chars().count();
        byte = f.start;
        let len = text[f.start..f.end].chars().count();
        mentions.push(Mention {
            kind: f.kind,
            value: f.value,
            start: chars,
            len,
            recogniser: f.recogniser,
            confidence: f.confidence,
        });
    }
    Extraction { mentions, dropped }
}

/// Longest query read as a selector, in bytes (an URL at most).
pub const MAX_SELECTOR_QUERY_BYTES: usize = MAX_VALUE_BYTES;

/// The selector a search query is (SPEC A5), in whatever form it was
/// written — an IBAN in groups of four or compact, a phone number in
/// national or international form, an e-mail in capitals, a domain with or
/// without `www.` — as the extractors normalise it: the one mention that
/// spans the whole query. A query that is anything else (a name, two
/// selectors, a selector with words around it) is none.
pub fn selector(query: &str) -> Option<Selector> {
    let q = query.trim();
    if q.is_empty() || q.len() > MAX_SELECTOR_QUERY_BYTES {
        return None;
    }
    let whole = q.chars().count();
    let spanning = |text: &str| extract(text).mentions.into_iter().find(|m| m.start == 0 && m.len == whole);
    // An IBAN typed in lower case is still that IBAN (texts write it in
    // capitals; the extractor reads capitals only).
    let found = spanning(q)
        .or_else(|| spanning(&q.to_ascii_uppercase()).filter(|m| m.kind == Kind::Iban))
        .filter(|m| m.kind.is_selector())?;
    let mut values = vec![found.value.clone()];
    if found.kind == Kind::Domain {
        // `www.example.org` and `example.org` are one site to an analyst.
        match found.value.strip_prefix("www.") {
            Some(bare) if bare.contains('.') => values.push(bare.to_owned()),
            Some(_) => {}
            None => values.push(format!("www.{}", found.value)),
        }
    }
    Some(Selector { kind: found.kind, value: found.value, values })
}

/// A search query read as a selector ([`selector`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Selector {
    /// Its kind.
    pub kind: Kind,
    /// Its normalised value.
    pub value: String,
    /// Every normalised value that names the same thing (the value first;
    /// a domain with and without `www.`).
    #[serde(skip)]
    pub values: Vec<String>,
}

#[cfg(test)]
mod tests;
